"""Context: stable head from tree-sitter, snapped windows, anchor policy, block shape."""

from __future__ import annotations

import json.decoder
import random
import statistics
from dataclasses import dataclass
from pathlib import Path

import pytest

import lsp_complete
from lsp_complete.context import (
    CodeContext,
    ContextLimits,
    build_context,
    build_head,
    choose_anchor,
    definition_brace_own_line,
    enclosing_block_indent,
    open_above,
    wants_multiline,
    window_start_line,
)
from lsp_complete.documents import Document
from tests.work_count import work_of

DATA = Path(__file__).parent / "data" / "context"
# Small windows so that the small sample files have definitions outside them.
SMALL = ContextLimits(before_lines=6, window_snap=2, suffix_lines=3)


@dataclass(frozen=True)
class Sample:
    file: str
    language_id: str
    present: tuple[str, ...]  # imports and outline signatures the head must show
    absent: tuple[str, ...]  # body text of outlined definitions it must not show
    statement: str  # typed char by char at the cursor for the stability test


SAMPLES = [
    Sample(
        "inventory.py", "python",
        ("import logging", "from dataclasses import dataclass, field",
         "@dataclass\nclass Item:", "    def restock(self, amount: int) -> None: ...",
         "def parse_line(line: str) -> Item: ...", "    def add(self, item: Item) -> None: ...",
         "def summarize(inventory: Inventory) -> str: ...", "DEFAULT_WAREHOUSE = \"main\"",
         "class Inventory:\n    # ..."),
        ("LOG.debug", "raise ValueError", "return Item(", "count += 1", '"\\n".join'),
        "            total = compute(item, [1, 2], {'k': (3,)})\n            ",
    ),
    Sample(
        "config_store.js", "javascriptreact",
        ('import fs from "node:fs";', 'const yaml = require("yaml");',
         "export function readConfig(file, options = DEFAULT_OPTIONS) { ... }",
         "const resolveFrom = (base, relative) => { ... }", "  constructor(root) { ... }",
         "  clear() { ... }", "function* walk(dir) { ... }",
         "export class ConfigStore extends EventEmitter {\n  // ..."),
        ("readFileSync", "path.resolve", "this.cache.clear()", "yield full"),
        "    const total = compute(file, [1, 2], { k: (3) });\n    ",
    ),
    Sample(
        "rate_limiter.ts", "typescript",
        ('import type { Logger } from "./logger";', "export interface LimiterOptions {",
         "type Clock = () => number;", "export function systemClock(): number { ... }",
         "  private refill(): void { ... }", "  private tokens: number;",
         "  async waitFor(cost: number, log?: Logger): Promise<void> { ... }"),
        ("Date.now", "Math.min", "await sleep", "new TokenBucket(options)"),
        "      const total: number = compute(cost, [1, 2], { k: 3 });\n      ",
    ),
    Sample(
        "user_card.tsx", "typescriptreact",
        ('import { fetchUser } from "../api/users";', "export interface User {",
         "function initials(name: string): string { ... }",
         "export function Avatar({ name }: { name: string }) { ... }",
         "export const EmptyCard = () => <div className=\"card empty\" />;",
         "export default function UserCard({ userId, compact = false }: UserCardProps) {\n"
         "  // ..."),
        (".toUpperCase()", "<span className=\"avatar\">"),
        "  const total = compute(user, [1, 2], { k: <b>3</b> });\n  ",
    ),
    Sample(
        "server.go", "go",
        ("package server", '"encoding/json"', "type Store struct {",
         "func NewStore() *Store { ... }", "func (s *Store) Put(id, note string) { ... }",
         "func writeJSON(w http.ResponseWriter, status int, v any) error { ... }",
         "func ListenAndServe(addr string) error { ... }",
         "func (s *Store) ServeHTTP(w http.ResponseWriter, r *http.Request) {\n\t// ..."),
        ("s.mu.Lock()", "json.NewEncoder", "make(map[string]string)"),
        "\t\t\ttotal := compute(id, []int{1, 2}, map[string]int{\"k\": 3})\n\t\t\t",
    ),
    Sample(
        "matrix.rs", "rust",
        ("use std::fmt;", "#[derive(Debug, Clone, PartialEq)]\npub struct Matrix {",
         "pub trait Shape {\n    fn shape(&self) -> (usize, usize);",
         "    fn is_square(&self) -> bool { ... }",
         "    pub fn zeros(rows: usize, cols: usize) -> Self { ... }",
         "    fn add(self, other: Matrix) -> Matrix { ... }", "    type Output = Matrix;",
         "impl fmt::Display for Matrix {", "impl Matrix {\n    // ..."),
        ("vec![0.0", "write!(f", "m.data[i * n + i]"),
        "                let total = compute(r, &[1, 2], |k| { k + 3 });\n                ",
    ),
    Sample(
        "OrderService.java", "java",
        ("package com.example.orders;", "import java.util.Optional;",
         "    private int nextId = 1;", "    public Order create(String customer, double amount)"
         " { ... }", "    public List<Order> largeOrders(double threshold) { ... }",
         "    @Override\n    public String toString() { ... }",
         "public class OrderService {\n    // ..."),
        ("orders.add(order)", "findFirst", "result.add(order)"),
        "                double t = compute(order, new int[] {1, 2}, \"k\");\n                ",
    ),
    Sample(
        "ring_buffer.c", "c",
        ("#include <stdlib.h>", '#include "ring_buffer.h"', "#define RB_MIN_CAPACITY 16",
         "} ring_buffer;", "static size_t rb_next(const ring_buffer *rb, size_t index);",
         "ring_buffer *rb_create(size_t capacity) { ... }",
         "int rb_pop(ring_buffer *rb, unsigned char *out) { ... }",
         "void rb_destroy(ring_buffer *rb) { ... }"),
        ("malloc(", "calloc(", "free(rb->data)"),
        "        int total = compute(rb, (int[]){1, 2}, 'k');\n        ",
    ),
    Sample(
        "lru_cache.cpp", "cpp",
        ("#include <unordered_map>", "using namespace std;", "namespace cache {",
         "template <typename K, typename V>\nclass LruCache {", "public:",
         "    optional<V> get(const K& key) { ... }", "    size_t capacity_;",
         "int hit_rate_percent(int hits, int misses) { ... }",
         "    void put(const K& key, V value) {\n        // ..."),
        ("index_.find", "return nullopt", "hits * 100"),
        "            auto total = compute(key, vector<int>{1, 2}, 'k');\n            ",
    ),
]


