"""Issue 32, round 3: every attack class re-run as an attacker would, black-box, against the
real `python -m lsp_complete serve` as a subprocess (`--no-daemon`, and the shared daemon
where the issue says so, each run with its own runtime and cache folders in a temp folder).

    python scripts/attack_round3.py            # every attack (~10 minutes on 2 cores)
    python scripts/attack_round3.py 3 7 r2     # some of them (see ATTACKS)

Each attack prints PASS or FAIL with what it measured (seconds, bytes, RSS, exit code);
each is bounded by timeouts, so the script always finishes. The model is the tiny GGUF of
lsp_complete.testing; attacks 8 and 10 talk to a fake llama-server (a local HTTP server).
The full-disk attack mounts a 2 MiB tmpfs (root only; said so otherwise).
The regression view of the same defects is in tests/ (see docs/hardening-round3.md).
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import random
import shutil
import socket
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from lsp_complete.daemon import hello as wire  # noqa: E402
from lsp_complete.daemon.forwarder import Splitter, frame  # noqa: E402
from lsp_complete.testing import write_tiny_gguf  # noqa: E402
from tests.flood import (  # noqa: E402
    REQUESTS,
    SETUP_DONE,
    big_status_setup,
    read_answers,
    rss_mib,
    send_while_taken,
    status_flood,
)
from tests.lsp_helpers import SOURCE  # noqa: E402
from tests.raw_lsp import RawServer  # noqa: E402
from tests.test_remote_engine import FakeLlamaServer  # noqa: E402

LINE, COL = 11, len("    for line in read_li")  # the half-typed call in SOURCE
BANNED = {chr(c) for c in range(0x20) if chr(c) not in "\n\t"} | {chr(0x7F)} | {
    chr(c) for c in range(0x80, 0xA0)} | set("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e"
                                           "\u2066\u2067\u2068\u2069")

RESULTS: list[tuple[str, str, bool, str]] = []


def record(name: str, attack: str, passed: bool, measured: str) -> None:
    RESULTS.append((name, attack, passed, measured))
    print(f"{'PASS' if passed else 'FAIL'}  {name}: {attack}: {measured}", flush=True)


# --- a server under attack --------------------------------------------------------------------


class Server(RawServer):
    """RawServer whose waits may run on several threads at once (a prober beside the attack):
    a message one thread reads for another is kept for it."""

    def __init__(self, *args: Any, **kw: Any) -> None:
        self._lock = threading.Lock()
        super().__init__(*args, **kw)

    def wait_for(self, wanted: Any, timeout: float, what: str = "message") -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while True:
            with self._lock:
                for index, message in enumerate(self._kept):
                    if wanted(message):
                        return self._kept.pop(index)
                try:
                    got = self._inbox.get(timeout=0.02)
                except queue.Empty:
                    got = {}
                if got is None:
                    self._inbox.put(None)
                    raise EOFError(f"server closed stdout before the {what}")
                if got and wanted(got):
                    return got
                if got:
                    self._kept.append(got)
            if time.monotonic() > deadline:
                raise TimeoutError(f"no {what} within {timeout} s; stderr:\n{self.stderr()}")

    def messages(self) -> list[dict[str, Any]]:
        with self._lock:
            return super().messages()


class Box:
    """A temp folder with its own runtime folder (short: a socket path), cache and model."""

    def __init__(self) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="atk-"))
        self.run = self.root / "r"
        self.cache = self.root / "c"
        self.model = write_tiny_gguf(self.root / "model.gguf")

    def env(self, daemon: bool = False, **extra: str) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k != "LSP_COMPLETE_NO_DAEMON"}
        env.update({"PYTHONPATH": str(ROOT), "LSP_COMPLETE_RUNTIME_DIR": str(self.run),
                    "LSP_COMPLETE_CACHE_DIR": str(self.cache), "LSP_COMPLETE_CHECK_THREADS": "1"})
        if not daemon:
            env["LSP_COMPLETE_NO_DAEMON"] = "1"
        env.update(extra)
        return env

    def serve(self, daemon: bool = False, model: Path | None | str = "box",
              env: dict[str, str] | None = None) -> RawServer:
        chosen = self.model if model == "box" else model
        return Server(chosen, *(() if daemon else ("--no-daemon",)),
                         env=env or self.env(daemon))

    def stop_daemons(self) -> None:
        subprocess.run([sys.executable, "-m", "lsp_complete", "daemon", "stop"],
                       env=self.env(True), capture_output=True, timeout=60)

    def close(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)


@contextlib.contextmanager
def box(daemon: bool = False) -> Iterator[Box]:
    b = Box()
    try:
        yield b
    finally:
        if daemon:
            b.stop_daemons()
        b.close()


def start(b: Box, options: dict[str, Any] | None = None, folders: list[Path] | None = None,
          daemon: bool = False, model: Path | None | str = "box",
          env: dict[str, str] | None = None, ready: bool = True) -> RawServer:
    server = b.serve(daemon, model, env)
    uris = [f.as_uri() for f in folders or []]
    answer = server.call("initialize", {
        "processId": None, "capabilities": {},
        "rootUri": uris[0] if uris else None,
        "workspaceFolders": [{"uri": u, "name": u.rsplit("/", 1)[-1]} for u in uris] or None,
        "initializationOptions": {"threads": 1, "contextSize": 4096, "maxTokens": 8,
                                  **(options or {})}}, 120)
    assert "result" in answer, answer
    server.notify("initialized", {})
    if ready:
        server.wait_ready(120)
    return server


def open_doc(s: RawServer, uri: str, text: str, language: str = "python", version: int = 1):
    s.notify("textDocument/didOpen", {"textDocument": {
        "uri": uri, "languageId": language, "version": version, "text": text}})


def change(s: RawServer, uri: str, version: int, line: int, char: int, text: str) -> None:
    pos = {"line": line, "character": char}
    s.notify("textDocument/didChange", {"textDocument": {"uri": uri, "version": version},
                                        "contentChanges": [{"range": {"start": pos, "end": pos},
                                                            "text": text}]})


def inline_id(s: RawServer, uri: str, line: int, char: int) -> Any:
    return s.request("textDocument/inlineCompletion", {
        "textDocument": {"uri": uri}, "position": {"line": line, "character": char},
        "context": {"triggerKind": 2}})


def inline(s: RawServer, uri: str, line: int, char: int, timeout: float = 60) -> dict[str, Any]:
    return s.response(inline_id(s, uri, line, char), timeout)


def insert_text(answer: dict[str, Any]) -> str:
    result = answer.get("result")
    items = result.get("items", []) if isinstance(result, dict) else (result or [])
    if not items:
        return ""
    text = items[0]["insertText"]
    return text if isinstance(text, str) else text["value"]


def fresh_ask(s: RawServer, tag: str, timeout: float = 120) -> float:
    """Seconds to answer a suggestion in a newly opened small file (the model's: nothing
    cached can answer it)."""
    uri = f"file:///work/fresh_{tag}.py"
    open_doc(s, uri, SOURCE.replace("total", f"total_{tag}"))
    return timed(lambda: inline(s, uri, LINE, COL, timeout))[0]


def status(s: RawServer, timeout: float = 60) -> dict[str, Any]:
    return s.call("lsp-complete/status", {"recent": 5}, timeout)["result"]


def timed(call: Callable[[], Any]) -> tuple[float, Any]:
    t0 = time.monotonic()
    value = call()
    return time.monotonic() - t0, value


def shutdown_and_exit(s: RawServer) -> tuple[float, int | None, float]:
    """`shutdown`, then `exit`: how long the answer took, the exit code (None: still running
    after 60 s) and how long the exit took."""
    shut_s, _ = timed(lambda: s.call("shutdown", None, 60))
    t0 = time.monotonic()
    s.notify("exit", None)
    try:
        code: int | None = s.wait_exit(60)
    except subprocess.TimeoutExpired:
        code = None
    return shut_s, code, time.monotonic() - t0


def wait_idle(s: RawServer, timeout: float = 60) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        st = status(s)
        if st["scheduler"]["idle"] or time.monotonic() > deadline:
            return st
        time.sleep(0.1)


def finish(s: RawServer, timeout: float = 30) -> int | None:
    """shutdown + exit; the exit code (None: still running after `timeout`)."""
    with contextlib.suppress(TimeoutError, EOFError, OSError):
        s.call("shutdown", None, timeout)
        s.notify("exit", None)
    try:
        code: int | None = s.wait_exit(timeout)
    except subprocess.TimeoutExpired:
        code = None
    s.close()
    return code


class Prober:
    """Status requests one after another from a second connection's thread... here the same
    connection: the worst wait of any of them is how long the event loop was held."""

    def __init__(self, s: RawServer) -> None:
        self.s, self.worst, self.count = s, 0.0, 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Prober:
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.is_set():
            t0 = time.monotonic()
            try:
                self.s.call("lsp-complete/status", {"recent": 0}, 120)
            except (TimeoutError, EOFError, OSError):
                self.worst = max(self.worst, time.monotonic() - t0)
                return
            self.worst = max(self.worst, time.monotonic() - t0)
            self.count += 1
            time.sleep(0.05)

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(130)


def stderr_has(s: RawServer, *words: str) -> list[str]:
    err = s.stderr()
    return [w for w in words if w in err]


# --- 1. a full disk ---------------------------------------------------------------------------


def kv_accounting(kv: Path) -> tuple[int, int, int]:
    """(rows, bytes of value files no row names, value files) of a KV folder."""
    named: set[str] = set()
    rows = 0
    db = kv / "cache.db"
    if db.exists():
        con = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=10)
        try:
            for (filename,) in con.execute("SELECT filename FROM Cache"):
                rows += 1
                if filename:
                    named.add(filename)
        finally:
            con.close()
    orphan, files = 0, 0
    for path in kv.rglob("*.val"):
        files += 1
        if str(path.relative_to(kv)) not in named:
            orphan += path.stat().st_size
    return rows, orphan, files


def attack_full_disk() -> None:
    for slack in (150_000, 40_000, 0):
        _full_disk(slack)


def _full_disk(slack: int) -> None:
    name = f"1 full disk ({slack // 1000} KB left)"
    if os.geteuid() != 0:
        record(name, "2 MiB tmpfs", False, "not root: no tmpfs could be mounted")
        return
    with box() as b:
        disk = b.root / "disk"
        disk.mkdir()
        subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(disk)], check=True)
        try:
            cache = disk / "c"
            env = b.env(LSP_COMPLETE_CACHE_DIR=str(cache))
            texts = {f"file:///work/full{i}.py": SOURCE.replace("total", f"total{i}") * 12
                     for i in range(8)}

            def session(fill: bool) -> tuple[int | None, list[str], int]:
                s = start(b, {"maxTokens": 4}, env=env)
                if fill:  # the first entries may fit, the rest hit ENOSPC mid-write
                    free = shutil.disk_usage(disk).free
                    with contextlib.suppress(OSError):
                        (disk / "filler").write_bytes(b"\0" * max(0, free - slack))
                for uri, text in texts.items():
                    open_doc(s, uri, text)
                    inline(s, uri, 5, 4)
                wait_idle(s)
                for uri in texts:
                    s.notify("textDocument/didClose", {"textDocument": {"uri": uri}})
                wait_idle(s)
                told = [m["params"]["message"] for m in s.messages()
                        if m.get("method") == "window/showMessage"]
                return finish(s, 60), told, 0

            code, told, _ = session(fill=True)
            rows, orphan, files = kv_accounting(cache / "kv")
            with contextlib.suppress(FileNotFoundError):
                (disk / "filler").unlink()
            code2, _, _ = session(fill=False)
            rows2, orphan2, _ = kv_accounting(cache / "kv")
            s = start(b, {"maxTokens": 4}, env=env)  # the next start restores
            uri = next(iter(texts))
            open_doc(s, uri, texts[uri])
            inline(s, uri, 5, 4)
            restored = status(s)["engineCounters"]["restored_from_disk"]
            finish(s)
            disk_told = [m[:90] for m in told if "disk" in m.lower() or "space" in m.lower()]
            record(name, "8 files saved onto a full 2 MiB tmpfs, then space freed",
                   orphan == 0 and orphan2 == 0 and code == 0 and rows2 > 0 and restored >= 1,
                   f"full: {rows} rows, {files} value files, {orphan} orphan bytes, exit {code}, "
                   f"told {disk_told}; freed: {rows2} rows, {orphan2} orphan bytes, exit "
                   f"{code2}; next start restored {restored}")
        finally:
            subprocess.run(["umount", "-l", str(disk)], check=False)


# --- 2. the model file replaced in place ------------------------------------------------------

MAPPED_LAUNCH = ("import sys, lsp_complete.engine.llama as L; "
                 "L.fits_in_memory = lambda size: False; "  # the one thing a black box cannot set
                 "from lsp_complete.cli import main; sys.argv[0] = 'lsp-complete'; main()")


def hammer(s: RawServer, uri: str, seconds: float) -> tuple[int, int]:
    """Keystrokes and a suggestion after each, for `seconds`: (answered, failed). A random
    letter each time, so typing-ahead rarely answers: most of them decode."""
    ok = bad = 0
    end = time.monotonic() + seconds
    rng = random.Random(7)
    version, col = 2, COL
    while time.monotonic() < end:
        change(s, uri, version, LINE, col, rng.choice("bcdfghjkmpqvwxz"))
        version, col = version + 1, col + 1
        try:
            inline(s, uri, LINE, col, 30)
            ok += 1
        except (TimeoutError, EOFError, OSError):
            bad += 1
            break
    return ok, bad


def attack_model_rewrite(mapped: bool) -> None:
    name = f"2 model file rewritten ({'mapped' if mapped else 'in memory'}, --no-daemon)"
    with box() as b:
        other = write_tiny_gguf(b.root / "other.gguf", seed=1)
        if mapped:
            s = _raw([sys.executable, "-c", MAPPED_LAUNCH, "serve", "--no-daemon",
                      "--model", str(b.model)], b.env())
            s.initialize({"maxTokens": 8})
            s.wait_ready(120)
        else:
            s = start(b)
        uri = "file:///work/m.py"
        open_doc(s, uri, SOURCE)
        inline(s, uri, LINE, COL)
        weights = status(s)["engine"]["weights"]
        result: dict[str, tuple[int, int]] = {}
        t = threading.Thread(target=lambda: result.update(h=hammer(s, uri, 6)))
        t.start()
        time.sleep(1)
        subprocess.run(["cp", str(other), str(b.model)], check=True)  # truncates, then writes
        t.join(60)
        code_alive = s.proc.poll()
        st: dict[str, Any] = {}
        if code_alive is None:  # the new file is taken up, or refused with a reason
            with contextlib.suppress(TimeoutError, EOFError):
                inline(s, uri, LINE, COL - 2, 30)
                st = s.wait_ready(30)
                st = {"model": st["model"]}
        state = st.get("model", {}).get("state")
        told = sum("rewritten" in m["params"]["message"] or "replaced" in m["params"]["message"]
                   for m in s.messages() if m.get("method") == "window/showMessage")
        decoded = status(s)["engineCounters"] if code_alive is None else {}
        code = finish(s) if code_alive is None else code_alive
        record(name, f"`cp new.gguf model.gguf` while suggestions run (weights {weights})",
               code_alive is None and code == 0 and result.get("h", (0, 1))[1] == 0,
               f"exit {code} (135 = SIGBUS), (answered, failed) {result.get('h')}, state after: "
               f"{state}, told {told}x; engine counters {_short(decoded)}")


def _short(counters: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in counters.items() if k in ("calls", "tokens_encoded",
                                                       "tokens_generated", "aborted_decodes")}


def _raw(command: list[str], env: dict[str, str]) -> Server:
    """A Server running `command` (not `python -m lsp_complete serve`)."""
    server = Server.__new__(Server)
    server._lock = threading.Lock()
    server._stderr = tempfile.TemporaryFile()  # noqa: SIM115 (closed by close())
    server.proc = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                   stderr=server._stderr, env=env)
    server._inbox = queue.Queue()
    server._kept = []
    server._next_id = 1000
    server._write_lock = threading.Lock()
    server._reader = threading.Thread(target=server._read_stdout, daemon=True)
    server._reader.start()
    return server


def attack_model_rewrite_daemon() -> None:
    name = "2 model file rewritten (shared daemon, two windows)"
    with box(daemon=True) as b:
        other = write_tiny_gguf(b.root / "other.gguf", seed=1)
        a = start(b, daemon=True)
        c = start(b, daemon=True)
        try:
            open_doc(a, "file:///work/a.py", SOURCE)
            open_doc(c, "file:///work/c.py", SOURCE)
            inline(a, "file:///work/a.py", LINE, COL)
            inline(c, "file:///work/c.py", LINE, COL)
            daemon_pid = status(a)["daemon"]["pid"]
            subprocess.run(["cp", str(other), str(b.model)], check=True)
            t0 = time.monotonic()
            lost: list[str] = []
            for _ in range(8):  # both windows keep being answered over the next seconds
                for label, s, uri in (("a", a, "file:///work/a.py"),
                                      ("c", c, "file:///work/c.py")):
                    try:
                        inline(s, uri, LINE, COL - 1, 30)
                        status(s, 30)
                    except (TimeoutError, EOFError, OSError) as exc:
                        lost.append(f"{label}: {type(exc).__name__}")
                time.sleep(0.25)
            span = time.monotonic() - t0
            st = status(a)
            same = st["daemon"]["pid"] == daemon_pid
            alive = _pid_alive(daemon_pid)
            record(name, "`cp new.gguf model.gguf` under two windows",
                   not lost and alive,
                   f"windows lost: {lost or 'none'} over {span:.1f} s; daemon {daemon_pid} "
                   f"alive {alive} (same daemon {same}); model state {st['model']['state']}")
        finally:
            finish(a)
            finish(c)


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


# --- 3. a 4 MB one-line file ------------------------------------------------------------------


def attack_huge_line() -> None:
    name = "3 4 MB one-line file"
    with box() as b:
        s = start(b)
        try:
            piece = "value = compute(alpha, beta[3], 'text'); "
            line = (piece * (4_000_000 // len(piece) + 1))[:4_000_000]
            big, other = "file:///work/big.py", "file:///work/other.py"
            open_doc(s, other, SOURCE)
            inline(s, other, LINE, COL)
            open_doc(s, big, line + "\n")
            with Prober(s) as probe:
                t0 = time.monotonic()
                big_id = inline_id(s, big, 0, 2_000_000)
                time.sleep(0.2)
                other_s = fresh_ask(s, "during_big")
                s.response(big_id, 120)
                big_s = time.monotonic() - t0
            alive = s.alive()
            record(name, "a suggestion mid-line, another file asked meanwhile",
                   alive and other_s < 1 and big_s < 5 and probe.worst < 1,
                   f"other file answered in {other_s:.2f} s, the big one in {big_s:.2f} s, "
                   f"event loop held at most {probe.worst:.2f} s")
        finally:
            finish(s)


# --- 4. deep nesting --------------------------------------------------------------------------


def attack_deep_nesting() -> None:
    name = "4 20,000 nested brackets"
    with box() as b:
        s = start(b)
        try:
            depth = 20_000
            text = "const x = " + "[" * depth + "1" + "]" * depth + ";\n"
            uri = "file:///work/deep.js"
            with Prober(s) as probe:
                open_doc(s, uri, text, "javascript")
                status_s, _ = timed(lambda: status(s, 120))
                col = len("const x = ") + depth + 1
                change(s, uri, 2, 0, col, ", 2")
                inline_s, _ = timed(lambda: inline(s, uri, 0, col + 3, 120))
                status2_s, _ = timed(lambda: status(s, 120))
            record(name, "open, status, an edit at the innermost, a suggestion there",
                   s.alive() and max(status_s, status2_s, probe.worst) < 1 and inline_s < 5,
                   f"status {status_s:.2f} s / {status2_s:.2f} s, suggestion {inline_s:.2f} s, "
                   f"event loop held at most {probe.worst:.2f} s")
        finally:
            finish(s)


# --- 5. odd URIs ------------------------------------------------------------------------------


def _repo(ws: Path) -> None:
    (ws / "helpers.py").write_text("def helper_total(values):\n    return sum(values)\n")
    (ws / "main.py").write_text("from helpers import helper_total\n\nx = helper_to\n")


def attack_odd_uris() -> None:
    name = "5 odd URIs"
    with box() as b:
        ws = b.root / "ws"
        ws.mkdir()
        _repo(ws)
        s = start(b, folders=[ws])
        odd = [ws.as_uri() + "/bad%00name.py", ws.as_uri() + "/%ff%fe.py",
               "file://otherhost/share/x.py", ws.as_uri() + "/../../../etc/passwd",
               "file:///" + "a/" * 3000 + "x.py", "untitled:Untitled-1", "file:", "%00",
               ws.as_uri() + "/x%2F..%2F..%2Fy.py"]
        try:
            for n, uri in enumerate(odd):
                open_doc(s, uri, f"import helpers\ny{n} = 1\n")
                inline(s, uri, 1, 2, 60)
            main = (ws / "main.py").as_uri()
            text = (ws / "main.py").read_text()
            open_doc(s, main, text)
            inline(s, main, 2, len("x = helper_to"))
            deadline = time.monotonic() + 30
            block = None
            while time.monotonic() < deadline and not block:
                st = wait_idle(s)
                block = next((d["repoContext"] for d in st["documents"] if d["uri"] == main),
                             None)
                time.sleep(0.2)
            files = [f["path"] for f in (block or {}).get("files", [])]
            errors = stderr_has(s, "Traceback", "embedded null byte")
            record(name, f"{len(odd)} odd URIs opened (NUL, bad UTF-8, host, .., 6 KB...) "
                   "then a normal file", s.alive() and bool(files) and not errors,
                   f"repository block of main.py: {files or 'none'}; in the log: "
                   f"{errors or 'no traceback'}")
        finally:
            finish(s)


# --- 6. an exponential .gitignore rule --------------------------------------------------------


def attack_gitignore() -> None:
    name = "6 72-character .gitignore rule"
    with box() as b:
        ws = b.root / "ws"
        deep = ws.joinpath(*["a"] * 14)
        deep.mkdir(parents=True)
        rule = "**/a/" * 14 + "zz"  # 72 characters
        (ws / ".gitignore").write_text(rule + "\n")
        (deep / "helpers.py").write_text("def helper_total(values):\n    return sum(values)\n")
        package = ".".join(["a"] * 14)  # the import names the deep path the rule is tried on
        for n in range(1, 15):
            (ws.joinpath(*["a"] * n) / "__init__.py").write_text("")
        main_text = f"from {package}.helpers import helper_total\n\nx = helper_to\n"
        (deep / "main.py").write_text(main_text)
        s = start(b, folders=[ws])
        try:
            main = (deep / "main.py").as_uri()
            with Prober(s) as probe:
                open_doc(s, main, main_text)
                inline_s, _ = timed(lambda: inline(s, main, 2, len("x = helper_to"), 120))
                s.notify("workspace/didChangeWatchedFiles", {"changes": [
                    {"uri": (ws / ".gitignore").as_uri(), "type": 2},
                    {"uri": (deep / "helpers.py").as_uri(), "type": 2}]})
                change(s, main, 2, 2, len("x = helper_to"), "t")
                inline2_s, _ = timed(lambda: inline(s, main, 2, len("x = helper_tot"), 120))
                idle_s, st = timed(lambda: wait_idle(s, 120))
                block = wait_block(s, main)
            record(name, f"rule {rule!r} ({len(rule)} chars), files 14 folders deep",
                   s.alive() and probe.worst < 1 and max(inline_s, inline2_s) < 3,
                   f"suggestions {inline_s:.2f} s / {inline2_s:.2f} s, idle after "
                   f"{idle_s:.2f} s, event loop held at most {probe.worst:.2f} s; repository "
                   f"block {block}; log: {_log_lines(s, 'ignore')}")
        finally:
            finish(s)


def wait_block(s: RawServer, uri: str, timeout: float = 30) -> list[str]:
    """The file names in `uri`'s repository block once it has one (or [] at the timeout)."""
    deadline = time.monotonic() + timeout
    while True:
        files = _block(wait_idle(s, timeout), uri)
        if files or time.monotonic() > deadline:
            return files
        time.sleep(0.2)


