"""The worker: newest request per document wins; nothing hangs; background work yields."""

from __future__ import annotations

import threading
import time

import pytest

from lsp_complete.engine.base import CancelToken
from lsp_complete.jobkey import JobKey
from lsp_complete.scheduler import Scheduler


def fg(name: str) -> JobKey:
    """A file's interactive request."""
    return JobKey.suggest(f"file:///{name}.py")


def bg(name: str) -> JobKey:
    """A file's idle work."""
    return JobKey.file_idle(f"file:///{name}.py")


@pytest.fixture
def scheduler():
    s = Scheduler()
    yield s
    s.stop()


def blocking_job(started: threading.Event, log: list[str], name: str):
    def run(cancel: CancelToken) -> str:
        started.set()
        while not cancel.cancelled:
            time.sleep(0.001)
        log.append(f"{name} stopped")
        return name

    return run


def test_a_new_request_supersedes_the_running_one_for_the_same_document(scheduler) -> None:
    started, log = threading.Event(), []
    first = scheduler.submit(fg("a"), blocking_job(started, log, "first"))
    assert started.wait(5)
    second = scheduler.submit(fg("a"), lambda cancel: "second")
    # The superseded request is answered at once, with nothing, not after its work ends.
    assert first.future.result(timeout=1) is None
    assert second.future.result(timeout=5) == "second"
    assert log == ["first stopped"]
    assert scheduler.counters.superseded == 1


def test_queued_requests_are_replaced_and_others_keep_their_turn(scheduler) -> None:
    started, log = threading.Event(), []
    order: list[str] = []
    blocker = scheduler.submit(fg("x"), blocking_job(started, log, "x"))
    assert started.wait(5)
    a1 = scheduler.submit(fg("a"), lambda c: order.append("a1") or "a1")
    b = scheduler.submit(fg("b"), lambda c: order.append("b") or "b")
    a2 = scheduler.submit(fg("a"), lambda c: order.append("a2") or "a2")
    assert a1.future.result(timeout=1) is None  # replaced while queued, answered at once
    scheduler.cancel(blocker)
    assert b.future.result(timeout=5) == "b"
    assert a2.future.result(timeout=5) == "a2"
    assert order == ["b", "a2"]  # "a" keeps its place; the superseded a1 never ran


def test_interactive_work_preempts_background_work(scheduler) -> None:
    started, log = threading.Event(), []
    warm = scheduler.submit_background(bg("a"), blocking_job(started, log, "warm"))
    assert started.wait(5)
    real = scheduler.submit(fg("b"), lambda cancel: "real")
    assert real.future.result(timeout=5) == "real"
    assert warm.future.result(timeout=1) is None
    assert log == ["warm stopped"]


def test_newer_idle_work_for_a_document_replaces_the_running_one(scheduler) -> None:
    """Older idle work for a file (its climb) must not hold up the newer (its new spot)."""
    started, log = threading.Event(), []
    other_started = threading.Event()
    old = scheduler.submit_background(bg("a"), blocking_job(started, log, "old"))
    assert started.wait(5)
    new = scheduler.submit_background(bg("a"), lambda cancel: "new")
    assert new.future.result(timeout=5) == "new"
    assert old.future.result(timeout=1) is None
    assert log == ["old stopped"]
    # Idle work for another document waits its turn instead.
    other = scheduler.submit_background(bg("b"), blocking_job(other_started, log, "b"))
    assert other_started.wait(5)
    third = scheduler.submit_background(bg("c"), lambda cancel: "c")
    time.sleep(0.05)
    assert not third.future.done()
    scheduler.cancel(other)
    assert third.future.result(timeout=5) == "c"


def test_cancel_answers_and_stops(scheduler) -> None:
    started, log = threading.Event(), []
    job = scheduler.submit(fg("a"), blocking_job(started, log, "job"))
    assert started.wait(5)
    scheduler.cancel(job)
    assert job.future.result(timeout=1) is None
    deadline = time.monotonic() + 5
    while not log and time.monotonic() < deadline:
        time.sleep(0.01)
    assert log == ["job stopped"]
    assert scheduler.submit(fg("a"), lambda c: 42).future.result(timeout=5) == 42


def test_a_failing_job_does_not_kill_the_worker(scheduler) -> None:
    def boom(cancel: CancelToken) -> None:
        raise RuntimeError("boom")

    failed = scheduler.submit(fg("a"), boom)
    with pytest.raises(RuntimeError):
        failed.future.result(timeout=5)
    assert scheduler.submit(fg("a"), lambda c: "alive").future.result(timeout=5) == "alive"


def test_drop_supersedes_the_running_job_for_a_key(scheduler) -> None:
    started, log = threading.Event(), []
    job = scheduler.submit(fg("a"), blocking_job(started, log, "a"))
    assert started.wait(5)
    scheduler.drop(fg("b"))  # another key: untouched
    assert not job.future.done()
    scheduler.drop(fg("a"))
    assert job.future.result(timeout=1) is None
    assert scheduler.counters.superseded == 1


