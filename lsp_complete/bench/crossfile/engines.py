"""Running the cross-file tasks: (b) and (b+) on an in-process model, the (d) configurations
over LSP, and their summary (see the package's docstring for the engines)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

from lsp_complete.bench.baselines import FimTokens, LlamaBaseline
from lsp_complete.bench.crossfile.tasks import CrossFileTask, score
from lsp_complete.bench.records import Completion, Sample
from lsp_complete.bench.stats import mean
from lsp_complete.languages import syntax_for
from lsp_complete.testing.lsp_client import position_at

LINES_BEFORE = 80  # the (b) windows the table used
LINES_AFTER = 20
WAIT_IDLE_S = 900.0  # idle work at a spot: seconds on a loaded 2-core machine

# (d) configurations: name -> (repoContextTokens or None for the server's default, B open)
LSP_CONFIGS: dict[str, tuple[int | None, bool]] = {
    "d-norepo": (0, False),
    "d-norepo-open": (0, True),
    "d-repo": (None, False),
    "d-repo-open": (None, True),
}
VARIANT_LABELS = {
    "b": "(b) PSM 80/20, no repository context",
    "b+": "(b+) PSM 80/20 + the imported definition (oracle)",
    "d-norepo": "(d) lsp-complete, no repository context, file alone",
    "d-norepo-open": "(d) lsp-complete, no repository context, imported file open",
    "d-repo": "(d) lsp-complete, repository context, file alone",
    "d-repo-open": "(d) lsp-complete, repository context, imported file open",
}


def _sample(variant: str, task: CrossFileTask, c: Completion) -> Sample:
    return Sample.of(
        "d" if variant.startswith("d") else "b", "crossfile", task.name, 0, c, variant=variant,
        extra={"target": task.target, "needed": list(task.needed),
               **score(task, c.text)},
    )


def oracle_text(task: CrossFileTask, fim: Any) -> tuple[str, bool]:
    """The oracle's context before the PSM prompt: (text, whether it holds special markers).
    In the repository format when the template has one, else as a commented block."""
    package = task.relative(task.path).split("/", 1)[0] if task.language == "python" \
        else Path(task.root).name
    if fim is not None and getattr(fim, "file_sep", None):
        repo = f"{fim.repo_name}{package}\n" if getattr(fim, "repo_name", None) else ""
        return (f"{repo}{fim.file_sep}{task.relative(task.imported_path)}\n{task.definition}\n"
                f"{fim.file_sep}{task.relative(task.path)}\n"), True
    mark = syntax_for(task.language).comment_prefix
    lines = "".join(f"{mark} {line}".rstrip() + "\n" for line in task.definition.split("\n"))
    return f"{mark} Path: {task.relative(task.imported_path)}\n{lines}\n", False


def run_baselines(model_path: str, fim: FimTokens | None, repo_fim: Any, stop: tuple[str, ...],
                  threads: int, max_tokens: int, tasks: list[CrossFileTask],
                  variants: tuple[str, ...] = ("b", "b+"),
                  on_task: Callable[[], Any] = lambda: None) -> list[Sample]:
    """(b) and (b+) on one in-process model."""
    engine = LlamaBaseline(model_path, fim, stop, threads, max_tokens, reuse=True,
                           lines_before=LINES_BEFORE, lines_after=LINES_AFTER)
    samples: list[Sample] = []
    try:
        for task in tasks:
            for variant in variants:
                extra: list[int] = []
                if variant == "b+":
                    text, special = oracle_text(task, repo_fim)
                    extra = engine.tokenize_context(text, special)
                c = engine.complete_with_context(task.text, task.offset, extra)
                samples.append(_sample(variant, task, c))
            on_task()
    finally:
        engine.close()
    return samples


async def run_lsp_config(session: Any, tasks: list[CrossFileTask], variant: str,
                         open_imported: bool, on_task: Callable[[], Any]) -> list[Sample]:
    """One (d) configuration on a started `lsp_driver.ServerSession`."""
    from lsp_complete.bench import lsp_driver
    from lsp_complete.testing import lsp_client

    samples: list[Sample] = []
    for number, task in enumerate(tasks):
        version = (number + 1) * 10
        uri = Path(task.path).resolve().as_uri()
        other = Path(task.imported_path).resolve().as_uri()
        if open_imported:
            session.open(other, task.language,
                         Path(task.imported_path).read_text(encoding="utf-8"),
                         version)
        session.open(uri, task.language, task.text, version)
        session.move_cursor(uri, position_at(task.text, task.offset))
        await asyncio.sleep(0.05)
        await lsp_client.wait_idle(session.client, WAIT_IDLE_S)
        suggestion, latency, error = await session.inline(uri, task.text, task.offset)
        status = await session.status()
        c = lsp_driver.recorded(status, uri, version, suggestion, latency, error)
        sample = _sample(variant, task, c)
        doc: dict[str, Any] = next(
            (d for d in status.get("documents") or [] if d.get("uri") == uri), {})
        repo = doc.get("repoContext") or {}
        sample.extra["repo_tokens"] = repo.get("tokens", 0)
        sample.extra["repo_files"] = [f.get("path") for f in repo.get("files") or []]
        sample.extra["rss_mib"] = (status.get("memory") or {}).get("rssMiB")
        samples.append(sample)
        session.close(uri)
        if open_imported:
            session.close(other)
        on_task()
    return samples


# --- summary -----------------------------------------------------------------------------------

def summarize(samples: list[Sample]) -> dict[str, dict[str, Any]]:
    """Per variant: tasks, exact match, needed identifiers, edit similarity, repo tokens."""
    rows: dict[str, dict[str, Any]] = {}
    for variant in VARIANT_LABELS:
        mine = [s for s in samples if s.workload == "crossfile"
                and s.variant == variant]
        if not mine:
            continue
        rss = [s.extra["rss_mib"] for s in mine if s.extra.get("rss_mib") is not None]
        rows[variant] = {
            "label": VARIANT_LABELS[variant],
            "n": len(mine),
            **{name: mean(s.extra[key] for s in mine)
               for name, key in (("em", "em"), ("needed", "needed"), ("es", "es"))},
            "repo_tokens_mean": mean(s.extra.get("repo_tokens", 0) for s in mine),
            "latency_mean_ms": mean(s.latency_ms for s in mine),
            "rss_max_mib": max(rss, default=None),
        }
    return rows
