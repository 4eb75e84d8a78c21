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

Threads: the active block lives on the file (`OpenFile.repo`): the worker's, written under the
registry's lock while the file is open, so a closed file keeps none (the status reads it for
display). The rest is the event loop's, except `workspace`, which is thread-safe, and
`_buffer`, which the worker calls and which only reads references the loop replaces whole.
"""

from __future__ import annotations

import logging
import os
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Any

from lsprotocol import types

from lsp_complete.config import Settings
from lsp_complete.context.limits import RepoContext
from lsp_complete.context.repo import (
    LINE_BLOCK_TOKENS,
    RepoRequest,
    build_repo_context,
    line_definitions,
    repo_request,
)
from lsp_complete.context.similar import OpenText
from lsp_complete.documents import Document
from lsp_complete.engine.base import CancelToken
from lsp_complete.pipeline import Switch, wants_line_block
from lsp_complete.server.client import EditorClient
from lsp_complete.server.open_file import OpenFile, OpenFileRegistry
from lsp_complete.workspace import Workspace, path_of_uri

log = logging.getLogger(__name__)

RECENT_EDITS = 32  # edit locations remembered for similar-code windows
WATCHER_ID = "lsp-complete-watched-files"
REGISTER_TIMEOUT_S = 5  # a client that does not answer must not hold up loading the model


class RepoHost:
    """`files`: the open files, read for their text and URIs; each holds its active block."""

    def __init__(self, settings: Callable[[], Settings], client: EditorClient,
                 files: OpenFileRegistry) -> None:
        self._settings = settings
        self._client = client
        self._files = files
        self.workspace = Workspace()
        self.workspace.buffers = self._buffer
        self._recent: deque[tuple[str, int]] = deque(maxlen=RECENT_EDITS)
        self._real: dict[str, Path | None] = {}

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
        self._files.clear_blocks()

    def folders_changed(self, params: types.DidChangeWorkspaceFoldersParams) -> None:
        """The roots changed: the open files' blocks may too (prepare them again). One
        change of the workspace for the whole event: a client may add thousands at once."""
        removed = [path_of_uri(f.uri) for f in params.event.removed or []]
        added = [path_of_uri(f.uri) for f in params.event.added or []]
        self.workspace.change_roots(added=[p for p in added if p is not None],
                                    removed=[p for p in removed if p is not None])

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
        paths = []
        for change in params.changes:
            self._real.pop(change.uri, None)
            if (path := path_of_uri(change.uri)) is not None:
                paths.append(path)
        self.workspace.invalidate(*paths)

    def edited(self, params: types.DidChangeTextDocumentParams) -> None:
        """Remember where the user edits (windows there are similar-code candidates)."""
        for change in params.content_changes:
            if isinstance(change, types.TextDocumentContentChangePartial):
                self._recent.appendleft((params.text_document.uri, change.range.start.line))

    def closed(self, uri: str) -> None:
        """Call after the file has left the registry (its block went with it)."""
        self._real.pop(uri, None)

    def _buffer(self, path: Path) -> tuple[int, str] | None:
        """The open document at `path`, for the workspace (its text wins over the disk's).
        Runs on the worker: it only reads references the loop replaces whole."""
        for file in self._files.files():
            if self._real_path(file.uri) == path:
                return file.doc.version, file.doc.text
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
                  for uri in self._files if uri != doc.uri]
        return repo_request(doc, cursor, self.budget, others)

    def line_request(self, file: OpenFile, cursor: int) -> RepoRequest | None:
        """What the definitions the cursor's line names need (`line_block`), captured on the
        loop, where the planner wants them (`wants_line_block`: before the file's first
        answer, with no block or only a line's); else None, also where the active block
        is this line's already (made for the names on it: a request after a rest there)."""
        active = self.active_for(file.uri)
        if self.budget <= 0 or not self.workspace.roots or \
                not wants_line_block(file.state.plan, active):
            return None
        request = repo_request(file.doc, cursor, min(self.budget, LINE_BLOCK_TOKENS))
        if request is not None and active is not None and active.state == request.line:
            return None
        return request

    def block_for(self, file: OpenFile, line_request: RepoRequest | None, cancel: CancelToken,
                  tokens: Callable[[RepoContext], int]) -> RepoContext | None:
        """On the worker, where idle work switches it (so it always matches what that work
        left in the cache): the block a prompt of `file` uses now, the line block where
        `line_request` asks for one (`line_block`), else the file's active one."""
        if line_request is None:
            return self.active_for(file.uri)
        return self.line_block(file, line_request, cancel, tokens)

    def active_for(self, key: str) -> RepoContext | None:
        """The file's active block, the one its prompts use now (on the worker, where it is
        switched; on the loop it says only whether the file had one a moment ago)."""
        return self._active(key) if self.budget > 0 else None

    def _active(self, key: str) -> RepoContext | None:
        file = self._files.get(key)
        switch = file.repo if file is not None else None
        return switch.repo if switch is not None else None

    # ------------------------------------------------------------------ idle work (worker)

    def block(self, request: RepoRequest | None, key: str,
              cancel: CancelToken) -> RepoContext | None:
        """The file's block as the workspace is now (the active one when that still holds,
        the very same object)."""
        if request is None:
            return None
        try:
            return build_repo_context(request, self.workspace, self._active(key),
                                      lambda: cancel.cancelled)
        except (OSError, ValueError, RecursionError) as exc:  # a file changed under us
            log.debug("repository context for %s failed: %s", key, exc)
            return self._active(key)

    def line_block(self, file: OpenFile, request: RepoRequest, cancel: CancelToken,
                   tokens: Callable[[RepoContext], int]) -> RepoContext | None:
        """On the worker, for a request the planner wants one for (`wants_line_block`): the
        definitions the cursor's line names, made the file's active block (`tokens`: its
        prompt tokens); the file's active block where that is a whole block now, or where
        it shows all the line names or the line names nothing its imports define (the
        block of a line rested on before stays: a prompt with it is what the cache may
        hold)."""
        active = self._active(file.uri)
        if active is not None and not active.cold:
            return active
        try:
            block = line_definitions(request, self.workspace, lambda: cancel.cancelled)
        except (OSError, ValueError, RecursionError) as exc:  # a file changed under us
            log.debug("the line's definitions for %s failed: %s", file.uri, exc)
            return active
        if block is None or cancel.cancelled or (active is not None and _shows(active, block)):
            return active
        self.apply(file, Switch(block, tokens(block)))
        return block

    def apply(self, file: OpenFile, switch: Switch | None) -> None:
        """Make a block active for `file`, as the prompt-cache policy decided (not when it was
        closed meanwhile, or closed and opened again: the block was chosen for its old text).
        On the worker, where suggestions read it: the next one uses it."""
        if switch is None:
            return

        def write() -> None:
            file.repo = switch if switch.repo is not None else None

        self._files.while_open(file, write)

    # ------------------------------------------------------------------ status

    def describe(self, uri: str) -> dict[str, Any] | None:
        """The file's repository context in use, for lsp-complete/status (None: none)."""
        file = self._files.get(uri)
        switch = file.repo if file is not None else None
        if switch is None or switch.repo is None:
            return None
        repo = switch.repo
        return {
            "name": repo.name,
            "path": repo.current_path,
            "tokens": switch.tokens,
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


def _shows(active: RepoContext, block: RepoContext) -> bool:
    """Whether `active` shows every file of `block` with all its text (a line block of a line
    naming part of what an earlier line named)."""
    shown = {f.path: f.text for f in active.files}
    return all(f.text in shown.get(f.path, "") for f in block.files)
