"""Command-line arguments: a bad value is refused by argparse with a clear one-line error and
exit status 2, never a traceback, and never accepted to fail later (`--max-message-bytes 0`
refused every message, initialize included; `--max-tokens -1` generated nothing and exited 0)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from lsp_complete import cli
from lsp_complete.demo import run_demo


def _parse_error(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    """argparse's error for `argv`: it exits with status 2 and prints usage and one line."""
    with pytest.raises(SystemExit) as info:
        cli._build_parser().parse_args(argv)
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return err


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["--log-level", "bogus", "models", "list"], "invalid choice: 'BOGUS'"),
        (["--log-level", "5", "models", "list"], "invalid choice: '5'"),
        (["serve", "--max-message-bytes", "0"], "--max-message-bytes: 0 is out of range"),
        (["serve", "--max-message-bytes", "-1"], "--max-message-bytes: -1 is out of range"),
        (["serve", "--max-message-bytes", "1000"], "at least 65536"),
        (["serve", "--max-message-bytes", "lots"], "not an integer: 'lots'"),
        (["serve", "--tcp", "-1"], "--tcp: -1 is out of range: from 0 to 65535"),
        (["serve", "--tcp", "99999"], "--tcp: 99999 is out of range"),
        (["complete", "a.py:1:1", "--max-tokens", "-1"], "--max-tokens: -1 is out of range"),
        (["complete", "a.py:1:1", "--max-tokens", "0"], "--max-tokens: 0 is out of range"),
        (["complete", "a.py:1:1", "--max-tokens", "100000"], "from 1 to 4096"),
        (["complete", "a.py:1:1", "--threads", "-3"], "--threads: -3 is out of range"),
        (["demo", "--lines", "-5"], "--lines: -5 is out of range: at least 1"),
        (["demo", "--lines", "0"], "--lines: 0 is out of range"),
        (["daemon", "run", "--idle-minutes", "-1"], "--idle-minutes: -1: minutes must be"),
        (["daemon", "run", "--idle-minutes", "nan"], "--idle-minutes: nan: minutes must be"),
        (["daemon", "run", "--idle-minutes", "inf"], "--idle-minutes: inf: minutes must be"),
    ],
)
def test_bad_numbers_and_levels_are_refused_by_argparse(
    argv: list[str], expected: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert expected in _parse_error(argv, capsys)


def test_log_level_error_lists_the_levels(capsys: pytest.CaptureFixture[str]) -> None:
    err = _parse_error(["--log-level", "bogus", "models", "list"], capsys)
    assert all(level in err for level in ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"))


def test_max_message_bytes_help_says_why_the_minimum(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit):
        cli._build_parser().parse_args(["serve", "--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    assert "at least 64 KiB, so that an editor's initialize request always fits" in help_text


@pytest.mark.parametrize(
    ("argv", "attr", "value"),
    [
        (["--log-level", "debug", "models", "list"], "log_level", "DEBUG"),
        (["--log-level", "Warn", "models", "list"], "log_level", "WARNING"),
        (["models", "list"], "log_level", "WARNING"),
        (["serve", "--max-message-bytes", "65536"], "max_message_bytes", 65536),
        (["serve"], "max_message_bytes", 32 * 1024 * 1024),
        (["serve", "--tcp", "0"], "tcp", 0),
        (["serve", "--tcp", "65535"], "tcp", 65535),
        (["complete", "a.py:1:1", "--max-tokens", "1"], "max_tokens", 1),
        (["complete", "a.py:1:1"], "max_tokens", 64),
        (["complete", "a.py:1:1", "--threads", "0"], "threads", 0),
        (["complete", "a.py:1:1", "--threads", "4"], "threads", 4),
        (["demo", "--lines", "1"], "lines", 1),
        (["daemon", "run", "--idle-minutes", "0"], "idle_minutes", 0.0),
        (["daemon", "run", "--idle-minutes", "2.5"], "idle_minutes", 2.5),
    ],
)
def test_good_values_still_parse(argv: list[str], attr: str, value: object) -> None:
    assert getattr(cli._build_parser().parse_args(argv), attr) == value


def _run_cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "LSP_COMPLETE_NO_DAEMON": "1", "LSP_COMPLETE_CACHE_DIR": str(cwd)}
    return subprocess.run(
        [sys.executable, "-m", "lsp_complete", *args], capture_output=True, text=True,
        timeout=60, cwd=cwd, env=env, stdin=subprocess.DEVNULL, check=False,
    )


def test_cli_bad_log_level_exits_2_without_traceback(tmp_path: Path) -> None:
    """It was a ValueError traceback from logging.basicConfig, exit status 1."""
    proc = _run_cli("--log-level", "bogus", "models", "list", cwd=tmp_path)
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr and "invalid choice: 'BOGUS'" in proc.stderr


def test_cli_serve_refuses_max_message_bytes_zero(tmp_path: Path) -> None:
    """It was accepted, and then the server refused every message, initialize included."""
    proc = _run_cli("serve", "--no-daemon", "--max-message-bytes", "0", cwd=tmp_path)
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr and "--max-message-bytes" in proc.stderr


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="a FIFO is POSIX")
def test_demo_file_problems_are_one_line_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A missing file or a folder was an uncaught FileNotFoundError / IsADirectoryError; a
    FIFO would have blocked. Each is said in one line before any server starts."""
    fifo = tmp_path / "typed.fifo"
    os.mkfifo(fifo)
    binary = tmp_path / "blob.py"
    binary.write_bytes(b"\xff\xfe\x00\x01" * 16)
    cases = {
        str(tmp_path / "missing.py"): "no such file",
        str(tmp_path): "not a regular file",
        str(fifo): "not a regular file",
        str(binary): "not UTF-8 text",
    }
    for path, expected in cases.items():
        assert run_demo(model="unused", file=path) == 1
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and err.startswith("lsp-complete demo: "), err
        assert path in err and expected in err


def test_cli_demo_missing_file_exits_1_without_traceback(tmp_path: Path) -> None:
    for path in (str(tmp_path / "nonexistent.py"), str(tmp_path)):
        proc = _run_cli("demo", "--file", path, cwd=tmp_path)
        assert proc.returncode == 1, proc.stderr
        assert "Traceback" not in proc.stderr
        assert proc.stderr.startswith("lsp-complete demo: ") and proc.stderr.count("\n") == 1
