"""Compare B's answers with A1's key by key in an awaited run (the keys are the same on every
side): same, cut (B's a prefix of A1's), or other; and whether a cut lost characters a
partial accept takes. `python compare_keys.py ab-samples.json [-v]`."""

import collections
import json
import sys
from pathlib import Path

data = json.loads(Path(sys.argv[1]).read_text())
verbose = len(sys.argv) > 2
answers: dict[tuple[str, str, int], dict[str, dict]] = collections.defaultdict(dict)
for unit in data["units"]:
    for sample in unit["samples"]:
        answers[(unit["scenario"], unit["name"], sample["index"])][unit["side"]] = sample
counts: collections.Counter[str] = collections.Counter()
for key, sides in sorted(answers.items()):
    a, b = sides.get("A1"), sides.get("B")
    if not a or not b:
        continue
    shown_a, shown_b = a["suggestion"] or "", b["suggestion"] or ""
    if shown_a == shown_b:
        counts["same"] += 1
    elif shown_a.startswith(shown_b):
        kind = "cut" if shown_b.strip() else "held back"
        counts[kind] += 1
        counts[f"{kind}, A1 line-exact"] += bool(a["line_exact"])
        lost = a["extra"]["accepted_chars"] > b["extra"]["accepted_chars"]
        counts[f"{kind}, lost accepted characters"] += lost
        if verbose:
            print(key, repr(shown_a), "->", repr(shown_b))
    else:
        counts["other"] += 1
print(dict(counts))
