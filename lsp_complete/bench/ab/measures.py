"""What an A/B reports for each scenario (`measures_for`), and its rows: B (the candidate)
against each baseline on its own (A, or A1, A2, ...), each measure a ratio B/A with a paired
bootstrap interval over spans, files or tasks (bench/stats.py). Peak memory is one number per
server and scenario.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from lsp_complete.bench import stats
from lsp_complete.bench.ab.drive import CANDIDATE, LARGE_PHASES, UnitRun
from lsp_complete.bench.ab.scenarios import Scenario
from lsp_complete.bench.records import Sample
from lsp_complete.bench.stats import RESAMPLES, max_pool, mean_pool, pct_pool, per_count_pool

TAB_SHARE = "characters put in by Tab"  # saved: the headline


@dataclass(frozen=True)
class Measure:
    name: str
    lower_is_better: bool
    per_unit: Callable[[UnitRun], np.ndarray]  # a unit's values (rows for `pool`)
    pool: stats.Pool
    unit: str = ""  # how a value is shown: ms, share, s, chars


@dataclass(frozen=True)
class Row(stats.Comparison):
    """One measure of one scenario: B against `baseline`."""

    scenario: str
    measure: str
    unit: str
    baseline: str = "A"  # the side `a` is of (B is always the candidate)


# --- per-unit values ---------------------------------------------------------------------------


def _each(value: Callable[[Sample], float],
          keep: Callable[[Sample], bool] = lambda s: True) -> Callable[[UnitRun], np.ndarray]:
    """`value` of each of a unit's samples that `keep` picks."""
    def per_unit(run: UnitRun) -> np.ndarray:
        return np.array([value(s) for s in run.samples if keep(s)], dtype=float)

    return per_unit


def _answered(s: Sample) -> bool:
    return s.source != "error"


def _at(index: int, value: Callable[[Sample], float]) -> Callable[[UnitRun], np.ndarray]:
    """`value` of a unit's answered sample `index`: a span's first key, a large-file phase
    (drive.LARGE_PHASES), or he-multi's first request (0) or second (1)."""
    return _each(value, lambda s: s.index == index and _answered(s))


def _latency(s: Sample) -> float:
    return s.latency_ms


_latencies = _each(_latency, _answered)
_first_latency = _at(0, _latency)  # a span's first key, a file's first answer
# The keys after a span's first: a p95 that mixes in the first keys (slow at a new spot)
# hides what the keys after them cost.
_later_latencies = _each(_latency, lambda s: s.index > 0 and _answered(s))
_line_end_latencies = _each(_latency, lambda s: bool(s.extra.get("line_end")) and _answered(s))
# Line-exact as the user saw it: an answer that came too late (stale) was never shown.
_shown_line_exact = _each(lambda s: bool(s.line_exact) and s.fresh is not False)
_line_exact = _each(lambda s: bool(s.line_exact))
_fresh = _each(lambda s: bool(s.fresh))
_accepted = _each(lambda s: s.extra.get("accepted_chars", 0))
_exact = _each(lambda s: bool(s.exact_match))
_passed = _each(lambda s: bool(s.passed))
# Prompt tokens the engine computed for each answered request (its cost in tokens).
_encoded = _each(lambda s: s.encoded_tokens or 0,
                 lambda s: s.encoded_tokens is not None and _answered(s))


def _score(name: str) -> Callable[[UnitRun], np.ndarray]:
    """A cross-file score of each answer (crossfile.score's `name`)."""
    return _each(lambda s: s.extra.get(name, 0.0))


def _tab_chars(run: UnitRun) -> np.ndarray:
    """(characters put in by Tab, the span's characters): one row a span."""
    span = next((s.extra["span_chars"] for s in run.samples if "span_chars" in s.extra), 0)
    return np.array([[sum(s.extra.get("tab_chars", 0) for s in run.samples), span]],
                    dtype=float)


def _wrong_shown(run: UnitRun) -> np.ndarray:
    """(wrong suggestions shown, keys pressed, Tab included): one row a span."""
    return np.array([[sum(bool(s.extra.get("wrong")) for s in run.samples), len(run.samples)]],
                    dtype=float)


def _wrong(sample: Sample) -> float:
    """A suggestion shown that does not pass: reading time spent for nothing."""
    return float(bool(sample.suggestion.strip()) and not sample.passed)


def _cpu(run: UnitRun) -> np.ndarray:
    if run.cpu_s is None:
        return np.empty((0, 2))
    return np.array([[run.cpu_s, run.keystrokes]], dtype=float)


def _ms(name: str, per_unit: Callable[[UnitRun], np.ndarray], q: float = 50) -> Measure:
    return Measure(name, True, per_unit, pct_pool(q), "ms")


def _share(name: str, per_unit: Callable[[UnitRun], np.ndarray],
           lower_is_better: bool = False) -> Measure:
    return Measure(name, lower_is_better, per_unit, mean_pool, "share")


def _cpu_per(what: str) -> Measure:
    return Measure(f"CPU s / {what}", True, _cpu, per_count_pool, "s")


