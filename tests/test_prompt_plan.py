"""The prompt-cache policy's choice of a keystroke's prompt (`PromptCache.choose`), one case per
rule, against a fake engine whose KV cache is a token list per file (what it holds is set by
each case) and a prompt builder with one token per character: the arithmetic alone, with no
model. tests/test_prompt_cache.py runs the same policy on the real engine."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import pytest

from lsp_complete.config import Settings
from lsp_complete.context import CodeContext
from lsp_complete.documents import Document
from lsp_complete.engine.base import common_prefix_length
from lsp_complete.pipeline import prepare
from lsp_complete.pipeline.prepare import Prepared
from lsp_complete.pipeline.prompt_cache import (
    COLD_MAX_TOKENS,
    COLD_MIN_TOKENS,
    FULL_PROMPT_SLACK,
    SMALL_FILE_TOKENS,
    PromptCache,
    cold_budget,
)
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


def policy(engine: FakeEngine) -> PromptCache:
    return PromptCache(engine, build, len)  # type: ignore[arg-type]


def at_spot(source: str = SOURCE, spot: str = SPOT) -> Prepared:
    doc = Document(KEY, "python", 1, source)
    return prepare(doc, source.index(spot) + 4, None, Settings(max_prompt_tokens=4000))


def prompts(cache: PromptCache, prepared: Prepared) -> dict[str, Prompt]:
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
    # Half the window missing costs less than the cut from nothing, plus half again.
    ("the window's first half", lambda c: c["window"].tokens[: len(c["window"]) // 2 + 60],
     "window"),
    # Less of it held: more than half again the cut's cost, so the cut.
    ("under half the window", lambda c: c["window"].tokens[: len(c["window"]) // 2 - 10],
     "small"),
    ("the window", lambda c: c["window"].tokens, "window"),
    ("the cut", lambda c: c["small"].tokens, "small"),
    # The full prompt missing more than the slack, but less than half again the cheapest.
    ("full but 100", lambda c: c["full"].tokens[:-100], "full"),
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


@pytest.mark.parametrize("with_block", [False, True])
def test_a_newly_opened_file_encodes_its_head_after_its_repository_block(with_block) -> None:
    """With a block, the first segment is the block alone: the head came after it and was
    not encoded (`segments[:1]`)."""
    from lsp_complete.context.limits import RepoContext, RepoFile
    from lsp_complete.engine.base import CancelToken

    engine = FakeEngine()
    prepared = at_spot()
    block = RepoContext("w", "m.py", (RepoFile("b.py", "def helper():\n    pass\n",
                                               "definitions"),))
    active = block if with_block else None
    policy(engine).warm_head(KEY, prepared.ctx, active, CancelToken())
    expected = build(dataclasses.replace(prepared.ctx, repo=active))
    assert engine.warmed == expected.segments[: expected.head_segments]
    assert [ord(c) for c in prepared.ctx.head] == engine.warmed[-1]


def test_a_repository_block_goes_into_the_full_context_only() -> None:
    from lsp_complete.context.limits import RepoContext, RepoFile
    from lsp_complete.pipeline.prompt_cache import with_repo

    prepared = at_spot()
    block = RepoContext("w", "m.py", (RepoFile("b.py", "x = 1\n", "definitions"),))
    given = with_repo(prepared, block)
    assert given.ctx.repo is block
    assert given.cold_ctx is not None and given.cold_ctx.repo is None
