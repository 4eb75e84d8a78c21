"""Repository context in the server: the workspace roots, each open file's active repository
block, and keeping the workspace current (didChangeWorkspaceFolders, didSave,
didChangeWatchedFiles; the open files are then prepared again by `files.OpenFiles`).

A file's block (context/repo.py) is the first prompt segment, so changing it re-encodes the
whole prompt. Keystrokes never compute it: a suggestion uses the file's *active* block, read on
the worker when its job starts (`active_for`), so it always matches what idle work left
cached. Idle work computes a candidate block off the event loop (`block`); whether and when it
becomes active is the prompt-cache policy's call (`pipeline.planner`), applied here on the
worker (`apply`). The block itself stays the very same object while the file's imports and
the imported files' versions are unchanged.

Threads: `active` and `tokens` are the worker's (the status reads them for display); the rest
is the event loop's, except `workspace`, which is thread-safe, and `_buffer`, which the worker
calls and which only reads references the loop replaces whole.
"""

from __future__ import annotations

import logging
import os
import threading
from collections import deque
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from lsprotocol import types

from lsp_complete.config import Settings
from lsp_complete.context.limits import RepoContext
from lsp_complete.context.repo import RepoRequest, build_repo_context, repo_request
from lsp_complete.context.similar import OpenText
from lsp_complete.documents import Document
from lsp_complete.engine.base import CancelToken
from lsp_complete.pipeline import Switch
from lsp_complete.server.client import EditorClient
from lsp_complete.workspace import Workspace, path_of_uri

log = logging.getLogger(__name__)

RECENT_EDITS = 32  # edit locations remembered for similar-code windows
WATCHER_ID = "lsp-complete-watched-files"
REGISTER_TIMEOUT_S = 5  # a client that does not answer must not hold up loading the model


class RepoHost:
    """`documents`: the open documents (OpenFiles'), read for their text and URIs."""

    def __init__(self, settings: Callable[[], Settings], client: EditorClient,
                 documents: Mapping[str, Document]) -> None:
        self._settings = settings
        self._client = client
        self._documents = documents
        self.workspace = Workspace()
        self.workspace.buffers = self._buffer
        self.active: dict[str, RepoContext] = {}
        self.tokens: dict[str, int] = {}  # prompt tokens of each active block
        self._recent: deque[tuple[str, int]] = deque(maxlen=RECENT_EDITS)
        self._real: dict[str, Path | None] = {}
        # `active` and `tokens` are written by the worker (apply) and the loop (closed, a
        # new root): one at a time, so a close never lands between apply's check and write.
        self._lock = threading.Lock()

    @property
    def budget(self) -> int:
        return self._settings().repo_context_tokens

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
        with self._lock:
            self.active.clear()
            self.tokens.clear()

    def folders_changed(self, params: types.DidChangeWorkspaceFoldersParams) -> None:
        """The roots changed: the open files' blocks may too (prepare them again)."""
        for folder in params.event.removed or []:
            if (path := path_of_uri(folder.uri)) is not None:
                self.workspace.remove_root(path)
        for folder in params.event.added or []:
            if (path := path_of_uri(folder.uri)) is not None:
                self.workspace.add_root(path)

    async def register_watcher(self) -> None:
        """Ask the client to report file changes (when it can register that dynamically):
        a deleted, renamed or regenerated file must leave the repository blocks."""
        caps = self._client.capabilities
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
            await self._client.register(params, REGISTER_TIMEOUT_S)
        except Exception as exc:  # a client that refuses (or never answers) still sends didSave
            log.debug("client/registerCapability failed: %s", exc)

    def saved(self, uri: str) -> bool:
        """A file was saved; whether the other open files' blocks may have changed."""
        if (path := path_of_uri(uri)) is None:
            return False
        self.workspace.invalidate(path)
        return True

    def files_changed(self, params: types.DidChangeWatchedFilesParams) -> None:
        """Files changed on disk: the open files' blocks may have changed."""
        for change in params.changes:
            self._real.pop(change.uri, None)
            if (path := path_of_uri(change.uri)) is not None:
                self.workspace.invalidate(path)

    def edited(self, params: types.DidChangeTextDocumentParams) -> None:
        """Remember where the user edits (windows there are similar-code candidates)."""
        for change in params.content_changes:
            if isinstance(change, types.TextDocumentContentChangePartial):
                self._recent.appendleft((params.text_document.uri, change.range.start.line))

    def closed(self, uri: str) -> None:
        """Call after the document has left `documents`."""
        with self._lock:
            self.active.pop(uri, None)
            self.tokens.pop(uri, None)
        self._real.pop(uri, None)

    def _buffer(self, path: Path) -> tuple[int, str] | None:
        """The open document at `path`, for the workspace (its text wins over the disk's).
        Runs on the worker: it only reads references the loop replaces whole."""
        for uri, doc in list(self._documents.items()):
            if self._real_path(uri) == path:
                return doc.version, doc.text
        return None

    def _real_path(self, uri: str) -> Path | None:
        """The resolved path of an open document (None: it names no file; `path_of_uri`
        has already refused what no file-system call could take, e.g. a NUL byte)."""
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
                  for uri in self._documents if uri != doc.uri]
        return repo_request(doc, cursor, self.budget, others)

    def active_for(self, key: str) -> RepoContext | None:
        """The file's active block, the one its prompts use now (call on the worker)."""
        return self.active.get(key) if self.budget > 0 else None

    # ------------------------------------------------------------------ idle work (worker)

    def block(self, request: RepoRequest | None, key: str,
              cancel: CancelToken) -> RepoContext | None:
        """The file's block as the workspace is now (the active one when that still holds,
        the very same object)."""
        if request is None:
            return None
        try:
            return build_repo_context(request, self.workspace, self.active.get(key),
                                      lambda: cancel.cancelled)
        except (OSError, ValueError, RecursionError) as exc:  # a file changed under us
            log.debug("repository context for %s failed: %s", key, exc)
            return self.active.get(key)

    def apply(self, key: str, switch: Switch | None, doc: Document) -> None:
        """Make a block active for `doc`, as the prompt-cache policy decided (not when it was
        closed meanwhile, or closed and opened again: the block was chosen for its old text)."""
        if switch is None:
            return
        with self._lock:
            if self._documents.get(key) is not doc:
                return
            if switch.repo is None:
                self.active.pop(key, None)
                self.tokens.pop(key, None)
            else:
                self.active[key] = switch.repo
                self.tokens[key] = switch.tokens

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
