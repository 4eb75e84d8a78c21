"""How sure the model is of a suggestion's first line, and the setting that holds back the
ones it is unsure of (`minConfidencePercent`): real llama.cpp on the tiny GGUF, and the real
server over stdio."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest

from lsp_complete.engine.base import GenerationResult
from lsp_complete.pipeline.completer import first_line_confidence
from tests.raw_lsp import RawServer

URI = "file:///work/conf.py"
TEXT = "def add(a, b):\n    return a\n"


def test_the_first_lines_tokens_make_the_confidence() -> None:
    result = GenerationResult(text="ab(c)\nnext", token_probabilities=[0.5, 0.8, 0.5, 0.1],
                              token_ends=[2, 5, 6, 10])
    assert first_line_confidence(result, 0) == pytest.approx(0.5 * 0.8 * 0.5)  # "\n" ends it
    one_line = GenerationResult(text="abc", token_probabilities=[0.5, 0.5], token_ends=[2, 3])
    assert first_line_confidence(one_line, 0) == pytest.approx(0.25)
    assert first_line_confidence(GenerationResult(text="remote"), 0) == 1.0  # none given
    # A healed start: the line break is looked for after the healed characters.
    healed = GenerationResult(text="\nx = 1\ny", token_probabilities=[0.9, 0.5, 0.2],
                              token_ends=[1, 6, 8])
    assert first_line_confidence(healed, 1) == pytest.approx(0.9 * 0.5 * 0.2)


def test_the_engine_gives_each_token_its_probability(tiny_model_path: Path) -> None:
    from lsp_complete.config import Settings
    from lsp_complete.documents import Document
    from lsp_complete.engine.base import CancelToken
    from lsp_complete.pipeline import load_completer, prepare

    settings = Settings(model=str(tiny_model_path), persist_cache=False, threads=1,
                        max_tokens=16)
    completer, _, _ = load_completer(settings)
    try:
        doc = Document(URI, "python", 0, TEXT)
        completion = completer.run(prepare(doc, len(TEXT) - 1, None, settings), CancelToken())
        result = completion.result
        assert result.generated_tokens > 0
        assert len(result.token_probabilities) == len(result.token_ends)
        assert len(result.token_probabilities) == result.generated_tokens
        assert all(0 < p <= 1 for p in result.token_probabilities)
        assert result.token_ends == sorted(result.token_ends)
        assert result.token_ends[-1] <= len(result.text)
        # The first token is one of the first line's: the product holds its probability.
        assert 0 < completion.confidence <= result.token_probabilities[0]
        if "\n" not in result.text:
            assert completion.confidence == pytest.approx(math.prod(result.token_probabilities))
    finally:
        completer.close()


def _inline(server: RawServer, line: int, character: int, invoked: bool) -> list[Any]:
    answer = server.call("textDocument/inlineCompletion", {
        "textDocument": {"uri": URI}, "position": {"line": line, "character": character},
        "context": {"triggerKind": 1 if invoked else 2}}, timeout=60)
    return answer["result"]["items"]


def test_an_unsure_suggestion_waits_until_the_user_types_along_it(
        tiny_model_path: Path) -> None:
    """With `minConfidencePercent` 100 every fresh answer of the tiny model is held back: an
    automatic request gets nothing, an explicit one the suggestion, and a key typed along it
    the rest (typing-ahead); by default (0) the same request shows it."""
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
        rest = _inline(server, 1, 13, invoked=False)
        assert rest and rest[0]["insertText"].endswith(text[2:]), (rest, text)
        server.notify("workspace/didChangeConfiguration",
                      {"settings": {"lspComplete": {"minConfidencePercent": 0}}})
        server.notify("textDocument/didChange", {
            "textDocument": {"uri": URI, "version": 3},
            "contentChanges": [{"text": TEXT.replace("return a", "return b")}]})
        assert _inline(server, 1, 12, invoked=False), "shown when the setting is 0"
    finally:
        server.close()
