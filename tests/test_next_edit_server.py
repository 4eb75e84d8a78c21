"""Next-edit suggestions through the real server (issue 33): a client that speaks
`textDocument/copilotInlineEdit` exactly as sidekick.nvim does (make_position_params, plus
textDocument.version and context.triggerKind 2; lua/sidekick/nes/init.lua), and
`textDocument/didShowInlineEdit`.

The tiny model runs in process for what does not depend on what it writes (off, stale
versions, cancellation, malformed params); the edits themselves come from a scripted
llama-server stand-in (the tiny model writes gibberish, which no guard accepts), as in
test_blocks.py. A rename is carried on without the model (nextedit/repeat.py), so the model's
path is driven by an added parameter, which no rule carries on. The real model's two cases are
in test_next_edit_real_model.py (slow)."""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
from pathlib import Path
from typing import Any

import pytest
from lsprotocol import types

from lsp_complete.server.protocol import (
    DID_SHOW_NEXT_EDIT_METHOD,
    NEXT_EDIT_METHOD,
    NEXT_EDIT_READY_METHOD,
)
from lsp_complete.testing.lsp_client import (
    insert,
    open_doc,
    plain,
    poll_status,
    replace,
    status,
    wait_idle,
)
from tests.lsp_helpers import start_server
from tests.test_remote_engine import fake, remote_options  # noqa: F401  (the fixture)

SOURCE = "def area(width, height):\n    return width * height\n\n\nprint(area(2, 3))\n"
# The user renamed `width` to `w` on line 0; it is carried to line 1 (without the model).
RENAMED = SOURCE.replace("area(width,", "area(w,")
PROPAGATED = RENAMED.replace("return width *", "return w *")
# The user added a parameter `depth`; the model is to use it on line 1.
EXTENDED = SOURCE.replace("height):", "height, depth):")
EXTENDED_NEXT = EXTENDED.replace("width * height", "width * height * depth")


def sidekick_params(uri: str, version: int, line: int, character: int) -> dict[str, Any]:
    """What sidekick.nvim sends: vim.lsp.util.make_position_params, then the buffer's version
    and context = { triggerKind = 2 }."""
    return {"textDocument": {"uri": uri, "version": version},
            "position": {"line": line, "character": character},
            "context": {"triggerKind": 2}}


async def next_edit(client: Any, uri: str, version: int, line: int,
                    character: int) -> list[dict[str, Any]]:
    answer = plain(await client.protocol.send_request_async(
        NEXT_EDIT_METHOD, sidekick_params(uri, version, line, character)))
    assert isinstance(answer, dict) and isinstance(answer["edits"], list), answer
    return answer["edits"]


def rename_width(client: Any, uri: str) -> None:
    """Version 2: `width` -> `w` in the signature, as typed over the word."""
    where = types.Range(start=types.Position(line=0, character=9),
                        end=types.Position(line=0, character=14))
    replace(client, uri, 2, where, "w")


def add_depth(client: Any, uri: str) -> None:
    """Version 2: `, depth` typed at once after `height` in the signature."""
    insert(client, uri, 2, 0, 22, ", depth")


def apply(text: str, edit: dict[str, Any]) -> str:
    lines = text.split("\n")
    start, end = edit["range"]["start"], edit["range"]["end"]

    def offset(pos: dict[str, int]) -> int:
        return sum(len(line) + 1 for line in lines[: pos["line"]]) + pos["character"]

    return text[: offset(start)] + edit["text"] + text[offset(end):]


async def start_with_stand_in(stand_in: Any, tiny_model_path: Path,
                              encodings: list[str] | None = None, **options: Any) -> Any:
    """The server whose engine is the llama-server stand-in, remote healing off."""
    return await start_server(None, remote_options(stand_in.url, tiny_model_path,
                                                   remoteHealing="off", **options), encodings)


