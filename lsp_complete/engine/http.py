"""A small HTTP/1.1 + SSE client whose every wait can be cancelled, for the remote engines.

Why a client of our own over sockets instead of an HTTP library: a superseded request must
close its stream within tens of milliseconds, and the cancel flag is set from another thread.
Every blocking step here (connect, waiting for headers, waiting for the next SSE line) waits in
short slices and looks at the flag in between, so a request stops at once in any phase, and a
dead or silent server costs at most the request budget, never a hang.

Nothing a server sends is trusted to be small or well formed: the head, one line, one SSE event
and the whole body have caps (`MAX_HEAD_BYTES`, `max_line`, `max_body`); past one, reading stops
and the connection closes. A malformed answer (status line, lengths, chunk sizes, JSON, UTF-8)
or one over a cap raises `ProtocolError`, a `RemoteEngineError`, never a bare ValueError.
"""

from __future__ import annotations

import contextlib
import errno
import json
import logging
import os
import re
import select
import socket
import ssl
import time
from collections.abc import Iterator
from email.utils import parsedate_to_datetime
from typing import Any
from urllib.parse import unquote, urlsplit, urlunsplit

from lsp_complete.engine.base import CancelToken, RemoteEngineError

log = logging.getLogger(__name__)

POLL_S = 0.02  # how often a blocked read looks at the cancel flag and the deadline
MAX_HEAD_BYTES = 64 * 1024  # status line and headers; also one chunk-size or trailer line
# One answer that is not a completion stream (/tokenize of a long prompt is the largest).
MAX_JSON_BYTES = 32 * 1024 * 1024

MAX_RETRY_AFTER_S = 60.0  # a server's Retry-After is honoured up to this long

_CHUNK_SIZE = re.compile(rb"[0-9A-Fa-f]{1,15}")
_DIGITS = re.compile(r"[0-9]{1,30}")  # longer ones are over any cap anyway


class Cancelled(Exception):
    """The request's cancel flag was set (internal: becomes stop_reason "cancelled")."""


class DeadlineExceeded(Exception):
    """The request budget ran out while waiting on the server."""


class ProtocolError(RemoteEngineError):
    """The server's answer broke HTTP, SSE or JSON rules, or went past a size cap. The message
    says what was wrong, without the server's bytes (it is shown to the user, once per cause)."""


class HttpStatusError(Exception):
    def __init__(self, status: int, body: bytes, headers: dict[str, str] | None = None) -> None:
        self.status = status
        self.body = body
        self.headers = headers or {}
        text = _error_text(body)
        super().__init__(f"HTTP {status}: {text}" if text else f"HTTP {status}")

    @property
    def retry_after_s(self) -> float | None:
        """The server's Retry-After (seconds or a date), within 0..MAX_RETRY_AFTER_S."""
        return retry_after_s(self.headers.get("retry-after", ""))

    @property
    def location(self) -> str:
        """Where a redirect points, as scheme://host[:port] only (no credentials or path)."""
        parts = urlsplit(self.headers.get("location", ""))
        host = parts.netloc.rpartition("@")[2]
        return _printable(f"{parts.scheme}://{host}" if parts.scheme and host else "")[:200]


def retry_after_s(value: str) -> float | None:
    """A Retry-After header's wait in seconds, capped (a wrong clock or a typo must not stop
    suggestions for hours); None when absent or unreadable."""
    value = value.strip()
    if _DIGITS.fullmatch(value):
        seconds = float(value)
    else:
        try:
            seconds = parsedate_to_datetime(value).timestamp() - time.time()
        except (TypeError, ValueError, IndexError, OverflowError):
            return None
    return max(0.0, min(MAX_RETRY_AFTER_S, seconds))


def split_credentials(url: str) -> tuple[str, str]:
    """(the URL without `user:password@`, "user:password" percent-decoded or ""): the
    credentials are sent as Basic auth, the URL without them is what messages and logs show."""
    parts = urlsplit(url if "://" in url else f"http://{url}")
    if "@" not in parts.netloc:
        return url, ""
    credentials = f"{unquote(parts.username or '')}:{unquote(parts.password or '')}"
    # By hand: urlunsplit drops the "//" of an empty host, which would then read as a host.
    bare = f"{parts.scheme}://{parts.netloc.rpartition('@')[2]}" + urlunsplit(
        parts._replace(scheme="", netloc=""))
    return bare, credentials


def _waiter(cancel: CancelToken | None, deadline: float) -> None:
    if cancel is not None and cancel.cancelled:
        raise Cancelled()
    if time.monotonic() > deadline:
        raise DeadlineExceeded()


