"""Requests for a suggestion: typing-ahead, joining the computation already running for what
the user typed, debounce, then one job on the worker; an explicit request's alternatives (those
idle work computed for the suggestion shown, or computed then); and the edit the client is
given, its range and accept command built once for the inline item and the menu item alike."""

from __future__ import annotations

import asyncio
import contextlib
import re
import time
from dataclasses import dataclass
from typing import Any

from lsprotocol import types

from lsp_complete.documents import Document
from lsp_complete.engine.base import CancelToken
from lsp_complete.jobkey import JobKey
from lsp_complete.pipeline import Completion, block_kind, prepare, with_repo
from lsp_complete.postprocess import clean_completion
from lsp_complete.scheduler import Job
from lsp_complete.server.files import Answered, OpenFiles
from lsp_complete.server.protocol import ACCEPT_COMMAND
from lsp_complete.server.repo import RepoHost
from lsp_complete.server.shared import Shared
from lsp_complete.server.state import DocState, InFlight, Shown
from lsp_complete.typeahead import TypeAhead

_WORD = re.compile(r"[A-Za-z0-9_$]+$")
# How far back the partly typed word is looked for. `_WORD.search` tries every start, and a
# start inside a run of word characters that ends before the cursor (`aaa…a(`) scans the run:
# quadratic over an unbounded line. A longer word is replaced from inside it, which is fine.
_WORD_WINDOW = 256
# The most a key typed on into the next line waits for the block being written to reach that
# line's end (a line is at most LINE_MAX_TOKENS): longer, and it is asked for anew.
BLOCK_LINE_WAIT_S = 1.0


@dataclass(frozen=True)
class Suggestion:
    """A suggestion as the client inserts it: it replaces the partly typed word (the spec's
    preferred form), so `insert` is that word followed by the model's text."""

    insert: str
    typed: str  # the partly typed word
    range: types.Range
    command: types.Command  # tells the server it was accepted


def inline_item(suggestion: Suggestion) -> types.InlineCompletionItem:
    return types.InlineCompletionItem(
        insert_text=suggestion.insert, range=suggestion.range, command=suggestion.command
    )


def menu_item(suggestion: Suggestion) -> types.CompletionItem:
    insert = suggestion.insert
    return types.CompletionItem(
        label=insert.split("\n", 1)[0][:60] or "…",
        kind=types.CompletionItemKind.Snippet,
        detail="lsp-complete (AI)",
        documentation=insert,
        insert_text_format=types.InsertTextFormat.PlainText,
        text_edit=types.TextEdit(range=suggestion.range, new_text=insert),
        filter_text=suggestion.typed,
        sort_text="0",
        preselect=True,
        command=suggestion.command,
    )


