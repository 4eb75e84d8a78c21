"""TCP mode (`lsp-complete serve --tcp PORT`): who may talk to the server, one client at a time.

Owns the listening socket (127.0.0.1 only), the launch's token and its file, the check of
`initialize` before anything reaches the server, the single session, and what a client's
going away means. Stdio needs none of this: only the editor that started the process holds
its pipes. Reading messages is `framing`'s and dispatching them `Protocol`'s, as over stdio.

- The token: `--token-file PATH`'s, else LSP_COMPLETE_TOKEN's, else a new random one written
  to `<runtime dir>/lsp-complete/tcp-<port>.token` (folder 0700, file 0600), its path printed
  on stderr. The client sends it as `initializationOptions.token` in `initialize`.
- Before that `initialize` nothing reaches the server: requests get -32002, notifications are
  dropped, and a connection with a wrong or missing token, or none within AUTH_TIMEOUT_S, is
  closed. Nothing before it is read leniently (small messages, strict framing).
- One session at a time: while a client is connected, a new connection is closed at once.
  The server exits after `exit`, or after `shutdown` and a hang-up; a client that hangs up
  without them ends its session only: the next client starts fresh (`end_session`), and what
  was computed for the gone client is never sent to the next one.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import hmac
import json
import logging
import os
import secrets
import signal
import stat
import sys
import warnings
from pathlib import Path
from typing import Any
from typing import Protocol as TypingProtocol

import platformdirs

from lsp_complete.server import framing
from lsp_complete.server.protocol import INVALID_REQUEST, NOT_INITIALIZED, Protocol, valid_id


class SessionServer(TypingProtocol):
    """What TCP mode needs of the language server (CompletionServer is one)."""

    protocol: Protocol

    def end_session(self) -> None:
        """The client went away without `exit`: forget what it sent, keep serving."""

    def shutdown(self) -> None: ...

log = logging.getLogger(__name__)

HOST = "127.0.0.1"
TOKEN_ENV = "LSP_COMPLETE_TOKEN"
TOKEN_OPTION = "token"  # initializationOptions.token
MIN_TOKEN_CHARS = 16
AUTH_TIMEOUT_S = 10.0
MAX_PENDING = 64  # connections authenticating at once: a flood cannot take all the fds
_AUTH_MAX_BYTES = 1 << 20  # an initialize is a few KiB; nothing larger is read before it
_AUTH_MAX_HEADERS = 8
_LINE_LIMIT = 64 * 1024  # asyncio's readline limit on this connection's header lines

_REFUSED = ("lsp-complete: initialize refused: initializationOptions.token is missing or wrong "
            "(the token of `lsp-complete serve --tcp`: in the file it printed, or the one of "
            "--token-file / LSP_COMPLETE_TOKEN)")


class TokenError(Exception):
    """The token cannot be had safely: the server does not start."""


# --------------------------------------------------------------------------- the token


def configured_token(token_file: Path | None) -> str | None:
    """The token the user chose: `--token-file`'s, else LSP_COMPLETE_TOKEN's; None: make one."""
    if token_file is not None:
        token, source = _read_token_file(token_file), str(token_file)
    elif (from_env := os.environ.get(TOKEN_ENV)) is not None:
        token, source = from_env, TOKEN_ENV
    else:
        return None
    token = token.strip()
    if len(token) < MIN_TOKEN_CHARS:
        raise TokenError(f"the token in {source} is too short: use at least {MIN_TOKEN_CHARS} "
                         "characters")
    return token


def _read_token_file(path: Path) -> str:
    try:
        with open(path, encoding="utf-8") as f:
            _check_private(os.fstat(f.fileno()), f"the token file {path}", 0o077)
            return f.read(4096)
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) else "not text"
        raise TokenError(f"cannot read the token file {path}: {reason}") from exc


def _check_private(info: os.stat_result, what: str, others: int) -> None:
    """`what` must be this user's and have none of the `others` permission bits."""
    if os.name == "nt":  # no POSIX owner and modes
        return
    if info.st_uid != os.getuid():
        raise TokenError(f"{what} belongs to another user")
    if stat.S_IMODE(info.st_mode) & others:
        raise TokenError(f"{what} is open to other users (mode "
                         f"{stat.S_IMODE(info.st_mode):o}): chmod 600 it")


