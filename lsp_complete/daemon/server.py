"""The daemon: one engine, one worker and one KV store for every editor session of a user.

A Unix socket server (`lsp-complete daemon run`, started on demand by `serve`). Each
connection begins with a hello line (`hello`); a session connection then carries one LSP
session, served by its own `CompletionServer`: documents, settings, typing-ahead, telemetry
and requests are the session's own. What sessions share:

- the worker: one `Scheduler`, seen by each session through `SessionScheduler`, whose keys are
  the session's own, so newest-wins and cancellation are per (session, document);
- the engine: `SharedEngine` loads it for the first session and lends it to every other one
  (`SessionEngine`): a file warm in one window is warm in the next. A session that asks for
  other engine settings (another model...) is told so and keeps the loaded engine; only a
  session alone in the daemon may switch it;
- the KV cache, memory and disk, keyed by the file's URI as before.

Only this user may connect (folder 0700, socket 0600, SO_PEERCRED on Linux). A session of
another version is refused (the frontend then retires this daemon and starts its own). With
no session for `idle` seconds the daemon saves its KV caches and exits.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import errno
import functools
import itertools
import logging
import os
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from lsp_complete.config import EngineSettings, Settings, hide_credentials, wire_name
from lsp_complete.daemon import hello as wire
from lsp_complete.daemon.paths import (
    IDLE_ENV,
    RuntimeDirError,
    ensure_runtime_dir,
    identity,
    model_socket_path,
    socket_path,
)
from lsp_complete.daemon.start import STOPPING, peer_uid, try_connect
from lsp_complete.engine.base import (
    CancelToken,
    Engine,
    EngineCounters,
    GenerationRequest,
    GenerationResult,
    PersistenceError,
)
from lsp_complete.engine.factory import LoadedEngine, load_engine
from lsp_complete.jobkey import JobKey
from lsp_complete.pipeline import Completer
from lsp_complete.scheduler import Job, Scheduler, SchedulerCounters, WorkQueue
from lsp_complete.server import framing
from lsp_complete.server.completion_server import CompletionServer
from lsp_complete.server.handlers import create_server
from lsp_complete.server.status import _rss_mib

log = logging.getLogger(__name__)

DEFAULT_IDLE_MINUTES = 10.0
HELLO_TIMEOUT_S = 10.0
STOP_GRACE_S = 5.0  # sessions' own clean-up when the daemon stops
STOP_DRAIN_S = 0.5  # for windows to read their last answers; one that does not is dropped
PERSIST_TIMEOUT_S = 30.0
_MIN_MESSAGE_BYTES = 64 * 1024


# --------------------------------------------------------------------------- what sessions share


class SessionScheduler:
    """One session's view of the daemon's scheduler (a `WorkQueue`): the same worker, keys of
    its own (`JobKey.session`)."""

    def __init__(self, shared: Scheduler, session: int) -> None:
        self._shared = shared
        self._session = session

    def submit(self, key: JobKey, run: Callable[[CancelToken], Any]) -> Job:
        return self._shared.submit(key.in_session(self._session), run)

    def submit_background(self, key: JobKey, run: Callable[[CancelToken], Any],
                          first: bool = False) -> Job:
        return self._shared.submit_background(key.in_session(self._session), run, first)

    def call(self, key: JobKey, run: Callable[[CancelToken], Any],
             timeout: float | None = None,
             reported: tuple[type[BaseException], ...] = ()) -> Any:
        return self._shared.call(key.in_session(self._session), run, timeout, reported)

    def drop(self, key: JobKey) -> None:
        self._shared.drop(key.in_session(self._session))

    def drop_idle(self, key: JobKey) -> None:
        self._shared.drop_idle(key.in_session(self._session))

    def cancel(self, job: Job, hard: bool = True) -> None:
        self._shared.cancel(job, hard)

    def cancel_files(self) -> int:
        """This session's work only: other windows' requests go on."""
        return self._shared.cancel_files(self._session)

    @property
    def counters(self) -> SchedulerCounters:
        return self._shared.counters

    @property
    def idle(self) -> bool:
        return self._shared.idle

    @property
    def busy(self) -> bool:
        return self._shared.busy

    def pending(self) -> int:
        return self._shared.pending()

    def stop(self, timeout: float = 5.0) -> None:
        """The daemon stops the worker, not a session."""


class SessionEngine:
    """The shared engine as one session's completer sees it (an `Engine`). Three differences:
    a file another session has open keeps its cache when this one closes it, the status shows
    only this session's documents, and closing frees the model only once the daemon has
    replaced it (a reload by the session alone in the daemon). The rest is the engine's own."""

    def __init__(self, engine: Engine, shared: SharedEngine, session: int) -> None:
        self._engine = engine
        self._shared = shared
        self._session = session

    @property
    def counters(self) -> EngineCounters:
        return self._engine.counters

    @property
    def prefill_rate(self) -> float | None:
        return self._engine.prefill_rate

    def tokenize(self, text: str, special: bool = False) -> list[int]:
        return self._engine.tokenize(text, special)

    def detokenize(self, tokens: list[int]) -> str:
        return self._engine.detokenize(tokens)

    @property
    def begins_a_token(self) -> Callable[[str], bool] | None:
        return self._engine.begins_a_token

    def complete(self, request: GenerationRequest, cancel: CancelToken) -> GenerationResult:
        return self._engine.complete(request, cancel)

    def alternatives(self, request: GenerationRequest, count: int,
                     cancel: CancelToken) -> list[GenerationResult]:
        return self._engine.alternatives(request, count, cancel)

    def warm(self, key: str, segments: list[list[int]], cancel: CancelToken,
             extend_only: bool = False) -> int:
        return self._engine.warm(key, segments, cancel, extend_only)

    def cached_tokens(self, key: str) -> list[int]:
        return self._engine.cached_tokens(key)

    def cached_prefix(self, key: str, tokens: list[int]) -> int | None:
        return self._engine.cached_prefix(key, tokens)

    def restore(self, key: str) -> bool:
        return self._engine.restore(key)

    def persist(self, key: str | None = None) -> int:
        return self._engine.persist(key)

    def model_changed(self) -> str | None:
        return self._engine.model_changed()

    def forget(self, key: str) -> None:
        if not self._shared.open_elsewhere(self._session, key):
            self._engine.forget(key)

    def describe(self) -> dict[str, object]:
        """The engine as this session's status shows it: other windows' documents are theirs
        to see (a file path names a client, a project, a person), so only counts of them."""
        return own_view(self._engine.describe(), *self._shared.seen_by(self._session))

    def close(self) -> None:
        self._shared.release(self._engine)