def _open(sample: Sample) -> Document:
    path = DATA / sample.file
    return Document(path.as_uri(), sample.language_id, 1, path.read_text(encoding="utf-8"))


def _cursor_after_marker(doc: Document) -> int:
    return doc.text.index("\n", doc.text.index("cursor here")) + 1


def _type(doc: Document, at: int, text: str) -> None:
    line, character = doc.position_at(at)
    doc.apply_change(text, (line, character, line, character))


# ---------------------------------------------------------------- head per language
@pytest.mark.parametrize("sample", SAMPLES, ids=lambda s: s.file)
def test_head_has_imports_and_outline_but_no_bodies(sample: Sample) -> None:
    doc = _open(sample)
    assert not doc.tree.root_node.has_error
    cursor = _cursor_after_marker(doc)
    ctx = build_context(doc, cursor, choose_anchor(doc, cursor, None, SMALL), SMALL)
    for text in sample.present:
        assert text in ctx.head, text
    for text in sample.absent:
        assert text not in ctx.head, text
    assert ctx.head.endswith("\n") and len(ctx.head) <= SMALL.head_max_chars
    assert ctx.path == sample.file
    # Nothing the window shows is repeated as an outline entry.
    assert "cursor here" not in ctx.head


@pytest.mark.parametrize("sample", SAMPLES, ids=lambda s: s.file)
def test_head_is_stable_while_typing_in_a_body(sample: Sample) -> None:
    doc = _open(sample)
    cursor = _cursor_after_marker(doc)
    anchor = choose_anchor(doc, cursor, None, SMALL)
    first = build_context(doc, cursor, anchor, SMALL).head
    for ch in sample.statement:
        _type(doc, cursor, ch)
        cursor += 1
        anchor = choose_anchor(doc, cursor, anchor, SMALL)
        ctx = build_context(doc, cursor, anchor, SMALL)
        assert ctx.head == first, repr(doc.text[doc.line_start(cursor):cursor])
        assert ctx.middle == doc.text[anchor:cursor]