def test_worker_time_on_stale_jobs_is_accounted(scheduler) -> None:
    started, log = threading.Event(), []
    scheduler.submit(fg("a"), blocking_job(started, log, "a"))
    assert started.wait(5)
    time.sleep(0.05)
    scheduler.submit(fg("a"), lambda c: "new").future.result(timeout=5)
    assert scheduler.counters.stale_work_ms >= 40
    assert 0 <= scheduler.counters.work_after_cancel_ms < scheduler.counters.stale_work_ms


def test_a_keystroke_aborts_running_idle_work_at_once(scheduler) -> None:
    """Idle work yields to a keystroke mid-decode (a hard cancel: llama.cpp's abort callback
    stops the decode in flight)."""
    started, log = threading.Event(), []
    idle = scheduler.submit_background(bg("a"), blocking_job(started, log, "idle"))
    assert started.wait(5)
    scheduler.submit(fg("b"), lambda cancel: "key")
    assert idle.future.result(timeout=5) is None
    assert idle.cancel.hard


def test_urgent_idle_work_goes_first(scheduler) -> None:
    started, log, order = threading.Event(), [], []
    blocker = scheduler.submit_background(bg("x"), blocking_job(started, log, "x"))
    assert started.wait(5)
    scheduler.submit_background(bg("a"), lambda c: order.append("a"))
    last = scheduler.submit_background(bg("b"), lambda c: order.append("b"), first=True)
    scheduler.cancel(blocker)
    last.future.result(timeout=5)
    time.sleep(0.05)
    assert order[0] == "b"


def test_closing_a_file_drops_its_idle_work_queued_or_running(scheduler) -> None:
    started, log, ran = threading.Event(), [], []
    running = scheduler.submit_background(bg("a"), blocking_job(started, log, "running"))
    assert started.wait(5)
    queued = scheduler.submit_background(bg("b"), lambda c: ran.append("b"))
    other = scheduler.submit_background(bg("c"), lambda c: ran.append("c") or "c")
    scheduler.drop_idle(bg("a"))
    scheduler.drop_idle(bg("b"))
    assert running.future.result(timeout=5) is None and running.cancel.hard
    assert queued.future.result(timeout=5) is None
    assert other.future.result(timeout=5) == "c"
    assert ran == ["c"] and log == ["running stopped"]


def test_cancel_files_stops_a_sessions_file_work_and_spares_the_servers_own(
        scheduler) -> None:
    """What shutdown does first: the running job is aborted, queued ones answered at once;
    another session's files and the server's own jobs go on."""
    started, log, ran = threading.Event(), [], []
    running = scheduler.submit(fg("a").in_session(1), blocking_job(started, log, "running"))
    assert started.wait(5)
    queued = scheduler.submit(fg("b").in_session(1), lambda c: ran.append("b"))
    idle = scheduler.submit_background(bg("c").in_session(1), lambda c: ran.append("c"))
    own = scheduler.submit_background(JobKey.unload(1).in_session(1),
                                      lambda c: ran.append("unload"))
    other = scheduler.submit(fg("a").in_session(2), lambda c: ran.append("other") or "other")
    assert scheduler.cancel_files(1) == 3
    assert running.future.result(timeout=5) is None and running.cancel.hard
    assert queued.future.result(timeout=1) is None and idle.future.result(timeout=1) is None
    assert other.future.result(timeout=5) == "other"
    own.future.result(timeout=5)
    assert ran == ["other", "unload"] and log == ["running stopped"]


def test_cancel_files_stops_a_files_idle_work_of_every_kind(scheduler) -> None:
    """A file's climb, block and next-edit jobs are its own work: shutdown cancels them (the
    climb's key once began with NUL, so a climb in flight went on and shutdown waited for
    it). Saving one file's cache is the server's own: it goes on."""
    started, log, ran = threading.Event(), [], []
    uri = "file:///a.py"
    climb = scheduler.submit_background(JobKey.climb(uri), blocking_job(started, log, "climb"))
    assert started.wait(5)
    block = scheduler.submit_background(JobKey.block(uri), lambda c: "block")
    edit = scheduler.submit_background(JobKey.next_edit(uri), lambda c: "edit")
    save = scheduler.submit_background(JobKey.persist_file(uri), lambda c: ran.append("save"))
    assert scheduler.cancel_files() == 3
    assert climb.future.result(timeout=5) is None and climb.cancel.hard
    assert block.future.result(timeout=1) is None and edit.future.result(timeout=1) is None
    done = scheduler.submit(fg("b"), lambda c: "next")  # runs once the climb stopped
    assert done.future.result(timeout=5) == "next"
    save.future.result(timeout=5)
    assert log == ["climb stopped"] and ran == ["save"]


