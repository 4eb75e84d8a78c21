"""`lsp-complete serve` as a frontend: the editor's LSP bytes to the daemon and back.

The editor's bytes go to the daemon as they come (the daemon reads them with the robust reader
of server/framing.py, as an in-process server would); a copy is split into messages here
only to remember what a new daemon would have to be told again: the `initialize` request,
`initialized`, the settings and workspace folders sent since, each open document's current
text (didOpen / didChange / didClose applied here), and the requests still waiting for their
answers. The daemon's messages are passed on one by one.

When the daemon goes away (killed, crashed, stopped), the frontend starts a new one, and
before anything else tells it the session again: `initialize` (its answer is swallowed),
`initialized`, the settings, the folders and a didOpen per open document, with its current
text. Requests the old daemon never answered are answered empty (null), so the editor shows
no error. Past RESTART_LIMIT restarts in RESTART_WINDOW_S it gives up: it tells the user and
exits (the editor's next start serves in process if no daemon can run).

Two threads and no event loop: the main one reads the editor, one reads the daemon. This
module imports neither pygls nor the engine: every editor window runs one of these, and it
should weigh what a bare Python does.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import socket
import sys
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lsp_complete.daemon import hello as wire
from lsp_complete.daemon.paths import NO_DAEMON_ENV, RuntimeDirError, log_path
from lsp_complete.daemon.start import Connected, DaemonUnavailable, open_session
from lsp_complete.processes import EDITOR_CHECK_S, process_alive, watchable

log = logging.getLogger(__name__)

CHUNK = 64 * 1024
MAX_HEADER_LINE = 8 * 1024
RESTART_LIMIT = 5
RESTART_WINDOW_S = 60.0
CONNECT_ATTEMPTS = 3
EXIT_WAIT_S = 5.0  # after exit (or the editor closing stdin): for the daemon to hang up
REPLAY_ID = "lsp-complete-replay-"

_CONTENT_LENGTH = re.compile(rb"content-length:", re.IGNORECASE)
_BREAK = re.compile(r"\r\n|\r|\n")  # LSP's line breaks, "\r\n" first


# --------------------------------------------------------------------------- messages


class Splitter:
    """Message bodies out of a byte stream, leniently: a line that is not a header is skipped
    up to the next Content-Length, a message over `max_bytes` is skipped unread."""

    def __init__(self, max_bytes: int) -> None:
        self._buf = bytearray()
        self._skip = 0
        self._max = max_bytes

    def feed(self, data: bytes) -> list[bytes]:
        buf = self._buf
        buf += data
        bodies: list[bytes] = []
        while True:
            if self._skip:
                dropped = min(self._skip, len(buf))
                del buf[:dropped]
                self._skip -= dropped
                if self._skip:
                    return bodies
            header = self._headers()
            if header is None:
                return bodies
            length, start = header
            if length > self._max:
                del buf[:start]
                self._skip = length
                continue
            if len(buf) < start + length:
                return bodies
            bodies.append(bytes(buf[start : start + length]))
            del buf[: start + length]

    @property
    def pending(self) -> bytes:
        """The bytes of the message begun and not yet complete."""
        return b"" if self._skip else bytes(self._buf)

    def _headers(self) -> tuple[int, int] | None:
        """(Content-Length, where the body starts) once the headers are complete."""
        buf = self._buf
        pos, length = 0, None
        while True:
            end = buf.find(b"\n", pos)
            if end < 0:
                if len(buf) - pos > MAX_HEADER_LINE:
                    self._resync()
                    pos, length = 0, None
                    continue
                return None
            line = bytes(buf[pos:end]).rstrip(b"\r")
            pos = end + 1
            if not line:
                if length is not None:
                    return length, pos
                del buf[:pos]  # a stray blank line between messages
                pos = 0
                continue
            name, colon, value = line.partition(b":")
            name, value = name.strip().lower(), value.strip()
            if colon and name == b"content-length" and value.isdigit() and len(value) < 19:
                length = int(value)
            elif not (colon and name == b"content-type"):
                self._resync()
                pos, length = 0, None

    def _resync(self) -> None:
        found = _CONTENT_LENGTH.search(self._buf, 1)
        del self._buf[: found.start() if found else max(1, len(self._buf) - 15)]


def frame(message: dict[str, Any]) -> bytes:
    body = json.dumps(message).encode()  # ASCII: a lone surrogate survives
    return b"Content-Length: %d\r\n\r\n" % len(body) + body


def _key(msg_id: Any) -> tuple[str, Any] | None:
    """A request id as a dict key (1 and "1" differ); None for what LSP does not allow as
    an id (the daemon answers those with an error)."""
    if isinstance(msg_id, str) or (isinstance(msg_id, int) and not isinstance(msg_id, bool)):
        return (type(msg_id).__name__, msg_id)
    return None


# --------------------------------------------------------------------------- documents


def _split_lines(text: str) -> list[str]:
    """Lines with their breaks; the last has none (and may be empty)."""
    lines, pos = [], 0
    for match in _BREAK.finditer(text):
        lines.append(text[pos : match.end()])
        pos = match.end()
    lines.append(text[pos:])
    return lines


def _content(line: str) -> str:
    return line.rstrip("\r\n") if line.endswith(("\r", "\n")) else line


def _units_to_chars(line: str, units: int, encoding: str) -> int:
    """Code points of `line` that `units` position units cover, as documents.Document counts
    them (a count inside a character snaps back to its start; a lone surrogate counts as the
    U+FFFD the server stores). Not imported from there: that module loads tree-sitter."""
    if encoding == "utf-32" or line.isascii():
        return min(units, len(line))
    count = 0
    for index, char in enumerate(line):
        code = ord(char)
        if encoding == "utf-8":
            width = 1 if code < 0x80 else 2 if code < 0x800 else 3 if code < 0x10000 else 4
        else:
            width = 2 if code > 0xFFFF else 1
        if count + width > units:
            return index
        count += width
    return len(line)


class TextMirror:
    """A document's text, as a list of lines, edited as the server edits its copy."""

    def __init__(self, text: str) -> None:
        self.lines = _split_lines(text)

    @property
    def text(self) -> str:
        return "".join(self.lines)

    def _locate(self, line: int, character: int, encoding: str) -> tuple[int, int]:
        if line < 0:
            return 0, 0
        if line >= len(self.lines):
            return len(self.lines) - 1, len(self.lines[-1])
        if character <= 0:
            return line, 0
        return line, _units_to_chars(_content(self.lines[line]), character, encoding)

    def apply(self, text: str, rng: tuple[int, int, int, int] | None, encoding: str) -> None:
        if rng is None:
            self.lines = _split_lines(text)
            return
        start = self._locate(rng[0], rng[1], encoding)
        end = self._locate(rng[2], rng[3], encoding)
        if end < start:
            start, end = end, start
        lines = self.lines
        first, last = start[0], end[0] + 1
        segment = lines[first][: start[1]] + text + lines[end[0]][end[1] :]
        # An edit can join or split a "\r\n": take the neighbouring line into the re-split.
        if segment.startswith("\n") and first > 0 and lines[first - 1].endswith("\r"):
            first -= 1
            segment = lines[first] + segment
        if segment.endswith("\r") and last < len(lines):
            segment += lines[last]
            last += 1
        new = _split_lines(segment)
        if last < len(lines):
            new.pop()  # the segment ends with a line break: the next line follows it
        lines[first:last] = new


