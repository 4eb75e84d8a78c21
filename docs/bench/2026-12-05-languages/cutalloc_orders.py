import dataclasses
from lsp_complete import prompt as P
def fit(ctx, budget, order, count):
    above = ctx.before.splitlines(keepends=True); head = ctx.head.splitlines(keepends=True)
    rest, *below = ctx.suffix.split("\n")
    left = budget - P._TEMPLATE_TOKENS - count(rest)
    if left >= count(ctx.before) + count(ctx.head) + count(ctx.suffix) - count(rest):
        return ctx
    kept = {"above": 0, "head": 0, "below": 0}
    lines = {"above": above[::-1], "head": head[::-1], "below": below}
    def grow(part, most_lines, most_tokens):
        nonlocal left
        spent = 0
        while kept[part] < min(most_lines, len(lines[part])):
            cost = count(lines[part][kept[part]]) + (part == "below")
            if cost > min(left, most_tokens - spent): return
            left -= cost; spent += cost; kept[part] += 1
    for part, n, cap in order:
        grow(part, 10**6 if n is None else n, left if cap is None else int(budget * cap))
    return dataclasses.replace(ctx, head="".join(head[len(head) - kept["head"]:]),
        before="".join(above[len(above) - kept["above"]:]), suffix="\n".join([rest, *below[:kept["below"]]]))

ORDERS = {
  "cur": [("above", 4, None), ("head", None, 1/3), ("below", 1, None), ("above", None, None), ("head", None, None), ("below", None, None)],
  "b4": [("above", 4, None), ("head", None, 1/3), ("below", 4, None), ("above", None, None), ("head", None, None), ("below", None, None)],
  "b8": [("above", 4, None), ("head", None, 1/3), ("below", 8, 1/3), ("above", None, None), ("head", None, None), ("below", None, None)],
  "bal": [("above", 4, None), ("below", 2, None), ("head", None, 1/4), ("above", 8, None), ("below", 6, None), ("above", None, None), ("head", None, None), ("below", None, None)],
  "b2": [("above", 4, None), ("head", None, 1/3), ("below", 2, None), ("above", None, None), ("head", None, None), ("below", None, None)],
  "a8": [("above", 8, None), ("head", None, 1/3), ("below", 1, None), ("above", None, None), ("head", None, None), ("below", None, None)],
  "h50": [("above", 4, None), ("head", None, 1/2), ("below", 1, None), ("above", None, None), ("head", None, None), ("below", None, None)],
  "h15": [("above", 4, None), ("head", None, 0.15), ("below", 1, None), ("above", None, None), ("head", None, None), ("below", None, None)],
  "nohead": [("above", 4, None), ("below", 4, None), ("above", None, None), ("below", None, None), ("head", None, None)],
}
