"""Where the first key at a new spot spends its time on 0.5B: prepare (context), the full
prompt built and tokenized, the prompt chosen, then the run (prefill, generation, the rest).
Mid-line spots in the 8 corpus files (files8.txt), each a new spot (its own KV key)."""

import random
import statistics
import time
from pathlib import Path

from lsp_complete.config import Settings
from lsp_complete.documents import Document
from lsp_complete.engine.base import CancelToken
from lsp_complete.engine.factory import load_engine
from lsp_complete.languages import language_of_path
from lsp_complete.pipeline.completer import Completer
from lsp_complete.pipeline.prepare import prepare


def main() -> None:
    settings = Settings(model="qwen2.5-coder-0.5b", threads=2, persist_cache=False)
    loaded = load_engine(settings)
    completer = Completer(loaded.engine, loaded.spec, settings)
    rows = []
    rng = random.Random(0)
    files = Path("/work/runs/s59/files8.txt").read_text().split()
    for n, path in enumerate(files * 2):
        text = Path(path).read_text()
        lines = text.splitlines(keepends=True)
        i = rng.randrange(len(lines) // 4, len(lines) * 3 // 4)
        while not lines[i].strip():
            i += 1
        indent = len(lines[i]) - len(lines[i].lstrip())
        cursor = sum(map(len, lines[:i])) + indent + 3
        doc = Document(f"file://{path}#{n}", language_of_path(path) or "plaintext", 1, text)
        t0 = time.perf_counter()
        prepared = prepare(doc, cursor, None, settings)
        t1 = time.perf_counter()
        full = completer.build_prompt(prepared.ctx)
        t2 = time.perf_counter()
        completer.planner.choose(prepared, full)
        t3 = time.perf_counter()
        completion = completer.run(prepared, CancelToken())
        t4 = time.perf_counter()
        result = completion.result
        rows.append({"prepare": (t1 - t0) * 1e3, "build": (t2 - t1) * 1e3,
                     "choose": (t3 - t2) * 1e3, "run": (t4 - t3) * 1e3,
                     "prefill": result.prefill_ms, "generate": result.generate_ms,
                     "encoded": result.encoded_tokens, "prompt": completion.prompt_tokens})
        print(Path(path).name, {k: round(v) for k, v in rows[-1].items()}, flush=True)
    for key in rows[0]:
        print(key, "median", round(statistics.median(r[key] for r in rows), 1))


if __name__ == "__main__":
    main()
