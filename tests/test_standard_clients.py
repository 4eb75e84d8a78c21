"""Clients that follow the specification and nothing more (tests/strict_client.py), over stdio
(`serve --no-daemon`) and through the shared daemon (`serve`): what `initialize` advertises is
what they use, and they get suggestions with it. And the daemon outlives any client: one that
kills its server's whole process group and tree (LSP4IJ does, through IntelliJ's
OSProcessHandler) leaves it serving the next window."""

# ruff: noqa: F811 (the `world` fixture of test_daemon: its runtime folder and cleanup)

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path
from typing import Any

import pytest

from lsp_complete.pipeline.planner import WINDOW_MAX_TOKENS
from tests.lsp_helpers import SOURCE, descendants, signal_alive
from tests.raw_lsp import RawServer
from tests.strict_client import NotAdvertised, StrictClient
from tests.test_daemon import DaemonWorld, _alive, _wait, daemon_pids, world  # noqa: F401

URI = "file:///work/count.py"
LINE, COL = 11, len("    for line in read_li")
MODES = ["stdio", "daemon"]


def _serve(mode: str, model: Path, world: DaemonWorld, new_session: bool = False) -> RawServer:
    if mode == "stdio":
        return RawServer(model, "--no-daemon", env=world.env, new_session=new_session)
    if os.name != "posix":
        pytest.skip("the daemon needs Unix sockets")
    return RawServer(model, env=world.env, new_session=new_session)


def _daemon_status(world: DaemonWorld) -> dict[str, Any]:
    """The daemon's own status (`lsp-complete daemon status --json`): the test's view, not
    the client's."""
    done = world.cli("daemon", "status", "--json")
    assert done.returncode == 0, done.stdout + done.stderr
    return json.loads(done.stdout)


def _session(mode: str, model: Path, world: DaemonWorld, inline: bool,
             new_session: bool = False) -> StrictClient:
    server = _serve(mode, model, world, new_session)
    client = StrictClient(server, inline)
    client.initialize({"maxTokens": 8})
    return client


def _close(client: StrictClient) -> None:
    try:
        if client.server.alive():
            client.shutdown()
    finally:
        client.server.close()


@pytest.mark.parametrize("mode", MODES)
def test_initialize_advertises_inline_completion(mode: str, tiny_model_path: Path,
                                                 world: DaemonWorld) -> None:
    """Before: no `inlineCompletionProvider` (pygls advertises a feature registered without
    options as nothing), so LSP4IJ and Neovim's built-in inline completion never asked; and
    completion with trigger characters for a client that shows inline suggestions."""
    inline_client = _session(mode, tiny_model_path, world, inline=True)
    plain_client = _session(mode, tiny_model_path, world, inline=False)
    try:
        shown = inline_client.capabilities
        print("inline client:", sorted(shown))
        print("plain client:", sorted(plain_client.capabilities))
        assert shown["inlineCompletionProvider"] == {}
        assert "completionProvider" not in shown  # its completion answer is always empty
        assert shown["textDocumentSync"]["openClose"] and shown["textDocumentSync"]["change"]
        plain = plain_client.capabilities
        assert "inlineCompletionProvider" in plain
        assert plain["completionProvider"]["triggerCharacters"]
    finally:
        _close(inline_client)
        _close(plain_client)


@pytest.mark.parametrize("mode", MODES)
def test_a_strict_inline_client_gets_suggestions(mode: str, tiny_model_path: Path,
                                                 world: DaemonWorld) -> None:
    client = _session(mode, tiny_model_path, world, inline=True)
    try:
        client.open(URI, SOURCE)
        items = client.until_items(lambda: client.inline(URI, LINE, COL))
        assert items and items[0]["insertText"], items
        with pytest.raises(NotAdvertised):  # what it may not ask, it does not
            client.complete(URI, LINE, COL)
    finally:
        _close(client)


