"""The open documents, their per-file state (state.py), and the idle work done on them:
encoding a newly opened file's head, building on from a keystroke's small prompt,
re-anchoring its prompt at the cursor line after a suggestion or a cursor move, and saving its
KV cache a while after the last suggestion. The alternatives of the suggestion shown are
computed only when asked for (an explicit request, cycling through them): in idle time they
cost several suggestions' worth of CPU each time the user pauses, mostly for nothing. Which
idle work follows an event of a file, what it encodes, and when a repository block switches
are the prompt planner's (`pipeline.planner`); this module queues the steps it plans
(`follow`).

The open files are the registry's (open_file.py): one `OpenFile` per document. Idle work is
queued on the scheduler as background jobs, each with the `Ticket` of the file and moment it
was planned for; it checks `Ticket.still_current()` before it touches the file's cache. What it
tells the event loop comes back as a typed event (`Anchored`, `BlockReady`, `IdleFailed`),
applied in one place on the loop (`OpenFiles.apply`), which checks the ticket again there. Its
engine failures go to one callback (`on_idle_error`); a failure to save a KV cache (a full
disk) is a warning, told once. A repository block chosen for a file is made active on the
worker itself (`RepoHost.apply`): the next suggestion, read there too, uses it.

Each edit is also kept as next-edit history (`DocState.history`: the lines it touched before
and after it; server/next_edit.py reads it).

A file's size is checked before it is parsed: one over the limit is tracked as text only (no
syntax tree, no suggestions) until edits bring it back under. A large file under the limit is
parsed on the event loop in short slices between other messages (tree-sitter keeps the GIL, so
a thread would not free the loop); its suggestions wait for the tree.

Syntax trees cost 40-130 times their source (docs/ARCHITECTURE.md). Only the files used most
recently keep one, within TREE_BUDGET_BYTES of source, and always the file in use; another
file's tree is dropped and built again when that file is used (edited, asked, cursor moved).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import OrderedDict
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Literal

from lsprotocol import types

from lsp_complete.certainty import Certainty
from lsp_complete.documents import Document, line_breaks, max_tree_nodes
from lsp_complete.engine.base import (
    CancelToken,
    EngineError,
    ModelFileChanged,
    PersistenceError,
)
from lsp_complete.jobkey import JobKey
from lsp_complete.pipeline import (
    Completion,
    IdleStep,
    Prepared,
    after_answer,
    after_cursor_move,
    after_open,
    after_repository_change,
    fresh_anchor,
    prepare,
    with_repo,
)
from lsp_complete.scheduler import Job
from lsp_complete.server.open_file import OpenFile, OpenFileRegistry, Ticket
from lsp_complete.server.protocol import BLOCK_READY_METHOD
from lsp_complete.server.repo import RepoHost
from lsp_complete.server.shared import Shared
from lsp_complete.server.state import DocState, InFlight, Shown

IDLE_PERSIST_S = 5.0
SYNC_PARSE_BYTES = 1 << 20  # parsed in one go (about 0.1 s per MiB); larger files in slices
OUT_OF_SYNC = ("a change to it could not be read, so its text here may differ from the "
               "editor's: close and reopen it")
PARSE_SLICE_S = 0.02  # the longest a large file's parse holds the event loop at a time
PARSE_PAUSE_S = 0.002
TREE_BUDGET_BYTES = 1 << 20  # source bytes of the recently used files whose trees are kept
# An edit over more lines than this is not kept as next-edit history (nor read line by line).
HISTORY_MAX_LINES = 40
_URI_SHOWN = 300  # of a URI in a message: a client's URI may be any length
# A request or change that comes just after its document's didClose is normal in a client
# that works asynchronously: the most recent closes are remembered so as not to warn of them.
_CLOSED_REMEMBERED = 256
# Distinct URIs told "not open": a client naming endless ones gets no more messages after.
_NOT_OPEN_TOLD = 20


# ---------------------------------------------------------------------- worker -> loop events


@dataclass(frozen=True)
class Anchored:
    """Idle work encoded the prompt anchored at `anchor`: keystrokes may use that anchor."""

    ticket: Ticket
    anchor: int


@dataclass(frozen=True)
class BlockReady:
    """The block after a one-line suggestion is kept for typing-ahead: tell the client."""

    ticket: Ticket
    params: dict[str, Any]


@dataclass(frozen=True)
class Refined:
    """A keystroke answered from a smaller prompt was answered again from a richer one, kept
    for typing-ahead; `changed`: the suggestion differs, tell the client (as for a block)."""

    ticket: Ticket
    params: dict[str, Any]
    changed: bool


@dataclass(frozen=True)
class IdleFailed:
    """Idle work failed: a KV cache not saved (`persist`), the model file changed on disk
    (`model-file`), or the engine failed (`engine`)."""

    kind: Literal["persist", "model-file", "engine"]
    message: str = ""


Event = Anchored | BlockReady | Refined | IdleFailed


@dataclass(frozen=True)
class Answered:
    """A keystroke the model answered: its spot, the text either side of the cursor then,
    and the answer."""

    prepared: Prepared
    completion: Completion
    before: str
    after: str
    position: types.Position
    # TypeAhead's generation when the keystroke read its settings: work built on its prompt
    # (a climb's answer) is shaped by them, and is not kept once they changed.
    typeahead_generation: int


class OpenFiles:
    """The open files (the registry's, which the repository host reads too) and their idle
    work."""

    def __init__(self, shared: Shared, files: OpenFileRegistry, repo: RepoHost,
                 on_idle_error: Callable[[str], None]) -> None:
        self._files = files
        self._settings = shared.settings
        self._client = shared.client
        self._scheduler = shared.scheduler
        self._model = shared.model
        self._repo = repo
        self._telemetry = shared.telemetry
        self._on_idle_error = on_idle_error
        self._with_tree: OrderedDict[str, None] = OrderedDict()  # least recently used first
        self._when_closed: list[Callable[[str], None]] = []
        self._closed: OrderedDict[str, None] = OrderedDict()  # least recently closed first
        self._not_open_told: set[str] = set()

    # ------------------------------------------------------------------ the open files

    def get(self, uri: str) -> OpenFile | None:
        return self._files.get(uri)

    def __contains__(self, uri: object) -> bool:
        return uri in self._files

    def __iter__(self) -> Iterator[str]:
        """The URIs open now (a copy)."""
        return iter(self._files)

    def __len__(self) -> int:
        return len(self._files)

    def files(self) -> list[OpenFile]:
        return self._files.files()

    def ticket(self, file: OpenFile) -> Ticket:
        """Work planned for `file` now."""
        return self._files.ticket(file)

    def remember(self, file: OpenFile, before: str, after: str, text: str,
                 certainty: Certainty | None = None, *, generation: int) -> bool:
        """(On the worker) keep a suggestion for typing-ahead in `file` unless it was closed
        or the settings changed since `generation` (`OpenFileRegistry.remember`)."""
        return self._files.remember(file, before, after, text, certainty,
                                    generation=generation)

    # ------------------------------------------------------------------ text sync

    def open(self, item: types.TextDocumentItem) -> None:
        # Text only at first: a file over the limit must never be parsed (50 MB took 7.5 GB).
        doc = Document(item.uri, item.language_id, item.version, item.text, parse=False)
        file = self._files.open(doc)
        state = file.state
        state.disabled_reason = self._refusal(doc)
        if state.disabled_reason:
            self._tell_refused(file)
            return
        self._sync_syntax(file)
        self.follow(file, after_open())
        self.in_use(item.uri)

    def _refusal(self, doc: Document, scan: bool = True, out_of_sync: bool = False) -> str:
        """Why the file gets no suggestions ("" when it does). The size is known without a
        scan; `scan` also looks for binary content."""
        if out_of_sync:
            return OUT_OF_SYNC
        size = doc.byte_size
        max_bytes = self._settings().max_file_bytes
        if size > max_bytes:
            return f"file is {size // 1024} KiB, over the {max_bytes // 1024} KiB limit"
        if scan and Document.is_binary(doc.text):
            return "file looks binary"
        return ""

    def _sync_syntax(self, file: OpenFile) -> None:
        """Keep a tree only for a file that gets suggestions; parse a large one in slices."""
        doc, state = file.doc, file.state
        doc.set_syntax(not state.disabled_reason, SYNC_PARSE_BYTES,
                       max_tree_nodes(self._settings().max_file_bytes))
        if doc.needs_parse and (state.parsing is None or state.parsing.done()):
            state.parsing = asyncio.get_running_loop().create_task(self._parse_in_slices(file))

    async def _parse_in_slices(self, file: OpenFile) -> None:
        # Until the file is closed (edits meanwhile: the parse takes them in).
        doc = file.doc
        while self._files.holds(file) and not doc.parse_step(PARSE_SLICE_S):
            # A pause, not just a yield: a request takes several turns of the loop to be read,
            # handled and answered, and each bare yield would cost it another slice.
            await asyncio.sleep(PARSE_PAUSE_S)
        self._tell_text_only(file)

    def _tell_text_only(self, file: OpenFile) -> None:
        """Once per open file: its tree was too big to keep (documents.max_tree_nodes)."""
        doc, uri = file.doc, file.uri
        # A file refused altogether (over the size limit) gets no suggestions, text or not.
        if doc.tree_refused and not file.told_text_only and not file.state.disabled_reason:
            file.told_text_only = True
            self._client.tell(f"lsp-complete: {_short(uri)} has no syntax tree "
                              f"({doc.tree_refused}): suggestions see its text only",
                              types.MessageType.Warning, once_key=f"text-only {uri}")

    def in_use(self, uri: str) -> None:
        """`uri` is the file being worked in: it keeps its tree (built again now if it was
        dropped, or in slices if large), and the files used longest ago drop theirs while
        the kept trees' sources exceed the budget."""
        file = self._files.get(uri)
        if file is None:
            return
        doc, state = file.doc, file.state
        self._tell_text_only(file)  # (refused by an edit's parse)
        if state.disabled_reason or not doc.syntax:
            return
        self._with_tree[uri] = None
        self._with_tree.move_to_end(uri)
        if doc.needs_parse:
            doc.reparse()
            self._sync_syntax(file)
        kept = {u: f.doc for u in self._with_tree if (f := self._files.get(u)) is not None}
        total = sum(d.byte_size for d in kept.values() if d.has_tree)
        for old in list(self._with_tree):
            if total <= TREE_BUDGET_BYTES or old == uri:
                break
            other = kept.get(old)
            if other is None or not other.has_tree:
                del self._with_tree[old]
            elif other.drop_tree():  # (not while its parse is under way: later)
                del self._with_tree[old]
                total -= other.byte_size

    def parsing(self, uri: str) -> asyncio.Task[None] | None:
        """The parse a file's suggestions must wait for, if one is under way."""
        file = self._files.get(uri)
        task = file.state.parsing if file is not None else None
        return task if task is not None and not task.done() else None

    def tell_not_open(self, uri: str, what: str) -> None:
        """`what` (a change, a request) came for a document not open: said once per URI, in
        the log too (not a line per keystroke). A client whose URIs differ from those it
        opened (percent-encoding, case) gets nothing for that file, and should learn why. Not
        for a document closed a moment ago (its late requests are no fault), nor past
        `_NOT_OPEN_TOLD` URIs."""
        if uri not in self._closed:
            self._tell_not_open_once(
                uri, f"lsp-complete: {what} for a document that is not open (no didOpen for "
                f"this exact URI), ignored: {uri[:_URI_SHOWN]}")

    def _tell_not_open_once(self, uri: str, message: str) -> None:
        """Why `uri` is not open here, once per URI and for the first `_NOT_OPEN_TOLD`."""
        if uri in self._not_open_told or len(self._not_open_told) >= _NOT_OPEN_TOLD:
            return
        self._not_open_told.add(uri)
        self._client.tell(message, types.MessageType.Warning, once_key=f"not-open {uri}")

    def change(self, params: types.DidChangeTextDocumentParams) -> None:
        file = self._files.get(params.text_document.uri)
        if file is None:
            self.tell_not_open(params.text_document.uri, "a change")
            return
        doc, state = file.doc, file.state
        state.edit_begins()
        self.forget_shown(state)  # a keystroke: the alternatives of the old text are moot
        was_disabled = state.disabled_reason
        recheck = bool(was_disabled)
        encoding = self._client.encoding
        # Parsed once, after the last change: a replace-all, a formatter's edits or many
        # cursors send hundreds of changes in one didChange.
        with doc.one_parse():
            for change in params.content_changes:
                if isinstance(change, types.TextDocumentContentChangePartial):
                    r = change.range
                    rng = (r.start.line, r.start.character, r.end.line, r.end.character)
                    first = min(max(r.start.line, 0), doc.line_count - 1)
                    last = min(max(r.end.line, first), doc.line_count - 1)
                    added = line_breaks(change.text)
                    small = last - first <= HISTORY_MAX_LINES and added <= HISTORY_MAX_LINES
                    before = [doc.line_text(n) for n in range(first, last + 1)] if small else []
                    start = doc.apply_change(change.text, rng, encoding)
                    if small:
                        after = [doc.line_text(n) for n in range(first, first + added + 1)]
                        state.history.record(first, before, after)
                    else:  # a big paste or cut: the blocks' line numbers say nothing any more
                        state.history.clear()
                    state.edit_cursor = start + len(change.text)
                    # A keystroke must not rescan the file: only big pastes are checked again.
                    recheck = recheck or len(change.text) > 4096 or "\x00" in change.text
                else:
                    start = doc.apply_change(change.text, None, encoding)
                    state.history.clear()  # (no client of ours sends whole texts as edits)
                    state.edit_cursor = None
                    state.out_of_sync = False
                    recheck = True
                state.edited_at(start)
        doc.version = params.text_document.version
        # The size is checked on every change (it costs nothing): a file that grows over the
        # limit drops its tree, one cut back under it is parsed again.
        state.disabled_reason = self._refusal(doc, scan=recheck, out_of_sync=state.out_of_sync)
        if state.disabled_reason != was_disabled:
            self._sync_syntax(file)
            if state.disabled_reason and not state.out_of_sync:
                # An edit made it too big or binary: its suggestions stop, say why (as at open).
                self._tell_refused(file)
        self.in_use(doc.uri)  # (and a tree it lacks is built: now, or in slices if large)
        self._repo.edited(params)

    def lost_change(self, uri: object) -> None:
        """A didChange for `uri` could not be read (a number out of range): from now on the
        text here may differ from the editor's, so the file gets no suggestions until the
        editor sends it whole again (a reopen, or a change of the whole text)."""
        file = self._files.get(uri) if isinstance(uri, str) else None
        if file is None:
            return
        state = file.state
        state.edit_begins()
        state.out_of_sync = True
        was_disabled, state.disabled_reason = state.disabled_reason, OUT_OF_SYNC
        if was_disabled != OUT_OF_SYNC:
            self._sync_syntax(file)
            self._tell_refused(file)

    def lost_open(self, uri: object, cause: str) -> None:
        """A didOpen for `uri` could not be read (a number out of range): the document is not
        open here, and its requests get nothing. Said once with the cause, not as "no
        didOpen" when its requests come; an open file's text is out of sync instead."""
        if not isinstance(uri, str):
            return
        if uri in self._files:
            self.lost_change(uri)
            return
        # Told once: its requests are then not told as never opened.
        self._tell_not_open_once(
            uri, f"lsp-complete: the didOpen of {uri[:_URI_SHOWN]} could not be read "
            f"({cause}), ignored: no completions for it until it is opened again")

    def _tell_refused(self, file: OpenFile) -> None:
        self._client.tell(
            f"lsp-complete: no completions for {_short(file.uri)}: {file.state.disabled_reason}",
            types.MessageType.Warning,
        )

    def when_closed(self, forget: Callable[[str], None]) -> None:
        """`forget(uri)` runs (on the loop) when a file closes: for what another part keeps
        per file (the next-edit timers and jobs)."""
        self._when_closed.append(forget)

    def close(self, uri: str) -> None:
        """Everything the file had goes: it leaves the registry (with its repository block
        and its typing-ahead, at once for the worker), its work stops (next edits too), its
        cache is saved."""
        for forget in self._when_closed:
            forget(uri)
        file = self._files.close(uri)
        self._with_tree.pop(uri, None)
        self._closed[uri] = None
        self._closed.move_to_end(uri)
        if len(self._closed) > _CLOSED_REMEMBERED:
            self._closed.popitem(last=False)
        if file is not None:
            self.forget_shown(file.state)
        self._repo.closed(uri)
        # A suggestion for the closed text is answered empty at once.
        self._scheduler.drop(JobKey.suggest(uri))
        # And its idle work stops (nothing uses it now).
        for key in (JobKey.file_idle(uri), JobKey.climb(uri), JobKey.block(uri)):
            self._scheduler.drop_idle(key)
        completer = self._model.completer
        if completer is not None:
            persist = self._settings().persist_cache

            def persist_and_free(_cancel: CancelToken) -> None:
                try:
                    if persist:
                        completer.persist(uri)
                finally:
                    # Not opened again meanwhile (by URI: a file opened again uses its cells).
                    if uri not in self._files:
                        completer.forget(uri)

            self._idle(JobKey.file_idle(uri), persist_and_free)

    def close_all(self) -> None:
        for uri in self._files:
            self.close(uri)

    # ------------------------------------------------------------------ idle work

    def _idle(self, key: JobKey, run: Callable[[CancelToken], Any], first: bool = False) -> Job:
        """Queue idle work; an engine failure goes to the one idle-error callback, on the
        event loop."""
        loop = asyncio.get_running_loop()

        def guarded(cancel: CancelToken) -> Any:
            try:
                return run(cancel)
            except PersistenceError as exc:  # a full disk: a warning, once, not an engine error
                self._post(loop, IdleFailed("persist", str(exc)))
            except ModelFileChanged:  # load it again (told once, by the model host)
                self._post(loop, IdleFailed("model-file"))
            except EngineError as exc:
                self._post(loop, IdleFailed("engine", str(exc)))
            return None

        return self._scheduler.submit_background(key, guarded, first=first)

    def _post(self, loop: asyncio.AbstractEventLoop, event: Event) -> None:
        """(On the worker) hand an event to the loop, which applies it (`apply`)."""
        with contextlib.suppress(RuntimeError):  # the loop closed: the server is gone
            loop.call_soon_threadsafe(self.apply, event)

    def apply(self, event: Event) -> None:
        """On the loop: what idle work found, applied if its file is still as planned."""
        match event:
            case Anchored(ticket, anchor):
                if ticket.still_current():
                    ticket.file.state.anchor = anchor
            case BlockReady(ticket, params):
                if ticket.open():  # (edits since do not matter: the client checks the spot)
                    self._telemetry.counters["blocks"] += 1
                    self._client.notify(BLOCK_READY_METHOD, params)
            case Refined(ticket, params, changed):
                if ticket.open():
                    self._telemetry.counters["refined"] += 1
                    if changed:
                        self._telemetry.counters["refinedChanged"] += 1
                        self._client.notify(BLOCK_READY_METHOD, params)
            case IdleFailed("persist", message):
                self._client.tell(f"lsp-complete: {message}", types.MessageType.Warning,
                                  "kv-persist")
            case IdleFailed("model-file"):
                self._model.check_file()
            case IdleFailed("engine", message):
                self._on_idle_error(message)

    def restore_all(self) -> None:
        """A model was loaded: every open file's cache saved for it, back in memory."""
        for file in self._files.files():
            self.follow(file, after_open())

    def refresh_all(self, skip: str | None = None) -> None:
        """Idle work for every open file: its repository block may name files that changed."""
        for file in self._files.files():
            state = file.state
            if file.uri != skip and not state.disabled_reason:
                has_block = self._repo.active_for(file.uri) is not None
                self.follow(file, after_repository_change(has_block))

    def schedule_restore(self, uri: str, first: bool = False) -> None:
        """Bring a newly opened file's KV cache saved on disk into memory while the worker is
        idle."""
        file, completer = self._files.get(uri), self._model.completer
        if file is None or completer is None or file.state.disabled_reason:
            return

        def restore(cancel: CancelToken) -> None:
            completer.restore(uri)

        self._idle(JobKey.file_idle(uri), restore, first=first)

    def answered(self, uri: str, state: DocState, answer: Answered) -> None:
        """The model answered a keystroke in `uri`: the idle work the planner asks for, and
        the file's KV cache saved once it stays idle."""
        file = self._files.get(uri)
        if file is None or file.state is not state:
            return  # (the caller's file is open: it just checked)
        self.follow(file, after_answer(state.plan, answer.completion.full_prompt), answer)
        self._persist_when_idle(file)

    def follow(self, file: OpenFile, steps: list[IdleStep],
               answer: Answered | None = None) -> None:
        """Queue the idle work that the planner asked for after an event of the file, in its
        order: at once, or once the cursor rests (the idle delay; a step planned for a state of
        the file that an edit or a move left behind then does nothing). `answer`: the
        keystroke the model answered (a climb builds on its prompt and answers it again)."""
        loop = asyncio.get_running_loop()
        ticket = self._files.ticket(file)
        for step in steps:
            def start(step: IdleStep = step) -> None:
                self._start(ticket, step, answer)

            if step.when_resting:
                loop.call_later(self._settings().idle_reanchor_ms / 1000, start)
            else:
                start()

    def _start(self, ticket: Ticket, step: IdleStep, answer: Answered | None) -> None:
        uri, state = ticket.file.uri, ticket.file.state
        if step.work == "restore":
            self.schedule_restore(uri, first=step.first)
        elif step.work == "climb":
            # Not while the block its suggestion begins is written: the block goes on from
            # the prompt that answered, and is the better suggestion there.
            if answer is not None and state.block is None:
                self.schedule_climb(ticket, answer, first=step.first)
        else:
            cursor = state.last_cursor if state.last_cursor is not None else 0
            self.prepare_at(ticket, cursor, first=step.first, whole=step.work == "spot")

    def _persist_when_idle(self, file: OpenFile) -> None:
        """Still idle a while later: save the file's KV sequence, so that a crash or a kill
        loses nothing (close and shutdown save too)."""
        ticket, uri = self._files.ticket(file), file.uri

        def persist() -> None:
            completer = self._model.completer
            if completer is None or not ticket.still_current():
                return
            if self._settings().persist_cache:
                self._idle(JobKey.persist_file(uri), lambda _c: completer.persist(uri))

        asyncio.get_running_loop().call_later(IDLE_PERSIST_S, persist)

    def schedule_climb(self, ticket: Ticket, answer: Answered, first: bool = False) -> None:
        """A keystroke was answered with a smaller prompt than the full one: build on towards
        the full one in whatever time the keys leave (the next one that needs the worker stops
        it; keys typing-ahead answers do not), then answer the keystroke's spot again from it
        (`Completer.refine`). That answer is kept for typing-ahead, which serves it to the keys
        typed on through the suggestion, and our clients are told when it differs."""
        completer, repo, file = self._model.completer, self._repo, ticket.file
        if completer is None:
            return
        loop, uri = asyncio.get_running_loop(), file.uri
        params = ask_again_params(uri, file.doc.version, answer.position)

        def climb(cancel: CancelToken) -> None:
            # Open under its URI (closing it drops this job before it runs).
            if uri not in self._files:
                return
            prepared = with_repo(answer.prepared, repo.active_for(uri))
            better = completer.refine(prepared, answer.completion, cancel)
            if better is None or not better.text:
                return
            if self._files.remember(file, answer.before, answer.after, better.text,
                                    better.certainty, generation=answer.typeahead_generation):
                changed = better.text != answer.completion.text
                self._post(loop, Refined(ticket, params, changed))

        self._idle(JobKey.climb(uri), climb, first=first)

    def prepare_at(self, ticket: Ticket, cursor: int, first: bool = False,
                   whole: bool = True) -> None:
        """Queue idle work that encodes the prompt for `cursor`, anchored at its line, so
        the next keystroke there only encodes what it typed (while `ticket` is current):
        `whole`, its full prompt and repository block too (`warm_spot`), else only what the
        first keystroke there takes (`warm_look`)."""
        file, completer = ticket.file, self._model.completer
        if completer is None or not ticket.still_current():
            return
        doc, uri = file.doc, file.uri
        if cursor > len(doc.text) or doc.needs_parse:
            return
        prepared = prepare(doc, cursor, None, self._settings())
        repo = self._repo
        loop = asyncio.get_running_loop()
        anchored = Anchored(ticket, prepared.ctx.anchor)

        request = repo.request(doc, cursor) if whole else None
        # A look prepares the prompt a keystroke there takes: with the line block that one
        # would be given, where the file has no block yet.
        line_request = None if whole else repo.line_request(file, cursor)

        def look(cancel: CancelToken) -> None:
            if not ticket.still_current():
                return
            active = repo.block_for(file, line_request, cancel,
                                    lambda block: completer.repo_tokens(prepared, block))
            if completer.warm_look(prepared, active, cancel) and ticket.still_current():
                self._post(loop, anchored)  # keystrokes there may use its anchor from now on

        def candidate(cancel: CancelToken) -> Any:
            # The spot's prompt is encoded: keystrokes there may use its anchor from now on;
            # then bring its repository block up to date, unless the file moved on meanwhile.
            if not ticket.still_current():
                return repo.active_for(uri)
            self._post(loop, anchored)
            return repo.block(request, uri, cancel)

        def warm(cancel: CancelToken) -> None:
            if not ticket.still_current():
                return
            switch = completer.warm_spot(prepared, repo.active_for(uri),
                                         lambda: candidate(cancel), cancel)
            repo.apply(file, switch)  # (unless it was closed meanwhile)

        self._idle(JobKey.file_idle(uri), warm if whole else look, first=first)

    def alternatives_work(self, state: DocState, shown: Shown) -> Callable[[CancelToken],
                                                                          list[str] | None]:
        """The worker's part of an explicit request: a shown suggestion's alternatives (None
        when cancelled)."""
        model = self._model
        count = self._settings().alternatives

        def run(cancel: CancelToken) -> list[str] | None:
            if state.shown is not shown or shown.completer is not model.completer:
                return None  # the text changed, or the model was reloaded
            if shown.alternatives is not None:
                return shown.alternatives
            return shown.completer.alternatives(shown.prepared, shown.completion, count, cancel)

        return run

    def schedule_block(self, uri: str, state: DocState, shown: Shown, before: str,
                       after: str, position: types.Position) -> None:
        """A suggestion was shown where a block may follow (`block_wanted`): at once, before
        other idle work, generate the block it begins (`Completer.block`), while the user
        reads the line or types on through it (typing-ahead answers those keys without the
        worker). It is kept for typing-ahead at that spot: the next request there, or typing
        on through the line and into the next, is answered with it, and our clients are told
        (BLOCK_READY_METHOD) to ask again; the block written after it in the trained layout,
        where it differs, is kept and announced the same way. A keystroke that leaves the
        suggestion, or a move elsewhere, stops it (`left_suggestion`)."""
        file = self._files.get(uri)
        if file is None or file.state is not state:
            return  # (the caller's file is open: it just checked)
        loop = asyncio.get_running_loop()
        model = self._model
        params = ask_again_params(uri, shown.version, position)
        ticket = self._files.ticket(file, version=shown.version)
        # What it has written so far: a key typed on into the next line is answered from it.
        progressed = asyncio.Event()
        writing = InFlight(before=before, after=after, progressed=progressed)

        def poke() -> None:  # (on the worker)
            with contextlib.suppress(RuntimeError):  # the loop closed: the server is gone
                loop.call_soon_threadsafe(progressed.set)

        def progress(text: str) -> None:
            writing.partial = text
            poke()

        kept: list[str] = []  # what typing-ahead holds of it so far

        def keep(block: str) -> None:  # (on the worker)
            if block not in kept and self._files.remember(
                    file, before, after, block, generation=shown.typeahead_generation):
                kept.append(block)
                self._post(loop, BlockReady(ticket, params))

        def run(cancel: CancelToken) -> str | None:
            if not ticket.open() or shown.completer is not model.completer:
                return None  # closed, or the model was reloaded
            block = shown.completer.block(shown.prepared, shown.completion, cancel, progress,
                                          first=keep)
            if block is None or cancel.cancelled:
                return None
            keep(block)  # (the better one, when the second layout found it; else kept)
            return block if block in kept else None  # (None: closed, or settings changed)

        writing.job = self._idle(JobKey.block(uri), run, first=True)
        writing.job.future.add_done_callback(lambda _: poke())
        state.block = writing

    def left_suggestion(self, uri: str) -> None:
        """A keystroke that typing-ahead could not serve, or the cursor moved off the
        suggestion's spot: the block being written for the suggestion is moot."""
        file = self._files.get(uri)
        if file is not None:
            file.state.block = None
        self._scheduler.drop_idle(JobKey.block(uri))

    @staticmethod
    def keep_alternatives(shown: Shown, texts: list[str] | None) -> None:
        """On the loop: the alternatives computed for a suggestion shown (complete ones)."""
        if texts is not None and shown.alternatives is None:
            shown.alternatives = texts

    def forget_shown(self, state: DocState) -> None:
        """The spot of the suggestion shown is left: stop computing its alternatives."""
        shown, state.shown = state.shown, None
        if shown is not None and shown.job is not None and not shown.job.future.done():
            self._scheduler.cancel(shown.job)

    def cursor_moved(self, uri: str, line: int, character: int) -> None:
        """The client says where the cursor rests (lsp-complete/didMoveCursor, or a standard
        client's documentHighlight request). Unless the file's prompt is anchored at that line
        already, prepare the prompt anchored there that a first keystroke takes (a look) while
        the user gets ready to type: that keystroke then costs what any other keystroke does,
        and its middle starts short. A report of the spot where the last request or report
        was, with no edit since, changes nothing: a pause in typing, whose answer planned its
        own idle work (it would stop that work), or the same rest reported twice (a client
        may send both messages)."""
        file = self._files.get(uri)
        if file is None or not self._model.ready or file.state.disabled_reason:
            return
        doc, state = file.doc, file.state
        if not self._settings().language_enabled(doc.setting_keys):
            return
        if not (0 <= line < doc.line_count and character >= 0):
            return
        self.in_use(uri)
        cursor = doc.offset_at(line, character, self._client.encoding)
        if state.told_cursor == cursor:
            return
        if state.shown is not None and state.shown.cursor != cursor:
            self.forget_shown(state)  # the suggestion's spot is left
        block = state.block
        if block is not None and not block.follows(doc.text[:cursor], doc.text[cursor:]):
            self.left_suggestion(uri)  # off the line its block goes on from
        steps = after_cursor_move(fresh_anchor(doc, cursor) == state.anchor)
        if not steps:
            return
        self._telemetry.counters["cursorMoves"] += 1
        state.at_cursor(cursor)  # idle work planned for the old spot is moot
        self.follow(file, steps)


def ask_again_params(uri: str, version: int, position: types.Position) -> dict[str, Any]:
    """BLOCK_READY_METHOD's params: a better suggestion is ready at `position` of the
    document `uri` at `version` (a block, or the spot answered again)."""
    return {"textDocument": {"uri": uri, "version": version},
            "position": {"line": position.line, "character": position.character}}


def _short(uri: str) -> str:
    return uri.rsplit("/", 1)[-1]
