"""The editor as the server's parts see it: what they tell the user, what the client can do
(capabilities, position encoding), and what they ask of it (progress, registrations). The
parts get this, not the whole server. Call it on the event loop."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
from typing import Any

from lsprotocol import types
from pygls.lsp.server import LanguageServer

from lsp_complete.server.protocol import shows_inline_completion

log = logging.getLogger(__name__)

_ENCODINGS = {"utf-8": "utf-8", "utf-16": "utf-16", "utf-32": "utf-32"}

# The engine's failures, one cause at a time, and the word that they are over (for every path
# that asks the engine: suggestions, the completion menu, next edits).
ENGINE_FAILURE = "engine-error"
ENGINE_BACK = "lsp-complete: the engine answers again; suggestions are back"


def _cause(message: str) -> str:
    """A failure's message without its numbers: a wait or a status code that changes from
    one request to the next is the same cause, not a new one to tell."""
    return re.sub(r"\d+", "#", message)


class EditorClient:
    def __init__(self, lsp: LanguageServer) -> None:
        self._lsp = lsp
        self._told: set[str] = set()
        # A lasting failure's key -> the causes told since it began (each told once).
        self._failing: dict[str, set[str]] = {}

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
            self._lsp.window_show_message(types.ShowMessageParams(type=kind, message=message))

    def tell_failure(self, key: str, message: str | None, over: str | None = None) -> None:
        """A failure that may last (a remote engine down): tell `message` once, with no log
        line per keystroke, until a call with None says it is over; then `over`, if given, is
        told once (the person told of the failure would not otherwise learn of its end).
        A different cause meanwhile (down, then answering nonsense) is told too, once."""
        if message is None:
            if self._failing.pop(key, None) and over:
                log.info("%s", over)
                with contextlib.suppress(Exception):
                    self._lsp.window_show_message(
                        types.ShowMessageParams(type=types.MessageType.Info, message=over))
            return
        causes = self._failing.setdefault(key, set())
        if _cause(message) in causes:
            return
        causes.add(_cause(message))
        self._told.discard(key)
        self.tell(message, once_key=key)

    def tell_engine(self, error: str | None) -> None:
        """What a request that asked the engine learnt: its failure, or that it answered."""
        self.tell_failure(ENGINE_FAILURE, f"lsp-complete: {error}" if error else None,
                          over=ENGINE_BACK)

    def log(self, message: str, kind: types.MessageType = types.MessageType.Info) -> None:
        with contextlib.suppress(Exception):
            self._lsp.window_log_message(types.LogMessageParams(type=kind, message=message))

    def notify(self, method: str, params: Any) -> None:
        """A notification of ours (clients that do not know it ignore it)."""
        with contextlib.suppress(Exception):  # not connected (tests, CLI), or gone
            self._lsp.protocol.notify(method, params)

    def forget_told(self, prefix: str = "") -> None:
        """Every message (a new session), or those whose cause starts with `prefix`, may be
        told again."""
        self._told = {key for key in self._told if prefix and not key.startswith(prefix)}
        self._failing = {key: causes for key, causes in self._failing.items()
                         if prefix and not key.startswith(prefix)}

    # ------------------------------------------------------------------ what it can do

    @property
    def capabilities(self) -> types.ClientCapabilities | None:
        return self._lsp.client_capabilities

    @property
    def has_inline_completion(self) -> bool:
        return shows_inline_completion(self.capabilities)

    @property
    def encoding(self) -> str:
        """The negotiated position encoding ("utf-16", the protocol's default, before
        initialize)."""
        try:
            encoding = self._lsp.workspace.position_encoding
        except RuntimeError:  # before initialize
            return "utf-16"
        return _ENCODINGS.get(str(getattr(encoding, "value", encoding)), "utf-16")

    # ------------------------------------------------------------------ what we ask of it

    async def register(self, params: types.RegistrationParams, timeout: float) -> None:
        await asyncio.wait_for(self._lsp.client_register_capability_async(params), timeout)

    async def configuration(self, section: str, timeout: float) -> Any:
        """Our settings section (workspace/configuration), or None."""
        caps = self.capabilities
        if not (caps and caps.workspace and caps.workspace.configuration):
            return None
        result = await asyncio.wait_for(
            self._lsp.workspace_configuration_async(
                types.ConfigurationParams(items=[types.ConfigurationItem(section=section)])
            ),
            timeout,
        )
        return result[0] if result else None

    async def progress_begin(self, token: str, title: str, timeout: float) -> bool:
        """Show progress where the client can and agrees within `timeout`; whether it is
        shown."""
        caps = self.capabilities
        if not (caps and caps.window and caps.window.work_done_progress):
            return False
        try:
            await asyncio.wait_for(self._lsp.work_done_progress.create_async(token), timeout)
            self._lsp.work_done_progress.begin(
                token, types.WorkDoneProgressBegin(title=title, cancellable=False)
            )
            return True
        except Exception as exc:
            log.debug("no progress reporting: %s", exc)
            return False

    def progress_end(self, token: str, message: str) -> None:
        self._lsp.work_done_progress.end(token, types.WorkDoneProgressEnd(message=message))
