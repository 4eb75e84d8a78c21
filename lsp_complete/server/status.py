"""The `lsp-complete/status` answer: every part's state, the counters and recent requests."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from lsp_complete import __version__
from lsp_complete.scheduler import Scheduler
from lsp_complete.server.files import OpenFiles
from lsp_complete.server.model import ModelHost
from lsp_complete.server.repo import RepoHost
from lsp_complete.server.telemetry import RECENT_LIMIT, Telemetry
from lsp_complete.typeahead import TypeAhead


def server_status(
    *,
    model: ModelHost,
    files: OpenFiles,
    repo: RepoHost,
    telemetry: Telemetry,
    typeahead: TypeAhead,
    scheduler: Scheduler,
    encoding: str,
    daemon_status: Callable[[], dict[str, Any]] | None = None,
    next_edit_model: dict[str, object] | None = None,
    recent: int = RECENT_LIMIT,
) -> dict[str, Any]:
    """The `lsp-complete/status` answer."""
    engine = model.completer.engine if model.completer else None
    described = engine.describe() if engine else None
    return {
        "version": __version__,
        "model": {
            **model.info,
            "state": model.state,
            "error": model.error,
            "device": described.get("device") if described else None,
            # Measured at load; what the first prompt in a newly opened file may hold.
            "prefillTokensPerSecond": round(engine.prefill_rate, 1)
            if engine and engine.prefill_rate else None,
            "firstPromptTokens": model.completer.cold_budget if model.completer else None,
        },
        # The model `nextEditModel` names, when it is not the completion model (None).
        "nextEditModel": next_edit_model,
        "engine": described,
        "engineCounters": vars(engine.counters) if engine else None,
        "scheduler": {"idle": scheduler.idle, **vars(scheduler.counters)},
        "counters": telemetry.counters,
        "typeahead": dict(typeahead.stats),
        "latency": telemetry.latency(),
        "memory": {"rssMiB": _rss_mib()},
        # A daemon session's: the daemon, its engine and every session (None in process).
        "daemon": daemon_status() if daemon_status is not None else None,
        # Lists, not objects keyed by URI: clients map objects to records with field names.
        "documents": [
            {
                "uri": file.uri,
                "version": file.doc.version,
                # The language it is read as, and the languageId the client sent.
                "language": file.doc.language_name,
                "languageId": file.doc.language_id,
                "cachedTokens": len(engine.cached_tokens(file.uri)) if engine else 0,
                "disabled": file.state.disabled_reason,
                # Whether its syntax tree is held (only the recently used files keep one).
                "syntaxTree": file.doc.has_tree,
                # The repository context its prompts use: sources, files, tokens (or None).
                "repoContext": repo.describe(file.uri),
            }
            for file in files.files()
        ],
        "repository": repo.summary(),
        "positionEncoding": encoding,
        "recent": telemetry.recent_json(recent),
    }


def _rss_mib() -> float | None:
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return round(int(line.split()[1]) / 1024, 1)
    except OSError:
        pass
    return None
