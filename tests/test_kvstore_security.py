"""The KV store on disk (issue 14, defects 3 and 4): nothing read from disk runs or is trusted.

Entries are stored by diskcache but never go through pickle, are bound to the model identity and
the file URI inside their checksum, live in a 0700 folder as 0600 files, and a folder that cannot
be used turns persistence off (one message) without deleting anything.
"""

from __future__ import annotations

import contextlib
import errno
import os
import pickle
import sqlite3
import stat
import subprocess
import sys
import time
from pathlib import Path

import diskcache
import pytest

from lsp_complete.engine import kvstore
from lsp_complete.engine.kvstore import KVStore, decode_entry, encode_entry, entry_key

URI = "file:///work/a.py"
TOKENS = [1, 2, 3, 500]
STATE = b"llama.cpp sequence state" * 4
BIG_STATE = bytes(range(256)) * 256  # 64 KiB: over diskcache's 32 KiB, stored in a value file
ROOT = hasattr(os, "geteuid") and os.geteuid() == 0


class _Planted:
    """Unpickling this creates a folder: proof that data from disk ran as code."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (os.mkdir, (str(self.marker),))


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def _key(model_id: str, uri: str = URI) -> str:
    return entry_key(model_id, uri)


def _value_files(folder: Path) -> list[Path]:
    return sorted(folder.rglob("*.val"))


def _db_handles(folder: Path) -> int:
    """This process's open files inside `folder` (the SQLite database and its -wal, -shm)."""
    fds = Path("/proc/self/fd")
    if not fds.is_dir():
        pytest.skip("needs /proc")
    inside = str(folder.resolve()) + os.sep
    count = 0
    for fd in fds.iterdir():
        with contextlib.suppress(OSError):
            count += os.readlink(fd).startswith(inside)
    return count


@pytest.fixture
def no_unpickling(monkeypatch: pytest.MonkeyPatch):
    """Every way of unpickling fails the test (diskcache calls pickle.load at call time)."""

    def refuse(*_args, **_kwargs):
        raise AssertionError("something was unpickled")

    for name in ("load", "loads", "Unpickler"):
        monkeypatch.setattr(pickle, name, refuse)


# --------------------------------------------------------------------------- no code from disk


def _plant_pickles(directory: Path, marker: Path, key: str) -> None:
    """What the old diskcache-based store would have run: pickle-mode rows, with plain
    diskcache, under the store's own key: one in the database, one in a value file."""
    with diskcache.Cache(str(directory)) as planted:
        planted.set(key, _Planted(marker))
    with diskcache.Cache(str(directory), disk_min_file_size=0) as planted:
        planted.set(key + "-file", _Planted(marker))
        planted.set(("a", "pickled", "key"), b"bytes under a pickled key")


def test_a_planted_pickle_entry_never_runs(tmp_path: Path, no_unpickling) -> None:
    marker = tmp_path / "pwned"
    directory = tmp_path / "kv"
    key = _key("model")
    _plant_pickles(directory, marker, key)
    store = KVStore(directory)
    assert store.unavailable is None
    assert store.load("model", URI) is None
    assert key not in store._cache, "a refused row is deleted"
    # The same in a value file, and a pickle stored as bytes where the entry belongs.
    with diskcache.Cache(str(directory), disk_min_file_size=0) as planted:
        planted.set(key, _Planted(marker))
    files = _value_files(directory)
    assert store.load("model", URI) is None
    assert key not in store._cache and len(_value_files(directory)) == len(files) - 1
    store._cache.set(key, pickle.dumps(_Planted(marker)))
    assert store.load("model", URI) is None
    assert key not in store._cache
    assert not marker.exists(), "data from the cache folder ran as code"


