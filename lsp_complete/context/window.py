"""Window and anchor: where ``middle`` starts, and the ``before`` and ``suffix`` windows.

``before`` starts on a coarse line grid, so moving the anchor down appends to it; ``suffix``
depends on the cursor line, which typing on it does not change.
"""

from __future__ import annotations

from pathlib import PurePosixPath
from urllib.parse import unquote, urlparse

from lsp_complete.context.head import build_head
from lsp_complete.context.limits import CodeContext, ContextLimits
from lsp_complete.context.text import clamp, normalize_newlines
from lsp_complete.documents import Document


def choose_anchor(doc: Document, cursor: int, previous: int | None, limits: ContextLimits) -> int:
    """Keep the previous anchor while the middle stays small; otherwise the cursor's line start.

    On a line longer than ``max_line_chars`` (minified code) the anchor is a point on a grid
    inside the line instead, so that ``middle`` stays bounded.
    """
    cursor = clamp(doc, cursor)
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


def build_context(doc: Document, cursor: int, anchor: int, limits: ContextLimits) -> CodeContext:
    """The four prompt parts for ``cursor``; line breaks in them are normalized to "\n"."""
    cursor = clamp(doc, cursor)
    anchor = min(clamp(doc, anchor), cursor)
    anchor_line = doc.line_of(anchor)
    window_start = window_start_line(anchor_line, limits)

    before = "".join(_window_line(doc, i, limits) + "\n" for i in range(window_start, anchor_line))
    anchor_line_start = doc.line_start(anchor)
    if anchor > anchor_line_start:
        # Grid anchor inside a huge line: carry a bounded piece of the line before it.
        before += doc.text[max(anchor_line_start, anchor - limits.max_line_chars):anchor]

    cursor_line = doc.line_of(cursor)
    _, cursor_line_end = doc.line_range(cursor_line)
    rest = doc.text[cursor : min(cursor_line_end, cursor + limits.max_line_chars)]
    last_line = min(doc.line_count - 1, cursor_line + limits.suffix_lines)
    suffix = rest + "".join(
        "\n" + _window_line(doc, i, limits) for i in range(cursor_line + 1, last_line + 1)
    )
    middle = normalize_newlines(doc.text[anchor:cursor])
    head = build_head(doc, cursor, window_start, window_end_line=last_line, limits=limits)
    return CodeContext(
        path=display_path(doc.uri),
        language_id=doc.language_name,
        head=head,
        before=normalize_newlines(before),
        suffix=suffix,
        middle=middle,
        anchor=anchor,
    )


def window_start_line(anchor_line: int, limits: ContextLimits) -> int:
    """First line of ``before``: snapped down to a grid so small anchor moves only append."""
    snap = max(limits.window_snap, 1)
    return max(0, anchor_line - limits.before_lines) // snap * snap


def display_path(uri: str) -> str:
    """The file name of a URI (templates that carry a path get a short, stable one)."""
    try:
        path = unquote(urlparse(uri).path) if "://" in uri else uri
    except ValueError:  # a malformed URI (an unclosed `[` in the host) still has a name
        path = uri
    return PurePosixPath(path).name or path


def _window_line(doc: Document, line: int, limits: ContextLimits) -> str:
    start, end = doc.line_range(line)
    # A fixed-length cut keeps a huge line's text identical from one prompt to the next.
    return doc.text[start:min(end, start + limits.max_line_chars)]