class SharedEngine:
    """The loaded engine and the settings it was made for. Runs on the worker thread only."""

    def __init__(self, daemon: Daemon) -> None:
        self._daemon = daemon
        self.loaded: LoadedEngine | None = None
        self.settings: EngineSettings | None = None
        self._loaded_with: Settings | None = None  # the whole settings `loaded` was made with
        self._holders: dict[int, Engine] = {}  # session -> the engine its completer uses

    def completer_for(self, session: int, settings: Settings
                      ) -> tuple[Completer, dict[str, Any], list[str]]:
        """A session's `ModelHost.loader`: its completer over the shared engine, loading it
        first when there is none, when its model file changed on disk (for every session, with
        the settings it was made with), or when this session is alone and asks for another."""
        wanted = settings.engine_settings
        warnings: list[str] = []
        if self.loaded is not None and self.loaded.engine.model_changed() is not None:
            assert self._loaded_with is not None
            self._load(self._loaded_with)
        if self.loaded is None or (wanted != self.settings and self._daemon.alone(session)):
            self._load(settings)
        elif wanted != self.settings:
            assert self.settings is not None
            warnings.append(_mismatch(wanted, self.settings))
        loaded = self.loaded
        assert loaded is not None
        self._holders[session] = loaded.engine
        engine: Engine = SessionEngine(loaded.engine, self, session)
        return Completer(engine, loaded.spec, settings), dict(loaded.info), [
            *loaded.warnings, *warnings]

    def _load(self, settings: Settings) -> None:
        # The engine replaced here is closed once no session's completer uses it (release,
        # drop_session), after the work they queued with it.
        self.loaded = load_engine(settings)
        self.settings, self._loaded_with = settings.engine_settings, settings

    def release(self, engine: Engine) -> None:
        """A session's completer over `engine` was replaced: free the engine once it is
        neither the loaded one nor another session's (a reload after its file changed)."""
        if self.loaded is not None and engine is self.loaded.engine:
            return
        if all(held is not engine for held in self._holders.values()):
            engine.close()

    def drop_session(self, session: int) -> None:
        """A session ended: the engine it used is freed if it was its last user."""
        held = self._holders.pop(session, None)
        if held is not None:
            self.release(held)

    def seen_by(self, session: int) -> tuple[set[str], str]:
        """What one session may see of the engine's state: its open documents' URIs, and the
        last engine error its own requests met."""
        own = self._daemon.sessions.get(session)
        if own is None:
            return set(), ""
        return set(own.server.files), own.server.telemetry.last_error

    def open_elsewhere(self, session: int, uri: str) -> bool:
        return any(uri in other.server.files
                   for sid, other in list(self._daemon.sessions.items()) if sid != session)

    def persist(self) -> int:
        """Save every file's KV cache (a session's shutdown, the daemon's exit): a disk that
        cannot take them is logged, there is no window left to tell."""
        if self.loaded is None:
            return 0
        try:
            return self.loaded.engine.persist()
        except PersistenceError as exc:
            log.warning("%s", exc)
            return 0

    def describe(self) -> dict[str, Any] | None:
        if self.loaded is None or self.settings is None:
            return None
        return {**self.loaded.info, "settings": _camel(_shown(self.settings))}


