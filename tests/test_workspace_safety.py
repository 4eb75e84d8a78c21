"""Files a cloned repository may hand the workspace: FIFOs and links to /dev/zero as .gitignore,
ignore files too large or too costly to apply, files too deep or not regular. The workspace
must stay responsive, bounded and private (the reader itself: test_safe_read.py). These tests
use the workspace's API only, so that they run against the code before the safe reader too."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from lsp_complete.testing.lsp_client import inline, open_doc, poll_status
from lsp_complete.workspace import Workspace
from tests.lsp_helpers import start_server

pytestmark = pytest.mark.skipif(os.name != "posix", reason="FIFOs, /dev/zero and O_NOFOLLOW")

ANSWER_S = 60  # generous: "it answers", never "it is fast"


def workspace(root: Path) -> Workspace:
    ws = Workspace()
    ws.set_roots([root])
    return ws


def unblock_fifo(fifo: Path) -> None:
    """Give a reader stuck on `fifo` its end of file (the old code's read)."""
    with contextlib.suppress(OSError):
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))


def read_in_thread(ws: Workspace, path: Path, timeout: float = ANSWER_S) -> tuple[bool, Any]:
    """(answered, result) of ws.read(path), waited for at most `timeout` seconds."""
    out: dict[str, Any] = {}
    thread = threading.Thread(target=lambda: out.update(r=ws.read(path)), daemon=True)
    thread.start()
    thread.join(timeout)
    return not thread.is_alive(), out.get("r")


def run_isolated(code: str, timeout: float = ANSWER_S) -> subprocess.CompletedProcess[str]:
    """`code` in a child Python limited to 2 GiB of address space (what a runaway read or
    match does there cannot hurt the test run)."""
    limit = "import resource; resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))\n"
    return subprocess.run([sys.executable, "-c", limit + textwrap.dedent(code)],
                          capture_output=True, text=True, timeout=timeout)


# --------------------------------------------------------------------------- ignore files


def test_a_fifo_gitignore_does_not_block_the_reader(tmp_path: Path) -> None:
    """Before: stat() and read_text() on the FIFO blocked the worker forever."""
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg/a.py").write_text("A = 1\n")
    for fifo in (tmp_path / ".gitignore", tmp_path / "pkg/.gitignore"):
        os.mkfifo(fifo)
    ws = workspace(tmp_path)
    try:
        answered, source = read_in_thread(ws, tmp_path / "pkg/a.py")
    finally:
        for fifo in (tmp_path / ".gitignore", tmp_path / "pkg/.gitignore"):
            unblock_fifo(fifo)
    assert answered, "reading a file under a FIFO .gitignore blocked"
    assert source is not None and source.text == "A = 1\n"  # like git: a FIFO holds no rules


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads VmHWM (Linux)")
def test_a_gitignore_linked_to_dev_zero_is_not_read() -> None:
    """Before: the link was followed and /dev/zero read to the last byte of memory."""
    done = run_isolated("""
        import os, tempfile
        from pathlib import Path
        from lsp_complete.workspace import Workspace
        root = Path(tempfile.mkdtemp())
        (root / "a.py").write_text("A = 1\\n")
        os.symlink("/dev/zero", root / ".gitignore")
        ws = Workspace()
        ws.set_roots([root])
        source = ws.read(root / "a.py")
        # VmHWM, not ru_maxrss: Linux keeps the parent's peak across fork and exec, so
        # ru_maxrss reported the size of the test run that started this child
        status = Path("/proc/self/status").read_text()
        peak = int(status.split("VmHWM:")[1].split()[0]) // 1024
        print(source.text if source else None, peak)
    """)
    assert done.returncode == 0, done.stderr[-2000:]
    text, peak_mib = done.stdout.rsplit(" ", 1)
    assert text == "A = 1\n" and int(peak_mib) < 512


def test_a_linked_or_folder_gitignore_holds_no_rules(tmp_path: Path) -> None:
    """Like git (which does not follow a linked .gitignore): such a file is not opened."""
    (tmp_path / "rules").write_text("*.py\n")
    (tmp_path / ".gitignore").symlink_to(tmp_path / "rules")
    (tmp_path / "pkg/.gitignore").mkdir(parents=True)
    (tmp_path / "pkg/a.py").write_text("A = 1\n")
    ws = workspace(tmp_path)
    source = ws.read(tmp_path / "pkg/a.py")
    assert source is not None and source.text == "A = 1\n"


