"""`lsp-complete daemon status | stop | run`, and whether `serve` uses the daemon at all."""

from __future__ import annotations

import json
import os
import time
from typing import Any

from lsp_complete.daemon import hello as wire
from lsp_complete.daemon.paths import (
    NO_DAEMON_ENV,
    RuntimeDirError,
    environment_sockets,
    socket_path,
)
from lsp_complete.daemon.start import exchange
from lsp_complete.processes import process_alive

STOP_WAIT_S = 45.0  # the daemon saves its KV caches before it exits (at most 30 s)


def wanted(tcp: bool, no_daemon: bool, api_key_env: str | None) -> bool:
    """Whether `serve` goes through the daemon: stdio on a POSIX system, unless turned off.
    `--api-key-env` stays in process too: the key is in this process's environment."""
    off = os.environ.get(NO_DAEMON_ENV, "").strip().lower() not in ("", "0", "false", "no")
    return os.name == "posix" and not (tcp or no_daemon or off or api_key_env)


def request(kind: str) -> list[dict[str, Any]]:
    """The answers to a `kind` request of this environment's daemons (the shared socket's and
    those of a model alone, see paths): none when no daemon answers."""
    replies = []
    for path in environment_sockets():
        conn = exchange(path, {"kind": kind, "version": wire.version(), "pid": os.getpid()})
        if conn is not None:
            conn.sock.close()
            replies.append(conn.reply)
    return replies


def cli_status(as_json: bool = False) -> int:
    try:
        replies = request("status")
    except RuntimeDirError as exc:
        print(f"lsp-complete daemon: {exc}")
        return 2
    if not replies:
        print(f"no daemon running ({socket_path()}); `lsp-complete serve` starts one")
        return 1
    statuses = [reply.get("status") or {} for reply in replies]
    if as_json:  # one daemon: its status; several (editors asking for other models): a list
        print(json.dumps(statuses[0] if len(statuses) == 1 else statuses, indent=2))
        return 0
    for status in statuses:
        _print_status(status)
    return 0


def _print_status(status: dict[str, Any]) -> None:
    engine = status.get("engine") or {}
    print(f"daemon pid {status.get('pid')}, lsp-complete {status.get('version')}, up "
          f"{status.get('uptimeSeconds')} s, {status.get('rssMiB')} MiB resident")
    print(f"  socket: {status.get('socket')}")
    print(f"  model:  {engine.get('name', 'none loaded yet')} {engine.get('path', '')}".rstrip())
    sessions = status.get("sessions") or []
    print(f"  sessions: {len(sessions)}" + ("" if sessions else
          f" (exits after {status.get('idleExitSeconds')} s without one)"))
    for session in sessions:
        print(f"    #{session['id']}: frontend pid {session['frontendPid']}, "
              f"{session['documents']} open document(s), model {session['modelState']}")


def cli_stop() -> int:
    try:
        replies = request("stop")
    except RuntimeDirError as exc:
        print(f"lsp-complete daemon: {exc}")
        return 2
    if not replies:
        print("no daemon running")
        return 0
    code = 0
    deadline = time.monotonic() + STOP_WAIT_S
    for pid in (reply.get("pid") for reply in replies):
        while isinstance(pid, int) and process_alive(pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        if isinstance(pid, int) and process_alive(pid):
            print(f"daemon pid {pid} is still saving its caches")
            code = 1
        else:
            print(f"daemon pid {pid} stopped (editors still open start a new one when they "
                  "need it)")
    return code


def cli_run(idle_minutes: float | None, model: str | None = None,
            model_socket: bool = False) -> int:
    from lsp_complete.daemon.server import run_daemon

    return run_daemon(idle_minutes, model, model_socket)
