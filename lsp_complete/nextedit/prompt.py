"""The next-edit prompt of a model's format (models.toml `next_edit`), and its answer read
back: the window around the cursor the model rewrote, or None when the answer is not a
plausible rewrite. Pure: the worker tokenizes the parts (`Segments`), most stable first, so
the engine's cache keeps the instruction and the history from one request to the next.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from lsp_complete.models import NextEditTemplate
from lsp_complete.nextedit.history import EditBlock
from lsp_complete.postprocess import has_special_token, strip_controls

CURSOR_MARKER = "<|cursor|>"
# Repository-format marker texts that inline suggestions are not cut at (a URL may spell
# `<repo_name>`), still refused in a rewrite beside postprocess's control tokens.
_REPO_MARKER = re.compile(r"<(?:file|repo)_[a-z]+>")
_FENCE = "```"
# An answer whose text shrinks to under this share of the window deleted most of it.
MIN_KEPT_SHARE = 0.5
# Windows shorter than this (non-blank characters) are not judged by what an answer keeps.
_JUDGED_CHARS = 16
# A window holds at most this many characters (~1,000 tokens of code: about all a rewrite
# may write, pipeline/next_edit.py's MAX_TOKENS). Lines are whole, so without it a minified
# line went whole into the prompt: a 4 MB line was tokenized on the worker for seconds.
MAX_WINDOW_CHARS = 4000


@dataclass(frozen=True)
class Window:
    """The lines around the cursor that the model rewrites, as the document has them now."""

    path: str  # workspace-relative or file name
    language_id: str
    text: str  # whole lines, without the break after the last one
    first_line: int  # the document line the window starts at
    cursor: int  # offset of the cursor in `text`
    original: str  # the window before the newest edit (Sweep's original/ pseudo-file)

    @property
    def crlf(self) -> bool:
        return "\r\n" in self.text

    @property
    def shown(self) -> str:
        """The window as the model sees it: lines broken by "\n" (a CRLF file too)."""
        return self.text.replace("\r\n", "\n")

    def in_text(self, rewritten: str) -> str:
        """A rewrite of `shown` with the window's own line breaks."""
        return rewritten.replace("\n", "\r\n") if self.crlf else rewritten


Piece = tuple[str, bool]  # text, and whether it is a template marker (a special token)
Part = tuple[Piece, ...]


@dataclass(frozen=True)
class NextEditPrompt:
    """The prompt's parts, most stable first: the instruction, the recent edits, the window.
    Only the template's markers are special tokens: the user's code that holds a marker's
    text is tokenized as text."""

    parts: tuple[Part, ...]
    stop: tuple[str, ...]

    @property
    def text(self) -> str:
        return "".join(text for part in self.parts for text, _ in part)


def window_lines(line_count: int, cursor_line: int,
                 template: NextEditTemplate) -> tuple[int, int]:
    """[first, last] lines of the window around `cursor_line`: `above` lines above it and
    `below` below, moved inside the document at its ends."""
    first = max(0, cursor_line - template.above)
    last = min(line_count - 1, cursor_line + template.below)
    return first, max(first, last)


def fit_window(first: int, last: int, cursor_line: int, line_chars: Callable[[int], int],
               limit: int = MAX_WINDOW_CHARS) -> tuple[int, int] | None:
    """The lines of [first, last] nearest `cursor_line` that hold at most `limit`
    characters (each line with its break): grown from the cursor's line, the nearer side
    first (below on a tie), each side up to its first line that does not fit. None when the
    cursor's line alone is longer: no rewrite of it fits, so there is no next edit there."""
    total = line_chars(cursor_line) + 1
    if total > limit:
        return None
    low = high = cursor_line
    up, down = low > first, high < last
    while up or down:
        below = down and (not up or high + 1 - cursor_line <= cursor_line - (low - 1))
        line = high + 1 if below else low - 1
        size = line_chars(line) + 1
        if total + size > limit:  # that side ends here: a window is whole lines in a row
            up, down = (up, False) if below else (False, down)
            continue
        total += size
        if below:
            high = line
            down = high < last
        else:
            low = line
            up = low > first
    return low, high


def original_window(lines: list[str], first_line: int, newest: EditBlock | None) -> str:
    """The window's lines with the newest edit undone, when it lies inside the window."""
    if newest is not None and first_line <= newest.start and newest.end <= first_line + len(
            lines):
        at = newest.start - first_line
        lines = [*lines[:at], *newest.original, *lines[at + len(newest.updated):]]
    return "\n".join(lines)


