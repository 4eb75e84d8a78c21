"""Where lsp-complete keeps what it caches: one rule for the model store, the KV store and the
daemon's identity (a frontend that would write elsewhere never joins a daemon). Light on
purpose: every editor window's `serve` frontend imports it."""

from __future__ import annotations

import os
from pathlib import Path

CACHE_ENV = "LSP_COMPLETE_CACHE_DIR"


def cache_root() -> Path:
    """$LSP_COMPLETE_CACHE_DIR, else the user cache folder (platformdirs: $XDG_CACHE_HOME, else
    ~/.cache on Linux)."""
    override = os.environ.get(CACHE_ENV)
    if override:
        return Path(override).expanduser()
    import platformdirs

    return Path(platformdirs.user_cache_dir("lsp-complete"))