def test_head_is_stable_while_typing_in_a_300_line_file() -> None:
    source = Path(json.decoder.__file__).read_text(encoding="utf-8")
    assert source.count("\n") > 300
    limits = ContextLimits()
    for marker in ("    pairs_append = pairs.append\n", "        obj, end = self.raw_decode"):
        doc = Document("file:///decoder.py", "python", 1, source)
        # After the marker line, or after the indentation of the `obj, end = ...` line.
        cursor = doc.text.index(marker) + (len(marker) if marker.endswith("\n") else 8)
        anchor = choose_anchor(doc, cursor, None, limits)
        first = build_context(doc, cursor, anchor, limits).head
        assert "def py_scanstring(" in first or "class JSONDecoder" in first
        # One keystroke per character; Enter comes with the editor's auto-indent.
        keys = [*"    result = helper(s, end, [1, 2], {'k': (3,)})  # note", "\n    ",
                *"x = '''doc'''"]
        if not marker.endswith("\n"):
            keys = [*"value = decode(s)", "\n        "]
        fallbacks = 0
        for key in keys:
            _type(doc, cursor, key)
            cursor += len(key)
            fallbacks += doc.structure_tree is not doc.tree
            anchor = choose_anchor(doc, cursor, anchor, limits)
            assert build_context(doc, cursor, anchor, limits).head == first
        if marker.endswith("\n"):
            assert fallbacks > 0  # the half-typed states really were broken parses


def test_head_is_stable_while_indentation_is_typed_one_space_at_a_time() -> None:
    """Enter without auto-indent leaves the cursor at column 0 of a blank line; the
    indentation typed next must not change the enclosing headers at every space."""
    source = Path(json.decoder.__file__).read_text(encoding="utf-8")
    limits = ContextLimits(before_lines=2, window_snap=1)  # headers above the window
    for marker, indent in (("    pairs_append = pairs.append", 4),
                           ("    if nextchar != '\"':", 8)):
        doc = Document("file:///decoder.py", "python", 1, source)
        cursor = doc.text.index(marker) + len(marker)
        _type(doc, cursor, "\n" + " " * indent + "x")
        cursor += 1 + indent + 1
        expected = build_context(doc, cursor, doc.line_start(cursor), limits).head
        assert "def JSONObject(" in expected
        doc = Document("file:///decoder.py", "python", 1, source)
        cursor = doc.text.index(marker) + len(marker)
        heads = []
        for key in ["\n", *" " * indent, "x"]:
            _type(doc, cursor, key)
            cursor += 1
            heads.append(build_context(doc, cursor, doc.line_start(cursor), limits).head)
        assert heads == [expected] * len(heads)


def test_head_changes_when_structure_changes() -> None:
    doc = _open(SAMPLES[0])
    cursor = _cursor_after_marker(doc)
    before = build_context(doc, cursor, choose_anchor(doc, cursor, None, SMALL), SMALL).head
    end = len(doc.text)
    _type(doc, end, "\n\ndef audit(inventory: Inventory) -> bool:\n    return True\n")
    after = build_context(doc, cursor, choose_anchor(doc, cursor, None, SMALL), SMALL).head
    assert "def audit(inventory: Inventory) -> bool: ..." in after
    assert "def audit" not in before


