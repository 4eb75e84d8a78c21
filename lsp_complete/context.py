"""What the model sees: a stable head, a window before the anchor, the suffix and the middle.

The prompt is ``<head><fim_prefix>before<fim_suffix>suffix<fim_middle>middle``. Typing at the
cursor only appends to ``middle``, so everything before it keeps its KV cache. Everything here is
built so that it changes as rarely as possible:

* ``head`` comes from the syntax tree's *structure* (imports, an outline of definitions outside
  the window, headers of the scopes around the cursor), never from the text of a body, and from
  ``Document.structure_tree``, which does not follow half-typed statements;
* ``before`` starts on a coarse line grid, so moving the anchor down appends to it;
* ``suffix`` depends on the cursor line, which typing on it does not change.
"""

from __future__ import annotations

import bisect
import dataclasses
import sys
import weakref
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import PurePosixPath
from urllib.parse import unquote, urlparse

import tree_sitter

from lsp_complete.documents import Document
from lsp_complete.languages import LanguageSpec


@dataclass(frozen=True)
class ContextLimits:
    before_lines: int = 60  # window before the anchor, in lines
    window_snap: int = 16  # the window start is snapped down to a multiple of this many lines
    suffix_lines: int = 20
    max_line_chars: int = 400  # longer lines are truncated in windows (huge/minified lines)
    head_max_chars: int = 1500
    middle_max_lines: int = 6  # re-anchor when the middle spans more lines than this
    middle_max_chars: int = 400


@dataclass(frozen=True)
class CodeContext:
    path: str
    language_id: str
    head: str  # imports + outline outside the window + enclosing headers; "" without a grammar
    before: str  # whole lines [window_start, anchor_line), each ending with "\n"
    suffix: str  # rest of the cursor line, then up to suffix_lines following lines
    middle: str  # text from the anchor to the cursor
    anchor: int  # code-point offset of the anchor


# Long declarations kept "verbatim" in the outline are cut to this many lines.
_VERBATIM_MAX_LINES = 8
# Below this much room left in the head no signature fits: stop looking for more entries.
_MIN_ENTRY = 24
# Text fallbacks scan at most this many lines up from the cursor.
_MAX_SCAN_LINES = 2000
_CLOSERS = ("}", ")", "]")


# ============================================================================ anchor
def choose_anchor(doc: Document, cursor: int, previous: int | None, limits: ContextLimits) -> int:
    """Keep the previous anchor while the middle stays small; otherwise the cursor's line start.

    On a line longer than ``max_line_chars`` (minified code) the anchor is a point on a grid
    inside the line instead, so that ``middle`` stays bounded.
    """
    cursor = _clamp(doc, cursor)
    fresh = _fresh_anchor(doc, cursor, limits)
    if previous is None or not 0 <= previous <= cursor:
        return fresh
    if not _is_anchor_point(doc, previous, limits):
        return fresh
    if previous > doc.line_start(cursor) and previous != fresh:
        return fresh
    spanned_lines = doc.line_of(cursor) - doc.line_of(previous) + 1
    if spanned_lines > limits.middle_max_lines or cursor - previous > limits.middle_max_chars:
        return fresh
    return previous


def _fresh_anchor(doc: Document, cursor: int, limits: ContextLimits) -> int:
    start = doc.line_start(cursor)
    step = max(limits.max_line_chars, 1)
    if cursor - start <= step:
        return start
    return start + (cursor - start) // step * step


def _is_anchor_point(doc: Document, offset: int, limits: ContextLimits) -> bool:
    start = doc.line_start(offset)
    step = max(limits.max_line_chars, 1)
    return offset == start or (offset - start) % step == 0


