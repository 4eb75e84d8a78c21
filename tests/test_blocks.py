"""Blocks after a one-line answer (issue 31): on an empty line between statements the first
line is answered as any line is, the block it begins is generated in idle time, kept for
typing-ahead, and announced with `lsp-complete/blockReady`. The block is cut to the enclosing
block's scope, to what does not repeat the lines that follow, and to what parses.

End to end through the real server and a scripted llama-server stand-in (the tiny model writes
gibberish, which no grammar accepts: the real-model test is in test_real_model.py)."""

from __future__ import annotations

import asyncio
import dataclasses

import pytest
from lsprotocol import types

from lsp_complete.context.block_shape import (
    among_statements,
    block_may_follow,
    cut_to_parsing,
    statements_indent,
)
from lsp_complete.documents import Document
from lsp_complete.postprocess import CompletionSite, count_block_lines
from lsp_complete.server.protocol import BLOCK_READY_METHOD
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
from tests.test_remote_engine import fake, remote_options  # noqa: F401  (the fixture)

SOURCE = "def total(items):\n    count = 0\n    \n    return count\n"
LINE, COL = 2, 4  # the empty, indented line between the two statements


def test_a_block_may_follow_on_an_empty_line_between_statements_only() -> None:
    doc = Document("file:///w/a.py", "python", 1, SOURCE)
    assert block_may_follow(doc, doc.offset_at(LINE, COL))
    assert not block_may_follow(doc, doc.offset_at(1, 5))  # text on the line
    inside = Document("file:///w/b.py", "python", 1, "x = f(\n    1,\n    \n)\n")
    assert not block_may_follow(inside, inside.offset_at(2, 4))  # inside a call's arguments
    plain = Document("file:///w/c.txt", "plaintext", 1, "a\n\nb\n")
    assert not block_may_follow(plain, plain.offset_at(1, 0))  # no grammar, no block


# A hole inside an `if` body whose lines go on into its `else:` (HumanEval-MultiLineInfilling
# has many such): the enclosing definition, not the `if`, bounds the block's statements.
BRANCHES = ("def f(n):\n    out = []\n    for i in range(n):\n        if i % 2:\n"
            "            y = i * 2\n            \n            out.append(x)\n    return out\n")
BRANCH_LINE, BRANCH_COL = 5, 12


NESTED = ("def f(xs):\n    def ok(n):\n        for i in xs:\n            return n > i\n\n    \n"
          "    return [x for x in xs if ok(x)]\n")


@pytest.mark.parametrize(("language", "text", "line", "expected"), [
    ("python", BRANCHES, BRANCH_LINE, 0),
    ("python", "class A:\n    def m(self):\n        if self:\n            a = 1\n"
               "            \n", 4, 4),
    ("javascript", "run(() => {\n  if (a) {\n    b();\n    \n  }\n});\n", 3, 0),
    ("python", "for i in x:\n    if i:\n        y = 1\n        \n", 3, -1),  # top level
    # Below a nested function, at its column: the outer function's statements (HumanEval/94).
    ("python", NESTED, 5, 0),
    # Still in the nested function's body (deeper than its `def`): the nested one.
    ("python", NESTED.replace("\n    \n", "\n        \n"), 5, 4),
    # Below a method, at the class body's column: the class's.
    ("python", "class A:\n    def m(self):\n        return 1\n\n    \n", 4, 0),
    ("javascript", "function f() {\n  function g() {\n    return 1;\n  }\n  \n}\n", 4, 0),
])
def test_statements_go_down_to_the_enclosing_definition(language, text, line,
                                                        expected) -> None:
    doc = Document("file:///w/s", language, 1, text)
    cursor = doc.offset_at(line, len(doc.line_text(line)))
    assert statements_indent(doc, cursor) == expected


