"""Connect to the daemon, starting it when none answers: what `serve` does before forwarding.

Connect-or-start, race-free when several editors start at once: try to connect; on failure
take an exclusive `flock` on the lock file next to the socket, try again (another frontend may
have started one meanwhile), remove a stale socket file, start `python -m lsp_complete daemon
run` detached (a double fork: no child of the frontend, in a session of its own, stdio to the
log file next to the socket) and wait until it answers. A daemon of another version is asked
to retire (it frees the socket's name and ends once its own sessions have), then one of ours
is started.

Nothing here trusts a file it did not check: the folder and socket must be this user's
(`paths`), and on Linux the process behind the socket too (SO_PEERCRED).
"""

from __future__ import annotations

import contextlib
import logging
import os
import select
import socket
import struct
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lsp_complete.daemon import hello as wire
from lsp_complete.daemon.paths import (
    MAX_SOCKET_PATH,
    RuntimeDirError,
    check_socket,
    ensure_runtime_dir,
    identity,
    lock_path,
    log_path,
    model_socket_path,
    open_private,
    socket_path,
)

log = logging.getLogger(__name__)

START_TIMEOUT_S = 60.0  # a daemon's start: imports, on a busy 2-core machine
LOCK_TIMEOUT_S = 90.0
HELLO_TIMEOUT_S = 10.0
POLL_S = 0.02
STOPPING = "stopping"
LOG_MAX_BYTES = 1 << 20  # the log starts over when a new daemon finds it larger


class DaemonUnavailable(Exception):
    """No daemon can be used: the caller serves in its own process (or gives up)."""


@dataclass
class Connected:
    sock: socket.socket
    reply: dict[str, Any]  # the daemon's hello
    rest: bytes  # bytes the daemon sent after its hello line
    path: Path


def peer_uid(sock: socket.socket) -> int | None:
    """The uid of the process at the other end (Linux), or None where it cannot be asked."""
    option = getattr(socket, "SO_PEERCRED", None)
    if option is None:
        return None
    size = struct.calcsize("3i")
    _pid, uid, _gid = struct.unpack("3i", sock.getsockopt(socket.SOL_SOCKET, option, size))
    return int(uid)


def try_connect(path: Path) -> socket.socket | None:
    """A connection to the socket at `path`, or None when nothing listens there."""
    if not check_socket(path):
        return None
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.connect(str(path))
    except OSError:  # refused (stale), vanished, or the backlog is full: not answering
        sock.close()
        return None
    uid = peer_uid(sock)
    if uid is not None and uid != os.getuid():
        sock.close()
        raise RuntimeDirError(f"the daemon at {path} runs as another user")
    return sock


def exchange(path: Path, message: dict[str, Any],
             timeout: float = HELLO_TIMEOUT_S) -> Connected | None:
    """Send a hello line to the daemon at `path`; None when none listens there."""
    sock = try_connect(path)
    if sock is None:
        return None
    try:
        sock.sendall(wire.encode(message))
        reply, rest = wire.read_line(sock, timeout)
    except (OSError, wire.HelloError) as exc:
        sock.close()
        log.info("the daemon at %s did not answer: %s", path, exc)
        return None
    return Connected(sock, reply, rest, path)


def open_session(message: dict[str, Any], log_level: str = "WARNING") -> Connected:
    """A session with a daemon of this version and identity (paths.identity: the user, code,
    cache folder, environment and model it runs with), started if need be: one already
    serving this model alone, else the environment's, else this model's own when a daemon of
    another model holds the environment's. Raises DaemonUnavailable, or RuntimeDirError when
    the folder or socket cannot be trusted."""
    ensure_runtime_dir()
    model = message.get("model")
    message = {**message, "identity": identity(model if isinstance(model, str) else None)}
    own: Path | None = model_socket_path(model if isinstance(model, str) else None)
    if own is not None and len(os.fsencode(own)) > MAX_SOCKET_PATH:
        own = None  # the runtime folder's path is too long for a second name
    running = exchange(own, message) if own is not None else None
    if running is not None and running.reply.get("ok"):
        return running  # no second daemon for this model where one serves it already
    if running is not None:
        running.sock.close()
    for path in (socket_path(), own):
        if path is None:
            break
        conn = _session_at(path, message, log_level, own=path == own)
        if conn is not None:
            return conn
        log.info("the daemon at %s runs with another model or environment", path)
    raise DaemonUnavailable("every daemon socket of this environment serves another model")


def _session_at(path: Path, message: dict[str, Any], log_level: str,
                own: bool) -> Connected | None:
    """A session with the daemon at `path`, started if none answers; None when the one there
    has another identity."""
    for _ in range(4):
        conn = exchange(path, message)
        if conn is None:
            conn = _start_locked(path, message, log_level, own)
        if conn.reply.get("ok"):
            return conn
        conn.sock.close()
        error = conn.reply.get("error")
        if error == STOPPING:  # it frees the socket's name: start anew
            time.sleep(0.1)
            continue
        if error == wire.OTHER_IDENTITY:
            return None
        if error != wire.VERSION_MISMATCH:
            raise DaemonUnavailable(f"the daemon refused the session: {error}")
        log.warning("the daemon at %s runs lsp-complete %s, not %s: replacing it", path,
                    conn.reply.get("version"), wire.version())
        retire(path)
    raise DaemonUnavailable(f"no daemon of version {wire.version()} could be reached at {path}")


