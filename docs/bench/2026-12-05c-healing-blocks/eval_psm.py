"""pass@1 per hole: the server's block (now), the trained-layout block alone (psm), the rule
shipped (cons: the trained-layout block where it starts with the line shown, else now), and
the PSM reference from probe-1.5b.jsonl."""
import json
import sys
from pathlib import Path

from lsp_complete.bench.humaneval import PassRunner, load_multi_line_file, sample_tasks

rows = [json.loads(line) for line in Path(sys.argv[1]).read_text().splitlines()]
tasks = load_multi_line_file("/work/data/HumanEval-MultiLineInfilling.jsonl.gz")
by = {s: sample_tasks(tasks, 40, s) for s in {r["seed"] for r in rows}}
ref = {(r["seed"], r["i"]): r
       for r in map(json.loads, Path("probe-1.5b.jsonl").read_text().splitlines())}
run = PassRunner()
tot = {}
for r in rows:
    t = by[r["seed"]][r["i"]]
    now = r["block"] or r["primary"]
    psm = r["psm"] or r["primary"]
    longer = r["psm"] and r["psm"].count("\n") > r["primary"].count("\n")
    cons = r["psm"] if (longer and r["psm"].startswith(r["primary"])) else now
    old = ref[(r["seed"], r["i"])]
    res = {"now": run.passed(t, now), "psm": run.passed(t, psm), "cons": run.passed(t, cons),
           "ref": run.passed(t, old["ref"]), "em_now": t.exact_match(now),
           "em_psm": t.exact_match(psm)}
    for k, v in res.items():
        tot[k] = tot.get(k, 0) + v
    if res["now"] != res["psm"] or res["now"] != res["ref"]:
        print(r["seed"], r["i"], r["name"], {k: int(v) for k, v in res.items()}, r["psm_stop"])
print(len(rows), tot)
