"""Probe: where does a right first line get lost between the model and the editor?
Each spot: a real line of a file, the text after the cursor on that line removed (the line
being typed), the cursor either after the indentation and first character (a span's first
key) or mid-line. The full prompt, cold cache per spot. Three texts per spot:
- shipped: Completer.run's text (stream rules + clean_completion)
- stream:  Completer.run's raw (stream rules: stop strings, abandon, newline)
- free:    the same prompt, generated multi-line up to 64 tokens with no abandon/line rule
`python probe_losses.py MODEL.gguf OUT.jsonl [PER_FILE] [CORPUS]`"""
import dataclasses
import glob
import json
import random
import sys
import time
from pathlib import Path

from lsp_complete.bench.workload import _line_ok
from lsp_complete.config import Settings
from lsp_complete.documents import Document
from lsp_complete.engine.base import CancelToken
from lsp_complete.languages import language_of_path
from lsp_complete.pipeline import load_completer, prepare

model, out = sys.argv[1], sys.argv[2]
per_file = int(sys.argv[3]) if len(sys.argv) > 3 else 4
corpus = sys.argv[4] if len(sys.argv) > 4 else "/work/corpus2"

settings = Settings(model=model, persist_cache=False, threads=2, max_tokens=48)
completer, info, _ = load_completer(settings)
completer.planner.choose = lambda prepared, full: full  # a person's pace: the full prompt
rng = random.Random(7)
spots = []
for path in sorted(glob.glob(f"{corpus}/*/*")):
    text = Path(path).read_text(encoding="utf-8", errors="replace")
    lines = text.split("\n")
    offsets, o = [], 0
    for line in lines:
        offsets.append(o)
        o += len(line) + 1
    good = [i for i, line in enumerate(lines) if _line_ok(line) and i > 15]
    for i in rng.sample(good, min(per_file, len(good))):
        line = lines[i]
        indent = len(line) - len(line.lstrip())
        first = indent + 1
        mid = rng.randint(indent + 2, max(indent + 2, len(line.rstrip()) - 3))
        for kind, col in (("first", first), ("mid", mid)):
            spots.append((path, offsets[i] + col, kind))
print(len(spots), "spots", flush=True)

with open(out, "w") as f:
    for k, (path, cursor, kind) in enumerate(spots):
        text = Path(path).read_text(encoding="utf-8", errors="replace")
        line_end = text.find("\n", cursor)
        line_end = len(text) if line_end < 0 else line_end
        target = text[cursor:line_end].rstrip()
        doc_text = text[:cursor] + text[line_end:]
        lang = language_of_path(path)
        doc = Document(Path(path).resolve().as_uri(), lang, 0, doc_text)
        prepared = prepare(doc, cursor, None, settings)
        completer.engine.forget(prepared.key)
        started = time.perf_counter()
        c = completer.run(prepared, CancelToken())
        ms = (time.perf_counter() - started) * 1000
        free = ""
        if c.request is not None:
            req = dataclasses.replace(c.request, single_line=False, max_tokens=64,
                                      line_check=None, abandon=None, kept_stops=(),
                                      deadline=time.monotonic() + 60, on_text=None,
                                      probabilities=False)
            r = completer.engine.complete(req, CancelToken())
            free = r.text[len(req.heal):] if r.text.startswith(req.heal) else r.text
        row = {"path": path, "lang": lang, "kind": kind, "target": target,
               "line_prefix": text[text.rfind("\n", 0, cursor) + 1:cursor],
               "shipped": c.text, "stream": c.raw, "free": free,
               "stop": c.result.stop_reason, "tokens": c.prompt_tokens, "ms": round(ms)}
        f.write(json.dumps(row) + "\n")
        f.flush()
        sl = c.text.split("\n")[0].rstrip()
        fl = free.split("\n")[0].rstrip()
        print(k, lang, kind, "S" if sl == target else "-", "F" if fl == target else "-",
              repr(target[:40]), "|", repr(sl[:40]), "|", repr(fl[:40]), flush=True)
