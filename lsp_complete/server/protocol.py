"""What is on the wire: our own method names, and pygls' protocol adjusted for this server.

`Protocol` is the one place for message-level behaviour (position encoding, text sync that
bypasses pygls' document copy); fixes to framing and request bookkeeping belong here too.
"""

from __future__ import annotations

from lsprotocol import types
from pygls.protocol import LanguageServerProtocol, lsp_method

STATUS_METHOD = "lsp-complete/status"
# Client -> server notification {textDocument: {uri}, position}: the cursor moved there (a
# click, a jump, another editor tab). Idle time then prepares the prompt for that spot.
CURSOR_METHOD = "lsp-complete/didMoveCursor"
ACCEPT_COMMAND = "lsp-complete.accepted"
SECTION = "lspComplete"  # the settings section in workspace/configuration


class Protocol(LanguageServerProtocol):
    """pygls' protocol with two changes: prefer UTF-8 positions when the client offers them
    (no UTF-16 arithmetic), and keep documents only in our own store (pygls would keep a second
    copy and re-split every line on each keystroke)."""

    @lsp_method(types.INITIALIZE)
    def lsp_initialize(self, params: types.InitializeParams):
        general = params.capabilities.general
        if general is not None and general.position_encodings:
            offered = list(general.position_encodings)
            if types.PositionEncodingKind.Utf8 in offered:
                offered.remove(types.PositionEncodingKind.Utf8)
                general.position_encodings = [types.PositionEncodingKind.Utf8, *offered]
        return (yield from super().lsp_initialize(params))

    @lsp_method(types.TEXT_DOCUMENT_DID_OPEN)
    def lsp_text_document__did_open(self, params: types.DidOpenTextDocumentParams):
        if (handler := self.fm.features.get(types.TEXT_DOCUMENT_DID_OPEN)) is not None:
            yield handler, (params,), None

    @lsp_method(types.TEXT_DOCUMENT_DID_CHANGE)
    def lsp_text_document__did_change(self, params: types.DidChangeTextDocumentParams):
        if (handler := self.fm.features.get(types.TEXT_DOCUMENT_DID_CHANGE)) is not None:
            yield handler, (params,), None

    @lsp_method(types.TEXT_DOCUMENT_DID_CLOSE)
    def lsp_text_document__did_close(self, params: types.DidCloseTextDocumentParams):
        if (handler := self.fm.features.get(types.TEXT_DOCUMENT_DID_CLOSE)) is not None:
            yield handler, (params,), None
