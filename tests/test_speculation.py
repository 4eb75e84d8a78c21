"""Speculative decoding: drafts change how many decodes a suggestion takes, never what it is.

The drafting side (lookup, policy) is tested as plain Python; the verifying side runs the real
llama.cpp on the tiny model, against an engine that decodes one token at a time.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import llama_cpp
import numpy as np
import pytest
from test_engine import BEFORE, SUFFIX_TEXT, TYPED, cancel_after_text, fim_request, make_engine

from lsp_complete.config import Settings, parse_settings
from lsp_complete.documents import Document
from lsp_complete.engine.base import CancelToken, GenerationRequest
from lsp_complete.engine.llama import LlamaEngine
from lsp_complete.engine.speculation import (
    Acceptance,
    DecodeCosts,
    Draft,
    DraftPolicy,
    PromptLookup,
    TokenHistory,
    expected_tokens,
    longest_match,
    resolve_mode,
)
from lsp_complete.models import load_registry
from lsp_complete.pipeline import Completer, prepare


def history(prompt: list[int], generated: list[int] = ()) -> TokenHistory:
    h = TokenHistory(prompt, 8)
    for t in generated:
        h.append(t)
    return h


# ------------------------------------------------------------------ drafting (no model)


def test_longest_match_wants_a_token_after_the_match() -> None:
    corpus = np.array([1, 2, 3, 9, 5, 2, 3, 7, 1, 2, 3], dtype=np.int32)
    tail = np.array([0, 1, 2, 3], dtype=np.int32)
    assert longest_match(corpus, tail, 8) == (3, 3)  # 1 2 3 -> 9; never the final one
    assert longest_match(corpus, tail, 2) == (2, 7)  # 2 3 -> 7, the latest
    assert longest_match(corpus, np.array([3], dtype=np.int32), 8) == (1, 7)
    assert longest_match(corpus, np.array([4], dtype=np.int32), 8) == (0, 0)
    assert longest_match(corpus[:3], np.array([3], dtype=np.int32), 8) == (0, 0)
    # Matches reaching the corpus start stop there.
    assert longest_match(np.array([2, 3, 4], dtype=np.int32), tail, 8) == (2, 2)


def test_lookup_prefers_the_longest_ngram_and_the_previous_suggestion() -> None:
    prompt = [5, 1, 2, 3, 40, 41, 8, 2, 3, 50, 51, 1, 2, 3]
    # "1 2 3" occurred once before, followed by 40 41; "2 3" more recently, followed by 50.
    draft = PromptLookup().propose(history(prompt), 4)
    assert draft == Draft([40, 41, 8, 2], "lookup3")
    assert PromptLookup().propose(history(prompt), 1) == Draft([40], "lookup3")
    previous = np.array([9, 1, 2, 3, 60, 61, 62], dtype=np.int32)
    assert PromptLookup(previous=previous).propose(history(prompt), 8) == Draft(
        [60, 61, 62], "previous3"
    )
    # A longer match in the history beats a shorter one in the previous suggestion.
    assert PromptLookup(previous=np.array([3, 70, 71], dtype=np.int32)).propose(
        history(prompt), 2
    ) == Draft([40, 41], "lookup3")
    context = np.array([0, 2, 3, 99, 98], dtype=np.int32)
    assert PromptLookup(extra=[context]).propose(history([7, 7, 2, 3]), 5) == Draft(
        [99, 98], "context2"
    )
    assert PromptLookup().propose(history([1, 2, 3]), 4) is None


def test_lookup_reads_the_generated_tokens_too() -> None:
    h = history([10, 11, 12, 13], [20, 21, 22, 23, 24, 20, 21, 22, 23])
    assert PromptLookup().propose(h, 3) == Draft([24, 20, 21], "lookup4")
    assert h.generated == [20, 21, 22, 23, 24, 20, 21, 22, 23]


def test_the_policy_drafts_long_when_drafts_land_and_not_at_all_when_they_miss() -> None:
    policy = DraftPolicy()
    policy.costs.min_samples = 10**9  # the prior costs only: deterministic
    for _ in range(10):
        policy.record("lookup3", 15, 15)
    assert policy.length("lookup3", 16) == 15
    assert policy.length("lookup3", 5) == 3  # no more than is available, in verify sizes
    for _ in range(15):
        policy.record("lookup3", 3, 0)
    assert policy.length("lookup3", 16) == 0  # a plain step: no cost
    # Stopping inside a draft judges nothing after the last accepted token.
    before = policy.acceptance("lookup3").rate
    policy.record("lookup3", 7, 0, judged_all=False)
    assert policy.acceptance("lookup3").rate == before
    # Kinds start from their prior: a single matching token is not worth a draft.
    assert policy.length("lookup1", 16) == 0
    assert policy.length("previous6", 16) > 0


def test_a_kind_left_alone_drifts_back_to_its_prior() -> None:
    policy = DraftPolicy()
    policy.costs.min_samples = 10**9
    for _ in range(20):
        policy.record("lookup6", 3, 0)
    assert policy.length("lookup6", 16) == 0
    for _ in range(200):
        policy.length("lookup6", 16)
    assert policy.length("lookup6", 16) > 0  # tried again after a while


def test_measured_costs_replace_the_prior_and_rescale_it() -> None:
    costs = DecodeCosts()
    assert costs.relative(8) == pytest.approx(3.18)
    for seconds in (0.020, 0.021, 0.020, 0.090):  # contention only ever adds time
        costs.observe(1, seconds)
    for seconds in (0.100, 0.101, 0.300):
        costs.observe(8, seconds)
    assert costs.relative(8) == pytest.approx(5.0)
    # Sizes not measured yet: the prior, scaled as the nearest measured size is (5.0 / 3.18).
    assert costs.relative(16) == pytest.approx(4.52 * 5.0 / 3.18)
    policy = DraftPolicy(costs=costs)
    for _ in range(10):
        policy.record("lookup3", 7, 7)
    assert policy.length("lookup3", 7) == 7  # 8 tokens for 5 steps; 4 for 1.96 * 5 / 3.18
    for seconds in (0.040, 0.041, 0.040):
        costs.observe(4, seconds)
    assert policy.length("lookup3", 7) == 3  # 4 tokens for 2 steps beats 8 for 5


def test_a_declined_draft_is_probed_once_in_a_while() -> None:
    policy = DraftPolicy(probe_every=10)
    for seconds in (0.02, 0.02, 0.02):
        policy.costs.observe(1, seconds)
        policy.costs.observe(2, 3 * seconds)  # a 2-token decode costs 3 steps here
    policy.stats["lookup3"] = Acceptance.with_prior(0.75, weight=1e9)  # fixed
    lengths = [policy.length("lookup3", 1) for _ in range(30)]
    assert lengths.count(1) == 0  # 1.75 tokens for 3 steps: hopeless, never probed
    policy.stats["lookup3"] = Acceptance.with_prior(0.9, weight=1e9)
    policy.costs.samples[2].clear()
    for seconds in (0.02, 0.02, 0.02):
        policy.costs.observe(2, 2.2 * seconds)  # 1.9 tokens for 2.2 steps: close
    lengths = [policy.length("lookup3", 1) for _ in range(30)]
    # Once every ten declines (the first one overdue already).
    assert [i for i, n in enumerate(lengths) if n] == [0, 10, 20]


def test_expected_tokens() -> None:
    assert expected_tokens(0.0, 7) == 1.0
    assert expected_tokens(1.0, 7) == 8.0
    assert expected_tokens(0.5, 1) == pytest.approx(1.5)


def test_modes_and_the_setting() -> None:
    assert resolve_mode("auto") == "lookup"
    assert resolve_mode("draft") == "lookup"  # no draft model loaded
    assert resolve_mode("draft", has_draft_model=True) == "draft"
    assert resolve_mode("off") == "off"
    assert Settings().speculation == "auto"
    settings, problems = parse_settings({"speculation": "off"})
    assert problems == [] and settings.speculation == "off"
    # It applies from the next request: no new engine.
    assert settings.engine_settings == Settings().engine_settings
    _, problems = parse_settings({"speculation": "fast"})
    assert len(problems) == 1 and "speculation" in problems[0]


# ------------------------------------------------------------------ verifying (tiny model)


@pytest.fixture(scope="module")
def plain(tiny_model_path: Path):
    eng = make_engine(tiny_model_path, slots=4)
    yield eng
    eng.close()


@pytest.fixture()
def spec(tiny_model_path: Path):
    """An engine that drafts whenever it has a draft (any gain will do, prior costs)."""
    eng = make_engine(tiny_model_path, slots=4)
    eng.draft_policy = DraftPolicy(margin=0.0)
    eng.draft_policy.costs.min_samples = 10**9
    yield eng
    eng.close()


def both(plain: LlamaEngine, spec: LlamaEngine, request: GenerationRequest):
    off = plain.complete(dataclasses.replace(request, speculation="off"), CancelToken())
    on = spec.complete(dataclasses.replace(request, speculation="lookup"), CancelToken())
    return off, on


def assert_same(off, on, what: object = "") -> None:
    assert (on.text, on.generated_tokens, on.stop_reason) == (
        off.text, off.generated_tokens, off.stop_reason,
    ), what


def assert_kv_in_sync(engine: LlamaEngine) -> None:
    for seq in engine._table.files.values():
        held = llama_cpp.llama_memory_seq_pos_max(engine.decoder.memory, seq.seq_id) + 1
        assert held == len(seq.tokens), (seq.key, held, len(seq.tokens))


# Repetitive text, where the tiny model's copy heads make drafts land.
REPEAT = "".join(f"    total += values[{i}] * weights[{i}]\n" for i in range(12))


def test_typing_gives_the_same_suggestions_with_drafts(plain, spec) -> None:
    for n in range(1, len(TYPED) + 1):
        for single_line in (True, False):
            request = fim_request(plain, "file:///t.py", BEFORE + REPEAT, TYPED[:n], SUFFIX_TEXT,
                                  max_tokens=40, single_line=single_line)
            assert_same(*both(plain, spec, request), (n, single_line))
            assert_kv_in_sync(spec)
    counters = spec.counters
    assert counters.drafts_verified > 0 and counters.draft_accepted > 0, counters
    assert counters.generation_decodes < counters.tokens_generated  # fewer decodes than tokens
    assert plain.counters.drafts_verified == 0


@pytest.mark.parametrize("middle", ["    total += values[12] * w", "    total", "", "    "])
def test_many_prompts_multi_line_and_max_tokens_cut_at_the_same_token(plain, spec,
                                                                      middle) -> None:
    key = f"file:///m{len(middle)}.py"
    for max_tokens in (1, 2, 3, 5, 8, 13, 21, 34, 64):
        request = fim_request(plain, key, BEFORE + REPEAT, middle, SUFFIX_TEXT,
                              max_tokens=max_tokens, single_line=False)
        off, on = both(plain, spec, request)
        assert_same(off, on, max_tokens)
        assert_kv_in_sync(spec)
    assert spec.counters.draft_accepted > 0


def test_stop_strings_abandon_and_the_time_budget_stop_at_the_same_token(plain, spec) -> None:
    request = fim_request(plain, "file:///s.py", BEFORE + REPEAT, "    total", SUFFIX_TEXT,
                          max_tokens=48, single_line=False)
    off, _ = both(plain, spec, request)
    produced = off.text[len(request.heal):]
    assert len(produced) > 20, off
    for cut in (3, 9, 17):
        stop = produced[cut : cut + 3]
        assert_same(*both(plain, spec, dataclasses.replace(request, stop=(stop,))), stop)
    for calls in (1, 4, 11):
        seen = {"plain": 0, "spec": 0}

        def abandon_after(who: str, calls: int = calls, seen: dict = seen):
            def abandon(_produced: str) -> bool:
                seen[who] += 1
                return seen[who] == calls
            return abandon

        off = plain.complete(dataclasses.replace(request, speculation="off",
                                                 abandon=abandon_after("plain")), CancelToken())
        on = spec.complete(dataclasses.replace(request, speculation="lookup",
                                               abandon=abandon_after("spec")), CancelToken())
        assert_same(off, on, calls)
        assert on.stop_reason == "abandoned"
    # Past the deadline: both stop at the first line end.
    off, on = both(plain, spec, dataclasses.replace(request, deadline=0.0))
    assert_same(off, on)
    assert off.stop_reason == "budget"
    assert_kv_in_sync(spec)


def test_token_healing_holds_inside_drafts(plain, spec) -> None:
    for word in ("to", "tot", "total +", "values[", "weights[3"):
        request = fim_request(plain, "file:///h.py", BEFORE + REPEAT, "    total += " + word,
                              SUFFIX_TEXT, max_tokens=24, single_line=False)
        assert request.heal
        off, on = both(plain, spec, request)
        assert_same(off, on, word)
        assert on.text.startswith(request.heal)


def test_cancelling_mid_generation_stops_at_the_same_token_with_no_work_after(
    plain, spec
) -> None:
    request = fim_request(plain, "file:///c.py", BEFORE + REPEAT, "    total", SUFFIX_TEXT,
                          max_tokens=48, single_line=False)
    for after in (1, 3, 7, 15):
        results = []
        for engine, mode in ((plain, "off"), (spec, "lookup")):
            cancel, on_text = cancel_after_text(after)
            before = engine.counters.generation_decodes
            result = engine.complete(
                dataclasses.replace(request, speculation=mode, on_text=on_text), cancel
            )
            assert result.stop_reason == "cancelled"
            assert cancel.work_after_cancel == 0
            assert engine.counters.generation_decodes - before <= after
            results.append(result)
        assert_same(*results, after)
        assert_kv_in_sync(spec)


def test_a_re_request_drafts_the_previous_suggestion(plain, spec) -> None:
    spec.near_tie = 0.0  # the tiny model has near-ties: none may cut the drafts short here
    request = fim_request(plain, "file:///again.py", BEFORE, TYPED[:20], SUFFIX_TEXT,
                          max_tokens=32, single_line=False)
    first_off, first = both(plain, spec, request)
    assert_same(first_off, first)
    accepted = spec.counters.draft_accepted
    off, again = both(plain, spec, request)
    assert_same(off, again)
    # The suggestion was drafted from the previous one and accepted: each verify step yields
    # its accepted draft and one token of the model's own.
    assert again.accepted_tokens == spec.counters.draft_accepted - accepted
    assert again.accepted_tokens == again.draft_tokens
    assert again.accepted_tokens + again.verify_steps + 2 >= again.generated_tokens
    assert again.verify_steps <= 5


class Oracle:
    """Drafts the plain output's tokens, wrong from the `wrong_at`-th generated token on."""

    def __init__(self, tokens: list[int], wrong_at: int) -> None:
        self.tokens, self.wrong_at = tokens, wrong_at

    def propose(self, history: TokenHistory, limit: int) -> Draft | None:
        done = len(history.generated)
        draft = [t if done + i < self.wrong_at else (t + 1) % 200
                 for i, t in enumerate(self.tokens[done : done + limit])]
        return Draft(draft, "oracle")


