"""One inference worker thread; the newest request for a document wins.

The event loop never computes: it submits jobs and awaits their futures. A new interactive job
for a document supersedes the queued or running one for the same document: the old future is
answered at once with None, and the old computation sees its cancel flag between prefill
batches and between generated tokens. Interactive jobs for different documents run in arrival
order; background jobs (warm-up, re-anchoring, persistence) run only when no interactive job
waits, and yield at once to any that arrives: a decode in flight is aborted (llama.cpp's abort
callback).

Jobs are keyed by `JobKey` (jobkey.py): whose work a job is, and which ones shutdown cancels.
"""

from __future__ import annotations

import concurrent.futures
import itertools
import logging
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from lsp_complete.engine.base import CancelToken
from lsp_complete.jobkey import JobKey

log = logging.getLogger(__name__)

_ids = itertools.count(1)


@dataclass
class Job:
    key: JobKey
    run: Callable[[CancelToken], Any]
    interactive: bool
    cancel: CancelToken = field(default_factory=CancelToken)
    future: concurrent.futures.Future[Any] = field(default_factory=concurrent.futures.Future)
    id: int = field(default_factory=lambda: next(_ids))
    submitted: float = field(default_factory=time.monotonic)
    started: float | None = None
    # Errors its caller reports itself (a model that fails to load: one message to the user,
    # logged there): the worker logs their traceback at debug level only.
    reported: tuple[type[BaseException], ...] = ()


@dataclass
class SchedulerCounters:
    submitted: int = 0
    completed: int = 0
    superseded: int = 0
    cancelled: int = 0
    background_done: int = 0
    background_cancelled: int = 0
    errors: int = 0
    # Worker time spent on interactive jobs that were superseded or cancelled, in total and
    # after the moment they were: what stale keystrokes cost the CPU.
    stale_work_ms: float = 0.0
    work_after_cancel_ms: float = 0.0


def _answer(job: Job, value: Any = None, error: BaseException | None = None) -> None:
    """Resolve a job's future once; later attempts (worker vs. supersession race) are ignored."""
    try:
        if error is not None:
            job.future.set_exception(error)
        else:
            job.future.set_result(value)
    except concurrent.futures.InvalidStateError:
        pass


class WorkQueue(Protocol):
    """What the server asks of the worker: the `Scheduler`, or one session's view of the
    daemon's (`daemon.server.SessionScheduler`, which keeps its keys apart)."""

    @property
    def counters(self) -> SchedulerCounters: ...

    @property
    def idle(self) -> bool: ...

    @property
    def busy(self) -> bool: ...

    def submit(self, key: JobKey, run: Callable[[CancelToken], Any]) -> Job: ...

    def submit_background(self, key: JobKey, run: Callable[[CancelToken], Any],
                          first: bool = False) -> Job: ...

    def call(self, key: JobKey, run: Callable[[CancelToken], Any],
             timeout: float | None = None,
             reported: tuple[type[BaseException], ...] = ()) -> Any: ...

    def drop(self, key: JobKey) -> None: ...

    def drop_idle(self, key: JobKey) -> None: ...

    def cancel(self, job: Job, hard: bool = True) -> None: ...

    def cancel_files(self) -> int: ...

    def pending(self) -> int: ...

    def stop(self, timeout: float = 5.0) -> None: ...


