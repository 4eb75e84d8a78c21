"""The A/B report: `ab-report.md` (the table, per scenario and measure) and `ab-samples.json`
(every unit's samples, the rows and the run's facts), and the table printed."""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from lsp_complete.bench.ab.drive import UnitRun
from lsp_complete.bench.ab.stats import RSS_TOLERANCE, Row

REPORT_MD = "ab-report.md"
SAMPLES_JSON = "ab-samples.json"


def _value(value: float | None, unit: str) -> str:
    if value is None:
        return "n/a"
    if unit == "ms":
        return f"{value:,.0f} ms" if value >= 10 else f"{value:.1f} ms"
    if unit == "share":
        return f"{value * 100:.1f}%"
    if unit == "s":
        return f"{value:.3f} s"
    if unit == "MiB":
        return f"{value:,.0f} MiB"
    return f"{value:.2f}"


def _x(value: float | None) -> str:
    if value is None:
        return "n/a"
    return "inf" if math.isinf(value) else f"{value:.2f}x"


def _verdict(verdict: str) -> str:
    return f"**{verdict}**" if verdict == "regression" else verdict


def table(rows: Sequence[Row]) -> list[str]:
    lines = ["| scenario | measure | A | B | B/A | 95% CI | verdict |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    for row in rows:
        ci = "-" if row.low is None else f"{_x(row.low)} - {_x(row.high)}"
        lines.append(f"| {row.scenario} | {row.measure} | {_value(row.a, row.unit)} | "
                     f"{_value(row.b, row.unit)} | {_x(row.ratio)} | {ci} | "
                     f"{_verdict(row.verdict)} |")
    return lines


def markdown(meta: dict[str, Any], rows: Sequence[Row]) -> str:
    sides, settings = meta["sides"], meta["settings"]
    regressions = [f"{r.scenario}: {r.measure}" for r in rows if r.verdict == "regression"]
    lines = [
        "# lsp-complete A/B",
        "",
        f"- **A** (baseline): {sides['A']['described']}",
        f"- **B** (candidate): {sides['B']['described']}",
        f"- {meta['date']}; {meta['machine']['cpu']}, {meta['machine']['cores_usable']} cores; "
        f"model {meta['model']['name'] or meta['model']['path']}; {settings['threads']} threads; "
        f"maxTokens {settings['max_tokens']}; seed {settings['seed']}; run "
        f"{settings['run_seconds']} s",
        f"- {settings['spans']} spans ({settings['keystrokes']} keystrokes), "
        f"{settings['cold_files']} never-seen files, {settings['humaneval_tasks']} HumanEval "
        f"lines ({settings['humaneval_source']})",
        f"- both servers: initializationOptions {json.dumps(settings['server_options'])}",
        "",
        "Both servers ran in this one run, on the same work, one at a time, the order "
        "alternating per unit (A B, B A, ...), each quiet before the other's turn. B/A is the "
        f"ratio of B's value to A's; the 95% interval is a paired bootstrap "
        f"({settings['resamples']} resamples) over spans, files or tasks. **regression**: the "
        "whole interval lies on the worse side of 1 (above for times and costs, below for "
        "quality); improvement: on the better side; same: it holds 1. Peak RSS has one value "
        f"per server and scenario: beyond +-{RSS_TOLERANCE:.0%} counts.",
        "",
        "Regressions: " + ("; ".join(regressions) if regressions else "none") + ".",
        "",
        *table(rows),
        "",
        "## Scenarios",
        "",
        "| scenario | units | same suggestion on both | A errors | B errors | A startup | "
        "B startup | idle server woke (A / B) | CPU of the idle server during the other's "
        "turns (A / B) |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for name, info in meta["scenarios"].items():
        a, b = info["A"], info["B"]
        lines.append(
            f"| {name} | {info['units']} | {_value(info.get('identical'), 'share')} | "
            f"{a['errors']} | {b['errors']} | "
            f"{_value(a['startup_ms'], 'ms')} | {_value(b['startup_ms'], 'ms')} | "
            f"{a['woke']} / {b['woke']} | {_value(a['idle_cpu_s'], 's')} / "
            f"{_value(b['idle_cpu_s'], 's')} |")
    lines += ["", *[f"- {note}" for note in meta.get("notes", [])], ""]
    return "\n".join(lines)


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
