"""One suggestion, start to finish: context -> prompt -> engine -> postprocess.

- `prepare.py` runs where the document lives (the server's event loop: it reads the text and
  the tree): `prepare`, `fresh_anchor`. The server reaches the document's
  context only through these.
- `planner.py` decides when a file's prompt is encoded, cut or switched: which prompt a
  keystroke uses, which idle work follows each event of a file and what it encodes, when a
  repository block changes.
- `completer.py` runs on the worker thread (tokenizing and inference): `Completer.run` for one
  suggestion, its alternatives, and idle work's entry points.

Both the server and the one-shot `complete` command use this, so they give the same
suggestion for the same position.
"""

from lsp_complete.pipeline.completer import (
    MAX_LINES,
    Completer,
    Completion,
    block_wanted,
    load_completer,
)
from lsp_complete.pipeline.next_edit import NextEditAnswer
from lsp_complete.pipeline.planner import (
    FULL_PROMPT_SLACK,
    FilePlan,
    IdleStep,
    PromptPlanner,
    Switch,
    after_answer,
    after_cursor_move,
    after_open,
    after_repository_change,
    cold_budget,
    wants_line_block,
    with_repo,
)
from lsp_complete.pipeline.prepare import Prepared, fresh_anchor, prepare, replaced_after_cursor

__all__ = [
    "FULL_PROMPT_SLACK",
    "MAX_LINES",
    "Completer",
    "Completion",
    "FilePlan",
    "NextEditAnswer",
    "block_wanted",
    "IdleStep",
    "PromptPlanner",
    "Prepared",
    "Switch",
    "after_answer",
    "after_cursor_move",
    "after_open",
    "after_repository_change",
    "cold_budget",
    "fresh_anchor",
    "load_completer",
    "prepare",
    "replaced_after_cursor",
    "wants_line_block",
    "with_repo",
]
