"""Per-file KV sequences on disk, so a reopened file or a restarted server is warm.

This module owns the on-disk format of an entry and the safety of the folder that holds them.
Storage and least-recently-used bookkeeping are diskcache's; what goes in and comes out is
ours. An entry is one bytes value per (model, file URI), a framed byte string that is parsed,
never unpickled, and trusted only when everything about it adds up:

    magic (8 bytes) | format version (u16) | header length (u32) | blake2b-256 (32 bytes)
    header: JSON {"model", "uri", "tokens", "state"}
    payload: the tokens (int32, little-endian) then llama.cpp's per-sequence state

The checksum covers the fixed fields, the header and the payload; the header names the model
identity (see `model_identity`) and the URI the entry was saved for, so an entry copied to
another model's or another file's key is a miss. `SafeDisk` stores only bytes under str keys
and refuses, without unpickling, any row that is not plain bytes (a planted pickle) or whose
value file is not a regular file of ours inside the folder. A miss caused by a bad entry
deletes it (an entry of a newer format version is a miss, left to the version that wrote
it). The folder is 0700, its files 0600; a folder owned by someone else, writable by
others, or not writable at all disables persistence (one message), never the model. A
database file that is not a sound diskcache database of ours is moved aside, never deleted.

A write that fails (a full disk) leaves nothing behind: the half-written value file is removed,
and so is a whole one whose row the database could not take. Value files no row names (a
process killed mid-write) are swept when the store opens. The first failure is logged and
kept as the store's `notice`, for the engine to tell the user once. A database that another
process holds locked costs one short wait, then is left alone for a while (every call a miss).
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import hmac
import json
import logging
import os
import re
import sqlite3
import stat
import struct
import threading
import time
from pathlib import Path
from typing import Any

import diskcache
import numpy as np
from diskcache.core import DBNAME, METADATA, MODE_BINARY, MODE_RAW, UNKNOWN

log = logging.getLogger(__name__)

FORMAT_VERSION = 1
_MAGIC = b"LSPCKV\0\0"
_FIXED = struct.Struct("<8sHI")  # magic, format version, header length
_DIGEST_SIZE = 32
_PREFIX_SIZE = _FIXED.size + _DIGEST_SIZE
_MAX_HEADER = 64 * 1024
# Another server's commit holds the database for milliseconds; one held longer (a process
# stopped mid-transaction, a sqlite shell) is waited for this long, on the engine's worker.
_TIMEOUT_S = 1.0
# After such a wait ran out, the store is left alone this long (every read and write a miss):
# else each file acquired paid the whole timeout again, several times a suggestion.
_BUSY_PAUSE_S = 60.0
# A value file no row names is swept at open once this old: younger, another process may be
# between writing it and inserting its row.
_ORPHAN_AGE_S = 600.0
# Every diskcache setting given explicitly, so none is taken from the database file (its
# sqlite_* settings are run as PRAGMA statements). cull_limit 0: `_trim` evicts instead.
_SETTINGS: dict[str, Any] = {
    **diskcache.DEFAULT_SETTINGS,
    "eviction_policy": "least-recently-used",
    "cull_limit": 0,
    "statistics": 0,
    "tag_index": 0,
    # No memory-mapped reads: a database file cut short under SQLite's mapping (truncated by
    # another process, a full disk's repair) raised SIGBUS and killed the server; read(2)
    # gets an error diskcache raises, which costs persistence only.
    "sqlite_mmap_size": 0,
}
_KNOWN_SETTINGS = frozenset(diskcache.DEFAULT_SETTINGS) | frozenset(METADATA)
_VALUE_NAME = re.compile(r"[0-9a-f]{2}/[0-9a-f]{2}/[0-9a-f]{28}\.val")  # Disk.filename()'s
# Opening never follows a link nor blocks on a FIFO; the checks below refuse anything else.
_READ_FLAGS = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
_WRITE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)


def model_identity(model_path: Path, model_id: str, **layout: object) -> str:
    """What an entry is bound to: the model (its sha256 or name), the exact file it was loaded
    from (path, size, mtime) and the settings that shape its KV state (`layout`)."""
    st = model_path.stat()
    parts = [model_id, str(model_path.resolve()), f"size={st.st_size}", f"mtime={st.st_mtime_ns}"]
    parts += [f"{key}={value}" for key, value in sorted(layout.items())]
    return "|".join(parts)


def entry_key(model_id: str, file_key: str) -> str:
    """The diskcache key of an entry: a digest, so the database does not list the URIs."""
    # surrogatepass: a URI with a lone surrogate (from a client's JSON) still has its own key.
    key = f"{model_id}\0{file_key}".encode("utf-8", "surrogatepass")
    return hashlib.blake2b(key, digest_size=20).hexdigest()


class UnsafeEntry(Exception):
    """A row that is not plain bytes of ours (a pickle, a link, a file elsewhere): a miss."""


class KVStore:
    """Entries in `directory`; at most `size_limit` bytes, least recently used evicted first.

    `unavailable` is None, or the one message saying why persistence is off (the folder cannot
    be used); then load and save do nothing. diskcache keeps one SQLite connection per thread:
    `close` closes the calling thread's (the engine's worker), and a later call reopens it.
    """

    def __init__(self, directory: str | Path, size_limit: int = 1 << 30) -> None:
        self.directory = Path(directory)
        self.size_limit = size_limit
        self._warned = False
        self._notice: str | None = None
        self._busy_until = 0.0  # time.monotonic() until which the database is left alone
        self._cache: diskcache.Cache | None = None
        self.unavailable = _prepare_folder(self.directory)
        if self.unavailable is None:
            self._cache, self.unavailable = _open_cache(self.directory, size_limit)
        if self._cache is not None:
            self._sweep_orphans()

    def save(self, model_id: str, file_key: str, tokens: list[int], state: bytes) -> bool:
        """Store an entry; whether that is settled (saved, or never to be: persistence off,
        too large, a failed write). False while the database is held locked by another
        process (`paused`): a later try may save it."""
        if self._cache is None or not tokens or not state:
            return True
        if self._paused():
            return False
        blob = encode_entry(model_id, file_key, tokens, state)
        if len(blob) > self.size_limit:
            return True
        key = entry_key(model_id, file_key)
        disk = self._cache.disk
        assert isinstance(disk, SafeDisk)
        disk.written.name = None
        try:
            self._cache.set(key, blob)
        except BaseException as exc:
            # The value file was written but its row never committed (the database full too,
            # busy, or an interrupt): nothing names it, so it would stay on disk forever.
            if disk.written.name is not None:
                disk.remove(disk.written.name)
            if not isinstance(exc, (OSError, sqlite3.Error, diskcache.Timeout)):
                raise
            # Disk full, folder gone read-only, database busy: persistence is an optimisation.
            self._failed("save a KV cache entry", exc)
            return not self._paused()
        finally:
            disk.written.name = None
        try:
            self._trim(keep=key)
        except (OSError, sqlite3.Error, diskcache.Timeout) as exc:
            self._failed("evict KV cache entries", exc)
        return True

    def load(self, model_id: str, file_key: str) -> tuple[list[int], bytes] | None:
        if self._cache is None or self._paused():
            return None
        key = entry_key(model_id, file_key)
        try:
            blob = self._cache.get(key)  # least-recently-used policy: marks the entry used
        except UnsafeEntry as exc:
            log.warning("discarding unsafe KV cache entry for %s: %s", file_key, exc)
            self._delete(key)
            return None
        except (OSError, sqlite3.Error, diskcache.Timeout) as exc:
            self._failed("read a KV cache entry", exc)
            return None
        if blob is None:
            return None
        if _newer_format(blob):
            # A newer version's, sharing this folder (a new daemon beside an old one that is
            # retiring): a miss here, but not ours to delete.
            return None
        parsed = decode_entry(blob, model_id, file_key)
        if parsed is None:
            log.warning("discarding corrupt or foreign KV cache entry for %s", file_key)
            self._delete(key)
        return parsed

    def holds(self, model_id: str, file_key: str) -> bool:
        """Whether an entry is saved for the file (not read, nor checked: `load` does that)."""
        if self._cache is None or self._paused():
            return False
        try:
            return entry_key(model_id, file_key) in self._cache
        except (OSError, sqlite3.Error, diskcache.Timeout) as exc:
            self._failed("read a KV cache entry", exc)
            return False

    def discard(self, model_id: str, file_key: str) -> None:
        self._delete(entry_key(model_id, file_key))

    def volume(self) -> int:
        """Bytes on disk: the database and the value files (diskcache's estimate)."""
        return 0 if self._cache is None else self._cache.volume()

    def close(self) -> None:
        """Close this thread's SQLite connection (each settings reload makes a new store)."""
        if self._cache is not None:
            with contextlib.suppress(sqlite3.Error):
                self._cache.close()

    def _delete(self, key: str) -> None:
        if self._cache is None or self._paused():
            return
        try:
            self._cache.delete(key)
        except (OSError, sqlite3.Error, diskcache.Timeout) as exc:
            self._failed("delete a KV cache entry", exc)

    def _trim(self, keep: str) -> None:
        """Evict least-recently-used rows until the store fits, never the entry just saved.

        diskcache's own culling removes a fixed number of rows per set, the new one included
        when there are few; this removes exactly as many as needed, by its access_time.
        """
        cache = self._cache
        assert cache is not None
        while cache.volume() > self.size_limit:
            with cache.transact():
                row = cache._sql(
                    "SELECT rowid, filename FROM Cache WHERE NOT (key = ? AND raw = 1)"
                    " ORDER BY access_time LIMIT 1",
                    (keep,),
                ).fetchone()
                if row is None:
                    return
                cache._sql("DELETE FROM Cache WHERE rowid = ?", (row[0],))
            if row[1] is not None:
                cache.disk.remove(row[1])

    def take_notice(self) -> str | None:
        """The first failure to read or write the store, once (None after, or if none): for
        the user, who should learn that the disk is full rather than why files start cold."""
        notice, self._notice = self._notice, None
        return notice

    @property
    def paused(self) -> bool:
        """Whether the store is being left alone (its database was held locked)."""
        return self._paused()

    def try_again(self) -> None:
        """End a pause now: the next call tries the database again, with the same short wait
        (a shutdown's last chance to save)."""
        self._busy_until = 0.0

    def _paused(self) -> bool:
        return time.monotonic() < self._busy_until

    def _failed(self, doing: str, exc: BaseException) -> None:
        """A read or write that failed: told once; a database another process holds locked
        is then left alone for `_BUSY_PAUSE_S`."""
        if _is_busy(exc):
            self._busy_until = time.monotonic() + _BUSY_PAUSE_S
            self._warn_once(f"could not {doing} in {self.directory}: its database is held "
                            f"locked by another process (tried again in {_BUSY_PAUSE_S:g} s)")
        else:
            self._warn_once(f"could not {doing} in {self.directory}: {exc!r}")

    def _warn_once(self, message: str) -> None:
        # Every keystroke could hit the same broken disk: one line in the log is enough.
        if not self._warned:
            self._warned = True
            log.warning("%s (further KV cache errors are not logged)", message)
            self._notice = (f"{message}; completions still work, files just start cold "
                            "after a restart")

    def _sweep_orphans(self) -> None:
        """Remove value files that no row names and that are old enough not to be another
        process's write in progress: what a killed write left, which counts against the disk
        but not against the size limit."""
        cache = self._cache
        assert cache is not None
        now = time.time()
        try:
            named = {row[0] for row in cache._sql(
                "SELECT filename FROM Cache WHERE filename IS NOT NULL").fetchall()}
            for path in self.directory.glob("??/??/*.val"):
                name = path.relative_to(self.directory).as_posix()
                if name in named or not _VALUE_NAME.fullmatch(name):
                    continue
                with contextlib.suppress(FileNotFoundError):
                    st = os.lstat(path)
                    if stat.S_ISREG(st.st_mode) and now - st.st_mtime > _ORPHAN_AGE_S:
                        cache.disk.remove(name)
        except (OSError, sqlite3.Error) as exc:
            log.warning("could not sweep orphan KV cache files in %s: %s", self.directory, exc)


class SafeDisk(diskcache.Disk):  # type: ignore[misc]  # diskcache has no stubs: Disk is Any
    """diskcache's serialisation, narrowed to bytes values under str keys and never unpickling.

    Values under `min_file_size` live in the database, larger ones in 0600 files under two
    0700 levels of folders. Every row read back is checked before anything is done with it.
    """

    max_bytes = 1 << 40  # a value file larger than this is refused unread (the store's limit)

    def __init__(self, directory: str, **settings: Any) -> None:
        super().__init__(directory, **settings)
        # The value file the calling thread's last `store` wrote, for `KVStore.save` to remove
        # when the row naming it is never committed (diskcache removes it only on a timeout).
        self.written = threading.local()

    def put(self, key: Any) -> tuple[Any, bool]:
        if type(key) is not str:
            raise TypeError(f"KV cache keys are str, not {type(key).__name__}")
        return key, True

    def get(self, key: Any, raw: bool) -> str:
        if not raw or type(key) is not str:
            raise UnsafeEntry("a key that is not a plain string")
        return key

    def store(self, value: Any, read: bool, key: Any = UNKNOWN) -> tuple[int, int, str | None, Any]:
        if read or type(value) is not bytes:
            raise TypeError(f"KV cache values are bytes, not {type(value).__name__}")
        if len(value) < self.min_file_size:
            return 0, MODE_RAW, None, sqlite3.Binary(value)
        filename, full_path = self.filename(key, value)
        _write_private(Path(full_path), value)
        self.written.name = filename
        return len(value), MODE_BINARY, filename, None

    def fetch(self, mode: int, filename: str | None, value: Any, read: bool) -> bytes:
        if read:
            raise UnsafeEntry("a value asked for as a file handle")
        if mode == MODE_RAW and type(value) is bytes:
            return value
        if mode != MODE_BINARY or value is not None:
            raise UnsafeEntry(f"a row stored in mode {mode!r}, not as plain bytes")
        path = self._value_path(filename)
        if path is None:
            raise UnsafeEntry(f"a value file outside the cache folder: {filename!r}")
        return _read_private(path, self.max_bytes)

    def remove(self, file_path: str) -> None:
        """Remove a value file and its empty folders; a name that is not one of ours (a row
        pointing elsewhere) is left alone, never deleted."""
        path = self._value_path(file_path)
        if path is None:
            return
        with contextlib.suppress(OSError):
            path.unlink()  # a link is removed itself, its target is not touched
        for folder in (path.parent, path.parent.parent):
            with contextlib.suppress(OSError):
                folder.rmdir()

    def _value_path(self, filename: object) -> Path | None:
        """The value file's path when `filename` is one `Disk.filename` makes, inside real
        (not linked) folders of the cache folder; else None."""
        if not isinstance(filename, str) or not _VALUE_NAME.fullmatch(filename):
            return None
        root = Path(self._directory)
        path = root / filename
        if os.path.realpath(path.parent) != os.path.join(os.path.realpath(root), filename[:5]):
            return None
        return path


# --------------------------------------------------------------------------- entry format


def encode_entry(model_id: str, file_key: str, tokens: list[int], state: bytes) -> bytes:
    header = json.dumps(
        {"model": model_id, "uri": file_key, "tokens": len(tokens), "state": len(state)},
        separators=(",", ":"),
    ).encode()
    fixed = _FIXED.pack(_MAGIC, FORMAT_VERSION, len(header))
    payload = np.asarray(tokens, dtype="<i4").tobytes() + state
    digest = hashlib.blake2b(fixed + header + payload, digest_size=_DIGEST_SIZE).digest()
    return fixed + digest + header + payload


def decode_entry(blob: bytes, model_id: str, file_key: str) -> tuple[list[int], bytes] | None:
    """(tokens, state) when `blob` is an intact entry saved for this model and file, else None."""
    if len(blob) < _PREFIX_SIZE:
        return None
    magic, version, header_len = _FIXED.unpack_from(blob)
    if magic != _MAGIC or version != FORMAT_VERSION or header_len > _MAX_HEADER:
        return None
    digest = blob[_FIXED.size : _PREFIX_SIZE]
    body = memoryview(blob)[_PREFIX_SIZE:]
    actual = hashlib.blake2b(blob[: _FIXED.size], digest_size=_DIGEST_SIZE)
    actual.update(body)
    if len(body) < header_len or not hmac.compare_digest(actual.digest(), digest):
        return None
    try:
        header = json.loads(bytes(body[:header_len]).decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return None
    if not isinstance(header, dict):
        return None
    if header.get("model") != model_id or header.get("uri") != file_key:
        return None  # another model's or another file's entry under this key
    count, state_len = _count(header.get("tokens")), _count(header.get("state"))
    if count is None or not state_len:
        return None
    payload = body[header_len:]
    if len(payload) != count * 4 + state_len:
        return None
    tokens = np.frombuffer(payload[: count * 4], dtype="<i4").tolist()
    return tokens, bytes(payload[count * 4 :])


def _newer_format(blob: bytes) -> bool:
    """Whether `blob` is framed as an entry of a format version after this one's. Any
    version keeps the magic and the version field first: that is how it is told apart."""
    if len(blob) < _FIXED.size:
        return False
    magic, version, _ = _FIXED.unpack_from(blob)
    return bool(magic == _MAGIC and version > FORMAT_VERSION)


def _is_busy(exc: BaseException) -> bool:
    """Whether `exc` says another connection holds the database (diskcache's own retries ran
    out, or SQLite's busy timeout did)."""
    if isinstance(exc, diskcache.Timeout):
        return True
    text = str(exc)
    return isinstance(exc, sqlite3.OperationalError) and ("locked" in text or "busy" in text)


def _count(value: object) -> int | None:
    """`value` if it is a count (an int, not a bool, not negative), else None."""
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    return None


# --------------------------------------------------------------------------- folder and database

_OFF = "KV cache persistence is off: {}"
_AFTER = "completions still work, files just start cold after a restart"


def _prepare_folder(directory: Path) -> str | None:
    """Create the folder (0700) or check the existing one; the reason it cannot be used, else
    None. Nothing here deletes anything: a folder we cannot use is left as it is."""
    off, after = _OFF.format(directory), _AFTER
    try:
        directory.parent.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(FileExistsError):
            os.mkdir(directory, 0o700)
        st = os.stat(directory)
    except OSError as exc:
        if exc.errno in (errno.EEXIST, errno.ENOTDIR):  # "File exists" said nothing useful
            return f"{off} cannot be created: a part of its path is a file, not a folder; {after}"
        return f"{off} cannot be created ({exc.strerror or exc}); {after}"
    if not stat.S_ISDIR(st.st_mode):
        return f"{off} is not a folder; {after}"
    uid = os.geteuid() if hasattr(os, "geteuid") else None
    if uid is not None and st.st_uid != uid:
        return (f"{off} belongs to another user (uid {st.st_uid}), so its entries cannot be "
                f"trusted; {after}. Remove it or point LSP_COMPLETE_CACHE_DIR elsewhere")
    if uid is not None and st.st_mode & 0o022:
        return (f"{off} is writable by other users (mode {stat.S_IMODE(st.st_mode):o}), so its "
                f"entries cannot be trusted; {after}. Run `chmod 700 {directory}` to use it")
    if uid is not None and st.st_mode & 0o077:
        with contextlib.suppress(OSError):
            os.chmod(directory, 0o700)  # ours, created readable by an older version: tighten
    if not os.access(directory, os.W_OK | os.X_OK):
        return f"{off} is not writable; {after}"
    return None


def _open_cache(directory: Path, size_limit: int) -> tuple[diskcache.Cache | None, str | None]:
    """(the cache, None), or (None, why persistence is off). A database that is damaged or not
    diskcache's is moved aside and a new one started; nothing is deleted."""
    off, after = _OFF.format(directory), _AFTER
    db = directory / DBNAME
    problem = _check_database(db)
    if problem is not None and not _move_aside(db, problem):
        return None, f"{off} its database {problem} and cannot be moved aside; {after}"
    try:
        return _connect(directory, size_limit), None
    except (sqlite3.Error, OSError, diskcache.Timeout) as exc:  # locked, I/O error, full disk
        return None, f"{off} its database cannot be opened ({exc!r}); {after}"


def _connect(directory: Path, size_limit: int) -> diskcache.Cache:
    # Created 0600 before SQLite sees it: SQLite gives -wal and -shm the database file's mode.
    with contextlib.suppress(FileExistsError):
        os.close(os.open(directory / DBNAME, _WRITE_FLAGS, 0o600))
    cache = diskcache.Cache(
        str(directory), timeout=_TIMEOUT_S, disk=SafeDisk, **{**_SETTINGS, "size_limit": size_limit}
    )
    cache.disk.max_bytes = size_limit
    for suffix in ("", "-wal", "-shm"):  # an older version's files were 0644
        _tighten(directory / (DBNAME + suffix))
    return cache


def _check_database(db: Path) -> str | None:
    """Why `db` is not a sound diskcache database of ours (to move aside), or None (also when
    there is none yet, or when another process holds it: then it is not the file's fault)."""
    try:
        st = os.lstat(db)
    except FileNotFoundError:
        return None
    except OSError as exc:
        return f"cannot be examined ({exc.strerror or exc})"
    if not stat.S_ISREG(st.st_mode):
        return "is not a regular file"
    if hasattr(os, "geteuid") and st.st_uid != os.geteuid():
        return "belongs to another user"
    try:
        with contextlib.closing(sqlite3.connect(db, timeout=_TIMEOUT_S)) as con:
            if con.execute("PRAGMA quick_check").fetchall() != [("ok",)]:
                return "is damaged"
            try:
                settings = dict(con.execute("SELECT key, value FROM Settings").fetchall())
            except sqlite3.OperationalError:
                settings = {}  # no Settings table yet: diskcache creates it
    except sqlite3.OperationalError as exc:
        if "locked" in str(exc) or "busy" in str(exc):
            return None
        return f"cannot be read ({exc})"
    except sqlite3.DatabaseError as exc:
        return f"is not a database ({exc})"
    # Its sqlite_* settings would be run as PRAGMA statements: only diskcache's own names, and
    # the counters it does arithmetic with must be numbers.
    if set(settings) - _KNOWN_SETTINGS:
        return "has settings diskcache does not write"
    if not all(type(settings.get(key, 0)) is int for key in METADATA):
        return "has settings diskcache does not write"
    return None


def _move_aside(db: Path, problem: str) -> bool:
    """Rename the database (and its -wal, -shm) to cache.db.corrupt-<time>; True when done."""
    aside = db.with_name(f"{db.name}.corrupt-{time.strftime('%Y%m%dT%H%M%S')}-{os.getpid()}")
    try:
        for suffix in ("", "-wal", "-shm"):
            with contextlib.suppress(FileNotFoundError):
                os.rename(f"{db}{suffix}", f"{aside}{suffix}")
    except OSError as exc:
        log.warning("KV cache database %s %s and cannot be moved aside: %s", db, problem, exc)
        return False
    log.warning("KV cache database %s %s: moved aside to %s; starting an empty one",
                db, problem, aside.name)
    return True


# --------------------------------------------------------------------------- value files


def _write_private(path: Path, blob: bytes) -> None:
    """Write a new 0600 value file; on any error (a full disk, an interrupt) remove what was
    made: diskcache calls `store` before its transaction, so no row names the file and
    nothing else would ever remove it."""
    try:
        fd = _create_private(path)
    except BaseException:
        _remove_empty_folders(path)  # made for it; a file that was there is not ours
        raise
    try:
        try:
            if hasattr(os, "fchmod"):
                os.fchmod(fd, 0o600)  # the umask can only remove bits; be explicit anyway
            view = memoryview(blob)
            while view:
                view = view[os.write(fd, view) :]
        finally:
            os.close(fd)  # on a full disk close may fail too (NFS): still remove the file
    except BaseException:
        with contextlib.suppress(OSError):
            path.unlink()
        _remove_empty_folders(path)
        raise


def _create_private(path: Path) -> int:
    for attempt in range(3):
        for folder in (path.parent.parent, path.parent):
            with contextlib.suppress(FileExistsError):
                os.mkdir(folder, 0o700)
        try:
            return os.open(path, _WRITE_FLAGS, 0o600)
        except FileNotFoundError:  # another process removed the emptied folder meanwhile
            if attempt == 2:
                raise
    raise AssertionError("unreachable")


def _remove_empty_folders(path: Path) -> None:
    for folder in (path.parent, path.parent.parent):
        with contextlib.suppress(OSError):
            folder.rmdir()  # only when empty: another entry's folder stays


def _read_private(path: Path, limit: int) -> bytes:
    """The value file's bytes. UnsafeEntry when it is not a regular file of ours within the
    size limit; FileNotFoundError (a miss to diskcache) when it is gone."""
    try:
        fd = os.open(path, _READ_FLAGS)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise UnsafeEntry("a symbolic link in place of a value file") from None
        raise
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size > limit:
            raise UnsafeEntry("a value file that is not a regular file within the size limit")
        if hasattr(os, "geteuid") and st.st_uid != os.geteuid():
            raise UnsafeEntry("a value file that belongs to another user")
        chunks: list[bytes] = []
        left = st.st_size
        while left > 0 and (chunk := os.read(fd, min(left, 1 << 20))):
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def _tighten(path: Path) -> None:
    """chmod 0600 a file of ours, without following a link."""
    try:
        fd = os.open(path, _READ_FLAGS)
    except OSError:
        return
    try:
        if stat.S_ISREG(os.fstat(fd).st_mode) and hasattr(os, "fchmod"):
            os.fchmod(fd, 0o600)
    except OSError:
        pass
    finally:
        os.close(fd)