def _block(st: dict[str, Any], uri: str) -> list[str]:
    block = next((d["repoContext"] for d in st["documents"] if d["uri"] == uri), None)
    return [f["path"].rsplit("/", 1)[-1] for f in (block or {}).get("files", [])]


def _log_lines(s: RawServer, word: str) -> list[str]:
    return [line[-160:] for line in s.stderr().splitlines() if word in line.lower()][:2]


# --- 7. 10,000 imports ------------------------------------------------------------------------


def attack_imports() -> None:
    name = "7 10,000 imports"
    with box() as b:
        ws = b.root / "ws"
        (ws / "pkg").mkdir(parents=True)
        for i in range(50):
            (ws / "pkg" / f"mod{i}.py").write_text(f"def f{i}(x):\n    return x + {i}\n")
        text = "".join(f"import pkg.mod{i}\n" for i in range(10_000)) + "x = pkg.mod1.f\n"
        (ws / "many.py").write_text(text)
        s = start(b, folders=[ws])
        try:
            uri, other = (ws / "many.py").as_uri(), "file:///work/other.py"
            open_doc(s, other, SOURCE)
            inline(s, other, LINE, COL)
            with Prober(s) as probe:
                open_doc(s, uri, text)
                s.notify("lsp-complete/didMoveCursor", {"textDocument": {"uri": uri},
                                                        "position": {"line": 10_000,
                                                                     "character": 14}})
                time.sleep(1.5)  # the cursor rests: its work starts
                own_s, _ = timed(lambda: inline(s, uri, 10_000, 14, 120))
                other_s = fresh_ask(s, "during_imports")
                st = wait_idle(s, 120)
            record(name, "a file of 10,000 imports opened, the cursor resting in it",
                   s.alive() and probe.worst < 1 and own_s < 5 and other_s < 1,
                   f"its suggestion {own_s:.2f} s, another file's {other_s:.2f} s, "
                   f"event loop held at most {probe.worst:.2f} s; repository block "
                   f"{_block(st, uri)}")
        finally:
            finish(s)


