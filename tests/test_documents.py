"""Document: positions in utf-8/16/32, clamping, line breaks, incremental edits and trees."""

from __future__ import annotations

import json.decoder
import random
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import tree_sitter

from lsp_complete import documents
from lsp_complete.documents import Document
from lsp_complete.languages import spec_for
from tests.work_count import work_of

ENCODINGS = ("utf-16", "utf-8", "utf-32")
# CJK, an emoji outside the BMP (a surrogate pair in UTF-16), a combining mark (e + U+0301).
MIXED = "a😀b中e\u0301f"


# ---------------------------------------------------------------- reference model
def _units(ch: str, encoding: str) -> int:
    if encoding == "utf-16":
        return 2 if ord(ch) > 0xFFFF else 1
    if encoding == "utf-8":
        return len(ch.encode("utf-8", "surrogatepass"))
    return 1


def _ref_lines(text: str) -> list[tuple[int, int]]:
    """(start, end) of each line, break excluded, by a plain character loop."""
    lines, start, i = [], 0, 0
    while i < len(text):
        if text[i] in "\r\n":
            lines.append((start, i))
            i += 2 if text[i] == "\r" and text[i + 1:i + 2] == "\n" else 1
            start = i
        else:
            i += 1
    lines.append((start, len(text)))
    return lines


def _ref_offset(text: str, line: int, character: int, encoding: str) -> int:
    lines = _ref_lines(text)
    if line < 0:
        return 0
    if line >= len(lines):
        return len(text)
    start, end = lines[line]
    count = 0
    for i in range(start, end):
        width = _units(text[i], encoding)
        if count + width > character:
            return i
        count += width
    return end


def _ref_position(text: str, offset: int, encoding: str) -> tuple[int, int]:
    lines = _ref_lines(text)
    for number, (start, end) in enumerate(lines):
        if offset <= end or number == len(lines) - 1:
            return number, sum(_units(ch, encoding) for ch in text[start:offset])
    raise AssertionError("unreachable")


def _fresh_tree(doc: Document) -> str:
    spec = spec_for(doc.language_id, doc.uri)
    assert spec is not None
    # (The parser reads a lone "\r" as "\n": grammars break lines at "\n" only.)
    source = re.sub(r"\r(?!\n)", "\n", doc.text).encode("utf-8")
    return str(tree_sitter.Parser(spec.language).parse(source).root_node)


def _assert_consistent(doc: Document, reference: str) -> None:
    assert doc.text == reference
    lines = _ref_lines(reference)
    assert doc.line_count == len(lines)
    assert [doc.line_range(i) for i in range(len(lines))] == lines
    assert doc.source == reference.encode("utf-8")
    if doc.tree is not None:
        assert str(doc.tree.root_node) == _fresh_tree(doc)


# ---------------------------------------------------------------- positions
@pytest.mark.parametrize("encoding", ENCODINGS)
def test_positions_round_trip_on_mixed_text(encoding: str) -> None:
    text = f"x = 1\n{MIXED} = '{MIXED}'\r\n  {MIXED}\rend😀"
    doc = Document("file:///m.py", "python", 1, text)
    for offset in range(len(text) + 1):
        line, character = doc.position_at(offset, encoding)
        if text[offset - 1:offset + 1] == "\r\n":
            continue  # between "\r" and "\n": not a position an editor can name
        assert (line, character) == _ref_position(text, offset, encoding), offset
        assert doc.offset_at(line, character, encoding) == offset


def test_units_per_encoding() -> None:
    doc = Document("file:///m.txt", "plaintext", 1, MIXED)
    # a, 😀, b, 中, e, U+0301, f
    assert [doc.position_at(i, "utf-16")[1] for i in range(8)] == [0, 1, 3, 4, 5, 6, 7, 8]
    assert [doc.position_at(i, "utf-8")[1] for i in range(8)] == [0, 1, 5, 6, 9, 10, 12, 13]
    assert [doc.position_at(i, "utf-32")[1] for i in range(8)] == list(range(8))
    assert doc.byte_offset(3) == 6
    assert doc.offset_of_byte(6) == 3


def test_inside_a_character_snaps_to_its_start() -> None:
    doc = Document("file:///m.txt", "plaintext", 1, MIXED)
    assert doc.offset_at(0, 2, "utf-16") == 1  # second half of the surrogate pair
    for byte in (2, 3, 4):
        assert doc.offset_at(0, byte, "utf-8") == 1  # inside the emoji's 4 bytes
    assert doc.offset_at(0, 7, "utf-8") == 3  # inside 中
    assert doc.offset_of_byte(3) == 1


