"""Block shape: should a suggestion be a block, may a block follow a one-line answer, which
block encloses the cursor, which one a closer there would close, and how much of a generated
block parses.

Per language through the document's `LanguageSpec` (from `languages.py`): its block node types,
its block opener (`:` or `{`) and whether its blocks are indentation-scoped.
"""

from __future__ import annotations

from collections import deque

import tree_sitter

from lsp_complete.context.nodes import function_body, signature_end
from lsp_complete.context.text import (
    MAX_SCAN_LINES,
    clamp,
    leading_ws,
    node_row,
    prev_code_line,
)
from lsp_complete.documents import Document, node_path
from lsp_complete.languages import LanguageSpec, spec_for

_CLOSERS = ("}", ")", "]")
_OPENERS = ("{", "(", "[")


def wants_multiline(doc: Document, cursor: int) -> bool:
    """Should the suggestion be a block rather than the rest of one line?

    True on an empty line right after a block opener, in an empty body, or on a new line at the
    end of a block; False with text before the cursor on its line, or in the middle of existing
    statements (a one-line insertion is the safe guess there).
    """
    cursor = clamp(doc, cursor)
    line = doc.line_of(cursor)
    start, end = doc.line_range(line)
    if doc.text[start:cursor].strip() or doc.text[cursor:end].strip():
        return False
    column = cursor - start
    prev = prev_code_line(doc, line)
    if prev is not None and _ends_with_opener(doc, prev):
        return True
    nxt = _next_code_line(doc, line)
    if nxt is None:
        return True
    next_text = doc.line_text(nxt)
    if next_text.lstrip().startswith(_CLOSERS):
        return True
    return len(leading_ws(next_text)) < column


def among_statements(doc: Document, cursor: int) -> bool:
    """An empty line among statements, where a block's lines are statements (their scope is
    `statements_indent`): nothing on the line, a grammar, the code line above leaves no
    expression open, and the next code line is not a closing bracket (the block it closes is
    what the lines belong to)."""
    if not block_may_follow(doc, cursor):
        return False
    nxt = _next_code_line(doc, doc.line_of(clamp(doc, cursor)))
    return nxt is None or not doc.line_text(nxt).lstrip().startswith(_CLOSERS)


def _next_code_line(doc: Document, line: int) -> int | None:
    """The first line after `line` that is not blank; None at the end of the file."""
    nxt = line + 1
    while nxt < doc.line_count and not doc.line_text(nxt).strip():
        nxt += 1
    return nxt if nxt < doc.line_count else None


def block_may_follow(doc: Document, cursor: int) -> bool:
    """After a one-line answer, may a block be wanted here? On an empty line between
    statements (where `wants_multiline` keeps the first answer to one line): nothing else on
    the cursor line, and neither an open bracket nor a list's comma on the code line above
    (the cursor is not inside an expression spanning lines)."""
    cursor = clamp(doc, cursor)
    line = doc.line_of(cursor)
    start, end = doc.line_range(line)
    if doc.text[start:end].strip() or doc.spec is None:
        return False
    prev = prev_code_line(doc, line)
    return prev is None or not doc.line_text(prev).rstrip().endswith((",", "(", "[", "\\"))


def cut_to_parsing(before: str, block: str, after: str, language_id: str) -> str:
    """The most leading lines of `block` that, inserted between `before` and `after`, add no
    syntax error to what the grammar finds in the text without it (windows cut mid-construct
    have errors of their own); at least its first line. `block` whole without a grammar."""
    spec = spec_for(language_id)
    lines = block.split("\n")
    if spec is None or len(lines) < 2:
        return block
    parser = spec.parser()

    def errors(text: str) -> int:
        return _error_count(parser.parse(text.encode("utf-8", "surrogatepass")).root_node)

    allowed = errors(before + after)
    for count in range(len(lines), 1, -1):
        candidate = "\n".join(lines[:count])
        if errors(before + candidate + after) <= allowed:
            return candidate
    return lines[0]


def _error_count(root: tree_sitter.Node) -> int:
    """ERROR and MISSING nodes, visiting only the subtrees that hold one."""
    count, pending = 0, [root]
    while pending:
        node = pending.pop()
        if node.is_error or node.is_missing:
            count += 1
        pending.extend(child for child in node.children if child.has_error)
    return count


def enclosing_block_indent(doc: Document, cursor: int) -> int:
    """Indentation (leading whitespace characters) of the line that opened the innermost block
    around the cursor; -1 at the top level, where no block encloses the cursor.

    A tab counts as one character: compare it with the same measure of generated lines.
    """
    cursor = clamp(doc, cursor)
    spec = doc.spec
    if spec is not None and doc.tree is not None and not spec.indent_scoped:
        found = _tree_block_indent(doc, cursor, spec)
        if found is not None:
            return found
    return _text_block_indent(doc, cursor, spec)