def test_enclosing_headers_before_the_window() -> None:
    text = (
        "import os\n\n\nclass Service:\n    @staticmethod\n    def handle(request,\n"
        "               retries=3):\n"
        + "".join(f"        step_{i} = {i}\n" for i in range(40))
        + "        return step_0\n"
    )
    doc = Document("file:///svc.py", "python", 1, text)
    cursor = doc.offset_at(45, 0)
    ctx = build_context(doc, cursor, cursor, ContextLimits(before_lines=10, window_snap=4))
    assert ctx.head.endswith(
        "class Service:\n    @staticmethod\n    def handle(request,\n               retries=3):\n"
        "        # ...\n"
    )
    assert ctx.head.startswith("import os\n")


def test_enclosing_callback_header_in_javascript() -> None:
    body = "".join(f"    expect(value{i}).toBe({i});\n" for i in range(30))
    text = (f'import {{ f }} from "./f";\n\ndescribe("f", () => {{\n'
            f'  it("works", () => {{\n{body}  }});\n}});\n')
    doc = Document("file:///f.test.js", "javascript", 1, text)
    cursor = doc.offset_at(30, 4)
    ctx = build_context(doc, cursor, doc.line_start(cursor), ContextLimits(before_lines=8))
    assert ctx.head.endswith('describe("f", () => {\n  it("works", () => {\n    // ...\n')


def test_head_cap_drops_the_farthest_entries() -> None:
    funcs = "".join(f"def func_{i:02d}(a, b):\n    return a + b + {i}\n\n\n" for i in range(40))
    doc = Document("file:///many.py", "python", 1, "import os\n\n" + funcs)
    cursor = doc.text.index("    return a + b + 20")
    limits = ContextLimits(before_lines=4, window_snap=1, suffix_lines=2, head_max_chars=300)
    head = build_context(doc, cursor, doc.line_start(cursor), limits).head
    assert len(head) <= 300
    assert "import os" in head
    kept = [i for i in range(40) if f"def func_{i:02d}(" in head]
    in_window = [20]  # its header is visible in `before`, so it is not outlined
    assert not set(in_window) & set(kept)
    # A contiguous run around the cursor: the farthest entries are the ones dropped.
    assert sorted(kept + in_window) == list(range(kept[0], kept[-1] + 1))
    assert 0 not in kept and 39 not in kept
    assert build_head(doc, cursor, window_start_line(doc.line_of(cursor), limits),
                      window_end_line=doc.line_of(cursor) + 2, limits=limits) == head


@pytest.mark.parametrize(("uri", "sent", "read_as"), [
    ("file:///w/a.py", "plaintext", "python"),  # a client that knows no mapping
    ("file:///w/a.py", "python-ts", "python"),  # Emacs: the major mode's name
    ("file:///w/a.cc", "c++", "cpp"),           # an alias
    ("file:///w/A.kt", "plaintext", "kotlin"),  # no grammar: the lexer's language
    ("file:///w/notes.txt", "plaintext", "plaintext"),
])
def test_the_context_is_in_the_language_the_text_is_read_as(uri, sent, read_as) -> None:
    # Before: the client's id as sent, so a block from a .py file sent as plaintext was not
    # cut to the lines that parse, and next edits fenced it as plaintext.
    doc = Document(uri, sent, 1, "x = 1\ny = 2\n")
    ctx = build_context(doc, 6, choose_anchor(doc, 6, None, SMALL), SMALL)
    assert doc.language_name == read_as and ctx.language_id == read_as


def test_no_grammar_gives_empty_head() -> None:
    text = "".join(f"line {i}\n" for i in range(100))
    doc = Document("file:///notes.txt", "plaintext", 1, text)
    cursor = doc.offset_at(50, 3)
    ctx = build_context(doc, cursor, choose_anchor(doc, cursor, None, SMALL), SMALL)
    assert ctx.head == ""
    assert ctx.middle == "lin"
    assert ctx.suffix.startswith("e 50\nline 51\n")
    assert ctx.before.endswith("line 49\n")