def own_view(described: dict[str, object], own: set[str], last_error: str) -> dict[str, object]:
    """An engine's `describe()` for one session: the KV sequences (a remote llama-server's
    slots) of its own documents by URI, the others counted; the engine's last error only as
    its own requests met it (a remote server's error text may quote another window's
    prompt)."""
    view = dict(described)
    for listed, counted in (("sequences", "sequencesInUse"), ("slotOfFile", "slotsInUse")):
        entries = view.get(listed)
        if isinstance(entries, list):
            view[listed] = [e for e in entries if isinstance(e, dict) and e.get("uri") in own]
            view[counted] = len(entries)
    if "lastError" in view:
        view["lastError"] = last_error
    return view


def _shown(settings: EngineSettings) -> dict[str, Any]:
    """Engine settings as every window's status shows them: a password in engineUrl is one
    window's (the engine sends it; nothing shows it)."""
    values = dataclasses.asdict(settings)
    values["engine_url"] = hide_credentials(values["engine_url"])
    return values


def _difference(key: str, here: Any, there: Any) -> str:
    if key == "engine_url":
        here, there = hide_credentials(here), hide_credentials(there)
        if here == there:
            return "engineUrl: its user or password"
    return f"{wire_name(key)} {here!r} here, {there!r} in use"


def _mismatch(wanted: EngineSettings, loaded: EngineSettings) -> str:
    here, there = dataclasses.asdict(wanted), dataclasses.asdict(loaded)
    diffs = "; ".join(_difference(k, here[k], there[k]) for k in here if here[k] != there[k])
    return (f"this window's engine settings differ from the shared engine's, which other "
            f"editor windows use ({diffs}): it keeps the loaded engine. Use the same settings "
            "everywhere, or run this editor's server with `lsp-complete serve --no-daemon`.")


def _camel(values: dict[str, Any]) -> dict[str, Any]:
    return {wire_name(k): v for k, v in values.items() if k != "api_key_env"}


# --------------------------------------------------------------------------- sessions


class SocketWriter:
    """A session's protocol writes here: to its socket, always from the event loop, within
    the bound on what the window has not read (`framing.BoundedStream`)."""

    def __init__(self, writer: asyncio.StreamWriter, loop: asyncio.AbstractEventLoop,
                 name: str) -> None:
        self.output = framing.BoundedStream(writer, name)
        self._loop = loop
        self._thread = threading.get_ident()

    def write(self, data: bytes) -> None:
        if threading.get_ident() == self._thread:
            self._send(data)
        else:
            with contextlib.suppress(RuntimeError):  # the loop is closed: the daemon exits
                self._loop.call_soon_threadsafe(self._send, data)

    def _send(self, data: bytes) -> None:
        self.output.write(data)

    def close(self) -> None:
        """The daemon closes the connection when the session ends."""


