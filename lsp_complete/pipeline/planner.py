"""When a file's prompt is encoded, cut or switched: the one module for that policy.

Events in, plans out; what runs the plans decides nothing:
- A keystroke's prompt (`PromptPlanner.choose`): the full-context prompt, unless a smaller one
  is clearly cheaper to encode because the file's KV cache does not hold the full one yet.
- What idle work follows each event of a file (`after_open`, `after_answer`,
  `after_cursor_move`): a list of `IdleStep`s that the server's open files queue on the
  scheduler (server/files.py), in that order, at once or once the cursor rests.
- What each idle step encodes (`plan_climb`, `plan_look`, `plan_spot`): `Encode` plans (which
  tokens, whether what the file's cache holds may be replaced, aside, or only extended, and
  how much of it no keystroke interrupts), executed by `encode` in that order; and when a
  file's repository block (the first prompt segment: changing it re-encodes everything) may
  change (`PromptPlanner.warm_spot`'s `Switch`).

The `after_*` functions run on the event loop and read only what they are given; the planner
object runs on the worker thread, where the engine lives.
"""

from __future__ import annotations

import dataclasses
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

from lsp_complete.context import CodeContext
from lsp_complete.context.limits import RepoContext
from lsp_complete.engine.base import CancelToken, Engine
from lsp_complete.pipeline.prepare import Prepared
from lsp_complete.prompt import Prompt, fit_context

# The full-context prompt is used unless it costs more than this many tokens (~70 ms on
# 2 cores) and more than half again as much as the smaller cold one's own context (its
# repository block aside) to encode: more context is worth a little more time, not a wait.
FULL_PROMPT_SLACK = 16
# The first prompt at a spot the file's cache does not hold (a file just opened, a new spot in
# an open one) holds what the engine prefills in about this long at its measured speed, at
# least COLD_MIN_TOKENS: the first suggestion comes in about a second on 2 cores, and it must
# be good, for typing-ahead serves it on as long as the user types what it shows (a span
# asks the model 1-4 times). With 48 or 96 tokens the first suggestion came sooner, with
# fewer lines exact and more wrong suggestions shown (docs/bench/2026-12-04-first-prompt).
COLD_PREFILL_SECONDS = 0.5
COLD_MIN_TOKENS = 160  # the cursor line, the lines above it, the enclosing headers
COLD_MAX_TOKENS = 320
# The cold window (what a file climbs to first) is cut only beyond this many tokens.
WINDOW_MAX_TOKENS = 448
# A file whose whole prompt is this small (about 40 lines of code) is never cut: HumanEval's
# documents asked at open lost half their exact matches to the cut (0.5B: 0.48 -> 0.26).
SMALL_FILE_TOKENS = WINDOW_MAX_TOKENS


# What follows each event of a file

IdleWork = Literal["restore", "climb", "look", "spot"]


@dataclass(frozen=True)
class IdleStep:
    """One piece of idle work for a file: `restore` brings a newly opened file's KV cache
    saved on disk into memory (`Engine.restore`), `climb` builds on from a keystroke's small
    prompt (`plan_climb`) and answers its spot again from what it built
    (`Completer.refine`), `look` encodes what the first keystroke at a resting cursor's
    spot takes (`plan_look`), `spot` encodes the prompt anchored at the cursor line and brings
    the repository block up to date (`plan_spot`, `warm_spot`). `when_resting`: once the
    cursor rests (the idle delay with no edit), else at once; `first`: before the idle work
    queued already."""

    work: IdleWork
    when_resting: bool = False
    first: bool = False


@dataclass
class FilePlan:
    """What the planner remembers of one open file (its owner keeps it, from open to close)."""

    small_answers: int = 0  # model answers from a smaller prompt than the full one
    answers: int = 0  # model answers


def after_open() -> list[IdleStep]:
    """A file was opened (or a model loaded for it): what its cache saved on disk holds, ahead
    of the first keystroke. Nothing is encoded: many files are opened only to be read, and no
    prompt can be guessed before the cursor is known (the head at the file's top, which this
    once encoded, shares almost nothing with one asked elsewhere: the outline is picked nearest
    the cursor, and the imports are in it only outside the window)."""
    return [IdleStep("restore")]


