"""The stable head: imports, an outline of definitions outside the window, enclosing headers.

Built from the syntax tree's *structure* only, never from the text of a body, and from
``Document.structure_tree``, which does not follow half-typed statements: typing in a body
leaves the head, and the KV cache after it, unchanged.
"""

from __future__ import annotations

import bisect
import itertools
import sys
import weakref
from collections.abc import Iterator

import tree_sitter

from lsp_complete.context.limits import ContextLimits
from lsp_complete.context.nodes import (
    body_types,
    function_body,
    named_items,
    scope_start,
    signature_end,
    single_declarator_value,
    unwrap,
)
from lsp_complete.context.text import (
    clamp,
    leading_ws,
    node_row,
    normalize_newlines,
    prev_code_line,
)
from lsp_complete.documents import Document, node_path
from lsp_complete.languages import LanguageSpec

# Long declarations kept "verbatim" in the outline are cut to this many lines.
_VERBATIM_MAX_LINES = 8
# Below this much room left in the head no signature fits: stop looking for more entries.
_MIN_ENTRY = 24
# Top-level items looked at for the outline, nearest the cursor first: an entry too long for
# the room left is skipped and the next one tried, which in a file of 90,000 statements
# rendered every one of them (2 s a suggestion, on the event loop).
MAX_OUTLINE_LOOKS = 512
# A file of more top-level items than this is read at its top (HEAD_TOP_ITEMS: the imports sit
# there) and MAX_OUTLINE_LOOKS either side of the cursor: a Python pass over every item was
# 0.44 s a prepare (on the event loop) at 90,000 statements.
HEAD_WINDOWED_ABOVE = 4096
HEAD_TOP_ITEMS = 256
# The innermost enclosing scopes looked at: the head keeps the innermost headers that fit
# its budget, and each scope found costs a sibling step (its depth) in tree-sitter.
_MAX_SCOPES = 32


