"""Driving the servers, A (the baseline; A1, A2, ... when several) and B (the candidate), on
the same work, interleaved.

Per scenario every version gets a fresh server (its own empty KV cache folder, the same
settings, LSP_COMPLETE_NO_DAEMON=1), started one after the other and warmed up on an unrelated
snippet. Then each unit of work (a span, a never-seen file, a HumanEval task) is run on every
side in turn, the order rotating by one per unit (A B, B A, ...; A1 A2 B, A2 B A1, B A1 A2,
...) so that each side takes each place equally often and machine drift and order effects
cancel. Only one server is driven at a time: after its turn it is waited on until it is quiet
(its scheduler idle, where it says so, and its process using no CPU) for `settle_s`, before
the next server's turn starts, so that one server's idle work never runs under another's
keystrokes; a server that woke up in between is waited on again.

CPU seconds of a turn are the server process's (utime + stime, all threads) from the start of
its turn until it is quiet again: idle work that the turn set off is the user's battery too.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lsp_complete.bench import coldfiles, crossfile, lsp_driver
from lsp_complete.bench.ab.load import cpu_bound_process
from lsp_complete.bench.ab.scenarios import BLOCK_WAIT_S, Scenario, span_timing
from lsp_complete.bench.crossfile import CrossFileTask
from lsp_complete.bench.humaneval import BlockTask, InfillTask, PassRunner
from lsp_complete.bench.records import Sample
from lsp_complete.bench.servers import Server
from lsp_complete.bench.spans import (
    SpanTiming,
    fresh,
    key_samples,
    span_uri,
    span_version,
    takes_line,
    type_moved_span,
    type_span,
    type_with_tab,
    with_records,
)
from lsp_complete.bench.workload import Episode, OpenCase
from lsp_complete.testing.lsp_client import position_at

log = logging.getLogger(__name__)
Side = Server  # an A/B side: its key B (CANDIDATE), A (or A1, A2, ...: baseline_keys)


POLL_S = 0.1
QUIET_CPU_S = 0.02  # CPU a quiet server may use between two polls (status answers, ticks)
QUIET_TIMEOUT_S = 300.0
CANDIDATE = "B"  # the candidate's side key; the baselines' are baseline_keys'


def baseline_keys(count: int) -> list[str]:
    """The baselines' side keys: A for one (as every run before several baselines), else A1,
    A2, ... in the order given."""
    return ["A"] if count == 1 else [f"A{i}" for i in range(1, count + 1)]


@dataclass
class AbConfig:
    model_path: str
    threads: int
    max_tokens: int
    out: Path
    seed: int = 0
    pace_ms: float = 200.0
    settle_s: float = 0.5
    workspace_folders: list[str] = field(default_factory=list)
    # Settings asked for on the command line (a remote engine, repoContextTokens).
    server_options: dict[str, Any] = field(default_factory=dict)

    def init_options(self) -> dict[str, Any]:
        """What every server is given: only settings every version knows, and those asked."""
        return {"model": self.model_path, "threads": self.threads,
                "maxTokens": self.max_tokens, "multiline": "never", **self.server_options}


@dataclass
class UnitRun:
    """One unit of work on one side."""

    scenario: str
    side: str  # the Side's key: B, A (or A1, A2, ...)
    unit: int  # the unit's index in its scenario: every side's runs of it pair up
    name: str
    order: int  # this side's place on this unit: 0 first, 1 second, ...
    keystrokes: int  # requests made
    cpu_s: float | None  # the server's CPU from the turn's start until it was quiet again
    other_cpu_s: float | None  # what the other, idle, servers used meanwhile, together
    samples: list[Sample] = field(default_factory=list)
    error: str | None = None


# --- servers -----------------------------------------------------------------------------------


async def start(side: Side, cfg: AbConfig, options: dict[str, Any] | None = None,
                folders: list[str] | None = None) -> None:
    """A fresh server for `side`: empty KV cache folder, `options` beside its settings,
    `folders` (None: as before) its workspace, warmed up, quiet."""
    if folders is not None:
        side.workspace_folders = folders
    await side.start(options=options)
    await wait_quiet(side, cfg.settle_s)


async def stop(side: Side) -> None:
    try:
        await side.stop()
    finally:
        side.cleanup()


async def wait_quiet(side: Side, settle_s: float, timeout_s: float = QUIET_TIMEOUT_S) -> None:
    """Until the server has been quiet for `settle_s`: its scheduler idle (where its status
    says; older servers may not) and its process using no more than QUIET_CPU_S per poll."""
    session = side.live
    deadline = time.monotonic() + timeout_s
    quiet_since: float | None = None
    last_cpu = side.cpu()
    while True:
        await asyncio.sleep(POLL_S)
        status = await session.status(recent=0)
        cpu = side.cpu()
        idle = (status.get("scheduler") or {}).get("idle")
        quiet = idle is not False and cpu - last_cpu <= QUIET_CPU_S
        last_cpu = cpu
        now = time.monotonic()
        if not quiet:
            quiet_since = None
        elif quiet_since is None:
            quiet_since = now
        elif now - quiet_since >= settle_s:
            side.quiet_cpu_s = cpu
            return
        if now > deadline:
            log.warning("%s: server not quiet after %.0f s; going on", side.key, timeout_s)
            side.quiet_cpu_s = cpu
            return


async def ensure_quiet(side: Side, settle_s: float) -> None:
    """Before another server's turn: if this one used CPU since it was last quiet (a timer
    fired), wait for it again."""
    if side.cpu() - side.quiet_cpu_s > QUIET_CPU_S * 2:
        side.woke += 1
        await wait_quiet(side, settle_s)


# --- units -------------------------------------------------------------------------------------

Drive = Callable[[Side, int], Awaitable[list[Sample]]]


def turn_order(sides: Sequence[Side], index: int) -> list[Side]:
    """Unit `index`'s order: the sides rotated by one per unit (two sides alternate)."""
    shift = index % len(sides)
    return [*sides[shift:], *sides[:shift]]


