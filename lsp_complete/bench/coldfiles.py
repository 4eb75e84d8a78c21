"""The first suggestion in files never seen before: large stdlib modules, each opened and asked
at once mid-way through a line, then the next two characters typed. Latency runs from didOpen
to the answer; line-exact says whether the suggestion completes the line as it was written.

This is what a user meets on opening a file: no KV cache, no idle time, so the server's small
first prompt (pipeline.cold_budget) and how it grows are what is measured.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from lsp_complete.bench import lsp_driver
from lsp_complete.bench.records import Sample
from lsp_complete.bench.workload import OpenCase, _stdlib_dir, line_exact, make_open_case
from lsp_complete.testing.lsp_client import position_at

KEYSTROKES = 3  # the first request, then two typed characters
MIN_LINES, MAX_LINES = 1500, 3500


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


def build_cases(count: int, seed: int, exclude: Sequence[str] = ()) -> list[OpenCase]:
    files = [f for f in candidate_files() if f not in set(exclude)]
    random.Random(f"coldfiles:{seed}").shuffle(files)
    return [make_open_case(path) for path in files[: max(count, 0)]]


def type_next_char(session: lsp_driver.Session, uri: str, version: int,
                   case: OpenCase) -> OpenCase:
    """Type the line's next character at the case's cursor (the document then at `version`):
    the case as it is then."""
    at, char = case.offset, case.next_char
    session.insert(uri, version, position_at(case.text, at), char)
    return replace(case, text=case.text[:at] + char + case.text[at:], offset=at + 1)


async def run_lsp(session: lsp_driver.Session, case: OpenCase, *, workload: str, side: str,
                  engine: str) -> list[Sample]:
    """Open the case's file in `session` and ask at once, then type the line's next
    characters. `workload`, `side` and `engine` name the samples (an A/B run's scenario and
    side)."""
    samples: list[Sample] = []
    uri = Path(case.path).resolve().as_uri()
    for index in range(KEYSTROKES):
        if index == 0:
            session.open(uri, case.language_id, case.text, 1)
        else:
            case = type_next_char(session, uri, index + 1, case)
        c, error = await lsp_driver.ask(session, uri, index + 1, case.text, case.offset)
        samples.append(Sample.of(engine, workload, Path(case.path).name, index, c, error,
                                 line_exact=line_exact(case.typed, c.text, case.line),
                                 side=side))
    session.close(uri)
    return samples

