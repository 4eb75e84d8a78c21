"""The model that only next edits use loads on a thread beside the worker: suggestions go on
meanwhile, and a load whose model is no longer wanted stops (server/next_edit_model.py).
The load itself is a stand-in that waits for the test; the real load is exercised by
test_next_edit_server.py."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import pytest

from lsp_complete.config import Settings
from lsp_complete.jobkey import JobKey
from lsp_complete.scheduler import Scheduler
from lsp_complete.server import model as model_module
from lsp_complete.server.next_edit_model import NextEditModel
from lsp_complete.server.shared import Shared


class Client:
    async def progress_begin(self, _token: str, _title: str, _timeout: float) -> bool:
        return False

    def forget_told(self, _prefix: str = "") -> None:
        pass

    def log(self, *_args: Any) -> None:
        pass

    def tell(self, *_args: Any, **_kwargs: Any) -> None:
        pass

    def progress_end(self, *_args: Any) -> None:
        pass


class Completer:
    def __init__(self, name: str) -> None:
        self.spec = SimpleNamespace(name=name)
        self.closed = False

    def close(self) -> None:
        self.closed = True


@pytest.fixture
def scheduler():
    s = Scheduler()
    yield s
    s.stop()


@pytest.fixture
def held_load(monkeypatch) -> tuple[threading.Event, threading.Event, list[str]]:
    """(loading, release, how each load ended): the next-edit model's load starts, then waits
    for `release` or for being told to stop."""
    loading, release, ended = threading.Event(), threading.Event(), []

    def load_completer(settings: Settings, cancelled: Callable[[], bool]) -> Any:
        loading.set()
        while not release.wait(0.01):
            if cancelled():
                ended.append("stopped")
                raise RuntimeError("loading was cancelled")
        ended.append("loaded")
        return Completer(str(settings.model)), {"name": settings.model}, []

    monkeypatch.setattr(model_module, "load_completer", load_completer)
    return loading, release, ended


def next_edit_model(scheduler: Scheduler, settings: list[Settings]) -> NextEditModel:
    completion_model = SimpleNamespace(completer=Completer("completion"), ready=True,
                                       info={"path": "/models/completion.gguf"})
    shared = Shared(settings=lambda: settings[-1], client=Client(),  # type: ignore[arg-type]
                    scheduler=scheduler, model=completion_model,  # type: ignore[arg-type]
                    telemetry=None)  # type: ignore[arg-type]
    return NextEditModel(shared)


def test_suggestions_go_on_while_the_next_edit_model_loads(scheduler, held_load) -> None:
    loading, release, ended = held_load
    settings = [Settings(next_edit_model="/models/next.gguf")]
    models = next_edit_model(scheduler, settings)

    async def run() -> tuple[str, bool]:
        assert models.completer() is None  # its load starts
        assert await asyncio.to_thread(loading.wait, 5)
        # The worker runs a suggestion's job while the load waits (on the worker, this job
        # would wait for the load, and the call time out).
        answer = await asyncio.to_thread(
            scheduler.call, JobKey.suggest("file:///a.py"), lambda _cancel: "suggested", 5)
        release.set()
        return answer, await models.loaded()

    assert asyncio.run(run()) == ("suggested", True)
    ready = models.completer()
    assert ready is not None and ready.spec.name == "/models/next.gguf"
    assert ended == ["loaded"]


def test_a_load_no_longer_wanted_stops(scheduler, held_load) -> None:
    loading, _release, ended = held_load
    settings = [Settings(next_edit_model="/models/next.gguf")]
    models = next_edit_model(scheduler, settings)

    async def run() -> bool:
        assert models.completer() is None
        assert await asyncio.to_thread(loading.wait, 5)
        waiting = asyncio.ensure_future(models.loaded())
        await asyncio.sleep(0)
        settings.append(Settings(next_edit_model=""))  # the completion model makes them now
        assert models.completer() is not None  # the completion model's
        return await waiting

    assert asyncio.run(run()) is False
    assert ended == ["stopped"]
