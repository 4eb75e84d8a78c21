"""The worker: newest request per document wins; nothing hangs; background work yields."""

from __future__ import annotations

import threading
import time

import pytest

from lsp_complete.engine.base import CancelToken
from lsp_complete.scheduler import Scheduler


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
    first = scheduler.submit("a", blocking_job(started, log, "first"))
    assert started.wait(5)
    second = scheduler.submit("a", lambda cancel: "second")
    # The superseded request is answered at once, with nothing, not after its work ends.
    assert first.future.result(timeout=1) is None
    assert second.future.result(timeout=5) == "second"
    assert log == ["first stopped"]
    assert scheduler.counters.superseded == 1


def test_queued_requests_are_replaced_and_others_keep_their_turn(scheduler) -> None:
    started, log = threading.Event(), []
    order: list[str] = []
    blocker = scheduler.submit("x", blocking_job(started, log, "x"))
    assert started.wait(5)
    a1 = scheduler.submit("a", lambda c: order.append("a1") or "a1")
    b = scheduler.submit("b", lambda c: order.append("b") or "b")
    a2 = scheduler.submit("a", lambda c: order.append("a2") or "a2")
    assert a1.future.result(timeout=1) is None  # replaced while queued, answered at once
    scheduler.cancel(blocker)
    assert b.future.result(timeout=5) == "b"
    assert a2.future.result(timeout=5) == "a2"
    assert order == ["b", "a2"]  # "a" keeps its place; the superseded a1 never ran


def test_interactive_work_preempts_background_work(scheduler) -> None:
    started, log = threading.Event(), []
    warm = scheduler.submit_background("a", blocking_job(started, log, "warm"))
    assert started.wait(5)
    real = scheduler.submit("b", lambda cancel: "real")
    assert real.future.result(timeout=5) == "real"
    assert warm.future.result(timeout=1) is None
    assert log == ["warm stopped"]


def test_newer_idle_work_for_a_document_replaces_the_running_one(scheduler) -> None:
    """Warming the top of a just-opened file must not hold up warming where its cursor is."""
    started, log = threading.Event(), []
    other_started = threading.Event()
    old = scheduler.submit_background("a", blocking_job(started, log, "old"))
    assert started.wait(5)
    new = scheduler.submit_background("a", lambda cancel: "new")
    assert new.future.result(timeout=5) == "new"
    assert old.future.result(timeout=1) is None
    assert log == ["old stopped"]
    # Idle work for another document waits its turn instead.
    other = scheduler.submit_background("b", blocking_job(other_started, log, "b"))
    assert other_started.wait(5)
    third = scheduler.submit_background("c", lambda cancel: "c")
    time.sleep(0.05)
    assert not third.future.done()
    scheduler.cancel(other)
    assert third.future.result(timeout=5) == "c"


def test_cancel_answers_and_stops(scheduler) -> None:
    started, log = threading.Event(), []
    job = scheduler.submit("a", blocking_job(started, log, "job"))
    assert started.wait(5)
    scheduler.cancel(job)
    assert job.future.result(timeout=1) is None
    deadline = time.monotonic() + 5
    while not log and time.monotonic() < deadline:
        time.sleep(0.01)
    assert log == ["job stopped"]
    assert scheduler.submit("a", lambda c: 42).future.result(timeout=5) == 42


def test_a_failing_job_does_not_kill_the_worker(scheduler) -> None:
    def boom(cancel: CancelToken) -> None:
        raise RuntimeError("boom")

    failed = scheduler.submit("a", boom)
    with pytest.raises(RuntimeError):
        failed.future.result(timeout=5)
    assert scheduler.submit("a", lambda c: "alive").future.result(timeout=5) == "alive"


def test_drop_supersedes_the_running_job_for_a_key(scheduler) -> None:
    started, log = threading.Event(), []
    job = scheduler.submit("a", blocking_job(started, log, "a"))
    assert started.wait(5)
    scheduler.drop("b")  # another key: untouched
    assert not job.future.done()
    scheduler.drop("a")
    assert job.future.result(timeout=1) is None
    assert scheduler.counters.superseded == 1


def test_worker_time_on_stale_jobs_is_accounted(scheduler) -> None:
    started, log = threading.Event(), []
    scheduler.submit("a", blocking_job(started, log, "a"))
    assert started.wait(5)
    time.sleep(0.05)
    scheduler.submit("a", lambda c: "new").future.result(timeout=5)
    assert scheduler.counters.stale_work_ms >= 40
    assert 0 <= scheduler.counters.work_after_cancel_ms < scheduler.counters.stale_work_ms


