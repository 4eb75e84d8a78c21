"""A model's vocabulary as the in-process engine decides with it: each token's bytes, which
tokens end a suggestion, which tokens token healing allows next, and the choices made from a
row of logits (the greedy token, how far it leads, the first tokens of alternatives).

Model-free: built from a plain list of pieces and a stop mask (`llama_backend.vocab_pieces`
reads them from a loaded model), so every rule here is testable without llama.cpp.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence

import numpy as np

from lsp_complete.engine.base import MIN_ALTERNATIVE_PROBABILITY

HEAL_CACHE_SIZE = 4096  # remembered healing constraints; cleared when full


class Vocabulary:
    def __init__(self, pieces: Sequence[bytes], stop: Sequence[bool] | np.ndarray) -> None:
        """`pieces[t]` is token t's bytes (special tokens: none); `stop[t]` says it ends a
        suggestion. Any end-of-generation, control (FIM markers, file separators) or empty
        token does: they must never reach the editor."""
        self.pieces = list(pieces)
        self.size = len(self.pieces)
        self.stop_mask = np.asarray(stop, dtype=bool) | np.array(
            [not p for p in self.pieces], dtype=bool)
        order = sorted((p, t) for t, p in enumerate(self.pieces) if p and not self.stop_mask[t])
        self._sorted_pieces = [p for p, _ in order]
        self._sorted_ids = np.array([t for _, t in order], dtype=np.int64)
        self._piece_ids: dict[bytes, list[int]] = {}
        for p, t in order:
            self._piece_ids.setdefault(p, []).append(t)
        self._heal_cache: dict[tuple[bytes, bool], np.ndarray] = {}
        self._code_starts: np.ndarray | None = None

    def piece(self, token: int) -> bytes:
        return self.pieces[token]

    def detokenize(self, tokens: Sequence[int]) -> str:
        """Text of tokens; special tokens give none."""
        return b"".join(self.pieces[t] for t in tokens).decode("utf-8", errors="replace")

    def is_stop(self, token: int) -> bool:
        return bool(self.stop_mask[token])

    def begins_a_token(self, text: str) -> bool:
        """Whether the bytes of some token (not a stop token) begin with `text`'s."""
        data = text.encode("utf-8")
        i = bisect.bisect_left(self._sorted_pieces, data)
        return i < len(self._sorted_pieces) and self._sorted_pieces[i].startswith(data)

    def heal_candidates(self, remaining: bytes, code: bool = False) -> np.ndarray:
        """Tokens that keep the output consistent with the healed text still to be produced.

        With `code`, a healed space (tab) must end in a token that carries code (" depth",
        "\tif"): one that goes on with more blanks is never the suggestion once the
        indentation is complete, and a model that writes one writes more. Or in a token of
        exactly that space (tab): the tokenizer splits it off before what cannot take it (a
        digit or a bracket, in Qwen2's pretokenizer and others), and the token after it must
        carry the code (`code_starts`); without it no line of the suggestion could begin with
        a number, nor a tab-indented one with `}`.
        """
        cached = self._heal_cache.get((remaining, code))
        if cached is not None:
            return cached
        lo = bisect.bisect_left(self._sorted_pieces, remaining)
        hi = bisect.bisect_left(self._sorted_pieces, remaining + b"\xff" * 32, lo)
        ids = [self._sorted_ids[lo:hi]]
        if code and remaining and not remaining.strip(b" \t"):
            pieces = self._sorted_pieces[lo:hi]
            ids = [ids[0][np.array([bool(p.strip()) or p == remaining for p in pieces],
                                   dtype=bool)]]
        for k in range(1, len(remaining)):
            ids.append(np.array(self._piece_ids.get(remaining[:k], []), dtype=np.int64))
        result = np.concatenate(ids)
        if len(self._heal_cache) > HEAL_CACHE_SIZE:
            self._heal_cache.clear()
        self._heal_cache[(remaining, code)] = result
        return result

    def code_starts(self) -> np.ndarray:
        """Tokens that begin with code (no space, tab or line break first): what follows
        healed spaces that a token of their own ended."""
        if self._code_starts is None:
            self._code_starts = np.array(
                [t for t, p in enumerate(self.pieces)
                 if p and not self.stop_mask[t] and p[:1] not in b" \t\r\n"], dtype=np.int64)
        return self._code_starts

    def _allowed(self, heal: bytes, heal_code: bool, code_next: bool = False
                 ) -> np.ndarray | None:
        """The tokens healing allows next (`code_next`: the healed spaces were just ended by a
        token of their own); None: any. No candidate at all cannot happen with a byte-level
        vocabulary; then nothing is healed."""
        if code_next:
            return self.code_starts()
        allowed = self.heal_candidates(heal, heal_code) if heal else None
        if allowed is not None and allowed.size == 0:
            return None
        return allowed

    def pick(self, logits: np.ndarray, heal: bytes, heal_code: bool, gap: bool = False,
             code_next: bool = False,
             probability: bool = False) -> tuple[int, float, float | None]:
        """The greedy token from a logits row (among those that keep the healed text, while
        any remains), with `gap` how far it leads the runner-up (else infinity), and with
        `probability` its probability among those tokens (how sure the model is of it)."""
        allowed = self._allowed(heal, heal_code, code_next)
        if allowed is not None:
            logits = logits[allowed]
        best = int(np.argmax(logits))
        lead = runner_up_gap(logits, best) if gap else np.inf
        sure = 1.0 / float(np.exp(logits - logits[best]).sum()) if probability else None
        return (int(allowed[best]) if allowed is not None else best), lead, sure

    def first_tokens(self, logits: np.ndarray, heal: bytes, heal_code: bool,
                     count: int) -> list[int]:
        """The `count` most likely first tokens after the greedy one, among those that keep
        the healed text (as `pick` chooses) and are at least MIN_ALTERNATIVE_PROBABILITY
        likely among them; never an end or control token."""
        allowed = self._allowed(heal, heal_code)
        ids = allowed if allowed is not None else np.arange(self.size)
        values = logits[ids]
        greedy = int(np.argmax(values))  # the same choice `pick` makes
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
            if index != greedy and not self.stop_mask[token]:
                picks.append(token)
        return picks


def runner_up_gap(values: np.ndarray, best: int) -> float:
    """How far the best value is ahead of the next best (infinite when it is alone)."""
    others = max(values[:best].max(initial=-np.inf), values[best + 1 :].max(initial=-np.inf))
    return float(values[best] - others)