# ============================================================================ context
def build_context(doc: Document, cursor: int, anchor: int, limits: ContextLimits) -> CodeContext:
    """The four prompt parts for ``cursor``; line breaks in them are normalized to "\n"."""
    cursor = _clamp(doc, cursor)
    anchor = min(_clamp(doc, anchor), cursor)
    anchor_line = doc.line_of(anchor)
    window_start = window_start_line(anchor_line, limits)

    before = "".join(_window_line(doc, i, limits) + "\n" for i in range(window_start, anchor_line))
    anchor_line_start = doc.line_start(anchor)
    if anchor > anchor_line_start:
        # Grid anchor inside a huge line: carry a bounded piece of the line before it.
        before += doc.text[max(anchor_line_start, anchor - limits.max_line_chars):anchor]

    cursor_line = doc.line_of(cursor)
    _, cursor_line_end = doc.line_range(cursor_line)
    rest = doc.text[cursor:cursor_line_end][: limits.max_line_chars]
    last_line = min(doc.line_count - 1, cursor_line + limits.suffix_lines)
    suffix = rest + "".join(
        "\n" + _window_line(doc, i, limits) for i in range(cursor_line + 1, last_line + 1)
    )
    middle = _normalize_newlines(doc.text[anchor:cursor])
    head = build_head(doc, cursor, window_start, window_end_line=last_line, limits=limits)
    return CodeContext(
        path=display_path(doc.uri),
        language_id=doc.language_id,
        head=head,
        before=_normalize_newlines(before),
        suffix=suffix,
        middle=middle,
        anchor=anchor,
    )


def cold_limits(limits: ContextLimits) -> ContextLimits:
    """Smaller windows for a file whose KV cache holds nothing useful yet.

    A cold prompt with the full windows costs ~700 tokens (~3 s on 2 cores): a typist would
    type a whole line before the first suggestion. This one costs ~250 tokens; the full
    context is encoded in idle time (re-anchoring) and used from then on.
    """
    return dataclasses.replace(
        limits,
        before_lines=min(limits.before_lines, 12),
        suffix_lines=min(limits.suffix_lines, 8),
        head_max_chars=min(limits.head_max_chars, 400),
    )


def window_start_line(anchor_line: int, limits: ContextLimits) -> int:
    """First line of ``before``: snapped down to a grid so small anchor moves only append."""
    snap = max(limits.window_snap, 1)
    return max(0, anchor_line - limits.before_lines) // snap * snap


def display_path(uri: str) -> str:
    """The file name of a URI (templates that carry a path get a short, stable one)."""
    path = unquote(urlparse(uri).path) if "://" in uri else uri
    return PurePosixPath(path).name or path


def _window_line(doc: Document, line: int, limits: ContextLimits) -> str:
    start, end = doc.line_range(line)
    # A fixed-length cut keeps a huge line's text identical from one prompt to the next.
    return doc.text[start:min(end, start + limits.max_line_chars)]


def _normalize_newlines(text: str) -> str:
    if "\r" not in text:
        return text
    return text.replace("\r\n", "\n").replace("\r", "\n")


def _clamp(doc: Document, offset: int) -> int:
    return min(max(offset, 0), len(doc.text))


# ============================================================================ head
class _HeadCache:
    def __init__(self) -> None:
        self.key: tuple | None = None
        self.head = ""


_head_caches: weakref.WeakKeyDictionary[Document, _HeadCache] = weakref.WeakKeyDictionary()


def build_head(
    doc: Document,
    cursor: int,
    window_start_line: int,
    window_end_line: int | None = None,
    limits: ContextLimits | None = None,
) -> str:
    """Imports, then an outline of definitions outside the window, then enclosing headers.

    Built from ``doc.structure_tree`` only, from parts ordered most to least stable, and capped
    at ``head_max_chars`` by dropping the outline entries farthest from the cursor (distance
    counted in definitions, not lines, so that typing newlines in a body changes nothing).
    """
    spec, tree = doc.spec, doc.structure_tree
    if spec is None or tree is None:
        return ""
    limits = limits or ContextLimits()
    cursor = _clamp(doc, cursor)
    if window_end_line is None:
        window_end_line = doc.line_of(cursor) + limits.suffix_lines
    key = (doc.revision, cursor, window_start_line, window_end_line, limits)
    cache = _head_caches.get(doc)
    if cache is None:
        cache = _head_caches[doc] = _HeadCache()
    if cache.key == key:
        return cache.head
    builder = _HeadBuilder(doc, spec, tree, cursor, window_start_line, window_end_line, limits)
    head = builder.build()
    cache.key, cache.head = key, head
    return head


