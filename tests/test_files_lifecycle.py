"""An open file's life in the server (issue 29): work on the worker for a file that the event
loop closes meanwhile leaves nothing behind for the closed file. The server runs in this
process on a stand-in completer; each close lands, on the event loop, at the worst moment of
the worker's work."""

from __future__ import annotations

import asyncio
import dataclasses
import threading
from collections.abc import Callable
from typing import Any

from lsprotocol import types

from lsp_complete.certainty import Certainty
from lsp_complete.config import Settings
from lsp_complete.context.limits import RepoContext, RepoFile
from lsp_complete.engine.base import CancelToken, GenerationResult
from lsp_complete.pipeline import Completion, Prepared, Switch
from lsp_complete.server.completion_server import CompletionServer
from lsp_complete.typeahead import TypeAhead

URI = "file:///w/a.py"
TEXT = "import os\n\n\ndef main():\n    value = os.getcwd()\n    return val\n"
LINE, CHARACTER = 5, len("    return val")


class FakeCompleter:
    """What the server asks of a completer, answering at once; `on_warm_spot` runs on the
    worker in the middle of idle work at a spot."""

    def __init__(self) -> None:
        self.on_warm_spot: Callable[[], None] = lambda: None
        self.spots = 0  # idle work at a spot, started
        self.looks = 0  # idle work at a resting cursor, started

    def model_changed(self) -> str | None:
        return None

    def run(self, prepared: Prepared, cancel: CancelToken, progress: Any = None) -> Completion:
        return Completion(text="ue + 1", raw="ue + 1", result=GenerationResult(text="ue + 1"),
                          prompt_tokens=1)

    def restore(self, *_args: Any) -> bool:
        return False

    def warm_spot(self, prepared: Prepared, active: RepoContext | None,
                  candidate: Callable[[], RepoContext | None],
                  cancel: CancelToken) -> Switch | None:
        self.spots += 1
        self.on_warm_spot()
        return Switch(RepoContext("w", "a.py", (RepoFile("b.py", "x = 1\n", "definitions"),)),
                      12)

    def warm_look(self, *_args: Any) -> bool:
        self.looks += 1
        return True

    def climb(self, *_args: Any) -> int:
        return 0

    def block(self, *_args: Any) -> None:
        return None

    def persist(self, _key: str) -> None:
        pass

    def forget(self, _key: str) -> None:
        pass


def close_on_the_loop(server: CompletionServer, loop: asyncio.AbstractEventLoop) -> None:
    """From the worker: have the event loop close the file, and give it the time to."""
    done = threading.Event()

    def close() -> None:
        server.files.close(URI)
        done.set()

    loop.call_soon_threadsafe(close)
    done.wait(0.3)  # at once, unless the close must wait for the worker to finish


def make_server() -> tuple[CompletionServer, FakeCompleter]:
    server = CompletionServer()
    server.settings = server.launch_settings = Settings(
        persist_cache=False, debounce_ms=0, idle_reanchor_ms=10_000, repo_context_tokens=256)
    completer = FakeCompleter()
    server.model.completer = completer  # type: ignore[assignment]
    server.model.state = "ready"
    return server, completer


def open_file(server: CompletionServer) -> None:
    server.files.open(types.TextDocumentItem(uri=URI, language_id="python", version=1,
                                             text=TEXT))


async def test_a_close_while_a_suggestion_is_remembered_leaves_no_typing_ahead() -> None:
    """The worker checked the file was open, then remembered the suggestion for typing-ahead;
    a close between the two left an entry for the closed file (served if it is opened again
    with the same text, whatever model made it)."""
    loop = asyncio.get_running_loop()

    class ClosingTypeAhead(TypeAhead):
        def remember(self, uri: str, before: str, after: str, text: str,
                     certainty: Certainty | None = None, *, generation: int) -> bool:
            close_on_the_loop(server, loop)
            return super().remember(uri, before, after, text, certainty,
                                    generation=generation)

    server, _ = make_server()
    server.typeahead.__class__ = ClosingTypeAhead  # (the one every part holds)
    try:
        open_file(server)
        found = await server.suggester.suggestion(
            URI, types.Position(line=LINE, character=CHARACTER))
        assert found is None  # closed while computing: stale
        await asyncio.sleep(0.05)
        assert URI not in server.files
        before = TEXT[: TEXT.index("return val") + len("return val")]
        after = TEXT[len(before):]
        assert server.typeahead.lookup(URI, before, after) is None
    finally:
        server.scheduler.stop()


async def test_a_close_during_idle_work_at_a_spot_leaves_no_repository_block() -> None:
    """Idle work checked the file was current, encoded its spot and chose a new repository
    block; the file closed meanwhile must not keep it."""
    loop = asyncio.get_running_loop()
    server, completer = make_server()
    warmed = asyncio.Event()

    def close_then_return() -> None:
        close_on_the_loop(server, loop)
        loop.call_soon_threadsafe(warmed.set)

    completer.on_warm_spot = close_then_return
    server.settings = dataclasses.replace(server.settings, idle_reanchor_ms=0)
    try:
        open_file(server)
        # An answer: its spot is prepared whole once the cursor rests (at once here).
        await server.suggester.suggestion(URI, types.Position(line=LINE, character=CHARACTER))
        await asyncio.wait_for(warmed.wait(), 5)
        await asyncio.sleep(0.1)  # the worker applies its switch, if it still does
        assert URI not in server.files
        assert server.repo.describe(URI) is None
    finally:
        server.scheduler.stop()


async def test_closing_a_file_is_one_method_that_also_ends_its_next_edit_work() -> None:
    """`OpenFiles.close` is the whole close: a next edit planned for the file's pause is
    dropped with it, whoever closes it (didClose, or a TCP session that ends)."""
    server, _ = make_server()
    server.settings = Settings(persist_cache=False, next_edit="on", next_edit_delay_ms=60_000)
    try:
        open_file(server)
        server.next_edits.edited(URI)
        assert URI in server.next_edits._timers  # planned for the pause
        server.files.close(URI)
        assert URI not in server.next_edits._timers
    finally:
        server.scheduler.stop()


async def test_a_rest_reported_twice_or_a_pause_in_typing_prepares_nothing_more() -> None:
    """A client may say where the cursor rests twice (our VS Code extension's didMoveCursor,
    then VS Code's documentHighlight): the second report does not restart the preparation.
    A report where the last request was (a pause in typing, the prompt anchored lines above)
    leaves that answer's own idle work alone; after an edit there, it prepares again."""
    server, completer = make_server()
    try:
        open_file(server)
        server.files.cursor_moved(URI, 1, 0)
        await asyncio.sleep(0.2)
        assert completer.looks == 1
        server.files.cursor_moved(URI, 1, 0)
        await asyncio.sleep(0.2)
        assert completer.looks == 1
        for line, character in ((LINE - 1, len("    value = os.getcwd()")), (LINE, CHARACTER)):
            await server.suggester.suggestion(URI, types.Position(line=line,
                                                                  character=character))
        server.files.cursor_moved(URI, LINE, CHARACTER)
        await asyncio.sleep(0.2)
        assert completer.looks == 1
        server.files.change(types.DidChangeTextDocumentParams(
            text_document=types.VersionedTextDocumentIdentifier(uri=URI, version=2),
            content_changes=[types.TextDocumentContentChangePartial(
                range=types.Range(start=types.Position(line=0, character=0),
                                  end=types.Position(line=0, character=0)), text="#\n")]))
        server.files.cursor_moved(URI, LINE + 1, CHARACTER)
        await asyncio.sleep(0.2)
        assert completer.looks == 2
    finally:
        server.scheduler.stop()
