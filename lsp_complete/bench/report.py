"""Writers: `report.md` (tables), `samples.json` (every sample), `latency.png` (ECDFs)."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from lsp_complete.bench import coldfiles, crossfile, fmt
from lsp_complete.bench.metrics import OPEN_PHASES
from lsp_complete.bench.records import BASELINE_KEYS, ENGINE_LABELS, Sample

REPORT_MD = "report.md"
SAMPLES_JSON = "samples.json"
LATENCY_PNG = "latency.png"


def write_all(
    out: Path, meta: dict[str, Any], summary: dict[str, Any], samples: Sequence[Sample]
) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    cross = crossfile.summarize(list(samples))
    for key, row in summary.items():  # every engine's never-seen files
        row["coldfile"] = coldfiles.summarize([s for s in samples if s.engine == key])
    paths = [
        write_json(out / SAMPLES_JSON, meta, summary, samples, cross),
        plot_latency(out / LATENCY_PNG, samples, meta.get("settings", {}).get("pace_ms")),
    ]
    paths.insert(0, write_markdown(out / REPORT_MD, meta, summary, cross))
    return paths


def write_json(
    path: Path, meta: dict[str, Any], summary: dict[str, Any], samples: Sequence[Sample],
    cross: dict[str, Any] | None = None,
) -> Path:
    data = {
        "meta": meta,
        "summary": summary,
        "crossfile": cross or {},
        "samples": [dataclasses.asdict(s) for s in samples],
    }
    path.write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return path


# --- markdown ---------------------------------------------------------------------------------


def _main_table(summary: dict[str, Any]) -> list[str]:
    header = [
        "engine", "keystrokes", "p50", "p95", "p99", "encoded/key mean", "encoded/key median",
        "typing-ahead", "line-exact", "HumanEval EM", "HumanEval pass@1", "peak RSS",
    ]  # fmt: skip
    rows = []
    for row in summary.values():
        r, he = row["replay"], row["humaneval"]
        exact = f"{fmt.pct(r['line_exact'])} ({r['line_exact_hits']}/{r['line_exact_n']})"
        em = f"{fmt.pct(he['em'])} ({he['em_hits']}/{he['n']})" if he["n"] else "n/a"
        passed = f"{fmt.pct(he['pass1'])} ({he['pass_hits']}/{he['n']})" if he["n"] else "n/a"
        rows.append([
            row["label"], str(r["n"]), fmt.ms(r["p50"]), fmt.ms(r["p95"]), fmt.ms(r["p99"]),
            fmt.num(r["encoded_mean"], 1), fmt.num(r["encoded_median"], 1),
            fmt.pct(r["typeahead_share"]), exact, em, passed,
            fmt.mb(row.get("peak_rss_mb")),
        ])  # fmt: skip
    return fmt.table(header, rows)


def _model_call_table(summary: dict[str, Any]) -> list[str]:
    header = [
        "engine", "model calls", "p50", "p95", "p99", "encoded/call mean",
        "encoded/call median", "calls encoding <= 4 tokens", "first keystroke of a span p50",
        "first keystroke max",
    ]  # fmt: skip
    rows = []
    for row in summary.values():
        m = row["replay"]["model_calls"]
        first = row["replay"].get("first_keys") or {}  # older samples.json: no such entry
        rows.append([
            row["label"], str(m["n"]), fmt.ms(m["p50"]), fmt.ms(m["p95"]), fmt.ms(m["p99"]),
            fmt.num(m["encoded_mean"], 1), fmt.num(m["encoded_median"], 1),
            fmt.pct(m["encoded_le4_share"]), fmt.ms(first.get("p50")), fmt.ms(first.get("max")),
        ])  # fmt: skip
    return fmt.table(header, rows)


def _ratio_table(summary: dict[str, Any]) -> list[str]:
    bases = [b for b in BASELINE_KEYS if b in summary]
    if not bases:
        return ["No baseline ran, so there are no ratios.", ""]
    header = ["engine"] + [f"{q} / {b} {q}" for b in bases for q in ("p50", "p95")]
    rows = []
    for row in summary.values():
        cells = [row["label"]]
        for base in bases:
            ratio = row["ratios"].get(base)
            cells += ["-", "-"] if ratio is None else [fmt.x_ci(ratio[q], ratio.get(f"{q}_ci"))
                                                       for q in ("p50", "p95")]
        rows.append(cells)
    return fmt.table(header, rows)


def _paced_table(summary: dict[str, Any]) -> list[str]:
    header = [
        "engine", "requests", "fresh answers", "newest-key p50", "newest-key p95",
        "typing-ahead", "superseded", "worker time on stale keystrokes",
    ]  # fmt: skip
    rows = []
    for row in summary.values():
        p = row["paced"]
        rows.append([
            row["label"], str(p["requests"]), fmt.pct(p["fresh_share"]), fmt.ms(p["p50"]),
            fmt.ms(p["p95"]), fmt.pct(p["typeahead_share"]), fmt.pct(p["superseded_share"]),
            _stale(row),
        ])  # fmt: skip
    return fmt.table(header, rows)


def _stale(row: dict[str, Any]) -> str:
    """Worker time spent on keystrokes already typed past (total / after being superseded)."""
    total, after = row.get("paced_stale_work_ms"), row.get("paced_work_after_cancel_ms")
    seconds = row.get("paced_seconds")
    if total is None:
        return "n/a"
    share = f", {total / 10 / seconds:.0f}% of the run" if seconds else ""
    return f"{fmt.ms(total)} ({fmt.ms(after)} after superseded{share})"


def _open_table(summary: dict[str, Any]) -> list[str]:
    header = ["engine", *OPEN_PHASES, "server start"]
    rows = []
    for row in summary.values():
        cells = [row["label"]] + [fmt.ms(row["open"].get(phase)) for phase in OPEN_PHASES]
        rows.append(cells + [fmt.ms(row.get("startup_ms"))])
    return fmt.table(header, rows)


def _meta_lines(meta: dict[str, Any]) -> list[str]:
    machine, model, settings = meta["machine"], meta["model"], meta["settings"]
    versions = ", ".join(f"{k} {v}" for k, v in meta["versions"].items() if v)
    size_mb = model["size_bytes"] / 1e6
    lines = [
        f"- Date: {meta['date']}",
        f"- Machine: {machine['cpu']}, {machine['cores']} cores "
        f"({machine['cores_usable']} usable), {machine['threads_used']} threads used; "
        f"{machine['platform']}, Python {machine['python']}",
        f"- Model: `{model['path']}` ({model.get('name') or 'by path'}), {size_mb:,.1f} MB, "
        f"sha256 `{model['sha256']}`",
        "- Settings: " + ", ".join(f"{k}={v}" for k, v in settings.items()),
        f"- Versions: {versions}",
        f"- Replay files: {', '.join('`' + f + '`' for f in meta.get('files', []))}",
    ]
    if meta.get("open_file"):
        lines.append(
            f"- Open-latency file: `{meta['open_file']}` ({meta.get('open_file_lines')} lines)"
        )
    return lines + [""]


def _rest_note(rest_ms: float | None) -> str:
    if not rest_ms:
        return "Typing starts the moment a span's file is open: its first keystroke is cold."
    return (
        f"Each span starts as an edit does: the file is opened, the cursor put at the span, and "
        f"typing starts {rest_ms / 1000:g} s later. lsp-complete hears where the cursor is "
        "(lsp-complete/didMoveCursor, which its VS Code and Neovim clients send); each baseline "
        "gets one unrecorded request there, which fills its cache for that spot."
    )


def _crossfile_table(rows: dict[str, Any]) -> list[str]:
    header = ["engine", "lines", "exact match", "needed identifiers", "edit similarity",
              "repository tokens (mean)", "server RSS (max)"]
    return fmt.table(header, [
        [row["label"], str(row["n"]), f"{row['em']:.3f}", f"{row['needed']:.3f}",
         f"{row['es']:.3f}", fmt.num(row["repo_tokens_mean"]), fmt.mb(row.get("rss_max_mib"))]
        for row in rows.values()
    ])


def write_markdown(path: Path, meta: dict[str, Any], summary: dict[str, Any],
                   cross: dict[str, Any] | None = None) -> Path:
    pace = meta["settings"].get("pace_ms")
    lines = ["# lsp-complete bench", ""]
    lines += _meta_lines(meta)
    lines += [
        "## Typing replay, sequential (each answer awaited)",
        "",
        "Latency per keystroke as the client sees it; tokens encoded = prompt tokens the engine "
        "had to compute for that request; line-exact = the suggestion's first line completes "
        "the line exactly as it was typed.  HumanEval: single-line infilling, each line of each "
        "canonical solution masked.",
        "",
    ]
    lines += _main_table(summary)
    lines += [
        "### Model calls only (keystrokes answered by typing-ahead left out)",
        "",
        "What a keystroke costs when the model does run; the first keystroke of each span "
        "is included. " + _rest_note(meta["settings"].get("rest_ms")),
        "",
    ]
    lines += _model_call_table(summary)
    lines += ["### Latency ratios against the baselines of this run (lower is faster)", "",
              "With 95% paired bootstrap intervals over the spans both typed.", ""]
    lines += _ratio_table(summary)
    lines += [
        f"## Paced typing (one keystroke every {pace} ms, answers not awaited)",
        "",
        "Fresh answers: answers that arrived while their keystroke was still the newest; their "
        "latency is what a typist waits for.  A stateless baseline serves one request at a "
        "time and drops one still waiting when a newer one comes (superseded).",
        "",
    ]
    lines += _paced_table(summary)
    lines += ["## First suggestion after opening a large file", ""]
    lines += _open_table(summary)
    cold = [coldfiles.markdown_row(row["label"], row["coldfile"]) for row in summary.values()
            if (row.get("coldfile") or {}).get("files")]
    if cold:
        lines += ["### Never-seen files", "",
                  "Large stdlib modules, each opened and asked at once mid-way through a line, "
                  "then its next two characters typed; line-exact: the suggestion completes the "
                  "line as written.", "", *coldfiles.markdown(cold)]
    if cross:
        lines += [
            "## Cross-file lines",
            "",
            "A line of module A uses a name A imports from a sibling module B; the cursor sits "
            "right after `name(` or `name.`, and the rest of the line uses an identifier B "
            "defines that A's text before the cursor never mentions "
            f"({meta['settings'].get('crossfile', '?')} lines of "
            f"{meta['settings'].get('crossfile_packages', '?')} installed packages, "
            f"{meta['settings'].get('crossfile_js_lines', 0)} of them JavaScript/TypeScript).  "
            "Needed "
            "identifiers: the share of those identifiers the first suggested line holds.  "
            "(d) gets a moment at the spot (didMoveCursor, idle work done) before it is asked.",
            "",
        ]
        lines += _crossfile_table(cross)
    lines += [f"![latency distributions]({LATENCY_PNG})", ""]
    for row in summary.values():
        if row.get("errors"):
            lines.append(f"- {row['label']}: {row['errors']} requests failed (see samples.json).")
    for note in meta.get("notes", []):
        lines.append(f"- {note}")
    path.write_text("\n".join(lines).rstrip() + "\n", encoding="utf-8")
    return path


# --- plot -------------------------------------------------------------------------------------


def plot_latency(path: Path, samples: Sequence[Sample], pace_ms: float | None = None) -> Path:
    """ECDF of per-keystroke latency of every engine on one log-x chart."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 4.5), dpi=120)
    plotted = False
    for index, key in enumerate(("a", "b", "c", "d")):
        for workload, style in (("replay", "-"), ("paced", "--")):
            # Failed requests and stale paced answers are not suggestions anyone waited for.
            values = sorted(
                s.latency_ms
                for s in samples
                if s.engine == key
                and s.workload == workload
                and s.source != "error"
                and s.fresh is not False
            )
            if not values:
                continue
            ys = [(i + 1) / len(values) for i in range(len(values))]
            suffix = "" if workload == "replay" else f", paced {pace_ms} ms (fresh answers)"
            ax.step(
                [max(v, 0.01) for v in values],
                ys,
                style,
                where="post",
                color=f"C{index}",
                label=f"{ENGINE_LABELS[key]}{suffix}",
            )
            plotted = True
    ax.set_xscale("log")
    ax.set_xlabel("latency per keystroke (ms, log scale)")
    ax.set_ylabel("share of requests at or below")
    ax.set_ylim(0, 1.02)
    ax.grid(True, which="both", alpha=0.3)
    ax.set_title("Inline completion latency, typing replay")
    if plotted:
        ax.legend(fontsize=7, loc="upper left")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path
