"""The benchmark's pieces: workloads, HumanEval tasks, the stateless baselines, the /infill client,
the command line, and the default run end to end."""

from __future__ import annotations

import http.server
import json
import random
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from lsprotocol import types

from lsp_complete import bench
from lsp_complete.bench import humaneval, machine, stats, variants, workload
from lsp_complete.bench.ab import measures, scenarios
from lsp_complete.bench.baselines import generate_reuse, psm_windows
from lsp_complete.bench.llama_server import (
    LlamaServerClient,
    infill_request,
    suggestion_from_content,
)
from lsp_complete.bench.records import Completion
from lsp_complete.testing.lsp_client import position_at, suggestion_from_answer

SOURCE = "\n".join(
    ["import os", "", ""]
    + [
        f"def function_{i}(value):\n    total = value * {i} + len(os.sep)\n    return total\n"
        for i in range(20)
    ]
)


@pytest.fixture()
def source_file(tmp_path: Path) -> Path:
    path = tmp_path / "sample.py"
    path.write_text(SOURCE)
    return path


# --- workload ----------------------------------------------------------------------------------


def test_episodes_are_deterministic_and_retype_the_original(source_file: Path) -> None:
    first = workload.build_episodes([str(source_file)], n_spans=3, n_lines=2, seed=7)
    again = workload.build_episodes([str(source_file)], n_spans=3, n_lines=2, seed=7)
    assert first == again
    assert len(first) == 3
    for ep in first:
        assert ep.text_after(0) == ep.initial_text
        assert ep.text_after(ep.keystrokes[-1].typed) == SOURCE
        assert "".join(k.text for k in ep.keystrokes) == ep.typed
        for key in ep.keystrokes:
            text = ep.text_after(key.typed)
            assert key.offset == ep.start_offset + key.typed
            line_start = text.rfind("\n", 0, key.offset) + 1
            assert text[line_start : key.offset] == key.typed_prefix
            assert SOURCE.split("\n")[text.count("\n", 0, key.offset)] == key.full_line


def test_enter_is_one_key_with_the_indentation_the_editor_keeps(tmp_path: Path) -> None:
    """Editors indent on Enter: the line break and what the line's and the next line's
    indentation share are one key; any further indentation is typed."""
    path = tmp_path / "nest.py"
    lines = ["def f(values):", "    for v in values:", "        if v:", "            yield v",
             "    return None", ""]
    path.write_text("\n".join(lines))
    ep = workload.make_episode(workload.read_source(str(path)), 1, 4)
    enters = [k.text for k in ep.keystrokes if k.text[0] == "\n"]
    assert enters == ["\n    ", "\n        ", "\n    "]  # kept; further typed; dedented
    spaces = sum(1 for k in ep.keystrokes if k.text == " ")
    assert spaces == 3 + 1 + 1 + 1 + 4 + 4  # in the lines' words, and the two further indents
    assert ep.text_after(ep.keystrokes[-1].typed) == path.read_text()
    after_enter = ep.keystrokes[[k.text for k in ep.keystrokes].index("\n    ")]
    assert (after_enter.typed_prefix, after_enter.full_line) == ("    ", "        if v:")


def test_keystroke_cap_is_split_over_episodes(source_file: Path) -> None:
    episodes = workload.build_episodes([str(source_file)], n_spans=2, n_lines=2, seed=1,
                                       max_keystrokes=20)  # fmt: skip
    assert all(len(ep.keystrokes) <= 10 for ep in episodes)


def _short_and_long_lines(folder: Path) -> str:
    path = folder / "halves.py"
    path.write_text("\n".join(f"go_{i:03d}()" if i % 2 else
                              f"longer_name_{i:03d} = compute(left, right)" for i in range(400)))
    return str(path)


def test_a_keystroke_cap_does_not_choose_the_short_lines(tmp_path: Path) -> None:
    # Half the lines 8 characters long: a cap of 9 keys a span once drew only those.
    episodes = workload.build_episodes([_short_and_long_lines(tmp_path)], n_spans=8,
                                       n_lines=1, seed=5, max_keystrokes=72)
    assert all(len(ep.keystrokes) <= 9 for ep in episodes)
    assert any(ep.typed.startswith("longer") for ep in episodes)
    assert any(ep.typed.startswith("go_") for ep in episodes)


