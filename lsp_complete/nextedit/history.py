"""A file's recent edits, as small blocks of whole lines (original and updated), for the
next-edit prompt. Pure: fed the lines an edit replaced and the lines it left, by the server's
didChange (server/files.py), one history per open file and per session.

An edit that overlaps or touches the newest block (its lines, or the line just below or
above) merges into it, so typing a word character by character is one block, not forty.
A block whose updated lines came back to its original (an undo) is dropped. The history keeps
the newest MAX_BLOCKS blocks within MAX_CHARS characters; a block over MAX_BLOCK_CHARS (a big
paste, a reformat) is left out: it says nothing about the next small edit and would crowd out
the prompt.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

MAX_BLOCKS = 6
MAX_CHARS = 3000  # the blocks together (~1000 tokens of prompt at most)
MAX_BLOCK_CHARS = 1200


@dataclass(frozen=True)
class EditBlock:
    """Lines [start, start + len(original)) of the text before became `updated`, which now
    lies at lines [start, start + len(updated))."""

    start: int
    original: tuple[str, ...]
    updated: tuple[str, ...]

    @property
    def end(self) -> int:
        """The line after the block, in the current text."""
        return self.start + len(self.updated)

    @property
    def chars(self) -> int:
        return sum(len(line) + 1 for line in (*self.original, *self.updated))


class EditHistory:
    def __init__(self) -> None:
        self.blocks: list[EditBlock] = []  # oldest first

    def record(self, start: int, original: list[str], updated: list[str]) -> None:
        """Lines [start, start + len(original)) were replaced by `updated` (whole lines: the
        lines the change touched, before and after it)."""
        edit = EditBlock(start, tuple(original), tuple(updated))
        if edit.original == edit.updated:
            return
        last = self.blocks[-1] if self.blocks else None
        if last is not None and _touches(last, edit):
            self.blocks.pop()
            edit = _merge(last, edit)
        else:
            self._shift(edit)
        if edit.original != edit.updated and edit.chars <= MAX_BLOCK_CHARS:
            self.blocks.append(edit)
        self._bound()

    def _shift(self, edit: EditBlock) -> None:
        """Older blocks below a new edit move with the lines it added or removed."""
        delta = len(edit.updated) - len(edit.original)
        if delta == 0:
            return
        old_end = edit.start + len(edit.original)
        self.blocks = [replace(b, start=b.start + delta) if b.start >= old_end else b
                       for b in self.blocks]

    def _bound(self) -> None:
        while len(self.blocks) > MAX_BLOCKS or sum(b.chars for b in self.blocks) > MAX_CHARS:
            self.blocks.pop(0)

    def clear(self) -> None:
        self.blocks = []

    @property
    def last(self) -> EditBlock | None:
        return self.blocks[-1] if self.blocks else None


def _touches(block: EditBlock, edit: EditBlock) -> bool:
    """The edit's original lines overlap the block's current lines or are next to them."""
    return edit.start <= block.end and edit.start + len(edit.original) >= block.start


def _merge(block: EditBlock, edit: EditBlock) -> EditBlock:
    """One block from `block` and a later `edit` that touches it: the union of their lines
    in the text between them, its original as before `block`, its update as after `edit`."""
    lo = min(block.start, edit.start)
    hi = max(block.end, edit.start + len(edit.original))
    # The union's lines in the text between the two edits: the block's, then the edit's
    # original lines where they reach beyond it.
    between: list[str] = []
    for line in range(lo, hi):
        if block.start <= line < block.end:
            between.append(block.updated[line - block.start])
        else:
            between.append(edit.original[line - edit.start])
    above = between[: block.start - lo]
    below = between[block.end - lo:]
    original = (*above, *block.original, *below)
    e0 = edit.start - lo
    updated = (*between[:e0], *edit.updated, *between[e0 + len(edit.original):])
    return EditBlock(lo, original, updated)