def test_clamping() -> None:
    doc = Document("file:///m.txt", "plaintext", 1, "ab\ncd😀\n")
    assert doc.offset_at(0, 99) == 2  # past the line end -> line end
    assert doc.offset_at(1, 99) == 6
    assert doc.offset_at(7, 0) == len(doc.text)  # past the last line -> end of document
    assert doc.offset_at(-1, 5) == 0
    assert doc.offset_at(0, -3) == 0
    assert doc.position_at(999) == (2, 0)
    assert doc.position_at(-5) == (0, 0)
    assert doc.line_range(10) == (len(doc.text), len(doc.text))


def test_crlf_and_lone_cr_split_lines() -> None:
    doc = Document("file:///m.txt", "plaintext", 1, "a\r\nbb\rc\nd")
    assert doc.line_count == 4
    assert [doc.line_text(i) for i in range(4)] == ["a", "bb", "c", "d"]
    assert doc.line_range(1) == (3, 5)
    assert doc.offset_at(1, 9) == 5
    assert doc.offset_at(2, 0) == 6
    assert doc.line_of(4) == 1 and doc.line_start(4) == 3
    assert doc.has_lone_cr


def test_line_helpers_on_empty_and_trailing_newline() -> None:
    empty = Document("file:///e.txt", "plaintext", 1, "")
    assert empty.line_count == 1 and empty.line_range(0) == (0, 0)
    doc = Document("file:///t.txt", "plaintext", 1, "x\n")
    assert doc.line_count == 2 and doc.line_range(1) == (2, 2)


def test_is_binary() -> None:
    assert Document.is_binary("abc\x00def")
    assert Document.is_binary("".join(chr(i % 32) for i in range(1, 400)))
    assert not Document.is_binary("def f():\n\treturn '\x1b[31m'\r\n")
    assert not Document.is_binary("")


def test_unknown_language_has_no_tree() -> None:
    doc = Document("file:///notes.org", "org", 1, "* heading\n")
    assert doc.tree is None and doc.language is None
    assert doc.apply_change("x", (0, 0, 0, 0)) == 0
    assert doc.text == "x* heading\n"


def test_extension_fallback_when_language_id_is_unknown() -> None:
    doc = Document("file:///src/app.rs", "plaintext", 1, "fn main() {}\n")
    assert doc.tree is not None


# ---------------------------------------------------------------- edits
def _edit(doc: Document, reference: str, start: int, end: int, new: str,
          encoding: str = "utf-16") -> str:
    """Apply the edit to the document by LSP range and return the sliced reference."""
    range_ = (*_ref_position(reference, start, encoding), *_ref_position(reference, end, encoding))
    assert doc.apply_change(new, range_, encoding) == start
    return reference[:start] + new + reference[end:]


@pytest.mark.parametrize("encoding", ENCODINGS)
def test_basic_edits_keep_text_lines_and_tree(encoding: str) -> None:
    text = "import os\n\ndef f(a):\n    return a  # 😀 中\n\nx = f(1)\n"
    doc = Document("file:///e.py", "python", 1, text)
    ref = text
    ref = _edit(doc, ref, 10, 10, "def g():\n    pass\n", encoding)  # insert lines
    _assert_consistent(doc, ref)
    start = ref.index("😀")
    ref = _edit(doc, ref, start, start + 1, "🎉🎉", encoding)  # replace an emoji
    _assert_consistent(doc, ref)
    ref = _edit(doc, ref, 0, ref.index("def g"), "", encoding)  # delete lines
    _assert_consistent(doc, ref)
    ref = _edit(doc, ref, 4, ref.index("return"), "h(b, c):\n    y = b\n    ", encoding)
    _assert_consistent(doc, ref)
    ref = _edit(doc, ref, len(ref), len(ref), "print(x)", encoding)  # at end of file
    _assert_consistent(doc, ref)
    ref = _edit(doc, ref, len(ref) - 3, len(ref), "", encoding)  # delete at end of file
    _assert_consistent(doc, ref)


def test_full_replace() -> None:
    doc = Document("file:///e.py", "python", 1, "a = 1\n")
    assert doc.apply_change("def f():\r\n    pass\r\n", None) == 0
    _assert_consistent(doc, "def f():\r\n    pass\r\n")