def test_no_load_path_unpickles(tmp_path: Path, no_unpickling) -> None:
    """Every diskcache path that reads a row goes through SafeDisk, which refuses pickles."""
    marker = tmp_path / "pwned"
    directory = tmp_path / "kv"
    store = KVStore(directory)
    store.save("model", URI, TOKENS, STATE)
    store.save("model", "file:///big.py", TOKENS, BIG_STATE)
    assert store.load("model", URI) == (TOKENS, STATE)
    assert store.load("model", "file:///big.py") == (TOKENS, BIG_STATE)
    _plant_pickles(directory, marker, _key("other"))
    cache = store._cache
    for key in (_key("other"), _key("other") + "-file"):
        with pytest.raises(kvstore.UnsafeEntry):
            cache.get(key)
        with pytest.raises(kvstore.UnsafeEntry):
            cache.read(key)
        with pytest.raises(kvstore.UnsafeEntry):  # last: pop deletes the row before reading it
            cache.pop(key)
    with pytest.raises(kvstore.UnsafeEntry):  # iterating decodes keys: a pickled one is refused
        list(cache)
    with pytest.raises(TypeError):  # and nothing but bytes under a str key is ever stored
        cache.set(_key("x"), {"a": "dict"})
    with pytest.raises(TypeError):
        cache.set(("a", "tuple"), b"bytes")
    store.save("model", URI, TOKENS, STATE)  # the store still works around the planted rows
    assert store.load("model", URI) == (TOKENS, STATE)
    assert not marker.exists()


# --------------------------------------------------------------------------- binding


def test_an_entry_round_trips(tmp_path: Path) -> None:
    store = KVStore(tmp_path / "kv")
    store.save("model-a", URI, TOKENS, STATE)
    assert store.load("model-a", URI) == (TOKENS, STATE)


def test_an_entry_swapped_to_another_model_is_not_restored(tmp_path: Path) -> None:
    store = KVStore(tmp_path / "kv")
    store.save("model-a", URI, TOKENS, STATE)
    store._cache.set(_key("model-b"), store._cache.get(_key("model-a")))
    assert store.load("model-b", URI) is None
    assert _key("model-b") not in store._cache
    assert store.load("model-a", URI) == (TOKENS, STATE)  # the genuine entry is untouched


def test_an_entry_of_one_file_is_not_restored_for_another(tmp_path: Path) -> None:
    store = KVStore(tmp_path / "kv")
    store.save("model-a", URI, TOKENS, STATE)
    other = "file:///work/b.py"
    store._cache.set(_key("model-a", other), store._cache.get(_key("model-a")))
    assert store.load("model-a", other) is None
    assert store.load("model-a", URI) == (TOKENS, STATE)


def _as_version(blob: bytes, version: int) -> bytes:
    """`blob` framed as an entry of another format version (its checksum then fails here,
    as any other format's would)."""
    return blob[:8] + version.to_bytes(2, "little") + blob[10:]


def test_an_entry_of_a_newer_format_is_a_miss_left_in_place(tmp_path: Path) -> None:
    """Round 7: an entry of another format version was deleted when read, so two versions
    sharing one cache (an old daemon retiring beside a new one) deleted each other's entries.
    An older format's entry is stale and still goes; a newer one's is left to its version."""
    store = KVStore(tmp_path / "kv")
    store.save("model-a", URI, TOKENS, STATE)
    blob = store._cache.get(_key("model-a"))
    newer = _as_version(blob, kvstore.FORMAT_VERSION + 1)
    store._cache.set(_key("model-a"), newer)
    assert store.load("model-a", URI) is None
    assert store._cache.get(_key("model-a")) == newer  # still there, unchanged
    store._cache.set(_key("model-a"), _as_version(blob, kvstore.FORMAT_VERSION - 1))
    assert store.load("model-a", URI) is None
    assert _key("model-a") not in store._cache  # stale: deleted
    store.close()


def test_every_single_byte_change_is_detected() -> None:
    blob = encode_entry("model-a", URI, TOKENS, STATE)
    assert decode_entry(blob, "model-a", URI) == (TOKENS, STATE)
    for i in range(len(blob)):
        damaged = bytearray(blob)
        damaged[i] ^= 0x01
        assert decode_entry(bytes(damaged), "model-a", URI) is None, i
    assert decode_entry(blob[:-1], "model-a", URI) is None
    assert decode_entry(blob + b"\0", "model-a", URI) is None


def test_the_engine_binds_entries_to_the_model_file_and_kv_layout(tmp_path: Path) -> None:
    from lsp_complete.testing import write_tiny_gguf

    model = write_tiny_gguf(tmp_path / "tiny.gguf")
    same_shape = write_tiny_gguf(tmp_path / "other.gguf", seed=1)
    base = kvstore.model_identity(model, "tiny", n_ctx=2048, n_seq=8)
    assert kvstore.model_identity(same_shape, "tiny", n_ctx=2048, n_seq=8) != base
    assert kvstore.model_identity(model, "tiny", n_ctx=1024, n_seq=8) != base
    assert kvstore.model_identity(model, "tiny", n_ctx=2048, n_seq=4) != base
    os.utime(model, ns=(1, 1))  # the file changed since: its entries are stale
    assert kvstore.model_identity(model, "tiny", n_ctx=2048, n_seq=8) != base