class _HeadCache:
    def __init__(self) -> None:
        self.key: tuple[object, ...] | None = None
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
    cursor = clamp(doc, cursor)
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
        items = self._items()
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

    def _items(self) -> list[tuple[tree_sitter.Node, tree_sitter.Node]]:
        """The top-level items, in file order; of a file of many, those at its top and
        those around the cursor only (the rest could not be shown anyway)."""
        root = self.tree.root_node
        children = root.named_children  # (one call: the Python pass is the cost)
        if len(children) <= HEAD_WINDOWED_ABOVE:
            return named_items(root, self.spec)
        at = bisect.bisect_right(children, self.cursor_byte, key=lambda n: n.start_byte)
        low = max(HEAD_TOP_ITEMS, at - MAX_OUTLINE_LOOKS)
        near = children[:HEAD_TOP_ITEMS] + children[low:at + MAX_OUTLINE_LOOKS]
        return named_items(root, self.spec, near)

    def _imports(self, items: list[tuple[tree_sitter.Node, tree_sitter.Node]],
                 budget: int) -> str:
        found = []
        for start, node in items:
            if start.start_byte >= self.window_bytes[0]:
                break
            if self._is_import(node):
                found.append((start, node))
        # Over budget: the imports farthest from the cursor (the first ones) are left out.
        # Counted from the last one back: a file with thousands of imports costs only those
        # kept (dropping from the front until the rest fit was quadratic: 35 s at 12 MiB).
        texts: list[str] = []
        used = 0
        for start, node in reversed(found):
            text = self._verbatim(start, node)
            if used + len(text) + 1 > budget:
                break
            texts.append(text)
            used += len(text) + 1
        return "\n".join(reversed(texts))

    def _outline(self, items: list[tuple[tree_sitter.Node, tree_sitter.Node]],
                 cursor_index: int, budget: int) -> str:
        """Entries nearest the cursor first until the budget is spent, shown in file order."""
        chosen = self._pick(items, cursor_index, budget)
        return "\n".join(chosen[i] for i in sorted(chosen))

    def _pick(self, items: list[tuple[tree_sitter.Node, tree_sitter.Node]], center: int,
              budget: int) -> dict[int, str]:
        """Render items outward from ``center`` while they fit; each costs its length + 1.

        Ranking by item index (not by line distance) is what keeps the choice fixed while
        lines are typed inside a body. Rendering stops once no signature could fit, or after
        MAX_OUTLINE_LOOKS items, so a huge file costs only the entries near the cursor.
        """
        chosen: dict[int, str] = {}
        for index in itertools.islice(_outward(center, len(items)), MAX_OUTLINE_LOOKS):
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
        inner = unwrap(node, self.spec)
        outside = self._outside(start)
        if inner.type in self.spec.containers:
            body = inner.child_by_field_name("body")
            if body is not None and body.type in body_types(self.spec):
                return self._render_container(start, inner, body, outside, budget)
        if not outside:
            return None  # the window shows it
        text = self._leaf_text(start, node, inner)
        return text if text is not None and len(text) <= budget else None

    def _leaf_text(self, start: tree_sitter.Node, node: tree_sitter.Node,
                   inner: tree_sitter.Node) -> str | None:
        kind = inner.type
        if kind in self.spec.functions:
            body = function_body(inner, self.spec)
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
            indent = leading_ws(self.doc.line_text(self._line(start)))
            empty, opener = self.spec.elision + semicolon, " {"
            closer = "\n" + indent + "}" + semicolon
        members = [item for item in named_items(body, self.spec) if not self._is_import(item[1])]
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
            indent = leading_ws(self.doc.line_text(self._line(first)))
        else:
            indent = leading_ws(self.doc.line_text(header_line)) + "    "
        return f"{indent}{self.spec.comment_prefix} ..."

    def _enclosing_scopes(self) -> list[tuple[tree_sitter.Node, tree_sitter.Node,
                                              tree_sitter.Node]]:
        """(start node, scope node, body) of the scopes around the cursor, outermost first."""
        lookup = self._scope_lookup()
        if lookup is None:
            return []
        probe, indent = lookup
        root = self.tree.root_node
        inner = root.descendant_for_byte_range(probe, probe)
        path = node_path(root, inner) if inner is not None else []
        scopes: list[tuple[tree_sitter.Node, tree_sitter.Node, tree_sitter.Node]] = []
        seen_bodies: set[tuple[int, int]] = set()
        for depth in range(len(path) - 1, -1, -1):  # innermost first
            node = path[depth]
            body = self._scope_body(node)
            if body is not None and (body.start_byte, body.end_byte) not in seen_bodies:
                start = scope_start(node, self.spec, path[:depth])
                if self._encloses(start, body, indent):
                    seen_bodies.add((body.start_byte, body.end_byte))
                    scopes.append((start, node, body))
                    if len(scopes) == _MAX_SCOPES:
                        break
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
        prev = prev_code_line(doc, line)
        if prev is None:
            return None
        p_start, p_end = doc.line_range(prev)
        p_text = doc.text[p_start:p_end]
        if text.strip():
            indent = len(leading_ws(text))
        else:
            # After a block opener (`def f():`) the line belongs to the new block.
            opens = p_text.rstrip().endswith(":")
            at_least = len(leading_ws(p_text)) + (1 if opens else 0)
            indent = max(min(len(text), self.cursor - start), at_least)
        last_char = p_start + len(p_text.rstrip()) - 1
        return doc.byte_offset(last_char), indent

    def _scope_body(self, node: tree_sitter.Node) -> tree_sitter.Node | None:
        spec = self.spec
        if node.type in spec.functions:
            return function_body(node, spec)
        if node.type in spec.containers or node.type in spec.anonymous:
            body = node.child_by_field_name("body")
            if body is not None and body.type in body_types(spec):
                return body
        return None

    def _encloses(self, start: tree_sitter.Node, body: tree_sitter.Node,
                  indent: int | None) -> bool:
        if indent is not None:
            return len(leading_ws(self.doc.line_text(self._line(start)))) < indent
        return body.start_byte < self.cursor_byte < body.end_byte or (
            body.start_byte < self.cursor_byte == body.end_byte and body.has_error
        )

    # ------------------------------------------------------------------ text helpers
    def _header(self, start: tree_sitter.Node, node: tree_sitter.Node, body: tree_sitter.Node,
                anonymous: bool = False) -> str:
        """Source from the start of the definition's line to the end of its signature."""
        end = signature_end(node, body, self.spec)
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
            indent = leading_ws(lines[1]) if len(lines) > 1 else ""
            marker = f"{indent}{self.spec.comment_prefix} ..."
            lines = [*lines[: _VERBATIM_MAX_LINES - 2], marker, lines[-1]]
        return self._cut_lines("\n".join(lines))

    def _cut_lines(self, text: str) -> str:
        text = normalize_newlines(text)
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
            value = single_declarator_value(node)
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
        return node_row(self.doc, node)


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
