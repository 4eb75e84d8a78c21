"""`CompletionServer`: the language server, which builds its parts and hands each the
collaborators it uses (never the server itself).

The parts, one job each: `EditorClient` (what is said to and asked of the editor),
`ModelHost` (model lifecycle), `RepoHost` (workspace roots and repository blocks),
`OpenFiles` (documents, their state and idle work), `Suggester` (suggestion requests),
`NextEdits` (next-edit suggestions),
`Telemetry` (counters and records). The server itself holds the settings (parts read the
current ones through a callable), the worker thread (scheduler) and typing-ahead.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Callable
from typing import Any

from lsprotocol import types
from pygls.lsp.server import LanguageServer

from lsp_complete import __version__
from lsp_complete.config import (
    EngineSettings,
    Settings,
    api_key_env_refusal,
    combined_problems,
    parse_settings,
)
from lsp_complete.scheduler import Scheduler
from lsp_complete.server.client import EditorClient
from lsp_complete.server.completion import Suggester
from lsp_complete.server.files import OpenFiles
from lsp_complete.server.model import ModelHost
from lsp_complete.server.next_edit import NextEdits
from lsp_complete.server.open_file import OpenFileRegistry
from lsp_complete.server.protocol import SECTION, Protocol
from lsp_complete.server.repo import RepoHost
from lsp_complete.server.shared import Shared
from lsp_complete.server.status import server_status
from lsp_complete.server.telemetry import RECENT_LIMIT, Telemetry
from lsp_complete.typeahead import TypeAhead

log = logging.getLogger(__name__)

_CONFIGURATION_TIMEOUT_S = 5  # a client that does not answer must not block loading


class CompletionServer(LanguageServer):
    protocol: Protocol  # made from protocol_cls

    def __init__(self, model: str | None = None, api_key_env: str | None = None,
                 scheduler: Scheduler | None = None) -> None:
        super().__init__(
            "lsp-complete",
            __version__,
            protocol_cls=Protocol,
            text_document_sync_kind=types.TextDocumentSyncKind.Incremental,
        )
        settings, _ = parse_settings(None)
        if model:
            settings = dataclasses.replace(settings, model=model)
        if api_key_env:
            settings = dataclasses.replace(settings, api_key_env=api_key_env)
        self.launch_settings = self.settings = settings
        self.cli_model = model
        self.cli_api_key_env = api_key_env  # settings may name this variable too
        # Told once the editor is initialized: why the shared daemon was wanted and not used
        # (each window then loads its own model).
        self.launch_notice: str | None = None
        # The daemon passes one session's view of its shared worker (daemon/server.py).
        self.scheduler = scheduler or Scheduler()
        self.typeahead = TypeAhead()
        self.telemetry = Telemetry()
        self.client = EditorClient(self)
        current: Callable[[], Settings] = lambda: self.settings  # noqa: E731
        self.model = ModelHost(self.scheduler, current, self.client)
        self.model.on_file_changed = self._model_file_changed
        self._reload: asyncio.Task[None] | None = None
        # The open files: one OpenFile per document, the registry's (the event loop's).
        registry = OpenFileRegistry(self.typeahead)
        # Workspace roots and each file's repository context.
        self.repo = RepoHost(current, self.client, registry)
        # What the parts serving files all use.
        shared = Shared(current, self.client, self.scheduler, self.model, self.telemetry)
        self.files = OpenFiles(shared, registry, self.repo, self._idle_error)
        self.protocol.lost_change = self.files.lost_change
        self.protocol.lost_open = self.files.lost_open
        self.suggester = Suggester(shared, self.files, self.repo, self.typeahead)
        self.next_edits = NextEdits(shared, self.files)
        self._engine_loaded: EngineSettings | None = None  # what the loaded model was made for
        self._loading = False  # load_model's loop is running
        self._model_wanted = False  # `initialized` asked for the model: settings reload it
        # A daemon session's: the daemon's part of `lsp-complete/status` (None in process).
        self.daemon_status: Callable[[], dict[str, Any]] | None = None

    def _idle_error(self, message: str) -> None:
        """Idle work's engine failure: told once, as a request's would be."""
        self.telemetry.last_error = message
        self.client.tell_engine(message)

    def status(self, recent: int = RECENT_LIMIT) -> dict[str, Any]:
        """The `lsp-complete/status` answer."""
        return server_status(
            model=self.model, files=self.files, repo=self.repo, telemetry=self.telemetry,
            typeahead=self.typeahead, scheduler=self.scheduler, encoding=self.client.encoding,
            daemon_status=self.daemon_status, next_edit_model=self.next_edits.model_status(),
            recent=recent,
        )

    # ------------------------------------------------------------------ model and settings

    async def load_model(self) -> None:
        """Load the engine the settings ask for, until it is the one they ask for *now*:
        settings changed while a load runs (a burst of model switches) are loaded when it
        ends, the last of them winning. One load at a time: a call meanwhile returns at once."""
        self._model_wanted = True
        if self._loading:
            return  # the running load reads the settings again when it ends
        self._loading = True
        try:
            while True:
                settings = self.settings
                wanted = settings.engine_settings
                if self.model.ready and wanted == self._engine_loaded:
                    return  # e.g. a new TCP session asking for the engine it has
                if await self.model.load(settings):
                    self._engine_loaded = wanted
                    self.files.restore_all()
                elif self.settings.engine_settings == wanted:
                    return  # failed and told; the next change of settings tries again
        finally:
            self._loading = False

    def _model_file_changed(self, why: str) -> None:
        """The model file was rewritten or replaced on disk: load it again (a file still being
        copied fails to load, and its next change is tried again)."""
        self.client.tell(f"lsp-complete: {why}; loading it again", types.MessageType.Warning,
                         once_key=f"model-file:{why}")
        self._engine_loaded = None  # what is loaded is no longer what the settings name
        if self._reload is None or self._reload.done():
            self._reload = asyncio.ensure_future(self.load_model())

    async def apply_settings(self, options: Any) -> None:
        new, problems = parse_settings(options, self.settings)
        if self.cli_model and not (isinstance(options, dict) and options.get("model")):
            new = dataclasses.replace(new, model=self.cli_model)
        if refusal := api_key_env_refusal(new.api_key_env, self.cli_api_key_env):
            problems.append(refusal)
            new = dataclasses.replace(new, api_key_env=self.settings.api_key_env)
        for problem in combined_problems(problems, SECTION):  # a popup per change, not key
            self.client.tell(f"lsp-complete: {problem}", types.MessageType.Warning)
        reload = new.engine_settings != self.settings.engine_settings
        if new != self.settings:
            # Remembered suggestions were shaped by the old settings (a range past the
            # closers, a block, a length): served now, they could double a `)`. Work planned
            # before now remembers nothing either (its `TypeAhead.generation` is past).
            self.typeahead.clear()
        self.settings = new
        self.model.use_settings(new)
        if reload and self._model_wanted:  # before `initialized`, its load reads them
            await self.load_model()

    async def pull_configuration(self) -> None:
        """Ask the client for our settings section (workspace/configuration) and apply it."""
        try:
            options = await self.client.configuration(SECTION, _CONFIGURATION_TIMEOUT_S)
        except Exception as exc:
            log.debug("workspace/configuration failed: %s", exc)
            return
        if options:
            await self.apply_settings(options)

    # ------------------------------------------------------------------ sessions

    def end_session(self) -> None:
        """The client went away without `exit` (TCP mode keeps serving): forget the files it
        opened (their caches are saved) and the settings it sent, so that the next client
        starts as on a fresh launch and sees nothing of this one."""
        self.files.close_all()
        self.next_edits.close()
        self.settings = self.launch_settings
        self.model.use_settings(self.settings)
        self.client.forget_told()