# --- 8. a remote engine's text ----------------------------------------------------------------

NASTY = ["total\x1b[31m", "\x07\x08x", "\x00y", "\x85\x9b z", "a\rb", "\u202eevil",
         "\u2066iso\u2069", "\x7f ok"]


def attack_remote_text() -> None:
    for engine in ("llama-server", "openai"):
        name = f"8 remote engine text ({engine})"
        fake = FakeLlamaServer()
        fake.pieces = list(NASTY)
        with box() as b:
            s = start(b, {"engine": engine, "engineUrl": fake.url, "maxTokens": 32,
                          "multiline": "never"}, model=None)
            try:
                uri = "file:///work/r.py"
                open_doc(s, uri, "x = 1\nprint(x)\n")
                texts = []
                for col in (0, 1, 2):
                    texts.append(insert_text(inline(s, uri, 1, col)))
                bad = sorted({f"U+{ord(c):04X}" for t in texts for c in t if c in BANNED})
                logged = bool(stderr_has(s, "control", "bidi", "removed", "stripped"))
                record(name, "every piece carries ESC/BEL/BS/NUL/C1/lone CR/bidi",
                       not bad and any(texts) and logged,
                       f"insert texts {texts!r}; controls that reached the editor: "
                       f"{bad or 'none'}; a log line: {logged}")
            finally:
                finish(s)
                fake.close()


