"""The model's lifecycle: loading the completer off the event loop, replacing it on a reload
(the old one is freed on the worker that owns it), its state for the status, the progress
the client shows meanwhile, noticing that its file changed on disk (then it is loaded again),
and saving its KV caches at shutdown."""

from __future__ import annotations

import asyncio
import itertools
import logging
import threading
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from lsprotocol import types

from lsp_complete.config import Settings
from lsp_complete.engine.base import EngineError, FileStamp, path_stamp
from lsp_complete.gguf_header import ModelError
from lsp_complete.jobkey import JobKey
from lsp_complete.pipeline import Completer, load_completer
from lsp_complete.scheduler import Scheduler
from lsp_complete.server.client import EditorClient

log = logging.getLogger(__name__)

_releases = itertools.count(1)
SHUTDOWN_PERSIST_S = 10.0  # saving KV caches at shutdown: past this the client is not kept
# A client that asks for progress reports but never agrees to one must not hold up the load.
PROGRESS_TIMEOUT_S = 2.0


def free_on_worker(scheduler: Scheduler, completer: Completer) -> None:
    """Free a model on the worker that owns it (after the work queued for it)."""
    scheduler.submit_background(JobKey.unload(next(_releases)), lambda _cancel: completer.close())


class ModelHost:
    """The completer in use (None until the first load), and how its loading went."""

    def __init__(self, scheduler: Scheduler, settings: Callable[[], Settings],
                 client: EditorClient, on_worker: bool = True) -> None:
        self._scheduler = scheduler
        # Where the load runs: on the worker (the completion model: nothing can be served
        # before it), or on a thread beside it (a model that only next edits use: the
        # worker goes on making suggestions with the completion model meanwhile).
        self._on_worker = on_worker
        self._settings = settings
        self._client = client
        self.completer: Completer | None = None
        self.state = "loading"  # loading | ready | error
        self.error = ""
        self.info: dict[str, Any] = {}
        # Set by shutdown: a model being loaded stops loading (a 1 GB file takes seconds, and
        # the process cannot exit before the worker's load returns).
        self._closing = threading.Event()
        # Settings -> (completer, info, warnings), run on the worker: a daemon session's
        # lends the daemon's shared engine instead of loading one (daemon/server.py).
        self.loader: Callable[[Settings], tuple[Completer, dict[str, Any], list[str]]] = (
            lambda settings: load_completer(settings, self._closing.is_set)
        )
        # The model file changed on disk (why): the server loads it again (completion_server).
        self.on_file_changed: Callable[[str], None] = lambda _why: None
        # The file a failed load was for, as it was then: a later change loads it again.
        self._failed_file: tuple[Path, FileStamp | None] | None = None

    @property
    def ready(self) -> bool:
        return self.completer is not None and self.state == "ready"

    async def load(self, settings: Settings) -> bool:
        """Load the model `settings` name (seconds, on the worker); True once it is ready."""
        client, scheduler = self._client, self._scheduler
        token = str(uuid.uuid4())
        self.state = "loading"
        # The file loaded last, as it is before this attempt: a change from now on (a copy
        # still being written) is tried again, even one made while this load fails.
        watched = Path(self.info["path"]) if self.info.get("path") else None
        stamp = path_stamp(watched) if watched is not None else None
        progress = await client.progress_begin(token, "lsp-complete: loading model",
                                               PROGRESS_TIMEOUT_S)
        loop = asyncio.get_running_loop()

        def load() -> tuple[Completer, dict[str, Any], list[str]]:
            if not self._on_worker:
                return self.loader(settings)
            # A model that cannot be loaded is told below, in one line: no traceback.
            loaded: tuple[Completer, dict[str, Any], list[str]] = scheduler.call(
                JobKey.server("load"), lambda _c: self.loader(settings),
                reported=(ModelError, EngineError))
            return loaded

        try:
            completer, info, warnings = await loop.run_in_executor(None, load)
        except Exception as exc:
            self.state = "error"
            self.error = str(exc)
            if self._closing.is_set():  # shut down meanwhile: nobody to tell
                return False
            if watched is not None:  # e.g. a reload of a file rewritten on disk, still unusable
                self._failed_file = (watched, stamp)
            client.tell(f"lsp-complete: {exc}", once_key=f"model:{settings.model}")
            if progress:
                client.progress_end(token, "failed")
            return False
        old, self.completer = self.completer, completer
        if old is not None:  # a reload: free the previous model
            free_on_worker(scheduler, old)
        self.info = info
        self.state = "ready"
        self.error = ""  # the last failed load's, which this one replaces
        self._failed_file = None
        client.forget_told("model:")  # a model that fails again later is told again
        for warning in warnings:
            client.tell(f"lsp-complete: {warning}", types.MessageType.Warning)
        client.log(f"lsp-complete: model {info.get('name')} ready ({info.get('path')})")
        if progress:
            client.progress_end(token, "ready")
        return True

    def check_file(self) -> bool:
        """Whether the model file changed on disk since it was loaded (or since a load of it
        failed): then the server is told to load it again, and the completer is not to be
        used meanwhile. A stat or two: asked before each suggestion that needs the model."""
        why = None
        if self.state == "ready" and self.completer is not None:
            why = self.completer.model_changed()
        elif self.state == "error" and self._failed_file is not None:
            path, stamp = self._failed_file
            if path_stamp(path) != stamp:
                why = f"the model file {path} changed on disk"
        if why is None:
            return False
        self._failed_file = None  # one reload per change
        self.on_file_changed(why)
        return True

    def stop_loading(self) -> None:
        """A load under way stops: its model is no longer wanted (nor loaded by this host
        again)."""
        self._closing.set()

    def use_settings(self, settings: Settings) -> None:
        """Settings that need no new engine apply to the loaded one from its next request."""
        if self.completer is not None:
            self.completer.settings = settings

    async def shutdown(self) -> None:
        """Cancel the work in flight (a request stuck on a remote server included), then
        save the KV caches."""
        self._closing.set()
        cancelled = self._scheduler.cancel_files()
        if cancelled:
            log.info("shutdown: %d jobs in flight cancelled", cancelled)
        await self.persist_caches()

    async def persist_caches(self, timeout_s: float = SHUTDOWN_PERSIST_S) -> None:
        """Save every file's KV cache on the worker, waiting at most `timeout_s`, never
        blocking the event loop (a daemon session queues it instead: daemon/server.py)."""
        completer = self.completer
        if completer is None or not self._settings().persist_cache:
            return
        job = self._scheduler.submit(JobKey.server("persist"), lambda _c: completer.persist())
        # `exit` sent right after `shutdown` ends the event loop, which cancels this task: the
        # wait ended in a CancelledError that pygls let out into asyncio's log (a traceback on
        # stderr), and it cancelled the save itself where it was queued behind a busy worker
        # (nothing saved). Now the save is waited for to the end, or to `timeout_s`, whatever
        # cancels the wait (asyncio.run waits for a cancelled task to return); then this
        # returns as usual, the caches saved, and `shutdown` is answered.
        saving = asyncio.wrap_future(job.future)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while not saving.done():
            left = deadline - loop.time()
            if left <= 0:
                log.warning("shutdown: KV caches not saved, the worker stayed busy %.0f s",
                            timeout_s)
                self._scheduler.cancel(job)
                return
            try:
                await asyncio.wait([saving], timeout=left)  # never cancels `saving`
            except asyncio.CancelledError:
                log.info("shutdown: cancelled while saving the KV caches; saving them first")
        if not saving.cancelled() and (exc := saving.exception()) is not None:
            log.warning("could not persist KV caches: %s", exc)
