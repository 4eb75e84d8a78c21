"""The model's rewritten window against the current one: the smallest single replacement
that covers every change (common prefix and suffix trimmed), in offsets of the window.
Pure; the server maps it to an LSP range at the document's version."""

from __future__ import annotations

import os
from dataclasses import dataclass


@dataclass(frozen=True)
class Replacement:
    """Characters [start, end) of the old text become `text`."""

    start: int
    end: int
    text: str


def smallest_replacement(old: str, new: str) -> Replacement | None:
    """None when the texts are the same ("nothing to change")."""
    if old == new:
        return None
    prefix = len(os.path.commonprefix([old, new]))
    # The suffix may not reach into the common prefix of either text.
    limit = min(len(old), len(new)) - prefix
    suffix = 0
    while suffix < limit and old[-1 - suffix] == new[-1 - suffix]:
        suffix += 1
    return Replacement(prefix, len(old) - suffix, new[prefix:len(new) - suffix])
