"""What a suggestion needs from the document, taken where the document lives (the server's
event loop: it reads the text and the tree): the context windows, the small first-prompt
windows, and the site post-processing judges the suggestion against."""

from __future__ import annotations

from dataclasses import dataclass

from lsp_complete.config import Settings
from lsp_complete.context import (
    CodeContext,
    ContextLimits,
    among_statements,
    block_may_follow,
    build_context,
    choose_anchor,
    cold_limits,
    definition_brace_own_line,
    enclosing_block_indent,
    open_above,
    statements_indent,
    wants_multiline,
)
from lsp_complete.documents import Document
from lsp_complete.postprocess import CompletionSite, types_through

DEFAULT_LIMITS = ContextLimits()


@dataclass(frozen=True)
class Prepared:
    key: str
    ctx: CodeContext
    site: CompletionSite
    multiline: bool
    cold_ctx: CodeContext | None = None  # smaller windows, for a file with a cold KV cache
    # A one-line answer here may begin a block, generated in idle time (Completer.block).
    block_after: bool = False


def prepare(
    doc: Document,
    cursor: int,
    previous_anchor: int | None,
    settings: Settings,
    limits: ContextLimits = DEFAULT_LIMITS,
) -> Prepared:
    """What a suggestion at `cursor` needs from the document. The prompt stays anchored at
    `previous_anchor` while the middle stays small, else at the cursor's line."""
    anchor = choose_anchor(doc, cursor, previous_anchor, limits)
    ctx = build_context(doc, cursor, anchor, limits)
    cold_ctx = build_context(doc, cursor, anchor, cold_limits(limits))
    line_start = doc.line_start(cursor)
    bound = max(limits.max_line_chars, 1)
    line_prefix, line_suffix = cursor_line(doc, cursor, limits)
    line_head = doc.text[line_start : min(cursor, line_start + bound)]
    # `auto` answers one line at a line's speed; where a block is wanted, idle work writes it
    # after that line (`block_after`, Completer.block).
    auto = settings.multiline == "auto"
    multiline = settings.multiline == "always"
    indent = line_head[: len(line_head) - len(line_head.lstrip())]
    # On an empty line among statements a block's lines are statements, which may go on past
    # the cursor's own block (an `else:`, a closing bracket) down to the enclosing definition.
    statements = settings.multiline != "never" and among_statements(doc, cursor)
    site = CompletionSite(
        line_prefix=line_prefix,
        line_suffix=line_suffix,
        suffix=ctx.suffix,
        indent=indent,
        block_indent=(statements_indent(doc, cursor) if statements
                      else enclosing_block_indent(doc, cursor)),
        multiline=multiline,
        language_id=doc.language_name,
        statements=statements,
        open_above=open_above(doc, cursor),
        brace_own_line=definition_brace_own_line(doc),
        replace_line_suffix=settings.replace_line_suffix,
    )
    block_after = auto and (wants_multiline(doc, cursor) or block_may_follow(doc, cursor))
    return Prepared(key=doc.uri, ctx=ctx, site=site, multiline=multiline, cold_ctx=cold_ctx,
                    block_after=block_after)


def cursor_line(doc: Document, cursor: int,
                limits: ContextLimits = DEFAULT_LIMITS) -> tuple[str, str]:
    """The cursor line before and after the cursor. A huge line (minified code) is seen through
    `max_line_chars` either side of the cursor, as the windows see it: post-processing scans
    these character by character, twice per suggestion, so it must never be handed a whole
    4 MB line."""
    bound = max(limits.max_line_chars, 1)
    line_end = doc.line_range(doc.line_of(cursor))[1]
    return (doc.text[max(doc.line_start(cursor), cursor - bound) : cursor],
            doc.text[cursor : min(line_end, cursor + bound)])


def replaced_after_cursor(doc: Document, cursor: int, text: str, settings: Settings) -> int:
    """Characters after the cursor that the suggestion `text` replaces: the closers it types
    through where the client takes such a range (`postprocess.types_through`), else none."""
    if not settings.replace_line_suffix:
        return 0
    line_prefix, line_suffix = cursor_line(doc, cursor)
    return types_through(text, line_prefix, line_suffix, doc.language_name)


def fresh_anchor(doc: Document, cursor: int, limits: ContextLimits = DEFAULT_LIMITS) -> int:
    """Where `prepare` anchors a prompt for `cursor` when the file has no anchor yet."""
    return choose_anchor(doc, cursor, None, limits)