def test_an_empty_line_among_statements_but_not_before_a_closer() -> None:
    doc = Document("file:///w/a.py", "python", 1, BRANCHES)
    assert among_statements(doc, doc.offset_at(BRANCH_LINE, BRANCH_COL))
    body = Document("file:///w/b.py", "python", 1, "def f(x):\n    \n")
    assert among_statements(body, body.offset_at(1, 4))  # a new body, down to its def
    call = Document("file:///w/e.py", "python", 1, "x = f(\n    1,\n    \n)\n")
    assert not among_statements(call, call.offset_at(2, 4))  # inside a call's arguments
    c = Document("file:///w/c.c", "c", 1, "int f(void) {\n  int a = 1;\n  \n}\n")
    assert not among_statements(c, c.offset_at(2, 2))  # the block's closer comes next
    end = Document("file:///w/d.py", "python", 1, "def f(x):\n    y = 1\n    \n")
    assert among_statements(end, end.offset_at(2, 4))  # the file's end


def test_a_block_of_statements_goes_on_past_the_cursors_own_block_only() -> None:
    """Past the `if` body into its `else:`, and a bracket opened before the cursor line is
    closed, but not down to the definition's own level; a block not of statements keeps to
    the cursor's block (and to an opened block's body)."""
    suffix = "\n            out.append(x)\n    return out\n"
    block = ("x = -i\n        else:\n            x = i\n    return out\n\ndef g():\n"
             "    pass")
    site = CompletionSite.make("            ", suffix, block_indent=8, multiline=True,
                               language_id="python")
    statements = dataclasses.replace(site, statements=True, block_indent=0)
    assert count_block_lines(block, site) == 1
    assert count_block_lines(block, statements) == 5  # up to the blank line before `def g`
    opened = "if x:\n                y = 1\n            z = 2\n        w = 3\nq = 3"
    assert count_block_lines(opened, site) == 2 and count_block_lines(opened, statements) == 4
    closing = "'b': 2,\n    }\nreturn d"
    table = CompletionSite.make("        ", "\n    return d\n", block_indent=4, multiline=True,
                                language_id="python")
    assert count_block_lines(closing, table) == 1
    assert count_block_lines(closing, dataclasses.replace(table, statements=True,
                                                          block_indent=0)) == 2


@pytest.mark.parametrize(("language", "before", "block", "after", "kept"), [
    ("python", "def f(x):\n    ", "if x:\n        return 2\n    z = (", "\n    return 1\n",
     "if x:\n        return 2"),
    ("c", "int f(int a) {\n  ", "a += 1;\n  if (a) {\n    a++;", "\n  return a;\n}\n",
     "a += 1;"),
    ("javascript", "function f(a) {\n  ", "a += 1;\n  return a;", "\n}\n",
     "a += 1;\n  return a;"),
])
def test_a_block_is_cut_to_the_lines_that_parse(language, before, block, after, kept) -> None:
    assert cut_to_parsing(before, block, after, language) == kept


def test_a_window_cut_mid_construct_does_not_count_against_the_block() -> None:
    # The window starts inside a string the grammar cannot close: errors of its own.
    before = '"""never closed\ndef f(x):\n    '
    assert cut_to_parsing(before, "y = 1\n    z = 2", "\n    return x\n", "python") == (
        "y = 1\n    z = 2")


async def _on_stand_in(fake, tiny_model_path, **options):  # noqa: F811
    """The real server, its completions from the scripted llama-server stand-in."""
    return await start_server(None, remote_options(fake.url, tiny_model_path, remoteHealing="off",
                                                   debounceMs=0, **options))


async def _asked_twice(fake, poll_s: float) -> None:  # noqa: F811
    """Until the stand-in was asked twice: the line, then the work after it."""
    for _ in range(100):
        if len(fake.posts("/v1/completions")) >= 2:
            return
        await asyncio.sleep(poll_s)


async def _first_answer(client, uri: str, text: str, line: int, col: int) -> str:
    """Open `text` and ask at (line, col): the suggestion."""
    open_doc(client, uri, text)
    first, _ = suggestion_of(await inline(client, uri, line, col))
    return first


