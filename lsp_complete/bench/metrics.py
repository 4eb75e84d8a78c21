"""Summaries of samples: latency percentiles, tokens per keystroke, quality, paced typing."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from lsp_complete.bench import stats
from lsp_complete.bench.records import BASELINE_KEYS, ENGINE_LABELS, Sample
from lsp_complete.bench.stats import latency_summary, mean, median

OPEN_PHASES = ("cold-open", "warm-keystroke", "warm-reopen", "restart-from-disk")


def replay_summary(samples: Sequence[Sample]) -> dict[str, Any]:
    encoded = [s.encoded_tokens for s in samples if s.encoded_tokens is not None]
    prompt = [s.prompt_tokens for s in samples if s.prompt_tokens is not None]
    share, hits, n = stats.share(s.line_exact for s in samples)
    # A request that failed is no answer: it counts against quality, not in latency.
    return {
        **latency_summary([s.latency_ms for s in samples if s.source != "error"]),
        "encoded_mean": mean(encoded),
        "encoded_median": median(encoded),
        "prompt_mean": mean(prompt),
        "line_exact": share,
        "line_exact_hits": hits,
        "line_exact_n": n,
        "typeahead_share": (
            sum(s.source == "typeahead" for s in samples) / len(samples) if samples else None
        ),
        "model_calls": _model_call_summary(samples),
        # The first keystroke of each span: where a cold prompt shows.
        "first_keys": latency_summary(
            [s.latency_ms for s in samples if s.index == 0 and s.source != "error"]
        ),
    }


def _model_call_summary(samples: Sequence[Sample]) -> dict[str, Any]:
    """The same keystrokes without the ones typing-ahead answered: what the model costs when
    it does run (typing-ahead answers encode nothing, which would hide it)."""
    calls = [s for s in samples if s.source not in ("typeahead", "error")]
    encoded = [s.encoded_tokens for s in calls if s.encoded_tokens is not None]
    return {
        **latency_summary([s.latency_ms for s in calls]),
        "encoded_mean": mean(encoded),
        "encoded_median": median(encoded),
        "encoded_le4_share": (sum(e <= 4 for e in encoded) / len(encoded)) if encoded else None,
    }


def humaneval_summary(samples: Sequence[Sample]) -> dict[str, Any]:
    em, em_hits, n = stats.share(s.exact_match for s in samples)
    passed, pass_hits, _ = stats.share(s.passed for s in samples)
    return {"n": n, "em": em, "em_hits": em_hits, "pass1": passed, "pass_hits": pass_hits}


def paced_summary(samples: Sequence[Sample]) -> dict[str, Any]:
    """Paced typing: the fresh answers' latency and shares of the requests (every engine is
    measured: a stateless one drops a request still waiting when a newer one comes)."""
    n = len(samples)

    def share(source: str) -> float | None:
        return sum(s.source == source for s in samples) / n if n else None

    fresh = [s.latency_ms for s in samples if s.fresh]
    return {**latency_summary(fresh), "requests": n, "fresh_share": len(fresh) / n if n else None,
            "typeahead_share": share("typeahead"), "superseded_share": share("superseded")}


def summarize(samples: Sequence[Sample], extras: dict[str, dict[str, Any]]):
    """Per-engine summary in engine order; `extras` holds peak RSS and startup per engine."""
    engines = [k for k in ("a", "b", "c", "d") if any(s.engine == k for s in samples)]
    summary: dict[str, dict[str, Any]] = {}
    for key in engines:
        mine = [s for s in samples if s.engine == key]
        replay = [s for s in mine if s.workload == "replay"]
        paced = [s for s in mine if s.workload == "paced"]
        opens = {s.case: s.latency_ms for s in mine if s.workload == "open"}
        summary[key] = {
            "label": ENGINE_LABELS[key],
            "replay": replay_summary(replay),
            "paced": paced_summary(paced),
            "open": {phase: opens.get(phase) for phase in OPEN_PHASES},
            "humaneval": humaneval_summary([s for s in mine if s.workload == "humaneval"]),
            "errors": sum(s.source == "error" for s in mine),
            **extras.get(key, {}),
        }
    for key, row in summary.items():
        row["ratios"] = {base: replay_ratios(samples, base, key)
                         for base in BASELINE_KEYS if base in summary and base != key}
    return summary


def replay_ratios(samples: Sequence[Sample], base: str, key: str) -> dict[str, Any]:
    """`key`'s replay latency p50 and p95 over `base`'s, with paired bootstrap intervals
    over the spans both typed."""
    a, b = (stats.by_unit((s.case, s.latency_ms) for s in samples
                          if s.engine == k and s.workload == "replay" and s.source != "error")
            for k in (base, key))
    found: dict[str, Any] = {}
    for q in (50, 95):
        c = stats.compare_units(a, b, stats.pct_pool(q))
        found[f"p{q}"], found[f"p{q}_ci"] = c.ratio, [c.low, c.high]
    return found
