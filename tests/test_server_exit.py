"""How a stdio server ends when no `shutdown` comes: a signal, stdin closed, `exit` alone, or the
editor's process gone (initialize's processId). Each way saves the KV caches first, as
`shutdown` does, and none writes a traceback (round 5: SIGTERM and SIGHUP killed the process
with nothing saved, and a server whose editor was gone ran on for as long as something held
its stdin open)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from lsp_complete.processes import EDITOR_CHECK_S
from tests.raw_lsp import RawServer

URI = "file:///work/ending.py"
TEXT = "def add(a, b):\n    return \n"


def started(model: Path, cache: Path, process_id: int | None = None) -> RawServer:
    """A ready server that has answered one suggestion (so it holds a KV cache to save)."""
    server = RawServer(model, env={**os.environ, "LSP_COMPLETE_CACHE_DIR": str(cache)})
    answer = server.call("initialize", {"processId": process_id, "capabilities": {},
                                        "initializationOptions": {"threads": 1}})
    assert "result" in answer, answer
    server.notify("initialized", {})
    assert server.wait_ready()["model"]["state"] == "ready"
    server.notify("textDocument/didOpen", {"textDocument": {
        "uri": URI, "languageId": "python", "version": 1, "text": TEXT}})
    asked = server.request("textDocument/inlineCompletion", {
        "textDocument": {"uri": URI}, "position": {"line": 1, "character": 11},
        "context": {"triggerKind": 2}})
    assert "result" in server.response(asked, timeout=60)
    return server


def _signal(sig: signal.Signals) -> Callable[[RawServer], None]:
    return lambda server: server.proc.send_signal(sig)


def _close_stdin(server: RawServer) -> None:
    assert server.proc.stdin is not None
    server.proc.stdin.close()


ENDINGS: dict[str, tuple[Callable[[RawServer], Any], int]] = {
    "SIGTERM": (_signal(signal.SIGTERM), 0),
    "SIGHUP": (_signal(signal.SIGHUP), 0),
    "SIGINT": (_signal(signal.SIGINT), 0),
    "stdin closed": (_close_stdin, 0),
    "exit without shutdown": (lambda server: server.notify("exit"), 1),  # the spec's code
}


@pytest.mark.parametrize("ending", list(ENDINGS))
def test_a_server_ended_without_shutdown_saves_its_caches(
        ending: str, tmp_path: Path, tiny_model_path: Path) -> None:
    end, code = ENDINGS[ending]
    server = started(tiny_model_path, tmp_path / "cache")
    try:
        end(server)
        assert server.wait_exit(30) == code
        kv = tmp_path / "cache" / "kv"
        assert kv.is_dir() and list(kv.iterdir()), f"{ending}: no KV cache saved"
        assert "Traceback" not in server.stderr()
    finally:
        server.close()


def test_the_server_exits_once_the_editors_process_is_gone(
        tmp_path: Path, tiny_model_path: Path) -> None:
    editor = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    server = started(tiny_model_path, tmp_path / "cache", process_id=editor.pid)
    try:
        time.sleep(EDITOR_CHECK_S / 2)
        assert server.alive()  # the editor is there: so is the server
        editor.kill()
        editor.wait()
        # Its stdin is still open (this test holds it), as a wrapper or a crashed editor's
        # orphaned pipe would keep it.
        assert server.wait_exit(EDITOR_CHECK_S * 5) == 0
        assert list((tmp_path / "cache" / "kv").iterdir()), "no KV cache saved"
    finally:
        editor.kill()
        server.close()


def test_an_editor_process_not_on_this_machine_is_not_watched(
        tmp_path: Path, tiny_model_path: Path) -> None:
    """A server started over ssh or `docker exec` is sent a pid of another machine or
    container: exiting because it is not found here would end every such session at once."""
    elsewhere = subprocess.Popen([sys.executable, "-c", "pass"])
    elsewhere.wait()  # a pid that names no process here
    server = started(tiny_model_path, tmp_path / "cache", process_id=elsewhere.pid)
    try:
        time.sleep(EDITOR_CHECK_S * 1.5)
        assert server.alive()
        assert "result" in server.call("lsp-complete/status", {})
    finally:
        server.close()


def test_a_frontend_of_the_daemon_exits_once_its_editors_process_is_gone(
        tmp_path: Path, tiny_model_path: Path) -> None:
    """The default: `serve` forwards to the shared engine daemon. The frontend watches the
    editor's process too; the daemon ends the session and serves on."""
    from lsp_complete.daemon import paths
    from tests.test_daemon import daemon_pids

    env = {k: v for k, v in os.environ.items() if k != paths.NO_DAEMON_ENV}
    env[paths.RUNTIME_ENV] = str(tmp_path / "run")
    env["LSP_COMPLETE_CACHE_DIR"] = str(tmp_path / "cache")
    editor = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    server = RawServer(tiny_model_path, env=env)
    try:
        answer = server.call("initialize", {"processId": editor.pid, "capabilities": {},
                                            "initializationOptions": {"threads": 1}})
        assert "result" in answer, answer
        server.notify("initialized", {})
        status = server.wait_ready()
        assert status["model"]["state"] == "ready" and status.get("daemon"), status
        time.sleep(EDITOR_CHECK_S / 2)
        assert server.alive()  # the editor is there: so is the frontend
        editor.kill()
        editor.wait()
        assert server.wait_exit(EDITOR_CHECK_S * 5) == 0
        assert daemon_pids(tmp_path / "run"), "the daemon serves on"
    finally:
        editor.kill()
        server.close()
        subprocess.run([sys.executable, "-m", "lsp_complete", "daemon", "stop"], env=env,
                       capture_output=True, timeout=60)
        for pid in daemon_pids(tmp_path / "run"):
            os.kill(pid, signal.SIGKILL)


def test_no_process_is_ever_signalled_off_posix(monkeypatch: pytest.MonkeyPatch) -> None:
    """On Windows os.kill(pid, 0) ends the process (TerminateProcess): the editor's process
    must never be asked about there, only not watched."""
    from lsp_complete import processes

    def kill(_pid: int, _sig: int) -> None:
        raise AssertionError("os.kill called")

    monkeypatch.setattr(processes.os, "name", "nt")
    monkeypatch.setattr(processes.os, "kill", kill)
    assert processes.watchable(os.getpid()) is None
    assert processes.process_alive(os.getpid())
