"""What the remote engines share: a cancellable HTTP/1.1 + SSE client, the text-side stop rules,
connection state with backoff, and the `RemoteEngine` base that the backends fill in.

Why a small client of our own over sockets instead of an HTTP library: a superseded request must
close its stream within tens of milliseconds, and the cancel flag is set from another thread.
Every blocking step here (connect, waiting for headers, waiting for the next SSE line) waits in
short slices and looks at the flag in between, so a request stops at once in any phase, and a
dead or silent server costs at most the request budget, never a hang.

Backends (one file each): `remote_llama_server.LlamaServerEngine` (llama.cpp's llama-server
`/completion`, token prompts, one slot per file) and `remote_openai.OpenAIEngine`
(`/v1/completions`: vLLM, llama-cpp-python's server, llama-server's OpenAI endpoint, others).
"""

from __future__ import annotations

import contextlib
import errno
import json
import logging
import os
import select
import socket
import ssl
import time
from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from lsp_complete.engine.base import (
    CancelToken,
    EngineCounters,
    GenerationRequest,
    GenerationResult,
)
from lsp_complete.engine.tokenizer import Tokenizer

log = logging.getLogger(__name__)

POLL_S = 0.02  # how often a blocked read looks at the cancel flag and the deadline
BACKOFF_FIRST_S = 0.25
BACKOFF_MAX_S = 4.0  # a restarted server is used again within this long
HEALING_MODES = ("auto", "grammar", "regex", "off")


class RemoteEngineError(Exception):
    """The remote server could not give an answer; the message says what to do.

    `Completer.run` turns it into an empty suggestion and keeps the message in
    `Completer.last_error`, so that the server tells the user once instead of failing requests.
    """


@dataclass
class RemoteOptions:
    url: str  # the server's root, e.g. http://gpu-box:8080 (a trailing /v1 is accepted)
    api_key: str = ""  # sent as a bearer token; read from an environment variable by the caller
    model: str = ""  # the name the server knows the model by ("" = ask the server)
    request_timeout_s: float = 5.0  # the whole request, connect to last token
    connect_timeout_s: float = 1.0
    slots: int = 0  # llama-server: slots to use (0 = all the server has)
    healing: str = "auto"  # auto | grammar | regex | off


class Cancelled(Exception):
    """The request's cancel flag was set (internal: becomes stop_reason "cancelled")."""


class DeadlineExceeded(Exception):
    """The request budget ran out while waiting on the server."""


class HttpStatusError(Exception):
    def __init__(self, status: int, body: bytes) -> None:
        self.status = status
        self.body = body
        super().__init__(f"HTTP {status}: {_error_text(body)}")


# --------------------------------------------------------------------------- HTTP


def _waiter(cancel: CancelToken | None, deadline: float) -> None:
    if cancel is not None and cancel.cancelled:
        raise Cancelled()
    if time.monotonic() > deadline:
        raise DeadlineExceeded()


