import json, sys, collections
d = json.load(open(sys.argv[1]))
by = collections.defaultdict(dict)
for u in d["units"]:
    for s in u["samples"]:
        by[(u["scenario"], u["name"], s["index"])][u["side"]] = s
stats = collections.Counter()
for k, sides in sorted(by.items()):
    a, b = sides.get("A1"), sides.get("B")
    if not a or not b: continue
    sa, sb = a["suggestion"] or "", b["suggestion"] or ""
    if sa == sb: stats["same"] += 1; continue
    if sa.startswith(sb):
        kind = "held" if not sb.strip() else "cut"
        # accepted_chars: common prefix with the rest of the line
        stats[kind] += 1
        stats[kind + (" A-exact" if a["line_exact"] else " A-not-exact")] += 1
        stats[kind + " acc A=%s B=%s" % ("hi" if a["extra"]["accepted_chars"] > b["extra"]["accepted_chars"] else "eq", "")] += 1
        if len(sys.argv) > 2: print(k, repr(sa), "->", repr(sb), a["line_exact"], a["extra"]["accepted_chars"], b["extra"]["accepted_chars"])
    else:
        stats["differ"] += 1
print(dict(stats))