def after_answer(file: FilePlan, full_prompt: bool) -> list[IdleStep]:
    """A keystroke was answered by the model, from the full-context prompt or not. A smaller
    prompt climbs, at once and first (the cold window built aside, then the spot answered
    again from it, for the keys typed on through the suggestion), but not after the file's
    first small answer: typing-ahead serves that suggestion on while the user types what it
    shows, and a bigger prompt pays only once the model must be asked again (climbing after
    the first too cost CPU for nothing measurable: docs/bench/2026-12-04-first-prompt). Every
    answer re-anchors once the cursor rests, so that the next keystroke appends to a fresh,
    short middle (also when the anchor is there already: a file that started with the cold
    prompt gets its full context; a no-op when cached)."""
    steps: list[IdleStep] = []
    file.answers += 1
    if not full_prompt:
        file.small_answers += 1
        if file.small_answers >= 2:
            steps.append(IdleStep("climb", first=True))
    return [*steps, IdleStep("spot", when_resting=True)]


def after_cursor_move(anchored_here: bool) -> list[IdleStep]:
    """The cursor moved to another spot and rests there: prepare what the first keystroke
    there takes while the user gets ready to type, unless the file's prompt is anchored at that
    line already. Only that (a `look`): a cursor rests as often while a person reads, and the
    full prompt and the repository block (thousands of tokens, both cores busy for the whole
    of a reading rest) wait for an answer at the spot (`after_answer`)."""
    return [] if anchored_here else [IdleStep("look")]


def after_repository_change(has_block: bool) -> list[IdleStep]:
    """Files of the workspace changed: a file's repository block may name them, so bring it up
    to date at the file's last spot. A file with no block has nothing to bring up to date:
    files opened only to be read would each encode a whole prompt, at every save."""
    return [IdleStep("spot")] if has_block else []


# What idle work encodes

@dataclass(frozen=True)
class Encode:
    """Encode `segments` (a prompt) into `key`'s KV cache ahead of a keystroke. A prompt that
    does not extend what the file's cache holds is built aside and replaces it once complete
    (a keystroke meanwhile finds the old one intact), or with `extend_only` not encoded at all."""

    key: str
    segments: list[list[int]] = field(repr=False)
    extend_only: bool = False


def encode(engine: Engine, plan: list[Encode], cancel: CancelToken) -> int:
    """Run `plan` in order until cancelled; returns the tokens encoded."""
    done = 0
    for step in plan:
        if cancel.cancelled:
            break
        done += engine.warm(step.key, step.segments, cancel, extend_only=step.extend_only)
    return done


# A keystroke's prompt

def cold_budget(prefill_rate: float | None) -> int:
    """Tokens of context (besides the typed middle) in a cold file's first prompt."""
    if prefill_rate is None:
        return COLD_MAX_TOKENS
    return max(COLD_MIN_TOKENS, min(COLD_MAX_TOKENS, int(prefill_rate * COLD_PREFILL_SECONDS)))


def with_repo(prepared: Prepared, repo: RepoContext | None) -> Prepared:
    """The same suggestion with another repository block, in its full context only: the
    smaller windows (`cold_ctx`, which `prepare` builds without a block) keep none, so the
    first suggestion in a newly opened file does not wait for hundreds of tokens of other
    files; the full prompt, built aside in idle time, has them. A `cold` block (just what
    the cursor's line names, `wants_line_block`) is in the smaller windows too."""
    if prepared.ctx.repo is repo:
        return prepared
    cold_ctx = prepared.cold_ctx
    if cold_ctx is not None:
        cold_ctx = dataclasses.replace(cold_ctx, repo=repo if repo is not None and repo.cold
                                       else None)
    return dataclasses.replace(prepared, ctx=dataclasses.replace(prepared.ctx, repo=repo),
                               cold_ctx=cold_ctx)


