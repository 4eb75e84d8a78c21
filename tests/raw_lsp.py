"""A raw-bytes LSP client for the robustness and fuzz tests: starts the real server as a
subprocess, writes whatever bytes a test gives it (well-framed or not) and parses the server's
answers itself, with a timeout on every wait so that a hung server fails the test instead of
blocking it. Server-to-client requests are answered with a null result.
"""

from __future__ import annotations

import contextlib
import json
import queue
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

SERVE = [sys.executable, "-m", "lsp_complete", "serve"]


def frame(body: bytes, length: int | None = None) -> bytes:
    """A message as sent on the wire; `length` overrides the true Content-Length."""
    declared = len(body) if length is None else length
    return b"Content-Length: %d\r\n\r\n" % declared + body


def encode(obj: Any) -> bytes:
    return json.dumps(obj).encode()


class RawServer:
    """One `lsp-complete serve` process talking over pipes."""

    def __init__(self, model: str | Path | None, *args: str, env: dict[str, str] | None = None,
                 new_session: bool = False, answers: bool = True) -> None:
        """`env`: the server's whole environment (None: this one); `new_session`: in a
        process group (and session) of its own, as some editors start servers; `answers`:
        whether the server's requests get an empty answer at once (else none)."""
        self.answers = answers
        command = [*SERVE, *(["--model", str(model)] if model else []), *args]
        self._stderr = tempfile.TemporaryFile()  # noqa: SIM115 (closed in close())
        self.proc = subprocess.Popen(
            command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._stderr,
            env=env, start_new_session=new_session,
        )
        self._inbox: queue.Queue[dict[str, Any] | None] = queue.Queue()
        self._kept: list[dict[str, Any]] = []  # read while waiting for something else
        self._next_id = 1000
        self._write_lock = threading.Lock()
        self._reader = threading.Thread(target=self._read_stdout, daemon=True)
        self._reader.start()

    # ------------------------------------------------------------------ writing

    def write(self, data: bytes) -> None:
        with self._write_lock:
            assert self.proc.stdin is not None
            self.proc.stdin.write(data)
            self.proc.stdin.flush()

    def send(self, obj: Any) -> None:
        self.write(frame(encode(obj)))

    def notify(self, method: str, params: Any = None) -> None:
        self.send({"jsonrpc": "2.0", "method": method, "params": params})

    def request(self, method: str, params: Any = None, msg_id: int | str | None = None) -> Any:
        """Send a request; returns its id."""
        if msg_id is None:
            self._next_id += 1
            msg_id = self._next_id
        self.send({"jsonrpc": "2.0", "id": msg_id, "method": method, "params": params})
        return msg_id

    def call(self, method: str, params: Any = None, timeout: float = 30) -> dict[str, Any]:
        """A request and its response (the whole response message)."""
        return self.response(self.request(method, params), timeout)

    def initialize(self, options: dict[str, Any] | None = None, timeout: float = 60) -> None:
        answer = self.call("initialize", {
            "processId": None,
            "capabilities": {},
            "initializationOptions": {"threads": 1, "contextSize": 4096, **(options or {})},
        }, timeout)
        assert "result" in answer, answer
        self.notify("initialized", {})

    def wait_ready(self, timeout: float = 60) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while True:
            status = self.call("lsp-complete/status", {}, timeout)["result"]
            if status["model"]["state"] in ("ready", "error") or time.monotonic() > deadline:
                return status
            time.sleep(0.05)

    def wait_idle(self, attempts: int = 600) -> dict[str, Any]:
        """The status once the server's worker has nothing queued or running (polled every
        50 ms); AssertionError if it stays busy."""
        for _ in range(attempts):
            found = self.call("lsp-complete/status", {"recent": 0})["result"]
            if found["scheduler"]["idle"]:
                return found
            time.sleep(0.05)
        raise AssertionError("the worker stayed busy")

    # ------------------------------------------------------------------ reading

    def response(self, msg_id: Any, timeout: float = 30) -> dict[str, Any]:
        """The response to request `msg_id` (a result or an error)."""
        return self.wait_for(lambda m: "method" not in m and m.get("id") == msg_id, timeout,
                             f"response to {msg_id!r}")

    def wait_for(self, wanted: Any, timeout: float, what: str = "message") -> dict[str, Any]:
        for index, message in enumerate(self._kept):
            if wanted(message):
                return self._kept.pop(index)
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"no {what} within {timeout} s; stderr:\n{self.stderr()}")
            try:
                message = self._inbox.get(timeout=left)
            except queue.Empty:
                continue
            if message is None:
                self._inbox.put(None)  # stays closed for the next wait
                raise EOFError(f"server closed stdout before the {what}; stderr:\n"
                               f"{self.stderr()}")
            if wanted(message):
                return message
            self._kept.append(message)

    def messages(self) -> list[dict[str, Any]]:
        """Everything read so far and not yet returned by a wait."""
        with contextlib.suppress(queue.Empty):
            while (message := self._inbox.get_nowait()) is not None:
                self._kept.append(message)
        return list(self._kept)

    def _read_stdout(self) -> None:
        stream = self.proc.stdout
        assert stream is not None
        try:
            while True:
                length = None
                while True:
                    line = stream.readline()
                    if not line:
                        return
                    if line in (b"\r\n", b"\n"):
                        break
                    name, _, value = line.decode().partition(":")
                    if name.strip().lower() == "content-length":
                        length = int(value)
                assert length is not None, "the server sent a header without Content-Length"
                body = stream.read(length)
                if len(body) < length:
                    return
                message = json.loads(body)
                if "method" in message and "id" in message and self.answers:  # say nothing
                    self.send({"jsonrpc": "2.0", "id": message["id"], "result": None})
                self._inbox.put(message)
        except (OSError, ValueError):
            return
        finally:
            self._inbox.put(None)

    # ------------------------------------------------------------------ the process

    def rss_kib(self) -> int:
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
        raise RuntimeError("no VmRSS")

    def alive(self) -> bool:
        return self.proc.poll() is None

    def wait_exit(self, timeout: float = 30) -> int:
        return self.proc.wait(timeout)

    def stderr(self) -> str:
        self._stderr.seek(0)
        return self._stderr.read().decode(errors="replace")[-20000:]

    def close(self) -> None:
        if self.proc.poll() is None:
            with contextlib.suppress(OSError):
                assert self.proc.stdin is not None
                self.proc.stdin.close()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self._stderr.close()