def token_folder() -> Path:
    with warnings.catch_warnings():  # platformdirs warns when it falls back to /tmp
        warnings.simplefilter("ignore")
        return Path(platformdirs.user_runtime_dir("lsp-complete", appauthor=False))


def write_token_file(port: int, token: str) -> Path:
    """Write `token` where a client of `port` finds it: a 0600 file in a 0700 folder of the
    user's runtime dir. A stale file (or a planted link) there is replaced, never followed."""
    folder = token_folder()
    try:
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        info = os.lstat(folder)
        if not stat.S_ISDIR(info.st_mode):
            raise TokenError(f"{folder} is not a folder")
        _check_private(info, f"the folder {folder}", 0)
        _check_parent(folder.parent)
        if stat.S_IMODE(info.st_mode) != 0o700:
            os.chmod(folder, 0o700)
        path = folder / f"tcp-{port}.token"
        temporary = folder / f".tcp-{port}-{secrets.token_hex(4)}.tmp"
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
        with os.fdopen(os.open(temporary, flags, 0o600), "w", encoding="utf-8") as f:
            f.write(token + "\n")
        os.replace(temporary, path)
    except OSError as exc:
        raise TokenError(f"cannot write the token file in {folder}: {exc.strerror}; give "
                         f"one with --token-file PATH or {TOKEN_ENV}") from exc
    return path


def _check_parent(parent: Path) -> None:
    """Whoever can rename entries of the folder's parent could swap the folder: the parent
    must be this user's or root's, and shared only with the sticky bit (as /tmp is)."""
    if os.name == "nt":
        return
    info = os.stat(parent)
    shared = stat.S_IMODE(info.st_mode) & 0o022 and not info.st_mode & stat.S_ISVTX
    if info.st_uid not in (0, os.getuid()) or shared:
        raise TokenError(f"{parent} can be changed by other users")


def _remove_token_file(path: Path, token: str) -> None:
    with contextlib.suppress(OSError):
        if path.read_text(encoding="utf-8").strip() == token:  # not a newer launch's
            path.unlink()


# --------------------------------------------------------------------------- connections

# The connection whose messages are being handled: handlers, the tasks they start and their
# callbacks inherit it, so whatever they send goes to that connection or nowhere.
_CONNECTION: contextvars.ContextVar[Connection | None] = contextvars.ContextVar(
    "lsp_complete_connection", default=None
)


class Connection:
    """One client's socket, written to while it is open, within the bound on what the client
    has not read (`framing.BoundedStream`)."""

    def __init__(self, writer: asyncio.StreamWriter) -> None:
        self._writer = writer
        self.peer = writer.get_extra_info("peername")
        self.output = framing.BoundedStream(writer, f"client {self.peer}")
        self.open = True

    def write(self, data: bytes) -> None:
        if self.open:
            self.output.write(data)

    def send_error(self, msg_id: Any, code: int, message: str, data: Any = None) -> None:
        error: dict[str, Any] = {"code": code, "message": message}
        if data is not None:
            error["data"] = data
        body = json.dumps({"jsonrpc": "2.0", "id": msg_id, "error": error}).encode()
        self.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)

    def close(self) -> None:
        self.open = False
        self._writer.close()  # what was written is still sent


class SessionWriter:
    """The protocol's writer in TCP mode: a message goes to the connection that caused it
    (`_CONNECTION`), or to the session's when no connection did (a thread's callback), and only
    while that connection is the session: an answer computed for a client that has gone never
    reaches the next one, even one that reuses the request's id."""

    def __init__(self) -> None:
        self.session: Connection | None = None

    def write(self, data: bytes) -> None:
        origin = _CONNECTION.get()
        target = self.session if origin is None else origin
        if target is not None and target is self.session:
            target.write(data)

    def close(self) -> None:
        """A connection is closed by its own loop when it ends."""


