"""The first suggestion in files never seen before: large stdlib modules, each opened and asked
at once mid-way through a line, then the next two characters typed. Latency runs from didOpen
to the answer; line-exact says whether the suggestion completes the line as it was written.

This is what a user meets on opening a file: no KV cache, no idle time, so the server's small
first prompt (pipeline.cold_budget) and how it grows are what is measured.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lsp_complete.bench import lsp_driver
from lsp_complete.bench.records import Sample
from lsp_complete.bench.workload import _stdlib_dir, line_exact, make_open_case, read_source
from lsp_complete.testing.lsp_client import position_at

WORKLOAD = "coldfile"
KEYSTROKES = 3  # the first request, then two typed characters
MIN_LINES, MAX_LINES = 1500, 3500


@dataclass(frozen=True)
class ColdCase:
    path: str
    language_id: str
    text: str  # the file with its chosen line cut at `offset`
    offset: int
    line: str  # the chosen line as written
    typed: str  # the cut line's text before the cursor
    n_lines: int


def candidate_files() -> list[str]:
    """Top-level stdlib modules of MIN_LINES..MAX_LINES lines, by name."""
    found = []
    for path in sorted(_stdlib_dir().glob("*.py")):
        try:
            n = path.read_text(encoding="utf-8").count("\n")
        except (OSError, UnicodeDecodeError):
            continue
        if MIN_LINES <= n <= MAX_LINES:
            found.append(str(path))
    return found


def build_cases(count: int, seed: int, exclude: Sequence[str] = ()) -> list[ColdCase]:
    files = [f for f in candidate_files() if f not in set(exclude)]
    random.Random(f"coldfiles:{seed}").shuffle(files)
    cases = []
    for path in files[: max(count, 0)]:
        case = make_open_case(path)
        lines = read_source(path).text.split("\n")
        start = case.text.rfind("\n", 0, case.offset) + 1
        typed = case.text[start : case.offset]
        line = next(x for x in lines if x.startswith(typed) and x != typed) if typed else ""
        cases.append(ColdCase(path=case.path, language_id=case.language_id, text=case.text,
                              offset=case.offset, line=line, typed=typed, n_lines=case.n_lines))
    return cases


async def run_lsp(session: lsp_driver.Session, cases: Sequence[ColdCase],
                  on_case: Callable[[], Any] = lambda: None, workload: str = WORKLOAD,
                  side: str | None = None, engine: str = "d") -> list[Sample]:
    """Each case in `session`: open and ask at once, then type the line's next characters.
    `workload`, `side` and `engine` name the samples (an A/B run's scenario and side)."""
    samples: list[Sample] = []
    for case in cases:
        uri = Path(case.path).resolve().as_uri()
        text, offset, typed = case.text, case.offset, case.typed
        for index in range(KEYSTROKES):
            if index == 0:
                session.open(uri, case.language_id, text, 1)
            else:
                char = case.line[len(typed)] if len(typed) < len(case.line) else " "
                session.insert(uri, index + 1, position_at(text, offset), char)
                text, offset, typed = text[:offset] + char + text[offset:], offset + 1, typed + char
            c, error = await lsp_driver.ask(session, uri, index + 1, text, offset)
            samples.append(Sample.of(engine, workload, Path(case.path).name, index, c, error,
                                     line_exact=line_exact(typed, c.text, case.line), side=side))
        session.close(uri)
        on_case()
    return samples
