"""The workspace: its roots, and reading other files of it safely and cheaply.

Repository context (context/imports.py, context/repo.py) sees other files only through
`Workspace`, which owns the rules for touching the disk:

* only inside the workspace roots (from initialize's rootUri / workspaceFolders and
  didChangeWorkspaceFolders): every path is resolved (symlinks, `..`) before it is checked, so
  neither a symlink nor a `../` import leads out of a root;
* never what git ignores (the root's and nested .gitignore files, and the repository's own
  `.git/info/exclude` below them, with `pathspec`), nor `.git/`;
  ignore rules that cannot be applied whole (too many, too costly, unreadable) leave their
  folder unread, and a .gitignore that is no regular file (a link, FIFO...) holds no rules;
* never a binary file, nor one over the size cap;
* bytes only through safe_read (regular files, O_NONBLOCK | O_NOFOLLOW, bounded, fstat on the
  descriptor), and every disk access on an I/O thread with a deadline;
* the open buffer's text wins over the disk copy (`buffers`, given by the server).

Parsed results (outlines) are kept in a bounded LRU keyed by (path, mtime, size) for disk files
and (path, version) for open buffers, so each version of a file is parsed once. The cache is
thread-safe: the server computes repository context on its worker thread, never on the event
loop, and drops entries on didSave / workspace/didChangeWatchedFiles (`invalidate`).
"""

from __future__ import annotations

import importlib.util
import itertools
import logging
import os
import re
import stat
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import pathspec

from lsp_complete.documents import Document
from lsp_complete.languages import language_of_path
from lsp_complete.safe_read import (
    IGNORE_RULES,
    IO_TIMEOUT_S,
    SOURCE,
    IoTimeout,
    ReadLimit,
    io_call,
    read_file,
)
from lsp_complete.uris import file_path

log = logging.getLogger(__name__)

MAX_FILE_BYTES = SOURCE.max_bytes  # larger files are not read (minified, generated)
OUTLINE_CACHE_ENTRIES = 512
MAX_DEPTH = 32  # folders below a root: deeper paths are not read (nor their rules evaluated)
_DIR_LISTING_LIMIT = 400  # entries of one folder looked at (Go / Java packages)
# Ignore rules we evaluate: more, longer or costlier ones make the folder's files unreadable
# (fail closed: what the user ignores must stay out of prompts).
MAX_IGNORE_PATTERNS = 2000
MAX_PATTERN_CHARS = 256
# Rules are matched with RE2 (google-re2, through pathspec's backend): linear in the path,
# whatever the rule. Python's backtracking `re` is exponential in a rule's wildcards on a
# deep path (`**/a/**/a/...`, `*a*/*a*/*a*/...`), so without RE2 a rule may hold few.
LINEAR_MATCHING = importlib.util.find_spec("re2") is not None
_BACKEND = "re2" if LINEAR_MATCHING else "simple"
MAX_WILDCARDS_BACKTRACKING = 3  # `*` in a rule (a run of `**` segments counts once)
# Roots kept, at most. Editors open a handful (a large multi-root workspace: tens), but a client
# may send hundreds of thousands in one message: each is resolved on the I/O thread and listed
# in the status, and the context searches every root for an import. Past the cap the client's
# list is cut, with a warning, instead of spending the disk's deadline on them.
MAX_ROOTS = 10_000
# Resolving a change of roots stops here, within the I/O thread's deadline (IO_TIMEOUT_S):
# what is resolved by then is kept, and the rest dropped with a warning. (Past IO_TIMEOUT_S
# the caller stops waiting and keeps what was done, or the roots it had.)
RESOLVE_ROOTS_S = 0.75 * IO_TIMEOUT_S

T = TypeVar("T")
# The open buffer for a path, if the editor has it open: (version, text).
BufferLookup = Callable[[Path], "tuple[int, str] | None"]


