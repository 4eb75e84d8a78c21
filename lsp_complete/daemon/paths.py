"""Where the shared engine daemon lives: its runtime folder, socket, start lock and log.

The folder is the user's runtime dir (`platformdirs.user_runtime_dir`, on Linux
$XDG_RUNTIME_DIR/lsp-complete) or LSP_COMPLETE_RUNTIME_DIR. It must be a real folder of this
user, mode 0700, in a parent that other users cannot rename entries of: anything else is
refused (the caller then runs the engine in its own process), never repaired or followed.

The socket's name does not hold the version (a daemon of another version is found, and
replaced, see `start`), but it holds a hash of everything that shapes the daemon a frontend
would start (`environment_key`): the user it runs as, the Python and the code it runs, the
cache folder it writes to, resolved as the daemon would resolve it ($LSP_COMPLETE_CACHE_DIR,
else $XDG_CACHE_HOME or $HOME), and the LSP_COMPLETE_* environment it inherits (default model,
API key...). Frontends that would make a different daemon never share one.

The model it loads for the frontend's `--model` (a file: its real path, size and time; a
registry name: as written, it resolves inside the cache folder) completes its `identity`, which
a frontend sends and the daemon checks in the hello. The first daemon of an environment takes
`daemon-<environment>.sock`; a frontend that finds a daemon of another model there uses its
model's own `daemon-<environment>-<model>.sock`. `lsp-complete daemon status | stop` address
every daemon of the environment (`environment_sockets`).
"""

from __future__ import annotations

import contextlib
import os
import stat
import sys
import warnings
from pathlib import Path

from lsp_complete.locations import cache_root

try:  # hashlib without OpenSSL: hashlib's import weighs ~3.5 MB in every editor's frontend
    from _blake2 import blake2b
except ImportError:  # pragma: no cover - a Python built without it
    from hashlib import blake2b

RUNTIME_ENV = "LSP_COMPLETE_RUNTIME_DIR"
MODEL_ENV = "LSP_COMPLETE_MODEL"
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


def _digest(parts: list[str], size: int) -> str:
    data = "\0".join(parts).encode("utf-8", "surrogateescape")
    return blake2b(data, digest_size=size).hexdigest()


def environment_key() -> str:
    """A short hash of what shapes the daemon this process would start, its model aside."""
    code = Path(__file__).resolve().parents[2]  # what `start.spawn` puts on its PYTHONPATH
    parts = [f"uid={getattr(os, 'getuid', lambda: -1)()}", f"python={sys.executable}",
             f"code={code}", f"cache={os.path.realpath(cache_root())}"]
    parts += sorted(
        f"{name}={value}" for name, value in os.environ.items()
        if name.startswith("LSP_COMPLETE_") and not name.startswith(_NOT_IDENTITY)
    )
    return _digest(parts, 6)


def resolved_model(model: str | None) -> str:
    """What `model` (else $LSP_COMPLETE_MODEL, else the registry's default) names, as far as a
    frontend can tell without loading the registry: a file by its real path, size and time
    (replaced, it is another model); otherwise the name, which resolves in the cache folder."""
    value = model or os.environ.get(MODEL_ENV) or ""
    if not value:
        return "default"
    path = Path(value).expanduser()
    try:
        info = os.stat(path)
    except (OSError, ValueError):
        return f"name:{value}"
    return f"file:{os.path.realpath(path)}:{info.st_size}:{info.st_mtime_ns}"


def model_key(model: str | None) -> str:
    return _digest([resolved_model(model)], 4)


def identity(model: str | None = None) -> str:
    """Everything that shapes a daemon, the model it loads included: the hello carries it,
    and a daemon serves only frontends of its own identity."""
    return f"{environment_key()}-{model_key(model)}"


def socket_path() -> Path:
    """The daemon's socket for this user and environment (it may not exist)."""
    return runtime_dir() / f"daemon-{environment_key()}.sock"


def model_socket_path(model: str | None) -> Path:
    """The socket of this environment's daemon for `model` alone: where a frontend goes when
    a daemon of another model holds the environment's."""
    return runtime_dir() / f"daemon-{environment_key()}-{model_key(model)}.sock"


def environment_sockets() -> list[Path]:
    """The sockets of this environment's daemons, the shared one first (they may be stale)."""
    shared = socket_path()
    try:
        own = sorted(shared.parent.glob(f"{shared.stem}-*.sock"))
    except OSError:
        own = []
    return [shared, *own]


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
