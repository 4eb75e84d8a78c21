"""In-process llama.cpp: one context, one KV sequence per open file, prefix reuse, token healing,
and lossless speculative decoding (drafts from `speculation`, verified in one batched decode).

Everything here runs on the scheduler's single worker thread; nothing else touches the context.
"""

from __future__ import annotations

import bisect
import codecs
import contextlib
import ctypes
import logging
import os
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path

import llama_cpp
import numpy as np

from lsp_complete.config import default_threads
from lsp_complete.engine.base import (
    MIN_ALTERNATIVE_PROBABILITY,
    CancelToken,
    EngineCounters,
    EngineError,
    GenerationRequest,
    GenerationResult,
    ModelFileChanged,
    PersistenceError,
    common_prefix_length,
    file_stamp,
    path_stamp,
)
from lsp_complete.engine.kvstore import KVStore, model_identity
from lsp_complete.engine.llama_backend import (
    extra_buffer_types_safe,
    init_backend,
    token_piece,
    vocab_tokenize,
)
from lsp_complete.engine.sequences import KVSequence, SequenceTable
from lsp_complete.engine.speculation import (
    NEAR_TIE,
    PREVIOUS_TAIL,
    Draft,
    Drafter,
    DraftPolicy,
    PromptLookup,
    TokenHistory,
    resolve_mode,
)
from lsp_complete.engine.stream_rules import TextRules
from lsp_complete.engine.threads import ThreadPolicy

log = logging.getLogger(__name__)


# Copying another file's cells must save at least this many tokens of prefill (~130 ms on 2
# cores with the 0.5B model); below it, the scan and the copy are not worth it.
BORROW_MIN_TOKENS = 32
PREFILL_SAMPLE_TOKENS = 64  # prefills at least this long update the measured speed
# What the load-time prefill measurement encodes: ordinary code, as the first prompts are.
_CALIBRATION_TEXT = "def total(items):\n    return sum(item.price * item.count for item in items)\n"


