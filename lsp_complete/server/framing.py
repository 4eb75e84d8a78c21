"""LSP's base protocol on a byte stream: where each message starts and ends, for one connection.

Owns the reading side of a connection (stdio or a TCP socket): Content-Length headers, the
message size cap, decoding bodies, recovering from mis-framed input, and `serve`, the loop
that hands each decoded message to `Protocol.handle_payload` (pygls keeps dispatching).

pygls' own reader (pygls.io_.run_async) trusts every header: a Content-Length off by a few
bytes desynchronises the stream for good, a huge one crashes it, invalid UTF-8 drops the
message and malformed JSON gets no answer (issue 14). Here:

- a message over `max_message_bytes` is read in chunks and thrown away (never held whole); a
  request among them gets -32600, its id read from the first bytes;
- malformed JSON gets -32700; invalid UTF-8 is replaced (U+FFFD), the message still counts;
- a line that is not a header: skip to the next "Content-Length:";
- a wrong Content-Length: a valid JSON body can never contain "Content-Length: <digits>" and a
  line break (a raw line break cannot stand inside a JSON string, and those letters cannot
  stand outside one), so finding that inside a body means the next message started there. A
  body whose declared length is too short is joined with what follows it up to that header
  when that makes it valid JSON; one that is too long and not followed by anything is taken
  as it is once the client has sent nothing for `STALL_S`, if it is valid JSON.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import re
import signal
import sys
import threading
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, BinaryIO
from typing import Protocol as TypingProtocol

from pygls.io_ import StdoutWriter

from lsp_complete.processes import EDITOR_CHECK_S, process_alive, watchable
from lsp_complete.server.protocol import INVALID_REQUEST, PARSE_ERROR, MsgId, valid_id

if TYPE_CHECKING:
    from pygls.lsp.server import LanguageServer

    from lsp_complete.server.protocol import Protocol

log = logging.getLogger(__name__)

DEFAULT_MAX_MESSAGE_BYTES = 32 * 1024 * 1024
# Answers a socket's client has not read yet: past the soft bound its requests wait (the
# kernel's socket buffer holds them, bounded); past the hard one it is dropped (one huge
# answer, or what the server sends unasked while it reads nothing).
SOFT_UNSENT_BYTES = 4 * 1024 * 1024
HARD_UNSENT_BYTES = 64 * 1024 * 1024
CHUNK = 64 * 1024
# Signals that end a stdio server as `exit` would, its caches saved first (editors send
# SIGTERM; a terminal SIGHUP or SIGINT).
STOP_SIGNALS = tuple(getattr(signal, name) for name in ("SIGTERM", "SIGHUP", "SIGINT")
                     if hasattr(signal, name))  # Windows has no SIGHUP
MAX_HEADER_LINE = 8 * 1024  # longer without a line break: not a header
STALL_S = 1.0  # no byte for this long inside a body: see whether it is complete already
ID_PEEK_BYTES = 4096  # where the id of a refused oversize request is looked for
_MAX_LENGTH_DIGITS = 18  # more is over any cap (and int() refuses 4300+ digits)

_HEADER = re.compile(rb"([!#$%&'*+.^_`|~0-9A-Za-z-]+):[ \t]*(.*?)[ \t]*")
_CONTENT_LENGTH = re.compile(rb"content-length:", re.IGNORECASE)
_CONTENT_TYPE = re.compile(rb"content-type:", re.IGNORECASE)
_HEADER_IN_BODY = re.compile(rb"content-length:[ \t]*[0-9]+\r?\n", re.IGNORECASE)
_HEADER_IN_BODY_MAX = 64  # bytes such a match can span, kept across chunks


class ByteSource(TypingProtocol):
    """What a connection reads from: b"" at the end. asyncio.StreamReader is one."""

    async def read(self, n: int = -1) -> bytes: ...


@dataclass(frozen=True)
class Message:
    payload: Any  # the decoded JSON value


@dataclass(frozen=True)
class Unparsable:
    reason: str


@dataclass(frozen=True)
class TooLarge:
    size: int
    msg_id: MsgId | None


@dataclass(frozen=True)
class BadLength:
    """A message whose Content-Length is no number ("-5", "abc", "+5"): refused, as the base
    protocol allows no other; what follows it up to the next header is thrown away."""

    value: str
    msg_id: MsgId | None


Frame = Message | Unparsable | TooLarge | BadLength


class FrameReader:
    """Splits a byte stream into messages; `next_frame` returns None at the end."""

    def __init__(self, source: ByteSource, max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
                 stall_s: float = STALL_S, on_wait: Callable[[], None] | None = None) -> None:
        """`on_wait`: called before each read from `source` (the bytes buffered are used up,
        or hold only part of a message)."""
        self._source = source
        self._on_wait = on_wait
        self.max_message_bytes = max_message_bytes
        self._stall_s = stall_s
        self._buf = bytearray()
        self._eof = False
        self._resyncing = False  # one log line per stretch of skipped bytes
        self._discarding = 0  # bytes of a refused message still to throw away
        self._bad_length: bytes | None = None  # the last headers' Content-Length, not a number

    async def next_frame(self) -> Frame | None:
        while True:
            if self._discarding:
                await self._discard()
            length = await self._read_headers()
            if length is None:
                return None
            if self._bad_length is not None:
                return await self._refuse_bad_length(self._bad_length)
            if length > self.max_message_bytes:
                return await self._refuse(length)
            frame = await self._read_body(length)
            if frame is not None:
                return frame

    def buffered(self) -> bool:
        """Whether bytes the client sent after the last message are here already (the next
        message, or a part of it)."""
        return bool(self._buf)

    # ------------------------------------------------------------------ reading

    async def _fill(self, timeout: float | None = None) -> bool:
        """One more chunk into the buffer: False at the end, or when `timeout` passed."""
        if self._eof:
            return False
        if self._on_wait is not None:
            self._on_wait()
        try:
            if timeout is None:
                chunk = await self._source.read(CHUNK)
            else:
                chunk = await asyncio.wait_for(self._source.read(CHUNK), timeout)
        except TimeoutError:
            return False
        if not chunk:
            self._eof = True
            return False
        self._buf += chunk
        return True

    async def _read_headers(self) -> int | None:
        """The Content-Length of the next message, its headers consumed; None at the end.
        A Content-Length that is no number gives 0 and sets `_bad_length`."""
        length: int | None = None
        self._bad_length = None
        while True:
            end = self._buf.find(b"\n")
            if end < 0:
                if len(self._buf) > MAX_HEADER_LINE:
                    self._resync("a header line too long")
                    length = None
                elif not await self._fill():
                    if self._buf.strip():
                        log.warning("the stream ended inside a message header")
                    return None
                continue
            line = bytes(self._buf[:end]).rstrip(b"\r")
            if not line:  # the end of the headers (or a stray blank line between messages)
                del self._buf[: end + 1]
                if length is not None:
                    return length
                continue
            header = _HEADER.fullmatch(line)
            name = header.group(1).lower() if header else b""
            value = header.group(2) if header else b""
            if name == b"content-length" and value.isdigit():
                length = int(value) if len(value) <= _MAX_LENGTH_DIGITS else sys.maxsize
                self._bad_length = None
            elif name == b"content-length":
                # Skipping to the next header would lose a request silently (its client
                # waits for ever): refuse it instead, with its id.
                length, self._bad_length = 0, value
            elif name != b"content-type":
                self._resync(f"not a header: {line[:80]!r}")
                length = None
                continue
            self._resyncing = False
            del self._buf[: end + 1]

    def _resync(self, reason: str) -> None:
        """Skip to the next "Content-Length:" (keeping a tail that may be the start of one)."""
        found = _CONTENT_LENGTH.search(self._buf, 1)
        keep_tail = len(b"content-length:") - 1
        drop = found.start() if found else max(1, len(self._buf) - keep_tail)
        if not self._resyncing:
            log.warning("skipping bytes up to the next Content-Length header: %s", reason)
        self._resyncing = found is None
        del self._buf[:drop]

    async def _read_body(self, length: int) -> Frame | None:
        scanned = 0  # the buffer before this holds no header
        tried = -1  # the buffer length last tried as a whole body after a stall
        while True:
            # Only where a header could start inside this body (not the messages after it).
            start = max(0, scanned - _HEADER_IN_BODY_MAX)
            found = _HEADER_IN_BODY.search(self._buf, start, length + _HEADER_IN_BODY_MAX)
            if found and found.start() < length:
                log.warning("Content-Length %d is longer than the message (%d bytes): the next "
                            "message's header starts inside it", length, found.start())
                return self._decode(self._take(found.start()))
            if len(self._buf) >= length:
                break
            scanned = len(self._buf)
            if await self._fill(self._stall_s):
                continue
            if self._eof:
                if self._buf:
                    log.warning("the stream ended inside a message body")
                frame = self._decode(bytes(self._buf)) if self._buf else None
                self._buf.clear()
                return frame if isinstance(frame, Message) else None
            if len(self._buf) != tried:  # stalled: complete already, with a wrong length?
                tried = len(self._buf)
                frame = self._decode(bytes(self._buf))
                if isinstance(frame, Message):
                    log.warning("Content-Length %d is longer than the message (%d bytes)",
                                length, len(self._buf))
                    self._buf.clear()
                    return frame
        body = self._take(length)
        frame = self._decode(body)
        if isinstance(frame, Unparsable):
            return self._join_short_body(body) or frame
        return frame

    def _take(self, size: int) -> bytes:
        body = bytes(self._buf[:size])
        del self._buf[:size]
        return body

    def _join_short_body(self, body: bytes) -> Frame | None:
        """`body` is not JSON and what follows it is not a header: the Content-Length may
        have been too short. Join what follows, up to the next header, if that makes valid
        JSON (only bytes already read: never wait for more)."""
        if not self._buf or _CONTENT_LENGTH.match(self._buf) or _CONTENT_TYPE.match(self._buf):
            return None
        found = _HEADER_IN_BODY.search(self._buf)
        end = found.start() if found else len(self._buf)
        frame = self._decode(body + bytes(self._buf[:end]))
        if not isinstance(frame, Message):
            return None
        log.warning("Content-Length %d is shorter than the message (%d bytes)",
                    len(body), len(body) + end)
        del self._buf[:end]
        return frame

    async def _refuse(self, length: int) -> TooLarge:
        """A message over the cap: its id from its first bytes; the rest is thrown away
        before the next message is read."""
        msg_id = await self._peek_id(min(ID_PEEK_BYTES, length))
        log.warning("skipping a message of %d bytes: over the limit of %d bytes%s", length,
                    self.max_message_bytes, _request(msg_id))
        self._discarding = length
        return TooLarge(length, msg_id)

    async def _refuse_bad_length(self, value: bytes) -> BadLength:
        """A message whose length is unknown: its id from its first bytes; it is thrown away
        up to the next header (once its refusal is sent: the client may wait for that)."""
        msg_id = await self._peek_id(ID_PEEK_BYTES)
        shown = value[:40].decode("utf-8", errors="replace")
        log.warning("skipping a message whose Content-Length is not a number: %r%s", shown,
                    _request(msg_id))
        self._discarding = sys.maxsize
        return BadLength(shown, msg_id)

    async def _peek_id(self, peek: int) -> MsgId | None:
        """The id in the next message's first `peek` bytes: read until it shows, or up to
        `peek` bytes, the next header or a stall of the client."""
        while True:
            found = _HEADER_IN_BODY.search(self._buf, 0, peek)
            msg_id = guess_id(bytes(self._buf[: found.start() if found else peek]))
            if (msg_id is not None or found or len(self._buf) >= peek
                    or not await self._fill(self._stall_s)):
                return msg_id

    async def _discard(self) -> None:
        """Throw away the refused message chunk by chunk; stop early where the next
        message's header shows that its declared length was wrong."""
        declared = remaining = self._discarding
        self._discarding = 0
        while True:
            found = _HEADER_IN_BODY.search(self._buf)
            if found and found.start() < remaining:
                log.warning("the next message's header came after %d bytes",
                            declared - remaining + found.start())
                del self._buf[: found.start()]
                return
            if len(self._buf) >= remaining:
                del self._buf[:remaining]
                return
            drop = max(0, len(self._buf) - _HEADER_IN_BODY_MAX)
            del self._buf[:drop]
            remaining -= drop
            if not await self._fill():
                self._buf.clear()
                return

    def _decode(self, body: bytes) -> Frame:
        try:
            text = body.decode("utf-8")
        except UnicodeDecodeError as exc:
            # An editor's buffer with a stray byte: keep the message, mark the byte.
            log.warning("invalid UTF-8 in a message (%s): replaced with U+FFFD", exc.reason)
            text = body.decode("utf-8", errors="replace")
        try:
            return Message(json.loads(text))
        except RecursionError:
            return Unparsable("nested too deeply")
        except ValueError as exc:
            if "integer string conversion" in str(exc):  # Python's words, not the client's
                return Unparsable(f"a number of over {sys.get_int_max_str_digits()} digits")
            return Unparsable(str(exc)[:200])