class _HeadBuilder:
    """One head computation; holds the inputs so the helpers stay short."""

    def __init__(
        self,
        doc: Document,
        spec: LanguageSpec,
        tree: tree_sitter.Tree,
        cursor: int,
        window_start: int,
        window_end: int,
        limits: ContextLimits,
    ) -> None:
        self.doc, self.spec, self.tree, self.limits = doc, spec, tree, limits
        self.cursor_byte = doc.byte_offset(cursor)
        self.cursor = cursor
        # The window [window_start, window_end] as a byte range [start, end): comparing a
        # node's start byte is cheaper than finding its line, and this runs per top-level node.
        first = doc.byte_offset(doc.line_range(window_start)[0])
        after = window_end + 1
        last = doc.byte_offset(doc.line_range(after)[0]) if after < doc.line_count else sys.maxsize
        self.window_bytes = (first, last)

    # ------------------------------------------------------------------ assembly
    def build(self) -> str:
        items = _children(self.tree.root_node, self.spec)
        starts = [start.start_byte for start, _ in items]
        cursor_index = bisect.bisect_right(starts, self.cursor_byte) - 1
        # Sections are joined by a blank line and the head ends with "\n": reserve for both.
        limit = self.limits.head_max_chars - 1
        enclosing = self._enclosing_text(limit)
        budget = limit - (len(enclosing) + 2 if enclosing else 0)
        imports = self._imports(items, budget)
        budget -= len(imports) + 2 if imports else 0
        outline = self._outline(items, cursor_index, budget)
        parts = [p for p in (imports, outline, enclosing) if p]
        return "\n\n".join(parts) + "\n" if parts else ""

    def _imports(self, items: list[tuple[tree_sitter.Node, tree_sitter.Node]],
                 budget: int) -> str:
        texts: list[str] = []
        for start, node in items:
            if start.start_byte >= self.window_bytes[0]:
                break
            if self._is_import(node):
                texts.append(self._verbatim(start, node))
        # Over budget: drop the imports farthest from the cursor (the first ones).
        while texts and sum(len(t) + 1 for t in texts) > budget:
            texts.pop(0)
        return "\n".join(texts)

    def _outline(self, items: list[tuple[tree_sitter.Node, tree_sitter.Node]],
                 cursor_index: int, budget: int) -> str:
        """Entries nearest the cursor first until the budget is spent, shown in file order."""
        chosen = self._pick(items, cursor_index, budget)
        return "\n".join(chosen[i] for i in sorted(chosen))

    def _pick(self, items: list[tuple[tree_sitter.Node, tree_sitter.Node]], center: int,
              budget: int) -> dict[int, str]:
        """Render items outward from ``center`` while they fit; each costs its length + 1.

        Ranking by item index (not by line distance) is what keeps the choice fixed while
        lines are typed inside a body. Rendering stops once no signature could fit, so a huge
        file costs only the entries near the cursor.
        """
        chosen: dict[int, str] = {}
        for index in _outward(center, len(items)):
            if budget < _MIN_ENTRY:
                break
            start, node = items[index]
            if self._is_import(node):
                continue
            text = self._render(start, node, budget - 1)
            if text is not None:
                chosen[index] = text
                budget -= len(text) + 1
        return chosen

    # ------------------------------------------------------------------ outline entries
    def _render(self, start: tree_sitter.Node, node: tree_sitter.Node, budget: int) -> str | None:
        """One outline entry within ``budget`` chars, or None (not an entry, or no room)."""
        inner = _unwrap(node, self.spec)
        outside = self._outside(start)
        if inner.type in self.spec.containers:
            body = inner.child_by_field_name("body")
            if body is not None and body.type in _body_types(self.spec):
                return self._render_container(start, inner, body, outside, budget)
        if not outside:
            return None  # the window shows it
        text = self._leaf_text(start, node, inner)
        return text if text is not None and len(text) <= budget else None

    def _leaf_text(self, start: tree_sitter.Node, node: tree_sitter.Node,
                   inner: tree_sitter.Node) -> str | None:
        kind = inner.type
        if kind in self.spec.functions:
            body = _function_body(inner, self.spec)
            if body is not None:
                return self._header(start, inner, body) + self.spec.elision
            if kind in ("lexical_declaration", "variable_declaration"):
                return self._verbatim(start, node)  # `const X = ...` without a function
            return None
        if kind in self.spec.containers or (
            kind in self.spec.verbatim and self._is_declaration(inner)
        ):
            return self._verbatim(start, node)
        return None

    def _render_container(self, start: tree_sitter.Node, inner: tree_sitter.Node,
                          body: tree_sitter.Node, outside: bool, budget: int) -> str | None:
        """Header plus the members outside the window, nearest the cursor first."""
        header = self._header(start, inner, body)
        if self.spec.indent_scoped:
            empty, opener, closer = self.spec.elision, "", ""
        else:
            after = inner.next_sibling
            semicolon = ";" if after is not None and after.type == ";" else ""  # `class A {};`
            indent = _leading_ws(self.doc.line_text(self._line(start)))
            empty, opener = self.spec.elision + semicolon, " {"
            closer = "\n" + indent + "}" + semicolon
        members = [item for item in _children(body, self.spec) if not self._is_import(item[1])]
        starts = [member_start.start_byte for member_start, _ in members]
        center = bisect.bisect_right(starts, self.cursor_byte) - 1
        chosen = self._pick(members, center, budget - len(header) - len(opener) - len(closer))
        if chosen:
            lines = "\n".join(chosen[i] for i in sorted(chosen))
            return header + opener + "\n" + lines + closer
        text = header + empty
        return text if outside and len(text) <= budget else None

    # ------------------------------------------------------------------ enclosing scopes
    def _enclosing_text(self, limit: int) -> str:
        scopes = self._enclosing_scopes()
        headers: list[str] = []
        last: tuple[tree_sitter.Node, tree_sitter.Node, tree_sitter.Node] | None = None
        for start, node, body in scopes:
            if start.start_byte >= self.window_bytes[0]:
                continue
            headers.append(self._header(start, node, body, anonymous=node.type in
                                        self.spec.anonymous) + self._opener())
            last = (start, node, body)
        if last is None:
            return ""
        headers.append(self._marker(*last))
        text = "\n".join(headers)
        # Over budget: keep the innermost headers, then cut whole lines from the top.
        while len(text) > limit and len(headers) > 1:
            headers.pop(0)
            text = "\n".join(headers)
        if len(text) > limit:
            lines = text.split("\n")
            while lines and len("\n".join(lines)) > limit:
                lines.pop(0)
            text = "\n".join(lines)
        return text

    def _opener(self) -> str:
        return "" if self.spec.indent_scoped else " {"

    def _marker(self, start: tree_sitter.Node, node: tree_sitter.Node,
                body: tree_sitter.Node) -> str:
        """A one-line comment saying the scope's body continues in the window below."""
        header_line = self._line(start)
        first = next((c for c in body.named_children if c.type not in self.spec.comments), None)
        if first is not None and self._line(first) > header_line:
            indent = _leading_ws(self.doc.line_text(self._line(first)))
        else:
            indent = _leading_ws(self.doc.line_text(header_line)) + "    "
        return f"{indent}{self.spec.comment_prefix} ..."

    def _enclosing_scopes(self) -> list[tuple[tree_sitter.Node, tree_sitter.Node,
                                              tree_sitter.Node]]:
        """(start node, scope node, body) of the scopes around the cursor, outermost first."""
        lookup = self._scope_lookup()
        if lookup is None:
            return []
        probe, indent = lookup
        node: tree_sitter.Node | None = self.tree.root_node.descendant_for_byte_range(probe, probe)
        scopes: list[tuple[tree_sitter.Node, tree_sitter.Node, tree_sitter.Node]] = []
        seen_bodies: set[tuple[int, int]] = set()
        while node is not None:
            body = self._scope_body(node)
            if body is not None and (body.start_byte, body.end_byte) not in seen_bodies:
                start = _scope_start(node, self.spec)
                if self._encloses(start, body, indent):
                    seen_bodies.add((body.start_byte, body.end_byte))
                    scopes.append((start, node, body))
            node = node.parent
        scopes.reverse()
        return scopes

    def _scope_lookup(self) -> tuple[int, int | None] | None:
        """Where to look for enclosing scopes, and (indent-scoped languages) the indentation.

        Python blocks end at their last statement, so a fresh indented line after it lies
        outside every node. Probing at the end of the previous non-blank line instead, and
        keeping the scopes indented less than the cursor line, gives the same answer on the
        blank line and after the first typed character.

        A blank line counts as indented at least as deep as the previous code line: after
        Enter without auto-indent, typing the indentation one space at a time would otherwise
        change the enclosing headers (and re-encode the prompt after them) at every space.
        The first non-blank character settles the scope.
        """
        if not self.spec.indent_scoped:
            return self.cursor_byte, None
        doc = self.doc
        line = doc.line_of(self.cursor)
        start, _ = doc.line_range(line)
        text = doc.line_text(line)
        prev = _prev_code_line(doc, line)
        if prev is None:
            return None
        p_start, p_end = doc.line_range(prev)
        p_text = doc.text[p_start:p_end]
        if text.strip():
            indent = len(_leading_ws(text))
        else:
            # After a block opener (`def f():`) the line belongs to the new block.
            opens = p_text.rstrip().endswith(":")
            at_least = len(_leading_ws(p_text)) + (1 if opens else 0)
            indent = max(min(len(text), self.cursor - start), at_least)
        last_char = p_start + len(p_text.rstrip()) - 1
        return doc.byte_offset(last_char), indent

    def _scope_body(self, node: tree_sitter.Node) -> tree_sitter.Node | None:
        spec = self.spec
        if node.type in spec.functions:
            return _function_body(node, spec)
        if node.type in spec.containers or node.type in spec.anonymous:
            body = node.child_by_field_name("body")
            if body is not None and body.type in _body_types(spec):
                return body
        return None

    def _encloses(self, start: tree_sitter.Node, body: tree_sitter.Node,
                  indent: int | None) -> bool:
        if indent is not None:
            return len(_leading_ws(self.doc.line_text(self._line(start)))) < indent
        return body.start_byte < self.cursor_byte < body.end_byte or (
            body.start_byte < self.cursor_byte == body.end_byte and body.has_error
        )

    # ------------------------------------------------------------------ text helpers
    def _header(self, start: tree_sitter.Node, node: tree_sitter.Node, body: tree_sitter.Node,
                anonymous: bool = False) -> str:
        """Source from the start of the definition's line to the end of its signature."""
        end = _signature_end(node, body, self.spec)
        if anonymous:
            begin = self.doc.line_start_byte(start.start_byte)
        else:
            begin = self._line_prefix_start(start)
        return self._cut_lines(self.doc.text_in_bytes(begin, end).rstrip())

    def _verbatim(self, start: tree_sitter.Node, node: tree_sitter.Node) -> str:
        end = node.end_byte
        after = node.next_sibling
        if after is not None and after.type in (";", ":") and after.start_byte == end:
            # Some grammars leave the terminator out of the node (`public:`, TS fields).
            end = after.end_byte
        text = self.doc.text_in_bytes(self._line_prefix_start(start), end).rstrip()
        lines = text.split("\n")
        if len(lines) > _VERBATIM_MAX_LINES:
            indent = _leading_ws(lines[1]) if len(lines) > 1 else ""
            marker = f"{indent}{self.spec.comment_prefix} ..."
            lines = [*lines[: _VERBATIM_MAX_LINES - 2], marker, lines[-1]]
        return self._cut_lines("\n".join(lines))

    def _cut_lines(self, text: str) -> str:
        text = _normalize_newlines(text)
        limit = self.limits.max_line_chars
        if all(len(line) <= limit for line in text.split("\n")):
            return text
        return "\n".join(line[:limit] for line in text.split("\n"))

    def _line_prefix_start(self, node: tree_sitter.Node) -> int:
        """Start at the line start when only indentation precedes the node (keeps indent)."""
        line_start = self.doc.line_start_byte(node.start_byte)
        prefix = self.doc.text_in_bytes(line_start, node.start_byte)
        return line_start if not prefix.strip() else node.start_byte

    def _is_import(self, node: tree_sitter.Node) -> bool:
        kind = node.type
        if kind in self.spec.imports:
            return True
        if kind == "mod_item":
            return node.child_by_field_name("body") is None  # Rust `mod name;`
        if kind in ("lexical_declaration", "variable_declaration"):
            # CommonJS `const x = require("x")` is an import.
            value = _single_declarator_value(node)
            return value is not None and value.type == "call_expression" and (
                self.doc.text_in_bytes(value.start_byte, value.start_byte + 8) == "require("
            )
        return False

    def _is_declaration(self, node: tree_sitter.Node) -> bool:
        if node.type != "expression_statement":
            return True
        # Python: module/class-level assignments are structure (constants, fields); bare
        # calls and docstrings are not.
        first = node.named_child(0)
        return first is not None and first.type == "assignment"

    def _outside(self, start: tree_sitter.Node) -> bool:
        return not self.window_bytes[0] <= start.start_byte < self.window_bytes[1]

    def _line(self, node: tree_sitter.Node) -> int:
        return _row(self.doc, node)