# --------------------------------------------------------------------------- permissions


def test_folder_is_0700_and_entries_0600_whatever_the_umask(tmp_path: Path) -> None:
    previous = os.umask(0)
    try:
        store = KVStore(tmp_path / "kv")
        store.save("model-a", URI, TOKENS, STATE)
        store.save("model-a", "file:///big.py", TOKENS, BIG_STATE)
    finally:
        os.umask(previous)
    assert store.unavailable is None
    inside = list((tmp_path / "kv").rglob("*"))
    files = [p for p in inside if p.is_file()]
    assert {p.name for p in files} >= {"cache.db", "cache.db-wal", "cache.db-shm"}
    assert len(_value_files(tmp_path / "kv")) == 1
    assert {_mode(p) for p in files} == {0o600}, [(p.name, oct(_mode(p))) for p in files]
    assert {_mode(p) for p in [tmp_path / "kv", *inside] if p.is_dir()} == {0o700}


def test_an_older_versions_database_files_are_tightened(tmp_path: Path) -> None:
    folder = tmp_path / "kv"
    diskcache.Cache(str(folder)).close()  # what the diskcache-based store left: 0755, 0644
    os.chmod(folder / "cache.db", 0o644)
    store = KVStore(folder)
    assert store.unavailable is None
    assert _mode(folder) == 0o700 and _mode(folder / "cache.db") == 0o600


def test_an_own_folder_readable_by_others_is_tightened(tmp_path: Path) -> None:
    (tmp_path / "kv").mkdir(mode=0o755)
    os.chmod(tmp_path / "kv", 0o755)
    store = KVStore(tmp_path / "kv")
    assert store.unavailable is None
    assert _mode(tmp_path / "kv") == 0o700


def _foreign(folder: Path) -> None:
    os.chown(folder, 65534, 65534)


def _writable_by_others(folder: Path) -> None:
    os.chmod(folder, 0o777)


def _read_only(folder: Path) -> None:
    os.chmod(folder, 0o500)


@pytest.mark.parametrize(
    ("spoil", "reason"),
    [
        pytest.param(_foreign, "belongs to another user", id="owned-by-another-user",
                     marks=pytest.mark.skipif(not ROOT, reason="chown needs root")),
        pytest.param(_writable_by_others, "writable by other users", id="world-writable"),
        pytest.param(_read_only, "not writable", id="read-only",
                     marks=pytest.mark.skipif(ROOT, reason="root writes to read-only folders")),
    ],
)
def test_an_unusable_folder_turns_persistence_off_and_keeps_its_files(
    tmp_path: Path, spoil, reason: str
) -> None:
    folder = tmp_path / "kv"
    KVStore(folder).save("model-a", URI, TOKENS, STATE)
    before = sorted(p.name for p in folder.iterdir())
    spoil(folder)
    try:
        store = KVStore(folder)
        assert store.unavailable is not None and reason in store.unavailable
        assert "completions still work" in store.unavailable
        assert store.load("model-a", URI) is None  # a planted entry is never read
        store.save("model-b", URI, TOKENS, STATE)
        assert sorted(p.name for p in folder.iterdir()) == before
    finally:
        os.chmod(folder, 0o700)


def test_a_folder_that_cannot_be_created_turns_persistence_off(tmp_path: Path) -> None:
    (tmp_path / "cache").write_text("a file where the cache folder should be")
    store = KVStore(tmp_path / "cache" / "kv")
    assert store.unavailable is not None and "cannot be created" in store.unavailable
    store.save("model-a", URI, TOKENS, STATE)
    assert store.load("model-a", URI) is None


def test_a_cache_folder_that_is_a_file_is_said_so(tmp_path: Path) -> None:
    """Round 6: LSP_COMPLETE_CACHE_DIR naming a file was told as "kv cannot be created (File
    exists)"; one level deeper, "(Not a directory)"."""
    (tmp_path / "cache").write_text("a file where the cache folder should be")
    for folder in (tmp_path / "cache" / "kv", tmp_path / "cache" / "below" / "kv"):
        store = KVStore(folder)
        assert store.unavailable is not None
        assert "a part of its path is a file, not a folder" in store.unavailable


