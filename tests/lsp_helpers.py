"""Start the real server as a subprocess and talk LSP to it (pytest-lsp's test client)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
import time
from pathlib import Path
from typing import Any

from lsprotocol import types
from pytest_lsp.client import LanguageClient, make_test_lsp_client

from lsp_complete.bench import lsp_driver
from lsp_complete.bench.lsp_driver import plain

SERVER = [sys.executable, "-m", "lsp_complete", "serve"]

# A small file with a half-typed call on line 11, shared by the server tests.
SOURCE = '''import os
from pathlib import Path


def read_lines(path):
    with open(path) as f:
        return [line.rstrip() for line in f]


def count_words(path):
    total = 0
    for line in read_li
    return total
'''


async def start_server(
    model: str | Path | None,
    init_options: dict[str, Any] | None = None,
    encodings: list[str] | None = None,
    env: dict[str, str] | None = None,
    wait_ready: bool = True,
) -> LanguageClient:
    client = make_test_lsp_client()
    command = SERVER + (["--model", str(model)] if model else [])
    await client.start_io(*command, env=env)
    general = types.GeneralClientCapabilities(position_encodings=encodings) if encodings else None
    await client.initialize_session(
        types.InitializeParams(
            capabilities=types.ClientCapabilities(
                general=general,
                window=types.WindowClientCapabilities(work_done_progress=True),
            ),
            initialization_options={"threads": 1, "contextSize": 4096, **(init_options or {})},
        )
    )
    if wait_ready:
        await wait_for_state(client, ("ready", "error"))
    return client


async def status(client: LanguageClient) -> dict[str, Any]:
    return plain(await client.protocol.send_request_async("lsp-complete/status", {}))


async def wait_idle(client: LanguageClient, timeout: float = 30.0) -> dict[str, Any]:
    """The server's status once its worker has nothing running or queued (or at the timeout)."""
    deadline = time.monotonic() + timeout
    while True:
        st = await status(client)
        if st["scheduler"]["idle"] or time.monotonic() > deadline:
            return st
        await asyncio.sleep(0.05)


def move_cursor(client: LanguageClient, uri: str, line: int, character: int) -> None:
    """What our editor plugins send when the cursor comes to rest somewhere."""
    lsp_driver.move_cursor(client, uri, types.Position(line=line, character=character))


def get(obj: Any, *keys: str) -> Any:
    for key in keys:
        obj = obj.get(key) if isinstance(obj, dict) else getattr(obj, key, None)
    return obj


async def wait_for_state(client: LanguageClient, states: tuple[str, ...], timeout: float = 60):
    deadline = time.monotonic() + timeout
    while True:
        state = get(await status(client), "model", "state")
        if state in states:
            return state
        if time.monotonic() > deadline:
            raise TimeoutError(f"model state stayed {state!r}")
        await asyncio.sleep(0.05)


def open_doc(client: LanguageClient, uri: str, text: str, language: str = "python") -> None:
    client.text_document_did_open(
        types.DidOpenTextDocumentParams(
            text_document=types.TextDocumentItem(uri=uri, language_id=language, version=1,
                                                 text=text)
        )
    )


def insert(client: LanguageClient, uri: str, version: int, line: int, char: int, text: str):
    pos = types.Position(line=line, character=char)
    client.text_document_did_change(
        types.DidChangeTextDocumentParams(
            text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=version),
            content_changes=[
                types.TextDocumentContentChangePartial(range=types.Range(start=pos, end=pos),
                                                       text=text)
            ],
        )
    )


def inline_params(uri: str, line: int, char: int) -> types.InlineCompletionParams:
    return types.InlineCompletionParams(
        text_document=types.TextDocumentIdentifier(uri=uri),
        position=types.Position(line=line, character=char),
        context=types.InlineCompletionContext(
            trigger_kind=types.InlineCompletionTriggerKind.Automatic
        ),
    )


async def inline(client: LanguageClient, uri: str, line: int, char: int):
    return await client.text_document_inline_completion_async(inline_params(uri, line, char))


def suggestion_of(answer: Any) -> tuple[str, types.InlineCompletionItem | None]:
    """The text the item adds at the cursor (the replaced, already typed part removed)."""
    items = answer.items if isinstance(answer, types.InlineCompletionList) else (answer or [])
    if not items:
        return "", None
    item = items[0]
    text = item.insert_text if isinstance(item.insert_text, str) else item.insert_text.value
    return text, item


# --- process trees (the servers editors start must not outlive a test) ------------------------


def _proc_table() -> dict[int, tuple[int, str]]:
    """pid -> (ppid, start time) for every process (Linux /proc)."""
    table: dict[int, tuple[int, str]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()  # comm may hold spaces or parentheses
        table[int(entry.name)] = (int(fields[1]), fields[19])
    return table


def descendants(pid: int) -> dict[int, str]:
    """Every process below `pid`, with its start time (to never signal a reused pid)."""
    table = _proc_table()
    children: dict[int, list[int]] = {}
    for child, (ppid, _) in table.items():
        children.setdefault(ppid, []).append(child)
    out: dict[int, str] = {}
    todo = [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            out[child] = table[child][1]
            todo.append(child)
    return out


def alive(pids: dict[int, str]) -> dict[int, str]:
    table = _proc_table()
    return {p: t for p, t in pids.items() if p in table and table[p][1] == t}


def signal_alive(pids: dict[int, str], sig: int) -> None:
    """Signal those of `pids` still running (the same process: same start time)."""
    for pid in alive(pids):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, sig)
