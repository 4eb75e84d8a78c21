"""Load beside the server under test: what a build does to the machine while a user types."""

from __future__ import annotations

import contextlib
import subprocess
import sys
from collections.abc import Iterator

# A pure-Python loop: one core fully busy, no memory traffic to speak of, at normal priority
# (as a compiler runs), and nothing to clean up but the process.
_BURN = "while True: pass"


@contextlib.contextmanager
def cpu_bound_process(active: bool = True) -> Iterator[None]:
    """One CPU-bound process for the duration of the block (none when not `active`)."""
    if not active:
        yield
        return
    process = subprocess.Popen([sys.executable, "-c", _BURN], stdin=subprocess.DEVNULL)
    try:
        yield
    finally:
        process.kill()
        process.wait()
