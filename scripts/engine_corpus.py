"""Same engine outputs before and after a restructuring of the in-process engine.

Runs a fixed list of completion requests straight through `LlamaEngine` (no server, no
pipeline) and writes every output text and stop reason to JSON; two such files compare request
by request. Whichever checkout PYTHONPATH names is what runs:

    PYTHONPATH=/path/to/old python scripts/engine_corpus.py --model M --out old.json
    PYTHONPATH=. python scripts/engine_corpus.py --model M --out new.json
    python scripts/engine_corpus.py --compare old.json new.json

The corpus: files from tests/data/context asked at line starts, mid-word (healed) and after an
opener, one after another in one engine with fewer slots than files (prefix reuse, borrowing
and eviction all happen), with and without speculation, as alternatives, as an aside request
and after warming. Drafts are sized from the prior costs, not measured ones, and the threads
are fixed, so that the decodes made do not depend on the machine's speed.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
from pathlib import Path
from typing import Any

DATA = Path(__file__).resolve().parent.parent / "tests" / "data" / "context"
FILES = ["inventory.py", "server.go", "matrix.rs", "rate_limiter.ts", "ring_buffer.c",
         "OrderService.java", "config_store.js", "lru_cache.cpp", "user_card.tsx"]
PREFIX, SUFFIX, MIDDLE = "<|fim_prefix|>", "<|fim_suffix|>", "<|fim_middle|>"
WINDOW = 1500  # characters of the file before the cursor (and 300 after) in each prompt
KINDS = ["plain", "lookup", "alternatives", "aside", "warmed"]


def spots(text: str) -> list[tuple[str, int]]:
    """Three cursor positions: a line start, mid-word, after an opening bracket."""
    indented = [m.end() for m in re.finditer(r"^[ \t]+(?=[A-Za-z])", text, re.MULTILINE)]
    line_start = indented[len(indented) // 2]  # after the indentation
    mid_word = next(i for i in range(len(text) * 2 // 3, len(text))
                    if text[i - 3:i].isalpha() and text[i].isalpha())
    opener = next(i + 1 for i in range(len(text) // 3, len(text)) if text[i] in "({[")
    return [("line-start", line_start), ("mid-word", mid_word), ("opener", opener)]


def request_for(engine: Any, key: str, text: str, offset: int, **kwargs: Any) -> Any:
    from lsp_complete.engine.base import GenerationRequest

    before = text[max(0, offset - WINDOW):offset]
    cut = max(before.rfind("\n") + 1, 0)  # the half-typed line is the middle segment
    head_text, middle = before[:cut], before[cut:]
    head = engine.tokenize(PREFIX, True) + engine.tokenize(head_text)
    tail = (engine.tokenize(SUFFIX, True) + engine.tokenize(text[offset:offset + 300])
            + engine.tokenize(MIDDLE, True))
    mid = engine.tokenize(middle)
    heal = engine.detokenize(mid[-1:]) if mid else ""
    return GenerationRequest(key=key, segments=[head, tail, mid[:-1]], heal=heal,
                             heal_code=not heal.strip(" ") and bool(heal), **kwargs)


def outcome(result: Any) -> dict[str, Any]:
    return {"text": result.text, "stop_reason": result.stop_reason,
            "generated": result.generated_tokens, "first_token": result.first_token,
            "reused": result.reused_tokens, "encoded": result.encoded_tokens}


def run(model: Path, max_tokens: int) -> list[dict[str, Any]]:
    from lsp_complete.engine.base import CancelToken
    from lsp_complete.engine.kvstore import KVStore
    from lsp_complete.engine.llama import LlamaEngine

    store = KVStore(tempfile.mkdtemp(prefix="engine-corpus-kv-"))
    engine = LlamaEngine(model, n_ctx=4096, n_threads=2, thread_policy="fixed", slots=3,
                         kv_store=store, model_id="corpus")
    engine.draft_policy.costs.min_samples = 10**9  # prior costs: drafts independent of speed
    out: list[dict[str, Any]] = []
    n = 0
    try:
        for name in FILES:
            text = (DATA / name).read_text()
            for spot, offset in spots(text):
                kind = KINDS[n % len(KINDS)]
                n += 1
                key = f"file:///{name}"
                what = f"{name} {spot} {kind}"
                multiline = n % 3 == 0
                req = request_for(engine, key, text, offset, max_tokens=max_tokens,
                                  single_line=not multiline, stop=("\n\n",),
                                  speculation="off" if kind == "plain" else "lookup")
                if kind == "alternatives":
                    first = engine.complete(req, CancelToken())
                    alts = engine.alternatives(req, 3, CancelToken())
                    out.append({"what": what, **outcome(first),
                                "alternatives": [outcome(a) for a in alts]})
                    continue
                if kind == "aside":
                    engine.complete(req, CancelToken())
                    longer = request_for(engine, key, text, offset, max_tokens=max_tokens,
                                         single_line=False, aside=True)
                    out.append({"what": what, **outcome(engine.complete(longer, CancelToken())),
                                "after": outcome(engine.complete(req, CancelToken()))})
                    continue
                if kind == "warmed":
                    sliced = engine.warm(key, req.segments, CancelToken(), limit=40)
                    full = engine.warm(key, req.segments, CancelToken())
                    out.append({"what": what, "warmed": [sliced, full],
                                **outcome(engine.complete(req, CancelToken()))})
                    continue
                out.append({"what": what, **outcome(engine.complete(req, CancelToken()))})
            # The same spot again: a re-request drafts from the previous suggestion.
            again = request_for(engine, f"file:///{name}", text, spots(text)[0][1],
                                max_tokens=max_tokens, speculation="auto")
            out.append({"what": f"{name} again", **outcome(engine.complete(again,
                                                                           CancelToken()))})
        # A copy of the last file borrows its cells; the first file comes back from disk.
        for key, name in (("file:///copy.tsx", FILES[-1]), (f"file:///{FILES[0]}", FILES[0])):
            text = (DATA / name).read_text()
            req = request_for(engine, key, text, spots(text)[0][1], max_tokens=max_tokens)
            out.append({"what": f"{key} later", **outcome(engine.complete(req, CancelToken()))})
        out.append({"what": "persisted", "saved": engine.persist()})
        c = engine.counters
        out.append({"what": "counters", "calls": c.calls, "warm_calls": c.warm_calls,
                    "tokens_encoded": c.tokens_encoded, "tokens_generated": c.tokens_generated,
                    "tokens_reused": c.tokens_reused, "tokens_borrowed": c.tokens_borrowed,
                    "evictions": c.evictions, "restored_from_disk": c.restored_from_disk,
                    "alternative_tokens": c.alternative_tokens})
    finally:
        engine.close()
    return out


def compare(old: Path, new: Path) -> int:
    a, b = (json.loads(p.read_text()) for p in (old, new))
    if len(a) != len(b):
        print(f"{len(a)} entries vs {len(b)}")
        return 1
    same = sum(x == y for x, y in zip(a, b, strict=True))
    for x, y in zip(a, b, strict=True):
        if x != y:
            print(f"differs: {x['what']}:\n  {x!r}\n  {y!r}")
    print(f"{same} of {len(a)} entries identical")
    return 0 if same == len(a) else 1


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", type=Path, help="a GGUF file; 'tiny': the generated test model")
    p.add_argument("--max-tokens", type=int, default=24)
    p.add_argument("--out", type=Path)
    p.add_argument("--compare", nargs=2, type=Path)
    args = p.parse_args()
    if args.compare:
        return compare(*args.compare)
    model = args.model
    if str(model) == "tiny":
        from lsp_complete.testing import write_tiny_gguf

        model = write_tiny_gguf(Path(tempfile.mkdtemp(prefix="corpus-tiny-")) / "tiny.gguf")
    import lsp_complete

    print(f"running {lsp_complete.__file__}", file=sys.stderr)
    answers = run(model, args.max_tokens)
    args.out.write_text(json.dumps(answers, indent=1))
    print(f"{len(answers)} entries -> {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