# ---------------------------------------------------------------- windows and anchors
def test_window_start_snaps_so_moving_down_appends() -> None:
    text = "".join(f"x_{i} = {i}\n" for i in range(300))
    doc = Document("file:///w.py", "python", 1, text)
    limits = ContextLimits()
    old = build_context(doc, doc.offset_at(100, 0), doc.offset_at(100, 0), limits)
    new = build_context(doc, doc.offset_at(103, 0), doc.offset_at(103, 0), limits)
    assert window_start_line(100, limits) == window_start_line(103, limits) == 32
    assert new.before.startswith(old.before)
    assert new.before[len(old.before):] == "x_100 = 100\nx_101 = 101\nx_102 = 102\n"
    assert old.before.startswith("x_32 = 32\n")
    for line in (0, 5, 59, 60, 61, 77, 250):
        start = window_start_line(line, limits)
        assert start % limits.window_snap == 0
        assert line - limits.before_lines - limits.window_snap < start <= max(0, line - 60)


def test_before_lines_end_with_newline_even_for_crlf() -> None:
    doc = Document("file:///c.py", "python", 1, "a = 1\r\nb = 2\r\nc = 3\r\nd = 4")
    cursor = doc.offset_at(2, 3)
    ctx = build_context(doc, cursor, doc.line_start(cursor), SMALL)
    assert ctx.before == "a = 1\nb = 2\n"
    assert ctx.middle == "c ="
    assert ctx.suffix == " 3\nd = 4"


def test_anchor_policy() -> None:
    text = "".join(f"value_{i} = {i}\n" for i in range(50))
    doc = Document("file:///a.py", "python", 1, text)
    limits = ContextLimits(middle_max_lines=3, middle_max_chars=40)
    start = doc.offset_at(10, 0)
    assert choose_anchor(doc, doc.offset_at(10, 5), None, limits) == start
    # Kept while the middle stays within 3 lines / 40 chars.
    assert choose_anchor(doc, doc.offset_at(10, 7), start, limits) == start
    assert choose_anchor(doc, doc.offset_at(11, 2), start, limits) == start
    # Re-anchored when it spans more lines or chars, or when `previous` is unusable.
    assert choose_anchor(doc, doc.offset_at(12, 2), start, limits) == start  # 3 lines
    assert choose_anchor(doc, doc.offset_at(13, 0), start, limits) == doc.offset_at(13, 0)
    assert choose_anchor(doc, doc.offset_at(12, 13), start, limits) == doc.offset_at(12, 0)
    assert choose_anchor(doc, doc.offset_at(9, 3), start, limits) == doc.offset_at(9, 0)
    assert choose_anchor(doc, doc.offset_at(10, 8), start + 2, limits) == start
    # A previous anchor on the cursor's own line start is kept.
    assert choose_anchor(doc, doc.offset_at(10, 9), start, limits) == start


def test_typing_only_appends_to_middle() -> None:
    doc = _open(SAMPLES[0])
    cursor = _cursor_after_marker(doc)
    anchor = choose_anchor(doc, cursor, None, SMALL)
    first = build_context(doc, cursor, anchor, SMALL)
    for ch in "            total":
        _type(doc, cursor, ch)
        cursor += 1
        anchor = choose_anchor(doc, cursor, anchor, SMALL)
        ctx = build_context(doc, cursor, anchor, SMALL)
        assert (ctx.head, ctx.before, ctx.suffix) == (first.head, first.before, first.suffix)
    assert ctx.middle == "            total"


