"""Scheduler keys: what each names, and the one rule of which jobs a shutdown cancels, the
same as the NUL-separated string keys they replaced had it."""

from __future__ import annotations

import itertools

import pytest

from lsp_complete.jobkey import FILE_KINDS, SERVER_KINDS, SESSION_KINDS, JobKey

URIS = ("file:///a.py", "file:///b%20c.py", "untitled:Untitled-1")


def legacy(key: JobKey) -> str:
    """The string each key was before `JobKey` (server/files.py, pipeline/next_edit.py,
    server/model.py, scheduler.py, daemon/server.py at a3c4661)."""
    if key.kind in SESSION_KINDS:  # queued by the daemon itself, not through the session
        return f"{key.session}\0{key.kind}"
    own = {
        "suggest": lambda: key.uri,
        "idle": lambda: key.uri,
        "climb": lambda: f"{key.uri}\0climb",
        "block": lambda: f"{key.uri}\0block",
        "next-edit": lambda: f"{key.uri}\0next-edit",
        "persist-file": lambda: f"\0persist:{key.uri}",
        "load": lambda: "\0load",
        "unload": lambda: f"\0unload{key.serial}",
        "persist": lambda: "\0persist",
        "call": lambda: f"\0call{key.serial}",
    }[key.kind]()
    assert own is not None
    return own if key.session is None else f"{key.session}\0{own}"


def legacy_cancel_all(key: str, prefix: str) -> bool:
    """`Scheduler.cancel_all(prefix)` as it was."""
    return key.startswith(prefix) and not key[len(prefix):].startswith("\0")


def every_key(sessions: tuple[int, ...]) -> list[JobKey]:
    keys: list[JobKey] = []
    for uri in URIS:
        keys += [JobKey.suggest(uri), JobKey.file_idle(uri), JobKey.climb(uri),
                 JobKey.block(uri), JobKey.next_edit(uri), JobKey.persist_file(uri)]
    keys += [JobKey.server("load"), JobKey.unload(3), JobKey.server("persist"),
             JobKey.call(7)]
    in_process = list(keys)
    for session in sessions:
        keys += [k.in_session(session) for k in in_process]
        keys += [JobKey.session_job(session, "shutdown-persist"),
                 JobKey.session_job(session, "drop")]
    return keys


def test_every_kind_is_covered_once() -> None:
    assert not FILE_KINDS & SERVER_KINDS and not FILE_KINDS & SESSION_KINDS
    assert not SERVER_KINDS & SESSION_KINDS
    assert {k.kind for k in every_key((1,))} == FILE_KINDS | SERVER_KINDS | SESSION_KINDS


def test_the_in_process_shutdown_cancels_what_it_did() -> None:
    """`cancel_files()` is the old `cancel_all("")` on the server's own scheduler: every
    file's work, not the server's own (NUL keys: load, unload, persist, `\\0persist:{uri}`,
    a call's slot)."""
    for key in every_key(()):
        assert key.cancelled_by(None) == legacy_cancel_all(legacy(key), ""), str(key)
    cancelled = {k.kind for k in every_key(()) if k.cancelled_by(None)}
    assert cancelled == {"suggest", "idle", "climb", "block", "next-edit"}


def test_a_daemon_sessions_shutdown_cancels_what_it_did() -> None:
    """`cancel_files(sid)` is the old `cancel_all(f"{sid}\\0")` on the daemon's shared
    scheduler, which also holds other sessions' keys (11 begins like 1) and the daemon's own
    (`\\0persist` at stop, a `call`)."""
    sessions = (1, 2, 11)
    for key, session in itertools.product(every_key(sessions), sessions):
        was = legacy_cancel_all(legacy(key), f"{session}\0")
        assert key.cancelled_by(session) == was, (str(key), session)
    cancelled = {k.kind for k in every_key(sessions) if k.cancelled_by(1)}
    assert cancelled == {"suggest", "idle", "climb", "block", "next-edit",
                         "shutdown-persist", "drop"}  # the session's clean-up: pinned
    assert {k.session for k in every_key(sessions) if k.cancelled_by(1)} == {1}


def test_equal_keys_are_the_same_job_and_distinct_ones_are_not() -> None:
    """Keys are equal exactly when their strings were (a file's interactive and idle work
    shared the URI as key, in separate queues: their kinds now tell them apart)."""
    keys = every_key((1, 2))
    for a, b in itertools.combinations(keys, 2):
        same_string = legacy(a) == legacy(b)
        if {a.kind, b.kind} == {"suggest", "idle"}:
            continue
        assert (a == b) == same_string, (str(a), str(b))
    assert len(set(keys)) == len(keys)
    assert JobKey.climb("file:///a.py") == JobKey.climb("file:///a.py")
    assert hash(JobKey.block("x:y").in_session(3)) == hash(JobKey("block", "x:y", 3))


def test_a_session_view_sets_the_session() -> None:
    key = JobKey.climb("file:///a.py")
    assert key.in_session(4) == JobKey("climb", "file:///a.py", session=4)
    assert key.session is None  # frozen: a new key


def test_keys_read_well_in_logs() -> None:
    assert str(JobKey.suggest("file:///a.py")) == "file:///a.py suggest"
    assert str(JobKey.climb("file:///a.py").in_session(2)) == "session 2: file:///a.py climb"
    assert str(JobKey.server("load")) == "load"
    assert str(JobKey.call(12)) == "call 12"
    assert str(JobKey.session_job(3, "shutdown-persist")) == "session 3: shutdown-persist"
    assert "\0" not in "".join(str(k) for k in every_key((1,)))


def test_a_key_has_a_uri_exactly_when_its_kind_names_a_file() -> None:
    with pytest.raises(ValueError):
        JobKey("climb")
    with pytest.raises(ValueError):
        JobKey("load", "file:///a.py")
    with pytest.raises(ValueError):
        JobKey("drop")  # a session's clean-up names its session
    assert JobKey.persist_file("file:///a.py").uri == "file:///a.py"


def test_uris_that_collided_as_strings_are_distinct_keys() -> None:
    """Behaviour the strings had only for URIs no editor sends (pinned as the change it is):
    a URI ending in NUL+"climb" was another file's climb key, one starting with NUL was
    spared by shutdown as the server's own, and a session's document named "drop" shared
    its key with the session's clean-up."""
    assert legacy(JobKey.suggest("a\0climb")) == legacy(JobKey.climb("a"))
    assert JobKey.suggest("a\0climb") != JobKey.climb("a")
    assert not legacy_cancel_all(legacy(JobKey.suggest("\0x")), "")
    assert JobKey.suggest("\0x").cancelled_by(None)
    assert legacy(JobKey.file_idle("drop").in_session(1)) == legacy(JobKey.session_job(1, "drop"))
    assert JobKey.file_idle("drop").in_session(1) != JobKey.session_job(1, "drop")
