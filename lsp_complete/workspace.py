"""The workspace: its roots, and reading other files of it safely and cheaply.

Repository context (context/imports.py, context/repo.py) sees other files only through
`Workspace`, which owns the rules for touching the disk:

* only inside the workspace roots (from initialize's rootUri / workspaceFolders and
  didChangeWorkspaceFolders): every path is resolved (symlinks, `..`) before it is checked, so
  neither a symlink nor a `../` import leads out of a root;
* never what git ignores (the root's and nested .gitignore files, with `pathspec`), nor `.git/`;
* never a binary file, nor one over the size cap;
* the open buffer's text wins over the disk copy (`buffers`, given by the server).

Parsed results (outlines) are kept in a bounded LRU keyed by (path, mtime, size) for disk files
and (path, version) for open buffers, so each version of a file is parsed once. The cache is
thread-safe: the server computes repository context on its worker thread, never on the event
loop, and drops entries on didSave / workspace/didChangeWatchedFiles (`invalidate`).
"""

from __future__ import annotations

import itertools
import os
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import unquote, urlparse

import pathspec

from lsp_complete.documents import Document
from lsp_complete.languages import language_of_path

MAX_FILE_BYTES = 512 * 1024  # other files larger than this are not read (minified, generated)
OUTLINE_CACHE_ENTRIES = 512
_DIR_LISTING_LIMIT = 400  # entries of one folder looked at (Go / Java packages)

T = TypeVar("T")
# The open buffer for a path, if the editor has it open: (version, text).
BufferLookup = Callable[[Path], "tuple[int, str] | None"]


@dataclass(frozen=True)
class SourceText:
    """One file's text as the workspace sees it (the open buffer's, else the disk's)."""

    path: Path  # resolved, inside `root`
    root: Path
    text: str
    language_id: str
    version: tuple[Any, ...]  # ("disk", mtime_ns, size) or ("buffer", version)

    @property
    def relative(self) -> str:
        """The path relative to its root, '/'-separated (what prompts show)."""
        return self.path.relative_to(self.root).as_posix()


def path_of_uri(uri: str) -> Path | None:
    """The local path of a file:// URI (None for other schemes)."""
    if not uri.startswith("file:"):
        return None
    parsed = urlparse(uri)
    if parsed.netloc not in ("", "localhost"):
        return None
    return Path(unquote(parsed.path))


def _real(path: Path) -> Path:
    # realpath, not resolve(strict=True): a path that does not exist yet is still checked
    # against the roots (and then simply not found).
    return Path(os.path.realpath(path))


class _GitIgnores:
    """The .gitignore rules of a root, read per folder and re-read when a file changes."""

    def __init__(self) -> None:
        self._specs: dict[Path, tuple[tuple[int, int] | None, pathspec.GitIgnoreSpec | None]] = {}
        self._lock = threading.Lock()

    def _spec(self, folder: Path) -> pathspec.GitIgnoreSpec | None:
        file = folder / ".gitignore"
        try:
            st = file.stat()
            stamp: tuple[int, int] | None = (st.st_mtime_ns, st.st_size)
        except OSError:
            stamp = None
        with self._lock:
            known = self._specs.get(folder)
        if known is not None and known[0] == stamp:
            return known[1]
        spec = None
        if stamp is not None and stamp[1] <= MAX_FILE_BYTES:
            try:
                lines = file.read_text(encoding="utf-8", errors="replace").splitlines()
                spec = pathspec.GitIgnoreSpec.from_lines(lines)
            except (OSError, ValueError):
                spec = None
        with self._lock:
            self._specs[folder] = (stamp, spec)
        return spec

    def ignored(self, root: Path, path: Path, is_dir: bool = False) -> bool:
        """Whether git ignores `path` (inside `root`): the last matching rule from the root
        down wins, and nothing below an ignored folder comes back."""
        parts = path.relative_to(root).parts
        if ".git" in parts:
            return True
        # Folders first: git does not look inside an ignored one.
        for depth in range(1, len(parts)):
            if self._match(root, parts[:depth], True):
                return True
        return bool(parts) and self._match(root, parts, is_dir)

    def _match(self, root: Path, parts: tuple[str, ...], is_dir: bool) -> bool:
        verdict = False
        folder = root
        for depth in range(len(parts)):
            spec = self._spec(folder)
            if spec is not None:
                relative = "/".join(parts[depth:]) + ("/" if is_dir else "")
                result = spec.check_file(relative)
                if result.include is not None:
                    verdict = result.include
            folder = folder / parts[depth]
        return verdict

    def forget(self, folder: Path) -> None:
        with self._lock:
            self._specs.pop(folder, None)


