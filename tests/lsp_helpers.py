"""Start the real server as a subprocess under pytest-lsp's test client, and watch process trees.

What the client sends and reads (documents, requests, status) is
`lsp_complete.testing.lsp_client`, shared with the bench and the demo.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from pathlib import Path
from typing import Any

from lsprotocol import types
from pytest_lsp.client import LanguageClient, make_test_lsp_client

from lsp_complete.testing.lsp_client import (
    client_capabilities,
    initialize_params,
    launch,
    status,
    wait_for_state,
)

# A small file with a half-typed call on line 11, shared by the server tests.
SOURCE = '''import os
from pathlib import Path


def read_lines(path):
    with open(path) as f:
        return [line.rstrip() for line in f]


def count_words(path):
    total = 0
    for line in read_li
    return total
'''


async def start_server(
    model: str | Path | None,
    init_options: dict[str, Any] | None = None,
    encodings: list[str] | None = None,
    env: dict[str, str] | None = None,
    wait_ready: bool = True,
    workspace_folders: list[str] | None = None,
) -> LanguageClient:
    client = make_test_lsp_client()
    await launch(client, model, env=env)
    await client.initialize_session(
        initialize_params(
            {"threads": 1, "contextSize": 4096, **(init_options or {})},
            client_capabilities(encodings=encodings, work_done_progress=True),
            workspace_folders=workspace_folders,
        )
    )
    if wait_ready:
        await wait_for_state(client, ("ready", "error"))
    return client


async def load_failure_told(client: LanguageClient) -> str:
    """The one error message a server whose model failed to load told the client."""
    assert (await status(client))["model"]["state"] == "error"
    await asyncio.sleep(0.1)
    (told,) = [m.message for m in client.messages if m.type == types.MessageType.Error]
    return told


# --- process trees (the servers editors start must not outlive a test) ------------------------


def _proc_table() -> dict[int, tuple[int, str]]:
    """pid -> (ppid, start time) for every process (Linux /proc)."""
    table: dict[int, tuple[int, str]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()  # comm may hold spaces or parentheses
        table[int(entry.name)] = (int(fields[1]), fields[19])
    return table


def descendants(pid: int) -> dict[int, str]:
    """Every process below `pid`, with its start time (to never signal a reused pid)."""
    table = _proc_table()
    children: dict[int, list[int]] = {}
    for child, (ppid, _) in table.items():
        children.setdefault(ppid, []).append(child)
    out: dict[int, str] = {}
    todo = [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            out[child] = table[child][1]
            todo.append(child)
    return out


def alive(pids: dict[int, str]) -> dict[int, str]:
    table = _proc_table()
    return {p: t for p, t in pids.items() if p in table and table[p][1] == t}


def signal_alive(pids: dict[int, str], sig: int) -> None:
    """Signal those of `pids` still running (the same process: same start time)."""
    for pid in alive(pids):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, sig)
