"""Repository context: what other files of the workspace tell the model, within a budget.

Two sources, in priority order, each with its own share of the `repoContextTokens` budget
(definitions 3/4; similar code 1/4 plus what definitions leave unused):

1. **Definitions of what the file imports** (context/imports.py finds the files): an outline
   of each, rendered for calling the code: signatures, class headers with their fields and
   method signatures, the first docstring line, constants. Over budget, what the cursor's
   line calls comes first and whole (`Thing.` shows all of Thing), then the names the file
   imports and the names used near the cursor, then the rest.
2. **Similar code** from other open files (and ranges recently edited in them): the 60-line
   window of each file whose identifiers overlap most (Jaccard) with the lines before the
   cursor; one per file, the best four above a threshold.

The result (`RepoContext`, plain data) becomes the first, most stable segment of the prompt.
Its KV discipline is what makes it cheap: `build_repo_context` keeps the previous block
unchanged (the very same object) while the file's imports and the imported files' versions are
the same and the cursor's line calls nothing the block shows only in part, and keeps the
previous similar-code picks while they still qualify. The server asks for it in idle time only
(never per keystroke). It runs off the event loop (file reads and parses); `repo_request`
captures on the loop what it needs.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import tree_sitter

from lsp_complete.context.imports import (
    ImportRef,
    ImportTarget,
    extract_imports,
    resolve_imports,
)
from lsp_complete.context.limits import RepoContext, RepoFile
from lsp_complete.context.nodes import function_body, named_items, signature_end, unwrap
from lsp_complete.documents import Document
from lsp_complete.languages import LanguageSpec, spec_for
from lsp_complete.workspace import SourceText, Workspace, path_of_uri

# A rough, conservative size of outline text in tokens (code runs 4-5 characters per token
# with Qwen's and StarCoder's vocabularies; dense signatures a little less).
CHARS_PER_TOKEN = 3.5
# The share of the budget kept for similar code (it also gets what definitions leave).
SIMILAR_SHARE = 0.25
SIMILAR_WINDOW = 60  # lines of one similar-code window (as Copilot's neighbouring tabs)
SIMILAR_STEP = 10
SIMILAR_TOP = 4
SIMILAR_THRESHOLD = 0.25  # Jaccard similarity below this brings nothing worth its tokens
SIMILAR_MARGIN = 0.1  # a new pick must beat a kept one by this much to replace it
QUERY_LINES = 60  # lines before the cursor compared with the windows
NEAR_LINES = 12  # lines before the cursor whose names come first in the definitions
_ENTRY_MAX_LINES = 40  # one outline entry (a class with its members) at most
_USED_CHARS = 512 * 1024  # identifiers of the file are looked for in this much of it
_WINDOWS_PER_FILE = 200  # similar-code windows compared per file (the step grows with size)
_TYPE_LINES = 12  # a type declaration (struct fields...) kept whole up to this many lines
_VALUE_LINES = 2  # a constant or field: its first lines
_COMMONJS = frozenset({"javascript", "typescript"})  # `exports.f = ...` is a definition
_EXPORT = re.compile(r"(?:module\.)?exports\.([A-Za-z_$][\w$]*)")
_LINE_CHARS = 160

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# Words every language repeats: they say nothing about what code is similar.
_STOP_WORDS = frozenset({
    "and", "as", "assert", "async", "await", "break", "case", "catch", "class", "const",
    "continue", "def", "default", "del", "do", "elif", "else", "enum", "except", "export",
    "extends", "false", "final", "finally", "fn", "for", "from", "func", "function", "go", "if",
    "impl", "import", "in", "int", "interface", "is", "let", "lambda", "match", "mod", "mut",
    "new", "nil", "none", "not", "null", "or", "package", "pass", "private", "protected", "pub",
    "public", "raise", "return", "self", "static", "str", "string", "struct", "super", "switch",
    "this", "throw", "true", "try", "type", "use", "var", "void", "while", "with", "yield",
})
_IDENT_TYPES = frozenset({"identifier", "type_identifier", "field_identifier",
                          "property_identifier", "package_identifier", "constant"})
_TYPE_KINDS = frozenset({"type_declaration", "struct_item", "enum_item", "union_item",
                         "type_item", "trait_item", "type_definition", "interface_declaration",
                         "type_alias_declaration", "enum_declaration", "enum_specifier"})
_DECLARATORS = frozenset({"variable_declarator", "type_spec", "const_spec", "var_spec",
                          "init_declarator", "assignment", "type_alias_declaration",
                          "enum_constant"})


# ---------------------------------------------------------------------- the request

@dataclass(frozen=True)
class OpenText:
    """Another open file, as similar-code candidates see it."""

    uri: str
    edited_lines: tuple[int, ...] = ()  # recently edited lines (most recent first)


@dataclass(frozen=True)
class RepoRequest:
    """What repository context for one file needs, captured on the event loop."""

    uri: str
    path: Path
    language: str  # grammar name
    imports: tuple[ImportRef, ...]
    text: str  # the document's text (a str never changes: the loop's edits make new ones)
    cursor: int
    others: tuple[OpenText, ...] = ()
    budget_tokens: int = 0

    def _before(self, lines: int) -> str:
        start = self.cursor
        for _ in range(lines + 1):
            start = self.text.rfind("\n", 0, start)
            if start < 0:
                break
        return self.text[start + 1 : self.cursor]

    @property
    def line(self) -> frozenset[str]:
        """Identifiers on the cursor's line before it (what is being called right now)."""
        return identifiers(self._before(0))

    @property
    def near(self) -> frozenset[str]:
        """Identifiers on the lines just before the cursor."""
        return identifiers(self._before(NEAR_LINES))

    @property
    def query(self) -> frozenset[str]:
        """Identifier tokens of the lines before the cursor (compared for similar code)."""
        return identifiers(self._before(QUERY_LINES))

    @property
    def used(self) -> frozenset[str]:
        """Identifiers of the file (of its first half megabyte)."""
        return identifiers(self.text[:_USED_CHARS])


