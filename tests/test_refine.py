"""A keystroke answered from a smaller prompt, once the model is asked again in the file, is
answered again from a richer one (issue 30: the keys after it get the richer prompt's
quality through typing-ahead). The server runs in this process on a stand-in completer whose second
answer differs from its first; the real engine's part is in test_prompt_cache.py."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from lsprotocol import types

from lsp_complete.engine.base import CancelToken, GenerationResult
from lsp_complete.pipeline import Completion, Prepared
from lsp_complete.server.completion import Suggestion
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


def type_at(server: CompletionServer, version: int, at: types.Position, text: str) -> None:
    server.files.change(types.DidChangeTextDocumentParams(
        text_document=types.VersionedTextDocumentIdentifier(uri=URI, version=version),
        content_changes=[types.TextDocumentContentChangePartial(
            range=types.Range(start=at, end=at), text=text)]))


async def test_the_keys_typed_on_get_the_richer_answer() -> None:
    server, completer, told = serve()
    first_spot = types.Position(line=LINE, character=CHARACTER)
    at = types.Position(line=LINE, character=CHARACTER + 1)
    try:
        open_file(server)
        first = await server.suggester.suggestion(URI, first_spot)
        assert first is not None and first.insert == "val" + "ue + 1"
        # The file's first small answer: typing-ahead serves it on; nothing is climbed yet.
        await asyncio.sleep(0.1)
        assert completer.refined == [] and server.telemetry.counters["refined"] == 0
        # A key that leaves it: the model is asked again (small, at once), then the spot
        # again from the richer prompt.
        type_at(server, 2, first_spot, "x")
        second = await server.suggester.suggestion(URI, at)
        assert second is not None and second.insert == "valx" + "ue + 1"
        await refined(server)
        assert [c.text for c in completer.refined] == ["ue + 1"]
        assert server.telemetry.counters["refinedChanged"] == 1
        assert told == [(BLOCK_READY_METHOD, {"textDocument": {"uri": URI, "version": 2},
                                              "position": {"line": LINE,
                                                           "character": CHARACTER + 1}})]
        # Asked again at the spot (our clients, told), or typed on through it: the new one.
        again = await server.suggester.suggestion(URI, at)
        assert again is not None and again.insert == "valx" + "ue * 2"
        type_at(server, 3, at, "u")
        typed_on = await server.suggester.suggestion(
            URI, types.Position(line=LINE, character=CHARACTER + 2))
        assert typed_on is not None and typed_on.insert == "valxu" + "e * 2"
        assert server.telemetry.counters["typeahead"] == 2  # neither asked the model
    finally:
        server.scheduler.stop()


async def asked_twice(server: CompletionServer,
                      between: Callable[[], None] = lambda: None) -> Suggestion | None:
    """The model asked at the spot, then (after `between`) again after a key that left its
    suggestion: the second answer."""
    first_spot = types.Position(line=LINE, character=CHARACTER)
    await server.suggester.suggestion(URI, first_spot)
    between()
    type_at(server, 2, first_spot, "x")
    return await server.suggester.suggestion(
        URI, types.Position(line=LINE, character=CHARACTER + 1))


async def test_the_same_answer_again_tells_the_client_nothing() -> None:
    server, _, told = serve(again="ue + 1")
    try:
        open_file(server)
        await asked_twice(server)
        await refined(server)
        assert server.telemetry.counters["refinedChanged"] == 0 and told == []
    finally:
        server.scheduler.stop()


async def test_an_answer_from_the_full_prompt_is_not_answered_again() -> None:
    server, completer, _ = serve()
    completer.run = lambda *_a, **_k: answer("ue + 1", 400, full_prompt=True)  # type: ignore[method-assign]
    try:
        open_file(server)
        await asked_twice(server)
        await asyncio.sleep(0.2)
        assert completer.refined == [] and server.telemetry.counters["refined"] == 0
    finally:
        server.scheduler.stop()


class SettingsChange(SmallThenRich):
    """Changes the settings (on the loop) while it answers a keystroke (`in_run`) or answers
    the spot again (`in_refine`)."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        super().__init__()
        self.loop = loop
        self.server: CompletionServer | None = None
        self.in_run = self.in_refine = False

    def _change(self) -> None:  # (on the worker; the change lands on the loop meanwhile)
        assert self.server is not None
        asyncio.run_coroutine_threadsafe(
            self.server.apply_settings({"replaceLineSuffix": True}), self.loop).result(5)

    def run(self, prepared: Prepared, cancel: CancelToken, progress: Any = None) -> Completion:
        if self.in_run:
            self._change()
        return super().run(prepared, cancel, progress)

    def refine(self, prepared: Prepared, primary: Completion,
               cancel: CancelToken) -> Completion | None:
        if self.in_refine:
            self._change()
        return super().refine(prepared, primary, cancel)


def serve_changing() -> tuple[CompletionServer, SettingsChange, list[Any]]:
    server, _, told = serve()
    completer = SettingsChange(asyncio.get_running_loop())
    completer.server = server
    server.model.completer = completer  # type: ignore[assignment]
    return server, completer, told


def remembered_after_valx(server: CompletionServer) -> str | None:
    text = server.files.get(URI).doc.text  # type: ignore[union-attr]
    cursor = text.index("return valx") + len("return valx")
    return server.typeahead.lookup(URI, text[:cursor], text[cursor:])


async def test_a_change_of_settings_while_a_keystroke_is_answered_keeps_nothing() -> None:
    """The settings changed (and typing-ahead was cleared) while the model answered a
    keystroke: that answer was shaped by the old settings, and its item would be placed by
    the new ones, so it is neither sent nor kept for typing-ahead (though it ends after the
    clear), and nothing is climbed from it."""
    server, completer, told = serve_changing()
    try:
        open_file(server)
        second = await asked_twice(server, lambda: setattr(completer, "in_run", True))
        assert second is None
        assert server.settings.replace_line_suffix
        await asyncio.sleep(0.1)
        assert completer.refined == [] and remembered_after_valx(server) is None
        assert server.telemetry.counters["superseded"] == 1 and told == []
    finally:
        server.scheduler.stop()


async def test_a_change_of_settings_while_the_spot_is_answered_again_keeps_nothing() -> None:
    """The settings changed while the climb answered a keystroke's spot again: built on the
    keystroke's prompt, that answer was shaped by the old settings, and is not kept for
    typing-ahead (the keystroke's own answer was cleared with the rest), nor announced."""
    server, completer, told = serve_changing()
    try:
        open_file(server)
        second = await asked_twice(server, lambda: setattr(completer, "in_refine", True))
        assert second is not None and second.insert == "valx" + "ue + 1"
        for _ in range(200):  # until the climb has answered again and ended
            if completer.refined and server.scheduler.idle:
                break
            await asyncio.sleep(0.01)
        assert [c.text for c in completer.refined] == ["ue + 1"]
        assert server.settings.replace_line_suffix
        assert remembered_after_valx(server) is None
        assert server.telemetry.counters["refined"] == 0 and told == []
    finally:
        server.scheduler.stop()