def measures_for(scenario: Scenario) -> list[Measure]:
    """What is reported for a scenario, in report order. Every typing scenario reports a
    span's first key and the keys after it apart (p50 and p95 of each): a p95 that mixes in
    the first keys (slow at a new spot) hides what the keys after them cost."""
    apart = [_ms("first key of a span p50", _first_latency),
             _ms("first key of a span p95", _first_latency, 95),
             _ms("keystroke p50 after a span's first key", _later_latencies),
             _ms("keystroke p95 after a span's first key", _later_latencies, 95)]
    fresh = _share("fresh answers", _fresh)
    if scenario.kind == "typing" and scenario.saves:
        return [Measure(TAB_SHARE, False, _tab_chars, per_count_pool, "share"),
                Measure("wrong suggestions shown / key", True, _wrong_shown, per_count_pool,
                        "share"),
                fresh, _ms("keystroke p50", _latencies), *apart, _cpu_per("keystroke")]
    if scenario.kind == "typing":
        quality = [_share("line-exact", _line_exact)] if scenario.awaited else [
            _share("line-exact (fresh answers)", _shown_line_exact), fresh,
            Measure("wait at a line's end, max", True, _line_end_latencies, max_pool, "ms")]
        return [_ms("keystroke p50", _latencies), _ms("keystroke p95", _latencies, 95), *apart,
                Measure("tokens encoded / key", True, _encoded, mean_pool, "tokens"),
                *quality,
                Measure("characters accepted / key", False, _accepted, mean_pool, "chars"),
                _cpu_per("keystroke")]
    if scenario.kind == "open":
        return [_ms("first suggestion p50", _first_latency),
                Measure("first suggestion max", True, _first_latency, max_pool, "ms"),
                _share("line-exact (first 3 keys)", _line_exact), _cpu_per("request")]
    if scenario.kind == "large":
        return [_ms(phase, _at(i, _latency)) for i, phase in enumerate(LARGE_PHASES)]
    if scenario.holes:
        return [
            _share("pass@1 asked again", _at(1, lambda s: bool(s.passed))),
            _share("EM asked again", _at(1, lambda s: bool(s.exact_match))),
            _share("pass@1 at open", _at(0, lambda s: bool(s.passed))),
            _share("wrong shown asked again", _at(1, _wrong), lower_is_better=True),
            Measure("lines asked again", False,
                    _at(1, lambda s: s.suggestion.count("\n") + 1 if s.suggestion else 0),
                    mean_pool, "lines"),
            _ms("first suggestion p50", _first_latency),
            _ms("first suggestion p95", _first_latency, 95),
            _ms("block ready p50", _at(1, lambda s: s.extra["ready_ms"])),
            _cpu_per("task"),
        ]
    if scenario.kind == "crossfile":
        return [_share("exact match", _score("em")),
                _share("needed identifiers", _score("needed")),
                _share("edit similarity", _score("es")),
                _ms("answer p50", _latencies), _cpu_per("line")]
    return [_share("HumanEval EM", _exact), _share("HumanEval pass@1", _passed),
            _ms("answer p50", _latencies), _cpu_per("task")]


# --- comparing ---------------------------------------------------------------------------------


def paired(runs: Sequence[UnitRun], scenario: str, baseline: str = "A"
           ) -> tuple[list[UnitRun], list[UnitRun]]:
    """The baseline's and B's runs of the units both completed, in unit order (another
    baseline's failure leaves the pair in)."""
    mine = [r for r in runs if r.scenario == scenario and r.error is None]
    a = {r.unit: r for r in mine if r.side == baseline}
    b = {r.unit: r for r in mine if r.side == CANDIDATE}
    units = sorted(set(a) & set(b))
    return [a[u] for u in units], [b[u] for u in units]


def compare(measure: Measure, scenario: str, a_runs: Sequence[UnitRun],
            b_runs: Sequence[UnitRun], seed: int, resamples: int = RESAMPLES,
            baseline: str = "A") -> Row:
    c = stats.compare([measure.per_unit(r) for r in a_runs],
                      [measure.per_unit(r) for r in b_runs], measure.pool,
                      measure.lower_is_better, seed, resamples)
    return Row(**vars(c), scenario=scenario, measure=measure.name, unit=measure.unit,
               baseline=baseline)


def scenario_rows(scenario: Scenario, runs: Sequence[UnitRun], seed: int,
                  resamples: int = RESAMPLES, baseline: str = "A") -> list[Row]:
    a_runs, b_runs = paired(runs, scenario.name, baseline)
    return [compare(m, scenario.name, a_runs, b_runs, seed, resamples, baseline)
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
        rows += [compare(m, f"{scenario.name} · {language}", mine_a, mine_b, seed, resamples,
                         baseline) for m in measures]
    return rows


def rss_row(scenario: str, a_mb: float | None, b_mb: float | None,
            baseline: str = "A") -> Row:
    r = stats.ratio(a_mb, b_mb)
    return Row(a_mb, b_mb, r, None, None, stats.one_number_verdict(r), 1, scenario=scenario,
               measure="peak RSS", unit="MiB", baseline=baseline)


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
