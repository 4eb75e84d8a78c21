"""A restarted server picks up a file's KV cache from disk, and answers as a fresh one would."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from lsp_complete.engine.kvstore import KVStore
from lsp_complete.pipeline.planner import COLD_MAX_TOKENS, COLD_MIN_TOKENS
from lsp_complete.testing.lsp_client import (
    inline,
    insert,
    move_cursor,
    open_doc,
    status,
    suggestion_of,
    wait_idle,
)
from tests.lsp_helpers import start_server

SOURCE = "".join(f"def helper_{i}(value):\n    return value * {i}\n\n\n" for i in range(40))
SOURCE += "def main():\n    total = helper_3(2) + hel\n"
LINE = SOURCE.count("\n") - 1
COL = len("    total = helper_3(2) + hel")


async def ask(model: Path, cache: Path, persist: bool = True, settled: bool = False,
              text: str = SOURCE, at: int = COL) -> tuple[str, dict]:
    """A suggestion in a newly opened file; with `settled`, once idle work has built the
    file's full prompt, one more after typing an "x" there (the model's, from that prompt:
    not typing-ahead's)."""
    env = {**os.environ, "LSP_COMPLETE_CACHE_DIR": str(cache)}
    client = await start_server(model, {"maxTokens": 12, "persistCache": persist}, env=env)
    try:
        uri = "file:///work/persist.py"
        open_doc(client, uri, text)
        answer, _ = suggestion_of(await inline(client, uri, LINE, at))
        if settled:
            await asyncio.sleep(0.6)  # past the idle delay (idleReanchorMs), then its work
            await wait_idle(client)
            insert(client, uri, 2, LINE, at, "x")
            answer, _ = suggestion_of(await inline(client, uri, LINE, at + 1))
        return answer, await status(client)
    finally:
        await client.shutdown_session()  # persists the KV sequences


async def test_restart_restores_the_cache_from_disk(tiny_model_path: Path, tmp_path: Path):
    # The first server builds the file's full prompt (idle work after the first, small one)
    # and answers from it; shutdown saves it.
    cold_text, cold = await ask(tiny_model_path, tmp_path / "cache", settled=True)
    assert cold["engineCounters"]["restored_from_disk"] == 0
    full = cold["recent"][-1]
    assert full["encodedTokens"] <= 2, full
    assert list((tmp_path / "cache" / "kv").iterdir()), "shutdown wrote the KV cache"

    # A restarted server asked the moment the file opens: the full prompt, from disk.
    typed = SOURCE[: SOURCE.rindex("hel") + 3] + "x" + SOURCE[SOURCE.rindex("hel") + 3 :]
    warm_text, warm = await ask(tiny_model_path, tmp_path / "cache", text=typed, at=COL + 1)
    assert warm["engineCounters"]["restored_from_disk"] == 1
    first = warm["recent"][-1]
    assert first["source"] in ("model", "empty")
    assert first["promptTokens"] == full["promptTokens"], (first, full)
    assert first["encodedTokens"] <= 2, first  # everything but the last token came from disk
    assert warm_text == cold_text


async def test_an_open_encodes_nothing_and_brings_back_what_the_disk_holds(
    tiny_model_path: Path, tmp_path: Path
) -> None:
    """Many files are opened only to be read: an open costs no prompt tokens (it used to
    encode the file's head at its top, which a request elsewhere shares nothing of). A file
    whose cache was saved is back in memory before its first keystroke."""
    await ask(tiny_model_path, tmp_path / "cache", settled=True)  # saved at shutdown
    env = {**os.environ, "LSP_COMPLETE_CACHE_DIR": str(tmp_path / "cache")}
    client = await start_server(tiny_model_path, {"maxTokens": 4}, env=env)
    try:
        loaded = (await wait_idle(client))["engineCounters"]
        typed = SOURCE[: SOURCE.rindex("hel") + 3] + "x" + SOURCE[SOURCE.rindex("hel") + 3 :]
        open_doc(client, "file:///work/read-only.py", SOURCE)
        open_doc(client, "file:///work/persist.py", typed)
        opened = (await wait_idle(client))["engineCounters"]
        assert opened["tokens_encoded"] == loaded["tokens_encoded"], (loaded, opened)
        assert opened["restored_from_disk"] == 1, opened
        await inline(client, "file:///work/persist.py", LINE, COL + 1)
        first = (await status(client))["recent"][-1]
        assert first["encodedTokens"] <= 2, first  # the prompt restored at open
        assert (await status(client))["engineCounters"]["restored_from_disk"] == 1
    finally:
        await client.shutdown_session()


