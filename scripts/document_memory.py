"""What an open document costs in memory: a real daemon's RSS (tiny model) before and after
a raw window opens documents, and the same documents built alone, text only and with their
tree-sitter trees (Linux: VmRSS from /proc).

    python scripts/document_memory.py   # one 3.2 MB file, 500 files of 14 KB, dense 3.2 MB

Generated Python (classes with a few methods) stands for ordinary code; dense code (numbers,
short calls) has more syntax nodes per byte and costs several times more.
"""

from __future__ import annotations

import gc
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from lsp_complete.daemon import hello as wire  # noqa: E402
from lsp_complete.daemon import paths  # noqa: E402
from lsp_complete.daemon.forwarder import Splitter, frame  # noqa: E402
from lsp_complete.documents import Document  # noqa: E402
from lsp_complete.testing import write_tiny_gguf  # noqa: E402

Docs = list[tuple[str, str]]


def python_source(size: int, seed: int) -> str:
    parts = ["import os\nfrom pathlib import Path\n"]
    total, n = 0, 0
    while total < size:
        part = (f'\n\nclass Handler{seed}_{n}:\n    """Handles the {n}th kind of request."""\n\n'
                f"    def __init__(self, path, limit={n}):\n        self.path = path\n"
                "        self.limit = limit\n        self.items = []\n\n"
                "    def read_lines(self):\n        with open(self.path) as f:\n"
                "            return [line.rstrip() for line in f][: self.limit]\n\n"
                "    def count_words(self):\n        total = 0\n"
                "        for line in self.read_lines():\n"
                f"            total += len(line.split())\n        return total + {n}\n")
        parts.append(part)
        total += len(part)
        n += 1
    return "".join(parts)


def rss_mib(pid: int | str = "self") -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS")


class Window:
    """A raw session on the daemon's socket."""

    def __init__(self, path: Path) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(str(path))
        self.sock.sendall(wire.encode({"kind": "session", "version": wire.version(), "pid": 0}))
        wire.read_line(self.sock, 10)
        self._split = Splitter(1 << 30)
        self._ids: Iterator[int] = iter(range(1, 1 << 30))

    def call(self, method: str, params: Any) -> Any:
        msg_id = next(self._ids)
        self.sock.sendall(frame({"jsonrpc": "2.0", "id": msg_id, "method": method,
                                 "params": params}))
        while True:
            for body in self._split.feed(self.sock.recv(1 << 20)):
                message = json.loads(body)
                if message.get("id") == msg_id:
                    return message.get("result")

    def notify(self, method: str, params: Any) -> None:
        self.sock.sendall(frame({"jsonrpc": "2.0", "method": method, "params": params}))

    def open(self, uri: str, text: str) -> None:
        self.notify("textDocument/didOpen", {"textDocument": {
            "uri": uri, "languageId": "python", "version": 1, "text": text}})

    def settle(self, warm: tuple[str, ...] = ()) -> None:
        """The model loaded, the files in `warm` parsed and their heads encoded (a large
        file is parsed in slices first), and the worker idle twice in a row."""
        idle = 0
        while idle < 2:
            state = self.call("lsp-complete/status", {"recent": 0})
            ready = state["model"]["state"] in ("ready", "error") and all(
                d["cachedTokens"] > 0 for d in state["documents"] if d["uri"] in warm)
            idle = idle + 1 if ready and state["scheduler"]["idle"] else 0
            time.sleep(0.5)


def in_daemon(docs: Docs) -> tuple[float, float, float]:
    """The daemon's RSS (MiB) before opening `docs`, after, and after closing them."""
    root = Path(tempfile.mkdtemp(prefix="lspd-"))
    env = {k: v for k, v in os.environ.items() if k != paths.NO_DAEMON_ENV}
    env.update({paths.RUNTIME_ENV: str(root / "run"), "LSP_COMPLETE_CACHE_DIR": str(root / "c"),
                "PYTHONPATH": str(Path(__file__).resolve().parents[1])})
    model = write_tiny_gguf(root / "tiny.gguf")
    os.environ.update(env)
    paths.ensure_runtime_dir()
    path = paths.socket_path()
    proc = subprocess.Popen([sys.executable, "-m", "lsp_complete", "daemon", "run"], env=env,
                            stderr=subprocess.DEVNULL)
    try:
        while not path.exists():
            time.sleep(0.1)
        window = Window(path)
        window.call("initialize", {"capabilities": {}, "initializationOptions": {
            "threads": 1, "contextSize": 4096, "model": str(model)}})
        window.notify("initialized", {})
        window.open("file:///warm/w.py", python_source(2000, 999))  # one-time costs
        window.settle()
        before = rss_mib(proc.pid)
        for uri, text in docs:
            window.open(uri, text)
        window.settle(tuple(uri for uri, _ in docs) if len(docs) == 1 else ())
        after = rss_mib(proc.pid)
        for uri, _ in docs:
            window.notify("textDocument/didClose", {"textDocument": {"uri": uri}})
        window.settle()
        return before, after, rss_mib(proc.pid)
    finally:
        proc.terminate()
        proc.wait(20)


def alone(docs: Docs) -> tuple[float, float]:
    """This process's growth (MiB) for `docs` as Documents: text only, then with trees."""
    Document("file:///warm.py", "python", 1, "x = 1\n")
    gc.collect()
    base = rss_mib()
    built = [Document(uri, "python", 1, text, parse=False) for uri, text in docs]
    gc.collect()
    text_only = rss_mib() - base
    for doc in built:
        doc.set_syntax(True)
    gc.collect()
    return text_only, rss_mib() - base


def report(name: str, docs: Docs) -> None:
    size = sum(len(text) for _, text in docs) / 2**20
    before, after, closed = in_daemon(docs)
    print(f"{name} ({size:.1f} MiB of text): daemon {before:.0f} -> {after:.0f} MiB "
          f"(+{after - before:.0f}, {(after - before) * 1024 / len(docs):.0f} KiB a file), "
          f"{closed:.0f} after closing them (kept for reuse by the allocator)")
    child = subprocess.run([sys.executable, __file__, "--alone", name], capture_output=True,
                           text=True, check=True)
    print(child.stdout.rstrip())


def documents(name: str) -> Docs:
    if name == "one 3.2 MB file":
        return [("file:///big/big.py", python_source(3_200_000, 0))]
    if name == "one 3.2 MB file of dense code":
        numbers = ", ".join(str(i % 10) for i in range(1_070_000))
        return [("file:///big/dense.py", f"data = [{numbers}]\n")]
    return [(f"file:///many/m{i}.py", python_source(14_000, i)) for i in range(500)]


NAMES = ("one 3.2 MB file", "500 files of 14 KB", "one 3.2 MB file of dense code")

if __name__ == "__main__":
    if sys.argv[1:2] == ["--alone"]:
        docs = documents(sys.argv[2])
        text_only, with_trees = alone(docs)
        print(f"  as Documents alone: text and line index +{text_only:.0f} MiB, with trees "
              f"+{with_trees:.0f} MiB")
    else:
        for name in NAMES:
            report(name, documents(name))
