"""(d) side by side: one fresh server per model and `speculation` mode, on the same work.

`--speculation off,lookup,draft` and `--models A,B` run this set once per (model, mode) pair,
one server after another (two at once would share the cores), the mode sent in
initializationOptions as an editor sends it. Each server gets, in this order:

- the typing replay, sequential as in the main run: model-call latency, and ms per generated
  token (the engine's generation time, `generateMs` of each request in lsp-complete/status);
- HumanEval single-line infilling, then the multi-line block set (the cursor at the start of a
  function body, the whole body suggested: time to the complete suggestion, pass@1). Each of
  these requests is made once the server is idle (the cursor put there first, idle work
  done), so its prompt is the same in every run: the suggestions of two modes can be compared,
  and lossless speculation must leave them equal;
- drafts verified and draft tokens accepted per verify step, from the engine counters in
  lsp-complete/status (per phase), and the server's resident memory (peak and at the end).

`draft` runs only for a model whose models.toml entry declares a draft model.
"""

from __future__ import annotations

import asyncio
import dataclasses
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from lsprotocol import types

from lsp_complete.bench import coldfiles, fmt, lsp_driver, metrics, stats
from lsp_complete.bench.humaneval import BlockTask, build_block_tasks
from lsp_complete.bench.records import Sample
from lsp_complete.bench.runner import (
    BenchConfig,
    Workload,
    _bar,
    ask_tasks,
    lsp_server,
    type_spans,
)
from lsp_complete.bench.spans import span_version
from lsp_complete.config import Settings
from lsp_complete.engine.speculation import SPECULATION_MODES

REPLAY, HUMANEVAL, BLOCK = "variant-replay", "variant-humaneval", "variant-block"
COLD = "variant-coldfile"  # never-seen files (bench/coldfiles.py)
WORKLOADS = (REPLAY, HUMANEVAL, BLOCK, COLD)
# The idle phases: idle work re-anchors soon after an edit (not the default 400 ms later), so
# that waiting for an idle server also waits for it; blocks are multi-line, whole, and never
# cut short by the time budget (their time to the complete suggestion is what is measured).
IDLE_OPTIONS = {"idleReanchorMs": 50}
BLOCK_OPTIONS = {"multiline": "always", "maxTokens": 256, "timeBudgetMs": 120_000}
COUNTERS = ("calls", "tokens_generated", "generation_decodes", "drafts_verified",
            "draft_tokens", "draft_accepted", "near_ties")  # fmt: skip


@dataclass(frozen=True)
class ModelUnderTest:
    name: str  # models.toml name, or the file's stem
    path: str
    draft: str | None = None  # the draft model its entry declares


@dataclass(frozen=True)
class Variant:
    model: ModelUnderTest
    mode: str

    @property
    def key(self) -> str:
        return f"{self.model.name}/{self.mode}"


@dataclass
class VariantRun:
    """What one variant's server reported besides its samples (kept in the report's meta)."""

    key: str
    model: str
    mode: str
    peak_rss_mb: float | None = None
    end_rss_mb: float | None = None
    startup_ms: float | None = None
    counters: dict[str, dict[str, int]] = field(default_factory=dict)  # phase -> deltas
    speculation: Any = None  # the engine's own account at the end (acceptance, costs)


def parse_modes(text: str) -> tuple[str, ...]:
    modes = tuple(dict.fromkeys(m.strip() for m in text.split(",") if m.strip()))
    unknown = [m for m in modes if m not in SPECULATION_MODES]
    if unknown or not modes:
        raise ValueError(
            f"--speculation: unknown mode(s) {', '.join(unknown) or '(none given)'}; use a comma "
            f"list of {', '.join(SPECULATION_MODES)}"
        )
    return modes