class HttpResponse:
    """One HTTP/1.1 response read from a socket in short, cancellable waits."""

    def __init__(self, client: HttpClient, sock: socket.socket, cancel: CancelToken | None,
                 deadline: float) -> None:
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
        while (end := self._buf.find(b"\n")) < 0:
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
        if len(parts) < 2 or not parts[0].startswith(b"HTTP/"):
            raise ConnectionError(f"not an HTTP answer: {status_line[:60]!r}")
        self.status = int(parts[1])
        while line := self._read_line():
            name, _, value = line.decode("latin-1").partition(":")
            self.headers[name.strip().lower()] = value.strip()

    def iter_body(self) -> Iterator[bytes]:
        """The body as it arrives; every caller continues the one reading of it."""
        if self._body is None:
            self._body = self._read_body()
        return self._body

    def _read_body(self) -> Iterator[bytes]:
        """The body (chunked, sized, or until the server closes)."""
        if "chunked" in self.headers.get("transfer-encoding", "").lower():
            while True:
                size = int(self._read_line().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self._read_line():  # trailers
                        pass
                    break
                remaining = size
                while remaining:
                    data = self._read_upto(remaining)
                    remaining -= len(data)
                    yield data
                self._read_line()
        elif "content-length" in self.headers:
            remaining = int(self.headers["content-length"])
            while remaining:
                data = self._read_upto(remaining)
                remaining -= len(data)
                yield data
        else:
            while self._buf or self._fill():
                data = bytes(self._buf)
                self._buf.clear()
                yield data
            self.headers["connection"] = "close"
        self.complete = True

    def drain(self, timeout_s: float = 0.05) -> None:
        """Read what is left of a finished stream (the chunked terminator, usually), so the
        connection can be reused; a server that keeps it open gets it closed instead."""
        self._deadline = min(self._deadline, time.monotonic() + timeout_s)
        with contextlib.suppress(OSError, ConnectionError, DeadlineExceeded, Cancelled):
            for _ in self.iter_body():
                pass

    def read_all(self) -> bytes:
        return b"".join(self.iter_body())

    def iter_lines(self) -> Iterator[bytes]:
        pending = b""
        for data in self.iter_body():
            pending += data
            *lines, pending = pending.split(b"\n")
            for line in lines:
                yield line.rstrip(b"\r")
        if pending:
            yield pending.rstrip(b"\r")

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
            raise ValueError(f"not an http(s) URL: {url!r}")
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
             deadline: float, stream: bool = False) -> HttpResponse:
        """Send a request and read the response head. The caller reads the body and closes."""
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
        for sock in ([reused] if reused is not None else []) + [None]:
            fresh = sock is None
            if fresh:
                sock = self._connect(cancel, deadline)
            response = HttpResponse(self, sock, cancel, deadline)
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


def iter_sse(response: HttpResponse) -> Iterator[dict[str, Any]]:
    """JSON payloads of `data:` lines, until `[DONE]` or the end of the body."""
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
            return
        try:
            event = json.loads(value)
        except json.JSONDecodeError:
            log.debug("ignoring a non-JSON SSE line: %r", raw[:80])
            continue
        if isinstance(event, dict):
            if "error" in event and not event.get("choices") and "content" not in event:
                raise RemoteEngineError(f"the server reported an error: {event['error']}")
            yield event


def _events(response: HttpResponse) -> Iterator[dict[str, Any]]:
    """SSE events, or the one JSON answer of a server that does not stream."""
    if response.headers.get("content-type", "").startswith("application/json"):
        data = json.loads(response.read_all() or b"{}")
        if isinstance(data, dict):
            yield data
        return
    yield from iter_sse(response)


def _account(result: GenerationResult, chunk: StreamChunk) -> None:
    if chunk.prompt_n is not None:
        result.encoded_tokens = chunk.prompt_n
    if chunk.cache_n is not None:
        result.reused_tokens = chunk.cache_n
    result.generated_tokens += chunk.tokens
    if chunk.generated is not None:
        result.generated_tokens = max(result.generated_tokens, chunk.generated)


def _error_text(body: bytes) -> str:
    try:
        data = json.loads(body)
    except (json.JSONDecodeError, UnicodeDecodeError):
        return body[:200].decode("utf-8", errors="replace").strip()
    if isinstance(data, dict):
        error = data.get("error", data.get("detail", data))
        if isinstance(error, dict):
            error = error.get("message", error)
        return str(error)[:300]
    return str(data)[:300]


# --------------------------------------------------------------------------- text rules