def test_edits_that_join_and_split_crlf() -> None:
    text = "a = 1\r\nb = 2\rx\nc = 3\n"
    doc = Document("file:///e.py", "python", 1, text)
    ref = text
    x = ref.index("x")
    ref = _edit(doc, ref, x, x + 1, "")  # "\r" + "\n" meet: two lines become one break
    _assert_consistent(doc, ref)
    assert not doc.has_lone_cr
    ref = _edit(doc, ref, 5, 7, "\r")  # "\r\n" -> lone "\r"
    _assert_consistent(doc, ref)
    assert doc.has_lone_cr
    ref = _edit(doc, ref, 6, 6, "\n")  # after the lone "\r": joins into "\r\n"
    _assert_consistent(doc, ref)
    assert not doc.has_lone_cr
    ref = _edit(doc, ref, 0, len(ref), "\r")
    _assert_consistent(doc, ref)


def test_out_of_range_edit_clamps() -> None:
    doc = Document("file:///e.txt", "plaintext", 1, "ab\ncd")
    assert doc.apply_change("!", (5, 0, 9, 9)) == 5
    assert doc.text == "ab\ncd!"
    assert doc.apply_change("?", (0, 99, 0, 99)) == 2
    assert doc.text == "ab?\ncd!"


_FRAGMENTS = ["x", "\n", "    ", "\r\n", "😀", "中文", "e\u0301", "(", ")", ":", "'",
              "def h(a):\n    return a\n", "    y = [1, 2]\n", "# note\n", "", "if x:\n"]


@pytest.mark.parametrize("encoding", ENCODINGS)
def test_random_edits_on_a_standard_library_file(encoding: str) -> None:
    source = Path(json.decoder.__file__).read_text(encoding="utf-8")
    rng = random.Random(1234 + len(encoding))
    doc = Document("file:///decoder.py", "python", 1, source)
    ref = source
    for step in range(200):
        start = rng.randrange(len(ref) + 1)
        end = min(len(ref), start + rng.choice([0, 0, 1, 2, 5, 40, 200]))
        new = "".join(rng.choice(_FRAGMENTS) for _ in range(rng.choice([0, 1, 1, 2, 3])))
        if ref[start - 1:start + 1] == "\r\n" or ref[end - 1:end + 1] == "\r\n":
            continue  # LSP cannot address a point inside "\r\n"
        ref = _edit(doc, ref, start, end, new, encoding)
        assert doc.text == ref, step
        if step % 10 == 0:
            _assert_consistent(doc, ref)
    _assert_consistent(doc, ref)


def test_typing_keeps_tree_equal_to_a_fresh_parse() -> None:
    source = Path(json.decoder.__file__).read_text(encoding="utf-8")
    doc = Document("file:///decoder.py", "python", 1, source)
    ref = source
    at = ref.index("    pairs = []\n") + len("    pairs = []\n")
    for i, ch in enumerate("    total = compute(a, [b, 'c😀'])\n"):
        ref = _edit(doc, ref, at + i, at + i, ch)
        assert str(doc.tree.root_node) == _fresh_tree(doc)
    _assert_consistent(doc, ref)


def test_structure_tree_skips_half_typed_statements() -> None:
    text = "def a(x):\n    y = 1\n    return y\n\n\ndef b(z):\n    return z\n"
    doc = Document("file:///s.py", "python", 1, text)
    ref = text
    at = ref.index("    return y")
    ref = _edit(doc, ref, at, at, "    t = f(a,\n")
    assert doc.tree.root_node.has_error
    assert doc.structure_tree is not doc.tree
    # The kept tree's positions follow the edit: `def b` sits where the text now has it.
    names = [n.child_by_field_name("name") for n in doc.structure_tree.root_node.children]
    assert [doc.text_in_bytes(n.start_byte, n.end_byte) for n in names if n] == ["a", "b"]
    ref = _edit(doc, ref, at + len("    t = f(a,"), at + len("    t = f(a,"), " 2)")
    assert not doc.tree.root_node.has_error
    assert doc.structure_tree is doc.tree


BROKEN_JAVA = ("class Shapes {\n" + "".join(
    f"    int area{i}(int w) {{\n        return w * {i};\n    }}\n\n" for i in range(6))
    + "    int broken() {\n        return f(1,\n    }\n}\n")


