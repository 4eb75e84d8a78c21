"""Probe: the block at each official multi-line hole from (a) the primary's prompt (the
server today) and (b) the same windows laid out as standard PSM, the cursor line's
indentation ending the prefix, no healing (the reference's layout). Both cut by the server's
rules. JSON lines."""
import dataclasses
import json
import sys
import time

from lsp_complete.bench.humaneval import load_multi_line_file, sample_tasks
from lsp_complete.config import Settings
from lsp_complete.documents import Document
from lsp_complete.engine.base import CancelToken
from lsp_complete.pipeline import block_wanted, load_completer, prepare
from lsp_complete.pipeline import completer as cm
from lsp_complete.prompt import build_prompt

model, seeds, out = sys.argv[1], [int(s) for s in sys.argv[2].split(",")], sys.argv[3]
only = ({tuple(map(int, x.split(":"))) for x in sys.argv[4].split(",")}
        if len(sys.argv) > 4 else None)
settings = Settings(model=model, persist_cache=False, multiline="auto", threads=2, max_tokens=48)
completer, info, _ = load_completer(settings)
tasks = load_multi_line_file("/work/data/HumanEval-MultiLineInfilling.jsonl.gz")


def psm_block(prepared, primary):
    ctx = prepared.ctx
    ctx2 = dataclasses.replace(ctx, before=ctx.before + ctx.middle, middle="")
    prompt = build_prompt(ctx2, completer.spec.fim, completer.tokenize, completer.engine.detokenize,
                          settings.max_prompt_tokens, heal=False)
    site = dataclasses.replace(prepared.site, multiline=True)
    req = dataclasses.replace(primary.request, segments=prompt.segments, heal="", heal_code=False,
                              aside=True, single_line=False, line_check=cm._block_ended(site),
                              on_text=None, max_tokens=cm.BLOCK_MAX_TOKENS,
                              deadline=time.monotonic() + cm.BLOCK_TIME_BUDGET_S,
                              abandon=lambda produced: cm.copying_next_line(produced, site))
    result = completer.engine.complete(req, CancelToken())
    raw = result.text
    if result.stop_reason in ("max_tokens", "cancelled", "error"):
        raw = raw[: max(0, raw.rfind("\n"))]
    return cm.cut_block(raw, site, ctx, completer.spec.stop), raw, result.stop_reason


with open(out, "a") as f:
    for seed in seeds:
        for i, task in enumerate(sample_tasks(tasks, 40, seed)):
            if only and (seed, i) not in only:
                continue
            text = task.prefix + task.suffix
            doc = Document(f"file:///he/{seed}/{i}/t.py", "python", 0, text)
            prepared = prepare(doc, len(task.prefix), None, settings)
            completer.engine.forget(doc.uri)
            primary = completer.run(prepared, CancelToken())
            row = {"seed": seed, "i": i, "name": task.name, "primary": primary.text,
                   "wanted": block_wanted(prepared, primary)}
            t0 = time.perf_counter()
            row["block"] = (completer.block(prepared, primary, CancelToken())
                            if row["wanted"] else None)
            t1 = time.perf_counter()
            row["psm"], row["psm_raw"], row["psm_stop"] = psm_block(prepared, primary)
            t2 = time.perf_counter()
            row["block_ms"], row["psm_ms"] = (t1 - t0) * 1000, (t2 - t1) * 1000
            completer.engine.forget(doc.uri)
            f.write(json.dumps(row) + "\n")
            f.flush()
            print(seed, i, task.name, round(row["block_ms"]), round(row["psm_ms"]), flush=True)
