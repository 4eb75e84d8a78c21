"""Outlines of source files, rendered for calling their code: signatures, class headers with
their fields and method signatures, the first docstring line, constants; what each entry
names, for ranking (context/repo.py chooses what a repository block shows of them)."""

from __future__ import annotations

import re
from dataclasses import dataclass

import tree_sitter

from lsp_complete.context.imports import ImportRef, extract_imports
from lsp_complete.context.nodes import function_body, named_items, signature_end, unwrap
from lsp_complete.languages import LanguageSpec, spec_for
from lsp_complete.workspace import SourceText

_ENTRY_MAX_LINES = 40  # one outline entry (a class with its members) at most
_TYPE_LINES = 12  # a type declaration (struct fields...) kept whole up to this many lines
_VALUE_LINES = 2  # a constant or field: its first lines
_COMMONJS = frozenset({"javascript", "typescript"})  # `exports.f = ...` is a definition
_EXPORT = re.compile(r"(?:module\.)?exports\.([A-Za-z_$][\w$]*)")
_LINE_CHARS = 160
_IDENT_TYPES = frozenset({"identifier", "type_identifier", "field_identifier",
                          "property_identifier", "package_identifier", "constant"})
_TYPE_KINDS = frozenset({"type_declaration", "struct_item", "enum_item", "union_item",
                         "type_item", "trait_item", "type_definition", "interface_declaration",
                         "type_alias_declaration", "enum_declaration", "enum_specifier"})
_DECLARATORS = frozenset({"variable_declarator", "type_spec", "const_spec", "var_spec",
                          "init_declarator", "assignment", "type_alias_declaration",
                          "enum_constant"})


@dataclass(frozen=True)
class OutlineEntry:
    """One definition of a file, rendered; a container's members are entries of their own."""

    names: tuple[str, ...]
    text: str  # for a container: its header
    line: int
    members: tuple[OutlineEntry, ...] = ()
    container: bool = False
    opener: str = ""  # after a container's header when members follow (" {")
    closer: str = ""  # a container's closing line ("" for Python)
    empty: str = ""  # after a container's header when no member is shown (" { ... }")


@dataclass(frozen=True)
class Outline:
    entries: tuple[OutlineEntry, ...]
    imports: tuple[ImportRef, ...]
    defined: frozenset[str]


def file_outline(source: SourceText) -> Outline | None:
    """The outline of a workspace file (None for a language without a grammar)."""
    spec = spec_for(source.language_id, source.path.name)
    if spec is None:
        return None
    return _Outliner(source.text, spec).outline()


