"""The KV store on disk (issue 14, defects 3 and 4): nothing read from disk runs or is trusted.

Entries never go through pickle, are bound to the model identity and the file URI inside their
checksum, live in a 0700 folder as 0600 files, and a folder that cannot be used turns
persistence off (one message) without deleting anything.
"""

from __future__ import annotations

import ast
import inspect
import os
import pickle
import shutil
import stat
from pathlib import Path

import pytest

from lsp_complete.engine import kvstore
from lsp_complete.engine.kvstore import KVStore, decode_entry, encode_entry

URI = "file:///work/a.py"
TOKENS = [1, 2, 3, 500]
STATE = b"llama.cpp sequence state" * 4
ROOT = hasattr(os, "geteuid") and os.geteuid() == 0


class _Planted:
    """Unpickling this creates a folder: proof that data from disk ran as code."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (os.mkdir, (str(self.marker),))


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


# --------------------------------------------------------------------------- no code from disk


def test_the_store_imports_nothing_that_unpickles() -> None:
    tree = ast.parse(inspect.getsource(kvstore))
    imported = {alias.name.split(".")[0] for node in ast.walk(tree)
                if isinstance(node, ast.Import | ast.ImportFrom)
                for alias in (node.names if isinstance(node, ast.Import)
                              else [ast.alias(node.module or "")])}
    assert not imported & {"pickle", "diskcache", "shelve", "marshal", "dill", "joblib"}


def test_a_planted_pickle_entry_never_runs(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    directory = tmp_path / "kv"
    # What the diskcache-based store read: a pickle-mode row under the entry's key.
    diskcache = pytest.importorskip("diskcache")
    with diskcache.Cache(str(directory)) as planted:
        planted.set(f"model\n{URI}", _Planted(marker))
    store = KVStore(directory)
    assert store.load("model", URI) is None
    # And a pickle written where this store keeps the entry itself.
    entry = store._path("model", URI)
    entry.write_bytes(pickle.dumps(_Planted(marker)))
    assert store.load("model", URI) is None
    assert not marker.exists(), "data from the cache folder ran as code"
    assert not entry.exists(), "a bad entry is deleted"


# --------------------------------------------------------------------------- binding


def test_an_entry_round_trips(tmp_path: Path) -> None:
    store = KVStore(tmp_path / "kv")
    store.save("model-a", URI, TOKENS, STATE)
    assert store.load("model-a", URI) == (TOKENS, STATE)


def test_an_entry_swapped_to_another_model_is_not_restored(tmp_path: Path) -> None:
    store = KVStore(tmp_path / "kv")
    store.save("model-a", URI, TOKENS, STATE)
    swapped = store._path("model-b", URI)
    shutil.copy(store._path("model-a", URI), swapped)
    assert store.load("model-b", URI) is None
    assert not swapped.exists()
    assert store.load("model-a", URI) == (TOKENS, STATE)  # the genuine entry is untouched


def test_an_entry_of_one_file_is_not_restored_for_another(tmp_path: Path) -> None:
    store = KVStore(tmp_path / "kv")
    store.save("model-a", URI, TOKENS, STATE)
    other = "file:///work/b.py"
    shutil.copy(store._path("model-a", URI), store._path("model-a", other))
    assert store.load("model-a", other) is None
    assert store.load("model-a", URI) == (TOKENS, STATE)


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
    finally:
        os.umask(previous)
    assert store.unavailable is None
    assert _mode(tmp_path / "kv") == 0o700
    assert [_mode(p) for p in (tmp_path / "kv").iterdir()] == [0o600]


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


def test_an_error_opening_the_store_never_deletes_the_folder(tmp_path: Path) -> None:
    folder = tmp_path / "kv"
    folder.mkdir(mode=0o700)
    (folder / "cache.db").write_bytes(b"not an sqlite database at all" * 100)
    (folder / "keep.txt").write_text("the user's")
    store = KVStore(folder)
    assert (folder / "keep.txt").read_text() == "the user's"
    assert (folder / "cache.db").exists()
    store.save("model-a", URI, TOKENS, STATE)  # and the store still works
    assert store.load("model-a", URI) == (TOKENS, STATE)


def test_a_link_or_foreign_file_in_place_of_an_entry_is_not_followed(tmp_path: Path) -> None:
    store = KVStore(tmp_path / "kv")
    elsewhere = tmp_path / "elsewhere.kv"
    elsewhere.write_bytes(encode_entry("model-a", URI, TOKENS, STATE))
    store._path("model-a", URI).symlink_to(elsewhere)
    assert store.load("model-a", URI) is None
    assert not store._path("model-a", URI).is_symlink()
    assert elsewhere.exists()
    if ROOT:
        shutil.copy(elsewhere, store._path("model-a", URI))
        os.chown(store._path("model-a", URI), 65534, 65534)
        assert store.load("model-a", URI) is None


# --------------------------------------------------------------------------- size limit


def test_the_least_recently_used_entries_go_first_over_the_size_limit(tmp_path: Path) -> None:
    size = len(encode_entry("m", "file:///0.py", TOKENS, STATE))
    store = KVStore(tmp_path / "kv", size_limit=2 * size + size // 2)
    for i in range(2):
        store.save("m", f"file:///{i}.py", TOKENS, STATE)
        os.utime(store._path("m", f"file:///{i}.py"), ns=(i + 1, i + 1))
    assert store.load("m", "file:///0.py") is not None  # used: now the most recent
    store.save("m", "file:///2.py", TOKENS, STATE)
    assert store.load("m", "file:///1.py") is None
    assert store.load("m", "file:///0.py") is not None
    assert store.load("m", "file:///2.py") is not None
    assert store.volume() == 2 * size


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
