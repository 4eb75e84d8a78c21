"""Rules for showing a suggestion's first line, simulated on probe rows (text, placed token
probabilities, the rest of the line): the whole line, held back under a bar, cut where the
line's running probability falls under a bar, or two bars (whole above `low`, else cut under
`high`, held back when that leaves nothing). Per rule: wrong lines shown, whole right lines
shown (what Tab takes), characters a partial accept takes."""

import json
import sys
from os.path import commonprefix
from pathlib import Path


def first_line_tokens(certainty, text):
    newline = text.find("\n")
    line_end = len(text) if newline < 0 else newline + 1
    tokens, start = [], 0
    for end, probability in certainty or []:
        if start >= line_end:
            break
        tokens.append((start, probability))
        start = end
    return tokens


def shown(row, low, high):
    text, certainty = row["text"], row["certainty"]
    line = text.split("\n", 1)[0].rstrip()
    tokens = first_line_tokens(certainty, text)
    confidence = 1.0
    for _, p in tokens:
        confidence *= p
    if confidence >= low:
        return line
    confidence = 1.0
    for start, p in tokens:
        confidence *= p
        if confidence < high:
            return text[:start].split("\n", 1)[0]
    return line


rows = [json.loads(x) for x in Path(sys.argv[1]).read_text().splitlines()]
rows = [r for r in rows if r["certainty"] is not None]
print(len(rows), "spots with probabilities")
rules = [("off", 0, 0)]
rules += [(f"hide {t}", t, 1.01) for t in (0.05, 0.1, 0.2)]
rules += [(f"cut {t}", t, t) for t in (0.05, 0.1, 0.2)]
rules += [(f"two {lo}/{hi}", lo, hi) for lo in (0.05, 0.1, 0.2) for hi in (0.3, 0.5, 0.7)]
print("| rule | shown | wrong shown | whole right shown | partial chars |")
print("| --- | --- | --- | --- | --- |")
for name, low, high in rules:
    n_shown = wrong = right = chars = 0
    for r in rows:
        s = shown(r, low, high)
        target = r["target"]
        if not s.strip():
            continue
        n_shown += 1
        wrong += not target.startswith(s)
        right += s == target
        chars += len(commonprefix([s, target]))
    print(f"| {name} | {n_shown} | {wrong} | {right} | {chars} |")