class Suggester:
    def __init__(self, shared: Shared, files: OpenFiles, repo: RepoHost,
                 typeahead: TypeAhead) -> None:
        self._files = files
        self._model = shared.model
        self._repo = repo
        self._typeahead = typeahead
        self._telemetry = shared.telemetry
        self._scheduler = shared.scheduler
        self._settings = shared.settings
        self._client = shared.client

    async def suggestion(self, uri: str, position: types.Position) -> Suggestion | None:
        """The suggestion at `position`, or None."""
        found = await self.suggestions(uri, position)
        return found[0] if found else None

    async def suggestions(self, uri: str, position: types.Position,
                          alternatives: bool = False) -> list[Suggestion]:
        """The suggestion at `position` (none or one); with `alternatives` (an explicit
        request), followed by up to `settings.alternatives` others, each starting differently."""
        found = await self.suggest(uri, position)
        # The file `suggest` checked last: nothing ran on the loop since it returned.
        file = self._files.get(uri)
        if found is None or file is None:
            return []
        doc = file.doc
        text, cursor = found
        texts = [text]
        count = self._settings().alternatives
        if alternatives and count > 0:
            ticket = self._files.ticket(file)
            more = await self._alternatives(uri, text, cursor)
            if not ticket.same_text():
                return []  # the text changed meanwhile: all of it is stale
            texts += [t for t in more if t != text][:count]
        return [self._suggestion(uri, doc, position, cursor, t, alternative=i > 0)
                for i, t in enumerate(texts)]

    def _suggestion(self, uri: str, doc: Document, position: types.Position, cursor: int,
                    text: str, alternative: bool = False) -> Suggestion:
        begin = max(doc.line_start(cursor), cursor - _WORD_WINDOW)
        word = _WORD.search(doc.text[begin:cursor])
        start = cursor - len(word.group(0)) if word else cursor
        suggestion_id = self._telemetry.shown(uri, text, alternative=alternative)
        start_line, start_char = doc.position_at(start, self._client.encoding)
        typed = doc.text[start:cursor]
        return Suggestion(
            insert=typed + text,
            typed=typed,
            range=types.Range(
                start=types.Position(line=start_line, character=start_char), end=position
            ),
            command=types.Command(
                title="accept", command=ACCEPT_COMMAND,
                arguments=[{"uri": uri, "id": suggestion_id}],
            ),
        )

    async def suggest(self, uri: str, position: types.Position) -> tuple[str, int] | None:
        """The text to insert at `position` and the cursor offset, or None."""
        files, telemetry, typeahead = self._files, self._telemetry, self._typeahead
        settings = self._settings()
        started = time.perf_counter()
        file = files.get(uri)
        if file is None:
            return None
        doc, state = file.doc, file.state
        version = doc.version
        # The same open file (not one closed and opened again under this URI, whose version
        # numbers start over) at the same version as when asked: `asked.same_text()`.
        asked = files.ticket(file)

        files.in_use(uri)
        if (parsing := files.parsing(uri)) is not None:
            await asyncio.shield(parsing)  # a large file: its prompt needs the tree
            if not asked.same_text():
                telemetry.record(uri, version, started, "superseded")
                return None
        if state.disabled_reason or not settings.language_enabled(doc.language_id):
            return None
        if position.line < 0 or position.character < 0 or position.line >= doc.line_count:
            return None
        cursor = doc.offset_at(position.line, position.character, self._client.encoding)
        state.at_cursor(cursor)
        before, after = doc.text[:cursor], doc.text[cursor:]
        hit = typeahead.lookup(uri, before, after)
        if hit is not None:
            # An older keystroke's computation is now pointless.
            self._scheduler.drop(JobKey.suggest(uri))
            telemetry.counters["typeahead"] += 1
            telemetry.record(uri, version, started, "typeahead")
            return hit, cursor
        completer = self._model.completer
        if self._model.check_file() or completer is None or self._model.state != "ready":
            telemetry.record(uri, version, started, "not-ready")
            return None
        block = state.block
        if block is not None and await _block_reached(block, before, after):
            if not asked.same_text():
                telemetry.record(uri, version, started, "superseded")
                return None
            # The block ended (and what its rules kept is in typing-ahead), or has written
            # this line so far (the rules judge it as any line at this spot).
            hit = typeahead.lookup(uri, before, after)
            assert block.job is not None
            raw = None if hit is not None or block.job.future.done() else \
                block.line_at(before, after)
            if raw is not None:
                site = prepare(doc, cursor, state.anchor, settings).site
                hit = clean_completion(raw, site, completer.spec.stop) or None
            if hit is not None:
                telemetry.counters["blockLines"] += 1
                telemetry.record(uri, version, started, "typeahead")
                return hit, cursor
        if block is not None and block.past_line_end(before, after):
            # The block writes on past this line's end: Enter finds its next line, and a model
            # call here (for the end of a finished line) would stop it.
            telemetry.record(uri, version, started, "block-pending")
            return None
        files.left_suggestion(uri)
        if await _join_inflight(state, before, after):
            if not asked.same_text():
                telemetry.record(uri, version, started, "superseded")
                return None
            hit = typeahead.lookup(uri, before, after)
            if hit is not None:
                telemetry.counters["joined"] += 1
                telemetry.record(uri, version, started, "typeahead")
                return hit, cursor
        if settings.debounce_ms:
            # Nothing at all since (a newer request, an edit, a cursor move): still wanted.
            debounced = files.ticket(file)
            await asyncio.sleep(settings.debounce_ms / 1000)
            if not debounced.still_current() or not asked.same_text():
                telemetry.record(uri, version, started, "superseded")
                return None
        prepared = prepare(doc, cursor, state.anchor, settings)
        state.anchor = prepared.ctx.anchor
        inflight = InFlight(before=before, after=after)
        repo = self._repo

        def run(cancel: CancelToken) -> Completion:
            def progress(text: str) -> None:
                inflight.partial = text

            # The file's repository block is read here, on the worker, where idle work
            # switches it: it always matches what that work left in the cache.
            completion = completer.run(with_repo(prepared, repo.active_for(uri)), cancel,
                                       progress)
            if completion.text and not cancel.cancelled:
                # Remembered here, on the worker, so that every keystroke waiting on this
                # job (see _join_inflight) finds it the moment the job ends. Not once the file
                # was closed: its typing-ahead was dropped then.
                files.remember(file, before, after, completion.text)
            return completion

        job = inflight.job = self._scheduler.submit(JobKey.suggest(uri), run)
        state.inflight = inflight
        try:
            completion: Completion | None = await asyncio.wrap_future(job.future)
        except asyncio.CancelledError:  # $/cancelRequest
            self._scheduler.cancel(job)
            telemetry.record(uri, version, started, "cancelled")
            raise
        if completion is not None:  # a remote engine failed: say so once, until it recovers
            telemetry.last_error = completion.error
            self._client.tell_failure(
                "engine-error", f"lsp-complete: {completion.error}" if completion.error else None)
            if completion.error:
                self._model.check_file()  # a model file rewritten under a decode: reload it
        if completion is None or job.cancel.cancelled or not asked.same_text():
            # Superseded, or the text changed (or was closed) while computing: it is stale.
            telemetry.counters["superseded"] += 1
            telemetry.record(uri, version, started, "superseded")
            return None
        source = "model" if completion.text else "empty"
        telemetry.record(uri, version, started, source, completion)
        files.forget_shown(state)
        if completion.text:  # an explicit request at this spot computes its alternatives
            state.shown = Shown(version, cursor, prepared, completion, completer)
            kind = block_kind(prepared, completion)
            if kind is not None:
                files.schedule_block(uri, state, state.shown, kind, before, after, position)
        files.answered(uri, state, Answered(prepared, completion, before, after, position))
        if not completion.text:
            telemetry.counters["empty"] += 1
            return None
        return completion.text, cursor

    async def _alternatives(self, uri: str, primary: str, cursor: int) -> list[str]:
        """Other suggestions than `primary` at `cursor`: computed now from the prompt of the
        suggestion shown there (its prefix is cached), kept for the next explicit request at
        the same spot (cycling on); for a suggestion typing-ahead derived from an earlier one,
        a fresh computation at this spot, whose own first suggestion becomes an alternative
        too."""
        files = self._files
        file = files.get(uri)
        if file is None or self._model.completer is None:
            return []
        doc, state = file.doc, file.state
        shown = state.shown
        if shown is not None and shown.answers(doc.version, cursor, primary):
            if shown.alternatives is not None:
                return shown.alternatives
            shown.job = job = self._scheduler.submit(
                JobKey.suggest(uri), files.alternatives_work(state, shown))
            texts = await self._answer(job)
            files.keep_alternatives(shown, texts)
            return texts or []
        return await self._fresh_alternatives(uri, doc, state, cursor)

    async def _fresh_alternatives(self, uri: str, doc: Document, state: DocState,
                                  cursor: int) -> list[str]:
        """A suggestion and its alternatives computed now at `cursor`, all as alternatives."""
        completer = self._model.completer
        self._files.in_use(uri)
        if completer is None or doc.needs_parse:
            return []
        settings = self._settings()
        prepared = prepare(doc, cursor, state.anchor, settings)
        count = settings.alternatives
        repo = self._repo

        def run(cancel: CancelToken) -> list[str]:
            usual = with_repo(prepared, repo.active_for(uri))
            completion = completer.run(usual, cancel)
            more = completer.alternatives(usual, completion, count, cancel) or []
            return [t for t in (completion.text, *more) if t]

        return await self._answer(self._scheduler.submit(JobKey.suggest(uri), run)) or []

    async def _answer(self, job: Job) -> Any:
        """The job's answer (None when superseded); $/cancelRequest cancels it."""
        try:
            return await asyncio.wrap_future(job.future)
        except asyncio.CancelledError:
            self._scheduler.cancel(job)
            raise


