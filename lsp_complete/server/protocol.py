"""What is on the wire: our own method names, and pygls' protocol adjusted for this server.

`Protocol` is the one place for message-level behaviour (position encoding, text sync that
bypasses pygls' document copy), request bookkeeping and the lifecycle rules of the spec; the
bytes before a message (framing, size cap, decoding) are `framing`'s, which hands each decoded
JSON value to `Protocol.handle_payload`.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import re
import sys
import uuid
from collections.abc import Callable, Generator
from concurrent.futures import Future
from typing import Any

import cattrs
from lsprotocol import types
from pygls.feature_manager import is_thread_function
from pygls.protocol import LanguageServerProtocol, lsp_method

log = logging.getLogger(__name__)


class _QuietValidationErrors(logging.Filter):
    """pygls logs cattrs' whole exception group (~60 lines of traceback) for every message
    whose params do not fit their type: a client's mistake, which `handle_payload` logs in one
    line naming the field, and which a client may repeat on every key. Other failures to read
    a message keep pygls' traceback."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not (str(record.msg).startswith("Unable to deserialize message")
                    and isinstance(sys.exc_info()[1], cattrs.BaseValidationError))


logging.getLogger("pygls.protocol.json_rpc").addFilter(_QuietValidationErrors())

STATUS_METHOD = "lsp-complete/status"
# Client -> server notification {textDocument: {uri}, position}: the cursor moved there (a
# click, a jump, another editor tab). Idle time then prepares the prompt for that spot.
CURSOR_METHOD = "lsp-complete/didMoveCursor"
# Server -> client notification {textDocument: {uri, version}, position}: a block that begins
# with the one-line suggestion shown there is ready; asking again there (or typing on through
# the line) is answered with it from typing-ahead.
BLOCK_READY_METHOD = "lsp-complete/blockReady"
# Copilot's next-edit protocol (sidekick.nvim, copilot-lsp, copilot.el speak it): a request
# {textDocument: {uri, version}, position, context?} answered {edits: [{text, range,
# textDocument: {uri, version}, command}]} (alternatives: we send at most one; [] means
# nothing to change), and a notification {item: <the edit>} when the client shows one.
NEXT_EDIT_METHOD = "textDocument/copilotInlineEdit"
DID_SHOW_NEXT_EDIT_METHOD = "textDocument/didShowInlineEdit"
# Server -> client notification {textDocument: {uri, version}}: a next edit for that version
# is ready; asking for it (NEXT_EDIT_METHOD) answers at once.
NEXT_EDIT_READY_METHOD = "lsp-complete/nextEditReady"
ACCEPT_COMMAND = "lsp-complete.accepted"
SECTION = "lspComplete"  # the settings section in workspace/configuration

PARSE_ERROR = types.ErrorCodes.ParseError.value
INVALID_REQUEST = types.ErrorCodes.InvalidRequest.value
INVALID_PARAMS = types.ErrorCodes.InvalidParams.value
NOT_INITIALIZED = types.ErrorCodes.ServerNotInitialized.value

MsgId = int | str


def valid_id(value: Any) -> bool:
    """LSP ids are integers or strings (a bool is an int to Python, not to JSON)."""
    return isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))


