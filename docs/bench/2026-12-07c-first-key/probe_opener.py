"""Probe: lines that open a callback's body inside a call (`useEffect(() => {`, `it("x", () => {`,
`go func() {`...), typed in an editor that auto-closed the call's paren: the cursor just after
the call's `(`, the editor's `)` after it. The model asked once per spot; its raw text cleaned
with the rule on and off (`_opens_ahead_of_the_closers`), with the client replacing the line
suffix or not. `python probe_opener.py MODEL.gguf`"""
import glob
import sys
from collections import Counter
from pathlib import Path

import lsp_complete.postprocess as pp
from lsp_complete.config import Settings
from lsp_complete.documents import Document
from lsp_complete.engine.base import CancelToken
from lsp_complete.oneshot import language_id_for_path
from lsp_complete.pipeline import load_completer, prepare

settings = Settings(model=sys.argv[1], persist_cache=False, threads=2, max_tokens=48)
completer, _, _ = load_completer(settings)
rule = pp._opens_ahead_of_the_closers
tally: Counter[tuple[str, bool, str]] = Counter()
spots = 0
for path in sorted(glob.glob("/work/corpus/*/*") + glob.glob("/work/corpus-other/*/*")):
    text = Path(path).read_text(encoding="utf-8")
    offset = 0
    for line in text.split("\n"):
        start = offset
        offset += len(line) + 1
        s = line.rstrip()
        if not (s.endswith("{") and s.count("(") > s.count(")")):
            continue
        depth, col = 0, -1
        for i in range(len(s) - 1, -1, -1):  # the first paren the line leaves open
            depth += s[i] == ")"
            if s[i] == "(":
                if depth == 0:
                    col = i + 1
                else:
                    depth -= 1
        if col < 0:
            continue
        want = s[col:]
        cursor = start + col
        doc_text = text[:cursor] + ")" + text[start + len(line):]
        doc = Document(Path(path).resolve().as_uri(), language_id_for_path(Path(path)), 0,
                       doc_text)
        spots += 1
        for replace in (False, True):
            prepared = prepare(doc, cursor, None,
                               Settings(**{**settings.__dict__, "replace_line_suffix": replace}))
            completer.engine.forget(prepared.key)
            c = completer.run(prepared, CancelToken())
            for on in (False, True):
                pp._opens_ahead_of_the_closers = rule if on else (lambda *_: False)
                out = pp.clean_completion(c.raw, prepared.site, completer.spec.stop)
                first = out.split("\n")[0]
                kept = pp.types_through(first, prepared.site.line_prefix,
                                        prepared.site.line_suffix, prepared.site.language_id) \
                    if replace else 0
                applied = s[:col] + first + ")"[kept:]
                verdict = "empty" if not first.strip() else (
                    "right" if applied.rstrip() == s + ")" or applied.rstrip() == s else "wrong")
                tally[("replace" if replace else "insert", on, verdict)] += 1
                print(Path(path).name, "replace" if replace else "insert", "rule" if on else "old",
                      repr(s[:col][-30:]), "->", repr(first), verdict, flush=True)
            pp._opens_ahead_of_the_closers = rule
print(spots, "spots")
for key in sorted(tally):
    print(key, tally[key])
