"""Next-edit suggestions (textDocument/copilotInlineEdit): *when* they are computed, the
answer kept per (file, version), and the edit the client gets.

With `nextEdit` "on", or "auto" (the default) once the client has asked for a next edit (a
client that never asks, as most inline-completion clients, costs nothing), an edit schedules
one after a pause (`nextEditDelayMs`) and an accepted suggestion (inline or next edit) one at
once. It runs as idle work on the worker (a keystroke's suggestion preempts it at once, and any edit
of the file cancels it): never per keystroke.
The answer is kept for the file's version and the window it covers; a request finds it ready,
joins the one running, or starts one; an answer for another version never answers.
Our own clients are told when an edit is ready (NEXT_EDIT_READY_METHOD).
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote

from lsprotocol import types

from lsp_complete.documents import Document
from lsp_complete.engine.base import CancelToken
from lsp_complete.jobkey import JobKey
from lsp_complete.nextedit.diff import Replacement
from lsp_complete.nextedit.prompt import Window, fit_window, original_window, window_lines
from lsp_complete.nextedit.relevance import recent_words
from lsp_complete.nextedit.repeat import repeat_edit
from lsp_complete.pipeline import Completer, NextEditAnswer
from lsp_complete.scheduler import Job
from lsp_complete.server.files import OpenFiles
from lsp_complete.server.next_edit_model import NextEditModel
from lsp_complete.server.open_file import OpenFile
from lsp_complete.server.protocol import ACCEPT_COMMAND, NEXT_EDIT_READY_METHOD
from lsp_complete.server.shared import Shared
from lsp_complete.server.state import DocState

log = logging.getLogger(__name__)

# A request whose work was preempted (not by an edit) starts it again, this many times at most.
_ATTEMPTS = 3
_EDITS_KEPT = 256  # edits sent whose show / accept is still counted
_OUTCOME_COUNTERS = {"edit": "nextEditEdits", "same": "nextEditNothing",
                     "rejected": "nextEditRejected", "unrelated": "nextEditUnrelated"}


@dataclass
class Pending:
    """A next edit computed (or being computed) for one version of one open file."""

    doc: Document
    state: DocState
    version: int
    first_line: int  # the window it rewrites
    last_line: int
    job: Job | None  # None: answered without the model (the last edit made again)
    task: asyncio.Future[dict[str, Any] | None] | None = None
    # The work was stopped before it answered (a keystroke's suggestion preempts idle work):
    # the next request here starts it again.
    stopped: bool = False

    def answers(self, doc: Document, line: int) -> bool:
        return (self.doc is doc and self.version == doc.version and not self.stopped
                and self.first_line <= line <= self.last_line)


class NextEdits:
    def __init__(self, shared: Shared, files: OpenFiles) -> None:
        self._files = files
        self._next_model = NextEditModel(shared)
        self._telemetry = shared.telemetry
        self._scheduler = shared.scheduler
        self._settings = shared.settings
        self._client = shared.client
        self._pending: dict[str, Pending] = {}
        self._timers: dict[str, asyncio.TimerHandle] = {}
        self._sent: OrderedDict[str, dict[str, Any]] = OrderedDict()  # id -> {uri, shown}
        files.when_closed(self._drop)
        # Work ahead of a request only for a client that asks: the others would pay a
        # rewrite of the window (seconds of CPU) after every pause, for nothing.
        self._asked = False

    def close(self) -> None:
        """The session ends: the model only next edits used is freed."""
        self._next_model.close()

    def model_status(self) -> dict[str, object] | None:
        return self._next_model.describe()

    # ------------------------------------------------------------------ triggers

    def edited(self, uri: str) -> None:
        """didChange: what was computed or running for the old text is moot; plan the next
        edit after the pause."""
        self._drop(uri)
        if self._ahead():
            self._after(uri, self._settings().next_edit_delay_ms / 1000)

    def accepted(self, suggestion_id: str, uri: str | None) -> None:
        """The accept command of a suggestion (ours or inline): count it, and compute the next
        edit now (the client applied the edit before running the command)."""
        sent = self._sent.pop(suggestion_id, None)
        if sent is not None:
            self._telemetry.counters["nextEditAccepted"] += 1
            uri = sent["uri"]
        if uri is not None and uri in self._files and self._ahead():
            self._after(uri, 0)

    def shown(self, item: Any) -> None:
        """didShowInlineEdit: count an edit we sent the first time it is shown."""
        suggestion_id = _edit_id(item)
        sent = self._sent.get(suggestion_id) if suggestion_id else None
        if sent is None:
            log.debug("didShowInlineEdit for an edit not sent here: %.200r", item)
            return
        if not sent["shown"]:
            sent["shown"] = True
            self._telemetry.counters["nextEditShown"] += 1

    def _ahead(self) -> bool:
        """Next edits are computed before they are asked for."""
        wanted = self._settings().next_edit
        return wanted == "on" or (wanted == "auto" and self._asked)

    def _after(self, uri: str, delay_s: float) -> None:
        old = self._timers.pop(uri, None)
        if old is not None:
            old.cancel()
        file = self._files.get(uri)
        if file is None:
            return
        ticket = self._files.ticket(file)

        def fire() -> None:
            self._timers.pop(uri, None)
            if not ticket.same_text():
                return
            doc, state = file.doc, file.state
            cursor = state.edit_cursor if state.edit_cursor is not None else state.last_cursor
            if cursor is None or cursor > len(doc.text):
                return
            line = doc.line_of(cursor)
            pending = self._pending.get(uri)
            if pending is None or not pending.answers(doc, line):  # (a request started it)
                self._start(uri, file, line, cursor, asked=False)

        self._timers[uri] = asyncio.get_running_loop().call_later(delay_s, fire)

    def _drop(self, uri: str) -> None:
        timer = self._timers.pop(uri, None)
        if timer is not None:
            timer.cancel()
        pending = self._pending.pop(uri, None)
        if pending is not None and pending.job is not None:
            self._scheduler.cancel(pending.job)

    # ------------------------------------------------------------------ the request

    async def request(self, params: Any) -> dict[str, Any]:
        """textDocument/copilotInlineEdit: {edits: [the edit]} or {edits: []}."""
        uri = _get(_get(params, "textDocument"), "uri")
        version = _get(_get(params, "textDocument"), "version")
        position = _get(params, "position")
        line, character = _get(position, "line"), _get(position, "character")
        if not isinstance(uri, str) or not _is_int(line) or not _is_int(character) or (
                version is not None and not _is_int(version)):
            self._client.tell(f"lsp-complete: malformed textDocument/copilotInlineEdit params: "
                              f"{str(params)[:200]}", types.MessageType.Warning,
                              once_key="next-edit-params")
            return {"edits": []}
        self._asked = True
        file = self._files.get(uri)
        if file is None:
            self._files.tell_not_open(uri, "a next-edit request")
            return {"edits": []}
        if self._settings().next_edit == "off":
            return {"edits": []}
        doc = file.doc
        if version is not None and version != doc.version:
            return {"edits": []}  # asked for another text than the one here
        if not 0 <= line < doc.line_count or character < 0:
            return {"edits": []}
        asked = self._files.ticket(file)
        for _ in range(_ATTEMPTS):
            pending = self._pending.get(uri)
            if pending is None or not pending.answers(doc, line):
                cursor = doc.offset_at(line, character, self._client.encoding)
                pending = self._start(uri, file, line, cursor, asked=True)
                if pending is None and await self._next_model.loaded() and asked.same_text():
                    pending = self._start(uri, file, line, cursor, asked=True)  # by that model
                if pending is None:
                    break
            assert pending.task is not None
            # ($/cancelRequest cancels this wait, not the work: another request may want it.)
            edit = await asyncio.shield(pending.task)
            if not asked.same_text():
                break  # the text changed meanwhile: whatever came is stale
            if edit is not None:
                return {"edits": [edit]}
            if not pending.stopped:
                break  # nothing to change
            # A suggestion request preempted the work while this text stayed: again.
        return {"edits": []}

    # ------------------------------------------------------------------ computing

    def _start(self, uri: str, file: OpenFile, line: int, cursor: int,
               asked: bool) -> Pending | None:
        """The next edit for `line`: the last edit made again where it fits next, at once;
        else, when the recent edits changed a word that a model edit could follow from, the
        model's rewrite of the window around `line`, in idle time (`asked`: a client waits for
        it, before the other idle work queued)."""
        doc, state = file.doc, file.state
        if state.disabled_reason or not self._settings().language_enabled(doc.setting_keys):
            return None
        newest = state.history.last
        repeated = repeat_edit(doc.text, newest, line) if newest is not None else None
        if repeated is not None:
            return self._repeated(uri, file, repeated)
        if not any(recent_words(state.history.blocks)):
            return None  # no model edit could follow from the recent edits: not asked
        completer = self._next_model.completer()
        if completer is None or not self._supported(completer):
            return None
        template = completer.spec.next_edit
        assert template is not None  # (_supported)
        bounds = fit_window(*window_lines(doc.line_count, line, template), line,
                            lambda n: _width(doc.line_range(n)))
        if bounds is None:
            log.debug("next edit: line %d of %s is too long to rewrite", line, uri)
            return None
        first, last = bounds
        start = doc.line_range(first)[0]
        end = doc.line_range(last)[1]
        lines = [doc.line_text(n) for n in range(first, last + 1)]
        history = list(state.history.blocks)
        window = Window(path=_path(uri), language_id=doc.language_name, text=doc.text[start:end],
                        first_line=first, cursor=min(max(cursor - start, 0), end - start),
                        original=original_window(lines, first, state.history.last))
        self._drop(uri)
        job = self._scheduler.submit_background(
            JobKey.next_edit(uri), lambda cancel: _guarded(completer, uri, window, history, cancel),
            first=asked)
        ticket = self._files.ticket(file)
        version = ticket.version
        encoding = self._client.encoding
        planned = time.perf_counter()

        pending = self._pending[uri] = Pending(doc, state, doc.version, first, last, job)

        async def answer() -> dict[str, Any] | None:
            result: NextEditAnswer | None = await asyncio.wrap_future(job.future)
            if result is None or result.outcome == "cancelled":
                pending.stopped = True
                return None
            self._telemetry.record_next_edit(uri, version, planned, result.outcome,
                                             result.result, result.prompt_tokens)
            counters = self._telemetry.counters
            counters["nextEditComputed"] += 1
            counters[_OUTCOME_COUNTERS.get(result.outcome, "nextEditErrors")] += 1
            # A failure told, or that the engine answers again (this may be the one path a
            # client asks it by: a next-edit-only client).
            self._client.tell_engine(result.error)
            rep = result.replacement
            if rep is None or not ticket.same_text():
                return None
            edit = self._edit(uri, doc, start + rep.start, start + rep.end, rep.text, encoding)
            self._client.notify(NEXT_EDIT_READY_METHOD,
                                {"textDocument": {"uri": uri, "version": version}})
            return edit

        pending.task = asyncio.get_running_loop().create_task(answer())
        return pending

    def _repeated(self, uri: str, file: OpenFile, rep: Replacement) -> Pending:
        """An answer made without the model: ready now, for any line of this version."""
        doc = file.doc
        self._drop(uri)
        self._telemetry.record_next_edit(uri, doc.version, time.perf_counter(), "repeat", None, 0)
        self._telemetry.counters["nextEditComputed"] += 1
        self._telemetry.counters["nextEditRepeated"] += 1
        edit = self._edit(uri, doc, rep.start, rep.end, rep.text, self._client.encoding)
        done: asyncio.Future[dict[str, Any] | None] = asyncio.get_running_loop().create_future()
        done.set_result(edit)
        pending = self._pending[uri] = Pending(doc, file.state, doc.version, 0,
                                               max(doc.line_count - 1, 0), None, done)
        self._client.notify(NEXT_EDIT_READY_METHOD,
                            {"textDocument": {"uri": uri, "version": doc.version}})
        return pending

    def _supported(self, completer: Completer) -> bool:
        """The model that makes next edits has a next-edit format; else tell once why not."""
        if completer.spec.next_edit is None:
            self._client.tell(
                f"lsp-complete: the model {completer.spec.name!r} has no next-edit format in "
                "models.toml: no next-edit suggestions (nextEditModel may name one that has)",
                types.MessageType.Info, once_key=f"next-edit-format:{completer.spec.name}")
            return False
        return True

    def _edit(self, uri: str, doc: Document, start: int, end: int, text: str,
              encoding: str) -> dict[str, Any]:
        suggestion_id = uuid.uuid4().hex[:12]
        self._sent[suggestion_id] = {"uri": uri, "shown": False}
        if len(self._sent) > _EDITS_KEPT:
            self._sent.popitem(last=False)
        (sl, sc), (el, ec) = doc.position_at(start, encoding), doc.position_at(end, encoding)
        return {
            "text": text,
            "range": {"start": {"line": sl, "character": sc},
                      "end": {"line": el, "character": ec}},
            "textDocument": {"uri": uri, "version": doc.version},
            "command": {"title": "Accept next edit", "command": ACCEPT_COMMAND,
                        "arguments": [{"id": suggestion_id}]},
        }


def _guarded(completer: Any, uri: str, window: Window, history: list[Any],
             cancel: CancelToken) -> NextEditAnswer | None:
    """On the worker; a failure is logged and answers nothing (the worker survives)."""
    try:
        answer: NextEditAnswer = completer.next_edit(window, history, cancel)
        return answer
    except Exception:
        log.exception("next edit failed for %s", uri)
        return None


def _path(uri: str) -> str:
    return unquote(uri.rsplit("/", 1)[-1]) or "file"


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _get(value: Any, name: str) -> Any:
    """A field of custom params: a dict or a pygls Object (a namedtuple)."""
    if isinstance(value, dict):
        return value.get(name)
    return getattr(value, name, None) if hasattr(value, "_asdict") else None


def _edit_id(item: Any) -> str | None:
    """The id in an edit's accept command ({item: {command: {arguments: [{id}]}}})."""
    arguments = _get(_get(item, "command"), "arguments")
    if isinstance(arguments, list | tuple) and arguments:
        found = _get(arguments[0], "id")
        return found if isinstance(found, str) else None
    return None


def _width(span: tuple[int, int]) -> int:
    return span[1] - span[0]
