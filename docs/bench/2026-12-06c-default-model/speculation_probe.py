"""First answers at new spots over stdio, 1.5B: how much of the latency is generation, and
what prompt lookup speculation does there (status records)."""
import asyncio, json, random, sys, tempfile, time, glob, os
from pygls.lsp.client import LanguageClient
from lsprotocol import types
from lsp_complete.testing import lsp_client as L

MODEL = os.path.expanduser("~/.cache/lsp-complete/models/" + sys.argv[1])
SPEC = sys.argv[2]
LANG = {".c":"c",".cpp":"cpp",".go":"go",".java":"java",".js":"javascript",".py":"python",".rs":"rust",".ts":"typescript"}

async def main():
    files = sorted(glob.glob("/work/corpus/*/*"))
    rng = random.Random(5)
    client = LanguageClient("probe", "0")
    env = dict(os.environ, LSP_COMPLETE_NO_DAEMON="1", LSP_COMPLETE_CACHE_DIR=tempfile.mkdtemp())
    await L.launch(client, MODEL, env=env)
    await L.initialize(client, L.initialize_params({"speculation": SPEC, "multiline": "never"}, L.client_capabilities(inline_completion=True)))
    await L.wait_for_state(client, ("ready",), 120)
    out = []
    for fi, path in enumerate(files[::2]):
        text = open(path, errors="replace").read()
        lines = text.split("\n")
        uri = "file://" + path
        L.open_doc(client, uri, text, LANG[os.path.splitext(path)[1]], 1)
        v = 1
        cands = [i for i, l in enumerate(lines) if len(l.strip()) > 12]
        for li in rng.sample(cands, 3):
            line = lines[li]; ind = len(line) - len(line.lstrip())
            # delete the line's text after its indentation, then type its first character
            v += 1; L.replace(client, uri, v, types.Range(start=types.Position(line=li, character=ind), end=types.Position(line=li, character=len(line))), "")
            v += 1; L.insert(client, uri, v, li, ind, line[ind])
            t = time.perf_counter(); ans = await L.inline(client, uri, li, ind + 1); lat = (time.perf_counter() - t) * 1000
            await L.wait_idle(client, 60)
            st = await L.status(client, recent=20)
            rec = [r for r in st.get("recent", []) if r["uri"] == uri and r["version"] == v]
            sug, _ = L.suggestion_of(ans)
            out.append(dict(file=os.path.basename(path), line=li, lat=lat, rec=rec[-1] if rec else None, sug=sug[:60], want=line[ind+1:][:60]))
            print(json.dumps(out[-1]), flush=True)
            # put the line back
            v += 1; L.replace(client, uri, v, types.Range(start=types.Position(line=li, character=ind), end=types.Position(line=li, character=ind+1)), line[ind:])
            await L.wait_idle(client, 60)
        L.close_doc(client, uri)
    st = await L.status(client, recent=0)
    json.dump(st, open(f"/work/runs/s56/status-{sys.argv[1][:20]}-{SPEC}.json", "w"), indent=1)
    await L.shutdown(client, 30)
    json.dump(out, open(f"/work/runs/s56/spec-{sys.argv[1][:20]}-{SPEC}.json", "w"), indent=1)

asyncio.run(main())
