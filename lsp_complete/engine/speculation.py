"""Speculative decoding, the drafting side: where draft tokens come from and how many to try.

The local engine verifies a draft in one batched decode and keeps only the tokens greedy
decoding picks from that decode's logits, so drafts change speed, not output (up to a near-tie
that a batched decode's slightly different arithmetic could tip: see NEAR_TIE). This module owns
what needs no model: the token history of a request, the draft sources (prompt lookup over the
history, the previous suggestion at the same spot, kept per file in `PreviousSuggestions`, and
any extra token corpora the caller passes), which drafter a request gets (`drafter_for`), the
`Drafter` hook a draft model would implement, and `DraftPolicy`, which sizes each
draft from recent acceptance and the relative cost of a batched decode. Pure Python and numpy:
no llama.cpp here.
"""

from __future__ import annotations

from collections import OrderedDict, deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from lsp_complete.config import SPECULATION_MODES as SPECULATION_MODES  # the bench's import
from lsp_complete.config import SpeculationMode
from lsp_complete.engine.base import GenerationRequest

# The `speculation` setting. "auto": the fastest lossless choice for the engine in use.
# The longest n-gram looked up: a longer match predicts the continuation better (acceptance is
# learned per length: 1, 2, 3, 4-5, 6 and more).
LOOKUP_NGRAM_MAX = 8
MAX_DRAFT = 16
PREVIOUS_TAIL = 8  # prompt tokens kept before a previous suggestion, to find where it starts
# A batched decode's logits differ from a single-token decode's (other kernels: flash
# attention, repacked matrix products); on Qwen2.5-Coder-0.5B on CPU the gap between the two
# best tokens moves by 0.05 (median), 0.25 (p99), 0.43 (max). A verify step's choice closer
# than this to the runner-up is decided again from a single-token decode, as without drafts.
NEAR_TIE = 0.35

# Verify steps decode the chosen token and its draft: 1, 3, 7 or 15 draft tokens. Kernels
# favour these sizes (on one 2-core CPU a batch of 8 decodes faster than one of 6), and the
# policy learns the cost of each from its own decodes.
VERIFY_SIZES = (2, 4, 8, 16)
# Prior cost of one decode of b tokens relative to one of 1 token, used until measured
# (Qwen2.5-Coder-0.5B Q4_K_M, 2 CPU threads, 450-token context, from issue 15: 21.2, 31.2,
# 41.6, 67.4, 95.8 ms). Optimistic on purpose: a size that costs more is measured, then
# avoided; one thought too dear would never be tried.
CPU_BATCH_COSTS = ((1, 1.0), (2, 1.47), (4, 1.96), (8, 3.18), (16, 4.52), (32, 8.5))


def resolve_mode(mode: str, has_draft_model: bool = False) -> SpeculationMode:
    """The speculation actually used: "auto" and "draft" without a draft model are "lookup"
    (prompt lookup costs nothing to draft, and the policy drafts only where it pays)."""
    if mode in ("auto", "draft"):
        return "draft" if has_draft_model else "lookup"
    return "off" if mode == "off" else "lookup"  # "lookup", or none of SPECULATION_MODES


class TokenHistory:
    """The prompt and the tokens generated so far, in one growing array (lookup reads it)."""

    def __init__(self, prompt: Sequence[int], room: int) -> None:
        self.tokens = np.zeros(len(prompt) + room + 1, dtype=np.int32)
        self.tokens[: len(prompt)] = prompt
        self.size = len(prompt)
        self.prompt_size = len(prompt)

    def append(self, token: int) -> None:
        if self.size == len(self.tokens):
            self.tokens = np.concatenate([self.tokens, np.zeros_like(self.tokens)])
        self.tokens[self.size] = token
        self.size += 1

    @property
    def view(self) -> np.ndarray:
        return self.tokens[: self.size]

    @property
    def generated(self) -> list[int]:
        generated: list[int] = self.tokens[self.prompt_size : self.size].tolist()
        return generated


@dataclass(frozen=True)
class Draft:
    """Proposed next tokens and where they came from (`kind` keys the acceptance stats)."""

    tokens: list[int]
    kind: str


class Drafter(Protocol):
    """A draft source: proposes up to `limit` tokens to follow `history`."""

    def propose(self, history: TokenHistory, limit: int) -> Draft | None: ...


def longest_match(corpus: np.ndarray, tail: np.ndarray, n_max: int) -> tuple[int, int]:
    """(n, end): the longest run of `tail`'s last tokens, at most `n_max`, that occurs in
    `corpus` with a token after it, and the index just past its latest occurrence there;
    (0, 0) when not even the last token occurs. One pass over the corpus: the positions of
    the last token, then each extended backwards while it matches."""
    if len(tail) == 0 or len(corpus) < 2:
        return 0, 0
    ends = np.flatnonzero(corpus[:-1] == tail[-1])  # a token after each
    if ends.size == 0:
        return 0, 0
    length = np.ones(ends.size, dtype=np.int64)
    alive = np.ones(ends.size, dtype=bool)
    for j in range(1, min(n_max, len(tail))):
        at = ends - j
        alive &= at >= 0
        alive[alive] = corpus[at[alive]] == tail[-1 - j]
        if not alive.any():
            break
        length += alive
    n = int(length.max())
    return n, int(ends[np.flatnonzero(length == n)[-1]]) + 1


