"""A compact table of a run's rows: per scenario and chosen measures, A1, A2, B, B/A1, B/A2.

python summ.py ab-samples.json "first key of a span p50,line-exact" [languages]
"""

import json
import sys
from pathlib import Path


def value(x: float | None, unit: str) -> str:
    if x is None:
        return "-"
    if unit == "ms":
        return f"{x:,.0f} ms"
    if unit == "s":
        return f"{x:.3f} s"
    if unit in ("%", "share"):
        return f"{x * 100:.1f}%"
    return f"{x:.3g}"


def number(x: object) -> str:
    return f"{x:.2f}" if isinstance(x, (int, float)) else str(x)


def ratio(row: dict) -> str:
    text = f"{number(row['ratio'])}x ({number(row['low'])}-{number(row['high'])})"
    return f"**{text}**" if row["verdict"] in ("regression", "improvement") else text


def main() -> None:
    data = json.loads(Path(sys.argv[1]).read_text())
    want = sys.argv[2].split(",") if len(sys.argv) > 2 else None
    languages = len(sys.argv) > 3
    names = {key: side.get("label", key) for key, side in data["meta"]["sides"].items()}
    by: dict[tuple[str, str], dict[str, dict]] = {}
    for row in data["rows"]:
        if " · " in row["scenario"] and not languages:
            continue
        by.setdefault((row["scenario"], row["measure"]), {})[row["baseline"]] = row
    print(f"| scenario | measure | {names['A1']} | {names['A2']} | B "
          f"| B/{names['A1']} | B/{names['A2']} |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for (scenario, measure), rows in by.items():
        if want and not any(w in measure for w in want):
            continue
        a1, a2 = rows.get("A1"), rows.get("A2")
        if not a1 or not a2:
            continue
        unit = a1.get("unit", "")
        print(f"| {scenario} | {measure} | {value(a1['a'], unit)} | {value(a2['a'], unit)} "
              f"| {value(a1['b'], unit)} | {ratio(a1)} | {ratio(a2)} |")


if __name__ == "__main__":
    main()
