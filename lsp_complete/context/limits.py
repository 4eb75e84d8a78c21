"""The size limits of a prompt's context and the context it produces (plain data)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field


@dataclass(frozen=True)
class ContextLimits:
    before_lines: int = 60  # window before the anchor, in lines
    window_snap: int = 16  # the window start is snapped down to a multiple of this many lines
    suffix_lines: int = 20
    max_line_chars: int = 400  # longer lines are truncated in windows (huge/minified lines)
    head_max_chars: int = 1500
    middle_max_lines: int = 6  # re-anchor when the middle spans more lines than this
    middle_max_chars: int = 400


@dataclass(frozen=True)
class RepoFile:
    """One file of the repository block: an outline of definitions, or a similar snippet."""

    path: str  # relative to the workspace root, '/'-separated
    text: str
    source: str  # "definitions" | "similar" | "line" (what the cursor's line names)


@dataclass(frozen=True)
class RepoContext:
    """The repository block: other files of the workspace, shown before the current file.

    Two blocks with the same name, path and files give the same prompt tokens (`state`, what
    context/repo.py made it from, does not count).
    """

    name: str  # the repository (workspace root folder) name
    current_path: str  # the current file, relative to the root
    files: tuple[RepoFile, ...]
    state: object = field(default=None, compare=False, repr=False)
    # Made for a file's small first prompts too (`repo.line_definitions`): the others are
    # shown in the full-context prompt only.
    cold: bool = False


@dataclass(frozen=True)
class CodeContext:
    path: str
    language_id: str
    head: str  # imports + outline outside the window + enclosing headers; "" without a grammar
    before: str  # whole lines [window_start, anchor_line), each ending with "\n"
    suffix: str  # rest of the cursor line, then up to suffix_lines following lines
    middle: str  # text from the anchor to the cursor
    anchor: int  # code-point offset of the anchor
    # Other files of the repository, the first prompt segment; None: no repository context.
    repo: RepoContext | None = None


def cold_limits(limits: ContextLimits) -> ContextLimits:
    """Smaller windows for a file whose KV cache holds nothing useful yet: the cold window.

    A cold prompt with the full windows costs ~1,500 tokens (~5-10 s on 2 cores). This one
    (~250-400 tokens) is what a file climbs to within a few keystrokes after its first prompt,
    itself this window cut to what prefills quickly (`pipeline.planner`); the full
    context is encoded in idle time. Its `before` window is snapped to the grid as the full
    one's is, so a new line appends to it instead of shifting it (which would encode it all
    again).
    """
    return dataclasses.replace(
        limits,
        before_lines=min(limits.before_lines, 12),
        suffix_lines=min(limits.suffix_lines, 8),
        head_max_chars=min(limits.head_max_chars, 400),
    )
