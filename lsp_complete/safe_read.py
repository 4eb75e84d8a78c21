"""Reading what a workspace hands us, safely. A cloned repository decides what its files are:
a FIFO, a socket, a link to /dev/zero or into /proc, a 20 GB sparse file, a file swapped for a
link between a check and the open. The workspace (workspace.py) touches the disk only here:

* `read_file(path, limit)` is the one way a workspace file's bytes are read: opened with
  O_NONBLOCK | O_NOFOLLOW (where the platform has them: a FIFO does not block the open, a link
  is not followed, the caller resolves and checks links itself); a regular file only, checked
  with fstat on the opened descriptor (what is read is what was checked); never more than the
  limit's cap, whatever size the file reports; within a deadline; and, with `within`, only a
  file that once opened still lies inside that folder (a folder swapped for a link meanwhile).
* `io_call(fn, ...)` runs every filesystem call of the workspace (these reads, realpath, stat,
  folder listings) on a small pool of I/O threads and waits at most IO_TIMEOUT_S: a call stuck
  in a hung network mount costs the caller (the inference worker, the event loop) that long,
  once; while every I/O thread is stuck, calls fail at once.
"""

from __future__ import annotations

import logging
import os
import queue
import stat
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

log = logging.getLogger(__name__)

T = TypeVar("T")

