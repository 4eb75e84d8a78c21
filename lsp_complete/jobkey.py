"""Scheduler keys (`JobKey`): whose work a job is, and which jobs a shutdown cancels.

A key names a file's work (`uri`, one of `FILE_KINDS`), the server's own work (`SERVER_KINDS`:
loading, unloading, saving caches; `uri` names the file of a one-file save) or, in the daemon,
a session's clean-up (`SESSION_KINDS`). `session` is the daemon session whose work it is
(None: the in-process server, or the daemon's own). The scheduler supersedes and drops by
equal keys; `Scheduler.cancel_files(session)` cancels by the one rule in `cancelled_by`:

- shutdown (`cancel_files()`, server/model.py) cancels every job of its session but the
  server's own: a file's suggestion, idle work, climb, block and next edit are cancelled;
  loading, unloading, saving every cache, saving one file's cache (an idle save after the
  last suggestion) and a `call` go on. Another session's jobs and the daemon's own go on.
- a daemon session's own clean-up keys (`shutdown-persist`, `drop`) are cancelled by its
  session's `cancel_files`, as a file's work is. With the NUL-separated strings these keys
  replaced (`f"{sid}\\0shutdown-persist"`, submitted to the shared scheduler, not through the
  session's view) they sat where a file's URI does. Pinned as it was: the one `cancel_files`
  of a session (its `shutdown`) runs before its `shutdown-persist` is queued, and `drop` is
  queued after the session ended, so neither is cancelled in practice (only a second
  `shutdown` request would cancel the first one's queued save, and queue it again).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Literal, get_args

# A file's work: an interactive request (suggestion, alternatives), its idle work (warming,
# re-anchoring, saving and freeing it on close), building on towards its full prompt, the
# block after its one-line suggestion, and its next edit.
FileKind = Literal["suggest", "idle", "climb", "block", "next-edit"]
# The server's own: loading and unloading the model, saving every KV cache, saving one file's
# (`uri`) a while after its last suggestion, and the queue slot of a `Scheduler.call`.
ServerKind = Literal["load", "unload", "persist", "persist-file", "call"]
# A daemon session's clean-up, queued by the daemon on the shared scheduler.
SessionKind = Literal["shutdown-persist", "drop"]
JobKind = FileKind | ServerKind | SessionKind

FILE_KINDS: frozenset[str] = frozenset(get_args(FileKind))
SERVER_KINDS: frozenset[str] = frozenset(get_args(ServerKind))
SESSION_KINDS: frozenset[str] = frozenset(get_args(SessionKind))


@dataclass(frozen=True, slots=True)
class JobKey:
    kind: JobKind
    uri: str | None = None  # the file, for a file's work and a one-file save
    session: int | None = None  # the daemon session; None in-process and the daemon's own
    serial: int = 0  # a `call`'s job id

    def __post_init__(self) -> None:
        needs_uri = self.kind in FILE_KINDS or self.kind == "persist-file"
        if needs_uri != (self.uri is not None):
            raise ValueError(f"a {self.kind!r} key {'needs' if needs_uri else 'has no'} uri")
        if self.kind in SESSION_KINDS and self.session is None:
            raise ValueError(f"a {self.kind!r} key needs a session")

    # ------------------------------------------------------------------ constructors

    @classmethod
    def suggest(cls, uri: str) -> JobKey:
        """A file's interactive request: the newest one supersedes the last."""
        return cls("suggest", uri)

    @classmethod
    def file_idle(cls, uri: str) -> JobKey:
        """A file's idle work: warming, re-anchoring, saving and freeing its cache on close."""
        return cls("idle", uri)

    @classmethod
    def climb(cls, uri: str) -> JobKey:
        """Building on towards a file's full prompt."""
        return cls("climb", uri)

    @classmethod
    def block(cls, uri: str) -> JobKey:
        """The block after a file's one-line suggestion."""
        return cls("block", uri)

    @classmethod
    def next_edit(cls, uri: str) -> JobKey:
        """A file's next-edit suggestion."""
        return cls("next-edit", uri)

    @classmethod
    def persist_file(cls, uri: str) -> JobKey:
        """Saving one file's KV cache a while after its last suggestion: the server's own
        work, which shutdown lets finish."""
        return cls("persist-file", uri)

    @classmethod
    def server(cls, kind: Literal["load", "persist"]) -> JobKey:
        """The server's own work: loading the model, saving every KV cache."""
        return cls(kind)

    @classmethod
    def unload(cls, serial: int) -> JobKey:
        """Freeing one model (number `serial`): each release has its own key, for idle work
        of one key replaces the last one queued, which would leave that model unfreed."""
        return cls("unload", serial=serial)

    @classmethod
    def call(cls, serial: int) -> JobKey:
        """The queue slot of `Scheduler.call` number `serial` (never superseded)."""
        return cls("call", serial=serial)

    @classmethod
    def session_job(cls, session: int, kind: SessionKind) -> JobKey:
        """A daemon session's clean-up, queued by the daemon itself."""
        return cls(kind, session=session)

    def in_session(self, session: int) -> JobKey:
        """This key as a daemon session's (its view of the shared scheduler)."""
        return dataclasses.replace(self, session=session)

    # ------------------------------------------------------------------ the rule

    def cancelled_by(self, session: int | None) -> bool:
        """Whether `Scheduler.cancel_files(session)` cancels this job: the session's every job
        but the server's own (see the module's docstring)."""
        return self.session == session and self.kind not in SERVER_KINDS

    def __str__(self) -> str:
        parts = [] if self.session is None else [f"session {self.session}:"]
        if self.uri is not None:
            parts.append(self.uri)
        parts.append(f"{self.kind} {self.serial}" if self.kind in ("call", "unload")
                     else self.kind)
        return " ".join(parts)
