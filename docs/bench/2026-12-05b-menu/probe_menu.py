"""With VS Code's suggest widget open on the right identifier, what does the inline
suggestion show? Spots: a line typed up to 2-3 characters into an identifier (the rest of
the line not there yet); the selected item is that whole identifier over the typed part.
VS Code shows an inline item beside the menu only if it starts at the item's start and its
text starts with the item's text. Usage: probe_menu.py PYTHON MODEL OUT.json FILES..."""

from __future__ import annotations

import asyncio
import json
import os
import random
import re
import sys
import time
from pathlib import Path

from lsprotocol import types
from pytest_lsp.client import make_test_lsp_client

from lsp_complete.testing.lsp_client import (
    client_capabilities,
    initialize_params,
    launch,
    open_doc,
    replace_all,
    suggestion_of,
    wait_for_state,
    wait_idle,
)

IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]{4,}")
LANG = {".py": "python", ".js": "javascript", ".ts": "typescript", ".go": "go", ".rs": "rust",
        ".java": "java", ".c": "c", ".cc": "cpp", ".cpp": "cpp"}


def spots(path: Path, count: int, rng: random.Random) -> list[tuple[int, int, int, str]]:
    """(line, word start, cursor, word) for identifiers after some code on their line."""
    lines = path.read_text(errors="replace").split("\n")
    found = []
    for n, line in enumerate(lines):
        if line.lstrip().startswith(("//", "#", "*", "/*")):
            continue
        for m in IDENT.finditer(line):
            if m.start() > len(line) - len(line.lstrip()) and m.end() < len(line.rstrip()):
                found.append((n, m.start(), m.start() + rng.choice((2, 3)), m.group(0)))
    rng.shuffle(found)
    return found[:count]


async def main() -> None:
    python, model, out, *files = sys.argv[1:]
    rng = random.Random(7)
    work = [(Path(f), s) for f in files for s in spots(Path(f), 4, rng)]
    client = make_test_lsp_client()
    await launch(client, model, python=python,
                 env={**os.environ, "LSP_COMPLETE_NO_DAEMON": "1"})
    await client.initialize_session(initialize_params(
        {"threads": 2, "multiline": "never", "persistCache": False},
        client_capabilities(inline_completion=True)))
    await wait_for_state(client, ("ready", "error"))
    rows = []
    opened: set[str] = set()
    version = 1
    for path, (line, start, cursor, word) in work:
        lines = path.read_text(errors="replace").split("\n")
        rest = lines[line][start:].rstrip()
        lines[line] = lines[line][:cursor]
        text = "\n".join(lines)
        uri = path.resolve().as_uri()
        if uri not in opened:
            open_doc(client, uri, text, LANG.get(path.suffix, "plaintext"))
            opened.add(uri)
        else:
            version += 1
            replace_all(client, uri, version, text)
        typed = types.Range(start=types.Position(line=line, character=start),
                            end=types.Position(line=line, character=cursor))
        params = types.InlineCompletionParams(
            text_document=types.TextDocumentIdentifier(uri=uri),
            position=types.Position(line=line, character=cursor),
            context=types.InlineCompletionContext(
                trigger_kind=types.InlineCompletionTriggerKind.Automatic,
                selected_completion_info=types.SelectedCompletionInfo(range=typed, text=word)))
        began = time.perf_counter()
        insert, item = suggestion_of(await client.text_document_inline_completion_async(params))
        ms = (time.perf_counter() - began) * 1000
        at_start = item is not None and item.range.start == typed.start
        shown = at_start and insert.startswith(word)
        rows.append({"file": path.name, "language": LANG.get(path.suffix), "word": word,
                     "insert": insert, "answered": item is not None, "shown": shown,
                     "exact": shown and insert.rstrip() == rest, "ms": ms})
        await wait_idle(client, 60)
    await client.shutdown_session()
    Path(out).write_text(json.dumps(rows, indent=1))


asyncio.run(main())