def resolve_models(names: Sequence[str]) -> list[ModelUnderTest]:
    """Each `--models` entry resolved as the server would (offline: assembled from installed
    packages if need be), with the draft model its entry declares."""
    from lsp_complete.model_store import resolve_model

    models: list[ModelUnderTest] = []
    for name in names:
        resolved = resolve_model(name)
        models.append(model_under_test(str(resolved.path), resolved.spec))
    return unique_names(models)


def model_under_test(path: str, spec: Any) -> ModelUnderTest:
    name = getattr(spec, "name", None) or Path(path).stem
    return ModelUnderTest(name=name, path=path, draft=getattr(spec, "draft", None))


def unique_names(models: Sequence[ModelUnderTest]) -> list[ModelUnderTest]:
    """Variant keys must differ: a second model of the same name gets `#2`."""
    seen: dict[str, int] = {}
    out: list[ModelUnderTest] = []
    for model in models:
        seen[model.name] = seen.get(model.name, 0) + 1
        count = seen[model.name]
        name = model.name if count == 1 else f"{model.name}#{count}"
        out.append(dataclasses.replace(model, name=name))
    return out


def plan(models: Sequence[ModelUnderTest], modes: Sequence[str]) -> tuple[list[Variant], list[str]]:
    """Every (model, mode) pair to run, model by model, and notes on the pairs left out."""
    variants: list[Variant] = []
    notes: list[str] = []
    for model in models:
        for mode in modes:
            if mode == "draft" and not model.draft:
                notes.append(f"{model.name}: its models.toml entry declares no draft model, "
                             "so `draft` did not run for it.")
                continue
            variants.append(Variant(model, mode))
    return variants, notes


@dataclass
class SideBySide:
    """What `--speculation` / `--models` asked for, checked before anything runs."""

    modes: tuple[str, ...]
    models: list[ModelUnderTest]
    variants: list[Variant]
    notes: list[str]
    blocks: list[BlockTask]

    def run(self, cfg: BenchConfig, work: Workload) -> tuple[list[Sample], dict[str, Any]]:
        """Every variant on `work` and the blocks; the samples and the report's meta part."""
        samples, runs = run_variants(cfg, self.variants, work, self.blocks)
        meta = {
            "modes": list(self.modes),
            "models": [dataclasses.asdict(m) for m in self.models],
            "blocks": len(self.blocks),
            "humaneval_lines": len(work.tasks),
            "runs": runs,
            "notes": self.notes,
        }
        return samples, meta


def side_by_side(
    speculation: str | None,
    models: str | None,
    blocks: int,
    main_model: ModelUnderTest,
) -> SideBySide | None:
    """The plan for `--speculation MODES` and `--models A,B` (None when neither is given):
    without --models, the main model; without --speculation, the server's default mode.
    Raises ValueError for an unknown mode; a model that cannot be resolved, ModelError."""
    if speculation is None and models is None:
        return None
    modes = parse_modes(speculation or "auto")
    names = [m.strip() for m in (models or "").split(",") if m.strip()]
    chosen = resolve_models(names) if names else [main_model]
    variants, notes = plan(chosen, modes)
    return SideBySide(modes, chosen, variants, notes, build_block_tasks(blocks))


# --- running -----------------------------------------------------------------------------------


def _counters(status: dict[str, Any]) -> dict[str, int]:
    found = status.get("engineCounters") or {}
    return {name: int(found.get(name) or 0) for name in COUNTERS}


def _phase(
    run: VariantRun, phase: str, before: dict[str, int], status: dict[str, Any]
) -> dict[str, int]:
    """Record the counters' change over a phase; returns the counters now."""
    after = _counters(status)
    run.counters[phase] = {name: after[name] - before[name] for name in COUNTERS}
    return after


async def _configure(session: lsp_driver.Session, options: dict[str, Any]) -> None:
    """Change completion settings as an editor does (no model reload)."""
    assert isinstance(session, lsp_driver.ServerSession)  # a variant is lsp-complete's server
    session.client.workspace_did_change_configuration(
        types.DidChangeConfigurationParams(settings=options)
    )
    await session.wait_idle()


