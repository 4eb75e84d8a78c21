"""One suggestion, start to finish: context -> prompt -> engine -> postprocess.

`prepare` runs where the document lives (the server's event loop: it reads the text and tree);
`run` runs on the worker thread (tokenizing and inference). Both the server and the one-shot
`complete` command use this, so they give the same suggestion for the same position.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from platformdirs import user_cache_dir

from lsp_complete.config import Settings
from lsp_complete.context import (
    CodeContext,
    ContextLimits,
    build_context,
    choose_anchor,
    enclosing_block_indent,
    wants_multiline,
)
from lsp_complete.documents import Document
from lsp_complete.engine.base import CancelToken, Engine, GenerationRequest, GenerationResult
from lsp_complete.engine.kvstore import KVStore
from lsp_complete.engine.llama import LlamaEngine
from lsp_complete.model_store import resolve_model
from lsp_complete.models import ModelSpec, check_template
from lsp_complete.postprocess import CompletionSite, clean_completion, count_block_lines
from lsp_complete.prompt import Prompt, SegmentTokenizer, build_prompt

MAX_LINES = 12


@dataclass(frozen=True)
class Prepared:
    key: str
    ctx: CodeContext
    site: CompletionSite
    multiline: bool


@dataclass
class Completion:
    text: str  # cleaned text to insert at the cursor ("" for no suggestion)
    raw: str
    result: GenerationResult
    prompt_tokens: int
    latency_ms: float = 0.0


def prepare(
    doc: Document,
    cursor: int,
    previous_anchor: int | None,
    settings: Settings,
    limits: ContextLimits,
) -> Prepared:
    anchor = choose_anchor(doc, cursor, previous_anchor, limits)
    ctx = build_context(doc, cursor, anchor, limits)
    line_start = doc.line_start(cursor)
    line_end = doc.line_range(doc.line_of(cursor))[1]
    line_prefix = doc.text[line_start:cursor]
    if settings.multiline == "always":
        multiline = True
    elif settings.multiline == "never":
        multiline = False
    else:
        multiline = wants_multiline(doc, cursor)
    indent = line_prefix[: len(line_prefix) - len(line_prefix.lstrip())]
    site = CompletionSite(
        line_prefix=line_prefix,
        line_suffix=doc.text[cursor:line_end],
        suffix=ctx.suffix,
        indent=indent,
        block_indent=enclosing_block_indent(doc, cursor),
        multiline=multiline,
        language_id=doc.language_id,
    )
    return Prepared(key=doc.uri, ctx=ctx, site=site, multiline=multiline)


class Completer:
    """Owns what a request needs on the worker thread: engine, template, tokenizer cache."""

    def __init__(self, engine: Engine, spec: ModelSpec, settings: Settings) -> None:
        self.engine = engine
        self.spec = spec
        self.settings = settings
        self.tokenize = SegmentTokenizer(engine.tokenize)

    def build_prompt(self, ctx: CodeContext) -> Prompt:
        return build_prompt(
            ctx,
            self.spec.fim,
            self.tokenize,
            self.engine.detokenize,
            self.settings.max_prompt_tokens,
            heal=self.settings.token_healing,
        )

    def run(self, prepared: Prepared, cancel: CancelToken) -> Completion:
        started = time.perf_counter()
        prompt = self.build_prompt(prepared.ctx)
        site = prepared.site

        def block_ended(text: str) -> bool:
            # Stop generating as soon as the multi-line rule would cut what follows anyway.
            complete_lines = text.count("\n")
            kept = count_block_lines(text, site, max_lines=MAX_LINES)
            return kept < complete_lines or complete_lines >= MAX_LINES

        request = GenerationRequest(
            key=prepared.key,
            segments=prompt.segments,
            heal=prompt.heal,
            max_tokens=self.settings.max_tokens,
            stop=self.spec.stop,
            single_line=not prepared.multiline,
            deadline=time.monotonic() + self.settings.time_budget_ms / 1000,
            line_check=block_ended if prepared.multiline else None,
        )
        result = self.engine.complete(request, cancel)
        raw = result.text[len(prompt.heal) :] if result.text.startswith(prompt.heal) else ""
        text = "" if cancel.cancelled else clean_completion(
            raw, site, self.spec.stop, max_lines=MAX_LINES
        )
        return Completion(
            text=text,
            raw=raw,
            result=result,
            prompt_tokens=len(prompt),
            latency_ms=(time.perf_counter() - started) * 1000,
        )

    def warm(self, key: str, ctx: CodeContext, cancel: CancelToken, whole: bool = False) -> int:
        """Encode the stable part of a context's prompt (or all of it but the healed token)."""
        prompt = self.build_prompt(ctx)
        segments = prompt.segments if whole else prompt.segments[:1]
        return self.engine.warm(key, segments, cancel, extend_only=not whole)


def load_completer(settings: Settings) -> tuple[Completer, dict[str, Any], list[str]]:
    """Resolve the model, check its template, and load it (seconds: run off the event loop)."""
    resolved = resolve_model(settings.model)
    warnings = check_template(resolved.path, resolved.spec)
    store = None
    if settings.persist_cache:
        cache_root = os.environ.get("LSP_COMPLETE_CACHE_DIR") or user_cache_dir("lsp-complete")
        store = KVStore(Path(cache_root) / "kv", size_limit=settings.cache_size_mb << 20)
    stat = resolved.path.stat()
    model_id = resolved.spec.sha256 or f"{resolved.path}:{stat.st_size}:{stat.st_mtime_ns}"
    engine = LlamaEngine(
        resolved.path,
        n_ctx=settings.context_size,
        n_threads=settings.threads,
        n_gpu_layers=settings.gpu_layers,
        slots=settings.slots,
        kv_store=store,
        model_id=model_id,
    )
    info = {"name": resolved.spec.name, "path": str(resolved.path)}
    return Completer(engine, resolved.spec, settings), info, warnings
