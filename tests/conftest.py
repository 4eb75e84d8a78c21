"""Shared fixtures.  Keep this file small: put feature-specific fixtures next to their tests."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from lsp_complete.testing import write_tiny_gguf


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


@pytest.fixture(scope="session")
def tiny_model_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny llama GGUF (lsp_complete.testing), written once per test session."""
    return write_tiny_gguf(tmp_path_factory.mktemp("tiny-model") / "tiny.gguf")
