"""The language server: one small handler per LSP feature; the work happens elsewhere.

The event loop owns the documents and never runs inference: completions are prepared here
(context from the syntax tree) and computed on the scheduler's worker thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import time
import uuid
from collections import deque
from dataclasses import dataclass
from typing import Any

from lsprotocol import types
from pygls.lsp.server import LanguageServer
from pygls.protocol import LanguageServerProtocol, lsp_method

from lsp_complete import __version__
from lsp_complete.config import parse_settings
from lsp_complete.context import ContextLimits, build_context, choose_anchor
from lsp_complete.documents import Document
from lsp_complete.engine.base import CancelToken
from lsp_complete.pipeline import Completer, Completion, load_completer, prepare
from lsp_complete.scheduler import Job, Scheduler
from lsp_complete.typeahead import TypeAhead

log = logging.getLogger(__name__)

STATUS_METHOD = "lsp-complete/status"
# Client -> server notification {textDocument: {uri}, position}: the cursor moved there (a
# click, a jump, another editor tab). Idle time then prepares the prompt for that spot.
CURSOR_METHOD = "lsp-complete/didMoveCursor"
ACCEPT_COMMAND = "lsp-complete.accepted"
RECENT_LIMIT = 2000
IDLE_PERSIST_S = 5.0
SECTION = "lspComplete"  # the settings section in workspace/configuration
_WORD = re.compile(r"[A-Za-z0-9_$]+$")
_ENCODINGS = {"utf-8": "utf-8", "utf-16": "utf-16", "utf-32": "utf-32"}
_RELOAD_FIELDS = (
    "model", "threads", "context_size", "gpu_layers", "slots", "engine", "engine_url",
    "api_key_env", "remote_model", "request_timeout_ms", "connect_timeout_ms", "remote_slots",
    "remote_healing",
)


class Protocol(LanguageServerProtocol):
    """pygls' protocol with two changes: prefer UTF-8 positions when the client offers them
    (no UTF-16 arithmetic), and keep documents only in our own store (pygls would keep a second
    copy and re-split every line on each keystroke)."""

    @lsp_method(types.INITIALIZE)
    def lsp_initialize(self, params: types.InitializeParams):
        general = params.capabilities.general
        if general is not None and general.position_encodings:
            offered = list(general.position_encodings)
            if types.PositionEncodingKind.Utf8 in offered:
                offered.remove(types.PositionEncodingKind.Utf8)
                general.position_encodings = [types.PositionEncodingKind.Utf8, *offered]
        return (yield from super().lsp_initialize(params))

    @lsp_method(types.TEXT_DOCUMENT_DID_OPEN)
    def lsp_text_document__did_open(self, params: types.DidOpenTextDocumentParams):
        if (handler := self.fm.features.get(types.TEXT_DOCUMENT_DID_OPEN)) is not None:
            yield handler, (params,), None

    @lsp_method(types.TEXT_DOCUMENT_DID_CHANGE)
    def lsp_text_document__did_change(self, params: types.DidChangeTextDocumentParams):
        if (handler := self.fm.features.get(types.TEXT_DOCUMENT_DID_CHANGE)) is not None:
            yield handler, (params,), None

    @lsp_method(types.TEXT_DOCUMENT_DID_CLOSE)
    def lsp_text_document__did_close(self, params: types.DidCloseTextDocumentParams):
        if (handler := self.fm.features.get(types.TEXT_DOCUMENT_DID_CLOSE)) is not None:
            yield handler, (params,), None


@dataclass
class InFlight:
    """The model computation running for a file, and what it has written so far."""

    before: str  # document text before / after the cursor it was asked for
    after: str
    job: Job | None = None
    partial: str = ""


@dataclass
class DocState:
    anchor: int | None = None
    last_cursor: int | None = None
    generation: int = 0  # bumped by every request and edit: stale idle work checks it
    disabled_reason: str = ""
    inflight: InFlight | None = None


@dataclass
class RequestRecord:
    uri: str
    version: int
    latency_ms: float
    source: str  # model | typeahead | superseded | empty | not-ready
    prompt_tokens: int = 0
    reused_tokens: int = 0
    encoded_tokens: int = 0
    generated_tokens: int = 0

    def as_json(self) -> dict[str, Any]:
        return {
            "uri": self.uri,
            "version": self.version,
            "latencyMs": round(self.latency_ms, 2),
            "source": self.source,
            "promptTokens": self.prompt_tokens,
            "reusedTokens": self.reused_tokens,
            "encodedTokens": self.encoded_tokens,
            "generatedTokens": self.generated_tokens,
        }


class CompletionServer(LanguageServer):
    def __init__(self, model: str | None = None) -> None:
        super().__init__(
            "lsp-complete",
            __version__,
            protocol_cls=Protocol,
            text_document_sync_kind=types.TextDocumentSyncKind.Incremental,
        )
        self.settings, _ = parse_settings(None)
        if model:
            self.settings.model = model
        self.cli_model = model
        self.limits = ContextLimits()
        self.documents: dict[str, Document] = {}
        self.states: dict[str, DocState] = {}
        self.scheduler = Scheduler()
        self.typeahead = TypeAhead()
        self.completer: Completer | None = None
        self.model_state = "loading"
        self.model_error = ""
        self.model_info: dict[str, Any] = {}
        self.recent: deque[RequestRecord] = deque(maxlen=RECENT_LIMIT)
        self.counters = {
            "shown": 0, "accepted": 0, "typeahead": 0, "joined": 0, "superseded": 0, "empty": 0,
            "cursorMoves": 0,
        }
        self._told: set[str] = set()
        self._suggestion_ids: dict[str, dict[str, Any]] = {}

    # ------------------------------------------------------------------ telling the user

    def tell(self, message: str, kind: types.MessageType = types.MessageType.Error,
             once_key: str | None = None) -> None:
        """Log, and show a person a message once per cause (a bad file must not spam)."""
        log.log(logging.ERROR if kind == types.MessageType.Error else logging.WARNING, message)
        key = once_key or message
        if key in self._told:
            return
        self._told.add(key)
        # Not connected yet (tests, CLI): the log has it.
        with contextlib.suppress(Exception):
            self.window_show_message(types.ShowMessageParams(type=kind, message=message))

    def log_to_client(self, message: str, kind: types.MessageType = types.MessageType.Info) -> None:
        with contextlib.suppress(Exception):
            self.window_log_message(types.LogMessageParams(type=kind, message=message))

    @property
    def client_has_inline_completion(self) -> bool:
        caps = self.client_capabilities
        return bool(caps and caps.text_document and caps.text_document.inline_completion)

    @property
    def encoding(self) -> str:
        try:
            encoding = self.workspace.position_encoding
        except RuntimeError:  # before initialize
            return "utf-16"
        return _ENCODINGS.get(getattr(encoding, "value", encoding), "utf-16")

    # ------------------------------------------------------------------ model lifecycle

    async def load_model(self) -> None:
        token = str(uuid.uuid4())
        progress = await self._progress_begin(token, "lsp-complete: loading model")
        self.model_state = "loading"
        settings = self.settings
        loop = asyncio.get_running_loop()
        try:
            completer, info, warnings = await loop.run_in_executor(
                None, lambda: self.scheduler.call("\0load", lambda _c: load_completer(settings))
            )
        except Exception as exc:
            self.model_state = "error"
            self.model_error = str(exc)
            self.tell(f"lsp-complete: {exc}", once_key=f"model:{settings.model}")
            self._progress_end(progress, token, "failed")
            return
        old, self.completer = self.completer, completer
        if old is not None:  # a reload: free the previous model on the worker that owns it
            self.scheduler.submit_background("\0unload", lambda _c: old.engine.close())
        self.model_info = info
        self.model_state = "ready"
        for warning in warnings:
            self.tell(f"lsp-complete: {warning}", types.MessageType.Warning)
        self.log_to_client(f"lsp-complete: model {info.get('name')} ready ({info.get('path')})")
        self._progress_end(progress, token, "ready")
        for uri in list(self.documents):
            self.schedule_warmup(uri)

    async def _progress_begin(self, token: str, title: str) -> bool:
        caps = self.client_capabilities
        if not (caps and caps.window and caps.window.work_done_progress):
            return False
        try:
            await self.work_done_progress.create_async(token)
            self.work_done_progress.begin(
                token, types.WorkDoneProgressBegin(title=title, cancellable=False)
            )
            return True
        except Exception as exc:
            log.debug("no progress reporting: %s", exc)
            return False

    def _progress_end(self, active: bool, token: str, message: str) -> None:
        if active:
            self.work_done_progress.end(token, types.WorkDoneProgressEnd(message=message))

    # ------------------------------------------------------------------ documents

    def open_document(self, item: types.TextDocumentItem) -> None:
        doc = Document(item.uri, item.language_id, item.version, item.text)
        self.documents[item.uri] = doc
        state = self.states[item.uri] = DocState()
        state.disabled_reason = self._refusal(doc)
        if state.disabled_reason:
            self.tell(
                f"lsp-complete: no completions for {_short(item.uri)}: {state.disabled_reason}",
                types.MessageType.Warning,
            )
            return
        self.schedule_warmup(item.uri)

    def _refusal(self, doc: Document) -> str:
        size = doc.byte_offset(len(doc.text))
        if size > self.settings.max_file_bytes:
            limit = self.settings.max_file_bytes // 1024
            return f"file is {size // 1024} KiB, over the {limit} KiB limit"
        if Document.is_binary(doc.text):
            return "file looks binary"
        return ""

    def change_document(self, params: types.DidChangeTextDocumentParams) -> None:
        doc = self.documents.get(params.text_document.uri)
        if doc is None:
            self.tell(
                f"lsp-complete: change for a document that was never opened: "
                f"{_short(params.text_document.uri)}",
                types.MessageType.Warning,
                once_key="change-unopened",
            )
            return
        state = self.states[doc.uri]
        state.generation += 1
        recheck = bool(state.disabled_reason)
        for change in params.content_changes:
            if isinstance(change, types.TextDocumentContentChangePartial):
                r = change.range
                rng = (r.start.line, r.start.character, r.end.line, r.end.character)
                start = doc.apply_change(change.text, rng, self.encoding)
                # A keystroke must not rescan the file: only big pastes are checked again.
                recheck = recheck or len(change.text) > 4096 or "\x00" in change.text
            else:
                start = doc.apply_change(change.text, None, self.encoding)
                recheck = True
            if state.anchor is not None and start < state.anchor:
                state.anchor = None  # the text before the anchor changed: re-anchor
        doc.version = params.text_document.version
        if recheck:
            state.disabled_reason = self._refusal(doc)

    def close_document(self, uri: str) -> None:
        self.documents.pop(uri, None)
        self.states.pop(uri, None)
        self.typeahead.forget(uri)
        completer = self.completer
        if completer is not None:
            def persist_and_free(_cancel: CancelToken) -> None:
                if self.settings.persist_cache:
                    completer.engine.persist(uri)
                if uri not in self.documents:  # not opened again meanwhile: free its cells
                    completer.engine.forget(uri)

            self.scheduler.submit_background(uri, persist_and_free)

    def schedule_warmup(self, uri: str) -> None:
        """Encode the head of a newly opened file while the worker is idle."""
        doc, completer = self.documents.get(uri), self.completer
        if doc is None or completer is None or self.states[uri].disabled_reason:
            return
        ctx = build_context(doc, 0, 0, self.limits)
        self.scheduler.submit_background(uri, lambda cancel: completer.warm_head(uri, ctx, cancel))

    def schedule_reanchor(self, uri: str) -> None:
        """In idle time, move the anchor to the cursor line and encode that prompt, so the next
        keystroke appends to a fresh, short middle."""
        loop = asyncio.get_running_loop()
        state = self.states.get(uri)
        if state is None:
            return
        generation = state.generation

        def fire() -> None:
            # Also when the anchor is already there: the file may have started with the cold
            # prompt, and this encodes the full context (a no-op when it is cached already).
            if state.last_cursor is not None:
                self.prepare_at(uri, state, state.last_cursor, generation)

        def persist() -> None:
            # Still idle a while later: save the file's KV sequence, so a crash or a kill
            # loses nothing (close and shutdown save too).
            completer = self.completer
            if completer is None or not self._current(uri, state, generation):
                return
            if self.settings.persist_cache:
                self.scheduler.submit_background(
                    f"\0persist:{uri}", lambda _c: completer.engine.persist(uri)
                )

        loop.call_later(self.settings.idle_reanchor_ms / 1000, fire)
        loop.call_later(IDLE_PERSIST_S, persist)

    def _current(self, uri: str, state: DocState, generation: int) -> bool:
        """Idle work is still wanted: the same edit state of the same open document (not a
        later edit, and not the file closed and opened again, whose cache it must not touch)."""
        return self.states.get(uri) is state and state.generation == generation

    def prepare_at(self, uri: str, state: DocState, cursor: int, generation: int) -> None:
        """Queue idle work that encodes the prompt for `cursor`, anchored at its line, so
        the next keystroke there only encodes what it typed."""
        doc, completer = self.documents.get(uri), self.completer
        if doc is None or completer is None or not self._current(uri, state, generation):
            return
        if cursor > len(doc.text):
            return
        prepared = prepare(doc, cursor, None, self.settings, self.limits)

        def warm(cancel: CancelToken) -> None:
            if not self._current(uri, state, generation):
                return
            completer.warm_for(prepared, cancel)
            if not cancel.cancelled and self._current(uri, state, generation):
                state.anchor = prepared.ctx.anchor

        self.scheduler.submit_background(uri, warm)

    def cursor_moved(self, uri: str, line: int, character: int) -> None:
        """The client says the cursor moved (lsp-complete/didMoveCursor). Unless the file's
        prompt is anchored at that line already, prepare the prompt anchored there while the
        user gets ready to type: the first keystroke of a new spot then costs what any other
        keystroke does, and its middle starts short."""
        doc, state = self.documents.get(uri), self.states.get(uri)
        if doc is None or state is None or self.completer is None:
            return
        if self.model_state != "ready" or state.disabled_reason:
            return
        if not self.settings.language_enabled(doc.language_id):
            return
        if not (0 <= line < doc.line_count and character >= 0):
            return
        cursor = doc.offset_at(line, character, self.encoding)
        if choose_anchor(doc, cursor, None, self.limits) == state.anchor:
            return  # typing on the line the prompt is anchored at: nothing new to prepare
        self.counters["cursorMoves"] += 1
        state.generation += 1  # idle work planned for the old spot is moot
        state.last_cursor = cursor
        self.prepare_at(uri, state, cursor, state.generation)

    # ------------------------------------------------------------------ completions

    async def suggest(self, uri: str, position: types.Position) -> tuple[str, int] | None:
        """The text to insert at `position` and the cursor offset, or None."""
        started = time.perf_counter()
        doc = self.documents.get(uri)
        state = self.states.get(uri)
        if doc is None or state is None:
            return None
        version = doc.version
        if state.disabled_reason or not self.settings.language_enabled(doc.language_id):
            return None
        if position.line < 0 or position.character < 0 or position.line >= doc.line_count:
            return None
        cursor = doc.offset_at(position.line, position.character, self.encoding)
        state.generation += 1
        state.last_cursor = cursor
        before, after = doc.text[:cursor], doc.text[cursor:]
        hit = self.typeahead.lookup(uri, before, after)
        if hit is not None:
            self.scheduler.drop(uri)  # an older keystroke's computation is now pointless
            self.counters["typeahead"] += 1
            self._record(uri, version, started, "typeahead")
            return hit, cursor
        completer = self.completer
        if completer is None or self.model_state != "ready":
            self._record(uri, version, started, "not-ready")
            return None
        if await self._join_inflight(state, before, after):
            if doc.version != version:
                self._record(uri, version, started, "superseded")
                return None
            hit = self.typeahead.lookup(uri, before, after)
            if hit is not None:
                self.counters["joined"] += 1
                self._record(uri, version, started, "typeahead")
                return hit, cursor
        if self.settings.debounce_ms:
            generation = state.generation
            await asyncio.sleep(self.settings.debounce_ms / 1000)
            if state.generation != generation:
                self._record(uri, version, started, "superseded")
                return None
        prepared = prepare(doc, cursor, state.anchor, self.settings, self.limits)
        state.anchor = prepared.ctx.anchor
        inflight = InFlight(before=before, after=after)

        def run(cancel: CancelToken) -> Completion:
            def progress(text: str) -> None:
                inflight.partial = text

            completion = completer.run(prepared, cancel, progress)
            if completion.text and not cancel.cancelled:
                # Remembered here, on the worker, so that every keystroke waiting on this
                # job (see _join_inflight) finds it the moment the job ends.
                self.typeahead.remember(uri, before, after, completion.text)
            return completion

        job = inflight.job = self.scheduler.submit(uri, run)
        state.inflight = inflight
        try:
            completion: Completion | None = await asyncio.wrap_future(job.future)
        except asyncio.CancelledError:  # $/cancelRequest
            self.scheduler.cancel(job)
            self._record(uri, version, started, "cancelled")
            raise
        if completer.last_error:  # a remote engine failed: say so once, until it recovers
            if "engine-error" not in self._told:  # (tell() would log every keystroke)
                self.tell(f"lsp-complete: {completer.last_error}", once_key="engine-error")
        elif completion is not None:
            self._told.discard("engine-error")
        if completion is None or job.cancel.cancelled or doc.version != version:
            # Superseded, or the text changed while computing: the answer would be stale.
            self.counters["superseded"] += 1
            self._record(uri, version, started, "superseded")
            return None
        source = "model" if completion.text else "empty"
        self._record(uri, version, started, source, completion)
        self.schedule_reanchor(uri)
        if not completion.text:
            self.counters["empty"] += 1
            return None
        return completion.text, cursor

    async def _join_inflight(self, state: DocState, before: str, after: str) -> bool:
        """If the model is already writing exactly what the user just typed, wait for it
        instead of superseding it: a fast typist would otherwise cancel every suggestion
        before it is finished. Returns whether it waited."""
        inflight = state.inflight
        if inflight is None or inflight.job is None or inflight.job.future.done():
            return False
        if inflight.after != after or not before.startswith(inflight.before):
            return False
        typed = before[len(inflight.before) :]
        if not typed or not inflight.partial.startswith(typed):
            return False
        with contextlib.suppress(Exception):
            await asyncio.wrap_future(inflight.job.future)
        return True

    def _record(self, uri: str, version: int, started: float, source: str,
                completion: Completion | None = None) -> None:
        record = RequestRecord(uri, version, (time.perf_counter() - started) * 1000, source)
        if completion is not None:
            record.prompt_tokens = completion.prompt_tokens
            record.reused_tokens = completion.result.reused_tokens
            record.encoded_tokens = completion.result.encoded_tokens
            record.generated_tokens = completion.result.generated_tokens
        self.recent.append(record)

    def make_item_parts(self, uri: str, cursor: int, text: str) -> tuple[str, int, str]:
        """Replace the partly typed word (the spec's preferred form): returns (insertText,
        start offset of the replaced range, suggestion id)."""
        doc = self.documents[uri]
        line_start = doc.line_start(cursor)
        word = _WORD.search(doc.text[line_start:cursor])
        start = cursor - len(word.group(0)) if word else cursor
        suggestion_id = uuid.uuid4().hex[:12]
        self._suggestion_ids[suggestion_id] = {"uri": uri, "text": text}
        if len(self._suggestion_ids) > 256:
            self._suggestion_ids.pop(next(iter(self._suggestion_ids)))
        self.counters["shown"] += 1
        return doc.text[start:cursor] + text, start, suggestion_id

    def accepted(self, args: Any) -> None:
        suggestion = self._suggestion_ids.pop(str(_arg(args, "id") or ""), None)
        if suggestion is not None:
            self.counters["accepted"] += 1

    # ------------------------------------------------------------------ status

    def status(self, recent: int = RECENT_LIMIT) -> dict[str, Any]:
        completer = self.completer
        engine = completer.engine if completer else None
        described = engine.describe() if engine else None
        latencies = sorted(r.latency_ms for r in self.recent if r.source in ("model", "typeahead"))
        return {
            "version": __version__,
            "model": {
                **self.model_info,
                "state": self.model_state,
                "error": self.model_error,
                "device": described.get("device") if described else None,
            },
            "engine": described,
            "engineCounters": vars(engine.counters) if engine else None,
            "scheduler": {"idle": self.scheduler.idle, **vars(self.scheduler.counters)},
            "counters": self.counters,
            "typeahead": dict(self.typeahead.stats),
            "latency": {
                "p50": _percentile(latencies, 50),
                "p95": _percentile(latencies, 95),
                "count": len(latencies),
            },
            "memory": {"rssMiB": _rss_mib()},
            # Lists, not objects keyed by URI: clients map objects to records with field names.
            "documents": [
                {
                    "uri": uri,
                    "version": doc.version,
                    "language": doc.language_id,
                    "cachedTokens": len(engine.cached_tokens(uri)) if engine else 0,
                    "disabled": self.states[uri].disabled_reason,
                }
                for uri, doc in self.documents.items()
            ],
            "positionEncoding": self.encoding,
            "recent": [r.as_json() for r in list(self.recent)[-recent:]] if recent > 0 else [],
        }

    # ------------------------------------------------------------------ configuration

    async def apply_settings(self, options: Any) -> None:
        new, problems = parse_settings(options, self.settings)
        if self.cli_model and not (isinstance(options, dict) and options.get("model")):
            new.model = self.cli_model
        for problem in problems:
            self.tell(f"lsp-complete: {problem}", types.MessageType.Warning)
        reload = any(getattr(new, f) != getattr(self.settings, f) for f in _RELOAD_FIELDS)
        self.settings = new
        if self.completer is not None:
            self.completer.settings = new
        if reload and self.model_state != "loading":
            await self.load_model()

    async def pull_configuration(self) -> None:
        caps = self.client_capabilities
        if not (caps and caps.workspace and caps.workspace.configuration):
            return
        try:
            result = await asyncio.wait_for(
                self.workspace_configuration_async(
                    types.ConfigurationParams(items=[types.ConfigurationItem(section=SECTION)])
                ),
                5,
            )
        except Exception as exc:  # a client that does not answer must not block loading
            log.debug("workspace/configuration failed: %s", exc)
            return
        if result and result[0]:
            await self.apply_settings(result[0])

    def shutdown_work(self) -> None:
        completer = self.completer
        if completer is not None and self.settings.persist_cache:
            try:
                self.scheduler.call("\0persist", lambda _c: completer.engine.persist(), timeout=30)
            except Exception as exc:
                log.warning("could not persist KV caches: %s", exc)


def _arg(args: Any, name: str) -> Any:
    """A named value from command arguments or custom params: a dict, a pygls Object
    (a namedtuple), or a list holding one of those."""
    is_record = hasattr(args, "_asdict")
    first = args[0] if isinstance(args, list | tuple) and args and not is_record else args
    if isinstance(first, dict):
        return first.get(name)
    return getattr(first, name, None)


def _short(uri: str) -> str:
    return uri.rsplit("/", 1)[-1]


def _percentile(values: list[float], pct: float) -> float | None:
    if not values:
        return None
    index = min(len(values) - 1, max(0, round(pct / 100 * (len(values) - 1))))
    return round(values[index], 2)


def _rss_mib() -> float | None:
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return round(int(line.split()[1]) / 1024, 1)
    except OSError:
        pass
    return None


def create_server(model: str | None = None) -> CompletionServer:
    server = CompletionServer(model)

    @server.feature(types.INITIALIZE)
    async def initialize(ls: CompletionServer, params: types.InitializeParams) -> None:
        await ls.apply_settings(params.initialization_options)

    @server.feature(types.INITIALIZED)
    async def initialized(ls: CompletionServer, _params: types.InitializedParams) -> None:
        # Settings the editor keeps (VS Code's settings.json...) before the model loads.
        await ls.pull_configuration()
        await ls.load_model()

    @server.feature(types.SHUTDOWN)
    def shutdown(ls: CompletionServer, _params: Any) -> None:
        ls.shutdown_work()

    @server.feature(types.TEXT_DOCUMENT_DID_OPEN)
    def did_open(ls: CompletionServer, params: types.DidOpenTextDocumentParams) -> None:
        ls.open_document(params.text_document)

    @server.feature(types.TEXT_DOCUMENT_DID_CHANGE)
    def did_change(ls: CompletionServer, params: types.DidChangeTextDocumentParams) -> None:
        ls.change_document(params)

    @server.feature(types.TEXT_DOCUMENT_DID_CLOSE)
    def did_close(ls: CompletionServer, params: types.DidCloseTextDocumentParams) -> None:
        ls.close_document(params.text_document.uri)

    @server.feature(types.TEXT_DOCUMENT_INLINE_COMPLETION)
    async def inline_completion(
        ls: CompletionServer, params: types.InlineCompletionParams
    ) -> types.InlineCompletionList | None:
        uri = params.text_document.uri
        found = await ls.suggest(uri, params.position)
        if found is None or uri not in ls.documents:
            return types.InlineCompletionList(items=[])
        text, cursor = found
        insert, start, sid = ls.make_item_parts(uri, cursor, text)
        doc = ls.documents[uri]
        start_line, start_char = doc.position_at(start, ls.encoding)
        item = types.InlineCompletionItem(
            insert_text=insert,
            range=types.Range(
                start=types.Position(line=start_line, character=start_char),
                end=params.position,
            ),
            command=types.Command(
                title="accept", command=ACCEPT_COMMAND, arguments=[{"uri": uri, "id": sid}]
            ),
        )
        return types.InlineCompletionList(items=[item])

    @server.feature(
        types.TEXT_DOCUMENT_COMPLETION,
        types.CompletionOptions(trigger_characters=[".", "(", " "], resolve_provider=False),
    )
    async def completion(
        ls: CompletionServer, params: types.CompletionParams
    ) -> types.CompletionList:
        uri = params.text_document.uri
        if ls.client_has_inline_completion:
            # The client shows inline suggestions: running the model for its completion
            # menu as well would double the work of every keystroke.
            return types.CompletionList(is_incomplete=False, items=[])
        found = await ls.suggest(uri, params.position)
        if found is None or uri not in ls.documents:
            return types.CompletionList(is_incomplete=True, items=[])
        text, cursor = found
        insert, start, sid = ls.make_item_parts(uri, cursor, text)
        doc = ls.documents[uri]
        start_line, start_char = doc.position_at(start, ls.encoding)
        first_line = text.split("\n", 1)[0]
        item = types.CompletionItem(
            label=(insert.split("\n", 1)[0] or first_line)[:60] or "…",
            kind=types.CompletionItemKind.Snippet,
            detail="lsp-complete (AI)",
            documentation=insert,
            insert_text_format=types.InsertTextFormat.PlainText,
            text_edit=types.TextEdit(
                range=types.Range(
                    start=types.Position(line=start_line, character=start_char),
                    end=params.position,
                ),
                new_text=insert,
            ),
            filter_text=doc.text[start:cursor],
            sort_text="0",
            preselect=True,
            command=types.Command(
                title="accept", command=ACCEPT_COMMAND, arguments=[{"uri": uri, "id": sid}]
            ),
        )
        # Incomplete: the client must ask again as the user types (the answer changes).
        return types.CompletionList(is_incomplete=True, items=[item])

    @server.command(ACCEPT_COMMAND)
    def accepted(ls: CompletionServer, args: Any) -> None:
        ls.accepted(args)

    @server.feature(CURSOR_METHOD)
    def did_move_cursor(ls: CompletionServer, params: Any) -> None:
        uri = _arg(_arg(params, "textDocument"), "uri")
        position = _arg(params, "position")
        line, character = _arg(position, "line"), _arg(position, "character")
        if not isinstance(uri, str) or not isinstance(line, int) or not isinstance(character, int):
            log.warning("ignoring malformed %s: %r", CURSOR_METHOD, params)
            return
        ls.cursor_moved(uri, line, character)

    @server.feature(STATUS_METHOD)
    def status(ls: CompletionServer, params: Any) -> dict[str, Any]:
        recent = _arg(params, "recent")
        return ls.status(recent if isinstance(recent, int) else RECENT_LIMIT)

    @server.feature(types.WORKSPACE_DID_CHANGE_CONFIGURATION)
    async def did_change_configuration(
        ls: CompletionServer, params: types.DidChangeConfigurationParams
    ) -> None:
        options = params.settings
        if isinstance(options, dict) and SECTION in options:
            options = options[SECTION]
        if options is None:  # "something changed, ask me": pull the section
            await ls.pull_configuration()
            return
        await ls.apply_settings(options)

    return server


def run_server(tcp_port: int | None = None, model: str | None = None) -> int:
    server = create_server(model)
    try:
        if tcp_port is not None:
            server.start_tcp("127.0.0.1", tcp_port)
        else:
            server.start_io()
    finally:
        server.scheduler.stop()
    return 0
