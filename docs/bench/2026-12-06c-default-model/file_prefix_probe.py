"""Prototype: what a cached file prefix would buy at a new spot (first answer).

S: a cold prompt like the server's (~110 tokens of lines above, ~40 below), nothing cached.
W: a wave-1 sized window (~260 above, ~65 below), nothing cached.
F: the file's lines from a chunk boundary 64-96 lines above the cursor, held in the KV cache
   from idle time; at the key only the cursor line's prefix, the suffix (~40 tokens) and the
   FIM tokens are encoded.
First line exact against the line's true rest; tokens encoded at the key; time to answer."""
import glob, json, os, random, sys, time
import llama_cpp
import llama_cpp.llama as _ll
_orig = llama_cpp.llama_model_default_params
def _params():
    p = _orig(); p.use_extra_bufts = False; return p
llama_cpp.llama_model_default_params = _params
_ll.llama_cpp.llama_model_default_params = _params

MODEL = os.path.expanduser("~/.cache/lsp-complete/models/" + sys.argv[1])
SPOTS = int(sys.argv[2]) if len(sys.argv) > 2 else 5
llm = llama_cpp.Llama(MODEL, n_ctx=4096, n_batch=512, n_threads=2, verbose=False)
P, S, M = "<|fim_prefix|>", "<|fim_suffix|>", "<|fim_middle|>"
def tok(t, special=False): return llm.tokenize(t.encode(), add_bos=False, special=special)
SPECIAL = {llm.token_eos()} | {tok(x, True)[0] for x in (P, S, M, "<|endoftext|>", "<|file_sep|>")}

def lines_fit(lines, budget, from_end):
    out, used = [], 0
    seq = reversed(lines) if from_end else lines
    for l in seq:
        n = len(tok(l + "\n"))
        if used + n > budget: break
        out.append(l); used += n
    return list(reversed(out)) if from_end else out

def build(above_lines, line_prefix, below_lines):
    head = tok(P, True) + (tok("\n".join(above_lines) + "\n") if above_lines else [])
    key = tok(line_prefix) + tok(S, True) + tok("\n".join(below_lines) + "\n") + tok(M, True)
    return head, key

def answer(tokens):
    t0 = time.perf_counter(); out = b""; n = 0
    before = llm.n_tokens
    common = 0
    for a, b in zip(llm._input_ids[: llm.n_tokens], tokens):
        if a != b: break
        common += 1
    for t in llm.generate(tokens, top_k=1, temp=0.0, reset=True):
        if t in SPECIAL: break
        piece = llm.detokenize([t]); n += 1
        out += piece
        if b"\n" in out or n >= 32: break
    return out.decode(errors="replace").split("\n")[0], len(tokens) - min(common, len(tokens) - 1), n, (time.perf_counter() - t0) * 1000

rng = random.Random(11)
rows = []
for path in sorted(glob.glob("/work/corpus/*/*")):
    lines = open(path, errors="replace").read().split("\n")
    cands = [i for i, l in enumerate(lines) if len(l.strip()) > 8 and i > 40]
    for cur in sorted(rng.sample(cands, min(SPOTS, len(cands)))):
        line = lines[cur]; ind = len(line) - len(line.lstrip())
        typed = line[: ind + 1]; truth = line[ind + 1 :].rstrip()
        above, below = lines[:cur], lines[cur + 1 :]
        row = dict(file=os.path.basename(path), line=cur, truth=truth)
        for name, ab, bl in (("S", 110, 40), ("W", 260, 65)):
            h, k = build(lines_fit(above, ab, True), typed, lines_fit(below, bl, False))
            llm.reset()  # nothing cached
            text, enc, gen, ms = answer(h + k)
            row[name] = dict(ok=text.rstrip() == truth, enc=enc, ctx=len(h + k), gen=gen, ms=ms, text=text)
        l0 = max(0, (cur - 64) // 32 * 32)
        h, k = build(lines[l0:cur], typed, lines_fit(below, 40, False))
        llm.reset(); llm.eval(h)  # idle time: the chunk-aligned file prefix
        text, enc, gen, ms = answer(h + k)
        row["F"] = dict(ok=text.rstrip() == truth, enc=enc, ctx=len(h + k), gen=gen, ms=ms, text=text, idle=len(h))
        rows.append(row)
        print(json.dumps({k: (v if not isinstance(v, dict) else {a: b for a, b in v.items() if a != "text"}) for k, v in row.items() if k != "truth"}), flush=True)
json.dump(rows, open(f"/work/runs/s56/fileprefix-{sys.argv[1][:18]}.json", "w"), indent=1)
lang = lambda f: f.rsplit(".", 1)[-1]
for v in "SWF":
    ok = sum(r[v]["ok"] for r in rows); enc = sorted(r[v]["enc"] for r in rows); ms = sorted(r[v]["ms"] for r in rows)
    print(v, f"exact {ok}/{len(rows)}", "enc p50", enc[len(enc)//2], "ms p50 %.0f" % ms[len(ms)//2], "ctx p50", sorted(r[v]["ctx"] for r in rows)[len(rows)//2])
    per = {}
    for r in rows: per.setdefault(lang(r["file"]), []).append(r[v]["ok"])
    print("   ", {k: f"{sum(x)}/{len(x)}" for k, x in sorted(per.items())})
