"""Requests of 100 prompt tokens and 24 generated on 0.5B, with whatever runs beside them:
the thread counts each decode used and the generated tokens' cost.

PYTHONPATH=<checkout> python busy_probe.py auto|fixed LABEL
"""

import collections
import sys
from pathlib import Path

from lsp_complete.engine.base import CancelToken, GenerationRequest
from lsp_complete.engine.llama import LlamaEngine

MODEL = "/root/.cache/lsp-complete/models/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"
TEXT = "/work/corpus-other/ruby/base.rb"


def main() -> None:
    engine = LlamaEngine(MODEL, n_ctx=4096, n_threads=2, thread_policy=sys.argv[1])
    decoder = engine.decoder
    used: collections.Counter[int] = collections.Counter()
    use_threads = decoder._use_threads

    def use(n: int) -> None:
        used[n] += 1
        use_threads(n)

    decoder._use_threads = use  # type: ignore[method-assign]
    tokens = engine.tokenize(Path(TEXT).read_text())
    generate, prefill = [], []
    for i in range(16):
        start = (100 + 350 * i) % (len(tokens) - 200)
        result = engine.complete(GenerationRequest(
            key=f"k{i}", segments=[tokens[start : start + 100]], max_tokens=24,
            single_line=False, speculation="off"), CancelToken())
        generate.append(result.generate_ms / max(1, result.generated_tokens))
        prefill.append(result.prefill_ms)
        engine.forget(f"k{i}")
    generate.sort()
    prefill.sort()
    print(sys.argv[1:], "generated ms/token p50", round(generate[8], 1), "prefill ms p50",
          round(prefill[8]), "threads used", dict(used), engine.threads.describe())


if __name__ == "__main__":
    main()
