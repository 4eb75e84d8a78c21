"""Probe: the first suggestion after a tab that follows code (alignment, C in BSD style:
`int\t\t xoff;`), in tmux's tmux.h, window-copy.c and format.c (c1f947a3c, in
/work/corpus-midtab): 8 spots a file after the first tab of a run of two or more (`inner`:
more tabs follow) and 8 after a run's last tab (`last`), the line cut at the cursor.
Run with each version on PYTHONPATH. Usage: probe_midtab.py OUT.jsonl"""
import json
import random
import re
import sys
from pathlib import Path

from lsp_complete.config import Settings
from lsp_complete.documents import Document
from lsp_complete.engine.base import CancelToken
from lsp_complete.oneshot import language_id_for_path
from lsp_complete.pipeline import load_completer, prepare

out = sys.argv[1]
model = Path.home() / ".cache/lsp-complete/models/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"
settings = Settings(model=str(model), persist_cache=False, threads=2, max_tokens=48)
completer, info, _ = load_completer(settings)
rng = random.Random(0)
spots = []
for path in sorted(Path("/work/corpus-midtab").glob("*")):
    text = path.read_text()
    inner, last, offset = [], [], 0
    for line in text.split("\n"):
        for m in re.finditer(r"(?<=\S)\t+", line):
            if len(line) > 160:
                break
            if m.end() - m.start() >= 2:
                inner.append(offset + m.start() + 1)
            if m.end() < len(line):
                last.append(offset + m.end())
        offset += len(line) + 1
    spots += [(str(path), "inner", c) for c in rng.sample(inner, 8)]
    spots += [(str(path), "last", c) for c in rng.sample(last, 8)]
with open(out, "w") as f:
    for path, kind, cursor in spots:
        text = Path(path).read_text()
        line_end = text.find("\n", cursor)
        target = text[cursor:line_end].rstrip()
        doc_text = text[:cursor] + text[line_end:]
        doc = Document(Path(path).resolve().as_uri(), language_id_for_path(Path(path)), 0, doc_text)
        c = completer.run(prepare(doc, cursor, None, settings), CancelToken())
        first = c.text.split("\n", 1)[0].rstrip()
        row = {"path": path, "kind": kind, "target": target, "text": c.text,
               "exact": bool(first) and first == target}
        f.write(json.dumps(row) + "\n")
        f.flush()