class LlamaEngine:
    def __init__(
        self,
        model_path: str | Path,
        *,
        n_ctx: int = 8192,
        n_threads: int | None = None,
        thread_policy: str = "auto",
        n_gpu_layers: int = 0,
        slots: int = 4,
        # 64-token prefill batches: a superseded prefill finishes its batch within ~0.3 s on
        # 2 cores (224 tok/s, vs 242 tok/s with 256-token batches that take ~1 s).
        n_batch: int = 64,
        n_ubatch: int = 64,
        kv_store: KVStore | None = None,
        model_id: str = "",
        mmap: bool | None = None,
    ) -> None:
        init_backend()
        self.model_path = Path(model_path)
        # Held open: its size and mtime say whether the very file loaded was rewritten.
        self._model_fd: int | None = os.open(self.model_path, os.O_RDONLY)
        self._loaded_stamp = file_stamp(os.fstat(self._model_fd))
        self._stale: str | None = None
        # Weights memory-mapped from a file that is then truncated or rewritten in place (`cp
        # new.gguf model.gguf`) crash the process with SIGBUS at the next decode: read them
        # into memory when they fit (None: decide by size), and guard the mapping otherwise.
        self.mapped = not _fits_in_memory(self._loaded_stamp[2]) if mmap is None else mmap
        self.n_threads = n_threads or default_threads()
        # On a GPU the CPU threads matter little and llama.cpp's own choice stands.
        self.threads = ThreadPolicy(self.n_threads, thread_policy if not n_gpu_layers else "fixed")
        self._threads_set = (self.n_threads, self.n_threads)
        self.n_gpu_layers = n_gpu_layers
        self.n_batch = n_batch
        self.slots = max(1, slots)
        self.kv_store = kv_store
        self.model_id = model_id or f"{self.model_path.name}:{self.model_path.stat().st_size}"
        # Disk entries are bound to this exact file and to what shapes a sequence's state: an
        # entry saved under other settings, another llama.cpp or another model is a miss.
        self._kv_model = model_identity(
            self.model_path, self.model_id, n_ctx=n_ctx, n_seq=2 * self.slots,
            llama_cpp=getattr(llama_cpp, "__version__", "?"),
        )
        self.counters = EngineCounters()
        # Tests of scheduling make the tiny model as slow as a real one on a laptop, so that
        # requests really overlap; the model still runs for real. Never set in normal use.
        self.simulated_delay = float(os.environ.get("LSP_COMPLETE_SIMULATE_DECODE_MS", 0)) / 1000
        self._active_cancel: CancelToken | None = None
        self._lock = threading.RLock()
        # Speculation: how long drafts are (learned from acceptance, across requests), the last
        # suggestion per file (prompt tail + output: a re-request drafts from it), and the hook
        # for a draft model (mode "draft": a Drafter per request; none is built in yet).
        self.draft_policy = DraftPolicy()
        self.near_tie = NEAR_TIE
        self._previous: OrderedDict[str, np.ndarray] = OrderedDict()
        self.draft_model: Callable[[GenerationRequest], Drafter] | None = None

        mparams = llama_cpp.llama_model_default_params()
        mparams.n_gpu_layers = n_gpu_layers
        self.extra_buffer_types = extra_buffer_types_safe()
        mparams.use_extra_bufts = self.extra_buffer_types
        _set_load_mode(mparams, self.mapped)
        self._model = llama_cpp.llama_model_load_from_file(str(self.model_path).encode(), mparams)
        if not self._model:
            self._close_model_file()
            raise EngineError(
                f"llama.cpp could not load {self.model_path}: the file is not a usable GGUF model "
                "(truncated, corrupt, or an architecture this llama.cpp does not know). "
                "Re-run `lsp-complete models pull NAME` or pick another model."
            )
        self._vocab = llama_cpp.llama_model_get_vocab(self._model)
        self.n_vocab = llama_cpp.llama_vocab_n_tokens(self._vocab)
        self.n_ctx_train = llama_cpp.llama_model_n_ctx_train(self._model)

        cparams = llama_cpp.llama_context_default_params()
        cparams.n_ctx = n_ctx
        cparams.n_batch = n_batch
        cparams.n_ubatch = min(n_ubatch, n_batch)
        # Each file may hold a second, "aside" sequence while idle work builds a new prompt.
        cparams.n_seq_max = 2 * self.slots
        cparams.kv_unified = True  # one pool of cells shared by all files' sequences
        cparams.n_threads = self.n_threads
        cparams.n_threads_batch = self.n_threads
        cparams.no_perf = True
        self._abort_callback = llama_cpp.ggml_abort_callback(self._should_abort)
        self._ctx = llama_cpp.llama_init_from_model(self._model, cparams)
        if not self._ctx:
            llama_cpp.llama_model_free(self._model)
            self._close_model_file()
            raise EngineError(
                f"llama.cpp could not create a context of {n_ctx} tokens for {self.model_path} "
                "(out of memory?). Lower contextSize."
            )
        self.n_ctx = llama_cpp.llama_n_ctx(self._ctx)
        self._mem = llama_cpp.llama_get_memory(self._ctx)
        self._batch = llama_cpp.llama_batch_init(n_batch, 0, 1)
        self._table = SequenceTable(self._mem, self.slots, self.n_ctx, self.counters,
                                    self._save, self._restore)
        self._load_vocab_pieces()
        self.prefill_rate = self._measure_prefill()

    def _measure_prefill(self) -> float | None:
        """Prompt tokens per second on this machine, timed on one batch at load. It also pages
        the weights in, so that the first file's first suggestion does not pay for that."""
        tokens = (self.tokenize(_CALIBRATION_TEXT) * 8)[: self.n_batch]
        scratch = self._table.scratch("")
        try:
            started = time.perf_counter()
            if not self._decode(scratch, tokens, 0, CancelToken(), abortable=False):
                return None
            return len(tokens) / max(time.perf_counter() - started, 1e-6)
        except EngineError:
            return None
        finally:
            self._table.release(scratch)

    # ------------------------------------------------------------------ vocabulary

    def _load_vocab_pieces(self) -> None:
        buf = ctypes.create_string_buffer(256)
        pieces: list[bytes] = []
        stop_mask = np.zeros(self.n_vocab, dtype=bool)
        for token in range(self.n_vocab):
            n = llama_cpp.llama_token_to_piece(self._vocab, token, buf, 256, 0, False)
            pieces.append(buf.raw[: max(n, 0)])
            if (
                llama_cpp.llama_vocab_is_eog(self._vocab, token)
                or llama_cpp.llama_vocab_is_control(self._vocab, token)
                or n <= 0
            ):
                stop_mask[token] = True
        self._pieces = pieces
        # Any end-of-generation, control (FIM markers, file separators) or empty token ends the
        # suggestion: they must never reach the editor.
        self._stop_mask = stop_mask
        order = sorted((p, t) for t, p in enumerate(pieces) if p and not stop_mask[t])
        self._sorted_pieces = [p for p, _ in order]
        self._sorted_ids = np.array([t for _, t in order], dtype=np.int64)
        self._piece_ids: dict[bytes, list[int]] = {}
        for p, t in order:
            self._piece_ids.setdefault(p, []).append(t)
        self._heal_cache: dict[tuple[bytes, bool], np.ndarray] = {}

    def piece(self, token: int) -> bytes:
        return self._pieces[token]

    def _heal_candidates(self, remaining: bytes, code: bool = False) -> np.ndarray:
        """Tokens that keep the output consistent with the healed text still to be produced.

        With `code`, healed spaces must end in a token that carries code (" depth"): one that
        ends them with more spaces is never the suggestion once the indentation is complete,
        and a model that writes one writes more.
        """
        cached = self._heal_cache.get((remaining, code))
        if cached is not None:
            return cached
        lo = bisect.bisect_left(self._sorted_pieces, remaining)
        hi = bisect.bisect_left(self._sorted_pieces, remaining + b"\xff" * 32, lo)
        ids = [self._sorted_ids[lo:hi]]
        if code and not remaining.strip(b" "):
            pieces = self._sorted_pieces[lo:hi]
            ids = [ids[0][np.array([bool(p.strip()) for p in pieces], dtype=bool)]]
        for k in range(1, len(remaining)):
            ids.append(np.array(self._piece_ids.get(remaining[:k], []), dtype=np.int64))
        result = np.concatenate(ids)
        if len(self._heal_cache) > 4096:
            self._heal_cache.clear()
        self._heal_cache[(remaining, code)] = result
        return result

    def tokenize(self, text: str, special: bool = False) -> list[int]:
        return vocab_tokenize(self._vocab, text, special)

    def detokenize(self, tokens: list[int]) -> str:
        return b"".join(self._pieces[t] for t in tokens).decode("utf-8", errors="replace")

    def token_text(self, token: int) -> str:
        """Text of a token including special ones (for templates and diagnostics)."""
        return token_piece(self._vocab, token, True).decode("utf-8", errors="replace")

    # ------------------------------------------------------------------ sequences

    def _should_abort(self, _data: ctypes.c_void_p) -> bool:
        cancel = self._active_cancel
        return bool(cancel is not None and cancel.hard)

    def _restore(self, seq: KVSequence) -> None:
        if self.kv_store is None:
            return
        entry = self.kv_store.load(self._kv_model, seq.key)
        if entry is None:
            return
        tokens, data = entry
        if tokens and not 0 <= min(tokens) <= max(tokens) < self.n_vocab:
            self.kv_store.discard(self._kv_model, seq.key)  # intact, but not this vocabulary's
            return
        self._table.make_room(seq, len(tokens))
        buf = (ctypes.c_uint8 * len(data)).from_buffer_copy(data)
        read = llama_cpp.llama_state_seq_set_data(self._ctx, buf, len(data), seq.seq_id)
        pos_max = llama_cpp.llama_memory_seq_pos_max(self._mem, seq.seq_id)
        if read == 0 or pos_max != len(tokens) - 1:
            # Never trust a cache entry that does not restore exactly what it claims.
            log.warning("discarding unusable KV cache entry for %s", seq.key)
            llama_cpp.llama_memory_seq_rm(self._mem, seq.seq_id, -1, -1)
            self.kv_store.discard(self._kv_model, seq.key)
            return
        seq.tokens = list(tokens)
        self.counters.restored_from_disk += 1

    def _save(self, seq: KVSequence) -> bool:
        if self.kv_store is None or not seq.tokens:
            return False
        size = llama_cpp.llama_state_seq_get_size(self._ctx, seq.seq_id)
        buf = (ctypes.c_uint8 * size)()
        written = llama_cpp.llama_state_seq_get_data(self._ctx, buf, size, seq.seq_id)
        if written == 0:
            return False
        self.kv_store.save(self._kv_model, seq.key, seq.tokens, bytes(buf)[:written])
        seq.dirty = False
        return True

    # ------------------------------------------------------------------ decoding

    def _decode(self, seq: KVSequence, tokens: list[int], logit_rows: int, cancel: CancelToken,
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
            status = self._decode_chunk(seq, chunk, rows, cancel, abortable)
            if status == 1 and self._table.evict_lru(exclude=seq.key):
                continue  # no free KV cells: retry after dropping another file's cache
            if status != 0:
                self._resync(seq, chunk)
                if status == 2:
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

    def _use_threads(self, count: int) -> None:
        # llama.cpp takes n_threads for one-token batches and n_threads_batch for the rest.
        if self._threads_set != (count, count):
            llama_cpp.llama_set_n_threads(self._ctx, count, count)
            self._threads_set = (count, count)

    def _resync(self, seq: KVSequence, chunk: list[int]) -> None:
        """After an aborted or failed decode, make our token list match llama.cpp's cells.

        The micro-batches a decode finished before an abort stay in memory and are valid
        (keep them: that prefill work is not lost); anything past them is removed.
        """
        held = llama_cpp.llama_memory_seq_pos_max(self._mem, seq.seq_id) + 1
        base = len(seq.tokens)
        if held > base:
            seq.tokens.extend(chunk[: held - base])
            seq.dirty = True
        elif held < base:
            del seq.tokens[max(held, 0) :]
        llama_cpp.llama_memory_seq_rm(self._mem, seq.seq_id, len(seq.tokens), -1)

    def _decode_chunk(self, seq: KVSequence, chunk: list[int], logit_rows: int,
                      cancel: CancelToken, abortable: bool) -> int:
        if self.mapped:
            self._check_mapping()  # one fstat: microseconds, against a decode's milliseconds
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
            llama_cpp.llama_set_abort_callback(self._ctx, self._abort_callback, None)
        self._use_threads(self.threads.threads_for(len(chunk)))
        started = time.perf_counter()
        try:
            if self.simulated_delay:
                time.sleep(self.simulated_delay)
            status = llama_cpp.llama_decode(self._ctx, batch)
            if status == 0:
                self.threads.measured(len(chunk), time.perf_counter() - started)
        finally:
            if abortable:
                llama_cpp.llama_set_abort_callback(
                    self._ctx, llama_cpp.ggml_abort_callback(), None
                )
                self._active_cancel = None
        if status == 0:
            seq.tokens.extend(chunk)
            seq.dirty = True
        return status

    def _borrow_prefix(self, seq: KVSequence, prompt: list[int]) -> None:
        """Give `seq` the longest prefix of `prompt` that another file's sequence holds, when
        that is BORROW_MIN_TOKENS longer than its own: open files that share an opening (the
        same repository block, a license header) encode it once. In llama.cpp's unified cache
        the copied cells are shared, not duplicated."""
        own = common_prefix_length(seq.tokens, prompt)
        if len(prompt) - own < BORROW_MIN_TOKENS:
            return  # a keystroke: almost all of it is there already
        donor, best = None, own + BORROW_MIN_TOKENS - 1
        for other in (*self._table.files.values(), *self._table.asides.values()):
            if other is not seq and len(other.tokens) > best:
                shared = common_prefix_length(other.tokens, prompt)
                if shared > best:
                    donor, best = other, shared
        if donor is None:
            return
        self._table.copy_prefix(donor, seq, prompt[:best])
        seq.dirty = True
        self.counters.tokens_borrowed += best - own

    def _prefill(self, seq: KVSequence, prompt: list[int], cancel: CancelToken,
                 want_logits: bool) -> tuple[int, int] | None:
        self._borrow_prefix(seq, prompt)
        reused = common_prefix_length(seq.tokens, prompt)
        if want_logits and reused == len(prompt):
            reused -= 1  # the last prompt token must be decoded again to get its logits
        self._table.truncate(seq, reused)
        todo = prompt[reused:]
        self._table.make_room(seq, len(todo))
        started = time.perf_counter()
        if not self._decode(seq, todo, want_logits, cancel, abortable=True):
            return None
        if len(todo) >= PREFILL_SAMPLE_TOKENS:  # keep the measured speed current
            rate = len(todo) / max(time.perf_counter() - started, 1e-6)
            self.prefill_rate = rate if self.prefill_rate is None else (
                0.7 * self.prefill_rate + 0.3 * rate)
        return reused, len(todo)

    # ------------------------------------------------------------------ public API

    def warm(self, key: str, segments: list[list[int]], cancel: CancelToken,
             extend_only: bool = False, limit: int | None = None) -> int:
        """Encode a prompt ahead of time (idle time); returns tokens encoded.

        A prompt that extends what the file's sequence holds is encoded into it. One that
        would discard part of it is built in the file's aside sequence (starting from the
        prefix they share, copied without recomputing), which replaces the file's sequence
        only once complete: a keystroke that interrupts it still finds its old prompt intact.
        With `extend_only`, such a prompt is not encoded at all. With `limit`, at most that
        many more of its tokens are (a slice: a later call goes on from there).
        """
        prompt = [t for s in segments for t in s]
        if not prompt:
            return 0
        with self._lock:
            seq = self._table.acquire(key)
            shared = common_prefix_length(seq.tokens, prompt)
            if shared < len(seq.tokens):
                if extend_only:
                    return 0
                seq = self._table.aside_for(key)
                if common_prefix_length(seq.tokens, prompt) < shared:
                    self._table.copy_prefix(self._table.files[key], seq, prompt[:shared])
            self.counters.warm_calls += 1
            target = prompt
            if limit is not None:
                target = prompt[: common_prefix_length(seq.tokens, prompt) + max(limit, 0)]
            done = self._prefill(seq, target, cancel, want_logits=False)
            if done is None:
                return 0
            if seq.aside and len(target) == len(prompt):
                self._table.promote(seq)
            self.counters.tokens_encoded += done[1]
            self.counters.tokens_reused += done[0]
            return done[1]

    def complete(self, request: GenerationRequest, cancel: CancelToken) -> GenerationResult:
        prompt = request.tokens
        result = GenerationResult(text="", prompt_tokens=len(prompt))
        if not prompt:
            result.stop_reason = "empty"
            return result
        if request.aside:
            return self._complete_aside(request, cancel, result)
        with self._lock:
            self.counters.calls += 1
            t0 = time.perf_counter()
            seq = self._table.acquire(request.key)
            aside = self._table.asides.get(request.key)
            if aside is not None and _further(aside, seq, prompt):
                seq = self._table.promote(aside)  # idle work got further towards this prompt
            done = self._prefill(seq, prompt, cancel, want_logits=True)
            result.prefill_ms = (time.perf_counter() - t0) * 1000
            if done is None:
                result.stop_reason = "cancelled"
                return result
            result.reused_tokens, result.encoded_tokens = done
            self.counters.tokens_reused += done[0]
            self.counters.tokens_encoded += done[1]
            t1 = time.perf_counter()
            self._generate(seq, request, cancel, result)
            result.generate_ms = (time.perf_counter() - t1) * 1000
            return result

    def _complete_aside(self, request: GenerationRequest, cancel: CancelToken,
                        result: GenerationResult) -> GenerationResult:
        """`complete` on a scratch copy of the file's best sequence (`_prefilled_scratch`):
        the file's sequences, and what the next keystroke reuses, are left as they were."""
        with self._lock:
            self.counters.calls += 1
            t0 = time.perf_counter()
            with self._prefilled_scratch(request, cancel) as prefilled:
                if prefilled is None:  # cancelled, or no room without evicting a file's cache
                    result.stop_reason = "cancelled" if cancel.cancelled else "error"
                    return result
                scratch, shared = prefilled
                result.reused_tokens = shared
                result.encoded_tokens = len(request.tokens) - shared
                result.prefill_ms = (time.perf_counter() - t0) * 1000
                t1 = time.perf_counter()
                self._generate(scratch, replace(request, speculation="off"), cancel, result)
                result.generate_ms = (time.perf_counter() - t1) * 1000
                return result

    @contextlib.contextmanager
    def _prefilled_scratch(self, request: GenerationRequest,
                           cancel: CancelToken) -> Iterator[tuple[KVSequence, int] | None]:
        """Under the lock: a scratch sequence holding the request's prompt, with the last
        prompt token's logits, and how many tokens it shares with the file's cache; None when
        cancelled or there is no room for the prompt and max_tokens without evicting a file's
        cache. It starts as a copy of the best held prefix (`llama_memory_seq_cp` shares the
        cells, nothing is recomputed) and is removed on exit."""
        prompt = request.tokens
        self._table.acquire(request.key)  # (restored from disk, if need be)
        scratch = self._table.scratch(request.key)  # (may drop an aside: look at them after)
        try:
            source = max(self._table.held(request.key),
                         key=lambda s: common_prefix_length(s.tokens, prompt))
            # The last prompt token is decoded again: its logits choose the first token.
            shared = min(common_prefix_length(source.tokens, prompt), len(prompt) - 1)
            self._table.copy_prefix(source, scratch, prompt[:shared])
            if (not self._table.has_room(len(prompt) - shared + request.max_tokens)
                    or not self._decode(scratch, prompt[shared:], True, cancel, abortable=True)):
                yield None
                return
            self.counters.tokens_encoded += len(prompt) - shared
            self.counters.tokens_reused += shared
            yield scratch, shared
        finally:
            self._table.release(scratch)

    def _generate(self, seq: KVSequence, request: GenerationRequest, cancel: CancelToken,
                  result: GenerationResult, first: int | None = None) -> None:
        """Greedy decoding, token by token as far as every rule is concerned; with `first`,
        that token is the first one instead of the greedy choice (an alternative).

        With speculation, a step that needs the next logits decodes the chosen token together
        with a draft of what may follow, with logits for each; while the draft agrees with the
        tokens greedy decoding picks from those logits, the next logits are already there.
        At the first disagreement the rest of the draft leaves the KV cache: output, stop
        rules, healing, max_tokens and cancellation are exactly those of a plain step each.
        """
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        heal = request.heal.encode("utf-8")
        rules = TextRules(request)
        drafter = self._drafter(request)
        history = TokenHistory(seq.tokens, request.max_tokens) if drafter is not None else None
        pending: list[int] = []  # the last decode's tokens: the chosen token, then its draft
        kind = ""  # where that draft came from
        base = 0  # where `pending` starts in the sequence
        row = -1  # the logits row of the last decode that predicts the next token
        for step in range(request.max_tokens):
            if cancel.cancelled:
                result.stop_reason = "cancelled"
                break
            if step == 0 and first is not None:
                token, lead = first, np.inf
            else:
                token, lead = self._pick(row, heal, request.heal_code, gap=row >= 0)
            if lead < self.near_tie:  # a near-tie in batched logits: decide as a plain step
                self._verified(result, kind, len(pending) - 1, row, judged_all=False)
                self._table.truncate(seq, base + row)
                pending, base, row = pending[row : row + 1], base + row, -1
                if not self._decode(seq, pending, True, cancel, abortable=False):
                    result.stop_reason = "cancelled"
                    break
                self.counters.generation_decodes += 1
                self.counters.near_ties += 1
                token, _ = self._pick(row, heal, request.heal_code)
            if self._stop_mask[token]:
                result.stop_reason = "eog"
                break
            piece = self._pieces[token]
            heal = heal[len(piece):] if heal.startswith(piece) else b""
            if step == 0:
                result.first_token = token
            result.generated_tokens += 1
            self.counters.tokens_generated += 1
            if history is not None:
                history.append(token)
            reason = rules.feed(decoder.decode(piece))
            if reason is not None:
                result.stop_reason = reason
                break
            if step == request.max_tokens - 1:
                result.stop_reason = "max_tokens"
                break
            if 0 <= row < len(pending) - 1 and pending[row + 1] == token:
                row += 1  # the draft guessed this token: its logits are computed already
                continue
            if row >= 0:  # the draft ends here: accepted up to `row`, the rest leaves the KV
                self._verified(result, kind, len(pending) - 1, row, judged_all=True)
                self._table.truncate(seq, base + row + 1)
            draft = self._draft(drafter, history, request.max_tokens - step - 2)
            pending, kind, base = [token, *draft.tokens], draft.kind, len(seq.tokens)
            started = time.perf_counter()
            if not self._decode(seq, pending, len(pending) if draft.tokens else True, cancel,
                                abortable=False):
                result.stop_reason = "cancelled"
                row = -1
                break
            if drafter is not None:  # what each size of decode costs here sizes the drafts
                self.draft_policy.costs.observe(len(pending), time.perf_counter() - started)
            self.counters.generation_decodes += 1
            row = 0 if draft.tokens else -1
        if row >= 0:  # stopped inside a draft: its unjudged rest leaves the KV
            self._verified(result, kind, len(pending) - 1, row, judged_all=False)
            self._table.truncate(seq, base + row + 1)
        if history is not None:
            self._remember(request.key, history)
        result.text = rules.text

    def _first_tokens(self, heal: bytes, heal_code: bool, count: int) -> list[int]:
        """From the last decode's logits: the `count` most likely first tokens after the greedy
        one, among those that keep the healed text (as `_pick` chooses) and are at least
        MIN_ALTERNATIVE_PROBABILITY likely among them; never an end or control token."""
        logits = np.ctypeslib.as_array(llama_cpp.llama_get_logits_ith(self._ctx, -1),
                                       shape=(self.n_vocab,))
        allowed = self._heal_candidates(heal, heal_code) if heal else None
        if allowed is not None and allowed.size == 0:
            allowed = None  # as `_pick` does
        ids = allowed if allowed is not None else np.arange(self.n_vocab)
        values = logits[ids]
        greedy = int(np.argmax(values))  # the same choice `_pick` makes
        probabilities = np.exp(values.astype(np.float64) - float(values[greedy]))
        probabilities /= probabilities.sum()
        # The best few in order (a few stop tokens may come first), without sorting them all.
        best = min(len(values), count + 64)
        top = np.argpartition(-values, best - 1)[:best]
        order = top[np.argsort(-values[top], kind="stable")]
        picks: list[int] = []
        for index in order:
            if len(picks) == count or probabilities[index] < MIN_ALTERNATIVE_PROBABILITY:
                break
            token = int(ids[index])
            if index != greedy and not self._stop_mask[token]:
                picks.append(token)
        return picks

    def alternatives(self, request: GenerationRequest, count: int,
                     cancel: CancelToken) -> list[GenerationResult]:
        """Other suggestions for the prompt (see `Engine.alternatives`).

        They are computed in a scratch sequence of their own: it starts as a copy of the
        prompt's cached prefix (`llama_memory_seq_cp` shares the cells, nothing is
        recomputed), decodes the rest of the prompt for the first-step logits, then each
        alternative in turn from the prompt's end, its generated cells removed after it; the
        scratch sequence is removed at the end. The file's sequences are never written: the
        next keystroke finds what the plain request left.
        """
        prompt = request.tokens
        if count <= 0 or not prompt:
            return []
        results: list[GenerationResult] = []
        with self._lock:
            self.counters.alternative_calls += 1
            with self._prefilled_scratch(request, cancel) as prefilled:
                if prefilled is None:
                    return []  # cancelled, or no room: not worth evicting a file's cache
                scratch, shared = prefilled
                firsts = self._first_tokens(request.heal.encode("utf-8"), request.heal_code,
                                            count)
                budget = (None if request.deadline is None
                          else request.deadline - time.monotonic())
                texts: set[str] = set()
                for token in firsts:
                    if cancel.cancelled:
                        break
                    self._table.truncate(scratch, len(prompt))
                    deadline = None if budget is None else time.monotonic() + budget
                    # Plain greedy steps: drafting from a previous suggestion is for the
                    # primary (and must not replace what `_remember` keeps for it).
                    alt = replace(request, speculation="off", deadline=deadline)
                    result = GenerationResult(text="", prompt_tokens=len(prompt),
                                              reused_tokens=shared)
                    started = time.perf_counter()
                    self._generate(scratch, alt, cancel, result, first=token)
                    result.generate_ms = (time.perf_counter() - started) * 1000
                    self.counters.alternative_tokens += result.generated_tokens
                    if result.stop_reason == "cancelled":
                        break
                    produced = result.text[len(request.heal):]
                    if produced.strip() and result.text not in texts:
                        texts.add(result.text)
                        results.append(result)
        return results

    def _pick(self, row: int, heal: bytes, heal_code: bool,
              gap: bool = False) -> tuple[int, float]:
        """The greedy token from a logits row (among those that keep the healed text, while
        any remains), and with `gap` how far it leads the runner-up (else infinity)."""
        logits_ptr = llama_cpp.llama_get_logits_ith(self._ctx, row)
        logits = np.ctypeslib.as_array(logits_ptr, shape=(self.n_vocab,))
        allowed = self._heal_candidates(heal, heal_code) if heal else None
        if allowed is not None and allowed.size == 0:
            allowed = None  # cannot happen with a byte-level vocabulary; then heal nothing
        if allowed is not None:
            logits = logits[allowed]
        best = int(np.argmax(logits))
        lead = _runner_up_gap(logits, best) if gap else np.inf
        return (int(allowed[best]) if allowed is not None else best), lead

    # ------------------------------------------------------------------ speculation

    def _drafter(self, request: GenerationRequest) -> Drafter | None:
        mode = resolve_mode(request.speculation, self.draft_model is not None)
        if mode == "off":
            return None
        if mode == "draft" and self.draft_model is not None:
            return self.draft_model(request)
        extra = [np.asarray(c, dtype=np.int32) for c in request.draft_context if c]
        return PromptLookup(previous=self._previous.get(request.key), extra=extra)

    def _draft(self, drafter: Drafter | None, history: TokenHistory | None, room: int) -> Draft:
        """The draft to verify with the next decode (none: a plain step). `room` is how many
        more tokens max_tokens lets the verify step yield beyond the model's own next one."""
        limit = min(room, self.draft_policy.max_draft, self.n_batch - 1)
        if drafter is None or history is None or limit <= 0:
            return Draft([], "")
        draft = drafter.propose(history, limit)
        if draft is None or not draft.tokens:
            return Draft([], "")
        length = self.draft_policy.length(draft.kind, len(draft.tokens))
        return Draft(draft.tokens[:length], draft.kind)

    def _verified(self, result: GenerationResult, kind: str, proposed: int, accepted: int,
                  judged_all: bool) -> None:
        """Count a verified draft: `accepted` of its `proposed` tokens, in a row."""
        result.verify_steps += 1
        result.draft_tokens += proposed
        result.accepted_tokens += accepted
        self.counters.drafts_verified += 1
        self.counters.draft_tokens += proposed
        self.counters.draft_accepted += accepted
        self.draft_policy.record(kind, proposed, accepted, judged_all)

    def _remember(self, key: str, history: TokenHistory) -> None:
        """Keep this suggestion (with the prompt tokens just before it) to draft from when the
        same spot is asked again, or the prompt has grown by part of it."""
        if history.size == history.prompt_size:
            return
        start = max(0, history.prompt_size - PREVIOUS_TAIL)
        self._previous[key] = history.tokens[start : history.size].copy()
        self._previous.move_to_end(key)
        while len(self._previous) > 4 * self.slots:
            self._previous.popitem(last=False)

    def forget(self, key: str) -> None:
        with self._lock:
            self._previous.pop(key, None)
            self._table.forget(key)

    def persist(self, key: str | None = None) -> int:
        """Write dirty sequences (or one) to the disk store; returns how many were saved."""
        with self._lock:
            saved = 0
            for seq in list(self._table.files.values()):
                if (key is None or seq.key == key) and seq.dirty and self._save(seq):
                    saved += 1
            notice = self.kv_store.take_notice() if self.kv_store is not None else None
            if notice is not None:
                raise PersistenceError(notice)
            return saved

    def cached_prefix(self, key: str, tokens: list[int]) -> int:
        """How many leading tokens of a prompt this file's KV sequences already hold, a
        sequence saved on disk included: it is restored first (the prompt chosen for a
        reopened file must be the one its restored cache holds, not a cold file's)."""
        with self._lock:
            self._table.acquire(key)
            return self._table.cached_prefix(key, tokens)

    def cached_tokens(self, key: str) -> list[int]:
        seq = self._table.files.get(key)
        return list(seq.tokens) if seq else []

    # ------------------------------------------------------------------ the model file

    def model_changed(self) -> str | None:
        if self._stale is not None:
            return self._stale
        fd = self._model_fd
        if fd is None:
            return None
        if file_stamp(os.fstat(fd)) != self._loaded_stamp:
            return f"the model file {self.model_path} was rewritten on disk while in use"
        named = path_stamp(self.model_path)
        if named is not None and named != self._loaded_stamp:
            return f"the model file {self.model_path} was replaced on disk"
        return None  # unchanged, or removed (what is loaded still works; nothing to reload)

    def _check_mapping(self) -> None:
        """Raise ModelFileChanged, now and from then on, once the mapped file was rewritten:
        its pages may be gone, and touching them is a SIGBUS."""
        if self._stale is None and self._model_fd is not None and (
                file_stamp(os.fstat(self._model_fd)) != self._loaded_stamp):
            self._stale = (f"the model file {self.model_path} was rewritten on disk while in "
                           "use; its weights are no longer used until it is loaded again")
            log.warning("%s", self._stale)
        if self._stale is not None:
            raise ModelFileChanged(self._stale)

    def _close_model_file(self) -> None:
        if self._model_fd is not None:
            os.close(self._model_fd)
            self._model_fd = None

    def describe(self) -> dict[str, object]:
        asides = self._table.asides
        return {
            "backend": "llama.cpp (in process)",
            "path": str(self.model_path),
            "weights": "memory-mapped" if self.mapped else "in memory",
            "device": _device(self.n_gpu_layers),
            "threads": self.n_threads,
            "threadPolicy": self.threads.describe(),
            # Repacked weights (faster), off in a llama.cpp build whose AMX kernels crash.
            "cpuExtraBuffers": self.extra_buffer_types,
            "contextSize": self.n_ctx,
            "slots": self.slots,
            "cellsInUse": self._table.cells_in_use(),
            # Speculation: recent acceptance of each kind of draft (source, n-gram length) and
            # what a verify step of each size costs, relative to a single-token step.
            "speculation": self.draft_policy.describe(),
            "sequences": [
                {"uri": s.key, "tokens": len(s.tokens),
                 "asideTokens": len(aside.tokens) if (aside := asides.get(s.key)) else 0}
                for s in self._table.files.values()
            ],
        }

    def close(self) -> None:
        with self._lock:
            if getattr(self, "_ctx", None):
                llama_cpp.llama_batch_free(self._batch)
                llama_cpp.llama_free(self._ctx)
                self._ctx = None
            if getattr(self, "_model", None):
                llama_cpp.llama_model_free(self._model)
                self._model = None
            if (kv_store := getattr(self, "kv_store", None)) is not None:
                kv_store.close()  # its SQLite handle: a settings reload makes a new store
            if getattr(self, "_model_fd", None) is not None:
                self._close_model_file()


def _further(a: KVSequence, b: KVSequence, prompt: list[int]) -> bool:
    """`a` holds more of `prompt` than `b` does."""
    return common_prefix_length(a.tokens, prompt) > common_prefix_length(b.tokens, prompt)


def _fits_in_memory(size: int) -> bool:
    """Whether the weights may be read into the process's memory rather than mapped: at most
    half the memory available now (a large model on a small machine stays mapped)."""
    available = None
    try:
        with open("/proc/meminfo", encoding="ascii") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    available = int(line.split()[1]) * 1024
                    break
    except (OSError, ValueError):
        pass
    if available is None:
        try:  # no /proc (macOS): a quarter of the physical memory
            available = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") // 2
        except (OSError, ValueError, AttributeError):
            return False
    return size <= available // 2


def _set_load_mode(mparams: llama_cpp.llama_model_params, mapped: bool) -> None:
    """Map the weights, or read them into memory (llama.cpp's load_mode; use_mmap before)."""
    if hasattr(mparams, "load_mode"):
        mparams.load_mode = (llama_cpp.LLAMA_LOAD_MODE_MMAP if mapped
                             else llama_cpp.LLAMA_LOAD_MODE_NONE)
        if not mapped and hasattr(mparams, "lazy_mode"):
            mparams.lazy_mode = llama_cpp.LLAMA_LAZY_MODE_OFF  # lazy reads need the mapping
    elif hasattr(mparams, "use_mmap"):
        mparams.use_mmap = mapped


def _device(n_gpu_layers: int) -> str:
    if n_gpu_layers == 0:
        return "cpu"
    return "gpu (all layers)" if n_gpu_layers < 0 else f"gpu ({n_gpu_layers} layers)"


def _runner_up_gap(values: np.ndarray, best: int) -> float:
    """How far the best value is ahead of the next best (infinite when it is alone)."""
    others = max(values[:best].max(initial=-np.inf), values[best + 1 :].max(initial=-np.inf))
    return float(values[best] - others)