@dataclass
class PromptLookup:
    """Prompt-lookup drafting: the longest run of the history's last tokens (at most `n_max`,
    at least `n_min`) found earlier in a corpus -> the tokens that followed it there.

    The longest match over all corpora wins; a tie goes to the first of: the previous
    suggestion at this spot (the same model wrote it: when the prompt meets it again it is the
    likeliest continuation), the history itself (prompt and output: code repeats the lines
    above it), the extra corpora the caller passed (e.g. a larger prompt for the same spot).
    """

    previous: np.ndarray | None = None
    extra: list[np.ndarray] = field(default_factory=list)
    n_max: int = LOOKUP_NGRAM_MAX
    n_min: int = 1

    def propose(self, history: TokenHistory, limit: int) -> Draft | None:
        tokens = history.view
        best: tuple[int, str, np.ndarray, int] | None = None
        for name, corpus in self._corpora(tokens):
            n, end = longest_match(corpus, tokens, self.n_max)
            if n >= self.n_min and (best is None or n > best[0]):
                best = (n, name, corpus, end)  # a tie keeps the earlier corpus
        if best is None:
            return None
        n, name, corpus, end = best
        return Draft(corpus[end : end + limit].tolist(), f"{name}{_length_class(n)}")

    def _corpora(self, history: np.ndarray) -> list[tuple[str, np.ndarray]]:
        corpora = [("previous", self.previous)] if self.previous is not None else []
        # The history's own last token is the query, not a match: it has nothing after it.
        corpora.append(("lookup", history))
        corpora.extend(("context", c) for c in self.extra)
        return corpora


class PreviousSuggestions:
    """The last suggestion per file, with the prompt tokens just before it (a re-request at
    the same spot, or a prompt grown by part of it, drafts from it); at most `limit` files,
    the least recently used dropped first."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._by_key: OrderedDict[str, np.ndarray] = OrderedDict()

    def get(self, key: str) -> np.ndarray | None:
        return self._by_key.get(key)

    def remember(self, key: str, history: TokenHistory) -> None:
        if history.size == history.prompt_size:
            return
        start = max(0, history.prompt_size - PREVIOUS_TAIL)
        self._by_key[key] = history.tokens[start : history.size].copy()
        self._by_key.move_to_end(key)
        while len(self._by_key) > self.limit:
            self._by_key.popitem(last=False)

    def forget(self, key: str) -> None:
        self._by_key.pop(key, None)


def drafter_for(request: GenerationRequest, previous: PreviousSuggestions,
                draft_model: Callable[[GenerationRequest], Drafter] | None) -> Drafter | None:
    """Where a request's drafts come from (None: no speculation)."""
    mode = resolve_mode(request.speculation, draft_model is not None)
    if mode == "off":
        return None
    if mode == "draft" and draft_model is not None:
        return draft_model(request)
    extra = [np.asarray(c, dtype=np.int32) for c in request.draft_context if c]
    return PromptLookup(previous=previous.get(request.key), extra=extra)


def _length_class(n: int) -> int:
    return n if n <= 3 else (4 if n <= 5 else 6)


@dataclass
class Acceptance:
    """Recent acceptance of one kind of draft, as counts that decay with each token judged
    (the last ten or so weigh most): each draft token accepted is a hit, the first rejected
    one a miss (what follows a rejection is never judged)."""

    hits: float
    trials: float
    prior_hits: float
    prior_trials: float

    @classmethod
    def with_prior(cls, rate: float, weight: float = 4.0) -> Acceptance:
        return cls(rate * weight, weight, rate * weight, weight)

    @property
    def rate(self) -> float:
        return self.hits / self.trials if self.trials > 0 else 0.0

    def record(self, accepted: int, trials: int, decay: float = 0.9) -> None:
        kept = decay**trials
        self.hits = self.hits * kept + accepted
        self.trials = self.trials * kept + trials

    def relax(self, share: float = 0.05) -> None:
        """Drift back towards the prior while not drafting, so a kind is tried again later."""
        self.hits += share * (self.prior_hits - self.hits)
        self.trials += share * (self.prior_trials - self.trials)


# Starting acceptance per draft kind (the name then the n-gram length), near what Qwen2.5-
# Coder-0.5B showed on Python: a single matching token predicts little, 6 or more a lot; the
# previous suggestion, from the same model, predicts most.
_PRIORS = {"previous": 0.8, "lookup": 0.5, "context": 0.45}
_PRIOR_BY_N = {1: -0.2, 2: 0.0, 3: 0.15, 4: 0.25, 6: 0.35}


