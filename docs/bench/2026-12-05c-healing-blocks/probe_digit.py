"""Probe: suggestions right after a space, where the line goes on with a digit (D) or with
something else (N), with the healing rule before (old: the lone space token refused) and now.
The line is cut at the cursor (the rest typed later), as a typist's key sees it."""
import glob
import json
import random
import sys
from pathlib import Path

import numpy as np

from lsp_complete.config import Settings
from lsp_complete.documents import Document
from lsp_complete.engine import vocabulary as vocab_mod
from lsp_complete.engine.base import CancelToken
from lsp_complete.oneshot import language_id_for_path
from lsp_complete.pipeline import load_completer, prepare

model, out = sys.argv[1], sys.argv[2]
per_file_d, per_file_n = (int(n) for n in sys.argv[3:5]) if len(sys.argv) > 4 else (6, 3)
settings = Settings(model=model, persist_cache=False, threads=2, max_tokens=48)
completer, info, _ = load_completer(settings)
new_candidates = vocab_mod.Vocabulary.heal_candidates


def old_candidates(self, remaining, code=False):
    ids = new_candidates(self, remaining, code)
    if code and remaining and not remaining.strip(b" "):
        ids = ids[np.array([bool(self.pieces[t].strip()) for t in ids], dtype=bool)]
    return ids


rng = random.Random(0)
spots = []
for path in sorted(glob.glob("/work/corpus/*/*")):
    text = Path(path).read_text(encoding="utf-8")
    d, n = [], []
    offset = 0
    for line in text.split("\n"):
        for i, ch in enumerate(line[:-1]):
            if ch == " " and line[: i + 1].strip() and len(line) <= 160:
                (d if line[i + 1].isdigit() else n).append((offset + i + 1, line))
        offset += len(line) + 1
    spots += [(path, "D", *s) for s in rng.sample(d, min(per_file_d, len(d)))]
    spots += [(path, "N", *s) for s in rng.sample(n, min(per_file_n, len(n)))]
print(len(spots), "spots", flush=True)

with open(out, "w") as f:
    for k, (path, kind, cursor, line) in enumerate(spots):
        text = Path(path).read_text(encoding="utf-8")
        line_end = text.find("\n", cursor)
        line_end = len(text) if line_end < 0 else line_end
        target = text[cursor:line_end].rstrip()
        doc_text = text[:cursor] + text[line_end:]
        doc = Document(Path(path).resolve().as_uri(), language_id_for_path(Path(path)), 0, doc_text)
        row = {"path": path, "kind": kind, "target": target, "line": line}
        for variant in ("old", "new"):
            vocab_mod.Vocabulary.heal_candidates = old_candidates if variant == "old" \
                else new_candidates
            completer.engine.vocabulary._heal_cache.clear()
            prepared = prepare(doc, cursor, None, settings)
            c = completer.run(prepared, CancelToken())
            first = c.text.split("\n", 1)[0].rstrip()
            row[variant] = c.text
            row[variant + "_exact"] = bool(first) and first == target
            row[variant + "_ms"] = c.latency_ms
        f.write(json.dumps(row) + "\n")
        f.flush()
        print(k, kind, Path(path).name, repr(target[:30]), repr(row["old"][:30]),
              repr(row["new"][:30]), flush=True)
