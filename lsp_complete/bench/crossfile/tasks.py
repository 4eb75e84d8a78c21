"""What every cross-file task is, however it was found: the task, its scores, and how tasks
are spread over packages (python.py and javascript.py find them, engines.py runs them)."""

from __future__ import annotations

import random
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from lsp_complete.bench.records import AtCursor

MAX_PER_MODULE = 2
PACKAGES_WANTED = 12  # tasks are spread over about this many packages
MIN_LINES, MAX_LINES = 40, 4000  # a module A of fewer or more lines gives no task
DEFINITION_LINES = 60  # an oracle definition is cut to this many lines
IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


@dataclass(frozen=True)
class CrossFileTask(AtCursor):
    name: str  # "package/module.py:line"
    package: str  # the package's dotted name
    root: str  # the folder holding the package (the workspace root)
    path: str  # module A
    imported_path: str  # module B
    prefix: str  # A's text up to the cursor
    suffix: str  # A's text after the removed rest of the line (starts with "\n")
    target: str  # the rest of the line
    needed: tuple[str, ...]  # identifiers B defines, in `target`, never before the cursor
    definition: str  # B's source of what the line needs (the oracle's context)
    language: str = "python"  # A's and B's language id (javascript.py: javascript, typescript)

    def relative(self, path: str) -> str:
        return Path(path).relative_to(self.root).as_posix()

    def oracle_context(self, file_sep: str | None, repo_name: str | None,
                       comment_prefix: str) -> tuple[str, bool]:
        """What the oracle is given before the PSM prompt, B's definition of what the line
        needs: (text, whether it holds the template's special markers). In the template's
        repository format when it has one, else as a commented block."""
        if file_sep:
            package = self.relative(self.path).split("/", 1)[0] \
                if self.language == "python" else Path(self.root).name
            repo = f"{repo_name}{package}\n" if repo_name else ""
            return (f"{repo}{file_sep}{self.relative(self.imported_path)}\n{self.definition}\n"
                    f"{file_sep}{self.relative(self.path)}\n"), True
        lines = "".join(f"{comment_prefix} {line}".rstrip() + "\n"
                        for line in self.definition.split("\n"))
        return f"{comment_prefix} Path: {self.relative(self.imported_path)}\n{lines}\n", False


# ---------------------------------------------------------------------- scores

def levenshtein(a: str, b: str) -> int:
    if len(a) < len(b):
        a, b = b, a
    previous = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        current = [i]
        for j, cb in enumerate(b, 1):
            current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (ca != cb)))
        previous = current
    return previous[-1]


def score(task: CrossFileTask, suggestion: str) -> dict[str, float]:
    line = suggestion.split("\n", 1)[0].rstrip()
    target = task.target.rstrip()
    longest = max(len(line), len(target))
    similarity = 1.0 - levenshtein(line, target) / longest if longest else 1.0
    produced = set(IDENT.findall(line))
    needed = sum(1 for n in task.needed if n in produced) / len(task.needed)
    return {"em": float(line.strip() == target.strip()), "needed": needed, "es": similarity}


def spread(n: int, rng: random.Random, per_package: int,
           packages: Iterable[Iterable[list[CrossFileTask]]]) -> list[CrossFileTask]:
    """About `per_package` tasks from each package in turn (MAX_PER_MODULE from each of its
    modules) until there are `n`. A package is its modules' task lists, found only when it is
    reached: packages after the last one needed are never read."""
    chosen: list[CrossFileTask] = []
    for modules in packages:
        found: list[CrossFileTask] = []
        for tasks in modules:
            rng.shuffle(tasks)
            found += tasks[:MAX_PER_MODULE]
        rng.shuffle(found)
        chosen += found[:per_package]
        if len(chosen) >= n:
            break
    return chosen[:n]
