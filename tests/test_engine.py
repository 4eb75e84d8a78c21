"""The in-process engine on the tiny generated GGUF: prefix reuse must never change the output."""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from lsp_complete.context import CodeContext
from lsp_complete.engine.base import (
    CancelToken,
    EngineError,
    GenerationRequest,
    common_prefix_length,
)
from lsp_complete.engine.kvstore import KVStore, entry_key
from lsp_complete.engine.llama import LlamaEngine
from lsp_complete.models import FimTemplate
from lsp_complete.prompt import SegmentTokenizer, build_prompt

PREFIX = "<|fim_prefix|>"
SUFFIX = "<|fim_suffix|>"
MIDDLE = "<|fim_middle|>"


def make_engine(path: Path, **kwargs) -> LlamaEngine:
    kwargs.setdefault("n_ctx", 2048)
    kwargs.setdefault("n_threads", 1)
    return LlamaEngine(path, **kwargs)


def fim_request(engine: LlamaEngine, key: str, before: str, middle: str, suffix: str,
                heal: bool = True, **kwargs) -> GenerationRequest:
    head = engine.tokenize(PREFIX, True) + engine.tokenize(before)
    tail = engine.tokenize(SUFFIX, True) + engine.tokenize(suffix) + engine.tokenize(MIDDLE, True)
    mid = engine.tokenize(middle)
    healed = ""
    if heal and mid:
        healed = engine.detokenize(mid[-1:])
        mid = mid[:-1]
    return GenerationRequest(key=key, segments=[head, tail, mid], heal=healed, **kwargs)


def uncached(fresh: LlamaEngine, request: GenerationRequest):
    fresh.forget(request.key)
    return fresh.complete(request, CancelToken())


BEFORE = "import os\n\ndef read_lines(path):\n    with open(path) as f:\n        return f.read()\n"
SUFFIX_TEXT = "\n    return total\n"
TYPED = "    total = sum(len(line) for line in read_lines(path))"


def test_loading_a_missing_or_bad_file_is_a_clear_error(tmp_path: Path) -> None:
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"GGUF" + b"\0" * 64)
    with pytest.raises(EngineError, match="could not load"):
        make_engine(bad)


