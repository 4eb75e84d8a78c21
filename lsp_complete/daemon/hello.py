"""The first line on a daemon connection, before any LSP byte: who connects and what for.

The client sends one JSON object and a line break: `kind` (session | status | stop | retire),
its `version` and `pid`, and for a session the `model` of `serve --model`, the
`maxMessageBytes` of `serve --max-message-bytes` and the `identity` of the daemon it wants
(paths.identity: user, code, cache folder, environment, model). The daemon answers one JSON
line: `ok`, its `version` and `pid`, and an `error` when it refuses (a version mismatch is
`"error": "version"`, a daemon of another identity `"error": "identity"`); a status request
also gets the `status`. A session's LSP messages
follow in both directions; the other kinds end there.
"""

from __future__ import annotations

import json
import socket
from typing import Any

import lsp_complete

KINDS = ("session", "status", "stop", "retire")
MAX_LINE = 64 * 1024
VERSION_MISMATCH = "version"
OTHER_IDENTITY = "identity"


class HelloError(Exception):
    """The other side did not answer with a hello line."""


def version() -> str:
    """This code's version, as both sides compare it (read when asked, not at import)."""
    return lsp_complete.__version__


def encode(message: dict[str, Any]) -> bytes:
    return json.dumps(message, separators=(",", ":")).encode() + b"\n"


def decode(line: bytes) -> dict[str, Any]:
    try:
        message = json.loads(line)
    except ValueError as exc:
        raise HelloError(f"not a hello line: {line[:80]!r}") from exc
    if not isinstance(message, dict):
        raise HelloError(f"not a hello line: {line[:80]!r}")
    return message


def read_line(sock: socket.socket, timeout: float) -> tuple[dict[str, Any], bytes]:
    """The hello line a peer sent (blocking, within `timeout`), and the bytes after it."""
    sock.settimeout(timeout)
    buf = b""
    try:
        while b"\n" not in buf:
            chunk = sock.recv(4096)
            if not chunk:
                raise HelloError("the daemon closed the connection")
            buf += chunk
            if len(buf) > MAX_LINE:
                raise HelloError("the daemon's hello line is too long")
    except OSError as exc:  # socket.timeout included
        raise HelloError(f"no hello from the daemon: {exc}") from exc
    finally:
        sock.settimeout(None)
    line, _, rest = buf.partition(b"\n")
    return decode(line), rest