def test_an_error_opening_the_store_never_deletes_the_folder(tmp_path: Path) -> None:
    folder = tmp_path / "kv"
    folder.mkdir(mode=0o700)
    garbage = b"not an sqlite database at all" * 100
    (folder / "cache.db").write_bytes(garbage)
    (folder / "keep.txt").write_text("the user's")
    store = KVStore(folder)
    assert store.unavailable is None
    assert (folder / "keep.txt").read_text() == "the user's"
    aside = list(folder.glob("cache.db.corrupt-*"))
    assert [p.read_bytes() for p in aside] == [garbage], "moved aside, not deleted"
    assert (folder / "cache.db").exists()
    store.save("model-a", URI, TOKENS, STATE)  # and the store still works
    assert store.load("model-a", URI) == (TOKENS, STATE)


def test_a_database_with_foreign_settings_is_moved_aside(tmp_path: Path) -> None:
    """diskcache runs its sqlite_* settings as PRAGMA statements: only its own are accepted."""
    folder = tmp_path / "kv"
    first = KVStore(folder)
    first.save("model-a", URI, TOKENS, STATE)
    first.close()
    with sqlite3.connect(folder / "cache.db") as con:
        con.execute("INSERT INTO Settings VALUES ('sqlite_writable_schema', 1)")
    con.close()
    store = KVStore(folder)
    assert store.unavailable is None
    assert len(list(folder.glob("cache.db.corrupt-*"))) == 1
    assert store.load("model-a", URI) is None  # a fresh database: the old entry is not read


def test_a_link_or_foreign_file_in_place_of_an_entry_is_not_followed(tmp_path: Path) -> None:
    store = KVStore(tmp_path / "kv")
    elsewhere = tmp_path / "elsewhere.kv"
    elsewhere.write_bytes(encode_entry("model-a", URI, TOKENS, BIG_STATE))
    store.save("model-a", URI, TOKENS, BIG_STATE)
    [value] = _value_files(tmp_path / "kv")
    value.unlink()
    value.symlink_to(elsewhere)
    assert store.load("model-a", URI) is None
    assert not value.is_symlink() and _key("model-a") not in store._cache
    assert elsewhere.exists()
    if ROOT:
        store.save("model-a", URI, TOKENS, BIG_STATE)
        [value] = _value_files(tmp_path / "kv")
        os.chown(value, 65534, 65534)
        assert store.load("model-a", URI) is None


@pytest.mark.parametrize("where", ["absolute", "dot-dot", "linked-folder"])
def test_a_row_naming_a_file_outside_the_folder_neither_reads_nor_deletes_it(
    tmp_path: Path, where: str
) -> None:
    """diskcache deletes a row's file on eviction or delete: a planted name must not reach
    the user's files."""
    folder = tmp_path / "kv"
    store = KVStore(folder)
    victim = tmp_path / "victim" / "aa" / "bb" / ("c" * 28 + ".val")
    victim.parent.mkdir(parents=True)
    victim.write_bytes(encode_entry("model-a", URI, TOKENS, BIG_STATE))
    name = {"absolute": str(victim), "dot-dot": os.path.relpath(victim, folder),
            "linked-folder": "aa/bb/" + victim.name}[where]
    if where == "linked-folder":
        (folder / "aa").symlink_to(victim.parent.parent, target_is_directory=True)
    store.save("model-a", URI, TOKENS, BIG_STATE)
    store._cache._sql("UPDATE Cache SET filename = ? WHERE key = ?", (name, _key("model-a")))
    assert store.load("model-a", URI) is None
    assert _key("model-a") not in store._cache
    assert victim.exists(), "a file outside the cache folder was deleted"


# --------------------------------------------------------------------------- size limit