async def _line_then_block(client, uri: str, text: str, line: int, col: int):
    """Open `text`, ask at (line, col), wait for blockReady, ask again: (the first answer and
    its item, blockReady's params, the second answer)."""
    ready = asyncio.ensure_future(client.wait_for_notification(BLOCK_READY_METHOD))
    open_doc(client, uri, text)
    first = suggestion_of(await inline(client, uri, line, col))
    params = await asyncio.wait_for(ready, 60)
    again, _ = suggestion_of(await inline(client, uri, line, col))
    return first, params, again


async def test_the_first_line_comes_alone_then_the_block_is_announced_and_served(
        fake, tiny_model_path) -> None:  # noqa: F811
    fake.pieces = ["for item in items:", "\n", "        count += item", "\n",
                   "    return count", "\n", "\n"]
    client = await _on_stand_in(fake, tiny_model_path)
    try:
        uri = "file:///work/total.py"
        (first, _), params, again = await _line_then_block(client, uri, SOURCE, LINE, COL)
        assert first == "for item in items:"  # the line, at a line's speed
        assert params.textDocument.uri == uri and params.textDocument.version == 1
        assert (params.position.line, params.position.character) == (LINE, COL)
        # Its scope's lines, without the `return count` that already follows.
        assert again == "for item in items:\n        count += item"
        # The line, then the block in both layouts: blockReady comes after the first, so
        # the second may still be on its way.
        asked = len(await _posts(fake, 3))
        assert asked == 3
        insert(client, uri, 2, LINE, COL, "for")  # typing on through the first line
        typed, _ = suggestion_of(await inline(client, uri, LINE, COL + 3))
        assert typed == "for item in items:\n        count += item"
        assert len(fake.posts("/v1/completions")) == asked  # served by typing-ahead
        assert (await status(client))["counters"]["blocks"] == 1
    finally:
        await client.shutdown_session()


async def _posts(fake, count: int) -> list:  # noqa: F811
    """The prompts of the first `count` requests to the stand-in, once it has had them."""
    for _ in range(400):
        if len(fake.posts("/v1/completions")) >= count:
            break
        await asyncio.sleep(0.01)
    return [post["prompt"] for post in fake.posts("/v1/completions")[:count]]


def _keystroke_layout_posts(fake, engine) -> int:  # noqa: F811
    """Requests to the stand-in in the keystroke layout (all but the trained layout's
    blocks, whose prompt ends with the middle marker)."""
    middle = engine.tokenize("<|fim_middle|>", True)[0]
    return sum(post["prompt"][-1] != middle for post in fake.posts("/v1/completions"))


async def test_the_block_is_asked_again_with_the_prefix_ending_at_the_cursor(
        fake, tiny_model_path, engine) -> None:  # noqa: F811
    """The line and its block are asked in the keystroke layout (the cursor line's
    indentation after the middle marker, one space healed); then the block once more as FIM
    models are trained: the indentation ends the prefix, the middle marker ends the prompt,
    nothing healed, the head and the window shared."""
    fake.pieces = ["for item in items:", "\n", "        count += item", "\n"]
    client = await _on_stand_in(fake, tiny_model_path)
    try:
        (first, _), _, again = await _line_then_block(client, "file:///work/total.py", SOURCE,
                                                      LINE, COL)
        assert again == "for item in items:\n        count += item"
        line, block, trained = await _posts(fake, 3)
        assert block == line
        suffix_mark, middle_mark = (engine.tokenize(mark, True)
                                    for mark in ("<|fim_suffix|>", "<|fim_middle|>"))
        indent = engine.tokenize("count = 0\n    ")[-1:]  # the cursor line's indentation
        assert line[-1] == " " and middle_mark[0] in line  # (healed: the middle follows it)
        assert trained[-1] == middle_mark[0]
        cut = trained.index(suffix_mark[0])
        assert trained[cut - 1 : cut] == indent
        assert trained[:cut - 1] == line[:cut - 1]
        assert (await status(client))["counters"]["blocks"] == 1  # the same block: once
    finally:
        await client.shutdown_session()


