"""A/B measures as ratios B/A with paired bootstrap confidence intervals, B (the candidate)
against each baseline on its own (A, or A1, A2, ...).

The unit of resampling is what was run on both sides: a span (typing scenarios), a never-seen
file (`open`) or a HumanEval task. A resample draws unit indices with replacement and
recomputes the measure on both sides from the same units: percentiles over the pooled
keystrokes of the drawn spans, means over their keystrokes or tasks, CPU as the drawn units'
CPU seconds over their keystrokes. The 95% interval is the 2.5th to 97.5th percentile of the
resampled ratios. Seeded: the same samples give the same intervals.

Verdict: "regression" when the whole interval lies on the worse side of 1 (above it for a
time or a cost, below it for a quality), "improvement" when it lies on the better side, else
"same"; none for fewer than MIN_UNITS paired units. Peak memory is one number per server and
scenario (no interval): a ratio beyond RSS_TOLERANCE is called a regression or an
improvement.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from lsp_complete.bench.ab.drive import CANDIDATE, UnitRun
from lsp_complete.bench.ab.scenarios import Scenario

RESAMPLES = 2000
CONFIDENCE = 0.95
RSS_TOLERANCE = 0.05
# Fewer paired units than this give an interval but no verdict: a bootstrap over two or three
# spans only reshuffles them.
MIN_UNITS = 5
TAB_SHARE = "characters put in by Tab"  # saved: the headline


@dataclass(frozen=True)
class Measure:
    name: str
    lower_is_better: bool
    per_unit: Callable[[UnitRun], np.ndarray]  # a unit's values (rows for `pool`)
    pool: Callable[[np.ndarray], float | None]  # the measure over drawn units' values, stacked
    unit: str = ""  # how a value is shown: ms, share, s, chars


@dataclass
class Row:
    scenario: str
    measure: str
    a: float | None
    b: float | None
    ratio: float | None
    low: float | None
    high: float | None
    verdict: str  # regression | improvement | same | too few units | n/a
    unit: str
    n: int  # paired units
    baseline: str = "A"  # the side `a` is of (B is always the candidate)


# --- pooling -----------------------------------------------------------------------------------


def _percentile(q: float) -> Callable[[np.ndarray], float | None]:
    def pool(values: np.ndarray) -> float | None:
        return float(np.percentile(values, q)) if values.size else None

    return pool


def _mean(values: np.ndarray) -> float | None:
    return float(values.mean()) if values.size else None


def _max(values: np.ndarray) -> float | None:
    return float(values.max()) if values.size else None


def _per_request(rows: np.ndarray) -> float | None:
    """Rows of (amount, count), e.g. CPU seconds and requests: the amount per count, over
    all the drawn rows together."""
    if not rows.size or rows[:, 1].sum() == 0:
        return None
    return float(rows[:, 0].sum() / rows[:, 1].sum())


# --- per-unit values ---------------------------------------------------------------------------


def _latencies(run: UnitRun) -> np.ndarray:
    return np.array([s.latency_ms for s in run.samples if s.source != "error"], dtype=float)


def _first_latency(run: UnitRun) -> np.ndarray:
    return np.array([s.latency_ms for s in run.samples if s.index == 0 and s.source != "error"],
                    dtype=float)


def _later_latencies(run: UnitRun) -> np.ndarray:
    """The keys after a span's first: a p95 that mixes in the first keys (slow at a new spot)
    hides what the keys after them cost."""
    return np.array([s.latency_ms for s in run.samples if s.index > 0 and s.source != "error"],
                    dtype=float)


def _line_end_latencies(run: UnitRun) -> np.ndarray:
    return np.array([s.latency_ms for s in run.samples
                     if s.extra.get("line_end") and s.source != "error"], dtype=float)


def _shown_line_exact(run: UnitRun) -> np.ndarray:
    """Line-exact as the user saw it: an answer that came too late (stale) was never shown."""
    return np.array([bool(s.line_exact) and s.fresh is not False for s in run.samples],
                    dtype=float)


def _line_exact(run: UnitRun) -> np.ndarray:
    return np.array([bool(s.line_exact) for s in run.samples], dtype=float)


def _fresh(run: UnitRun) -> np.ndarray:
    return np.array([bool(s.fresh) for s in run.samples], dtype=float)


def _accepted(run: UnitRun) -> np.ndarray:
    return np.array([s.extra.get("accepted_chars", 0) for s in run.samples], dtype=float)


def _exact(run: UnitRun) -> np.ndarray:
    return np.array([bool(s.exact_match) for s in run.samples], dtype=float)


def _passed(run: UnitRun) -> np.ndarray:
    return np.array([bool(s.passed) for s in run.samples], dtype=float)


def _tab_chars(run: UnitRun) -> np.ndarray:
    """(characters put in by Tab, the span's characters): one row a span."""
    span = next((s.extra["span_chars"] for s in run.samples if "span_chars" in s.extra), 0)
    return np.array([[sum(s.extra.get("tab_chars", 0) for s in run.samples), span]],
                    dtype=float)


def _wrong_shown(run: UnitRun) -> np.ndarray:
    """(wrong suggestions shown, keys pressed, Tab included): one row a span."""
    return np.array([[sum(bool(s.extra.get("wrong")) for s in run.samples), len(run.samples)]],
                    dtype=float)


def _cpu(run: UnitRun) -> np.ndarray:
    if run.cpu_s is None:
        return np.empty((0, 2))
    return np.array([[run.cpu_s, run.keystrokes]], dtype=float)


def measures_for(scenario: Scenario) -> list[Measure]:
    """What is reported for a scenario, in report order."""
    if scenario.kind == "typing" and scenario.saves:
        return [
            Measure(TAB_SHARE, False, _tab_chars, _per_request, "share"),
            Measure("wrong suggestions shown / key", True, _wrong_shown, _per_request, "share"),
            Measure("fresh answers", False, _fresh, _mean, "share"),
            Measure("keystroke p50", True, _latencies, _percentile(50), "ms"),
            Measure("keystroke p95 after a span's first key", True, _later_latencies,
                    _percentile(95), "ms"),
            Measure("CPU s / keystroke", True, _cpu, _per_request, "s"),
        ]
    if scenario.kind == "typing":
        later_p50 = Measure("keystroke p50 after a span's first key", True, _later_latencies,
                            _percentile(50), "ms")
        first_p95 = Measure("first key of a span p95", True, _first_latency, _percentile(95),
                            "ms")
        found = [
            Measure("keystroke p50", True, _latencies, _percentile(50), "ms"),
            Measure("keystroke p95", True, _latencies, _percentile(95), "ms"),
            # A moved span's first key (the move) apart from the keys after it, both ways.
            *([later_p50] if scenario.moved else []),
            Measure("keystroke p95 after a span's first key", True, _later_latencies,
                    _percentile(95), "ms"),
        ]
        if scenario.awaited:
            found += [Measure("first key of a span p50", True, _first_latency, _percentile(50),
                              "ms"),
                      *([first_p95] if scenario.moved else []),
                      Measure("line-exact", False, _line_exact, _mean, "share")]
        else:
            found += [Measure("line-exact (fresh answers)", False, _shown_line_exact, _mean,
                              "share"),
                      Measure("fresh answers", False, _fresh, _mean, "share"),
                      Measure("wait at a line's end, max", True, _line_end_latencies, _max,
                              "ms")]
        return found + [
            Measure("characters accepted / key", False, _accepted, _mean, "chars"),
            Measure("CPU s / keystroke", True, _cpu, _per_request, "s"),
        ]
    if scenario.kind == "open":
        return [
            Measure("first suggestion p50", True, _first_latency, _percentile(50), "ms"),
            Measure("first suggestion max", True, _first_latency, _max, "ms"),
            Measure("line-exact (first 3 keys)", False, _line_exact, _mean, "share"),
            Measure("CPU s / request", True, _cpu, _per_request, "s"),
        ]
    return [
        Measure("HumanEval EM", False, _exact, _mean, "share"),
        Measure("HumanEval pass@1", False, _passed, _mean, "share"),
        Measure("answer p50", True, _latencies, _percentile(50), "ms"),
        Measure("CPU s / task", True, _cpu, _per_request, "s"),
    ]


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


def paired(runs: Sequence[UnitRun], scenario: str, baseline: str = "A"
           ) -> tuple[list[UnitRun], list[UnitRun]]:
    """The baseline's and B's runs of the units both completed, in unit order (another
    baseline's failure leaves the pair in)."""
    mine = [r for r in runs if r.scenario == scenario and r.error is None]
    a = {r.unit: r for r in mine if r.side == baseline}
    b = {r.unit: r for r in mine if r.side == CANDIDATE}
    units = sorted(set(a) & set(b))
    return [a[u] for u in units], [b[u] for u in units]


def draws(n: int, seed: int, resamples: int = RESAMPLES) -> np.ndarray:
    """Resampled unit indices, one row per resample."""
    return np.random.default_rng(seed).integers(0, n, size=(resamples, n))


def _stack(arrays: Sequence[np.ndarray]) -> np.ndarray:
    return np.concatenate(arrays) if arrays else np.empty(0)


def compare(measure: Measure, scenario: str, a_runs: Sequence[UnitRun],
            b_runs: Sequence[UnitRun], drawn: np.ndarray, baseline: str = "A") -> Row:
    a_values = [measure.per_unit(r) for r in a_runs]
    b_values = [measure.per_unit(r) for r in b_runs]
    a, b = measure.pool(_stack(a_values)), measure.pool(_stack(b_values))
    ratios = []
    for picks in drawn:
        r = ratio(measure.pool(_stack([a_values[i] for i in picks])),
                  measure.pool(_stack([b_values[i] for i in picks])))
        if r is not None:
            ratios.append(r)
    low = high = None
    if ratios and len(a_runs) > 1:
        tail = (1 - CONFIDENCE) / 2 * 100
        # Order statistics, not interpolation: a ratio may be infinite.
        low = float(np.percentile(ratios, tail, method="lower"))
        high = float(np.percentile(ratios, 100 - tail, method="higher"))
    judged = verdict(low, high, measure.lower_is_better) if len(a_runs) >= MIN_UNITS \
        else "too few units"
    return Row(scenario, measure.name, a, b, ratio(a, b), low, high, judged, measure.unit,
               len(a_runs), baseline)


def scenario_rows(scenario: Scenario, runs: Sequence[UnitRun], seed: int,
                  resamples: int = RESAMPLES, baseline: str = "A") -> list[Row]:
    a_runs, b_runs = paired(runs, scenario.name, baseline)
    drawn = draws(len(a_runs), seed, resamples) if a_runs else np.empty((0, 0), dtype=int)
    return [compare(m, scenario.name, a_runs, b_runs, drawn, baseline)
            for m in measures_for(scenario)]


def language_of(run: UnitRun) -> str:
    return next((str(s.extra["language"]) for s in run.samples if "language" in s.extra), "")


def language_rows(scenario: Scenario, runs: Sequence[UnitRun], seed: int,
                  resamples: int = RESAMPLES, baseline: str = "A") -> list[Row]:
    """A typing scenario's quality in each language on its own line (where it ran more than
    one): a gain in one language must not hide a loss in another."""
    if scenario.kind != "typing":
        return []
    a_runs, b_runs = paired(runs, scenario.name, baseline)
    languages = sorted({language_of(run) for run in a_runs} - {""})
    if len(languages) < 2:
        return []
    wanted = {"line-exact", "line-exact (fresh answers)", "characters accepted / key",
              "keystroke p95 after a span's first key", TAB_SHARE}
    measures = [m for m in measures_for(scenario) if m.name in wanted]
    rows = []
    for language in languages:
        picks = [i for i, run in enumerate(a_runs) if language_of(run) == language]
        mine_a, mine_b = [a_runs[i] for i in picks], [b_runs[i] for i in picks]
        drawn = draws(len(picks), seed, resamples)
        rows += [compare(m, f"{scenario.name} · {language}", mine_a, mine_b, drawn, baseline)
                 for m in measures]
    return rows


def rss_row(scenario: str, a_mb: float | None, b_mb: float | None,
            baseline: str = "A") -> Row:
    r = ratio(a_mb, b_mb)
    if r is None:
        judged = "n/a"
    elif r > 1 + RSS_TOLERANCE:
        judged = "regression"
    elif r < 1 - RSS_TOLERANCE:
        judged = "improvement"
    else:
        judged = "same"
    return Row(scenario, "peak RSS", a_mb, b_mb, r, None, None, judged, "MiB", 1, baseline)


def identical_share(runs: Sequence[UnitRun], scenario: str, baseline: str = "A"
                    ) -> float | None:
    """The share of requests whose suggestion was the same on the baseline and B (versions
    that should suggest alike, or one against itself: how much the server's own timing
    changes its suggestions)."""
    a_runs, b_runs = paired(runs, scenario, baseline)
    pairs = [(x.suggestion, y.suggestion)
             for a, b in zip(a_runs, b_runs, strict=True)
             for x, y in zip(a.samples, b.samples, strict=False)
             if x.source != "error" and y.source != "error"]
    return sum(x == y for x, y in pairs) / len(pairs) if pairs else None
