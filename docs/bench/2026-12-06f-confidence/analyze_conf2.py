"""The probe's rows: how many right and wrong first lines each threshold on the first line's
probability (the product of its tokens') would hold back, overall and per language."""
import json
import math
import sys
from collections import defaultdict

from lsp_complete.languages import language_of_path

with open(sys.argv[1]) as lines:
    rows = [json.loads(line) for line in lines]
shown = [r for r in rows if r["first"]]


def confidence(r):
    """The product over every token of the first line, the healed ones included (the server's
    `Completion.confidence` leaves those out; rows from the later version keep it too)."""
    return math.prod(r["probs"]) if r["probs"] else 1.0


def line(label, group, t):
    right = [r for r in group if r["exact"]]
    wrong = [r for r in group if not r["exact"]]
    held_w = sum(confidence(r) < t for r in wrong)
    held_r = [r for r in right if confidence(r) < t]
    chars = sum(len(r["target"]) for r in right) or 1
    held_c = sum(len(r["target"]) for r in held_r)
    return (f"| {label} | {len(group)} | {len(right)} | {len(wrong)} "
            f"| {held_w} ({held_w / max(1, len(wrong)):.0%}) "
            f"| {len(held_r)} ({len(held_r) / max(1, len(right)):.0%}) | {held_c / chars:.0%} |")


print(f"{len(rows)} spots, {len(shown)} with a suggestion\n")
HEAD = "| shown | right | wrong | wrong held back | right held back | right characters held back |"
print("| threshold " + HEAD)
print("| --- | --- | --- | --- | --- | --- | --- |")
for t in (0.02, 0.05, 0.10, 0.15, 0.20, 0.30):
    print(line(f"{t:.0%}", shown, t))
print("\nPer language at 10%:\n")
print("| language " + HEAD)
print("| --- | --- | --- | --- | --- | --- | --- |")
by = defaultdict(list)
for r in shown:
    by[language_of_path(r["path"])].append(r)
for lang in sorted(by):
    print(line(lang, by[lang], 0.10))
