"""Probe: typing spans back as an editor that auto-closes brackets and quotes (VS Code's
default) against plain typing; after each key the first item is applied as a client applies
it (its range, its insertText) and the line compared with the file's."""
import asyncio
import json
import os
import sys
import tempfile

from lsprotocol import types

from lsp_complete.bench import workload
from lsp_complete.bench.lsp_driver import ServerSession
from lsp_complete.bench.servers import base_server_env
from lsp_complete.testing import lsp_client

PAIRS = {"(": ")", "[": "]", "{": "}", '"': '"', "'": "'"}
CLOSE_BEFORE = set(";:.,=}])> \t")

def same_line_pairs(line):
    """opener index -> closer index for brackets/quotes closed on the same line (naive)."""
    pairs, stack, i = {}, [], 0
    while i < len(line):
        c = line[i]
        if c in "\"'":
            j = line.find(c, i + 1)
            while j != -1 and line[j - 1] == "\\":
                j = line.find(c, j + 1)
            if j == -1:
                break
            pairs[i] = j
            i = j + 1
            continue
        if c in "([{":
            stack.append(i)
        elif c in ")]}" and stack:
            o = stack.pop()
            if PAIRS[line[o]] == c:
                pairs[o] = i
        i += 1
    return pairs

def apply_item(text, answer):
    items = answer.items if isinstance(answer, types.InlineCompletionList) else (answer or [])
    if not items:
        return None
    item = items[0]
    ins = item.insert_text if isinstance(item.insert_text, str) else item.insert_text.value
    return ins, item.range

async def run(model, files, seed, mode_list, out):
    env = base_server_env(tempfile.mkdtemp())
    python = cwd = None
    spec = os.environ.get("PROBE_BASELINE")
    if spec:
        from lsp_complete.bench import install
        version = install.resolve(spec, install.default_cache())
        env = version.server_env(env)
        python, cwd = version.python, version.cwd
    init = {"model": model, "threads": 2, "maxTokens": 48, "multiline": "never",
            **json.loads(os.environ.get("PROBE_OPTIONS", "{}"))}
    s = ServerSession(model, init, env=env,
                      log_path=None, workspace_folders=[], python=python, cwd=cwd)
    await s.start()
    c = s.client
    eps = workload.build_episodes(files, 1, 1, seed, 100000)
    results = {m: {"keys": 0, "shown": 0, "exact": 0} for m in mode_list}
    rows = []
    ver = 0
    for ep in eps:
        line_no = ep.initial_text.count("\n", 0, ep.start_offset)
        full = ep.original_text.split("\n")[line_no]
        indent = len(full) - len(full.lstrip())
        for mode in mode_list:
            ver += 1000
            uri = f"file:///probe/{mode}/{ep.path.split('/')[-1]}"
            lsp_client.open_doc(c, uri, ep.initial_text, ep.language_id, ver)
            lines = ep.initial_text.split("\n")
            cur = lines[line_no]  # the indentation
            col = len(cur)
            pairs = same_line_pairs(full) if mode == "autoclose" else {}
            closers = set(pairs.values())
            auto = set()  # columns (in full) of auto-inserted closers still pending
            for i in range(indent, len(full)):
                ch = full[i]
                if i in closers and i in auto:
                    auto.discard(i)  # typed over: the cursor moves, no change
                    col += 1
                else:
                    ins = ch
                    nxt = cur[col:col+1]
                    if i in pairs and (nxt == "" or nxt in CLOSE_BEFORE):
                        if ch in "\"'" and col > 0 and (cur[col-1].isalnum() or cur[col-1] == "_"):
                            pass
                        else:
                            ins = ch + full[pairs[i]]
                            auto.add(pairs[i])
                    ver += 1
                    lsp_client.insert(c, uri, ver, line_no, lsp_client.utf16_len(cur[:col]), ins)
                    cur = cur[:col] + ins + cur[col:]
                    col += 1
                if i == len(full) - 1 or cur.rstrip() == full.rstrip():
                    break
                ans = await lsp_client.inline(c, uri, line_no, lsp_client.utf16_len(cur[:col]))
                got = apply_item(cur, ans)
                r = results[mode]
                r["keys"] += 1
                after = None
                if got is not None:
                    ins, rng = got
                    if rng is None:
                        after = cur[:col] + ins + cur[col:]
                    else:
                        assert rng.start.line == line_no
                        a = lsp_client._code_points_from_utf16(cur, rng.start.character)
                        if rng.end.line == line_no:
                            b = lsp_client._code_points_from_utf16(cur, rng.end.character)
                            after = cur[:a] + ins + cur[b:]
                        else:
                            after = cur[:a] + ins  # replaces past the line
                    after = after.split("\n")[0]
                    if after != cur:
                        r["shown"] += 1
                    ok = after.rstrip() == full.rstrip()
                    r["exact"] += ok
                rows.append({"mode": mode, "ep": ep.name, "lang": ep.language_id,
                             "line": cur, "col": col, "full": full, "after": after})
            lsp_client.close_doc(c, uri)
        print(ep.name, {m: (v["exact"], v["keys"]) for m, v in results.items()},
              file=sys.stderr, flush=True)
    await s.stop()
    with open(out, "w") as f:
        json.dump({"results": results, "rows": rows}, f, indent=0)
    print(results)

if __name__ == "__main__":
    model, out, seed = sys.argv[1], sys.argv[2], int(sys.argv[3])
    files = sys.argv[4:]
    asyncio.run(run(model, files, seed, ["plain", "autoclose"], out))
