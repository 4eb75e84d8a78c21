"""Milliseconds per llama_decode of k tokens at a ~450-token context (issue 15's table).

Run: python decode_cost.py MODEL.gguf [MODEL.gguf ...]
"""

import sys
import sysconfig
import time
from pathlib import Path

from lsp_complete.engine.base import CancelToken
from lsp_complete.engine.llama import LlamaEngine

SOURCE = Path(sysconfig.get_paths()["stdlib"]) / "json" / "decoder.py"

for path in sys.argv[1:]:
    engine = LlamaEngine(path, n_ctx=4096, n_threads=2, slots=1)
    context = engine.tokenize(SOURCE.read_text())[:450]
    row = {}
    for k in (1, 2, 4, 8, 16):
        times = []
        for _ in range(7):  # the median of 7
            seq = engine._acquire("k")
            engine._truncate(seq, 0)
            engine._decode(seq, context, 1, CancelToken(), abortable=False)
            batch = engine.tokenize(" x = y + z * w - v / u" * 4)[:k]
            started = time.perf_counter()
            engine._decode(seq, batch, k, CancelToken(), abortable=False)
            times.append((time.perf_counter() - started) * 1000)
        row[k] = round(sorted(times)[len(times) // 2], 1)
    print(Path(path).name, row, "prefill tok/s", round(engine.prefill_rate or 0, 1))
    engine.close()