class TextRules:
    """The local engine's stop rules, applied to streamed text (see LlamaEngine._generate):
    stop strings and newlines count only after the healed characters."""

    def __init__(self, request: GenerationRequest, text: str = "") -> None:
        self.request = request
        self.text = text
        self._lines_done = 0

    def feed(self, piece: str) -> str | None:
        """Add generated text; returns a stop reason when generation should end here."""
        req = self.request
        self.text += piece
        skip = len(req.heal)
        produced = self.text[skip:] if len(self.text) >= skip else ""
        stop_at = first_stop(produced, req.stop)
        if stop_at is not None:
            self.text = self.text[: skip + stop_at]
            return "stop"
        if req.abandon is not None and req.abandon(produced):
            self.text = self.text[:skip]
            return "abandoned"
        if "\n" in produced:
            if req.single_line:
                self.text = self.text[: skip + produced.index("\n")]
                return "newline"
            new_lines = produced.count("\n")
            if new_lines > self._lines_done:
                self._lines_done = new_lines
                if req.line_check is not None and req.line_check(produced):
                    return "stop"
                if req.deadline is not None and time.monotonic() > req.deadline:
                    return "budget"
        return None

    @property
    def produced_any(self) -> bool:
        return len(self.text) > len(self.request.heal)


def first_stop(text: str, stops: tuple[str, ...]) -> int | None:
    positions = [i for s in stops if s and (i := text.find(s)) >= 0]
    return min(positions) if positions else None


def server_stops(request: GenerationRequest) -> list[str]:
    """Stop strings the server may apply itself. A server sees the healed characters as output,
    so a stop string that could match inside them (or straddle their end) stays client-side."""
    stops = list(request.stop) + (["\n"] if request.single_line else [])
    heal = request.heal

    def safe(stop: str) -> bool:
        return bool(stop) and stop not in heal and not any(
            heal.endswith(stop[:k]) for k in range(1, len(stop))
        )

    return list(dict.fromkeys(s for s in stops if safe(s)))


def gbnf_prefix_grammar(heal: str, code: bool = False) -> str:
    """GBNF that forces the output to start with `heal` and allows anything after it (with
    `code`, healed spaces must be followed by code, as in the local engine)."""
    out = []
    for ch in heal:
        code = ord(ch)
        if ch in '"\\':
            out.append("\\" + ch)
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\r":
            out.append("\\r")
        elif ch == "\t":
            out.append("\\t")
        elif code < 0x20 or code == 0x7F:
            out.append(f"\\x{code:02X}")
        else:
            out.append(ch)
    if code and not heal.strip(" "):
        return f'root ::= "{"".join(out)}" [^ \\t\\r\\n] .*'
    return f'root ::= "{"".join(out)}" .*'


def regex_prefix(heal: str, code: bool = False) -> str:
    """A regular expression (vLLM structured outputs) with the same meaning as the grammar."""
    out = []
    for ch in heal:
        if ch in ".^$*+?()[]{}|\\/":
            out.append("\\" + ch)
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\t":
            out.append("\\t")
        elif ch == "\r":
            out.append("\\r")
        elif ord(ch) < 0x20:
            out.append(f"\\x{ord(ch):02x}")
        else:
            out.append(ch)
    if code and not heal.strip(" "):
        return "".join(out) + r"\S[\s\S]*"
    return "".join(out) + r"[\s\S]*"


# --------------------------------------------------------------------------- engine base


class SlotMap:
    """Which server slot holds which file's prompt: least recently used file gives its up."""

    def __init__(self, total: int) -> None:
        self.total = total
        self._slots: OrderedDict[str, int] = OrderedDict()
        self.evictions = 0

    def slot_for(self, key: str) -> int:
        if key in self._slots:
            self._slots.move_to_end(key)
            return self._slots[key]
        used = set(self._slots.values())
        free = [s for s in range(self.total) if s not in used]
        if free:
            slot = free[0]
        else:
            _, slot = self._slots.popitem(last=False)
            self.evictions += 1
        self._slots[key] = slot
        return slot

    def forget(self, key: str) -> None:
        self._slots.pop(key, None)

    def resize(self, total: int) -> None:
        if total != self.total:
            self.total = total
            self._slots = OrderedDict((k, s) for k, s in self._slots.items() if s < total)

    def as_json(self) -> list[dict[str, object]]:
        # list() first: status runs on the event loop while the worker may change the map.
        return [{"uri": k, "slot": s} for k, s in list(self._slots.items())]