@dataclass(frozen=True)
class SourceText:
    """One file's text as the workspace sees it (the open buffer's, else the disk's)."""

    path: Path  # resolved, inside `root`
    root: Path
    text: str  # line breaks read as "\n"
    language_id: str
    version: tuple[Any, ...]  # ("disk", mtime_ns, size) or ("buffer", version)

    @property
    def relative(self) -> str:
        """The path relative to its root, '/'-separated (what prompts show)."""
        return self.path.relative_to(self.root).as_posix()


def path_of_uri(uri: str) -> Path | None:
    """The local path a client's URI names (uris.file_path), or None: an unsaved buffer."""
    path = file_path(uri)
    return Path(path) if path is not None else None


def _real(path: Path) -> Path:
    # realpath, not resolve(strict=True): a path that does not exist yet is still checked
    # against the roots (and then simply not found).
    return Path(os.path.realpath(path))


def _reals(paths: list[Path]) -> list[Path]:
    return [_real(path) for path in paths]


def _on_io_thread(default: T, fn: Callable[..., T], *args: Any) -> T:
    """`fn(*args)` on an I/O thread (safe_read), or `default` when the disk does not answer
    in time: neither the inference worker nor the event loop waits on a stuck filesystem."""
    try:
        return io_call(fn, *args)
    except IoTimeout as exc:
        log.info("workspace: %s", exc)
        return default


# ---------------------------------------------------------------------- ignore rules


@dataclass(frozen=True)
class _Rules:
    """One folder's .gitignore: its patterns, or `everything` when they cannot be applied
    whole (over the caps, unreadable): then nothing below the folder is read."""

    spec: pathspec.GitIgnoreSpec | None = None
    everything: bool = False


_NO_RULES = _Rules()
_EVERYTHING = _Rules(everything=True)
_Stamp = tuple[int, int, int, int]  # what lstat says of a .gitignore: kind, inode, mtime, size


def _stamp(file: Path) -> _Stamp | None:
    try:
        st = os.lstat(file)
    except (FileNotFoundError, NotADirectoryError):
        return None
    return (stat.S_IFMT(st.st_mode), st.st_ino, st.st_mtime_ns, st.st_size)


def _load_rules(file: Path, stamp: _Stamp | None, scope: Path) -> _Rules | None:
    """The rules in `file`, which apply below `scope` (None: could not tell this time, do not
    remember it)."""
    if stamp is None or stamp[0] != stat.S_IFREG:
        # Like git, which does not follow a linked .gitignore: a link, FIFO, device or folder
        # named .gitignore holds no rules, and is not opened.
        return _NO_RULES
    read = read_file(file, IGNORE_RULES)
    if read.data is None:
        if read.problem in ("missing", "not a regular file"):
            return _NO_RULES
        if read.problem == "timed out":
            return None  # the read logged it
        log.warning("workspace: %s: %s; nothing below %s is read", file, read.problem, scope)
        return _EVERYTHING
    return _parse_rules(file, read.data.decode("utf-8", errors="replace").splitlines(), scope)


def _parse_rules(file: Path, lines: list[str], scope: Path) -> _Rules:
    patterns = [line for line in lines if line.strip() and not line.startswith("#")]
    if len(patterns) > MAX_IGNORE_PATTERNS:
        log.warning("workspace: %s has over %d patterns; nothing below %s is read", file,
                    MAX_IGNORE_PATTERNS, scope)
        return _EVERYTHING
    costly = next((p for p in patterns if not _tame(p)), None)
    if costly is not None:
        log.warning("workspace: %s: pattern %.60r is too long or has too many wildcards to "
                    "evaluate; nothing below %s is read", file, costly, scope)
        return _EVERYTHING
    if not patterns:
        return _NO_RULES
    try:
        return _Rules(_compile(lines))
    except Exception:  # like git, skip the lines that are no pattern (re or re2 errors)
        valid = [p for p in patterns if _valid(p)]
    problem = "RE2 cannot compile them as one set"
    if len(valid) < len(patterns):  # (all valid: they failed together, they would again)
        try:
            return _Rules(_compile(valid))
        except Exception as exc:
            problem = str(exc)
    log.warning("workspace: %s: its patterns cannot be matched together (%s); nothing below "
                "%s is read", file, problem, scope)
    return _EVERYTHING


