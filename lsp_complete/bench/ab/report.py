"""The A/B report: `ab-report.md` (a table per baseline, per scenario and measure) and
`ab-samples.json` (every unit's samples, the rows and the run's facts), and the tables
printed."""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from lsp_complete.bench import fmt
from lsp_complete.bench.ab.drive import UnitRun
from lsp_complete.bench.ab.measures import Row
from lsp_complete.bench.stats import RSS_TOLERANCE

REPORT_MD = "ab-report.md"
SAMPLES_JSON = "ab-samples.json"


def baselines_of(meta: dict[str, Any]) -> list[str]:
    """The run's baselines' side keys (a run from before several baselines has A alone)."""
    return list(meta.get("baselines") or ["A"])


def table(rows: Sequence[Row], a: str) -> list[str]:
    """B against baseline `a`: its rows, one per scenario and measure."""
    return fmt.table(["scenario", "measure", a, "B", f"B/{a}", "95% CI", "verdict"], [
        [row.scenario, row.measure, fmt.value(row.a, row.unit), fmt.value(row.b, row.unit),
         fmt.value(row.ratio, "x"),
         "-" if row.low is None else f"{fmt.value(row.low, 'x')} - {fmt.value(row.high, 'x')}",
         f"**{row.verdict}**" if row.verdict == "regression" else row.verdict]
        for row in rows if row.baseline == a])


def tables(meta: dict[str, Any], rows: Sequence[Row]) -> list[str]:
    """One table per baseline, each under a heading naming it (one baseline: its table)."""
    keys = baselines_of(meta)
    if len(keys) == 1:
        return table(rows, keys[0])
    lines: list[str] = []
    for key in keys:
        lines += [f"## B against {key}: {meta['sides'][key]['described']}", "",
                  *table(rows, key), ""]
    return lines[:-1]


def _identical(info: dict[str, Any], baseline: str) -> float | None:
    """The share of suggestions B and `baseline` had alike (one number in older runs)."""
    value = info.get("identical")
    return value.get(baseline) if isinstance(value, dict) else value


def _sides_text(keys: Sequence[str]) -> tuple[str, str]:
    """How the run's servers and their turns are named in the legend."""
    if len(keys) == 1:
        return "Both servers", "the order alternating per unit (A B, B A, ...)"
    order = " ".join([*keys, "B"])
    rotated = " ".join([*keys[1:], "B", keys[0]])
    return (f"All {len(keys) + 1} servers",
            f"the order rotating by one per unit ({order}, {rotated}, ...)")


def markdown(meta: dict[str, Any], rows: Sequence[Row]) -> str:
    sides, settings = meta["sides"], meta["settings"]
    keys = baselines_of(meta)
    several = len(keys) > 1
    regressions = [f"{f'B/{r.baseline} ' if several else ''}{r.scenario}: {r.measure}"
                   for r in rows if r.verdict == "regression"]
    servers, turns = _sides_text(keys)
    a = "A" if not several else "each baseline"
    lines = [
        "# lsp-complete bench",
        "",
        *[f"- **{key}** (baseline): {sides[key]['described']}" for key in keys],
        f"- **B** (candidate): {sides['B']['described']}",
        f"- {meta['date']}; {meta['machine']['cpu']}, {meta['machine']['cores_usable']} cores; "
        f"model {meta['model']['name'] or meta['model']['path']}; {settings['threads']} threads; "
        f"maxTokens {settings['max_tokens']}; seed {settings['seed']}; run "
        f"{settings['run_seconds']} s",
        f"- {settings['spans']} spans ({settings['keystrokes']} keystrokes), "
        f"{settings['cold_files']} never-seen files, {settings['humaneval_tasks']} HumanEval "
        f"lines ({settings['humaneval_source']})",
        f"- {servers.lower()}: initializationOptions {json.dumps(settings['server_options'])}",
        *[f"- {name}: its servers also given {json.dumps(options)}"
          for name, options in settings.get("scenario_options", {}).items()],
        "",
        f"{servers} ran in this one run, on the same work, one at a time, {turns}, each quiet "
        f"before the next one's turn. B/A is the ratio of B's value to {a}'s; the 95% "
        f"interval is a paired bootstrap ({settings['resamples']} resamples) over spans, files "
        "or tasks. **regression**: the "
        "whole interval lies on the worse side of 1 (above for times and costs, below for "
        "quality); improvement: on the better side; same: it holds 1. Peak RSS has one value "
        f"per server and scenario: beyond +-{RSS_TOLERANCE:.0%} counts.",
        "",
        "Regressions: " + ("; ".join(regressions) if regressions else "none") + ".",
        "",
        *tables(meta, rows),
        "",
        *_scenarios_table(meta, keys),
    ]
    lines += ["", *[f"- {note}" for note in meta.get("notes", [])], ""]
    return "\n".join(lines)


def _scenarios_table(meta: dict[str, Any], keys: Sequence[str]) -> list[str]:
    """Per scenario: units, suggestions alike, and each server's errors, startup and what it
    did while it was not being driven (values in the order the heading names the sides)."""
    order = [*keys, "B"]
    each = " / ".join(order)
    alike = "on both" if len(keys) == 1 else f"as B ({' / '.join(keys)})"
    header = ["scenario", "units", f"same suggestion {alike}", f"errors ({each})",
              f"startup ({each})", f"idle server woke ({each})",
              f"CPU of the idle server during the others' turns ({each})"]
    rows = [[name, str(info["units"]),
             " / ".join(fmt.value(_identical(info, key), "share") for key in keys),
             _joined(info, order, "errors"), _joined(info, order, "startup_ms", "ms"),
             _joined(info, order, "woke"), _joined(info, order, "idle_cpu_s", "s")]
            for name, info in meta["scenarios"].items()]
    return ["## Scenarios", "", *fmt.table(header, rows)]


def _joined(info: dict[str, Any], order: Sequence[str], field: str, unit: str = "") -> str:
    values = [info[key][field] for key in order]
    return " / ".join(fmt.value(v, unit) if unit else str(v) for v in values)


def write(out: Path, meta: dict[str, Any], rows: Sequence[Row],
          runs: Sequence[UnitRun]) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    md = out / REPORT_MD
    md.write_text(markdown(meta, rows), encoding="utf-8")
    data = {
        "meta": meta,
        "rows": [dataclasses.asdict(r) for r in rows],
        "units": [dataclasses.asdict(r) for r in runs],
    }
    samples = out / SAMPLES_JSON
    # Infinite ratios are written as strings: JSON has no infinity.
    samples.write_text(json.dumps(_finite(data), indent=1), encoding="utf-8")
    return [md, samples]


def _finite(value: Any) -> Any:
    if isinstance(value, float) and math.isinf(value):
        return "inf" if value > 0 else "-inf"
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_finite(v) for v in value]
    return value
