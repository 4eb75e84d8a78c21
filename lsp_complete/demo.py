"""`lsp-complete demo`: start the server, type into a file over real LSP, show the ghost text."""

from __future__ import annotations

import asyncio
import statistics
import sys
import time
from importlib import resources
from pathlib import Path
from typing import Any

from lsprotocol import types
from pygls.lsp.client import LanguageClient

from lsp_complete.bench.lsp_driver import suggestion_from_answer
from lsp_complete.oneshot import language_id_for_path

DIM, RESET = "\x1b[2m", "\x1b[0m"


def sample_span(text: str, lines: int, marker: str = "    def cheapest") -> tuple[int, int]:
    """Line range [start, end) to remove and type back."""
    all_lines = text.split("\n")
    start = next((i for i, line in enumerate(all_lines) if line.startswith(marker)), None)
    if start is None:
        start = max(0, len(all_lines) // 2 - lines // 2)
    return start, min(len(all_lines), start + lines)


def server_command(model: str | None) -> list[str]:
    command = [sys.executable, "-m", "lsp_complete", "serve"]
    return command + (["--model", model] if model else [])


async def _wait_ready(client: LanguageClient, timeout: float = 600) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        status = await client.protocol.send_request_async("lsp-complete/status", {})
        model = _get(status, "model") or {}
        state = _get(model, "state")
        if state in ("ready", "error") or time.monotonic() > deadline:
            return model
        await asyncio.sleep(0.2)


def _get(obj: Any, key: str) -> Any:
    if isinstance(obj, dict):
        return obj.get(key)
    return getattr(obj, key, None)


async def _demo(model: str | None, file: Path | None, lines: int, out: Any) -> int:
    if file is None:
        source = resources.files("lsp_complete.data").joinpath("sample.py").read_text("utf-8")
        name = "sample.py"
        span = sample_span(source, lines)
    else:
        source = file.read_text("utf-8")
        name = file.name
        span = sample_span(source, lines, marker="\0")
    all_lines = source.split("\n")
    typed_lines = all_lines[span[0] : span[1]]
    remaining = all_lines[: span[0]] + [""] + all_lines[span[1] :]
    text = "\n".join(remaining)
    uri = f"file:///demo/{name}"
    tty = out.isatty()

    messages: list[str] = []
    client = LanguageClient("lsp-complete-demo", "1")

    @client.feature(types.WINDOW_SHOW_MESSAGE)
    def show_message(_ls: LanguageClient, params: types.ShowMessageParams) -> None:
        messages.append(params.message)
        print(f"[server] {params.message}", file=sys.stderr)

    @client.feature(types.WINDOW_LOG_MESSAGE)
    def log_message(_ls: LanguageClient, params: types.LogMessageParams) -> None:
        pass

    print(f"starting `lsp-complete {' '.join(server_command(model)[3:])}` ...", file=out)
    await client.start_io(*server_command(model))
    try:
        await client.initialize_async(
            types.InitializeParams(
                capabilities=types.ClientCapabilities(),
                process_id=None,
                initialization_options={"multiline": "never", "maxTokens": 32},
            )
        )
        client.initialized(types.InitializedParams())
        started = time.monotonic()
        model_info = await _wait_ready(client)
        if _get(model_info, "state") != "ready":
            print(f"the model did not load: {_get(model_info, 'error')}", file=sys.stderr)
            return 1
        print(
            f"model {_get(model_info, 'name')} ready in {time.monotonic() - started:.1f} s "
            f"({_get(model_info, 'device')}); typing {len(typed_lines)} lines of {name}\n",
            file=out,
        )
        language = language_id_for_path(Path(name))
        client.text_document_did_open(
            types.DidOpenTextDocumentParams(
                text_document=types.TextDocumentItem(
                    uri=uri, language_id=language, version=1, text=text
                )
            )
        )
        latencies, shown, exact = await _type_lines(client, uri, span[0], typed_lines, out, tty)
    finally:
        try:
            await asyncio.wait_for(client.shutdown_async(None), 30)
            client.exit(None)
        except Exception:
            pass
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
            _insert(client, uri, version, first_line + offset - 1, _u16(prev), "\n")
        for col, char in enumerate(full_line):
            version += 1
            _insert(client, uri, version, line, _u16(full_line[:col]), char)
            typed = full_line[: col + 1]
            t0 = time.perf_counter()
            answer = await client.text_document_inline_completion_async(
                types.InlineCompletionParams(
                    text_document=types.TextDocumentIdentifier(uri=uri),
                    position=types.Position(line=line, character=_u16(typed)),
                    context=types.InlineCompletionContext(
                        trigger_kind=types.InlineCompletionTriggerKind.Automatic
                    ),
                )
            )
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


def _u16(text: str) -> int:
    """Length in UTF-16 code units, LSP's default position unit."""
    return len(text.encode("utf-16-le")) // 2


def _insert(client: LanguageClient, uri: str, version: int, line: int, char: int, text: str):
    position = types.Position(line=line, character=char)
    client.text_document_did_change(
        types.DidChangeTextDocumentParams(
            text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=version),
            content_changes=[
                types.TextDocumentContentChangePartial(
                    range=types.Range(start=position, end=position), text=text
                )
            ],
        )
    )


def _ghost(answer: Any, typed: str) -> str:
    """The first line of what the suggestion adds after the typed line prefix."""
    return suggestion_from_answer(answer, typed).split("\n", 1)[0]


def run_demo(model: str | None = None, file: str | None = None, lines: int = 4) -> int:
    return asyncio.run(_demo(model, Path(file) if file else None, lines, sys.stdout))