def test_huge_lines_are_cut_stably() -> None:
    huge = "var a=" + ",".join(f"x{i}" for i in range(3000)) + ";"
    text = f"// minified\n{huge}\nconsole.log(a);\n{huge}\n"
    doc = Document("file:///min.js", "javascript", 1, text)
    limits = ContextLimits(max_line_chars=100)
    cursor = doc.offset_at(2, 5)
    ctx = build_context(doc, cursor, doc.line_start(cursor), limits)
    assert ctx.before == "// minified\n" + huge[:100] + "\n"
    assert ctx.suffix == "le.log(a);\n" + huge[:100] + "\n"
    again = build_context(doc, cursor, doc.line_start(cursor), limits)
    assert again.before == ctx.before
    # Deep inside a huge line the anchor sits on a grid inside it: the middle stays short.
    cursor = doc.offset_at(1, 5050)
    anchor = choose_anchor(doc, cursor, None, limits)
    assert anchor == doc.offset_at(1, 5000)
    ctx = build_context(doc, cursor, anchor, limits)
    assert ctx.middle == huge[5000:5050]
    assert ctx.before.endswith(huge[4900:5000])
    assert choose_anchor(doc, cursor + 10, anchor, limits) == anchor
    assert all(len(line) <= 100 for line in ctx.head.split("\n"))


# ---------------------------------------------------------------- block shape
def _doc_with_cursor(text: str, language_id: str, uri: str) -> tuple[Document, int]:
    cursor = text.index("|")
    return Document(uri, language_id, 1, text.replace("|", "", 1)), cursor


@pytest.mark.parametrize(
    ("text", "language_id", "expected"),
    [
        ("def f(a):\n    |\n", "python", True),  # after a block opener
        ("def f(a):  # note\n    |\n\nx = 1\n", "python", True),  # opener + comment
        ("def f(a):\n    x = 1\n    |\n\ny = 2\n", "python", True),  # end of a block
        ("def f(a):\n    x = 1\n    |\n    y = 2\n", "python", False),  # between statements
        ("def f(a):\n    x = |\n", "python", False),  # text before the cursor
        ("def f(a):\n    |x = 1\n", "python", False),  # text after the cursor
        ("function f(a) {\n  |\n}\n", "javascript", True),  # empty body
        ("int f(int a) {\n  int b = a;\n  |\n}\n", "c", True),  # fresh block end
        ("int f(int a) {\n  int b = a;  // {\n  |\n  return b;\n}\n", "c", False),
        ("func f() {\n\tif x {\n\t\t|\n\t}\n}\n", "go", True),
        ("x = 1\n|\n", "python", True),  # end of file
    ],
)
def test_wants_multiline(text: str, language_id: str, expected: bool) -> None:
    ext = {"python": "py", "javascript": "js", "c": "c", "go": "go"}[language_id]
    doc, cursor = _doc_with_cursor(text, language_id, f"file:///t.{ext}")
    assert wants_multiline(doc, cursor) is expected


def test_wants_multiline_without_grammar_uses_text() -> None:
    doc, cursor = _doc_with_cursor("fn main() {\n    |\n}\n", "plaintext", "file:///t.txt")
    assert wants_multiline(doc, cursor)


@pytest.mark.parametrize(
    ("text", "language_id", "expected"),
    [
        ("class A:\n    def f(self):\n        x = 1\n        |\n", "python", 4),
        ("class A:\n    def f(self):\n        |\n", "python", 4),
        ("class A:\n    def f(self):\n        x = |1\n", "python", 4),
        ("x = 1\n|\n", "python", -1),
        ("function f(a) {\n  if (a) {\n    |\n  }\n}\n", "javascript", 2),
        ("function f(a) {\n  return |a;\n}\n", "javascript", 0),
        ("let x = 1;\n|\n", "javascript", -1),
        ("fn main() {\n    |\n}\n", "plaintext", 0),
    ],
)
def test_enclosing_block_indent(text: str, language_id: str, expected: int) -> None:
    ext = {"python": "py", "javascript": "js", "plaintext": "txt"}[language_id]
    doc, cursor = _doc_with_cursor(text, language_id, f"file:///t.{ext}")
    assert enclosing_block_indent(doc, cursor) == expected