def _compile(lines: Iterable[str]) -> pathspec.GitIgnoreSpec:
    return pathspec.GitIgnoreSpec.from_lines(lines, backend=_BACKEND)


def _tame(pattern: str, linear: bool = LINEAR_MATCHING) -> bool:
    """Whether matching `pattern` costs little: short, and (without linear matching) few
    wildcards, since each one multiplies the ways a backtracking match can fail."""
    if len(pattern) > MAX_PATTERN_CHARS:
        return False
    if linear:
        return True
    segments = re.sub(r"\*\*(/\*\*)+", "**", pattern).split("/")
    stars = sum(1 if s == "**" else s.count("*") for s in segments)
    return stars <= MAX_WILDCARDS_BACKTRACKING


def _valid(pattern: str) -> bool:
    try:
        _compile([pattern])
    except Exception:  # re.error, re2.error, ValueError: pathspec raises what its backend does
        return False
    return True


class _GitIgnores:
    """The .gitignore rules of a root, read per folder and re-read when a file changes."""

    def __init__(self) -> None:
        self._rules: dict[Path, tuple[_Stamp | None, _Rules]] = {}  # by rules file
        self._lock = threading.Lock()

    def rules(self, folder: Path) -> _Rules:
        return self._rules_in(folder / ".gitignore", folder)

    def excludes(self, root: Path) -> _Rules:
        """The repository's own rules (`.git/info/exclude`: what `git status` hides but
        nobody commits), which every .gitignore overrides. No rules where `.git` is a file
        (a worktree's or submodule's pointer to its git folder)."""
        return self._rules_in(root / ".git" / "info" / "exclude", root)

    def _rules_in(self, file: Path, scope: Path) -> _Rules:
        stamp = _stamp(file)
        with self._lock:
            known = self._rules.get(file)
        if known is not None and known[0] == stamp:
            return known[1]
        rules = _load_rules(file, stamp, scope)
        if rules is None:
            return _EVERYTHING  # for now: the next call tries again
        with self._lock:
            self._rules[file] = (stamp, rules)
        return rules

    def ignored(self, root: Path, path: Path, is_dir: bool = False) -> bool:
        """Whether git ignores `path` (inside `root`): the last matching rule from the root
        down wins, and nothing below an ignored folder comes back."""
        parts = path.relative_to(root).parts
        if ".git" in parts:
            return True
        found: list[_Rules] = []  # each folder's rules from the root down, read once

        def rules_at(depth: int) -> _Rules:
            while len(found) <= depth:
                found.append(self.rules(root.joinpath(*parts[:len(found)])))
            return found[depth]

        excludes = self.excludes(root)
        # Folders first: git does not look inside an ignored one.
        for end in range(1, len(parts) + 1):
            if _matches(parts[:end], end < len(parts) or is_dir, excludes, rules_at):
                return True
        return False

    def forget(self, folder: Path) -> None:
        with self._lock:
            self._rules.pop(folder / ".gitignore", None)


def _matches(parts: tuple[str, ...], is_dir: bool, excludes: _Rules,
             rules_at: Callable[[int], _Rules]) -> bool:
    # git's order: info/exclude first (its patterns are relative to the root, like the root's
    # .gitignore), then each folder's .gitignore from the root down; the last rule that
    # matches decides. Folders' rules are read only as far as they are needed.
    ordered = itertools.chain([(0, excludes)], ((d, rules_at(d)) for d in range(len(parts))))
    verdict = False
    for depth, rules in ordered:
        if rules.everything:
            return True
        if rules.spec is not None:
            relative = "/".join(parts[depth:]) + ("/" if is_dir else "")
            result = rules.spec.check_file(relative)
            if result.include is not None:
                verdict = result.include
    return verdict