# --- 9. a burst of model changes --------------------------------------------------------------


def attack_model_burst(daemon: bool) -> None:
    name = f"9 20 model switches at once ({'shared daemon' if daemon else '--no-daemon'})"
    with box(daemon=daemon) as b:
        models = [write_tiny_gguf(b.root / f"m{i}.gguf", seed=i) for i in range(3)]
        s = start(b, daemon=daemon)
        try:
            burst = [models[i % 2] for i in range(19)] + [models[2]]
            s.write(b"".join(frame({"jsonrpc": "2.0", "method":
                                    "workspace/didChangeConfiguration",
                                    "params": {"settings": {"lspComplete": {"model": str(m)}}}})
                             for m in burst))
            deadline = time.monotonic() + 60
            path = state = None
            while time.monotonic() < deadline:
                st = status(s)
                state, path = st["model"]["state"], (st["engine"] or {}).get("path")
                if state == "ready" and path == str(models[2]) and st["scheduler"]["idle"]:
                    break
                time.sleep(0.3)
            time.sleep(2)  # nothing else arrives later
            st = status(s)
            final = (st["engine"] or {}).get("path")
            record(name, "ending on m2.gguf", final == str(models[2]) and s.alive(),
                   f"final model {Path(final).name if final else None} (state "
                   f"{st['model']['state']})")
        finally:
            finish(s)


# --- 10. shutdown behind a stuck request ------------------------------------------------------


def attack_stuck_shutdown() -> None:
    name = "10 shutdown behind a stuck remote request"
    fake = FakeLlamaServer()
    hold = threading.Event()

    def never(handler: Any) -> None:
        hold.wait(120)

    fake.raw["/completion"] = never
    fake.raw["/infill"] = never
    with box() as b:
        s = start(b, {"engine": "llama-server", "engineUrl": fake.url,
                      "requestTimeoutMs": 120_000}, model=None)
        try:
            uri = "file:///work/stuck.py"
            open_doc(s, uri, SOURCE)
            inline_id(s, uri, LINE, COL)
            deadline = time.monotonic() + 30  # the suggestion is on the wire, unanswered
            while not fake.posts("/completion") and time.monotonic() < deadline:
                time.sleep(0.1)
            stuck = sum(bool(body.get("stream")) for body in fake.posts("/completion"))
            time.sleep(0.5)
            shut_s, code, exit_s = shutdown_and_exit(s)
            record(name, "a suggestion waiting on a server that never answers, then shutdown",
                   stuck > 0 and shut_s < 3 and code == 0 and exit_s < 3,
                   f"{stuck} streamed request(s) left hanging; shutdown answered in "
                   f"{shut_s:.2f} s, exit {code} after {exit_s:.2f} s")
        finally:
            hold.set()
            s.close()
            fake.close()


# --- 11. a window that does not read ----------------------------------------------------------


class Window:
    """A raw session on the daemon's socket."""

    def __init__(self, path: Path) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(str(path))
        self.sock.sendall(wire.encode({"kind": "session", "version": wire.version(), "pid": 0}))
        wire.read_line(self.sock, 10)
        self._split = Splitter(1 << 30)
        self._n = 0

    def call(self, method: str, params: Any, timeout: float = 60) -> Any:
        self._n += 1
        self.sock.settimeout(timeout)
        self.sock.sendall(frame({"jsonrpc": "2.0", "id": self._n, "method": method,
                                 "params": params}))
        while True:
            for body in self._split.feed(self.sock.recv(1 << 20)):
                message = json.loads(body)
                if message.get("id") == self._n:
                    return message.get("result")

    def notify(self, method: str, params: Any) -> None:
        self.sock.sendall(frame({"jsonrpc": "2.0", "method": method, "params": params}))


