"""Which of llama.cpp's KV sequences holds what: the in-process engine's table of sequences.

Every open file (`key`) gets one sequence, least recently used first out; while idle work
builds a file's next prompt it gets a second, *aside* sequence, which replaces the first once
complete (`promote`). Work that must leave nothing behind (alternatives, the load-time
measurement) borrows a *scratch* sequence and releases it. All sequences share one pool of
KV cells (llama.cpp's unified cache): copying a prefix from one to another shares its cells.

The table keeps, for each sequence, the tokens its cells hold, so that a prompt's longest
common prefix with them is known without asking llama.cpp. Eviction saves a file's sequence
to disk first (`save`); acquiring a file not in memory tries the disk (`restore`).
Runs on the worker thread only, as the engine does.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import llama_cpp

from lsp_complete.engine.base import EngineCounters, common_prefix_length

log = logging.getLogger(__name__)

CELL_SLACK = 64  # llama.cpp places a ubatch in free cells, fragmentation included


@dataclass
class KVSequence:
    key: str
    seq_id: int
    tokens: list[int] = field(default_factory=list)
    dirty: bool = False  # holds KV that the disk store does not have yet
    aside: bool = False  # a file's second sequence, where idle work builds its next prompt


class SequenceTable:
    def __init__(self, memory: Any, slots: int, n_ctx: int, counters: EngineCounters,
                 save: Callable[[KVSequence], bool],
                 restore: Callable[[KVSequence], None]) -> None:
        self._mem = memory
        self.slots = slots
        self.n_ctx = n_ctx
        self._counters = counters
        self._save = save
        self._restore = restore
        self.files: OrderedDict[str, KVSequence] = OrderedDict()  # LRU order, oldest first
        self.asides: dict[str, KVSequence] = {}
        # Each file may hold a second, "aside" sequence while idle work builds a new prompt.
        self.free_ids = list(range(2 * slots))

    # ------------------------------------------------------------------ looking up

    def held(self, key: str) -> list[KVSequence]:
        """The file's sequences in memory: its own, then its aside one."""
        return [s for s in (self.files.get(key), self.asides.get(key)) if s is not None]

    def cached_prefix(self, key: str, tokens: list[int]) -> int:
        """How many leading tokens of a prompt this file's sequences already hold."""
        return max((common_prefix_length(s.tokens, tokens) for s in self.held(key)), default=0)

    def cells_in_use(self) -> int:
        # Counts cells an aside shares with its file's sequence twice: errs towards room.
        return sum(len(s.tokens) for s in (*self.files.values(), *self.asides.values()))

    # ------------------------------------------------------------------ files' sequences

    def acquire(self, key: str) -> KVSequence:
        """The file's sequence (most recently used now), made, and restored from disk when
        it is there, if it is not in memory."""
        seq = self.files.get(key)
        if seq is not None:
            self.files.move_to_end(key)
            return seq
        while len(self.files) >= self.slots and self.evict_file(exclude=None):
            pass
        seq = KVSequence(key=key, seq_id=self.free_ids.pop(0))
        self.files[key] = seq
        self._restore(seq)
        return seq

    def aside_for(self, key: str) -> KVSequence:
        aside = self.asides.get(key)
        if aside is None:
            aside = self.asides[key] = KVSequence(key, self.free_ids.pop(0), aside=True)
        return aside

    def drop(self, seq: KVSequence) -> None:
        llama_cpp.llama_memory_seq_rm(self._mem, seq.seq_id, -1, -1)
        self.free_ids.append(seq.seq_id)
        if seq.aside:
            del self.asides[seq.key]
        else:
            del self.files[seq.key]

    def forget(self, key: str) -> None:
        for seq in reversed(self.held(key)):
            self.drop(seq)

    def promote(self, aside: KVSequence) -> KVSequence:
        """The aside sequence becomes the file's sequence; the old one is freed."""
        main = self.files.get(aside.key)
        if main is not None:
            self.drop(main)
        del self.asides[aside.key]
        aside.aside, aside.dirty = False, True
        self.files[aside.key] = aside  # most recently used
        return aside

    def copy_prefix(self, source: KVSequence, target: KVSequence, tokens: list[int]) -> None:
        """`target` holds the first len(tokens) cells of `source` (shared, not recomputed),
        which hold `tokens`; whatever `target` held is dropped."""
        self.truncate(target, 0)
        if tokens:
            llama_cpp.llama_memory_seq_cp(self._mem, source.seq_id, target.seq_id, 0,
                                          len(tokens))
        target.tokens = list(tokens)

    def truncate(self, seq: KVSequence, keep: int) -> None:
        if keep < len(seq.tokens):
            llama_cpp.llama_memory_seq_rm(self._mem, seq.seq_id, keep, -1)
            del seq.tokens[keep:]

    # ------------------------------------------------------------------ room

    def evict_lru(self, exclude: str | None) -> bool:
        """Free KV cells held for files other than `exclude`: an aside sequence first (it only
        holds idle work), else the least recently used file's sequences."""
        for key, aside in list(self.asides.items()):
            if key != exclude:
                self.drop(aside)
                return True
        return self.evict_file(exclude)

    def evict_file(self, exclude: str | None) -> bool:
        """Free the least recently used file's sequences (saved to disk first), not `exclude`'s."""
        for key, victim in self.files.items():
            if key == exclude:
                continue
            if victim.dirty:
                self._save(victim)
            self.drop(victim)
            if key in self.asides:
                self.drop(self.asides[key])
            self._counters.evictions += 1
            log.debug("evicted KV sequence of %s", key)
            return True
        return False

    def make_room(self, seq: KVSequence, needed: int) -> None:
        while self.cells_in_use() + needed > self.n_ctx - CELL_SLACK:
            if not self.evict_lru(exclude=seq.key):
                break

    def has_room(self, needed: int) -> bool:
        return self.cells_in_use() + needed <= self.n_ctx - CELL_SLACK

    # ------------------------------------------------------------------ scratch

    def scratch(self, key: str) -> KVSequence:
        """A sequence id for work that leaves nothing behind (alternatives): a free one, else
        one freed by dropping an aside sequence (another file's first: it only holds idle
        work). Not registered: the caller releases it with `release`."""
        if not self.free_ids:
            asides = sorted(self.asides.values(), key=lambda a: a.key == key)
            if asides:
                self.drop(asides[0])
        return KVSequence(key, self.free_ids.pop(0), aside=True)

    def release(self, scratch: KVSequence) -> None:
        llama_cpp.llama_memory_seq_rm(self._mem, scratch.seq_id, -1, -1)
        self.free_ids.append(scratch.seq_id)
