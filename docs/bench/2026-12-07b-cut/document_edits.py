"""The document's own cost of the moved scenario's edits: in 8 files, six 3-line spans each
deleted in one change and typed back key by key, every `Document.apply_change` timed. Run it
with PYTHONPATH at each version's checkout, alternating."""

import statistics
import time
from pathlib import Path

from lsp_complete.documents import Document

LANGUAGES = {".c": "c", ".cpp": "cpp", ".go": "go", ".java": "java", ".js": "javascript",
             ".py": "python", ".rs": "rust", ".ts": "typescript"}


def position(text: str, offset: int) -> tuple[int, int]:
    line = text.count("\n", 0, offset)
    start = text.rfind("\n", 0, offset) + 1
    return line, len(text[start:offset].encode("utf-16-le")) // 2


def percentile_ms(values: list[float], q: float) -> float:
    return sorted(values)[int(q * (len(values) - 1))] * 1000


deletions, keys = [], []
for name in Path("/work/runs/s59/files8.txt").read_text().split():
    path = Path(name)
    text = path.read_text()
    doc = Document(path.as_uri(), LANGUAGES[path.suffix], 1, text)
    lines = text.split("\n")
    for rep in range(6):
        first = len(lines) * (rep + 2) // 9
        start = sum(len(line) + 1 for line in lines[:first])
        span = "\n".join(lines[first:first + 3])
        began = time.perf_counter()
        doc.apply_change("", (*position(doc.text, start), *position(doc.text, start + len(span))))
        deletions.append(time.perf_counter() - began)
        for offset, ch in enumerate(span, start):
            at = position(doc.text, offset)
            began = time.perf_counter()
            doc.apply_change(ch, (*at, *at))
            keys.append(time.perf_counter() - began)
        assert doc.text == text, name
print(f"delete p50 {percentile_ms(deletions, .5):.3f} p95 {percentile_ms(deletions, .95):.3f} ms;"
      f" key p50 {percentile_ms(keys, .5):.3f} p95 {percentile_ms(keys, .95):.3f}"
      f" mean {statistics.mean(keys) * 1000:.3f} ms n={len(keys)}")