def _attach_generate_ms(samples: list[Sample], episodes: Sequence[Any], status: dict) -> None:
    """The engine's generation time of each replayed keystroke, from its status record
    (type_spans numbers the versions of episode i from `spans.span_version(i)`)."""
    for i, ep in enumerate(episodes):
        records = lsp_driver.stats_by_version(status, Path(ep.path).resolve().as_uri())
        for sample in samples:
            if sample.case == ep.name:
                record = records.get(span_version(i) + sample.index + 1) or {}
                sample.extra["generate_ms"] = record.get("generateMs")


async def run_variant_async(
    cfg: BenchConfig, variant: Variant, work: Workload, blocks: Sequence[BlockTask]
) -> tuple[list[Sample], VariantRun]:
    """One fresh server for `variant`: replay, then HumanEval and blocks once idle."""
    out = cfg.out / "variants" / re.sub(r"[^\w.#-]+", "_", variant.key)
    out.mkdir(parents=True, exist_ok=True)  # its own server.log
    vcfg = dataclasses.replace(cfg, model_path=variant.model.path,
                               model_name=variant.model.name, out=out)
    server = lsp_server(vcfg, extra_options={"speculation": variant.mode})
    run = VariantRun(variant.key, variant.model.name, variant.mode)
    samples: list[Sample] = []
    try:
        async with server.running() as session:
            before = _counters(await session.status())
            with _bar(f"(d) {variant.key} replay", work.n_keystrokes) as bar:
                replay = await type_spans(session, "d", work.episodes, bar.update, cfg.rest_ms,
                                          workload=REPLAY)
            status = await session.status()
            _attach_generate_ms(replay, work.episodes, status)
            samples += replay
            before = _phase(run, "replay", before, status)
            await _configure(session, IDLE_OPTIONS)
            with _bar(f"(d) {variant.key} humaneval", len(work.tasks)) as bar:
                samples += await ask_tasks(session, "d", work.tasks, HUMANEVAL, work.passes,
                                           bar.update, idle=True)
            before = _phase(run, "humaneval", before, await session.status())
            await _configure(session, BLOCK_OPTIONS)
            with _bar(f"(d) {variant.key} blocks", len(blocks)) as bar:
                samples += await ask_tasks(session, "d", blocks, BLOCK, work.passes, bar.update,
                                           idle=True)
            before = _phase(run, "block", before, await session.status())
            # Never-seen files as the replay runs: the server's own timing, single lines.
            defaults = Settings()
            await _configure(session, {
                "multiline": server.init_options["multiline"], "maxTokens": cfg.max_tokens,
                "timeBudgetMs": defaults.time_budget_ms,
                "idleReanchorMs": defaults.idle_reanchor_ms})
            with _bar(f"(d) {variant.key} never-seen files", len(work.cold_cases)) as bar:
                samples += await coldfiles.run_lsp(session, work.cold_cases, bar.update, COLD)
            final = await session.status()
            _phase(run, "coldfile", before, final)
            run.end_rss_mb = (final.get("memory") or {}).get("rssMiB")
            run.speculation = (final.get("engine") or {}).get("speculation")
    finally:
        server.cleanup()
    run.peak_rss_mb = max(server.peak_rss_mb, default=None)
    run.startup_ms = server.startup_ms[0] if server.startup_ms else None
    for sample in samples:
        sample.variant = variant.key
        sample.extra.update(model=variant.model.name, speculation=variant.mode)
    return samples, run


def run_variants(
    cfg: BenchConfig, variants: Sequence[Variant], work: Workload, blocks: Sequence[BlockTask]
) -> tuple[list[Sample], list[dict[str, Any]]]:
    samples: list[Sample] = []
    runs: list[dict[str, Any]] = []
    for variant in variants:
        mine, run = asyncio.run(run_variant_async(cfg, variant, work, blocks))
        samples += mine
        runs.append(dataclasses.asdict(run))
    return samples, runs


