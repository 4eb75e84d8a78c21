"""Runs every engine, one after another, on the same keystrokes and tasks, through one driver:
lsp-complete (d) over LSP and the stateless baselines (a, b, c) behind the same session
(servers.StatelessSession) are typed into by the same `type_spans`, `ask_tasks`, `open_lsp` and
never-seen-file code.

Engines never run interleaved (they would compete for the same cores), each gets one warm-up
request on an unrelated snippet that is not recorded, and each in-process baseline's model is
freed before the next engine loads its own.
"""

from __future__ import annotations

import asyncio
import dataclasses
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tqdm import tqdm

from lsp_complete.bench import coldfiles, crossfile, lsp_driver
from lsp_complete.bench.baselines import FimTokens
from lsp_complete.bench.coldfiles import ColdCase
from lsp_complete.bench.crossfile import CrossFileTask
from lsp_complete.bench.humaneval import InfillTask, PassRunner
from lsp_complete.bench.records import Sample
from lsp_complete.bench.servers import Server, live_checkout, stateless_server
from lsp_complete.bench.spans import SpanTiming, key_samples, span_uri, span_version, type_span
from lsp_complete.bench.workload import Episode, OpenCase
from lsp_complete.testing.lsp_client import position_at


@dataclass
class BenchConfig:
    model_path: str
    model_name: str | None
    fim: FimTokens | None
    stop: tuple[str, ...]
    engines: tuple[str, ...]
    threads: int
    max_tokens: int
    pace_ms: float
    llama_server: str | None
    out: Path
    # Each span starts as an edit does: the cursor is put there, and typing starts this much
    # later. lsp-complete hears of the cursor (lsp-complete/didMoveCursor, as its editor
    # plugins send it); the baselines get one unrecorded request there. 0: type at once.
    rest_ms: float = 1000.0
    # Extra initializationOptions for (d): a remote engine (engine, engineUrl, ...).
    server_options: dict[str, Any] = field(default_factory=dict)
    # Folder URIs (d) is given as its workspace (repository context comes from them).
    workspace_folders: list[str] = field(default_factory=list)


@dataclass
class Workload:
    episodes: list[Episode]
    tasks: list[InfillTask]
    open_case: OpenCase | None
    passes: PassRunner = field(default_factory=PassRunner)
    cold_cases: list[ColdCase] = field(default_factory=list)  # never-seen files (coldfiles.py)

    @property
    def n_keystrokes(self) -> int:
        return sum(len(e.keystrokes) for e in self.episodes)


@dataclass
class EngineRun:
    samples: list[Sample]
    extras: dict[str, Any]


def _bar(desc: str, total: int) -> tqdm:
    return tqdm(total=total, desc=desc, unit="req", file=sys.stderr, dynamic_ncols=True)


def _err(error: str | None) -> dict[str, Any]:
    return {"extra": {"error": error}} if error else {}


# --- every engine through one driver -----------------------------------------------------------


def engine_server(cfg: BenchConfig, key: str) -> Server:
    """Engine `key`: (d) lsp-complete over LSP (`lsp_server`), or a stateless baseline
    answering in this process behind the same session (servers.StatelessSession)."""
    if key == "d":
        return lsp_server(cfg)
    return stateless_server(key, cfg.model_path, cfg.fim, cfg.stop, cfg.threads,
                            cfg.max_tokens, cfg.llama_server, cfg.out / f"engine-{key}.log")


def lsp_server(cfg: BenchConfig, multiline: str = "never",
               extra_options: dict[str, Any] | None = None) -> Server:
    """(d): this checkout as it is, with `cfg`'s settings, its output in `cfg.out`'s
    server.log (this run's only)."""
    (cfg.out / "server.log").unlink(missing_ok=True)
    options = {"model": cfg.model_path, "threads": cfg.threads, "maxTokens": cfg.max_tokens,
               "multiline": multiline, **cfg.server_options, **(extra_options or {})}
    return Server("d", live_checkout(), options, cfg.out / "server.log", cfg.workspace_folders)


