"""Two probe_mid.py row files, spot by spot: the spots won and lost, line-exact and empty
suggestions per language, and the median ratio of latencies.
Usage: compare.py BEFORE.jsonl AFTER.jsonl"""
import json
import statistics
import sys
from collections import defaultdict
from pathlib import Path


def rows(path: str) -> list[dict]:
    return [json.loads(line) for line in Path(path).read_text().splitlines()]


before, after = rows(sys.argv[1]), rows(sys.argv[2])
counts: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0, 0, 0])
for a, b in zip(before, after, strict=True):
    assert a["before"] == b["before"], "not the same spots"
    row = counts[a["language"]]
    for i, value in enumerate((1, a["exact"], b["exact"], a["empty"], b["empty"])):
        row[i] += value
    if a["exact"] != b["exact"]:
        verdict = "WON " if b["exact"] else "LOST"
        print(verdict, a["language"], repr(a["before"][-25:]), repr(a["target"][:30]), "|",
              repr(a["text"][:30]), "->", repr(b["text"][:30]))
for language, (n, exact_a, exact_b, empty_a, empty_b) in sorted(counts.items()):
    print(f"{language}: {n} spots, line-exact {exact_a} -> {exact_b}, "
          f"empty {empty_a} -> {empty_b}")
totals = [sum(row[i] for row in counts.values()) for i in range(5)]
print(f"total: {totals[0]} spots, line-exact {totals[1]} -> {totals[2]}, "
      f"empty {totals[3]} -> {totals[4]}")
ratios = [b["ms"] / a["ms"] for a, b in zip(before, after, strict=True)]
print(f"latency, median of the spots' ratios: {statistics.median(ratios):.3f}")