@pytest.mark.parametrize(
    ("text", "language_id", "expected"),
    [
        # The body of the `if` above, then the cursor line at the `if`'s indentation.
        ("func f() {\n\tfor {\n\t\tif ok {\n\t\t\tstep()\n\n\t\t|\n\t}\n}\n", "go", "{"),
        ("func f() {\n\tif ok { // when ready\n\t\tstep()\n\t|\n}\n", "go", "{"),
        ("  outer(\n    inner(\n      a,\n    |\n  );\n", "javascript", "("),
        # Inside a body (the line above at the same depth), under an opener, after a
        # continuation line, or at a deeper spot: nothing above is closed here.
        ("func f() {\n\tif ok {\n\t\tstep()\n\t\t|\n\t}\n}\n", "go", ""),
        ("func f() {\n\tif ok {\n\t\t|\n\t}\n}\n", "go", ""),
        ("\tfoo(a,\n\t\tb)\n\t|\n", "go", ""),
        ("|x\n", "go", ""),
    ],
)
def test_open_above(text: str, language_id: str, expected: str) -> None:
    ext = {"go": "go", "javascript": "js"}[language_id]
    doc, cursor = _doc_with_cursor(text, language_id, f"file:///t.{ext}")
    assert open_above(doc, cursor) == expected


_ALLMAN_C = ("static int twice(int x)\n{\n    if (x > 0) {\n        return 2 * x;\n    }\n"
             "    return 0;\n}\n\nint main(void)\n{\n    return twice(1);\n}\n")


@pytest.mark.parametrize(
    ("text", "language_id", "expected"),
    [
        # Definitions' braces alone on their line; the `if`'s on its line does not count.
        (_ALLMAN_C, "c", True),
        ("int f(void) {\n    return 1;\n}\nint g(void)\n{\n    return 2;\n}\n"
         "int h(void) {\n    return 3;\n}\n", "c", False),
        # Methods inside a class, a function inside a namespace.
        ("class A {\n    void f()\n    {\n    }\n};\n", "cpp", True),
        ("namespace n {\nint f()\n{\n    return 1;\n}\n}\n", "cpp", True),
        ("public class A {\n    int f() {\n        return 1;\n    }\n}\n", "java", False),
        ("func f() error {\n\treturn nil\n}\n", "go", False),
        # No definition to go by, an arrow function's expression body, a language without
        # braces: the brace stays on the signature's line.
        ("int x = 1;\n", "c", False),
        ("const f = (a) => a + 1;\n", "javascript", False),
        ("def f():\n    return 1\n", "python", False),
    ],
)
def test_definition_brace_own_line(text: str, language_id: str, expected: bool) -> None:
    ext = {"c": "c", "cpp": "cpp", "java": "java", "go": "go", "javascript": "js",
           "python": "py"}[language_id]
    doc = Document(f"file:///t.{ext}", language_id, 1, text)
    assert definition_brace_own_line(doc) is expected


# ---------------------------------------------------------------- performance
_PACKAGE = str(Path(lsp_complete.__file__).parent)


def _services(classes: int) -> str:
    """`classes` classes of 10 methods, about 113 lines each."""
    method = "    def method_{0}(self, value):\n" + "".join(
        f"        value = value * {k} + 1  # step {k}\n" for k in range(8)
    ) + "        return value\n\n"
    parts = ["import os\nimport sys\nfrom typing import Any\n\n"]
    for c in range(classes):
        parts.append(f"class Service{c}(Base):\n    name = 'service_{c}'\n\n")
        parts.extend(method.format(m) for m in range(10))
    parts.append("def main():\n    return 0\n")
    return "".join(parts)


