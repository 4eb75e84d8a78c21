"""The process's CPU seconds per wall second during llama.cpp decodes, on 0.5B: the signal
engine/threads.py reads for contention. Run it alone, then beside `python -c "while True:
pass"`.

python cpushare.py THREADS LABEL
"""

import statistics
import sys
import time
from pathlib import Path

import llama_cpp

from lsp_complete.engine.base import CancelToken, GenerationRequest
from lsp_complete.engine.llama import LlamaEngine

MODEL = "/root/.cache/lsp-complete/models/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"
TEXT = "/work/corpus-other/ruby/base.rb"


def main() -> None:
    threads = int(sys.argv[1])
    engine = LlamaEngine(MODEL, n_ctx=4096, n_threads=2, thread_policy="fixed")
    decoder = engine.decoder
    shares: dict[str, list[float]] = {"step": [], "small": [], "large": []}
    decode = llama_cpp.llama_decode

    def use(_n: int) -> None:
        llama_cpp.llama_set_n_threads(decoder.ctx, threads, threads)

    def timed(ctx, batch):  # type: ignore[no-untyped-def]
        cpu, wall = time.process_time(), time.perf_counter()
        status = decode(ctx, batch)
        share = (time.process_time() - cpu) / (time.perf_counter() - wall)
        shares[decoder.threads.kind_of(batch.n_tokens)].append(share)
        return status

    decoder._use_threads = use  # type: ignore[method-assign]
    llama_cpp.llama_decode = timed
    tokens = engine.tokenize(Path(TEXT).read_text())
    for i in range(12):
        start = (100 + 350 * i) % (len(tokens) - 200)
        request = GenerationRequest(key=f"k{i}", segments=[tokens[start : start + 150]],
                                    max_tokens=12, speculation="off")
        engine.complete(request, CancelToken())
        engine.forget(f"k{i}")
    for kind, values in shares.items():
        if values:
            values.sort()
            print(sys.argv[1:], kind, "n", len(values), "share p10/p50/p90",
                  round(values[len(values) // 10], 2), round(statistics.median(values), 2),
                  round(values[len(values) * 9 // 10], 2))


if __name__ == "__main__":
    main()
