"""Probe: the first key at a new spot, with the cold prompt cut to other budgets and other
splits between the lines above, the head and the lines below. Each spot: one line of a real
file emptied after its indentation and first character (the first key typed there), the
model asked with a cold cache per variant.
`python probe_alloc.py MODEL.gguf OUT.jsonl [PER_FILE]`"""
import dataclasses
import glob
import json
import random
import sys
from pathlib import Path

import lsp_complete.pipeline.planner as planner_mod
from lsp_complete import prompt as prompt_mod
from lsp_complete.config import Settings
from lsp_complete.documents import Document
from lsp_complete.engine.base import CancelToken
from lsp_complete.oneshot import language_id_for_path
from lsp_complete.pipeline import load_completer, prepare

model, out = sys.argv[1], sys.argv[2]
per_file = int(sys.argv[3]) if len(sys.argv) > 3 else 8

# name: (budget, order of (part, most lines, token share of budget or None))
ORDERS = {
    "cur": [("above", 4, None), ("head", 999, 3), ("below", 1, None), ("above", 999, None),
            ("head", 999, None), ("below", 999, None)],
    "sfx": [("above", 4, None), ("below", 3, None), ("head", 999, 4), ("above", 999, None),
            ("head", 999, None), ("below", 999, None)],
    "nohead": [("above", 4, None), ("below", 2, None), ("above", 999, None),
               ("below", 999, None)],
}
VARIANTS = [("cur160", 160, "cur"), ("cur112", 112, "cur"), ("sfx112", 112, "sfx"),
            ("sfx160", 160, "sfx"), ("nohead112", 112, "nohead")]
current = {"order": "cur", "budget": 160}


def fit(ctx, budget, count):
    order = ORDERS[current["order"]]
    above = ctx.before.splitlines(keepends=True)
    head = ctx.head.splitlines(keepends=True)
    rest, *below = ctx.suffix.split("\n")
    left = budget - prompt_mod._TEMPLATE_TOKENS - count(rest)
    if left >= count(ctx.before) + count(ctx.head) + count(ctx.suffix) - count(rest):
        return ctx
    kept = {"above": 0, "head": 0, "below": 0}
    lines = {"above": above[::-1], "head": head[::-1], "below": below}
    for part, most_lines, share in order:
        most_tokens = budget // share if share else 10**9
        spent = 0
        while kept[part] < min(most_lines, len(lines[part])):
            cost = count(lines[part][kept[part]]) + (part == "below")
            if cost > min(left, most_tokens - spent):
                break
            left -= cost
            spent += cost
            kept[part] += 1
    return dataclasses.replace(
        ctx, head="".join(head[len(head) - kept["head"]:]),
        before="".join(above[len(above) - kept["above"]:]),
        suffix="\n".join([rest, *below[: kept["below"]]]))


planner_mod.fit_context = fit
planner_mod.PromptPlanner.cold_budget_for = lambda self, key: current["budget"]

settings = Settings(model=model, persist_cache=False, threads=2, max_tokens=48)
completer, info, _ = load_completer(settings)
rng = random.Random(1)
spots = []
for path in sorted(glob.glob("/work/corpus/*/*") + glob.glob("/work/corpus-other/*/*")):
    text = Path(path).read_text(encoding="utf-8")
    lines = text.split("\n")
    offsets, o = [], 0
    for line in lines:
        offsets.append(o)
        o += len(line) + 1
    good = [i for i, line in enumerate(lines) if 4 <= len(line.strip()) <= 100 and i > 20]
    for i in rng.sample(good, min(per_file, len(good))):
        line = lines[i]
        col = len(line) - len(line.lstrip()) + 1
        spots.append((path, offsets[i] + col, line, col))
print(len(spots), "spots", flush=True)

with open(out, "w") as f:
    for k, (path, cursor, _line, col) in enumerate(spots):
        text = Path(path).read_text(encoding="utf-8")
        line_end = text.find("\n", cursor)
        line_end = len(text) if line_end < 0 else line_end
        target = text[cursor:line_end].rstrip()
        doc_text = text[:cursor] + text[line_end:]
        row = {"path": path, "col": col, "target": target}
        for name, budget, order in VARIANTS:
            current.update(order=order, budget=budget)
            doc = Document(Path(path).resolve().as_uri(), language_id_for_path(Path(path)), 0,
                           doc_text)
            prepared = prepare(doc, cursor, None, settings)
            completer.engine.forget(prepared.key)
            c = completer.run(prepared, CancelToken())
            row[name] = {"text": c.text, "tokens": c.prompt_tokens, "full": c.full_prompt,
                         "ms": round(c.latency_ms)}
        f.write(json.dumps(row) + "\n")
        f.flush()
        print(k, Path(path).name, repr(target[:30]),
              {n: (row[n]["tokens"], row[n]["text"].split("\n")[0].rstrip() == target)
               for n, _, _ in VARIANTS}, flush=True)