def _request(msg_id: MsgId | None) -> str:
    return f" (request {msg_id!r})" if msg_id is not None else ""


def guess_id(prefix: bytes) -> MsgId | None:
    """The top-level "id" of a message from its first bytes, or None (absent or cut off)."""
    text = prefix.decode("utf-8", errors="replace")
    decoder = json.JSONDecoder()
    try:
        index = _skip_space(text, 0)
        if text[index] != "{":
            return None
        index += 1
        while True:
            key, index = decoder.raw_decode(text, _skip_space(text, index))
            index = _skip_space(text, index)
            if not isinstance(key, str) or text[index] != ":":
                return None
            value, index = decoder.raw_decode(text, _skip_space(text, index + 1))
            if key == "id":  # a number cut off at the prefix's end may be another
                return value if valid_id(value) and index < len(text) else None
            index = _skip_space(text, index)
            if text[index] != ",":
                return None
            index += 1
    except (ValueError, IndexError, RecursionError):
        return None


def _skip_space(text: str, index: int) -> int:
    while index < len(text) and text[index] in " \t\r\n":
        index += 1
    return index


# --- one connection -------------------------------------------------------------------------


async def serve(protocol: Protocol, source: ByteSource,
                max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
                room: Callable[[], Awaitable[None]] | None = None) -> None:
    """Read messages from `source` and hand them to `protocol` until the stream ends or the
    client sends `exit`. The protocol's writer must be set (answers go there). `room`, when
    given, is awaited before each message: the client has read enough of its answers
    (`BoundedStream.room`).

    The protocol is told whether more of the client's bytes are here already when it gets a
    message (`Protocol.more_input`), and is to catch up before the reader waits for more
    (`Protocol.caught_up`): it may set aside a notification that a later one supersedes."""
    reader = FrameReader(source, max_message_bytes, on_wait=protocol.caught_up)
    try:
        await _serve(protocol, reader, max_message_bytes, room)
    finally:  # (what was set aside is moot once the connection is gone)
        protocol.more_input = False
        protocol.drop_set_aside()


