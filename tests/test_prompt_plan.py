"""The prompt-cache policy's choice of a keystroke's prompt (`PromptPlanner.choose`), one case per
rule, against a fake engine whose KV cache is a token list per file (what it holds is set by
each case) and a prompt builder with one token per character: the arithmetic alone, with no
model. tests/test_prompt_cache.py runs the same policy on the real engine."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import pytest

from lsp_complete.config import Settings
from lsp_complete.context import CodeContext
from lsp_complete.context.limits import RepoContext, RepoFile
from lsp_complete.documents import Document
from lsp_complete.engine.base import CancelToken, common_prefix_length
from lsp_complete.pipeline import prepare
from lsp_complete.pipeline.planner import (
    COLD_MAX_TOKENS,
    COLD_MIN_TOKENS,
    FULL_PROMPT_SLACK,
    SMALL_FILE_TOKENS,
    Encode,
    FilePlan,
    IdleStep,
    PromptPlanner,
    Switch,
    after_answer,
    after_cursor_move,
    after_open,
    after_repository_change,
    cold_budget,
    encode,
    wants_line_block,
    with_repo,
)
from lsp_complete.pipeline.prepare import Prepared
from lsp_complete.prompt import Prompt, fit_context
from tests.test_prompt_cache import SOURCE, SPOT

KEY = "file:///w/m.py"


class FakeEngine:
    """Holds one token list per file; says how much of a prompt it has (None: it cannot
    tell, as a remote server's cache)."""

    def __init__(self, prefill_rate: float | None = None, can_tell: bool = True) -> None:
        self.held: dict[str, list[int]] = {}
        self.prefill_rate = prefill_rate
        self.can_tell = can_tell

    def warm(self, key: str, segments: list[list[int]], cancel: object,
             extend_only: bool = False) -> int:
        self.warmed = segments
        self.held[key] = [t for segment in segments for t in segment]
        return len(self.held[key])

    def cached_prefix(self, key: str, tokens: Sequence[int]) -> int | None:
        if not self.can_tell:
            return None
        return common_prefix_length(self.held.get(key, []), list(tokens))


def build(ctx: CodeContext) -> Prompt:
    """One token per character, in segments as the real layout: the repository block, the
    head, then the rest with the typed middle last (typing appends)."""
    rest = ctx.before + "\x01" + ctx.suffix + "\x02" + ctx.middle
    repo = [f.text for f in ctx.repo.files] if ctx.repo is not None else []
    parts = [*repo, ctx.head, rest]
    return Prompt(segments=[[ord(c) for c in part] for part in parts], heal="",
                  repo_segments=len(repo), repo_tokens=sum(map(len, repo)))


def policy(engine: FakeEngine) -> PromptPlanner:
    return PromptPlanner(engine, build, len)  # type: ignore[arg-type]


def at_spot(source: str = SOURCE, spot: str = SPOT) -> Prepared:
    doc = Document(KEY, "python", 1, source)
    return prepare(doc, source.index(spot) + 4, None, Settings(max_prompt_tokens=4000))


def prompts(cache: PromptPlanner, prepared: Prepared) -> dict[str, Prompt]:
    """The three candidates: the full prompt, the cold window, and its cut."""
    assert prepared.cold_ctx is not None
    return {
        "full": build(prepared.ctx),
        "window": cache.window_prompt(prepared),
        "small": build(fit_context(prepared.cold_ctx, cache.cold_budget_for(KEY), len)),
    }


def kind(chosen: Prompt, candidates: dict[str, Prompt]) -> str:
    return next(name for name, p in candidates.items() if p.tokens == chosen.tokens)


# What the file's cache holds -> the prompt a keystroke gets, for a file several times the
# cold window (a slow engine: the cold budget is its least).
CASES = [
    # Nothing held: the cut window, the cheapest by far.
    ("nothing", lambda c: [], "small"),
    # The full prompt held but for a few tokens: it costs a little more, and has most.
    ("full but the slack", lambda c: c["full"].tokens[:-FULL_PROMPT_SLACK], "full"),
    # The window missing as many tokens as the cut has: no dearer than the cut from nothing.
    ("the window but the cut's cost", lambda c: c["window"].tokens[: -len(c["small"])],
     "window"),
    # Less of it held: more than half again the cut's cost, so the cut.
    ("the window but twice the cut's cost",
     lambda c: c["window"].tokens[: -2 * len(c["small"]) - FULL_PROMPT_SLACK], "small"),
    ("the window", lambda c: c["window"].tokens, "window"),
    ("the cut", lambda c: c["small"].tokens, "small"),
    # The full prompt missing more than the slack, but no more than the cut costs.
    ("full but the cut's cost", lambda c: c["full"].tokens[: -len(c["small"])], "full"),
]


@pytest.mark.parametrize(("held", "expected"), [(h, e) for _, h, e in CASES],
                         ids=[name for name, _, _ in CASES])
def test_a_keystroke_gets_the_most_context_within_half_again_the_cheapest(held, expected):
    engine = FakeEngine(prefill_rate=1.0)  # cold budget: COLD_MIN_TOKENS
    cache, prepared = policy(engine), at_spot()
    candidates = prompts(cache, prepared)
    assert len(candidates["full"]) > 4 * len(candidates["window"])  # a big file
    engine.held[KEY] = held(candidates)
    assert kind(cache.choose(prepared), candidates) == expected


def test_the_full_prompt_when_the_engine_cannot_tell_what_it_holds() -> None:
    cache, prepared = policy(FakeEngine(can_tell=False)), at_spot()
    assert cache.choose(prepared).tokens == build(prepared.ctx).tokens


def test_the_full_prompt_without_smaller_windows() -> None:
    cache, prepared = policy(FakeEngine()), at_spot()
    whole = dataclasses.replace(prepared, cold_ctx=None)
    assert cache.choose(whole).tokens == build(prepared.ctx).tokens


def test_a_small_file_gets_its_full_prompt_even_when_nothing_is_held() -> None:
    source = "import os\n\n\ndef main(path):\n    return os.path.exists(path)\n"
    cache, prepared = policy(FakeEngine(prefill_rate=1.0)), at_spot(source, "    return")
    full = build(prepared.ctx)
    assert len(full) <= SMALL_FILE_TOKENS
    assert cache.choose(prepared).tokens == full.tokens


def test_a_files_cold_budget_is_fixed_once_chosen() -> None:
    engine = FakeEngine(prefill_rate=1.0)
    cache = policy(engine)
    assert cache.cold_budget_for(KEY) == COLD_MIN_TOKENS
    engine.prefill_rate = 10_000.0  # measured faster later: the file's cut stays the same
    assert cache.cold_budget_for(KEY) == COLD_MIN_TOKENS
    assert cache.cold_budget_for("file:///w/other.py") == COLD_MAX_TOKENS


@pytest.mark.parametrize(("rate", "budget"), [
    (None, COLD_MAX_TOKENS), (1.0, COLD_MIN_TOKENS), (400.0, 200), (1e6, COLD_MAX_TOKENS)])
def test_the_cold_budget_is_what_prefills_in_half_a_second_within_bounds(rate, budget) -> None:
    assert cold_budget(rate) == budget


def test_a_repository_block_goes_into_the_full_context_only() -> None:
    prepared = at_spot()
    block = RepoContext("w", "m.py", (RepoFile("b.py", "x = 1\n", "definitions"),))
    given = with_repo(prepared, block)
    assert given.ctx.repo is block
    assert given.cold_ctx is not None and given.cold_ctx.repo is None


def test_a_cold_block_goes_into_the_small_windows_too() -> None:
    """What the cursor's line names, built for a file asked before it has a block, is in its
    small first prompt; the next block (idle work's) leaves them again."""
    prepared = at_spot()
    line = RepoContext("w", "m.py", (RepoFile("b.py", "def f(x): ...\n", "line"),), cold=True)
    given = with_repo(prepared, line)
    assert given.ctx.repo is line and given.cold_ctx is not None and given.cold_ctx.repo is line
    whole = RepoContext("w", "m.py", (RepoFile("b.py", "x = 1\n", "definitions"),))
    after = with_repo(given, whole)
    assert after.ctx.repo is whole and after.cold_ctx is not None and after.cold_ctx.repo is None


def test_a_line_block_in_every_prompt_buys_no_more_of_the_file() -> None:
    """A file asked at open with a line block: the block is in each option, so the slack
    for more context is half again the cut's own context, not half again the block too."""
    engine = FakeEngine(prefill_rate=1.0)
    cache = policy(engine)
    line = RepoContext("w", "m.py", (RepoFile("b.py", "def f(x): ...\n" * 60, "line"),),
                       cold=True)
    prepared = with_repo(at_spot(), line)
    candidates = prompts(cache, prepared)
    block = candidates["small"].repo_tokens
    window_more = len(candidates["window"]) - len(candidates["small"])
    # With the block counted, the window would be within half again the cut's cost.
    assert 0 < window_more <= len(candidates["small"]) // 2
    assert window_more > (len(candidates["small"]) - block) // 2
    assert kind(cache.choose(prepared), candidates) == "small"


@pytest.mark.parametrize(("answers", "active", "wanted"), [
    (0, None, True),  # asked at open, or after a pause with no keystroke
    (0, "whole", False),  # it has a block already
    (0, "line", True),  # only the block of a line rested on before: this line's may differ
    (1, None, False),  # answered once: idle work brings the whole block, and a block that
    # appeared while the user types would re-encode the whole prompt
    (1, "line", False),
])
def test_a_line_block_only_before_the_files_first_answer(answers, active, wanted) -> None:
    file = FilePlan()
    for _ in range(answers):
        after_answer(file, False)
    files = (RepoFile("b.py", "x = 1\n", "definitions"),)
    blocks = {None: None, "whole": RepoContext("w", "m.py", files),
              "line": RepoContext("w", "m.py", files, cold=True)}
    assert wants_line_block(file, blocks[active]) is wanted


# ---------------------------------------------------------------- what follows each event


def test_a_newly_opened_file_encodes_nothing_and_restores_its_saved_cache_at_once() -> None:
    assert after_open() == [IdleStep("restore")]


# Answers in a row (from the full prompt or not) -> the idle work after the last one.
ANSWERS = [
    # The full prompt: nothing to climb to; re-anchored once the cursor rests.
    ("full", [True], [IdleStep("spot", when_resting=True)]),
    # The first small answer: typing-ahead serves it on while the user types what it shows.
    ("first small", [False], [IdleStep("spot", when_resting=True)]),
    # Asked again on a small prompt: climb at once, before other idle work (and answer the
    # spot again from what it built).
    ("second small", [False, False],
     [IdleStep("climb", first=True), IdleStep("spot", when_resting=True)]),
    ("small, full, small", [False, True, False],
     [IdleStep("climb", first=True), IdleStep("spot", when_resting=True)]),
    ("small twice, then full", [False, False, True], [IdleStep("spot", when_resting=True)]),
]


@pytest.mark.parametrize(("answers", "expected"), [(a, e) for _, a, e in ANSWERS],
                         ids=[name for name, _, _ in ANSWERS])
def test_a_file_climbs_once_the_model_is_asked_again_on_a_small_prompt(answers,
                                                                       expected) -> None:
    file = FilePlan()
    steps: list[IdleStep] = []
    for full in answers:
        steps = after_answer(file, full)
    assert steps == expected


@pytest.mark.parametrize(("anchored_here", "expected"), [
    (True, []),  # typing on the line the prompt is anchored at: nothing new to prepare
    # a new spot: what its first keystroke takes, at once (no more: the cursor rests as often
    # while a person reads)
    (False, [IdleStep("look")]),
])
def test_a_cursor_move_prepares_the_new_spot(anchored_here, expected) -> None:
    assert after_cursor_move(anchored_here) == expected


@pytest.mark.parametrize(("has_block", "expected"), [
    (True, [IdleStep("spot")]),  # at the file's last spot
    (False, []),  # nothing to bring up to date: opened only to be read, or never answered
])
def test_a_change_of_the_workspace_brings_a_repository_block_up_to_date(has_block,
                                                                         expected) -> None:
    assert after_repository_change(has_block) == expected


# ---------------------------------------------------------------- what idle work encodes


def test_a_climb_builds_the_window_and_no_part_of_it_is_firm() -> None:
    """No keystroke waits for a climb: its answer does not need it."""
    engine = FakeEngine(prefill_rate=100.0)
    cache, prepared = policy(engine), at_spot()
    candidates = prompts(cache, prepared)
    engine.held[KEY] = candidates["small"].tokens  # a keystroke answered from the cut
    assert cache.plan_climb(prepared) == [Encode(KEY, candidates["window"].segments)]


@pytest.mark.parametrize("held", ["window", "full"])
def test_nothing_to_climb_to_once_the_window_or_the_full_prompt_is_in_use(held) -> None:
    engine = FakeEngine(prefill_rate=1.0)
    cache, prepared = policy(engine), at_spot()
    engine.held[KEY] = prompts(cache, prepared)[held].tokens
    assert cache.plan_climb(prepared) == []


def test_a_remote_cache_never_climbs() -> None:
    cache, prepared = policy(FakeEngine(can_tell=False)), at_spot()
    assert cache.plan_climb(prepared) == []


def test_idle_time_at_a_spot_builds_the_window_then_the_full_prompt() -> None:
    """A cold file: no keystroke waits, so the window rather than its cut, then the full
    prompt (aside, used once complete)."""
    engine = FakeEngine(prefill_rate=1.0)
    cache, prepared = policy(engine), at_spot()
    candidates = prompts(cache, prepared)
    assert cache.plan_spot(prepared) == [Encode(KEY, candidates["window"].segments),
                                         Encode(KEY, candidates["full"].segments)]


def test_idle_time_at_a_spot_whose_full_prompt_is_held_encodes_it_alone() -> None:
    engine = FakeEngine(prefill_rate=1.0)
    cache, prepared = policy(engine), at_spot()
    full = prompts(cache, prepared)["full"]
    engine.held[KEY] = full.tokens[:-5]  # typed a little since
    assert cache.plan_spot(prepared) == [Encode(KEY, full.segments)]


def test_a_resting_cursor_encodes_the_window_alone() -> None:
    """The full prompt waits for an answer at the spot (plan_spot after it)."""
    engine = FakeEngine(prefill_rate=1.0)
    cache, prepared = policy(engine), at_spot()
    assert cache.plan_look(prepared) == [Encode(KEY, prompts(cache, prepared)["window"].segments)]


def test_a_resting_cursor_whose_full_prompt_is_held_encodes_it() -> None:
    engine = FakeEngine(prefill_rate=1.0)
    cache, prepared = policy(engine), at_spot()
    full = prompts(cache, prepared)["full"]
    engine.held[KEY] = full.tokens[:-5]
    assert cache.plan_look(prepared) == [Encode(KEY, full.segments)]


def test_a_plan_runs_in_order_and_stops_at_a_keystroke() -> None:
    engine = FakeEngine()
    calls: list[tuple[int, bool]] = []
    cancel = CancelToken()

    def warm(key, segments, token, extend_only=False):
        calls.append((len(segments[0]), extend_only))
        if len(calls) == 2:
            cancel.cancel(hard=True)  # the next keystroke arrives during the second step
        return 1

    engine.warm = warm  # type: ignore[method-assign]
    plan = [Encode(KEY, [[1] * 5], extend_only=True), Encode(KEY, [[1] * 3]),
            Encode(KEY, [[1] * 4])]
    assert encode(engine, plan, cancel) == 2  # type: ignore[arg-type]
    assert calls == [(5, True), (3, False)]  # in order; the third never starts
    assert encode(engine, plan, cancel) == 0  # type: ignore[arg-type]
    assert len(calls) == 2  # a plan whose keystroke came already does nothing


def test_a_new_repository_block_becomes_active_when_it_costs_no_more() -> None:
    engine = FakeEngine(prefill_rate=1.0)
    cache, prepared = policy(engine), at_spot()
    block = RepoContext("w", "m.py", (RepoFile("b.py", "x = 1\n", "definitions"),))
    switch = cache.warm_spot(prepared, None, lambda: block, CancelToken())
    # The fake engine holds one prompt per file: the new block's, encoded last.
    assert switch == Switch(block, len("x = 1\n"))


def test_an_unchanged_repository_block_is_not_switched() -> None:
    engine = FakeEngine(prefill_rate=1.0)
    cache, prepared = policy(engine), at_spot()
    assert cache.warm_spot(prepared, None, lambda: None, CancelToken()) is None