async def test_a_corrupt_cache_is_discarded_not_trusted(tiny_model_path: Path, tmp_path: Path):
    cold_text, _ = await ask(tiny_model_path, tmp_path / "cache")
    # Flip a byte in the middle of every stored entry (the llama.cpp state).
    store = KVStore(tmp_path / "cache" / "kv")
    keys = list(store._cache)
    assert keys, "shutdown wrote the KV cache"
    for key in keys:
        data = bytearray(store._cache.get(key))
        data[len(data) // 2] ^= 0xFF
        store._cache.set(key, bytes(data))
    store.close()
    text, st = await ask(tiny_model_path, tmp_path / "cache")
    assert st["engineCounters"]["restored_from_disk"] == 0
    assert text == cold_text


async def test_cold_file_starts_small_and_grows_its_context_in_idle_time(
    tiny_model_path: Path, tmp_path: Path
) -> None:
    import asyncio

    from lsp_complete.testing.lsp_client import insert

    env = {**os.environ, "LSP_COMPLETE_CACHE_DIR": str(tmp_path / "cache")}
    client = await start_server(tiny_model_path, {"maxTokens": 4}, env=env)
    try:
        uri = "file:///work/grow.py"
        open_doc(client, uri, SOURCE)
        await inline(client, uri, LINE, COL)
        st = await status(client)
        cold = st["recent"][-1]
        # Measured at load; the first prompt holds what prefills in about half a second (or
        # a richer one that costs at most half as much again).
        assert st["model"]["prefillTokensPerSecond"] > 0
        budget = st["model"]["firstPromptTokens"]
        assert COLD_MIN_TOKENS <= budget <= COLD_MAX_TOKENS
        middle = len(SOURCE.split("\n")[LINE][:COL])
        assert cold["promptTokens"] <= budget * 3 // 2 + middle + 8, cold
        await asyncio.sleep(1.5)  # idle: the full context is encoded in the background
        insert(client, uri, 2, LINE, COL, "p")
        await inline(client, uri, LINE, COL + 1)
        warm = (await status(client))["recent"][-1]
        assert warm["promptTokens"] > cold["promptTokens"] + 100, (cold, warm)
        assert warm["encodedTokens"] <= 4, warm  # the bigger prompt was ready in the cache
    finally:
        await client.shutdown_session()


async def test_idle_work_of_a_closed_file_leaves_the_reopened_file_alone(
    tiny_model_path: Path, tmp_path: Path
) -> None:
    """Re-anchoring scheduled for a file before it was closed must not run on its new copy.

    (It once did: 400 ms after the old answer it re-encoded a prompt for the old cursor
    position into the reopened file's sequence, and the next keystroke re-encoded everything.)
    """
    import asyncio

    from lsprotocol import types

    from lsp_complete.testing.lsp_client import insert

    env = {**os.environ, "LSP_COMPLETE_CACHE_DIR": str(tmp_path / "cache")}
    client = await start_server(tiny_model_path, {"maxTokens": 4}, env=env)
    try:
        uri = "file:///work/reopen.py"
        open_doc(client, uri, SOURCE)
        await inline(client, uri, LINE, COL)  # schedules idle re-anchoring for this copy
        client.text_document_did_close(
            types.DidCloseTextDocumentParams(text_document=types.TextDocumentIdentifier(uri=uri))
        )
        # Reopened with more code below: the old cursor offset is valid but far from the new one.
        longer = SOURCE + "".join(f"\n\ndef later_{i}(x):\n    return x + {i}\n" for i in range(30))
        longer += "\n\ndef last():\n    return later_\n"
        line = longer.count("\n") - 1
        col = len("    return later_")
        open_doc(client, uri, longer)
        await inline(client, uri, line, col)
        insert(client, uri, 2, line, col, "1")  # an edit with no request: no new idle work
        await asyncio.sleep(1.0)  # the old copy's re-anchoring time has passed
        await inline(client, uri, line, col + 1)
        record = (await status(client))["recent"][-1]
        assert record["encodedTokens"] <= 4, record
    finally:
        await client.shutdown_session()


async def test_a_cursor_move_prepares_the_prompt_before_the_first_keystroke(
    tiny_model_path: Path, tmp_path: Path
) -> None:
    env = {**os.environ, "LSP_COMPLETE_CACHE_DIR": str(tmp_path / "cache")}
    client = await start_server(tiny_model_path, {"maxTokens": 4}, env=env)
    try:
        # Without a cursor notification, the first request at a new spot encodes its prompt.
        cold_uri = "file:///work/cold.py"
        open_doc(client, cold_uri, SOURCE)
        await wait_idle(client)
        await inline(client, cold_uri, LINE, COL)
        cold = (await status(client))["recent"][-1]
        assert cold["encodedTokens"] > 100, cold
        # With one, idle time prepares that spot: the first request encodes only its last token.
        uri = "file:///work/moved.py"
        open_doc(client, uri, SOURCE)
        client.protocol.notify("lsp-complete/didMoveCursor", {"textDocument": {"uri": uri}})
        move_cursor(client, "file:///work/never-opened.py", 1, 0)
        move_cursor(client, uri, 10_000, 0)  # malformed or out of range: ignored
        move_cursor(client, uri, LINE, COL)
        st = await wait_idle(client)
        assert st["counters"]["cursorMoves"] == 1
        await inline(client, uri, LINE, COL)
        first = (await status(client))["recent"][-1]
        assert first["source"] in ("model", "empty")
        assert first["promptTokens"] > 100 and first["encodedTokens"] <= 2, first
        # Moving within the region the prompt is anchored in (typing) prepares nothing new.
        move_cursor(client, uri, LINE, COL - 2)
        assert (await wait_idle(client))["counters"]["cursorMoves"] == 1
    finally:
        await client.shutdown_session()


def _kv_is_a_file(cache: Path) -> None:
    cache.mkdir()
    (cache / "kv").write_text("not a folder")


def _kv_owned_by_another_user(cache: Path) -> None:
    (cache / "kv").mkdir(parents=True)
    os.chown(cache / "kv", 65534, 65534)


def _kv_read_only(cache: Path) -> None:
    (cache / "kv").mkdir(parents=True, mode=0o500)
    os.chmod(cache / "kv", 0o500)


_ROOT = hasattr(os, "geteuid") and os.geteuid() == 0


@pytest.mark.parametrize(
    "spoil",
    [
        pytest.param(_kv_is_a_file, id="not-creatable"),
        pytest.param(_kv_owned_by_another_user, id="owned-by-another-user",
                     marks=pytest.mark.skipif(not _ROOT, reason="chown needs root")),
        pytest.param(_kv_read_only, id="read-only",
                     marks=pytest.mark.skipif(_ROOT, reason="root writes to read-only folders")),
    ],
)
async def test_an_unusable_cache_folder_costs_persistence_not_completions(
    tiny_model_path: Path, tmp_path: Path, spoil
) -> None:
    """Issue 14, defect 4: the model used to go to state "error" (and the folder was deleted)."""
    from lsprotocol import types

    cache = tmp_path / "cache"
    spoil(cache)
    env = {**os.environ, "LSP_COMPLETE_CACHE_DIR": str(cache)}
    client = await start_server(tiny_model_path, {"maxTokens": 12}, env=env)
    try:
        uri = "file:///work/persist.py"
        open_doc(client, uri, SOURCE)
        text, _ = suggestion_of(await inline(client, uri, LINE, COL))
        st = await status(client)
        assert st["model"]["state"] == "ready"
        assert st["recent"][-1]["source"] in ("model", "empty")
        told = [m for m in client.messages if "KV cache persistence is off" in m.message]
        assert len(told) == 1, client.messages
        assert told[0].type == types.MessageType.Warning
    finally:
        await client.shutdown_session()
        os.chmod(cache / "kv", 0o700)
    assert (cache / "kv").exists(), "the unusable folder is left alone"
