"""Small helpers over a Document's text shared by the window, the head and block shape."""

from __future__ import annotations

import tree_sitter

from lsp_complete.documents import Document

# Text fallbacks scan at most this many lines up from the cursor.
MAX_SCAN_LINES = 2000


def normalize_newlines(text: str) -> str:
    if "\r" not in text:
        return text
    return text.replace("\r\n", "\n").replace("\r", "\n")


def clamp(doc: Document, offset: int) -> int:
    return min(max(offset, 0), len(doc.text))


def node_row(doc: Document, node: tree_sitter.Node) -> int:
    # A document's tree has LSP lines as rows (documents.py reads a lone "\r" as "\n" for the
    # parser); the byte's line is the same, and holds for a tree from elsewhere too.
    if doc.has_lone_cr:
        return doc.line_of_byte(node.start_byte)
    return node.start_point[0]


def leading_ws(line: str) -> str:
    return line[: len(line) - len(line.lstrip(" \t"))]


def prev_code_line(doc: Document, line: int) -> int | None:
    stop = max(-1, line - 1 - MAX_SCAN_LINES)
    row = line - 1
    while row > stop and not doc.line_text(row).strip():
        row -= 1
    return row if row > stop else None