@contextlib.contextmanager
def daemon_process(b: Box) -> Iterator[tuple[subprocess.Popen[bytes], Path]]:
    env = b.env(daemon=True)
    saved = dict(os.environ)
    os.environ.update(env)
    try:
        from lsp_complete.daemon import paths
        paths.ensure_runtime_dir()
        path = paths.socket_path()
    finally:
        os.environ.clear()
        os.environ.update(saved)
    proc = subprocess.Popen([sys.executable, "-m", "lsp_complete", "daemon", "run"], env=env,
                            stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while not path.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        yield proc, path
    finally:
        proc.terminate()
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()


def attack_unread_window() -> None:
    name = "11 a window that does not read (daemon)"
    with box() as b, daemon_process(b) as (proc, path):
        good = Window(path)
        good.call("initialize", {"capabilities": {}, "initializationOptions": {
            "threads": 1, "contextSize": 4096, "model": str(b.model)}})
        good.notify("initialized", {})
        bad = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        bad.connect(str(path))
        bad.sendall(wire.encode({"kind": "session", "version": wire.version(), "pid": 0}))
        wire.read_line(bad, 10)
        bad.sendall(big_status_setup(b.model))
        read_answers(bad, {SETUP_DONE})
        before = rss_mib(proc.pid)
        worst = 0.0
        stop = threading.Event()

        def probe() -> None:
            nonlocal worst
            while not stop.is_set():
                t, _ = timed(lambda: good.call("lsp-complete/status", {"recent": 0}, 120))
                worst = max(worst, t)
                time.sleep(0.1)

        t = threading.Thread(target=probe, daemon=True)
        t.start()
        sent = send_while_taken(bad, status_flood(REQUESTS))
        time.sleep(2)
        peak = rss_mib(proc.pid)
        stop.set()
        t.join(130)
        seen = read_answers(bad, set(range(1, sent + 1)))
        bad.close()
        grown = peak - before
        record(name, f"{REQUESTS} status requests (~1 MB answers) never read",
               proc.poll() is None and grown < 300 and worst < 2,
               f"sent {sent} before the daemon stopped reading, RSS {before:.0f} -> "
               f"{peak:.0f} MiB (+{grown:.0f}), answers read later {len(seen)}, another "
               f"window's status at worst {worst:.2f} s")
        _slow_reader(b, path, proc)


def attack_unread_frontend() -> None:
    """The same flood from an editor that does not read the frontend's stdout (`serve`, the
    shared daemon behind it): neither the frontend nor the daemon may grow without bound."""
    name = "11 an editor that does not read (serve -> daemon)"
    with box(daemon=True) as b:
        good = start(b, daemon=True)
        try:
            daemon_pid = status(good)["daemon"]["pid"]
            front = subprocess.Popen(
                [sys.executable, "-m", "lsp_complete", "serve", "--model", str(b.model)],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                env=b.env(True))
            assert front.stdin is not None
            front.stdin.write(big_status_setup(b.model))
            front.stdin.flush()
            time.sleep(3)
            before = rss_mib(front.pid), rss_mib(daemon_pid)
            sent = [0]

            def flood() -> None:
                with contextlib.suppress(OSError):
                    for data in status_flood(REQUESTS):
                        front.stdin.write(data)  # type: ignore[union-attr]
                        front.stdin.flush()  # type: ignore[union-attr]
                        sent[0] += 1

            t = threading.Thread(target=flood, daemon=True)
            t.start()
            worst, last, still = 0.0, -1, 0
            while still < 6:  # until the frontend stops taking requests for 3 s
                took, _ = timed(lambda: status(good, 120))
                worst = max(worst, took)
                still = still + 1 if sent[0] == last else 0
                last = sent[0]
                time.sleep(0.5)
            after = rss_mib(front.pid), rss_mib(daemon_pid)
            alive = front.poll() is None and _pid_alive(daemon_pid)
            front.kill()
            front.wait(10)
            t.join(10)
            grown = after[0] - before[0], after[1] - before[1]
            record(name, f"{REQUESTS} status requests, stdout never read",
                   alive and max(grown) < 300 and worst < 2,
                   f"taken {sent[0]}; frontend RSS {before[0]:.0f} -> {after[0]:.0f} MiB, "
                   f"daemon {before[1]:.0f} -> {after[1]:.0f} MiB; another window's status at "
                   f"worst {worst:.2f} s")
        finally:
            finish(good)


def _slow_reader(b: Box, path: Path, proc: subprocess.Popen[bytes]) -> None:
    name = "11 a slow reader (daemon)"
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.connect(str(path))
    sock.sendall(wire.encode({"kind": "session", "version": wire.version(), "pid": 0}))
    wire.read_line(sock, 10)
    sock.sendall(big_status_setup(b.model))
    read_answers(sock, {SETUP_DONE})
    before = rss_mib(proc.pid)
    peak = before
    sock.setblocking(False)
    writer_done = threading.Event()

    def writer() -> None:
        with contextlib.suppress(OSError):
            for data in status_flood(REQUESTS):
                sock.setblocking(True)
                sock.settimeout(60)
                sock.sendall(data)
        writer_done.set()

    t = threading.Thread(target=writer, daemon=True)
    t.start()
    end = time.monotonic() + 25
    got = 0
    while time.monotonic() < end:  # 64 KB every 50 ms: ~1.3 MB/s
        with contextlib.suppress(BlockingIOError, TimeoutError, OSError):
            got += len(sock.recv(64 * 1024))
        peak = max(peak, rss_mib(proc.pid))
        time.sleep(0.05)
    sock.close()
    t.join(5)
    grown = peak - before
    record(name, f"{REQUESTS} status requests read at ~1.3 MB/s for 25 s",
           proc.poll() is None and grown < 300,
           f"read {got / 1e6:.1f} MB; RSS {before:.0f} -> {peak:.0f} MiB (+{grown:.0f})")


def attack_document_memory() -> None:
    name = "11 memory per open document (daemon)"
    sys.path.insert(0, str(ROOT / "scripts"))
    from document_memory import documents  # the measuring script's documents

    with box() as b, daemon_process(b) as (proc, path):
        w = Window(path)
        w.call("initialize", {"capabilities": {}, "initializationOptions": {
            "threads": 1, "contextSize": 4096, "model": str(b.model)}})
        w.notify("initialized", {})
        _settle(w)
        figures = []
        ok = True
        for case, limit in (("one 3.2 MB file", 200), ("500 files of 14 KB", 200)):
            docs = documents(case)
            before = rss_mib(proc.pid)
            for uri, text in docs:
                w.notify("textDocument/didOpen", {"textDocument": {
                    "uri": uri, "languageId": "python", "version": 1, "text": text}})
            _settle(w, 180)
            grown = rss_mib(proc.pid) - before
            for uri, _ in docs:
                w.notify("textDocument/didClose", {"textDocument": {"uri": uri}})
            _settle(w)
            figures.append(f"{case}: +{grown:.0f} MiB")
            ok = ok and grown < limit
        record(name, "one 3.2 MB file; 500 files of 14 KB (issue: ~410 / ~300 MiB)",
               ok and proc.poll() is None, "; ".join(figures))


def attack_dense_files_memory() -> None:
    """Five 3.2 MB files of dense code (the costliest trees per byte), each used in turn:
    only the file in use may keep its tree."""
    name = "11b five dense 3.2 MB files used in turn (daemon)"
    numbers = ", ".join(str(i % 10) for i in range(1_070_000))
    with box() as b, daemon_process(b) as (proc, path):
        w = Window(path)
        w.call("initialize", {"capabilities": {}, "initializationOptions": {
            "threads": 1, "contextSize": 4096, "model": str(b.model)}})
        w.notify("initialized", {})
        _settle(w)
        before = rss_mib(proc.pid)
        peaks = []
        for i in range(5):
            uri = f"file:///big/dense{i}.py"
            text = f"data{i} = [{numbers}]\nx = data{i}\n"
            w.notify("textDocument/didOpen", {"textDocument": {
                "uri": uri, "languageId": "python", "version": 1, "text": text}})
            w.call("textDocument/inlineCompletion", {
                "textDocument": {"uri": uri}, "position": {"line": 1, "character": 5},
                "context": {"triggerKind": 2}}, 120)
            _settle(w, 120)
            peaks.append(rss_mib(proc.pid) - before)
        st = w.call("lsp-complete/status", {"recent": 0})
        trees = sum(bool(d.get("syntaxTree")) for d in st["documents"])
        record(name, "open, ask, next file (each 3.2 MB of `1, 2, 3, ...`)",
               proc.poll() is None and peaks[0] < 200 and (peaks[-1] - peaks[0]) / 4 < 50
               and trees <= 2,
               f"RSS growth after each: {', '.join(f'+{p:.0f}' for p in peaks)} MiB; "
               f"trees kept {trees} of 5")


def _settle(w: Window, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    idle = 0
    while idle < 2 and time.monotonic() < deadline:
        st = w.call("lsp-complete/status", {"recent": 0}, 120)
        ready = st["model"]["state"] in ("ready", "error")
        idle = idle + 1 if ready and st["scheduler"]["idle"] else 0
        time.sleep(0.5)


# --- suites 1-2 (listed as holding): quick re-checks -----------------------------------------


def recheck_damaged_cache() -> None:
    name = "r1 damaged cache"
    outcomes = []
    ok = True
    for damage in ("truncated cache.db", "random cache.db", "damaged value files",
                   "KV folder deleted while running", "KV folder replaced by a file"):
        with box() as b:
            s = start(b)
            uri = "file:///work/d.py"
            open_doc(s, uri, SOURCE * 10)
            inline(s, uri, LINE, COL)
            wait_idle(s)
            finish(s)
            kv = b.cache / "kv"
            if damage == "truncated cache.db":
                with open(kv / "cache.db", "r+b") as f:
                    f.truncate(1000)
            elif damage == "random cache.db":
                (kv / "cache.db").write_bytes(random.randbytes(64_000))
            elif damage == "damaged value files":
                for val in kv.rglob("*.val"):
                    data = bytearray(val.read_bytes())
                    for i in range(0, len(data), 997):
                        data[i] ^= 0xFF
                    val.write_bytes(bytes(data))
            s = start(b)
            open_doc(s, uri, SOURCE * 10)
            inline(s, uri, LINE, COL)
            if damage == "KV folder deleted while running":
                shutil.rmtree(kv)
            elif damage == "KV folder replaced by a file":
                shutil.rmtree(kv)
                kv.write_bytes(b"not a folder")
            for col in (COL - 1, COL - 2):
                change(s, uri, 2 + col, LINE, col, "")
                inline(s, uri, LINE, col)
            s.notify("textDocument/didClose", {"textDocument": {"uri": uri}})
            wait_idle(s)
            alive = s.alive()
            code = finish(s)
            outcomes.append(f"{damage}: exit {code}")
            ok = ok and alive and code == 0
    record(name, "five kinds of damage, then open/suggest/close/shutdown", ok,
           "; ".join(outcomes))


def recheck_big_and_odd_text() -> None:
    with box() as b:
        s = start(b)
        try:
            text = "".join(f"v{i} = f({i})\n" for i in range(200_000))  # 2.9 MB: under the cap
            uri = "file:///work/long.py"
            open_doc(s, uri, text)
            t, _ = timed(lambda: inline(s, uri, 100_000, 4, 120))
            change(s, uri, 2, 150_000, 0, "x = v1")
            t2, _ = timed(lambda: inline(s, uri, 150_000, 6, 120))
            doc = next(d for d in status(s)["documents"] if d["uri"] == uri)
            record("r2 200,000-line file", f"{len(text) / 1e6:.1f} MB: a suggestion mid-file, an "
                   "edit, another", s.alive() and max(t, t2) < 5 and not doc["disabled"],
                   f"{t:.2f} s / {t2:.2f} s; refused: {doc['disabled']}; "
                   f"cached tokens {doc['cachedTokens']}")
            mixed = ("a = '\U0001f600'\r\nb = 1\rc = '\x00'\n" * 200 + "d = '\U0001d11e' + a\r"
                     "e = b\r\nf = \U0001f600")
            uri2 = "file:///work/mixed.py"
            open_doc(s, uri2, mixed)
            errors = 0
            for n, (line, col) in enumerate([(600, 3), (601, 2), (602, 5), (0, 6), (1, 1)]):
                change(s, uri2, 2 + n, line, col, "\U0001f600\r\n\x00z")
                answer = inline(s, uri2, line, col + 2)
                errors += "error" in answer
            record("r3 CR/CRLF/mixed endings, astral, NUL", "edits and suggestions at odd spots",
                   s.alive() and errors == 0, f"error answers {errors}")
        finally:
            finish(s)


def recheck_many_documents() -> None:
    with box() as b:
        s = start(b)
        try:
            t0 = time.monotonic()
            for i in range(2000):
                uri = f"file:///work/cycle{i % 7}.py"
                open_doc(s, uri, SOURCE)
                s.notify("textDocument/didClose", {"textDocument": {"uri": uri}})
            st = wait_idle(s, 120)
            cycles_s = time.monotonic() - t0
            for i in range(500):
                open_doc(s, f"file:///work/open{i}.py", SOURCE.replace("total", f"t{i}") * 20)
            st = wait_idle(s, 180)
            answer_s, _ = timed(lambda: inline(s, "file:///work/open499.py", LINE, COL, 60))
            rss = s.rss_kib() / 1024
            for i in range(0, 500, 5):  # a hundred files with a KV cache to save at shutdown
                inline(s, f"file:///work/open{i}.py", LINE, COL, 60)
            wait_idle(s, 120)
            t0 = time.monotonic()
            code = finish(s, 60)
            shut_s = time.monotonic() - t0
            record("r4 2,000 open/close cycles, 500 open documents",
                   "then a suggestion in the last one; a hundred asked, then shutdown",
                   len(st["documents"]) == 500 and answer_s < 3 and code == 0 and shut_s < 12,
                   f"cycles settled in {cycles_s:.1f} s, {len(st['documents'])} open, suggestion "
                   f"{answer_s:.2f} s, RSS {rss:.0f} MiB; shutdown + exit {shut_s:.2f} s, "
                   f"exit {code}")
        finally:
            s.close()


def recheck_daemon_race() -> None:
    with box(daemon=True) as b:
        env = b.env(daemon=True)
        saved = dict(os.environ)
        os.environ.update(env)
        try:
            from lsp_complete.daemon import paths
            paths.ensure_runtime_dir()
            sock_path = paths.socket_path()
        finally:
            os.environ.clear()
            os.environ.update(saved)
        stale = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)  # bound, never listening
        with contextlib.suppress(OSError):
            stale.bind(str(sock_path))
        stale.close()
        servers: list[RawServer] = []
        results: list[Any] = [None] * 10
        sockets: set[str] = set()

        def one(i: int) -> None:
            try:
                s = start(b, daemon=True, ready=False)
                servers.append(s)
                s.wait_ready(120)
                results[i] = status(s)["daemon"]["pid"]
                sockets.add(status(s)["daemon"]["socket"])
            except Exception as exc:  # noqa: BLE001 (an attack reports, never stops)
                results[i] = repr(exc)[:80]

        threads = [threading.Thread(target=one, args=(i,)) for i in range(10)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(180)
        pids = {r for r in results if isinstance(r, int)}
        for s in servers:
            finish(s)
        record("r5 ten frontends racing to start the daemon, a stale socket",
               f"stale socket at {sock_path.name} first",
               len(pids) == 1 and all(isinstance(r, int) for r in results)
               and sockets == {str(sock_path)},
               f"daemon pids seen: {sorted(pids)}, at the stale socket's path: "
               f"{sockets == {str(sock_path)}}; failures: "
               f"{[r for r in results if not isinstance(r, int)] or 'none'}")


# --- round 3b: the same classes, from other angles --------------------------------------------


def _damaged_models(b: Box) -> list[Path]:
    good = b.model.read_bytes()
    bad = {"half.gguf": good[: len(good) // 2],
           "zeros.gguf": good[:4096] + b"\0" * (len(good) - 4096),
           "random.gguf": good[:64] + random.Random(3).randbytes(len(good)),
           "tail-cut.gguf": good[:-1000],
           "empty.gguf": b""}
    for file, data in bad.items():
        (b.root / file).write_bytes(data)
    return [b.root / file for file in bad]


def attack_garbage_model() -> None:
    """A window names a damaged model: told, never a crash (--no-daemon); under the daemon,
    the window alone switches (and the daemon takes it), another window joins later."""
    for daemon in (False, True):
        kind = "shared daemon" if daemon else "--no-daemon"
        name = f"2b damaged models named in settings ({kind})"
        with box(daemon=daemon) as b:
            a = start(b, daemon=daemon)
            pid = status(a)["daemon"]["pid"] if daemon else a.proc.pid
            states = []
            try:
                open_doc(a, "file:///work/a.py", SOURCE)
                for model in _damaged_models(b) + [b.model]:
                    a.notify("workspace/didChangeConfiguration", {"settings": {"lspComplete": {
                        "model": str(model)}}})
                    time.sleep(0.5)
                    st = a.wait_ready(60)
                    inline(a, "file:///work/a.py", LINE, COL, 30)
                    states.append(f"{model.name}: {st['model']['state']}")
                c = start(b, daemon=daemon) if daemon else a
                open_doc(c, "file:///work/c.py", SOURCE)
                inline(c, "file:///work/c.py", LINE, COL, 30)
                alive = _pid_alive(pid) and a.alive() and c.alive()
                if c is not a:
                    finish(c)
                record(name, "half / zeroed / random / tail-cut / empty GGUF, then the good one",
                       alive, f"process alive {alive}; states: {states}")
            finally:
                finish(a)


def _deep_texts() -> dict[str, tuple[str, str, int]]:
    n = 20_000
    binary = "x = " + "+".join(["1"] * n)
    parens = "x = " + "(" * n + "1" + ")" * n
    funcs = "".join(f"function f{i}() {{\n" for i in range(5000)) + "  return 1;\n" + "}\n" * 5000
    indent = "".join(" " * i + "if x:\n" for i in range(2000)) + " " * 2000 + "y = 1\n"
    attr = "x = a" + ".b" * n + "\n"
    return {"python 1+1+...+1 (20,000 terms)": ("python", binary + "\n", len(binary)),
            "python 20,000 nested parentheses": ("python", parens + "\n", 4 + n + 1),
            "javascript 5,000 nested functions": ("javascript", funcs, funcs.index("return")),
            "python 2,000 nested if blocks": ("python", indent, len(indent) - 1),
            "python a.b.b.b... (20,000 attributes)": ("python", attr, len(attr) - 1)}


def attack_deep_trees() -> None:
    for label, (language, text, cursor) in _deep_texts().items():
        name = f"4b {label}"
        with box() as b:
            s = start(b)
            try:
                uri = f"file:///work/deep.{'js' if language == 'javascript' else 'py'}"
                line = text.count("\n", 0, cursor)
                col = cursor - (text.rfind("\n", 0, cursor) + 1)
                with Prober(s) as probe:
                    open_doc(s, uri, text, language)
                    t1 = time.monotonic()
                    inline(s, uri, line, col, 120)
                    first = time.monotonic() - t1
                    t0 = time.monotonic()
                    for k in range(5):  # keystrokes at the deepest point, a suggestion after each
                        change(s, uri, 2 + k, line, col + k, "z")
                        inline(s, uri, line, col + k + 1, 120)
                    keys = (time.monotonic() - t0) / 5
                    s.notify("lsp-complete/didMoveCursor", {"textDocument": {"uri": uri},
                                                            "position": {"line": line,
                                                                         "character": col}})
                    idle_s, _ = timed(lambda s=s: wait_idle(s, 120))
                record(name, "open, a suggestion at the deepest point, 5 keystrokes there",
                       s.alive() and probe.worst < 1 and first < 5 and keys < 2,
                       f"first {first:.2f} s, per keystroke {keys:.2f} s, idle after "
                       f"{idle_s:.2f} s, event loop held at most {probe.worst:.2f} s")
            finally:
                finish(s)


def attack_odd_uris_workspace() -> None:
    name = "5b odd URIs in workspace messages"
    with box() as b:
        ws = b.root / "ws"
        ws.mkdir()
        _repo(ws)
        nul = ws.as_uri() + "/x%00y"
        s = b.serve()
        answer = s.call("initialize", {
            "processId": None, "capabilities": {}, "rootUri": nul,
            "workspaceFolders": [{"uri": nul, "name": "nul"}, {"uri": "%zz", "name": "bad"},
                                 {"uri": ws.as_uri(), "name": "ws"}],
            "initializationOptions": {"threads": 1, "contextSize": 4096, "maxTokens": 8}}, 120)
        try:
            s.notify("initialized", {})
            s.wait_ready(120)
            s.notify("workspace/didChangeWorkspaceFolders", {"event": {
                "added": [{"uri": ws.as_uri() + "/%00", "name": "n"},
                          {"uri": "file:///" + "b/" * 3000, "name": "long"}],
                "removed": [{"uri": "file:///nowhere%00", "name": "x"}]}})
            s.notify("workspace/didChangeWatchedFiles", {"changes": [
                {"uri": ws.as_uri() + "/helpers%00.py", "type": 2},
                {"uri": "%", "type": 1}, {"uri": ws.as_uri() + "/helpers.py", "type": 2}]})
            s.notify("textDocument/didSave", {"textDocument": {"uri": ws.as_uri() + "/a%00"}})
            s.notify("textDocument/didChange", {"textDocument": {"uri": "file:///n%00", "version":
                                                                 2}, "contentChanges": []})
            main = (ws / "main.py").as_uri()
            open_doc(s, main, (ws / "main.py").read_text())
            inline(s, main, 2, len("x = helper_to"))
            files = wait_block(s, main)
            errors = stderr_has(s, "Traceback", "embedded null byte")
            record(name, "NUL / bad / long URIs as root, folders, watched files, save, change",
                   "result" in answer and s.alive() and bool(files) and not errors,
                   f"repository block of main.py: {files or 'none'}; in the log: "
                   f"{errors or 'no traceback'}")
        finally:
            finish(s)


def attack_imports_other_languages() -> None:
    n = 10_000
    cases = {
        "javascript": ("js", "".join(f"import {{ a{i} }} from './m{i}';\n" for i in range(n))
                       + "const x = a1;\n"),
        "c": ("c", "".join(f"#include \"h{i}.h\"\n" for i in range(n)) + "int x = 1;\n"),
        "go": ("go", "package main\n\nimport (\n" + "".join(f"\t\"m/p{i}\"\n" for i in range(n))
               + ")\n\nvar x = 1\n"),
        "python (one statement)": ("py", "from pkg import (" + ", ".join(f"n{i}" for i in range(n))
                                   + ")\nx = 1\n"),
    }
    for language, (ext, text) in cases.items():
        name = f"7b 10,000 imports ({language})"
        with box() as b:
            ws = b.root / "ws"
            ws.mkdir()
            (ws / "pkg").mkdir()
            (ws / "pkg" / "__init__.py").write_text("n1 = 1\n")
            for i in range(20):
                (ws / f"m{i}.js").write_text(f"export const a{i} = {i};\n")
                (ws / f"h{i}.h").write_text(f"int h{i};\n")
            (ws / f"many.{ext}").write_text(text)
            s = start(b, folders=[ws])
            try:
                uri = (ws / f"many.{ext}").as_uri()
                lid = language.split()[0]
                last = text.count("\n") - 1
                with Prober(s) as probe:
                    open_doc(s, uri, text, lid)
                    s.notify("lsp-complete/didMoveCursor", {"textDocument": {"uri": uri},
                                                            "position": {"line": last,
                                                                         "character": 5}})
                    time.sleep(0.5)  # the cursor rests: its work starts; another file asks
                    other_s = fresh_ask(s, "other")
                    own_s, _ = timed(lambda s=s, uri=uri, last=last: inline(s, uri, last, 5, 120))
                    idle_s, _ = timed(lambda s=s: wait_idle(s, 120))
                record(name, "opened, the cursor resting in it",
                       s.alive() and probe.worst < 1 and own_s < 5 and other_s < 1,
                       f"its suggestion {own_s:.2f} s, another file's {other_s:.2f} s, idle after "
                       f"{idle_s:.2f} s, event loop held at most {probe.worst:.2f} s")
            finally:
                finish(s)


def attack_remote_text_other_paths() -> None:
    fake = FakeLlamaServer()
    fake.pieces = list(NASTY)
    with box() as b:
        s = start(b, {"engine": "llama-server", "engineUrl": fake.url, "maxTokens": 32,
                      "multiline": "never", "alternatives": 3}, model=None)
        try:
            uri = "file:///work/r.py"
            open_doc(s, uri, "x = 1\nprint(x)\n")
            invoked = s.call("textDocument/inlineCompletion", {
                "textDocument": {"uri": uri}, "position": {"line": 1, "character": 0},
                "context": {"triggerKind": 1}}, 60)
            items = (invoked.get("result") or {}).get("items", [])
            texts = [i["insertText"] if isinstance(i["insertText"], str)
                     else i["insertText"]["value"] for i in items]
            menu = s.call("textDocument/completion", {
                "textDocument": {"uri": uri}, "position": {"line": 1, "character": 1}}, 60)
            for item in (menu.get("result") or {}).get("items", []):
                texts += [item.get("label", ""), item.get("insertText") or "",
                          (item.get("textEdit") or {}).get("newText", "")]
            bad = sorted({f"U+{ord(c):04X}" for t in texts for c in t if c in BANNED})
            record("8b remote engine text (alternatives, completion menu)",
                   "explicit request with alternatives; textDocument/completion",
                   not bad and any(texts), f"{len(texts)} texts, controls that reached the "
                   f"editor: {bad or 'none'}")
        finally:
            finish(s)
            fake.close()


def attack_settings_burst_mixed() -> None:
    name = "9b 20 mixed setting changes at once"
    with box() as b:
        models = [write_tiny_gguf(b.root / f"m{i}.gguf", seed=i) for i in range(3)]
        s = start(b)
        try:
            burst = []
            for i in range(19):
                burst.append({"model": str(models[i % 2]), "contextSize": 1024 * (1 + i % 3),
                              "maxTokens": 4 + i})
            burst.append({"model": str(models[2]), "contextSize": 2048, "maxTokens": 7})
            for k, options in enumerate(burst):  # some while a suggestion runs
                s.notify("workspace/didChangeConfiguration", {"settings": {"lspComplete":
                                                                          options}})
                if k % 5 == 0:
                    open_doc(s, f"file:///work/b{k}.py", SOURCE)
                    inline_id(s, f"file:///work/b{k}.py", LINE, COL)
            deadline = time.monotonic() + 60
            st = status(s)
            while time.monotonic() < deadline:
                st = status(s)
                if st["model"]["state"] == "ready" and st["scheduler"]["idle"]:
                    time.sleep(2)
                    st = status(s)
                    if st["model"]["state"] == "ready":
                        break
                time.sleep(0.3)
            engine = st["engine"] or {}
            got = (Path(engine.get("path", "")).name, engine.get("contextSize"))
            record(name, "model, contextSize, maxTokens; ending on m2.gguf, 2048",
                   got == ("m2.gguf", 2048) and s.alive(), f"final {got}")
        finally:
            finish(s)


def attack_shutdown_slow_local() -> None:
    name = "10b shutdown behind a slow local decode"
    with box() as b:
        s = start(b, {"maxTokens": 64}, env=b.env(LSP_COMPLETE_SIMULATE_DECODE_MS="3000"))
        try:
            uri = "file:///work/slow.py"
            open_doc(s, uri, SOURCE * 5)
            inline_id(s, uri, LINE, COL)
            time.sleep(1)
            shut_s, code, exit_s = shutdown_and_exit(s)
            record(name, "every decode takes 3 s (LSP_COMPLETE_SIMULATE_DECODE_MS), then shutdown",
                   shut_s < 5 and code == 0 and exit_s < 5,
                   f"shutdown answered in {shut_s:.2f} s, exit {code} after {exit_s:.2f} s")
        finally:
            s.close()


def attack_shutdown_stuck_daemon() -> None:
    name = "10c shutdown behind a stuck remote request (serve -> daemon)"
    fake = FakeLlamaServer()
    hold = threading.Event()
    fake.raw["/completion"] = lambda handler: hold.wait(120)
    with box(daemon=True) as b:
        s = start(b, {"engine": "llama-server", "engineUrl": fake.url,
                      "requestTimeoutMs": 120_000}, daemon=True, model=None)
        try:
            uri = "file:///work/stuck.py"
            open_doc(s, uri, SOURCE)
            inline_id(s, uri, LINE, COL)
            deadline = time.monotonic() + 30
            while not fake.posts("/completion") and time.monotonic() < deadline:
                time.sleep(0.1)
            time.sleep(0.5)
            shut_s, code, exit_s = shutdown_and_exit(s)
            record(name, "a window's suggestion hangs on the remote, the window shuts down",
                   shut_s < 3 and code == 0 and exit_s < 3,
                   f"shutdown answered in {shut_s:.2f} s, exit {code} after {exit_s:.2f} s")
        finally:
            hold.set()
            s.close()
            fake.close()


def attack_huge_line_next_edit() -> None:
    """The 4 MB line again, now where next edits (textDocument/copilotInlineEdit) look."""
    piece = "value = compute(alpha, beta[3], 'text'); "
    line = (piece * (4_000_000 // len(piece) + 1))[:4_000_000]
    for label, text, where in (("one 4 MB line", line + "\n", (0, 2_000_000)),
                               ("a 4 MB line under short ones", "x = 1\n" * 5 + line + "\n"
                                + "y = 2\n" * 5, (2, 3))):
        name = f"3b next edit near {label}"
        with box() as b:
            s = start(b, {"nextEdit": "on", "nextEditDelayMs": 0})
            try:
                uri = "file:///work/big.py"
                open_doc(s, uri, text)
                with Prober(s) as probe:
                    t0 = time.monotonic()
                    asked = s.request("textDocument/copilotInlineEdit", {
                        "textDocument": {"uri": uri, "version": 1},
                        "position": {"line": where[0], "character": where[1]},
                        "context": {"triggerKind": 2}})
                    time.sleep(0.3)
                    other_s = fresh_ask(s, "beside_next_edit")
                    answer = s.response(asked, 120)
                    edit_s = time.monotonic() - t0
                edits = len((answer.get("result") or {}).get("edits", []))
                record(name, "a next edit asked there, another file asked meanwhile",
                       s.alive() and other_s < 1 and edit_s < 5 and probe.worst < 1,
                       f"next edit answered in {edit_s:.2f} s ({edits} edits), other file "
                       f"{other_s:.2f} s, event loop held at most {probe.worst:.2f} s")
            finally:
                finish(s)


def attack_gitignore_variants() -> None:
    """The rule everywhere: 2,000 of them, in every folder's .gitignore down 14 levels and in
    .git/info/exclude; a 256-character rule of 50 wildcards; a 1 MB .gitignore."""
    # 1,700 rules of 72 characters: just under the 128 KiB an ignore file may have.
    ruleset = "\n".join(("**/a/" * 14 + f"z{i}")[:72] for i in range(1700)) + "\n"
    wild = ("*a" * 128)[:256]
    for label, layout in (("1,700 such rules in every folder and info/exclude", "every"),
                          (f"a 256-character rule {wild[:12]}...", "wild"),
                          ("a 1 MB .gitignore", "huge")):
        name = f"6b {label}"
        with box() as b:
            ws = b.root / "ws"
            deep = ws.joinpath(*["a"] * 14)
            deep.mkdir(parents=True)
            for n in range(1, 15):
                folder = ws.joinpath(*["a"] * n)
                (folder / "__init__.py").write_text("")
                if layout == "every":
                    (folder / ".gitignore").write_text(ruleset)
            (ws / ".git" / "info").mkdir(parents=True)
            (ws / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
            top = {"every": ruleset, "wild": wild + "\n",
                   "huge": "\n".join(f"file{i}.tmp" for i in range(100_000)) + "\n"}[layout]
            (ws / ".gitignore").write_text(top)
            (ws / ".git" / "info" / "exclude").write_text(top if layout == "every" else "")
            (deep / "helpers.py").write_text("def helper_total(values):\n    return 1\n")
            package = ".".join(["a"] * 14)
            main_text = f"from {package}.helpers import helper_total\n\nx = helper_to\n"
            (deep / "main.py").write_text(main_text)
            s = start(b, folders=[ws])
            try:
                main = (deep / "main.py").as_uri()
                with Prober(s) as probe:
                    open_doc(s, main, main_text)
                    first, _ = timed(lambda s=s, main=main: inline(s, main, 2, 13, 120))
                    s.notify("workspace/didChangeWatchedFiles", {"changes": [
                        {"uri": (ws / ".gitignore").as_uri(), "type": 2}]})
                    other_s = fresh_ask(s, "beside_rules")
                    block = wait_block(s, main, 20)
                record(name, "files 14 folders deep, a suggestion, the rules changed",
                       s.alive() and probe.worst < 1 and first < 3 and other_s < 1,
                       f"suggestion {first:.2f} s, another file {other_s:.2f} s, event loop "
                       f"held at most {probe.worst:.2f} s; repository block {block}; log: "
                       f"{_log_lines(s, 'pattern') or _log_lines(s, 'ignore')}")
            finally:
                finish(s)


def attack_model_removed_and_moved() -> None:
    name = "2c model file removed, then another moved into its place (--no-daemon)"
    with box() as b:
        other = write_tiny_gguf(b.root / "other.gguf", seed=1)
        s = start(b)
        try:
            uri = "file:///work/m.py"
            open_doc(s, uri, SOURCE)
            inline(s, uri, LINE, COL)
            b.model.unlink()
            ok_removed = bool(hammer(s, uri, 2)[0])
            st_removed = status(s)["model"]["state"]
            os.replace(other, b.model)
            hammer(s, uri, 2)
            st = s.wait_ready(60)
            code = finish(s)
            record(name, "rm model.gguf; suggestions; mv other.gguf model.gguf; suggestions",
                   ok_removed and code == 0 and st["model"]["state"] == "ready",
                   f"answered while removed: {ok_removed} (state {st_removed}); after the move: "
                   f"{st['model']['state']}; exit {code}")
        finally:
            s.close()


def attack_shutdown_during_model_load() -> None:
    for daemon in (False, True):
        _shutdown_during_model_load(daemon)


def _shutdown_during_model_load(daemon: bool) -> None:
    name = f"10d shutdown while a 1 GB model loads ({'shared daemon' if daemon else '--no-daemon'})"
    big = Path.home() / ".cache/lsp-complete/models/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"
    if not big.exists():
        record(name, "switch to the 1.5B model, then shutdown", False, f"no {big}")
        return
    with box(daemon=daemon) as b:
        s = start(b, daemon=daemon)
        try:
            s.notify("workspace/didChangeConfiguration", {"settings": {"lspComplete": {
                "model": str(big)}}})
            time.sleep(0.3)
            state = status(s)["model"]["state"]
            shut_s, code, exit_s = shutdown_and_exit(s)
            record(name, "switch to qwen2.5-coder-1.5b, shutdown 0.3 s later",
                   shut_s < 5 and code == 0 and exit_s < 5,
                   f"model state when asked: {state}; shutdown answered in {shut_s:.2f} s, "
                   f"exit {code} after {exit_s:.2f} s")
        finally:
            s.close()


def attack_huge_line_keystrokes() -> None:
    """Typing inside a 4 MB line: at its start (the whole line is the suffix), at its end,
    and in a 4 MB line that is one word (no break for any tokenizer or regex)."""
    piece = "value = compute(alpha, beta[3], 'text'); "
    code = (piece * (4_000_000 // len(piece) + 1))[:4_000_000]
    lines = "".join(f"value_{i} = compute(alpha, beta[{i}])\n" for i in range(90_000))
    dense = "data = [" + ", ".join(str(i % 10) for i in range(700_000)) + "]\n"
    for label, text, row, col in (
            ("at the start of a 4 MB line", code + "\n", 0, 0),
            ("at the end of a 4 MB line", code + "\n", 0, len(code)),
            ("in a 4 MB one-word line", "x" * 4_000_000 + "\n", 0, 2_000_000),
            ("in 3.5 MB of Python (90,000 lines)", lines, 45_000, 5),
            ("in a 2.1 MB list of numbers", dense, 0, 1_000_000)):
        name = f"3c keystrokes {label}"
        with box() as b:
            s = start(b)
            try:
                uri = "file:///work/big.py"
                open_doc(s, uri, text)
                wait_idle(s, 120)  # its first parse (in slices) is done
                with Prober(s) as probe:
                    t0 = time.monotonic()
                    for k in range(8):
                        change(s, uri, 2 + k, row, col + k, "q")
                        inline(s, uri, row, col + k + 1, 120)
                    per_key = (time.monotonic() - t0) / 8
                    other_s = fresh_ask(s, "beside_keys")
                # (the file's own suggestions wait for its tree: the others must not)
                record(name, "8 keystrokes, a suggestion after each; another file asked",
                       s.alive() and per_key < 2 and other_s < 1 and probe.worst < 1,
                       f"{per_key:.2f} s a keystroke, other file {other_s:.2f} s, event loop "
                       f"held at most {probe.worst:.2f} s")
            finally:
                finish(s)


ATTACKS: dict[str, Callable[[], None]] = {
    "1": attack_full_disk,
    "2": lambda: (attack_model_rewrite(False), attack_model_rewrite(True),
                  attack_model_rewrite_daemon()),
    "3": attack_huge_line,
    "4": attack_deep_nesting,
    "5": attack_odd_uris,
    "6": attack_gitignore,
    "7": attack_imports,
    "8": attack_remote_text,
    "9": lambda: (attack_model_burst(False), attack_model_burst(True)),
    "10": attack_stuck_shutdown,
    "11": lambda: (attack_unread_window(), attack_unread_frontend(),
                   attack_document_memory()),
    "11b": attack_dense_files_memory,
    "2b": attack_garbage_model,
    "3b": attack_huge_line_next_edit,
    "3c": attack_huge_line_keystrokes,
    "4b": attack_deep_trees,
    "2c": attack_model_removed_and_moved,
    "5b": attack_odd_uris_workspace,
    "6b": attack_gitignore_variants,
    "7b": attack_imports_other_languages,
    "8b": attack_remote_text_other_paths,
    "9b": attack_settings_burst_mixed,
    "10b": lambda: (attack_shutdown_slow_local(), attack_shutdown_stuck_daemon(),
                    attack_shutdown_during_model_load()),
    "r1": recheck_damaged_cache,
    "r2": recheck_big_and_odd_text,
    "r4": recheck_many_documents,
    "r5": recheck_daemon_race,
}


def main(names: list[str]) -> int:
    for key in names or list(ATTACKS):
        t0 = time.monotonic()
        try:
            ATTACKS[key]()
        except Exception as exc:  # noqa: BLE001 (one attack's failure is a result, not the end)
            record(f"{key}", "the attack itself", False, f"raised {type(exc).__name__}: "
                   f"{str(exc)[:300]}")
        print(f"      ({key} took {time.monotonic() - t0:.0f} s)", flush=True)
    failed = [r for r in RESULTS if not r[2]]
    print(f"\n{len(RESULTS) - len(failed)} passed, {len(failed)} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