async def run_units(
    cfg: AbConfig,
    scenario: Scenario,
    sides: Sequence[Side],
    units: Sequence[tuple[str, int]],
    drive: Drive,
    on_unit: Callable[[], Any] = lambda: None,
) -> list[UnitRun]:
    """Each unit (name, requests) on every side, rotating which goes first."""
    runs: list[UnitRun] = []
    for index, (name, requests) in enumerate(units):
        order = turn_order(sides, index)
        for position, side in enumerate(order):
            others = [s for s in order if s is not side]
            for waited in [*others, side]:
                await ensure_quiet(waited, cfg.settle_s)
            cpu_before = side.cpu()
            others_before = [other.cpu() for other in others]
            error: str | None = None
            samples: list[Sample] = []
            try:
                samples = await drive(side, index)
            except Exception as err:  # one failing server must not end the run
                error = f"{type(err).__name__}: {err}"
                log.warning("%s %s on %s: %s", scenario.name, name, side.key, error)
            if side.session is not None and not side.live.running:
                error = error or "the server exited"
                await stop(side)
                await start(side, cfg, side.options)  # the next units get a fresh one
            else:
                await wait_quiet(side, cfg.settle_s)
            idle = [other.cpu() - before for other, before in zip(others, others_before,
                                                                    strict=True)]
            for other, used in zip(others, idle, strict=True):
                other.idle_cpu_s += used
            runs.append(UnitRun(
                scenario=scenario.name, side=side.key, unit=index, name=name, order=position,
                keystrokes=requests, cpu_s=side.cpu() - cpu_before if error is None else None,
                other_cpu_s=sum(idle), samples=samples, error=error,
            ))  # fmt: skip
        on_unit()
    return runs


def typing_drive(cfg: AbConfig, scenario: Scenario, episodes: Sequence[Episode]) -> Drive:
    async def drive(side: Side, index: int) -> list[Sample]:
        ep = episodes[index]
        session = side.live
        timing = span_timing(scenario, ep, cfg.seed, cfg.pace_ms)
        if scenario.saves:
            return await _typist_samples(session, scenario, ep, index, timing, side)
        first = None
        with cpu_bound_process(scenario.busy):
            if scenario.moved:
                first, answers = await type_moved_span(session, ep, span_version(index),
                                                       timing, scenario.pause_s)
            else:
                answers = await type_span(session, ep, span_version(index), timing)
        status = await session.status(recent=len(ep.keystrokes) + 16)
        session.close(span_uri(ep))
        samples = key_samples(side.engine, scenario.name, ep, answers, status, side.key)
        if first is not None and samples:  # the answer at the spot before the move
            samples[0].extra["before_move_ms"] = first.latency_ms
            samples[0].extra["before_move_error"] = first.error
        return samples

    return drive