def identifiers(text: str) -> frozenset[str]:
    """The identifier tokens of a text, without the words every language repeats."""
    return frozenset(w for w in _IDENT.findall(text) if w.lower() not in _STOP_WORDS)


def document_imports(doc: Document) -> tuple[ImportRef, ...]:
    """The document's imports (from the structure tree, which ignores half-typed lines)."""
    tree = doc.structure_tree or doc.tree
    if doc.spec is None or tree is None:
        return ()
    return extract_imports(doc.spec, tree.root_node, doc.text_in_bytes)


def repo_request(doc: Document, cursor: int, budget_tokens: int,
                 others: Sequence[OpenText] = ()) -> RepoRequest | None:
    """Capture what `build_repo_context` needs (on the loop: it reads the document)."""
    path = path_of_uri(doc.uri)
    if path is None or doc.spec is None or budget_tokens <= 0:
        return None
    return RepoRequest(
        uri=doc.uri,
        path=path,
        language=doc.spec.name,
        imports=document_imports(doc),
        text=doc.text,
        cursor=min(max(cursor, 0), len(doc.text)),
        others=tuple(o for o in others if o.uri != doc.uri),
        budget_tokens=budget_tokens,
    )


# ---------------------------------------------------------------------- outlines

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


# ---------------------------------------------------------------------- choosing entries

@dataclass
class _Target:
    source: SourceText
    outline: Outline
    names: tuple[str, ...]
    aliases: tuple[str, ...]
    order: int
    chosen: dict[int, set[int]] = field(default_factory=dict)  # entry -> members shown


@dataclass(frozen=True)
class _Focus:
    """What the cursor is at: identifiers of its line, of the lines before it, of the file."""

    line: frozenset[str]
    near: frozenset[str]
    used: frozenset[str]


_LAST_TIER = 4


def _entry_tier(entry: OutlineEntry, target: _Target, focus: _Focus) -> int:
    """0 best: named on the cursor's line (with all its members) ... 4: anything else."""
    names = set(entry.names)
    if names & focus.line:
        return 0
    imported = bool(names & set(target.names))
    if imported and names & focus.near or set(target.aliases) & focus.line and not target.names:
        return 1  # ... or any definition of a module named on the cursor's line (`b.`)
    if imported or names & focus.near:
        return 2
    if names & focus.used and not all(n.startswith("_") for n in names):
        return 3
    return _LAST_TIER


def _member_tier(member: OutlineEntry, tier: int, focus: _Focus) -> int:
    if tier == 0 or not member.names or set(member.names) & {"__init__", "constructor", "new"}:
        return tier  # all of what the cursor is at; how to make one, and what it is
    if set(member.names) & focus.near and tier <= 2:
        return tier
    return min(tier + 1, _LAST_TIER)


def _entry_cost(entry: OutlineEntry) -> int:
    return len(entry.text) + max(len(entry.opener) + len(entry.closer), len(entry.empty)) + 1


def _render_entry(entry: OutlineEntry, members: set[int]) -> str:
    if not entry.container:
        return entry.text
    shown = [entry.members[i].text for i in sorted(members)]
    if not shown:
        return entry.text + entry.empty
    return entry.text + entry.opener + "\n" + "\n".join(shown) + entry.closer


