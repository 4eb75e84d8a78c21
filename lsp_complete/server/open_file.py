"""One `OpenFile` per open document: its text (documents.Document), its state (state.py) and
its active repository block, in one registry the event loop owns (`OpenFileRegistry`), which
also ends the file's typing-ahead entries when it closes.

Work planned for a file carries a `Ticket`: the file it was planned for (the very object, so
a file closed and opened again under the same URI is another file) and the moment, as the
state's generation and the document's version. `Ticket.still_current()` is the one answer to
"is this work still wanted": the same file, nothing happened since (no edit, request or
cursor move). Two weaker checks are kept apart on purpose: `open()` (the same file, whatever
happened since: a block's notification, a parse, a repository block chosen for it) and
`same_text()` (the same file at the same version: a request's answer stays good while the
user only moves the cursor or asks again).

Threads: the registry's map is the event loop's (open, close); the worker reads it. Two
things the worker writes for a file, its repository block (`RepoHost.apply`) and a suggestion
remembered for typing-ahead, are written under the registry's lock and only while the file is
registered (`while_open`, `remember`), and `close` unregisters the file and forgets its typing-ahead
under the same lock: a close never lands between the worker's check and its write.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import ClassVar

from lsp_complete.certainty import Certainty
from lsp_complete.documents import Document
from lsp_complete.pipeline import Switch
from lsp_complete.server.state import DocState, LoopOwned
from lsp_complete.typeahead import TypeAhead


@dataclass(eq=False)
class OpenFile(LoopOwned):
    """An open document and what the server keeps for it."""

    worker_fields: ClassVar[frozenset[str]] = frozenset({"repo"})

    doc: Document
    state: DocState = field(default_factory=DocState)
    # The active repository block and its prompt tokens, the one its prompts use now (None:
    # none). The worker's: idle work switches it (RepoHost.apply, under the registry's lock).
    repo: Switch | None = None
    # The user was told the file has no syntax tree (too many nodes): once per open file.
    told_text_only: bool = False

    @property
    def uri(self) -> str:
        return self.doc.uri


@dataclass(frozen=True)
class Ticket:
    """Work planned for `file` when its state's generation was `generation` and its document's
    version `version`."""

    registry: OpenFileRegistry
    file: OpenFile
    generation: int
    version: int

    def open(self) -> bool:
        """The file is still open: not closed, nor closed and opened again."""
        return self.registry.holds(self.file)

    def still_current(self) -> bool:
        """The file is open and nothing happened to it since (no edit, request or cursor
        move): the work is still wanted, and may touch the file's cache."""
        return self.open() and self.file.state.current(self.generation)

    def same_text(self) -> bool:
        """The file is open at the same version: its text is the one the work was for
        (requests and cursor moves meanwhile do not matter)."""
        return self.open() and self.file.doc.version == self.version


class OpenFileRegistry:
    """The open files by URI. The one owner of the documents and their states."""

    def __init__(self, typeahead: TypeAhead) -> None:
        self._files: dict[str, OpenFile] = {}
        self._typeahead = typeahead
        self._lock = threading.Lock()

    # ------------------------------------------------------------------ reading

    def get(self, uri: str) -> OpenFile | None:
        return self._files.get(uri)

    def holds(self, file: OpenFile) -> bool:
        """`file` is the one open under its URI."""
        return self._files.get(file.uri) is file

    def __contains__(self, uri: object) -> bool:
        return uri in self._files

    def __iter__(self) -> Iterator[str]:
        """The URIs open now (a copy: the loop may open and close meanwhile)."""
        return iter(list(self._files))

    def __len__(self) -> int:
        return len(self._files)

    def files(self) -> list[OpenFile]:
        """The files open now (a copy: the worker reads it while the loop opens and closes)."""
        return list(self._files.values())

    def ticket(self, file: OpenFile, version: int | None = None) -> Ticket:
        """Work planned for `file` now (at `version`, when that is what it was for)."""
        return Ticket(self, file, file.state.generation,
                      file.doc.version if version is None else version)

    # ------------------------------------------------------------------ open and close (loop)

    def open(self, doc: Document) -> OpenFile:
        """`doc` is open now, with a fresh state. A didOpen of a file open already replaces
        it (and keeps its repository block, as the block was kept by URI before)."""
        file = OpenFile(doc)
        with self._lock:
            old = self._files.get(doc.uri)
            if old is not None:
                file.repo = old.repo
            self._files[doc.uri] = file
        return file

    def close(self, uri: str) -> OpenFile | None:
        """The file under `uri` is closed: it leaves the registry, and its typing-ahead goes,
        at once for the worker (under the lock)."""
        with self._lock:
            file = self._files.pop(uri, None)
            self._typeahead.forget(uri)
        return file

    # ------------------------------------------------------------------ the worker's writes

    def while_open(self, file: OpenFile, write: Callable[[], None]) -> bool:
        """Run `write` if `file` is still open, with no close meanwhile; whether it ran."""
        with self._lock:
            if not self.holds(file):
                return False
            write()
            return True

    def remember(self, file: OpenFile, before: str, after: str, text: str,
                 certainty: Certainty | None = None, *, generation: int) -> bool:
        """Keep a suggestion for typing-ahead in `file`, unless it was closed (its
        typing-ahead was forgotten then) or typing-ahead was cleared since `generation`
        (`TypeAhead.remember`); whether it was kept."""
        with self._lock:
            return self.holds(file) and self._typeahead.remember(
                file.uri, before, after, text, certainty, generation=generation)

    def clear_blocks(self) -> None:
        """New workspace roots: no open file keeps its repository block."""
        with self._lock:
            for file in self._files.values():
                file.repo = None