def test_a_keystroke_aborts_running_idle_work_at_once_but_not_its_firm_part(scheduler) -> None:
    """Idle work yields to a keystroke mid-decode (a hard cancel: llama.cpp's abort callback
    stops the decode in flight), except in a firm part, which ends first."""
    started, log = threading.Event(), []
    idle = scheduler.submit_background("a", blocking_job(started, log, "idle"))
    assert started.wait(5)
    scheduler.submit("b", lambda cancel: "key")
    assert idle.future.result(timeout=5) is None
    assert idle.cancel.hard

    in_firm, release = threading.Event(), threading.Event()
    seen: list[tuple[bool, bool]] = []

    def firm_then_rest(cancel: CancelToken) -> None:
        with cancel.firm():
            in_firm.set()
            assert release.wait(5)
            seen.append((cancel.cancelled, cancel.hard))  # not yet: the firm part goes on
        seen.append((cancel.cancelled, cancel.hard))  # now, and hard

    scheduler.submit_background("c", firm_then_rest)
    assert in_firm.wait(5)
    key = scheduler.submit("b", lambda cancel: "key")
    time.sleep(0.05)
    assert not key.future.done()  # it waits for the firm part, which is short by design
    release.set()
    assert key.future.result(timeout=5) == "key"
    assert seen == [(False, False), (True, True)]


def test_urgent_idle_work_goes_first(scheduler) -> None:
    started, log, order = threading.Event(), [], []
    blocker = scheduler.submit_background("x", blocking_job(started, log, "x"))
    assert started.wait(5)
    scheduler.submit_background("a", lambda c: order.append("a"))
    last = scheduler.submit_background("b", lambda c: order.append("b"), first=True)
    scheduler.cancel(blocker)
    last.future.result(timeout=5)
    time.sleep(0.05)
    assert order[0] == "b"


def test_closing_a_file_drops_its_idle_work_queued_or_running(scheduler) -> None:
    started, log, ran = threading.Event(), [], []
    running = scheduler.submit_background("a", blocking_job(started, log, "running"))
    assert started.wait(5)
    queued = scheduler.submit_background("b", lambda c: ran.append("b"))
    other = scheduler.submit_background("c", lambda c: ran.append("c") or "c")
    scheduler.drop_idle("a")
    scheduler.drop_idle("b")
    assert running.future.result(timeout=5) is None and running.cancel.hard
    assert queued.future.result(timeout=5) is None
    assert other.future.result(timeout=5) == "c"
    assert ran == ["c"] and log == ["running stopped"]


def test_cancel_all_stops_the_files_work_under_a_prefix_and_spares_the_servers_own(
        scheduler) -> None:
    """What shutdown does first: the running job is aborted, queued ones answered at once;
    another session's files and the server's own jobs (NUL keys) go on."""
    started, log, ran = threading.Event(), [], []
    running = scheduler.submit("1\0file:///a.py", blocking_job(started, log, "running"))
    assert started.wait(5)
    queued = scheduler.submit("1\0file:///b.py", lambda c: ran.append("b"))
    idle = scheduler.submit_background("1\0file:///c.py", lambda c: ran.append("c"))
    own = scheduler.submit_background("1\0\0unload", lambda c: ran.append("unload"))
    other = scheduler.submit("2\0file:///a.py", lambda c: ran.append("other") or "other")
    assert scheduler.cancel_all("1\0") == 3
    assert running.future.result(timeout=5) is None and running.cancel.hard
    assert queued.future.result(timeout=1) is None and idle.future.result(timeout=1) is None
    assert other.future.result(timeout=5) == "other"
    own.future.result(timeout=5)
    assert ran == ["other", "unload"] and log == ["running stopped"]


def test_cancel_all_stops_a_files_idle_work_of_every_kind(scheduler) -> None:
    """A file's climb and block jobs are its own work: shutdown cancels them (the climb's key
    began with NUL, so a climb in flight went on and shutdown waited for it)."""
    from lsp_complete.server.files import block_key, climb_key

    started, log = threading.Event(), []
    climb = scheduler.submit_background(
        climb_key("file:///a.py"), blocking_job(started, log, "climb"))
    assert started.wait(5)
    block = scheduler.submit_background(block_key("file:///a.py"), lambda c: "block")
    assert scheduler.cancel_all() == 2
    assert climb.future.result(timeout=5) is None and climb.cancel.hard
    assert block.future.result(timeout=1) is None
    done = scheduler.submit("file:///b.py", lambda c: "next")  # runs once the climb stopped
    assert done.future.result(timeout=5) == "next"
    assert log == ["climb stopped"]