class HttpResponse:
    """One HTTP/1.1 response read from a socket in short, cancellable waits."""

    def __init__(self, client: HttpClient, sock: socket.socket, cancel: CancelToken | None,
                 deadline: float, max_body: int = MAX_JSON_BYTES,
                 max_line: int | None = None) -> None:
        self._client = client
        self._sock: socket.socket | None = sock
        self._cancel = cancel
        self._deadline = deadline
        self._buf = bytearray()
        self.received_any = False
        self.complete = False  # the whole body was read: the connection may be reused
        self.status = 0
        self.headers: dict[str, str] = {}
        self._body: Iterator[bytes] | None = None
        self.max_body = max_body  # bytes of body, after de-chunking
        self.max_line = max_body if max_line is None else max_line  # one line of the body
        self.body_bytes = 0
        self.done_marker = False  # an SSE `data: [DONE]` was read

    # ---- low level

    def _fill(self) -> bool:
        """Read more bytes into the buffer; False at end of stream."""
        sock = self._sock
        if sock is None:
            raise ConnectionError("the connection is closed")
        while True:
            _waiter(self._cancel, self._deadline)
            try:
                data = sock.recv(65536)
            except (TimeoutError, ssl.SSLWantReadError):
                continue
            if not data:
                return False
            self.received_any = True
            self._buf += data
            return True

    def _read_line(self) -> bytes:
        """One line of the head or of chunk framing (never of the body: see iter_lines)."""
        searched = 0
        while (end := self._buf.find(b"\n", searched)) < 0:
            searched = len(self._buf)
            if searched > MAX_HEAD_BYTES:
                raise ProtocolError(f"a header or chunk line longer than {MAX_HEAD_BYTES} bytes")
            if not self._fill():
                raise ConnectionError("the server closed the connection mid-answer")
        line = bytes(self._buf[: end + 1])
        del self._buf[: end + 1]
        return line.rstrip(b"\r\n")

    def _read_upto(self, n: int) -> bytes:
        if not self._buf and not self._fill():
            raise ConnectionError("the server closed the connection mid-answer")
        data = bytes(self._buf[:n])
        del self._buf[:n]
        return data

    # ---- protocol

    def read_head(self) -> None:
        status_line = self._read_line()
        parts = status_line.split(None, 2)
        if (len(parts) < 2 or not parts[0].startswith(b"HTTP/") or len(parts[1]) != 3
                or not parts[1].isdigit()):
            log.debug("not an HTTP status line: %r", status_line[:80])
            raise ProtocolError("an answer that is not HTTP (no status line)")
        self.status = int(parts[1])
        size = len(status_line)
        while line := self._read_line():
            size += len(line)
            if size > MAX_HEAD_BYTES:
                raise ProtocolError(f"headers longer than {MAX_HEAD_BYTES} bytes")
            name, _, value = line.decode("latin-1").partition(":")
            self.headers[name.strip().lower()] = value.strip()

    def iter_body(self) -> Iterator[bytes]:
        """The body as it arrives; every caller continues the one reading of it."""
        if self._body is None:
            self._body = self._read_body()
        return self._body

    def _count(self, size: int) -> None:
        """Account for `size` more body bytes; past the cap, stop (the caller closes)."""
        self.body_bytes += size
        if self.body_bytes > self.max_body:
            raise ProtocolError(f"an answer longer than the {_size(self.max_body)} allowed")

    def _read_body(self) -> Iterator[bytes]:
        """The body (chunked, sized, or until the server closes), within `max_body`."""
        if "chunked" in self.headers.get("transfer-encoding", "").lower():
            while True:
                size_field = self._read_line().split(b";")[0].strip()
                if not _CHUNK_SIZE.fullmatch(size_field):
                    raise ProtocolError("a chunked answer with a malformed chunk size")
                size = int(size_field, 16)
                if size == 0:
                    trailers = 0
                    while line := self._read_line():
                        trailers += len(line)
                        if trailers > MAX_HEAD_BYTES:
                            raise ProtocolError(f"trailers longer than {MAX_HEAD_BYTES} bytes")
                    break
                self._count(size)  # before reading it: a huge chunk fails at once
                remaining = size
                while remaining:
                    data = self._read_upto(remaining)
                    remaining -= len(data)
                    yield data
                if self._read_line():
                    raise ProtocolError("a chunk longer than its announced size")
        elif "content-length" in self.headers:
            length = self.headers["content-length"]
            if not _DIGITS.fullmatch(length):
                raise ProtocolError("an answer with a malformed Content-Length")
            remaining = int(length)
            self._count(remaining)
            while remaining:
                data = self._read_upto(remaining)
                remaining -= len(data)
                yield data
        else:
            while self._buf or self._fill():
                data = bytes(self._buf)
                self._buf.clear()
                self._count(len(data))
                yield data
            self.headers["connection"] = "close"
        self.complete = True

    def drain(self, timeout_s: float = 0.05) -> None:
        """Read what is left of a finished stream (the chunked terminator, usually), so the
        connection can be reused; a server that keeps it open gets it closed instead."""
        self._deadline = min(self._deadline, time.monotonic() + timeout_s)
        with contextlib.suppress(OSError, ConnectionError, DeadlineExceeded, Cancelled,
                                 ProtocolError):
            for _ in self.iter_body():
                pass

    def read_all(self) -> bytes:
        return b"".join(self.iter_body())

    def iter_lines(self) -> Iterator[bytes]:
        """The body's lines, none longer than `max_line` (a longer one is never buffered)."""
        pending = bytearray()
        for data in self.iter_body():
            pending += data
            if b"\n" in data:  # only the new bytes can hold a line end: no quadratic re-scan
                *lines, rest = pending.split(b"\n")
                pending = bytearray(rest)
                for line in lines:
                    if len(line) > self.max_line:
                        raise ProtocolError(self._long_line())
                    yield bytes(line.rstrip(b"\r"))
            if len(pending) > self.max_line:
                raise ProtocolError(self._long_line())
        if pending:
            yield bytes(pending.rstrip(b"\r"))

    def _long_line(self) -> str:
        return f"one line (SSE event) longer than the {_size(self.max_line)} allowed"

    def close(self) -> None:
        """Give a fully read connection back for reuse; otherwise close it, which is how a
        server learns that nobody wants the rest of a stream (llama-server then stops)."""
        sock, self._sock = self._sock, None
        if sock is None:
            return
        reusable = self.complete and self.headers.get("connection", "").lower() != "close"
        if reusable:
            self._client.give_back(sock)
        else:
            _close_socket(sock)