def batch_cost(size: int, costs: Sequence[tuple[int, float]] = CPU_BATCH_COSTS) -> float:
    """Relative cost of one decode of `size` tokens (linear between the measured sizes)."""
    for (b0, c0), (b1, c1) in zip(costs, costs[1:], strict=False):
        if size <= b1:
            return c0 + (c1 - c0) * (max(size, b0) - b0) / (b1 - b0)
    (b0, c0), (b1, c1) = costs[-2], costs[-1]
    return c1 + (c1 - c0) * (size - b1) / (b1 - b0)


def expected_tokens(rate: float, draft: int) -> float:
    """Tokens a verify step yields with `draft` tokens each accepted with `rate` in turn: the
    accepted prefix plus the model's own next token."""
    if rate >= 1.0:
        return float(draft + 1)
    return (1.0 - rate ** (draft + 1)) / (1.0 - rate)


@dataclass
class DecodeCosts:
    """What a decode of each size costs relative to a single-token step: from this engine's
    own timings (the lower quartile of the recent ones: other processes on the machine only
    ever add time); a size not measured yet scales the prior table by how the nearest measured
    size compares with it (one measurement tells a lot: some CPUs decode 2 tokens at 1.5x the
    cost of 1, others at 3x); the prior table before any."""

    prior: Sequence[tuple[int, float]] = CPU_BATCH_COSTS
    keep: int = 16
    min_samples: int = 3
    samples: dict[int, deque[float]] = field(default_factory=dict)

    def observe(self, size: int, seconds: float) -> None:
        self.samples.setdefault(size, deque(maxlen=self.keep)).append(seconds)

    def measured(self, size: int) -> float | None:
        times = sorted(self.samples.get(size, ()))  # a copy: the status reads it too
        if len(times) < self.min_samples:
            return None
        return times[len(times) // 4]

    def relative(self, size: int) -> float:
        single = self.measured(1)
        if not single:
            return batch_cost(size, self.prior)
        mine = self.measured(size)
        if mine:
            return mine / single
        known = [(abs(s - size), s, m) for s in list(self.samples)
                 if s != 1 and (m := self.measured(s))]
        if not known:
            return batch_cost(size, self.prior)
        _, near, near_time = min(known)
        scale = (near_time / single) / batch_cost(near, self.prior)
        return batch_cost(size, self.prior) * scale


@dataclass
class DraftPolicy:
    """How many draft tokens to verify: the length that maximizes expected tokens per unit of
    decode cost, given the recent acceptance of that kind of draft and what decodes of each
    size have cost; 0 (a plain step) when no length beats a single-token decode. Kept by the
    engine across requests."""

    costs: DecodeCosts = field(default_factory=DecodeCosts)
    sizes: Sequence[int] = VERIFY_SIZES
    max_draft: int = MAX_DRAFT
    margin: float = 1.05  # a draft must promise this much over a plain step
    # Every so many drafts declined, the most promising one is verified anyway (if it is not
    # far off paying): costs measured on a busy machine, or acceptance that has changed, get
    # measured again. At most a fraction of a step per hundred.
    probe_every: int = 100
    probe_gain: float = 0.8
    stats: dict[str, Acceptance] = field(default_factory=dict)
    _declined: int = 0

    def acceptance(self, kind: str) -> Acceptance:
        stats = self.stats.get(kind)
        if stats is None:
            name = kind.rstrip("0123456789")
            n = int(kind[len(name) :] or 2)
            rate = _PRIORS.get(name, 0.5) + _PRIOR_BY_N.get(n, 0.0)
            stats = self.stats[kind] = Acceptance.with_prior(min(max(rate, 0.05), 0.95))
        return stats

    def length(self, kind: str, available: int) -> int:
        """Draft tokens worth verifying out of `available` proposed."""
        stats = self.acceptance(kind)
        best, best_gain = 0, 0.0
        for size in self.sizes:
            k = size - 1
            if k > min(available, self.max_draft):
                break
            gain = expected_tokens(stats.rate, k) / self.costs.relative(size)
            if gain > best_gain:
                best, best_gain = k, gain
        if best_gain > self.margin:
            return best
        stats.relax()
        self._declined += 1
        if self._declined >= self.probe_every and best_gain >= self.probe_gain:
            self._declined = 0
            return best
        return 0

    def record(self, kind: str, proposed: int, accepted: int, judged_all: bool = True) -> None:
        """The outcome of verifying `proposed` tokens: `accepted` of them in a row; with
        `judged_all` False (generation stopped) the tokens after the last accepted were not
        judged, so no rejection is counted."""
        rejected = 1 if accepted < proposed and judged_all else 0
        if accepted or rejected:
            self.acceptance(kind).record(accepted, accepted + rejected)

    def describe(self) -> dict[str, object]:
        """For the status (another thread than the engine's: reads copies)."""
        stats = sorted(list(self.stats.items()))
        return {
            "acceptance": {kind: round(s.rate, 3) for kind, s in stats},
            "relativeCost": {size: round(self.costs.relative(size), 2) for size in self.sizes},
        }
