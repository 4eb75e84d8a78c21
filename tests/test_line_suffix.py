"""A one-line suggestion that types through the closers an auto-closing editor put after the
cursor (`foo(|)` + `o2);`): where the client asks for it (`replaceLineSuffix`), its item's
range ends past them, so the client replaces them; otherwise the suggestion stops before them,
as always. The real server, its model answers from a fake remote engine (what it writes is
the test's to choose)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
from lsprotocol import types

from lsp_complete.testing.lsp_client import inline, insert, open_doc, status, suggestion_of
from tests.lsp_helpers import start_server
from tests.test_remote_engine import FakeLlamaServer, fake, remote_options  # noqa: F401

SOURCE = "int main(void) {\n    foo()\n    return 0;\n}\n"
LINE, COL = 1, len("    foo(")
URI = "file:///work/main.c"


@asynccontextmanager
async def _started(fake: FakeLlamaServer, model: Any,  # noqa: F811
                   **options: Any) -> AsyncIterator[Any]:
    """The real server with `options`, SOURCE open, the model writing `o2);` at `foo(|)`:
    the client."""
    fake.pieces = ["o2);"]
    client = await start_server(None, remote_options(fake.url, model, remoteHealing="off",
                                                     debounceMs=0, **options))
    try:
        open_doc(client, URI, SOURCE, "c")
        yield client
    finally:
        fake.release.set()  # (an answer still held)
        await client.shutdown_session()


@asynccontextmanager
async def _asked(fake: FakeLlamaServer, model: Any,  # noqa: F811
                 **options: Any) -> AsyncIterator[tuple[Any, types.InlineCompletionItem]]:
    """`_started`, asked at `foo(|)`: the client and the item it got there."""
    async with _started(fake, model, **options) as client:
        _, item = suggestion_of(await inline(client, URI, LINE, COL))
        assert item is not None
        yield client, item


async def _item(fake: FakeLlamaServer, model: Any, **options: Any) -> types.InlineCompletionItem:  # noqa: F811
    async with _asked(fake, model, **options) as (client, item):
        if options.get("replaceLineSuffix"):
            # Typed on, the rest comes from typing-ahead with the same closers replaced.
            insert(client, URI, 2, LINE, COL, "o")
            _, after = suggestion_of(await inline(client, URI, LINE, COL + 1))
            assert after is not None and after.insert_text == "o2);"
            assert after.range is not None and after.range.end.character == COL + 2
            assert (await status(client))["counters"]["typeahead"] == 1
        return item


async def test_the_item_replaces_the_closers_its_text_types_through(
        fake: FakeLlamaServer, tiny_model_path: Any) -> None:  # noqa: F811
    item = await _item(fake, tiny_model_path, replaceLineSuffix=True)
    assert item.insert_text == "o2);"
    assert item.range is not None
    assert (item.range.start.line, item.range.start.character) == (LINE, COL)
    assert (item.range.end.line, item.range.end.character) == (LINE, COL + 1)


async def test_without_the_setting_the_suggestion_stops_before_the_closer(
        fake: FakeLlamaServer, tiny_model_path: Any) -> None:  # noqa: F811
    item = await _item(fake, tiny_model_path)
    assert item.insert_text == "o2"
    assert item.range is not None and item.range.end.character == COL


async def test_turned_off_the_closers_are_not_written_twice(
        fake: FakeLlamaServer, tiny_model_path: Any) -> None:  # noqa: F811
    """A suggestion remembered with the setting on wrote the closers again; served after the
    client turned the setting off, its item would insert them before the ones there (`o2);)`).
    A change of settings forgets what was remembered: the next key asks anew."""
    async with _asked(fake, tiny_model_path, replaceLineSuffix=True) as (client, item):
        assert item.insert_text == "o2);"
        _turn_off(client)
        await _typed_on_asks_anew(fake, client)


async def test_an_answer_computed_while_the_setting_was_turned_off_is_not_typed_ahead(
        fake: FakeLlamaServer, tiny_model_path: Any) -> None:  # noqa: F811
    """The request was made with the setting on, and the client turned it off while the model
    wrote `o2);`: that answer, shaped by the old setting, ends after the change cleared
    typing-ahead. It is not sent (its item's range would be placed by the new setting: the
    editor applies `foo(o2);)`), nor kept in typing-ahead (typed on through, the same)."""
    fake.hold_at = 0  # the model writes nothing until `fake.release`
    async with _started(fake, tiny_model_path, replaceLineSuffix=True) as client:
        asked = asyncio.ensure_future(inline(client, URI, LINE, COL))
        for _ in range(1000):  # until the job is on the worker, asking the model
            if fake.posts("/v1/completions"):
                break
            await asyncio.sleep(0.01)
        assert len(fake.posts("/v1/completions")) == 1
        _turn_off(client)
        await status(client)  # (answered once the change is applied: messages are in order)
        fake.release.set()
        assert suggestion_of(await asked) == ("", None)
        fake.hold_at = None
        await _typed_on_asks_anew(fake, client)


def _turn_off(client: Any) -> None:
    client.workspace_did_change_configuration(types.DidChangeConfigurationParams(
        settings={"lspComplete": {"replaceLineSuffix": False}}))


async def _typed_on_asks_anew(fake: FakeLlamaServer, client: Any) -> None:  # noqa: F811
    """With the setting off, `o` typed at `foo(|)`: the model is asked again (nothing from
    typing-ahead) and its suggestion stops before the closer."""
    fake.pieces = ["2);"]  # what the model writes after `foo(o`
    insert(client, URI, 2, LINE, COL, "o")
    _, after = suggestion_of(await inline(client, URI, LINE, COL + 1))
    assert after is not None and after.range is not None
    line = "    foo(o)"
    applied = (line[:after.range.start.character] + after.insert_text
               + line[after.range.end.character:])
    assert applied == "    foo(o2)", applied
    assert (await status(client))["counters"]["typeahead"] == 0


@pytest.mark.parametrize("replace_line_suffix", [False, True])
async def test_a_callbacks_first_line_is_suggested_whole_before_the_editors_paren(
        fake: FakeLlamaServer, tiny_model_path: Any,  # noqa: F811
        replace_line_suffix: bool) -> None:
    """At `useEffect(|)` the model opens the callback's body (`() => {`): the client gets
    that line whole, inserted before the editor's `)` (which goes down with the cursor to the
    `}` typed below: `})`), where the closers' balance cut it to `(` and a client that
    replaces the line suffix had its `)` deleted."""
    fake.pieces = ["() => {\n    load();\n  }, []);\n"]
    source = "function Clock() {\n  useEffect()\n  return null;\n}\n"
    uri, line, col = "file:///work/clock.ts", 1, len("  useEffect(")
    client = await start_server(None, remote_options(fake.url, tiny_model_path,
                                                     remoteHealing="off", debounceMs=0,
                                                     multiline="never",
                                                     replaceLineSuffix=replace_line_suffix))
    try:
        open_doc(client, uri, source, "typescript")
        text, item = suggestion_of(await inline(client, uri, line, col))
        assert item is not None and item.range is not None
        assert text == "() => {", text
        assert item.range.end == types.Position(line=line, character=col)  # the `)` stays
    finally:
        await client.shutdown_session()
