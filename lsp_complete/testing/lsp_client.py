"""The client side of LSP, as the tests, `lsp-complete bench` and `lsp-complete demo` speak it.

Owns what such a client sends and reads: the `lsp-complete serve` command line, client
capabilities, initialize / shutdown, didOpen, didChange (insert at a position, replace the whole
text), didClose, `lsp-complete/didMoveCursor`, the inline completion request, the next-edit
request as sidekick.nvim sends it (`textDocument/copilotInlineEdit`, after didFocus), polling
`lsp-complete/status`, and the conversions between code-point offsets, LSP positions (UTF-16
columns, the protocol default) and the text a suggestion adds at the cursor.

Every function takes any pygls `LanguageClient` (pytest-lsp's test client is one); starting the
process, reading its stderr and judging the answers stay with the callers.
"""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from lsprotocol import types
from pygls.lsp.client import LanguageClient

SERVER = [sys.executable, "-m", "lsp_complete", "serve"]
STATUS_POLL_S = 0.05


# --- positions and answers --------------------------------------------------------------------


def utf16_len(text: str) -> int:
    """Length in UTF-16 code units, LSP's default position unit."""
    return len(text.encode("utf-16-le")) // 2


def line_before(text: str, offset: int) -> str:
    """The part of the cursor's line before the code-point `offset`."""
    return text[text.rfind("\n", 0, offset) + 1 : offset]


def position_at(text: str, offset: int) -> types.Position:
    """LSP position (UTF-16 columns, the protocol default) of a code-point offset."""
    line = text.count("\n", 0, offset)
    return types.Position(line=line, character=utf16_len(line_before(text, offset)))


def _code_points_from_utf16(line: str, units: int) -> int:
    count = 0
    for index, char in enumerate(line):
        if count >= units:
            return index
        count += 2 if ord(char) > 0xFFFF else 1
    return len(line)


def plain(obj: Any) -> Any:
    """pygls turns results of custom methods into namedtuples; make them dicts and lists."""
    if hasattr(obj, "_asdict"):
        return {key: plain(value) for key, value in obj._asdict().items()}
    if isinstance(obj, dict):
        return {key: plain(value) for key, value in obj.items()}
    if isinstance(obj, list | tuple):
        return [plain(value) for value in obj]
    return obj


def suggestion_of(answer: Any) -> tuple[str, types.InlineCompletionItem | None]:
    """The first item's insertText as sent (a range may replace typed text), and the item."""
    items = answer.items if isinstance(answer, types.InlineCompletionList) else (answer or [])
    if not items:
        return "", None
    item = items[0]
    text = item.insert_text if isinstance(item.insert_text, str) else item.insert_text.value
    return text, item


def suggestion_from_answer(answer: Any, line_prefix: str) -> str:
    """The text the first item adds at the cursor.

    An item whose range starts before the cursor replaces the already typed part of the line
    with its insertText (the spec's preferred form): strip that part again.
    """
    text, item = suggestion_of(answer)
    if item is None or item.range is None:
        return text
    start = _code_points_from_utf16(line_prefix, item.range.start.character)
    typed = line_prefix[start:]
    return text[len(typed) :] if text.startswith(typed) else text


def replaced_after(answer: Any, text: str, offset: int) -> int:
    """Characters after the cursor (`offset` in `text`) that the first item replaces: its
    range ends past the cursor, on its line, where its text writes again the closers there
    (`replaceLineSuffix`); 0 when it ends at the cursor."""
    _, item = suggestion_of(answer)
    if item is None or item.range is None:
        return 0
    cursor = position_at(text, offset)
    if item.range.end.line != cursor.line or item.range.end.character <= cursor.character:
        return 0
    end = text.find("\n", offset)
    after = text[offset : len(text) if end < 0 else end]
    return _code_points_from_utf16(after, item.range.end.character - cursor.character)


# --- session ----------------------------------------------------------------------------------


def server_command(model: str | Path | None, python: str | None = None) -> list[str]:
    """`lsp-complete serve` in this interpreter (or `python`, e.g. another version's virtual
    environment); without a model the server picks its default."""
    command = [python, *SERVER[1:]] if python else list(SERVER)
    return command + (["--model", str(model)] if model else [])


async def launch(
    client: LanguageClient,
    model: str | Path | None,
    env: dict[str, str] | None = None,
    python: str | None = None,
    cwd: str | None = None,
) -> None:
    await client.start_io(*server_command(model, python), env=env, cwd=cwd)


def client_capabilities(
    encodings: list[str] | None = None,
    work_done_progress: bool = False,
    inline_completion: bool = False,
) -> types.ClientCapabilities:
    """Capabilities with only the named parts set (the others absent, as a bare client's)."""
    general = types.GeneralClientCapabilities(position_encodings=encodings) if encodings else None
    window = types.WindowClientCapabilities(work_done_progress=True) if work_done_progress else None
    text_document = (
        types.TextDocumentClientCapabilities(
            inline_completion=types.InlineCompletionClientCapabilities()
        )
        if inline_completion
        else None
    )
    return types.ClientCapabilities(general=general, window=window, text_document=text_document)


def initialize_params(
    init_options: dict[str, Any],
    capabilities: types.ClientCapabilities,
    process_id: int | None = None,
    workspace_folders: list[str] | None = None,
) -> types.InitializeParams:
    """`workspace_folders`: folder URIs (the first is also the rootUri); none: no workspace."""
    folders = [types.WorkspaceFolder(uri=u, name=u.rstrip("/").rsplit("/", 1)[-1])
               for u in workspace_folders or []]
    return types.InitializeParams(
        process_id=process_id, capabilities=capabilities, initialization_options=init_options,
        root_uri=folders[0].uri if folders else None, workspace_folders=folders or None,
    )


