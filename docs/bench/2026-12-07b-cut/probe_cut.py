"""Probe: stop 2026-12-06f's probe_conf.py, recording each suggestion's text and its tokens'
probabilities where they end in it (`Completion.certainty`), so that rules which cut a line
can be tried offline (analyze_cut.py). Spots are cut as a typist's key sees them (the rest of
the line not there yet). `python probe_cut.py MODEL.gguf OUT.jsonl [PER_FILE [SKIP]]`."""
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
settings = Settings(model=model, persist_cache=False, threads=2, max_tokens=48,
                    min_confidence_percent=10)
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
        c = completer.run(prepare(doc, cursor, None, settings), CancelToken())
        row = {"path": path, "col": col, "target": target, "text": c.text,
               "certainty": c.certainty, "ms": c.latency_ms}
        f.write(json.dumps(row) + "\n")
        f.flush()
        print(k, Path(path).name, repr(target[:30]), repr(c.text[:30]), flush=True)