@pytest.mark.parametrize("wrong_at", [1, 2, 5, 9, 100])
def test_accepts_exactly_the_agreeing_prefix(plain, spec, wrong_at: int) -> None:
    """A draft model hook drafting known tokens: what is accepted, and where it stops."""
    request = fim_request(plain, "file:///oracle.py", BEFORE + REPEAT, "    total", SUFFIX_TEXT,
                          max_tokens=24, single_line=False)
    off = plain.complete(dataclasses.replace(request, speculation="off"), CancelToken())
    # The plain engine's cache holds the prompt and every generated token but the last.
    expected = plain.cached_tokens(request.key)[len(request.tokens) :]
    assert len(expected) == off.generated_tokens - 1 >= 20
    oracle = Oracle(expected, wrong_at)
    spec.draft_model = lambda _request: oracle
    spec.near_tie = 0.0  # judge every row from the batch: the exact accept/reject rule
    verified: list[tuple[int, list[int]]] = []  # (tokens generated before, draft) per step
    decode = spec.decoder.decode

    def spy(seq, tokens, logit_rows, cancel, abortable):
        if logit_rows is not True and logit_rows > 1:
            verified.append((len(seq.tokens) - len(request.tokens) + 1, list(tokens[1:])))
        return decode(seq, tokens, logit_rows, cancel, abortable)

    spec.decoder.decode = spy
    on = spec.complete(dataclasses.replace(request, speculation="draft"), CancelToken())
    assert_same(off, on)
    assert_kv_in_sync(spec)
    # Each verify step accepts its draft up to the first wrong token; the next one starts after
    # the model's own token that follows.
    assert verified
    accepted = 0
    for i, (done, draft) in enumerate(verified):
        good = min(len(draft), max(0, wrong_at - done))
        assert draft[:good] == expected[done : done + good]
        if i + 1 < len(verified):
            assert verified[i + 1][0] == done + good + 1, (done, draft, verified[i + 1])
        accepted += good
    assert on.accepted_tokens == accepted
    assert on.verify_steps == len(verified)
    if wrong_at >= 100:
        assert on.accepted_tokens == on.draft_tokens  # every draft right: all accepted
        assert on.verify_steps < on.generated_tokens // 2


