"""A keystroke answered from a smaller prompt is answered again from a richer one (issue 30:
the first answer at a new spot at the small prompt's speed, the keys after it with the rich
prompt's quality). The server runs in this process on a stand-in completer whose second
answer differs from its first; the real engine's part is in test_prompt_cache.py."""

from __future__ import annotations

import asyncio
from typing import Any

from lsprotocol import types

from lsp_complete.engine.base import CancelToken, GenerationResult
from lsp_complete.pipeline import Completion, Prepared
from lsp_complete.server.completion_server import CompletionServer
from lsp_complete.server.protocol import BLOCK_READY_METHOD
from tests.test_files_lifecycle import LINE, URI, FakeCompleter, make_server, open_file

CHARACTER = len("    return val")


def answer(text: str, prompt_tokens: int, full_prompt: bool) -> Completion:
    return Completion(text=text, raw=text, result=GenerationResult(text=text),
                      prompt_tokens=prompt_tokens, full_prompt=full_prompt)


class SmallThenRich(FakeCompleter):
    """Answers from a small prompt; its climb answers again from a richer one."""

    def __init__(self, again: str = "ue * 2") -> None:
        super().__init__()
        self.again = again
        self.refined: list[Completion] = []

    def run(self, prepared: Prepared, cancel: CancelToken, progress: Any = None) -> Completion:
        return answer("ue + 1", 48, full_prompt=False)

    def refine(self, prepared: Prepared, primary: Completion,
               cancel: CancelToken) -> Completion | None:
        self.refined.append(primary)
        return answer(self.again, 400, full_prompt=False)


def serve(again: str = "ue * 2") -> tuple[CompletionServer, SmallThenRich, list[Any]]:
    server, _ = make_server()
    completer = SmallThenRich(again)
    server.model.completer = completer  # type: ignore[assignment]
    told: list[Any] = []
    server.client.notify = lambda method, params: told.append((method, params))  # type: ignore[method-assign]
    return server, completer, told


async def refined(server: CompletionServer, count: int = 1) -> None:
    for _ in range(200):
        if server.telemetry.counters["refined"] >= count:
            return
        await asyncio.sleep(0.01)
    raise AssertionError("the spot was not answered again")


async def test_the_keys_typed_on_get_the_richer_answer() -> None:
    server, completer, told = serve()
    at = types.Position(line=LINE, character=CHARACTER)
    try:
        open_file(server)
        first = await server.suggester.suggestion(URI, at)
        assert first is not None and first.insert == "val" + "ue + 1"  # at once, the small one
        await refined(server)
        assert [c.text for c in completer.refined] == ["ue + 1"]
        assert server.telemetry.counters["refinedChanged"] == 1
        assert told == [(BLOCK_READY_METHOD, {"textDocument": {"uri": URI, "version": 1},
                                              "position": {"line": LINE,
                                                           "character": CHARACTER}})]
        # Asked again at the spot (our clients, told), or typed on through it: the new one.
        again = await server.suggester.suggestion(URI, at)
        assert again is not None and again.insert == "val" + "ue * 2"
        server.files.change(types.DidChangeTextDocumentParams(
            text_document=types.VersionedTextDocumentIdentifier(uri=URI, version=2),
            content_changes=[types.TextDocumentContentChangePartial(
                range=types.Range(start=at, end=at), text="u")]))
        typed_on = await server.suggester.suggestion(
            URI, types.Position(line=LINE, character=CHARACTER + 1))
        assert typed_on is not None and typed_on.insert == "valu" + "e * 2"
        assert server.telemetry.counters["typeahead"] == 2  # neither asked the model
    finally:
        server.scheduler.stop()


async def test_the_same_answer_again_tells_the_client_nothing() -> None:
    server, _, told = serve(again="ue + 1")
    try:
        open_file(server)
        await server.suggester.suggestion(URI, types.Position(line=LINE, character=CHARACTER))
        await refined(server)
        assert server.telemetry.counters["refinedChanged"] == 0 and told == []
    finally:
        server.scheduler.stop()


async def test_an_answer_from_the_full_prompt_is_not_answered_again() -> None:
    server, completer, _ = serve()
    completer.run = lambda *_a, **_k: answer("ue + 1", 400, full_prompt=True)  # type: ignore[method-assign]
    try:
        open_file(server)
        found = await server.suggester.suggestion(
            URI, types.Position(line=LINE, character=CHARACTER))
        assert found is not None
        await asyncio.sleep(0.2)
        assert completer.refined == [] and server.telemetry.counters["refined"] == 0
    finally:
        server.scheduler.stop()