# Body node types of containers that every grammar shares a name for.
_BODY_TYPES = frozenset({"block", "class_body", "declaration_list", "field_declaration_list",
                         "interface_body", "enum_body", "annotation_type_body",
                         "statement_block", "constructor_body"})


@cache
def _body_types(spec: LanguageSpec) -> frozenset[str]:
    """Node types that count as a delimited body (a definition's block) for ``spec``."""
    return spec.blocks | _BODY_TYPES


def _row(doc: Document, node: tree_sitter.Node) -> int:
    # tree-sitter rows count "\n" only; they equal LSP lines unless a lone "\r" breaks lines.
    if doc.has_lone_cr:
        return doc.line_of_byte(node.start_byte)
    return node.start_point[0]


def _outward(center: int, count: int) -> Iterator[int]:
    """Indices by distance from ``center``; on ties the one before the cursor comes first."""
    center = min(max(center, -1), count - 1)
    low, high = center, center + 1
    while low >= 0 or high < count:
        if low >= 0:
            yield low
            low -= 1
        if high < count:
            yield high
            high += 1


def _children(parent: tree_sitter.Node,
              spec: LanguageSpec) -> list[tuple[tree_sitter.Node, tree_sitter.Node]]:
    """(start node, node) for the named children, flattening transparent nodes.

    The start node is the node itself or the first of the attributes glued to it.
    """
    items: list[tuple[tree_sitter.Node, tree_sitter.Node]] = []
    pending: tree_sitter.Node | None = None
    for child in parent.named_children:
        kind = child.type
        if kind in spec.comments:
            continue
        if kind in spec.transparent:
            items.extend(_children(child, spec))
            pending = None
            continue
        if kind in spec.attached:
            pending = pending or child
            continue
        items.append((pending or child, child))
        pending = None
    return items


