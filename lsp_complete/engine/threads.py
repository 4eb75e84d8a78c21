"""How many threads each llama.cpp decode uses: the one place that decides it.

With as many threads as cores, every graph node ends at a barrier where all threads wait for
the slowest. When another process (a compiler, a test run) takes a core, one thread is
descheduled and the others spin at each barrier: a token costs twice as much, while fewer
threads would have kept their cores. No load signal says this portably, so the policy
measures it: each kind of decode (one generated token; a small batch, as a draft's
verification; a prefill batch) keeps a running cost per token for a few thread counts, uses
the cheapest, and now and then tries another so that a change in load is seen. A try that
confirms the choice doubles the wait before the next one; a try that changes it starts the
waits over. Fewer threads are tried only once a decode with every thread shows that it lost
CPU time to another process (the process's CPU seconds below CONTENDED_SHARE of threads x wall
seconds): on a quiet machine they cannot be cheaper, and each try was a slower decode.
"""

from __future__ import annotations

from dataclasses import dataclass, field

SMALL_BATCH = 16  # tokens: a batch this small is bound by memory, like one generated token
_SMOOTHING = 0.3  # weight of the newest measurement in an arm's running cost
_FIRST_PROBE_AFTER = 8  # decodes before another count is tried again...
_LAST_PROBE_AFTER = 128  # ...doubling up to this while the choice holds
# Threads that keep their cores spin at each barrier: a quiet decode's CPU share is 0.95-1.0 of
# its threads, one that shares two cores with a busy process 0.55-0.75.
CONTENDED_SHARE = 0.8


def candidate_counts(threads: int) -> tuple[int, ...]:
    """The thread counts worth trying for `threads` configured: all of them, one fewer (one
    busy core) and half (a parallel build); never more than configured."""
    return tuple(sorted({threads, max(1, threads - 1), max(1, threads // 2)}, reverse=True))


@dataclass
class _Arm:
    threads: int
    cost: float | None = None  # seconds per token, smoothed; None until measured
    last_used: int = 0


@dataclass
class _Kind:
    """The arms of one kind of decode and whose turn it is."""

    arms: list[_Arm]
    calls: int = 0
    current: _Arm | None = None
    probe_after: int = _FIRST_PROBE_AFTER
    next_probe: int = _FIRST_PROBE_AFTER
    probing: bool = False
    # Since the last try, a decode with every thread lost CPU time (or its CPU time is unknown).
    contended: bool = False

    def best(self) -> _Arm:
        """The cheapest count measured (every thread until one is)."""
        measured = [arm for arm in self.arms if arm.cost is not None]
        return min(measured, key=lambda arm: arm.cost or 0.0) if measured else self.arms[0]

    def choose(self) -> _Arm:
        self.calls += 1
        best = self.best()
        if best.cost is None:
            return best  # every thread, measured first
        unmeasured = [arm for arm in self.arms if arm.cost is None]
        if unmeasured and self.contended:
            self.probing = True  # a count never measured, as soon as one may be cheaper
            return unmeasured[0]
        tried = [arm for arm in self.arms if arm is not best and arm.cost is not None]
        if tried and self.calls >= self.next_probe and self._worth_a_try():
            self.probing = True  # the other count measured longest ago
            return min(tried, key=lambda arm: arm.last_used)
        return best

    def _worth_a_try(self) -> bool:
        """Fewer threads than all are tried only under contention; more, always (from fewer
        threads nothing shows that the load has gone)."""
        return self.contended or self.best() is not self.arms[0]

    def record(self, arm: _Arm, seconds_per_token: float, cpu_share: float | None) -> None:
        before = self.best()
        probed, self.probing = self.probing, False
        if probed:
            self.contended = False  # what the try measured settles what came before it
        if arm is self.arms[0]:
            self.contended |= cpu_share is None or cpu_share < CONTENDED_SHARE * arm.threads
        arm.last_used = self.calls
        if arm.cost is None or probed:  # a try's cost is news: the old one is stale
            arm.cost = seconds_per_token
        else:
            arm.cost += _SMOOTHING * (seconds_per_token - arm.cost)
        if probed:
            changed = self.best() is not before
            self.probe_after = (_FIRST_PROBE_AFTER if changed
                                else min(2 * self.probe_after, _LAST_PROBE_AFTER))
            self.next_probe = self.calls + self.probe_after


@dataclass
class ThreadPolicy:
    """Thread counts per decode: `threads` always (fixed), or the measured cheapest (auto)."""

    threads: int
    mode: str = "auto"
    _kinds: dict[str, _Kind] = field(default_factory=dict)

    def __post_init__(self) -> None:
        counts = candidate_counts(self.threads) if self.mode == "auto" else (self.threads,)
        self._kinds = {kind: _Kind([_Arm(count) for count in counts])
                       for kind in ("step", "small", "large")}

    @staticmethod
    def kind_of(n_tokens: int) -> str:
        if n_tokens <= 1:
            return "step"
        return "small" if n_tokens <= SMALL_BATCH else "large"

    def threads_for(self, n_tokens: int) -> int:
        """The thread count for the next decode of `n_tokens` (call `measured` after it)."""
        kind = self._kinds[self.kind_of(n_tokens)]
        kind.current = kind.choose()
        return kind.current.threads

    def measured(self, n_tokens: int, seconds: float, cpu_seconds: float | None = None) -> None:
        """What the decode announced by `threads_for(n_tokens)` took: wall seconds, and the
        process's CPU seconds meanwhile (None: unknown, so contention is assumed)."""
        kind = self._kinds[self.kind_of(n_tokens)]
        if kind.current is not None and n_tokens > 0:
            share = cpu_seconds / seconds if cpu_seconds is not None and seconds > 0 else None
            kind.record(kind.current, seconds / n_tokens, share)
            kind.current = None

    def describe(self) -> dict[str, object]:
        """For the status: the count each kind uses now and the costs behind it (ms/token)."""
        out: dict[str, object] = {"mode": self.mode}
        for name, kind in self._kinds.items():
            measured = [arm for arm in kind.arms if arm.cost is not None]
            out[name] = {
                "threads": kind.best().threads,
                "msPerToken": {str(arm.threads): round((arm.cost or 0.0) * 1000, 2)
                               for arm in measured},
            }
        return out
