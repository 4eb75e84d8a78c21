"""Offline: mean log-likelihood of each span's true line under first prompts cut in different ways.
usage: cutnll.py MODEL_NAME GGUF SEED SPANS_PER_FILE VARIANTS FILE..."""
import sys, random, dataclasses, json, collections, math
import numpy as np
from pathlib import Path
import os; os.environ["LSP_COMPLETE_BENCH_NO_EXTRA_BUFFERS"] = "1"
import lsp_complete.bench.compat.sitecustomize
from llama_cpp import Llama

from lsp_complete.config import Settings
from lsp_complete.pipeline.completer import load_completer
from lsp_complete.pipeline.prepare import prepare
from lsp_complete.documents import Document
from lsp_complete.oneshot import language_id_for_path
from lsp_complete.bench import workload
sys.path.insert(0, str(Path(__file__).parent))
import cutalloc_orders as CO

model, gguf, seed, per, variants, files = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5].split(","), sys.argv[6:]
settings = Settings(model=model, threads=2, multiline="never")
comp, _, _ = load_completer(settings)
count = comp._count_tokens
llm = Llama(gguf, n_ctx=4096, n_batch=512, logits_all=True, n_threads=2, verbose=False)

def nll(prompt_tokens, target_tokens):
    toks = list(prompt_tokens) + list(target_tokens)
    llm.reset(); llm.eval(toks)
    sc = np.asarray(llm.scores[: len(toks)], dtype=np.float64)
    n = len(prompt_tokens); tot = 0.0; first = None
    for i, t in enumerate(target_tokens):
        row = sc[n - 1 + i]; m = row.max(); lse = m + math.log(np.exp(row - m).sum())
        lp = row[t] - lse; tot += lp
        if i == 0: first = lp
    return -tot, -first

rows = []
for path in files:
    src = workload.read_source(path)
    rng = random.Random(f"{seed}:{path}")
    for start in workload.choose_spans(src.text, per, 1, rng):
        lines = src.text.split("\n"); target = lines[start]
        indent = target[: len(target) - len(target.lstrip())]
        lines[start] = indent
        text = "\n".join(lines); cursor = sum(len(l) + 1 for l in lines[:start]) + len(indent)
        doc = Document(f"file://{path}", language_id_for_path(Path(path)), 1, text)
        prep = prepare(doc, cursor, None, settings)
        want = target[len(indent):]
        tgt = comp.engine.tokenize(want + "\n")
        row = {"file": Path(path).name, "line": start + 1, "lang": doc.language_id, "ntgt": len(tgt)}
        for v in variants:
            if v == "window": pr = comp.planner.window_prompt(prep)
            elif v == "full": pr = comp.build_prompt(prep.ctx)
            else:
                name, _, b = v.partition("@")
                pr = comp.build_prompt(CO.fit(prep.cold_ctx, int(b or 160), CO.ORDERS[name], count))
            total, first = nll(pr.tokens, comp.engine.tokenize(pr.heal + want + "\n"))
            row[v] = [round(total, 3), round(first, 3), len(pr)]
        rows.append(row)
        print(json.dumps(row), flush=True)
json.dump(rows, open(f"/work/exp/cutnll_{model}_{seed}.json", "w"))
