"""Summarize probe_losses.py's rows: per language, how many first lines equal the rest of
the real line (shipped / stream / free), and every spot where they disagree.
`python an_losses.py ROWS.jsonl`"""
import collections
import json
import sys


def first(text: str) -> str:
    return text.split("\n")[0].rstrip()


def show(name: str, rows: list[dict]) -> None:
    print(f"\n## {name} ({len(rows)})")
    for r in rows:
        print(f"- {r['lang']} {r['kind']} prefix={r['line_prefix'][-40:]!r}\n"
              f"   target ={r['target']!r}\n   shipped={r['shipped'][:90]!r}\n"
              f"   stream ={r['stream'][:90]!r}\n   free   ={r['free'][:90]!r}")


with open(sys.argv[1]) as rows_file:
    rows = [json.loads(line) for line in rows_file]
by: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
losses, gains, empties, shorter = [], [], [], []
for r in rows:
    target, shipped, stream, free = (r["target"], first(r["shipped"]), first(r["stream"]),
                                     first(r["free"]))
    counts = by[r["lang"]]
    counts.update(n=1, S=shipped == target, T=stream == target, F=free == target,
                  empty=not shipped and bool(free))
    if free == target and shipped != target:
        losses.append(r)
    if shipped == target and free != target:
        gains.append(r)
    if not shipped and free:
        empties.append(r)
    if shipped and shipped != target and target.startswith(shipped) and free.startswith(target):
        shorter.append(r)
total: collections.Counter = collections.Counter()
print(f"{'lang':12} {'n':>4} {'shipped':>8} {'stream':>8} {'free':>8} {'empty':>6}")
for lang, c in sorted(by.items()):
    total.update(c)
    print(f"{lang:12} {c['n']:4} {c['S']:8} {c['T']:8} {c['F']:8} {c['empty']:6}")
print(f"{'all':12} {total['n']:4} {total['S']:8} {total['T']:8} {total['F']:8} {total['empty']:6}")
show("free right, shipped not", losses)
show("shipped right, free not", gains)
show("shipped empty, free not", [r for r in empties if r not in losses])
show("shipped a strict prefix of the right line", [r for r in shorter if r not in losses])
