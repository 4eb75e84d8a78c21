"""A client that asks and does not read (issue 32): the messages that make ~1 MB status
answers, sending them until the server stops taking bytes, reading the answers later, and
the server's memory from /proc (Linux)."""

from __future__ import annotations

import contextlib
import json
import select
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from lsp_complete.daemon.forwarder import Splitter, frame

REQUESTS = 400
SETUP_DONE = -1  # the id of the status request that ends the setup


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError(f"no VmRSS for pid {pid}")


def big_status_setup(model: Path | None, options: dict[str, Any] | None = None) -> bytes:
    """initialize (with `model` unless None, and these initializationOptions), initialized
    and 64 open documents whose URIs are 16 KB each: every status answer then lists ~1 MB of
    them. Its last message is a status request, SETUP_DONE: once that is answered, the
    server has taken the rest."""
    init = {"threads": 1, "contextSize": 4096, **({"model": str(model)} if model else {}),
            **(options or {})}
    messages: list[dict[str, Any]] = [
        {"jsonrpc": "2.0", "id": 0, "method": "initialize",
         "params": {"capabilities": {}, "initializationOptions": init}},
        {"jsonrpc": "2.0", "method": "initialized", "params": {}}]
    messages += [{"jsonrpc": "2.0", "method": "textDocument/didOpen", "params": {
        "textDocument": {"uri": f"file:///{n:03d}/{'d' * 16_000}.py", "languageId": "python",
                         "version": 1, "text": "x = 1\n"}}} for n in range(64)]
    messages.append({"jsonrpc": "2.0", "id": SETUP_DONE, "method": "lsp-complete/status",
                     "params": {"recent": 0}})
    return b"".join(frame(m) for m in messages)


def status_flood(count: int = REQUESTS) -> Iterator[bytes]:
    """Status requests of 64 KB, ids 1..count: when the last is sent, the server has read
    all but the few its socket buffers hold (~400 KB), and answered them (status answers at
    once)."""
    for n in range(1, count + 1):
        yield frame({"jsonrpc": "2.0", "id": n, "method": "lsp-complete/status",
                     "params": {"recent": 0, "pad": "p" * 64_000}})


def send_while_taken(sock: socket.socket, messages: Iterator[bytes], stuck_s: float = 3.0
                     ) -> int:
    """Send messages until the server stops taking bytes (the socket stays unwritable for
    `stuck_s`: the end of the flood, not a measure); how many went out whole."""
    sock.setblocking(False)
    sent = 0
    for data in messages:
        view = memoryview(data)
        while view:
            if not select.select([], [sock], [], stuck_s)[1]:
                return sent
            with contextlib.suppress(BlockingIOError):
                view = view[sock.send(view):]
        sent += 1
    return sent


def read_answers(sock: socket.socket, ids: set[int]) -> set[int]:
    """Read until every id in `ids` is answered (or the server hangs up): the ids seen."""
    sock.setblocking(True)
    sock.settimeout(120)
    split, seen = Splitter(1 << 30), set()
    while not ids <= seen:
        chunk = sock.recv(1 << 20)
        if not chunk:
            break
        seen.update(json.loads(body).get("id") for body in split.feed(chunk))
    return seen
