import sys, time, statistics
from lsp_complete.documents import Document
LANG = {".c":"c",".cpp":"cpp",".go":"go",".java":"java",".js":"javascript",".py":"python",".rs":"rust",".ts":"typescript"}
import os
def pos(text, off):
    line = text.count("\n", 0, off); start = text.rfind("\n", 0, off) + 1
    return (line, len(text[start:off].encode('utf-16-le'))//2)
times_del, times_key = [], []
for f in open("/work/runs/s59/files8.txt").read().split():
    text = open(f).read()
    doc = Document("file://"+f, LANG[os.path.splitext(f)[1]], 1, text)
    lines = text.split("\n"); n = len(lines)
    for rep in range(6):
        a = n * (rep + 2) // 9
        start = sum(len(l)+1 for l in lines[:a]); span = "\n".join(lines[a:a+3])
        end = start + len(span)
        cur = doc.text
        t = time.perf_counter(); doc.apply_change("", (*pos(cur, start), *pos(cur, end))); times_del.append(time.perf_counter()-t)
        off = start
        for ch in span:
            cur = doc.text; p = pos(cur, off)
            t = time.perf_counter(); doc.apply_change(ch, (*p, *p)); times_key.append(time.perf_counter()-t)
            off += 1
        assert doc.text == text, f
        lines = text.split("\n")
times_key.sort(); times_del.sort()
q = lambda v, p: v[int(p*(len(v)-1))]*1000
print(f"delete p50 {q(times_del,.5):.3f} p95 {q(times_del,.95):.3f} ms; key p50 {q(times_key,.5):.3f} p95 {q(times_key,.95):.3f} mean {statistics.mean(times_key)*1000:.3f} ms n={len(times_key)}")
