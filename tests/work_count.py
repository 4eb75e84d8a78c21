"""What a piece of code does, counted rather than timed (CI shares its cores): the lines of
Python it runs in the files that matter, and the most memory it allocates at once."""

from __future__ import annotations

import sys
import tracemalloc
from collections.abc import Callable
from dataclasses import dataclass
from types import FrameType
from typing import Any, Generic, TypeVar

T = TypeVar("T")


@dataclass(frozen=True)
class Work(Generic[T]):
    result: T
    lines: int  # lines run in the files counted
    peak: int  # bytes allocated at most at once (numpy's arrays included)


def work_of(step: Callable[[], T], counted: Callable[[str], bool]) -> Work[T]:
    """Run `step()`, counting the lines it runs in the files whose names `counted` accepts."""
    lines = 0

    def count(frame: FrameType, event: str, arg: object) -> Any:
        nonlocal lines
        if event == "line":
            lines += 1
        return count

    def trace(frame: FrameType, event: str, arg: object) -> Any:
        return count if counted(frame.f_code.co_filename) else None

    previous = sys.gettrace()
    tracemalloc.start()
    sys.settrace(trace)
    try:
        result = step()
    finally:
        sys.settrace(previous)
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    return Work(result, lines, peak)