def sweep_answer(window: str) -> list[str]:
    """The stand-in's stream: the rewritten window, then the next pseudo-file's separator
    (the tiny model's vocabulary has <|file_sep|>: its format is "sweep")."""
    return ["\n", window[: len(window) // 2], window[len(window) // 2:], "\n<|file_sep|>x"]


async def test_sidekick_gets_the_edit_for_the_version_it_asked(
        fake, tiny_model_path, engine) -> None:  # noqa: F811
    # The window (10 lines above and below the cursor) is the whole file (its last line is
    # the empty one after the last line break).
    fake.pieces = sweep_answer(EXTENDED_NEXT)
    client = await start_with_stand_in(fake, tiny_model_path, nextEditDelayMs=0)
    try:
        uri = "file:///work/area.py"
        open_doc(client, uri, SOURCE)
        await next_edit(client, uri, 1, 0, 0)  # a client that asks: from now on, ahead
        ready = asyncio.ensure_future(client.wait_for_notification(NEXT_EDIT_READY_METHOD))
        add_depth(client, uri)
        params = await asyncio.wait_for(ready, 60)  # computed after the pause, unasked
        assert params.textDocument.uri == uri and params.textDocument.version == 2
        asked = len(fake.posts("/v1/completions"))
        (edit,) = await next_edit(client, uri, 2, 0, 10)
        assert len(fake.posts("/v1/completions")) == asked  # the ready answer
        assert edit["textDocument"] == {"uri": uri, "version": 2}
        # The smallest replacement: " * depth" inserted at the end of line 1.
        assert edit["range"] == {"start": {"line": 1, "character": 25},
                                 "end": {"line": 1, "character": 25}}
        assert edit["text"] == " * depth"
        assert apply(EXTENDED, edit) == EXTENDED_NEXT
        prompt = fake.posts("/v1/completions")[-1]["prompt"]
        # The history, then the window before and after the edit, as Sweep's format has it
        # (the separators are special tokens, which detokenize to nothing).
        text = engine.detokenize(prompt)
        assert text == ("area.py.diff\noriginal:\ndef area(width, height):\nupdated:\n"
                        f"def area(width, height, depth):\noriginal/area.py\n{SOURCE}\n"
                        f"current/area.py\n{EXTENDED}\nupdated/area.py")
        command = edit["command"]
        assert command["command"] == "lsp-complete.accepted"
        # Shown (twice: counted once), then accepted as sidekick does it: apply, then the
        # command.
        for _ in range(2):
            client.protocol.notify(DID_SHOW_NEXT_EDIT_METHOD, {"item": edit})
        insert(client, uri, 3, 1, 25, " * depth")
        await client.workspace_execute_command_async(types.ExecuteCommandParams(
            command=command["command"], arguments=command["arguments"]))
        counters = (await status(client))["counters"]
        assert counters["nextEditShown"] == 1 and counters["nextEditAccepted"] == 1
        assert counters["nextEditEdits"] >= 1
    finally:
        await client.shutdown_session()


async def test_a_client_that_never_asks_costs_no_next_edit_work(tiny_model_path: Path) -> None:
    """Most inline-completion clients never ask for next edits: their pauses must not pay
    for a rewrite of the window. Once a client asks, edits are computed ahead."""
    client = await start_server(tiny_model_path, {"nextEditDelayMs": 0})
    try:
        uri = "file:///work/area.py"
        open_doc(client, uri, SOURCE)
        await wait_idle(client)
        rename_width(client, uri)
        await asyncio.sleep(0.2)  # past the pause (0 ms): the timer would have fired
        assert (await wait_idle(client))["counters"]["nextEditComputed"] == 0
        await next_edit(client, uri, 2, 0, 10)
        assert (await wait_idle(client))["counters"]["nextEditComputed"] == 1
        insert(client, uri, 3, 4, 0, "x")
        await asyncio.sleep(0.2)
        st = await wait_idle(client)
        assert st["counters"]["nextEditComputed"] == 2  # ahead, unasked
        # The status names the engine's sequences (the next edits' among them) with no control
        # character: Emacs' JSON reader refuses a whole message that holds a NUL.
        assert not re.search(r"\\u00[01][0-9a-fA-F]", json.dumps(st)), st["engine"]
    finally:
        await client.shutdown_session()


async def test_copilot_el_is_served_as_it_speaks(fake, tiny_model_path) -> None:  # noqa: F811
    """copilot.el sends Copilot's own initialization options, and accepts a next edit with
    `workspace/executeCommand` as a notification (no id; copilot-nes.el): no "unknown
    setting" warning, and the accept is counted."""
    fake.pieces = sweep_answer(PROPAGATED)
    copilot = {"editorInfo": {"name": "Emacs", "version": "28.2"},
               "editorPluginInfo": {"name": "copilot.el", "version": "0.3"},
               "networkProxy": None}
    client = await start_with_stand_in(fake, tiny_model_path, **copilot)
    try:
        uri = "file:///work/area.py"
        open_doc(client, uri, SOURCE)
        rename_width(client, uri)
        (edit,) = await next_edit(client, uri, 2, 0, 10)
        # (Sent raw: lsprotocol's client knows executeCommand only as a request.)
        client.protocol._send_data({"jsonrpc": "2.0", "method": "workspace/executeCommand",
                                    "params": edit["command"]})
        counters = (await wait_idle(client))["counters"]
        assert counters["nextEditAccepted"] == 1
        assert not [m.message for m in client.messages if "setting" in m.message]
    finally:
        await client.shutdown_session()


async def test_an_old_version_gets_nothing_and_a_new_one_its_own(fake, tiny_model_path) -> None:  # noqa: F811
    fake.pieces = sweep_answer(EXTENDED_NEXT)
    client = await start_with_stand_in(fake, tiny_model_path, nextEditDelayMs=0)
    try:
        uri = "file:///work/area.py"
        open_doc(client, uri, SOURCE)
        await next_edit(client, uri, 1, 0, 0)  # a client that asks: from now on, ahead
        ready = asyncio.ensure_future(client.wait_for_notification(NEXT_EDIT_READY_METHOD))
        add_depth(client, uri)
        await asyncio.wait_for(ready, 60)
        # A keystroke at the end of the file (version 3): the version-2 edit is stale.
        fake.pieces = sweep_answer(EXTENDED_NEXT + "#")  # (before: the pause is 0 ms)
        insert(client, uri, 3, 5, 0, "#")
        assert await next_edit(client, uri, 2, 0, 10) == []
        # Asked for version 3, it is computed for version 3 (its range in that text).
        edits = await next_edit(client, uri, 3, 0, 10)
        assert [e["textDocument"]["version"] for e in edits] == [3]
        assert apply(EXTENDED + "#", edits[0]) == EXTENDED_NEXT + "#"
    finally:
        await client.shutdown_session()


async def test_nothing_to_change_is_an_empty_answer(fake, tiny_model_path) -> None:  # noqa: F811
    fake.pieces = sweep_answer(EXTENDED)  # the window unchanged
    client = await start_with_stand_in(fake, tiny_model_path, nextEditDelayMs=60_000)
    try:
        uri = "file:///work/area.py"
        open_doc(client, uri, SOURCE)
        add_depth(client, uri)  # (an edit the model's answer could follow from)
        assert await next_edit(client, uri, 2, 4, 0) == []
        assert (await status(client))["counters"]["nextEditNothing"] == 1
        fake.pieces = sweep_answer(EXTENDED * 2)  # the window twice: not a rewrite
        insert(client, uri, 3, 5, 0, "")
        assert await next_edit(client, uri, 3, 4, 0) == []
        fake.pieces = sweep_answer("<|fim_middle|>" + EXTENDED)  # the template leaked
        insert(client, uri, 4, 5, 0, "")
        assert await next_edit(client, uri, 4, 4, 0) == []
        assert (await status(client))["counters"]["nextEditRejected"] == 2
    finally:
        await client.shutdown_session()


async def test_no_edit_with_a_word_in_it_asks_no_model(fake, tiny_model_path) -> None:  # noqa: F811
    """A model edit is shown only if it follows from a word the recent edits changed: with
    none (no edit yet, or only punctuation typed) the model is not asked at all."""
    fake.pieces = sweep_answer(SOURCE.replace("width *", "w *"))
    client = await start_with_stand_in(fake, tiny_model_path, nextEditDelayMs=60_000)
    try:
        uri = "file:///work/area.py"
        open_doc(client, uri, SOURCE)
        assert await next_edit(client, uri, 1, 1, 4) == []
        insert(client, uri, 2, 3, 0, "#")
        assert await next_edit(client, uri, 2, 1, 4) == []
        assert fake.posts("/v1/completions") == []
        assert (await wait_idle(client))["counters"]["nextEditComputed"] == 0
    finally:
        await client.shutdown_session()


async def test_next_edit_off_answers_empty_and_runs_no_model(tiny_model_path: Path) -> None:
    client = await start_server(tiny_model_path, {"nextEdit": "off", "nextEditDelayMs": 0})
    try:
        uri = "file:///work/area.py"
        open_doc(client, uri, SOURCE)
        rename_width(client, uri)
        await asyncio.sleep(0.3)  # past the pause
        before = (await wait_idle(client))["engineCounters"]["calls"]
        assert await next_edit(client, uri, 2, 0, 10) == []
        st = await wait_idle(client)
        assert st["engineCounters"]["calls"] == before
        assert st["counters"]["nextEditComputed"] == 0
    finally:
        await client.shutdown_session()


async def asked_while_generating(client: Any, uri: str) -> tuple[asyncio.Future[Any],
                                                                  dict[str, Any]]:
    """Open SOURCE at `uri`, add a parameter, and ask for the next edit: returned once the
    rewrite is being generated (the request's future, and the engine counters before it)."""
    open_doc(client, uri, SOURCE)
    add_depth(client, uri)
    base = (await wait_idle(client))["engineCounters"]
    asked = asyncio.ensure_future(next_edit(client, uri, 2, 0, 10))
    for _ in range(1000):
        counters = (await status(client))["engineCounters"]
        if counters["tokens_generated"] > base["tokens_generated"] + 2:
            return asked, base
        await asyncio.sleep(0.01)
    raise AssertionError(f"no next edit computed: {counters}")


async def test_a_keystroke_cancels_the_next_edit_being_computed(tiny_model_path: Path) -> None:
    # Every decode takes 40 ms: the rewrite (the window's tokens and more) takes seconds.
    client = await start_server(tiny_model_path, {"nextEditDelayMs": 60_000},
                                env={**os.environ, "LSP_COMPLETE_SIMULATE_DECODE_MS": "40"})
    try:
        uri = "file:///work/area.py"
        asked, _ = await asked_while_generating(client, uri)
        insert(client, uri, 3, 5, 0, "#")  # a keystroke, no request
        assert await asyncio.wait_for(asked, 30) == []  # stale now
        st = await wait_idle(client)
        counters = st["engineCounters"]
        assert counters["max_tokens_after_cancel"] <= 1, counters  # stopped at once
        await asyncio.sleep(0.3)
        assert (await status(client))["engineCounters"] == counters  # no further work
        assert st["counters"]["nextEditComputed"] == 0  # (cancelled: nothing came of it)
    finally:
        await client.shutdown_session()


@pytest.mark.parametrize("params", [
    {"textDocument": {"uri": "file:///work/area.py", "version": "two"},
     "position": {"line": 0, "character": 0}},
    {"textDocument": {"uri": 5}, "position": {"line": 0, "character": 0}},
    {"position": {"line": "x"}},
    [1, 2, 3],
    {"textDocument": {"uri": "file:///work/area.py", "version": 1},
     "position": {"line": 99, "character": 0}},
    {"textDocument": {"uri": "file:///work/never-opened.py", "version": 1},
     "position": {"line": 0, "character": 0}},
])
async def test_malformed_params_get_an_error_or_nothing_and_the_server_serves_on(
        tiny_model_path: Path, params: Any) -> None:
    client = await start_server(tiny_model_path, {"nextEditDelayMs": 60_000})
    try:
        uri = "file:///work/area.py"
        open_doc(client, uri, SOURCE)
        try:
            answer = plain(await client.protocol.send_request_async(NEXT_EDIT_METHOD, params))
        except Exception as exc:  # an error response is fine too
            assert "Invalid" in str(exc) or "invalid" in str(exc), exc
        else:
            assert answer == {"edits": []}
        client.protocol.notify(DID_SHOW_NEXT_EDIT_METHOD, {"item": params})
        client.protocol.notify(DID_SHOW_NEXT_EDIT_METHOD, params)
        st = await status(client)  # still serving
        assert st["model"]["state"] == "ready" and st["counters"]["nextEditShown"] == 0
    finally:
        await client.shutdown_session()


async def test_a_next_edit_request_for_a_document_not_open_is_told(
        tiny_model_path: Path) -> None:
    """A client whose URIs differ from those it opened learns why it gets no next edit."""
    client = await start_server(tiny_model_path, {"nextEditDelayMs": 60_000})
    try:
        open_doc(client, "file:///work/area.py", SOURCE)
        never = "file:///work/Area.py"
        for _ in range(2):
            answer = plain(await client.protocol.send_request_async(NEXT_EDIT_METHOD, {
                "textDocument": {"uri": never, "version": 1},
                "position": {"line": 0, "character": 0}}))
            assert answer == {"edits": []}
        await status(client)
        told = [m.message for m in client.messages if "not open" in m.message]
        assert len(told) == 1 and "next-edit request" in told[0] and told[0].endswith(never)
    finally:
        await client.shutdown_session()


async def test_a_suggestion_request_preempts_the_next_edit_which_then_starts_again(
        tiny_model_path: Path) -> None:
    client = await start_server(tiny_model_path, {"nextEditDelayMs": 60_000},
                                env={**os.environ, "LSP_COMPLETE_SIMULATE_DECODE_MS": "20"})
    try:
        uri = "file:///work/area.py"
        asked, base = await asked_while_generating(client, uri)
        # An inline request at the same version (a cursor move, no edit) goes first...
        await client.text_document_inline_completion_async(types.InlineCompletionParams(
            text_document=types.TextDocumentIdentifier(uri=uri),
            position=types.Position(line=4, character=0),
            context=types.InlineCompletionContext(
                trigger_kind=types.InlineCompletionTriggerKind.Automatic)))
        # ...and the next edit is computed again for the request, to its end (the tiny
        # model's gibberish: refused, nothing to show).
        assert await asyncio.wait_for(asked, 120) == []
        st = await status(client)
        # The next edit twice (stopped, then to its end) and the suggestion in between.
        assert st["engineCounters"]["calls"] == base["calls"] + 3
        assert st["counters"]["nextEditComputed"] == 1
        assert st["counters"]["nextEditRejected"] == 1
    finally:
        await client.shutdown_session()


async def next_edit_model_state(client: Any, state: str) -> dict[str, Any]:
    """The status's nextEditModel once it reaches `state` (a load takes a second or so)."""
    described = (await poll_status(
        client, lambda st: (st["nextEditModel"] or {}).get("state") == state, 30))["nextEditModel"]
    assert described is not None and described["state"] == state, described
    return dict(described)


async def test_another_next_edit_model_makes_the_next_edits(
        fake, tiny_model_path, tmp_path: Path) -> None:  # noqa: F811
    # Completions from the stand-in; next edits from a model of their own, in process.
    other = tmp_path / "next-edit.gguf"
    shutil.copyfile(tiny_model_path, other)
    fake.pieces = sweep_answer(EXTENDED_NEXT)
    client = await start_with_stand_in(fake, tiny_model_path, nextEditModel=str(other),
                                       nextEditDelayMs=60_000)
    try:
        uri = "file:///work/area.py"
        open_doc(client, uri, SOURCE)
        add_depth(client, uri)
        asked = len(fake.posts("/v1/completions"))
        # Its first need loads it, and the request waits for it: the tiny model's rewrite is
        # gibberish, refused, but made.
        assert await next_edit(client, uri, 2, 0, 10) == []
        st = await status(client)
        assert st["nextEditModel"]["state"] == "ready"
        assert Path(str(st["nextEditModel"]["path"])).resolve() == other.resolve()
        assert st["counters"]["nextEditComputed"] == 1
        assert len(fake.posts("/v1/completions")) == asked  # the completion engine: not asked
        client.workspace_did_change_configuration(
            types.DidChangeConfigurationParams(settings={"nextEditModel": ""}))  # (null: unchanged)
        again = "file:///work/again.py"
        open_doc(client, again, SOURCE)
        add_depth(client, again)
        got = await next_edit(client, again, 2, 0, 10)  # the completion model's again
        (edit,) = got
        assert apply(EXTENDED, edit) == EXTENDED_NEXT
        assert (await status(client))["nextEditModel"] is None  # the other one is freed
    finally:
        await client.shutdown_session()


async def start_with_depth_added(tiny_model_path: Path,
                                 next_edit_model: str) -> tuple[Any, str, int]:
    """A server with `nextEditModel`, a file where `depth` was just added (version 2), and
    the completion engine's calls so far."""
    client = await start_server(tiny_model_path, {"nextEditModel": next_edit_model,
                                                  "nextEditDelayMs": 60_000})
    uri = "file:///work/area.py"
    open_doc(client, uri, SOURCE)
    add_depth(client, uri)
    return client, uri, (await wait_idle(client))["engineCounters"]["calls"]


async def test_the_completion_model_by_another_path_is_not_loaded_twice(
        tiny_model_path: Path, tmp_path: Path) -> None:
    same = tmp_path / "same.gguf"
    same.symlink_to(tiny_model_path)
    client, uri, base = await start_with_depth_added(tiny_model_path, str(same))
    try:
        await next_edit(client, uri, 2, 0, 10)  # (the tiny model's rewrite is gibberish)
        st = await wait_idle(client)
        assert st["nextEditModel"] is None
        assert st["counters"]["nextEditComputed"] == 1
        assert st["engineCounters"]["calls"] == base + 1  # by the completion model
    finally:
        await client.shutdown_session()


async def test_a_next_edit_model_that_cannot_load_is_told_once(tiny_model_path: Path) -> None:
    client, uri, base = await start_with_depth_added(tiny_model_path, "no-such-model")
    try:
        assert await next_edit(client, uri, 2, 0, 10) == []
        failed = await next_edit_model_state(client, "error")
        assert "no-such-model" in str(failed["error"])
        assert await next_edit(client, uri, 2, 0, 10) == []  # not loaded again
        told = [m.message for m in client.messages if "no-such-model" in m.message]
        assert len(told) == 1 and "nextEditModel" in told[0], told
        st = await wait_idle(client)
        assert st["engineCounters"]["calls"] == base  # the completion model made none
        assert st["counters"].get("nextEditComputed", 0) == 0
    finally:
        await client.shutdown_session()


async def test_a_request_during_the_pause_is_computed_once(
        tiny_model_path: Path) -> None:
    client = await start_server(tiny_model_path, {"nextEditDelayMs": 300},
                                env={**os.environ, "LSP_COMPLETE_SIMULATE_DECODE_MS": "20"})
    try:
        uri = "file:///work/area.py"
        open_doc(client, uri, SOURCE)
        base = (await wait_idle(client))["engineCounters"]["calls"]
        add_depth(client, uri)
        # Asked at once: the work (3 s: each decode takes 20 ms) outlasts the pause, which
        # must not start it again.
        assert await next_edit(client, uri, 2, 0, 10) == []  # (gibberish: refused)
        st = await wait_idle(client)
        assert st["engineCounters"]["calls"] == base + 1  # computed once, not again
        assert st["counters"]["nextEditComputed"] == 1
    finally:
        await client.shutdown_session()


@pytest.mark.parametrize("encoding", ["utf-16", "utf-8"])
async def test_the_range_is_in_the_negotiated_encoding(fake, tiny_model_path,  # noqa: F811
                                                       encoding: str) -> None:
    text = "def tag(width):\n    return '🏷️ naïve ' + width\n"
    after = text.replace("tag(width)", "tag(w)")
    fake.pieces = sweep_answer(after.replace("+ width", "+ w"))
    client = await start_with_stand_in(fake, tiny_model_path, [encoding],
                                       nextEditDelayMs=60_000)
    try:
        uri = "file:///work/tag.py"
        open_doc(client, uri, text)
        replace(client, uri, 2, types.Range(start=types.Position(line=0, character=8),
                                            end=types.Position(line=0, character=13)), "w")
        (edit,) = await next_edit(client, uri, 2, 0, 9)
        line = after.split("\n")[1]
        start = line.index("+ width") + 3  # "idth" goes, in code points
        units = {"utf-16": lambda s: len(s.encode("utf-16-le")) // 2,
                 "utf-8": lambda s: len(s.encode("utf-8"))}[encoding]
        assert edit["range"] == {"start": {"line": 1, "character": units(line[:start])},
                                 "end": {"line": 1, "character": units(line[:start + 4])}}
        assert edit["text"] == ""
    finally:
        await client.shutdown_session()


async def test_a_huge_line_stays_out_of_the_window(fake, tiny_model_path) -> None:  # noqa: F811
    """Issue 32, round 3: the window is whole lines around the cursor, and a minified line in
    it went whole into the prompt (a 4 MB line: tokenized three times on the worker, other
    files' suggestions waited 3.6 s behind it). The window now narrows to the lines nearest
    the cursor that fit; on a line too long to rewrite the engine is not asked at all."""
    huge = "x = [" + "1, " * 50_000 + "]"
    text = SOURCE + huge + "\n"  # the huge line is line 5, inside a cursor's window on line 1
    fake.pieces = sweep_answer(SOURCE)
    client = await start_with_stand_in(fake, tiny_model_path, nextEditDelayMs=60_000)
    try:
        uri = "file:///work/huge.py"
        open_doc(client, uri, text)
        add_depth(client, uri)  # (an edit the model's answer could follow from)
        await next_edit(client, uri, 2, 1, 4)
        prompts = [len(body["prompt"]) for body in fake.posts("/v1/completions")]
        assert prompts and max(prompts) < 2_000, prompts  # the short lines only
        assert await next_edit(client, uri, 2, 5, 10) == []
        assert len(fake.posts("/v1/completions")) == len(prompts)  # nothing asked
        assert (await status(client))["model"]["state"] == "ready"
    finally:
        await client.shutdown_session()


async def test_a_rename_is_carried_to_each_next_use_without_the_model(
        fake, tiny_model_path) -> None:  # noqa: F811
    """The last edit made again where it fits next (nextedit/repeat.py): a rename is carried
    to the nearest use at once, the model never asked; once that is accepted, to the next."""
    fake.pieces = sweep_answer(SOURCE)  # (the model would change nothing)
    text = "def area(width, height):\n    assert width > 0\n    return width * height\n"
    client = await start_with_stand_in(fake, tiny_model_path, nextEditDelayMs=60_000)
    try:
        uri = "file:///work/area.py"
        open_doc(client, uri, text)
        rename_width(client, uri)
        (edit,) = await next_edit(client, uri, 2, 0, 10)
        assert edit["textDocument"] == {"uri": uri, "version": 2}
        assert edit["range"] == {"start": {"line": 1, "character": 12},
                                 "end": {"line": 1, "character": 16}}  # "idth" goes
        assert edit["text"] == ""
        # Accepted as sidekick does it: the edit applied, then its command.
        replace(client, uri, 3, types.Range(start=types.Position(line=1, character=12),
                                            end=types.Position(line=1, character=16)), "")
        await client.workspace_execute_command_async(types.ExecuteCommandParams(
            command=edit["command"]["command"], arguments=edit["command"]["arguments"]))
        (edit,) = await next_edit(client, uri, 3, 1, 12)
        assert apply(text.replace("width", "w", 2), edit) == text.replace("width", "w")
        counters = (await wait_idle(client))["counters"]
        assert counters["nextEditRepeated"] == 2 and counters["nextEditAccepted"] == 1
        assert fake.posts("/v1/completions") == []  # the model was never asked
    finally:
        await client.shutdown_session()


async def test_a_rewrite_that_does_not_follow_from_the_last_edit_is_not_shown(
        fake, tiny_model_path) -> None:  # noqa: F811
    # The model rewords the print call: nothing to do with the added parameter.
    fake.pieces = sweep_answer(EXTENDED.replace("print(area(2, 3))", "print(area(3, 2))"))
    client = await start_with_stand_in(fake, tiny_model_path, nextEditDelayMs=60_000)
    try:
        uri = "file:///work/area.py"
        open_doc(client, uri, SOURCE)
        add_depth(client, uri)
        assert await next_edit(client, uri, 2, 0, 29) == []
        counters = (await wait_idle(client))["counters"]
        assert counters["nextEditUnrelated"] == 1 and counters["nextEditEdits"] == 0
        assert len(fake.posts("/v1/completions")) == 1  # the model was asked
    finally:
        await client.shutdown_session()


async def test_a_next_edit_only_client_is_told_when_the_engine_answers_again(
        fake, tiny_model_path) -> None:  # noqa: F811
    """Round 9: a client that asks for next edits only (no inline suggestions) was told the
    engine's failure, and never that it was over: the told failure stayed, so a later one
    was not told either. It is told as the suggestions' path tells it."""
    def not_ready(handler: Any) -> None:
        handler.send_response(503)
        handler.send_header("Content-Length", "0")
        handler.end_headers()

    fake.raw["/v1/completions"] = not_ready
    fake.pieces = sweep_answer(EXTENDED_NEXT)
    client = await start_with_stand_in(fake, tiny_model_path, nextEditDelayMs=60_000)
    files = iter(range(100))

    async def ask() -> list[dict[str, Any]]:
        uri = f"file:///work/{next(files)}/area.py"  # fresh: nothing kept answers it
        open_doc(client, uri, SOURCE)
        add_depth(client, uri)
        return await next_edit(client, uri, 2, 0, 10)

    try:
        assert await ask() == []
        fake.raw.clear()  # ready now
        deadline = asyncio.get_running_loop().time() + 10
        while not await ask():
            assert asyncio.get_running_loop().time() < deadline, "never asked again"
            await asyncio.sleep(0.1)
        await status(client)  # after the notifications of the answers above
        shown = [(m.type, m.message) for m in client.messages
                 if "engine" in m.message or "not ready" in m.message]
        assert [t for t, _ in shown] == [types.MessageType.Error, types.MessageType.Info], shown
        assert "answers again" in shown[1][1]
    finally:
        await client.shutdown_session()


async def test_a_line_typed_in_a_file_of_lone_cr_breaks_is_in_the_history(
        fake, tiny_model_path, engine) -> None:  # noqa: F811
    """Round 9: an edit's new lines were counted by "\\n" alone, so a line typed in a file
    of lone "\\r" breaks was left out of the recent edits: the model was not asked (no word
    of the edit was new) and a rename there was carried nowhere."""
    fake.pieces = sweep_answer(SOURCE)
    client = await start_with_stand_in(fake, tiny_model_path, nextEditDelayMs=60_000)
    try:
        uri = "file:///work/area.py"
        open_doc(client, uri, SOURCE.replace("\n", "\r"))
        insert(client, uri, 2, 1, 25, "\r    assert depth")  # a new line below line 1
        await next_edit(client, uri, 2, 2, 16)
        (body,) = fake.posts("/v1/completions")
        prompt = engine.detokenize(body["prompt"])
        assert "updated:\n    return width * height\n    assert depth\n" in prompt, prompt
        # A rename in such a file is carried to the next use, as with "\n".
        uri = "file:///work/renamed.py"
        open_doc(client, uri, SOURCE.replace("\n", "\r"))
        rename_width(client, uri)
        (edit,) = await next_edit(client, uri, 2, 0, 10)
        assert edit["range"] == {"start": {"line": 1, "character": 12},
                                 "end": {"line": 1, "character": 16}}
    finally:
        await client.shutdown_session()