class TcpSessions:
    """Accepts connections: authenticates them and runs one session at a time."""

    def __init__(self, server: SessionServer, max_message_bytes: int) -> None:
        self._server = server
        self.token = b""  # set before the first connection is accepted
        self._max_message_bytes = max_message_bytes
        self._writer = SessionWriter()
        self._busy = False  # a session is running, ending, or the server is exiting
        self._pending = 0  # connections authenticating
        self.finished: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        server.protocol.set_writer(self._writer)

    def finish(self, code: int) -> None:
        if not self.finished.done():
            self.finished.set_result(code)

    async def connection(self, reader: asyncio.StreamReader,
                         writer: asyncio.StreamWriter) -> None:
        conn = Connection(writer)
        _CONNECTION.set(conn)
        try:
            await self._serve(conn, reader)
        except Exception:
            log.exception("connection from %s failed", conn.peer)
        finally:
            conn.close()

    async def _serve(self, conn: Connection, reader: asyncio.StreamReader) -> None:
        if self._busy:
            log.warning("refused a connection from %s: another client is connected", conn.peer)
            return
        if self._pending >= MAX_PENDING:
            log.warning("refused a connection from %s: %d others are authenticating",
                        conn.peer, self._pending)
            return
        self._pending += 1
        try:
            initialize = await asyncio.wait_for(self._authenticate(conn, reader),
                                                AUTH_TIMEOUT_S)
        except TimeoutError:
            log.warning("closed a connection from %s: no initialize with the token within "
                        "%g s", conn.peer, AUTH_TIMEOUT_S)
            return
        finally:
            self._pending -= 1
        if initialize is None:
            return
        if self._busy:  # another client authenticated meanwhile
            conn.send_error(initialize["id"], INVALID_REQUEST,
                            "lsp-complete: another client is connected", {"retry": False})
            log.warning("refused a connection from %s: another client is connected", conn.peer)
            return
        self._busy = True
        code: int | None = None
        try:
            code = await self._session(conn, reader, initialize)
        finally:
            if code is not None:
                self.finish(code)  # stays busy: the server is exiting
            else:
                try:
                    self._end_session()
                finally:
                    self._busy = False

    async def _authenticate(self, conn: Connection,
                            reader: asyncio.StreamReader) -> dict[str, Any] | None:
        """Read up to `initialize` with the right token: that message, the token taken out of
        it; None when the connection is to be closed."""
        while True:
            try:
                message = await _read_message(reader)
            except (ValueError, EOFError, ConnectionError):  # over a limit, cut, reset
                return None
            if not isinstance(message, dict):
                return None
            method, msg_id = message.get("method"), message.get("id")
            is_request = "id" in message and valid_id(msg_id)
            if method == "initialize" and is_request:
                token = _take_token(message)
                if self.token and token is not None and hmac.compare_digest(token.encode(),
                                                                             self.token):
                    return message
                log.warning("refused a connection from %s: initialize without the right "
                            "token", conn.peer)
                conn.send_error(msg_id, INVALID_REQUEST, _REFUSED, {"retry": False})
                return None
            if method == "exit":
                return None
            if is_request:
                conn.send_error(msg_id, NOT_INITIALIZED,
                                "lsp-complete: send initialize with initializationOptions.token "
                                "first")
            # Notifications and anything else before initialize: dropped.

    async def _session(self, conn: Connection, reader: asyncio.StreamReader,
                       initialize: dict[str, Any]) -> int | None:
        """Serve the authenticated client until it exits or hangs up: the exit code when the
        server is to exit, None when it serves the next client."""
        protocol = self._server.protocol
        self._writer.session = conn
        log.info("client %s connected", conn.peer)
        try:
            protocol.handle_payload(initialize)
            # A client that does not read its answers is not read either (`room`).
            await framing.serve(protocol, reader, self._max_message_bytes, conn.output.room)
        except ConnectionError as exc:
            log.info("client %s: %s", conn.peer, exc)
        finally:
            self._writer.session = None
            conn.close()
        if protocol.exit_code is not None:
            return protocol.exit_code
        # `shutdown` then a hang-up: the client is done with the server (pygls' flag).
        return 0 if protocol._shutdown else None

    def _end_session(self) -> None:
        """The client hung up without `shutdown`: the next one starts fresh."""
        protocol = self._server.protocol
        # Requests the server sent to the gone client are never answered: fail them, so what
        # awaits them (the settings pull, a progress bar) goes on.
        for msg_id, future in list(protocol._request_futures.items()):
            if msg_id in protocol._result_types and not future.done():
                future.set_exception(ConnectionError("the client disconnected"))
                protocol._request_futures.pop(msg_id, None)
                protocol._result_types.pop(msg_id, None)
        self._server.end_session()
        protocol.end_session()
        log.info("session ended: waiting for the next client")


