"""Type lines at spots in open files at fixed intervals without waiting, as a client that
cancels its previous inline request when it sends the next ($/cancelRequest, as VS Code's
languageclient does with the provider's token) or one that does not. Per key: was the answer
non-empty and fresh (arrived before the next key), and was its first line the rest of the line.
Usage: cancelling.py cancel|keep INTERVAL_S MODEL PYTHON|'' FILE:LINE..."""
import asyncio
import os
import sys
import time
from collections import Counter
from pathlib import Path

from lsprotocol import types
from lsprotocol.types import Position, Range
from pytest_lsp.client import make_test_lsp_client

from lsp_complete.testing.lsp_client import (
    client_capabilities,
    initialize_params,
    inline_params,
    launch,
    open_doc,
    replace,
    replace_all,
    status,
    suggestion_from_answer,
    wait_for_state,
    wait_idle,
)

LANG = {"py": "python", "js": "javascript", "ts": "typescript", "go": "go", "rs": "rust",
        "c": "c", "cpp": "cpp", "java": "java"}
mode, interval, model, python = sys.argv[1], float(sys.argv[2]), sys.argv[3], sys.argv[4] or None

async def main():
    client = make_test_lsp_client()
    await launch(client, model, env={**os.environ, "LSP_COMPLETE_NO_DAEMON": "1"}, python=python)
    await client.initialize_session(initialize_params({"threads": 2, "contextSize": 4096},
                                                      client_capabilities()))
    await wait_for_state(client, ("ready", "error"))
    got = Counter()
    msg = 0
    for spec in sys.argv[5:]:
        path, number = spec.split(":")
        line_no = int(number)
        text = Path(path).read_text()
        lines = text.split("\n")
        uri = "file://" + path
        open_doc(client, uri, text, language=LANG[path.rsplit(".", 1)[1]])
        await wait_idle(client, 120)
        line = lines[line_no]
        indent = len(line) - len(line.lstrip())
        body = line[indent:]
        version = 2
        deleted = lines[:line_no] + [line[:indent]] + lines[line_no + 1:]
        replace_all(client, uri, version, "\n".join(deleted))
        await wait_idle(client, 120)
        sent, futs = [], []
        for k, ch in enumerate(body):
            version += 1
            pos = Position(line=line_no, character=indent + k)
            replace(client, uri, version, Range(start=pos, end=pos), ch)
            if mode == "cancel" and futs and not futs[-1][1].done():
                client.protocol.notify("$/cancelRequest", types.CancelParams(id=futs[-1][0]))
            msg += 1
            mid = f"r{msg}"
            params = inline_params(uri, line_no, indent + k + 1)
            fut = asyncio.ensure_future(client.protocol.send_request_async(
                "textDocument/inlineCompletion", params, msg_id=mid))
            done_at = {}
            fut.add_done_callback(lambda f, d=done_at: d.setdefault("t", time.perf_counter()))
            sent.append(time.perf_counter())
            futs.append((mid, fut, done_at))
            await asyncio.sleep(interval)
        await asyncio.gather(*(f for _, f, _ in futs), return_exceptions=True)
        for k, (_, f, d) in enumerate(futs):
            got["keys"] += 1
            if f.exception() is not None:
                got["cancelled"] += 1
                continue
            prefix = line[: indent + k + 1]
            s = suggestion_from_answer(f.result(), prefix)
            if not s:
                got["empty"] += 1
                continue
            fresh = k == len(futs) - 1 or d["t"] <= sent[k + 1]
            right = s.split("\n")[0] == line[indent + k + 1:].rstrip()
            got["fresh" if fresh else "stale"] += 1
            got["fresh_right" if fresh and right else "x"] += 1
        await asyncio.sleep(1.0)
    st = await status(client)
    counters = {k: st["counters"].get(k) for k in ("joined", "typeahead", "superseded")}
    engine = {k: st["engineCounters"][k] for k in ("calls", "tokens_generated", "tokens_encoded")}
    print(mode, dict(got), counters, engine, flush=True)
    await client.shutdown_session()

asyncio.run(main())
