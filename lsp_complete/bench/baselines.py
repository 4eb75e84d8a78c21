"""Baselines (a) and (b): the standard PSM layout run directly on llama-cpp-python.

Both build the prompt llama-server builds for `/infill` with its usual windows:
`<fim_prefix>` + 60 lines before + the cursor line's prefix + `<fim_suffix>` + the rest of the
line + 20 lines after + `<fim_middle>`, decode greedily and stop at the first newline.

(a) clears the KV cache before every request, so the whole prompt is encoded every time.
(b) keeps one sequence and lets `Llama.generate` reuse the longest common token prefix with it,
which is what llama-server's `cache_prompt` does.  Because the cursor line sits *before* the
suffix in PSM, every keystroke still re-encodes the rest of the line plus the suffix window.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from lsp_complete.bench.records import Completion, read_hwm_mb, reset_hwm

if TYPE_CHECKING:
    import numpy as np

    Tokens = Sequence[int] | np.ndarray  # llama_cpp.Llama keeps its input ids in an ndarray

LINES_BEFORE = 60
LINES_AFTER = 20


@dataclass(frozen=True)
class FimTokens:
    prefix: str
    suffix: str
    middle: str
    order: str = "psm"  # "spm": suffix first (Codestral)


def fim_tokens(spec: Any) -> FimTokens | None:
    """The FIM markers of a models.toml entry (None: a model without them)."""
    fim = getattr(spec, "fim", None)
    if fim is None:
        return None
    return FimTokens(fim.prefix, fim.suffix, fim.middle, getattr(fim, "order", "psm"))


def psm_windows(
    text: str, offset: int, before: int = LINES_BEFORE, after: int = LINES_AFTER
) -> tuple[str, str]:
    """(prefix, suffix) around the cursor: whole-line windows plus the split cursor line."""
    line_start = text.rfind("\n", 0, offset) + 1
    line_end = text.find("\n", offset)
    line_end = len(text) if line_end < 0 else line_end
    above = text[:line_start].split("\n")[:-1][-before:] if line_start else []
    below = text[line_end + 1 :].split("\n")[:after] if line_end < len(text) else []
    prefix = "".join(line + "\n" for line in above) + text[line_start:offset]
    suffix = text[offset:line_end] + "".join("\n" + line for line in below)
    return prefix, suffix


def common_prefix_len(a: Tokens, b: Sequence[int]) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


def generate_reuse(cached: Tokens, tokens: Sequence[int], requires_eval: bool) -> int:
    """Tokens `Llama.generate(reset=True)` (0.3.36) keeps from its cached sequence.

    Mirrors its rule: a full-prompt hit with live logits samples at once; otherwise it keeps the
    longest common prefix, minus one token when the prompt is entirely cached (to refresh logits).
    """
    lcp = common_prefix_len(cached, tokens)
    if lcp == len(tokens) == len(cached) and not requires_eval:
        return len(tokens)
    return lcp - 1 if lcp == len(tokens) else lcp


class LlamaBaseline:
    """Baseline (a) (`reuse=False`) or (b) (`reuse=True`) on one in-process `llama_cpp.Llama`."""

    def __init__(
        self,
        model_path: str,
        fim: FimTokens | None,
        stop: Sequence[str],
        threads: int,
        max_tokens: int,
        reuse: bool,
        n_ctx: int = 4096,
    ) -> None:
        import llama_cpp

        self.reuse = reuse
        self.max_tokens = max_tokens
        self.fim = fim
        self.stop_strings = tuple(s for s in stop if s)
        reset_hwm()  # the peak reported is this engine's, not an earlier one's
        self.llm = llama_cpp.Llama(
            model_path=model_path,
            n_ctx=n_ctx,
            n_threads=threads,
            n_threads_batch=threads,
            n_batch=512,
            verbose=False,
        )
        self._vocab = self.llm._model.vocab
        self._is_eog = llama_cpp.llama_vocab_is_eog
        markers = [fim.prefix, fim.suffix, fim.middle] if fim else []
        self._stop_ids = self._special_ids([*markers, *stop])
        self._bos = [self.llm.token_bos()] if self.llm._model.add_bos_token() else []

    def _special_ids(self, texts: Sequence[str]) -> set[int]:
        """Ids of stop strings that are single special tokens: they render as b"" otherwise."""
        ids: set[int] = set()
        for text in texts:
            if not text:
                continue
            toks = self.llm.tokenize(text.encode(), add_bos=False, special=True)
            if len(toks) == 1:
                ids.add(toks[0])
        return ids

    def _tok(self, text: str, special: bool = False) -> list[int]:
        if not text:
            return []
        return self.llm.tokenize(text.encode(), add_bos=False, special=special)

    def prompt_tokens(self, text: str, offset: int) -> list[int]:
        prefix, suffix = psm_windows(text, offset)
        fim = self.fim
        if fim is None:  # a prefix-only model: plain continuation
            tokens = self._bos + self._tok(prefix)
        else:
            parts = [(fim.prefix, True), (prefix, False), (fim.suffix, True), (suffix, False)]
            if fim.order == "spm":
                parts = parts[2:] + parts[:2]
            tokens = self._bos
            for text_part, special in [*parts, (fim.middle, True)]:
                tokens = tokens + self._tok(text_part, special=special)
        # Keep room for generation; llama-server truncates the prefix the same way.
        room = self.llm.n_ctx() - self.max_tokens - 1
        return tokens[-room:] if len(tokens) > room else tokens

    def complete(self, text: str, offset: int, path: str = "") -> Completion:
        start = time.perf_counter()
        tokens = self.prompt_tokens(text, offset)
        if self.reuse:
            reused = generate_reuse(self.llm._input_ids, tokens, self.llm._requires_eval)
        else:
            self.llm.reset()  # type: ignore[no-untyped-call]  # llama_cpp has no annotations
            self.llm._ctx.kv_cache_clear()  # type: ignore[no-untyped-call]
            reused = 0
        suggestion, generated = self._generate(tokens)
        latency = (time.perf_counter() - start) * 1000
        return Completion(
            text=suggestion,
            latency_ms=latency,
            prompt_tokens=len(tokens),
            encoded_tokens=len(tokens) - reused,
            generated_tokens=generated,
        )

    def _generate(self, tokens: list[int]) -> tuple[str, int]:
        """Greedy single-line decode; returns (text, tokens generated)."""
        out = bytearray()
        generated = 0
        gen = self.llm.generate(
            tokens, top_k=1, top_p=1.0, min_p=0.0, temp=0.0, repeat_penalty=1.0, reset=True
        )
        try:
            for token in gen:
                if token in self._stop_ids or self._is_eog(self._vocab, token):
                    break
                generated += 1
                out += self.llm._model.detokenize([token], special=False)
                if b"\n" in out or generated >= self.max_tokens or self._hit_stop(out):
                    break
        finally:
            gen.close()
        text = bytes(out).decode("utf-8", errors="ignore").split("\n", 1)[0]
        for stop in self.stop_strings:
            text = text.split(stop, 1)[0]
        return text, generated

    def _hit_stop(self, out: bytearray) -> bool:
        return any(stop.encode() in out for stop in self.stop_strings)

    def peak_rss_mb(self) -> float | None:
        return read_hwm_mb()

    def close(self) -> None:
        self.llm.close()
