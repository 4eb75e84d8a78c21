"""Cold 150-token prefills on 0.5B through our engine: the adaptive thread policy as it
runs (which count each prefill batch used, its time), against the same with 2 threads fixed."""
import sys, time, collections
from lsp_complete.engine.llama import LlamaEngine
from lsp_complete.engine.base import CancelToken, GenerationRequest
path = "/root/.cache/lsp-complete/models/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"
fixed = sys.argv[1] == "fixed"
eng = LlamaEngine(path, n_ctx=4096, n_threads=2)
dec = eng.decoder
used = collections.Counter()
orig_use = dec._use_threads
def use(n):
    if fixed: n = 2
    used[n] += 1
    return orig_use(n)
dec._use_threads = use
toks = eng.tokenize(open("/work/corpus-other/ruby/base.rb").read())
times = []
for i in range(30):
    start = (100 + 350 * i) % (len(toks) - 200)
    req = GenerationRequest(key=f"k{i}", segments=[toks[start:start + 150]], max_tokens=4, speculation="off")
    r = eng.complete(req, CancelToken())
    times.append(r.prefill_ms)
    eng.forget(f"k{i}")
times.sort()
print(sys.argv[1], "prefill ms p50", round(times[15]), "mean", round(sum(times)/len(times)), "max", round(times[-1]), "threads used", dict(used))
