"""Summary of probe_alloc.py's rows: per variant, the first lines exactly the rest of the line,
the characters of the line a partial accept takes, the wrong lines shown, the mean prompt
tokens; paired bootstrap intervals (spots resampled) of each against cur160."""
import json
import random
import sys
from collections import defaultdict

with open(sys.argv[1]) as f:
    rows = [json.loads(line) for line in f]
V = ["cur160", "cur112", "sfx112", "sfx160", "nohead112"]


def lang(path):
    return path.split("/")[-2] if "/corpus/" in path else path.rsplit(".", 1)[-1]


def score(r, v):
    first = r[v]["text"].split("\n")[0].rstrip()
    t = r["target"]
    n = 0
    while n < min(len(first), len(t)) and first[n] == t[n]:
        n += 1
    return (int(first == t), n if first else 0, int(first != t and first != ""), r[v]["tokens"])


S = {v: [score(r, v) for r in rows] for v in V}


def tot(idx, v, k):
    return sum(S[v][i][k] for i in idx)


print(len(rows), "spots")
rng = random.Random(0)
boots = [[rng.randrange(len(rows)) for _ in rows] for _ in range(2000)]
names = ["exact", "partial chars", "wrong shown", "prompt tokens"]
allidx = range(len(rows))
print("| variant | " + " | ".join(names) + " |")
print("| --- |" + " --- |" * len(names))
for v in V:
    cells = []
    for k in range(4):
        val = tot(allidx, v, k)
        if v == "cur160" or k == 3:
            cells.append(f"{val / len(rows):,.0f}" if k == 3 else f"{val:,}")
            continue
        rs = sorted(tot(b, v, k) / max(1, tot(b, "cur160", k)) for b in boots)
        ratio = val / tot(allidx, "cur160", k)
        cells.append(f"{val:,} ({ratio:.2f}x, {rs[50]:.2f}-{rs[1949]:.2f})")
    print(f"| {v} | " + " | ".join(cells) + " |")
by = defaultdict(list)
for i, r in enumerate(rows):
    by[lang(r["path"])].append(i)
print("\nper language, exact / partial chars:")
print("| language | spots | " + " | ".join(V) + " |")
print("| --- | --- |" + " --- |" * len(V))
for name, idx in sorted(by.items()):
    cells = [f"{tot(idx, v, 0)} / {tot(idx, v, 1)}" for v in V]
    print(f"| {name} | {len(idx)} | " + " | ".join(cells) + " |")
