"""Probe: the suggestion at a spot on a line whose code ends with `{` (a signature or a
block header), the spot drawn among the line's code characters from its first on, the line
cut at the cursor (a typist retyping it). probe_mid.py of 2026-12-05e with that one change;
compare.py there reads two runs. Usage: probe_brace.py MODEL OUT.jsonl LABEL PER_FILE FILES..."""
import json
import random
import sys
from pathlib import Path

from lsp_complete.config import Settings
from lsp_complete.documents import Document
from lsp_complete.engine.base import CancelToken
from lsp_complete.oneshot import language_id_for_path
from lsp_complete.pipeline import load_completer, prepare

model, out, label, per_file = sys.argv[1:5]
paths = sys.argv[5:]
settings = Settings(model=model, persist_cache=False, threads=2, max_tokens=48)
completer, info, _ = load_completer(settings)

rng = random.Random(1)
spots = []
for path in paths:
    text = Path(path).read_text(encoding="utf-8")
    found, offset = [], 0
    for line in text.split("\n"):
        code = line.lstrip(" \t")
        start = len(line) - len(code)
        body = code.rstrip()
        if len(body) >= 4 and len(line) <= 160 and body.endswith("{"):
            for col in range(start, start + len(body) - 1):
                found.append(offset + col)
        offset += len(line) + 1
    spots += [(path, s) for s in sorted(rng.sample(found, min(int(per_file), len(found))))]
print(len(spots), "spots", flush=True)

with open(out, "w") as f:
    for k, (path, cursor) in enumerate(spots):
        text = Path(path).read_text(encoding="utf-8")
        line_end = text.find("\n", cursor)
        line_end = len(text) if line_end < 0 else line_end
        target = text[cursor:line_end].rstrip()
        doc_text = text[:cursor] + text[line_end:]
        doc = Document(Path(path).resolve().as_uri(), language_id_for_path(Path(path)), 0, doc_text)
        prepared = prepare(doc, cursor, None, settings)
        c = completer.run(prepared, CancelToken())
        first = c.text.split("\n", 1)[0].rstrip()
        raw_first = c.raw.split("\n", 1)[0].rstrip()
        line_start = text.rfind("\n", 0, cursor) + 1
        row = {"code": label, "path": path, "language": doc.language_id,
               "before": text[line_start:cursor], "target": target,
               "text": c.text, "raw": c.raw, "exact": bool(first) and first == target,
               "empty": not first,
               "raw_exact": raw_first == target, "ms": c.latency_ms}
        f.write(json.dumps(row) + "\n")
        f.flush()
        print(k, Path(path).name, repr(row["before"][-20:]), repr(target[:30]),
              repr(c.text[:30]), row["exact"], row["raw_exact"], flush=True)
