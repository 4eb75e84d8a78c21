"""`lsp-complete demo`: start the server, type into a file over real LSP, show the ghost text.

The LSP messages are `lsp_complete.testing.lsp_client`'s; this module owns the typing and the
display.
"""

from __future__ import annotations

import asyncio
import contextlib
import statistics
import sys
import time
from importlib import resources
from pathlib import Path
from typing import Any

from lsprotocol import types
from pygls.lsp.client import LanguageClient

from lsp_complete.config import Settings
from lsp_complete.languages import language_of_path
from lsp_complete.oneshot import UsageError, read_source
from lsp_complete.testing import lsp_client
from lsp_complete.testing.lsp_client import server_command, suggestion_from_answer, utf16_len

DIM, RESET = "\x1b[2m", "\x1b[0m"


def sample_span(text: str, lines: int, marker: str = "    def cheapest") -> tuple[int, int]:
    """Line range [start, end) to remove and type back."""
    all_lines = text.split("\n")
    start = next((i for i, line in enumerate(all_lines) if line.startswith(marker)), None)
    if start is None:
        start = max(0, len(all_lines) // 2 - lines // 2)
    return start, min(len(all_lines), start + lines)


async def _demo(
    model: str | None, file: tuple[Path, str] | None, lines: int, out: Any
) -> int:
    if file is None:
        source = resources.files("lsp_complete.data").joinpath("sample.py").read_text("utf-8")
        name = "sample.py"
        span = sample_span(source, lines)
    else:
        path, source = file
        name = path.name
        span = sample_span(source, lines, marker="\0")
    all_lines = source.split("\n")
    typed_lines = all_lines[span[0] : span[1]]
    remaining = all_lines[: span[0]] + [""] + all_lines[span[1] :]
    text = "\n".join(remaining)
    uri = f"file:///demo/{name}"
    tty = out.isatty()

    messages: list[str] = []
    client = LanguageClient("lsp-complete-demo", "1")

    # pygls' JsonRPCClient.feature has no return annotation: the decorator is untyped.
    @client.feature(types.WINDOW_SHOW_MESSAGE)  # type: ignore[untyped-decorator]
    def show_message(_ls: LanguageClient, params: types.ShowMessageParams) -> None:
        messages.append(params.message)
        print(f"[server] {params.message}", file=sys.stderr)

    @client.feature(types.WINDOW_LOG_MESSAGE)  # type: ignore[untyped-decorator]
    def log_message(_ls: LanguageClient, params: types.LogMessageParams) -> None:
        pass

    print(f"starting `lsp-complete {' '.join(server_command(model)[3:])}` ...", file=out)
    await lsp_client.launch(client, model)
    try:
        await lsp_client.initialize(
            client,
            lsp_client.initialize_params(
                {"multiline": "never", "maxTokens": 32}, lsp_client.client_capabilities()
            ),
        )
        started = time.monotonic()
        model_info = await lsp_client.wait_for_model(client, ("ready", "error"), 600, poll_s=0.2)
        if model_info.get("state") != "ready":
            print(f"the model did not load: {model_info.get('error')}", file=sys.stderr)
            return 1
        print(
            f"model {model_info.get('name')} ready in {time.monotonic() - started:.1f} s "
            f"({model_info.get('device')}); typing {len(typed_lines)} lines of {name}\n",
            file=out,
        )
        lsp_client.open_doc(client, uri, text, language_of_path(name))
        latencies, shown, exact = await _type_lines(client, uri, span[0], typed_lines, out, tty)
    finally:
        with contextlib.suppress(Exception):
            await lsp_client.shutdown(client, 30)
        await client.stop()
    if latencies:
        ordered = sorted(latencies)
        p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
        print(
            f"\n{len(latencies)} keystrokes: p50 {statistics.median(ordered):.0f} ms, "
            f"p95 {p95:.0f} ms; suggestions shown {shown}; "
            f"first line exactly right {exact}",
            file=out,
        )
    return 0


async def _type_lines(
    client: LanguageClient, uri: str, first_line: int, typed_lines: list[str], out: Any, tty: bool
) -> tuple[list[float], int, int]:
    latencies: list[float] = []
    shown = exact = 0
    version = 1
    for offset, full_line in enumerate(typed_lines):
        line = first_line + offset
        if offset > 0:  # press Enter at the end of the previous line
            version += 1
            prev = typed_lines[offset - 1]
            lsp_client.insert(client, uri, version, first_line + offset - 1, utf16_len(prev), "\n")
        for col, char in enumerate(full_line):
            version += 1
            lsp_client.insert(client, uri, version, line, utf16_len(full_line[:col]), char)
            typed = full_line[: col + 1]
            t0 = time.perf_counter()
            answer = await lsp_client.inline(client, uri, line, utf16_len(typed))
            ms = (time.perf_counter() - t0) * 1000
            latencies.append(ms)
            ghost = _ghost(answer, typed)
            if ghost:
                shown += 1
                exact += (typed + ghost).rstrip() == full_line.rstrip()
            shown_ghost = f"{DIM}{ghost}{RESET}" if tty else (f"⟦{ghost}⟧" if ghost else "")
            row = f"{ms:6.0f} ms │ {typed}{shown_ghost}"
            if tty:
                print(f"\r\x1b[K{row}", end="", file=out, flush=True)
            elif col == len(full_line) - 1 or ghost:
                print(row, file=out)
        if tty:
            print(file=out)
    return latencies, shown, exact


def _ghost(answer: Any, typed: str) -> str:
    """The first line of what the suggestion adds after the typed line prefix."""
    return suggestion_from_answer(answer, typed).split("\n", 1)[0]


def run_demo(model: str | None = None, file: str | None = None, lines: int = 4) -> int:
    """`lsp-complete demo`; a --file that is missing, a folder, a FIFO, not UTF-8 text or
    over the server's size cap is said in one line (exit 1) before the server starts."""
    typed: tuple[Path, str] | None = None
    if file:
        try:
            typed = (Path(file), read_source(Path(file), Settings().max_file_bytes))
        except UsageError as exc:
            print(f"lsp-complete demo: {exc}", file=sys.stderr)
            return 1
    return asyncio.run(_demo(model, typed, lines, sys.stdout))
