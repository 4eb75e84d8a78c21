"""Probe: the block the server writes at each official multi-line hole, raw and uncut
(caps relaxed: 30 lines, 256 tokens, no line check), so cut rules can be compared offline.
Also the PSM reference (e) on the same holes. Writes JSON lines."""
import json
import sys
import time

from lsp_complete.bench.humaneval import load_multi_line_file, sample_tasks
from lsp_complete.config import Settings
from lsp_complete.documents import Document
from lsp_complete.engine.base import CancelToken
from lsp_complete.pipeline import block_wanted, load_completer, prepare
from lsp_complete.pipeline import completer as cm

model, seeds, out = sys.argv[1], [int(s) for s in sys.argv[2].split(",")], sys.argv[3]
with_ref = len(sys.argv) > 4 and sys.argv[4] == "ref"
settings = Settings(model=model, persist_cache=False, multiline="auto", threads=2,
                    max_tokens=48)
completer, info, _ = load_completer(settings)
tasks = load_multi_line_file("/work/data/HumanEval-MultiLineInfilling.jsonl.gz")

captured: dict = {}
orig_cut = cm.cut_block


def spy_cut(raw, site, ctx, stop):
    captured["raw"] = raw
    captured["ctx"] = ctx
    captured["site"] = site
    return orig_cut(raw, site, ctx, stop)


cm.cut_block = spy_cut
cm.MAX_LINES = 40
cm.BLOCK_MAX_TOKENS = 256
cm.BLOCK_TIME_BUDGET_S = 60.0
cm._block_ended = lambda site: None  # no line check: the raw text to the model's end

ref = None
if with_ref:
    from lsp_complete.bench.baselines import LlamaBaseline, fim_tokens
    ref = LlamaBaseline(info["path"],
                        fim_tokens(completer.spec), completer.spec.stop, 2, 48, reuse=False,
                        to_end=True)

with open(out, "a") as f:
    for seed in seeds:
        for i, task in enumerate(sample_tasks(tasks, 40, seed)):
            text = task.prefix + task.suffix
            doc = Document(f"file:///he/{seed}/{i}/t.py", "python", 0, text)
            cursor = len(task.prefix)
            prepared = prepare(doc, cursor, None, settings)
            completer.engine.forget(doc.uri)
            t0 = time.perf_counter()
            primary = completer.run(prepared, CancelToken())
            t1 = time.perf_counter()
            captured.clear()
            block = None
            wanted = block_wanted(prepared, primary)
            if wanted:
                block = completer.block(prepared, primary, CancelToken())
            t2 = time.perf_counter()
            row = {"seed": seed, "i": i, "name": task.name, "target": task.target,
                   "primary": primary.text, "prompt_tokens": primary.prompt_tokens,
                   "full": primary.full_prompt, "wanted": wanted, "multiline": prepared.multiline,
                   "raw": captured.get("raw"), "block_relaxed": block,
                   "primary_ms": (t1 - t0) * 1000, "block_ms": (t2 - t1) * 1000}
            if ref is not None:
                r = ref.complete(text, cursor)
                row["ref"] = r.text
                row["ref_ms"] = r.latency_ms
            completer.engine.forget(doc.uri)
            f.write(json.dumps(row) + "\n")
            f.flush()
            print(seed, i, task.name, round(row["primary_ms"]), round(row["block_ms"]),
                  flush=True)
