"""KV sequences to and from the disk store: a sequence's llama.cpp state saved under its file
key (when evicted, and when the server asks to persist), and restored when a file not in
memory is acquired again, but only when it restores exactly the tokens it claims.

`kvstore.KVStore` keeps the bytes (where and how safely); this module moves them between it and
the in-process engine's context. Runs on the worker thread only, as the engine does.
"""

from __future__ import annotations

import ctypes
import logging
from typing import Any

import llama_cpp

from lsp_complete.engine.base import EngineCounters, PersistenceError
from lsp_complete.engine.kvstore import KVStore
from lsp_complete.engine.sequences import KVSequence, SequenceTable

log = logging.getLogger(__name__)


class SequencePersistence:
    def __init__(self, store: KVStore | None, model: str, ctx: Any, n_vocab: int,
                 counters: EngineCounters) -> None:
        """`model` is the store's identity of the model and context layout (`model_identity`):
        an entry saved under another is a miss."""
        self.store = store
        self.model = model
        self._ctx = ctx
        self._mem = llama_cpp.llama_get_memory(ctx)
        self._n_vocab = n_vocab
        self._counters = counters

    def save(self, seq: KVSequence) -> bool:
        if self.store is None or not seq.tokens:
            return False
        size = llama_cpp.llama_state_seq_get_size(self._ctx, seq.seq_id)
        buf = (ctypes.c_uint8 * size)()
        written = llama_cpp.llama_state_seq_get_data(self._ctx, buf, size, seq.seq_id)
        if written == 0:
            return False
        # Still dirty when the store is paused: a later save (at shutdown) may store it.
        if not self.store.save(self.model, seq.key, seq.tokens, bytes(buf)[:written]):
            return False
        seq.dirty = False
        return True

    def holds(self, key: str) -> bool:
        return self.store is not None and self.store.holds(self.model, key)

    def restore(self, seq: KVSequence, table: SequenceTable) -> None:
        """Fill a newly acquired sequence from the store, when it holds a usable entry."""
        if self.store is None:
            return
        entry = self.store.load(self.model, seq.key)
        if entry is None:
            return
        tokens, data = entry
        if tokens and not 0 <= min(tokens) <= max(tokens) < self._n_vocab:
            self.store.discard(self.model, seq.key)  # intact, but not this vocabulary's
            return
        table.make_room(seq, len(tokens))
        buf = (ctypes.c_uint8 * len(data)).from_buffer_copy(data)
        read = llama_cpp.llama_state_seq_set_data(self._ctx, buf, len(data), seq.seq_id)
        pos_max = llama_cpp.llama_memory_seq_pos_max(self._mem, seq.seq_id)
        if read == 0 or pos_max != len(tokens) - 1:
            # Never trust a cache entry that does not restore exactly what it claims.
            log.warning("discarding unusable KV cache entry for %s", seq.key)
            llama_cpp.llama_memory_seq_rm(self._mem, seq.seq_id, -1, -1)
            self.store.discard(self.model, seq.key)
            return
        seq.tokens = list(tokens)
        self._counters.restored_from_disk += 1

    def save_dirty(self, table: SequenceTable, key: str | None) -> int:
        """Save the files' sequences (or one file's) that hold KV the store does not have;
        returns how many were saved. PersistenceError (once per cause) after saving what it
        could when the store could not be written.

        Every file's (`key` None) is asked for at shutdown only (a server's or a daemon
        session's, the daemon's stop): a store paused by a locked database is then tried
        once more, with its short wait, and a database still locked is said."""
        store = self.store
        if key is None and store is not None:
            store.try_again()
        saved = unsaved = 0
        for seq in list(table.files.values()):
            if (key is None or seq.key == key) and seq.dirty:
                if self.save(seq):
                    saved += 1
                else:
                    unsaved += 1
        notice = store.take_notice() if store is not None else None
        if key is None and store is not None and store.paused and unsaved:
            raise PersistenceError(
                f"the KV caches of {unsaved} file(s) were not saved: the database in "
                f"{store.directory} is held locked by another process")
        if notice is not None:
            raise PersistenceError(notice)
        return saved

    def close(self) -> None:
        if self.store is not None:
            self.store.close()  # its SQLite handle: a settings reload makes a new store