# --- summary -----------------------------------------------------------------------------------


def token_rows(samples: Sequence[Sample]) -> tuple[list[tuple[str, tuple[float, int]]], str]:
    """(case, (generation ms, generated tokens)) of each request that generated, and the
    basis of the time: "generation" (the engine's own timing), else "latency" (the whole
    request, from servers that do not report `generateMs`)."""
    calls = [s for s in _calls(samples) if (s.generated_tokens or 0) > 0]
    if not calls:
        return [], "n/a"
    timed = all(s.extra.get("generate_ms") is not None for s in calls)
    return ([(s.case, (s.extra["generate_ms"] if timed else s.latency_ms,
                       s.generated_tokens or 0)) for s in calls],
            "generation" if timed else "latency")


def ms_per_token(samples: Sequence[Sample]) -> tuple[float | None, str]:
    """Generation time per generated token over the requests that generated, and its basis."""
    rows, basis = token_rows(samples)
    return stats.per_count_pool(np.array([row for _, row in rows], dtype=float)), basis


def _counter_totals(run: dict[str, Any]) -> dict[str, int]:
    totals = dict.fromkeys(COUNTERS, 0)
    for phase in (run.get("counters") or {}).values():
        for name in COUNTERS:
            totals[name] += int(phase.get(name) or 0)
    return totals


def _draft_sources(run: dict[str, Any]) -> list[str]:
    """Where the engine's drafts came from (its acceptance kinds without their n-gram length):
    shows whether `draft` had a draft model or fell back to prompt lookup."""
    acceptance = (run.get("speculation") or {}).get("acceptance") or {}
    return sorted({str(kind).rstrip("0123456789") for kind in acceptance})


def _per_step(totals: dict[str, int], name: str) -> float | None:
    steps = totals["drafts_verified"]
    return totals[name] / steps if steps else None


def _block_summary(samples: Sequence[Sample]) -> dict[str, Any]:
    answered = [s for s in samples if s.source != "error"]
    judged = [s.passed for s in samples if s.passed is not None]
    hits, n = sum(judged), len(judged)
    share = hits / n if n else None
    per_token, basis = ms_per_token(samples)
    generated = [s.generated_tokens for s in answered if s.generated_tokens is not None]
    return {
        **stats.latency_summary([s.latency_ms for s in answered]),
        "pass1": share, "pass_hits": hits, "tasks": n,
        "ms_per_token": per_token, "ms_per_token_basis": basis,
        "generated_mean": stats.mean(generated),
    }  # fmt: skip


def _idle_answers(samples: Sequence[Sample]) -> dict[tuple[str, str], str]:
    return {(s.workload, s.case): s.suggestion for s in samples
            if s.workload in (HUMANEVAL, BLOCK) and s.source != "error"}


def identical_share(
    mine: Sequence[Sample], base: Sequence[Sample]
) -> tuple[float | None, int, int]:
    """The share of idle-made requests (HumanEval lines, blocks) whose suggestion equals the
    base variant's at the same task; requests that failed in either are left out."""
    ours, theirs = _idle_answers(mine), _idle_answers(base)
    common = [key for key in ours if key in theirs]
    same = sum(ours[key] == theirs[key] for key in common)
    return (same / len(common) if common else None), same, len(common)


def _calls(samples: Sequence[Sample]) -> list[Sample]:
    return [s for s in samples if s.source not in ("typeahead", "error")]


