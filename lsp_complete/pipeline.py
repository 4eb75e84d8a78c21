"""One suggestion, start to finish: context -> prompt -> engine -> postprocess.

`prepare` runs where the document lives (the server's event loop: it reads the text and tree);
`run` runs on the worker thread (tokenizing and inference). Both the server and the one-shot
`complete` command use this, so they give the same suggestion for the same position. The
server reaches the document's context only through `prepare`, `prepare_head` and `fresh_anchor`.
"""

from __future__ import annotations

import dataclasses
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from lsp_complete.config import Settings
from lsp_complete.context import (
    CodeContext,
    ContextLimits,
    build_context,
    choose_anchor,
    cold_limits,
    enclosing_block_indent,
    wants_multiline,
)
from lsp_complete.documents import Document
from lsp_complete.engine.base import (
    CancelToken,
    Engine,
    GenerationRequest,
    GenerationResult,
    RemoteEngineError,
)
from lsp_complete.engine.factory import load_engine
from lsp_complete.models import ModelSpec
from lsp_complete.postprocess import (
    CompletionSite,
    clean_completion,
    copying_next_line,
    count_block_lines,
)
from lsp_complete.prompt import Prompt, SegmentTokenizer, build_prompt, fit_context

MAX_LINES = 12
# The full-context prompt is used unless it costs more than this many tokens (~70 ms on
# 2 cores) and more than half again as much as the smaller cold one to encode: more context
# is worth a little more time, not a wait.
FULL_PROMPT_SLACK = 16
DEFAULT_LIMITS = ContextLimits()
# The first prompt in a file whose cache is cold holds what the engine prefills in about this
# long at its measured speed (~120 tokens for the 0.5B model on 2 cores), so that the first
# suggestion comes within a second; the full context is built aside in idle time.
COLD_PREFILL_SECONDS = 0.5
COLD_MIN_TOKENS = 48  # the cursor line and the lines just above it, at least
COLD_MAX_TOKENS = 320


def cold_budget(prefill_rate: float | None) -> int:
    """Tokens of context (besides the typed middle) in a cold file's first prompt."""
    if prefill_rate is None:
        return COLD_MAX_TOKENS
    return max(COLD_MIN_TOKENS, min(COLD_MAX_TOKENS, int(prefill_rate * COLD_PREFILL_SECONDS)))


@dataclass(frozen=True)
class Prepared:
    key: str
    ctx: CodeContext
    site: CompletionSite
    multiline: bool
    cold_ctx: CodeContext | None = None  # smaller windows, for a file with a cold KV cache


@dataclass
class Completion:
    text: str  # cleaned text to insert at the cursor ("" for no suggestion)
    raw: str
    result: GenerationResult
    prompt_tokens: int
    latency_ms: float = 0.0
    # What the engine was asked (None when it was not reached): alternatives start from it.
    request: GenerationRequest | None = None


def prepare(
    doc: Document,
    cursor: int,
    previous_anchor: int | None,
    settings: Settings,
    limits: ContextLimits = DEFAULT_LIMITS,
) -> Prepared:
    """What a suggestion at `cursor` needs from the document. The prompt stays anchored at
    `previous_anchor` while the middle stays small, else at the cursor's line."""
    anchor = choose_anchor(doc, cursor, previous_anchor, limits)
    ctx = build_context(doc, cursor, anchor, limits)
    cold_ctx = build_context(doc, cursor, anchor, cold_limits(limits))
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
        # The language the document was resolved to (an alias, or "plaintext" for a .py file,
        # gets that language's bracket lexer too).
        language_id=doc.spec.name if doc.spec is not None else doc.language_id,
    )
    return Prepared(key=doc.uri, ctx=ctx, site=site, multiline=multiline, cold_ctx=cold_ctx)


def prepare_head(doc: Document, limits: ContextLimits = DEFAULT_LIMITS) -> CodeContext:
    """The context of a newly opened file seen from its start: idle work encodes its stable
    head (`Completer.warm_head`) before the first keystroke."""
    return build_context(doc, 0, 0, limits)


def fresh_anchor(doc: Document, cursor: int, limits: ContextLimits = DEFAULT_LIMITS) -> int:
    """Where `prepare` anchors a prompt for `cursor` when the file has no anchor yet."""
    return choose_anchor(doc, cursor, None, limits)