async def type_spans(
    session: lsp_driver.Session,
    engine: str,
    episodes: list[Episode],
    on_key: Callable[[], Any],
    rest_ms: float = 0.0,
    pace_ms: float | None = None,
    workload: str | None = None,
) -> list[Sample]:
    """Each span typed as fast as the answers come ("replay") or, with `pace_ms`, a key every
    `pace_ms` with the answers not awaited ("paced"; `workload` names them otherwise). With
    `rest_ms`, each span starts as an edit does with lsp-complete's own editor plugins: the
    cursor is put there and typing starts `rest_ms` later."""
    def timing(ep: Episode) -> SpanTiming:
        delays = None if pace_ms is None else (0.0,) + (pace_ms,) * (len(ep.keystrokes) - 1)
        return SpanTiming(cursor=rest_ms > 0, rest_ms=rest_ms, delays_ms=delays)

    workload = workload or ("replay" if pace_ms is None else "paced")
    samples: list[Sample] = []
    for i, ep in enumerate(episodes):
        plan = timing(ep)
        answers = await type_span(session, ep, span_version(i), plan, on_key)
        status = await session.status()
        samples += key_samples(engine, workload, ep, answers, status,
                               with_fresh=not plan.awaited)
        session.close(span_uri(ep))
    return samples


async def ask_tasks(
    session: lsp_driver.Session,
    engine: str,
    tasks: Sequence[InfillTask],
    workload: str,
    passes: PassRunner,
    on_task: Callable[[], Any],
) -> list[Sample]:
    """One request per task, scored: one document per problem, whose text each next task of
    it replaces."""
    versions: dict[str, int] = {}
    answers: list[tuple[InfillTask, str, int, str, float, str | None]] = []
    for task in tasks:
        uri = f"file:///lsp-complete-bench/{task.task_id.replace('/', '_')}.py"
        version = versions.get(uri, 0) + 1
        versions[uri] = version
        if version == 1:
            session.open(uri, "python", task.text, version)
        else:
            session.replace_all(uri, version, task.text)
        suggestion, latency, error = await session.inline(uri, task.text, task.offset)
        answers.append((task, uri, version, suggestion, latency, error))
        on_task()
    status = await session.status()
    samples: list[Sample] = []
    for task, uri, version, suggestion, latency, error in answers:
        record = lsp_driver.stats_by_version(status, uri).get(version)
        c = lsp_driver.completion_with_stats(suggestion, latency, record, error)
        samples.append(Sample.of(engine, workload, task.name, 0, c,
                                 exact_match=task.exact_match(c.text),
                                 passed=passes.passed(task, c.text), **_err(error)))
    for uri in versions:
        session.close(uri)
    return samples


async def open_lsp(server: Server, case: OpenCase) -> list[Sample]:
    """Cold open, a warm keystroke, a re-open in the same process, then a restart that may
    restore the file's KV cache from disk (a stateless engine keeps nothing: a second cold
    open).  Latency runs from didOpen to the answer."""
    cache_dir = server.new_cache_dir()
    uri = Path(case.path).resolve().as_uri()
    samples: list[Sample] = []
    async with server.running(cache_dir, warm=False) as session:
        samples.append(await _open_once(server, case, uri, "cold-open", 1))
        typed = case.text[: case.offset] + case.next_char + case.text[case.offset :]
        session.insert(uri, 2, position_at(case.text, case.offset), case.next_char)
        suggestion, latency, error = await session.inline(uri, typed, case.offset + 1)
        samples.append(
            await _with_status(server, uri, 2, "warm-keystroke", suggestion, latency, error)
        )
        session.close(uri)
        samples.append(await _open_once(server, case, uri, "warm-reopen", 10))
        session.close(uri)
    async with server.running(cache_dir, warm=False) as session:
        samples.append(await _open_once(server, case, uri, "restart-from-disk", 20))
        session.close(uri)
    return samples


async def _open_once(server: Server, case: OpenCase, uri: str, phase: str,
                     version: int) -> Sample:
    session = server.live
    loop = asyncio.get_running_loop()
    start = loop.time()
    session.open(uri, case.language_id, case.text, version)
    suggestion, _, error = await session.inline(uri, case.text, case.offset)
    latency = (loop.time() - start) * 1000
    return await _with_status(server, uri, version, phase, suggestion, latency, error)


async def _with_status(
    server: Server,
    uri: str,
    version: int,
    phase: str,
    suggestion: str,
    latency: float,
    error: str | None,
) -> Sample:
    c = lsp_driver.recorded(await server.live.status(), uri, version, suggestion, latency, error)
    return Sample.of(server.engine, "open", phase, 0, c, **_err(error))


