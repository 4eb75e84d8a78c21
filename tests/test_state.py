"""Per-file server state: its transitions, and the thread that owns it (server/state.py)."""

from __future__ import annotations

import threading

import pytest

from lsp_complete.server import state as state_module
from lsp_complete.server.state import DocState, InFlight


def _in_thread(action) -> BaseException | None:
    caught: list[BaseException] = []

    def run() -> None:
        try:
            action()
        except BaseException as exc:  # noqa: BLE001 - handed back to the test
            caught.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    thread.join(5)
    return caught[0] if caught else None


def test_state_written_off_its_owning_thread_raises(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(state_module, "CHECK_THREADS", True)
    doc = DocState()
    doc.anchor = 10  # the owning thread (here, the test's; in the server, the event loop)
    error = _in_thread(lambda: setattr(doc, "anchor", 20))
    assert isinstance(error, AssertionError) and "anchor" in str(error)
    assert doc.anchor == 10
    # The one field the worker writes: the suggestion being computed, as it grows.
    inflight = InFlight(before="a", after="b")
    assert _in_thread(lambda: setattr(inflight, "partial", "xyz")) is None
    assert inflight.partial == "xyz"
    assert isinstance(_in_thread(lambda: setattr(inflight, "before", "c")), AssertionError)


def test_edits_before_the_anchor_re_anchor_and_requests_bump_the_generation() -> None:
    doc = DocState(anchor=100)
    generation = doc.generation
    doc.edit_begins()
    doc.edited_at(150)  # after the anchor: the prompt stays anchored there
    assert doc.anchor == 100 and not doc.current(generation)
    doc.edited_at(99)
    assert doc.anchor is None
    now = doc.at_cursor(42)
    assert doc.last_cursor == 42 and doc.current(now)

