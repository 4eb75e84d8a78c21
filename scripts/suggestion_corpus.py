"""Same suggestions before and after a change that means to keep them (a restructuring).

Drives `lsp-complete serve` from a given checkout over LSP through a fixed corpus of requests and
writes every answer to a JSON file; two such files compare line by line. Every request is
followed by a settle (the idle delay, then the worker idle), so idle work always completes and
the answers do not depend on the machine's speed: differences are the code's.

    python scripts/suggestion_corpus.py --checkout /path/to/old --model M --out old.json
    python scripts/suggestion_corpus.py --checkout . --model M --out new.json
    python scripts/suggestion_corpus.py --compare old.json new.json

The corpus: spans of real files retyped (the bench's workload, with and without a cursor
notification at the span's start), HumanEval lines asked as a document opens and again after
a pause, an explicit request (alternatives), and a file asked the moment it opens.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

from lsprotocol import types
from pygls.lsp.client import LanguageClient

from lsp_complete.bench import humaneval, workload
from lsp_complete.testing import lsp_client

SETTLE_S = 0.45  # a little over the server's idle delay (idleReanchorMs 400)


async def settle(client: LanguageClient) -> None:
    await asyncio.sleep(SETTLE_S)
    await lsp_client.wait_idle(client, 120)


async def ask(client: LanguageClient, uri: str, text: str, offset: int,
              invoked: bool = False) -> list[str]:
    pos = lsp_client.position_at(text, offset)
    params = lsp_client.inline_params(uri, pos.line, pos.character)
    if invoked:
        params.context = types.InlineCompletionContext(
            trigger_kind=types.InlineCompletionTriggerKind.Invoked)
    answer = await client.text_document_inline_completion_async(params)
    items = answer.items if answer else []
    return [i.insert_text if isinstance(i.insert_text, str) else i.insert_text.value
            for i in items]


async def run(checkout: Path, model: str, keystrokes: int, tasks: int) -> list[dict[str, Any]]:
    env = dict(os.environ, LSP_COMPLETE_NO_DAEMON="1", PYTHONPATH=str(checkout),
               LSP_COMPLETE_CACHE_DIR=tempfile.mkdtemp(prefix="corpus-kv-"))
    client = LanguageClient("corpus", "1")
    await lsp_client.launch(client, model, env=env)
    caps = lsp_client.client_capabilities(encodings=["utf-16"], inline_completion=True)
    await lsp_client.initialize(client, lsp_client.initialize_params(
        {"threads": 2, "maxTokens": 32, "multiline": "never"}, caps, os.getpid()))
    await lsp_client.wait_for_state(client, ("ready",), 300)
    out: list[dict[str, Any]] = []
    files = [workload.quick_file()]
    episodes = workload.build_episodes(files, 4, 1, 0, keystrokes)
    for i, ep in enumerate(episodes):
        uri = Path(ep.path).resolve().as_uri()
        version = (i + 1) * 1000
        lsp_client.open_doc(client, uri, ep.initial_text, ep.language_id, version)
        if i % 2:  # our clients tell the cursor; generic ones do not
            pos = lsp_client.position_at(ep.initial_text, ep.start_offset)
            lsp_client.move_cursor(client, uri, pos.line, pos.character)
        await settle(client)
        text = ep.initial_text
        for k, ks in enumerate(ep.keystrokes):
            before = lsp_client.position_at(text, ks.offset - 1)
            text = ep.text_after(k + 1)
            version += 1
            lsp_client.insert(client, uri, version, before.line, before.character, ks.char)
            found = await ask(client, uri, text, ks.offset)
            out.append({"what": f"replay {ep.name} #{k}", "answer": found})
            await settle(client)
        found = await ask(client, uri, text, ep.keystrokes[-1].offset, invoked=True)
        out.append({"what": f"invoked {ep.name}", "answer": found})
        lsp_client.close_doc(client, uri)
        await settle(client)
    he_tasks = [task for problem in humaneval.load_problems(tasks)
                for task in humaneval.tasks_for_problem(problem)[:2]]  # two lines each
    for n, task in enumerate(he_tasks):
        uri = f"file:///corpus/{n}.py"
        lsp_client.open_doc(client, uri, task.text)
        found = await ask(client, uri, task.text, task.offset)  # asked as it opens
        out.append({"what": f"humaneval-open {task.name}", "answer": found})
        await settle(client)
        found = await ask(client, uri, task.text, task.offset)
        out.append({"what": f"humaneval-settled {task.name}", "answer": found})
        lsp_client.close_doc(client, uri)
        await settle(client)
    await lsp_client.shutdown(client, 60)
    await client.stop()
    return out


def compare(old: Path, new: Path) -> int:
    a, b = (json.loads(p.read_text()) for p in (old, new))
    same = sum(x == y for x, y in zip(a, b, strict=True))
    for x, y in zip(a, b, strict=True):
        if x != y:
            print(f"differs: {x['what']}: {x['answer']!r} -> {y['answer']!r}")
    print(f"{same} of {len(a)} answers identical")
    return 0 if same == len(a) else 1


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--checkout", type=Path, default=Path.cwd())
    p.add_argument("--model")
    p.add_argument("--keystrokes", type=int, default=60)
    p.add_argument("--tasks", type=int, default=6)
    p.add_argument("--out", type=Path)
    p.add_argument("--compare", nargs=2, type=Path)
    args = p.parse_args()
    if args.compare:
        return compare(*args.compare)
    answers = asyncio.run(run(args.checkout.resolve(), args.model, args.keystrokes, args.tasks))
    args.out.write_text(json.dumps(answers, indent=1))
    print(f"{len(answers)} answers -> {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