async def _serve(protocol: Protocol, reader: FrameReader, max_message_bytes: int,
                 room: Callable[[], Awaitable[None]] | None) -> None:
    while protocol.exit_code is None:
        if room is not None:
            await room()
        frame = await reader.next_frame()
        if frame is None:
            break
        if isinstance(frame, Message):
            protocol.more_input = reader.buffered()
            protocol.handle_payload(frame.payload)
        elif isinstance(frame, Unparsable):
            log.warning("a message is not valid JSON: %s", frame.reason)
            protocol.send_error(None, PARSE_ERROR, f"invalid JSON: {frame.reason}")
        elif isinstance(frame, BadLength):
            if frame.msg_id is not None:  # a notification gets no answer
                protocol.send_error(frame.msg_id, INVALID_REQUEST,
                                    f"message refused: its Content-Length {frame.value!r} is "
                                    "not a number of bytes")
        else:
            protocol.send_error(frame.msg_id, INVALID_REQUEST,
                                f"message of {frame.size} bytes refused: over the limit of "
                                f"{max_message_bytes} bytes")
        # Let the tasks that handlers started run between messages, as pygls' reader did.
        await asyncio.sleep(0)


class BoundedStream:
    """Writes to a socket's asyncio stream, with a bound on what its client has not read yet.
    Past `soft` bytes unsent, `room()` waits until at most a quarter of that is left: the
    server reads none of its requests meanwhile (`serve`), so a client that does not read
    cannot grow the server. Past `hard` the connection is dropped: what is unsent is
    thrown away, and reading ends."""

    def __init__(self, writer: asyncio.StreamWriter, name: str,
                 soft: int = SOFT_UNSENT_BYTES, hard: int = HARD_UNSENT_BYTES) -> None:
        self._writer = writer
        self._name = name  # who it is, in the log
        self._hard = hard
        writer.transport.set_write_buffer_limits(high=soft)  # low: a quarter of it
        self.dropped = False

    def unsent(self) -> int:
        return self._writer.transport.get_write_buffer_size()

    def write(self, data: bytes) -> None:
        if self._writer.is_closing():
            return
        self._writer.write(data)
        if self.unsent() > self._hard:
            log.warning("%s: %d bytes of answers not read, over the limit of %d: dropping "
                        "the connection", self._name, self.unsent(), self._hard)
            self.dropped = True
            self._writer.transport.abort()

    async def room(self) -> None:
        """Wait while the client has over the soft bound to read (ConnectionError: gone)."""
        await self._writer.drain()


