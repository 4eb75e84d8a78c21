"""Where the shared engine daemon lives: its runtime folder, socket, start lock and log.

The folder is the user's runtime dir (`platformdirs.user_runtime_dir`, on Linux
$XDG_RUNTIME_DIR/lsp-complete) or LSP_COMPLETE_RUNTIME_DIR. It must be a real folder of this
user, mode 0700, in a parent that other users cannot rename entries of: anything else is
refused (the caller then runs the engine in its own process), never repaired or followed.

The socket's name does not hold the version (a daemon of another version is found, and
replaced, see `start`), but it holds a hash of the LSP_COMPLETE_* environment the daemon would
inherit (cache folder, default model, API key...): frontends that would make a different
daemon never share one.
"""

from __future__ import annotations

import contextlib
import os
import stat
import warnings
from pathlib import Path

try:  # hashlib without OpenSSL: hashlib's import weighs ~3.5 MB in every editor's frontend
    from _blake2 import blake2b
except ImportError:  # pragma: no cover - a Python built without it
    from hashlib import blake2b

RUNTIME_ENV = "LSP_COMPLETE_RUNTIME_DIR"
NO_DAEMON_ENV = "LSP_COMPLETE_NO_DAEMON"
IDLE_ENV = "LSP_COMPLETE_DAEMON_IDLE_MINUTES"
# LSP_COMPLETE_* variables that do not change what a daemon does (the daemon's own, TCP's).
_NOT_IDENTITY = ("LSP_COMPLETE_RUNTIME_DIR", "LSP_COMPLETE_NO_DAEMON", "LSP_COMPLETE_TOKEN",
                 "LSP_COMPLETE_DAEMON_")
# sockaddr_un.sun_path: 108 bytes on Linux, 104 on macOS, with the terminating NUL.
MAX_SOCKET_PATH = 103


class RuntimeDirError(Exception):
    """The runtime folder or the socket in it cannot be trusted or used."""


def runtime_dir() -> Path:
    override = os.environ.get(RUNTIME_ENV)
    if override:
        return Path(override)
    import platformdirs

    with warnings.catch_warnings():  # platformdirs warns when it falls back to /tmp
        warnings.simplefilter("ignore")
        return Path(platformdirs.user_runtime_dir("lsp-complete", appauthor=False))


def identity() -> str:
    """A short hash of the environment that shapes a daemon ("" when none of it is set)."""
    values = sorted(
        (name, value) for name, value in os.environ.items()
        if name.startswith("LSP_COMPLETE_") and not name.startswith(_NOT_IDENTITY)
    )
    if not values:
        return ""
    data = "\0".join(f"{n}={v}" for n, v in values).encode("utf-8", "surrogateescape")
    return blake2b(data, digest_size=6).hexdigest()


def socket_path() -> Path:
    """The daemon's socket for this user and environment (it may not exist)."""
    key = identity()
    return runtime_dir() / (f"daemon-{key}.sock" if key else "daemon.sock")


def lock_path(socket: Path) -> Path:
    return socket.with_suffix(".lock")


def log_path(socket: Path) -> Path:
    return socket.with_suffix(".log")


def ensure_runtime_dir() -> Path:
    """The runtime folder, made 0700 if missing; RuntimeDirError when it is not safe."""
    folder = runtime_dir()
    if os.name != "posix":
        raise RuntimeDirError("the shared engine daemon needs a POSIX system")
    try:
        folder.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        with contextlib.suppress(FileExistsError):
            folder.mkdir(mode=0o700)
        info = os.lstat(folder)
        parent = os.stat(folder.parent)
    except OSError as exc:
        raise RuntimeDirError(f"cannot make {folder}: {exc.strerror or exc}") from exc
    if not stat.S_ISDIR(info.st_mode):
        raise RuntimeDirError(f"{folder} is not a folder")
    if info.st_uid != os.getuid():
        raise RuntimeDirError(f"{folder} belongs to another user")
    if stat.S_IMODE(info.st_mode) & 0o077:
        raise RuntimeDirError(f"{folder} is open to other users (mode "
                              f"{stat.S_IMODE(info.st_mode):o}): chmod 700 it")
    # Whoever may rename entries of the parent could swap the folder for their own.
    shared = stat.S_IMODE(parent.st_mode) & 0o022 and not parent.st_mode & stat.S_ISVTX
    if parent.st_uid not in (0, os.getuid()) or shared:
        raise RuntimeDirError(f"{folder.parent} can be changed by other users")
    path = socket_path()
    if len(os.fsencode(path)) > MAX_SOCKET_PATH:
        raise RuntimeDirError(f"the socket path {path} is too long for a Unix socket: set "
                              f"{RUNTIME_ENV} to a shorter folder")
    return folder


def check_socket(path: Path) -> bool:
    """Whether `path` exists; RuntimeDirError when it is not a socket of this user."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return False
    except OSError as exc:
        raise RuntimeDirError(f"cannot read {path}: {exc.strerror or exc}") from exc
    if info.st_uid != os.getuid():
        raise RuntimeDirError(f"{path} belongs to another user")
    if not stat.S_ISSOCK(info.st_mode):
        raise RuntimeDirError(f"{path} is not a socket")
    return True


def open_private(path: Path, flags: int) -> int:
    """Open (create) a file of the runtime folder 0600, never following a link."""
    return os.open(path, flags | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0) | os.O_CLOEXEC,
                   0o600)