def test_the_least_recently_used_entries_go_first_over_the_size_limit(tmp_path: Path) -> None:
    size = len(encode_entry("m", "file:///0.py", TOKENS, BIG_STATE))
    limit = 2 * size + size // 2  # the database's own pages (tens of KiB) fit in the half
    store = KVStore(tmp_path / "kv", size_limit=limit)
    for i in range(2):
        store.save("m", f"file:///{i}.py", TOKENS, BIG_STATE)
        store._cache._sql(  # used in this order, whatever the clock's resolution
            "UPDATE Cache SET access_time = ? WHERE key = ?", (i + 1, _key("m", f"file:///{i}.py"))
        )
    assert store.load("m", "file:///0.py") is not None  # used: now the most recent
    store.save("m", "file:///2.py", TOKENS, BIG_STATE)
    assert store.load("m", "file:///1.py") is None
    assert store.load("m", "file:///0.py") is not None
    assert store.load("m", "file:///2.py") is not None
    assert len(_value_files(tmp_path / "kv")) == 2
    assert 2 * size < store.volume() <= limit


def test_close_releases_the_database_and_a_later_call_reopens_it(tmp_path: Path) -> None:
    """Issue 14, defect 10: each settings reload made a store and leaked its SQLite handle."""
    folder = tmp_path / "kv"
    for _ in range(5):
        store = KVStore(folder)
        store.save("model-a", URI, TOKENS, STATE)
        assert _db_handles(folder) > 0
        store.close()
        assert _db_handles(folder) == 0
    assert store.load("model-a", URI) == (TOKENS, STATE)
    store.close()
    assert _db_handles(folder) == 0


# --------------------------------------------------------------------------- in the engine


def test_the_engine_does_not_restore_another_model_files_entry(tmp_path: Path) -> None:
    """Two same-shape models under the same name: the second must not get the first's KV."""
    from lsp_complete.engine.base import CancelToken, GenerationRequest
    from lsp_complete.engine.llama import LlamaEngine
    from lsp_complete.testing import write_tiny_gguf

    def complete(path: Path, store: KVStore) -> LlamaEngine:
        engine = LlamaEngine(path, n_ctx=1024, n_threads=1, kv_store=store, model_id="tiny")
        prompt = engine.tokenize("def helper(value):\n    return value * 2\n" * 8)
        engine.complete(GenerationRequest(key=URI, segments=[prompt], max_tokens=2),
                        CancelToken())
        return engine

    store = KVStore(tmp_path / "kv")
    first = complete(write_tiny_gguf(tmp_path / "tiny.gguf"), store)
    assert first.persist() == 1
    first.close()
    second = complete(write_tiny_gguf(tmp_path / "other.gguf", seed=1), store)
    try:
        assert second.counters.restored_from_disk == 0
    finally:
        second.close()
    again = complete(tmp_path / "tiny.gguf", store)  # the genuine owner still gets it back
    try:
        assert again.counters.restored_from_disk == 1
    finally:
        again.close()
    assert _db_handles(tmp_path / "kv") == 0, "closing the engine closes its store"


# --------------------------------------------------------------------------- a full disk


def _disk_fills_after(monkeypatch: pytest.MonkeyPatch, room: int) -> list[int]:
    """Value files take `room` more bytes, then every write fails with ENOSPC (after writing
    what fits: a real full disk leaves a half-written file). Returns the failure count."""
    real_write = os.write
    left = [room]
    failures = [0]

    def write(fd: int, data) -> int:
        try:
            is_value = os.readlink(f"/proc/self/fd/{fd}").endswith(".val")
        except OSError:
            is_value = False
        if not is_value:
            return real_write(fd, data)
        if left[0] <= 0:
            failures[0] += 1
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        written = real_write(fd, bytes(memoryview(data)[: min(len(data), left[0], 4096)]))
        left[0] -= written
        return written

    if not Path("/proc/self/fd").is_dir():
        pytest.skip("needs /proc")
    monkeypatch.setattr(os, "write", write)
    return failures


def _bytes_on_disk(folder: Path) -> int:
    return sum(path.stat().st_size for path in folder.rglob("*") if path.is_file())


