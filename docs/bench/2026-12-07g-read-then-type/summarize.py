"""Paired old/new summary of probe_read_type.py runs (bootstrap 95% intervals over tasks,
2,000 resamples; tasks keyed by name). usage: python summarize.py OUTDIR"""

import json
import random
import sys
from pathlib import Path
from typing import Any


def _records(path: Path) -> dict[str, dict[str, Any]]:
    return {r["task"]: r for r in map(json.loads, path.read_text().splitlines())}


def main() -> None:
    out = sys.argv[1]
    old, new = (_records(Path(out) / f"{side}.jsonl") for side in ("old", "new"))
    keys = sorted(set(old) & set(new))
    n = len(keys)
    same = sum(old[k]["suggestion"] == new[k]["suggestion"] for k in keys)
    print(f"tasks {n}; same suggestion {same}")
    rng = random.Random(0)
    for measure in ("em", "needed", "es"):
        a = [old[k][measure] for k in keys]
        b = [new[k][measure] for k in keys]
        diffs = []
        for _ in range(2000):
            picks = [rng.randrange(n) for _ in keys]
            diffs.append(sum(b[i] - a[i] for i in picks) / n)
        diffs.sort()
        print(f"{measure}: old {sum(a) / n:.3f} new {sum(b) / n:.3f} "
              f"diff {(sum(b) - sum(a)) / n:+.3f} (95% {diffs[50]:+.3f} .. {diffs[1949]:+.3f})")
    ms_old = sorted(old[k]["ms"] for k in keys)
    ms_new = sorted(new[k]["ms"] for k in keys)
    print(f"answer ms p50: old {ms_old[n // 2]:.0f} new {ms_new[n // 2]:.0f}")


if __name__ == "__main__":
    main()
