"""Wall and CPU ms per token, prefill (150 tokens) and generation (24), 1 vs 2 threads fixed.

python cpucost.py MODEL_PATH
"""
import statistics
import sys
import time
from pathlib import Path

import llama_cpp

from lsp_complete.engine.base import CancelToken, GenerationRequest
from lsp_complete.engine.llama import LlamaEngine

TEXT = "/work/corpus-other/ruby/base.rb"


def main() -> None:
    engine = LlamaEngine(sys.argv[1], n_ctx=4096, n_threads=2, thread_policy="fixed")
    decoder = engine.decoder
    threads = [2]
    stats: dict[tuple[int, str], list[tuple[float, float]]] = {}
    decode = llama_cpp.llama_decode

    def use(_n: int) -> None:
        llama_cpp.llama_set_n_threads(decoder.ctx, threads[0], threads[0])

    def timed(ctx, batch):  # type: ignore[no-untyped-def]
        cpu, wall = time.process_time(), time.perf_counter()
        status = decode(ctx, batch)
        n = batch.n_tokens
        kind = "step" if n == 1 else "large"
        stats.setdefault((threads[0], kind), []).append(
            ((time.perf_counter() - wall) / n, (time.process_time() - cpu) / n))
        return status

    decoder._use_threads = use  # type: ignore[method-assign]
    llama_cpp.llama_decode = timed
    tokens = engine.tokenize(Path(TEXT).read_text())
    for i in range(16):
        threads[0] = 1 + i % 2
        start = (100 + 350 * i) % (len(tokens) - 200)
        request = GenerationRequest(key=f"k{i}", segments=[tokens[start : start + 150]],
                                    max_tokens=24, single_line=False, speculation="off")
        engine.complete(request, CancelToken())
        engine.forget(f"k{i}")
    for (n, kind), values in sorted(stats.items()):
        wall = statistics.median(v[0] for v in values) * 1000
        cpu = statistics.median(v[1] for v in values) * 1000
        print(Path(sys.argv[1]).name[:22], "threads", n, kind, "n", len(values),
              "wall ms/tok", round(wall, 2), "cpu ms/tok", round(cpu, 2))


if __name__ == "__main__":
    main()