@pytest.mark.parametrize(("uri", "text", "old", "new"), [
    ("file:///f.py", "import os\n\n\n" + "".join(
        f"def f{i}(a):\n    return a * {i}\n\n\n" for i in range(6))
     + "def broken(x):\n    y = g(x,\n", "    return", "  return"),
    ("file:///Shapes.java", BROKEN_JAVA, "        return w", "      return w"),
], ids=["python", "java"])
def test_an_edit_replacing_whole_nodes_of_a_broken_file_keeps_no_squashed_tree(
        uri: str, text: str, old: str, new: str) -> None:
    """A file with a syntax error keeps its previous tree for context while an edit's new
    tree is not sound; but an edit of lines that replaced whole nodes (a formatter's) leaves
    that tree's nodes there squashed by Tree.edit, not moved: the fresh tree is kept then.
    The whole text replaced, and (Java) the lines inside a class body, from the first changed
    line to the end."""
    formatted = text.replace(old, new)
    lines = text.splitlines(keepends=True)
    first = next(i for i, (a, b) in enumerate(
        zip(lines, formatted.splitlines(keepends=True), strict=True)) if a != b)
    for start_line in (0, first):
        doc = Document(uri, "", 1, text)
        assert doc.tree is not None and doc.tree.root_node.has_error
        new_text = "".join(formatted.splitlines(keepends=True)[start_line:])
        doc.apply_change(new_text, (start_line, 0, len(lines), 0))
        assert doc.text == formatted
        assert doc.structure_tree is doc.tree
        assert str(doc.tree.root_node) == _fresh_tree(doc)
    # Typing a half statement still keeps the previous tree (nothing whole was replaced).
    doc = Document(uri, "", 1, formatted)
    at = formatted.index(new)
    doc.apply_change("x = (\n", (formatted[:at].count("\n"), 0, formatted[:at].count("\n"), 0))
    assert doc.structure_tree is not doc.tree



class _CountingParser:
    """A parser that counts its parses."""

    def __init__(self, parser: tree_sitter.Parser, parses: list[int]) -> None:
        self._parser, self._parses = parser, parses

    def parse(self, *args: Any, **kwargs: Any) -> tree_sitter.Tree:
        self._parses[0] += 1
        return self._parser.parse(*args, **kwargs)


def test_the_changes_of_one_didchange_are_parsed_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """A replace-all, a formatter's edits or many cursors send hundreds of changes in one
    didChange: each parsed the file again (2,000 in 430 KB of Python: 15 s on the event
    loop). Inside `one_parse` the text and positions are current after each change, and the
    tree is parsed once at the end, as a fresh parse has it; the context keeps the previous
    tree where the cursors left half-typed statements, as it does for one change."""
    text = "import os\n\n" + "".join(f"def f{i}(total):\n    return total + {i}\n\n"
                                     for i in range(200))
    doc = Document("file:///many.py", "python", 1, text)
    spec = doc.spec
    assert spec is not None
    parses = [0]
    monkeypatch.setattr(type(spec), "parser",
                        lambda self: _CountingParser(tree_sitter.Parser(self.language), parses))
    ref = text
    with doc.one_parse():
        # Later positions first, as VS Code sends them: the earlier ones hold.
        for line in range(3 * 199 + 3, 2, -3):  # the "return total" lines
            at = _ref_lines(ref)[line][0] + ref[_ref_lines(ref)[line][0]:].index("total")
            ref = _edit(doc, ref, at, at + len("total"), "acc")
            assert doc.text == ref
    assert parses == [1]
    _assert_consistent(doc, ref)
    assert str(doc.tree.root_node) == _fresh_tree(doc)
    assert doc.structure_tree is doc.tree
    # Three cursors typing "(": half-typed statements, the previous tree stays for context.
    with doc.one_parse():
        for line in (30, 20, 10):
            at = _ref_lines(ref)[line][1]
            ref = _edit(doc, ref, at, at, "(")
    assert parses == [2]
    assert doc.tree.root_node.has_error and doc.structure_tree is not doc.tree
    assert str(doc.tree.root_node) == _fresh_tree(doc)
    # A whole text among the changes: the changes after it are parsed with it.
    with doc.one_parse():
        ref = _edit(doc, ref, 0, 0, "#")
        doc.apply_change(text, None)
        ref = text
        ref = _edit(doc, ref, len(ref), len(ref), "x = 1\n")
    _assert_consistent(doc, ref)
    assert str(doc.tree.root_node) == _fresh_tree(doc)
    assert doc.structure_tree is doc.tree