def _close_socket(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)
    sock.close()


class HttpClient:
    """HTTP/1.1 to one server, one keep-alive connection (one worker thread uses it)."""

    def __init__(self, url: str, headers: dict[str, str] | None = None,
                 connect_timeout_s: float = 1.0) -> None:
        parts = urlsplit(url if "://" in url else f"http://{url}")
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError("not http or https, or no host")
        self.https = parts.scheme == "https"
        self.host = parts.hostname
        self.port = parts.port or (443 if self.https else 80)
        self.base_path = parts.path.rstrip("/")
        self.headers = dict(headers or {})
        self.connect_timeout_s = connect_timeout_s
        self._idle: socket.socket | None = None
        self.connections_opened = 0
        host = f"[{self.host}]" if ":" in self.host else self.host
        default_port = 443 if self.https else 80
        self.host_header = host if self.port == default_port else f"{host}:{self.port}"

    def give_back(self, sock: socket.socket) -> None:
        if self._idle is not None:
            _close_socket(self._idle)
        self._idle = sock

    def close(self) -> None:
        if self._idle is not None:
            _close_socket(self._idle)
            self._idle = None

    def _connect(self, cancel: CancelToken | None, deadline: float) -> socket.socket:
        limit = min(deadline, time.monotonic() + self.connect_timeout_s)
        last: OSError = ConnectionRefusedError(errno.ECONNREFUSED, "connection refused")
        for family, kind, proto, _, addr in socket.getaddrinfo(self.host, self.port,
                                                                type=socket.SOCK_STREAM):
            sock = socket.socket(family, kind, proto)
            try:
                sock.setblocking(False)
                code = sock.connect_ex(addr)
                if code not in (0, errno.EINPROGRESS, errno.EWOULDBLOCK):
                    raise OSError(code, os.strerror(code))
                # Wait for the handshake in short slices: a blackholed host must not hold
                # the worker past a cancel.
                while not select.select([], [sock], [], POLL_S)[1]:
                    _waiter(cancel, limit)
                code = sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
                if code:
                    raise OSError(code, os.strerror(code))
            except DeadlineExceeded:
                sock.close()
                raise TimeoutError(f"connect to {self.host}:{self.port} timed out") from None
            except (OSError, Cancelled) as exc:
                sock.close()
                if isinstance(exc, Cancelled):
                    raise
                last = exc
                continue
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if self.https:
                sock.settimeout(max(0.1, limit - time.monotonic()))
                sock = ssl.create_default_context().wrap_socket(sock, server_hostname=self.host)
            self.connections_opened += 1
            return sock
        raise last

    def open(self, method: str, path: str, body: Any = None, *, cancel: CancelToken | None,
             deadline: float, stream: bool = False, max_body: int = MAX_JSON_BYTES,
             max_line: int | None = None) -> HttpResponse:
        """Send a request and read the response head. The caller reads the body (at most
        `max_body` bytes, lines of at most `max_line`) and closes."""
        payload = b"" if body is None else json.dumps(body).encode("utf-8")
        lines = [
            f"{method} {self.base_path}{path} HTTP/1.1",
            f"Host: {self.host_header}",
            "Connection: keep-alive",
            f"Accept: {'text/event-stream' if stream else 'application/json'}",
            *(f"{k}: {v}" for k, v in self.headers.items()),
        ]
        if body is not None:
            lines += ["Content-Type: application/json", f"Content-Length: {len(payload)}"]
        request = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + payload
        # A kept-alive connection may have been closed by the server meanwhile (idle timeout,
        # restart): then try once more on a fresh one, which is safe because nothing arrived.
        reused, self._idle = self._idle, None
        if reused is not None and select.select([reused], [], [], 0)[0]:
            # Readable while idle: the server has hung up (llama-server does after a stream).
            _close_socket(reused)
            reused = None
        candidates: list[socket.socket | None] = [reused] if reused is not None else []
        for candidate in [*candidates, None]:
            fresh = candidate is None
            sock = self._connect(cancel, deadline) if candidate is None else candidate
            response = HttpResponse(self, sock, cancel, deadline, max_body, max_line)
            try:
                sock.settimeout(max(0.1, self.connect_timeout_s))
                sock.sendall(request)
                sock.settimeout(POLL_S)
                response.read_head()
                return response
            except (OSError, ConnectionError) as exc:
                _close_socket(sock)
                if fresh or response.received_any:
                    raise exc from None
            except BaseException:
                _close_socket(sock)
                raise
        raise AssertionError("unreachable")


