"""What a cached file prefix would buy at a new spot (the first answer), offline.

S: a cold prompt the size of the server's (~110 tokens of lines above, ~40 below), nothing
   cached.
W: a wave-1 sized window (~260 above, ~65 below), nothing cached.
F: the file's lines from a 32-line grid point 64-96 lines above the cursor, held in the KV
   cache beforehand; at the key only the cursor line's typed text, the suffix (~40 tokens) and
   the FIM tokens are encoded.

Each spot: a line whose first character is typed; greedy; first line exact against the line's
true rest. Prints a JSON line a spot and a summary; writes every row to OUT.

    python file_prefix_probe.py MODEL.gguf SPOTS_PER_FILE OUT.json CORPUS_FILE...
"""

from __future__ import annotations

import json
import os
import random
import sys
import time
from typing import Any

import llama_cpp
import llama_cpp.llama as llama_module

_default_params = llama_cpp.llama_model_default_params


def _plain_kernels() -> Any:
    # As the server loads models: the extra CPU buffer types crash with K-quants here.
    params = _default_params()
    params.use_extra_bufts = False
    return params


llama_module.llama_cpp.llama_model_default_params = _plain_kernels  # type: ignore[assignment]

MODEL, SPOTS, OUT, FILES = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4:]
llm = llama_cpp.Llama(MODEL, n_ctx=4096, n_batch=512, n_threads=2, verbose=False)
P, S, M = "<|fim_prefix|>", "<|fim_suffix|>", "<|fim_middle|>"
MAX_TOKENS = 32


def tok(text: str, special: bool = False) -> list[int]:
    return llm.tokenize(text.encode(), add_bos=False, special=special)


STOP = {llm.token_eos()} | {tok(t, True)[0] for t in (P, S, M, "<|endoftext|>", "<|file_sep|>")}


def lines_within(lines: list[str], budget: int, from_end: bool) -> list[str]:
    """Whole lines, nearest the cursor first, within `budget` tokens."""
    kept: list[str] = []
    used = 0
    for line in reversed(lines) if from_end else lines:
        cost = len(tok(line + "\n"))
        if used + cost > budget:
            break
        kept.append(line)
        used += cost
    return kept[::-1] if from_end else kept


def prompt(above: list[str], typed: str, below: list[str]) -> tuple[list[int], list[int]]:
    """(what may be cached: the prefix's lines, what the key encodes)."""
    head = tok(P, True) + (tok("\n".join(above) + "\n") if above else [])
    key = tok(typed) + tok(S, True) + tok("\n".join(below) + "\n") + tok(M, True)
    return head, key


def answer(tokens: list[int]) -> dict[str, Any]:
    started = time.perf_counter()
    cached = 0
    for have, want in zip(llm._input_ids[: llm.n_tokens], tokens, strict=False):
        if have != want:
            break
        cached += 1
    out, generated = b"", 0
    for token in llm.generate(tokens, top_k=1, temp=0.0, reset=True):
        if token in STOP:
            break
        out += llm.detokenize([token])
        generated += 1
        if b"\n" in out or generated >= MAX_TOKENS:
            break
    return {"text": out.decode(errors="replace").split("\n")[0],
            "enc": len(tokens) - min(cached, len(tokens) - 1), "ctx": len(tokens),
            "gen": generated, "ms": (time.perf_counter() - started) * 1000}


def main() -> None:
    rng = random.Random(11)
    rows: list[dict[str, Any]] = []
    for path in sorted(FILES):
        with open(path, errors="replace") as f:
            lines = f.read().split("\n")
        spots = [i for i, text in enumerate(lines) if len(text.strip()) > 8 and i > 40]
        for cur in sorted(rng.sample(spots, min(SPOTS, len(spots)))):
            line = lines[cur]
            indent = len(line) - len(line.lstrip())
            typed, truth = line[: indent + 1], line[indent + 1 :].rstrip()
            above, below = lines[:cur], lines[cur + 1 :]
            row: dict[str, Any] = {"file": os.path.basename(path), "line": cur, "truth": truth}
            for name, up, down in (("S", 110, 40), ("W", 260, 65)):
                head, key = prompt(lines_within(above, up, True), typed,
                                   lines_within(below, down, False))
                llm.reset()  # nothing cached
                row[name] = answer(head + key)
            grid = max(0, (cur - 64) // 32 * 32)
            head, key = prompt(lines[grid:cur], typed, lines_within(below, 40, False))
            llm.reset()
            llm.eval(head)  # held beforehand (idle time)
            row["F"] = {**answer(head + key), "idle": len(head)}
            for name in "SWF":
                row[name]["ok"] = row[name]["text"].rstrip() == truth
            rows.append(row)
            print(json.dumps({k: v for k, v in row.items() if k != "truth"}), flush=True)
    with open(OUT, "w") as f:
        json.dump(rows, f, indent=1)
    for name in "SWF":
        exact = sum(r[name]["ok"] for r in rows)
        encoded = sorted(r[name]["enc"] for r in rows)
        ms = sorted(r[name]["ms"] for r in rows)
        print(f"{name} exact {exact}/{len(rows)} encoded p50 {encoded[len(rows) // 2]}"
              f" answer p50 {ms[len(rows) // 2]:.0f} ms")


main()