def _unwrap(node: tree_sitter.Node, spec: LanguageSpec) -> tree_sitter.Node:
    while node.type in spec.wrappers:
        inner = (node.child_by_field_name("definition")
                 or node.child_by_field_name("declaration"))
        if inner is None:
            named = [c for c in node.named_children if c.type not in spec.comments]
            if not named or node.type == "export_statement":
                return node
            inner = named[-1]
        node = inner
    return node


def _scope_start(node: tree_sitter.Node, spec: LanguageSpec) -> tree_sitter.Node:
    """The node where a definition's header begins: its wrappers and attached attributes."""
    start = node
    while start.parent is not None and start.parent.type in spec.wrappers:
        start = start.parent
    prev = start.prev_named_sibling
    while prev is not None and prev.type in spec.attached:
        start, prev = prev, prev.prev_named_sibling
    return start


def _function_body(node: tree_sitter.Node, spec: LanguageSpec) -> tree_sitter.Node | None:
    if node.type in ("lexical_declaration", "variable_declaration"):
        value = _single_declarator_value(node)
        if value is None or value.type not in spec.anonymous:
            return None
        node = value
    body = node.child_by_field_name("body")
    if body is not None and body.type in _body_types(spec):
        return body
    return None


def _signature_end(node: tree_sitter.Node, body: tree_sitter.Node, spec: LanguageSpec) -> int:
    """End of the last token before ``body``, skipping comments (`def f():  # note`)."""
    end = node.start_byte
    while True:
        inside: tree_sitter.Node | None = None
        for child in node.children:
            if child.start_byte >= body.start_byte:
                break
            if child.end_byte > body.start_byte:
                inside = child  # holds the body (`const f = () => {`): look inside it
                break
            if child.type not in spec.comments:
                end = child.end_byte
        if inside is None:
            return end
        node = inside