async def test_the_trained_layouts_block_replaces_the_first_where_it_goes_on_from_the_line(
        fake, tiny_model_path) -> None:  # noqa: F811
    """The keystroke layout's block ended with the line (no block); the trained layout's goes
    on from it: it is kept and announced."""
    fake.answers = [["for item in items:", "\n"],  # the line
                    ["for item in items:", "\n", "\n"],  # its block: the line alone
                    ["for item in items:", "\n", "        count += item", "\n"]]  # trained
    client = await _on_stand_in(fake, tiny_model_path)
    try:
        (first, _), _, again = await _line_then_block(client, "file:///work/total.py", SOURCE,
                                                      LINE, COL)
        assert first == "for item in items:"
        assert again == "for item in items:\n        count += item"
    finally:
        await client.shutdown_session()


async def test_a_trained_layouts_block_that_starts_otherwise_than_the_line_is_not_shown(
        fake, tiny_model_path) -> None:  # noqa: F811
    """Where the trained layout's block starts with another line than the one shown, the
    keystroke layout's block stays: what is served begins with what the user saw."""
    fake.answers = [["for item in items:", "\n"],  # the line
                    ["for item in items:", "\n", "        count += item", "\n"],  # its block
                    ["while items:", "\n", "        items.pop()", "\n"]]  # trained layout
    client = await _on_stand_in(fake, tiny_model_path)
    try:
        uri = "file:///work/total.py"
        (first, _), _, _ = await _line_then_block(client, uri, SOURCE, LINE, COL)
        await _posts(fake, 3)
        await asyncio.sleep(0.3)
        again, _ = suggestion_of(await inline(client, uri, LINE, COL))
        assert again == "for item in items:\n        count += item"
        assert (await status(client))["counters"]["blocks"] == 1
    finally:
        await client.shutdown_session()


async def test_a_block_in_a_branch_goes_on_into_the_else(fake, tiny_model_path) -> None:  # noqa: F811
    """The hole in the `if` body that the `else:` completes: the block served keeps the
    `else:` and its line, not the `return` the suffix already has."""
    fake.pieces = ["x = -y", "\n", "        else:", "\n", "            x = i", "\n",
                   "            out.append(x)", "\n", "    return out", "\n"]
    client = await _on_stand_in(fake, tiny_model_path)
    try:
        (first, _), _, again = await _line_then_block(client, "file:///work/branches.py",
                                                      BRANCHES, BRANCH_LINE, BRANCH_COL)
        assert first == "x = -y"
        assert again == "x = -y\n        else:\n            x = i"
    finally:
        await client.shutdown_session()


async def test_no_block_where_one_line_is_all_there_is(fake, tiny_model_path) -> None:  # noqa: F811
    """The model's own end after the first line: nothing is announced, one line is shown."""
    fake.pieces = ["count += 1", "\n", "    return count", "\n"]
    client = await _on_stand_in(fake, tiny_model_path)
    try:
        uri = "file:///work/one.py"
        first = await _first_answer(client, uri, SOURCE, LINE, COL)
        assert first == "count += 1"
        await _asked_twice(fake, 0.05)  # until the idle block work has run
        await asyncio.sleep(0.2)
        again, _ = suggestion_of(await inline(client, uri, LINE, COL))
        assert again == "count += 1"
        assert (await status(client))["counters"]["blocks"] == 0
    finally:
        await client.shutdown_session()


async def test_a_typist_who_types_on_through_the_line_gets_the_block_without_resting(
        fake, tiny_model_path, engine) -> None:  # noqa: F811
    """The block is written at once, while typing-ahead answers the keys that follow the
    line: a typist who never pauses still finds it at the next line (the idle delay here is
    a minute, so no rest can explain it)."""
    fake.pieces = ["for item in items:", "\n", "        count += item", "\n"]
    client = await _on_stand_in(fake, tiny_model_path, idleReanchorMs=60_000)
    try:
        uri = "file:///work/typist.py"
        ready = asyncio.ensure_future(client.wait_for_notification(BLOCK_READY_METHOD))
        first = await _first_answer(client, uri, SOURCE, LINE, COL)
        assert first == "for item in items:"
        insert(client, uri, 2, LINE, COL, "for")  # typing on, as shown
        typed, _ = suggestion_of(await inline(client, uri, LINE, COL + 3))
        assert typed.startswith("for item in items:")
        await asyncio.wait_for(ready, 10)
        insert(client, uri, 3, LINE, COL + 3, " item in items:\n        ")
        after, _ = suggestion_of(await inline(client, uri, LINE + 1, 8))
        assert after == "count += item"  # the block's next line, by typing-ahead
        assert _keystroke_layout_posts(fake, engine) == 2  # the line, then the block
    finally:
        await client.shutdown_session()