def test_a_keystroke_cap_types_the_spans_drawn_without_one(tmp_path: Path) -> None:
    path = _short_and_long_lines(tmp_path)

    def spans(cap: int | None) -> list[str]:
        episodes = workload.build_episodes([path], n_spans=3, n_lines=(1, 3), seed=4,
                                           max_keystrokes=cap)
        return [ep.name for ep in episodes]

    assert spans(108) == spans(None)


def test_tab_indented_code_is_typed_too() -> None:
    # Go indents with tabs: its function bodies were never a span.
    body = ["\tvalue := compute(left, right)", "\tif value > limit {",
            "\t\treturn fmt.Errorf(\"too big: %d\", value)", "\t}"]
    text = "\n".join(["package shop", ""] + ["func f() error {", *body, "}", ""] * 12)
    starts = workload.choose_spans(text, n_spans=4, n_lines=1, rng=random.Random(0))
    lines = text.split("\n")
    assert any(lines[start].startswith("\t") for start in starts)


def test_spans_skip_comments_and_do_not_overlap() -> None:
    text = "\n".join(["# comment line here"] * 30 + ["value = compute(1, 2)"] * 30)
    starts = workload.choose_spans(text, n_spans=4, n_lines=2, rng=random.Random(0))
    lines = text.split("\n")
    assert all(not lines[s].startswith("#") for s in starts)
    assert all(b - a > 3 for a, b in zip(starts, starts[1:], strict=False))


def test_default_files_are_deterministic() -> None:
    assert workload.default_files(1, seed=3) == workload.default_files(1, seed=3)
    assert workload.default_files(1, seed=3)[0].endswith(".py")


def test_open_case_cuts_a_middle_line(source_file: Path) -> None:
    case = workload.make_open_case(str(source_file))
    original = case.text[: case.offset] + case.next_char
    assert SOURCE.startswith(original)
    assert case.line in SOURCE.split("\n") and case.line.startswith(case.typed)


@pytest.mark.parametrize("blank", ["", "    "])
def test_open_case_on_a_blank_middle_line_keeps_the_cursor_on_it(
        tmp_path: Path, blank: str) -> None:
    """No line from the middle on qualifies: the middle line, blank, is taken, the cursor at
    its end (not past it, in the next line)."""
    text = "".join(f"x{i} = compute({i}, 2)\n" for i in range(20)) + f"{blank}\n" * 20
    path = tmp_path / "blank.py"
    path.write_text(text)
    case = workload.make_open_case(str(path))
    assert case.line == blank and case.text == text
    assert case.text.count("\n", 0, case.offset) == 20 and case.typed == blank


@pytest.mark.parametrize(
    ("prefix", "suggestion", "line", "expected"),
    [
        ("    ret", "urn total", "    return total", True),
        ("    ret", "urn total   \nmore", "    return total", True),
        ("    ret", "urn", "    return total", False),
        ("    return total", "", "    return total  ", True),
        ("    ret", "urn total + 1", "    return total", False),
    ],
)
def test_line_exact(prefix: str, suggestion: str, line: str, expected: bool) -> None:
    assert workload.line_exact(prefix, suggestion, line) is expected


# --- windows and prompt reuse ------------------------------------------------------------------


def test_psm_windows_cut_whole_lines_around_the_cursor() -> None:
    text = "\n".join(f"line{i}" for i in range(200))
    offset = text.index("line100") + 4
    prefix, suffix = psm_windows(text, offset)  # 60 lines before, 20 after
    assert prefix.startswith("line40\n") and prefix.endswith("line99\nline")
    assert suffix.startswith("100\nline101") and suffix.endswith("line120")


def test_generate_reuse_mirrors_llama_generate() -> None:
    assert generate_reuse([1, 2, 3], [1, 2, 4, 5], requires_eval=False) == 2
    assert generate_reuse([1, 2, 3], [1, 2, 3], requires_eval=False) == 3  # exact hit
    assert generate_reuse([1, 2, 3], [1, 2, 3], requires_eval=True) == 2  # refresh logits
    assert generate_reuse([1, 2, 3, 4], [1, 2], requires_eval=False) == 1
    assert generate_reuse([], [1, 2], requires_eval=True) == 0