def _choose(targets: list[_Target], focus: _Focus, budget: int) -> dict[int, int]:
    """Pick entries and members within `budget` characters, best tier first; returns the
    best tier chosen from each target (by its index)."""
    # tier, target rank, line, entry, member; a target named near the cursor (`b.` of
    # `from . import b`, or a name taken from it) ranks first within a tier.
    units: list[tuple[int, int, int, int, int]] = []
    for t_index, target in enumerate(targets):
        named = bool(set(target.aliases) & focus.near or set(target.names) & focus.near)
        rank = target.order + (0 if named else len(targets))
        for e_index, entry in enumerate(target.outline.entries):
            tier = _entry_tier(entry, target, focus)
            units.append((tier, rank, entry.line, t_index * 100_000 + e_index, -1))
            for m_index, member in enumerate(entry.members):
                units.append((_member_tier(member, tier, focus), rank, member.line,
                              t_index * 100_000 + e_index, m_index))
    units.sort()
    best: dict[int, int] = {}
    for tier, _order, _line, key, m_index in units:
        target, e_index = targets[key // 100_000], key % 100_000
        entry = target.outline.entries[e_index]
        chosen = target.chosen.get(e_index)
        cost = 0 if chosen is not None else _entry_cost(entry)
        if m_index >= 0:
            if chosen is not None and m_index in chosen:
                continue
            cost += len(entry.members[m_index].text) + 1
        elif chosen is not None:
            continue
        if cost > budget:
            continue
        budget -= cost
        members = target.chosen.setdefault(e_index, set())
        if m_index >= 0:
            members.add(m_index)
        best.setdefault(key // 100_000, tier)
    return best


def _render_target(target: _Target) -> str:
    parts = [_render_entry(target.outline.entries[i], target.chosen[i])
             for i in sorted(target.chosen)]
    return "\n".join(parts)


# ---------------------------------------------------------------------- similar code

@dataclass(frozen=True)
class _Pick:
    relative: str
    start: int  # first line of the window
    text: str
    score: float


def _line_ids(source: SourceText) -> tuple[frozenset[str], ...]:
    return tuple(identifiers(line) for line in source.text.split("\n"))


def _windows(lines: Sequence[frozenset[str]], edited: Iterable[int]) -> Iterable[int]:
    """First lines of the candidate windows: a sliding grid, and one centred on each
    recently edited line."""
    count = len(lines)
    last = max(0, count - SIMILAR_WINDOW)
    step = max(SIMILAR_STEP, count // _WINDOWS_PER_FILE)
    starts = set(range(0, last + 1, step)) | {last}
    starts |= {min(last, max(0, line - SIMILAR_WINDOW // 2)) for line in edited}
    return sorted(starts)


def _best_window(source: SourceText, workspace: Workspace, query: frozenset[str],
                 edited: tuple[int, ...]) -> _Pick | None:
    lines = workspace.cached(source, "line-ids", _line_ids)
    best: tuple[float, int] | None = None
    for start in _windows(lines, edited):
        window: set[str] = set()
        for ids in lines[start:start + SIMILAR_WINDOW]:
            window |= ids
        union = len(window | query)
        score = len(window & query) / union if union else 0.0
        if best is None or score > best[0]:
            best = (score, start)
    if best is None:
        return None
    text_lines = source.text.split("\n")[best[1]:best[1] + SIMILAR_WINDOW]
    return _Pick(source.relative, best[1], "\n".join(text_lines).rstrip("\n"), best[0])


def _similar(request: RepoRequest, workspace: Workspace,
             previous: tuple[_Pick, ...]) -> list[_Pick]:
    query = request.query
    if not query:
        return []
    picks: list[_Pick] = []
    for other in request.others:
        path = path_of_uri(other.uri)
        source = workspace.read(path) if path is not None else None
        if source is None or source.path == request.path:
            continue
        pick = _best_window(source, workspace, query, other.edited_lines)
        if pick is not None and pick.score >= SIMILAR_THRESHOLD:
            picks.append(pick)
    picks.sort(key=lambda p: -p.score)
    picks = picks[:SIMILAR_TOP]
    # Keep the previous picks while they still qualify and nothing clearly better came: a new
    # pick changes the first prompt segment, and the whole prompt is encoded again.
    current = {(p.relative, p.start, p.text): p for p in picks}
    kept = [p for p in previous if (p.relative, p.start, p.text) in current]
    if previous and len(kept) == len(previous):
        floor = min(p.score for p in previous)
        if all(p.score < floor + SIMILAR_MARGIN for p in picks if p not in kept):
            return list(previous)
    return picks


# ---------------------------------------------------------------------- the block

@dataclass(frozen=True)
class RepoState:
    """What the last block was made from, so an unchanged input gives the same block."""

    definitions_key: tuple[object, ...] = ()
    definitions: tuple[RepoFile, ...] = ()
    complete: frozenset[str] = frozenset()  # names whose definitions are shown whole
    picks: tuple[_Pick, ...] = ()


def _targets(request: RepoRequest, workspace: Workspace) -> list[_Target]:
    found = resolve_imports(request.imports, request.path, request.language, workspace)
    targets: list[_Target] = []
    seen: set[Path] = set()

    def add(target: ImportTarget) -> tuple[SourceText, Outline] | None:
        if target.path in seen:
            return None
        seen.add(target.path)
        source = workspace.read(target.path)
        if source is None:
            return None
        outline = workspace.cached(source, "outline", file_outline)
        if outline is None:
            return None
        if outline.entries:
            targets.append(_Target(source, outline, target.names, target.aliases,
                                   len(targets)))
        return source, outline

    for target in found:
        made = add(target)
        if made is None:
            continue
        source, outline = made
        # A name the file imports but the module only re-exports (`from .x import name` in a
        # package's __init__.py): follow that one import, once.
        missing = [n for n in target.names if n != "*" and n not in outline.defined]
        if missing:
            refs = tuple(r for r in outline.imports if set(r.aliases) & set(missing))
            language = spec_for(source.language_id, source.path.name)
            if refs and language is not None:
                for hop in resolve_imports(refs, source.path, language.name, workspace):
                    add(ImportTarget(hop.path, hop.names, hop.aliases))
    return targets


def build_repo_context(request: RepoRequest, workspace: Workspace,
                       previous: RepoContext | None = None,
                       cancelled: Callable[[], bool] = lambda: False) -> RepoContext | None:
    """The repository block for a file, or None when there is nothing to show (or no root).

    With `previous` (this file's block in use), an unchanged input returns `previous` itself:
    the same imports resolving to the same versions of the same files, and similar-code picks
    that still qualify.
    """
    source_root = workspace.root_of(request.path)
    if source_root is None or request.budget_tokens <= 0:
        return None
    budget = int(request.budget_tokens * CHARS_PER_TOKEN)
    similar_budget = int(budget * SIMILAR_SHARE)
    state = previous.state if previous is not None and isinstance(previous.state, RepoState) \
        else RepoState()

    targets = _targets(request, workspace)
    if cancelled():
        return previous
    # The definitions depend on the imports and the imported files' versions; and, so that
    # what the cursor's line calls is shown whole, on whether it is: a line calling an
    # imported definition the block shows only in part changes them (in idle time, never
    # while typing on).
    key = (request.imports, request.budget_tokens,
           tuple((t.source.path, t.source.version) for t in targets))
    # Names the targets define, and the local names of whole modules (`b` of `b.`).
    called = {n for t in targets for n in t.outline.defined}
    called |= {a for t in targets if not t.names for a in t.aliases}
    wanted = request.line & called
    if key == state.definitions_key and wanted <= state.complete:
        definitions, complete = state.definitions, state.complete
    else:
        focus = _Focus(wanted, request.near, request.used)
        best = _choose(targets, focus, budget - similar_budget)
        # The most needed file last, right before the current one.
        ordered = sorted((i for i in best), key=lambda i: (-best[i], -targets[i].order))
        definitions = tuple(RepoFile(targets[i].source.relative, _render_target(targets[i]),
                                     "definitions") for i in ordered)
        complete = frozenset(n for t in targets for e, m in t.chosen.items()
                             if len(m) == len(t.outline.entries[e].members)
                             for n in t.outline.entries[e].names)
    room = budget - sum(len(f.text) + len(f.path) + 2 for f in definitions)
    picks = _similar(request, workspace, state.picks)
    similar: list[RepoFile] = []
    for pick in picks:
        text = pick.text
        while len(text) + len(pick.relative) + 2 > room and "\n" in text:
            text = text.rsplit("\n", 1)[0]  # the window's last lines go first
        if len(text) + len(pick.relative) + 2 > room:
            continue
        room -= len(text) + len(pick.relative) + 2
        similar.append(RepoFile(pick.relative, text, "similar"))
    files = (*definitions, *similar)
    if not files:
        return None
    try:
        current = request.path.resolve().relative_to(source_root).as_posix()
    except ValueError:
        current = request.path.name
    made = RepoContext(
        name=source_root.name,
        current_path=current,
        files=files,
        state=RepoState(key, definitions, complete, tuple(picks)),
    )
    return previous if previous is not None and previous == made else made
