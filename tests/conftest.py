"""Shared fixtures.  Keep this file small: put feature-specific fixtures next to their tests."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

# Server state written off its owning thread raises (server/state.py), in this process and in
# every server the tests start (they inherit the environment).
os.environ["LSP_COMPLETE_CHECK_THREADS"] = "1"
# The tiny test model's token probabilities are noise: its suggestions are never held back as
# unsure (lsp_complete/certainty.py), except where a test sets minConfidencePercent itself.
os.environ["LSP_COMPLETE_MIN_CONFIDENCE"] = "0"

from lsp_complete.testing import write_tiny_gguf  # noqa: E402


@pytest.fixture(scope="session", autouse=True)
def _isolated_cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Point the KV/disk cache at a temp dir so no test reads or writes the user's cache.

    Session-scoped, so `monkeypatch` (function-scoped) cannot be used; restore by hand.
    """
    cache = tmp_path_factory.mktemp("lsp-complete-cache")
    previous = os.environ.get("LSP_COMPLETE_CACHE_DIR")
    os.environ["LSP_COMPLETE_CACHE_DIR"] = str(cache)
    try:
        yield cache
    finally:
        if previous is None:
            os.environ.pop("LSP_COMPLETE_CACHE_DIR", None)
        else:
            os.environ["LSP_COMPLETE_CACHE_DIR"] = previous


@pytest.fixture(scope="session", autouse=True)
def _isolated_daemon() -> Iterator[Path]:
    """Servers the tests start run their engine in process (each test its own settings and
    cache), and a test that does use the shared engine daemon finds this session's own
    runtime folder, never the user's daemon. Short: a Unix socket path has ~100 bytes."""
    runtime = Path(tempfile.mkdtemp(prefix="lspc-"))
    saved = {name: os.environ.get(name)
             for name in ("LSP_COMPLETE_NO_DAEMON", "LSP_COMPLETE_RUNTIME_DIR")}
    os.environ["LSP_COMPLETE_NO_DAEMON"] = "1"
    os.environ["LSP_COMPLETE_RUNTIME_DIR"] = str(runtime / "run")
    try:
        yield runtime
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        shutil.rmtree(runtime, ignore_errors=True)


@pytest.fixture(scope="session")
def tiny_model_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny llama GGUF (lsp_complete.testing), written once per test session."""
    return write_tiny_gguf(tmp_path_factory.mktemp("tiny-model") / "tiny.gguf")


# One engine per test module on the tiny model, and a second one that forgets everything
# before each request: the uncached reference (test_engine.uncached).
@pytest.fixture(scope="module")
def engine(tiny_model_path: Path):
    from lsp_complete.engine.llama import LlamaEngine

    eng = LlamaEngine(tiny_model_path, n_ctx=2048, n_threads=1, slots=3)
    yield eng
    eng.close()


@pytest.fixture(scope="module")
def fresh(tiny_model_path: Path):
    from lsp_complete.engine.llama import LlamaEngine

    eng = LlamaEngine(tiny_model_path, n_ctx=2048, n_threads=1, slots=1)
    yield eng
    eng.close()
