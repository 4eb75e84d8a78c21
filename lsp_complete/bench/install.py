"""The versions an A/B run compares, each made runnable and checked to be what was asked for.

A version is this checkout (the default candidate: its working tree, uncommitted changes
included), a git ref of the checkout's repository, a wheel, or a source folder. All but the
checkout are installed into a virtual environment of their own:

1. the source: `git archive` of the ref's commit, or the folder, built into a wheel by pip
   (without build isolation where hatchling is installed, so nothing is fetched), or the wheel;
2. a venv made with `--system-site-packages`, so llama-cpp-python and every other installed
   dependency is reused as it is (no rebuild), then `pip install --no-deps --force-reinstall`
   of the wheel, then `pip install` of the wheel again, which adds only the requirements that
   are missing (pip's only-if-needed strategy; nothing is fetched when all are satisfied);
3. the venv is cached by content under `cache/<key>` (key: the commit, the wheel's hash, or
   the folder's sources' hash) and marked ready only once installed and verified, so a second
   run reuses it.

Verification (`verify`): the server runs as `<venv>/bin/python -m lsp_complete serve` in the
venv's folder, with only the bench's start-up module on its PYTHONPATH (this checkout's
PYTHONPATH and the editable install's path entry must not shadow the venv's copy). Before a
run, that interpreter, environment and folder import `lsp_complete` and say where from; the
folder must be the venv's, and its sources must hash to what was built (`source_digest`: every
.py file of the package and models.toml).
"""

from __future__ import annotations

import atexit
import contextlib
import dataclasses
import fcntl
import hashlib
import importlib.util
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from lsp_complete.bench.compat.sitecustomize import NO_EXTRA_BUFFERS
from lsp_complete.bench.machine import sha256_of
from lsp_complete.engine import llama_backend

PACKAGE = "lsp_complete"
COMPAT_DIR = Path(__file__).resolve().parent / "compat"  # holds only sitecustomize.py
CHECKOUT_ROOT = Path(__file__).resolve().parents[2]  # the folder this lsp_complete lives in
TIMEOUT_S = 900.0  # git, pip or an import: a wheel build on a slow machine takes minutes
_WHERE = "import os, lsp_complete; print(os.path.dirname(os.path.abspath(lsp_complete.__file__)))"


class InstallError(RuntimeError):
    """A version could not be installed, or the installed code is not the version's."""


@dataclass(frozen=True)
class ServerVersion:
    """One version of lsp-complete, ready to serve."""

    label: str  # as given on the command line ("92123de", "this checkout", a path)
    kind: str  # checkout | git | wheel | folder
    python: str  # the interpreter that runs `-m lsp_complete serve`
    pythonpath: str | None  # the checkout, for kind "checkout"; else None (the venv's copy)
    cwd: str | None  # the server's working folder
    source_digest: str  # what its package sources hash to (package_digest)
    commit: str | None = None  # the git commit, where known
    dirty: bool = False  # a checkout with uncommitted changes
    venv: str | None = None

    def server_env(self, base: dict[str, str]) -> dict[str, str]:
        """`base` with this version's import path (the checkout first, or nothing of `base`'s)
        and the bench's start-up module (compat/sitecustomize.py), told whether to turn
        llama.cpp's extra CPU buffer types off."""
        env = dict(base)
        own = (self.pythonpath, base.get("PYTHONPATH")) if self.pythonpath else ()
        env["PYTHONPATH"] = os.pathsep.join(p for p in (*own, str(COMPAT_DIR)) if p)
        env[NO_EXTRA_BUFFERS] = "0" if llama_backend.extra_buffer_types_safe() else "1"
        return env

    def describe(self) -> str:
        commit = f"{self.commit[:10]}{'+uncommitted' if self.dirty else ''}" if self.commit \
            else "no commit"
        return f"{self.label} ({self.kind}, {commit}, sources {self.source_digest[:12]})"


# --- digests -----------------------------------------------------------------------------------


def _digest(files: Iterable[tuple[str, bytes]]) -> str:
    """sha256 over (relative path, content hash) pairs, sorted by path."""
    digest = hashlib.sha256()
    for rel, data in sorted(files):
        digest.update(f"{rel}\0{hashlib.sha256(data).hexdigest()}\n".encode())
    return digest.hexdigest()


def package_digest(package: Path) -> str:
    """The digest of an lsp_complete package folder: its .py files and models.toml (where the
    wheel puts it, in the package; a source tree keeps it beside the package)."""
    files = {p.relative_to(package).as_posix(): p for p in package.rglob("*.py") if p.is_file()}
    for toml in (package.parent / "models.toml", package / "models.toml"):  # the package's wins
        if toml.is_file():
            files["models.toml"] = toml
    return _digest((rel, path.read_bytes()) for rel, path in files.items())