@pytest.mark.parametrize("mode", MODES)
def test_a_client_without_inline_support_gets_completion_items(
        mode: str, tiny_model_path: Path, world: DaemonWorld) -> None:
    client = _session(mode, tiny_model_path, world, inline=False)
    try:
        client.open(URI, SOURCE)
        items = client.until_items(lambda: client.complete(URI, LINE, COL))
        assert items and (items[0].get("insertText") or items[0].get("textEdit")), items
    finally:
        _close(client)


# A file several times the first prompt's size, so that a new spot in it is cold.
LONG = "".join(f"def step_{i}(value):\n    total = value * {i}\n    return total + {i}\n\n"
               for i in range(80))
LONG_URI = "file:///work/steps.py"


def _last_record(client: StrictClient) -> dict[str, Any]:
    """The server's record of the last request (the test's view, not the client's)."""
    return client.server.call("lsp-complete/status", {})["result"]["recent"][-1]


def _first_key(client: StrictClient, version: int, line: int) -> dict[str, Any]:
    """A person starts typing at the start of `line`: one key, its inline request."""
    client.insert(LONG_URI, version, line, 4, "r")
    items = client.until_items(lambda: client.inline(LONG_URI, line, 5))
    assert items, "no suggestion"
    return _last_record(client)


@pytest.mark.parametrize("mode", MODES)
def test_a_cursor_at_rest_prepares_the_spot_for_a_standard_client(
        mode: str, tiny_model_path: Path, world: DaemonWorld) -> None:
    """Editors that highlight occurrences ask every server that offers them where the cursor
    rests (textDocument/documentHighlight): the server offers it, answers null, and
    prepares that spot, so a first key typed there encodes only what it typed. Before, the
    request was not advertised, and a first key at a new spot encoded a whole prompt."""
    client = _session(mode, tiny_model_path, world, inline=True)
    try:
        assert client.capabilities.get("documentHighlightProvider")
        client.open(LONG_URI, LONG)
        assert client.until_items(lambda: client.inline(LONG_URI, 1, 4))  # the model is up
        client.server.wait_idle()
        cold = _first_key(client, 2, 200)  # no rest announced: its prompt from nothing
        client.server.wait_idle()
        # null, so that VS Code asks the next provider (an empty list would end its search)
        assert client.highlight(LONG_URI, 100, 4) is None
        answer = client.server.call("textDocument/documentHighlight", {
            "textDocument": {"uri": LONG_URI}, "position": {"line": 100, "character": 4}})
        assert "result" in answer and answer["result"] is None, answer  # (the same rest again)
        client.server.wait_idle()
        prepared = _first_key(client, 3, 100)
        print("cold:", cold, "prepared:", prepared)
        assert cold["encodedTokens"] > 100
        assert prepared["encodedTokens"] < cold["encodedTokens"] / 4
    finally:
        _close(client)


def _encoded(client: StrictClient) -> int:
    """Prompt tokens the engine has encoded so far (the test's view)."""
    found = client.server.wait_idle()
    return int(found["engineCounters"]["tokens_encoded"])


def test_a_cursor_resting_while_a_person_reads_encodes_only_what_a_first_key_takes(
        tiny_model_path: Path, world: DaemonWorld) -> None:
    """A cursor rests as often while a person reads as before a person types, and every
    editor that highlights reports each rest. Each prepared the whole spot: the window, then
    the full prompt (and, in a workspace, the repository block's), both cores busy for the
    whole of a reading rest. Now a rest encodes at most the window a first key there takes;
    the full prompt waits for a keystroke answered at the spot."""
    client = _session("stdio", tiny_model_path, world, inline=True)
    try:
        client.open(LONG_URI, LONG)
        assert client.until_items(lambda: client.inline(LONG_URI, 1, 4))  # the model is up
        time.sleep(0.6)  # the answer's own idle work, once the cursor rests, done first
        before = _encoded(client)
        rests = (300, 200, 100)
        for line in rests:
            assert client.highlight(LONG_URI, line, 4) is None
            client.server.wait_idle()
        per_rest = (_encoded(client) - before) / len(rests)
        print("tokens encoded per rest:", per_rest)
        assert 0 < per_rest <= WINDOW_MAX_TOKENS + 64
        # A key typed there and answered: the full prompt is encoded once the cursor rests.
        first = _first_key(client, 2, 100)
        assert first["encodedTokens"] < 16, first  # the rest prepared it
        window_sized = first["promptTokens"]
        time.sleep(0.6)  # past the idle delay (idleReanchorMs, 400 ms)
        client.server.wait_idle()
        cached = client.server.call("lsp-complete/status", {})["result"]["documents"][0]
        assert cached["cachedTokens"] > window_sized + WINDOW_MAX_TOKENS, (cached, first)
    finally:
        _close(client)


