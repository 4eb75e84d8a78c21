"""Pathological documents cost bounded work: a huge line is seen through `max_line_chars`,
deep trees are walked once, long import lists are deduplicated with sets and capped.

Costs are checked by counting the work (characters scanned, parent steps taken), never by
the clock; the end-to-end tests check that the real server still answers another file.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest
import tree_sitter

from lsp_complete import documents, postprocess
from lsp_complete.config import Settings
from lsp_complete.context import ContextLimits
from lsp_complete.documents import Document
from lsp_complete.pipeline import prepare
from lsp_complete.postprocess import clean_completion
from lsp_complete.server import CURSOR_METHOD
from lsp_complete.testing.lsp_client import inline, insert, open_doc, status, suggestion_of
from tests.lsp_helpers import SOURCE, start_server
from tests.raw_lsp import RawServer, encode, frame

# A 4 MB line of minified-looking code, the cursor in its middle.
HUGE_LINE = "x = [" + "'ab', (1, 2), " * (4_000_000 // 14) + "\n"


def test_a_huge_line_reaches_post_processing_as_a_bounded_piece(monkeypatch) -> None:
    limits = ContextLimits()
    doc = Document("file:///work/big.py", "python", 1, HUGE_LINE)
    cursor = len(HUGE_LINE) // 2
    site = prepare(doc, cursor, None, Settings(), limits).site
    assert site.line_prefix == HUGE_LINE[cursor - limits.max_line_chars : cursor]
    assert site.line_suffix == HUGE_LINE[cursor : cursor + limits.max_line_chars]
    assert site.suffix.startswith(site.line_suffix)
    assert site.indent == ""

    scanned: list[int] = []
    real_scan = postprocess._scan

    def counting_scan(text: str, language_id: str):
        scanned.append(len(text))
        return real_scan(text, language_id)

    monkeypatch.setattr(postprocess, "_scan", counting_scan)
    raw = " 'cd', (3, 4)),\n    y = 2"
    clean_completion(raw, site, (), max_lines=12)
    assert scanned, "post-processing scans the cursor line"
    # The per-character scans see the bounded line and the completion, never the 4 MB line.
    assert max(scanned) <= 2 * limits.max_line_chars + len(raw)


def test_the_indent_of_a_huge_line_comes_from_its_start() -> None:
    text = "    y = " + "1 + " * 100_000 + "1\n"
    doc = Document("file:///work/big.py", "python", 1, text)
    site = prepare(doc, len(text) - 2, None, Settings()).site
    assert site.indent == "    "
    assert len(site.line_prefix) <= ContextLimits().max_line_chars


@pytest.fixture
async def client(tiny_model_path: Path):
    c = await start_server(tiny_model_path)
    yield c
    await c.shutdown_session()


async def test_a_huge_line_leaves_the_server_answering_other_files(client) -> None:
    big = "file:///work/big.py"
    open_doc(client, big, HUGE_LINE)
    await asyncio.wait_for(inline(client, big, 0, len(HUGE_LINE) // 2), 120)
    # A line of word characters ending in a bracket before the cursor: the partly typed word
    # is looked for in a bounded window (a regex over the whole line is quadratic).
    word_line = "a" * 2_000_000 + "("
    open_doc(client, "file:///work/word.py", word_line + "\n")
    await asyncio.wait_for(inline(client, "file:///work/word.py", 0, len(word_line)), 120)
    other = "file:///work/other.py"
    open_doc(client, other, SOURCE)
    text, item = suggestion_of(
        await asyncio.wait_for(inline(client, other, 11, len("    for line in read_li")), 120)
    )
    assert item is not None and text.startswith("read_li")
    assert (await status(client))["model"]["state"] == "ready"


# --- deep trees: no upward walks -------------------------------------------------------------

# tree-sitter finds a node's parent (and so its siblings) by descending from the root: each of
# these costs the node's depth.
_UPWARD = frozenset({"parent", "prev_sibling", "prev_named_sibling", "next_sibling",
                     "next_named_sibling"})


class _Steps:
    upward = 0


def _wrap(value):
    if isinstance(value, tree_sitter.Node):
        return _CountingNode(value)
    if isinstance(value, tree_sitter.Tree):
        return _CountingTree(value)
    if isinstance(value, list):
        return [_wrap(v) for v in value]
    return value


def _unwrap(value):
    return value._real if isinstance(value, _CountingNode | _CountingTree) else value


class _CountingNode:
    """A tree-sitter node whose upward steps are counted (everything else is the node's)."""

    def __init__(self, real: tree_sitter.Node) -> None:
        self._real = real

    def __getattr__(self, name: str):
        if name in _UPWARD:
            _Steps.upward += 1
        value = getattr(self._real, name)
        if callable(value):
            return lambda *args, **kw: _wrap(value(*map(_unwrap, args), **kw))
        return _wrap(value)

    def __eq__(self, other: object) -> bool:
        return self._real == _unwrap(other)

    def __hash__(self) -> int:
        return hash(self._real)


class _CountingTree(_CountingNode):
    pass


def _deep(language: str, depth: int) -> tuple[Document, int]:
    """`depth` nested brackets around a line of their own; the cursor on that line."""
    text = "z = 1\nx = " + "[" * depth + "\n1" + "]" * depth + "\n"
    doc = Document(f"file:///work/deep.{language[:2]}", language, 1, text)
    return doc, text.index("\n1") + 2


@pytest.mark.parametrize("language", ["python", "javascript"])
def test_deep_nesting_is_walked_down_once_not_up_step_by_step(language: str) -> None:
    doc, cursor = _deep(language, 2_000)
    assert doc.tree is not None
    doc.tree = doc.structure_tree = _CountingTree(doc.tree)
    _Steps.upward = 0
    prepare(doc, cursor, None, Settings())  # the head's scopes, the block indent
    # On main each of ~2,000 levels was one upward step (each costing its depth) per walk.
    assert _Steps.upward <= 2 * 32


def test_an_edit_deep_inside_is_judged_without_upward_steps() -> None:
    doc, cursor = _deep("javascript", 2_000)
    root = _CountingNode(doc.tree.root_node)
    spec = doc.spec
    start_b = doc.byte_offset(cursor)
    _Steps.upward = 0
    assert documents._edit_is_sound(root, start_b, start_b + 1, spec)
    assert _Steps.upward == 0


def test_node_path_is_the_chain_of_parents() -> None:
    doc = Document("file:///work/a.js", "javascript", 1,
                   "export class A {\n  f(x) {\n    return [x, {y: (1 + 2)}];\n  }\n}\n")
    root = doc.tree.root_node
    byte = doc.text.index("1 + 2")
    inner = root.descendant_for_byte_range(byte, byte)
    chain, node = [], inner
    while node is not None:
        chain.append(node)
        node = node.parent
    assert documents.node_path(root, inner) == chain[::-1]
    assert documents.node_path(root, root) == [root]


async def test_deep_nesting_leaves_the_server_answering(client) -> None:
    doc, cursor = _deep("javascript", 20_000)
    uri = "file:///work/deep.js"
    open_doc(client, uri, doc.text, "javascript")
    line, col = doc.position_at(cursor)
    insert(client, uri, 2, line, col, ", 2")
    await asyncio.wait_for(inline(client, uri, line, col + 3), 120)
    other = "file:///work/other.py"
    open_doc(client, other, SOURCE)
    text, item = suggestion_of(
        await asyncio.wait_for(inline(client, other, 11, len("    for line in read_li")), 120)
    )
    assert item is not None and text.startswith("read_li")
    assert (await asyncio.wait_for(status(client), 120))["model"]["state"] == "ready"


# ---------------------------------------------------------------------- long import lists


def _many_imports(count: int, distinct: int) -> Document:
    text = "".join(f"import pkg.mod{i % distinct}\n" for i in range(count)) + "x = 1\n"
    return Document("file:///work/imports.py", "python", 1, text)


def test_repeated_imports_are_deduplicated_in_one_pass_and_capped() -> None:
    """Before: `ref not in refs` on a list, 10,000 imports took the event loop 7-9 s."""
    from lsp_complete.context.imports import MAX_IMPORTS
    from lsp_complete.context.repo import document_imports

    repeated = document_imports(_many_imports(10_000, 7))
    assert [r.module for r in repeated] == [f"pkg.mod{i}" for i in range(7)]
    distinct = document_imports(_many_imports(10_000, 10_000))
    assert len(distinct) == MAX_IMPORTS  # the first ones, in file order
    assert [r.module for r in distinct[:3]] == ["pkg.mod0", "pkg.mod1", "pkg.mod2"]


def test_resolving_imports_stops_once_cancelled(tmp_path: Path) -> None:
    """Before: all 10,000 were resolved on the worker (3.1 s) though nobody wanted them."""
    from lsp_complete.context.imports import resolve_imports
    from lsp_complete.context.repo import document_imports
    from lsp_complete.workspace import Workspace

    (tmp_path / "pkg").mkdir()
    for i in range(3):
        (tmp_path / "pkg" / f"mod{i}.py").write_text(f"X{i} = 1\n")
    (tmp_path / "main.py").write_text("")
    refs = document_imports(_many_imports(300, 300))
    ws = Workspace()
    ws.set_roots([tmp_path])
    asked = 0

    def cancelled_after_two() -> bool:
        nonlocal asked
        asked += 1
        return asked > 2

    found = resolve_imports(refs, tmp_path / "main.py", "python", ws, cancelled_after_two)
    assert asked == 3  # one look per import until the answer is no longer wanted
    assert [t.path.name for t in found] == ["mod0.py", "mod1.py"]
    every = resolve_imports(refs, tmp_path / "main.py", "python", ws)
    assert [t.path.name for t in every] == ["mod0.py", "mod1.py", "mod2.py"]


def test_one_import_of_many_names_is_capped_and_its_lookups_cancellable(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Round 3: `from pkg import (n0, ..., n9999)` looked each name up as a submodule of pkg
    (four disk checks each): 3.3 s on the worker for one statement, with no look at
    cancellation between names."""
    from lsp_complete.context.imports import MAX_NAMES, resolve_imports
    from lsp_complete.context.repo import document_imports
    from lsp_complete.workspace import Workspace

    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("n1 = 1\n")
    (tmp_path / "pkg" / "n2.py").write_text("X = 2\n")
    text = "from pkg import (" + ", ".join(f"n{i}" for i in range(10_000)) + ")\nx = 1\n"
    (tmp_path / "main.py").write_text(text)
    (ref,) = document_imports(Document((tmp_path / "main.py").as_uri(), "python", 1, text))
    assert len(ref.names) == len(ref.aliases) == MAX_NAMES  # the first ones, in file order
    assert ref.names[:3] == ("n0", "n1", "n2")

    ws = Workspace()
    ws.set_roots([tmp_path])
    lookups = 0
    is_file = Workspace.is_file

    def counted(self: Workspace, path: Path) -> bool:
        nonlocal lookups
        lookups += 1
        return is_file(self, path)

    monkeypatch.setattr(Workspace, "is_file", counted)
    found = resolve_imports((ref,), tmp_path / "main.py", "python", ws)
    assert sorted(t.path.name for t in found) == ["__init__.py", "n2.py"]
    assert lookups <= 4 * MAX_NAMES + 8

    asked, lookups = 0, 0

    def cancelled_after_three() -> bool:
        nonlocal asked
        asked += 1
        return asked > 3

    resolve_imports((ref,), tmp_path / "main.py", "python", ws, cancelled_after_three)
    assert lookups <= 16  # the module, then two names: no name is looked up once cancelled


def test_the_outline_looks_at_a_bounded_number_of_entries(monkeypatch) -> None:
    """Round 3: in a file of 90,000 top-level statements, an entry too long for the room left
    was skipped and the next one tried, so every entry of the file was rendered: 2 s of
    prepare on the event loop per suggestion (keystrokes in 3.5 MB of Python held it 1.6 s)."""
    from lsp_complete.context import head

    text = "".join(f"value_{i} = compute(alpha, beta[{i}])\n" for i in range(20_000))
    doc = Document("file:///many.py", "python", 1, text)
    rendered = 0
    render = head._HeadBuilder._render

    def counted(self, *args):
        nonlocal rendered
        rendered += 1
        return render(self, *args)

    monkeypatch.setattr(head._HeadBuilder, "_render", counted)
    cursor = doc.offset_at(10_000, 5, "utf-16")
    built = head.build_head(doc, cursor, 9_990, 10_010)
    assert rendered <= head.MAX_OUTLINE_LOOKS
    assert "value_9989 = compute(alpha, beta[9989])" in built  # the nearest ones still
    assert "value_10011 = compute(alpha, beta[10011])" in built


def test_the_head_of_a_file_of_many_statements_reads_only_those_near_the_top_and_cursor(
        monkeypatch) -> None:
    """Round 3: after the outline's cap, head.build still made Python passes over every
    top-level item (named_items, the import scan): 0.44 s a prepare at 90,000 statements,
    on the event loop. A file of many items is read at its top (imports) and around the
    cursor; the head is the one the whole list gives."""
    from lsp_complete.context import head, nodes

    text = "import os\nimport sys\n" + "".join(
        f"value_{i} = compute(alpha, beta[{i}])\n" for i in range(20_000))
    doc = Document("file:///many.py", "python", 1, text)
    cursor = doc.offset_at(10_000, 5, "utf-16")
    whole = head._HeadBuilder(doc, doc.spec, doc.structure_tree, cursor, 9_990, 10_010,
                              ContextLimits())
    looked = 0
    named = nodes.named_items

    def counted(parent, spec, children=None):
        items = named(parent, spec, children)
        nonlocal looked
        looked += len(items)
        return items

    monkeypatch.setattr(head, "named_items", counted)
    built = head.build_head(doc, cursor, 9_990, 10_010)
    assert looked <= head.HEAD_TOP_ITEMS + 2 * head.MAX_OUTLINE_LOOKS
    assert built.startswith("import os\nimport sys\n")
    monkeypatch.setattr(head, "HEAD_WINDOWED_ABOVE", 10**9)  # the whole list, as before
    assert built == whole.build()


# --- a flood of cursor notifications ---------------------------------------------------------

MOVES = 2000


def _cursor_move(uri: str, line: int) -> bytes:
    return frame(encode({"jsonrpc": "2.0", "method": CURSOR_METHOD, "params": {
        "textDocument": {"uri": uri}, "position": {"line": line, "character": 4}}}))


def test_a_burst_of_cursor_moves_prepares_only_the_newest(tiny_model_path: Path) -> None:
    """A client that sends a cursor notification per cursor move (a key held down) in a large
    file: each one prepared a prompt on the event loop (9 ms at 60,000 lines), so 20,000 of
    them kept a request behind them waiting for a minute. What the client sent already is
    read before a move is acted on: of a burst written at once only the newest moves are
    (about one per chunk the reader takes in), and it is the newest that is prepared."""
    uri = "file:///work/large.py"
    text = "".join(f"def f{i}(x):\n    return x + {i}\n" for i in range(3000))
    server = RawServer(tiny_model_path)
    try:
        server.initialize()
        assert server.wait_ready()["model"]["state"] == "ready"
        server.send({"jsonrpc": "2.0", "method": "textDocument/didOpen", "params": {
            "textDocument": {"uri": uri, "languageId": "python", "version": 1, "text": text}}})
        before = server.wait_idle()["counters"]["cursorMoves"]
        # Each to a line of its own: every move acted on would prepare a prompt.
        last = 2 * MOVES - 1
        server.write(b"".join(_cursor_move(uri, 2 * n + 1) for n in range(MOVES)))
        acted = server.wait_idle()["counters"]["cursorMoves"] - before
        assert 1 <= acted <= MOVES // 20, acted
        # The newest was acted on: the prompt is anchored at its line (a move there needs
        # nothing more), not at a line the burst went past (a move there does).
        server.write(_cursor_move(uri, last))
        assert server.wait_idle()["counters"]["cursorMoves"] - before == acted
        server.write(_cursor_move(uri, 3))
        assert server.wait_idle()["counters"]["cursorMoves"] - before == acted + 1
    finally:
        server.close()


def test_a_didchange_of_thousands_of_changes_is_parsed_once(tiny_model_path: Path) -> None:
    """A replace-all (or a formatter's edits, or many cursors) sends its changes in one
    didChange, later positions first. Each change parsed the file again on the event loop:
    2,000 of them in 430 KB of Python held every other file's requests for 15 s on a
    2-core machine. They are parsed once now: another file is answered at once, and the
    file's suggestion is the one a freshly opened file with that text gets."""
    big, small = "file:///work/replace/big.py", "file:///work/replace/small.py"
    fresh = "file:///work/fresh/big.py"
    text = "import os\n\n" + "".join(f"def f{i}(total):\n    return total + {i}\n\n"
                                     for i in range(10_000))
    # The last 4,000 "total"s, later first: each an offset of the text before all of them.
    found = [(line, column) for line, row in enumerate(text.split("\n"))
             if (column := row.find("total")) >= 0][-4000:]
    changes = [{"range": {"start": {"line": line, "character": column},
                          "end": {"line": line, "character": column + 5}}, "text": "acc"}
               for line, column in reversed(found)]
    lines = text.split("\n")
    for line, column in found:
        lines[line] = lines[line][:column] + "acc" + lines[line][column + 5:]
    final = "\n".join(lines)
    server = RawServer(tiny_model_path)
    try:
        server.initialize()
        assert server.wait_ready()["model"]["state"] == "ready"
        for uri, source in ((big, text), (small, "def g(x):\n    return x\n")):
            server.send({"jsonrpc": "2.0", "method": "textDocument/didOpen", "params": {
                "textDocument": {"uri": uri, "languageId": "python", "version": 1,
                                 "text": source}}})
        server.wait_idle()
        started = time.monotonic()
        server.notify("textDocument/didChange", {"textDocument": {"uri": big, "version": 2},
                                                 "contentChanges": changes})
        answer = server.call("textDocument/inlineCompletion", {
            "textDocument": {"uri": small}, "position": {"line": 1, "character": 4},
            "context": {"triggerKind": 2}}, timeout=120)
        took = time.monotonic() - started
        assert "result" in answer
        # (Over 15 s before, for half as many changes; about 1 s now on 2 busy cores.)
        assert took < 8, took
        server.send({"jsonrpc": "2.0", "method": "textDocument/didOpen", "params": {
            "textDocument": {"uri": fresh, "languageId": "python", "version": 1,
                             "text": final}}})
        spot = {"position": {"line": len(lines) - 3, "character": 11},
                "context": {"triggerKind": 2}}
        edited, reference = (server.call("textDocument/inlineCompletion", {
            "textDocument": {"uri": uri}, **spot}, timeout=60)["result"]["items"]
            for uri in (big, fresh))
        assert edited  # (the tiny model writes something)
        assert [i["insertText"] for i in edited] == [i["insertText"] for i in reference]
        assert "Traceback" not in server.stderr()
    finally:
        server.close()
