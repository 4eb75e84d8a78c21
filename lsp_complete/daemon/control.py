"""`lsp-complete daemon status | stop | run`, and whether `serve` uses the daemon at all."""

from __future__ import annotations

import json
import os
import time
from typing import Any

from lsp_complete.daemon import hello as wire
from lsp_complete.daemon.paths import NO_DAEMON_ENV, RuntimeDirError, socket_path
from lsp_complete.daemon.start import exchange

STOP_WAIT_S = 45.0  # the daemon saves its KV caches before it exits (at most 30 s)


def wanted(tcp: bool, no_daemon: bool, api_key_env: str | None) -> bool:
    """Whether `serve` goes through the daemon: stdio on a POSIX system, unless turned off.
    `--api-key-env` stays in process too: the key is in this process's environment."""
    off = os.environ.get(NO_DAEMON_ENV, "").strip().lower() not in ("", "0", "false", "no")
    return os.name == "posix" and not (tcp or no_daemon or off or api_key_env)


def request(kind: str) -> dict[str, Any] | None:
    """The daemon's answer to a `kind` request; None when no daemon answers."""
    conn = exchange(socket_path(), {"kind": kind, "version": wire.version(), "pid": os.getpid()})
    if conn is None:
        return None
    conn.sock.close()
    return conn.reply


def cli_status(as_json: bool = False) -> int:
    try:
        reply = request("status")
    except RuntimeDirError as exc:
        print(f"lsp-complete daemon: {exc}")
        return 2
    if reply is None:
        print(f"no daemon running ({socket_path()}); `lsp-complete serve` starts one")
        return 1
    status = reply.get("status") or {}
    if as_json:
        print(json.dumps(status, indent=2))
        return 0
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
    return 0


def cli_stop() -> int:
    try:
        reply = request("stop")
    except RuntimeDirError as exc:
        print(f"lsp-complete daemon: {exc}")
        return 2
    if reply is None:
        print("no daemon running")
        return 0
    pid = reply.get("pid")
    deadline = time.monotonic() + STOP_WAIT_S
    while isinstance(pid, int) and _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    if isinstance(pid, int) and _alive(pid):
        print(f"daemon pid {pid} is still saving its caches")
        return 1
    print(f"daemon pid {pid} stopped (editors still open start a new one when they need it)")
    return 0


def cli_run(idle_minutes: float | None) -> int:
    from lsp_complete.daemon.server import run_daemon

    return run_daemon(idle_minutes)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
