"""Soak: tens of thousands of keystrokes across many files against the real server and the tiny
model (issue 14). Every request must be answered, and after a warm-up the server's memory,
file descriptors and threads must stay flat: a leak of a few hundred bytes per keystroke
shows here.

The full soak (20,000 keystrokes over 50 files) is marked slow; a short one (3,000 over 10)
runs in the default suite. `pytest -s` prints the figures.
"""

from __future__ import annotations

import asyncio
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from lsprotocol import types

from lsp_complete.testing.lsp_client import (
    close_doc,
    inline_params,
    insert,
    move_cursor,
    open_doc,
    poll_status,
)
from tests.lsp_helpers import start_server

# What a burst of keystrokes types in one file, one character at a time: a line of code (a new
# one each time: suggestions cannot come from an earlier burst) and a new line; then one edit
# removes the line again (an undo), so that files, prompts and the KV cells they fill stay the
# same size and only a leak can make memory grow.
TYPED = "    total = total + count_items(path_{n:05d}, limit={n:05d})\n"
BURST = len(TYPED.format(n=0)) + 1
SOURCE = '''import os
from pathlib import Path


def count_items(path, limit):
    return len(os.listdir(path))[:limit]


def walk_{n}(root):
    total = 0
{body}    return total
'''
BODY_LINE = 10  # where typing starts in SOURCE


@dataclass
class Figures:
    keystrokes: int
    requests: int
    seconds: float
    rss_start_mib: float
    rss_end_mib: float
    rss_peak_mib: float
    fds: tuple[int, int]
    threads: tuple[int, int]
    counters: dict[str, int]  # the server's, at the end (suggestions shown, superseded...)

    def __str__(self) -> str:
        return (f"{self.keystrokes} keystrokes, {self.requests} requests in {self.seconds:.0f} s; "
                f"RSS {self.rss_start_mib:.1f} -> {self.rss_end_mib:.1f} MiB after warm-up "
                f"(peak {self.rss_peak_mib:.1f}); fds {self.fds[0]} -> {self.fds[1]}; "
                f"threads {self.threads[0]} -> {self.threads[1]}; {self.counters}")


def _proc(pid: int) -> tuple[float, int, int]:
    """(RSS in MiB, open fds, threads) of a process."""
    with open(f"/proc/{pid}/status") as f:
        rss = next(int(line.split()[1]) for line in f if line.startswith("VmRSS:")) / 1024
    return rss, len(os.listdir(f"/proc/{pid}/fd")), len(os.listdir(f"/proc/{pid}/task"))


class _File:
    def __init__(self, index: int) -> None:
        self.uri = f"file:///soak/module_{index}.py"
        self.text = SOURCE.format(n=index, body="")
        self.version = 1
        self.line, self.col, self.typed = BODY_LINE, 0, 0
        self.line_text = ""

    def open(self, client: Any) -> None:
        open_doc(client, self.uri, self.text, version=self.version)

    def reopen(self, client: Any) -> None:
        close_doc(client, self.uri)
        self.version += 1
        self.open(client)

    def keystroke(self, client: Any) -> None:
        self.version += 1
        step = self.typed % BURST
        self.typed += 1
        if step == 0:
            self.line_text = TYPED.format(n=self.typed // BURST)
        if step == BURST - 1:  # the line is typed: undo it
            replace(client, self.uri, self.version, BODY_LINE, 0, BODY_LINE + 1, 0, "")
            self.line, self.col = BODY_LINE, 0
            return
        ch = self.line_text[step]
        insert(client, self.uri, self.version, self.line, self.col, ch)
        if ch == "\n":
            self.line, self.col = self.line + 1, 0
        else:
            self.col += 1


def replace(client: Any, uri: str, version: int, start_line: int, start_char: int,
            end_line: int, end_char: int, text: str) -> None:
    client.text_document_did_change(
        types.DidChangeTextDocumentParams(
            text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=version),
            content_changes=[
                types.TextDocumentContentChangePartial(
                    range=types.Range(
                        start=types.Position(line=start_line, character=start_char),
                        end=types.Position(line=end_line, character=end_char),
                    ),
                    text=text,
                )
            ],
        )
    )