def statements_indent(doc: Document, cursor: int) -> int:
    """How far down the lines of a block written on an empty line between statements may go:
    the indentation of the line that starts the innermost definition (function, class,
    closure) around the code line above the cursor, whose statements the block may continue
    past the cursor's own block (a hole in the middle of a body often spans an `else:` or a
    closing bracket). A definition that ends above the cursor and starts at the cursor's
    column or deeper is one the cursor has left (a nested function, the method before): the
    next one out counts. -1 at the top level; without a tree, `enclosing_block_indent`."""
    cursor = clamp(doc, cursor)
    spec, tree = doc.spec, doc.tree
    line = doc.line_of(cursor)
    above = prev_code_line(doc, line)
    if spec is None or tree is None or above is None:
        return enclosing_block_indent(doc, cursor)
    start, end = doc.line_range(above)
    text = doc.text[start:end].rstrip()
    if not text:
        return enclosing_block_indent(doc, cursor)
    last = doc.byte_offset(start + len(text) - 1)
    root = tree.root_node
    inner = root.descendant_for_byte_range(last, last + 1)
    definitions = spec.functions | spec.containers | spec.anonymous
    column = cursor - doc.line_range(line)[0]
    cursor_byte = doc.byte_offset(cursor)
    for node in reversed(node_path(root, inner) if inner is not None else []):
        if node.type in definitions:
            indent = len(leading_ws(doc.line_text(node_row(doc, node))))
            if node.end_byte <= cursor_byte and indent >= column:
                continue  # left: the cursor is below it, no deeper than its first line
            return indent
    return -1


def _tree_block_indent(doc: Document, cursor: int, spec: LanguageSpec) -> int | None:
    assert doc.tree is not None
    cursor_byte = doc.byte_offset(cursor)
    root = doc.tree.root_node
    inner = root.descendant_for_byte_range(cursor_byte, cursor_byte)
    path = node_path(root, inner) if inner is not None else []
    for depth in range(len(path) - 1, -1, -1):  # innermost first
        node = path[depth]
        if node.type in spec.blocks and node.start_byte < cursor_byte < node.end_byte:
            owner = path[depth - 1] if depth > 0 else node
            return len(leading_ws(doc.line_text(node_row(doc, owner))))
    return -1 if root.has_error is False else None


def _text_block_indent(doc: Document, cursor: int, spec: LanguageSpec | None) -> int:
    line = doc.line_of(cursor)
    start, _ = doc.line_range(line)
    text = doc.line_text(line)
    if text.strip():
        reference = len(leading_ws(text))
    else:
        reference = min(len(text), cursor - start)
        prev = prev_code_line(doc, line)
        if prev is not None and _ends_with_opener(doc, prev):
            return len(leading_ws(doc.line_text(prev)))
    if reference == 0:
        return -1  # nothing is indented less than column 0: top level
    # Bounded scan: a block opener farther up than this is not worth a per-keystroke walk.
    for row in range(line - 1, max(-1, line - 1 - MAX_SCAN_LINES), -1):
        candidate = doc.line_text(row)
        if candidate.strip() and len(leading_ws(candidate)) < reference:
            return len(leading_ws(candidate))
    return -1


def open_above(doc: Document, cursor: int) -> str:
    """The bracket that a closer beginning the cursor line would close: the code lines right
    above it are indented deeper than it, and the line above those, at the cursor line's own
    indentation, ends with that bracket (`if ok {`, its body, then the cursor line: `}` closes
    the `if` even where the next line closes an outer block). "" when nothing is left open
    there."""
    line = doc.line_of(cursor)
    width = len(leading_ws(doc.line_text(line)))
    deeper = False
    for row in range(line - 1, max(-1, line - 1 - MAX_SCAN_LINES), -1):
        text = doc.line_text(row)
        if not text.strip():
            continue
        indent = len(leading_ws(text))
        if indent > width:
            deeper = True
            continue
        if not deeper or indent < width:
            return ""
        last = _code_text(doc, row)[-1:]
        return last if last in _OPENERS else ""
    return ""


_BRACE_VOTES = 8  # function bodies looked at to tell where the file puts their brace
_BRACE_VISITS = 300  # nodes walked at most to find them (from the top, a few levels down)


def definition_brace_own_line(doc: Document) -> bool:
    """Does this file put a function body's opening brace on a line of its own (`int f(void)`,
    then `{`)? A majority of its first function definitions with a braced body say so; no
    tree, or none found, says no (the style of every brace language's own code). C often
    writes control statements' braces the other way: only definitions are counted."""
    spec = doc.spec
    if spec is None or doc.tree is None or spec.indent_scoped:
        return False
    own = same = 0
    queue = deque([doc.tree.root_node])
    visits = 0
    while queue and visits < _BRACE_VISITS and own + same < _BRACE_VOTES:
        node = queue.popleft()
        visits += 1
        if node.type in spec.functions:
            body = function_body(node, spec)
            if body is not None:
                header_end = signature_end(node, body, spec)
                if body.start_point.row > doc.line_of_byte(max(header_end - 1, 0)):
                    own += 1
                else:
                    same += 1
            continue  # (nested functions say nothing new)
        room = _BRACE_VISITS - visits - len(queue)  # (a huge file's root has thousands)
        queue.extend(node.named_child(i) for i in range(min(node.named_child_count, room)))
    return own > same


def _ends_with_opener(doc: Document, line: int) -> bool:
    """Does ``line`` end with its language's block opener, ignoring a trailing comment?"""
    spec = doc.spec
    openers = (spec.block_opener,) if spec is not None else (":", "{")
    return _code_text(doc, line).endswith(openers)


def _code_text(doc: Document, line: int) -> str:
    """``line`` without its trailing comment (where the tree says so) and trailing blanks."""
    start, end = doc.line_range(line)
    text = doc.text[start:end].rstrip()
    spec = doc.spec
    if spec is not None and doc.tree is not None and text:
        last = doc.byte_offset(start + len(text) - 1)
        node = doc.tree.root_node.descendant_for_byte_range(last, last + 1)
        if node is not None and node.type in spec.comments:
            comment_start = doc.offset_of_byte(node.start_byte)
            text = doc.text[start:max(start, comment_start)].rstrip()
    return text