class PipeSource:
    """Reads a file descriptor (stdin) on a daemon thread, at most two chunks ahead of the
    reader: a read blocked at exit never holds the process up, and a client that writes
    faster than the server reads fills the pipe, not the server's memory."""

    def __init__(self, fd: int) -> None:
        self._fd = fd
        self._chunks: asyncio.Queue[bytes] | None = None
        self._room = threading.Semaphore(2)
        self._ended = False

    async def read(self, n: int = -1) -> bytes:
        if self._ended:
            return b""
        if self._chunks is None:
            self._chunks = asyncio.Queue()
            loop = asyncio.get_running_loop()
            threading.Thread(target=self._run, args=(loop, self._chunks), daemon=True,
                             name="lsp-stdin").start()
        chunk = await self._chunks.get()
        self._room.release()
        self._ended = not chunk
        return chunk

    def _run(self, loop: asyncio.AbstractEventLoop, chunks: asyncio.Queue[bytes]) -> None:
        while True:
            self._room.acquire()
            try:
                chunk = os.read(self._fd, CHUNK)
            except OSError:
                chunk = b""
            try:
                loop.call_soon_threadsafe(chunks.put_nowait, chunk)
            except RuntimeError:  # the loop is closed: the server is exiting
                return
            if not chunk:
                return


