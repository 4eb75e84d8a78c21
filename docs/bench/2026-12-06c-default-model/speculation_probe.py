"""First answers at new spots over stdio, with the server's `speculation` setting given: how
much of each answer is generation, and what prompt-lookup drafts do there (the status
records). A generic client: in every other corpus file, three lines each have their text
deleted and their first character typed, then one inlineCompletion; the line is put back.

    python speculation_probe.py MODEL.gguf auto|off OUT.json CORPUS_FILE...
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import sys
import tempfile
import time
from typing import Any

from lsprotocol import types
from pygls.lsp.client import LanguageClient

from lsp_complete.languages import language_of_path
from lsp_complete.testing import lsp_client as lsp

MODEL, SPECULATION, OUT, FILES = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]


def span(line: int, start: int, end: int) -> types.Range:
    return types.Range(start=types.Position(line=line, character=start),
                       end=types.Position(line=line, character=end))


async def main() -> None:
    rng = random.Random(5)
    client = LanguageClient("probe", "0")
    env = dict(os.environ, LSP_COMPLETE_NO_DAEMON="1",
               LSP_COMPLETE_CACHE_DIR=tempfile.mkdtemp())
    await lsp.launch(client, MODEL, env=env)
    options = {"speculation": SPECULATION, "multiline": "never"}
    await lsp.initialize(client, lsp.initialize_params(
        options, lsp.client_capabilities(inline_completion=True)))
    await lsp.wait_for_state(client, ("ready",), 120)
    rows: list[dict[str, Any]] = []
    for path in sorted(FILES)[::2]:
        with open(path, errors="replace") as f:
            text = f.read()
        lines = text.split("\n")
        uri = "file://" + path
        lsp.open_doc(client, uri, text, language_of_path(path), 1)
        version = 1
        spots = [i for i, line in enumerate(lines) if len(line.strip()) > 12]
        for at in rng.sample(spots, 3):
            line = lines[at]
            indent = len(line) - len(line.lstrip())
            version += 1
            lsp.replace(client, uri, version, span(at, indent, len(line)), "")
            version += 1
            lsp.insert(client, uri, version, at, indent, line[indent])
            started = time.perf_counter()
            answer = await lsp.inline(client, uri, at, indent + 1)
            latency = (time.perf_counter() - started) * 1000
            await lsp.wait_idle(client, 60)
            recent = (await lsp.status(client, recent=20)).get("recent", [])
            record = [r for r in recent if r["uri"] == uri and r["version"] == version]
            rows.append({"file": os.path.basename(path), "line": at, "lat": latency,
                         "rec": record[-1] if record else None,
                         "sug": lsp.suggestion_of(answer)[0][:60], "want": line[indent + 1:]})
            print(json.dumps(rows[-1]), flush=True)
            version += 1
            lsp.replace(client, uri, version, span(at, indent, indent + 1), line[indent:])
            await lsp.wait_idle(client, 60)
        lsp.close_doc(client, uri)
    await lsp.shutdown(client, 30)
    with open(OUT, "w") as f:
        json.dump(rows, f, indent=1)


asyncio.run(main())
