"""The server under test, one lifecycle for every run of the bench: a version (install.py:
this checkout, a git ref, a wheel or a folder) served by a fresh `lsp-complete serve` with its
own empty KV cache folder and never the shared engine daemon, warmed up on an unrelated snippet
that is not recorded, its startup and memory kept, and stopped.

The baselines run's (d), its variants and the A/B sides are all `Server`s; what differs is the
settings they are given and how they are driven.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
import tempfile
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lsp_complete.bench.install import CHECKOUT_ROOT, ServerVersion
from lsp_complete.bench.lsp_driver import ServerSession

WARMUP_TEXT = "def add(a, b):\n    return a + b\n\n\ndef mul(a, b):\n    re\n"
WARMUP_OFFSET = WARMUP_TEXT.index("    re\n") + len("    re")
WARMUP_URI = "file:///lsp-complete-bench/warmup.py"


class StartError(RuntimeError):
    """A server could not start or answer its warm-up request: nothing can be measured."""


def live_checkout() -> ServerVersion:
    """This checkout as it is on disk, first on PYTHONPATH: the baselines run's (d) and its
    variants (an A/B's candidate is a copy: install.this_checkout)."""
    return ServerVersion(label="this checkout", kind="checkout", python=sys.executable,
                         pythonpath=str(CHECKOUT_ROOT), cwd=None, source_digest="")


def base_server_env(cache_dir: str) -> dict[str, str]:
    """The environment of a measured server: its own KV cache folder, and its own engine,
    cache and process (whose memory is measured), never the shared engine daemon; a crash (a
    native library's fault) leaves a Python traceback in its log."""
    return {**os.environ, "LSP_COMPLETE_CACHE_DIR": cache_dir, "LSP_COMPLETE_NO_DAEMON": "1",
            "PYTHONFAULTHANDLER": "1"}


@dataclass
class Server:
    """One server under test, started afresh as often as a run needs."""

    key: str  # d, a variant's key, or an A/B side's: B (the candidate), A (or A1, A2, ...)
    version: ServerVersion
    init_options: dict[str, Any]  # the model's path under "model"
    log_path: Path
    workspace_folders: list[str] = field(default_factory=list)
    session: ServerSession | None = None
    startup_ms: list[float] = field(default_factory=list)
    peak_rss_mb: list[float] = field(default_factory=list)
    end_rss_mb: list[float] = field(default_factory=list)
    # An A/B's turns (ab/drive.py): its CPU counter when last seen quiet, the times it used
    # CPU while another server was driven, and the CPU it used then (should be ~0).
    quiet_cpu_s: float = 0.0
    woke: int = 0
    idle_cpu_s: float = 0.0
    _cache_dirs: list[str] = field(default_factory=list)

    @property
    def live(self) -> ServerSession:
        assert self.session is not None
        return self.session

    def cpu(self) -> float:
        return self.live.cpu_s() or 0.0

    def new_cache_dir(self) -> str:
        path = tempfile.mkdtemp(prefix=f"lsp-complete-bench-{self.key}-kv-".replace("/", "_"))
        self._cache_dirs.append(path)
        return path

    async def start(self, cache_dir: str | None = None, warm: bool = True) -> ServerSession:
        """A fresh server on `cache_dir` (None: a new empty one), warmed up if `warm`."""
        env = self.version.server_env(base_server_env(cache_dir or self.new_cache_dir()))
        session = ServerSession(self.init_options["model"], self.init_options, env=env,
                                log_path=self.log_path, workspace_folders=self.workspace_folders,
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
                      warm: bool = True) -> AsyncIterator[ServerSession]:
        """The server started (`start`) for the block, stopped after it."""
        session = await self.start(cache_dir, warm)
        try:
            yield session
        finally:
            await self.stop()

    async def stop(self) -> None:
        """Stop the server (it persists its KV caches), its peak and last memory kept; its
        cache folders stay until `cleanup` (a restart may read them)."""
        session, self.session = self.session, None
        if session is None:
            return
        peak, now = session.peak_rss_mb(), session.rss_mb()
        if peak is not None:
            self.peak_rss_mb.append(peak)
        if now is not None:
            self.end_rss_mb.append(now)
        await session.stop()

    def cleanup(self) -> None:
        for path in self._cache_dirs:
            shutil.rmtree(path, ignore_errors=True)
        self._cache_dirs.clear()
