"""Where the first key at a new spot spends its time, on 0.5B: prepare (context), build the
full prompt (tokenize), choose the prompt, prefill, generate, postprocess. Spots: mid-line
positions spread over the 8 corpus files, each a new spot (a fresh KV key per spot)."""
import random, statistics, sys, time
from pathlib import Path
from lsp_complete.config import Settings
from lsp_complete.documents import Document
from lsp_complete.engine.base import CancelToken
from lsp_complete.engine.factory import load_engine
from lsp_complete.languages import language_of_path
from lsp_complete.pipeline.completer import Completer
from lsp_complete.pipeline.prepare import prepare

settings = Settings(model="qwen2.5-coder-0.5b", threads=2, persist_cache=False)
loaded = load_engine(settings)
completer = Completer(loaded.engine, loaded.spec, settings)
rows = []
rng = random.Random(0)
files = [l.strip() for l in open("/work/runs/s59/files8.txt")]
for n, path in enumerate(files * 2):
    text = Path(path).read_text()
    lines = text.splitlines(keepends=True)
    i = rng.randrange(len(lines) // 4, len(lines) * 3 // 4)
    while not lines[i].strip():
        i += 1
    cursor = sum(map(len, lines[:i])) + len(lines[i]) - len(lines[i].lstrip()) + 3
    doc = Document(f"file://{path}#{n}", language_of_path(path) or "plaintext", 1, text)
    t0 = time.perf_counter()
    prepared = prepare(doc, cursor, None, settings)
    t1 = time.perf_counter()
    full = completer.build_prompt(prepared.ctx)
    t2 = time.perf_counter()
    prompt = completer.planner.choose(prepared, full)
    t3 = time.perf_counter()
    c = completer.run(prepared, CancelToken())
    t4 = time.perf_counter()
    r = c.result
    rows.append(dict(prepare=(t1 - t0) * 1e3, build=(t2 - t1) * 1e3, choose=(t3 - t2) * 1e3,
                     run=(t4 - t3) * 1e3, prefill=r.prefill_ms, generate=r.generate_ms,
                     encoded=r.encoded_tokens, generated=len(r.tokens) if hasattr(r, "tokens") else -1,
                     prompt=c.prompt_tokens))
    print(Path(path).name, {k: round(v) for k, v in rows[-1].items()}, flush=True)
for k in rows[0]:
    print(k, "median", round(statistics.median(r[k] for r in rows), 1))
