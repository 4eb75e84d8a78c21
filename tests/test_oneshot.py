"""`lsp-complete complete FILE:LINE:COL`: one completion, and one clear error per bad input."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "lsp_complete", "complete", *args],
        capture_output=True, text=True, timeout=120,
    )


@pytest.fixture
def source(tmp_path: Path) -> Path:
    path = tmp_path / "count.py"
    path.write_text("def count(path):\n    for line in read_li\n")
    return path


def test_prints_the_line_with_its_completion_and_timing(source, tiny_model_path) -> None:
    proc = run(f"{source}:2:24", "--model", str(tiny_model_path), "--threads", "1")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[1].startswith("    for line in read_li")
    assert "prompt" in proc.stderr and "generated" in proc.stderr and " ms" in proc.stderr


@pytest.mark.parametrize(("name", "language"), [("Util.kt", "kotlin"), ("base.rb", "ruby"),
                                                ("count.py", "python"), ("notes", "plaintext")])
def test_the_file_is_read_as_its_extensions_language(tmp_path, tiny_model_path, name,
                                                     language) -> None:
    # Before: only languages with a grammar were named; Kotlin or Ruby went as plaintext
    # (post-processing found the language by the extension; the code context did not).
    path = tmp_path / name
    path.write_text("val x = 1\n")
    proc = run(f"{path}:1:5", "--model", str(tiny_model_path), "--threads", "1")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[0].endswith(f"  {language}, model tiny")


@pytest.mark.parametrize(
    ("location", "message"),
    [
        ("{src}:9:1", "line 9 is outside the file"),
        ("{src}:2:99", "column 99 is outside the line"),
        ("{src}:two:1", "expected FILE:LINE:COL"),
        ("{missing}:1:1", "no such file"),
        ("{latin1}:1:1", "not UTF-8"),
        ("{binary}:1:1", "binary"),
        ("{fifo}:1:1", "not a regular file"),  # before: blocked forever
        ("/dev/zero:1:1", "not a regular file"),  # before: read until memory ran out
        ("{folder}:1:1", "not a regular file"),
        ("{huge}:1:1", "over the 4096 KiB limit"),
    ],
)
def test_bad_input_gets_one_clear_error(source, tiny_model_path, tmp_path, location, message):
    latin1 = tmp_path / "latin1.py"
    latin1.write_bytes("x = 'caf\xe9'\n".encode("latin-1"))
    binary = tmp_path / "blob.py"
    binary.write_bytes(b"\x00\x01\x02\x03" * 64)
    fifo = tmp_path / "pipe.py"
    if "{fifo}" in location:
        os.mkfifo(fifo)
    huge = tmp_path / "huge.py"
    huge.write_text("x = 1\n" * 800_000)  # 4.6 MiB
    where = location.format(src=source, missing=tmp_path / "nope.py", latin1=latin1,
                            binary=binary, fifo=fifo, folder=tmp_path, huge=huge)
    proc = run(where, "--model", str(tiny_model_path))
    assert proc.returncode == 1
    assert message in proc.stderr
    assert "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("model", ["no-such-model", "{tmp}/missing.gguf", "{tmp}/bad.gguf"])
def test_a_missing_or_broken_model_is_one_clear_error(source, tmp_path, model) -> None:
    (tmp_path / "bad.gguf").write_bytes(b"not a gguf at all")
    proc = run(f"{source}:2:24", "--model", model.format(tmp=tmp_path))
    assert proc.returncode == 1
    assert "Traceback" not in proc.stderr
    assert proc.stderr.startswith("lsp-complete: ")
