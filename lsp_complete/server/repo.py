"""Repository context in the server: the workspace roots, each open file's repository block,
and keeping both current (didChangeWorkspaceFolders, didSave, didChangeWatchedFiles).

The KV discipline lives here. A file's block (context/repo.py) is the first prompt segment,
so changing it re-encodes the whole prompt; therefore:

* keystrokes never compute it: a suggestion uses the file's *active* block, read on the worker
  thread when its job starts (`current`), so it always matches what idle work left cached;
* idle work (a newly opened file's warm-up, re-anchoring, preparing a spot) computes the block
  off the event loop, and when it differs from the active one, encodes the prompt with it in
  the file's aside sequence; the new block becomes active only once a keystroke with it costs
  no more than one with the old (`_settle`). The block itself stays the very same object while
  the file's imports and the imported files' versions are unchanged.

Only the worker thread reads or changes the active blocks (status reads them for display).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import os
from collections import deque
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lsprotocol import types

from lsp_complete.context import CodeContext
from lsp_complete.context.limits import RepoContext
from lsp_complete.context.repo import OpenText, RepoRequest, build_repo_context, repo_request
from lsp_complete.documents import Document
from lsp_complete.engine.base import CancelToken, EngineError
from lsp_complete.pipeline import FULL_PROMPT_SLACK, Completer, Prepared
from lsp_complete.workspace import Workspace, path_of_uri

if TYPE_CHECKING:
    from lsp_complete.server.completion_server import CompletionServer

log = logging.getLogger(__name__)

RECENT_EDITS = 32  # edit locations remembered for similar-code windows
WATCHER_ID = "lsp-complete-watched-files"
REGISTER_TIMEOUT_S = 5  # a client that does not answer must not hold up loading the model


def with_repo(prepared: Prepared, repo: RepoContext | None) -> Prepared:
    """The same suggestion with another repository block. The small prompt for a file with a
    cold cache goes without it: the first suggestion in a newly opened file must not wait for
    hundreds of tokens of other files; the full prompt, built aside in idle time, has them."""
    if prepared.ctx.repo is repo:
        return prepared
    return dataclasses.replace(prepared, ctx=dataclasses.replace(prepared.ctx, repo=repo))


class RepoHost:
    def __init__(self, ls: CompletionServer) -> None:
        self._ls = ls
        self.workspace = Workspace()
        self.workspace.buffers = self._buffer
        self.active: dict[str, RepoContext] = {}
        self.tokens: dict[str, int] = {}  # prompt tokens of each active block
        self._recent: deque[tuple[str, int]] = deque(maxlen=RECENT_EDITS)
        self._real: dict[str, Path | None] = {}

    @property
    def budget(self) -> int:
        return self._ls.settings.repo_context_tokens

    # ------------------------------------------------------------------ workspace

    def initialize(self, params: types.InitializeParams) -> None:
        """Roots from initialize: workspaceFolders, else rootUri, else rootPath."""
        uris = [f.uri for f in params.workspace_folders or []]
        if not uris and params.root_uri:
            uris = [params.root_uri]
        roots = [p for p in (path_of_uri(u) for u in uris) if p is not None]
        if not roots and params.root_path:
            roots = [Path(params.root_path)]
        self.workspace.set_roots(roots)
        self.active.clear()
        self.tokens.clear()

    def folders_changed(self, params: types.DidChangeWorkspaceFoldersParams) -> None:
        for folder in params.event.removed or []:
            if (path := path_of_uri(folder.uri)) is not None:
                self.workspace.remove_root(path)
        for folder in params.event.added or []:
            if (path := path_of_uri(folder.uri)) is not None:
                self.workspace.add_root(path)
        self.refresh_all()

    async def register_watcher(self) -> None:
        """Ask the client to report file changes (when it can register that dynamically):
        a deleted, renamed or regenerated file must leave the repository blocks."""
        caps = self._ls.client_capabilities
        watched = caps.workspace.did_change_watched_files if caps and caps.workspace else None
        if watched is None or not watched.dynamic_registration or not self.workspace.roots:
            return
        options = types.DidChangeWatchedFilesRegistrationOptions(
            watchers=[types.FileSystemWatcher(glob_pattern="**/*")]
        )
        params = types.RegistrationParams(registrations=[types.Registration(
            id=WATCHER_ID, method=types.WORKSPACE_DID_CHANGE_WATCHED_FILES,
            register_options=options,
        )])
        try:
            await asyncio.wait_for(self._ls.client_register_capability_async(params),
                                   REGISTER_TIMEOUT_S)
        except Exception as exc:  # a client that refuses (or never answers) still sends didSave
            log.debug("client/registerCapability failed: %s", exc)

    def saved(self, uri: str) -> None:
        if (path := path_of_uri(uri)) is not None:
            self.workspace.invalidate(path)
            self.refresh_all(skip=uri)

    def files_changed(self, params: types.DidChangeWatchedFilesParams) -> None:
        for change in params.changes:
            self._real.pop(change.uri, None)
            if (path := path_of_uri(change.uri)) is not None:
                self.workspace.invalidate(path)
        self.refresh_all()

    def refresh_all(self, skip: str | None = None) -> None:
        """Idle work for every open file: its block may name files that changed."""
        files = self._ls.files
        for uri, state in list(files.states.items()):
            if uri != skip and not state.disabled_reason:
                cursor = state.last_cursor if state.last_cursor is not None else 0
                files.prepare_at(uri, state, cursor, state.generation)

    def edited(self, params: types.DidChangeTextDocumentParams) -> None:
        """Remember where the user edits (windows there are similar-code candidates)."""
        for change in params.content_changes:
            if isinstance(change, types.TextDocumentContentChangePartial):
                self._recent.appendleft((params.text_document.uri, change.range.start.line))

    def closed(self, uri: str) -> None:
        self.active.pop(uri, None)
        self.tokens.pop(uri, None)
        self._real.pop(uri, None)

    def _buffer(self, path: Path) -> tuple[int, str] | None:
        """The open document at `path`, for the workspace (its text wins over the disk's).
        Runs on the worker: it only reads references the loop replaces whole."""
        for uri, doc in list(self._ls.files.documents.items()):
            if self._real_path(uri) == path:
                return doc.version, doc.text
        return None

    def _real_path(self, uri: str) -> Path | None:
        if uri not in self._real:
            path = path_of_uri(uri)
            self._real[uri] = Path(os.path.realpath(path)) if path is not None else None
        return self._real[uri]

    # ------------------------------------------------------------------ requests

    def request(self, doc: Document, cursor: int) -> RepoRequest | None:
        """What computing the file's block needs, captured on the loop (None: none wanted)."""
        if self.budget <= 0 or not self.workspace.roots:
            return None
        edits: dict[str, list[int]] = {}
        for uri, line in self._recent:
            edits.setdefault(uri, []).append(line)
        others = [OpenText(uri, tuple(edits.get(uri, ())))
                  for uri in self._ls.files.documents if uri != doc.uri]
        return repo_request(doc, cursor, self.budget, others)

    def current(self, prepared: Prepared) -> Prepared:
        """A suggestion's context with the file's active block (call on the worker)."""
        repo = self.active.get(prepared.key) if self.budget > 0 else None
        return with_repo(prepared, repo)

    def current_ctx(self, key: str, ctx: CodeContext) -> CodeContext:
        repo = self.active.get(key) if self.budget > 0 else None
        return ctx if ctx.repo is repo else dataclasses.replace(ctx, repo=repo)

    # ------------------------------------------------------------------ idle work (worker)

    def _block(self, request: RepoRequest | None, key: str,
               cancel: CancelToken) -> RepoContext | None:
        if request is None:
            return None
        try:
            return build_repo_context(request, self.workspace, self.active.get(key),
                                      lambda: cancel.cancelled)
        except (OSError, ValueError, RecursionError) as exc:  # a file changed under us
            log.debug("repository context for %s failed: %s", key, exc)
            return self.active.get(key)

    def refresh(self, prepared: Prepared, request: RepoRequest | None, completer: Completer,
                cancel: CancelToken) -> None:
        """After the usual idle warm-up of a spot: bring the file's block up to date, encoding
        the prompt with a new block aside and switching once that is cheaper."""
        key = prepared.key
        new = self._block(request, key, cancel)
        old = self.active.get(key)
        if new is old or cancel.cancelled:
            return
        target = with_repo(prepared, new)
        try:
            # The full-context prompt only (not first the smaller one, as for a cold file):
            # it is built aside, and an interrupted build resumes where it stopped.
            full = completer.build_prompt(target.ctx)
            completer.engine.warm(key, full.segments, cancel)
        except EngineError as exc:  # idle work: the next suggestion reports it
            completer.last_error = str(exc)
            return
        self._settle(key, with_repo(prepared, old), target, completer)

    def refresh_head(self, ctx: CodeContext, key: str, request: RepoRequest | None,
                     completer: Completer, cancel: CancelToken) -> None:
        """A newly opened file, once its head is encoded: the same with its block."""
        new = self._block(request, key, cancel)
        old = self.active.get(key)
        if new is old or new is None or cancel.cancelled:
            return
        new_ctx = dataclasses.replace(ctx, repo=new)
        try:
            prompt = completer.build_prompt(new_ctx)
            completer.engine.warm(key, prompt.segments[: prompt.head_segments], cancel)
        except EngineError as exc:  # idle work: the next suggestion reports it
            completer.last_error = str(exc)
            return
        old_head = completer.build_prompt(dataclasses.replace(ctx, repo=old)).head_tokens
        self._switch(key, new, prompt.repo_tokens, self._cost(completer, key, old_head),
                     self._cost(completer, key, prompt.head_tokens))

    def _settle(self, key: str, old: Prepared, new: Prepared, completer: Completer) -> None:
        """Make `new`'s block active if a keystroke with it encodes no more than with `old`'s
        (give or take a few tokens)."""
        prompts = [completer.choose_prompt(p) for p in (old, new)]
        costs = [self._cost(completer, key, p.tokens) for p in prompts]
        self._switch(key, new.ctx.repo, prompts[1].repo_tokens, costs[0], costs[1])

    def _switch(self, key: str, new: RepoContext | None, tokens: int, old_cost: int | None,
                new_cost: int | None) -> None:
        if key not in self._ls.files.states:
            return  # closed meanwhile
        if new_cost is None or old_cost is None or new_cost <= old_cost + FULL_PROMPT_SLACK:
            if new is None:
                self.active.pop(key, None)
                self.tokens.pop(key, None)
            else:
                self.active[key] = new
                self.tokens[key] = tokens

    @staticmethod
    def _cost(completer: Completer, key: str, tokens: list[int]) -> int | None:
        cached = completer.engine.cached_prefix(key, tokens)
        return None if cached is None else len(tokens) - cached

    # ------------------------------------------------------------------ status

    def describe(self, uri: str) -> dict[str, Any] | None:
        """The file's repository context in use, for lsp-complete/status (None: none)."""
        repo = self.active.get(uri)
        if repo is None:
            return None
        return {
            "name": repo.name,
            "path": repo.current_path,
            "tokens": self.tokens.get(uri, 0),
            "sources": sorted({f.source for f in repo.files}),
            "files": [{"path": f.path, "source": f.source, "chars": len(f.text)}
                      for f in repo.files],
        }

    def summary(self) -> dict[str, Any]:
        return {
            "roots": [str(r) for r in self.workspace.roots],
            "budgetTokens": self.budget,
            "cachedEntries": self.workspace.cache_size,
        }
