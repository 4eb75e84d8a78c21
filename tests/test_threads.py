"""engine/threads.py: the thread count per decode follows what each count costs."""

from __future__ import annotations

from pathlib import Path

from lsp_complete.engine.threads import ThreadPolicy, candidate_counts


def _run(policy: ThreadPolicy, n_tokens: int, cost_of: dict[int, float], calls: int) -> list[int]:
    """Decodes of `n_tokens` where `cost_of[threads]` is the seconds each takes."""
    used = []
    for _ in range(calls):
        threads = policy.threads_for(n_tokens)
        used.append(threads)
        policy.measured(n_tokens, cost_of[threads])
    return used


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


def test_engine_output_does_not_depend_on_the_thread_policy(tiny_model_path: Path) -> None:
    """The same greedy suggestion with auto and fixed threads, and the engine reports its
    choice in `describe()`."""
    from lsp_complete.engine.base import CancelToken, GenerationRequest
    from lsp_complete.engine.llama import LlamaEngine

    texts = []
    for mode in ("auto", "fixed"):
        engine = LlamaEngine(tiny_model_path, n_ctx=512, n_threads=2, thread_policy=mode, slots=1)
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