class Workspace:
    """The roots, and safe, cached access to the files inside them (thread-safe)."""

    def __init__(self, max_file_bytes: int = MAX_FILE_BYTES,
                 cache_entries: int = OUTLINE_CACHE_ENTRIES) -> None:
        self.max_file_bytes = max_file_bytes
        self._roots: tuple[Path, ...] = ()
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
        roots: list[Path] = []
        for path in paths:
            real = _real(path)
            if real.is_dir() and real not in roots:
                roots.append(real)
        self._roots = tuple(roots)
        self.generation += 1

    def add_root(self, path: Path) -> None:
        self.set_roots([*self._roots, path])

    def remove_root(self, path: Path) -> None:
        real = _real(path)
        self.set_roots(r for r in self._roots if r != real)

    def root_of(self, path: Path) -> Path | None:
        """The (innermost) root holding `path` once resolved, or None."""
        real = _real(path)
        found = None
        for root in self._roots:
            inside = real == root or root in real.parents
            if inside and (found is None or len(root.parts) > len(found.parts)):
                found = root
        return found

    # ------------------------------------------------------------------ access rules

    def allowed(self, path: Path, is_dir: bool = False) -> tuple[Path, Path] | None:
        """(resolved path, its root) when the workspace may read `path`, else None: inside a
        root after resolving symlinks and `..`, and not ignored by git."""
        real = _real(path)
        root = self.root_of(real)
        if root is None or real == root:
            return None
        if self._ignores.ignored(root, real, is_dir):
            return None
        return real, root

    def is_file(self, path: Path) -> bool:
        found = self.allowed(path)
        if found is None:
            return False
        return self.buffers(found[0]) is not None or found[0].is_file()

    def is_dir(self, path: Path) -> bool:
        real = _real(path)
        root = self.root_of(real)
        if root is None:
            return False
        return real.is_dir() and (real == root or self.allowed(real, is_dir=True) is not None)

    def list_dir(self, folder: Path, suffixes: tuple[str, ...]) -> list[Path]:
        """Readable files of a folder with one of `suffixes`, sorted (a package's files)."""
        if not self.is_dir(folder):
            return []
        try:
            with os.scandir(_real(folder)) as entries:
                names = sorted(itertools.islice((e.name for e in entries), _DIR_LISTING_LIMIT))
        except OSError:
            return []
        files = []
        for name in names:
            if name.endswith(suffixes):
                candidate = _real(folder) / name
                if self.is_file(candidate):
                    files.append(candidate)
        return files

    def read(self, path: Path) -> SourceText | None:
        """The file's text (the open buffer's if it is open), or None when it may not or
        cannot be read: outside the roots, ignored, missing, binary or over the size cap."""
        found = self.allowed(path)
        if found is None:
            return None
        real, root = found
        language = language_of_path(real.name)
        buffer = self.buffers(real)
        if buffer is not None:
            version, text = buffer
            if Document.is_binary(text) or len(text) > self.max_file_bytes:
                return None
            return SourceText(real, root, text, language, ("buffer", version))
        try:
            st = real.stat()
        except OSError:
            return None
        if not real.is_file() or st.st_size > self.max_file_bytes:
            return None
        key = ("text", real, st.st_mtime_ns, st.st_size)
        cached = self._get(key)
        if cached is None:
            try:
                data = real.read_bytes()[: self.max_file_bytes + 1]
            except OSError:
                return None
            text = _decode(data, self.max_file_bytes)
            cached = self._put(key, text if text is not None else False)
        if cached is False:
            return None
        return SourceText(real, root, cached, language, ("disk", st.st_mtime_ns, st.st_size))

    # ------------------------------------------------------------------ parsed results

    def cached(self, source: SourceText, kind: str, compute: Callable[[SourceText], T]) -> T:
        """`compute(source)` once per version of the file (LRU-bounded); `kind` names what
        is computed, so several results of one file can be kept."""
        key = (kind, source.path, source.version)
        hit = self._get(key)
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

    def invalidate(self, path: Path) -> None:
        """A file was saved, created, changed or deleted outside the editor: forget what was
        read or parsed from it (and a .gitignore's rules)."""
        real = _real(path)
        with self._lock:
            for key in [k for k in self._cache if len(k) > 1 and k[1] == real]:
                del self._cache[key]
        if real.name == ".gitignore":
            self._ignores.forget(real.parent)
        self.generation += 1

    @property
    def cache_size(self) -> int:
        with self._lock:
            return len(self._cache)


def _decode(data: bytes, limit: int) -> str | None:
    """Text of a file's bytes, or None for a binary or oversized one."""
    if len(data) > limit or b"\x00" in data[:8192]:
        return None
    text = data.decode("utf-8", errors="replace")
    if Document.is_binary(text):
        return None
    return text.replace("\r\n", "\n").replace("\r", "\n")