async def soak(client: Any, pid: int, files: int, keystrokes: int, warmup: int,
               request_every: int = 10, reopen_every: int = 20) -> Figures:
    """Type `keystrokes` keystrokes, a burst (one line, see `TYPED`) in one file then the next,
    asking for a suggestion every `request_every` keystrokes (not waiting: a later keystroke
    supersedes it) and waiting for all of them at the end of each burst. Closes and reopens
    the file at the end of every `reopen_every`-th burst. Measures after `warmup` keystrokes
    and at the end."""
    burst = BURST
    docs = [_File(i) for i in range(files)]
    for doc in docs:
        doc.open(client)
    requests = 0
    start = _proc(pid)
    peak = start[0]
    t0 = time.monotonic()
    pending: list[asyncio.Future] = []
    for k in range(keystrokes):
        doc = docs[(k // burst) % files]
        if k % burst == 0:
            move_cursor(client, doc.uri, doc.line, doc.col)
        doc.keystroke(client)
        if k % request_every == request_every - 1:
            pending.append(asyncio.ensure_future(  # sent now, not when awaited
                client.protocol.send_request_async(
                    types.TEXT_DOCUMENT_INLINE_COMPLETION, inline_params(doc.uri, doc.line, doc.col)
                )
            ))
            requests += 1
        if k % burst == burst - 1 and (k // burst) % reopen_every == reopen_every - 1:
            doc.reopen(client)  # its text is the one it was opened with again
        if k % burst == burst - 1 or k == keystrokes - 1:
            answers = await asyncio.wait_for(asyncio.gather(*pending, return_exceptions=True), 60)
            errors = [a for a in answers if isinstance(a, BaseException)]
            assert not errors, errors[:3]  # every request answered, none with an error
            assert all(a is None or isinstance(a, types.InlineCompletionList) for a in answers)
            pending.clear()
            if k >= warmup:
                peak = max(peak, _proc(pid)[0])
        if k == warmup - 1:
            await poll_status(client, lambda st: st["scheduler"]["idle"], 30)
            start = _proc(pid)
            peak = start[0]
    st = await poll_status(client, lambda st: st["scheduler"]["idle"], 30)
    end = _proc(pid)
    counters = {**st["counters"], "modelCalls": st["engineCounters"]["calls"]}
    return Figures(keystrokes, requests, time.monotonic() - t0, start[0], end[0],
                   max(peak, end[0]), (start[1], end[1]), (start[2], end[2]), counters)


async def _run(model: Path, files: int, keystrokes: int, warmup: int) -> Figures:
    # No idle work from timers mid-measurement beyond what typing triggers; KV persistence on.
    client = await start_server(model, {"maxTokens": 16, "multiline": "never"})
    try:
        figures = await soak(client, client._server.pid, files, keystrokes, warmup)
    finally:
        await client.shutdown_session()
    print(f"\nsoak: {figures}")
    return figures


async def test_a_short_soak_leaks_nothing(tiny_model_path: Path) -> None:
    figures = await _run(tiny_model_path, files=10, keystrokes=3_000, warmup=500)
    # About 1 MiB here (caches filling); pygls' future per keystroke made it 5 MiB.
    assert figures.rss_end_mib - figures.rss_start_mib < 3
    assert figures.fds[1] <= figures.fds[0]
    assert figures.threads[1] <= figures.threads[0]


@pytest.mark.slow
async def test_a_soak_of_20000_keystrokes_over_50_files(tiny_model_path: Path) -> None:
    figures = await _run(tiny_model_path, files=50, keystrokes=20_000, warmup=2_000)
    assert figures.rss_end_mib - figures.rss_start_mib < 10
    assert figures.fds[1] <= figures.fds[0]
    assert figures.threads[1] <= figures.threads[0]
