"""Probe: how sure the model is of a suggestion's first line, for right and wrong ones.
Spots are cut as a typist's key sees them (the rest of the line not there yet); every picked
token's probability among the allowed ones is recorded (`GenerationResult.token_probabilities`;
the first 339 rows of probe-0.5b.jsonl were made by an earlier version that patched
`Vocabulary.pick` to compute the same number, and have no `confidence`)."""
import glob
import json
import random
import sys
from pathlib import Path

from lsp_complete.config import Settings
from lsp_complete.documents import Document
from lsp_complete.engine.base import CancelToken
from lsp_complete.oneshot import language_id_for_path
from lsp_complete.pipeline import load_completer, prepare

model, out = sys.argv[1], sys.argv[2]
per_file = int(sys.argv[3]) if len(sys.argv) > 3 else 12
skip = int(sys.argv[4]) if len(sys.argv) > 4 else 0  # spots done already (appended to OUT)
settings = Settings(model=model, persist_cache=False, threads=2, max_tokens=48)
completer, info, _ = load_completer(settings)
rng = random.Random(0)
spots = []
for path in sorted(glob.glob("/work/corpus/*/*") + glob.glob("/work/corpus-other/*/*")):
    text = Path(path).read_text(encoding="utf-8")
    lines = text.split("\n")
    offsets, o = [], 0
    for line in lines:
        offsets.append(o)
        o += len(line) + 1
    good = [i for i, line in enumerate(lines) if 3 <= len(line.strip()) <= 120]
    for i in rng.sample(good, min(per_file, len(good))):
        line = lines[i]
        indent = len(line) - len(line.lstrip())
        col = rng.randint(indent, len(line) - 1)
        spots.append((path, offsets[i] + col, line, col))
print(len(spots), "spots", flush=True)

with open(out, "a" if skip else "w") as f:
    for k, (path, cursor, _line, col) in enumerate(spots):
        if k < skip:
            continue
        text = Path(path).read_text(encoding="utf-8")
        line_end = text.find("\n", cursor)
        line_end = len(text) if line_end < 0 else line_end
        target = text[cursor:line_end].rstrip()
        doc_text = text[:cursor] + text[line_end:]
        doc = Document(Path(path).resolve().as_uri(), language_id_for_path(Path(path)), 0, doc_text)
        prepared = prepare(doc, cursor, None, settings)
        c = completer.run(prepared, CancelToken())
        first = c.text.split("\n", 1)[0].rstrip()
        # The first line's tokens (the healed characters' included): up to the one that
        # holds the first line break of what was generated.
        result = c.result
        newline = result.text.find("\n")
        probs, start = [], 0
        for probability, end in zip(result.token_probabilities, result.token_ends, strict=True):
            if newline >= 0 and start > newline:
                break
            probs.append(probability)
            start = end
        row = {"path": path, "col": col, "target": target, "text": c.text, "first": first,
               "exact": bool(first) and first == target, "probs": probs,
               "confidence": c.confidence, "ms": c.latency_ms}
        f.write(json.dumps(row) + "\n")
        f.flush()
        print(k, Path(path).name, row["exact"], repr(target[:30]), repr(first[:30]),
              round(min(probs) if probs else 0, 3), flush=True)