def wheel_digest(wheel: Path) -> str:
    prefix = PACKAGE + "/"
    with zipfile.ZipFile(wheel) as archive:
        names = [name for name in archive.namelist() if name.startswith(prefix)
                 and (name.endswith(".py") or name == prefix + "models.toml")]
        return _digest((name.removeprefix(prefix), archive.read(name)) for name in names)


# --- git ---------------------------------------------------------------------------------------


def _git(repo: Path, *args: str) -> bytes:
    return _run(["git", "-C", str(repo), *args], f"git {' '.join(args)}")


def resolve_commit(repo: Path, ref: str) -> str:
    return _git(repo, "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}").decode().strip()


def export_commit(repo: Path, commit: str, dest: Path) -> Path:
    """The commit's tree, as `git archive` gives it, extracted into `dest`."""
    data = _git(repo, "archive", "--format=tar", commit)
    with tarfile.open(fileobj=io.BytesIO(data)) as archive:
        try:
            archive.extractall(dest, filter="data")
        except TypeError:  # Python before 3.11.4: no filters (the archive is our own repo's)
            archive.extractall(dest)
    return dest


def checkout_state(root: Path) -> tuple[str | None, bool]:
    """(HEAD's commit, whether the working tree differs from it); (None, False) outside git."""
    try:
        commit = resolve_commit(root, "HEAD")
        dirty = bool(_git(root, "status", "--porcelain", "--untracked-files=no").strip())
    except InstallError:
        return None, False
    return commit, dirty


# --- versions ----------------------------------------------------------------------------------


