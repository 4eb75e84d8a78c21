"""The next-edit benchmark (bench/nextedit.py): tasks mined from a git repository made here,
their ExampleSpec markdown, the score of an answer, and one run against the real server."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from lsp_complete.bench import nextedit
from lsp_complete.bench.nextedit import NEXT, SILENCE, Outcome, Task
from lsp_complete.models import NextEditTemplate

WINDOW = NextEditTemplate(format="chat", above=2, below=5)

BASE = "".join(f"def f{i}(value):\n    total = {i}\n    return value + total\n\n\n"
               for i in range(12))


def _commit(repo: Path, message: str, files: dict[str, str]) -> str:
    for name, text in files.items():
        (repo / name).write_text(text)
        subprocess.run(["git", "-C", str(repo), "add", name], check=True)
    subprocess.run(["git", "-C", str(repo), "commit", "-qm", message], check=True)
    return subprocess.run(["git", "-C", str(repo), "rev-parse", "HEAD"], check=True,
                          capture_output=True, text=True).stdout.strip()


@pytest.fixture
def repo(tmp_path: Path) -> dict[str, str]:
    """A repository with one commit of each kind, the wanted ones and the filtered ones."""
    root = tmp_path / "proj"
    root.mkdir()
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    for key, value in (("user.email", "t@example.com"), ("user.name", "t")):
        subprocess.run(["git", "-C", str(root), "config", key, value], check=True)
    shas = {"root": str(root)}
    shas["initial"] = _commit(root, "initial", {"app.py": BASE, "util.py": "X = 1\n",
                                                "gen.py": "# Code generated. DO NOT EDIT.\n"
                                                + BASE})
    # Two hunks: a renamed parameter, then its use three lines further down.
    two = BASE.replace("def f2(value):", "def f2(amount):", 1)
    two = two.replace("total = 2\n    return value", "total = 2\n    return amount", 1)
    shas["two_hunks"] = _commit(root, "rename", {"app.py": two})
    # (A word, not a digit: an edit that changes no word asks no model, and counts nothing.)
    one = two.replace("total = 9\n", "total = ninety\n", 1)
    shas["one_hunk"] = _commit(root, "one change", {"app.py": one})
    # Filtered: two source files, a generated file, a big hunk, no source file at all.
    _commit(root, "two files", {"app.py": one.replace("total = 1\n", "total = -1\n"),
                                "util.py": "X = 2\n"})
    _commit(root, "generated", {"gen.py": "# Code generated. DO NOT EDIT.\n"
                                + BASE.replace("= 3", "= 30").replace("= 7", "= 70")})
    big = one.replace("def f5(value):\n", "def f5(value):\n" + "    pass\n" * 12, 1)
    _commit(root, "big", {"app.py": big})
    _commit(root, "docs", {"README.md": "hello\n"})
    return shas


def test_mining_finds_one_next_edit_and_one_silence_task(repo: dict[str, str]) -> None:
    tasks = nextedit.mine(repo["root"], seed=0, per_repo=5)
    assert sorted((t.kind, t.commit) for t in tasks) == sorted(
        [(NEXT, repo["two_hunks"]), (SILENCE, repo["one_hunk"])])
    assert nextedit.mine(repo["root"], seed=0, per_repo=5) == tasks  # deterministic
    nxt = next(t for t in tasks if t.kind == NEXT)
    assert nxt.revision == repo["initial"] and nxt.path == "app.py"
    assert nxt.language == "python" and nxt.before == BASE
    assert "def f2(amount):\n    total = 2\n    return value" in nxt.edited
    assert "total = 2\n    return amount" in nxt.expected and "= ninety" not in nxt.expected
    # The user typed "amount" over "value": the cursor rests after it.
    assert nxt.edited[: nxt.cursor].endswith("def f2(amount")
    assert nxt.distance() == 2 and nxt.within_window(WINDOW) is True
    assert nxt.within_window(replace(WINDOW, below=1)) is False
    assert nxt.within_window(None) is None
    silence = next(t for t in tasks if t.kind == SILENCE)
    assert silence.expected == silence.edited and silence.distance() is None
    assert nextedit.mine(repo["root"], seed=0, per_repo=0) == []


def test_typing_plan_types_new_lines_from_the_line_above() -> None:
    before = "a = 1\nb = 2\n"
    after = "a = 1\nx = 3\ny = 4\nb = 2\n"
    start, end, typed = nextedit.typing_plan(before, after)
    assert (start, end, typed) == (5, 5, "\nx = 3\ny = 4")
    assert before[:start] + typed + before[end:] == after
    assert nextedit.typing_plan("foo(a)\n", "foo(a, b)\n") == (5, 5, ", b")
    assert nextedit.typing_plan("x = 10\n", "x = 2\n") == (4, 6, "2")


def test_example_spec_markdown_round_trips_in_zeds_shape() -> None:
    before = "const a = `x`;\nconst b = ```y```;\nlet c = 1;\n" + "// pad\n" * 8 + "c += 1;\n"
    edited = before.replace("let c = 1;", "let count = 1;")
    expected = edited.replace("c += 1;", "count += 1;")
    task = Task("demo", "/some/repo", "c0ffee", "beef", "src/a.ts", NEXT, before, edited,
                expected)
    text = nextedit.to_markdown(task)
    assert text.startswith('+++\nrepository_url = "/some/repo"\nrevision = "beef"\n')
    for heading in ("# demo", "## Edit History", "## Cursor Position", "## Expected Patch"):
        assert f"\n{heading}\n" in text
    assert "let count<|user_cursor|> = 1;" in text
    assert nextedit.from_markdown(text) == task
    silence = Task("quiet", "/some/repo", "c0ffee", "beef", "a.go", SILENCE, before, edited,
                   edited)
    assert nextedit.from_markdown(nextedit.to_markdown(silence)) == silence
    with pytest.raises(ValueError, match="cursor"):
        nextedit.from_markdown("# nothing\n")


def test_a_file_with_a_form_feed_round_trips() -> None:
    """Lines end at "\n" only, as the server counts them: a form feed (common in Python, C
    and Lisp files) or a Unicode line separator stays inside its line."""
    before = "import os\n\x0c\ndef f():\n    return 1  # a\u2028b\n" + "# pad\n" * 6 + "f()\n"
    edited = before.replace("return 1", "return 2")
    expected = edited.replace("f()\n", "f() + 1\n")
    task = Task("ff", "/some/repo", "c0ffee", "beef", "a.py", NEXT, before, edited, expected)
    assert nextedit.from_markdown(nextedit.to_markdown(task)) == task
    assert task.distance() == before.count("\n") - 1 - 3


def _task() -> Task:
    before = "def f(value):\n    x = 1\n    return value\n"
    edited = before.replace("f(value)", "f(amount)")
    return Task("t", "", "", "", "a.py", NEXT, before, edited,
                edited.replace("return value", "return amount"))


def _answer(text: str, line: int, start: int, end: int, version: int = 5) -> dict:
    rng = {"start": {"line": line, "character": start}, "end": {"line": line, "character": end}}
    return {"edits": [{"text": text, "range": rng,
                       "textDocument": {"uri": "file:///a.py", "version": version}}]}


@pytest.mark.parametrize(("answer", "shown", "exact", "relaxed", "stale"), [
    (_answer("amount", 2, 11, 16), True, True, True, False),
    (_answer("amount  ", 2, 11, 16), True, False, True, False),  # trailing whitespace
    (_answer("other", 2, 11, 16), True, False, False, False),
    (_answer("value", 2, 11, 16), False, False, False, False),  # changes nothing
    (_answer("amount", 2, 11, 16, version=4), False, False, False, True),  # an older version
    ({"edits": []}, False, False, False, False),
    (None, False, False, False, False),
])
def test_an_answer_is_scored_as_sidekick_shows_it(answer, shown, exact, relaxed, stale) -> None:
    task = _task()
    outcome = nextedit.judge(task, Outcome("t", "python", NEXT, 1, True), answer, 5)
    assert (outcome.shown, outcome.exact, outcome.relaxed, outcome.stale) == (
        shown, exact, relaxed, stale)
    assert outcome.wrong_shown == (shown and not exact)


def test_positions_are_utf16_columns() -> None:
    text = "a😀b\nc"
    assert nextedit.offset_of(text, {"line": 0, "character": 3}) == 2
    assert nextedit.offset_of(text, {"line": 1, "character": 1}) == 5


def test_rates_come_with_bootstrap_intervals() -> None:
    cell = nextedit.share([True, False, True, True], seed=0)
    assert cell["rate"] == 0.75 and cell["n"] == 4 and cell["hits"] == 3
    assert 0 <= cell["low"] <= 0.75 <= cell["high"] <= 1
    assert nextedit.share([], seed=0)["rate"] is None


def test_bench_next_edit_runs_end_to_end(repo: dict[str, str], tiny_model_path: Path,
                                         tmp_path: Path) -> None:
    """Mined tasks replayed against the real server (tiny model): every reported field, and
    each request as sidekick.nvim sends it. Times nothing."""
    out = tmp_path / "out"
    proc = subprocess.run([
        sys.executable, "-m", "lsp_complete", "bench", "--next-edit", repo["root"],
        "--model", str(tiny_model_path), "--threads", "1", "--out", str(out),
    ], capture_output=True, text=True, timeout=600)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    data = json.loads((out / "nextedit.json").read_text())
    assert set(data["summary"]) == {"all", "python"}
    row = data["summary"]["all"]
    assert (row["next_edit_tasks"], row["silence_tasks"], row["errors"]) == (1, 1, 0)
    for key in ("exact", "relaxed", "exact_within_window", "exact_beyond_window",
                "no_edit_on_next", "correct_silence", "wrong_shown"):
        assert set(row[key]) == {"rate", "hits", "n", "low", "high"}, key
    assert row["latency_p50_ms"] is not None and row["latency_p95_ms"] is not None
    assert row["cpu_s_per_task"] is not None
    tasks = {t.name: t for t in nextedit.load_tasks(out / "nextedit-tasks")}
    for outcome in data["outcomes"]:
        task = tasks[outcome["name"]]
        request = outcome["request"]
        assert set(request) == {"textDocument", "position", "context"}
        assert request["context"] == {"triggerKind": 2}
        # The version is the buffer's after every change sent (didOpen was version 1).
        assert request["textDocument"]["version"] == outcome["versions"] + 1
        start, end, typed = nextedit.typing_plan(task.before, task.edited)
        assert outcome["versions"] == (end > start) + len(typed)
        line = task.edited.count("\n", 0, task.cursor)
        assert request["position"] == {
            "line": line, "character": task.cursor - task.edited.rfind("\n", 0, task.cursor) - 1}
        # Each task's work ran to an answer the server counted (edit, nothing, rejected).
        assert "nextEditComputed" in outcome["server"], outcome
    report = (out / "nextedit-report.md").read_text()
    for label, _get in nextedit.COLUMNS:
        assert f"| {label} |" in report
    listing = json.loads((out / "nextedit-tasks" / "tasks.json").read_text())
    assert {(t["commit"], t["path"]) for t in listing} == {
        (repo["two_hunks"], "app.py"), (repo["one_hunk"], "app.py")}
