"""The real `lsp-complete serve` (engine d), driven over stdio as an editor drives it.

Every keystroke is an incremental `didChange` (one character at the cursor) followed by an
automatic `inlineCompletion` request at the new cursor.  Per-request token counts come from the
server's `lsp-complete/status` (its `recent` list, matched by uri and version).  Versions are
chosen by the client, so each episode uses its own version range and never collides with an
earlier episode on the same file.  The LSP messages are `lsp_complete.testing.lsp_client`'s; this
module owns the process (its stderr, startup time, peak memory) and the bench's records.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time
from collections.abc import Awaitable
from pathlib import Path
from typing import Any, NamedTuple, Protocol, TypeVar

from lsprotocol import types
from pygls.exceptions import JsonRpcException, JsonRpcRequestCancelled
from pygls.lsp.client import LanguageClient

from lsp_complete.bench.records import Completion, read_cpu_s, read_hwm_mb
from lsp_complete.server.protocol import BLOCK_READY_METHOD, NEXT_EDIT_READY_METHOD
from lsp_complete.testing import lsp_client

READY_TIMEOUT_S = 300.0
REQUEST_TIMEOUT_S = 300.0
STOP_TIMEOUT_S = 60.0

T = TypeVar("T")


class ServerExited(RuntimeError):
    """The server process ended before it answered: pygls fails the requests pending then,
    but one sent afterwards would wait for ever."""


def _ignore_notification(_client: LanguageClient, _params: Any) -> None:
    pass


class InlineAnswer(NamedTuple):
    """An inline request's answer as the client sees it."""

    suggestion: str  # what the first item adds at the cursor
    latency_ms: float
    error: str | None  # a server error answers one request; it is recorded, not fatal
    # Characters after the cursor the item replaces: the closers its text writes again in
    # their place (replaceLineSuffix); 0: it is inserted at the cursor.
    replaced: int = 0


class Session(Protocol):
    """What a driver types into: an `lsp-complete serve` (ServerSession) or a stateless
    baseline answering in this process (servers.StatelessSession)."""

    async def start(self) -> float: ...
    async def stop(self) -> None: ...
    async def status(self, recent: int | None = None) -> dict[str, Any]: ...
    def open(self, uri: str, language_id: str, text: str, version: int) -> None: ...
    def insert(self, uri: str, version: int, position: types.Position, text: str) -> None: ...
    def replace(self, uri: str, version: int, where: types.Range, text: str) -> None: ...
    def move_cursor(self, uri: str, position: types.Position) -> None: ...
    def cursor_rests(self, uri: str, position: types.Position) -> None: ...
    def close(self, uri: str) -> None: ...
    async def inline(self, uri: str, text: str, offset: int) -> InlineAnswer: ...
    def cancel_pending(self) -> None: ...
    def peak_rss_mb(self) -> float | None: ...
    def cpu_s(self) -> float | None: ...
    @property
    def running(self) -> bool: ...


