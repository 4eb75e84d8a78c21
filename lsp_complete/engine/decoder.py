"""Running llama.cpp's decode on the in-process engine's context: tokens appended to a KV
sequence in batches, logits rows read back, a running decode stopped through llama.cpp's abort
callback when its request is cancelled hard, and the table's token lists resynchronised with
llama.cpp's cells after a decode that stopped part-way. It also picks the thread count per
batch (`ThreadPolicy`) and frees the context and batch at the end.

It decides nothing about which tokens to decode: the engine and a `Generation` do.
Runs on the scheduler's worker thread only.
"""

from __future__ import annotations

import ctypes
import os
import time
from collections.abc import Callable
from typing import Any

import llama_cpp
import numpy as np

from lsp_complete.engine.base import CancelToken, EngineCounters, EngineError
from lsp_complete.engine.sequences import KVSequence, SequenceTable
from lsp_complete.engine.threads import ThreadPolicy

# llama_decode's statuses: 1, no free KV cells for the batch; 2, aborted by the callback.
NO_ROOM, ABORTED = 1, 2


class Decoder:
    def __init__(self, ctx: Any, table: SequenceTable, n_batch: int, n_vocab: int,
                 threads: ThreadPolicy, n_threads: int, counters: EngineCounters,
                 check_weights: Callable[[], None] | None) -> None:
        """`ctx` is a llama.cpp context made with `n_threads`, `table` its sequences (a decode
        with no free cells evicts another file's); `check_weights` runs before each batch (it
        raises when the mapped model file was rewritten)."""
        self.ctx = ctx
        self.table = table
        self.n_batch = n_batch
        self.n_vocab = n_vocab
        self.threads = threads
        self.counters = counters
        self._check_weights = check_weights
        self._threads_set = (n_threads, n_threads)
        self.memory = llama_cpp.llama_get_memory(ctx)
        self._batch = llama_cpp.llama_batch_init(n_batch, 0, 1)
        self._active_cancel: CancelToken | None = None
        self._abort_callback = llama_cpp.ggml_abort_callback(self._should_abort)
        # Tests of scheduling make the tiny model as slow as a real one on a laptop, so that
        # requests really overlap; the model still runs for real. Never set in normal use.
        self.simulated_delay = float(os.environ.get("LSP_COMPLETE_SIMULATE_DECODE_MS", 0)) / 1000

    def logits(self, row: int) -> np.ndarray:
        """The logits of one row of the last decode (-1: its last)."""
        return np.ctypeslib.as_array(llama_cpp.llama_get_logits_ith(self.ctx, row),
                                     shape=(self.n_vocab,))

    def decode(self, seq: KVSequence, tokens: list[int], logit_rows: int, cancel: CancelToken,
               abortable: bool) -> bool:
        """Append tokens to a sequence in batches, with logits for the last `logit_rows` of
        them (True: the last one; a draft's verify step: each). Returns False when cancelled
        part-way."""
        start = 0
        while start < len(tokens):
            if cancel.cancelled:
                return False
            chunk = tokens[start : start + self.n_batch]
            last_chunk = start + len(chunk) >= len(tokens)
            rows = logit_rows if last_chunk else 0
            status = self.decode_chunk(seq, chunk, rows, cancel, abortable)
            if status == NO_ROOM and self.table.evict_lru(exclude=seq.key):
                continue  # no free KV cells: retry after dropping another file's cache
            if status != 0:
                self.resync(seq, chunk)
                if status == ABORTED:
                    self.counters.aborted_decodes += 1
                    return False
                raise EngineError(f"llama_decode failed with status {status}")
            if cancel.cancelled:
                self.counters.tokens_after_cancel += len(chunk)
                cancel.work_after_cancel += len(chunk)
                self.counters.max_tokens_after_cancel = max(
                    self.counters.max_tokens_after_cancel, cancel.work_after_cancel
                )
            start += len(chunk)
        return True

    def decode_chunk(self, seq: KVSequence, chunk: list[int], logit_rows: int,
                     cancel: CancelToken, abortable: bool) -> int:
        """One llama_decode of at most n_batch tokens; returns its status."""
        if self._check_weights is not None:
            self._check_weights()  # one fstat: microseconds, against a decode's milliseconds
        batch = self._batch
        base = len(seq.tokens)
        first_logits = len(chunk) - int(logit_rows)
        for i, token in enumerate(chunk):
            batch.token[i] = token
            batch.pos[i] = base + i
            batch.n_seq_id[i] = 1
            batch.seq_id[i][0] = seq.seq_id
            batch.logits[i] = int(i >= first_logits)
        batch.n_tokens = len(chunk)
        if abortable:
            # The abort callback costs a Python call per graph node: only worth it for prefill
            # batches; single-token generation steps are checked between tokens instead.
            self._active_cancel = cancel
            llama_cpp.llama_set_abort_callback(self.ctx, self._abort_callback, None)
        self._use_threads(self.threads.threads_for(len(chunk)))
        started, cpu_started = time.perf_counter(), time.process_time()
        try:
            if self.simulated_delay:
                time.sleep(self.simulated_delay)
            status = llama_cpp.llama_decode(self.ctx, batch)
            if status == 0:
                self.threads.measured(len(chunk), time.perf_counter() - started,
                                      time.process_time() - cpu_started)
        finally:
            if abortable:
                llama_cpp.llama_set_abort_callback(
                    self.ctx, llama_cpp.ggml_abort_callback(), None
                )
                self._active_cancel = None
        if status == 0:
            seq.tokens.extend(chunk)
            seq.dirty = True
        return int(status)

    def resync(self, seq: KVSequence, chunk: list[int]) -> None:
        """After an aborted or failed decode, make our token list match llama.cpp's cells.

        The micro-batches a decode finished before an abort stay in memory and are valid
        (keep them: that prefill work is not lost); anything past them is removed.
        """
        held = llama_cpp.llama_memory_seq_pos_max(self.memory, seq.seq_id) + 1
        base = len(seq.tokens)
        if held > base:
            seq.tokens.extend(chunk[: held - base])
            seq.dirty = True
        elif held < base:
            del seq.tokens[max(held, 0) :]
        llama_cpp.llama_memory_seq_rm(self.memory, seq.seq_id, len(seq.tokens), -1)

    def _use_threads(self, count: int) -> None:
        # llama.cpp takes n_threads for one-token batches and n_threads_batch for the rest.
        if self._threads_set != (count, count):
            llama_cpp.llama_set_n_threads(self.ctx, count, count)
            self._threads_set = (count, count)

    def _should_abort(self, _data: ctypes.c_void_p) -> bool:
        cancel = self._active_cancel
        return bool(cancel is not None and cancel.hard)

    def close(self) -> None:
        if self.ctx:
            llama_cpp.llama_batch_free(self._batch)
            llama_cpp.llama_free(self.ctx)
            self.ctx = None