async def _typist_samples(session: lsp_driver.Session, scenario: Scenario, ep: Episode,
                          index: int, timing: SpanTiming, side: Side) -> list[Sample]:
    """The span typed by the typist who presses Tab: one sample per request (a key or a Tab
    before it), with what Tab put in (`tab_chars`), whether a wrong suggestion was shown, and
    the span's characters on the first."""
    steps = await type_with_tab(session, ep, span_version(index), timing)
    status = await session.status(recent=len(steps) + 16)
    session.close(span_uri(ep))
    completions = with_records([step.answer for step in steps], status, span_uri(ep))
    samples = []
    for k, (step, c) in enumerate(zip(steps, completions, strict=True)):
        shown = fresh(step.shown, c)
        extra: dict[str, Any] = {"tab_chars": step.accepted, "wrong": step.wrong and shown,
                                 "language": ep.language_id}
        if k == 0:  # what keys and Tab put in: a Tab may go past a keystroke cap
            extra["span_chars"] = sum(s.accepted or 1 for s in steps)
        samples.append(Sample.of(side.engine, scenario.name, ep.name, k, c, step.answer.error,
                                 side=side.key, fresh=shown,
                                 line_exact=takes_line(c.text, step.answer.after, step.rest),
                                 extra=extra))
    return samples


def open_drive(cases: Sequence[OpenCase]) -> Drive:
    async def drive(side: Side, index: int) -> list[Sample]:
        return await coldfiles.run_lsp(side.live, cases[index], workload="open",
                                       side=side.key, engine=side.engine)

    return drive


def humaneval_drive(cfg: AbConfig, scenario: Scenario,
                    tasks: Sequence[InfillTask | BlockTask]) -> Drive:
    """Each task its own never-seen document, asked at once or after the scenario's pause.
    Latency runs from didOpen when asked at once, else from the request. he-multi asks again
    once the server is quiet (at most BLOCK_WAIT_S): sample 1, its `ready_ms` from didOpen to
    that answer. Scored afterwards (`score_humaneval`): test programs must not run under the
    other server's turn."""

    async def drive(side: Side, index: int) -> list[Sample]:
        task, session = tasks[index], side.live
        uri = f"file:///lsp-complete-bench/ab/{task.name.replace('/', '_').replace('#', '_')}.py"
        clock = asyncio.get_running_loop().time
        opened = clock()
        session.open(uri, "python", task.text, 1)
        if scenario.pause_s:
            await asyncio.sleep(scenario.pause_s)
        c, error = await lsp_driver.ask(session, uri, 1, task.text, task.offset,
                                        None if scenario.pause_s else opened)
        samples = [Sample.of(side.engine, scenario.name, task.name, 0, c, error,
                             side=side.key, exact_match=task.exact_match(c.text))]
        if scenario.holes:
            await wait_quiet(side, cfg.settle_s, timeout_s=BLOCK_WAIT_S)
            again, error = await lsp_driver.ask(session, uri, 1, task.text, task.offset)
            samples.append(Sample.of(side.engine, scenario.name, task.name, 1, again, error,
                                     side=side.key, exact_match=task.exact_match(again.text),
                                     extra={"ready_ms": (clock() - opened) * 1000}))
        session.close(uri)
        return samples

    return drive


LARGE_PHASES = ("cold-open", "warm-keystroke", "warm-reopen", "restart-from-disk")


def large_drive(cases: Sequence[OpenCase]) -> Drive:
    """The large file, one sample a phase (LARGE_PHASES, its index): asked the moment it
    opens, a key typed, opened again, and opened after a restart on the same KV cache folder.
    Latency runs from didOpen to the answer, or from the request for the key."""

    async def drive(side: Side, index: int) -> list[Sample]:
        case = cases[index]
        uri = Path(case.path).resolve().as_uri()

        async def opened(phase: int, version: int) -> Sample:
            began = asyncio.get_running_loop().time()
            side.live.open(uri, case.language_id, case.text, version)
            c, error = await lsp_driver.ask(side.live, uri, version, case.text, case.offset,
                                            began)
            return Sample.of(side.engine, "large-file", LARGE_PHASES[phase], phase, c, error,
                             side=side.key)

        samples = [await opened(0, 1)]
        typed = coldfiles.type_next_char(side.live, uri, 2, case)
        c, error = await lsp_driver.ask(side.live, uri, 2, typed.text, typed.offset)
        samples.append(Sample.of(side.engine, "large-file", LARGE_PHASES[1], 1, c, error,
                                 side=side.key))
        side.live.close(uri)
        samples.append(await opened(2, 10))
        side.live.close(uri)
        await side.restart()
        samples.append(await opened(3, 20))
        side.live.close(uri)
        return samples

    return drive