class Workspace:
    """The roots, and safe, cached access to the files inside them (thread-safe). Every
    method that touches the disk does so on an I/O thread, within a deadline (safe_read)."""

    def __init__(self, max_file_bytes: int = MAX_FILE_BYTES,
                 cache_entries: int = OUTLINE_CACHE_ENTRIES) -> None:
        self.max_file_bytes = max_file_bytes
        self._roots: tuple[Path, ...] = ()
        self._root_set: frozenset[Path] = frozenset()  # the same, to look paths up in
        self._ignores = _GitIgnores()
        self._cache: OrderedDict[tuple[Any, ...], Any] = OrderedDict()
        self._cache_entries = cache_entries
        self._lock = threading.Lock()
        self.buffers: BufferLookup = lambda _path: None
        # Bumped by every change that may alter what a file resolves to or reads as.
        self.generation = 0

    # ------------------------------------------------------------------ roots

    @property
    def roots(self) -> tuple[Path, ...]:
        return self._roots

    def set_roots(self, paths: Iterable[Path]) -> None:
        """The roots are the folders among `paths`, resolved, without repeats. When the disk
        does not answer in time: those resolved so far, or else the roots as they were."""
        wanted = _capped(list(paths))
        adding = _Resolving(wanted, time.monotonic() + RESOLVE_ROOTS_S)
        _on_io_thread(None, adding.run)
        found, dropped = adding.result()
        if dropped:
            kept = found or list(self._roots)
            log.warning("workspace: the disk did not answer in time: %d of %d folders were not "
                        "resolved and are not roots (%d roots kept)", dropped, len(wanted),
                        len(kept))
            found = kept
        self._set_roots(found)

    def change_roots(self, added: Iterable[Path] = (), removed: Iterable[Path] = ()) -> None:
        """`removed` leave the roots, then the folders among `added` join them: all of them in
        one trip to the I/O thread, and the roots kept are not resolved again (a client may
        add thousands in one message). When the disk does not answer in time, the folders
        not resolved by then are not added; the roots kept stay."""
        gone = [Path(os.path.abspath(path)) for path in removed]
        wanted = _capped(list(added))
        deadline = time.monotonic() + RESOLVE_ROOTS_S
        removing = _Resolving(gone, deadline, folders_only=False)
        adding = _Resolving(wanted, deadline)
        _on_io_thread(None, _change_roots, self._roots, removing, adding)
        resolved, _ = removing.result()
        leaving = {*gone, *resolved}  # as given too: a removal never waits on the disk
        kept = [root for root in self._roots if root not in leaving]
        found, dropped = adding.result()
        if dropped:
            log.warning("workspace: the disk did not answer in time: %d of %d folders added "
                        "were not resolved and are not roots", dropped, len(wanted))
        self._set_roots(_capped(kept + found))

    def add_root(self, path: Path) -> None:
        self.change_roots(added=[path])

    def remove_root(self, path: Path) -> None:
        self.change_roots(removed=[path])

    def _set_roots(self, roots: list[Path]) -> None:
        # Two references, each replaced whole: `_root_of` (on the worker) reads only the set.
        self._roots = tuple(roots)
        self._root_set = frozenset(roots)
        self.generation += 1

    def root_of(self, path: Path) -> Path | None:
        """The (innermost) root holding `path` once resolved, or None."""
        return _on_io_thread(None, self._root_of, path)

    def _root_of(self, path: Path) -> Path | None:
        # Up from the path, the first root met is the innermost: as many look-ups as the path
        # has folders, however many roots there are.
        real = _real(path)
        roots = self._root_set
        return next((folder for folder in (real, *real.parents) if folder in roots), None)

    # ------------------------------------------------------------------ access rules

    def allowed(self, path: Path, is_dir: bool = False) -> tuple[Path, Path] | None:
        """(resolved path, its root) when the workspace may read `path`, else None: inside a
        root after resolving symlinks and `..`, not too deep, and not ignored by git."""
        return _on_io_thread(None, self._allowed, path, is_dir)

    def _allowed(self, path: Path, is_dir: bool = False) -> tuple[Path, Path] | None:
        real = _real(path)
        root = self._root_of(real)
        if root is None or real == root or len(real.parts) - len(root.parts) > MAX_DEPTH:
            return None
        if self._ignores.ignored(root, real, is_dir):
            return None
        return real, root

    def is_file(self, path: Path) -> bool:
        return _on_io_thread(False, self._is_file, path)

    def _is_file(self, path: Path) -> bool:
        real = _real(path)
        # What exists first (cheap), then the rules: most paths asked about do not.
        if self.buffers(real) is None and not _is_regular(real):
            return False
        return self._allowed(real) is not None

    def is_dir(self, path: Path) -> bool:
        return _on_io_thread(False, self._is_dir, path)

    def _is_dir(self, path: Path) -> bool:
        real = _real(path)
        root = self._root_of(real)
        if root is None or not real.is_dir():
            return False
        return real == root or self._allowed(real, is_dir=True) is not None

    def list_dir(self, folder: Path, suffixes: tuple[str, ...]) -> list[Path]:
        """Readable files of a folder with one of `suffixes`, sorted (a package's files)."""
        return _on_io_thread([], self._list_dir, folder, suffixes)

    def _list_dir(self, folder: Path, suffixes: tuple[str, ...]) -> list[Path]:
        if not self._is_dir(folder):
            return []
        real = _real(folder)
        try:
            with os.scandir(real) as entries:
                names = sorted(itertools.islice((e.name for e in entries), _DIR_LISTING_LIMIT))
        except OSError:
            return []
        return [real / name for name in names
                if name.endswith(suffixes) and self._is_file(real / name)]

    def read(self, path: Path, limit: ReadLimit | None = None) -> SourceText | None:
        """The file's text (the open buffer's if it is open), or None when it may not or
        cannot be read: outside the roots, ignored, missing, not a regular file, binary or
        over the cap (`limit`: the kind of file; a source file by default)."""
        return _on_io_thread(None, self._read, path, limit)

    def _read(self, path: Path, limit: ReadLimit | None) -> SourceText | None:
        cap = limit or ReadLimit(SOURCE.kind, self.max_file_bytes)
        found = self._allowed(path)
        if found is None:
            return None
        real, root = found
        language = language_of_path(real.name)
        buffer = self.buffers(real)
        if buffer is not None:
            version, text = buffer
            if Document.is_binary(text) or len(text) > cap.max_bytes:
                return None
            return SourceText(real, root, _lf_text(text), language, ("buffer", version))
        try:  # lstat for the cache; what is read is checked again on the descriptor
            st = os.lstat(real)
        except OSError:
            return None
        if not stat.S_ISREG(st.st_mode) or st.st_size > cap.max_bytes:
            return None
        key = ("text", real, st.st_mtime_ns, st.st_size)
        cached = self._get(key)
        if cached is None:
            read = read_file(real, cap, within=root)
            if read.data is None or read.stamp is None:
                return None
            key = ("text", real, *read.stamp)
            decoded = _decode(read.data, cap.max_bytes)
            cached = self._put(key, decoded if decoded is not None else False)
        if cached is False:
            return None
        return SourceText(real, root, cached, language, ("disk", *key[2:]))

    # ------------------------------------------------------------------ parsed results

    def cached(self, source: SourceText, kind: str, compute: Callable[[SourceText], T]) -> T:
        """`compute(source)` once per version of the file (LRU-bounded); `kind` names what
        is computed, so several results of one file can be kept."""
        key = (kind, source.path, source.version)
        hit: T | None = self._get(key)  # `kind` in the key: what is stored under it is a T
        if hit is not None:
            return hit
        return self._put(key, compute(source))

    def _get(self, key: tuple[Any, ...]) -> Any:
        with self._lock:
            value = self._cache.get(key)
            if value is not None:
                self._cache.move_to_end(key)
            return value

    def _put(self, key: tuple[Any, ...], value: T) -> T:
        with self._lock:
            self._cache[key] = value
            self._cache.move_to_end(key)
            while len(self._cache) > self._cache_entries:
                self._cache.popitem(last=False)
        return value

    def invalidate(self, *paths: Path) -> None:
        """Files were saved, created, changed or deleted outside the editor: forget what was
        read or parsed from them (and a .gitignore's rules). All of them in one trip to the
        I/O thread and one pass over the cache: a checkout reports thousands at once."""
        with self._lock:
            cached = {key[1].name for key in self._cache if len(key) > 1}
        # Only a path named as a cached file (or a .gitignore) can matter: resolving each of a
        # checkout's files held the event loop for seconds. (A watcher reports a changed file
        # under its own name, the name it is cached under.)
        wanted = [path for path in paths if path.name in cached or path.name == ".gitignore"]
        unresolved = [Path(os.path.abspath(path)) for path in wanted]
        reals = set(_on_io_thread(unresolved, _reals, wanted)) if wanted else set()
        with self._lock:
            for key in [k for k in self._cache if len(k) > 1 and k[1] in reals]:
                del self._cache[key]
        for real in reals:
            if real.name == ".gitignore":
                self._ignores.forget(real.parent)
        self.generation += 1

    @property
    def cache_size(self) -> int:
        with self._lock:
            return len(self._cache)


