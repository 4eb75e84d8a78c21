"""One next-edit suggestion on the worker thread: prompt (nextedit/prompt.py) -> engine ->
the rewritten window read back and guarded -> shown only if it follows from the recent
edits (nextedit/relevance.py) -> the smallest replacement in the window.

The engine is asked under one key of its own (`NEXT_EDIT_KEY`), for every file: the
next-edit prompt shares nothing with a file's FIM prompt, so in the file's sequence it would
throw away what the next keystroke reuses (and `aside` generation, which leaves it alone, has
no speculation); in its own sequence the instruction and the history stay cached from one
request to the next, prompt-lookup speculation drafts the copied window from the prompt, and
it takes one of the engine's `slots`, not one per edited file.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from lsp_complete.config import SpeculationMode
from lsp_complete.engine.base import CancelToken, Engine, GenerationRequest, GenerationResult
from lsp_complete.models import NextEditTemplate
from lsp_complete.nextedit.diff import Replacement, smallest_replacement
from lsp_complete.nextedit.history import EditBlock
from lsp_complete.nextedit.prompt import NextEditPrompt, Window, parse_answer, render
from lsp_complete.nextedit.relevance import follows_from
from lsp_complete.prompt import SegmentTokenizer

# The rewrite copies the window: its tokens, and room for an edit that adds a few lines.
EXTRA_TOKENS = 96
MAX_TOKENS = 1024


# Printable, in a scheme of ours that no document has: the status lists the engine's sequences
# by key, and some clients' JSON readers (Emacs') refuse a whole message holding a NUL.
NEXT_EDIT_KEY = "lsp-complete:next-edit"


@dataclass
class NextEditAnswer:
    replacement: Replacement | None  # None: nothing to change (or nothing to trust)
    outcome: str  # edit | same | rejected | unrelated | cancelled | error
    result: GenerationResult | None = None
    latency_ms: float = 0.0
    prompt_tokens: int = 0
    error: str = ""
    raw: str = field(default="", repr=False)


def suggest_next_edit(engine: Engine, tokenize: SegmentTokenizer, template: NextEditTemplate,
                      stop: tuple[str, ...], speculation: SpeculationMode, window: Window,
                      history: list[EditBlock], cancel: CancelToken) -> NextEditAnswer:
    started = time.perf_counter()
    prompt = render(template, window, history, stop)
    segments = [[t for text, special in part for t in tokenize(text, special=special)]
                for part in prompt.parts]
    window_tokens = len(tokenize(window.shown))
    request = GenerationRequest(
        key=NEXT_EDIT_KEY, segments=[s for s in segments if s], single_line=False,
        max_tokens=min(MAX_TOKENS, window_tokens + EXTRA_TOKENS), stop=prompt.stop,
        speculation=speculation,
    )
    result = engine.complete(request, cancel)
    answer = NextEditAnswer(None, "cancelled", result, prompt_tokens=len(request.tokens),
                            raw=result.text)
    if not cancel.cancelled:
        finished = result.stop_reason in ("eog", "stop")
        rewritten = parse_answer(template, result.text, finished, window.shown)
        if rewritten is None:
            answer.outcome = "rejected"
        elif (after := window.in_text(rewritten)) == window.text:
            answer.outcome = "same"
        elif not follows_from(history, window.text, after):
            answer.outcome = "unrelated"
        else:
            answer.replacement = smallest_replacement(window.text, after)
            answer.outcome = "edit"
    answer.latency_ms = (time.perf_counter() - started) * 1000
    return answer


__all__ = ["NEXT_EDIT_KEY", "NextEditAnswer", "NextEditPrompt", "suggest_next_edit"]
