"""Records shared by the engines, the workloads and the report."""

from __future__ import annotations

import contextlib
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol


class AtCursor:
    """A bench task's document, with the cursor between `prefix` and `suffix` (the task's
    dataclass declares them)."""

    prefix: str
    suffix: str

    @property
    def text(self) -> str:
        return self.prefix + self.suffix

    @property
    def offset(self) -> int:
        return len(self.prefix)


@dataclass
class Completion:
    """One engine answer: the text to insert at the cursor and what it cost."""

    text: str
    latency_ms: float
    prompt_tokens: int | None = None
    encoded_tokens: int | None = None
    generated_tokens: int | None = None
    source: str = "model"  # model | typeahead | superseded | empty (as the server reports it)


@dataclass
class Sample:
    """One measured request; `ab-samples.json` holds them by unit."""

    engine: str  # what answered: a | b | c (the stateless baselines) | d (lsp-complete)
    workload: str  # the scenario
    case: str  # span name, HumanEval task id + line, file name or large-file phase
    index: int  # keystroke index within the episode (0 for single requests)
    latency_ms: float
    suggestion: str
    prompt_tokens: int | None = None
    encoded_tokens: int | None = None
    generated_tokens: int | None = None
    source: str = "model"
    line_exact: bool | None = None
    exact_match: bool | None = None
    passed: bool | None = None
    fresh: bool | None = None  # still the newest keystroke when the answer came
    extra: dict[str, Any] = field(default_factory=dict)
    # The side that served it, its key (B: the candidate; A, or A1, A2, ... with several
    # baselines; a variant's model/mode).
    side: str | None = None

    @classmethod
    def of(cls, engine: str, workload: str, case: str, index: int, c: Completion,
           error: str | None = None, **kw: Any) -> Sample:
        """The sample of one answer `c` (its request's `error` kept in `extra`); `kw` sets the
        quality fields and `extra`."""
        if error:
            kw["extra"] = {**kw.get("extra", {}), "error": error}
        return cls(engine=engine, workload=workload, case=case, index=index,
                   latency_ms=c.latency_ms, suggestion=c.text, prompt_tokens=c.prompt_tokens,
                   encoded_tokens=c.encoded_tokens, generated_tokens=c.generated_tokens,
                   source=c.source, **kw)


class StatelessEngine(Protocol):
    """An engine that sees the whole document on every request (baselines a, b, c)."""

    def complete(self, text: str, offset: int, path: str) -> Completion: ...

    def peak_rss_mb(self) -> float | None: ...

    def close(self) -> None: ...


# --- peak memory -------------------------------------------------------------------------------


def read_hwm_mb(pid: int | str = "self") -> float | None:
    """Peak resident set size (VmHWM) of a process, in MiB; None where /proc is missing."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    match = re.search(r"VmHWM:\s+(\d+)\s+kB", status)
    return int(match.group(1)) / 1024 if match else None


def read_cpu_s(pid: int | str = "self") -> float | None:
    """CPU seconds a process has used so far, user and system (its threads included: the
    inference threads too); None where /proc is missing."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # Fields after the command name (which may hold spaces): state is the 3rd field of the
    # line, utime and stime the 14th and 15th, in clock ticks.
    fields = stat[stat.rindex(")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def reset_hwm() -> None:
    """Reset this process's peak RSS so each in-process engine gets its own peak (Linux >= 4.0)."""
    with contextlib.suppress(OSError):
        Path("/proc/self/clear_refs").write_text("5")
