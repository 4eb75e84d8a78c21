"""How well the first prompt's tokens are spent: the teacher-forced negative log-likelihood
of each span's true line under the first prompt cut in other ways (issue 30).

    python cut_nll.py MODEL_NAME GGUF SEED SPANS_PER_FILE CUTS FILE... > rows.jsonl

CUTS: names of CUTS below (optionally `name@budget`), `window` (the cold window) or `full`.
Each row: the span, and per cut [total NLL of the line, NLL of its first token, prompt
tokens]. The cut is `prompt.fit_context`'s, with its order of growing as a parameter.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import random
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np

# The bench's CPU-safety switch (bench/compat) for the llama_cpp.Llama made below.
os.environ["LSP_COMPLETE_BENCH_NO_EXTRA_BUFFERS"] = "1"
from llama_cpp import Llama  # noqa: E402

import lsp_complete.bench.compat.sitecustomize  # noqa: E402, F401
from lsp_complete import prompt as prompt_module  # noqa: E402
from lsp_complete.bench import workload  # noqa: E402
from lsp_complete.config import Settings  # noqa: E402
from lsp_complete.context import CodeContext  # noqa: E402
from lsp_complete.documents import Document  # noqa: E402
from lsp_complete.oneshot import language_id_for_path  # noqa: E402
from lsp_complete.pipeline.completer import load_completer  # noqa: E402
from lsp_complete.pipeline.prepare import prepare  # noqa: E402

# (part, most lines or None for all, most tokens as a share of the budget or None for all
# that is left), grown in this order.
Step = tuple[str, int | None, float | None]
REST: list[Step] = [("above", None, None), ("head", None, None), ("below", None, None)]
CUTS: dict[str, list[Step]] = {
    "cur": [("above", 4, None), ("head", None, 1 / 3), ("below", 1, None), *REST],
    "b2": [("above", 4, None), ("head", None, 1 / 3), ("below", 2, None), *REST],
    "b4": [("above", 4, None), ("head", None, 1 / 3), ("below", 4, None), *REST],
    "a8": [("above", 8, None), ("head", None, 1 / 3), ("below", 1, None), *REST],
    "h50": [("above", 4, None), ("head", None, 1 / 2), ("below", 1, None), *REST],
    "h15": [("above", 4, None), ("head", None, 0.15), ("below", 1, None), *REST],
    "nohead": [("above", 4, None), ("below", 4, None), ("above", None, None),
               ("below", None, None), ("head", None, None)],
}


def fit(ctx: CodeContext, budget: int, steps: list[Step],
        count: Callable[[str], int]) -> CodeContext:
    """`prompt.fit_context` with the order of growing as a parameter."""
    above = ctx.before.splitlines(keepends=True)
    head = ctx.head.splitlines(keepends=True)
    rest, *below = ctx.suffix.split("\n")
    left = budget - prompt_module._TEMPLATE_TOKENS - count(rest)
    if left >= count(ctx.before) + count(ctx.head) + count(ctx.suffix) - count(rest):
        return ctx
    kept = {"above": 0, "head": 0, "below": 0}
    lines = {"above": above[::-1], "head": head[::-1], "below": below}
    for part, most_lines, share in steps:
        spent, cap = 0, left if share is None else int(budget * share)
        while kept[part] < min(most_lines or len(lines[part]), len(lines[part])):
            cost = count(lines[part][kept[part]]) + (part == "below")
            if cost > min(left, cap - spent):
                break
            left, spent, kept[part] = left - cost, spent + cost, kept[part] + 1
    return dataclasses.replace(
        ctx, head="".join(head[len(head) - kept["head"]:]),
        before="".join(above[len(above) - kept["above"]:]),
        suffix="\n".join([rest, *below[: kept["below"]]]))


def nll(llm: Llama, prompt: list[int], target: list[int]) -> tuple[float, float]:
    """The target's total and first-token negative log-likelihood after the prompt."""
    llm.reset()
    llm.eval(prompt + target)
    scores = np.asarray(llm.scores[: len(prompt) + len(target)], dtype=np.float64)
    logprobs = []
    for i, token in enumerate(target):
        row = scores[len(prompt) - 1 + i]
        top = row.max()
        logprobs.append(row[token] - (top + math.log(np.exp(row - top).sum())))
    return -sum(logprobs), -logprobs[0]


def main(argv: list[str]) -> None:
    model, gguf, seed, per, cuts, files = (argv[0], argv[1], int(argv[2]), int(argv[3]),
                                           argv[4].split(","), argv[5:])
    settings = Settings(model=model, threads=2, multiline="never")
    completer, _, _ = load_completer(settings)
    count = completer._count_tokens
    llm = Llama(gguf, n_ctx=4096, n_batch=512, logits_all=True, n_threads=2, verbose=False)
    for path in files:
        source = workload.read_source(path)
        rng = random.Random(f"{seed}:{path}")
        for start in workload.choose_spans(source.text, per, 1, rng):
            lines = source.text.split("\n")
            target = lines[start]
            indent = target[: len(target) - len(target.lstrip())]
            lines[start] = indent
            cursor = sum(len(line) + 1 for line in lines[:start]) + len(indent)
            doc = Document(f"file://{path}", language_id_for_path(Path(path)), 1,
                           "\n".join(lines))
            prepared = prepare(doc, cursor, None, settings)
            row: dict[str, object] = {"file": Path(path).name, "line": start + 1,
                                      "lang": doc.language_id}
            for cut in cuts:
                name, _, budget = cut.partition("@")
                if cut == "window":
                    prompt = completer.planner.window_prompt(prepared)
                elif cut == "full":
                    prompt = completer.build_prompt(prepared.ctx)
                else:
                    assert prepared.cold_ctx is not None
                    prompt = completer.build_prompt(
                        fit(prepared.cold_ctx, int(budget or 160), CUTS[name], count))
                line = completer.engine.tokenize(prompt.heal + target[len(indent):] + "\n")
                total, first = nll(llm, prompt.tokens, line)
                row[cut] = [round(total, 3), round(first, 3), len(prompt)]
            print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