@dataclass
class Session:
    id: int
    frontend_pid: int | None
    server: CompletionServer
    writer: asyncio.StreamWriter
    output: framing.BoundedStream
    connected: float  # time.time()

    def describe(self, private: bool = False) -> dict[str, Any]:
        """The session for the daemon's status; `private`: as another window sees it (counts,
        not the model it asked for: a path names a project too)."""
        server = self.server
        described = {
            "id": self.id,
            "frontendPid": self.frontend_pid,
            "connectedSeconds": round(time.time() - self.connected, 1),
            "documents": len(server.files),
            "unsentBytes": self.output.unsent(),  # answers the window has not read yet
            "model": server.settings.model,
            "modelState": server.model.state,
        }
        if private:
            del described["model"]
        return described


class Daemon:
    def __init__(self, path: Path, idle_s: float, identity: str = "") -> None:
        self.path = path
        self.idle_s = idle_s
        # What it runs with (paths.identity): a frontend that asks for another is refused.
        self.identity = identity
        self.scheduler = Scheduler("lsp-complete-daemon-worker")
        self.engine = SharedEngine(self)
        self.sessions: dict[int, Session] = {}
        self.started = time.time()
        self.retired = False
        self._ids = itertools.count(1)
        self._listener: asyncio.AbstractServer | None = None
        self._socket_id: tuple[int, int] | None = None  # (st_dev, st_ino) of our socket file
        self._idle: asyncio.TimerHandle | None = None
        self._stopping: asyncio.Task[None] | None = None
        self._done: asyncio.Event | None = None

    def alone(self, session: int) -> bool:
        return set(self.sessions) <= {session}

    # ------------------------------------------------------------------ running

    async def serve(self, sock: socket.socket) -> int:
        loop = asyncio.get_running_loop()
        self._done = asyncio.Event()
        info = os.stat(self.path)
        self._socket_id = (info.st_dev, info.st_ino)
        self._listener = await asyncio.start_unix_server(self._connection, sock=sock,
                                                         limit=wire.MAX_LINE)
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, self.stop, f"signal {sig.name}")
        loop.add_signal_handler(signal.SIGHUP, lambda: None)
        log.info("lsp-complete %s daemon (pid %d) at %s; idle exit after %g s",
                 wire.version(), os.getpid(), self.path, self.idle_s)
        self._idle_soon()
        try:
            await self._done.wait()
        finally:
            self._free_name()
            self.scheduler.stop()
        return 0

    def stop(self, reason: str) -> None:
        if self._stopping is None:
            log.info("stopping: %s", reason)
            self._stopping = asyncio.get_running_loop().create_task(self._stop())

    async def _stop(self) -> None:
        self._free_name()
        for session in list(self.sessions.values()):
            session.writer.close()  # its frontend restarts a daemon if it still needs one
        # A closed connection stays open until its unsent answers are read: a window that
        # does not read would hold the stop for the whole grace.
        deadline = time.monotonic() + STOP_DRAIN_S
        while self._unread() and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        for session in self._unread():
            log.warning("session %d: %d bytes of answers not read at stop: dropped",
                        session.id, session.output.unsent())
            session.writer.transport.abort()
        deadline = time.monotonic() + STOP_GRACE_S
        while self.sessions and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        loop = asyncio.get_running_loop()
        try:
            saved = await loop.run_in_executor(None, functools.partial(
                self.scheduler.call, JobKey.server("persist"), lambda _c: self.engine.persist(),
                PERSIST_TIMEOUT_S))
            log.info("saved %s KV caches", saved)
        except Exception as exc:
            log.warning("could not save the KV caches: %s", exc)
        assert self._done is not None
        self._done.set()

    def _unread(self) -> list[Session]:
        return [s for s in list(self.sessions.values()) if s.output.unsent() > 0]

    def retire(self) -> None:
        """Another version's frontend takes over the name: serve our sessions to their end."""
        self.retired = True
        self._free_name()
        log.info("retired: %d session(s) left", len(self.sessions))
        if not self.sessions:
            self.stop("retired")

    def _free_name(self) -> None:
        """Stop listening and remove the socket file, if it still is ours."""
        if self._listener is not None:
            self._listener.close()
            self._listener = None
        with contextlib.suppress(OSError):
            info = os.lstat(self.path)
            if (info.st_dev, info.st_ino) == self._socket_id:
                os.unlink(self.path)
        self._socket_id = None

    def _idle_soon(self) -> None:
        if self._idle is not None:
            self._idle.cancel()
        self._idle = asyncio.get_running_loop().call_later(self.idle_s, self._idle_expired)

    def _idle_expired(self) -> None:
        self._idle = None
        if not self.sessions:
            self.stop(f"no session for {self.idle_s:g} s")

    # ------------------------------------------------------------------ connections

    async def _connection(self, reader: asyncio.StreamReader,
                          writer: asyncio.StreamWriter) -> None:
        try:
            await self._serve_connection(reader, writer)
        except Exception:
            log.exception("a connection failed")
        finally:
            writer.close()

    async def _serve_connection(self, reader: asyncio.StreamReader,
                                writer: asyncio.StreamWriter) -> None:
        sock = writer.get_extra_info("socket")
        uid = peer_uid(sock) if sock is not None else None
        if uid is not None and uid != os.getuid():
            log.warning("refused a connection from uid %d", uid)
            return
        try:
            line = await asyncio.wait_for(reader.readline(), HELLO_TIMEOUT_S)
            message = wire.decode(line) if line.endswith(b"\n") else None
        except (TimeoutError, ValueError, ConnectionError, wire.HelloError):
            message = None
        if message is None:
            return  # not a frontend (doctor checking that we answer, a stray client)
        kind = message.get("kind")
        reply: dict[str, Any] = {"ok": True, "version": wire.version(), "pid": os.getpid()}
        if kind == "session":
            wanted = message.get("identity")
            if message.get("version") != wire.version():
                reply.update(ok=False, error=wire.VERSION_MISMATCH)
            elif wanted is not None and wanted != self.identity:
                # It would write to another cache folder, load another model...: not ours.
                reply.update(ok=False, error=wire.OTHER_IDENTITY, identity=self.identity)
            elif self._stopping is not None or self.retired:
                reply.update(ok=False, error=STOPPING)
            else:
                writer.write(wire.encode(reply))
                await self._session(message, reader, writer)
                return
        elif kind == "status":
            reply["status"] = self.status()
        elif kind == "stop":
            self.stop(f"asked by pid {message.get('pid')}")
        elif kind == "retire":
            self.retire()
        else:
            reply.update(ok=False, error=f"unknown kind {kind!r}")
        writer.write(wire.encode(reply))
        with contextlib.suppress(ConnectionError):
            await writer.drain()

    async def _session(self, message: dict[str, Any], reader: asyncio.StreamReader,
                       writer: asyncio.StreamWriter) -> None:
        sid = next(self._ids)
        model = message.get("model")
        queue: WorkQueue = SessionScheduler(self.scheduler, sid)
        # The server's parts still name `Scheduler`; a `WorkQueue` is all they use of it.
        server = create_server(model if isinstance(model, str) and model else None,
                               scheduler=cast(Scheduler, queue))
        server.model.loader = functools.partial(self.engine.completer_for, sid)
        # `shutdown` saves the caches by waiting for the worker: in the daemon that would keep
        # the window waiting behind other sessions' work. Queue it instead.

        # Its key is the session's (not through `queue`): the session's `cancel_files`
        # cancels it, as it did with string keys (shutdown cancels before it queues this).
        async def queue_persist(_timeout_s: float = 0.0) -> None:
            self.scheduler.submit_background(JobKey.session_job(sid, "shutdown-persist"),
                                             lambda _c: self.engine.persist())

        server.model.persist_caches = queue_persist  # type: ignore[method-assign,assignment]
        server.daemon_status = functools.partial(self.status, sid)
        socket_writer = SocketWriter(writer, asyncio.get_running_loop(), f"session {sid}")
        server.protocol.set_writer(socket_writer)
        pid = message.get("pid")
        session = Session(sid, pid if isinstance(pid, int) else None, server, writer,
                          socket_writer.output, time.time())
        self.sessions[sid] = session
        if self._idle is not None:
            self._idle.cancel()
            self._idle = None
        log.info("session %d (frontend pid %s) started: %d session(s)", sid, pid,
                 len(self.sessions))
        try:
            # A window that does not read its answers is not read either (`room`).
            await framing.serve(server.protocol, reader, _message_limit(message),
                                socket_writer.output.room)
        except ConnectionError as exc:
            log.info("session %d: %s", sid, exc)
        finally:
            del self.sessions[sid]
            _end_session(server)
            self.scheduler.submit_background(  # after the work its files queued on closing
                JobKey.session_job(sid, "drop"), lambda _c: self.engine.drop_session(sid))
            writer.close()
            log.info("session %d ended: %d session(s) left", sid, len(self.sessions))
            if not self.sessions:
                if self.retired:
                    self.stop("retired, and the last session ended")
                elif self._stopping is None:
                    self._idle_soon()

    # ------------------------------------------------------------------ status

    def status(self, session: int | None = None) -> dict[str, Any]:
        """What `lsp-complete daemon status` prints and, for `session`, what its
        `lsp-complete/status` shows (other sessions only in counts)."""
        return {
            "pid": os.getpid(),
            "version": wire.version(),
            "socket": str(self.path),
            "identity": self.identity,
            "uptimeSeconds": round(time.time() - self.started, 1),
            "idleExitSeconds": self.idle_s,
            "retired": self.retired,
            "rssMiB": _rss_mib(),
            "engine": self.engine.describe(),
            "session": session,  # the asking session's id
            "sessions": [s.describe(private=session is not None and s.id != session)
                         for s in list(self.sessions.values())],
        }


