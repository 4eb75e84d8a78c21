"""How every bench report writes its numbers and tables (ab-report.md, nextedit-report.md)."""

from __future__ import annotations

import math
from collections.abc import Sequence


def num(value: float | None) -> str:
    return "n/a" if value is None else f"{value:,.0f}"


def value(v: float | None, unit: str) -> str:
    """A measure's value in its unit: ms, share, s, MiB, x (a ratio: "0.62x", "inf" for
    anything over nothing), else a plain number."""
    if v is None:
        return "n/a"
    if unit == "x":
        return "inf" if math.isinf(v) else f"{v:.2f}x"
    if unit == "ms":
        return f"{v:,.0f} ms" if v >= 10 else f"{v:.1f} ms"
    if unit == "share":
        return f"{v * 100:.1f}%"
    if unit == "MiB":
        return f"{v:,.0f} MiB"
    return f"{v:.3f} s" if unit == "s" else f"{v:.2f}"


def table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    """A markdown table."""
    lines = ["| " + " | ".join(header) + " |", "| " + " | ".join("---" for _ in header) + " |"]
    return lines + ["| " + " | ".join(row) + " |" for row in rows]