async def run_engine_async(cfg: BenchConfig, server: Server, work: Workload,
                           paced: bool) -> EngineRun:
    """One engine on `work`, the same driver for every engine: the replay and HumanEval,
    then (`paced`) the paced replay in a fresh server, the large file's open phases and the
    never-seen files."""
    key = server.engine
    samples: list[Sample] = []
    stale: dict[str, Any] = {}
    try:
        async with server.running() as session:
            with _bar(f"({key}) replay", work.n_keystrokes) as bar:
                samples += await type_spans(session, key, work.episodes, bar.update,
                                            cfg.rest_ms)
            with _bar(f"({key}) humaneval", len(work.tasks)) as bar:
                samples += await ask_tasks(session, key, work.tasks, "humaneval", work.passes,
                                           bar.update)
        if paced and work.episodes:
            async with server.running() as session:
                began = time.monotonic()
                with _bar(f"({key}) paced {cfg.pace_ms:g} ms", work.n_keystrokes) as bar:
                    samples += await type_spans(session, key, work.episodes, bar.update,
                                                cfg.rest_ms, cfg.pace_ms)
                counters = (await session.status()).get("scheduler") or {}
                stale = {
                    "paced_seconds": time.monotonic() - began,
                    "paced_stale_work_ms": counters.get("stale_work_ms"),
                    "paced_work_after_cancel_ms": counters.get("work_after_cancel_ms"),
                }
        if work.open_case is not None:
            samples += await open_lsp(server, work.open_case)
        if work.cold_cases:
            async with server.running(warm=False) as session:
                with _bar(f"({key}) never-seen files", len(work.cold_cases)) as bar:
                    samples += await coldfiles.run_lsp(session, work.cold_cases, bar.update,
                                                       engine=key)
    finally:
        server.cleanup()
    extras = {
        "peak_rss_mb": max(server.peak_rss_mb, default=None),
        "startup_ms": min(server.startup_ms, default=None),
        **stale,
    }
    return EngineRun(samples, extras)


async def crossfile_lsp_async(cfg: BenchConfig, tasks: list[CrossFileTask],
                              variants: tuple[str, ...]) -> list[Sample]:
    """(d) on the cross-file tasks, one fresh server per configuration, the tasks' package
    folders as its workspace."""
    folders = sorted({Path(t.root).resolve().as_uri() for t in tasks})
    cfg = dataclasses.replace(cfg, workspace_folders=folders)
    samples: list[Sample] = []
    for variant in variants:
        tokens, open_imported = crossfile.LSP_CONFIGS[variant]
        server = lsp_server(cfg, extra_options={} if tokens is None
                            else {"repoContextTokens": tokens})
        try:
            async with server.running(warm=False) as session:
                with _bar(f"(d) cross-file {variant}", len(tasks)) as bar:
                    samples += await crossfile.run_lsp_config(session, tasks, variant,
                                                              open_imported, bar.update)
        finally:
            server.cleanup()
    return samples


def run_crossfile(cfg: BenchConfig, tasks: list[CrossFileTask], engines: tuple[str, ...],
                  variants: tuple[str, ...] = tuple(crossfile.VARIANT_LABELS)) -> list[Sample]:
    """The cross-file tasks on (b)/(b+) and the (d) configurations among `variants`."""
    samples: list[Sample] = []
    baseline = tuple(v for v in variants if v in ("b", "b+"))
    if "b" in engines and baseline and tasks:
        with _bar("(b) cross-file", len(tasks)) as bar:
            samples += crossfile.run_baselines(
                cfg.model_path, cfg.fim, cfg.fim, cfg.stop, cfg.threads, cfg.max_tokens,
                tasks, baseline, bar.update,
            )
    lsp = tuple(v for v in variants if v in crossfile.LSP_CONFIGS)
    if "d" in engines and lsp and tasks:
        samples += asyncio.run(crossfile_lsp_async(cfg, tasks, lsp))
    return samples


def run_engine(cfg: BenchConfig, key: str, work: Workload, paced: bool = True) -> EngineRun:
    return asyncio.run(run_engine_async(cfg, engine_server(cfg, key), work, paced))
