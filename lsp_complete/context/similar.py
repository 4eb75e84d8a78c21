"""Similar code from other open files (and ranges recently edited in them): the window of
each file whose identifiers overlap most (Jaccard) with the lines before the cursor, as
Copilot's neighbouring tabs; one per file, the best few above a threshold."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from lsp_complete.workspace import SourceText, Workspace, path_of_uri

SIMILAR_WINDOW = 60  # lines of one similar-code window (as Copilot's neighbouring tabs)
SIMILAR_STEP = 10
SIMILAR_TOP = 4
SIMILAR_THRESHOLD = 0.25  # Jaccard similarity below this brings nothing worth its tokens
SIMILAR_MARGIN = 0.1  # a new pick must beat a kept one by this much to replace it
_WINDOWS_PER_FILE = 200  # similar-code windows compared per file (the step grows with size)

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


@dataclass(frozen=True)
class OpenText:
    """Another open file, as similar-code candidates see it."""

    uri: str
    edited_lines: tuple[int, ...] = ()  # recently edited lines (most recent first)


def identifiers(text: str) -> frozenset[str]:
    """The identifier tokens of a text, without the words every language repeats."""
    return frozenset(w for w in _IDENT.findall(text) if w.lower() not in _STOP_WORDS)


@dataclass(frozen=True)
class SimilarPick:
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
                 edited: tuple[int, ...]) -> SimilarPick | None:
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
    return SimilarPick(source.relative, best[1], "\n".join(text_lines).rstrip("\n"), best[0])


def similar_code(query: frozenset[str], others: Sequence[OpenText], current: Path,
                 workspace: Workspace, previous: tuple[SimilarPick, ...]) -> list[SimilarPick]:
    """The best windows of the `others` (not the `current` file) for the identifiers `query`;
    the `previous` picks while they still qualify."""
    if not query:
        return []
    picks: list[SimilarPick] = []
    for other in others:
        path = path_of_uri(other.uri)
        source = workspace.read(path) if path is not None else None
        if source is None or source.path == current:
            continue
        pick = _best_window(source, workspace, query, other.edited_lines)
        if pick is not None and pick.score >= SIMILAR_THRESHOLD:
            picks.append(pick)
    picks.sort(key=lambda p: -p.score)
    picks = picks[:SIMILAR_TOP]
    # Keep the previous picks while they still qualify and nothing clearly better came: a new
    # pick changes the first prompt segment, and the whole prompt is encoded again.
    chosen = {(p.relative, p.start, p.text) for p in picks}
    kept = [p for p in previous if (p.relative, p.start, p.text) in chosen]
    if previous and len(kept) == len(previous):
        floor = min(p.score for p in previous)
        if all(p.score < floor + SIMILAR_MARGIN for p in picks if p not in kept):
            return list(previous)
    return picks
