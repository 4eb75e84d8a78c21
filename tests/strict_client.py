"""A client that follows the specification and nothing more, as LSP4IJ and Neovim 0.12's
built-in inline completion do: it asks only for what the server advertised in `initialize`,
its inline requests are all Automatic (as you type), and it sends none of lsp-complete's own
messages (`lsp-complete/didMoveCursor`, `lsp-complete/status`, our commands). It does not know
when the model is ready: like a person typing, it asks again until a suggestion comes.

Built on `raw_lsp.RawServer` (bytes as sent, answers as received). Asking for something the
server did not advertise fails the test (`NotAdvertised`).
"""

from __future__ import annotations

import time
from typing import Any

from tests.raw_lsp import RawServer

ASK_AGAIN_S = 0.25  # a typist's pause between two requests while waiting for a suggestion


class NotAdvertised(AssertionError):
    """The test asked the strict client for something the server did not advertise."""


def capabilities(inline: bool) -> dict[str, Any]:
    """What such a client declares: text sync, completion, inline completion when it shows
    it; no workspace/configuration, no lsp-complete extension."""
    text_document: dict[str, Any] = {
        "synchronization": {"didSave": True, "dynamicRegistration": False},
        "completion": {"completionItem": {"snippetSupport": False}},
    }
    if inline:
        text_document["inlineCompletion"] = {"dynamicRegistration": False}
    return {"textDocument": text_document, "window": {"workDoneProgress": True},
            "workspace": {"workspaceFolders": True}}


class StrictClient:
    def __init__(self, server: RawServer, inline: bool) -> None:
        self.server = server
        self.inline_capable = inline
        self.capabilities: dict[str, Any] = {}  # the server's, from initialize

    # ------------------------------------------------------------------ lifecycle

    def initialize(self, options: dict[str, Any] | None = None,
                   folders: list[str] | None = None, timeout: float = 60) -> dict[str, Any]:
        """initialize + initialized; the server's capabilities."""
        answer = self.server.call("initialize", {
            "processId": None,
            "capabilities": capabilities(self.inline_capable),
            "initializationOptions": {"threads": 1, "contextSize": 4096, **(options or {})},
            "workspaceFolders": [{"uri": u, "name": u.rsplit("/", 1)[-1]}
                                 for u in folders or []] or None,
        }, timeout)
        assert "result" in answer, answer
        self.capabilities = answer["result"]["capabilities"]
        self._notify("initialized", {})
        return self.capabilities

    def shutdown(self, timeout: float = 30) -> None:
        self._request("shutdown", None, timeout)
        self._notify("exit", None)

    # ------------------------------------------------------------------ documents

    def open(self, uri: str, text: str, language: str = "python") -> None:
        self._notify("textDocument/didOpen", {"textDocument": {
            "uri": uri, "languageId": language, "version": 1, "text": text}})

    def insert(self, uri: str, version: int, line: int, character: int, text: str) -> None:
        position = {"line": line, "character": character}
        self._notify("textDocument/didChange", {
            "textDocument": {"uri": uri, "version": version},
            "contentChanges": [{"range": {"start": position, "end": position}, "text": text}]})

    # ------------------------------------------------------------------ requests

    def inline(self, uri: str, line: int, character: int) -> list[dict[str, Any]]:
        """An Automatic inline completion request: its items."""
        result = self._request("textDocument/inlineCompletion", {
            "textDocument": {"uri": uri}, "position": {"line": line, "character": character},
            "context": {"triggerKind": 2}})  # InlineCompletionTriggerKind.Automatic
        return (result.get("items") if isinstance(result, dict) else result) or []

    def complete(self, uri: str, line: int, character: int) -> list[dict[str, Any]]:
        """A completion request as typing a word asks it (Invoked): its items."""
        result = self._request("textDocument/completion", {
            "textDocument": {"uri": uri}, "position": {"line": line, "character": character},
            "context": {"triggerKind": 1}})
        return (result.get("items") if isinstance(result, dict) else result) or []

    def highlight(self, uri: str, line: int, character: int) -> Any:
        """The occurrences of the symbol where the cursor rests, as many editors ask every
        server that offers them once the cursor stops: the answer as it came."""
        return self._request("textDocument/documentHighlight", {
            "textDocument": {"uri": uri}, "position": {"line": line, "character": character}})

    def until_items(self, ask: Any, timeout: float = 90) -> list[dict[str, Any]]:
        """Ask again (`ask()`) until an answer has items, as a person typing would."""
        deadline = time.monotonic() + timeout
        while True:
            items = ask()
            if items or time.monotonic() > deadline:
                return items
            time.sleep(ASK_AGAIN_S)

    # ------------------------------------------------------------------ the rules

    def _request(self, method: str, params: Any, timeout: float = 30) -> Any:
        self._check(method)
        answer = self.server.call(method, params, timeout)
        assert "error" not in answer, answer
        return answer.get("result")

    def _notify(self, method: str, params: Any) -> None:
        self._check(method)
        self.server.notify(method, params)

    def _check(self, method: str) -> None:
        if method.startswith("lsp-complete"):
            raise NotAdvertised(f"{method} is lsp-complete's own: a standard client never sends it")
        if method in ("initialize", "initialized", "shutdown", "exit", "$/cancelRequest",
                      "workspace/didChangeConfiguration"):
            return
        sync = self.capabilities.get("textDocumentSync") or {}
        if isinstance(sync, int):
            sync = {"openClose": sync > 0, "change": sync}
        needs = {
            "textDocument/didOpen": sync.get("openClose"),
            "textDocument/didClose": sync.get("openClose"),
            "textDocument/didChange": sync.get("change"),
            "textDocument/inlineCompletion": "inlineCompletionProvider" in self.capabilities,
            "textDocument/completion": "completionProvider" in self.capabilities,
            "textDocument/documentHighlight": self.capabilities.get("documentHighlightProvider"),
        }
        if not needs.get(method):
            raise NotAdvertised(f"the server did not advertise {method}: "
                                f"{sorted(self.capabilities)}")
