"""Engine (d): the real `lsp-complete serve`, driven over stdio as an editor drives it.

Every keystroke is an incremental `didChange` (one character at the cursor) followed by an
automatic `inlineCompletion` request at the new cursor.  Per-request token counts come from the
server's `lsp-complete/status` (its `recent` list, matched by uri and version).  Versions are
chosen by the client, so each episode uses its own version range and never collides with an
earlier episode on the same file.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
import time
from pathlib import Path
from typing import Any

from lsprotocol import types
from pygls.exceptions import JsonRpcException
from pygls.lsp.client import LanguageClient

from lsp_complete.bench.records import Completion, read_hwm_mb

READY_TIMEOUT_S = 300.0
REQUEST_TIMEOUT_S = 300.0


def utf16_len(text: str) -> int:
    return len(text.encode("utf-16-le")) // 2


def position_at(text: str, offset: int) -> types.Position:
    """LSP position (UTF-16 columns, the protocol default) of a code-point offset."""
    line = text.count("\n", 0, offset)
    line_start = text.rfind("\n", 0, offset) + 1
    return types.Position(line=line, character=utf16_len(text[line_start:offset]))


def plain(obj: Any) -> Any:
    """pygls turns results of custom methods into namedtuples; make them dicts and lists."""
    if hasattr(obj, "_asdict"):
        return {key: plain(value) for key, value in obj._asdict().items()}
    if isinstance(obj, dict):
        return {key: plain(value) for key, value in obj.items()}
    if isinstance(obj, list | tuple):
        return [plain(value) for value in obj]
    return obj


def suggestion_from_answer(answer: Any, line_prefix: str) -> str:
    """The text the first item adds at the cursor.

    An item whose range starts before the cursor replaces the already typed part of the line
    with its insertText (the spec's preferred form): strip that part again.
    """
    items = answer.items if isinstance(answer, types.InlineCompletionList) else answer or []
    if not items:
        return ""
    item = items[0]
    text = item.insert_text if isinstance(item.insert_text, str) else item.insert_text.value
    if item.range is None:
        return text
    start = _code_points_from_utf16(line_prefix, item.range.start.character)
    typed = line_prefix[start:]
    return text[len(typed) :] if text.startswith(typed) else text


def move_cursor(client: LanguageClient, uri: str, position: types.Position) -> None:
    """What lsp-complete's editor plugins send when the cursor comes to rest."""
    client.protocol.notify("lsp-complete/didMoveCursor", {
        "textDocument": {"uri": uri},
        "position": {"line": position.line, "character": position.character},
    })


def _code_points_from_utf16(line: str, units: int) -> int:
    count = 0
    for index, char in enumerate(line):
        if count >= units:
            return index
        count += 2 if ord(char) > 0xFFFF else 1
    return len(line)


class ServerSession:
    """One `lsp-complete serve` process and the client talking to it."""

    def __init__(
        self,
        model_path: str,
        init_options: dict[str, Any],
        env: dict[str, str] | None = None,
        log_path: Path | None = None,
    ) -> None:
        self.model_path = model_path
        self.init_options = init_options
        self.env = env
        self.log_path = log_path
        self.client = LanguageClient("lsp-complete-bench", "1")
        self.startup_ms = 0.0
        self._stderr_task: asyncio.Task | None = None

    @property
    def pid(self) -> int | None:
        server = self.client._server
        return server.pid if server is not None else None

    async def start(self) -> float:
        """Start, initialize and wait for the model; returns the milliseconds that took."""
        begin = time.perf_counter()
        cmd = [sys.executable, "-m", "lsp_complete", "serve", "--model", self.model_path]
        await self.client.start_io(*cmd, env=self.env)
        self._stderr_task = asyncio.create_task(self._drain_stderr())
        await self.client.initialize_async(
            types.InitializeParams(
                process_id=os.getpid(),
                capabilities=types.ClientCapabilities(
                    general=types.GeneralClientCapabilities(
                        position_encodings=[types.PositionEncodingKind.Utf16]
                    ),
                    text_document=types.TextDocumentClientCapabilities(
                        inline_completion=types.InlineCompletionClientCapabilities()
                    ),
                ),
                initialization_options=self.init_options,
            )
        )
        self.client.initialized(types.InitializedParams())
        await self._wait_ready()
        self.startup_ms = (time.perf_counter() - begin) * 1000
        return self.startup_ms

    async def _drain_stderr(self) -> None:
        """Read the server's stderr so a chatty log can never fill the pipe and block it."""
        server = self.client._server
        if server is None or server.stderr is None:
            return
        sink = self.log_path.open("ab") if self.log_path else None
        try:
            while line := await server.stderr.readline():
                if sink:
                    sink.write(line)
        finally:
            if sink:
                sink.close()

    async def _wait_ready(self) -> None:
        deadline = time.monotonic() + READY_TIMEOUT_S
        while True:
            model = (await self.status()).get("model") or {}
            state = model.get("state")
            if state == "ready":
                return
            if state == "error":
                raise RuntimeError(f"lsp-complete could not load the model: {model.get('error')}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"model state stayed {state!r}")
            await asyncio.sleep(0.05)

    async def status(self) -> dict[str, Any]:
        result = await self.client.protocol.send_request_async("lsp-complete/status", {})
        return plain(result) or {}

    def open(self, uri: str, language_id: str, text: str, version: int) -> None:
        self.client.text_document_did_open(
            types.DidOpenTextDocumentParams(
                text_document=types.TextDocumentItem(
                    uri=uri, language_id=language_id, version=version, text=text
                )
            )
        )

    def insert(self, uri: str, version: int, position: types.Position, text: str) -> None:
        self.client.text_document_did_change(
            types.DidChangeTextDocumentParams(
                text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=version),
                content_changes=[
                    types.TextDocumentContentChangePartial(
                        range=types.Range(start=position, end=position), text=text
                    )
                ],
            )
        )

    def replace_all(self, uri: str, version: int, text: str) -> None:
        self.client.text_document_did_change(
            types.DidChangeTextDocumentParams(
                text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=version),
                content_changes=[types.TextDocumentContentChangeWholeDocument(text=text)],
            )
        )

    def move_cursor(self, uri: str, position: types.Position) -> None:
        move_cursor(self.client, uri, position)

    def close(self, uri: str) -> None:
        self.client.text_document_did_close(
            types.DidCloseTextDocumentParams(text_document=types.TextDocumentIdentifier(uri=uri))
        )

    async def inline(self, uri: str, text: str, offset: int) -> tuple[str, float, str | None]:
        """Request a suggestion at `offset` of `text`.

        Returns (suggestion, client latency ms, error): a server error answers one request, it
        is recorded in the samples rather than ending the run.
        """
        params = types.InlineCompletionParams(
            text_document=types.TextDocumentIdentifier(uri=uri),
            position=position_at(text, offset),
            context=types.InlineCompletionContext(
                trigger_kind=types.InlineCompletionTriggerKind.Automatic
            ),
        )
        start = time.perf_counter()
        try:
            answer = await asyncio.wait_for(
                self.client.text_document_inline_completion_async(params), REQUEST_TIMEOUT_S
            )
        except JsonRpcException as exc:
            return "", (time.perf_counter() - start) * 1000, str(exc)
        latency = (time.perf_counter() - start) * 1000
        line_prefix = text[text.rfind("\n", 0, offset) + 1 : offset]
        return suggestion_from_answer(answer, line_prefix), latency, None

    def peak_rss_mb(self) -> float | None:
        return read_hwm_mb(self.pid) if self.pid else None

    async def stop(self) -> None:
        """shutdown + exit, waiting for the process (it persists KV caches on shutdown)."""
        try:
            await asyncio.wait_for(self.client.shutdown_async(None), 60)
            self.client.exit(None)
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
    found: dict[int, dict[str, Any]] = {}
    for record in status.get("recent") or []:
        if record.get("uri") == uri and isinstance(record.get("version"), int):
            found[record["version"]] = record
    return found


def completion_with_stats(
    suggestion: str, latency_ms: float, record: dict[str, Any] | None, error: str | None = None
) -> Completion:
    record = record or {}
    if error is not None:
        return Completion(text="", latency_ms=latency_ms, source="error")
    return Completion(
        text=suggestion,
        latency_ms=latency_ms,
        prompt_tokens=record.get("promptTokens"),
        encoded_tokens=record.get("encodedTokens"),
        generated_tokens=record.get("generatedTokens"),
        source=record.get("source", "model" if suggestion else "empty"),
    )
