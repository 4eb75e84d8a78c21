"""engine/threads.py: the thread count per decode follows what each count costs."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from lsp_complete.engine.threads import ThreadPolicy, candidate_counts


def _run(policy: ThreadPolicy, n_tokens: int, cost_of: dict[int, float], calls: int,
         cpu_share: dict[int, float] | None = None) -> list[int]:
    """Decodes of `n_tokens` where `cost_of[threads]` is the seconds each takes, and
    `cpu_share[threads]` the process's CPU seconds per wall second meanwhile (None: unknown)."""
    used = []
    for _ in range(calls):
        threads = policy.threads_for(n_tokens)
        used.append(threads)
        seconds = cost_of[threads]
        cpu = None if cpu_share is None else cpu_share[threads] * seconds
        policy.measured(n_tokens, seconds, cpu)
    return used


QUIET = {2: 0.030, 1: 0.050}
BUSY = {2: 0.074, 1: 0.042}
# CPU seconds per wall second of this process (measured on 0.5B: docs/bench/2026-12-06h-threads)
QUIET_SHARE = {2: 1.95, 1: 1.0}
BUSY_SHARE = {2: 1.3, 1: 1.0}


def test_candidates_never_exceed_the_configured_count() -> None:
    assert candidate_counts(1) == (1,)
    assert candidate_counts(2) == (2, 1)
    assert candidate_counts(8) == (8, 7, 4)


def test_quiet_machine_keeps_every_thread() -> None:
    policy = ThreadPolicy(2)
    used = _run(policy, 1, {2: 0.030, 1: 0.050}, 200)
    assert used[:2] == [2, 1]  # each count is measured once first
    assert used[2:].count(2) > 0.9 * len(used[2:])
    assert policy.describe()["step"]["threads"] == 2


def test_a_busy_core_moves_decoding_to_fewer_threads_and_back() -> None:
    policy = ThreadPolicy(2)
    _run(policy, 1, {2: 0.030, 1: 0.050}, 600)  # the tries have backed off the most
    busy = _run(policy, 1, {2: 0.074, 1: 0.042}, 300)  # another process takes a core
    assert busy[-100:].count(1) > 95  # seen within the longest wait between tries (128)
    quiet = _run(policy, 1, {2: 0.030, 1: 0.050}, 300)
    assert quiet[-100:].count(2) > 95


def test_a_steady_machine_pays_little_for_the_tries() -> None:
    policy = ThreadPolicy(2)
    used = _run(policy, 1, {2: 0.030, 1: 0.050}, 2000)
    assert used.count(1) < 0.015 * len(used)


def test_a_quiet_machine_never_tries_fewer_threads_again() -> None:
    """Every thread kept its core (the CPU time says so): fewer cannot be cheaper, and each
    try is a slower decode."""
    policy = ThreadPolicy(2)
    assert _run(policy, 64, QUIET, 2000, QUIET_SHARE) == [2] * 2000


def test_lost_cpu_time_brings_a_try_at_once() -> None:
    policy = ThreadPolicy(2)
    _run(policy, 1, QUIET, 2000, QUIET_SHARE)
    assert _run(policy, 1, BUSY, 2, BUSY_SHARE) == [2, 1]


def test_load_seen_in_cpu_time_moves_decoding_to_fewer_threads_and_back() -> None:
    policy = ThreadPolicy(2)
    _run(policy, 1, QUIET, 600, QUIET_SHARE)
    busy = _run(policy, 1, BUSY, 300, BUSY_SHARE)
    assert busy[-100:].count(1) > 95
    quiet = _run(policy, 1, QUIET, 300, QUIET_SHARE)  # one thread cannot see the load go...
    assert quiet[-100:].count(2) > 95  # ...so more threads are still tried on schedule


def test_a_busy_machine_keeps_trying_while_it_is_busy() -> None:
    """Contention that one try did not settle (every count about as dear) is tried again."""
    policy = ThreadPolicy(2)
    used = _run(policy, 1, {2: 0.050, 1: 0.051}, 1000, BUSY_SHARE)
    assert used[2:].count(1) > 0


def test_kinds_of_decode_are_measured_apart() -> None:
    """Prefill may prefer every thread while one-token steps prefer fewer."""
    policy = ThreadPolicy(2)
    for _ in range(60):
        _run(policy, 1, {2: 0.074, 1: 0.042}, 1)
        _run(policy, 64, {2: 64 * 0.007, 1: 64 * 0.012}, 1)
    assert policy.describe()["step"]["threads"] == 1
    assert policy.describe()["large"]["threads"] == 2


def test_fixed_policy_always_uses_the_configured_count() -> None:
    policy = ThreadPolicy(4, mode="fixed")
    assert set(_run(policy, 1, {4: 0.09}, 50)) == {4}


def _without_cpu_time(measured: Callable[[int, float, float | None], None]
                      ) -> Callable[..., None]:
    return lambda n_tokens, seconds, cpu_seconds=None: measured(n_tokens, seconds, 0.0)


def test_engine_output_does_not_depend_on_the_thread_policy(
        tiny_model_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The same greedy suggestion with auto and fixed threads, and the engine reports its
    choice in `describe()`."""
    from lsp_complete.engine.base import CancelToken, GenerationRequest
    from lsp_complete.engine.llama import LlamaEngine

    texts = []
    for mode in ("auto", "fixed"):
        engine = LlamaEngine(tiny_model_path, n_ctx=512, n_threads=2, thread_policy=mode, slots=1)
        # Every decode reported as one that lost its cores, so that auto tries fewer threads.
        monkeypatch.setattr(engine.threads, "measured",
                            _without_cpu_time(engine.threads.measured))
        try:
            for _ in range(3):
                result = engine.complete(
                    GenerationRequest(key="f", segments=[engine.tokenize("def f(x):\n    return")],
                                      max_tokens=16, single_line=False), CancelToken())
            texts.append(result.text)
            described = engine.describe()["threadPolicy"]
            assert described["mode"] == mode
            tried = {count for kind in ("step", "small", "large")
                     for count in described[kind]["msPerToken"]}
            assert tried == ({"2", "1"} if mode == "auto" else {"2"})  # both counts really ran
        finally:
            engine.close()
    assert texts[0] == texts[1]