def vs_base(base: Sequence[Sample], mine: Sequence[Sample]
            ) -> tuple[dict[str, float | None], dict[str, list[float | None]]]:
    """A variant against its model's base variant: ratios, and their paired bootstrap
    intervals over the replay spans or the blocks both ran."""
    def calls(ss: Sequence[Sample]) -> dict[str, np.ndarray]:
        return stats.by_unit((s.case, s.latency_ms) for s in _calls(ss) if s.workload == REPLAY)

    def blocks(ss: Sequence[Sample]) -> dict[str, np.ndarray]:
        return stats.by_unit((s.case, s.latency_ms) for s in ss
                             if s.workload == BLOCK and s.source != "error")

    def per_token(ss: Sequence[Sample]) -> dict[str, np.ndarray]:
        return stats.by_unit(token_rows([s for s in ss if s.workload == REPLAY])[0])

    found = {
        "ms_per_token": stats.compare_units(per_token(base), per_token(mine),
                                            stats.per_count_pool),
        "model_call_p50": stats.compare_units(calls(base), calls(mine), stats.pct_pool(50)),
        "model_call_p95": stats.compare_units(calls(base), calls(mine), stats.pct_pool(95)),
        "block_p50": stats.compare_units(blocks(base), blocks(mine), stats.pct_pool(50)),
    }
    return ({k: c.ratio for k, c in found.items()},
            {k: [c.low, c.high] for k, c in found.items()})