def _single_declarator_value(node: tree_sitter.Node) -> tree_sitter.Node | None:
    declarators = [c for c in node.named_children if c.type == "variable_declarator"]
    if len(declarators) != 1:
        return None
    return declarators[0].child_by_field_name("value")


def _leading_ws(line: str) -> str:
    return line[: len(line) - len(line.lstrip(" \t"))]


# ============================================================================ block shape
def wants_multiline(doc: Document, cursor: int) -> bool:
    """Should the suggestion be a block rather than the rest of one line?

    True on an empty line right after a block opener, in an empty body, or on a new line at the
    end of a block; False with text before the cursor on its line, or in the middle of existing
    statements (a one-line insertion is the safe guess there).
    """
    cursor = _clamp(doc, cursor)
    line = doc.line_of(cursor)
    start, end = doc.line_range(line)
    if doc.text[start:cursor].strip() or doc.text[cursor:end].strip():
        return False
    column = cursor - start
    prev = _prev_code_line(doc, line)
    if prev is not None and _ends_with_opener(doc, prev):
        return True
    nxt = line + 1
    while nxt < doc.line_count and not doc.line_text(nxt).strip():
        nxt += 1
    if nxt >= doc.line_count:
        return True
    next_text = doc.line_text(nxt)
    if next_text.lstrip().startswith(_CLOSERS):
        return True
    return len(_leading_ws(next_text)) < column


