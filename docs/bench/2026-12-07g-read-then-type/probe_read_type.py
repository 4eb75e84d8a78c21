"""Read, then type: a cross-file line asked after the cursor rested on another line above it
that names a different part of the imports (a person reading the function before typing).

For each bench cross-file task (lsp_complete.bench.crossfile) whose file has such a line
within READ_LINES above the task's line (its own line block differs from the task line's,
both not None), a strict client (inline completion, documentHighlight as the rest report,
as VS Code asks 250 ms into a rest) opens the file with its package root as the workspace,
rests on that line until the server is quiet, rests on the task's spot until it is quiet,
and asks there. Scored as the bench's crossfile scenario (exact, needed identifiers).

usage: python probe_read_type.py MODEL_PATH N_TASKS SEED OUT.jsonl
(run_probe.sh runs it with PYTHONPATH=the checkout under test, from it; each task a fresh
server, --no-daemon, with its own KV cache folder)
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, os.getcwd())
from lsp_complete.bench.crossfile import build_tasks, score  # noqa: E402
from lsp_complete.context.repo import line_definitions, repo_request  # noqa: E402
from lsp_complete.documents import Document  # noqa: E402
from lsp_complete.workspace import Workspace  # noqa: E402
from tests.raw_lsp import RawServer  # noqa: E402
from tests.strict_client import StrictClient  # noqa: E402

READ_LINES = 40
BUDGET = 192  # tokens, as the server's line block (LINE_BLOCK_TOKENS)


def read_line(task, text: str, cursor: int) -> int | None:
    """The nearest line above the task's whose line block is another one than the task's."""
    ws = Workspace()
    ws.set_roots([Path(task.root)])
    doc = Document(Path(task.path).resolve().as_uri(), task.language, 1, text)

    def block(offset: int):
        request = repo_request(doc, offset, BUDGET)
        return None if request is None else line_definitions(request, ws)

    own = block(cursor)
    if own is None:
        return None
    row = text.count("\n", 0, cursor)
    lines = text.split("\n")
    for above in range(row - 1, max(row - READ_LINES, 0) - 1, -1):
        end = sum(len(line) + 1 for line in lines[:above]) + len(lines[above])
        other = block(end)
        if other is not None and other != own:
            return above
    return None


def main() -> None:
    model, n, seed, out = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
    tasks = build_tasks(n, seed)
    chosen = []
    for task in tasks:
        row = read_line(task, task.text, task.offset)
        if row is not None:
            chosen.append((task, row))
    print(f"{len(chosen)} of {len(tasks)} tasks have a line above naming other definitions",
          flush=True)
    with open(out, "w") as sink:
        for task, row in chosen:
            kv = tempfile.mkdtemp(prefix="probe-kv-")  # nothing restored from an earlier task
            server = RawServer(model, "--no-daemon",
                               env={**os.environ, "LSP_COMPLETE_CACHE_DIR": kv})
            client = StrictClient(server, inline=True)
            client.initialize({"threads": 2}, folders=[Path(task.root).resolve().as_uri()])
            server.wait_ready(120)
            uri = Path(task.path).resolve().as_uri()
            client.open(uri, task.text, task.language)
            lines = task.text.split("\n")
            time.sleep(0.25)
            client.highlight(uri, row, len(lines[row]))
            time.sleep(0.5)
            server.wait_idle()
            spot_row = task.text.count("\n", 0, task.offset)
            spot_col = task.offset - (task.text.rfind("\n", 0, task.offset) + 1)
            time.sleep(0.25)
            client.highlight(uri, spot_row, spot_col)
            time.sleep(0.5)
            server.wait_idle()
            started = time.perf_counter()
            items = client.inline(uri, spot_row, spot_col)
            ms = (time.perf_counter() - started) * 1000
            text = items[0]["insertText"] if items else ""
            typed = lines[spot_row][:spot_col]
            word = text  # the item replaces from the word's start: keep what follows the cursor
            start = items[0].get("range", {}).get("start", {}).get("character") if items else None
            if start is not None:
                word = text[len(typed[start:]):]
            record = {"task": task.name, "read_row": row, "row": spot_row, "ms": round(ms, 1),
                      "suggestion": word, "target": task.target, **score(task, word)}
            sink.write(json.dumps(record) + "\n")
            sink.flush()
            print(record["task"], record["em"], record["needed"], record["ms"], flush=True)
            client.shutdown()
            server.close()
            shutil.rmtree(kv, ignore_errors=True)


if __name__ == "__main__":
    main()
