"""ms per llama_decode of k tokens at a ~450-token context, for each model path given (the table of issue 15). Run: python decode_cost.py MODEL.gguf ..."""
import sys, time
import numpy as np
from lsp_complete.engine.llama import LlamaEngine
from lsp_complete.engine.base import CancelToken
import llama_cpp

for path in sys.argv[1:]:
    eng = LlamaEngine(path, n_ctx=4096, n_threads=2, slots=1)
    text = open("/root/.pyenv/versions/3.11.7/lib/python3.11/json/decoder.py").read()
    toks = eng.tokenize(text)[:450]
    row = {}
    for k in (1, 2, 4, 8, 16):
        times = []
        for rep in range(7):
            seq = eng._acquire("k")
            eng._truncate(seq, 0)
            eng._decode(seq, toks, 1, CancelToken(), abortable=False)
            extra = eng.tokenize(" x = y + z * w - v / u" * 4)[:k]
            t = time.perf_counter()
            eng._decode(seq, extra, k, CancelToken(), abortable=False)
            times.append((time.perf_counter() - t) * 1000)
        row[k] = sorted(times)[len(times) // 2]
    print(path.rsplit("/", 1)[-1], {k: round(v, 1) for k, v in row.items()},
          "prefill tok/s", round(eng.prefill_rate or 0, 1))
    eng.close()