class ServerSession:
    """One `lsp-complete serve` process and the client talking to it."""

    def __init__(
        self,
        model_path: str,
        init_options: dict[str, Any],
        env: dict[str, str] | None = None,
        log_path: Path | None = None,
        workspace_folders: list[str] | None = None,
        python: str | None = None,
        cwd: str | None = None,
    ) -> None:
        self.model_path = model_path
        # The interpreter that runs `-m lsp_complete serve` (None: this one), and the folder it
        # runs in: another version's virtual environment, where no checkout can shadow it.
        self.python = python
        self.cwd = cwd
        self.init_options = init_options
        self.workspace_folders = workspace_folders  # folder URIs: the server's workspace roots
        self.env = env
        self.log_path = log_path
        self.client = LanguageClient("lsp-complete-bench", "1")
        # Without a handler pygls warns on the bench's terminal about each: the server's log
        # lines (its stderr, which the bench keeps, has them too), our notifications that a
        # block or a next edit is ready (a generic client and sidekick.nvim ignore them), an
        # older version's popup about a setting it does not know (replaceLineSuffix; the log
        # has it).
        for method in (types.WINDOW_LOG_MESSAGE, BLOCK_READY_METHOD, NEXT_EDIT_READY_METHOD,
                       types.WINDOW_SHOW_MESSAGE):
            self.client.feature(method)(_ignore_notification)
        self._stderr_task: asyncio.Task[None] | None = None
        self._asked = 0  # inline requests sent: their ids
        self._pending: set[str] = set()  # the ids of those not answered yet
        self._offers_highlights = False  # documentHighlightProvider, from initialize

    @property
    def pid(self) -> int | None:
        server = self.client._server
        return server.pid if server is not None else None

    async def start(self) -> float:
        """Start, initialize and wait for the model; returns the milliseconds that took."""
        begin = time.perf_counter()
        await lsp_client.launch(self.client, self.model_path, env=self.env, python=self.python,
                                cwd=self.cwd)
        self._stderr_task = asyncio.create_task(self._drain_stderr())
        capabilities = lsp_client.client_capabilities(
            encodings=[types.PositionEncodingKind.Utf16], inline_completion=True
        )
        answer = await self._answer(lsp_client.initialize(
            self.client,
            lsp_client.initialize_params(self.init_options, capabilities, process_id=os.getpid(),
                                         workspace_folders=self.workspace_folders),
        ), READY_TIMEOUT_S)
        self._offers_highlights = bool(answer.capabilities.document_highlight_provider)
        await self._answer(self._wait_ready(), READY_TIMEOUT_S)
        return (time.perf_counter() - begin) * 1000

    async def _drain_stderr(self) -> None:
        """Read the server's stderr so a chatty log can never fill the pipe and block it."""
        server = self.client._server
        if server is None or server.stderr is None:
            return
        with (self.log_path or Path(os.devnull)).open("ab") as sink:
            while line := await server.stderr.readline():
                sink.write(line)

    async def _wait_ready(self) -> None:
        model = await lsp_client.wait_for_model(self.client, ("ready", "error"), READY_TIMEOUT_S)
        state = model.get("state")
        if state == "error":
            raise RuntimeError(f"lsp-complete could not load the model: {model.get('error')}")
        if state != "ready":
            raise TimeoutError(f"model state stayed {state!r}")

    async def _answer(self, request: Awaitable[T], timeout_s: float) -> T:
        """`request`'s answer; ServerExited as soon as the process has ended, TimeoutError
        after `timeout_s`."""
        server = self.client._server
        exited = asyncio.ensure_future(server.wait() if server is not None
                                       else asyncio.sleep(0))
        asked = asyncio.ensure_future(request)
        try:
            done, _ = await asyncio.wait({asked, exited}, timeout=timeout_s,
                                         return_when=asyncio.FIRST_COMPLETED)
        finally:
            exited.cancel()
        if asked in done and (asked.exception() is None or self.running):
            return asked.result()
        asked.cancel()  # (a request the exit failed raises pygls' RuntimeError: ours instead)
        if not self.running:
            raise ServerExited(self.exit_reason())
        raise TimeoutError(f"no answer from the server in {timeout_s:.0f} s")

    def exit_reason(self) -> str:
        """How the process ended, and where its log is."""
        server = self.client._server
        code = server.returncode if server is not None else None
        how = f"exited with code {code}"
        if code is not None and code < 0:
            with contextlib.suppress(ValueError):
                how = f"was killed by {signal.Signals(-code).name}"
        return f"the server {how}" + (f"; its log: {self.log_path}" if self.log_path else "")

    async def status(self, recent: int | None = None) -> dict[str, Any]:
        return await self._answer(lsp_client.status(self.client, recent), REQUEST_TIMEOUT_S)

    def _alive(self) -> LanguageClient:
        """The client, to send a notification with; ServerExited once the process ended."""
        if not self.running:
            raise ServerExited(self.exit_reason())
        return self.client

    def open(self, uri: str, language_id: str, text: str, version: int) -> None:
        lsp_client.open_doc(self._alive(), uri, text, language_id, version)

    def insert(self, uri: str, version: int, position: types.Position, text: str) -> None:
        lsp_client.insert(self._alive(), uri, version, position.line, position.character, text)

    def replace(self, uri: str, version: int, where: types.Range, text: str) -> None:
        lsp_client.replace(self._alive(), uri, version, where, text)

    def move_cursor(self, uri: str, position: types.Position) -> None:
        lsp_client.move_cursor(self._alive(), uri, position.line, position.character)

    def cursor_rests(self, uri: str, position: types.Position) -> None:
        """What an editor that highlights occurrences asks every server that offers them once
        the cursor rests (textDocument/documentHighlight); nothing for a server that does not.
        The answer is not awaited: the highlights are not measured."""
        if self._offers_highlights:
            self._alive().protocol.send_request(
                types.TEXT_DOCUMENT_DOCUMENT_HIGHLIGHT,
                types.DocumentHighlightParams(text_document=types.TextDocumentIdentifier(uri),
                                              position=position))

    def close(self, uri: str) -> None:
        lsp_client.close_doc(self._alive(), uri)

    async def inline(self, uri: str, text: str, offset: int) -> InlineAnswer:
        """Request a suggestion at `offset` of `text`."""
        position = lsp_client.position_at(text, offset)
        self._asked += 1
        request_id = f"inline-{self._asked}"
        self._pending.add(request_id)
        start = time.perf_counter()
        try:
            answer = await self._answer(
                self.client.protocol.send_request_async(
                    types.TEXT_DOCUMENT_INLINE_COMPLETION,
                    lsp_client.inline_params(uri, position.line, position.character),
                    msg_id=request_id),
                REQUEST_TIMEOUT_S,
            )
        except JsonRpcRequestCancelled:  # the client cancelled it: no suggestion, no error
            return InlineAnswer("", (time.perf_counter() - start) * 1000, None)
        except JsonRpcException as exc:
            return InlineAnswer("", (time.perf_counter() - start) * 1000, str(exc))
        finally:
            self._pending.discard(request_id)
        latency = (time.perf_counter() - start) * 1000
        line_prefix = lsp_client.line_before(text, offset)
        return InlineAnswer(lsp_client.suggestion_from_answer(answer, line_prefix), latency, None,
                            lsp_client.replaced_after(answer, text, offset))

    def cancel_pending(self) -> None:
        """$/cancelRequest for every inline request not answered yet, as VS Code's
        languageclient does with the provider's token when it asks again."""
        for request_id in sorted(self._pending):
            self._alive().protocol.notify(types.CANCEL_REQUEST,
                                          types.CancelParams(id=request_id))

    def peak_rss_mb(self) -> float | None:
        return read_hwm_mb(self.pid) if self.pid else None

    def cpu_s(self) -> float | None:
        """The server process's CPU seconds so far (all its threads)."""
        return read_cpu_s(self.pid) if self.pid else None

    @property
    def running(self) -> bool:
        server = self.client._server
        return server is not None and server.returncode is None

    async def stop(self) -> None:
        """shutdown + exit, waiting for the process (it persists KV caches on shutdown)."""
        try:
            if self.running:
                await self._answer(lsp_client.shutdown(self.client, STOP_TIMEOUT_S),
                                   STOP_TIMEOUT_S)
            await asyncio.wait_for(self.client.stop(), 30)
        except (TimeoutError, RuntimeError, ConnectionError):
            server = self.client._server
            if server is not None and server.returncode is None:
                server.kill()
                await server.wait()
        if self._stderr_task is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._stderr_task, 5)