def crossfile_drive(cfg: AbConfig, scenario: Scenario, tasks: Sequence[CrossFileTask]) -> Drive:
    """Each line asked once the server is quiet at the spot (the cursor put there first, the
    imported module open beside it in crossfile-open), or as a generic client asks (at open,
    or after a pause), scored against the line's rest."""

    async def drive(side: Side, index: int) -> list[Sample]:
        task, session, version = tasks[index], side.live, index + 1
        uri = Path(task.path).resolve().as_uri()
        other = Path(task.imported_path).resolve().as_uri()
        if scenario.opens_imported:
            session.open(other, task.language,
                         Path(task.imported_path).read_text(encoding="utf-8"), version)
        session.open(uri, task.language, task.text, version)
        if scenario.asks_unannounced:
            await asyncio.sleep(scenario.pause_s)
        else:
            session.move_cursor(uri, position_at(task.text, task.offset))
            await wait_quiet(side, cfg.settle_s)
        c, error = await lsp_driver.ask(session, uri, version, task.text, task.offset)
        session.close(uri)
        if scenario.opens_imported:
            session.close(other)
        return [Sample.of(side.engine, scenario.name, task.name, 0, c, error, side=side.key,
                          extra={"target": task.target, "needed": list(task.needed),
                                 "language": task.language, **crossfile.score(task, c.text)})]

    return drive


def score_humaneval(runs: Sequence[UnitRun], tasks: Sequence[InfillTask | BlockTask],
                    passes: PassRunner) -> None:
    for run in runs:
        for sample in run.samples:
            sample.passed = passes.passed(tasks[run.unit], sample.suggestion)


# --- a scenario --------------------------------------------------------------------------------


@dataclass
class Work:
    """What every side is given, each unit in turn: a scenario's kind picks its units."""

    episodes: list[Episode]
    cold_cases: list[OpenCase]
    tasks: list[InfillTask]
    blocks: list[BlockTask] = field(default_factory=list)  # he-block's
    holes: list[BlockTask] = field(default_factory=list)  # he-multi's
    large: list[OpenCase] = field(default_factory=list)  # large-file's
    crossfile: list[CrossFileTask] = field(default_factory=list)
    passes: PassRunner = field(default_factory=PassRunner)

    def tasks_of(self, scenario: Scenario) -> Sequence[InfillTask | BlockTask]:
        if scenario.holes:
            return self.holes
        return self.blocks if scenario.blocks else self.tasks

    def plan(self, cfg: AbConfig, scenario: Scenario) -> tuple[list[tuple[str, int]], Drive]:
        """The scenario's units (name, requests made) and how a side is driven through one."""
        if scenario.kind == "typing":
            before_move = 1 if scenario.moved else 0  # a moved span asks once before its keys
            return ([(ep.name, len(ep.keystrokes) + before_move) for ep in self.episodes],
                    typing_drive(cfg, scenario, self.episodes))
        if scenario.kind == "open":
            return ([(Path(c.path).name, coldfiles.KEYSTROKES) for c in self.cold_cases],
                    open_drive(self.cold_cases))
        if scenario.kind == "large":
            return ([(Path(c.path).name, len(LARGE_PHASES)) for c in self.large],
                    large_drive(self.large))
        if scenario.kind == "crossfile":
            return ([(t.name, 1) for t in self.crossfile],
                    crossfile_drive(cfg, scenario, self.crossfile))
        tasks, asks = self.tasks_of(scenario), 2 if scenario.holes else 1
        return [(t.name, asks) for t in tasks], humaneval_drive(cfg, scenario, tasks)


async def run_scenario(cfg: AbConfig, scenario: Scenario, sides: Sequence[Side], work: Work,
                       on_unit: Callable[[], Any] = lambda: None) -> list[UnitRun]:
    """Fresh servers for every side, every unit of the scenario on each, the servers
    stopped. The cross-file lines' workspace is their packages' folders."""
    units, drive = work.plan(cfg, scenario)
    if not units:
        return []
    folders = sorted({Path(t.root).resolve().as_uri() for t in work.crossfile}) \
        if scenario.kind == "crossfile" else cfg.workspace_folders
    try:
        for side in sides:
            await start(side, cfg, scenario.options, folders)
        runs = await run_units(cfg, scenario, sides, units, drive, on_unit)
    finally:
        for side in sides:
            await stop(side)
    if scenario.kind == "humaneval":
        score_humaneval(runs, work.tasks_of(scenario), work.passes)
    return runs