def test_lsp_answer_with_range_strips_the_typed_word() -> None:
    item = types.InlineCompletionItem(
        insert_text="return total",
        range=types.Range(start=types.Position(4, 4), end=types.Position(4, 7)),
    )
    answer = types.InlineCompletionList(items=[item])
    assert suggestion_from_answer(answer, "    ret") == "urn total"
    assert suggestion_from_answer(types.InlineCompletionList(items=[]), "x") == ""
    assert suggestion_from_answer([types.InlineCompletionItem(insert_text="abc")], "x") == "abc"


def test_positions_are_utf16() -> None:
    text = "a😀b\ncd"
    assert position_at(text, 3) == types.Position(line=0, character=4)
    assert position_at(text, 5) == types.Position(line=1, character=1)


# --- statistics --------------------------------------------------------------------------------


def test_percentile() -> None:
    assert stats.percentile([1, 2, 3, 4], 50) == 2.5
    assert stats.percentile([], 50) is None


# --- HumanEval ---------------------------------------------------------------------------------


def test_humaneval_tasks_reassemble_the_canonical_solution() -> None:
    for problem in humaneval.load_problems(3):
        tasks = humaneval.tasks_for_problem(problem)
        assert len(tasks) == sum(1 for line in problem["canonical_solution"].split("\n")
                                 if line.strip())  # fmt: skip
        for task in tasks:
            line = problem["canonical_solution"].split("\n")[task.line_index]
            assert task.prefix.endswith("\n" + line[: len(line) - len(line.lstrip())])
            rebuilt = task.prefix + task.target + task.suffix
            assert rebuilt == problem["prompt"] + problem["canonical_solution"]
            assert task.exact_match(task.target + "\nextra")


def test_humaneval_pass_at_1_runs_the_tests() -> None:
    problem = humaneval.load_problems(1)[0]
    task = next(t for t in humaneval.tasks_for_problem(problem) if "return True" in t.target)
    runner = humaneval.PassRunner(timeout_s=30)
    assert runner.passed(task, "return True")
    assert not runner.passed(task, "return False")
    assert not humaneval.run_program(task.program("while True: pass"), timeout_s=1)
    assert not task.exact_match("return False")


# --- stateless baselines behind a server's session -----------------------------------------------


class _SlowEngine:
    """A stateless engine that answers what it was asked, slowly (no model: the session's
    queueing and records are what is checked)."""

    def __init__(self) -> None:
        self.asked: list[int] = []

    def complete(self, text: str, offset: int, path: str = "") -> Completion:
        import time

        self.asked.append(offset)
        time.sleep(0.05)
        return Completion(text[offset:offset + 1] or "x", 50.0, prompt_tokens=offset,
                          encoded_tokens=offset, generated_tokens=1)

    def peak_rss_mb(self) -> float | None:
        return None

    def close(self) -> None:
        pass


def test_the_psm_baselines_agree_and_reuse_what_they_share(tiny_model_path: Path) -> None:
    """(a) re-encodes every prompt, (b) keeps the longest common prefix of the last one, and
    they answer the same (cached equals uncached); (e) writes on past the line (a) stops at."""
    from lsp_complete.bench.baselines import LlamaBaseline

    def make(reuse: bool, to_end: bool = False) -> LlamaBaseline:
        return LlamaBaseline(str(tiny_model_path), None, (), 2, 24, reuse=reuse, to_end=to_end)

    text = "def add(a, b):\n    return a + b\n\n\ndef mul(a, b):\n    re\n"
    offset = text.index("    re\n") + len("    re")
    typed = text[:offset] + "t" + text[offset:]
    full, reuse, to_end = make(False), make(True), make(False, to_end=True)
    try:
        once = full.complete(text, offset)
        assert once.encoded_tokens == once.prompt_tokens and once.prompt_tokens
        first, again = reuse.complete(text, offset), reuse.complete(text, offset)
        assert first.encoded_tokens == first.prompt_tokens
        assert again.encoded_tokens == 1  # all cached: one token for its logits
        key = reuse.complete(typed, offset + 1)
        assert key.prompt_tokens is not None and key.encoded_tokens is not None
        assert 0 < key.encoded_tokens < key.prompt_tokens
        assert once.text == first.text == again.text and "\n" not in once.text
        assert key.text == full.complete(typed, offset + 1).text
        whole = to_end.complete(text, offset)
        assert whole.text.startswith(once.text)
        assert (whole.generated_tokens or 0) >= (once.generated_tokens or 0)
    finally:
        for engine in (full, reuse, to_end):
            engine.close()


