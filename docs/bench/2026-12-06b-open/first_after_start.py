"""The first suggestion a server gives after it starts: a file opened and asked at once,
mid-file, each side started afresh `ROUNDS` times (sides alternating). Latency, prompt
tokens and the thread counts the server's policy used by then.

    python first_after_start.py MODEL.gguf ROUNDS PYTHON_A PYTHON_B [...]
"""

from __future__ import annotations

import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from pytest_lsp.client import make_test_lsp_client

from lsp_complete.testing.lsp_client import (
    client_capabilities,
    initialize_params,
    inline,
    launch,
    open_doc,
    status,
    wait_for_state,
)

FILES = [("py/textwrap.py", "python", 300), ("js/npm.js", "javascript", 200),
         ("rs/util.rs", "rust", 250), ("java/Optional.java", "java", 200)]


async def first(model: str, python: str, name: str, language: str, line: int) -> tuple:
    text = (Path("/work/corpus") / name).read_text()
    col = len(text.split("\n")[line]) // 2
    client = make_test_lsp_client()
    with tempfile.TemporaryDirectory() as cache:
        env = {**os.environ, "LSP_COMPLETE_CACHE_DIR": cache, "LSP_COMPLETE_NO_DAEMON": "1"}
        await launch(client, model, env=env, python=python)
        await client.initialize_session(initialize_params(
            {"threads": 2, "maxTokens": 48, "multiline": "never"}, client_capabilities()))
        await wait_for_state(client, ("ready", "error"))
        try:
            uri = f"file:///probe/{name}"
            open_doc(client, uri, text, language=language)
            began = time.perf_counter()
            await inline(client, uri, line, col)
            ms = (time.perf_counter() - began) * 1000
            st = await status(client)
            return ms, st["recent"][-1]["promptTokens"]
        finally:
            await client.shutdown_session()


async def main() -> None:
    model, rounds, pythons = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
    results: dict[str, list[float]] = {p: [] for p in pythons}
    for r in range(rounds):
        name, language, line = FILES[r % len(FILES)]
        order = pythons if r % 2 == 0 else pythons[::-1]
        for python in order:
            ms, tokens = await first(model, python, name, language, line)
            results[python].append(ms)
            print(f"round {r} {name:20} {python.split('/')[-4][:11]} {ms:7.0f} ms "
                  f"prompt {tokens}", flush=True)
    for python, values in results.items():
        print(python.split("/")[-4][:11], "median", round(statistics.median(values)),
              "ms over", len(values))
    base = results[pythons[0]]
    for python in pythons[1:]:
        ratios = [b / a for a, b in zip(base, results[python], strict=True)]
        print(python.split("/")[-4][:11], "/", pythons[0].split("/")[-4][:11],
              "median of paired ratios", round(statistics.median(ratios), 3))


if __name__ == "__main__":
    asyncio.run(main())