def claim_stdout() -> BinaryIO:
    """Standard output for LSP messages alone: what else writes to file descriptor 1 (a
    native library's diagnostics, the backtrace llama.cpp prints when it aborts, a stray
    print) goes to standard error instead, where it cannot break the client's framing."""
    sys.stdout.flush()
    try:
        channel = os.fdopen(os.dup(sys.stdout.fileno()), "wb")
        os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):  # no standard error to point it at
        return sys.stdout.buffer
    sys.stdout = sys.stderr
    return channel


def serve_stdio(server: LanguageServer, max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
                on_close: Callable[[], Awaitable[None]] | None = None) -> int:
    """Serve one client over stdin/stdout; the exit code (the spec's: 1 on `exit` without
    `shutdown`, 0 otherwise, also when the client closes stdin). `on_close` (the KV caches
    saved) runs when serving ends without `shutdown`: stdin closed, `exit` alone, a signal
    (SIGTERM, SIGHUP, SIGINT) or the editor's process gone."""
    protocol: Protocol = server.protocol  # type: ignore[assignment]
    protocol.set_writer(StdoutWriter(claim_stdout()))
    try:
        asyncio.run(_serve_until_ended(server, protocol, max_message_bytes, on_close))
    except BrokenPipeError:
        log.error("the connection to the client is lost: shutting down")
    except KeyboardInterrupt:  # before the signal handlers are in place
        pass
    finally:
        server.shutdown()
    return protocol.exit_code or 0


async def _serve_until_ended(server: LanguageServer, protocol: Protocol, max_message_bytes: int,
                             on_close: Callable[[], Awaitable[None]] | None) -> None:
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    handled = []
    for sig in STOP_SIGNALS:
        try:
            loop.add_signal_handler(sig, _stop_on, sig, stop)
            handled.append(sig)
        except (NotImplementedError, RuntimeError):  # Windows' event loop has none
            pass
    ends = [asyncio.ensure_future(serve(protocol, PipeSource(sys.stdin.buffer.fileno()),
                                        max_message_bytes)),
            asyncio.ensure_future(stop.wait())]
    watcher = asyncio.ensure_future(_watch_editor(server, stop))
    try:
        done, _ = await asyncio.wait(ends, return_when=asyncio.FIRST_COMPLETED)
        for task in done:
            task.result()  # a failure of the reader (BrokenPipeError) goes on up
    finally:
        for task in [*ends, watcher]:
            task.cancel()
        for sig in handled:
            loop.remove_signal_handler(sig)
    if on_close is not None and not protocol._shutdown:
        await on_close()


def _stop_on(sig: signal.Signals, stop: asyncio.Event) -> None:
    log.info("%s: saving the caches and exiting", sig.name)
    stop.set()


async def _watch_editor(server: LanguageServer, stop: asyncio.Event) -> None:
    """The editor's process, looked at every few seconds once initialize named it: when it is
    gone the server exits, as the spec asks, even while something else holds stdin open."""
    protocol: Protocol = server.protocol  # type: ignore[assignment]
    while not protocol.initialize_seen():
        await asyncio.sleep(0.25)
    pid = watchable(getattr(server, "process_id", None))
    if pid is None:
        return
    while process_alive(pid):
        await asyncio.sleep(EDITOR_CHECK_S)
    log.warning("the editor's process %d is gone: exiting", pid)
    stop.set()