def render(template: NextEditTemplate, window: Window, history: list[EditBlock],
           stop: tuple[str, ...]) -> NextEditPrompt:
    if template.format == "sweep":
        return _render_sweep(template, window, history, stop)
    return _render_chat(template, window, history, stop)


def _render_chat(template: NextEditTemplate, window: Window, history: list[EditBlock],
                 stop: tuple[str, ...]) -> NextEditPrompt:
    start, end = (template.turn_start, True), (template.turn_end, True)
    system = (start, ("system\n" + template.system, False), end, ("\n", False), start,
              ("user\n", False))
    if history:
        hunks = "\n".join(_hunk(block) for block in history)
        edits = (f"My recent edits:\n{_FENCE}diff\n--- a/{window.path}\n+++ b/{window.path}\n"
                 f"{hunks}\n{_FENCE}\n\n")
    else:
        edits = "No recent edits.\n\n"
    shown = window.shown
    cursor = window.cursor - window.text[: window.cursor].count("\r\n")
    marked = shown[:cursor] + CURSOR_MARKER + shown[cursor:]
    fence = f"{_FENCE}{window.language_id}"
    code = (f"The code around my cursor ({CURSOR_MARKER} marks it) in {window.path}:\n"
            f"{fence}\n{marked}\n{_FENCE}\nRewrite this code with my next edit.")
    return NextEditPrompt(
        (system, ((edits, False),), ((code, False), end, ("\n", False), start,
                                     ("assistant\n", False))),
        (*stop, f"\n{_FENCE}"),
    )


def _hunk(block: EditBlock) -> str:
    first = block.start + 1
    head = f"@@ -{first},{len(block.original)} +{first},{len(block.updated)} @@"
    lines = [head, *(f"-{line}" for line in block.original),
             *(f"+{line}" for line in block.updated)]
    return "\n".join(lines)


def _render_sweep(template: NextEditTemplate, window: Window, history: list[EditBlock],
                  stop: tuple[str, ...]) -> NextEditPrompt:
    sep, path = (template.file_sep, True), window.path
    edits: Part = tuple(
        piece for b in history for piece in (
            sep, (f"{path}.diff\noriginal:\n{_lines(b.original)}updated:\n{_lines(b.updated)}",
                  False))
    )
    code = (sep, (f"original/{path}\n{window.original}\n", False),
            sep, (f"current/{path}\n{window.shown}\n", False),
            sep, (f"updated/{path}", False))  # (Sweep's own prompt ends there: no newline)
    return NextEditPrompt((edits, code), (*stop, template.file_sep))


def _lines(lines: tuple[str, ...]) -> str:
    return "".join(f"{line}\n" for line in lines)


def parse_answer(template: NextEditTemplate, raw: str, finished: bool,
                 window: str) -> str | None:
    """The rewritten window in the model's answer, or None when there is none to trust:
    unfinished (cut by max_tokens), no code block, template markers in it, most of the window
    deleted, or the window written twice."""
    if not finished:
        return None
    text = strip_controls(raw)
    if template.format == "chat":
        opening = text.find(_FENCE)
        if opening < 0 or "\n" not in text[opening:]:
            return None
        body = text[text.index("\n", opening) + 1:]
        closing = body.find(f"\n{_FENCE}")
        if closing >= 0:
            body = body[:closing]
        elif body.rstrip().endswith(_FENCE):
            body = body.rstrip()[: -len(_FENCE)].rstrip("\n")
    else:
        body = text[1:] if text.startswith("\n") else text
        body = body[:-1] if body.endswith("\n") else body
    body = body.replace(CURSOR_MARKER, "")
    # The window's own blank lines at its end: models drop or add those at will (the 1.5B
    # model dropped the empty last line of a file), which is no edit anyone wants.
    body = body.rstrip("\n") + "\n" * (len(window) - len(window.rstrip("\n")))
    return body if plausible(body, window) else None


def plausible(new: str, old: str) -> bool:
    """Whether `new` can be a rewrite of the window `old` (the guards)."""
    # A rewrite holding a control token leaked the template: it is not code.
    if _FENCE in new or has_special_token(new) or _REPO_MARKER.search(new):
        return False
    kept, had = len("".join(new.split())), len("".join(old.split()))
    if had >= _JUDGED_CHARS:
        if kept < MIN_KEPT_SHARE * had:
            return False
        if new.count(old.strip()) >= 2:
            return False
    # A rewrite of a window of n lines runs on for at most about as many again.
    return new.count("\n") <= 2 * old.count("\n") + 4
