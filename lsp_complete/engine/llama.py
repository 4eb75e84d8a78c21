"""In-process llama.cpp behind the `Engine` protocol: one context, one KV sequence per open
file, prefix reuse (a prompt's cached prefix kept, another file's shared opening borrowed), idle
work built aside, token healing, alternatives and lossless speculative decoding.

A thin façade over its parts: `llama_backend` loads the model and makes the context,
`model_file` watches the file loaded, `sequences` says which sequence holds what,
`persistence` saves and restores sequences through the disk store, `decoder` runs the decodes,
`vocabulary` chooses tokens from logits, a `generation.Generation` per request holds the
decoding loop and its draft bookkeeping, and `speculation` supplies the drafts. What is left
here is which sequence a request uses and what of its prompt is decoded.

Everything here runs on the scheduler's single worker thread; nothing else touches the context.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path

import llama_cpp

from lsp_complete.config import default_threads
from lsp_complete.engine.base import (
    CancelToken,
    EngineCounters,
    EngineError,
    GenerationRequest,
    GenerationResult,
    common_prefix_length,
)
from lsp_complete.engine.decoder import Decoder
from lsp_complete.engine.generation import Generation
from lsp_complete.engine.kvstore import KVStore, model_identity
from lsp_complete.engine.llama_backend import (
    extra_buffer_types_safe,
    init_backend,
    load_model,
    new_context,
    token_piece,
    vocab_pieces,
    vocab_tokenize,
)
from lsp_complete.engine.model_file import ModelFile, fits_in_memory
from lsp_complete.engine.persistence import SequencePersistence
from lsp_complete.engine.sequences import KVSequence, SequenceTable
from lsp_complete.engine.speculation import (
    NEAR_TIE,
    Drafter,
    DraftPolicy,
    PreviousSuggestions,
    drafter_for,
)
from lsp_complete.engine.threads import ThreadPolicy
from lsp_complete.engine.vocabulary import Vocabulary

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
        cancelled: Callable[[], bool] = lambda: False,
    ) -> None:
        init_backend()
        # llama.cpp asserts (aborting the process) on a context smaller than one batch or
        # more sequences than a batch has tokens; say so instead.
        if 0 < n_ctx < n_batch or 2 * max(1, slots) > min(n_batch, n_ubatch):
            raise EngineError(
                f"a context of {n_ctx} tokens with {slots} slots cannot be made: at least "
                f"{n_batch} tokens and at most {min(n_batch, n_ubatch) // 2} slots")
        self.model_path = Path(model_path)
        self.model_file = ModelFile(self.model_path)
        # Weights memory-mapped from a file that is then truncated or rewritten in place (`cp
        # new.gguf model.gguf`) crash the process with SIGBUS at the next decode: read them
        # into memory when they fit (None: decide by size), and guard the mapping otherwise.
        self.mapped = not fits_in_memory(self.model_file.size) if mmap is None else mmap
        self.n_threads = n_threads or default_threads()
        # On a GPU the CPU threads matter little and llama.cpp's own choice stands.
        self.threads = ThreadPolicy(self.n_threads, thread_policy if not n_gpu_layers else "fixed")
        self.n_gpu_layers = n_gpu_layers
        self.n_batch = n_batch
        self.slots = max(1, slots)
        self.model_id = model_id or f"{self.model_path.name}:{self.model_path.stat().st_size}"
        self.counters = EngineCounters()
        self._lock = threading.RLock()
        # Speculation: how long drafts are (learned from acceptance, across requests), the last
        # suggestion per file (prompt tail + output: a re-request drafts from it), and the hook
        # for a draft model (mode "draft": a Drafter per request; none is built in yet).
        self.draft_policy = DraftPolicy()
        self.near_tie = NEAR_TIE
        self._previous = PreviousSuggestions(limit=4 * self.slots)
        self.draft_model: Callable[[GenerationRequest], Drafter] | None = None

        self.extra_buffer_types = extra_buffer_types_safe()
        self._model = load_model(self.model_path, n_gpu_layers, self.mapped,
                                 self.extra_buffer_types, cancelled)
        if self._model is None:
            self.model_file.close()
            if cancelled():
                raise EngineError(f"loading {self.model_path} was cancelled")
            raise EngineError(
                f"llama.cpp could not load {self.model_path}: the file is not a usable GGUF model "
                "(truncated, corrupt, or an architecture this llama.cpp does not know). "
                "Re-run `lsp-complete models pull NAME` or pick another model."
            )
        vocab = llama_cpp.llama_model_get_vocab(self._model)
        self._llama_vocab = vocab
        self.n_vocab = llama_cpp.llama_vocab_n_tokens(vocab)
        self.n_ctx_train = llama_cpp.llama_model_n_ctx_train(self._model)
        # Each file may hold a second, "aside" sequence while idle work builds a new prompt.
        ctx = new_context(self._model, n_ctx, n_batch, n_ubatch, 2 * self.slots, self.n_threads)
        if ctx is None:
            llama_cpp.llama_model_free(self._model)
            self._model = None
            self.model_file.close()
            raise EngineError(
                f"llama.cpp could not create a context of {n_ctx} tokens for {self.model_path} "
                "(out of memory?). Lower contextSize."
            )
        self.n_ctx = llama_cpp.llama_n_ctx(ctx)
        # Disk entries are bound to this exact file and to what shapes a sequence's state: an
        # entry saved under other settings, another llama.cpp or another model is a miss.
        self.persistence = SequencePersistence(kv_store, model_identity(
            self.model_path, self.model_id, n_ctx=n_ctx, n_seq=2 * self.slots,
            llama_cpp=getattr(llama_cpp, "__version__", "?"),
        ), ctx, self.n_vocab, self.counters)
        self._table = SequenceTable(llama_cpp.llama_get_memory(ctx), self.slots, self.n_ctx,
                                    self.counters, self.persistence.save,
                                    lambda seq: self.persistence.restore(seq, self._table))
        self.decoder = Decoder(ctx, self._table, n_batch, self.n_vocab, self.threads,
                               self.n_threads, self.counters,
                               self.model_file.check_mapping if self.mapped else None)
        self.vocabulary = Vocabulary(*vocab_pieces(vocab))
        self.prefill_rate = self._measure_prefill()

    def _measure_prefill(self) -> float | None:
        """Prompt tokens per second on this machine, timed on one batch at load. It also pages
        the weights in, so that the first file's first suggestion does not pay for that."""
        tokens = (self.tokenize(_CALIBRATION_TEXT) * 8)[: self.n_batch]
        scratch = self._table.scratch("")
        try:
            started = time.perf_counter()
            if not self.decoder.decode(scratch, tokens, 0, CancelToken(), abortable=False):
                return None
            return len(tokens) / max(time.perf_counter() - started, 1e-6)
        except EngineError:
            return None
        finally:
            self._table.release(scratch)

    # ------------------------------------------------------------------ vocabulary

    def piece(self, token: int) -> bytes:
        return self.vocabulary.piece(token)

    def tokenize(self, text: str, special: bool = False) -> list[int]:
        return vocab_tokenize(self._llama_vocab, text, special)

    def detokenize(self, tokens: list[int]) -> str:
        return self.vocabulary.detokenize(tokens)

    @property
    def begins_a_token(self) -> Callable[[str], bool]:
        return self.vocabulary.begins_a_token

    def token_text(self, token: int) -> str:
        """Text of a token including special ones (for templates and diagnostics)."""
        return token_piece(self._llama_vocab, token, True).decode("utf-8", errors="replace")

    # ------------------------------------------------------------------ prompts

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
        if not self.decoder.decode(seq, todo, want_logits, cancel, abortable=True):
            return None
        if len(todo) >= PREFILL_SAMPLE_TOKENS:  # keep the measured speed current
            rate = len(todo) / max(time.perf_counter() - started, 1e-6)
            self.prefill_rate = rate if self.prefill_rate is None else (
                0.7 * self.prefill_rate + 0.3 * rate)
        return reused, len(todo)

    # ------------------------------------------------------------------ public API

    def warm(self, key: str, segments: list[list[int]], cancel: CancelToken,
             extend_only: bool = False) -> int:
        """Encode a prompt ahead of time (idle time); returns tokens encoded.

        A prompt that extends what the file's sequence holds is encoded into it. One that
        would discard part of it is built in the file's aside sequence (starting from the
        prefix they share, copied without recomputing), which replaces the file's sequence
        only once complete: a keystroke that interrupts it still finds its old prompt intact.
        With `extend_only`, such a prompt is not encoded at all. An interrupted build goes on
        from where it stopped at the next call.
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
            done = self._prefill(seq, prompt, cancel, want_logits=False)
            if done is None:
                return 0
            if seq.aside:
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
                    or not self.decoder.decode(scratch, prompt[shared:], True, cancel,
                                               abortable=True)):
                yield None
                return
            self.counters.tokens_encoded += len(prompt) - shared
            self.counters.tokens_reused += shared
            yield scratch, shared
        finally:
            self._table.release(scratch)

    def _generate(self, seq: KVSequence, request: GenerationRequest, cancel: CancelToken,
                  result: GenerationResult, first: int | None = None) -> None:
        """Greedy decoding into `result` from the prompt's last logits (see `Generation`);
        with `first`, that token is the first one instead of the greedy choice."""
        generation = Generation(self.decoder, self.vocabulary, self.counters, self.draft_policy,
                                self.near_tie, seq, request, cancel, result,
                                drafter_for(request, self._previous, self.draft_model))
        generation.run(first)
        if generation.history is not None:
            self._previous.remember(request.key, generation.history)

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
                firsts = self.vocabulary.first_tokens(
                    self.decoder.logits(-1), request.heal.encode("utf-8"), request.heal_code,
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

    # ------------------------------------------------------------------ files

    def forget(self, key: str) -> None:
        with self._lock:
            self._previous.forget(key)
            self._table.forget(key)

    def persist(self, key: str | None = None) -> int:
        """Write dirty sequences (or one) to the disk store; returns how many were saved."""
        with self._lock:
            return self.persistence.save_dirty(self._table, key)

    def cached_prefix(self, key: str, tokens: list[int]) -> int:
        """How many leading tokens of a prompt this file's KV sequences already hold, a
        sequence saved on disk included: it is restored first (the prompt chosen for a
        reopened file must be the one its restored cache holds, not a cold file's)."""
        with self._lock:
            self._table.acquire(key)
            return self._table.cached_prefix(key, tokens)

    def restore(self, key: str) -> bool:
        with self._lock:
            table = self._table
            if (key in table.files or len(table.files) >= table.slots
                    or not self.persistence.holds(key)):
                return False
            return bool(table.acquire(key).tokens)

    def cached_tokens(self, key: str) -> list[int]:
        seq = self._table.files.get(key)
        return list(seq.tokens) if seq else []

    # ------------------------------------------------------------------ the model file

    def model_changed(self) -> str | None:
        return self.model_file.changed()

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
            if (decoder := getattr(self, "decoder", None)) is not None:
                decoder.close()
            if getattr(self, "_model", None):
                llama_cpp.llama_model_free(self._model)
                self._model = None
            if (persistence := getattr(self, "persistence", None)) is not None:
                persistence.close()
            if (model_file := getattr(self, "model_file", None)) is not None:
                model_file.close()


def _further(a: KVSequence, b: KVSequence, prompt: list[int]) -> bool:
    """`a` holds more of `prompt` than `b` does."""
    return common_prefix_length(a.tokens, prompt) > common_prefix_length(b.tokens, prompt)



def _device(n_gpu_layers: int) -> str:
    if n_gpu_layers == 0:
        return "cpu"
    return "gpu (all layers)" if n_gpu_layers < 0 else f"gpu ({n_gpu_layers} layers)"


