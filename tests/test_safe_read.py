"""The one reader of workspace files (safe_read): regular files only, never a link followed,
bounded whatever size a file reports, checked where it lies once opened, and a deadline on
every filesystem call."""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any

import pytest

from lsp_complete import safe_read
from lsp_complete.safe_read import SOURCE, IoTimeout, ReadLimit, io_call, read_file

pytestmark = pytest.mark.skipif(os.name != "posix", reason="FIFOs, /dev/zero and O_NOFOLLOW")

ANSWER_S = 60


def test_the_reader_takes_regular_files_only(tmp_path: Path) -> None:
    (tmp_path / "ok.py").write_text("x = 1\n")
    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "link.py").symlink_to(tmp_path / "ok.py")
    (tmp_path / "folder").mkdir()
    ok = read_file(tmp_path / "ok.py", SOURCE)
    assert ok.data == b"x = 1\n" and ok.stamp is not None and ok.stamp[1] == 6
    for name in ("fifo", "link.py", "folder"):
        refused = read_file(tmp_path / name, SOURCE)  # a FIFO without writer: answered at once
        assert refused.data is None and refused.problem, name
    assert read_file(tmp_path / "absent.py", SOURCE).missing
    assert read_file(Path("/dev/zero"), SOURCE).data is None


def test_the_reader_is_bounded_whatever_size_a_file_reports(tmp_path: Path) -> None:
    sparse = tmp_path / "sparse.py"
    with open(sparse, "wb") as f:
        f.truncate(20 << 30)  # 20 GB of holes: refused by its size, nothing read
    assert "cap" in read_file(sparse, SOURCE).problem
    # /proc files report size 0 and stream: read to the cap, then refused.
    small = ReadLimit("test", 16)
    assert "cap" in read_file(Path("/proc/self/status"), small).problem


def test_the_reader_checks_where_the_opened_file_lies(tmp_path: Path) -> None:
    root, outside = tmp_path / "root", tmp_path / "outside"
    root.mkdir()
    outside.mkdir()
    (outside / "keys.py").write_text("KEY = 'hunter2'\n")
    # A folder swapped for a link after the caller resolved the path: the file opened is
    # outside the root, though the path names one inside.
    (root / "pkg").symlink_to(outside, target_is_directory=True)
    assert read_file(root / "pkg/keys.py", SOURCE, within=root.resolve()).data is None
    assert read_file(outside / "keys.py", SOURCE, within=outside.resolve()).data is not None


def test_a_stuck_filesystem_call_costs_its_deadline_then_fails_at_once() -> None:
    release = threading.Event()
    try:
        for _ in range(safe_read.IO_THREADS):
            with pytest.raises(IoTimeout):
                io_call(release.wait, timeout_s=1.0)
        with pytest.raises(IoTimeout, match="every I/O thread is stuck"):
            io_call(lambda: 1)
    finally:
        release.set()
    assert _eventually(lambda: _answers(lambda: 2) == 2)


def _answers(fn: Any) -> Any:
    try:
        return io_call(fn)
    except IoTimeout:
        return None


def _eventually(condition: Any, timeout: float = ANSWER_S) -> bool:
    done = threading.Event()
    deadline = threading.Timer(timeout, done.set)
    deadline.start()
    try:
        while not done.is_set():
            if condition():
                return True
            done.wait(0.05)
        return condition()
    finally:
        deadline.cancel()