class Completer:
    """Owns what a request needs on the worker thread: engine, template, tokenizer cache.

    `last_error` is "" after a call that reached the engine, else the message of the last
    RemoteEngineError (server down, bad key...): such a call answers with no suggestion instead
    of failing the request, and the language server shows the message to the user once.
    """

    def __init__(self, engine: Engine, spec: ModelSpec, settings: Settings) -> None:
        self.engine = engine
        self.spec = spec
        self.settings = settings
        self.tokenize = SegmentTokenizer(engine.tokenize)
        self.last_error = ""
        # Fixed per file once chosen: a budget that moved would move its cold prompt too.
        self._cold_budgets: OrderedDict[str, int] = OrderedDict()
        # fit_context counts line by line: its own cache keeps the prompt segments' one warm.
        self._count_cache = SegmentTokenizer(engine.tokenize, max_entries=512)

    @property
    def cold_budget(self) -> int:
        """What a newly opened file's first prompt may hold now (the engine's prefill speed
        is measured at load and kept up to date by every long prefill)."""
        return cold_budget(self.engine.prefill_rate)

    def cold_budget_for(self, key: str) -> int:
        budget = self._cold_budgets.pop(key, None) or self.cold_budget
        self._cold_budgets[key] = budget
        if len(self._cold_budgets) > 256:
            self._cold_budgets.popitem(last=False)
        return budget

    def choose_prompt(self, prepared: Prepared, full: Prompt | None = None) -> Prompt:
        """The full-context prompt (`full`, when the caller has built it already), unless a
        smaller one is clearly cheaper to encode: a file whose KV cache is cold, or whose full
        prompt idle work has not finished building yet (it is, in idle time).

        Two smaller ones: the cold window (`window_prompt`: what idle work prepares first at a
        spot), and, where nothing was prepared at this spot (a newly opened file asked at
        once), that window cut to what prefills in ~0.5 s (`cold_budget`). A window idle work
        started is finished rather than given up for the cut one: the keystrokes after it keep
        its context."""
        if full is None:
            full = self.build_prompt(prepared.ctx)
        if prepared.cold_ctx is None:
            return full
        full_cached = self.engine.cached_prefix(prepared.key, full.tokens)
        if full_cached is None:  # the engine cannot tell (a server's cache)
            return full
        full_cost = len(full) - full_cached
        if full_cost <= FULL_PROMPT_SLACK:
            return full
        window = self.window_prompt(prepared)
        window_cached = self.engine.cached_prefix(prepared.key, window.tokens) or 0
        small = self.build_prompt(fit_context(
            prepared.cold_ctx, self.cold_budget_for(prepared.key), self._count_tokens))
        small_cached = self.engine.cached_prefix(prepared.key, small.tokens) or 0
        # Most context first; the last is the fallback. The cut prompt only where idle work
        # did not prepare this spot.
        options = [(full, full_cost), (window, len(window) - window_cached)]
        if window_cached < small_cached + FULL_PROMPT_SLACK:
            options.append((small, len(small) - small_cached))
        base_cost = options[-1][1]
        allowed = base_cost + max(FULL_PROMPT_SLACK, base_cost // 2)
        return next(prompt for prompt, cost in options if cost <= allowed)

    def window_prompt(self, prepared: Prepared) -> Prompt:
        """The cold window's prompt (at most COLD_MAX_TOKENS of context besides the middle)."""
        assert prepared.cold_ctx is not None
        return self.build_prompt(fit_context(prepared.cold_ctx, COLD_MAX_TOKENS,
                                             self._count_tokens))

    def _count_tokens(self, text: str) -> int:
        return len(self._count_cache(text))

    def build_prompt(self, ctx: CodeContext) -> Prompt:
        return build_prompt(
            ctx,
            self.spec.fim,
            self.tokenize,
            self.engine.detokenize,
            self.settings.max_prompt_tokens,
            heal=self.settings.token_healing,
        )

    def run(
        self,
        prepared: Prepared,
        cancel: CancelToken,
        progress: Callable[[str], None] | None = None,
    ) -> Completion:
        """Compute one suggestion; `progress` sees the raw text generated so far."""
        started = time.perf_counter()
        try:
            completion = self._run(prepared, cancel, started, progress)
        except RemoteEngineError as exc:
            self.last_error = str(exc)
            result = GenerationResult(text="", stop_reason="error")
            return Completion("", "", result, 0, (time.perf_counter() - started) * 1000)
        self.last_error = ""
        return completion

    def _run(
        self,
        prepared: Prepared,
        cancel: CancelToken,
        started: float,
        progress: Callable[[str], None] | None,
    ) -> Completion:
        full = self.build_prompt(prepared.ctx)
        prompt = self.choose_prompt(prepared, full)
        site = prepared.site
        heal = prompt.heal

        def on_text(text: str) -> None:
            if progress is not None and text.startswith(heal):
                progress(text[len(heal) :])

        def block_ended(text: str) -> bool:
            # Stop generating as soon as the multi-line rule would cut what follows anyway.
            complete_lines = text.count("\n")
            kept = count_block_lines(text, site, max_lines=MAX_LINES)
            return kept < complete_lines or complete_lines >= MAX_LINES

        request = GenerationRequest(
            key=prepared.key,
            segments=prompt.segments,
            heal=prompt.heal,
            heal_code=prompt.heal_code,
            max_tokens=self.settings.max_tokens,
            stop=self.spec.stop,
            single_line=not prepared.multiline,
            deadline=time.monotonic() + self.settings.time_budget_ms / 1000,
            line_check=block_ended if prepared.multiline else None,
            on_text=on_text if progress is not None else None,
            abandon=lambda produced: copying_next_line(produced, site),
            speculation=self.settings.speculation,
            # The smaller prompt was chosen: the full one's context still drafts well.
            draft_context=[full.tokens] if prompt is not full else [],
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
            request=request,
        )

    def alternatives(self, prepared: Prepared, primary: Completion, count: int,
                     cancel: CancelToken) -> list[str] | None:
        """Up to `count` other suggestions for the spot `primary` answered, from the same
        prompt, each starting with another first token (`Engine.alternatives`), cleaned as the
        primary is; none empty, none equal to the primary or to another. None when cancelled
        (what was found is not all there is)."""
        request = primary.request
        if request is None or count <= 0:
            return []
        # The time budget starts now (the primary's has passed); nothing to report progress to.
        request = dataclasses.replace(
            request, on_text=None,
            deadline=time.monotonic() + self.settings.time_budget_ms / 1000,
        )
        try:
            results = self.engine.alternatives(request, count, cancel)
        except RemoteEngineError as exc:  # the next suggestion reports it
            self.last_error = str(exc)
            return []
        if cancel.cancelled:
            return None
        texts: list[str] = []
        for result in results:
            if not result.text.startswith(request.heal):
                continue
            raw = result.text[len(request.heal) :]
            text = clean_completion(raw, prepared.site, self.spec.stop, max_lines=MAX_LINES)
            if text.strip() and text != primary.text and text not in texts:
                texts.append(text)
        return texts

    def warm_for(self, prepared: Prepared, cancel: CancelToken) -> int:
        """Idle time: encode what a keystroke at the prepared cursor will need. First the prompt
        `choose_prompt` picks now (the cold window rather than its cut when the file's cache is
        cold: there is no request waiting), then the full-context one, which the engine builds
        aside and uses once complete. Returns the tokens encoded."""
        try:
            full = self.build_prompt(prepared.ctx)
            first = self.choose_prompt(prepared, full)
            if first is not full and prepared.cold_ctx is not None:
                first = self.window_prompt(prepared)
            done = self.engine.warm(prepared.key, first.segments, cancel)
            if not cancel.cancelled and full.tokens != first.tokens:
                done += self.engine.warm(prepared.key, full.segments, cancel)
            return done
        except RemoteEngineError as exc:  # idle work: the next suggestion reports it
            self.last_error = str(exc)
            return 0

    def warm_head(self, key: str, ctx: CodeContext, cancel: CancelToken) -> int:
        """Encode the stable first segment of a context's prompt, if it extends the file's
        cache (a newly opened file; its sequence may just have been restored from disk)."""
        try:
            prompt = self.build_prompt(ctx)
            return self.engine.warm(key, prompt.segments[:1], cancel, extend_only=True)
        except RemoteEngineError as exc:  # idle work: the next suggestion reports it
            self.last_error = str(exc)
            return 0


def load_completer(settings: Settings) -> tuple[Completer, dict[str, Any], list[str]]:
    """Resolve the model, check its template, and load it (seconds: run off the event loop)."""
    loaded = load_engine(settings)
    return Completer(loaded.engine, loaded.spec, settings), loaded.info, loaded.warnings
