"""Baselines (a) and (b): the standard PSM layout run directly on llama-cpp-python.

Both build the prompt llama-server builds for `/infill` with its usual windows:
`<fim_prefix>` + 60 lines before + the cursor line's prefix + `<fim_suffix>` + the rest of the
line + 20 lines after + `<fim_middle>`, decode greedily and stop at the first newline.

(a) clears the KV cache before every request, so the whole prompt is encoded every time.
(e), the multi-line reference: (a), decoding on to the model's own end of the middle (its
end-of-text or FIM token) instead of the first newline, within BLOCK_MAX_TOKENS.
(b) keeps one sequence and lets `Llama.generate` reuse the longest common token prefix with it,
which is what llama-server's `cache_prompt` does.  Because the cursor line sits *before* the
suffix in PSM, every keystroke still re-encodes the rest of the line plus the suffix window.
(o), the cross-file oracle: (b) given, before its prompt, what the document's path needs from
other files (`context`; the cross-file lines' imported definitions).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from lsp_complete.bench.records import Completion, read_hwm_mb, reset_hwm
from lsp_complete.engine.base import common_prefix_length
from lsp_complete.models import FimTemplate

N_BATCH = 512
LINES_BEFORE = 60
LINES_AFTER = 20
BLOCK_MAX_TOKENS = 256  # (e): as he-block's servers are given (ab.scenarios.BLOCK_OPTIONS)


def fim_tokens(spec: Any) -> FimTemplate | None:
    """The FIM markers of a models.toml entry (None: a model without them)."""
    return getattr(spec, "fim", None)


def psm_windows(text: str, offset: int) -> tuple[str, str]:
    """(prefix, suffix) around the cursor: whole-line windows plus the split cursor line."""
    line_start = text.rfind("\n", 0, offset) + 1
    line_end = text.find("\n", offset)
    line_end = len(text) if line_end < 0 else line_end
    above = text[:line_start].split("\n")[:-1][-LINES_BEFORE:] if line_start else []
    below = text[line_end + 1 :].split("\n")[:LINES_AFTER] if line_end < len(text) else []
    prefix = "".join(line + "\n" for line in above) + text[line_start:offset]
    suffix = text[offset:line_end] + "".join("\n" + line for line in below)
    return prefix, suffix


def generate_reuse(cached: list[int], tokens: list[int], requires_eval: bool) -> int:
    """Tokens kept from the cached sequence, by `Llama.generate(reset=True)`'s rule (0.3.36):
    a full-prompt hit with live logits samples at once; otherwise the longest common prefix,
    minus one token when the prompt is entirely cached (to refresh logits)."""
    lcp = common_prefix_length(cached, tokens)
    if lcp == len(tokens) == len(cached) and not requires_eval:
        return len(tokens)
    return lcp - 1 if lcp == len(tokens) else lcp


class LlamaBaseline:
    """Baseline (a) (`reuse=False`) or (b) (`reuse=True`) on llama.cpp in this process;
    `to_end`: (e), the middle the model writes to its own end, not one line.

    A plain greedy loop over llama.cpp's C API on the engine's loader (`llama_backend`), not
    `llama_cpp.Llama`: that class turns on the extra CPU buffer types, which crash on a CPU
    with AMX (see `extra_buffer_types_safe`)."""

    def __init__(
        self,
        model_path: str,
        fim: FimTemplate | None,
        stop: Sequence[str],
        threads: int,
        max_tokens: int,
        reuse: bool,
        n_ctx: int = 4096,
        to_end: bool = False,
        context: Callable[[str], tuple[str, bool]] | None = None,
    ) -> None:
        import llama_cpp

        from lsp_complete.engine import llama_backend

        self.reuse = reuse
        self.to_end = to_end
        self.context = context  # a path's (text, special) before the prompt; None: nothing
        self.max_tokens = max(max_tokens, BLOCK_MAX_TOKENS) if to_end else max_tokens
        self.fim = fim
        self.stop_strings = tuple(s for s in stop if s)
        reset_hwm()  # the peak reported is this engine's, not an earlier one's
        llama_backend.init_backend()
        model = llama_backend.load_model(Path(model_path), 0, mapped=True,
                                         extra_buffer_types=llama_backend.extra_buffer_types_safe())
        if model is None:
            raise RuntimeError(f"llama.cpp could not load {model_path}")
        ctx = llama_backend.new_context(model, n_ctx, N_BATCH, N_BATCH, 1, threads)
        if ctx is None:
            llama_cpp.llama_model_free(model)
            raise RuntimeError(f"llama.cpp could not make a context of {n_ctx} for {model_path}")
        self._llama = llama_cpp
        self._backend = llama_backend
        self._model, self._ctx, self._n_ctx = model, ctx, n_ctx
        self._vocab = llama_cpp.llama_model_get_vocab(model)
        self._n_vocab = llama_cpp.llama_vocab_n_tokens(self._vocab)
        self._memory = llama_cpp.llama_get_memory(ctx)
        self._batch = llama_cpp.llama_batch_init(N_BATCH, 0, 1)
        self._cached: list[int] = []  # the tokens whose KV cells the sequence holds
        markers = [fim.prefix, fim.suffix, fim.middle] if fim else []
        self._stop_ids = self._special_ids([*markers, *stop])
        add_bos = llama_cpp.llama_vocab_get_add_bos(self._vocab)
        self._bos = [llama_cpp.llama_vocab_bos(self._vocab)] if add_bos else []

    def _special_ids(self, texts: Sequence[str]) -> set[int]:
        """Ids of stop strings that are single special tokens: they render as b"" otherwise."""
        ids: set[int] = set()
        for text in texts:
            toks = self._tok(text, special=True)
            if len(toks) == 1:
                ids.add(toks[0])
        return ids

    def _tok(self, text: str, special: bool = False) -> list[int]:
        if not text:
            return []
        return self._backend.vocab_tokenize(self._vocab, text, special)

    def prompt_tokens(self, text: str, offset: int, path: str = "") -> list[int]:
        prefix, suffix = psm_windows(text, offset)
        fim = self.fim
        tokens = self._bos + (self._tok(*self.context(path)) if self.context else [])
        if fim is None:  # a prefix-only model: plain continuation
            tokens = tokens + self._tok(prefix)
        else:
            parts = [(fim.prefix, True), (prefix, False), (fim.suffix, True), (suffix, False)]
            if fim.order == "spm":
                parts = parts[2:] + parts[:2]
            for text_part, special in [*parts, (fim.middle, True)]:
                tokens = tokens + self._tok(text_part, special=special)
        # Keep room for generation; llama-server truncates the prefix the same way.
        room = self._n_ctx - self.max_tokens - 1
        return tokens[-room:] if len(tokens) > room else tokens

    def complete(self, text: str, offset: int, path: str = "") -> Completion:
        start = time.perf_counter()
        tokens = self.prompt_tokens(text, offset, path)
        # (b) keeps the longest common prefix, as llama-server's cache_prompt; (a) nothing.
        reused = generate_reuse(self._cached, tokens, requires_eval=True) if self.reuse else 0
        self._llama.llama_memory_seq_rm(self._memory, 0, reused, -1)
        self._cached = self._cached[:reused]
        suggestion, generated = self._generate(tokens[reused:])
        latency = (time.perf_counter() - start) * 1000
        return Completion(
            text=suggestion,
            latency_ms=latency,
            prompt_tokens=len(tokens),
            encoded_tokens=len(tokens) - reused,
            generated_tokens=generated,
        )

    def _decode(self, tokens: list[int]) -> None:
        """Append `tokens` to the sequence, with logits for the last."""
        batch = self._batch
        for start in range(0, len(tokens), N_BATCH):
            chunk = tokens[start : start + N_BATCH]
            base = len(self._cached)
            for i, token in enumerate(chunk):
                batch.token[i] = token
                batch.pos[i] = base + i
                batch.n_seq_id[i] = 1
                batch.seq_id[i][0] = 0
                batch.logits[i] = int(start + i == len(tokens) - 1)
            batch.n_tokens = len(chunk)
            status = self._llama.llama_decode(self._ctx, batch)
            if status != 0:
                raise RuntimeError(f"llama_decode failed with status {status}")
            self._cached.extend(chunk)

    def _next_token(self) -> int:
        import numpy as np

        logits = np.ctypeslib.as_array(self._llama.llama_get_logits_ith(self._ctx, -1),
                                       shape=(self._n_vocab,))
        return int(np.argmax(logits))

    def _generate(self, tokens: list[int]) -> tuple[str, int]:
        """Greedy decode of one line (or to the model's end, `to_end`) after the prompt's
        `tokens` not yet in the cache; returns (text, tokens generated)."""
        out = bytearray()
        generated = 0
        self._decode(tokens)
        while True:
            token = self._next_token()
            if token in self._stop_ids or self._llama.llama_vocab_is_eog(self._vocab, token):
                break
            generated += 1
            out += self._backend.token_piece(self._vocab, token, special=False)
            ended = b"\n" in out and not self.to_end
            if ended or generated >= self.max_tokens or self._hit_stop(out):
                break
            self._decode([token])
        text = bytes(out).decode("utf-8", errors="ignore")
        text = text.rstrip() if self.to_end else text.split("\n", 1)[0]
        for stop in self.stop_strings:
            text = text.split(stop, 1)[0]
        return text, generated

    def _hit_stop(self, out: bytearray) -> bool:
        return any(stop.encode() in out for stop in self.stop_strings)

    def peak_rss_mb(self) -> float | None:
        return read_hwm_mb()

    def close(self) -> None:
        self._llama.llama_batch_free(self._batch)
        self._llama.llama_free(self._ctx)
        self._llama.llama_model_free(self._model)