def _message_limit(message: dict[str, Any]) -> int:
    limit = message.get("maxMessageBytes")
    if isinstance(limit, int) and not isinstance(limit, bool) and limit >= _MIN_MESSAGE_BYTES:
        return limit
    return framing.DEFAULT_MAX_MESSAGE_BYTES


def _end_session(server: CompletionServer) -> None:
    """The frontend is gone: fail what the session still waits for from its client, close its
    files (their caches are saved, and freed unless another session has them open)."""
    protocol = server.protocol
    for msg_id, future in list(protocol._request_futures.items()):
        if msg_id in protocol._result_types and not future.done():
            future.set_exception(ConnectionError("the client disconnected"))
    protocol._request_futures.clear()
    protocol._result_types.clear()
    try:
        server.end_session()
    except Exception:
        log.exception("could not end a session cleanly")
    # pygls' JsonRPCServer.shutdown is unannotated (untyped_calls_exclude misses subclasses).
    server.shutdown()  # type: ignore[no-untyped-call]


# --------------------------------------------------------------------------- entry point


class AlreadyRunning(Exception):
    pass


def bind(path: Path) -> socket.socket:
    """Listen at `path` (0600). A stale socket file is replaced; a live daemon's is not."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    old_umask = os.umask(0o177)
    try:
        try:
            sock.bind(str(path))
        except OSError as exc:
            if exc.errno != errno.EADDRINUSE:
                raise
            live = try_connect(path)
            if live is not None:
                live.close()
                raise AlreadyRunning(str(path)) from exc
            os.unlink(path)
            sock.bind(str(path))
    except BaseException:
        sock.close()
        raise
    finally:
        os.umask(old_umask)
    sock.listen(64)
    return sock


def idle_minutes(value: float | None) -> float:
    if value is not None:
        return value
    try:
        return float(os.environ.get(IDLE_ENV) or DEFAULT_IDLE_MINUTES)
    except ValueError:
        return DEFAULT_IDLE_MINUTES


def run_daemon(idle: float | None = None, model: str | None = None,
               model_socket: bool = False) -> int:
    """`lsp-complete daemon run`: serve sessions until idle, stopped or signalled. `model`:
    the one its frontend asked for (part of its identity); `model_socket`: listen at that
    model's own socket (another model's daemon holds the environment's)."""
    for handler in logging.getLogger().handlers:  # the log file wants times
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    try:
        ensure_runtime_dir()
        path = model_socket_path(model) if model_socket else socket_path()
        sock = bind(path)
    except (RuntimeDirError, OSError) as exc:
        print(f"lsp-complete daemon: {exc}", file=sys.stderr)
        return 2
    except AlreadyRunning as exc:
        print(f"lsp-complete daemon: a daemon already answers at {exc}", file=sys.stderr)
        return 1
    daemon = Daemon(path, max(0.0, idle_minutes(idle)) * 60, identity(model))
    try:
        return asyncio.run(daemon.serve(sock))
    finally:
        sock.close()
