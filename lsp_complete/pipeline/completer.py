"""One suggestion on the worker thread: prompt -> engine -> postprocess, for the server and the
one-shot `complete` command alike, so both give the same suggestion for the same position.

`Completer` owns what a request needs there: the engine, the model's template, the tokenizer
cache, and the prompt planner (`planner.PromptPlanner`) that picks each keystroke's
prompt and what idle work encodes.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from lsp_complete.certainty import Certainty, line_confidence, place
from lsp_complete.config import Settings
from lsp_complete.context import CodeContext
from lsp_complete.context.block_shape import cut_to_parsing
from lsp_complete.context.limits import RepoContext
from lsp_complete.engine.base import (
    CancelToken,
    Engine,
    GenerationRequest,
    GenerationResult,
    ModelFileChanged,
    RemoteEngineError,
)
from lsp_complete.engine.factory import load_engine
from lsp_complete.models import ModelSpec
from lsp_complete.nextedit.history import EditBlock
from lsp_complete.nextedit.prompt import Window
from lsp_complete.pipeline.next_edit import NextEditAnswer, suggest_next_edit
from lsp_complete.pipeline.planner import PromptPlanner, Switch, encode, with_repo
from lsp_complete.pipeline.prepare import Prepared
from lsp_complete.postprocess import (
    CompletionSite,
    clean_completion,
    copying_next_line,
    count_block_lines,
    elision_stops,
)
from lsp_complete.prompt import Prompt, SegmentTokenizer, build_prompt

MAX_LINES = 12
# A one-line suggestion is cut at this many tokens (Copilot: 20): 1-3% of real code lines are
# longer, and a model that runs on past it is mostly writing a line nobody accepts whole,
# at a decode step per token (docs/bench/2026-12-03d).
LINE_MAX_TOKENS = 32
# A block after a one-line answer (`Completer.block`): idle work, so more room than a line.
BLOCK_MAX_TOKENS = 160
BLOCK_TIME_BUDGET_S = 12.0


@dataclass
class Completion:
    text: str  # cleaned text to insert at the cursor ("" for no suggestion)
    raw: str
    result: GenerationResult
    prompt_tokens: int
    latency_ms: float = 0.0
    # What the engine was asked (None when it was not reached): alternatives start from it.
    request: GenerationRequest | None = None
    # The full-context prompt made it (else a smaller one: the file's cache did not hold
    # the full one yet, which `Completer.climb` builds on).
    full_prompt: bool = True
    # Why there is no suggestion when the engine failed (a remote server down, a bad key):
    # the request is answered with none, and the server tells the user once.
    error: str = ""
    # The context its prompt was built from (a block goes on from it: `Completer.block`).
    context: CodeContext | None = None
    # How sure the model was of each part of `text` (None: unknown, from a remote engine or
    # a text postprocessing changed).
    certainty: Certainty | None = None

    @property
    def confidence(self) -> float:
        """The probability the model gave the first line of `text`."""
        return line_confidence(self.certainty, self.text)


class Completer:
    """What a request needs on the worker thread: engine, template, tokenizer cache, and the
    prompt planner. A failure of a remote engine is data: `run` answers a Completion with
    `error` set (and no text); idle work's `warm_*` raise EngineError for the caller's one
    error callback."""

    def __init__(self, engine: Engine, spec: ModelSpec, settings: Settings) -> None:
        self.engine = engine
        self.spec = spec
        self.settings = settings
        self.tokenize = SegmentTokenizer(engine.tokenize)
        # fit_context counts line by line: its own cache keeps the prompt segments' one warm.
        self._count_cache = SegmentTokenizer(engine.tokenize, max_entries=512)
        self.planner = PromptPlanner(engine, self.build_prompt, self._count_tokens)

    @property
    def cold_budget(self) -> int:
        """What a newly opened file's first prompt may hold now (for the status)."""
        return self.planner.cold_budget

    def _count_tokens(self, text: str) -> int:
        return len(self._count_cache(text))

    def build_prompt(self, ctx: CodeContext, at_cursor: bool = False) -> Prompt:
        return build_prompt(
            ctx,
            self.spec.fim,
            self.tokenize,
            self.engine.detokenize,
            self.settings.max_prompt_tokens,
            heal=self.settings.token_healing,
            at_cursor=at_cursor,
            begins_a_token=self.engine.begins_a_token,
        )

    def repo_tokens(self, prepared: Prepared, repo: RepoContext | None) -> int:
        """The prompt tokens of the repository block `repo` at the prepared spot."""
        return self.build_prompt(with_repo(prepared, repo).ctx).repo_tokens

    def run(
        self,
        prepared: Prepared,
        cancel: CancelToken,
        progress: Callable[[str], None] | None = None,
    ) -> Completion:
        """Compute one suggestion; `progress` sees the raw text generated so far."""
        started = time.perf_counter()
        try:
            return self._run(prepared, cancel, started, progress)
        except (RemoteEngineError, ModelFileChanged) as exc:
            result = GenerationResult(text="", stop_reason="error")
            return Completion("", "", result, 0, (time.perf_counter() - started) * 1000,
                              error=str(exc))

    def _run(
        self,
        prepared: Prepared,
        cancel: CancelToken,
        started: float,
        progress: Callable[[str], None] | None,
    ) -> Completion:
        full = self.build_prompt(prepared.ctx)
        prompt = self.planner.choose(prepared, full)
        site = prepared.site
        heal = prompt.heal

        def on_text(text: str) -> None:
            if progress is not None and text.startswith(heal):
                progress(text[len(heal) :])

        request = GenerationRequest(
            key=prepared.key,
            segments=prompt.segments,
            heal=prompt.heal,
            heal_code=prompt.heal_code,
            max_tokens=(self.settings.max_tokens if prepared.multiline
                        else min(self.settings.max_tokens, LINE_MAX_TOKENS)),
            stop=self.spec.stop,
            kept_stops=elision_stops(site.language_id),
            single_line=not prepared.multiline,
            deadline=time.monotonic() + self.settings.time_budget_ms / 1000,
            line_check=_block_ended(site) if prepared.multiline else None,
            on_text=on_text if progress is not None else None,
            abandon=lambda produced: copying_next_line(produced, site),
            speculation=self.settings.speculation,
            # The smaller prompt was chosen: the full one's context still drafts well.
            draft_context=[full.tokens] if prompt is not full else [],
            # Only where they are used: the server holds back unsure lines (certainty.py).
            probabilities=self.settings.min_confidence_percent > 0,
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
            full_prompt=prompt is full,
            context=prompt.ctx,
            certainty=place(result, len(prompt.heal), text),
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
        results = self.engine.alternatives(request, count, cancel)
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

    def block(self, prepared: Prepared, primary: Completion, cancel: CancelToken,
              progress: Callable[[str], None] | None = None,
              first: Callable[[str], None] | None = None) -> str | None:
        """The block that the suggestion `primary` begins (where `block_wanted` says so),
        generated on to the model's own end of the middle (its FIM-end or end-of-text token)
        within BLOCK_MAX_TOKENS and BLOCK_TIME_BUDGET_S, then cut by the multi-line rules (the
        enclosing block's indentation, the lines that already follow) and to the lines that
        parse. None when that is no more than `primary`'s text, or when cancelled.

        First from `primary`'s own request, going on from the text shown (`progress` sees the
        raw text generated so far; `first` gets that block, for typing-ahead). Then from the
        same context laid out as FIM models are trained on it (the prefix ending at the
        cursor, `build_prompt(at_cursor=True)`, an aside that shares the head and the window
        with the cached prompt): there the model ends the middle where it learned to, where
        the keystroke layout made it stop early (HumanEval's multi-line holes:
        docs/bench/2026-12-05c-healing-blocks). That block is the answer if it goes on from
        the text shown: a block never contradicts what the user sees."""
        request = primary.request
        if request is None:
            return None
        site = dataclasses.replace(prepared.site, multiline=True)
        shown = primary.text
        text = self._generate_block(request, prepared, site, cancel, progress)
        block = text if text is not None and _extends(text, shown) else None
        if cancel.cancelled:
            return None
        if block is not None and first is not None:
            first(block)
        if primary.context is None:
            return block
        standard = self.build_prompt(primary.context, at_cursor=True)
        trained = self._generate_block(
            dataclasses.replace(request, segments=standard.segments, heal="", heal_code=False),
            prepared, site, cancel, None)
        if cancel.cancelled:
            return None
        return trained if trained is not None and _extends(trained, shown) else block

    def _generate_block(self, request: GenerationRequest, prepared: Prepared,
                        site: CompletionSite, cancel: CancelToken,
                        progress: Callable[[str], None] | None) -> str | None:
        """A block from `request`'s prompt, cut as it is shown; None when cancelled or when
        the output does not start with the healed text."""
        heal = request.heal

        def on_text(text: str) -> None:
            if progress is not None and text.startswith(heal):
                progress(text[len(heal) :])

        request = dataclasses.replace(
            request, aside=True, single_line=False, line_check=_block_ended(site),
            on_text=on_text if progress is not None else None,
            max_tokens=max(request.max_tokens, BLOCK_MAX_TOKENS),
            deadline=time.monotonic() + BLOCK_TIME_BUDGET_S,
            abandon=lambda produced: copying_next_line(produced, site),
        )
        result = self.engine.complete(request, cancel)
        if cancel.cancelled or not result.text.startswith(heal):
            return None
        raw = result.text[len(heal) :]
        if result.stop_reason in ("max_tokens", "cancelled", "error"):
            raw = raw[: max(0, raw.rfind("\n"))]  # its last line may be cut mid-way
        return cut_block(raw, site, prepared.ctx, self.spec.stop)

    def next_edit(self, window: Window, history: list[EditBlock],
                  cancel: CancelToken) -> NextEditAnswer:
        """The next edit in `window` (`pipeline.next_edit`): the model's format must be known
        (`spec.next_edit`, which the server checks first). Errors are data, as `run`'s are."""
        template = self.spec.next_edit
        assert template is not None
        started = time.perf_counter()
        try:
            return suggest_next_edit(self.engine, self.tokenize, template, self.spec.stop,
                                     self.settings.speculation, window, history, cancel)
        except (RemoteEngineError, ModelFileChanged) as exc:
            return NextEditAnswer(None, "error", None, (time.perf_counter() - started) * 1000,
                                  error=str(exc))

    # ------------------------------------------------------------------ idle work

    def warm_spot(self, prepared: Prepared, active: RepoContext | None,
                  candidate: Callable[[], RepoContext | None],
                  cancel: CancelToken) -> Switch | None:
        """Encode what a keystroke at the prepared spot needs (`PromptPlanner.warm_spot`)."""
        return self.planner.warm_spot(prepared, active, candidate, cancel)

    def warm_look(self, prepared: Prepared, active: RepoContext | None,
                  cancel: CancelToken) -> bool:
        """Encode what the first keystroke at a resting cursor's spot takes
        (`PromptPlanner.warm_look`); whether it is complete."""
        return self.planner.warm_look(prepared, active, cancel)

    def climb(self, prepared: Prepared, cancel: CancelToken) -> int:
        """Build on towards the full prompt after a keystroke (`PromptPlanner.plan_climb`)."""
        return encode(self.engine, self.planner.plan_climb(prepared), cancel)

    def refine(self, prepared: Prepared, primary: Completion,
               cancel: CancelToken) -> Completion | None:
        """After `primary` was answered from a smaller prompt than the full one: climb, then
        answer the same spot again from the richer prompt now cached. None when there was
        nothing to climb to, when cancelled (the next keystroke), or when the engine failed."""
        plan = self.planner.plan_climb(prepared)
        if not plan:
            return None
        encode(self.engine, plan, cancel)
        if cancel.cancelled:
            return None
        completion = self.run(prepared, cancel)
        richer = completion.prompt_tokens > primary.prompt_tokens
        if cancel.cancelled or completion.error or not richer:
            return None
        return completion

    def restore(self, key: str) -> bool:
        """A newly opened file's KV cache saved on disk, brought into memory (`Engine.restore`)."""
        return self.engine.restore(key)

    def persist(self, key: str | None = None) -> int:
        """Save the file's (or every file's) KV cache to disk; returns how many were saved."""
        return self.engine.persist(key)

    def forget(self, key: str) -> None:
        """The file was closed: free its KV cells."""
        self.engine.forget(key)

    def model_changed(self) -> str | None:
        """Why the engine's model file is no longer the one on disk, else None."""
        return self.engine.model_changed()

    def close(self) -> None:
        self.engine.close()


def cut_block(raw: str, site: CompletionSite, ctx: CodeContext, stop: Sequence[str]) -> str:
    """A generated block cut as it is shown: the multi-line rules at `site` (a multi-line
    site), then to the lines that parse between the text before and after it."""
    text = clean_completion(raw, site, stop, max_lines=MAX_LINES)
    return cut_to_parsing(ctx.before + ctx.middle, text, ctx.suffix, ctx.language_id)


def _extends(block: str, shown: str) -> bool:
    """`block` goes on from the text shown, with more lines."""
    return block.startswith(shown) and block.count("\n") > shown.count("\n")


def block_wanted(prepared: Prepared, answered: Completion) -> bool:
    """Whether idle work should generate the block that `answered` begins: a one-line answer
    where a block may follow (`Prepared.block_after`), or a block the time budget cut short."""
    if not answered.text:
        return False
    return prepared.block_after or (prepared.multiline
                                    and answered.result.stop_reason == "budget")


def _block_ended(site: CompletionSite) -> Callable[[str], bool]:
    def ended(text: str) -> bool:
        # Stop generating as soon as the multi-line rule would cut what follows anyway.
        complete_lines = text.count("\n")
        kept = count_block_lines(text, site, max_lines=MAX_LINES)
        return kept < complete_lines or complete_lines >= MAX_LINES

    return ended


def load_completer(settings: Settings, cancelled: Callable[[], bool] = lambda: False
                   ) -> tuple[Completer, dict[str, Any], list[str]]:
    """Resolve the model, check its template, and load it (seconds: run off the event loop;
    it stops once `cancelled()`)."""
    loaded = load_engine(settings, cancelled)
    return Completer(loaded.engine, loaded.spec, settings), loaded.info, loaded.warnings