def _capped(roots: list[Path]) -> list[Path]:
    if len(roots) > MAX_ROOTS:
        log.warning("workspace: %d folders; only the first %d are roots", len(roots), MAX_ROOTS)
    return roots[:MAX_ROOTS]


@dataclass
class _Resolving:
    """Paths resolved on the I/O thread, one by one until `deadline`. What is done stays
    here for the caller, who keeps it when the disk stops answering midway."""

    paths: list[Path]
    deadline: float  # time.monotonic()
    folders_only: bool = True  # else any path, even one gone (a root deleted, then removed)
    skip: set[Path] = field(default_factory=set)  # resolved paths not wanted: repeats, roots
    found: list[Path] = field(default_factory=list)  # resolved, in order, without repeats
    done: int = 0  # paths looked at
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def run(self) -> None:
        for path in self.paths:
            if time.monotonic() > self.deadline:
                return
            real = _folder(path) if self.folders_only else _resolved(path)
            with self._lock:  # `result` may read while this thread is still at it
                if real is not None and real not in self.skip:
                    self.skip.add(real)
                    self.found.append(real)
                self.done += 1

    def result(self) -> tuple[list[Path], int]:
        """(the paths resolved, how many were not looked at in time)."""
        with self._lock:
            return list(self.found), len(self.paths) - self.done


