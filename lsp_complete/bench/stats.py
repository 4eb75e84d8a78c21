"""The bench's statistics, for every report: percentiles and means of samples, and ratios with
paired bootstrap confidence intervals for every comparison (the candidate B against each
other side: a version, a stateless baseline or a variant).

The unit of resampling is what was run on both sides: a span, a never-seen file or a task. A
resample draws unit indices with replacement and recomputes the measure on both sides from the
same units (percentiles over the pooled values of the drawn units, means over them, amounts
per count over their rows). The 95% interval is the 2.5th to 97.5th percentile of the
resampled ratios. Seeded: the same samples give the same intervals.

Verdict: "regression" when the whole interval lies on the worse side of 1 (above it for a time
or a cost, below it for a quality), "improvement" when it lies on the better side, else
"same"; none for fewer than MIN_UNITS paired units. One number per side (peak memory) has no
interval: a ratio beyond RSS_TOLERANCE is called a regression or an improvement.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

import numpy as np

RESAMPLES = 2000
CONFIDENCE = 0.95
_TAIL = (1 - CONFIDENCE) / 2 * 100  # percent of the resamples left out at each end
RSS_TOLERANCE = 0.05
# Fewer paired units than this give an interval but no verdict: a bootstrap over two or three
# spans only reshuffles them.
MIN_UNITS = 5

Pool = Callable[[np.ndarray], float | None]  # a measure over drawn units' values, stacked


# --- summaries ---------------------------------------------------------------------------------


def percentile(values: Sequence[float] | np.ndarray, pct: float) -> float | None:
    """Linear-interpolated percentile (numpy's default method); None for no values."""
    return float(np.percentile(np.asarray(values, dtype=float), pct)) if len(values) else None


def mean(values: Iterable[float | bool | None]) -> float | None:
    """The mean of the known values (None left out); None for none."""
    known = [float(v) for v in values if v is not None]
    return statistics.fmean(known) if known else None


# --- pools -------------------------------------------------------------------------------------


def pct_pool(q: float) -> Pool:
    return lambda values: percentile(values, q)


def mean_pool(values: np.ndarray) -> float | None:
    return float(values.mean()) if values.size else None


def max_pool(values: np.ndarray) -> float | None:
    return float(values.max()) if values.size else None


def per_count_pool(rows: np.ndarray) -> float | None:
    """Rows of (amount, count), e.g. CPU seconds and requests: the amount per count, over
    all the drawn rows together."""
    if not rows.size or rows[:, 1].sum() == 0:
        return None
    return float(rows[:, 0].sum() / rows[:, 1].sum())


# --- comparing ---------------------------------------------------------------------------------


def ratio(a: float | None, b: float | None) -> float | None:
    """B / A; equal values (0 and 0 too) are 1, anything over nothing is infinite."""
    if a is None or b is None:
        return None
    if a == b:
        return 1.0
    return math.inf if a == 0 else b / a


def verdict(low: float | None, high: float | None, lower_is_better: bool) -> str:
    if low is None or high is None:
        return "n/a"
    if low > 1:
        return "regression" if lower_is_better else "improvement"
    if high < 1:
        return "improvement" if lower_is_better else "regression"
    return "same"


def one_number_verdict(r: float | None) -> str:
    """A ratio without an interval (peak memory, lower better): beyond RSS_TOLERANCE counts."""
    if r is None:
        return "n/a"
    if abs(r - 1) <= RSS_TOLERANCE:
        return "same"
    return "regression" if r > 1 else "improvement"


def draws(n: int, seed: int, resamples: int = RESAMPLES) -> np.ndarray:
    """Resampled unit indices, one row per resample."""
    if not n:
        return np.empty((0, 0), dtype=int)
    return np.random.default_rng(seed).integers(0, n, size=(resamples, n))


def mean_interval(values: Sequence[float], seed: int,
                  resamples: int = RESAMPLES) -> tuple[float, float]:
    """A bootstrap interval (CONFIDENCE) of the mean of `values`, resampled as units."""
    array = np.asarray(values, dtype=float)
    means = array[draws(len(array), seed, resamples)].mean(axis=1)
    return float(np.percentile(means, _TAIL)), float(np.percentile(means, 100 - _TAIL))


def _stack(arrays: Sequence[np.ndarray]) -> np.ndarray:
    return np.concatenate(arrays) if arrays else np.empty(0)


@dataclass(frozen=True)
class Comparison:
    """B against A over paired units: both values, B/A, its interval and the verdict."""

    a: float | None
    b: float | None
    ratio: float | None
    low: float | None
    high: float | None
    verdict: str  # regression | improvement | same | too few units | n/a
    n: int  # paired units


def compare(a_units: Sequence[np.ndarray], b_units: Sequence[np.ndarray], pool: Pool,
            lower_is_better: bool, seed: int = 0, resamples: int = RESAMPLES) -> Comparison:
    """The measure `pool` on A's and B's units (the same units, in the same order) and B/A
    with its paired bootstrap interval."""
    a, b = pool(_stack(a_units)), pool(_stack(b_units))
    ratios = []
    for picks in draws(len(a_units), seed, resamples):
        r = ratio(pool(_stack([a_units[i] for i in picks])),
                  pool(_stack([b_units[i] for i in picks])))
        if r is not None:
            ratios.append(r)
    low = high = None
    if ratios and len(a_units) > 1:
        # Order statistics, not interpolation: a ratio may be infinite.
        low = float(np.percentile(ratios, _TAIL, method="lower"))
        high = float(np.percentile(ratios, 100 - _TAIL, method="higher"))
    judged = verdict(low, high, lower_is_better) if len(a_units) >= MIN_UNITS \
        else "too few units"
    return Comparison(a, b, ratio(a, b), low, high, judged, len(a_units))
