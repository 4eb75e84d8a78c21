"""One small function per LSP feature: each reads its params and delegates to a part of the
server; the work happens elsewhere. The event loop owns the documents and never runs
inference: suggestions are prepared on it and computed on the scheduler's worker thread."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from lsprotocol import types

from lsp_complete.scheduler import Scheduler
from lsp_complete.server.completion import inline_item, menu_item
from lsp_complete.server.completion_server import CompletionServer
from lsp_complete.server.framing import DEFAULT_MAX_MESSAGE_BYTES, serve_stdio
from lsp_complete.server.protocol import (
    ACCEPT_COMMAND,
    CURSOR_METHOD,
    DID_SHOW_NEXT_EDIT_METHOD,
    NEXT_EDIT_METHOD,
    SECTION,
    STATUS_METHOD,
)
from lsp_complete.server.tcp import serve_tcp
from lsp_complete.server.telemetry import RECENT_LIMIT

log = logging.getLogger(__name__)


def create_server(model: str | None = None, api_key_env: str | None = None,
                  scheduler: Scheduler | None = None) -> CompletionServer:
    server = CompletionServer(model, api_key_env, scheduler)

    @server.feature(types.INITIALIZE)
    async def initialize(ls: CompletionServer, params: types.InitializeParams) -> None:
        ls.repo.initialize(params)
        await ls.apply_settings(params.initialization_options)

    @server.feature(types.INITIALIZED)
    async def initialized(ls: CompletionServer, _params: types.InitializedParams) -> None:
        if ls.launch_notice:
            ls.client.tell(ls.launch_notice, types.MessageType.Warning)
        # Settings the editor keeps (VS Code's settings.json...) before the model loads.
        await ls.pull_configuration()
        await ls.repo.register_watcher()
        await ls.load_model()

    @server.feature(types.SHUTDOWN)
    async def shutdown(ls: CompletionServer, _params: Any) -> None:
        await ls.model.shutdown()

    @server.feature(types.TEXT_DOCUMENT_DID_OPEN)
    def did_open(ls: CompletionServer, params: types.DidOpenTextDocumentParams) -> None:
        ls.files.open(params.text_document)

    @server.feature(types.TEXT_DOCUMENT_DID_CHANGE)
    def did_change(ls: CompletionServer, params: types.DidChangeTextDocumentParams) -> None:
        ls.files.change(params)
        ls.next_edits.edited(params.text_document.uri)

    @server.feature(types.TEXT_DOCUMENT_DID_CLOSE)
    def did_close(ls: CompletionServer, params: types.DidCloseTextDocumentParams) -> None:
        ls.files.close(params.text_document.uri)

    @server.feature(types.TEXT_DOCUMENT_DID_SAVE)
    def did_save(ls: CompletionServer, params: types.DidSaveTextDocumentParams) -> None:
        uri = params.text_document.uri
        if ls.repo.saved(uri):  # the other files' repository blocks may name it
            ls.files.refresh_all(skip=uri)

    @server.feature(types.WORKSPACE_DID_CHANGE_WATCHED_FILES)
    def did_change_watched_files(ls: CompletionServer,
                                 params: types.DidChangeWatchedFilesParams) -> None:
        ls.repo.files_changed(params)
        ls.files.refresh_all()

    @server.feature(types.WORKSPACE_DID_CHANGE_WORKSPACE_FOLDERS)
    def did_change_workspace_folders(ls: CompletionServer,
                                     params: types.DidChangeWorkspaceFoldersParams) -> None:
        ls.repo.folders_changed(params)
        ls.files.refresh_all()

    # With options: pygls 2.1.1 advertises a feature registered without them as nothing.
    @server.feature(types.TEXT_DOCUMENT_INLINE_COMPLETION, types.InlineCompletionOptions())
    async def inline_completion(
        ls: CompletionServer, params: types.InlineCompletionParams
    ) -> types.InlineCompletionList:
        context = getattr(params, "context", None)
        # Asked explicitly (a key to suggest now, or to cycle): alternatives follow the first.
        kind = getattr(context, "trigger_kind", None)
        invoked = kind == types.InlineCompletionTriggerKind.Invoked
        found = await ls.suggester.suggestions(
            params.text_document.uri, params.position, alternatives=invoked,
            # The completion menu is open: the suggestion must extend its selected item.
            item=getattr(context, "selected_completion_info", None),
        )
        return types.InlineCompletionList(items=[inline_item(s) for s in found])

    # Not advertised to clients that show inline suggestions (protocol.advertise_for_client).
    @server.feature(
        types.TEXT_DOCUMENT_COMPLETION,
        types.CompletionOptions(trigger_characters=[".", "(", " "], resolve_provider=False),
    )
    async def completion(
        ls: CompletionServer, params: types.CompletionParams
    ) -> types.CompletionList:
        if ls.client.has_inline_completion:
            # The client shows inline suggestions: running the model for its completion
            # menu as well would double the work of every keystroke.
            return types.CompletionList(is_incomplete=False, items=[])
        found = await ls.suggester.suggestion(params.text_document.uri, params.position)
        # Incomplete: the client must ask again as the user types (the answer changes).
        return types.CompletionList(is_incomplete=True, items=[menu_item(found)] if found else [])

    @server.feature(types.TEXT_DOCUMENT_DOCUMENT_HIGHLIGHT)
    def document_highlight(ls: CompletionServer,
                           params: types.DocumentHighlightParams) -> None:
        # Many editors ask this of every server where the cursor comes to rest (VS Code's
        # occurrence highlight, Zed, Sublime LSP, Emacs lsp-mode and Eglot, LSP4IJ, Neovim
        # setups on CursorHold): the one standard message that says where a person is about to
        # type. The spot is prepared as for our clients' cursor notification; the occurrences
        # are the language server's to give. null, not an empty list: VS Code takes an empty
        # list as the answer and asks no other provider; after null it asks the next one.
        position = params.position
        ls.files.cursor_moved(params.text_document.uri, position.line, position.character)

    @server.command(ACCEPT_COMMAND)
    def accepted(ls: CompletionServer, *args: Any) -> None:  # arguments may be left out
        suggestion_id = str(_arg(args, "id") or "")
        ls.telemetry.accepted(suggestion_id)
        uri = _arg(args, "uri")
        ls.next_edits.accepted(suggestion_id, uri if isinstance(uri, str) else None)

    @server.feature(NEXT_EDIT_METHOD)
    async def next_edit(ls: CompletionServer, params: Any) -> dict[str, Any]:
        return await ls.next_edits.request(params)

    @server.feature(DID_SHOW_NEXT_EDIT_METHOD)
    def did_show_next_edit(ls: CompletionServer, params: Any) -> None:
        ls.next_edits.shown(_arg(params, "item"))

    @server.feature(CURSOR_METHOD)
    def did_move_cursor(ls: CompletionServer, params: Any) -> None:
        uri = _arg(_arg(params, "textDocument"), "uri")
        position = _arg(params, "position")
        line, character = _arg(position, "line"), _arg(position, "character")
        if not isinstance(uri, str) or not isinstance(line, int) or not isinstance(character, int):
            log.warning("ignoring malformed %s: %r", CURSOR_METHOD, params)
            return
        ls.files.cursor_moved(uri, line, character)

    @server.feature(STATUS_METHOD)
    def status(ls: CompletionServer, params: Any) -> dict[str, Any]:
        recent = _arg(params, "recent")
        return ls.status(recent if isinstance(recent, int) else RECENT_LIMIT)

    @server.feature(types.WORKSPACE_DID_CHANGE_CONFIGURATION)
    async def did_change_configuration(
        ls: CompletionServer, params: types.DidChangeConfigurationParams
    ) -> None:
        options = params.settings
        if isinstance(options, dict) and SECTION in options:
            options = options[SECTION]
        if options is None:  # "something changed, ask me": pull the section
            await ls.pull_configuration()
            return
        await ls.apply_settings(options)

    return server


def run_server(tcp_port: int | None = None, model: str | None = None,
               max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
               token_file: Path | None = None, api_key_env: str | None = None,
               notice: str | None = None) -> int:
    """`notice`: told to the editor once it is initialized (why the daemon is not used)."""
    server = create_server(model, api_key_env)
    server.launch_notice = notice
    try:
        if tcp_port is not None:
            # Not pygls' start_tcp: one client at a time, with the launch's token (tcp.py).
            return serve_tcp(server, tcp_port, token_file, max_message_bytes)
        # Our reader, not pygls' start_io: see framing.py.
        return serve_stdio(server, max_message_bytes, on_close=server.model.shutdown)
    finally:
        server.scheduler.stop()


def _arg(args: Any, name: str) -> Any:
    """A named value from command arguments or custom params: a dict, a pygls Object
    (a namedtuple), or a list holding one of those."""
    is_record = hasattr(args, "_asdict")
    first = args[0] if isinstance(args, list | tuple) and args and not is_record else args
    if isinstance(first, dict):
        return first.get(name)
    return getattr(first, name, None)