def summarize(samples: Sequence[Sample], runs: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Per variant, in run order: speed, quality, speculation counters, memory, and how it
    compares with its model's base variant (`off` when it ran, else the model's first)."""
    by_key: dict[str, list[Sample]] = {}
    for sample in samples:
        if sample.workload in WORKLOADS:
            by_key.setdefault(str(sample.variant), []).append(sample)
    run_of = {run["key"]: run for run in runs}
    rows: dict[str, dict[str, Any]] = {}
    for key in [*run_of, *(k for k in by_key if k not in run_of)]:
        mine, run = by_key.get(key, []), run_of.get(key, {})
        replay = [s for s in mine if s.workload == REPLAY]
        keys = metrics.replay_summary(replay)
        calls = keys["model_calls"]
        per_token, basis = ms_per_token(replay)
        totals = _counter_totals(run)
        rows[key] = {
            "model": run.get("model") or key.rsplit("/", 1)[0],
            "mode": run.get("mode") or key.rsplit("/", 1)[-1],
            "model_calls": {k: calls[k] for k in ("n", "p50", "p95")},
            "keystrokes": {k: keys[k] for k in ("n", "p50", "p95", "line_exact")},
            "coldfile": coldfiles.summarize(mine, COLD),
            "ms_per_token": per_token,
            "ms_per_token_basis": basis,
            "humaneval": metrics.humaneval_summary([s for s in mine if s.workload == HUMANEVAL]),
            "block": _block_summary([s for s in mine if s.workload == BLOCK]),
            "verify_steps": totals["drafts_verified"],
            "accepted_per_step": _per_step(totals, "draft_accepted"),
            "drafted_per_step": _per_step(totals, "draft_tokens"),
            "near_ties": totals["near_ties"],
            "draft_sources": _draft_sources(run),
            "errors": sum(s.source == "error" for s in mine),
            "peak_rss_mb": run.get("peak_rss_mb"),
            "end_rss_mb": run.get("end_rss_mb"),
            "startup_ms": run.get("startup_ms"),
        }
    for key, row in rows.items():
        same_model = [k for k, r in rows.items() if r["model"] == row["model"]]
        base = next((k for k in same_model if rows[k]["mode"] == "off"), same_model[0])
        share, same, n = identical_share(by_key.get(key, []), by_key.get(base, []))
        row["base"] = base
        row["identical"] = {"share": share, "same": same, "n": n}
        row["vs_base"], row["vs_base_ci"] = vs_base(by_key.get(base, []), by_key.get(key, []))
    return rows


# --- report ------------------------------------------------------------------------------------


def _vs(row: dict[str, Any], name: str) -> str:
    """A ratio against the base variant, with its interval."""
    return fmt.x_ci(row["vs_base"][name], (row.get("vs_base_ci") or {}).get(name))


def markdown(rows: dict[str, Any], meta: dict[str, Any]) -> list[str]:
    """The report's section for the variants (nothing when none ran)."""
    if not rows:
        return []
    info = meta.get("variants") or {}
    basis = {row["ms_per_token_basis"] for row in rows.values()} - {"n/a"}
    per_token = ("the engine's generation time per generated token" if basis == {"generation"}
                 else "request latency per generated token (the server reports no generateMs)")
    lines = [
        "## Speculation and models side by side ((d) variants)",
        "",
        "One fresh server per model and `speculation` mode, one after another, on the replay "
        f"above, {info.get('humaneval_lines', '?')} HumanEval lines and "
        f"{info.get('blocks', '?')} multi-line blocks (the cursor at the start of a HumanEval "
        "function body, the whole body suggested; time to the complete suggestion). "
        f"Model calls: replay keystrokes the model answered; ms/token: {per_token}, replay "
        "and blocks. \"vs\": against the same model's base variant (`off`). HumanEval and block "
        "requests are each made once the server is idle, so their suggestions can be compared "
        "between modes: identical = the share equal to the base variant's.",
        "",
    ]
    speed = []
    for key, row in rows.items():
        calls, block = row["model_calls"], row["block"]
        speed.append([
            key, str(calls["n"]), fmt.ms(calls["p50"]), fmt.ms(calls["p95"]),
            f"{_vs(row, 'model_call_p50')} / {_vs(row, 'model_call_p95')}",
            fmt.num(row["ms_per_token"], 1), _vs(row, "ms_per_token"),
            fmt.ms(block.get("p50")), fmt.ms(block.get("p95")), _vs(row, "block_p50"),
            fmt.num(block.get("ms_per_token"), 1),
            fmt.num(row["accepted_per_step"], 2), fmt.num(row["drafted_per_step"], 2),
            str(row["verify_steps"]),
            f"{fmt.num(row['peak_rss_mb'], 0)} / {fmt.num(row['end_rss_mb'], 0)} MiB",
        ])  # fmt: skip
    lines += fmt.table(
        ["variant", "model calls", "p50", "p95", "p50 / p95 vs base", "ms/token (replay)",
         "vs base", "block p50", "block p95", "block p50 vs base", "ms/token (blocks)",
         "accepted / verify step", "drafted / verify step", "verify steps",
         "RSS peak / end"],
        speed,
    )  # fmt: skip
    quality = []
    for key, row in rows.items():
        he, block, same = row["humaneval"], row["block"], row["identical"]
        quality.append([
            key, fmt.of(he["em"], he["em_hits"], he["n"]),
            fmt.of(he["pass1"], he["pass_hits"], he["n"]),
            fmt.of(block["pass1"], block["pass_hits"], block["tasks"]),
            fmt.num(block.get("generated_mean"), 1),
            "(base)" if row["base"] == key else fmt.of(same["share"], same["same"], same["n"]),
            ", ".join(row.get("draft_sources") or []) or "-",
            str(row["near_ties"]), str(row["errors"]),
        ])  # fmt: skip
    lines += fmt.table(
        ["variant", "HumanEval EM", "HumanEval pass@1", "block pass@1", "block tokens (mean)",
         "identical to base", "draft sources", "near-ties re-decided", "errors"],
        quality,
    )  # fmt: skip
    typing = []
    for key, row in rows.items():
        keys = row.get("keystrokes") or {}
        typing.append([key, str(keys.get("n", 0)), fmt.ms(keys.get("p50")), fmt.ms(keys.get("p95")),
                       fmt.num(keys.get("line_exact"), 2)])
    lines += fmt.table(["variant", "replay keystrokes", "keystroke p50", "keystroke p95",
                     "line-exact"], typing)
    cold = [coldfiles.markdown_row(key, row["coldfile"]) for key, row in rows.items()
            if (row.get("coldfile") or {}).get("files")]
    if cold:
        lines += ["First suggestion in never-seen files (opened and asked at once, mid-line; "
                  "then two characters typed):", "", *coldfiles.markdown(cold)]
    lines += [f"- {note}" for note in info.get("notes") or []]
    return lines + ([""] if info.get("notes") else [])