async def _block_reached(block: InFlight, before: str, after: str) -> bool:
    """While the block being written for the suggestion shown agrees with what was typed
    since, wait (at most BLOCK_LINE_WAIT_S) until it has written the cursor's line to its end,
    or ended; whether it did. At the end of a line it has written (the user typed or accepted
    all of it), what is wanted is the lines after: wait for it to end."""
    assert block.progressed is not None and block.job is not None
    loop = asyncio.get_running_loop()
    deadline = loop.time() + BLOCK_LINE_WAIT_S
    while True:
        block.progressed.clear()
        if not block.follows(before, after):
            return False
        if block.line_at(before, after) or block.job.future.done():
            return True
        try:
            await asyncio.wait_for(block.progressed.wait(), max(0.0, deadline - loop.time()))
        except TimeoutError:
            return False


async def _join_inflight(state: DocState, before: str, after: str) -> bool:
    """If the model is already writing exactly what the user just typed, wait for it
    instead of superseding it: a fast typist would otherwise cancel every suggestion
    before it is finished. Returns whether it waited."""
    inflight = state.inflight
    if inflight is None or not inflight.joinable(before, after):
        return False
    assert inflight.job is not None
    with contextlib.suppress(Exception):
        await asyncio.wrap_future(inflight.job.future)
    return True
