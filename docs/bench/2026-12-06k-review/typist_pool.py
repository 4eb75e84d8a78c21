"""The typist's characters put in by Tab over several runs (seeds) pooled: per side the share
of all spans' characters, and B/A with a paired bootstrap interval over the spans of every
run (2,000 resamples).

python typist_pool.py RUN/ab-samples.json [RUN/ab-samples.json ...]
"""

import json
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np


def spans(path: str) -> list[dict]:
    """Per span: Tab characters per side, and the span's characters ("chars")."""
    units = json.loads(Path(path).read_text())["units"]
    found: dict[str, dict] = defaultdict(dict)
    for unit in units:
        if unit["scenario"] != "saved":
            continue
        extras = [sample.get("extra") or {} for sample in unit["samples"]]
        row = found[unit["name"]]
        row[unit["side"]] = sum(extra.get("tab_chars", 0) for extra in extras)
        row["chars"] = max(extra.get("span_chars", 0) for extra in extras)
        row["language"] = next((extra["language"] for extra in extras if "language" in extra), "")
    return list(found.values())


def main() -> None:
    rows = [row for path in sys.argv[1:] for row in spans(path)]
    sides = sorted({key for row in rows for key in row} - {"chars", "language"})
    chars = np.array([row["chars"] for row in rows])
    tab = {side: np.array([row.get(side, 0.0) for row in rows]) for side in sides}
    print(f"{len(rows)} spans, {int(chars.sum())} characters")
    for side in sides:
        print(f"{side}: {tab[side].sum() / chars.sum():.1%} put in by Tab")
    draws = np.random.default_rng(0).integers(0, len(rows), size=(2000, len(rows)))
    for side in sides:
        if side == "B":
            continue
        ratios = tab["B"][draws].sum(axis=1) / np.maximum(tab[side][draws].sum(axis=1), 1e-9)
        low, high = np.percentile(ratios, [2.5, 97.5])
        print(f"B/{side}: {tab['B'].sum() / tab[side].sum():.2f}x ({low:.2f}-{high:.2f})")
    for language in sorted({row["language"] for row in rows}):
        mine = [row for row in rows if row["language"] == language]
        total = sum(row["chars"] for row in mine)
        shares = " / ".join(f"{sum(row.get(side, 0) for row in mine) / total:.1%}"
                            for side in sides)
        print(f"{language} ({len(mine)} spans, {total} characters): {shares}")


if __name__ == "__main__":
    main()