def test_the_cross_file_oracle_is_psm_lcp_given_what_the_document_needs(
        tiny_model_path: Path) -> None:
    """(o) prompts as (b) does, after the context its request's document is given, and
    reuses the prefix as (b) does; a document given nothing is prompted as (b) prompts it."""
    from lsp_complete.bench.baselines import LlamaBaseline

    given = ("# b.py\nLIMIT = 3\n", False)
    oracle = LlamaBaseline(str(tiny_model_path), None, (), 2, 8, reuse=True,
                           context=lambda uri: given if uri == "file:///a.py" else ("", False))
    plain = LlamaBaseline(str(tiny_model_path), None, (), 2, 8, reuse=True)
    text = "import b\n\n\ndef f(x):\n    return x + b.\n"
    offset = text.index("b.\n") + 2
    try:
        psm = plain.prompt_tokens(text, offset)
        bos = len(plain._bos)
        assert oracle.prompt_tokens(text, offset, "file:///a.py") == \
            psm[:bos] + plain._tok(given[0]) + psm[bos:]
        assert oracle.prompt_tokens(text, offset, "file:///other.py") == psm
        first = oracle.complete(text, offset, "file:///a.py")
        again = oracle.complete(text, offset, "file:///a.py")
        assert first.prompt_tokens == len(psm) + len(plain._tok(given[0]))
        assert again.encoded_tokens == 1 and again.text == first.text
    finally:
        oracle.close()
        plain.close()


def test_only_the_oracle_is_given_the_imported_definitions(tiny_model_path: Path,
                                                           tmp_path: Path) -> None:
    """The run hands the cross-file context to every stateless side it builds: psm and
    psm-lcp (the default sides, in the crossfile scenario too) must stay plain PSM."""
    from lsp_complete.bench.baselines import LlamaBaseline
    from lsp_complete.bench.servers import stateless_server

    def given(uri: str) -> tuple[str, bool]:
        return "# b.py\n", False

    for key in ("a", "b", "e", "o"):
        server = stateless_server(key, str(tiny_model_path), None, (), 2, 8, None,
                                  tmp_path / f"{key}.log", context=given)
        assert server.make_engine is not None
        engine = server.make_engine()
        try:
            assert isinstance(engine, LlamaBaseline)
            assert engine.context is (given if key == "o" else None), key
        finally:
            engine.close()


def test_a_stateless_engine_answers_behind_a_servers_session() -> None:
    """Requests run one at a time; one still waiting when a newer one comes is superseded
    without running; each has a record by uri and version, as a server's status has."""
    import asyncio

    from lsp_complete.bench.lsp_driver import stats_by_version
    from lsp_complete.bench.servers import StatelessSession

    engine = _SlowEngine()

    async def scenario() -> tuple[list[tuple[str, float, str | None]], dict]:
        session = StatelessSession(lambda: engine)
        await session.start()
        uri, pos = "file:///t.py", types.Position(line=0, character=0)
        session.open(uri, "python", "abcdef", 1)
        first = await session.inline(uri, "abcdef", 1)
        session.insert(uri, 2, pos, "a")
        running = asyncio.create_task(session.inline(uri, "abcdef", 2))
        await asyncio.sleep(0.01)
        session.insert(uri, 3, pos, "b")
        waiting = asyncio.create_task(session.inline(uri, "abcdef", 3))
        await asyncio.sleep(0.01)
        session.insert(uri, 4, pos, "c")
        newest = asyncio.create_task(session.inline(uri, "abcdef", 4))
        answers = [first, *await asyncio.gather(running, waiting, newest)]
        status = await session.status()
        assert (await session.status(recent=0))["recent"] == []
        assert status["scheduler"]["idle"] and session.cpu_s() is not None
        await session.stop()
        return answers, status

    answers, status = asyncio.run(scenario())
    assert [a[0] for a in answers] == ["b", "c", "", "e"]
    assert engine.asked == [1, 2, 4]  # offset 3 waited behind 2 and was superseded by 4
    records = stats_by_version(status, "file:///t.py")
    assert {v: r["source"] for v, r in records.items()} == {
        1: "model", 2: "model", 3: "superseded", 4: "model"}
    assert records[4]["encodedTokens"] == 4