def test_a_client_that_sends_one_language_id_for_every_file(tiny_model_path: Path,
                                                           world: DaemonWorld) -> None:
    """Eglot (1.9, Debian's elpa-eglot; joaotavora/eglot#1384) sends every file of a server
    the languageId of the mode the server started in: a JavaScript file opened after a Python
    one arrives as "python". Before: the id won, so the JavaScript was parsed, its context
    built and its suggestions lexed as Python (`#` a comment). Now the extension decides where
    it rules the id out; an id of its kin still wins (a .h file as C++). `enabled` applies
    to the language read: Python off leaves the JavaScript file on."""
    server = _serve("stdio", tiny_model_path, world)
    client = StrictClient(server, True)
    client.initialize({"maxTokens": 8, "enabled": {"python": False}})
    try:
        client.open(URI, SOURCE)
        client.open("file:///work/app.js", "const x = this.#count + 1;\n", "python")
        client.open("file:///work/util.h", "int f(void);\n", "cpp")
        found = {doc["uri"].rsplit("/", 1)[1]: (doc["language"], doc["languageId"])
                 for doc in client.server.call("lsp-complete/status", {})["result"]["documents"]}
        assert found == {"count.py": ("python", "python"), "app.js": ("javascript", "python"),
                         "util.h": ("cpp", "cpp")}, found
        assert client.until_items(lambda: client.inline("file:///work/app.js", 0, 10))
        assert client.inline(URI, LINE, COL) == []  # Python: off
    finally:
        _close(client)


# --------------------------------------------------------------------------- the daemon


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="walks the process tree in /proc")
def test_killing_a_frontends_group_and_tree_leaves_the_daemon_serving(
        tiny_model_path: Path, world: DaemonWorld) -> None:
    """Before: the daemon was a child of the frontend that started it (a session of its own,
    but its parent unchanged), so a client that kills the server's process tree (LSP4IJ on
    every stop) killed the shared daemon too, with every window's KV caches."""
    first = _session("daemon", tiny_model_path, world, inline=True, new_session=True)
    try:
        first.open(URI, SOURCE)
        assert first.until_items(lambda: first.inline(URI, LINE, COL))
        before = _daemon_status(world)
        frontend = first.server.proc.pid
        assert os.getpgid(frontend) == frontend  # its own group, as the editor started it
        tree = descendants(frontend)
        # What IntelliJ's killProcessTree and a group kill do together.
        os.killpg(frontend, signal.SIGKILL)
        signal_alive(tree, signal.SIGKILL)
        first.server.wait_exit(10)
    finally:
        first.server.close()
    pid = before["pid"]
    assert _alive(pid), "the daemon died with the frontend's process group and tree"
    # The daemon notices the session's end and keeps what it had: the file's KV cache.
    assert _wait(lambda: not _daemon_status(world)["sessions"], 20)
    second = _session("daemon", tiny_model_path, world, inline=True)
    try:
        second.open(URI, SOURCE)
        assert second.until_items(lambda: second.inline(URI, LINE, COL))
        after = _daemon_status(world)
        assert after["pid"] == pid and daemon_pids(world.runtime) == [pid]
        assert after["uptimeSeconds"] >= before["uptimeSeconds"]
        # The test looks (the client never asks): the file's KV cache, saved by the daemon when
        # the killed session ended, came back instead of being computed again.
        seen = second.server.call("lsp-complete/status", {})["result"]
        record = seen["recent"][-1]
        assert seen["engineCounters"]["restored_from_disk"] >= 1, seen["engineCounters"]
        assert record["reusedTokens"] > 0, record
    finally:
        _close(second)
