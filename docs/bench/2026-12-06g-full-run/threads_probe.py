"""Cold 150-token prefills on 0.5B through the engine: the adaptive thread policy as it runs
(which thread count each decode used) against the same with 2 threads fixed.

python threads_probe.py adaptive|fixed
"""

import collections
import sys
from pathlib import Path

from lsp_complete.engine.base import CancelToken, GenerationRequest
from lsp_complete.engine.llama import LlamaEngine

MODEL = "/root/.cache/lsp-complete/models/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"
TEXT = "/work/corpus-other/ruby/base.rb"


def main() -> None:
    fixed = sys.argv[1] == "fixed"
    engine = LlamaEngine(MODEL, n_ctx=4096, n_threads=2)
    decoder = engine.decoder
    used: collections.Counter[int] = collections.Counter()
    use_threads = decoder._use_threads

    def use(n: int) -> None:
        n = 2 if fixed else n
        used[n] += 1
        use_threads(n)

    decoder._use_threads = use  # type: ignore[method-assign]
    tokens = engine.tokenize(Path(TEXT).read_text())
    times = []
    for i in range(30):
        start = (100 + 350 * i) % (len(tokens) - 200)
        request = GenerationRequest(key=f"k{i}", segments=[tokens[start : start + 150]],
                                    max_tokens=4, speculation="off")
        times.append(engine.complete(request, CancelToken()).prefill_ms)
        engine.forget(f"k{i}")
    times.sort()
    print(sys.argv[1], "prefill ms p50", round(times[15]), "mean",
          round(sum(times) / len(times)), "max", round(times[-1]), "threads used", dict(used))


if __name__ == "__main__":
    main()