class _ScanCounter:
    """A compiled pattern that adds to `scanned` the characters each search is given."""

    def __init__(self, pattern: re.Pattern[str], scanned: list[int]) -> None:
        self._pattern, self._scanned = pattern, scanned

    def finditer(self, text: str, pos: int = 0, endpos: int = sys.maxsize) -> Iterator[Any]:
        self._scanned[-1] += max(0, min(endpos, len(text)) - pos)
        return self._pattern.finditer(text, pos, endpos)

    def search(self, text: str, pos: int = 0, endpos: int = sys.maxsize) -> Any:
        self._scanned[-1] += max(0, min(endpos, len(text)) - pos)
        return self._pattern.search(text, pos, endpos)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._pattern, name)


_PACKAGE = str(Path(documents.__file__).parent)


def _edits_work(rows: int, monkeypatch: pytest.MonkeyPatch
                ) -> tuple[Document, str, list[int], list[int], int]:
    """200 one-character edits hopping about the middle of a plain-text file of `rows` lines;
    the lines of lsp_complete each ran, the characters its line-break searches were given,
    and how many times the whole text was indexed again."""
    line = "    value = compute(alpha, beta) + 1  # comment 中\n"
    text = "".join(f"def f{i}(a):\n{line}" if i % 10 == 0 else line for i in range(rows))
    doc = Document("file:///big.txt", "plaintext", 1, text)
    scanned: list[int] = []
    for name in ("_LINE_BREAK", "_LONE_CR"):
        monkeypatch.setattr(documents, name, _ScanCounter(getattr(documents, name), scanned))
    reindexed = 0
    index_lines = documents._index_lines

    def counted(*args: Any) -> Any:
        nonlocal reindexed
        reindexed += 1
        return index_lines(*args)

    monkeypatch.setattr(documents, "_index_lines", counted)
    lines = []
    for i in range(200):
        row = rows // 2 + (i % 7) * (rows // 20)  # hop between lines: no warm spot
        scanned.append(0)
        work = work_of(lambda row=row: doc.apply_change("x", (row, 5, row, 5)),
                       lambda name: name.startswith(_PACKAGE))
        lines.append(work.lines)
    monkeypatch.undo()
    return doc, text, lines, scanned, reindexed


def test_a_single_char_edit_costs_the_same_in_a_file_ten_times_larger(monkeypatch) -> None:
    """Checked by the work done, not by the clock (CI cores are shared): an edit re-derives
    the line starts around itself and shifts the others in one numpy operation, never a
    Python pass over the file's lines nor a search of its whole text."""
    _, _, small, _, _ = _edits_work(2_000, monkeypatch)
    doc, text, lines, scanned, reindexed = _edits_work(20_000, monkeypatch)
    assert doc.line_count == 22_001
    assert len(doc.text) == len(text) + 200
    assert doc.line_range(10_000) == (
        doc.text.index("\n", doc.offset_at(9_999, 0)) + 1,
        doc.text.index("\n", doc.offset_at(10_000, 0)),
    )
    # Index upkeep only (no grammar): ~110 lines an edit, whatever the file's size.
    assert max(lines) <= max(small) * 1.5, (max(lines), max(small))
    # The line breaks are looked for in the edit and a character either side (7 now)...
    assert max(scanned) <= 16, max(scanned)
    # ...and the whole text is never indexed again.
    assert reindexed == 0


def test_line_index_matches_regex_after_many_edits() -> None:
    rng = random.Random(7)
    text = "a\nb\r\nc\rd\n" * 50
    doc = Document("file:///x.txt", "plaintext", 1, text)
    ref = text
    for _ in range(300):
        start = rng.randrange(len(ref) + 1)
        end = min(len(ref), start + rng.randrange(4))
        new = rng.choice(["", "\r", "\n", "\r\n", "z", "\n\r"])
        if ref[start - 1:start + 1] == "\r\n" or ref[end - 1:end + 1] == "\r\n":
            continue
        ref = _edit(doc, ref, start, end, new, "utf-32")
    _assert_consistent(doc, ref)
    assert doc.has_lone_cr == bool(re.search(r"\r(?!\n)", ref))


