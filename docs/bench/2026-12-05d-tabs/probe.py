"""Probe: the first suggestion right after an indented line's indentation (the spot after
Enter), the line cut at the cursor as a typist's key sees it. `tabs`: lines indented with tabs
only (the rows of probe-tabs-*.jsonl, 12 spots a file at 0.5B, 6 at 1.5B, in the 13 files of
the README); `any`: spaces or tabs (probe-linestart-*.jsonl, 6 a file, the corpus's 23 files
and the 10 tab-indented ones). Run once with the code before the change on PYTHONPATH and once
after; `compare.py` reads the two. Usage: probe.py MODEL OUT.jsonl LABEL PER_FILE tabs|any
FILES..."""
import json
import random
import sys
from pathlib import Path

from lsp_complete.config import Settings
from lsp_complete.documents import Document
from lsp_complete.engine.base import CancelToken
from lsp_complete.oneshot import language_id_for_path
from lsp_complete.pipeline import load_completer, prepare

model, out, label, per_file, mode = sys.argv[1:6]
paths = sys.argv[6:]
settings = Settings(model=model, persist_cache=False, threads=2, max_tokens=48)
completer, info, _ = load_completer(settings)


def indented(line: str) -> bool:
    code = line.lstrip(" \t")
    if mode == "tabs":
        return line.startswith("\t") and not line.lstrip("\t").startswith(" ")
    return line[:1] in (" ", "\t") and bool(code)


rng = random.Random(0)
spots = []
for path in paths:
    text = Path(path).read_text(encoding="utf-8")
    found, offset = [], 0
    for line in text.split("\n"):
        code = line.lstrip(" \t")
        if indented(line) and code.strip() and len(line) <= 160:
            found.append((offset + len(line) - len(code), line))
        offset += len(line) + 1
    spots += [(path, *s) for s in rng.sample(found, min(int(per_file), len(found)))]
print(len(spots), "spots", flush=True)

with open(out, "w") as f:
    for k, (path, cursor, _line) in enumerate(spots):
        text = Path(path).read_text(encoding="utf-8")
        line_end = text.find("\n", cursor)
        line_end = len(text) if line_end < 0 else line_end
        target = text[cursor:line_end].rstrip()
        doc_text = text[:cursor] + text[line_end:]
        doc = Document(Path(path).resolve().as_uri(), language_id_for_path(Path(path)), 0, doc_text)
        prepared = prepare(doc, cursor, None, settings)
        c = completer.run(prepared, CancelToken())
        first = c.text.split("\n", 1)[0].rstrip()
        row = {"code": label, "path": path, "language": doc.language_id, "target": target,
               "text": c.text, "exact": bool(first) and first == target, "empty": not first,
               "blank_lead": first[:1] in (" ", "\t"), "ms": c.latency_ms}
        f.write(json.dumps(row) + "\n")
        f.flush()
        print(k, Path(path).name, repr(target[:30]), repr(c.text[:30]), row["exact"], flush=True)