def test_cancel_files_lets_a_call_in_flight_finish(scheduler) -> None:
    """Loading the model (a `call`) is the server's own work: shutdown does not cancel it."""
    started, release = threading.Event(), threading.Event()

    def load(cancel: CancelToken) -> str:
        started.set()
        assert release.wait(5)
        return "cancelled" if cancel.cancelled else "loaded"

    answer: list[str] = []
    caller = threading.Thread(
        target=lambda: answer.append(scheduler.call(JobKey.server("load"), load, 5)))
    caller.start()
    assert started.wait(5)
    queued = scheduler.submit(fg("a"), lambda c: "a")
    assert scheduler.cancel_files() == 1  # the file's request, not the load
    release.set()
    caller.join(5)
    assert answer == ["loaded"] and queued.future.result(timeout=1) is None


def test_a_session_view_keys_its_jobs_as_its_own(scheduler) -> None:
    """The daemon's per-session view: the same file in two windows is two keys; a window's
    shutdown cancels its own work only, the daemon's own jobs included in neither."""
    from lsp_complete.daemon.server import SessionScheduler

    one, two = SessionScheduler(scheduler, 1), SessionScheduler(scheduler, 2)
    started, log = threading.Event(), []
    blocker = scheduler.submit(JobKey.server("persist"), blocking_job(started, log, "daemon"))
    assert started.wait(5)
    a1 = one.submit(fg("a"), lambda c: "a1")
    a2 = two.submit(fg("a"), lambda c: "a2")
    assert a1.key == fg("a").in_session(1) and a2.key.session == 2
    assert not a1.future.done()  # not superseded by the other window's request
    one.drop(fg("a"))
    assert a1.future.result(timeout=1) is None and not a2.future.done()
    idle = two.submit_background(bg("b"), lambda c: "b")
    assert one.cancel_files() == 0
    assert two.cancel_files() == 2
    assert a2.future.result(timeout=1) is None and idle.future.result(timeout=1) is None
    assert not blocker.future.done()
    scheduler.cancel(blocker)


def test_a_sessions_shutdown_cancels_its_queued_shutdown_persist(scheduler) -> None:
    """Pinned, as the NUL-separated keys had it: the daemon queues a session's clean-up
    (`shutdown-persist`, `drop`) on the shared scheduler under the session, not as the
    server's own, so the session's `cancel_files` cancels it. In practice shutdown cancels
    before it queues the save, and `drop` comes after the session ended."""
    from lsp_complete.daemon.server import SessionScheduler

    one = SessionScheduler(scheduler, 1)
    started, log = threading.Event(), []
    blocker = scheduler.submit_background(JobKey.server("persist"),
                                          blocking_job(started, log, "daemon"))
    assert started.wait(5)
    save = scheduler.submit_background(JobKey.session_job(1, "shutdown-persist"), lambda c: 1)
    drop = scheduler.submit_background(JobKey.session_job(1, "drop"), lambda c: 1)
    other = scheduler.submit_background(JobKey.session_job(2, "shutdown-persist"), lambda c: 2)
    assert one.cancel_files() == 2
    assert save.future.result(timeout=1) is None and drop.future.result(timeout=1) is None
    scheduler.cancel(blocker)
    assert other.future.result(timeout=5) == 2


def test_shutdown_cancels_before_it_saves_the_caches() -> None:
    """The order that keeps a daemon session's `shutdown-persist` from being cancelled by the
    same shutdown: `ModelHost.shutdown` cancels the files' work, then saves (the daemon
    replaces `persist_caches` with queueing the save)."""
    import asyncio

    from lsp_complete.server.model import ModelHost

    calls: list[str] = []

    class Queue:
        def cancel_files(self) -> int:
            calls.append("cancel_files")
            return 0

    host = ModelHost(Queue(), lambda: None, None)  # type: ignore[arg-type]

    async def queue_persist(_timeout_s: float = 0.0) -> None:
        calls.append("queue shutdown-persist")

    host.persist_caches = queue_persist  # type: ignore[method-assign]
    asyncio.run(host.shutdown())
    assert calls == ["cancel_files", "queue shutdown-persist"]


def test_two_models_freed_in_a_row_are_both_freed(scheduler) -> None:
    """A second release queued behind a first (a setting changed twice while the worker was
    busy) must not replace it: each model is freed."""
    from lsp_complete.server.model import free_on_worker

    class Model:
        closed = False

        def close(self) -> None:
            self.closed = True

    started, log = threading.Event(), []
    busy = scheduler.submit(fg("a"), blocking_job(started, log, "busy"))
    assert started.wait(5)
    first, second = Model(), Model()
    free_on_worker(scheduler, first)
    free_on_worker(scheduler, second)
    scheduler.drop(fg("a"))
    busy.future.result(timeout=5)
    deadline = time.monotonic() + 5
    while not (first.closed and second.closed) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert first.closed and second.closed