# --- llama-server /infill client ---------------------------------------------------------------


def test_infill_request_has_llama_vim_shape_and_parses_the_answer() -> None:
    received: list[dict] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
            length = int(self.headers["Content-Length"])
            received.append({"path": self.path, "body": json.loads(self.rfile.read(length))})
            answer = {"content": "urn total\n    pass", "timings/prompt_n": 7,
                      "timings/predicted_n": 4, "tokens_cached": 300}  # fmt: skip
            data = json.dumps(answer).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
    server.timeout = 10  # handle_request gives up by itself if no request comes
    thread = threading.Thread(target=server.handle_request, daemon=True)
    thread.start()
    try:
        lines = [f"line {i}" for i in range(400)]
        lines[300] = "    ret"
        text = "\n".join(lines)
        offset = text.index("    ret") + len("    ret")
        client = LlamaServerClient(f"http://127.0.0.1:{server.server_address[1]}", 48, 10)
        completion = client.complete(text, offset)
    finally:
        thread.join(timeout=15)
        server.server_close()
    assert completion.text == "urn total"
    assert completion.encoded_tokens == 7 and completion.generated_tokens == 4
    assert completion.prompt_tokens == 296
    assert len(received) == 1 and received[0]["path"] == "/infill"
    body = received[0]["body"]
    assert body["prompt"] == "    ret"
    assert body["input_prefix"] == "\n".join(lines[44:300]) + "\n"  # 256 lines before
    assert body["input_suffix"] == "\n" + "\n".join(lines[301:365]) + "\n"  # 64 lines after
    assert body["n_indent"] == 4
    assert body["cache_prompt"] is True
    assert body["n_predict"] == 48
    assert body["t_max_predict_ms"] == 250
    assert body["samplers"] == ["top_k", "top_p", "infill"]
    assert body["input_extra"] == [] and body["stream"] is False
    assert "timings/prompt_n" in body["response_fields"]


def test_infill_whitespace_line_is_sent_empty_and_indent_trimmed() -> None:
    text = "def f():\n    \nx = 1"
    body, line_cur = infill_request(text, text.index("    \n") + 4, 16)
    assert body["prompt"] == "" and body["n_indent"] == 0
    assert body["input_suffix"].startswith("\nx = 1")
    assert suggestion_from_content("    return 1\n", line_cur) == "return 1"
    assert suggestion_from_content("  return 1", line_cur) == "return 1"


# --- end to end --------------------------------------------------------------------------------