def _keystroke_work(text: str) -> tuple[Document, CodeContext, list[int], list[int]]:
    """Type a statement in the middle of `text`; the lines of lsp_complete run and the peak
    memory of each keystroke's anchor and context (the edit itself is not counted)."""
    doc = Document("file:///big.py", "python", 1, text)
    limits = ContextLimits()
    cursor = doc.offset_at(doc.line_count // 2, 8)
    anchor = choose_anchor(doc, cursor, None, limits)
    lines, peaks = [], []
    for i, ch in enumerate("total = value + 1"):
        _type(doc, cursor + i, ch)
        at = cursor + i + 1

        def keystroke(at: int = at, previous: int = anchor) -> tuple[int, CodeContext]:
            fresh = choose_anchor(doc, at, previous, limits)
            return fresh, build_context(doc, at, fresh, limits)

        work = work_of(keystroke, lambda name: name.startswith(_PACKAGE))
        anchor, ctx = work.result
        lines.append(work.lines)
        peaks.append(work.peak)
    return doc, ctx, lines, peaks


def test_build_context_costs_a_keystroke_no_more_in_a_file_ten_times_larger() -> None:
    """Checked by the work done, not by the clock (CI cores are shared): a keystroke's context
    comes from the window around the cursor and the head's top-level items, never from a walk
    over the file's lines or its whole syntax tree, nor from a copy of its text."""
    small_text, text = _services(18), _services(180)
    assert small_text.count("\n") > 2_000 and text.count("\n") > 20_000
    _, _, small, _ = _keystroke_work(small_text)
    doc, ctx, large, peaks = _keystroke_work(text)
    limits = ContextLimits()
    assert "class Service" in ctx.head and len(ctx.head) <= limits.head_max_chars
    # Ten times the lines (and the classes): ~8,500 lines of lsp_complete a keystroke against
    # ~6,600 (the head's pass over the 180 top-level items against 18); a walk over the
    # file would cost ten times as many.
    assert statistics.median(large) < 2 * statistics.median(small), (large, small)
    # Slices of a window's size (~40 KB at most now): no copy of the 680 KB text or its lines.
    size = len(doc.text)
    assert max(peaks) < size // 4, (max(peaks), size)


# ---------------------------------------------------------------- robustness
_JUNK = ["x", "\n", "{", "}", "(", ")", ":", "    ", "def f(a):\n", "'", '"', "/*", "*/", "#",
         "//", "\r\n", "😀", "class A {\n", "fn g() {", "import x\n", ""]


@pytest.mark.parametrize("sample", SAMPLES, ids=lambda s: s.file)
def test_random_edits_never_break_context(sample: Sample) -> None:
    """Broken, half-typed code at random places: everything still answers, within limits."""
    rng = random.Random(sample.file)
    doc = _open(sample)
    anchor: int | None = None
    for _ in range(40):
        limits = ContextLimits(before_lines=rng.choice([3, 60]), window_snap=rng.choice([1, 16]),
                               suffix_lines=rng.choice([0, 20]),
                               head_max_chars=rng.choice([60, 1500]),
                               max_line_chars=rng.choice([5, 400]))
        start = rng.randrange(len(doc.text) + 1)
        end = min(len(doc.text), start + rng.choice([0, 1, 3, 30]))
        junk = "".join(rng.choice(_JUNK) for _ in range(rng.randrange(3)))
        doc.apply_change(junk, (*doc.position_at(start), *doc.position_at(end)))
        cursor = rng.randrange(len(doc.text) + 1)
        anchor = choose_anchor(doc, cursor, anchor if rng.random() < 0.7 else None, limits)
        ctx = build_context(doc, cursor, anchor, limits)
        assert anchor <= cursor and len(ctx.head) <= limits.head_max_chars
        assert ctx.middle == doc.text[anchor:cursor].replace("\r\n", "\n").replace("\r", "\n")
        assert isinstance(wants_multiline(doc, cursor), bool)
        assert enclosing_block_indent(doc, cursor) >= -1
