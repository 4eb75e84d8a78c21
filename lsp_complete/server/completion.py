"""Requests for a suggestion: typing-ahead, joining the computation already running for what
the user typed, debounce, then one job on the worker; an explicit request's alternatives (those
idle work computed for the suggestion shown, or computed then); and the edit the client is
given, its range and accept command built once for the inline item and the menu item alike."""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from lsprotocol import types

from lsp_complete.documents import Document
from lsp_complete.engine.base import CancelToken
from lsp_complete.jobkey import JobKey
from lsp_complete.pipeline import (
    Completer,
    Completion,
    block_wanted,
    prepare,
    replaced_after_cursor,
    with_repo,
)
from lsp_complete.postprocess import clean_completion
from lsp_complete.scheduler import Job
from lsp_complete.server.files import Answered, OpenFiles
from lsp_complete.server.open_file import OpenFile, Ticket
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
# A completion menu's item longer than this is not completed after (no identifier is).
MAX_ITEM_CHARS = 1000


@dataclass(frozen=True)
class Suggestion:
    """A suggestion as the client inserts it: it replaces the partly typed word (the spec's
    preferred form), so `insert` is that word followed by the model's text, and the closers
    after the cursor that the text types through (`replaceLineSuffix`)."""

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
        # Its later lines carry their own indentation: a client that adjusts indentation by
        # default (the spec's other mode) would indent them again by the cursor line's.
        insert_text_mode=types.InsertTextMode.AsIs,
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

    async def suggestions(self, uri: str, position: types.Position, alternatives: bool = False,
                          item: types.SelectedCompletionInfo | None = None) -> list[Suggestion]:
        """The suggestion at `position` (none or one); with `alternatives` (an explicit
        request), followed by up to `settings.alternatives` others, each starting differently.
        With the completion menu's selected `item` at the cursor, the one suggestion that
        extends it (`_after_item`); an item elsewhere is ignored."""
        if item is not None and (file := self._files.get(uri)) is not None:
            span = _item_span(file.doc, position, item, self._client.encoding)
            if span is not None:
                after = await self._after_item(uri, file, position, span, item)
                return [after] if after is not None else []
        found = await self.suggest(uri, position, explicit=alternatives)
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
        end = position
        replaced = replaced_after_cursor(doc, cursor, text, self._settings())
        if replaced:
            end_line, end_char = doc.position_at(cursor + replaced, self._client.encoding)
            end = types.Position(line=end_line, character=end_char)
        return Suggestion(
            insert=typed + text,
            typed=typed,
            range=types.Range(
                start=types.Position(line=start_line, character=start_char), end=end
            ),
            command=_accept_command(uri, suggestion_id),
        )

    async def suggest(self, uri: str, position: types.Position,
                      explicit: bool = False) -> tuple[str, int] | None:
        """The text to insert at `position` and the cursor offset, or None. A suggestion the
        model is unsure of, fresh or typed along, is held back unless asked for `explicit`ly
        (`_held_back`)."""
        files, telemetry, typeahead = self._files, self._telemetry, self._typeahead
        # With the settings this answer is shaped by: a change of them meanwhile clears
        # typing-ahead, and this answer must not be kept after that clear.
        settings, generation = self._settings(), typeahead.generation
        started = time.perf_counter()
        file = files.get(uri)
        if file is None:
            files.tell_not_open(uri, "a completion request")
            return None
        doc, state = file.doc, file.state
        version = doc.version
        # The same open file (not one closed and opened again under this URI, whose version
        # numbers start over) at the same version as when asked: `asked.same_text()`.
        asked = files.ticket(file)

        if not await self._servable(uri, file, asked, started):
            return None
        if position.line < 0 or position.character < 0 or position.line >= doc.line_count:
            return None
        cursor = doc.offset_at(position.line, position.character, self._client.encoding)
        state.at_cursor(cursor)
        before, after = doc.text[:cursor], doc.text[cursor:]
        found = typeahead.find(uri, before, after)
        if found is not None:
            self._typed_ahead(uri, version, started)
            return None if self._held_back(found.confidence, explicit) else (found.text, cursor)
        completer = self._ready_completer(uri, version, started)
        if completer is None:
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
        if await _join_inflight(state, before, after,
                                lambda joined: self._keep_or_cancel(joined, file)):
            if not asked.same_text():
                telemetry.record(uri, version, started, "superseded")
                return None
            found = typeahead.find(uri, before, after)
            if found is not None:
                telemetry.counters["joined"] += 1
                telemetry.record(uri, version, started, "typeahead")
                return (None if self._held_back(found.confidence, explicit)
                        else (found.text, cursor))
        if not await self._debounced(uri, file, asked, started):
            return None
        prepared = prepare(doc, cursor, state.anchor, settings)
        state.anchor = prepared.ctx.anchor
        inflight = InFlight(before=before, after=after)
        repo = self._repo
        line_request = repo.line_request(file, cursor)

        def run(cancel: CancelToken) -> Completion:
            def progress(text: str) -> None:
                inflight.partial = text

            active = repo.block_for(file, line_request, cancel,
                                    lambda block: completer.repo_tokens(prepared, block))
            completion = completer.run(with_repo(prepared, active), cancel, progress)
            if completion.text and not cancel.cancelled:
                # Remembered here, on the worker, so that every keystroke waiting on this
                # job (see _join_inflight) finds it the moment the job ends. Not once the file
                # was closed, nor the settings changed: its typing-ahead was dropped then.
                files.remember(file, before, after, completion.text, completion.certainty,
                               generation=generation)
            return completion

        job = inflight.job = self._scheduler.submit(JobKey.suggest(uri), run)
        state.inflight = inflight
        completion = await self._computed(
            uri, job, asked, started, generation, lambda: self._keep_or_cancel(inflight, file))
        if completion is None:
            return None
        files.forget_shown(state)
        held_back = bool(completion.text) and self._held_back(completion.confidence, explicit)
        if completion.text:  # an explicit request at this spot computes its alternatives
            state.shown = Shown(version, cursor, prepared, completion, completer,
                                typeahead_generation=generation)
            if not held_back and block_wanted(prepared, completion):
                files.schedule_block(uri, state, state.shown, before, after, position)
        files.answered(uri, state, Answered(prepared, completion, before, after, position,
                                            typeahead_generation=generation))
        if not completion.text or held_back:
            return None
        return completion.text, cursor

    def _held_back(self, confidence: float, explicit: bool) -> bool:
        """The model gave the first line to be shown less probability than
        `minConfidencePercent`: most such lines are wrong, and a wrong suggestion costs the
        user a read. Not shown, unless asked for explicitly; it stays in typing-ahead, and
        shows once the user has typed past what the model was unsure of."""
        if explicit or confidence * 100 >= self._settings().min_confidence_percent:
            return False
        self._telemetry.counters["heldBack"] += 1
        return True

    def _keep_or_cancel(self, inflight: InFlight, file: OpenFile) -> None:
        """A request waiting for `inflight` was cancelled ($/cancelRequest). Clients cancel
        the request of the key before when they send the next one (VS Code's, Neovim's
        plugins'): where the document was typed on with what the model is writing, the next
        key's request will wait for it (`_join_inflight`), so the work goes on; else it
        stops, and a cancelled request does no further work (a closed file's too)."""
        if inflight.job is None:
            return
        if self._files.get(file.doc.uri) is not file or not inflight.wanted_after(file.doc.text):
            self._scheduler.cancel(inflight.job, hard=False)

    async def _after_item(self, uri: str, file: OpenFile, position: types.Position,
                          span: tuple[int, int],
                          item: types.SelectedCompletionInfo) -> Suggestion | None:
        """The suggestion while the client's completion menu has `item` selected over `span`
        (VS Code's suggest widget; LSP 3.18 `selectedCompletionInfo`): it must extend the
        item's text and replace the item's range, or the client does not show it. The model
        is asked as if the item were accepted, and the suggestion is the item's text and
        what follows it. None when there is nothing to add."""
        files, telemetry = self._files, self._telemetry
        started = time.perf_counter()
        doc = file.doc
        asked = files.ticket(file)
        if not await self._servable(uri, file, asked, started):
            return None
        file.state.at_cursor(doc.offset_at(position.line, position.character,
                                           self._client.encoding))
        start, end = span
        before, after = doc.text[:start] + item.text, doc.text[end:]
        text = self._typeahead.lookup(uri, before, after)
        if text is None:
            text = await self._compute_after_item(uri, file, asked, started, span, item.text,
                                                  before, after)
        else:
            self._typed_ahead(uri, doc.version, started)
        if not text:
            return None
        suggestion_id = telemetry.shown(uri, item.text + text)
        return Suggestion(insert=item.text + text, typed=doc.text[start:end], range=item.range,
                          command=_accept_command(uri, suggestion_id))

    async def _compute_after_item(self, uri: str, file: OpenFile, asked: Ticket, started: float,
                                  span: tuple[int, int], item_text: str, before: str,
                                  after: str) -> str | None:
        """The model's text after the menu's item, as if it were accepted (`_after_item`):
        `before` and `after` are the text either side of the cursor then."""
        completer = self._ready_completer(uri, file.doc.version, started)
        if completer is None or not await self._debounced(uri, file, asked, started):
            return None
        doc, (start, end) = file.doc, span
        # With the settings it is shaped by (see `suggest`).
        settings, generation = self._settings(), self._typeahead.generation
        prepared = prepare(doc.edited(start, end, item_text), start + len(item_text),
                           file.state.anchor, settings)
        repo, files = self._repo, self._files

        def run(cancel: CancelToken) -> Completion:
            completion = completer.run(with_repo(prepared, repo.active_for(uri)), cancel)
            if completion.text and not cancel.cancelled:  # (as if accepting the item)
                files.remember(file, before, after, completion.text, generation=generation)
            return completion

        completion = await self._computed(
            uri, self._scheduler.submit(JobKey.suggest(uri), run), asked, started, generation)
        return completion.text if completion is not None else None

    async def _servable(self, uri: str, file: OpenFile, asked: Ticket, started: float) -> bool:
        """Whether the file gets suggestions now: its language is on, and a large file's
        parse (its prompt needs the tree) has ended with the text as it was asked."""
        files, doc, state = self._files, file.doc, file.state
        files.in_use(uri)
        if (parsing := files.parsing(uri)) is not None:
            await asyncio.shield(parsing)
            if not asked.same_text():
                self._telemetry.record(uri, doc.version, started, "superseded")
                return False
        return not state.disabled_reason and self._settings().language_enabled(doc.setting_keys)

    def _typed_ahead(self, uri: str, version: int, started: float) -> None:
        """A request typing-ahead answered: an older keystroke's computation is pointless now."""
        self._scheduler.drop(JobKey.suggest(uri))
        self._telemetry.counters["typeahead"] += 1
        self._telemetry.record(uri, version, started, "typeahead")

    def _ready_completer(self, uri: str, version: int, started: float) -> Completer | None:
        """The completer when its model is ready (and its file unchanged on disk), else None."""
        completer = self._model.completer
        if self._model.check_file() or completer is None or self._model.state != "ready":
            self._telemetry.record(uri, version, started, "not-ready")
            return None
        return completer

    async def _debounced(self, uri: str, file: OpenFile, asked: Ticket, started: float) -> bool:
        """After the debounce, whether the request is still wanted: nothing at all came
        since (a newer request, an edit, a cursor move)."""
        debounce_ms = self._settings().debounce_ms
        if not debounce_ms:
            return True
        debounced = self._files.ticket(file)
        await asyncio.sleep(debounce_ms / 1000)
        if debounced.still_current() and asked.same_text():
            return True
        self._telemetry.record(uri, file.doc.version, started, "superseded")
        return False

    async def _computed(self, uri: str, job: Job, asked: Ticket, started: float,
                        generation: int,
                        cancelled: Callable[[], None] | None = None) -> Completion | None:
        """The suggestion job's completion, recorded; None when it is stale (superseded, or
        the text changed or was closed while computing, or the settings changed since
        `generation`: its text was shaped by the old ones, its item's range would be placed
        by the new ones). $/cancelRequest cancels the job, or hands it to `cancelled`."""
        telemetry, version = self._telemetry, asked.version
        try:
            # Shielded: a cancelled wait must not cancel the future others may wait for.
            completion: Completion | None = await asyncio.shield(asyncio.wrap_future(job.future))
        except asyncio.CancelledError:
            if cancelled is None:
                self._scheduler.cancel(job)
            else:
                cancelled()
            telemetry.record(uri, version, started, "cancelled")
            raise
        if completion is not None:  # a remote engine failed: say so once, until it recovers
            telemetry.last_error = completion.error
            self._client.tell_engine(completion.error)
            if completion.error:
                self._model.check_file()  # a model file rewritten under a decode: reload it
        if (completion is None or job.cancel.cancelled or not asked.same_text()
                or self._typeahead.generation != generation):
            telemetry.counters["superseded"] += 1
            telemetry.record(uri, version, started, "superseded")
            return None
        telemetry.record(uri, version, started, "model" if completion.text else "empty",
                         completion)
        if not completion.text:
            telemetry.counters["empty"] += 1
        return completion

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