def test_near_ties_are_decided_by_a_single_token_decode(plain, spec) -> None:
    spec.near_tie = float("inf")  # every verify row is a near-tie: all re-decided one by one
    request = fim_request(plain, "file:///tie.py", BEFORE + REPEAT, "    total", SUFFIX_TEXT,
                          max_tokens=32, single_line=False)
    assert_same(*both(plain, spec, request))
    assert spec.counters.near_ties > 0
    assert spec.counters.draft_accepted == 0
    assert_kv_in_sync(spec)


def test_the_pipeline_passes_the_setting_and_the_full_prompt_as_draft_context() -> None:
    class Recorder:
        counters = None
        prefill_rate = None
        begins_a_token = None  # one character per token

        def __init__(self) -> None:
            self.requests: list[GenerationRequest] = []

        def tokenize(self, text: str, special: bool = False) -> list[int]:
            return [ord(c) for c in text]

        def detokenize(self, tokens: list[int]) -> str:
            return "".join(chr(t) for t in tokens)

        def cached_prefix(self, key: str, tokens: list[int]) -> int:
            return 0  # a cold file: the smaller prompt is chosen

        def complete(self, request: GenerationRequest, cancel: CancelToken):
            from lsp_complete.engine.base import GenerationResult

            self.requests.append(request)
            return GenerationResult(text=request.heal)

    spec_ = load_registry()["qwen2.5-coder-0.5b"]
    text = "".join(f"def f{i}(x):\n    return x + {i}\n\n" for i in range(300)) + "def g(y):\n    "
    doc = Document("file:///p.py", "python", 1, text)
    settings = Settings(speculation="off")
    recorder = Recorder()
    completer = Completer(recorder, spec_, settings)  # type: ignore[arg-type]
    completer.run(prepare(doc, len(text), None, settings), CancelToken())
    request = recorder.requests[-1]
    assert request.speculation == "off"
    assert request.draft_context and len(request.draft_context[0]) > len(request.tokens)