def wants_line_block(file: FilePlan, active: RepoContext | None) -> bool:
    """A request or a rest in a file the model has not answered yet, which has no repository
    block, or only the line block of a line it rested on before (a file asked at open, or
    after a pause with no keystroke, or read before typing: idle work builds the whole block
    only after an answer): its line's definitions are built for it on demand (`cold`, so its
    small first prompt carries them). Not later: a block that appears while the user types
    re-encodes the whole prompt, and idle work brings the whole block after the answer."""
    return (active is None or active.cold) and file.answers == 0


@dataclass(frozen=True)
class Switch:
    """Idle work found that the file's repository block should change: its prompt with `repo`
    is cached now, and a keystroke with it costs no more than one with the old block."""

    repo: RepoContext | None
    tokens: int  # the block's prompt tokens


class PromptPlanner:
    """The policy over one engine's KV cache; `build` makes a context's prompt, `count` counts
    a line's tokens (for cutting the first prompt)."""

    def __init__(self, engine: Engine, build: Callable[[CodeContext], Prompt],
                 count: Callable[[str], int]) -> None:
        self.engine = engine
        self._build = build
        self._count = count
        # Fixed per file once chosen: a budget that moved would move its cold prompt too.
        self._cold_budgets: OrderedDict[str, int] = OrderedDict()

    # ------------------------------------------------------------------ a keystroke's prompt

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

    def choose(self, prepared: Prepared, full: Prompt | None = None) -> Prompt:
        """The full-context prompt (`full`, when the caller has built it already), unless a
        smaller one is clearly cheaper to encode: a file whose KV cache is cold, or whose full
        prompt idle work has not finished building yet (it is, in idle time).

        Two smaller ones: the cold window (`window_prompt`: what is built first towards the
        full one), and that window cut to what prefills in ~0.5 s (`cold_budget`: a newly
        opened file asked at once). A small file (a full prompt of at most SMALL_FILE_TOKENS)
        gets its full prompt at once. A bigger prompt that is not complete yet is not finished
        by a keystroke: `climb` completes it in the time between keys."""
        if full is None:
            full = self._build(prepared.ctx)
        if prepared.cold_ctx is None:
            return full
        full_cached = self.engine.cached_prefix(prepared.key, full.tokens)
        if full_cached is None:  # the engine cannot tell (a server's cache)
            return full
        full_cost = len(full) - full_cached
        if full_cost <= FULL_PROMPT_SLACK:
            return full
        if len(full) <= SMALL_FILE_TOKENS:
            # A small file: cutting its whole context would save little time and lose what
            # the model needs most (the docstring above a function's first lines...).
            return full
        window = self.window_prompt(prepared)
        window_cached = self.engine.cached_prefix(prepared.key, window.tokens) or 0
        small = self._build(fit_context(
            prepared.cold_ctx, self.cold_budget_for(prepared.key), self._count))
        small_cached = self.engine.cached_prefix(prepared.key, small.tokens) or 0
        # Most context first; the cheapest sets what a little more context may cost: half
        # again its own context, not counting a repository block that every option carries
        # (the line block of a file asked at open), which more of the file does not make
        # more useful.
        options = [(full, full_cost), (window, len(window) - window_cached),
                   (small, len(small) - small_cached)]
        base, base_cost = min(options, key=lambda option: option[1])
        own_cost = base_cost - min(base.repo_tokens, base_cost)
        allowed = base_cost + max(FULL_PROMPT_SLACK, own_cost // 2)
        return next(prompt for prompt, cost in options if cost <= allowed)

    def window_prompt(self, prepared: Prepared) -> Prompt:
        """The cold window's prompt (at most WINDOW_MAX_TOKENS of context besides the
        middle)."""
        assert prepared.cold_ctx is not None
        return self._build(fit_context(prepared.cold_ctx, WINDOW_MAX_TOKENS, self._count))

    # ------------------------------------------------------------------ idle work

    def plan_climb(self, prepared: Prepared) -> list[Encode]:
        """After a keystroke answered with a smaller prompt: build the cold window aside (the
        engine swaps it in once complete), the context the next keystrokes can have soonest.
        No part of it is firm: the next keystroke that needs the worker aborts it within a
        prefill batch, for a keystroke never waits for work its answer does not need (an
        interrupted build resumes where it stopped). The full prompt is idle time's
        (`plan_spot`): while the user types on, the thousand-odd tokens it costs would pay off
        only on a long stay at one spot."""
        if prepared.cold_ctx is None:
            return []
        full, window = self._build(prepared.ctx), self.window_prompt(prepared)
        now = self.choose(prepared, full)
        if now is full or now.tokens == window.tokens:
            return []  # the full prompt or the window is in use: nothing to climb to
        cached = self.engine.cached_prefix(prepared.key, window.tokens)
        if cached is None or cached >= len(window):
            return []
        return [Encode(prepared.key, window.segments)]

    def plan_look(self, prepared: Prepared) -> list[Encode]:
        """A cursor at rest (`prepared` with the file's active repository block): what its
        spot's first keystroke will take."""
        first, _full = self._spot_prompts(prepared)
        return [Encode(prepared.key, first.segments)]

    def plan_spot(self, prepared: Prepared) -> list[Encode]:
        """Idle time at a spot where the model answered: `plan_look`'s prompt, then the
        full-context one, which the engine builds aside and uses once complete."""
        first, full = self._spot_prompts(prepared)
        plan = [Encode(prepared.key, first.segments)]
        if full.tokens != first.tokens:
            plan.append(Encode(prepared.key, full.segments))
        return plan

    def _spot_prompts(self, prepared: Prepared) -> tuple[Prompt, Prompt]:
        """The prompt a keystroke at the spot would take first, `choose`'s (the cold window
        rather than its cut when the file's cache is cold: no request is waiting), and the
        full-context one."""
        full = self._build(prepared.ctx)
        first = self.choose(prepared, full)
        if first is not full and prepared.cold_ctx is not None:
            first = self.window_prompt(prepared)
        return first, full

    def warm_look(self, prepared: Prepared, active: RepoContext | None,
                  cancel: CancelToken) -> bool:
        """Encode `plan_look` with the file's `active` repository block; whether it is
        complete (not stopped by a keystroke)."""
        encode(self.engine, self.plan_look(with_repo(prepared, active)), cancel)
        return not cancel.cancelled

    def warm_spot(self, prepared: Prepared, active: RepoContext | None,
                  candidate: Callable[[], RepoContext | None],
                  cancel: CancelToken) -> Switch | None:
        """Idle time at a spot, with the file's `active` repository block: encode `plan_spot`,
        then bring the block up to date: a `candidate` block that differs is encoded aside (its
        full-context prompt only: an interrupted build resumes where it stopped), and becomes
        active (the Switch returned) once a keystroke with it costs no more than with the
        old."""
        usual = with_repo(prepared, active)
        encode(self.engine, self.plan_spot(usual), cancel)
        if cancel.cancelled:
            return None
        new = candidate()
        if new is active or cancel.cancelled:
            return None
        target = with_repo(prepared, new)
        encode(self.engine, [Encode(target.key, self._build(target.ctx).segments)], cancel)
        old_prompt, new_prompt = self.choose(usual), self.choose(target)
        return self._switch(prepared.key, new, new_prompt.repo_tokens,
                            old_prompt.tokens, new_prompt.tokens)

    def _switch(self, key: str, new: RepoContext | None, tokens: int, old_prompt: list[int],
                new_prompt: list[int]) -> Switch | None:
        """Switch to `new` if a keystroke with its prompt encodes no more than with the old
        one's (give or take a few tokens), or when the engine cannot tell."""
        old_cost, new_cost = self._cost(key, old_prompt), self._cost(key, new_prompt)
        if new_cost is None or old_cost is None or new_cost <= old_cost + FULL_PROMPT_SLACK:
            return Switch(new, tokens if new is not None else 0)
        return None

    def _cost(self, key: str, tokens: list[int]) -> int | None:
        cached = self.engine.cached_prefix(key, tokens)
        return None if cached is None else len(tokens) - cached
