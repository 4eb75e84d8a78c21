"""The review's rows side by side from a 4-side run's ab-samples.json (A1 the code before,
A2 215d7a9, A3 2764f02, B the candidate).

python table.py ab-samples.json NAME_OF_A1
"""

import json
import sys
from pathlib import Path

WANT = [
    ("moved", "first key of a span p50"),
    ("moved", "keystroke p95 after a span's first key"),
    ("moved", "line-exact"),
    ("moved", "CPU s / keystroke"),
    ("burst", "first key of a span p50"),
    ("burst", "keystroke p95 after a span's first key"),
    ("burst", "line-exact"),
    ("burst", "CPU s / keystroke"),
    ("saved", "characters put in by Tab"),
    ("saved", "wrong suggestions shown / key"),
    ("saved", "keystroke p95 after a span's first key"),
    ("saved", "CPU s / keystroke"),
    ("busy", "keystroke p95 after a span's first key"),
    ("busy", "CPU s / keystroke"),
    ("open", "first suggestion p50"),
    ("crossfile-at-open", "exact match"),
    ("crossfile-at-open", "needed identifiers"),
    ("crossfile-at-open", "answer p50"),
    ("crossfile-at-open", "CPU s / line"),
]


def ratio(row: dict) -> str:
    def num(x: float | str) -> str:
        return f"{x:.2f}" if isinstance(x, (int, float)) else str(x)

    text = f"{num(row['ratio'])}x"
    if row["low"] is not None:
        text += f" ({num(row['low'])}-{num(row['high'])})"
    return f"**{text}**" if row["verdict"] in ("regression", "improvement") else text


def value(x: float, unit: str) -> str:
    if unit == "ms":
        return f"{x:,.0f} ms"
    if unit == "share":
        return f"{100 * x:.1f}%"
    return f"{x:.3f} s" if unit == "s" else f"{x:.2f}"


def main() -> None:
    rows = json.loads(Path(sys.argv[1]).read_text())["rows"]
    first = sys.argv[2]
    print(f"| scenario | measure | {first} | 215d7a9 | 2764f02 | B | B/{first} | B/215d7a9 "
          "| B/2764f02 |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for scenario, measure in WANT:
        found = {r["baseline"]: r for r in rows
                 if r["scenario"] == scenario and r["measure"] == measure}
        if not found:
            continue
        unit = found["A1"]["unit"]
        values = [value(found[a]["a"], unit) for a in ("A1", "A2", "A3")]
        print(f"| {scenario} | {measure} | {' | '.join(values)} | "
              f"{value(found['A1']['b'], unit)} | "
              f"{' | '.join(ratio(found[a]) for a in ('A1', 'A2', 'A3'))} |")


if __name__ == "__main__":
    main()