def enclosing_block_indent(doc: Document, cursor: int) -> int:
    """Indentation (leading whitespace characters) of the line that opened the innermost block
    around the cursor; -1 at the top level, where no block encloses the cursor.

    A tab counts as one character: compare it with the same measure of generated lines.
    """
    cursor = _clamp(doc, cursor)
    spec = doc.spec
    if spec is not None and doc.tree is not None and not spec.indent_scoped:
        found = _tree_block_indent(doc, cursor, spec)
        if found is not None:
            return found
    return _text_block_indent(doc, cursor, spec)


def _tree_block_indent(doc: Document, cursor: int, spec: LanguageSpec) -> int | None:
    assert doc.tree is not None
    cursor_byte = doc.byte_offset(cursor)
    node: tree_sitter.Node | None = doc.tree.root_node.descendant_for_byte_range(
        cursor_byte, cursor_byte
    )
    while node is not None:
        if node.type in spec.blocks and node.start_byte < cursor_byte < node.end_byte:
            owner = node.parent if node.parent is not None else node
            return len(_leading_ws(doc.line_text(_row(doc, owner))))
        node = node.parent
    return -1 if doc.tree.root_node.has_error is False else None


def _text_block_indent(doc: Document, cursor: int, spec: LanguageSpec | None) -> int:
    line = doc.line_of(cursor)
    start, _ = doc.line_range(line)
    text = doc.line_text(line)
    if text.strip():
        reference = len(_leading_ws(text))
    else:
        reference = min(len(text), cursor - start)
        prev = _prev_code_line(doc, line)
        if prev is not None and _ends_with_opener(doc, prev):
            return len(_leading_ws(doc.line_text(prev)))
    if reference == 0:
        return -1  # nothing is indented less than column 0: top level
    # Bounded scan: a block opener farther up than this is not worth a per-keystroke walk.
    for row in range(line - 1, max(-1, line - 1 - _MAX_SCAN_LINES), -1):
        candidate = doc.line_text(row)
        if candidate.strip() and len(_leading_ws(candidate)) < reference:
            return len(_leading_ws(candidate))
    return -1


def _prev_code_line(doc: Document, line: int) -> int | None:
    stop = max(-1, line - 1 - _MAX_SCAN_LINES)
    row = line - 1
    while row > stop and not doc.line_text(row).strip():
        row -= 1
    return row if row > stop else None


def _ends_with_opener(doc: Document, line: int) -> bool:
    """Does ``line`` end with its language's block opener, ignoring a trailing comment?"""
    start, end = doc.line_range(line)
    text = doc.text[start:end].rstrip()
    spec = doc.spec
    openers = (spec.block_opener,) if spec is not None else (":", "{")
    if spec is not None and doc.tree is not None and text:
        last = doc.byte_offset(start + len(text) - 1)
        node = doc.tree.root_node.descendant_for_byte_range(last, last + 1)
        if node is not None and node.type in spec.comments:
            comment_start = doc.offset_of_byte(node.start_byte)
            text = doc.text[start:max(start, comment_start)].rstrip()
    return text.endswith(openers)