class Protocol(LanguageServerProtocol):
    """pygls' protocol with these changes:

    - prefer UTF-8 positions when the client offers them (no UTF-16 arithmetic);
    - keep documents only in our own store (pygls would keep a second copy and re-split every
      line on each keystroke);
    - every request gets an answer: invalid messages and params get JSON-RPC errors, requests
      before `initialize` get -32002 and after `shutdown` -32600 (pygls drops them silently),
      and so does one whose id is a request's still in flight (pygls loses one of the two);
    - `exit` records the exit code the spec asks for (1 without `shutdown`) instead of raising
      SystemExit from inside a handler; the connection loop ends and returns it;
    - no request-future is kept once its handler is done (pygls 2.1.1 leaks one per
      notification, see `_execute_handler`);
    - a cursor notification (CURSOR_METHOD) that a newer one for the same document follows
      in what the client sent already is skipped (`handle_payload`);
    - a message whose params do not fit its type is one log line naming the field, not
      pygls' traceback of cattrs' exception group (`_QuietValidationErrors`).
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.exit_code: int | None = None  # set by `exit`: the connection loop stops
        # Told the document's URI when a didChange cannot be read: the text is out of sync.
        self.lost_change: Callable[[object], None] | None = None
        self.lost_open: Callable[[object, str], None] | None = None
        self._initialize_seen = False
        # Set by the reader (framing.serve) for each message: more of the client's bytes are
        # here already, so a later message may supersede this one.
        self.more_input = False
        # Cursor notifications set aside while more input was here: the newest per document,
        # in the order they came (`caught_up` handles them).
        self._set_aside: dict[str, Any] = {}

    # ------------------------------------------------------------------ from the wire

    def handle_payload(self, payload: Any) -> None:
        """One decoded JSON value from the wire: check it is a JSON-RPC message the server may
        take now, turn it into lsprotocol types and dispatch it (pygls' `handle_message`).

        A cursor notification is set aside while more input is here already (`more_input`):
        a client that sends one per cursor move (a key held down) may send thousands, each
        of which would prepare a prompt on the event loop (milliseconds in a large file), and
        each but the last is moot once the next comes. The set-aside ones, the newest per
        document, are handled before any other message, and before the reader waits for
        more (`caught_up`): the order of what is handled is the client's."""
        uri = _cursor_uri(payload)
        if uri is not None:
            self._set_aside.pop(uri, None)
            self._set_aside[uri] = payload
            if not self.more_input:
                self.caught_up()
            return
        self.caught_up()
        self._handle_payload(payload)

    def caught_up(self) -> None:
        """Handle the cursor notifications set aside (the reader is about to wait for more,
        or another message came)."""
        while self._set_aside:
            uri = next(iter(self._set_aside))
            self._handle_payload(self._set_aside.pop(uri))

    def drop_set_aside(self) -> None:
        """The connection is gone: the cursor notifications set aside are moot."""
        self._set_aside.clear()

    def _handle_payload(self, payload: Any) -> None:
        if not isinstance(payload, dict):
            self.send_error(None, INVALID_REQUEST, "a message must be a JSON object")
            return
        method = payload.get("method")
        has_id = "id" in payload
        msg_id = payload.get("id")
        if method is None:
            if "result" in payload or "error" in payload:  # an answer to one of our requests
                self._handle_client_response(payload)
            else:
                known = msg_id if valid_id(msg_id) else None
                self.send_error(known, INVALID_REQUEST, "a message needs a method or a result")
            return
        if has_id and not valid_id(msg_id):
            self.send_error(None, INVALID_REQUEST, f"invalid request id {msg_id!r}")
            return
        if payload.get("jsonrpc") != self.VERSION or not isinstance(method, str):
            if has_id:
                self.send_error(msg_id, INVALID_REQUEST, "not a JSON-RPC 2.0 request")
            else:
                log.warning("ignoring a message that is not JSON-RPC 2.0: %.200r", payload)
            return
        if not self._admit(method, msg_id if has_id else None, has_id):
            return
        if method == types.WORKSPACE_EXECUTE_COMMAND and not has_id:
            self._command_notification(payload.get("params"))
            return
        try:
            message = self.structure_message(payload)
        except Exception as exc:
            cause = _what_is_wrong(exc.__cause__ or exc)  # pygls wraps cattrs' error
            if has_id:
                log.warning("refused %s (request %r): invalid params: %s", method, msg_id, cause)
                self.send_error(msg_id, INVALID_PARAMS, f"invalid params for {method}: {cause}")
            else:
                log.warning("ignoring %s with invalid params: %s", method, cause)
                self._lost_notification(method, payload.get("params"), exc)
            return
        if method == types.INITIALIZE:
            self._initialize_seen = True
        try:
            self.handle_message(message)
        except Exception:
            # pygls answers requests whose handler fails; this is for what escapes it.
            log.exception("failed to handle %s", method)

    def _lost_notification(self, method: str, params: Any, exc: Exception) -> None:
        """A document's notification that could not be read: its text here may differ from
        the editor's (a change), or it is not open here at all (an open)."""
        uri = _document_uri(params)
        if method == types.TEXT_DOCUMENT_DID_CHANGE and self.lost_change is not None:
            self.lost_change(uri)
        elif method == types.TEXT_DOCUMENT_DID_OPEN and self.lost_open is not None:
            self.lost_open(uri, _what_is_wrong(exc.__cause__ or exc))

    def initialize_seen(self) -> bool:
        """Whether `initialize` came (so its params, processId among them, are known)."""
        return self._initialize_seen

    def end_session(self) -> None:
        """The client hung up without `shutdown` (TCP mode serves on): the next client's
        `initialize` is its first."""
        self._initialize_seen = False

    def _admit(self, method: str, msg_id: MsgId | None, is_request: bool) -> bool:
        """The lifecycle rules: nothing but `initialize` (and `exit`) before `initialize`,
        nothing but `exit` after `shutdown`; no request with the id of one in flight.
        Refused requests get an error."""
        if method == types.EXIT:
            return True
        if method == types.INITIALIZE and self._initialize_seen:
            # Sent once (LSP 3.17): a second one would switch the position encoding under the
            # open documents and drop the roots and the model.
            if is_request:
                self.send_error(msg_id, INVALID_REQUEST, "initialize was already sent")
            return False
        if not self._initialize_seen and method != types.INITIALIZE:
            if is_request:
                self.send_error(msg_id, NOT_INITIALIZED, "the server is not initialized")
            else:
                log.debug("dropping %s received before initialize", method)
            return False
        if self._shutdown:
            if is_request:
                self.send_error(msg_id, INVALID_REQUEST, "the server is shutting down")
            return False
        if is_request and msg_id is not None and self._in_flight(msg_id):
            # Ids are unique among the requests in flight: pygls would file the second one's
            # future over the first's, and one of the two answers was lost. The first goes on.
            self.send_error(msg_id, INVALID_REQUEST, "a request with this id is still in flight")
            return False
        return True

    def _in_flight(self, msg_id: MsgId) -> bool:
        future = self._request_futures.get(msg_id)
        return future is not None and not future.done()

    def _command_notification(self, params: Any) -> None:
        """`workspace/executeCommand` sent without an id (copilot.el accepts a next edit so):
        run the command, answer nothing. pygls would fail to read it as a request."""
        command = params.get("command") if isinstance(params, dict) else None
        handler = self.fm.commands.get(command) if isinstance(command, str) else None
        if handler is None:
            log.warning("ignoring an executeCommand notification: %.200r", params)
            return
        arguments = params.get("arguments")
        try:
            handler(*(arguments if isinstance(arguments, list) else []))  # as pygls calls it
        except Exception:
            log.exception("command %s failed", command)

    def _handle_client_response(self, payload: dict[str, Any]) -> None:
        if not valid_id(payload.get("id")):
            log.warning("ignoring a response without a valid id: %.200r", payload)
            return
        msg_id: MsgId = payload["id"]
        ours = msg_id in self._result_types  # a request of the server's, not the client's
        try:
            if payload.get("jsonrpc") != self.VERSION:
                raise ValueError("not JSON-RPC 2.0")
            message = self.structure_message(payload)
        except Exception:
            log.warning("a response that does not parse: %.200r", payload)
            # Its waiter gives up now, not at its timeout: a `null` answer to
            # workspace/configuration held up the model's load 5 s.
            future = self._request_futures.pop(msg_id, None) if ours else None
            if future is not None and not future.done():
                future.set_exception(ValueError(f"the client's answer does not parse: "
                                                f"{str(payload)[:200]}"))
            return
        try:
            self.handle_message(message)
        except Exception:
            log.exception("failed to handle the response to %r", msg_id)

    def send_error(self, msg_id: MsgId | None, code: int, message: str) -> None:
        """An error response; `msg_id` None when the request's id is not known."""
        if msg_id is not None:
            self._send_response(msg_id, error=types.ResponseError(code=code, message=message))
            return
        # lsprotocol's converter drops a None id; JSON-RPC wants "id": null.
        self._send_data({"jsonrpc": self.VERSION, "id": None,
                         "error": {"code": code, "message": message}})

    # ------------------------------------------------------------------ bookkeeping

    def _execute_handler(self, msg_id: MsgId, handler: Any, callback: Any,
                         args: Any = None, kwargs: Any = None) -> None:
        # Shim for a pygls 2.1.1 bug (to report upstream): `_execute_handler` files the future
        # of every async, threaded or generator handler in `_request_futures`, but only request
        # responses and cancellations remove it. Notifications (a uuid as msg_id) and the steps
        # of generator handlers stay forever: one entry per keystroke. Remove the future once
        # it is done; for requests pygls' own callback would do the same a moment later.
        def forget_then_callback(future: Future[Any]) -> None:
            if self._request_futures.get(msg_id) is future:
                del self._request_futures[msg_id]
            callback(future)

        super()._execute_handler(msg_id, handler, forget_then_callback, args, kwargs)

    def _run_generator(self, future: Future[Any] | None, *, gen: Generator[Any, Any, Any],
                       result_future: Future[Any]) -> None:
        # pygls 2.1.1 calls `result()` on the step before: a step cancelled (the event loop
        # ending under `initialize`'s or `shutdown`'s handler, a $/cancelRequest) raised
        # CancelledError out of this callback into asyncio's log, a traceback on stderr, and
        # left the request unanswered. The request ends cancelled instead.
        if future is not None and future.cancelled():
            gen.close()
            if not result_future.done():
                result_future.cancel()
            return
        super()._run_generator(future, gen=gen, result_future=result_future)

    def _notify_feature(self, method: str, *args: Any) -> None:
        """Run the server's handler of a notification that one of the methods below takes
        over: a plain function is called here, anything else through pygls."""
        handler = self.fm.features.get(method)
        if handler is None:
            return
        if _is_plain_function(handler):
            handler(*args)
        else:
            self._execute_handler(str(uuid.uuid4()), handler, self._check_handler_result, args)

    # ------------------------------------------------------------------ lifecycle

    @lsp_method(types.INITIALIZE)
    def lsp_initialize(
        self, params: types.InitializeParams
    ) -> Generator[Any, Any, types.InitializeResult]:
        general = params.capabilities.general
        if general is not None and general.position_encodings:
            offered = list(general.position_encodings)
            if types.PositionEncodingKind.Utf8 in offered:
                offered.remove(types.PositionEncodingKind.Utf8)
                general.position_encodings = [types.PositionEncodingKind.Utf8, *offered]
        result = yield from super().lsp_initialize(params)
        advertise_for_client(result.capabilities, params.capabilities)
        return result

    @lsp_method(types.SHUTDOWN)
    def lsp_shutdown(self, *args: Any) -> Generator[Any, Any, None]:
        """pygls' shutdown, in the order that never waits on stale work: from now on only
        `exit` is admitted (also while the handler saves caches); what is in flight is
        cancelled over a copy of the map (a cancelled future's callbacks remove it from the
        map at once; pygls 2.1.1 iterates over the map itself and fails with "dictionary
        changed size during iteration"); then the handler runs."""
        current_id = self.msg_id
        self._shutdown = True
        for msg_id, future in list(self._request_futures.items()):
            if msg_id != current_id and not future.done():
                future.cancel()
        if (handler := self.fm.features.get(types.SHUTDOWN)) is not None:
            yield handler, args, None

    @lsp_method(types.EXIT)
    def lsp_exit(self, *args: Any) -> None:  # type: ignore[override]
        """The spec's exit codes: 0 after `shutdown`, else 1. pygls raises SystemExit here,
        which its server loop swallows (the process always exited 0)."""
        self._notify_feature(types.EXIT, *args)
        self.exit_code = 0 if self._shutdown else 1

    # ------------------------------------------------------------------ text sync
    # Plain functions, not pygls' generators: no document copy, and no future, uuid or
    # generator step per keystroke.

    @lsp_method(types.TEXT_DOCUMENT_DID_OPEN)
    def lsp_text_document__did_open(self, params: types.DidOpenTextDocumentParams) -> None:
        self._notify_feature(types.TEXT_DOCUMENT_DID_OPEN, params)

    @lsp_method(types.TEXT_DOCUMENT_DID_CHANGE)
    def lsp_text_document__did_change(self, params: types.DidChangeTextDocumentParams) -> None:
        self._notify_feature(types.TEXT_DOCUMENT_DID_CHANGE, params)

    @lsp_method(types.TEXT_DOCUMENT_DID_CLOSE)
    def lsp_text_document__did_close(self, params: types.DidCloseTextDocumentParams) -> None:
        self._notify_feature(types.TEXT_DOCUMENT_DID_CLOSE, params)


def shows_inline_completion(client: types.ClientCapabilities | None) -> bool:
    """Whether the client draws inline suggestions itself (it declared
    `textDocument.inlineCompletion`, LSP 3.18)."""
    return bool(client and client.text_document and client.text_document.inline_completion)


def advertise_for_client(server: types.ServerCapabilities,
                         client: types.ClientCapabilities) -> None:
    """Shape what `initialize` advertises to this client (pygls builds it from features
    registered once, for every client).

    A client that shows inline suggestions gets no completion provider: the server answers its
    completion requests with an empty list (one model run per keystroke is enough), and an
    advertised provider would only make it ask: LSP4IJ on every completion popup, Neovim's
    completion sources on every trigger character. Only what we serve stays advertised.
    Our own methods have no place in the specification's capabilities: `experimental` names
    them, for clients that look."""
    if shows_inline_completion(client):
        server.completion_provider = None
    server.experimental = {"lspComplete": {"statusRequest": STATUS_METHOD,
                                           "cursorNotification": CURSOR_METHOD,
                                           "nextEditRequest": NEXT_EDIT_METHOD,
                                           "nextEditReadyNotification": NEXT_EDIT_READY_METHOD,
                                           "blockReadyNotification": BLOCK_READY_METHOD}}


def _is_plain_function(handler: Any) -> bool:
    return not (asyncio.iscoroutinefunction(handler) or is_thread_function(handler)
                or inspect.isgeneratorfunction(handler))


def _cursor_uri(payload: Any) -> str | None:
    """The document of a well-formed cursor notification (None for any other message)."""
    if (not isinstance(payload, dict) or payload.get("method") != CURSOR_METHOD
            or "id" in payload or payload.get("jsonrpc") != "2.0"):
        return None
    uri = _document_uri(payload.get("params"))
    return uri if isinstance(uri, str) else None


def _document_uri(params: Any) -> object:
    """`params.textDocument.uri` of a message as it came (None where it is not there)."""
    document = params.get("textDocument") if isinstance(params, dict) else None
    return document.get("uri") if isinstance(document, dict) else None


def _what_is_wrong(error: BaseException) -> str:
    """cattrs' error as the fields it names (`required field missing @ $.params.context`),
    not its summary ("While structuring ... (1 sub-exception)"). A value lsprotocol's
    validators refuse says why ("invalid value (Position.line should be in range
    [0:2147483647], but was -1) @ ...")."""
    try:
        found = cattrs.transform_error(error, format_exception=_format_exception)
    except Exception:
        found = [str(error)]
    # Its paths use lsprotocol's attribute names; the client knows the wire's (camelCase).
    named = []
    for item in found:
        what, at, path = item.rpartition(" @ ")
        named.append(f"{what}{at}{re.sub(r'_([a-z])', lambda m: m.group(1).upper(), path)}"
                     if at else item)
    return "; ".join(named)[:300]


def _format_exception(exc: BaseException, type_: Any) -> str:
    said = cattrs.v.format_exception(exc, type_)
    if said == "invalid value" and str(exc):
        return f"invalid value ({str(exc)[:120].rstrip('.')})"
    return said