@dataclass
class OpenDocument:
    language_id: str
    version: int
    text: TextMirror


@dataclass
class EditorState:
    """What the editor told the server, as much as a new daemon must be told again, and
    the requests it still waits for."""

    initialize: dict[str, Any] | None = None
    initialize_answered: bool = False
    initialized: bool = False
    shutdown: bool = False
    exited: bool = False
    encoding: str = "utf-16"
    configuration: dict[str, Any] | None = None  # the last didChangeConfiguration
    folders: list[dict[str, Any]] = field(default_factory=list)  # didChangeWorkspaceFolders
    documents: dict[str, OpenDocument] = field(default_factory=dict)
    waiting: dict[tuple[str, Any], tuple[Any, str]] = field(default_factory=dict)

    def track(self, message: dict[str, Any]) -> None:
        method = message.get("method")
        if not isinstance(method, str):
            return  # the editor's answer to a request of the daemon
        if (key := _key(message.get("id"))) is not None:
            self.waiting[key] = (message["id"], method)
        params = message.get("params")
        try:
            self._track(method, message, params if isinstance(params, dict) else {})
        except (KeyError, TypeError, ValueError, AttributeError, IndexError):
            log.debug("not tracking a malformed %s", method)

    def _track(self, method: str, message: dict[str, Any], params: dict[str, Any]) -> None:
        if method == "initialize" and self.initialize is None:
            self.initialize = message
        elif method == "initialized":
            self.initialized = True
        elif method == "shutdown":
            self.shutdown = True
        elif method == "exit":
            self.exited = True
        elif method == "textDocument/didOpen":
            item = params["textDocument"]
            self.documents[item["uri"]] = OpenDocument(
                str(item.get("languageId", "")), int(item.get("version", 0)),
                TextMirror(str(item["text"])))
        elif method == "textDocument/didChange":
            doc = self.documents.get(params["textDocument"]["uri"])
            if doc is None:
                return
            for change in params["contentChanges"]:
                rng = change.get("range")
                doc.text.apply(str(change["text"]), _range(rng) if rng else None, self.encoding)
            doc.version = int(params["textDocument"].get("version", doc.version))
        elif method == "textDocument/didClose":
            self.documents.pop(params["textDocument"]["uri"], None)
        elif method == "workspace/didChangeConfiguration":
            self.configuration = message
        elif method == "workspace/didChangeWorkspaceFolders":
            self.folders.append(message)

    def answered(self, message: dict[str, Any]) -> None:
        """A response of the daemon goes to the editor: that request waits no more."""
        key = _key(message.get("id"))
        entry = self.waiting.pop(key, None) if key is not None else None
        if entry is not None and entry[1] == "initialize":
            self.initialize_answered = True
            self.encoding = _position_encoding(message)

    def replay(self, replay_id: str) -> list[bytes]:
        """What a new daemon is told before anything else, in order."""
        frames: list[bytes] = []
        if self.initialize is not None:
            again = self.initialize
            if self.initialize_answered:
                again = {**again, "id": replay_id}
            frames.append(frame(again))
        if self.initialized:
            frames.append(frame({"jsonrpc": "2.0", "method": "initialized", "params": {}}))
        frames.extend(frame(m) for m in self.folders)
        if self.configuration is not None:
            frames.append(frame(self.configuration))
        for uri, doc in self.documents.items():
            frames.append(frame({"jsonrpc": "2.0", "method": "textDocument/didOpen", "params": {
                "textDocument": {"uri": uri, "languageId": doc.language_id,
                                 "version": doc.version, "text": doc.text.text}}}))
        return frames

    def unanswered(self) -> list[bytes]:
        """Empty answers to every request the daemon will not answer (the initialize still
        waiting is sent again instead)."""
        answers = []
        for key, (msg_id, method) in list(self.waiting.items()):
            if method == "initialize" and not self.initialize_answered:
                continue
            del self.waiting[key]
            answers.append(frame({"jsonrpc": "2.0", "id": msg_id, "result": None}))
        return answers


