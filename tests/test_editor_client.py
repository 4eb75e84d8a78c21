"""EditorClient's telling rules, on a stand-in for pygls' server (what is shown, in order)."""

from __future__ import annotations

from typing import Any

from lsprotocol import types

from lsp_complete.server.client import ENGINE_BACK, EditorClient


class ShownMessages:
    """The one method of pygls' LanguageServer that telling uses."""

    def __init__(self) -> None:
        self.shown: list[tuple[types.MessageType, str]] = []

    def window_show_message(self, params: types.ShowMessageParams) -> None:
        self.shown.append((params.type, params.message))


def test_a_lasting_failure_is_told_once_per_cause_and_its_end_once() -> None:
    lsp = ShownMessages()
    client = EditorClient(lsp)  # type: ignore[arg-type]
    busy = "the server is limiting requests (HTTP 429); waiting {} s as it asks"
    for wait in (30, 29, 30):  # the same cause, whatever the numbers in it
        client.tell_engine(busy.format(wait))
    client.tell_engine("the server sent an unusable answer")
    client.tell_engine(busy.format(12))  # back to the first cause: told already
    client.tell_engine(None)
    client.tell_engine(None)  # over once
    client.tell_engine(busy.format(5))  # a new failure: told again
    expected: list[Any] = [
        (types.MessageType.Error, "lsp-complete: " + busy.format(30)),
        (types.MessageType.Error, "lsp-complete: the server sent an unusable answer"),
        (types.MessageType.Info, ENGINE_BACK),
        (types.MessageType.Error, "lsp-complete: " + busy.format(5)),
    ]
    assert lsp.shown == expected