async def _read_message(reader: asyncio.StreamReader) -> Any:
    """One message read strictly (before the token nothing is forgiven): its JSON value, or
    None when the stream ended or broke the framing rules."""
    length = None
    for _ in range(_AUTH_MAX_HEADERS):
        line = await reader.readline()
        if not line.endswith(b"\n"):
            return None
        line = line.rstrip(b"\r\n")
        if not line:
            break
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            value = value.strip()
            if not value.isdigit() or len(value) > 9:
                return None
            length = int(value)
    else:
        return None
    if length is None or length > _AUTH_MAX_BYTES:
        return None
    body = await reader.readexactly(length)
    try:
        return json.loads(body)
    except (ValueError, RecursionError):
        return None


def _take_token(message: dict[str, Any]) -> str | None:
    """Take the token out of an initialize's options (the settings never see it)."""
    params = message.get("params")
    options = params.get("initializationOptions") if isinstance(params, dict) else None
    token = options.pop(TOKEN_OPTION, None) if isinstance(options, dict) else None
    return token if isinstance(token, str) else None


# --------------------------------------------------------------------------- the server


def serve_tcp(server: SessionServer, port: int, token_file: Path | None,
              max_message_bytes: int = framing.DEFAULT_MAX_MESSAGE_BYTES) -> int:
    """Listen on 127.0.0.1:`port` (0: any free port) until a client exits; the exit code."""
    try:
        token = configured_token(token_file)
        return asyncio.run(_listen(server, port, token, max_message_bytes))
    except TokenError as exc:
        print(f"lsp-complete: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 0
    finally:
        server.shutdown()


async def _listen(server: SessionServer, port: int, token: str | None,
                  max_message_bytes: int) -> int:
    sessions = TcpSessions(server, max_message_bytes)
    try:
        listener = await asyncio.start_server(sessions.connection, HOST, port,
                                              start_serving=False, limit=_LINE_LIMIT)
    except OSError as exc:
        print(f"lsp-complete: cannot listen on {HOST}:{port}: {exc.strerror}", file=sys.stderr)
        return 2
    port = listener.sockets[0].getsockname()[1]
    token_path = None
    if token is None:
        token = secrets.token_urlsafe(32)
        token_path = write_token_file(port, token)
    sessions.token = token.encode()
    where = f"the token in {token_path}" if token_path else "the token you gave"
    print(f"lsp-complete: listening on {HOST}:{port}; one client at a time, with {where} "
          f"as initializationOptions.token", file=sys.stderr, flush=True)
    loop = asyncio.get_running_loop()
    with contextlib.suppress(NotImplementedError):  # no signal handlers on Windows
        loop.add_signal_handler(signal.SIGTERM, sessions.finish, 0)
    try:
        async with listener:
            await listener.start_serving()
            return await sessions.finished
    finally:
        if token_path is not None:
            _remove_token_file(token_path, token)