def test_the_repositorys_own_exclude_file_is_honoured_below_every_gitignore(
        tmp_path: Path) -> None:
    """Like git: .git/info/exclude hides files (what nobody commits: local secrets, scratch
    folders), and a .gitignore's rule overrides it. Before: it was not read."""
    (tmp_path / ".git/info").mkdir(parents=True)
    (tmp_path / ".git/info/exclude").write_text("# local\nsecrets.py\nscratch/\nkeep.py\n")
    (tmp_path / ".gitignore").write_text("!keep.py\n")
    for name in ("secrets.py", "scratch/notes.py", "keep.py", "a.py"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("X = 1\n")
    ws = workspace(tmp_path)
    assert ws.read(tmp_path / "secrets.py") is None
    assert ws.read(tmp_path / "scratch/notes.py") is None and not ws.is_dir(tmp_path / "scratch")
    assert ws.read(tmp_path / "keep.py") is not None  # the .gitignore re-includes it
    assert ws.read(tmp_path / "a.py") is not None
    # A worktree's or submodule's .git is a file pointing elsewhere: no rules, no error.
    other = tmp_path / "wt"
    other.mkdir()
    (other / ".git").write_text("gitdir: /elsewhere\n")
    (other / "b.py").write_text("B = 1\n")
    assert workspace(other).read(other / "b.py") is not None


def test_ignore_rules_too_large_to_apply_keep_their_folder_unread(tmp_path: Path) -> None:
    """Before: a .gitignore over the size cap was dropped, so what it ignores was read."""
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg/.env.py").write_text("API_KEY = 'hunter2'\n")
    (tmp_path / "pkg/a.py").write_text("A = 1\n")
    (tmp_path / "ok.py").write_text("OK = 1\n")
    filler = "".join(f"/generated/file_{i:07d}.txt\n" for i in range(20000))  # ~600 KB
    (tmp_path / "pkg/.gitignore").write_text(filler + ".env.py\n")
    ws = workspace(tmp_path)
    assert ws.read(tmp_path / "pkg/.env.py") is None
    assert ws.read(tmp_path / "pkg/a.py") is None  # fail closed: the whole folder
    assert ws.read(tmp_path / "ok.py") is not None  # other folders are read as before
    # Too many patterns, though small: the same.
    many = "".join(f"f{i}\n" for i in range(5000))  # over MAX_IGNORE_PATTERNS
    (tmp_path / "pkg/.gitignore").write_text(many)
    ws.invalidate(tmp_path / "pkg/.gitignore")
    assert ws.read(tmp_path / "pkg/a.py") is None


def test_rules_the_matcher_cannot_take_together_keep_their_folder_unread(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 32, round 3: 400 rules like `**/a/**/a/.../z1` are each fine, but RE2 cannot
    compile them as one set; the error escaped every path check (a traceback in the worker),
    and nothing was remembered, so every check compiled them all again (0.6 s each)."""
    from lsp_complete import workspace as ws_module

    deep = tmp_path.joinpath(*["a"] * 14)
    deep.mkdir(parents=True)
    (deep / "m.py").write_text("M = 1\n")
    (tmp_path / "ok").mkdir()
    (tmp_path / "ok" / "b.py").write_text("B = 1\n")
    rules = "".join(("**/a/" * 14)[:68] + f"z{i}\n" for i in range(400))
    (tmp_path / "a" / ".gitignore").write_text(rules)
    compiled = 0
    compile_rules = ws_module._compile

    def counted(lines):
        nonlocal compiled
        compiled += 1
        return compile_rules(lines)

    monkeypatch.setattr(ws_module, "_compile", counted)
    ws = workspace(tmp_path)
    assert ws.read(deep / "m.py") is None  # fail closed: the folder of those rules
    assert ws.read(tmp_path / "ok" / "b.py") is not None
    assert ws.read(deep / "m.py") is None
    seen = compiled
    for _ in range(3):
        assert ws.read(deep / "m.py") is None
    assert compiled == seen  # the verdict is remembered until the file changes


LONG_A = "xa" * 60 + "a"  # a folder name with an `a` at every other character


@pytest.mark.parametrize(("rule", "folder", "ignored"), [
    # before: backtracked for minutes on the 80-character name
    ("*a" * 12 + "b", "a", {"a" * 30 + "b": True, "a" * 80 + ".py": False}),
    # before: 42 s with 14 segments (the interpreter lock held throughout)
    ("**/a/" * 16 + "zz", "a", {"zz": True, "a" * 80 + ".py": False}),
    # before: 36 s with 4 segments; it is anchored, so only six folders down matches
    ("*a*/" * 6 + "zz", LONG_A, {"zz": False, "a" * 80 + ".py": False, "6/zz": True}),
])
def test_rules_whose_backtracking_explodes_are_matched_exactly_and_at_once(
        rule: str, folder: str, ignored: dict[str, bool]) -> None:
    """Rules are matched in linear time (RE2): each is applied as git would, on a path 24
    folders deep, and the answer comes at once: a matching file is ignored, others are read."""
    done = run_isolated(f"""
        import tempfile
        from pathlib import Path
        from lsp_complete.workspace import Workspace
        root = Path(tempfile.mkdtemp())
        deep = root.joinpath(*[{folder!r}] * 24)
        six = root.joinpath(*[{folder!r}] * 6)
        deep.mkdir(parents=True)
        (root / ".gitignore").write_text({rule!r} + "\\n")
        ws = Workspace()
        ws.set_roots([root])
        for name in {list(ignored)!r}:
            path = six / name[2:] if name.startswith("6/") else deep / name
            path.write_text("X = 1\\n")
            print(ws.read(path) is None)
    """)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == [str(v) for v in ignored.values()]


def test_without_linear_matching_a_rule_with_many_wildcards_leaves_its_folder_unread() -> None:
    from lsp_complete.workspace import _tame

    assert _tame("**/*.py", linear=False) and _tame("build/**/*.o", linear=False)
    assert _tame("a/**/**/**/b/*.c", linear=False)  # a run of `**` is one
    assert not _tame("**/a/**/a/**/a/**/zz", linear=False)
    assert not _tame("*a*/*a*/zz", linear=False)
    assert _tame("*a*/*a*/zz", linear=True) and not _tame("x" * 300, linear=True)


def test_non_utf8_and_invalid_patterns_are_skipped_not_fatal(tmp_path: Path) -> None:
    (tmp_path / ".gitignore").write_bytes(b"\xff\xfe junk\n[z-a]\n!\nsecret.py\n")
    (tmp_path / "secret.py").write_text("KEY = 1\n")
    (tmp_path / "a.py").write_text("A = 1\n")
    ws = workspace(tmp_path)
    assert ws.read(tmp_path / "secret.py") is None
    assert ws.read(tmp_path / "a.py") is not None


def test_files_that_are_not_regular_or_too_deep_are_not_read(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "fifo.py")
    deep = tmp_path.joinpath(*["d"] * 40)
    deep.mkdir(parents=True)
    (deep / "x.py").write_text("X = 1\n")
    ws = workspace(tmp_path)
    answered, source = read_in_thread(ws, tmp_path / "fifo.py")
    assert answered and source is None
    assert ws.read(deep / "x.py") is None and not ws.is_file(deep / "x.py")


# --------------------------------------------------------------------------- the server


async def test_the_server_answers_and_builds_repository_context_beside_a_fifo_gitignore(
        tmp_path: Path, tiny_model_path: Path) -> None:
    """Before: the first repository context read the FIFO on the worker; no completion was
    answered again, in any file."""
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg/__init__.py").write_text("")
    (tmp_path / "pkg/b.py").write_text("def helper(x, y=2):\n    return x + y\n")
    text = "from .b import helper\n\n\ndef main():\n    value = 1\n    \n"
    (tmp_path / "pkg/a.py").write_text(text)
    fifo = tmp_path / ".gitignore"
    os.mkfifo(fifo)
    client = await start_server(tiny_model_path, {"repoContextTokens": 256, "maxTokens": 4},
                                workspace_folders=[tmp_path.as_uri()])
    try:
        uri = (tmp_path / "pkg/a.py").as_uri()
        open_doc(client, uri, text)
        # answered at once; the idle moment after this request computes the repository block
        await asyncio.wait_for(inline(client, uri, 5, 4), ANSWER_S)

        def with_block(st: dict[str, Any]) -> bool:
            return any(d["uri"] == uri and d["repoContext"] for d in st.get("documents", []))

        st = await asyncio.wait_for(poll_status(client, with_block, ANSWER_S), ANSWER_S + 10)
        block = next(d["repoContext"] for d in st["documents"] if d["uri"] == uri)
        assert block and [f["path"] for f in block["files"]] == ["pkg/b.py"]
        other = (tmp_path / "pkg/other.py").as_uri()
        open_doc(client, other, "import os\n\nx = os.")
        for at in ((uri, 5, 4), (other, 2, 7)):
            await asyncio.wait_for(inline(client, *at), ANSWER_S)  # answered, in every file
    finally:
        unblock_fifo(fifo)
        with contextlib.suppress(Exception):
            await asyncio.wait_for(client.shutdown_session(), 10)


# --------------------------------------------------------------------------- roots


def folders(base: Path, count: int) -> list[Path]:
    made = [base / f"d{i}" for i in range(count)]
    for folder in made:
        folder.mkdir()
    return made


def test_thousands_of_roots_are_all_kept_and_not_resolved_again(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Before: resolving the roots was quadratic (`in` on a list); 4,001 folders ran past the
    I/O thread's deadline and the workspace was left with no root at all. And adding one root
    resolved every root again."""
    from lsp_complete import workspace as ws_module

    given = folders(tmp_path, 5000)
    ws = Workspace()
    ws.set_roots([*given, given[0], tmp_path / "missing"])  # a repeat, and no folder
    assert ws.roots == tuple(given)
    resolved: list[Path] = []
    real = ws_module._real
    monkeypatch.setattr(ws_module, "_real", lambda path: resolved.append(path) or real(path))
    (tmp_path / "extra").mkdir()
    ws.add_root(tmp_path / "extra")
    assert ws.roots == (*given, tmp_path / "extra")
    assert resolved == [tmp_path / "extra"]  # the roots kept are not resolved again
    ws.change_roots(added=[tmp_path / "d7"], removed=[tmp_path / "d3"])
    assert len(ws.roots) == 5000 and given[3] not in ws.roots and given[7] in ws.roots
    assert ws.root_of(given[4999] / "a.py") == given[4999]


def test_roots_past_the_deadline_are_dropped_with_a_warning_and_the_rest_kept(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    """A slow disk: what is resolved in time is kept, the rest dropped and said (before: every
    root was dropped, silently)."""
    from lsp_complete import workspace as ws_module

    given = folders(tmp_path, 200)
    folder = ws_module._folder

    def slow(path: Path) -> Path | None:
        time.sleep(0.005)
        return folder(path)

    monkeypatch.setattr(ws_module, "_folder", slow)
    monkeypatch.setattr(ws_module, "RESOLVE_ROOTS_S", 0.1)
    ws = Workspace()
    with caplog.at_level(logging.WARNING, logger="lsp_complete.workspace"):
        ws.set_roots(given)
    kept = len(ws.roots)
    assert 0 < kept < 200 and ws.roots == tuple(given[:kept])
    assert f"{200 - kept} of 200 folders" in caplog.text
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="lsp_complete.workspace"):
        ws.change_roots(added=[tmp_path], removed=[given[0]])
    assert ws.roots == (*given[1:kept], tmp_path) and not caplog.text


def test_a_disk_that_does_not_answer_leaves_the_roots_as_they_were(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    from lsp_complete import workspace as ws_module

    first, second, third = folders(tmp_path, 3)
    ws = Workspace()
    ws.set_roots([first])
    released = threading.Event()
    folder = ws_module._folder
    monkeypatch.setattr(ws_module, "_folder", lambda path: released.wait(10) and folder(path))
    monkeypatch.setattr(ws_module, "io_call", functools.partial(ws_module.io_call, timeout_s=0.2))
    try:
        with caplog.at_level(logging.WARNING, logger="lsp_complete.workspace"):
            ws.set_roots([second])
            assert ws.roots == (first,)
            assert "1 of 1 folders were not resolved" in caplog.text
            ws.change_roots(added=[third])
            assert ws.roots == (first,)
            assert "1 of 1 folders added were not resolved" in caplog.text
    finally:
        released.set()


def test_roots_past_the_cap_are_cut_with_a_warning(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    from lsp_complete import workspace as ws_module

    monkeypatch.setattr(ws_module, "MAX_ROOTS", 3)
    given = folders(tmp_path, 5)
    ws = Workspace()
    with caplog.at_level(logging.WARNING, logger="lsp_complete.workspace"):
        ws.set_roots(given)
        assert ws.roots == tuple(given[:3]) and "5 folders; only the first 3" in caplog.text
        ws.change_roots(added=given[3:], removed=[given[0]])
    assert ws.roots == (*given[1:3], given[3])