def _range(rng: dict[str, Any]) -> tuple[int, int, int, int]:
    start, end = rng["start"], rng["end"]
    return int(start["line"]), int(start["character"]), int(end["line"]), int(end["character"])


def _position_encoding(response: dict[str, Any]) -> str:
    result = response.get("result")
    capabilities = result.get("capabilities") if isinstance(result, dict) else None
    encoding = capabilities.get("positionEncoding") if isinstance(capabilities, dict) else None
    return encoding if encoding in ("utf-8", "utf-16", "utf-32") else "utf-16"


# --------------------------------------------------------------------------- the frontend


class Forwarder:
    def __init__(self, conn: Connected, hello: dict[str, Any], log_level: str,
                 max_message_bytes: int) -> None:
        self.hello = hello
        self.log_level = log_level
        self.max_message_bytes = max_message_bytes
        self.sock = conn.sock
        self.daemon_pid = conn.reply.get("pid")
        self.path = conn.path
        self.editor = EditorState()
        self.lock = threading.Lock()  # the socket in use and the editor's state
        self._from_editor_split = Splitter(max_message_bytes)
        self._pending = conn.rest  # the daemon's bytes read with its hello
        self._closing = False  # the editor sent exit or closed stdin: a hang-up is expected
        self._swallow: set[tuple[str, Any]] = set()  # answers to replayed requests
        self._restarts: deque[float] = deque()
        self._replays = 0
        self._stdout = sys.stdout.buffer.fileno()
        self.restarted = 0  # how many times a daemon was started again

    def run(self) -> int:
        """Forward until the editor exits or closes stdin; the exit code LSP asks for."""
        reader = threading.Thread(target=self._daemon_loop, name="lsp-complete-from-daemon",
                                  daemon=True)
        reader.start()
        threading.Thread(target=self._watch_editor, args=(reader,), daemon=True,
                         name="lsp-complete-editor-watch").start()
        self._editor_loop()
        self._end_session(reader)
        if self.editor.exited:
            return 0 if self.editor.shutdown else 1
        return 0

    def _end_session(self, reader: threading.Thread) -> None:
        with self.lock:
            self._closing = True
            with contextlib.suppress(OSError):
                self.sock.shutdown(socket.SHUT_WR)  # the daemon ends the session
        reader.join(EXIT_WAIT_S)

    def _watch_editor(self, reader: threading.Thread) -> None:
        """Once the editor's process (initialize's processId) is gone, end as if it had
        closed stdin, even while something else holds stdin open (the main thread stays
        blocked reading it)."""
        while self.editor.initialize is None:
            time.sleep(0.5)
        params = self.editor.initialize.get("params")
        pid = watchable(params.get("processId") if isinstance(params, dict) else None)
        if pid is None:
            return
        while process_alive(pid):
            time.sleep(EDITOR_CHECK_S)
        log.warning("lsp-complete: the editor's process %d is gone: exiting", pid)
        self._end_session(reader)
        os._exit(0)

    # ------------------------------------------------------------------ editor -> daemon

    def _editor_loop(self) -> None:
        while not self.editor.exited:
            try:
                data = os.read(0, CHUNK)
            except OSError:
                data = b""
            if not data:
                return
            # Split, tracked and sent at once: a restart in between would leave the message
            # in progress (`pending`) and this chunk out of step.
            with self.lock:
                for body in self._from_editor_split.feed(data):
                    try:
                        message = json.loads(body)
                    except ValueError:  # the daemon answers it with a parse error
                        continue
                    if isinstance(message, dict):
                        self.editor.track(message)
                # When the daemon is gone, what was tracked is told to the next one.
                with contextlib.suppress(OSError):
                    self.sock.sendall(data)

    # ------------------------------------------------------------------ daemon -> editor

    def _daemon_loop(self) -> None:
        split = Splitter(1 << 62)  # the daemon's own messages: no cap
        while True:
            if self._pending:
                data, self._pending = self._pending, b""
            else:
                try:
                    data = self.sock.recv(CHUNK)
                except OSError:
                    data = b""
            if data:
                self._write(self._pass_on(split.feed(data)))
                continue
            with self.lock:
                if self._closing or self.editor.exited:
                    return
            if not self._recover():
                self._give_up()
                return
            split = Splitter(1 << 62)

    def _pass_on(self, bodies: list[bytes]) -> bytes:
        out = []
        with self.lock:
            for body in bodies:
                try:
                    message = json.loads(body)
                except ValueError:
                    message = None
                if isinstance(message, dict) and "method" not in message:
                    key = _key(message.get("id"))
                    if key is not None and key in self._swallow:
                        self._swallow.discard(key)
                        continue
                    self.editor.answered(message)
                out.append(b"Content-Length: %d\r\n\r\n" % len(body) + body)
        return b"".join(out)

    def _write(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            try:
                written = os.write(self._stdout, view)
            except InterruptedError:
                continue
            except OSError:
                return  # the editor is gone: its stdin ends too
            view = view[written:]

    # ------------------------------------------------------------------ the daemon went away

    def _recover(self) -> bool:
        """Start a daemon again and tell it the session; False when that keeps failing."""
        now = time.monotonic()
        while self._restarts and now - self._restarts[0] > RESTART_WINDOW_S:
            self._restarts.popleft()
        if len(self._restarts) >= RESTART_LIMIT:
            return False
        self._restarts.append(now)
        with self.lock, contextlib.suppress(OSError):
            self.sock.close()
        log.warning("lsp-complete: the engine daemon (pid %s) went away: starting it again",
                    self.daemon_pid)
        conn = None
        for attempt in range(CONNECT_ATTEMPTS):
            try:
                conn = open_session(self.hello, self.log_level)
                break
            except (DaemonUnavailable, RuntimeDirError, OSError) as exc:
                log.warning("lsp-complete: no daemon (attempt %d): %s", attempt + 1, exc)
                time.sleep(0.2 * (attempt + 1))
        if conn is None:
            return False
        with self.lock:
            self._replays += 1
            replay_id = f"{REPLAY_ID}{self._replays}"
            if self.editor.initialize_answered:
                self._swallow.add(("str", replay_id))
            told = self.editor.replay(replay_id)
            answers = self.editor.unanswered()
            with contextlib.suppress(OSError):  # gone again: the next read sees it
                conn.sock.sendall(b"".join(told) + self._from_editor_split.pending)
            self.sock = conn.sock
            self.daemon_pid = conn.reply.get("pid")
            self._pending = conn.rest
            self.restarted += 1
            documents = len(self.editor.documents)
        self._write(b"".join(answers))
        log.warning("lsp-complete: daemon pid %s took over: %d open document(s) replayed, %d "
                    "request(s) answered empty", self.daemon_pid, documents, len(answers))
        return True

    def _give_up(self) -> None:
        message = (f"lsp-complete: the shared engine daemon stopped and could not be started "
                   f"again (see {log_path(self.path)}). Restart the language server, or run "
                   "`lsp-complete serve --no-daemon`.")
        log.error(message)
        with self.lock:
            answers = self.editor.unanswered()
        self._write(frame({"jsonrpc": "2.0", "method": "window/showMessage",
                           "params": {"type": 1, "message": message}}) + b"".join(answers))
        os._exit(1)  # the main thread is blocked reading the editor


# --------------------------------------------------------------------------- entry point


def serve_via_daemon(model: str | None, max_message_bytes: int,
                     log_level: str = "WARNING") -> int | str:
    """Serve the editor on stdio through the daemon: the exit code; or, when no daemon can be
    had, why not (a str: the caller then serves in this process, and tells the editor)."""
    hello = {
        "kind": "session",
        "version": wire.version(),
        "pid": os.getpid(),
        "model": _absolute(model),
        "maxMessageBytes": max_message_bytes,
    }
    try:
        conn = open_session(hello, log_level)
    except (DaemonUnavailable, RuntimeDirError, OSError) as exc:
        why = f"lsp-complete: serving in this process, not through the shared engine daemon: {exc}"
        print(why, file=sys.stderr, flush=True)
        return (f"{why} (this window loads a model of its own; {NO_DAEMON_ENV}=1 serves in "
                "process without this message)")
    return Forwarder(conn, hello, log_level, max_message_bytes).run()


def _absolute(model: str | None) -> str | None:
    """A model file named relative to the editor's folder, as the daemon (elsewhere) needs it."""
    if not model:
        return model
    path = Path(model).expanduser()
    return str(path.resolve()) if path.exists() else model

