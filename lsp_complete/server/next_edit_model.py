"""Which model makes next edits: the completion model, or the one `nextEditModel` names.

Another model is loaded the first time a next edit needs it (a client that never asks for
next edits never loads it), in this process and on the local engine whatever engine the
completions use, with the completion model's other engine settings (threads, GPU layers). It
loads on a thread beside the worker, which goes on making suggestions meanwhile.
A request that comes while it loads waits for it and is answered by it; a failed load is
told once and tried again only when the setting changes. A change of the setting frees the
model it replaces.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from pathlib import Path
from typing import Any

from lsp_complete.config import Settings
from lsp_complete.pipeline import Completer
from lsp_complete.server.model import ModelHost, free_on_worker
from lsp_complete.server.shared import Shared

log = logging.getLogger(__name__)


class NextEditModel:
    def __init__(self, shared: Shared) -> None:
        self._shared = shared
        self._host: ModelHost | None = None
        self._name: str | None = None  # what `_host` is (being) loaded for
        self._loading: asyncio.Task[bool] | None = None

    def own_name(self) -> str | None:
        """The model `nextEditModel` names when it is not the completion model, else None
        ("" names the completion model: a client's null leaves a setting as it was)."""
        settings, model = self._shared.settings(), self._shared.model
        wanted = settings.next_edit_model
        if not wanted or wanted == settings.model:
            return None
        if model.completer is not None and wanted == model.completer.spec.name:
            return None
        loaded = model.info.get("path")
        if loaded and wanted.endswith(".gguf") and _same_file(wanted, str(loaded)):
            return None
        return wanted

    def completer(self) -> Completer | None:
        """The completer that makes next edits, when it is ready; else None (and the other
        model's load is started, if that is what is missing)."""
        model = self._shared.model
        if model.completer is None:
            return None  # (loading: until it is known, its name cannot be told from another)
        name = self.own_name()
        if name is None:
            self._drop()
            return model.completer if model.ready else None
        if name != self._name:
            self._load(name)
        host = self._host
        return host.completer if host is not None and host.ready else None

    async def loaded(self) -> bool:
        """Wait for the other model's load, when one is under way: whether it ended ready (a
        request that came meanwhile is then answered by it, not with nothing)."""
        loading = self._loading
        if loading is None or loading.done():
            return False
        try:
            return await asyncio.shield(loading)
        except Exception:  # (told by the host)
            return False

    def describe(self) -> dict[str, object] | None:
        """For the status: the other model's name, state and error (None: none is used)."""
        host = self._host
        if host is None:
            return None
        return {"name": self._name, "state": host.state, "error": host.error,
                "path": host.info.get("path")}

    def close(self) -> None:
        self._drop()

    def _settings(self) -> Settings:
        settings = self._shared.settings()
        return dataclasses.replace(settings, model=self._name, engine="local",
                                   next_edit_model=None)

    def _load(self, name: str) -> None:
        self._drop()
        shared = self._shared
        host = self._host = ModelHost(shared.scheduler, self._settings, shared.client,
                                      on_worker=False)
        default_loader = host.loader

        def loader(settings: Settings) -> tuple[Completer, dict[str, Any], list[str]]:
            try:
                return default_loader(settings)
            except Exception as exc:  # told by the host: say which setting it is for
                raise RuntimeError(f"nextEditModel {name!r}: {exc}") from exc

        host.loader = loader
        self._name = name
        log.info("next edits: loading the model %s", name)
        self._loading = asyncio.ensure_future(host.load(self._settings()))

    def _drop(self) -> None:
        """Free the other model (on the worker, which owns it); a load still running is told
        to stop, and its model (if it ended loaded all the same) freed then."""
        host, loading = self._host, self._loading
        self._host, self._name, self._loading = None, None, None
        if host is None:
            return
        scheduler = self._shared.scheduler

        def free(_done: object = None) -> None:
            if host.completer is not None:
                free_on_worker(scheduler, host.completer)

        if loading is not None and not loading.done():
            host.stop_loading()
            loading.add_done_callback(free)
        else:
            free()


def _same_file(a: str, b: str) -> bool:
    try:
        return Path(a).expanduser().resolve() == Path(b).expanduser().resolve()
    except (OSError, RuntimeError):
        return False