def parse_json(data: bytes, what: str) -> Any:
    """JSON from a server; anything unparsable (syntax, UTF-8, nesting) is a ProtocolError."""
    try:
        return json.loads(data)
    except (ValueError, RecursionError) as exc:  # JSONDecodeError and UnicodeDecodeError
        log.debug("bad JSON in %s (%s): %r", what, exc, data[:80])
        reason = "not UTF-8" if isinstance(exc, UnicodeDecodeError) else "not valid JSON"
        raise ProtocolError(f"{what} that is {reason}") from None


def iter_sse(response: HttpResponse) -> Iterator[dict[str, Any]]:
    """JSON objects of `data:` lines, until `[DONE]` (then `response.done_marker` is set) or the
    end of the body. A data line that is not a JSON object is a ProtocolError."""
    for raw in response.iter_lines():
        if not raw or raw.startswith(b":"):
            continue  # separators, comments, pings
        field, _, value = raw.partition(b":")
        value = value.strip()
        if field == b"error":
            raise RemoteEngineError(f"the server reported an error: {_error_text(value)}")
        if field != b"data":
            continue
        if value == b"[DONE]":
            response.done_marker = True
            return
        event = parse_json(value, "an SSE event")
        if not isinstance(event, dict):
            raise ProtocolError("an SSE event that is not a JSON object")
        if "error" in event and not event.get("choices") and "content" not in event:
            raise RemoteEngineError(f"the server reported an error: {event['error']}")
        yield event


def events(response: HttpResponse) -> Iterator[dict[str, Any]]:
    """SSE events, or the one JSON answer of a server that does not stream."""
    if response.headers.get("content-type", "").startswith("application/json"):
        data = parse_json(response.read_all(), "an answer")
        if not isinstance(data, dict):
            raise ProtocolError("an answer that is not a JSON object")
        yield data
        return
    yield from iter_sse(response)


# C0, DEL, C1 and the bidi controls (as postprocess strips from suggestions).
_CONTROLS = re.compile(r"[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]+")


def _printable(text: str) -> str:
    """A server's text as a message shows it: no control or bidi characters (an ESC sequence
    would reach a terminal editor's message line)."""
    return _CONTROLS.sub(" ", text).strip()


def _size(n: int) -> str:
    return f"{n / (1 << 20):.1f} MiB" if n >= 1 << 20 else f"{n} bytes"


def _error_text(body: bytes) -> str:
    try:
        data = json.loads(body)
    except (ValueError, RecursionError):
        return _printable(body[:200].decode("utf-8", errors="replace"))
    if isinstance(data, dict):
        error = data.get("error", data.get("detail", data))
        if isinstance(error, dict):
            error = error.get("message", error)
        return _printable(str(error)[:300])
    return _printable(str(data)[:300])
