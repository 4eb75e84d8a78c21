"""The prompt-cache policy on the real engine (tiny model): a file asked the moment it opens
starts with a small prompt and climbs to the full one while the user types without a pause,
each keystroke paying at most one firm slice; and a suggestion made with a prompt built that
way equals one made from nothing."""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Iterator
from pathlib import Path

import pytest

from lsp_complete.config import Settings
from lsp_complete.documents import Document
from lsp_complete.engine.base import CancelToken
from lsp_complete.pipeline import Completer, load_completer, prepare

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


class NextKeystrokeAtOnce(CancelToken):
    """Burst typing: the next keystroke arrives the moment idle work starts its firm slice."""

    @contextlib.contextmanager
    def firm(self) -> Iterator[None]:
        with super().firm():
            self.cancel(hard=True)
            yield


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


def test_typing_without_a_pause_climbs_from_the_first_prompt_to_the_full_one(
    completer: Completer, settings: Settings
) -> None:
    doc = Document("file:///climb.py", "python", 1, SOURCE)
    cursor = SOURCE.index(SPOT)
    slice_tokens = completer.cache.climb_slice()
    anchor = None
    used_full: list[bool] = []
    for i, char in enumerate(TYPED[:-1]):
        line, col = doc.position_at(cursor, "utf-16")
        doc.apply_change(char, (line, col, line, col), "utf-16")
        cursor += 1
        prepared = prepare(doc, cursor, anchor, settings)
        anchor = prepared.ctx.anchor
        completer.engine.prefill_rate = 200.0  # long prefills measure the tiny model's speed
        completion = completer.run(prepared, CancelToken())
        used_full.append(completion.full_prompt)
        if i:  # what this keystroke encoded: its typing, and at most one slice before it
            assert completion.result.encoded_tokens <= 8 + slice_tokens, (i, completion)
        completer.engine.prefill_rate = 200.0
        climbed = completer.climb(prepared, NextKeystrokeAtOnce())
        assert climbed <= slice_tokens
    assert not used_full[0]  # asked at open: the small first prompt
    assert used_full[-1]  # ... and the full one before the line is typed
    first_full = used_full.index(True)
    assert all(used_full[first_full:])

    # A suggestion from the prompt built in slices equals one from a fresh engine that
    # encodes the full prompt at once (no smaller one to choose).
    fresh, _, _ = load_completer(settings)
    try:
        expected = fresh.run(dataclasses.replace(prepared, cold_ctx=None), CancelToken())
        assert expected.full_prompt
        assert completion.text == expected.text and completion.raw == expected.raw
    finally:
        fresh.close()


def test_idle_time_climbs_all_the_way_at_once(completer: Completer, settings: Settings) -> None:
    doc = Document("file:///idle.py", "python", 1, SOURCE)
    prepared = prepare(doc, SOURCE.index(SPOT), None, settings)
    assert not completer.run(prepared, CancelToken()).full_prompt
    completer.climb(prepared, CancelToken())  # nothing interrupts it
    completion = completer.run(prepared, CancelToken())
    assert completion.full_prompt and completion.result.encoded_tokens <= 1