def _change_roots(roots: tuple[Path, ...], removing: _Resolving, adding: _Resolving) -> None:
    removing.run()
    leaving = set(removing.found)
    adding.skip.update(root for root in roots if root not in leaving)
    adding.run()


def _resolved(path: Path) -> Path | None:
    try:
        return _real(path)
    except (OSError, ValueError):  # too long a path, a NUL byte
        return None


def _folder(path: Path) -> Path | None:
    """`path` resolved, if it is a folder."""
    try:
        real = _real(path)
        return real if real.is_dir() else None
    except (OSError, ValueError):  # too long a path, a NUL byte: no folder
        return None


def _is_regular(path: Path) -> bool:
    try:
        return stat.S_ISREG(os.lstat(path).st_mode)
    except (OSError, ValueError):
        return False


def _decode(data: bytes, limit: int) -> str | None:
    """Text of a file's bytes, or None for a binary or oversized one."""
    if len(data) > limit or b"\x00" in data[:8192]:
        return None
    text = data.decode("utf-8", errors="replace")
    if Document.is_binary(text):
        return None
    return _lf_text(text)


def _lf_text(text: str) -> str:
    """Every LSP line break as "\n": what the readers of a SourceText (outlines, similar code)
    split lines at, whether the text came from disk or from an open buffer."""
    if "\r" not in text:
        return text
    return text.replace("\r\n", "\n").replace("\r", "\n")