class Scheduler:
    def __init__(self, name: str = "lsp-complete-worker") -> None:
        self.counters = SchedulerCounters()
        self._lock = threading.Condition()
        self._interactive: OrderedDict[JobKey, Job] = OrderedDict()
        self._background: deque[Job] = deque()
        self._running: Job | None = None
        self._stopped = False
        self._thread = threading.Thread(target=self._loop, name=name, daemon=True)
        self._thread.start()

    # ------------------------------------------------------------------ submitting

    def submit(self, key: JobKey, run: Callable[[CancelToken], Any]) -> Job:
        """An interactive job: supersedes any queued or running job for the same key."""
        job = Job(key=key, run=run, interactive=True)
        with self._lock:
            self.counters.submitted += 1
            old = self._interactive.pop(key, None)
            if old is not None:
                self._supersede(old)
            running = self._running
            if running is not None and running.interactive and running.key == key:
                # Softly: its prefill batch in flight is the newer prompt's prefix too.
                self._supersede(running)
            elif running is not None and not running.interactive:
                # Idle work yields at once: a decode in flight is aborted (the micro-batches
                # it finished stay cached), so it never holds a keystroke for a whole batch.
                self._supersede(running, hard=True)
            self._interactive[key] = job
            self._lock.notify()
        return job

    def submit_background(self, key: JobKey, run: Callable[[CancelToken], Any],
                          first: bool = False) -> Job:
        """Idle work: replaces the queued or running idle work for the same key (the running
        one stops softly, after its prefill batch). With `first`, it goes before the idle work
        queued already (what the last keystroke made urgent)."""
        job = Job(key=key, run=run, interactive=False)
        with self._lock:
            self._stop_idle(key, hard=False)
            if first:
                self._background.appendleft(job)
            else:
                self._background.append(job)
            self._lock.notify()
        return job

    def call(
        self, key: JobKey, run: Callable[[CancelToken], Any], timeout: float | None = None,
        reported: tuple[type[BaseException], ...] = (),
    ) -> Any:
        """Run something on the worker thread and wait for it (model loading, shutdown work);
        the errors in `reported` are the caller's to log (`Job.reported`)."""
        job = Job(key=key, run=run, interactive=True, reported=reported)
        with self._lock:
            self._interactive[JobKey.call(job.id)] = job
            self._lock.notify()
        return job.future.result(timeout)

    def drop(self, key: JobKey) -> None:
        """Supersede whatever is queued or running for a key (its answer came from elsewhere)."""
        with self._lock:
            queued = self._interactive.pop(key, None)
            if queued is not None:
                self._supersede(queued)
            running = self._running
            if running is not None and running.key == key and running.interactive:
                self._supersede(running)

    def drop_idle(self, key: JobKey) -> None:
        """Cancel the idle work queued or running for a key (its file was closed): a decode in
        flight is aborted."""
        with self._lock:
            self._stop_idle(key, hard=True)

    def _stop_idle(self, key: JobKey, hard: bool) -> None:
        """Under the lock: drop the idle work queued for a key and cancel the running one."""
        for queued in [j for j in self._background if j.key == key]:
            self._background.remove(queued)
            self._supersede(queued, hard=hard)
        running = self._running
        if running is not None and running.key == key and not running.interactive:
            self._supersede(running, hard=hard)

    def cancel_files(self, session: int | None = None) -> int:
        """Cancel every queued and running job of `session` (None: the in-process server's)
        but the server's own, by `JobKey.cancelled_by` (shutdown): a decode in flight is
        aborted, a remote request closes its stream. Loading, unloading and saving caches go
        on. How many."""

        def files(job: Job) -> bool:
            return job.key.cancelled_by(session)

        with self._lock:
            queued = [k for k, j in self._interactive.items() if files(j)]
            jobs = [self._interactive.pop(k) for k in queued]
            idle = [j for j in self._background if files(j)]
            for job in idle:
                self._background.remove(job)
            running = self._running
            if running is not None and files(running):
                jobs.append(running)
            for job in jobs + idle:
                if job.interactive and not job.future.done():
                    self.counters.cancelled += 1
                elif not job.interactive:
                    self.counters.background_cancelled += 1
                job.cancel.cancel(hard=True)
                _answer(job, None)
            return len(jobs) + len(idle)

    def cancel(self, job: Job, hard: bool = True) -> None:
        """Stop a job and answer it None. Not `hard`: a prefill batch in flight ends first
        (its tokens stay cached; the next request's prompt begins with them)."""
        with self._lock:
            if self._interactive.get(job.key) is job:
                del self._interactive[job.key]
            if job in self._background:
                self._background.remove(job)
            if not job.future.done():
                self.counters.cancelled += 1
            job.cancel.cancel(hard=hard)
            _answer(job, None)

    def _supersede(self, job: Job, hard: bool = False) -> None:
        job.cancel.cancel(hard=hard)
        if job.interactive:
            if not job.future.done():
                self.counters.superseded += 1
        else:
            self.counters.background_cancelled += 1
        _answer(job, None)

    @property
    def busy(self) -> bool:
        with self._lock:
            return self._running is not None or bool(self._interactive)

    @property
    def idle(self) -> bool:
        """Nothing running and nothing queued, idle work included."""
        with self._lock:
            return self._running is None and not self._interactive and not self._background

    def pending(self) -> int:
        with self._lock:
            return len(self._interactive) + len(self._background)

    # ------------------------------------------------------------------ worker

    def _next(self) -> Job | None:
        with self._lock:
            while not self._stopped:
                if self._interactive:
                    _, job = self._interactive.popitem(last=False)
                elif self._background:
                    job = self._background.popleft()
                else:
                    self._lock.wait()
                    continue
                if job.cancel.cancelled:
                    continue
                self._running = job
                return job
            return None

    def _loop(self) -> None:
        while (job := self._next()) is not None:
            job.started = time.monotonic()
            try:
                value = job.run(job.cancel)
            except BaseException as exc:  # the worker must survive anything a job does
                if isinstance(exc, job.reported):
                    log.debug("job for %s failed", job.key, exc_info=True)
                else:
                    log.exception("job for %s failed", job.key)
                self.counters.errors += 1
                _answer(job, error=exc)
            else:
                if job.interactive:
                    self.counters.completed += 1
                else:
                    self.counters.background_done += 1
                _answer(job, value)
            finally:
                self._account(job)
                with self._lock:
                    self._running = None

    def _account(self, job: Job) -> None:
        cancelled_at = job.cancel.cancelled_at
        if not job.interactive or cancelled_at is None or job.started is None:
            return
        ended = time.monotonic()
        self.counters.stale_work_ms += (ended - job.started) * 1000
        after = ended - max(cancelled_at, job.started)
        self.counters.work_after_cancel_ms += max(0.0, after) * 1000

    def stop(self, timeout: float = 5.0) -> None:
        with self._lock:
            self._stopped = True
            pending = list(self._interactive.values()) + list(self._background)
            self._interactive.clear()
            self._background.clear()
            if self._running is not None:
                self._running.cancel.cancel()
            self._lock.notify_all()
        for job in pending:
            job.cancel.cancel()
            _answer(job, None)
        self._thread.join(timeout)
