"""Compare the rows of two probe runs (before, after) spot by spot: per language (C files
indented with tabs apart), line-exact, the spots won and lost, empty suggestions and those
that begin with a blank; with -v the spots whose suggestion changed.
Usage: compare.py BEFORE.jsonl AFTER.jsonl [-v]"""
import json
import sys
from collections import Counter, defaultdict
from pathlib import Path


def rows(path: str) -> list[dict]:
    return [json.loads(line) for line in Path(path).read_text().splitlines()]


def language(row: dict) -> str:
    name = Path(row["path"]).name
    lang = row.get("language") or ("go" if name.endswith(".go") else "c")
    return lang + " (tabs)" if lang == "c" and name.startswith("tmux_") else lang


before, after = rows(sys.argv[1]), rows(sys.argv[2])
counts: dict[str, Counter] = defaultdict(Counter)
for a, b in zip(before, after, strict=True):
    assert a["path"] == b["path"] and a["target"] == b["target"]
    for key in (language(a), "all"):
        c = counts[key]
        c["spots"] += 1
        c["won"] += b["exact"] and not a["exact"]
        c["lost"] += a["exact"] and not b["exact"]
        for side, row in (("a", a), ("b", b)):
            for measure in ("exact", "empty", "blank_lead"):
                c[side + measure] += row[measure]
print("| language | spots | line-exact before | after | won | lost | empty before / after "
      "| begins with a blank before / after |")
print("| --- | --- | --- | --- | --- | --- | --- | --- |")
for key, c in sorted(counts.items(), key=lambda item: (item[0] == "all", item[0])):
    print(f"| {key} | {c['spots']} | {c['aexact']} | {c['bexact']} | {c['won']} | {c['lost']} "
          f"| {c['aempty']} / {c['bempty']} | {c['ablank_lead']} / {c['bblank_lead']} |")
if "-v" in sys.argv:
    for a, b in zip(before, after, strict=True):
        if a["text"] != b["text"]:
            print(Path(a["path"]).name, repr(a["target"][:40]), "|", repr(a["text"][:40]), "->",
                  repr(b["text"][:40]))
