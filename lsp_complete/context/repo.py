"""Repository context: what other files of the workspace tell the model, within a budget. This
module assembles the block; outline.py makes the outlines, similar.py finds similar code.

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

A file asked before idle work built its block gets a small one on demand instead
(`line_definitions`): the definitions its cursor's line names, and nothing else.

The result (`RepoContext`, plain data) becomes the first, most stable segment of the prompt.
Its KV discipline is what makes it cheap: `build_repo_context` keeps the previous block
unchanged (the very same object) while the file's imports and the imported files' versions are
the same and the cursor's line calls nothing the block shows only in part, and keeps the
previous similar-code picks while they still qualify. The server asks for it in idle time only
(never per keystroke). It runs off the event loop (file reads and parses); `repo_request`
captures on the loop what it needs.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from lsp_complete.context.imports import (
    ImportRef,
    ImportTarget,
    extract_imports,
    resolve_imports,
)
from lsp_complete.context.limits import RepoContext, RepoFile
from lsp_complete.context.outline import Outline, OutlineEntry, file_outline
from lsp_complete.context.similar import OpenText, SimilarPick, identifiers, similar_code
from lsp_complete.documents import Document
from lsp_complete.languages import spec_for
from lsp_complete.workspace import SourceText, Workspace, path_of_uri

# A rough, conservative size of outline text in tokens (code runs 4-5 characters per token
# with Qwen's and StarCoder's vocabularies; dense signatures a little less).
CHARS_PER_TOKEN = 3.5
# The share of the budget kept for similar code (it also gets what definitions leave).
SIMILAR_SHARE = 0.25
QUERY_LINES = 60  # lines before the cursor compared with the windows
NEAR_LINES = 12  # lines before the cursor whose names come first in the definitions
# What the cursor's line names, built on demand for a file asked before it has a block
# (`line_definitions`): this many tokens at most, paid by its first prompt.
LINE_BLOCK_TOKENS = 192
_USED_CHARS = 512 * 1024  # identifiers of the file are looked for in this much of it


# ---------------------------------------------------------------------- the request

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


def _choose(targets: list[_Target], focus: _Focus, budget: int,
            worst_tier: int = _LAST_TIER) -> dict[int, int]:
    """Pick entries and members within `budget` characters, best tier first, none of a tier
    worse than `worst_tier`; returns the best tier chosen from each target (by its index)."""
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
        if tier > worst_tier:
            break
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


# ---------------------------------------------------------------------- the block

@dataclass(frozen=True)
class RepoState:
    """What the last block was made from, so an unchanged input gives the same block."""

    definitions_key: tuple[object, ...] = ()
    definitions: tuple[RepoFile, ...] = ()
    complete: frozenset[str] = frozenset()  # names whose definitions are shown whole
    picks: tuple[SimilarPick, ...] = ()


def _targets(request: RepoRequest, workspace: Workspace,
             cancelled: Callable[[], bool]) -> list[_Target]:
    found = resolve_imports(request.imports, request.path, request.language, workspace,
                            cancelled)
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
        if cancelled():
            break
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
                for hop in resolve_imports(refs, source.path, language.name, workspace,
                                           cancelled):
                    add(ImportTarget(hop.path, hop.names, hop.aliases))
    return targets


def line_definitions(request: RepoRequest, workspace: Workspace,
                     cancelled: Callable[[], bool] = lambda: False) -> RepoContext | None:
    """The definitions of what the cursor's line names from the files it imports, whole
    (`Thing(` or `Thing.`: Thing with its members; `b.` of `from . import b`: b's top-level
    definitions), within the request's budget; None when the line names nothing they define.

    A small block built on demand for a file asked before it has a block of its own (at open,
    or after a pause with no keystroke: idle work builds the whole block only after an
    answer). It is `cold`: the small first prompts carry it too."""
    source_root = workspace.root_of(request.path)
    if source_root is None or request.budget_tokens <= 0 or not request.line:
        return None
    targets = _targets(request, workspace, cancelled)
    wanted = _named_on_line(request, targets)
    if not wanted or cancelled():
        return None
    best = _choose(targets, _Focus(wanted, frozenset(), frozenset()),
                   int(request.budget_tokens * CHARS_PER_TOKEN), worst_tier=1)
    files = tuple(RepoFile(targets[i].source.relative, _render_target(targets[i]), "line")
                  for i in sorted(best, key=lambda i: -targets[i].order))
    if not files:
        return None
    return RepoContext(name=source_root.name, current_path=_relative(request.path, source_root),
                       files=files, state=request.line, cold=True)  # (the names it shows)


def _named_on_line(request: RepoRequest, targets: list[_Target]) -> frozenset[str]:
    """What the cursor's line names that the targets define (or a whole module's local name,
    `b` of `b.`)."""
    called = {n for t in targets for n in t.outline.defined}
    called |= {a for t in targets if not t.names for a in t.aliases}
    return request.line & called


def _relative(path: Path, root: Path) -> str:
    try:
        return path.resolve().relative_to(root).as_posix()
    except ValueError:
        return path.name


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

    targets = _targets(request, workspace, cancelled)
    if cancelled():
        return previous
    # The definitions depend on the imports and the imported files' versions; and, so that
    # what the cursor's line calls is shown whole, on whether it is: a line calling an
    # imported definition the block shows only in part changes them (in idle time, never
    # while typing on).
    key = (request.imports, request.budget_tokens,
           tuple((t.source.path, t.source.version) for t in targets))
    wanted = _named_on_line(request, targets)
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
    picks = similar_code(request.query, request.others, request.path, workspace,
                         state.picks)
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
    made = RepoContext(
        name=source_root.name,
        current_path=_relative(request.path, source_root),
        files=files,
        state=RepoState(key, definitions, complete, tuple(picks)),
    )
    return previous if previous is not None and previous == made else made