def retire(path: Path) -> None:
    """Ask the daemon at `path` to free the socket's name (it serves its sessions to their
    end), and wait until it has."""
    conn = exchange(path, {"kind": "retire", "version": wire.version(), "pid": os.getpid()})
    if conn is not None:
        conn.sock.close()


def _start_locked(path: Path, message: dict[str, Any], log_level: str, own: bool) -> Connected:
    with _locked(lock_path(path)):
        conn = exchange(path, message)  # another frontend may have started one meanwhile
        if conn is not None:
            return conn
        if check_socket(path):  # nothing answers there: a stale socket
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)
        with spawn(path, log_level, message.get("model"), own) as daemon:
            deadline = time.monotonic() + START_TIMEOUT_S
            while time.monotonic() < deadline:
                conn = exchange(path, message)
                if conn is not None:
                    return conn
                if daemon.exited():
                    raise DaemonUnavailable(f"the daemon (pid {daemon.pid}) exited at start: "
                                            f"see {log_path(path)}")
                time.sleep(POLL_S)
        raise DaemonUnavailable(f"the daemon did not answer within {START_TIMEOUT_S:g} s: see "
                                f"{log_path(path)}")


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    import fcntl  # POSIX only: imported where a daemon is started, never on Windows

    fd = open_private(path, os.O_RDWR)
    try:
        deadline = time.monotonic() + LOCK_TIMEOUT_S
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError as exc:
                if time.monotonic() > deadline:
                    raise DaemonUnavailable(
                        f"{path} stayed locked for {LOCK_TIMEOUT_S:g} s") from exc
                time.sleep(POLL_S)
        yield
    finally:
        os.close(fd)  # releases the lock


# The middle process of the double fork: it starts the daemon in a session of its own, tells
# the frontend its pid on the pipe whose write end the daemon keeps, and exits.
_LAUNCHER = """\
import os, subprocess, sys
pipe = int(sys.argv[1])
daemon = subprocess.Popen(sys.argv[2:], start_new_session=True, pass_fds=(pipe,))
os.write(pipe, b"%d\\n" % daemon.pid)
"""


@dataclass
class Spawned:
    """A daemon this frontend started: not its child, so its end shows as the end of a pipe
    whose write end only the daemon holds."""

    pid: int
    _pipe: int  # the read end

    def exited(self) -> bool:
        readable, _, _ = select.select([self._pipe], [], [], 0)
        return bool(readable) and os.read(self._pipe, 1) == b""

    def __enter__(self) -> Spawned:
        return self

    def __exit__(self, *_exc: object) -> None:
        os.close(self._pipe)


def spawn(path: Path, log_level: str, model: str | None = None, own: bool = False) -> Spawned:
    """Start the daemon fully detached: through a middle process that exits at once (a double
    fork), so the daemon is no child of this frontend, nor in its process group or session.
    Clients that stop a server by killing its process tree (LSP4IJ through IntelliJ's
    OSProcessHandler) or group then leave the shared daemon serving the other windows. No
    terminal, stdio to the log file. It works out its identity (and so its socket, `own`: the
    model's own) as the frontend did."""
    import subprocess  # only here: a frontend that finds its daemon running never needs it

    fd = open_private(log_path(path), os.O_WRONLY | os.O_APPEND)
    read_end, write_end = os.pipe()
    try:
        if os.fstat(fd).st_size > LOG_MAX_BYTES:
            os.ftruncate(fd, 0)
        env = dict(os.environ)
        # The daemon must import this very code, installed or run from a checkout.
        package_root = str(Path(__file__).resolve().parents[2])
        env["PYTHONPATH"] = os.pathsep.join(p for p in (package_root, env.get("PYTHONPATH")) if p)
        command = [sys.executable, "-m", "lsp_complete", "--log-level", log_level, "daemon", "run"]
        command += ["--model", model] if model else []
        command += ["--model-socket"] if own else []
        launcher = subprocess.Popen(
            [sys.executable, "-c", _LAUNCHER, str(write_end), *command],
            # The frontend's folder, as in process: relative paths in settings mean the same.
            stdin=subprocess.DEVNULL, stdout=fd, stderr=fd, env=env,
            close_fds=True, pass_fds=(write_end,),
        )
    except BaseException:
        os.close(read_end)
        raise
    finally:
        os.close(fd)
        os.close(write_end)
    try:
        pid = _read_pid(read_end, START_TIMEOUT_S)
        launcher.wait(START_TIMEOUT_S)
    except BaseException:
        os.close(read_end)
        raise
    return Spawned(pid, read_end)


def _read_pid(pipe: int, timeout: float) -> int:
    line = b""
    deadline = time.monotonic() + timeout
    while not line.endswith(b"\n"):
        readable, _, _ = select.select([pipe], [], [], max(0.0, deadline - time.monotonic()))
        chunk = os.read(pipe, 32) if readable else b""
        if not chunk:
            raise DaemonUnavailable("the daemon could not be started: see its log")
        line += chunk
    return int(line)
