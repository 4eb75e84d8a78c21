"""The user's last edit made again at the nearest other place it fits: a rename carried to
the next use, the same argument added to the next call, the same word corrected. Pure, no
model: it answers at once, and a next edit that repeats the last one is the most common kind
that can be told from the file alone.

The edit is read as token changes (old tokens -> new tokens) between the lines before and
after it. A change of one identifier into another (a rename) matches that identifier anywhere;
any other change matches only between the same tokens as the edit had on either side. A
change that adds or removes a line break is not made again (it mostly doubles the user's new
line). The place is the nearest line to the cursor, outside the edit, where every change of
the edit matches (for an edit of renames alone, where one does); all its matches on that line
are made.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass

from lsp_complete.nextedit.diff import Replacement, smallest_replacement
from lsp_complete.nextedit.history import EditBlock

_TOKEN = re.compile(r"\w+|\s+|[^\w\s]")
# The line breaks LSP knows (documents.py's): a file of lone "\r" (old Mac) has lines too.
_LINE_BREAK = re.compile(r"(\r\n|\r|\n)")
_IDENTIFIER = re.compile(r"[^\W\d]\w*")
# An edit worth repeating is small: a few token changes, each of a few tokens.
MAX_CHANGES = 2
MAX_RENAMES = 4  # an edit of renames alone: each is carried on by itself
MAX_CHANGE_TOKENS = 12
MIN_RENAMED_CHARS = 2
MAX_LINES_LOOKED_AT = 4000  # the nearest ones: a huge file costs no more than this
MAX_LINE_CHARS = 1000  # a longer line (minified, data) is passed over, not tokenized
CONTEXT_TOKENS = 4
# Values, not names: changing one is no rename to carry on.
_LITERALS = frozenset({"true", "false", "none", "null", "nil", "undefined"})


@dataclass(frozen=True)
class TokenChange:
    """Tokens `old` between `before` and `after` became `new` (contexts may be empty)."""

    before: tuple[str, ...]
    old: tuple[str, ...]
    new: tuple[str, ...]
    after: tuple[str, ...]

    @property
    def pattern(self) -> tuple[str, ...]:
        return (*self.before, *self.old, *self.after)

    @property
    def replacement(self) -> tuple[str, ...]:
        return (*self.before, *self.new, *self.after)


def tokens(text: str) -> list[str]:
    return _TOKEN.findall(text)


def differing(old: list[str], new: list[str]) -> list[tuple[int, int, int, int]]:
    """The token runs old[i1:i2] -> new[j1:j2] that differ, in order."""
    matcher = difflib.SequenceMatcher(None, old, new, autojunk=False)
    return [(i1, i2, j1, j2) for tag, i1, i2, j1, j2 in matcher.get_opcodes() if tag != "equal"]


def token_changes(original: str, updated: str) -> list[TokenChange] | None:
    """The edit as token changes, each with the context it must be found in again; None when
    it is no small, repeatable edit."""
    old, new = tokens(original), tokens(updated)
    opcodes = differing(old, new)
    if not opcodes or len(opcodes) > MAX_RENAMES:
        return None
    changes: list[TokenChange] = []
    for i1, i2, j1, j2 in opcodes:
        was, now = tuple(old[i1:i2]), tuple(new[j1:j2])
        if max(len(was), len(now)) > MAX_CHANGE_TOKENS or not "".join(was + now).strip():
            return None
        if "\n" in "".join(was + now):
            return None
        if _is_rename(was, now):
            change = TokenChange((), was, now, ())
        else:
            change = TokenChange(tuple(old[max(i1 - CONTEXT_TOKENS, 0):i1]), was, now,
                                 tuple(old[i2:i2 + CONTEXT_TOKENS]))
            if not "".join(change.before + change.after).strip():
                return None  # nothing around it to recognise the place by
        if change not in changes:
            changes.append(change)
    if len(opcodes) > MAX_CHANGES and not _all_renames(changes):
        return None
    return changes


def _all_renames(changes: list[TokenChange]) -> bool:
    return all(_is_rename(change.old, change.new) for change in changes)


def _is_rename(was: tuple[str, ...], now: tuple[str, ...]) -> bool:
    return (len(was) == 1 and len(now) == 1 and len(was[0]) >= MIN_RENAMED_CHARS
            and bool(_IDENTIFIER.fullmatch(was[0])) and bool(_IDENTIFIER.fullmatch(now[0]))
            and was[0].lower() not in _LITERALS)


def repeat_edit(text: str, last: EditBlock, cursor_line: int) -> Replacement | None:
    """The last edit made again on the nearest line (to `cursor_line`) outside it where all
    of it fits, as the smallest replacement in `text`; None when there is none."""
    changes = token_changes("\n".join(last.original), "\n".join(last.updated))
    if changes is None:
        return None
    independent = _all_renames(changes)
    parts = _LINE_BREAK.split(text)  # line, break, line, ...: split at C speed
    lines = parts[::2]
    near = range(max(cursor_line - MAX_LINES_LOOKED_AT // 2, 0),
                 min(cursor_line + MAX_LINES_LOOKED_AT // 2, len(lines)))
    order = sorted((n for n in near if not last.start <= n < last.end),
                   key=lambda n: (abs(n - cursor_line), n < cursor_line))
    for n in order:
        if len(lines[n]) > MAX_LINE_CHARS:
            continue
        changed = _apply(lines[n], changes, independent)
        made = smallest_replacement(lines[n], changed) if changed is not None else None
        if made is not None:
            start = sum(len(part) for part in parts[:2 * n])
            return Replacement(start + made.start, start + made.end, made.text)
    return None


def _apply(line: str, changes: list[TokenChange], independent: bool) -> str | None:
    """The line with every change made wherever it matches; None unless each matches, or,
    for `independent` changes (renames alone), unless one does."""
    found = tokens(line)
    hits = 0
    for change in changes:
        made = _replace_all(found, change)
        if made is None and not independent:
            return None
        if made is not None:
            found, hits = made, hits + 1
    return "".join(found) if hits else None


def _replace_all(found: list[str], change: TokenChange) -> list[str] | None:
    pattern, size = change.pattern, len(change.pattern)
    out: list[str] = []
    i, hits = 0, 0
    while i < len(found):
        if size and tuple(found[i:i + size]) == pattern:
            out += change.replacement
            i += size
            hits += 1
        else:
            out.append(found[i])
            i += 1
    return out if hits else None
