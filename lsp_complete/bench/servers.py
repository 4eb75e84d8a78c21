"""The server under test, one lifecycle for every run of the bench: a version (install.py:
this checkout, a git ref, a wheel or a folder) served by a fresh `lsp-complete serve` with its
own empty KV cache folder and never the shared engine daemon, or a stateless baseline (a, b, c)
answering in this process behind the same session interface (StatelessSession); warmed up on
an unrelated snippet that is not recorded, its startup and memory kept, and stopped.

Every side of a run (versions, variants, stateless baselines) is a `Server`; what differs is
the settings it is given.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lsprotocol import types

from lsp_complete.bench.baselines import LlamaBaseline
from lsp_complete.bench.install import CHECKOUT_ROOT, ServerVersion
from lsp_complete.bench.llama_server import LlamaServerClient
from lsp_complete.bench.lsp_driver import InlineAnswer, ServerSession, Session
from lsp_complete.bench.records import Completion, StatelessEngine
from lsp_complete.models import FimTemplate

WARMUP_TEXT = "def add(a, b):\n    return a + b\n\n\ndef mul(a, b):\n    re\n"
WARMUP_OFFSET = WARMUP_TEXT.index("    re\n") + len("    re")
WARMUP_URI = "file:///lsp-complete-bench/warmup.py"


class StartError(RuntimeError):
    """A server could not start or answer its warm-up request: nothing can be measured."""


def live_checkout() -> ServerVersion:
    """This checkout as it is on disk, first on PYTHONPATH (the candidate of a run without
    --candidate; an installed copy is install.this_checkout)."""
    return ServerVersion(label="this checkout", kind="checkout", python=sys.executable,
                         pythonpath=str(CHECKOUT_ROOT), cwd=None, source_digest="")


def base_server_env(cache_dir: str) -> dict[str, str]:
    """The environment of a measured server: its own KV cache folder, and its own engine,
    cache and process (whose memory is measured), never the shared engine daemon; a crash (a
    native library's fault) leaves a Python traceback in its log."""
    return {**os.environ, "LSP_COMPLETE_CACHE_DIR": cache_dir, "LSP_COMPLETE_NO_DAEMON": "1",
            "PYTHONFAULTHANDLER": "1"}


Model = tuple[str, str | None, Any]  # the model under test: path, registry name, spec
# The stateless baselines by the names `--baseline` knows them, and their engine keys.
STATELESS = {"psm": "a", "psm-lcp": "b", "llama-server": "c", "psm-to-end": "e",
             "psm-oracle": "o"}
STATELESS_LABELS = {"a": "(a) PSM, full re-encode",
                    "e": "(e) PSM, full re-encode, to the model's end of the middle",
                    "b": "(b) PSM + LCP reuse (llama-server cache_prompt)",
                    "c": "(c) llama-server /infill, llama.vim-style",
                    "o": "(o) PSM + LCP reuse, given the imported definitions (the cross-file "
                         "oracle)"}
Context = Callable[[str], tuple[str, bool]]  # (o): a document's uri -> (text, special)


def stateless_server(key: str, model_path: str, fim: FimTemplate | None, stop: Sequence[str],
                     threads: int, max_tokens: int, llama_server: str | None,
                     log_path: Path, side: str | None = None,
                     context: Context | None = None) -> Server:
    """Baseline `key` as a server under test (its key `side`, else `key`): (a) PSM with a
    full re-encode per request, (b) PSM with longest-common-prefix reuse, both on
    `model_path` in this process, or (c) the llama-server at `llama_server`, or (e) (a)
    writing on to the model's end of the middle (the multi-line reference), or (o) (b) given
    `context` before its prompt (the others are given none, whatever is passed). Raises
    ValueError for (c) without a URL, (o) without a context."""
    if key == "c" and not llama_server:
        raise ValueError("the llama-server baseline needs --llama-server URL")
    if key == "o" and context is None:
        raise ValueError("the cross-file oracle psm-oracle needs a crossfile scenario")

    def make() -> StatelessEngine:
        if key == "c":
            assert llama_server is not None
            return LlamaServerClient(llama_server, max_tokens)
        return LlamaBaseline(model_path, fim, stop, threads, max_tokens,
                             reuse=key in ("b", "o"), to_end=key == "e",
                             context=context if key == "o" else None)

    version = ServerVersion(label=STATELESS_LABELS[key], kind="stateless", python=sys.executable,
                            pythonpath=None, cwd=None, source_digest="")
    return Server(side or key, version, {}, log_path, make_engine=make, engine=key)


class StatelessSession:
    """A stateless baseline behind a server's session interface: it sees the whole text with
    each request, so edits and the cursor tell it nothing (the client keeps the text). One
    request runs at a time, in a worker thread; a request still waiting when a newer one
    comes is answered "superseded" without running (a client drops answers it no longer
    needs), so paced typing does not pile up behind a slow engine. Its status keeps each
    request's record as the server's does (by uri and document version); its CPU is this
    process's over its requests (the harness waits meanwhile)."""

    def __init__(self, make: Callable[[], StatelessEngine]) -> None:
        self._make = make
        self.engine: StatelessEngine | None = None
        self._lock = asyncio.Lock()
        self._latest = 0
        self._versions: dict[str, int] = {}
        self._records: list[dict[str, Any]] = []
        self._cpu_s = 0.0

    async def start(self) -> float:
        begin = time.perf_counter()
        self.engine = await asyncio.to_thread(self._make)
        return (time.perf_counter() - begin) * 1000

    async def stop(self) -> None:
        engine, self.engine = self.engine, None
        if engine is not None:
            engine.close()

    async def status(self, recent: int | None = None) -> dict[str, Any]:
        records = self._records[-recent:] if recent else ([] if recent == 0 else self._records)
        return {"recent": list(records), "scheduler": {"idle": not self._lock.locked()}}

    def open(self, uri: str, language_id: str, text: str, version: int) -> None:
        self._versions[uri] = version

    def insert(self, uri: str, version: int, position: types.Position, text: str) -> None:
        self._versions[uri] = version

    def replace(self, uri: str, version: int, where: types.Range, text: str) -> None:
        self._versions[uri] = version

    def move_cursor(self, uri: str, position: types.Position) -> None:
        pass  # a stateless engine hears of the cursor only with a request

    def cursor_rests(self, uri: str, position: types.Position) -> None:
        pass  # (it offers no occurrences to highlight)

    def close(self, uri: str) -> None:
        self._versions.pop(uri, None)

    def cancel_pending(self) -> None:
        pass  # a waiting request is superseded by the next anyway; a running one runs out

    async def inline(self, uri: str, text: str, offset: int) -> InlineAnswer:
        self._latest += 1
        ticket, version = self._latest, self._versions.get(uri)
        begin = time.perf_counter()
        error: str | None = None
        async with self._lock:
            if ticket != self._latest:
                c = Completion("", 0.0, source="superseded")
            else:
                try:
                    c = await asyncio.to_thread(self._complete, text, offset, uri)
                except Exception as err:  # one failed request is recorded, not the run's end
                    c, error = Completion("", 0.0, source="error"), f"{type(err).__name__}: {err}"
        self._records.append({"uri": uri, "version": version, "source": c.source,
                              "promptTokens": c.prompt_tokens, "encodedTokens": c.encoded_tokens,
                              "generatedTokens": c.generated_tokens})
        return InlineAnswer(c.text, (time.perf_counter() - begin) * 1000, error)

    def _complete(self, text: str, offset: int, path: str) -> Completion:
        assert self.engine is not None
        before = time.process_time()  # this process's, all its threads'
        try:
            return self.engine.complete(text, offset, path)
        finally:
            self._cpu_s += time.process_time() - before

    def peak_rss_mb(self) -> float | None:
        return self.engine.peak_rss_mb() if self.engine is not None else None

    def cpu_s(self) -> float | None:
        return self._cpu_s

    @property
    def running(self) -> bool:
        return self.engine is not None


@dataclass
class Server:
    """One server under test, started afresh as often as a run needs."""

    key: str  # d, a variant's key, or an A/B side's: B (the candidate), A (or A1, A2, ...)
    version: ServerVersion
    init_options: dict[str, Any]  # the model's path under "model"
    log_path: Path
    workspace_folders: list[str] = field(default_factory=list)
    # A stateless baseline (a, b, c) instead of `lsp-complete serve`: its engine, made anew at
    # each start; `engine` names what answers in the samples (d: lsp-complete).
    make_engine: Callable[[], StatelessEngine] | None = None
    engine: str = "d"
    session: Session | None = None
    startup_ms: list[float] = field(default_factory=list)
    peak_rss_mb: list[float] = field(default_factory=list)
    # An A/B's turns (ab/drive.py): its CPU counter when last seen quiet, the times it used
    # CPU while another server was driven, and the CPU it used then (should be ~0).
    quiet_cpu_s: float = 0.0
    woke: int = 0
    idle_cpu_s: float = 0.0
    options: dict[str, Any] = field(default_factory=dict)  # given at the last start
    cache_dir: str | None = None  # the last start's KV cache folder
    # CPU of the sessions already stopped: `cpu` counts on across a restart.
    spent_cpu_s: float = 0.0
    _cache_dirs: list[str] = field(default_factory=list)

    @property
    def live(self) -> Session:
        assert self.session is not None
        return self.session

    def cpu(self) -> float:
        """CPU seconds of every session so far (one counter across restarts)."""
        return self.spent_cpu_s + (self.live.cpu_s() or 0.0)

    def new_cache_dir(self) -> str:
        path = tempfile.mkdtemp(prefix=f"lsp-complete-bench-{self.key}-kv-".replace("/", "_"))
        self._cache_dirs.append(path)
        return path

    async def start(self, cache_dir: str | None = None, warm: bool = True,
                    options: dict[str, Any] | None = None) -> Session:
        """A fresh server on `cache_dir` (None: a new empty one), warmed up if `warm`, given
        `options` beside its own."""
        session: Session
        self.options = options or {}
        if self.make_engine is not None:
            session = StatelessSession(self.make_engine)
        else:
            self.cache_dir = cache_dir or self.new_cache_dir()
            env = self.version.server_env(base_server_env(self.cache_dir))
            init = {**self.init_options, **self.options}
            session = ServerSession(init["model"], init, env=env,
                                    log_path=self.log_path,
                                    workspace_folders=self.workspace_folders,
                                    python=self.version.python, cwd=self.version.cwd)
        self.session = session
        try:
            self.startup_ms.append(await session.start())
            if warm:
                session.open(WARMUP_URI, "python", WARMUP_TEXT, 1)
                await session.inline(WARMUP_URI, WARMUP_TEXT, WARMUP_OFFSET)
                session.close(WARMUP_URI)
        except Exception as err:
            await self.stop()
            raise StartError(f"the {self.key} server ({self.version.describe()}) failed to "
                             f"start or to answer a first request: {err}; its log: "
                             f"{self.log_path}") from err
        return session

    @contextlib.asynccontextmanager
    async def running(self, cache_dir: str | None = None,
                      warm: bool = True) -> AsyncIterator[Session]:
        """The server started (`start`) for the block, stopped after it."""
        session = await self.start(cache_dir, warm)
        try:
            yield session
        finally:
            await self.stop()

    async def restart(self) -> Session:
        """Stopped and started again on the same KV cache folder and options, not warmed up
        (what a restart restores from disk is measured)."""
        await self.stop()
        return await self.start(self.cache_dir, warm=False, options=self.options)

    async def stop(self) -> None:
        """Stop the server (it persists its KV caches), its peak memory kept; its
        cache folders stay until `cleanup` (a restart may read them)."""
        session, self.session = self.session, None
        if session is None:
            return
        self.spent_cpu_s += session.cpu_s() or 0.0
        peak = session.peak_rss_mb()
        if peak is not None:
            self.peak_rss_mb.append(peak)
        await session.stop()

    def cleanup(self) -> None:
        for path in self._cache_dirs:
            shutil.rmtree(path, ignore_errors=True)
        self._cache_dirs.clear()