def this_checkout(root: Path = CHECKOUT_ROOT) -> ServerVersion:
    """The code this bench runs from as it is now, served with this interpreter and a copy of
    it first on PYTHONPATH: edits to the checkout while a run goes on (it takes an hour) must
    not change the server under test half-way."""
    commit, dirty = checkout_state(root)
    snapshot = Path(tempfile.mkdtemp(prefix="lsp-complete-ab-checkout-"))
    atexit.register(shutil.rmtree, snapshot, ignore_errors=True)
    shutil.copytree(root / PACKAGE, snapshot / PACKAGE,
                    ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("models.toml", "pyproject.toml"):  # the checkout's models.toml is the one read
        if (root / name).is_file():
            shutil.copy2(root / name, snapshot / name)
    return ServerVersion(label="this checkout", kind="checkout", python=sys.executable,
                         pythonpath=str(snapshot), cwd=str(snapshot),
                         source_digest=package_digest(snapshot / PACKAGE), commit=commit,
                         dirty=dirty)


def default_cache() -> Path:
    from lsp_complete.model_store import cache_root

    return cache_root() / "bench-baselines"


def resolve(spec: str | None, cache: Path,
            repo: Path = CHECKOUT_ROOT) -> tuple[ServerVersion, Path]:
    """The version `spec` names (None: this checkout), installed (or found installed) and
    verified, and the folder its server imports lsp_complete from (`verify`)."""
    if spec is None:
        version = this_checkout(repo)
        return version, verify(version)
    return _installed(spec, cache, repo)


def _installed(spec: str, cache: Path, repo: Path) -> tuple[ServerVersion, Path]:
    path = Path(spec).expanduser()
    source: Path | None = None
    wheel: Path | None = None
    commit: str | None = None
    if path.is_file() and path.suffix == ".whl":
        wheel, kind = path.resolve(), "wheel"
        key = f"wheel-{sha256_of(wheel)[:24]}"
    elif path.is_dir():
        if not (path / "pyproject.toml").is_file() or not (path / PACKAGE).is_dir():
            raise InstallError(f"{spec}: not an lsp-complete source folder")
        source, kind = path.resolve(), "folder"
        content = package_digest(source / PACKAGE) + sha256_of(source / "pyproject.toml")
        key = f"folder-{hashlib.sha256(content.encode()).hexdigest()[:24]}"
        commit, _ = checkout_state(source)
    else:
        try:
            commit = resolve_commit(repo, spec)
        except InstallError:
            raise InstallError(f"{spec}: neither a wheel, a folder nor a git ref of "
                               f"{repo}") from None
        key, kind = f"git-{commit}", "git"
    with _locked(cache, key), tempfile.TemporaryDirectory(prefix="lsp-complete-version-") as tmp:
        ready = _ready(cache / key)
        if ready is not None:
            version = dataclasses.replace(ready, label=spec)
            return version, verify(version)
        if kind == "git":
            assert commit is not None
            source = export_commit(repo, commit, Path(tmp) / "src")
        if source is not None:
            wheel = build_wheel(source, Path(tmp) / "wheel")
        assert wheel is not None
        expected = wheel_digest(wheel)
        if source is not None and package_digest(source / PACKAGE) != expected:
            raise InstallError(f"{spec}: the built wheel does not hold the source's package")
        version = _install(cache / key, wheel, spec, kind, commit, expected)
        package = verify(version)
        (cache / key / "version.json").write_text(json.dumps(dataclasses.asdict(version)))
        return version, package


@contextlib.contextmanager
def _locked(cache: Path, key: str) -> Iterator[None]:
    """One installer per key at a time (two bench runs may start together)."""
    cache.mkdir(parents=True, exist_ok=True)
    with (cache / f"{key}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def _ready(folder: Path) -> ServerVersion | None:
    """The cached install in `folder`, when it was completed and its interpreter still runs."""
    try:
        version = ServerVersion(**json.loads((folder / "version.json").read_text()))
        if Path(version.python).exists():
            return version
    except (OSError, ValueError, TypeError):
        pass
    shutil.rmtree(folder, ignore_errors=True)  # an install cut short: start again
    return None


def _run(command: list[str], what: str, cwd: Path | str | None = None,
         env: dict[str, str] | None = None) -> bytes:
    """`command`'s stdout; InstallError, with the end of its output, when it fails. `env`
    (None: git's and pip's, without this checkout's PYTHONPATH)."""
    if env is None:
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        env.update(PIP_DISABLE_PIP_VERSION_CHECK="1", PIP_NO_INPUT="1")
    try:
        return subprocess.run(command, capture_output=True, env=env, cwd=cwd,
                              timeout=TIMEOUT_S, check=True).stdout
    except subprocess.CalledProcessError as err:
        output = (err.stdout + err.stderr)[-3000:].decode(errors="replace")
        raise InstallError(f"{what} failed:\n{output}") from None
    except (OSError, subprocess.TimeoutExpired) as err:
        raise InstallError(f"{what}: {err}") from None


def build_wheel(source: Path, out: Path) -> Path:
    """A wheel of `source`, built by pip. Without build isolation where hatchling (the
    project's build backend) is installed, so that nothing needs fetching."""
    out.mkdir(parents=True, exist_ok=True)
    isolation = [] if importlib.util.find_spec("hatchling") is None else ["--no-build-isolation"]
    _run([sys.executable, "-m", "pip", "wheel", "--no-deps", *isolation, "-w", str(out),
          str(source)], f"building a wheel of {source}", cwd=out)
    wheels = sorted(out.glob("lsp_complete-*.whl"))
    if len(wheels) != 1:
        raise InstallError(f"building {source} gave {len(wheels)} wheels")
    return wheels[0]


def _install(folder: Path, wheel: Path, spec: str, kind: str, commit: str | None,
             digest: str) -> ServerVersion:
    shutil.rmtree(folder, ignore_errors=True)
    venv = folder / "venv"
    # --without-pip: the system site-packages' pip serves the venv (it installs into the
    # interpreter that runs it).
    _run([sys.executable, "-m", "venv", "--system-site-packages", "--without-pip", str(venv)],
         "creating the virtual environment")
    python = str(venv / "bin" / "python")
    _run([python, "-m", "pip", "install", "--no-deps", "--force-reinstall", str(wheel)],
         f"installing {wheel.name}", cwd=folder)
    _run([python, "-m", "pip", "install", str(wheel)],  # only the requirements still missing
         f"installing the requirements of {wheel.name}", cwd=folder)
    return ServerVersion(label=spec, kind=kind, python=python, pythonpath=None, cwd=str(venv),
                         source_digest=digest, commit=commit, venv=str(venv))


def verify(version: ServerVersion) -> Path:
    """Check that the server of `version` imports that version's code; returns its folder.
    Raises InstallError when another copy (this checkout, the editable install) would shadow
    it, or when the installed sources differ from what was built."""
    where = _run([version.python, "-c", _WHERE], f"{version.label}: importing lsp_complete",
                 cwd=version.cwd, env=version.server_env(dict(os.environ)))
    package = Path(where.decode().strip())
    if version.venv is not None and Path(version.venv).resolve() not in package.resolve().parents:
        raise InstallError(f"{version.label}: the server would import {package}, not the copy "
                           f"in {version.venv}")
    if version.pythonpath is not None and package.resolve() != \
            (Path(version.pythonpath) / PACKAGE).resolve():
        raise InstallError(f"{version.label}: the server would import {package}, not "
                           f"{version.pythonpath}")
    if package_digest(package) != version.source_digest:
        raise InstallError(f"{version.label}: the sources in {package} are not the ones built")
    return package