def test_typing_reuses_the_prefix_and_matches_a_fresh_context(engine, fresh) -> None:
    encoded = []
    for n in range(1, len(TYPED) + 1):
        request = fim_request(engine, "file:///a.py", BEFORE, TYPED[:n], SUFFIX_TEXT, max_tokens=8)
        cached = engine.complete(request, CancelToken())
        reference = uncached(fresh, request)
        assert cached.text == reference.text, f"keystroke {n}: {TYPED[:n]!r}"
        assert cached.text.startswith(request.heal)
        encoded.append(cached.encoded_tokens)
    # After the first request, a keystroke encodes only the few tokens at the end of the middle.
    typing = sorted(encoded[1:])
    assert typing[len(typing) // 2] <= 4, encoded
    assert engine.counters.tokens_reused > 0


@pytest.mark.parametrize(
    "edits",
    [
        # backspace, paste, undo, an edit above the cursor, an edit in the suffix, a cursor jump
        [TYPED[:20], TYPED[:17], TYPED[:17] + "paste(buffer, 3)", TYPED[:17], TYPED[:30]],
        [TYPED[:10], ("# note\n" + BEFORE, TYPED[:11]), (BEFORE, TYPED[:12])],
        [TYPED[:25], (BEFORE, TYPED[:25], "\n    return total + 1\n"), TYPED[:26]],
        [TYPED, "    x", TYPED[:5], TYPED],
    ],
)
def test_edit_sequences_match_a_fresh_context(engine, fresh, edits) -> None:
    for step in edits:
        before, middle, suffix = BEFORE, step, SUFFIX_TEXT
        if isinstance(step, tuple):
            before, middle = step[0], step[1]
            suffix = step[2] if len(step) > 2 else SUFFIX_TEXT
        request = fim_request(engine, "file:///edits.py", before, middle, suffix, max_tokens=10)
        assert engine.complete(request, CancelToken()).text == uncached(fresh, request).text


def test_switching_between_files_and_eviction(tiny_model_path: Path, fresh) -> None:
    eng = make_engine(tiny_model_path, slots=2)
    try:
        files = [f"file:///f{i}.py" for i in range(3)]
        for round_ in range(2):
            for i, key in enumerate(files):
                request = fim_request(
                    eng, key, BEFORE + f"# file {i}\n", TYPED[: 10 + round_], SUFFIX_TEXT,
                    max_tokens=8,
                )
                assert eng.complete(request, CancelToken()).text == uncached(fresh, request).text
        assert eng.counters.evictions >= 2
        assert len(eng.describe()["sequences"]) == 2
    finally:
        eng.close()


def test_restore_from_disk_after_restart(tiny_model_path: Path, fresh, tmp_path: Path) -> None:
    store_dir = tmp_path / "kv"
    request = fim_request(fresh, "file:///restore.py", BEFORE * 3, TYPED[:20], SUFFIX_TEXT,
                          max_tokens=8)
    first = make_engine(tiny_model_path, kv_store=KVStore(store_dir), model_id="tiny")
    first.complete(request, CancelToken())
    assert first.persist() == 1
    first.close()

    second = make_engine(tiny_model_path, kv_store=KVStore(store_dir), model_id="tiny")
    try:
        next_request = fim_request(second, "file:///restore.py", BEFORE * 3, TYPED[:21],
                                   SUFFIX_TEXT, max_tokens=8)
        result = second.complete(next_request, CancelToken())
        assert second.counters.restored_from_disk == 1
        assert result.reused_tokens > 0.8 * result.prompt_tokens
        assert result.text == uncached(fresh, next_request).text
    finally:
        second.close()


def test_restore_brings_back_a_saved_file_and_takes_no_room_for_others(
    tiny_model_path: Path, fresh, tmp_path: Path
) -> None:
    """What an open does: a file saved on disk is back in memory before its first keystroke;
    a file with nothing saved takes no sequence, nor does one when every sequence is taken
    (either would evict another file's)."""
    store_dir = tmp_path / "kv"
    request = fim_request(fresh, "file:///saved.py", BEFORE * 3, TYPED[:20], SUFFIX_TEXT,
                          max_tokens=8)
    first = make_engine(tiny_model_path, kv_store=KVStore(store_dir), model_id="tiny")
    first.complete(request, CancelToken())
    saved = first.cached_tokens("file:///saved.py")
    assert first.persist() == 1
    first.close()

    second = make_engine(tiny_model_path, kv_store=KVStore(store_dir), model_id="tiny")
    try:
        assert not second.restore("file:///never-asked.py")
        assert second.describe()["sequences"] == []
        assert second.restore("file:///saved.py")
        assert second.cached_tokens("file:///saved.py") == saved
        assert not second.restore("file:///saved.py")  # in memory already
        assert second.counters.restored_from_disk == 1 and second.counters.tokens_encoded == 0
    finally:
        second.close()

    third = make_engine(tiny_model_path, kv_store=KVStore(store_dir), model_id="tiny", slots=2)
    try:
        for key in ("file:///a.py", "file:///b.py"):
            third.warm(key, [third.tokenize(f"# {key}\n" + BEFORE)], CancelToken())
        assert not third.restore("file:///saved.py")
        assert third.counters.evictions == 0 and third.counters.restored_from_disk == 0
    finally:
        third.close()


def test_corrupt_or_foreign_cache_entries_are_discarded(tiny_model_path: Path, fresh,
                                                        tmp_path: Path) -> None:
    store = KVStore(tmp_path / "kv")
    eng = make_engine(tiny_model_path, kv_store=store, model_id="tiny")
    model = eng.persistence.model  # entries are bound to the engine's full identity
    store.save(model, "file:///c.py", [1, 2, 3], b"not a llama.cpp state")
    store._cache.set(entry_key(model, "file:///d.py"), b"garbage")  # bytes, not an entry
    try:
        for key in ("file:///c.py", "file:///d.py"):
            # Each file its own opening: nothing to copy from the other file's cells either.
            request = fim_request(eng, key, f"# {key}\n" + BEFORE, TYPED[:9], SUFFIX_TEXT,
                                  max_tokens=8)
            result = eng.complete(request, CancelToken())
            assert result.reused_tokens == 0
            assert result.text == uncached(fresh, request).text
            assert store.load(model, key) is None
        assert eng.counters.restored_from_disk == 0
    finally:
        eng.close()


def test_token_healing_continues_a_half_typed_word(engine) -> None:
    for word in ("re", "ret", "retu", "return", "pri", "sel", "lin"):
        request = fim_request(engine, "file:///heal.py", BEFORE, "    " + word, SUFFIX_TEXT,
                              max_tokens=6)
        result = engine.complete(request, CancelToken())
        assert request.heal and ("    " + word).endswith(request.heal)
        # The output starts with exactly the healed characters: nothing skipped, nothing repeated.
        assert result.text.startswith(request.heal), (word, request.heal, result.text)


def test_after_indentation_the_healed_space_is_followed_by_code(engine) -> None:
    """A middle that ends in indentation heals one space; the model must not add spaces."""
    for indent in ("    ", "        ", "x = "):
        request = fim_request(engine, "file:///indent.py", BEFORE, indent, SUFFIX_TEXT,
                              heal=False, max_tokens=6)
        tokens = engine.tokenize(indent[:-1])
        request.segments[-1] = tokens
        request.heal, request.heal_code = " ", True
        result = engine.complete(request, CancelToken())
        assert result.text.startswith(" "), result
        if result.generated_tokens:
            assert result.text[1:2].strip(), (indent, result.text)
    # A token that carries code, or the healed space alone (a digit comes next: see
    # test_a_line_may_start_with_a_digit_after_the_healed_space).
    assert all(engine.piece(int(t)).startswith(b" ")
               and (engine.piece(int(t)).strip() or engine.piece(int(t)) == b" ")
               for t in engine.vocabulary.heal_candidates(b" ", code=True))
    # Without `code` (indentation still being typed) more spaces stay allowed.
    assert any(not engine.piece(int(t)).strip() for t in engine.vocabulary.heal_candidates(b" "))


def prefer_blanks(engine, monkeypatch, blank: bytes, first: int | None = None) -> None:
    """Make the model prefer the tokens made only of `blank` at every step (their logits
    boosted), `first` above the others."""
    vocabulary = engine.vocabulary
    blanks = [t for t in range(vocabulary.size) if vocabulary.pieces[t]
              and not vocabulary.pieces[t].strip(blank)]
    original = vocabulary.pick

    def prefer(logits, *args, **kwargs):
        boosted = logits.copy()
        boosted[blanks] += 1000.0
        if first is not None:
            boosted[first] += 1.0
        return original(boosted, *args, **kwargs)

    monkeypatch.setattr(vocabulary, "pick", prefer)


def test_a_line_may_start_with_a_digit_after_the_healed_space(engine, monkeypatch) -> None:
    """Tokenizers split the space before a digit off as a token of its own ("       ",
    " ", "3"): healing allows that token, and then the next one must carry the code. Here the
    model is made to prefer spaces at every step (its logits boosted): the lone space is
    taken, and no space after it."""
    lone = engine.vocabulary.pieces.index(b" ")
    prefer_blanks(engine, monkeypatch, b" ", first=lone)  # the lone space first among them
    request = fim_request(engine, "file:///digit.py", BEFORE, "    ", SUFFIX_TEXT, heal=False,
                          max_tokens=4)
    request.segments[-1] = engine.tokenize("   ")
    request.heal, request.heal_code = " ", True
    result = engine.complete(request, CancelToken())
    assert result.first_token == lone
    assert result.generated_tokens >= 2 and result.text[1:2].strip(), result.text


def test_a_tab_indented_line_gets_no_tab_more_than_its_indentation(engine, monkeypatch) -> None:
    """Go's lines are indented with tabs: the prompt heals one tab of the typed indentation
    and the model, made to prefer tabs at every step here, must follow it with code; healing
    the whole run let it add a tab (a suggestion one level too deep)."""
    prefer_blanks(engine, monkeypatch, b"\t")
    ctx = CodeContext(path="main.go", language_id="go", head="package main\n\n",
                      before="func main() {\n\tif ok {\n\t\tstart()\n",
                      suffix="\n\t}\n}\n", middle="\t\t", anchor=0)
    fim = FimTemplate(prefix=PREFIX, suffix=SUFFIX, middle=MIDDLE)
    prompt = build_prompt(ctx, fim, SegmentTokenizer(engine.tokenize), engine.detokenize,
                          1_000)
    assert (prompt.heal, prompt.heal_code) == ("\t", True)
    request = GenerationRequest(key="file:///main.go", segments=prompt.segments,
                                heal=prompt.heal, heal_code=prompt.heal_code, max_tokens=4)
    result = engine.complete(request, CancelToken())
    assert result.text.startswith("\t") and result.text[1:2].strip(), result.text


def test_healing_gives_back_what_one_token_could_write(engine) -> None:
    """The tiny vocabulary splits a typed "(sel" into "(", "se", "l" and has "(self": the
    prompt heals all three characters, so the model may write the word as one token; healing
    only "l" would make it follow "(" + "se" with an "l" the finished word never splits off."""
    ctx = CodeContext(path="a.py", language_id="python", head="import os\n\n",
                      before=BEFORE, suffix=SUFFIX_TEXT, middle="    print(sel", anchor=0)
    fim = FimTemplate(prefix=PREFIX, suffix=SUFFIX, middle=MIDDLE)
    assert [engine.detokenize([t]) for t in engine.tokenize("(sel")] == ["(", "se", "l"]
    assert engine.begins_a_token("(sel") and not engine.begins_a_token("t(sel")
    prompt = build_prompt(ctx, fim, SegmentTokenizer(engine.tokenize), engine.detokenize,
                          1_000, begins_a_token=engine.begins_a_token)
    assert prompt.heal == "(sel"
    assert engine.detokenize(prompt.segments[-1]).endswith("    print")
    request = GenerationRequest(key="file:///heal_word.py", segments=prompt.segments,
                                heal=prompt.heal, max_tokens=4)
    assert engine.complete(request, CancelToken()).text.startswith("(sel")


def test_output_never_contains_special_tokens(engine) -> None:
    request = fim_request(engine, "file:///special.py", BEFORE, "    ", SUFFIX_TEXT,
                          max_tokens=40, single_line=False)
    text = engine.complete(request, CancelToken()).text
    assert "<|" not in text


def test_a_cancelled_request_does_no_further_work(engine, fresh) -> None:
    cancel = CancelToken()
    cancel.cancel()
    before_calls = engine.counters.tokens_encoded
    request = fim_request(engine, "file:///cancel.py", BEFORE * 4, TYPED, SUFFIX_TEXT)
    result = engine.complete(request, cancel)
    assert result.stop_reason == "cancelled"
    assert engine.counters.tokens_encoded == before_calls
    assert cancel.work_after_cancel == 0
    # The engine stays consistent: the next request equals a fresh one.
    again = fim_request(engine, "file:///cancel.py", BEFORE * 4, TYPED, SUFFIX_TEXT, max_tokens=8)
    assert engine.complete(again, CancelToken()).text == uncached(fresh, again).text


def test_cancel_during_prefill_stops_within_a_batch(tiny_model_path: Path, fresh) -> None:
    eng = make_engine(tiny_model_path, n_batch=16, n_ubatch=16)
    try:
        cancel = CancelToken()
        seen = []
        original = eng.decoder.decode_chunk

        def spy(seq, chunk, want_logits, token, abortable):
            status = original(seq, chunk, want_logits, token, abortable)
            seen.append(len(chunk))
            if len(seen) == 2:
                threading.Thread(target=cancel.cancel).start()
                threading.Event().wait(0.05)
            return status

        eng.decoder.decode_chunk = spy
        request = fim_request(eng, "file:///big.py", BEFORE * 10, TYPED, SUFFIX_TEXT)
        result = eng.complete(request, cancel)
        assert result.stop_reason == "cancelled"
        assert len(seen) <= 3  # the batch in flight when cancelled may finish, no more
        assert cancel.work_after_cancel <= 16
        eng.decoder.decode_chunk = original
        again = fim_request(eng, "file:///big.py", BEFORE * 10, TYPED, SUFFIX_TEXT, max_tokens=8)
        assert eng.complete(again, CancelToken()).text == uncached(fresh, again).text
    finally:
        eng.close()


def test_an_abandoned_suggestion_stops_generating_and_returns_no_text(engine) -> None:
    request = fim_request(engine, "file:///abandon.py", BEFORE, "    re", SUFFIX_TEXT,
                          max_tokens=20, single_line=False)
    full = engine.complete(request, CancelToken())
    assert full.generated_tokens > 3, full  # the check below must be able to fail
    seen: list[str] = []

    def abandon(produced: str) -> bool:
        seen.append(produced)
        return len(seen) == 3

    request.abandon = abandon
    result = engine.complete(request, CancelToken())
    assert result.stop_reason == "abandoned"
    assert result.generated_tokens == 3
    assert result.text == request.heal  # nothing of what the model wrote is kept
    # It saw what the unabandoned run produced, token by token.
    assert full.text[len(request.heal):].startswith(seen[-1])


def test_a_kept_stop_ends_the_text_after_itself_a_stop_before(engine) -> None:
    request = fim_request(engine, "file:///stops.py", BEFORE, "    re", SUFFIX_TEXT,
                          max_tokens=12, single_line=False)
    produced = engine.complete(request, CancelToken()).text[len(request.heal):]
    assert len(produced) >= 6, produced  # the stops below must be able to end it
    marker = produced[2:5]
    at = produced.index(marker)
    kept = engine.complete(dataclasses.replace(request, kept_stops=(marker,)), CancelToken())
    assert (kept.stop_reason, kept.text) == ("stop", request.heal + produced[: at + 3])
    cut = engine.complete(dataclasses.replace(request, stop=(marker,)), CancelToken())
    assert (cut.stop_reason, cut.text) == ("stop", request.heal + produced[:at])


def cancel_after_text(pieces: int) -> tuple[CancelToken, Callable[[str], None]]:
    """A cancel token and an `on_text` that sets it at the `pieces`-th piece of generated
    text: a keystroke arriving mid-generation."""
    cancel = CancelToken()
    seen = [0]

    def on_text(_text: str) -> None:
        seen[0] += 1
        if seen[0] == pieces:
            cancel.cancel()

    return cancel, on_text


class CancelAfter(CancelToken):
    """Reads as cancelled from its `checks`-th look on: a keystroke arriving mid-prefill."""

    def __init__(self, checks: int) -> None:
        super().__init__()
        self.checks = checks

    @property
    def cancelled(self) -> bool:
        self.checks -= 1
        return self.checks < 0


def test_idle_work_builds_a_new_prompt_aside_and_an_interruption_loses_nothing(
    engine, fresh
) -> None:
    key = "file:///aside.py"
    typed = fim_request(engine, key, BEFORE, TYPED[:12], SUFFIX_TEXT, max_tokens=8)
    engine.complete(typed, CancelToken())
    # Idle work re-anchors: a prompt that shares only the head and needs several batches.
    moved_before = BEFORE + "".join(f"    step_{i} = compute({i}, path)\n" for i in range(30))
    moved = fim_request(engine, key, moved_before, "    x", SUFFIX_TEXT, max_tokens=8)
    shared = engine.cached_prefix(key, moved.tokens)
    assert len(moved.tokens) - shared > 2 * engine.n_batch
    assert engine.warm(key, moved.segments, CancelAfter(2)) == 0  # interrupted after a batch
    assert engine.describe()["sequences"][-1]["asideTokens"] > shared
    # The next keystroke finds its own prompt intact: it encodes only what was typed.
    keystroke = fim_request(engine, key, BEFORE, TYPED[:13], SUFFIX_TEXT, max_tokens=8)
    result = engine.complete(keystroke, CancelToken())
    assert result.encoded_tokens <= 2, result
    assert result.text == uncached(fresh, keystroke).text
    # The next idle moment resumes where the interrupted one stopped, then switches over.
    resumed_from = engine.cached_prefix(key, moved.tokens)
    assert resumed_from > shared
    assert engine.warm(key, moved.segments, CancelToken()) == len(moved.tokens) - resumed_from
    assert engine.describe()["sequences"][-1]["asideTokens"] == 0
    result = engine.complete(moved, CancelToken())
    assert result.encoded_tokens <= 1, result
    assert result.text == uncached(fresh, moved).text


def test_more_files_than_slots_each_with_idle_work_aside(tiny_model_path: Path, fresh) -> None:
    """Aside sequences never push the number of files kept past `slots`, nor run out of ids."""
    eng = make_engine(tiny_model_path, slots=2)
    try:
        moved_before = BEFORE + "".join(f"    step_{i} = compute({i}, path)\n" for i in range(30))
        for round_ in range(3):
            for i in range(4):
                key = f"file:///many{i}.py"
                typed = fim_request(eng, key, BEFORE + f"# {i}\n", TYPED[: 8 + round_],
                                    SUFFIX_TEXT, max_tokens=4)
                assert eng.complete(typed, CancelToken()).text == uncached(fresh, typed).text
                moved = fim_request(eng, key, moved_before + f"# {i}\n", "    x", SUFFIX_TEXT)
                eng.warm(key, moved.segments, CancelAfter(2))  # interrupted: stays aside
                sequences = eng.describe()["sequences"]
                assert len(sequences) <= 2, sequences
                assert sequences[-1]["asideTokens"] > 0
    finally:
        eng.close()


def test_files_sharing_an_opening_encode_it_once(tiny_model_path: Path, fresh) -> None:
    """A second file whose prompt opens like another's (the same repository block) copies
    those cells instead of encoding them; its suggestions are those of a fresh context, also
    once the first file is gone."""
    opening = "# repository block\n" + "".join(f"def helper_{i}(x):\n    return x + {i}\n"
                                               for i in range(6))
    eng = make_engine(tiny_model_path, slots=3)
    try:
        first = fim_request(eng, "file:///a.py", opening + BEFORE, TYPED[:12], SUFFIX_TEXT,
                            max_tokens=8)
        eng.complete(first, CancelToken())
        second = fim_request(eng, "file:///b.py", opening + "import sys\n", TYPED[:9],
                             SUFFIX_TEXT, max_tokens=8)
        shared = common_prefix_length(first.tokens, second.tokens)
        assert shared >= 64
        result = eng.complete(second, CancelToken())
        assert result.text == uncached(fresh, second).text
        assert eng.counters.tokens_borrowed == shared
        assert result.encoded_tokens == len(second.tokens) - shared
        eng.forget("file:///a.py")  # the copied cells stay with the file that borrowed them
        typed = fim_request(eng, "file:///b.py", opening + "import sys\n", TYPED[:10],
                            SUFFIX_TEXT, max_tokens=8)
        again = eng.complete(typed, CancelToken())
        assert again.text == uncached(fresh, typed).text and again.encoded_tokens <= 4
    finally:
        eng.close()


def test_a_build_with_amx_kernels_loads_without_extra_buffer_types(
    tiny_model_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """llama.cpp's AMX kernels crash on K-quant models (issue #20824, seen here): a build that
    has them loads models without the extra buffer types, and still generates."""
    import llama_cpp

    real = llama_cpp.llama_print_system_info()
    amx = b"CPU : AVX2 = 1 | AVX512 = 1 | AMX_INT8 = 1 | REPACK = 1 | "
    monkeypatch.setattr(llama_cpp, "llama_print_system_info", lambda: amx)
    eng = LlamaEngine(tiny_model_path, n_ctx=512, n_threads=1, slots=1)
    try:
        assert eng.describe()["cpuExtraBuffers"] is False
        result = eng.complete(GenerationRequest(key="k", segments=[eng.tokenize("def f(")],
                                                max_tokens=4), CancelToken())
        assert result.generated_tokens > 0
    finally:
        eng.close()
    monkeypatch.setattr(llama_cpp, "llama_print_system_info", lambda: real.replace(
        b"AMX_INT8 = 1", b""))
    eng = LlamaEngine(tiny_model_path, n_ctx=512, n_threads=1, slots=1)
    try:
        assert eng.describe()["cpuExtraBuffers"] is True
    finally:
        eng.close()


def test_an_aside_leaves_the_files_cache_as_the_plain_request_left_it(
    tiny_model_path: Path,
) -> None:
    # A block is generated aside (GenerationRequest.aside): the next keystroke must find the
    # file's sequences exactly as the suggestion shown left them, and get the same answer.
    eng = make_engine(tiny_model_path, slots=3)
    fresh = make_engine(tiny_model_path, slots=3)
    try:
        shown = fim_request(eng, "a.py", "def add(a, b):\n    ", "ret", "\n", max_tokens=8)
        eng.complete(shown, CancelToken())
        before = [list(s.tokens) for s in eng._table.held("a.py")]
        block = eng.complete(dataclasses.replace(shown, aside=True, single_line=False,
                                                 max_tokens=40), CancelToken())
        assert block.stop_reason not in ("cancelled", "error", "empty")
        assert block.text == uncached(fresh, dataclasses.replace(
            shown, single_line=False, max_tokens=40, speculation="off")).text
        assert [list(s.tokens) for s in eng._table.held("a.py")] == before
        typed = fim_request(eng, "a.py", "def add(a, b):\n    ", "return", "\n", max_tokens=8)
        assert eng.complete(typed, CancelToken()).text == uncached(fresh, typed).text
    finally:
        eng.close()
        fresh.close()