def _accept_command(uri: str, suggestion_id: str) -> types.Command:
    """The command an accepted suggestion runs: it tells the server (telemetry, next edits)."""
    return types.Command(title="accept", command=ACCEPT_COMMAND,
                         arguments=[{"uri": uri, "id": suggestion_id}])


def _item_span(doc: Document, position: types.Position, item: types.SelectedCompletionInfo,
               encoding: str) -> tuple[int, int] | None:
    """The offsets the menu's item replaces: a range on the cursor's line around the cursor
    (start at or before it, end at or after it), for one line of text of at most
    MAX_ITEM_CHARS. None for anything else (a client's mistake: the item is ignored)."""
    where = item.range
    line = position.line
    if not (where.start.line == where.end.line == line) or not 0 <= line < doc.line_count:
        return None
    if min(position.character, where.start.character, where.end.character) < 0:
        return None
    if len(item.text) > MAX_ITEM_CHARS or "\n" in item.text or "\r" in item.text:
        return None
    start = doc.offset_at(line, where.start.character, encoding)
    end = doc.offset_at(line, where.end.character, encoding)
    cursor = doc.offset_at(line, position.character, encoding)
    return (start, end) if start <= cursor <= end else None


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


async def _join_inflight(state: DocState, before: str, after: str,
                         kept_or_cancelled: Callable[[InFlight], None]) -> bool:
    """If the model is already writing exactly what the user just typed, wait for it
    instead of superseding it: a fast typist would otherwise cancel every suggestion
    before it is finished. Returns whether it waited. A wait that is cancelled
    ($/cancelRequest) leaves the job to `kept_or_cancelled`."""
    inflight = state.inflight
    if inflight is None or not inflight.joinable(before, after):
        return False
    assert inflight.job is not None
    try:
        # Shielded: cancelling this wait must not cancel the job's future, which the
        # request that started it, and later keys, wait for too.
        await asyncio.shield(asyncio.wrap_future(inflight.job.future))
    except asyncio.CancelledError:
        kept_or_cancelled(inflight)
        raise
    except Exception:  # noqa: BLE001  (the job's failure is its starter's to report)
        pass
    return True