async def initialize(client: LanguageClient,
                     params: types.InitializeParams) -> types.InitializeResult:
    """initialize, then the initialized notification; what the server answered."""
    result = await client.initialize_async(params)
    client.initialized(types.InitializedParams())
    return result


async def shutdown(client: LanguageClient, timeout: float) -> None:
    """shutdown (answered within `timeout` seconds), then exit."""
    await asyncio.wait_for(client.shutdown_async(None), timeout)
    client.exit(None)


# --- documents and requests -------------------------------------------------------------------


def open_doc(
    client: LanguageClient, uri: str, text: str, language: str = "python", version: int = 1
) -> None:
    client.text_document_did_open(
        types.DidOpenTextDocumentParams(
            text_document=types.TextDocumentItem(
                uri=uri, language_id=language, version=version, text=text
            )
        )
    )


def insert(client: LanguageClient, uri: str, version: int, line: int, char: int,
           text: str) -> None:
    """didChange that inserts `text` at (line, char), as a keystroke does."""
    position = types.Position(line=line, character=char)
    replace(client, uri, version, types.Range(start=position, end=position), text)


def replace(client: LanguageClient, uri: str, version: int, where: types.Range,
            text: str) -> None:
    """didChange that replaces `where` with `text` (an empty `text` deletes it)."""
    client.text_document_did_change(
        types.DidChangeTextDocumentParams(
            text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=version),
            content_changes=[types.TextDocumentContentChangePartial(range=where, text=text)],
        )
    )


def replace_all(client: LanguageClient, uri: str, version: int, text: str) -> None:
    client.text_document_did_change(
        types.DidChangeTextDocumentParams(
            text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=version),
            content_changes=[types.TextDocumentContentChangeWholeDocument(text=text)],
        )
    )


def close_doc(client: LanguageClient, uri: str) -> None:
    client.text_document_did_close(
        types.DidCloseTextDocumentParams(text_document=types.TextDocumentIdentifier(uri=uri))
    )


def move_cursor(client: LanguageClient, uri: str, line: int, character: int) -> None:
    """What lsp-complete's editor plugins send when the cursor comes to rest."""
    client.protocol.notify("lsp-complete/didMoveCursor", {
        "textDocument": {"uri": uri},
        "position": {"line": line, "character": character},
    })


def inline_params(uri: str, line: int, char: int) -> types.InlineCompletionParams:
    """An automatic (as-you-type) inline completion request at (line, char)."""
    return types.InlineCompletionParams(
        text_document=types.TextDocumentIdentifier(uri=uri),
        position=types.Position(line=line, character=char),
        context=types.InlineCompletionContext(
            trigger_kind=types.InlineCompletionTriggerKind.Automatic
        ),
    )


async def inline(client: LanguageClient, uri: str, line: int, char: int) -> Any:
    return await client.text_document_inline_completion_async(inline_params(uri, line, char))


# --- status -----------------------------------------------------------------------------------


async def status(client: LanguageClient, recent: int | None = None) -> dict[str, Any]:
    """The server's `lsp-complete/status`, as dicts and lists; `recent`: how many of the
    latest request records it lists (None: the server's default, 0: none)."""
    params = {} if recent is None else {"recent": recent}
    return plain(await client.protocol.send_request_async("lsp-complete/status", params)) or {}


async def poll_status(
    client: LanguageClient,
    done: Callable[[dict[str, Any]], bool],
    timeout: float,
    poll_s: float = STATUS_POLL_S,
) -> dict[str, Any]:
    """The first status for which `done` holds, or the last one read once `timeout` passed."""
    deadline = time.monotonic() + timeout
    while True:
        st = await status(client)
        if done(st) or time.monotonic() > deadline:
            return st
        await asyncio.sleep(poll_s)


async def wait_for_model(
    client: LanguageClient,
    states: tuple[str, ...],
    timeout: float,
    poll_s: float = STATUS_POLL_S,
) -> dict[str, Any]:
    """The status' model part once its state is one of `states` (or as it is at the timeout)."""
    st = await poll_status(
        client, lambda s: (s.get("model") or {}).get("state") in states, timeout, poll_s
    )
    return st.get("model") or {}


async def wait_for_state(client: LanguageClient, states: tuple[str, ...],
                         timeout: float = 60) -> str:
    """The model's state once it is one of `states`; TimeoutError when it is not in time."""
    state: str | None = (await wait_for_model(client, states, timeout)).get("state")
    if state not in states:
        raise TimeoutError(f"model state stayed {state!r}")
    return state


async def wait_idle(client: LanguageClient, timeout: float = 30.0) -> dict[str, Any]:
    """The server's status once its worker has nothing running or queued (or at the timeout)."""
    return await poll_status(client, lambda st: st["scheduler"]["idle"], timeout)


# --- next edits (Copilot's protocol, as sidekick.nvim speaks it) -------------------------------

INLINE_EDIT = "textDocument/copilotInlineEdit"
NEXT_EDIT_READY = "lsp-complete/nextEditReady"  # ours: told when an edit is ready


def did_focus(client: LanguageClient, uri: str) -> None:
    """What sidekick.nvim sends when a buffer gets the focus (Copilot's server wants it)."""
    client.protocol.notify("textDocument/didFocus", {"textDocument": {"uri": uri}})


def inline_edit_params(uri: str, version: int, line: int, char: int) -> dict[str, Any]:
    """sidekick.nvim's request: the cursor, the buffer's version, triggerKind 2."""
    return {"textDocument": {"uri": uri, "version": version},
            "position": {"line": line, "character": char},
            "context": {"triggerKind": 2}}


async def inline_edit(client: LanguageClient, params: dict[str, Any]) -> Any:
    return await client.protocol.send_request_async(INLINE_EDIT, params)
