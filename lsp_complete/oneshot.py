"""`lsp-complete complete FILE:LINE:COL`: one fill-in-the-middle completion, printed with timing."""

from __future__ import annotations

import dataclasses
import stat
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

from lsp_complete.config import Settings
from lsp_complete.context import ContextLimits
from lsp_complete.documents import Document
from lsp_complete.engine.base import CancelToken, EngineError
from lsp_complete.languages import language_of_path

if TYPE_CHECKING:  # loaded on first use: the model stack is slow to import
    from lsp_complete.pipeline import Completion


class UsageError(Exception):
    pass


def parse_location(location: str) -> tuple[Path, int, int]:
    parts = location.rsplit(":", 2)
    if len(parts) != 3 or not parts[1].isdigit() or not parts[2].isdigit():
        raise UsageError(f"expected FILE:LINE:COL with 1-based numbers, got {location!r}")
    return Path(parts[0]), int(parts[1]), int(parts[2])


def read_source(path: Path, max_bytes: int) -> str:
    """The text of the file the user named (a link to it is followed: they named it), if it
    is a regular file of at most `max_bytes`, the server's cap for an open file (a FIFO
    would block and a device never end)."""
    too_large = f"{path}: over the {max_bytes // 1024} KiB limit for a source file"
    try:
        info = path.stat()
        if not stat.S_ISREG(info.st_mode):
            raise UsageError(f"{path}: not a regular file (a folder, FIFO or device)")
        if info.st_size > max_bytes:
            raise UsageError(too_large)
        with path.open("rb") as file:
            data = file.read(max_bytes + 1)  # it may have grown since
    except FileNotFoundError:
        raise UsageError(f"{path}: no such file") from None
    except OSError as exc:
        raise UsageError(f"{path}: cannot read it ({exc.strerror})") from None
    if len(data) > max_bytes:
        raise UsageError(too_large)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UsageError(
            f"{path}: not UTF-8 text (byte {exc.start}); completion needs a UTF-8 source file"
        ) from None
    if Document.is_binary(text):
        raise UsageError(f"{path}: looks like a binary file, not source code")
    return text


def cli_complete(location: str, model: str | None, max_tokens: int, threads: int | None) -> int:
    from lsp_complete.models import ModelError

    try:
        path, line, col = parse_location(location)
        text = read_source(path, Settings().max_file_bytes)
        doc = Document(path.resolve().as_uri(), language_of_path(path.as_posix()), 0, text)
        if line < 1 or line > doc.line_count:
            raise UsageError(f"{path}: line {line} is outside the file (1..{doc.line_count})")
        start, end = doc.line_range(line - 1)
        if col < 1 or col > end - start + 1:
            raise UsageError(
                f"{path}:{line}: column {col} is outside the line (1..{end - start + 1})"
            )
        cursor = start + col - 1
        settings = Settings(model=model, max_tokens=max_tokens, persist_cache=False)
        if threads:
            settings = dataclasses.replace(settings, threads=threads)
        completion, load_ms, name = _complete(doc, cursor, settings)
    except (UsageError, ModelError, EngineError) as exc:
        print(f"lsp-complete: {exc}", file=sys.stderr)
        return 1
    line_prefix = text[start:cursor]
    print(f"{path}:{line}:{col}  {doc.language_id}, model {name}")
    print(f"{line_prefix}\x1b[2m{completion.text}\x1b[0m" if sys.stdout.isatty() else
          f"{line_prefix}{completion.text}")
    result = completion.result
    print(
        f"-- prompt {completion.prompt_tokens} tokens, generated {result.generated_tokens} tokens, "
        f"{completion.latency_ms:.0f} ms (prefill {result.prefill_ms:.0f} ms, "
        f"generation {result.generate_ms:.0f} ms); model load {load_ms:.0f} ms",
        file=sys.stderr,
    )
    return 0


def _complete(doc: Document, cursor: int,
              settings: Settings) -> tuple[Completion, float, str]:
    from lsp_complete.pipeline import block_wanted, load_completer, prepare

    started = time.perf_counter()
    completer, info, warnings = load_completer(settings)
    for warning in warnings:
        print(f"lsp-complete: warning: {warning}", file=sys.stderr)
    load_ms = (time.perf_counter() - started) * 1000
    try:
        prepared = prepare(doc, cursor, None, settings, ContextLimits())
        completion = completer.run(prepared, CancelToken())
        if block_wanted(prepared, completion):  # what the server ends up showing
            block = completer.block(prepared, completion, CancelToken())
            if block is not None:
                completion = dataclasses.replace(completion, text=block)
        return completion, load_ms, info["name"]
    finally:
        completer.engine.close()