IO_TIMEOUT_S = 2.0  # one filesystem call of the workspace, at most
IO_THREADS = 2
_CHUNK = 64 * 1024
_OPEN_FLAGS = (os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOFOLLOW", 0)
               | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NOCTTY", 0))


@dataclass(frozen=True)
class ReadLimit:
    """A kind of workspace file and the most bytes read of one."""

    kind: str
    max_bytes: int


SOURCE = ReadLimit("source file", 512 * 1024)  # larger: minified or generated, not read
IGNORE_RULES = ReadLimit("ignore file", 128 * 1024)  # .gitignore; the largest real ones are ~20 KB
MANIFEST = ReadLimit("manifest", 256 * 1024)  # go.mod and the like


@dataclass(frozen=True)
class FileRead:
    """What reading one file gave: its bytes, or why there are none."""

    data: bytes | None
    stamp: tuple[int, int] | None = None  # (st_mtime_ns, st_size) of the descriptor read
    problem: str = ""  # missing | not a regular file | over the cap | timed out | an OS error

    @property
    def missing(self) -> bool:
        return self.problem == "missing"


class IoTimeout(TimeoutError):
    """A filesystem call did not return in time (or every I/O thread is stuck)."""


# --------------------------------------------------------------------------- the I/O threads


class _IoPool:
    """A few daemon threads running filesystem calls; callers wait with a deadline. Daemon
    threads: one stuck forever must not hold up the process's exit."""

    def __init__(self, size: int) -> None:
        self._size = size
        self._jobs: queue.SimpleQueue[tuple[Future[Any], Callable[[], Any]]] = queue.SimpleQueue()
        self._threads: list[threading.Thread] = []
        self._stuck = 0  # calls still running past their caller's deadline
        self._lock = threading.Lock()
        self._local = threading.local()

    def call(self, fn: Callable[[], T], timeout_s: float) -> T:
        if getattr(self._local, "inside", False):
            return fn()  # already on an I/O thread (a workspace call made of others)
        with self._lock:
            if self._stuck >= self._size:
                raise IoTimeout("the filesystem does not answer (every I/O thread is stuck)")
            if len(self._threads) < self._size:
                self._start_thread()
        future: Future[T] = Future()
        self._jobs.put((future, fn))
        try:
            return future.result(timeout_s)
        except FutureTimeout:
            if not future.cancel():  # running: count it until it returns
                with self._lock:
                    self._stuck += 1
                future.add_done_callback(self._unstuck)
            raise IoTimeout(f"a filesystem call took over {timeout_s:g} s") from None

    def _unstuck(self, _future: Future[Any]) -> None:
        with self._lock:
            self._stuck -= 1

    def _start_thread(self) -> None:
        thread = threading.Thread(target=self._run, name=f"lsp-complete-io-{len(self._threads)}",
                                  daemon=True)
        self._threads.append(thread)
        thread.start()

    def _run(self) -> None:
        self._local.inside = True
        while True:
            future, fn = self._jobs.get()
            if not future.set_running_or_notify_cancel():
                continue  # its caller gave up before it started
            try:
                future.set_result(fn())
            except BaseException as exc:  # the caller re-raises it
                future.set_exception(exc)


_POOL = _IoPool(IO_THREADS)


def io_call(fn: Callable[..., T], *args: Any, timeout_s: float = IO_TIMEOUT_S) -> T:
    """`fn(*args)` on an I/O thread; its exception is raised here, IoTimeout past the deadline."""
    return _POOL.call(lambda: fn(*args), timeout_s)


# --------------------------------------------------------------------------- reading


def read_file(path: Path, limit: ReadLimit, within: Path | None = None,
              timeout_s: float = IO_TIMEOUT_S) -> FileRead:
    """The bytes of the regular file at `path` (a link there is refused, not followed), at
    most `limit.max_bytes`; with `within`, only if the file opened lies inside that folder."""
    deadline = time.monotonic() + timeout_s
    try:
        return io_call(_read, path, limit, within, deadline, timeout_s=timeout_s)
    except IoTimeout:
        log.info("reading %s: the filesystem did not answer within %g s", path, timeout_s)
        return FileRead(None, problem="timed out")


def _read(path: Path, limit: ReadLimit, within: Path | None, deadline: float) -> FileRead:
    try:
        # Nothing but a regular file is even opened (opening a device may do something):
        # lstat first, then fstat on the descriptor, for a swap in between.
        if not stat.S_ISREG(os.lstat(path).st_mode):
            return FileRead(None, problem="not a regular file")
        # Python's open (not os.open) so that what opens files can be watched in tests.
        file = open(path, "rb", buffering=0, opener=_open)  # noqa: SIM115 - closed below
    except (FileNotFoundError, NotADirectoryError):
        return FileRead(None, problem="missing")
    except OSError as exc:  # ELOOP: swapped for a link (O_NOFOLLOW); EACCES...
        return FileRead(None, problem=exc.strerror or type(exc).__name__)
    with file:
        fd = file.fileno()
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            return FileRead(None, problem="not a regular file")
        stamp = (info.st_mtime_ns, info.st_size)
        too_large = FileRead(None, stamp, f"over the {limit.kind} cap of {limit.max_bytes} bytes")
        if info.st_size > limit.max_bytes:
            return too_large
        if within is not None and not _inside(_opened_path(fd), within):
            return FileRead(None, stamp, f"not inside {within} once opened")
        # Files of /proc and the like report size 0 and stream on: read to the cap, no more.
        data = bytearray()
        try:
            while len(data) <= limit.max_bytes:
                chunk = os.read(fd, min(_CHUNK, limit.max_bytes + 1 - len(data)))
                if not chunk:
                    break
                data += chunk
                if time.monotonic() > deadline:
                    return FileRead(None, stamp, "timed out")
        except BlockingIOError:
            return FileRead(None, stamp, "would block")
        return too_large if len(data) > limit.max_bytes else FileRead(bytes(data), stamp)


def _open(path: str, _flags: int) -> int:
    return os.open(path, _OPEN_FLAGS)


def _opened_path(fd: int) -> str | None:
    """Where the open descriptor's file lies now (None where the system cannot tell)."""
    try:
        if sys.platform.startswith("linux"):
            return os.readlink(f"/proc/self/fd/{fd}")
        if sys.platform == "darwin":
            import fcntl

            raw = fcntl.fcntl(fd, fcntl.F_GETPATH, b"\0" * 1024)
            return os.fsdecode(raw.split(b"\0", 1)[0])
    except OSError:
        pass
    return None


def _inside(opened: str | None, folder: Path) -> bool:
    if opened is None:
        return True  # nothing to check with: the caller's own resolution stands
    return Path(opened).is_relative_to(folder)