async def test_a_key_typed_on_into_the_next_line_is_answered_by_the_block_being_written(
        fake, tiny_model_path) -> None:  # noqa: F811
    """The typist accepts the line and goes on to the next while the block is still being
    written: that key waits for the block to write the line it is on (not for the whole
    block, and without asking the model again), and is answered with it."""
    fake.pieces = ["for item in items:", "\n", "        count += item", "\n",
                   "        count += 1", "\n", "        count -= 1", "\n"]
    fake.hold_at = 4  # the block is still being written, past its second line
    client = await _on_stand_in(fake, tiny_model_path, idleReanchorMs=60_000)
    try:
        uri = "file:///work/typist.py"
        first = await _first_answer(client, uri, SOURCE, LINE, COL)
        assert first == "for item in items:"
        insert(client, uri, 2, LINE, COL, "for item in items:\n")  # Tab, then Enter
        after, _ = suggestion_of(await inline(client, uri, LINE + 1, 0))
        assert after == "        count += item"
        counters = (await status(client))["counters"]
        assert counters["blockLines"] == 1 and counters["blocks"] == 0  # not finished yet
        assert len(fake.posts("/v1/completions")) == 2  # the line, then the block
    finally:
        fake.release.set()
        await client.shutdown_session()


async def _writing_a_block(fake, tiny_model_path, uri: str):  # noqa: F811
    """A server whose first answer at the spot was the line, and whose block for it is being
    written now, held before its third line until `fake.release`: its client."""
    fake.pieces = ["for item in items:", "\n", "        count += item", "\n",
                   "        count += 1", "\n"]
    fake.hold_at = 4
    client = await _on_stand_in(fake, tiny_model_path)
    first = await _first_answer(client, uri, SOURCE, LINE, COL)
    assert first == "for item in items:"
    await _asked_twice(fake, 0.02)  # until the block is being written
    return client


async def test_a_keystroke_that_leaves_the_suggestion_stops_its_block(
        fake, tiny_model_path) -> None:  # noqa: F811
    """A key that typing-ahead cannot serve: the block being written for the old text stops,
    and is neither kept nor announced."""
    uri = "file:///work/typist.py"
    client = await _writing_a_block(fake, tiny_model_path, uri)
    try:
        insert(client, uri, 2, LINE, COL, "x")  # not what was suggested
        await inline(client, uri, LINE, COL + 1)
        fake.release.set()  # the rest of the block, were it still asked for
        await asyncio.sleep(1.0)  # past the end the block would have had
        assert (await status(client))["counters"]["blocks"] == 0
    finally:
        await client.shutdown_session()


async def test_a_cursor_moved_off_the_suggestion_stops_its_block(fake, tiny_model_path) -> None:  # noqa: F811
    """Our clients say where the cursor rests: away from the suggestion (not where typing on
    through it leaves it), the block being written for it stops, unannounced."""
    uri = "file:///work/moved.py"
    client = await _writing_a_block(fake, tiny_model_path, uri)
    try:
        insert(client, uri, 2, LINE, COL, "for")  # typing on through it
        typed, _ = suggestion_of(await inline(client, uri, LINE, COL + 3))
        assert typed.startswith("for item in items:")
        move_cursor(client, uri, LINE, COL + 3)  # where typing left it: it goes on
        move_cursor(client, uri, 0, 0)  # away
        await status(client)  # (after the notifications before it)
        fake.release.set()  # the rest of the block, were it still asked for
        await asyncio.sleep(1.0)  # past the end the block would have had
        assert (await status(client))["counters"]["blocks"] == 0
    finally:
        await client.shutdown_session()


