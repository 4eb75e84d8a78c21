"""The prompt planner on the real engine (tiny model): a file asked the moment it opens
starts with a small prompt and climbs to the cold window in the time between keys, no
keystroke waiting for it; the spot is answered again from the window; idle time builds the
full prompt; and a suggestion made with a prompt built that way equals one made from
nothing."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path

import pytest

from lsp_complete.config import Settings
from lsp_complete.documents import Document
from lsp_complete.engine.base import CancelToken
from lsp_complete.pipeline import Completer, load_completer, prepare
from lsp_complete.pipeline.planner import WINDOW_MAX_TOKENS
from lsp_complete.prompt import fit_context

# A module long enough that its full prompt is several times the first one.
SOURCE = "".join(
    f"def step_{i}(values, scale):\n"
    f"    total = sum(v * scale for v in values if v > {i})\n"
    f"    return total + {i}\n\n\n"
    for i in range(40)
)
# Typed inside a body (its structure, and so the prompt's head, stays the same meanwhile).
SPOT = "    return total + 20\n"
TYPED = "    scaled = [step_3(values, scale), step_4(values, scale), total * scale]\n"


def next_keystroke_came() -> CancelToken:
    """Idle work that a keystroke needing the worker cancelled before it began."""
    cancel = CancelToken()
    cancel.cancel(hard=True)
    return cancel


@pytest.fixture
def settings(tiny_model_path: Path) -> Settings:
    return Settings(model=str(tiny_model_path), threads=1, context_size=4096, max_tokens=6,
                    multiline="never", max_prompt_tokens=700, persist_cache=False)


@pytest.fixture
def completer(settings: Settings) -> Iterator[Completer]:
    made, _, _ = load_completer(settings)
    made.engine.prefill_rate = 200.0  # as slow as a real model: small first prompt and slices
    yield made
    made.close()


def test_typing_on_climbs_from_the_first_prompt_to_the_window_in_the_time_between_keys(
    completer: Completer, settings: Settings
) -> None:
    """Keys that come at once get nothing from a climb and wait for none of it; keys with
    time between them (typing-ahead answered the ones in between) climb to the window, each
    encoding only what it typed. Idle time then builds the full prompt, and a suggestion from
    the prompt built this way equals one made from nothing."""
    doc = Document("file:///climb.py", "python", 1, SOURCE)
    cursor = SOURCE.index(SPOT)
    anchor = None
    used: list[str] = []  # per keystroke: "cut" or "window"
    for i, char in enumerate(TYPED[:-1]):
        line, col = doc.position_at(cursor, "utf-16")
        doc.apply_change(char, (line, col, line, col), "utf-16")
        cursor += 1
        prepared = prepare(doc, cursor, anchor, settings)
        anchor = prepared.ctx.anchor
        completer.engine.prefill_rate = 200.0  # long prefills measure the tiny model's speed
        completion = completer.run(prepared, CancelToken())
        assert not completion.full_prompt  # the full prompt is idle time's
        window = len(completer.planner.window_prompt(prepared))
        used.append("window" if completion.prompt_tokens == window else "cut")
        if i:  # what this keystroke encoded: its typing, and no more
            assert completion.result.encoded_tokens <= 8, (i, completion)
        completer.engine.prefill_rate = 200.0
        if i < 10:  # the next key at once: the climb encodes nothing
            assert completer.climb(prepared, next_keystroke_came()) == 0
        elif i == 10:  # time before the next one
            assert completer.climb(prepared, CancelToken()) > 0
    assert used[:11] == ["cut"] * 11 and set(used[11:]) == {"window"}, used

    completer.warm_spot(prepared, None, lambda: None, CancelToken())
    completion = completer.run(prepared, CancelToken())
    assert completion.full_prompt and completion.result.encoded_tokens <= 1, completion
    fresh, _, _ = load_completer(settings)
    try:
        expected = fresh.run(dataclasses.replace(prepared, cold_ctx=None), CancelToken())
        assert expected.full_prompt
        assert completion.text == expected.text and completion.raw == expected.raw
    finally:
        fresh.close()

def test_a_first_answer_from_the_cut_is_answered_again_from_the_window(
    completer: Completer, settings: Settings
) -> None:
    """The first answer at a spot the cache does not hold comes from the cut prompt; the
    climb after it answers the spot again from the window, as a fresh engine asked with the
    window at once does; then there is nothing richer to climb to."""
    doc = Document("file:///refine.py", "python", 1, SOURCE)
    prepared = prepare(doc, SOURCE.index(SPOT) + len("    return"), None, settings)
    first = completer.run(prepared, CancelToken())
    window = completer.planner.window_prompt(prepared)
    assert not first.full_prompt and first.prompt_tokens < len(window)

    assert completer.refine(prepared, first, next_keystroke_came()) is None
    better = completer.refine(prepared, first, CancelToken())
    assert better is not None and better.prompt_tokens == len(window)
    assert completer.refine(prepared, better, CancelToken()) is None

    assert prepared.cold_ctx is not None
    window_ctx = fit_context(prepared.cold_ctx, WINDOW_MAX_TOKENS, completer._count_tokens)
    fresh, _, _ = load_completer(settings)
    try:
        expected = fresh.run(dataclasses.replace(prepared, ctx=window_ctx, cold_ctx=None),
                             CancelToken())
        assert expected.prompt_tokens == len(window)
        assert better.text == expected.text and better.raw == expected.raw
    finally:
        fresh.close()


def test_a_small_file_gets_its_full_prompt_at_once(completer: Completer,
                                                   settings: Settings) -> None:
    small = SOURCE[: SOURCE.index("def step_3(")]
    doc = Document("file:///small.py", "python", 1, small)
    prepared = prepare(doc, small.index("    return total + 1"), None, settings)
    completion = completer.run(prepared, CancelToken())
    assert completion.full_prompt
    assert completer.climb(prepared, CancelToken()) == 0  # nothing to climb to


@pytest.mark.parametrize("multiline", ["never", "always"])
def test_a_one_line_suggestion_is_capped_at_the_line_token_limit(
        tiny_model_path: Path, multiline: str) -> None:
    from lsp_complete.pipeline.completer import LINE_MAX_TOKENS

    settings = Settings(model=str(tiny_model_path), threads=1, context_size=4096,
                        max_tokens=64, multiline=multiline, persist_cache=False)
    made, _, _ = load_completer(settings)
    try:
        doc = Document("file:///cap.py", "python", 1, SOURCE)
        generated = []
        for spot in ("    total = sum(", "    return total + 3", "def step_9("):
            completion = made.run(prepare(doc, SOURCE.index(spot) + len(spot) - 1, None,
                                          settings), CancelToken())
            assert completion.request is not None
            expected = LINE_MAX_TOKENS if multiline == "never" else 64
            assert completion.request.max_tokens == expected
            generated.append(completion.result.generated_tokens)
        assert max(generated) <= (LINE_MAX_TOKENS if multiline == "never" else 64)
    finally:
        made.close()
