"""Offline: cut rules over the probe's raw blocks; pass@1 per rule and per hole."""
import dataclasses
import json
import sys
from pathlib import Path

import llama_cpp

from lsp_complete.bench.humaneval import PassRunner, load_multi_line_file, sample_tasks
from lsp_complete.config import Settings
from lsp_complete.documents import Document
from lsp_complete.pipeline import completer as cm
from lsp_complete.pipeline import prepare

rows = [json.loads(line) for line in Path(sys.argv[1]).read_text().splitlines()]
vocab_model = sys.argv[2]
llm = llama_cpp.Llama(vocab_model, vocab_only=True, verbose=False)
settings = Settings(multiline="auto", persist_cache=False)
tasks = load_multi_line_file("/work/data/HumanEval-MultiLineInfilling.jsonl.gz")
runner = PassRunner()
STOP = ("<|endoftext|>", "<|file_sep|>", "<|fim_prefix|>", "<|fim_suffix|>", "<|fim_middle|>")


def capped(raw: str, max_tokens: int) -> str:
    toks = llm.tokenize(raw.encode(), add_bos=False, special=False)
    if len(toks) <= max_tokens:
        return raw
    text = llm.detokenize(toks[:max_tokens]).decode(errors="ignore")
    return text[: max(0, text.rfind("\n"))]


def rule_answer(row, task, max_lines, max_tokens):
    if not row["wanted"] or row["raw"] is None:
        return row["primary"]
    doc = Document("file:///x.py", "python", 0, task.prefix + task.suffix)
    prepared = prepare(doc, len(task.prefix), None, settings)
    site = dataclasses.replace(prepared.site, multiline=True)
    cm.MAX_LINES = max_lines
    text = cm.cut_block(capped(row["raw"], max_tokens), site, prepared.ctx, STOP)
    if not text.startswith(row["primary"]) or text.count("\n") <= row["primary"].count("\n"):
        return row["primary"]
    return text


by_seed = {s: sample_tasks(tasks, 40, s) for s in {r["seed"] for r in rows}}
rules = {"now 12/160": (12, 160), "16/256": (16, 256), "20/256": (20, 256),
         "30/256": (30, 256), "12/256": (12, 256)}
totals = {k: 0 for k in [*rules, "ref", "primary"]}
for row in rows:
    task = by_seed[row["seed"]][row["i"]]
    res = {}
    for name, (ml, mt) in rules.items():
        res[name] = runner.passed(task, rule_answer(row, task, ml, mt))
    res["primary"] = runner.passed(task, row["primary"])
    if "ref" in row:
        res["ref"] = runner.passed(task, row["ref"])
    for k, v in res.items():
        totals[k] += v
    flag = ("" if res.get("ref") == res["now 12/160"]
            else ("  REF ONLY" if res.get("ref") else "  US ONLY"))
    print(row["seed"], row["i"], row["name"], task.target_lines,
          " ".join(f"{k}={int(v)}" for k, v in res.items()), flag)
print(len(rows), totals)