class _Outliner:
    def __init__(self, text: str, spec: LanguageSpec) -> None:
        self.spec = spec
        self.data = text.encode("utf-8")
        self.tree = spec.parser().parse(self.data)

    def text(self, start: int, end: int) -> str:
        return self.data[start:end].decode("utf-8", errors="replace")

    def line_start(self, byte: int) -> int:
        return self.data.rfind(b"\n", 0, byte) + 1

    def outline(self) -> Outline:
        root = self.tree.root_node
        entries: list[OutlineEntry] = []
        doc = self._module_doc(root)
        if doc is not None:
            entries.append(doc)
        for start, node in named_items(root, self.spec):
            if self._is_import(node):
                continue
            entry = self._entry(start, node, depth=0)
            if entry is not None and not all(_dunder(n) for n in entry.names or ("x",)):
                entries.append(entry)
        imports = extract_imports(self.spec, root, self.text)
        defined = frozenset(n for e in entries for n in e.names)
        return Outline(tuple(entries), imports, defined)

    # ---------------------------------------------------------------- entries

    def _entry(self, start: tree_sitter.Node, node: tree_sitter.Node,
               depth: int) -> OutlineEntry | None:
        spec = self.spec
        inner = unwrap(node, spec)
        kind = inner.type
        line = start.start_point[0]
        if kind in spec.containers:
            body = inner.child_by_field_name("body")
            if body is not None:
                return self._container(start, inner, body, depth)
        if kind in spec.functions:
            body = function_body(inner, spec)
            if body is not None:
                return OutlineEntry(self._names(inner), self._function(start, inner, body), line)
        if kind in ("lexical_declaration", "variable_declaration") or (
            kind in spec.verbatim and self._is_declaration(inner)
        ):
            limit = _TYPE_LINES if kind in _TYPE_KINDS else _VALUE_LINES
            return OutlineEntry(self._names(inner), self._verbatim(start, node, limit), line)
        if kind == "expression_statement" and spec.name in _COMMONJS and depth == 0:
            names = self._exported(inner)
            if names:
                return OutlineEntry(names, self._verbatim(start, node, _VALUE_LINES), line)
        return None

    def _exported(self, statement: tree_sitter.Node) -> tuple[str, ...]:
        """The names a CommonJS module exports by assignment: `exports.f = ...`,
        `module.exports.f = ...`, `module.exports = { f, g: ..., h() {} }` (compiled
        TypeScript and Babel output export everything so). The `exports.a = exports.b = void 0`
        preamble, `exports.f = f` and `exports.a = void 0` name nothing new."""
        assignment = statement.named_children[0] if statement.named_children else None
        if assignment is None or assignment.type != "assignment_expression":
            return ()
        left, right = assignment.child_by_field_name("left"), \
            assignment.child_by_field_name("right")
        if left is None or right is None or right.type == "assignment_expression":
            return ()
        target = self.text(left.start_byte, left.end_byte)
        named = _EXPORT.fullmatch(target)
        if named:
            value = self.text(right.start_byte, right.end_byte)
            # `exports.f = f` (f is outlined where it is defined) and `= void 0` say nothing.
            return () if value in (named.group(1), "void 0") else (named.group(1),)
        if target != "module.exports" or right.type != "object":
            return ()
        names = []
        for item in right.named_children:
            key = item if item.type == "shorthand_property_identifier" else \
                item.child_by_field_name("key") if item.type == "pair" else \
                item.child_by_field_name("name") if item.type == "method_definition" else None
            if key is not None and key.type in ("property_identifier", "identifier",
                                                "shorthand_property_identifier"):
                names.append(self.text(key.start_byte, key.end_byte))
        return tuple(names)

    def _container(self, start: tree_sitter.Node, inner: tree_sitter.Node,
                   body: tree_sitter.Node, depth: int) -> OutlineEntry:
        header = self._header(start, inner, body)
        members: list[OutlineEntry] = []
        if depth < 2:
            doc = self._docstring(body)
            if doc:
                members.append(OutlineEntry((), doc, body.start_point[0]))
            for member_start, member in named_items(body, self.spec):
                if self._is_import(member):
                    continue
                entry = self._entry(member_start, member, depth + 1)
                if entry is not None:
                    members.append(entry)
        opener = closer = ""
        if not self.spec.indent_scoped:
            opener, closer = " {", "\n" + self._indent(start.start_byte) + "}"
            header = self._leading_comment(start) + header
        return OutlineEntry(self._names(inner), header, start.start_point[0], tuple(members),
                            True, opener, closer, self.spec.elision)

    def _function(self, start: tree_sitter.Node, inner: tree_sitter.Node,
                  body: tree_sitter.Node) -> str:
        header = self._header(start, inner, body)
        doc = self._docstring(body) if self.spec.indent_scoped else ""
        if doc:
            return header + "\n" + doc
        comment = self._leading_comment(start)
        text = header + self.spec.elision
        return comment + text if comment else text

    # ---------------------------------------------------------------- text pieces

    def _header(self, start: tree_sitter.Node, inner: tree_sitter.Node,
                body: tree_sitter.Node) -> str:
        end = signature_end(inner, body, self.spec)
        text = self.text(self.line_start(start.start_byte), end).rstrip()
        return _cut("\n".join(text.split("\n")[-_ENTRY_MAX_LINES // 4:]))

    def _verbatim(self, start: tree_sitter.Node, node: tree_sitter.Node, limit: int) -> str:
        end = node.end_byte
        after = node.next_sibling
        if after is not None and after.type in (";", ":") and after.start_byte == end:
            end = after.end_byte
        lines = self.text(self.line_start(start.start_byte), end).rstrip().split("\n")
        if len(lines) > limit:
            marker = " ..." if self.spec.indent_scoped else " /* ... */"
            lines = [*lines[:limit - 1], lines[limit - 1] + marker] if limit > 1 else \
                [lines[0] + marker]
        return _cut("\n".join(lines))

    def _indent(self, byte: int) -> str:
        start = self.line_start(byte)
        prefix = self.text(start, byte)
        return prefix[: len(prefix) - len(prefix.lstrip(" \t"))]

    def _docstring(self, body: tree_sitter.Node) -> str:
        """The first line of a Python docstring, as a one-line docstring."""
        if not self.spec.indent_scoped:
            return ""
        first = body.named_children[0] if body.named_children else None
        if first is None or first.type != "expression_statement":
            return ""
        string = first.named_children[0] if first.named_children else None
        if string is None or string.type != "string":
            return ""
        raw = self.text(string.start_byte, string.end_byte)
        quote = '"""' if '"""' in raw[:4] else "'''" if "'''" in raw[:4] else raw[:1]
        content = raw[raw.find(quote) + len(quote):]
        line = next((s.strip() for s in content.split("\n") if s.strip().strip(quote)), "")
        line = line.replace(quote, "").strip()
        if not line:
            return ""
        return f'{self._indent(first.start_byte)}"""{line[:_LINE_CHARS]}"""'

    def _module_doc(self, root: tree_sitter.Node) -> OutlineEntry | None:
        if not self.spec.indent_scoped:
            return None
        doc = self._docstring(root)
        return OutlineEntry((), doc, 0) if doc else None

    def _leading_comment(self, start: tree_sitter.Node) -> str:
        """The first line of the comment right above a definition, as a one-line comment."""
        prev = start.prev_sibling
        if prev is None or not self._is_comment(prev):
            return ""
        if start.start_point[0] - prev.end_point[0] > 1:
            return ""
        while (prev.prev_sibling is not None and self._is_comment(prev.prev_sibling)
               and prev.start_point[0] - prev.prev_sibling.end_point[0] <= 1):
            prev = prev.prev_sibling
        lines = self.text(prev.start_byte, prev.end_byte).split("\n")
        for raw in lines:
            line = raw.strip().lstrip("/*#!").rstrip("*/").strip()
            if line:
                indent = self._indent(start.start_byte)
                return f"{indent}{self.spec.comment_prefix} {line[:_LINE_CHARS]}\n"
        return ""

    # ---------------------------------------------------------------- questions

    def _is_comment(self, node: tree_sitter.Node) -> bool:
        # Rust's and Java's grammars name theirs line_comment / block_comment.
        return node.type in self.spec.comments or node.type.endswith("comment")

    def _names(self, node: tree_sitter.Node) -> tuple[str, ...]:
        found: list[str] = []

        def visit(n: tree_sitter.Node, depth: int) -> None:
            # `impl Circle` (Rust) is named by its type.
            fields = ("type",) if n.type == "impl_item" else ("name", "declarator", "left")
            for field_name in fields:
                child = n.child_by_field_name(field_name)
                while child is not None and child.type not in _IDENT_TYPES:
                    child = child.child_by_field_name("declarator") or \
                        child.child_by_field_name("name")
                if child is not None:
                    found.append(self.text(child.start_byte, child.end_byte))
                    break
            if depth < 2:
                for c in n.named_children:
                    if c.type in _DECLARATORS or c.type == "expression_statement":
                        visit(c, depth + 1)

        visit(node, 0)
        return tuple(dict.fromkeys(found))

    def _is_import(self, node: tree_sitter.Node) -> bool:
        kind = node.type
        if kind in self.spec.imports:
            return True
        if kind == "mod_item":
            return node.child_by_field_name("body") is None
        return kind in ("lexical_declaration", "variable_declaration") and \
            "require(" in self.text(node.start_byte, min(node.end_byte, node.start_byte + 200))

    def _is_declaration(self, node: tree_sitter.Node) -> bool:
        if node.type != "expression_statement":
            return True
        first = node.named_child(0)
        return first is not None and first.type == "assignment"


def _dunder(name: str) -> bool:
    # `__all__`, `__version__`: what a module says about itself, not what callers need.
    return name.startswith("__") and name.endswith("__")


def _cut(text: str) -> str:
    return "\n".join(line[:_LINE_CHARS] for line in text.split("\n"))