def stats_by_version(status: dict[str, Any], uri: str) -> dict[int, dict[str, Any]]:
    """The server's per-request records for `uri`, keyed by document version (last wins)."""
    return {record["version"]: record for record in status.get("recent") or []
            if record.get("uri") == uri and isinstance(record.get("version"), int)}


async def ask(session: Session, uri: str, version: int, text: str, offset: int,
              opened_at: float | None = None) -> tuple[Completion, str | None]:
    """One inline request at `offset` of `text` (the document at `version`), with the server's
    record of it, and its error; its latency runs from `opened_at` (the event loop's time at
    didOpen) when given, else from the request."""
    suggestion, latency, error, _ = await session.inline(uri, text, offset)
    if opened_at is not None:
        latency = (asyncio.get_running_loop().time() - opened_at) * 1000
    record = stats_by_version(await session.status(), uri).get(version)
    return completion_with_stats(suggestion, latency, record, error), error


def completion_with_stats(
    suggestion: str, latency_ms: float, record: dict[str, Any] | None, error: str | None = None
) -> Completion:
    """An answer with the server's record of it (None: no record, no token counts)."""
    if error is not None:
        return Completion(text="", latency_ms=latency_ms, source="error")
    record = record or {}
    return Completion(
        text=suggestion,
        latency_ms=latency_ms,
        prompt_tokens=record.get("promptTokens"),
        encoded_tokens=record.get("encodedTokens"),
        generated_tokens=record.get("generatedTokens"),
        source=record.get("source", "model" if suggestion else "empty"),
    )
