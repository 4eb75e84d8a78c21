"""Prefill and decode with llama.cpp's extra CPU buffer types (repacked kernels) on or off:
the same cold first prompts at 8 spots, `python kern.py MODEL.gguf on|off`."""
import statistics
import sys
from pathlib import Path

import lsp_complete.engine.llama as llama_mod
from lsp_complete.config import Settings
from lsp_complete.documents import Document
from lsp_complete.engine.base import CancelToken
from lsp_complete.oneshot import language_id_for_path
from lsp_complete.pipeline import load_completer, prepare

model, mode = sys.argv[1], sys.argv[2]
llama_mod.extra_buffer_types_safe = lambda: mode == "on"
completer, _, _ = load_completer(Settings(model=model, persist_cache=False, threads=2,
                                          max_tokens=16))
files = sorted(Path("/work/corpus").glob("*/*"))[:8]
pre, gen = [], []
for rep in range(2):
    for path in files:
        text = path.read_text(encoding="utf-8")
        cursor = text.find("\n", len(text) // 2) + 1
        doc = Document(path.resolve().as_uri(), language_id_for_path(path), 0, text)
        prepared = prepare(doc, cursor, None, completer.settings)
        completer.engine.forget(prepared.key)
        c = completer.run(prepared, CancelToken())
        r = c.result
        if rep:  # the first pass warms the weights
            pre.append(r.prefill_ms / max(1, r.encoded_tokens))
            gen.append(r.generate_ms / max(1, r.generated_tokens))
print(mode, "extra bufts", completer.engine.describe().get("cpuExtraBuffers"),
      f"prefill ms/token p50 {statistics.median(pre):.2f}",
      f"decode ms/token p50 {statistics.median(gen):.1f}")