@dataclass
class StreamChunk:
    """What one streamed event carries, in the terms of GenerationResult."""

    text: str = ""
    tokens: int = 0  # generated tokens in this event
    finish: str = ""  # the server ended generation: eog | stop | max_tokens
    prompt_n: int | None = None  # prompt tokens the server computed
    cache_n: int | None = None  # prompt tokens it took from its cache
    generated: int | None = None  # the server's own total of generated tokens (final event)


class RemoteEngine:
    """Connection state, backoff and the streaming loop; backends supply requests and parsing.

    Nothing here contacts the server in __init__: a server that is down when the editor starts
    costs nothing until the first request, which then fails fast with a clear message.
    """

    backend = "remote"

    def __init__(self, options: RemoteOptions, tokenizer: Tokenizer | None = None) -> None:
        self.options = options
        url = options.url.rstrip("/")
        url = url[: -len("/v1")] if url.endswith("/v1") else url
        self.url = url
        headers = {"User-Agent": "lsp-complete"}
        if options.api_key:
            headers["Authorization"] = f"Bearer {options.api_key}"
        self.http = HttpClient(url, headers, options.connect_timeout_s)
        self.counters = EngineCounters()
        self._tokenizer = tokenizer
        self.state = "not contacted"  # connected | unreachable | error | not contacted
        self.last_error = ""
        self._retry_at = 0.0
        self._backoff = BACKOFF_FIRST_S
        self._discovered = False
        self._sent: OrderedDict[str, list[int]] = OrderedDict()  # last prompt per file

    # ---- tokenizer

    @property
    def tokenizer(self) -> Tokenizer:
        if self._tokenizer is None:
            self._tokenizer = self._make_tokenizer()
        return self._tokenizer

    def _make_tokenizer(self) -> Tokenizer:
        raise NotImplementedError

    def tokenize(self, text: str, special: bool = False) -> list[int]:
        return self.tokenizer.tokenize(text, special)

    def detokenize(self, tokens: list[int]) -> str:
        return self.tokenizer.detokenize(tokens)

    # ---- connection state

    def _deadline(self) -> float:
        return time.monotonic() + self.options.request_timeout_s

    def _check_backoff(self) -> None:
        """Fail fast while backing off: a dead host must not cost a connect timeout for every
        keystroke."""
        if self.state == "unreachable" and time.monotonic() < self._retry_at:
            raise RemoteEngineError(self.last_error)

    def _ensure_ready(self) -> None:
        """Fail fast while backing off after a failure; learn about the server once it answers."""
        self._check_backoff()
        if not self._discovered:
            self._discovered = True  # before the call: a failing discovery must not loop
            try:
                self._discover()
            except RemoteEngineError:
                self._discovered = False
                raise

    def _discover(self) -> None:
        """Backend hook: read what the server offers (slots, model, flavour)."""

    def _check_vocab(self, server_n_vocab: Any) -> None:
        """Token ids from a local vocabulary mean nothing to a server running another model."""
        local = self._tokenizer.n_vocab if self._tokenizer is not None else None
        if isinstance(server_n_vocab, int) and local and server_n_vocab != local:
            raise self._failed(
                f"the model file given in `model` has {local} tokens but the model at {self.url} "
                f"has {server_n_vocab}: set `model` to the file (or registry name) of the model "
                "the server runs, so that the prompt's tokens mean the same to it",
                "error",
            )

    def _connected(self) -> None:
        if self.state != "connected":
            if self.state in ("unreachable", "error"):
                log.info("%s at %s answers again", self.backend, self.url)
            self.state = "connected"
            self.last_error = ""
        self._backoff = BACKOFF_FIRST_S

    def _failed(self, message: str, state: str = "unreachable") -> RemoteEngineError:
        if (state, message) != (self.state, self.last_error):
            log.warning("%s", message)  # once per cause, not once per keystroke
        if state == "unreachable":
            # Wait a little before trying again (every keystroke would otherwise pay a
            # connect timeout), and re-read its configuration when it comes back.
            self._discovered = False
            self._retry_at = time.monotonic() + self._backoff
            self._backoff = min(BACKOFF_MAX_S, self._backoff * 2)
        self.state = state
        self.last_error = message
        self.counters.extra["errors"] = self.counters.extra.get("errors", 0) + 1
        return RemoteEngineError(message)

    def _describe_failure(self, exc: BaseException, what: str) -> tuple[str, str]:
        where = f"the {self.backend} server at {self.url}"
        if isinstance(exc, HttpStatusError):
            if exc.status in (401, 403):
                return (f"{where} refused the API key (HTTP {exc.status}); set the environment "
                        "variable named by apiKeyEnv", "error")
            if exc.status == 404:
                return (f"{where} has no {what} endpoint (HTTP 404): is engine "
                        f"'{self.backend}' the right kind for it?", "error")
            if exc.status == 503:
                return f"{where} is not ready (HTTP 503: {exc}); retrying", "unreachable"
            return f"{where} rejected the request: {exc}", "error"
        if isinstance(exc, DeadlineExceeded):
            budget = int(self.options.request_timeout_s * 1000)
            return (f"{where} did not answer within the {budget} ms request budget "
                    "(requestTimeoutMs); no suggestions until it does", "unreachable")
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        return (f"cannot reach {where} ({reason or type(exc).__name__}); "
                "no suggestions until it answers", "unreachable")

    def request_json(self, method: str, path: str, body: Any = None,
                     cancel: CancelToken | None = None) -> Any:
        """A non-streaming call (tokenize, warm-up); raises RemoteEngineError, or Cancelled
        when `cancel` is set meanwhile."""
        self._check_backoff()
        try:
            response = self.http.open(method, path, body, cancel=cancel,
                                      deadline=self._deadline())
            try:
                data = response.read_all()
            finally:
                response.close()
            if response.status != 200:
                raise HttpStatusError(response.status, data)
            self._connected()
            return json.loads(data) if data else None
        except (OSError, ConnectionError, DeadlineExceeded, HttpStatusError,
                json.JSONDecodeError) as exc:
            raise self._failed(*self._describe_failure(exc, path)) from None

    def post_json(self, path: str, body: dict[str, Any]) -> Any:
        return self.request_json("POST", path, body)

    def try_json(self, path: str) -> Any:
        """GET something optional: None when the server lacks it (any error, no state change
        beyond what a refused connection means)."""
        try:
            response = self.http.open("GET", path, cancel=None, deadline=self._deadline())
            try:
                data = response.read_all()
            finally:
                response.close()
        except (OSError, ConnectionError, DeadlineExceeded) as exc:
            raise self._failed(*self._describe_failure(exc, path)) from None
        if response.status != 200:
            return None
        try:
            return json.loads(data)
        except json.JSONDecodeError:
            return None

    # ---- generation

    def _completion_request(self, request: GenerationRequest) -> tuple[str, dict[str, Any], str]:
        """Backend hook: (path, JSON body, text to put before the output). The last is the
        healed text when the server cannot be made to generate it (healing off): the prompt
        then carries it instead, and the result must still start with it."""
        raise NotImplementedError

    def _parse(self, event: dict[str, Any]) -> StreamChunk:
        raise NotImplementedError

    def _check_result(self, request: GenerationRequest, result: GenerationResult) -> None:
        """Backend hook, after a completed stream."""

    def complete(self, request: GenerationRequest, cancel: CancelToken) -> GenerationResult:
        prompt = request.tokens
        result = GenerationResult(text="", prompt_tokens=len(prompt))
        if not prompt:
            result.stop_reason = "empty"
            return result
        if cancel.cancelled:
            result.stop_reason = "cancelled"
            return result
        self._ensure_ready()
        path, body, prefix = self._completion_request(request)
        rules = TextRules(request, prefix)
        started = time.perf_counter()
        first: float | None = None
        response: HttpResponse | None = None
        try:
            response = self.http.open("POST", path, body, cancel=cancel,
                                      deadline=self._deadline(), stream=True)
            if response.status != 200:
                raise HttpStatusError(response.status, response.read_all())
            self._connected()
            self.counters.calls += 1  # as the local engine counts: calls that reached the model
            self._remember(request.key, prompt)
            result.stop_reason = "eog"  # a stream that just ends has nothing more to say
            for event in _events(response):
                if cancel.cancelled:  # events already buffered are stale too
                    raise Cancelled()
                chunk = self._parse(event)
                if first is None and (chunk.text or chunk.tokens):
                    first = time.perf_counter()
                _account(result, chunk)
                if chunk.finish:
                    # Keep reading: the server ends the stream itself, and OpenAI-style
                    # servers send the usage figures in one more event after this one.
                    result.stop_reason = chunk.finish
                if chunk.text and request.on_text is not None:
                    request.on_text(rules.text + chunk.text)  # as the local engine reports it
                reason = rules.feed(chunk.text) if chunk.text else None
                if reason is not None:
                    result.stop_reason = reason
                    break
            else:
                response.drain()
        except Cancelled:
            result.stop_reason = "cancelled"
        except DeadlineExceeded as exc:
            if not rules.produced_any:
                raise self._failed(*self._describe_failure(exc, path)) from None
            # A slow server: keep the whole lines it managed, never half a word.
            produced = rules.text[len(request.heal):]
            rules.text = rules.text[: len(request.heal) + max(0, produced.rfind("\n"))]
            result.stop_reason = "budget"
        except (OSError, HttpStatusError, RemoteEngineError, json.JSONDecodeError) as exc:
            if cancel.cancelled:
                result.stop_reason = "cancelled"
            elif isinstance(exc, RemoteEngineError):
                raise self._failed(str(exc), "error") from None
            else:
                raise self._failed(*self._describe_failure(exc, path)) from None
        finally:
            if response is not None:
                response.close()  # a stream we stopped reading is closed: the server stops
        ended = time.perf_counter()
        result.prefill_ms = ((first or ended) - started) * 1000
        result.generate_ms = (ended - (first or ended)) * 1000
        result.text = rules.text
        reached = response is not None and response.status == 200
        if reached and result.encoded_tokens == 0 and result.reused_tokens == 0:
            # The server did not say what its cache saved: count the prompt as computed.
            result.encoded_tokens = len(prompt)
            self.counters.extra["no_cache_stats"] = self.counters.extra.get("no_cache_stats", 0) + 1
        self.counters.tokens_encoded += result.encoded_tokens
        self.counters.tokens_reused += result.reused_tokens
        self.counters.tokens_generated += result.generated_tokens
        if result.stop_reason != "cancelled":
            self._check_result(request, result)
        return result

    # ---- bookkeeping shared with the Engine protocol

    def _remember(self, key: str, tokens: list[int]) -> None:
        self._sent[key] = list(tokens)
        self._sent.move_to_end(key)
        while len(self._sent) > 64:
            self._sent.popitem(last=False)

    def cached_tokens(self, key: str) -> list[int]:
        """The prompt last sent for a file: what the server's prefix cache can hold for it."""
        return list(self._sent.get(key, []))

    def forget(self, key: str) -> None:
        self._sent.pop(key, None)

    def persist(self, key: str | None = None) -> int:
        return 0  # the server owns its cache

    def describe(self) -> dict[str, object]:
        tokenizer = self._tokenizer
        return {
            "backend": self.backend,
            "url": self.url,
            "model": self.options.model,
            "device": f"remote ({self.url})",
            "state": self.state,
            "lastError": self.last_error,
            "tokenizer": tokenizer.name if tokenizer is not None else "not loaded yet",
            "apiKey": "set" if self.options.api_key else "none",
            "requestTimeoutMs": int(self.options.request_timeout_s * 1000),
            "connectionsOpened": self.http.connections_opened,
        }

    def close(self) -> None:
        self.http.close()
        if self._tokenizer is not None:
            self._tokenizer.close()