def test_a_full_disk_leaves_no_orphan_files_and_the_limit_holds(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Issue 32, defect 1: ENOSPC mid-write left the half-written value file behind, named by
    no row, so it counted against the disk but not the size limit (1.6 MB of orphans)."""
    size = len(encode_entry("m", "file:///0.py", TOKENS, BIG_STATE))
    limit = 4 * size
    folder = tmp_path / "kv"
    store = KVStore(folder, size_limit=limit)
    store.save("m", "file:///0.py", TOKENS, BIG_STATE)
    failures = _disk_fills_after(monkeypatch, room=size + size // 2)
    for i in range(1, 8):  # the second fits, the third is cut off halfway, the rest fail
        store.save("m", f"file:///{i}.py", TOKENS, BIG_STATE)
    monkeypatch.undo()
    assert failures[0] >= 6
    assert len(_value_files(folder)) == 2, "a failed write left its value file behind"
    assert store.load("m", "file:///0.py") == (TOKENS, BIG_STATE)
    assert store.load("m", "file:///1.py") == (TOKENS, BIG_STATE)
    assert _bytes_on_disk(folder) <= limit + 256 * 1024  # the database's own pages aside
    assert store.volume() <= limit
    assert not [p for p in folder.rglob("*") if p.is_dir() and not any(p.iterdir())], \
        "a failed write left empty folders"
    # Said once: one log line, one notice for the user, whatever the number of failures.
    logged = [r for r in caplog.records if "could not save" in r.getMessage()]
    assert len(logged) == 1
    notice = store.take_notice()
    assert notice is not None and "No space" in notice
    assert store.take_notice() is None
    store.close()


def test_a_row_the_database_cannot_take_leaves_no_value_file(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """diskcache writes the value file before its transaction and removes it only on a
    timeout: a database that is full too left a whole file no row names."""
    store = KVStore(tmp_path / "kv")

    def full(*_args, **_kwargs):
        raise sqlite3.OperationalError("database or disk is full")

    monkeypatch.setattr(diskcache.Cache, "_row_insert", full)
    store.save("m", URI, TOKENS, BIG_STATE)
    monkeypatch.undo()
    assert _value_files(tmp_path / "kv") == []
    assert store.load("m", URI) is None
    assert "database or disk is full" in (store.take_notice() or "")
    store.save("m", URI, TOKENS, BIG_STATE)  # the disk has room again: saved as usual
    assert store.load("m", URI) == (TOKENS, BIG_STATE)
    store.close()


def test_orphan_value_files_left_by_a_killed_write_are_swept_at_open(tmp_path: Path) -> None:
    folder = tmp_path / "kv"
    store = KVStore(folder)
    store.save("m", URI, TOKENS, BIG_STATE)
    store.close()
    (kept,) = _value_files(folder)
    old = folder / "ab" / "cd" / ("0" * 28 + ".val")
    young = folder / "ab" / "ef" / ("1" * 28 + ".val")
    for orphan in (old, young):
        orphan.parent.mkdir(parents=True, exist_ok=True)
        orphan.write_bytes(b"half an entry")
    os.utime(old, (1, 1))  # long before any write in progress
    os.utime(kept, (1, 1))
    store = KVStore(folder)
    assert not old.exists() and not old.parent.exists()
    assert young.exists(), "another process's write in progress is left alone"
    assert store.load("m", URI) == (TOKENS, BIG_STATE)
    store.close()


def test_the_engine_tells_a_full_disk_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                           ) -> None:
    """`persist` saves what it can and raises PersistenceError once, for the server to show
    (a warning, once); later saves on the same full disk are quiet."""
    from lsp_complete.engine.base import CancelToken, GenerationRequest, PersistenceError
    from lsp_complete.engine.llama import LlamaEngine
    from lsp_complete.testing import write_tiny_gguf

    store = KVStore(tmp_path / "kv")
    store._cache.disk.min_file_size = 0  # every entry in a value file
    engine = LlamaEngine(write_tiny_gguf(tmp_path / "tiny.gguf"), n_ctx=1024, n_threads=1,
                         kv_store=store, model_id="tiny")
    try:
        prompt = engine.tokenize("def helper(value):\n    return value * 2\n" * 8)
        _disk_fills_after(monkeypatch, room=0)
        raised = 0
        for i in range(3):
            engine.complete(GenerationRequest(key=f"file:///{i}.py", segments=[prompt],
                                              max_tokens=2), CancelToken())
            try:
                engine.persist()
            except PersistenceError as exc:
                raised += 1
                assert "No space" in str(exc)
        monkeypatch.undo()
        assert raised == 1
        assert _value_files(tmp_path / "kv") == []
    finally:
        engine.close()


def test_a_database_another_process_holds_locked_costs_one_short_wait(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Round 6: with cache.db held locked by another process (one stopped mid-transaction, a
    sqlite shell), every read and write on the engine's worker waited out the 5 s timeout:
    each new file's suggestion took 5-20 s. Now one short wait, then the store is left alone
    for a while (misses, told once), and used again after."""
    monkeypatch.setattr(kvstore, "_BUSY_PAUSE_S", 3.0, raising=False)
    folder = tmp_path / "kv"
    store = KVStore(folder)
    store.save("m", URI, TOKENS, STATE)
    holder = sqlite3.connect(folder / "cache.db", isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        started = time.monotonic()
        for i in range(4):
            assert store.load("m", f"file:///{i}.py") is None
            store.save("m", f"file:///{i}.py", TOKENS, STATE)
        assert store.load("m", URI) is None
        assert time.monotonic() - started < 2.5
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    notice = store.take_notice()
    assert notice is not None and "locked by another process" in notice
    time.sleep(3.1)
    assert store.load("m", URI) == (TOKENS, STATE)  # the pause over, the entry is there
    store.close()


def _held_locked(folder: Path) -> sqlite3.Connection:
    holder = sqlite3.connect(folder / "cache.db", isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    return holder


def test_shutdown_tries_a_paused_store_once_more_and_says_what_it_could_not_save(
        tmp_path: Path) -> None:
    """Round 7: while the store was paused (its database held locked by another process),
    saves were skipped, those at shutdown too, with nothing said; and a skipped save marked
    the file saved. Shutdown (`persist` of every file) now tries once more with the short
    wait: saved if the lock is gone, else said, promptly, and kept for a later try."""
    from lsp_complete.engine.base import CancelToken, GenerationRequest, PersistenceError
    from lsp_complete.engine.llama import LlamaEngine
    from lsp_complete.testing import write_tiny_gguf

    folder = tmp_path / "kv"
    store = KVStore(folder)
    engine = LlamaEngine(write_tiny_gguf(tmp_path / "tiny.gguf"), n_ctx=1024, n_threads=1,
                         kv_store=store, model_id="tiny")
    try:
        prompt = engine.tokenize("def helper(value):\n    return value * 2\n" * 8)

        def typed_in(uri: str) -> None:
            engine.complete(GenerationRequest(key=uri, segments=[prompt], max_tokens=2),
                            CancelToken())

        typed_in("file:///a.py")
        holder = _held_locked(folder)
        with pytest.raises(PersistenceError, match="locked"):  # told once, then paused
            engine.persist("file:///a.py")
        holder.execute("ROLLBACK")  # the other process lets go before the shutdown
        assert store._paused()
        assert engine.persist() == 1
        assert store.holds(engine.persistence.model, "file:///a.py")

        typed_in("file:///b.py")
        holder.execute("BEGIN EXCLUSIVE")  # and now holds it through the shutdown
        started = time.monotonic()
        with pytest.raises(PersistenceError, match="were not saved: .* locked"):
            engine.persist()
        assert time.monotonic() - started < 2.5  # one short wait, no more
        holder.execute("ROLLBACK")
        holder.close()
        assert engine.persist() == 1  # still unsaved, so a later shutdown saves it
        assert store.holds(engine.persistence.model, "file:///b.py")
    finally:
        engine.close()


_CUT_SHORT = """
import os, sys
from pathlib import Path
from lsp_complete.engine.kvstore import KVStore
folder = Path(sys.argv[1])
store = KVStore(folder)
for i in range(40):  # 20 KB each: rows in the database, not value files
    store.save("m", f"file:///{i}.py", [1, 2, 3], bytes([i]) * 20000)
store._cache._sql("PRAGMA wal_checkpoint(TRUNCATE)")  # every page in cache.db itself
os.truncate(folder / "cache.db", 0)
for i in range(40):
    store.load("m", f"file:///{i}.py")
    store.save("m", f"file:///n{i}.py", [1, 2, 3], bytes([i]) * 20000)
"""


def test_a_database_cut_short_under_the_store_does_not_kill_the_process(
        tmp_path: Path) -> None:
    """Round 6: cache.db truncated while a server used it (another process, a full disk's
    repair) killed the server with SIGBUS: SQLite read it through a memory mapping. Run in a
    child process, which a SIGBUS kills rather than this test run."""
    root = Path(__file__).resolve().parents[1]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(root), os.environ.get(
        "PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, "-c", _CUT_SHORT, str(tmp_path / "kv")], env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, (done.returncode, done.stderr[-2000:])
