"""Per-file server state, its transitions, and which thread owns each field.

The event loop owns every field here: requests, edits, cursor moves and the answers of idle
work (applied on the loop when the work ends) write them. The worker thread only reads them,
with one exception, `InFlight.partial`: the suggestion being computed reports its text as it
grows, and a keystroke on the loop reads it (a str reference, swapped whole).

With LSP_COMPLETE_CHECK_THREADS=1 (the test suite sets it) a write from another thread than
the one that made the object raises, so a worker that starts writing state fails loudly.
"""

from __future__ import annotations

import asyncio
import os
import threading
from dataclasses import dataclass, field
from typing import Any, ClassVar

from lsp_complete.nextedit.history import EditHistory
from lsp_complete.pipeline import Completer, Completion, FilePlan, Prepared
from lsp_complete.scheduler import Job

CHECK_THREADS = os.environ.get("LSP_COMPLETE_CHECK_THREADS") == "1"


class LoopOwned:
    """Fields written only on the thread that made the object (the event loop), except those
    in `worker_fields`."""

    worker_fields: ClassVar[frozenset[str]] = frozenset()

    def __post_init__(self) -> None:
        object.__setattr__(self, "_owner", threading.get_ident())

    def __setattr__(self, name: str, value: Any) -> None:
        if CHECK_THREADS and name not in self.worker_fields:
            owner = getattr(self, "_owner", None)
            if owner is not None and owner != threading.get_ident():
                raise AssertionError(
                    f"{type(self).__name__}.{name} written off its owning thread "
                    f"({threading.current_thread().name})"
                )
        object.__setattr__(self, name, value)


@dataclass
class InFlight(LoopOwned):
    """The model computation running for a file, and what it has written so far."""

    worker_fields: ClassVar[frozenset[str]] = frozenset({"partial"})

    before: str  # document text before / after the cursor it was asked for
    after: str
    job: Job | None = None
    partial: str = ""  # written by the worker as the suggestion grows
    progressed: asyncio.Event | None = None  # set (on the loop) as `partial` grows, and at the end

    def typed_since(self, before: str, after: str) -> str | None:
        """What was typed at the cursor since it was asked, when that is all that changed."""
        if self.after != after or not before.startswith(self.before):
            return None
        return before[len(self.before) :]

    def typed_into(self, text: str) -> str | None:
        """What was typed at the cursor since it was asked, where the document's text is now
        `text` and that is all that changed (no cursor needed: clients rarely say where it is)."""
        before, after = self.before, self.after
        if (len(text) < len(before) + len(after) or not text.startswith(before)
                or not text.endswith(after)):
            return None
        return text[len(before) : len(text) - len(after)]

    def wanted_after(self, text: str) -> bool:
        """Its request was cancelled, but the document (now `text`) was typed on with what it
        is writing: the request that the keystroke brings will wait for it (`joinable`)."""
        typed = self.typed_into(text)
        return typed is not None and self.joinable(self.before + typed, self.after)

    def joinable(self, before: str, after: str) -> bool:
        """The model is already writing exactly what the user typed since it was asked: the
        new keystroke's answer is the rest of it (wait for it instead of superseding it)."""
        if self.job is None or self.job.future.done():
            return False
        typed = self.typed_since(before, after)
        return bool(typed) and self.partial.startswith(typed or "")

    def follows(self, before: str, after: str) -> bool:
        """What was typed since agrees with what the model has written so far (it may not
        have got that far yet)."""
        typed = self.typed_since(before, after)
        if typed is None:
            return False
        return self.partial.startswith(typed) or typed.startswith(self.partial)

    def past_line_end(self, before: str, after: str) -> bool:
        """The cursor is at the end of a line it has written, and it is still writing (what
        the user wants next is its next line)."""
        return (self.line_at(before, after) == "" and self.job is not None
                and not self.job.future.done())

    def line_at(self, before: str, after: str) -> str | None:
        """The rest of the cursor's line as the model wrote it, once it has written past what
        was typed since to that line's end; else None."""
        typed, partial = self.typed_since(before, after), self.partial
        if typed is None or not partial.startswith(typed):
            return None
        rest = partial[len(typed) :]
        end = rest.find("\n")
        return rest[:end] if end >= 0 else None


@dataclass
class Shown(LoopOwned):
    """The suggestion the model made last for a file, where, and its alternatives: the answer
    to an explicit request at the same spot (computed in idle time, or then)."""

    version: int  # the document's version and cursor offset it was made for
    cursor: int
    prepared: Prepared
    completion: Completion
    completer: Completer  # the one that made it: a reloaded model cannot use its prompt
    # TypeAhead's generation when it read its settings: its block is not kept once they changed.
    typeahead_generation: int
    alternatives: list[str] | None = None  # None: not computed (yet)
    job: Job | None = None  # the work computing them

    def answers(self, version: int, cursor: int, text: str) -> bool:
        """This is the suggestion shown at that spot of that text."""
        return self.version == version and self.cursor == cursor and self.completion.text == text


@dataclass
class DocState(LoopOwned):
    """What the server keeps about one open file besides its text (documents.Document)."""

    anchor: int | None = None  # where the file's prompt is anchored (a line start)
    last_cursor: int | None = None
    # last_cursor while no edit has come since the request or cursor report that set it
    told_cursor: int | None = None
    generation: int = 0  # bumped by every request, edit and cursor move: stale idle work sees it
    disabled_reason: str = ""  # why the file gets no suggestions ("" when it does)
    # A change could not be read: the text may differ from the editor's until it is sent whole.
    out_of_sync: bool = False
    inflight: InFlight | None = None
    block: InFlight | None = None  # the block being written for the suggestion shown
    parsing: asyncio.Task[None] | None = None  # a large file's parse, in slices
    shown: Shown | None = None  # until the text changes or the cursor leaves the spot
    plan: FilePlan = field(default_factory=FilePlan)  # what the prompt planner keeps of it
    # The recent edits (next-edit prompts) and where the last one left the cursor.
    history: EditHistory = field(default_factory=EditHistory)
    edit_cursor: int | None = None

    def edit_begins(self) -> None:
        """An edit: idle work planned for the old text is moot."""
        self.generation += 1
        self.told_cursor = None

    def edited_at(self, start: int) -> None:
        """Text changed from `start` on: before the anchor, the prompt must be re-anchored."""
        if self.anchor is not None and start < self.anchor:
            self.anchor = None

    def at_cursor(self, cursor: int) -> int:
        """A request or a cursor move at `cursor`: returns the new generation."""
        self.generation += 1
        self.last_cursor = self.told_cursor = cursor
        return self.generation

    def current(self, generation: int) -> bool:
        """Nothing happened to the file since `generation` was taken."""
        return self.generation == generation
