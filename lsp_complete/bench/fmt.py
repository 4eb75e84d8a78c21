"""How every bench report writes its numbers and tables (report.md, ab-report.md)."""

from __future__ import annotations

import math
from collections.abc import Sequence


def ms(value: float | None) -> str:
    if value is None:
        return "n/a"
    return f"{value:,.0f} ms" if value >= 10 else f"{value:.1f} ms"


def num(value: float | None, digits: int = 0) -> str:
    return "n/a" if value is None else f"{value:,.{digits}f}"


def pct(value: float | None) -> str:
    return "n/a" if value is None else f"{value * 100:.1f}%"


def of(share: float | None, hits: int, n: int) -> str:
    """A share with what it counts: "66.7% (2/3)"."""
    return "n/a" if share is None else f"{pct(share)} ({hits}/{n})"


def mb(value: float | None) -> str:
    return "n/a" if value is None else f"{value:,.0f} MiB"


def x(value: float | None) -> str:
    """A ratio: "0.62x" ("inf" for anything over nothing)."""
    if value is None:
        return "n/a"
    return "inf" if math.isinf(value) else f"{value:.2f}x"


def x_ci(value: float | None, ci: Sequence[float | None] | None) -> str:
    """A ratio and its 95% interval: "0.62x (0.55x - 0.70x)"."""
    low, high = ci or (None, None)
    return x(value) if low is None or high is None else f"{x(value)} ({x(low)} - {x(high)})"


def value(v: float | None, unit: str) -> str:
    """A measure's value in its unit: ms, share, s, MiB, else a plain number."""
    if unit == "ms":
        return ms(v)
    if unit == "share":
        return pct(v)
    if unit == "MiB":
        return mb(v)
    if v is None:
        return "n/a"
    return f"{v:.3f} s" if unit == "s" else f"{v:.2f}"


def table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    """A markdown table, then an empty line."""
    lines = ["| " + " | ".join(header) + " |", "| " + " | ".join("---" for _ in header) + " |"]
    return lines + ["| " + " | ".join(row) + " |" for row in rows] + [""]