def test_bench_quick_runs_end_to_end(tiny_model_path: Path, tmp_path: Path) -> None:
    """The default run: the stateless baselines (a) psm and (b) psm-lcp beside this checkout in
    the one interleaved drive, on every scenario the baselines are measured on (typing with a
    rest and the cursor, paced typing, HumanEval, the large file's four phases, never-seen
    files, cross-file lines): they answer the same units in this process, behind the session
    a server has, typed by the same driver and scored the same way, each compared with B.
    Times are not checked."""
    out = tmp_path / "bench-out"
    proc = subprocess.run([
        sys.executable, "-m", "lsp_complete", "bench",
        "--quick", "--model", str(tiny_model_path), "--out", str(out),
        "--keystrokes", "6", "--humaneval", "1", "--open-file", workload.quick_file(),
        "--max-tokens", "8", "--resamples", "200", "--settle-ms", "200",
    ], capture_output=True, text=True, timeout=900)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    data = json.loads((out / "ab-samples.json").read_text())
    meta, units, rows = data["meta"], data["units"], data["rows"]
    sides = meta["sides"]
    assert meta["baselines"] == ["A1", "A2"]
    assert [(sides[k]["engine"], sides[k]["kind"]) for k in ("A1", "A2", "B")] == [
        ("a", "stateless"), ("b", "stateless"), ("d", "checkout")]
    names = list(scenarios.BASELINES_DEFAULT)
    assert meta["settings"]["scenarios"] == names
    assert all(u["error"] is None and u["cpu_s"] is not None for u in units), units
    for name in names:  # every unit of every scenario on all three sides
        mine = [u for u in units if u["scenario"] == name]
        assert mine and sorted(u["side"] for u in mine) == sorted(["A1", "A2", "B"] *
                                                                  (len(mine) // 3)), name
    for unit in units:  # each sample names the engine that answered it
        engine = sides[unit["side"]]["engine"]
        assert unit["samples"] and {s["engine"] for s in unit["samples"]} == {engine}
    # The stateless baselines' records: every answer of (a) re-encoded its whole prompt.
    typed = [s for u in units if u["scenario"] == "ours:rest2s" and u["side"] == "A1"
             for s in u["samples"]]
    assert typed and all(s["prompt_tokens"] and s["encoded_tokens"] == s["prompt_tokens"]
                         for s in typed if s["source"] == "model"), typed
    # The large file: its four phases in order, the last after a restart on the same cache.
    for unit in (u for u in units if u["scenario"] == "large-file"):
        assert [s["case"] for s in unit["samples"]] == [
            "cold-open", "warm-keystroke", "warm-reopen", "restart-from-disk"]
        assert all(s["source"] != "error" for s in unit["samples"])
    assert meta["scenarios"]["large-file"]["B"]["startup_ms"] is not None
    # The never-seen file: opened and asked at once, then two keys typed.
    cold = [s for u in units if u["scenario"] == "open" and u["side"] == "B"
            for s in u["samples"]]
    assert [s["index"] for s in cold] == [0, 1, 2] and cold[0]["line_exact"] is not None
    # The cross-file line, scored on every side.
    cross = [s for u in units if u["scenario"] == "crossfile" for s in u["samples"]]
    assert len(cross) == 3 and all({"em", "needed", "es"} <= set(s["extra"]) for s in cross)
    for baseline in ("A1", "A2"):
        for name in names:
            expected = [m.name for m in measures.measures_for(scenarios.parse(name)[0])]
            mine = [r for r in rows if r["baseline"] == baseline and r["scenario"] == name]
            assert [r["measure"] for r in mine] == [*expected, "peak RSS"], (baseline, name)
    report_md = (out / "ab-report.md").read_text()
    assert "## B against A1: (a) PSM, full re-encode" in report_md
    assert data["meta"]["model"]["sha256"]
    # The report can be rebuilt from the samples alone.
    (out / "ab-report.md").unlink()
    rerun = subprocess.run(
        [sys.executable, "-m", "lsp_complete", "bench", "--rerender", str(out)],
        capture_output=True, text=True, timeout=120,
    )
    assert rerun.returncode == 0, rerun.stderr[-2000:]
    assert (out / "ab-report.md").read_text() == report_md


def test_retired_options_are_refused_with_what_to_do_instead(capsys) -> None:
    for argv in (["--engines", "a,d"], ["--no-paced"], ["--rest-ms", "0"]):
        with pytest.raises(SystemExit):
            bench.build_parser().parse_args(argv)
        err = capsys.readouterr().err
        assert f"{argv[0]} is no longer an option" in err
        assert "--scenarios" in err or "--baseline" in err  # what to use instead


# --- (d) side by side: speculation modes and models (bench/variants.py) --------------------------


def test_speculation_modes_and_plan() -> None:
    assert variants.parse_modes("off, lookup,off,draft") == ("off", "lookup", "draft")
    with pytest.raises(ValueError, match="bogus"):
        variants.parse_modes("off,bogus")
    with pytest.raises(ValueError):
        variants.parse_modes(" , ")
    small = variants.ModelUnderTest("small", "/m/small.gguf")
    big = variants.ModelUnderTest("big", "/m/big.gguf", draft="small")
    planned, notes = variants.plan([small, big], ("off", "lookup", "draft"))
    assert [v.key for v in planned] == ["small/off", "small/lookup", "big/off", "big/lookup",
                                        "big/draft"]  # fmt: skip
    assert len(notes) == 1 and "small" in notes[0] and "draft" in notes[0]
    twice = variants.unique_names([small, small])
    assert [m.name for m in twice] == ["small", "small#2"]


def test_a_mode_fills_the_sizes_left_unset_and_rerender_needs_samples(tmp_path: Path) -> None:
    parse = bench.build_parser().parse_args
    args = parse(["--quick", "--keystrokes", "5", "--span-lines", "1,3"])
    mode = next(m for m in bench.MODES if m.asked(args))
    assert mode.name == "default"
    sized = bench._with_sizes(args, mode)
    assert sized.keystrokes == 5 and sized.span_lines == (1, 3) and sized.spans == 2
    full = bench._with_sizes(parse([]), mode)
    assert full.keystrokes == 640 and full.span_lines == 2 and full.pace_ms == 100
    assert full.num_files == len(workload.DEFAULT_LANGUAGES)  # every language found
    for asked in (["--baseline", "HEAD"], ["--speculation", "off,lookup"], ["--models", "m"]):
        ab_args = parse([*asked, "--quick"])
        ab_mode = next(m for m in bench.MODES if m.asked(ab_args))
        sized = bench._with_sizes(ab_args, ab_mode)
        assert ab_mode.name == "named sides" and sized.span_lines == (1, 3) and sized.blocks == 1
    with pytest.raises(SystemExit, match="no run's samples"):
        bench.ab.rerender(tmp_path)


def test_a_run_record_opens_with_its_date_machine_and_model(tmp_path: Path) -> None:
    import hashlib

    model = tmp_path / "m.gguf"
    model.write_bytes(b"gguf")
    header = machine.run_header(3, model, "m")
    assert list(header) == ["date", "machine", "model"] and header["date"].endswith(" UTC")
    assert header["machine"]["threads_used"] == 3 and header["machine"]["cores"]
    assert header["model"] == {"name": "m", "path": str(model), "size_bytes": 4,
                               "sha256": hashlib.sha256(b"gguf").hexdigest()}


def test_an_empty_list_of_models_modes_or_span_sizes_is_refused(capsys) -> None:
    """The mode's choice took a list that names nothing for none, variants.side_by_side for
    the main model in the server's mode: the default run's sizes with a variant side."""
    parse = bench.build_parser().parse_args
    for option in ("--models", "--speculation", "--baseline"):
        for empty in ("", " , "):
            with pytest.raises(SystemExit):
                parse([option, empty])
            assert f"argument {option}: names nothing" in capsys.readouterr().err
    for sizes in ("", ",", "0", "1,x"):
        with pytest.raises(SystemExit):
            parse(["--span-lines", sizes])
        assert "argument --span-lines: " in capsys.readouterr().err
    assert parse(["--span-lines", "1, 3"]).span_lines == (1, 3)


def test_variants_default_to_the_main_model_and_server_mode() -> None:
    main = variants.ModelUnderTest("m", "/m.gguf")
    assert variants.side_by_side(None, None, main) == ([], [])
    chosen, notes = variants.side_by_side(None, "", main)
    assert [v.key for v in chosen] == ["m/auto"] and notes == []
    assert variants.options(chosen[0]) == {"model": "/m.gguf", "speculation": "auto"}


def test_block_tasks_are_whole_bodies_that_pass_with_the_canonical_solution() -> None:
    blocks = humaneval.build_block_tasks(4)
    assert [b.task_id for b in blocks] == [b.task_id for b in humaneval.build_block_tasks(4)]
    runner = humaneval.PassRunner(timeout_s=30)
    for block in blocks:
        assert humaneval.BLOCK_MIN_LINES <= block.target_lines <= humaneval.BLOCK_MAX_LINES
        assert block.prefix.endswith('"""\n    ') and block.text.endswith("\n")
        assert block.offset == len(block.prefix)
    assert runner.passed(blocks[0], blocks[0].target)
    assert not runner.passed(blocks[0], "pass")


def test_bench_variants_are_sides_of_the_drive_end_to_end(tiny_model_path: Path,
                                                          tmp_path: Path) -> None:
    """Two models (the tiny one twice) x speculation off / lookup / draft: each pair a side of
    the interleaved drive beside the candidate, every unit on each, with whole-body HumanEval
    blocks (he-block) beside a typing scenario, each variant compared with B."""
    other = tmp_path / "tiny-copy.gguf"
    other.write_bytes(tiny_model_path.read_bytes())
    out = tmp_path / "bench-out"
    proc = subprocess.run([
        sys.executable, "-m", "lsp_complete", "bench", "--quick", "--model",
        str(tiny_model_path), "--models", f"{tiny_model_path},{other}", "--speculation",
        "off,lookup,draft", "--out", str(out), "--scenarios", "burst,he-block",
        "--max-tokens", "8", "--resamples", "200", "--settle-ms", "200",
    ], capture_output=True, text=True, timeout=900)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    data = json.loads((out / "ab-samples.json").read_text())
    meta = data["meta"]
    keys = ["tiny/off", "tiny/lookup", "tiny-copy/off", "tiny-copy/lookup"]
    assert meta["baselines"] == keys
    assert [meta["sides"][k]["role"] for k in keys] == ["variant"] * 4
    assert "speculation lookup" in meta["sides"]["tiny-copy/lookup"]["described"]
    assert sum("declares no draft model" in note for note in meta["notes"]) == 2
    units = data["units"]
    assert all(u["error"] is None for u in units), [u for u in units if u["error"]]
    for name in ("burst", "he-block"):
        sides = sorted(u["side"] for u in units if u["scenario"] == name)
        assert sides and sorted(set(sides)) == sorted([*keys, "B"])
    blocks = [s for u in units if u["scenario"] == "he-block" for s in u["samples"]]
    assert blocks and all(s["passed"] is not None for s in blocks)
    assert {s["case"] for s in blocks} == {b.name for b in humaneval.build_block_tasks(1)}
    rows = data["rows"]
    for key in keys:
        for name in ("burst", "he-block"):
            assert [r for r in rows if r["baseline"] == key and r["scenario"] == name]
    assert "## B against tiny-copy/lookup" in (out / "ab-report.md").read_text()


def test_java_sources_come_out_of_a_jdks_src_zip(tmp_path: Path, monkeypatch) -> None:
    """The bench's eighth language: a JDK ships its library's sources only as lib/src.zip;
    the files of a few packages are unpacked once into the cache folder."""
    import zipfile

    monkeypatch.setenv("LSP_COMPLETE_CACHE_DIR", str(tmp_path / "cache"))
    archive = tmp_path / "jvm" / "jdk-x" / "lib" / "src.zip"
    archive.parent.mkdir(parents=True)
    body = "\n".join(f"    int field{i} = {i};" for i in range(150))
    with zipfile.ZipFile(archive, "w") as zipped:
        zipped.writestr("java.base/java/util/Stack2.java", f"class Stack2 {{\n{body}\n}}\n")
        zipped.writestr("java.base/java/util/concurrent/Deep.java", "class Deep {}\n")
        zipped.writestr("java.base/java/util/README", "not a source\n")
    found = workload._jdk_sources(str(tmp_path / "jvm" / "*" / "lib" / "src.zip"))
    assert [Path(p).name for p in found] == ["Stack2.java"]
    assert Path(found[0]).read_text().startswith("class Stack2")
    assert Path(found[0]).is_relative_to(tmp_path / "cache")
    assert workload._jdk_sources(str(tmp_path / "jvm" / "*" / "lib" / "src.zip")) == found
    assert workload._jdk_sources(str(tmp_path / "nowhere" / "src.zip")) == []
    assert set(workload.DEFAULT_LANGUAGES) >= {"python", "javascript", "typescript", "c", "cpp",
                                                "go", "rust", "java"}
    assert workload.DEFAULT_LANGUAGES[:3] == ("python", "javascript", "c")  # the default run's


def test_a_full_run_types_in_every_code_language_found(tmp_path: Path) -> None:
    """Only the eight languages with a grammar were picked: a gap in any other (shell, Ruby,
    C#...) could not show in a default run. Every code language languages.py knows is picked
    now, one file each, where the machine has one that is code and not prose."""
    from lsp_complete.languages import code_languages

    assert set(workload.DEFAULT_LANGUAGES) == set(code_languages()) - {"tsx"}
    assert workload.DEFAULT_LANGUAGES[:8] == ("python", "javascript", "c", "go", "rust",
                                              "typescript", "java", "cpp")
    for ext in (".rb", ".sh", ".cs", ".kt", ".lua", ".php", ".swift"):
        assert ext in workload.REPLAY_EXTENSIONS
    rng = random.Random(0)
    code = "\n".join(f"local x{i} = f({i})" for i in range(150))
    prose = "\n".join(f"Ahoj, toto je řádek {i} návodu k Emacsu, psaný česky" for i in range(150))
    (tmp_path / "util.lua").write_text(code)
    (tmp_path / "TUTORIAL.cs").write_text(prose)
    assert workload._pick([str(tmp_path / "util.lua")], rng) == str(tmp_path / "util.lua")
    assert workload._pick([str(tmp_path / "TUTORIAL.cs")], rng) is None
