"""Newest keystroke wins, against the real server and the real (tiny) model.

The tiny model answers in a few milliseconds, faster than anyone types, so these tests set
LSP_COMPLETE_SIMULATE_DECODE_MS: every llama.cpp decode is preceded by a sleep, as slow as a
0.5B model on a laptop CPU, while the model itself still runs for real.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest
from lsprotocol import types

from lsp_complete.testing.lsp_client import (
    inline,
    inline_params,
    insert,
    open_doc,
    status,
    suggestion_of,
)
from tests.lsp_helpers import start_server

SOURCE = "import os\n\n\ndef walk(root):\n    for name in os.listdir(root):\n        \n"
LINE = 5


@pytest.fixture
async def slow_client(tiny_model_path: Path):
    env = {**os.environ, "LSP_COMPLETE_SIMULATE_DECODE_MS": "15"}
    c = await start_server(tiny_model_path, {"maxTokens": 24, "multiline": "never"}, env=env)
    yield c
    await c.shutdown_session()


async def test_a_burst_of_keystrokes_computes_only_the_newest(slow_client) -> None:
    uri = "file:///work/burst.py"
    open_doc(slow_client, uri, SOURCE)
    await asyncio.sleep(0.3)  # let the warm-up finish so it does not blur the counts
    before = await status(slow_client)
    typed = "print(os.path.join(root, name), sep=', ')"[:50]
    pending = []
    for i, ch in enumerate(typed):
        insert(slow_client, uri, i + 2, LINE, 8 + i, ch)
        pending.append(
            asyncio.ensure_future(  # sent now, not when awaited
                slow_client.protocol.send_request_async(
                    "textDocument/inlineCompletion", inline_params(uri, LINE, 9 + i)
                )
            )
        )
        await asyncio.sleep(0.02)
    answers = await asyncio.wait_for(asyncio.gather(*pending, return_exceptions=True), 60)
    assert not any(isinstance(a, BaseException) for a in answers), answers  # all answered

    after = await status(slow_client)
    records = after["recent"][len(before["recent"]) :]
    assert len(records) == len(typed)
    computed = [r for r in records if r["source"] in ("model", "empty")]
    superseded = [r for r in records if r["source"] == "superseded"]
    # Typing-ahead may answer a keystroke that matches the suggestion on screen; every other
    # keystroke but the last was superseded while computing, and answered promptly.
    assert records[-1]["source"] in ("model", "empty", "typeahead")
    assert len(computed) <= 1 + sum(r["source"] == "typeahead" for r in records)
    assert superseded, records
    assert max(r["latencyMs"] for r in superseded) < 5000
    counters = after["engineCounters"]
    # Work done for a request after it was superseded: at most one batch of prompt tokens
    # (the decode in flight) or one generated token.
    assert counters["max_tokens_after_cancel"] <= 256
    assert counters["calls"] - before["engineCounters"]["calls"] <= len(typed)


async def test_typing_ahead_answers_without_calling_the_model(tiny_model_path: Path) -> None:
    c = await start_server(tiny_model_path, {"maxTokens": 16, "multiline": "never"})
    try:
        uri = "file:///work/ahead.py"
        open_doc(c, uri, SOURCE)
        first, item = suggestion_of(await inline(c, uri, LINE, 8))
        assert first, "the tiny model suggests something here"
        calls = (await status(c))["engineCounters"]["calls"]
        version = 2
        for i, ch in enumerate(first[:5]):
            insert(c, uri, version, LINE, 8 + i, ch)
            version += 1
            text, _ = suggestion_of(await inline(c, uri, LINE, 9 + i))
            if first[i + 1 :].strip():
                # The item replaces the partly typed word; its end is the suggestion's rest.
                assert text.endswith(first[i + 1 :])
        st = await status(c)
        assert st["engineCounters"]["calls"] == calls
        assert st["typeahead"]["hits"] >= 1
        assert st["counters"]["typeahead"] >= 1
    finally:
        await c.shutdown_session()


async def _writing(client, uri: str, msg_id: str) -> asyncio.Future:
    """The request at (LINE, 8), sent now, once the model is part-way through writing it."""
    generated = (await status(client))["engineCounters"]["tokens_generated"]
    pending = asyncio.ensure_future(  # sent now, not when awaited
        client.protocol.send_request_async(
            "textDocument/inlineCompletion", inline_params(uri, LINE, 8), msg_id=msg_id
        )
    )
    for _ in range(500):
        counters = (await status(client))["engineCounters"]
        if counters["tokens_generated"] > generated:
            return pending
        await asyncio.sleep(0.01)
    raise AssertionError(f"the model never started writing: {counters}")


async def _no_more_work(client) -> dict:
    """Nothing runs on after a cancel: no more tokens encoded or generated. The counters."""
    await asyncio.sleep(0.1)
    first = (await status(client))["engineCounters"]
    await asyncio.sleep(0.5)
    second = (await status(client))["engineCounters"]
    assert first["tokens_generated"] == second["tokens_generated"]
    assert first["tokens_encoded"] == second["tokens_encoded"]
    return second


async def test_cancel_request_stops_model_work(slow_client, tiny_model_path: Path) -> None:
    uri = "file:///work/cancelled.py"
    open_doc(slow_client, uri, SOURCE)
    await asyncio.sleep(0.3)
    pending = asyncio.ensure_future(  # sent now, not when awaited
        slow_client.protocol.send_request_async(
            "textDocument/inlineCompletion", inline_params(uri, LINE, 8), msg_id="stop-me"
        )
    )
    await asyncio.sleep(0.05)  # mid-computation
    slow_client.protocol.notify("$/cancelRequest", types.CancelParams(id="stop-me"))
    try:
        await asyncio.wait_for(pending, 10)
    except TimeoutError:
        raise
    except Exception as exc:
        assert "cancel" in str(exc).lower()
    second = await _no_more_work(slow_client)
    assert second["max_tokens_after_cancel"] <= 256

    # And the server is consistent: the next answer equals a fresh server's.
    text, _ = suggestion_of(await inline(slow_client, uri, LINE, 8))
    fresh = await start_server(tiny_model_path, {"maxTokens": 24, "multiline": "never"})
    try:
        open_doc(fresh, uri, SOURCE)
        expected, _ = suggestion_of(await inline(fresh, uri, LINE, 8))
    finally:
        await fresh.shutdown_session()
    assert text == expected


async def test_a_cancelled_request_typed_on_with_other_text_stops(slow_client) -> None:
    """A request cancelled after a key that is not what the model is writing: its work stops
    (no later request would want it)."""
    uri = "file:///work/other.py"
    open_doc(slow_client, uri, SOURCE)
    await asyncio.sleep(0.3)
    pending = await _writing(slow_client, uri, "other")
    insert(slow_client, uri, 2, LINE, 8, "zq@")  # not what it writes
    slow_client.protocol.notify("$/cancelRequest", types.CancelParams(id="other"))
    with pytest.raises(Exception, match="(?i)cancel"):
        await asyncio.wait_for(pending, 10)
    await _no_more_work(slow_client)


@pytest.mark.parametrize("cancels", [False, True], ids=["keeps", "cancels"])
async def test_a_keystroke_matching_the_text_being_written_joins_it(
    slow_client, tiny_model_path: Path, cancels: bool
) -> None:
    """The next key's request waits for the computation already writing what was typed.
    `cancels`: the client cancels the request before when it sends the next, as VS Code's
    languageclient does with the provider's token: the work goes on all the same."""
    uri = "file:///work/join.py"
    reference = await start_server(tiny_model_path, {"maxTokens": 24, "multiline": "never"})
    try:
        open_doc(reference, uri, SOURCE)
        expected, _ = suggestion_of(await inline(reference, uri, LINE, 8))
    finally:
        await reference.shutdown_session()
    assert len(expected) >= 3, expected

    open_doc(slow_client, uri, SOURCE)
    await asyncio.sleep(0.3)
    calls = (await status(slow_client))["engineCounters"]["calls"]
    first = await _writing(slow_client, uri, "first")  # part-way through `expected`
    insert(slow_client, uri, 2, LINE, 8, expected[0])
    if cancels:
        slow_client.protocol.notify("$/cancelRequest", types.CancelParams(id="first"))
    text, _ = suggestion_of(await inline(slow_client, uri, LINE, 9))
    if cancels:
        with pytest.raises(Exception, match="(?i)cancel"):
            await first
    else:
        await first
    st = await status(slow_client)
    # Answered from the computation already running: no second model call, nothing lost.
    assert st["engineCounters"]["calls"] == calls + 1
    assert st["counters"]["joined"] == 1
    assert text.endswith(expected[1:])
