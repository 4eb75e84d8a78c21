"""The stop rules over a stream of generated text, the one copy every engine applies.

An engine decodes or receives text piece by piece and feeds it here; the rules say when the
suggestion ends and cut the text there. In order: a stop string (cut before it, or after it
for the request's `kept_stops`), the pipeline's `abandon` verdict, a newline in a
single-line suggestion, and, when a multi-line suggestion completes a line, the pipeline's
`line_check` and then the time budget (`deadline`). Stop strings and newlines count only
after the healed characters, which the output starts with.

What depends on how text is made stays in the engines: the local engine's healing constraint,
end-of-generation tokens, `max_tokens` and cancellation; a server's own stop events.
"""

from __future__ import annotations

import time

from lsp_complete.engine.base import GenerationRequest, StopReason


class TextRules:
    """The text generated so far (`text`, starting with the healed characters) and the rules'
    state for one request."""

    def __init__(self, request: GenerationRequest, text: str = "") -> None:
        self.request = request
        self.text = text
        self._lines_done = 0

    def feed(self, piece: str) -> StopReason | None:
        """Add generated text (reported to `on_text`); returns the stop reason ("stop",
        "abandoned", "newline", "budget") when generation should end here, else None."""
        req = self.request
        self.text += piece
        if req.on_text is not None:
            req.on_text(self.text)
        skip = len(req.heal)
        produced = self.text[skip:] if len(self.text) >= skip else ""
        stop_at = first_stop(produced, req.stop)
        kept_at = first_stop(produced, req.kept_stops)
        if kept_at is not None and (stop_at is None or kept_at < stop_at):
            ends = [kept_at + len(s) for s in req.kept_stops if produced.startswith(s, kept_at)]
            self.text = self.text[: skip + max(ends)]
            return "stop"
        if stop_at is not None:
            self.text = self.text[: skip + stop_at]
            return "stop"
        if req.abandon is not None and req.abandon(produced):
            self.text = self.text[:skip]
            return "abandoned"
        if "\n" in produced:
            if req.single_line:
                self.text = self.text[: skip + produced.index("\n")]
                return "newline"
            new_lines = produced.count("\n")
            if new_lines > self._lines_done:
                self._lines_done = new_lines
                if req.line_check is not None and req.line_check(produced):
                    return "stop"
                if req.deadline is not None and time.monotonic() > req.deadline:
                    return "budget"
        return None

    @property
    def produced_any(self) -> bool:
        return len(self.text) > len(self.request.heal)

    def keep_whole_lines(self) -> None:
        """Cut what follows the last complete line (a stream cut short: never half a word)."""
        skip = len(self.request.heal)
        produced = self.text[skip:]
        self.text = self.text[: skip + max(0, produced.rfind("\n"))]


def first_stop(text: str, stops: tuple[str, ...]) -> int | None:
    """Where the earliest stop string starts in `text`, or None."""
    positions = [i for s in stops if s and (i := text.find(s)) >= 0]
    return min(positions) if positions else None
