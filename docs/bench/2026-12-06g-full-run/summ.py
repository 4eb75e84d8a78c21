"""A compact table of a run's rows: per scenario and chosen measures, A1, A2, B and B/A1, B/A2."""
import json, sys
d = json.load(open(sys.argv[1]))
rows = d["rows"]
want = sys.argv[2].split(",") if len(sys.argv) > 2 else None
names = {k: v.get("label", k) for k, v in d["meta"]["sides"].items()}
by = {}
for r in rows:
    if " · " in r["scenario"] and not (len(sys.argv) > 3):
        continue
    by.setdefault((r["scenario"], r["measure"]), {})[r["baseline"]] = r
def v(x, unit):
    if x is None: return "-"
    if unit == "ms": return f"{x:,.0f} ms"
    if unit == "s": return f"{x:.3f} s"
    if unit in ("%", "share"): return f"{x*100:.1f}%"
    return f"{x:.3g}"
def rr(r):
    if not isinstance(r["ratio"], (int, float)): return str(r["ratio"])
    f = lambda x: f"{x:.2f}" if isinstance(x, (int, float)) else str(x)
    s = f"{f(r['ratio'])}x ({f(r['low'])}-{f(r['high'])})"
    return f"**{s}**" if r["verdict"] in ("regression", "improvement") else s
print(f"| scenario | measure | {names['A1']} | {names['A2']} | B | B/{names['A1']} | B/{names['A2']} |")
print("| --- | --- | --- | --- | --- | --- | --- |")
for (sc, m), bl in by.items():
    if want and not any(w in m for w in want): continue
    a1, a2 = bl.get("A1"), bl.get("A2")
    if not a1 or not a2: continue
    u = a1.get("unit", "")
    print(f"| {sc} | {m} | {v(a1['a'],u)} | {v(a2['a'],u)} | {v(a1['b'],u)} | {rr(a1)} | {rr(a2)} |")
