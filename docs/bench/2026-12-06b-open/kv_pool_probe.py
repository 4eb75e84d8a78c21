"""Does a file's decode cost more when other files' sequences fill the shared KV pool?

A 64-token prefill into a fresh sequence, and one token appended to it, with 0 to 3 other
files of 1,000 tokens cached beside it (the engine keeps 4 files' sequences: `slots`).

    python kv_pool_probe.py MODEL.gguf
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from pathlib import Path

from lsp_complete.engine.base import CancelToken
from lsp_complete.engine.llama import LlamaEngine

PROBE = "file:///probe"


def main() -> None:
    engine = LlamaEngine(os.path.expanduser(sys.argv[1]), n_ctx=8192, n_threads=2)
    text = "".join(Path(f"lsp_complete/{p}").read_text()
                   for p in ("prompt.py", "scheduler.py", "postprocess.py", "typeahead.py"))
    tokens = engine.tokenize(text)
    segment = tokens[-300:-236]

    def prefill_ms() -> float:
        times = []
        for _ in range(5):
            engine.forget(PROBE)
            began = time.perf_counter()
            engine.warm(PROBE, [segment], CancelToken())
            times.append(time.perf_counter() - began)
        return 1000 * statistics.median(times)

    def step_ms() -> float:
        times, prompt = [], list(segment)
        for i in range(8):
            prompt = prompt + [tokens[i]]
            began = time.perf_counter()
            engine.warm(PROBE, [prompt], CancelToken())
            times.append(time.perf_counter() - began)
        return 1000 * statistics.median(times)

    for n in range(4):
        cells = engine.describe()["cellsInUse"]
        print(f"cells in use {cells:5}: prefill 64 {prefill_ms():5.0f} ms, "
              f"one token {step_ms():5.1f} ms", flush=True)
        engine.warm(f"file:///f{n}", [tokens[n * 1000:(n + 1) * 1000]], CancelToken())
    engine.close()


if __name__ == "__main__":
    main()