@pytest.mark.parametrize(
    ("language_id", "uri", "grammar"),
    [
        ("python", "file:///a.txt", "python"),
        ("javascriptreact", "file:///a.jsx", "javascript"),
        ("typescript", "file:///a.ts", "typescript"),
        ("typescriptreact", "file:///a.tsx", "tsx"),
        ("go", "file:///a.go", "go"),
        ("rust", "file:///a.rs", "rust"),
        ("java", "file:///A.java", "java"),
        ("c", "file:///a.h", "c"),
        ("cpp", "file:///a.h", "cpp"),  # the languageId wins over the extension of its kin
        ("python", "file:///a.js", "javascript"),  # not over one that rules it out (Eglot)
        ("plaintext", "file:///dir%20x/a.hpp", "cpp"),  # unknown id: the extension decides
        ("", "file:///a.mjs", "javascript"),
        ("haskell", "file:///a.hs", None),
    ],
)
def test_language_mapping(language_id: str, uri: str, grammar: str | None) -> None:
    spec = spec_for(language_id, uri)
    assert (spec.name if spec else None) == grammar
    doc = Document(uri, language_id, 1, "x\n")
    assert (doc.tree is None) == (grammar is None)


def test_an_edited_copy_leaves_the_document_as_it_was() -> None:
    """`edited`: the text an edit not made yet would give (the completion menu's item put
    in), parsed as that text, while the document keeps its text, lines and tree."""
    source = "def total(values):\n    res\n    return 0\n"
    doc = Document("file:///a.py", "python", 1, source)
    tree_before = str(doc.tree.root_node)
    start = source.index("res")
    copy = doc.edited(start, start + 3, "result = sum(values)\n    x")
    assert copy.text == source.replace("res", "result = sum(values)\n    x")
    assert copy.line_count == doc.line_count + 1 and copy.line_of(len(copy.text) - 1) == 3
    fresh = Document("file:///b.py", "python", 1, copy.text)
    assert str(copy.tree.root_node) == str(fresh.tree.root_node)  # as if parsed anew
    assert doc.text == source and doc.line_count == 4
    assert str(doc.tree.root_node) == tree_before
    doc.apply_change("ult", (1, 7, 1, 7))  # the document still edits as before
    assert doc.text == source.replace("res", "result")
    assert str(doc.tree.root_node) == str(Document("file:///c.py", "python", 1, doc.text)
                                          .tree.root_node)


# ---------------------------------------------------------------- lone CR and the parser
LONE_CR_PYTHON = ("import os\n\n\ndef mean(items):\n    total = 0\n    for item in items:\n"
                  "        total += item\n    return total / len(items)\n\n\nclass Box:\n"
                  "    def area(self):\n        return self.w\n\n\nx = mean([1])\n")


def _shape(node: tree_sitter.Node) -> list[tuple[str, int, int, int]]:
    """Each node's type, start byte and start and end rows, in order."""
    found, stack = [], [node]
    while stack:
        current = stack.pop()
        found.append((current.type, current.start_byte, current.start_point[0],
                      current.end_point[0]))
        stack.extend(reversed(current.children))
    return found


@pytest.mark.parametrize("language,uri,text", [
    ("python", "file:///cr.py", LONE_CR_PYTHON),
    ("go", "file:///cr.go", "package main\n\nfunc f() int {\n\treturn 1\n}\n\nfunc g() {}\n"),
])
def test_a_file_of_lone_cr_breaks_has_the_tree_of_its_lf_twin(language: str, uri: str,
                                                              text: str) -> None:
    """tree-sitter grammars break lines at "\\n" only: Python's tree of a lone-CR file was a
    few statements on row 0 (Go's had errors), so the head, the outline and block scopes had
    no structure to read. The parser reads a lone "\\r" as "\\n": the same nodes at the same
    bytes, and its rows are LSP lines, through edits too."""
    lf = Document(uri, language, 1, text)
    cr = Document(uri, language, 1, text.replace("\n", "\r"))
    assert lf.tree is not None and cr.tree is not None
    assert _shape(cr.tree.root_node) == _shape(lf.tree.root_node)
    rng = random.Random(7)
    ref = cr.text
    for _ in range(200):  # edits that make, split and join "\r" + "\n" pairs among others
        start = rng.randrange(len(ref) + 1)
        end = min(len(ref), start + rng.choice((0, 0, 1, 2)))
        if "\r\n" in (ref[start - 1:start + 1], ref[end - 1:end + 1]):
            continue  # between "\r" and "\n": not a position an editor can name
        ref = _edit(cr, ref, start, end, rng.choice(("\n", "\r", "\r\n", "x", "", "  y = 1\r")))
        _assert_consistent(cr, ref)
        assert cr.tree is not None
        twin = Document(uri, language, 1, re.sub(r"\r(?!\n)", "\n", ref))
        assert twin.tree is not None
        assert _shape(cr.tree.root_node) == _shape(twin.tree.root_node)