async def test_a_block_being_written_when_the_settings_change_is_not_kept(
        fake, tiny_model_path) -> None:  # noqa: F811
    """The settings changed (typing-ahead was cleared) while the block after the line shown
    was being written: the block was planned with the old ones, and is neither kept for
    typing-ahead nor announced."""
    uri = "file:///work/settings.py"
    client = await _writing_a_block(fake, tiny_model_path, uri)
    try:
        client.workspace_did_change_configuration(types.DidChangeConfigurationParams(
            settings={"lspComplete": {"replaceLineSuffix": True}}))
        await status(client)  # (answered once the change is applied)
        fake.release.set()  # the rest of the block
        assert (await wait_idle(client))["scheduler"]["idle"]  # written to its end
        assert (await status(client))["counters"]["blocks"] == 0
    finally:
        await client.shutdown_session()


async def test_no_idle_work_after_a_line_that_ends_its_line(fake, tiny_model_path) -> None:  # noqa: F811
    """A one-line answer at the end of a line where no block follows is all the model is
    asked for: writing the next line in idle time ahead of Enter was measured to cost CPU
    per key and fresh answers for no characters saved (docs/bench/2026-12-05b-menu)."""
    fake.pieces = ["sum(items)", "\n", "    return total / len(items)", "\n", "\n"]
    client = await _on_stand_in(fake, tiny_model_path)
    try:
        mean = "def mean(items):\n    total = \n\n"
        first = await _first_answer(client, "file:///work/mean.py", mean, 1, 12)
        assert first == "sum(items)"
        await asyncio.sleep(0.5)
        assert len(fake.posts("/v1/completions")) == 1
    finally:
        await client.shutdown_session()


# After an opener a block is wanted at once (`wants_multiline`): still the first line comes
# at a line's speed, and the block after it.
OPENER = "def total(items):\n    count = 0\n    for item in items:\n        \n    return count\n"


async def test_after_an_opener_the_first_line_comes_alone_then_the_block(
        fake, tiny_model_path) -> None:  # noqa: F811
    fake.pieces = ["count += item", "\n", "        seen += 1", "\n", "    return count", "\n"]
    client = await _on_stand_in(fake, tiny_model_path)
    try:
        (first, _), _, again = await _line_then_block(client, "file:///work/opener.py",
                                                      OPENER, 3, 8)
        assert first == "count += item"
        assert again == "count += item\n        seen += 1"
        (request, *_) = fake.posts("/v1/completions")
        assert request["stop"] and "\n" in request["stop"]  # asked for one line
    finally:
        await client.shutdown_session()


async def test_a_line_end_the_block_is_slow_to_reach_does_not_stop_it(
        fake, tiny_model_path, engine) -> None:  # noqa: F811
    """Tab while the block after the line is still far from written: the request at the
    line's end gets nothing after its wait, without asking the model (that would stop the
    work), and Enter then finds the block's next line."""
    fake.pieces = ["for item in items:", "\n", "        count += item", "\n", "    return count",
                   "\n", "\n"]
    fake.hold_at = 4  # past the line after it, until the test ends
    client = await _on_stand_in(fake, tiny_model_path)
    try:
        uri = "file:///work/slow.py"
        line = "for item in items:"
        assert await _first_answer(client, uri, SOURCE, LINE, COL) == line
        await _asked_twice(fake, 0.02)
        insert(client, uri, 2, LINE, COL, line)  # Tab
        assert suggestion_of(await inline(client, uri, LINE, COL + len(line)))[0] == ""
        insert(client, uri, 3, LINE, COL + len(line), "\n        ")  # Enter
        below, _ = suggestion_of(await inline(client, uri, LINE + 1, 8))
        assert below == "count += item"
        assert _keystroke_layout_posts(fake, engine) == 2  # the line, then the block
    finally:
        fake.release.set()
        await client.shutdown_session()
