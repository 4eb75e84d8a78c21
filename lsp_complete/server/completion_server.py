"""`CompletionServer`: the parts of the language server and what they share.

The parts, one job each: `ModelHost` (model lifecycle), `OpenFiles` (documents, their state
and idle work), `Suggester` (suggestion requests), `Telemetry` (counters and the status).
The server itself holds the settings, the worker thread (scheduler) and typing-ahead, knows
the client's capabilities, and tells the user what went wrong.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
from collections.abc import Callable
from typing import Any

from lsprotocol import types
from pygls.lsp.server import LanguageServer

from lsp_complete import __version__
from lsp_complete.config import EngineSettings, api_key_env_refusal, parse_settings
from lsp_complete.scheduler import Scheduler
from lsp_complete.server.completion import Suggester
from lsp_complete.server.files import OpenFiles
from lsp_complete.server.model import ModelHost
from lsp_complete.server.protocol import SECTION, Protocol
from lsp_complete.server.repo import RepoHost
from lsp_complete.server.status import Telemetry
from lsp_complete.typeahead import TypeAhead

log = logging.getLogger(__name__)

_ENCODINGS = {"utf-8": "utf-8", "utf-16": "utf-16", "utf-32": "utf-32"}
_CONFIGURATION_TIMEOUT_S = 5  # a client that does not answer must not block loading


class CompletionServer(LanguageServer):
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
        # The daemon passes one session's view of its shared worker (daemon/server.py).
        self.scheduler = scheduler or Scheduler()
        self.typeahead = TypeAhead()
        self.telemetry = Telemetry()
        self.model = ModelHost(self)
        self.files = OpenFiles(self)
        self.repo = RepoHost(self)  # workspace roots and each file's repository context
        self.suggester = Suggester(self)
        self._told: set[str] = set()
        self._engine_loaded: EngineSettings | None = None  # what the loaded model was made for
        # A daemon session's: the daemon's part of `lsp-complete/status` (None in process).
        self.daemon_status: Callable[[], dict[str, Any]] | None = None

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

    def tell_failure(self, key: str, message: str | None) -> None:
        """A failure that may last (a remote engine down): tell `message` once, with no log
        line per keystroke, until a call with None says it is over."""
        if message is None:
            self._told.discard(key)
        elif key not in self._told:
            self.tell(message, once_key=key)

    def log_to_client(self, message: str, kind: types.MessageType = types.MessageType.Info) -> None:
        with contextlib.suppress(Exception):
            self.window_log_message(types.LogMessageParams(type=kind, message=message))

    # ------------------------------------------------------------------ the client

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

    # ------------------------------------------------------------------ model and settings

    async def load_model(self) -> None:
        wanted = self.settings.engine_settings
        if self.model.ready and wanted == self._engine_loaded:
            return  # a new TCP session asking for the engine it has: nothing to load again
        if await self.model.load():
            self._engine_loaded = wanted
            self.files.warm_all()

    async def apply_settings(self, options: Any) -> None:
        new, problems = parse_settings(options, self.settings)
        if self.cli_model and not (isinstance(options, dict) and options.get("model")):
            new = dataclasses.replace(new, model=self.cli_model)
        if refusal := api_key_env_refusal(new.api_key_env, self.cli_api_key_env):
            problems.append(refusal)
            new = dataclasses.replace(new, api_key_env=self.settings.api_key_env)
        for problem in problems:
            self.tell(f"lsp-complete: {problem}", types.MessageType.Warning)
        reload = new.engine_settings != self.settings.engine_settings
        self.settings = new
        self.model.use_settings(new)
        if reload and self.model.state != "loading":
            await self.load_model()

    async def pull_configuration(self) -> None:
        """Ask the client for our settings section (workspace/configuration) and apply it."""
        caps = self.client_capabilities
        if not (caps and caps.workspace and caps.workspace.configuration):
            return
        try:
            result = await asyncio.wait_for(
                self.workspace_configuration_async(
                    types.ConfigurationParams(items=[types.ConfigurationItem(section=SECTION)])
                ),
                _CONFIGURATION_TIMEOUT_S,
            )
        except Exception as exc:
            log.debug("workspace/configuration failed: %s", exc)
            return
        if result and result[0]:
            await self.apply_settings(result[0])

    # ------------------------------------------------------------------ sessions

    def end_session(self) -> None:
        """The client went away without `exit` (TCP mode keeps serving): forget the files it
        opened (their caches are saved) and the settings it sent, so that the next client
        starts as on a fresh launch and sees nothing of this one."""
        for uri in list(self.files.documents):
            self.files.close(uri)
        self.settings = self.launch_settings
        self.model.use_settings(self.settings)
        self._told.clear()
