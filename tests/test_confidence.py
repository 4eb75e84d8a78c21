"""How sure the model is of a suggestion's first line, and the setting that holds back the
ones it is unsure of (`minConfidencePercent`): real llama.cpp on the tiny GGUF, and the real
server over stdio."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest

from lsp_complete.certainty import line_confidence, place
from lsp_complete.engine.base import GenerationResult
from tests.raw_lsp import RawServer

URI = "file:///work/conf.py"
TEXT = "def add(a, b):\n    return a\n"


def test_the_first_lines_tokens_make_the_confidence() -> None:
    result = GenerationResult(text="ab(c)\nnext", token_probabilities=[0.5, 0.8, 0.5, 0.1],
                              token_ends=[2, 5, 6, 10])
    certainty = place(result, 0, "ab(c)\nnext")
    assert certainty == ((2, 0.5), (5, 0.8), (6, 0.5), (10, 0.1))
    assert line_confidence(certainty, "ab(c)\nnext") == pytest.approx(0.5 * 0.8 * 0.5)
    # Typed along: only the tokens not yet typed count; on the next line, its own tokens.
    assert line_confidence(certainty, "ab(c)\nnext", 2) == pytest.approx(0.8 * 0.5)
    assert line_confidence(certainty, "ab(c)\nnext", 6) == pytest.approx(0.1)
    assert line_confidence(None, "remote") == 1.0
    assert place(GenerationResult(text="remote"), 0, "remote") is None  # none given
    # Healed: tokens that only spell the typed characters are left out, the coordinates are
    # the suggestion's (it starts after them).
    healed = GenerationResult(text="rex = 1\ny", token_probabilities=[0.3, 0.9, 0.5, 0.2],
                              token_ends=[2, 3, 8, 9])
    placed = place(healed, 2, "x = 1\ny")
    assert placed == ((1, 0.9), (6, 0.5), (7, 0.2))
    assert line_confidence(placed, "x = 1\ny") == pytest.approx(0.9 * 0.5)
    # Postprocessing changed the text: nothing is known of it.
    assert place(healed, 2, "x = 2") is None


def test_typing_ahead_says_how_sure_the_model_was_of_the_rest() -> None:
    from lsp_complete.typeahead import TypeAhead

    ahead = TypeAhead()
    ahead.remember("u", "f(", ")", "abcde", ((2, 0.05), (5, 0.9)), generation=ahead.generation)
    first = ahead.find("u", "f(", ")")
    assert first is not None and first.text == "abcde"
    assert first.confidence == pytest.approx(0.045)
    past = ahead.find("u", "f(ab", ")")  # typed past the unsure token
    assert past is not None and past.text == "cde" and past.confidence == pytest.approx(0.9)
    # Without probabilities: sure.
    ahead.remember("u", "g(", ")", "xyz", generation=ahead.generation)
    found = ahead.find("u", "g(x", ")")
    assert found is not None and found.confidence == 1.0


def test_the_engine_gives_each_token_its_probability_when_the_rule_is_on(
        tiny_model_path: Path) -> None:
    import dataclasses

    from lsp_complete.config import Settings
    from lsp_complete.documents import Document
    from lsp_complete.engine.base import CancelToken
    from lsp_complete.pipeline import load_completer, prepare

    off = Settings(model=str(tiny_model_path), persist_cache=False, threads=1, max_tokens=16,
                   min_confidence_percent=0)
    completer, _, _ = load_completer(off)
    try:
        doc = Document(URI, "python", 0, TEXT)
        # The rule off (the default): no token's probability is computed, nothing is known.
        plain = completer.run(prepare(doc, len(TEXT) - 1, None, off), CancelToken())
        assert plain.result.token_probabilities == [] and plain.certainty is None
        assert plain.confidence == 1.0
        settings = completer.settings = dataclasses.replace(off, min_confidence_percent=10)
        completion = completer.run(prepare(doc, len(TEXT) - 1, None, settings), CancelToken())
        assert completion.text == plain.text  # the same greedy text, with its probabilities
        result = completion.result
        assert result.generated_tokens > 0
        assert len(result.token_probabilities) == len(result.token_ends)
        assert len(result.token_probabilities) == result.generated_tokens
        assert all(0 < p <= 1 for p in result.token_probabilities)
        assert result.token_ends == sorted(result.token_ends)
        assert result.token_ends[-1] <= len(result.text)
        assert completion.certainty is not None and 0 < completion.confidence <= 1
        # The tokens that write the suggestion (not the healed characters), in its text.
        assert [end for end, _ in completion.certainty] == sorted(
            end for end, _ in completion.certainty)
        if "\n" not in completion.text:
            assert completion.confidence == pytest.approx(
                math.prod(p for _, p in completion.certainty))
    finally:
        completer.close()


def _inline(server: RawServer, line: int, character: int, invoked: bool) -> list[Any]:
    answer = server.call("textDocument/inlineCompletion", {
        "textDocument": {"uri": URI}, "position": {"line": line, "character": character},
        "context": {"triggerKind": 1 if invoked else 2}}, timeout=60)
    return answer["result"]["items"]


def test_an_unsure_suggestion_is_held_back_unless_asked_for(tiny_model_path: Path) -> None:
    """With `minConfidencePercent` 100 every answer of the tiny model is held back, fresh or
    typed along: an automatic request gets nothing, an explicit one the suggestion (and, typed
    along, its rest); with 0 (the default) the same request shows it."""
    server = RawServer(tiny_model_path)
    try:
        server.initialize({"minConfidencePercent": 100})
        server.wait_ready()
        server.notify("textDocument/didOpen", {"textDocument": {
            "uri": URI, "languageId": "python", "version": 1, "text": TEXT}})
        assert _inline(server, 1, 12, invoked=False) == []
        counters = server.call("lsp-complete/status", {})["result"]["counters"]
        assert counters["heldBack"] == 1 and counters["shown"] == 0
        shown = _inline(server, 1, 12, invoked=True)
        assert shown, "an explicit request shows what was held back"
        text = shown[0]["insertText"]
        assert text.startswith("a") and len(text) > 2  # the word `a`, then the model's text
        server.notify("textDocument/didChange", {
            "textDocument": {"uri": URI, "version": 2},
            "contentChanges": [{"range": {"start": {"line": 1, "character": 12},
                                          "end": {"line": 1, "character": 12}},
                                "text": text[1]}]})
        rest = _inline(server, 1, 13, invoked=True)  # typing-ahead, no model call
        assert rest and rest[0]["insertText"] == text[:2] + text[2:], (rest, text)
        server.notify("workspace/didChangeConfiguration",
                      {"settings": {"lspComplete": {"minConfidencePercent": 0}}})
        server.notify("textDocument/didChange", {
            "textDocument": {"uri": URI, "version": 3},
            "contentChanges": [{"text": TEXT.replace("return a", "return b")}]})
        assert _inline(server, 1, 12, invoked=False), "shown when the setting is 0"
    finally:
        server.close()
