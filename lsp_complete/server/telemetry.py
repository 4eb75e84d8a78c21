"""Telemetry: what became of each request, the counters (suggestions shown and accepted...),
and latency percentiles, for the `lsp-complete/status` answer (status.py)."""

from __future__ import annotations

import time
import uuid
from collections import deque
from dataclasses import dataclass
from typing import Any

from lsp_complete.engine.base import GenerationResult
from lsp_complete.pipeline import Completion

RECENT_LIMIT = 2000
_SUGGESTIONS_KEPT = 256  # suggestions whose acceptance is still counted


@dataclass
class RequestRecord:
    uri: str
    version: int
    latency_ms: float
    # model | typeahead | superseded | empty | not-ready | cancelled | next-edit:<outcome>
    source: str
    prompt_tokens: int = 0
    reused_tokens: int = 0
    encoded_tokens: int = 0
    generated_tokens: int = 0
    generate_ms: float = 0.0  # the engine's time generating (after the prompt): ms per token
    # Speculation: decodes that verified a draft, draft tokens verified, accepted.
    verify_steps: int = 0
    draft_tokens: int = 0
    accepted_tokens: int = 0

    def as_json(self) -> dict[str, Any]:
        return {
            "uri": self.uri,
            "version": self.version,
            "latencyMs": round(self.latency_ms, 2),
            "source": self.source,
            "promptTokens": self.prompt_tokens,
            "reusedTokens": self.reused_tokens,
            "encodedTokens": self.encoded_tokens,
            "generatedTokens": self.generated_tokens,
            "generateMs": round(self.generate_ms, 2),
            "verifySteps": self.verify_steps,
            "draftTokens": self.draft_tokens,
            "acceptedTokens": self.accepted_tokens,
        }


class Telemetry:
    """The recent requests and the counters the status reports."""

    def __init__(self) -> None:
        self.recent: deque[RequestRecord] = deque(maxlen=RECENT_LIMIT)
        # The engine failure this server's own work met last ("" once it works again).
        self.last_error = ""
        self.counters = {
            "shown": 0, "accepted": 0, "typeahead": 0, "joined": 0, "superseded": 0, "empty": 0,
            "cursorMoves": 0, "alternativesShown": 0, "blocks": 0,
            # Keys typed on into the next line, answered from the block being written.
            "blockLines": 0,
            # Keystrokes answered from a smaller prompt answered again from a richer one, and
            # of those, the ones whose suggestion changed.
            "refined": 0, "refinedChanged": 0,
            # Fresh answers not shown: the model was unsure of their first line.
            "heldBack": 0,
            # Next edits: computed (each answer of the model, or the last edit made again
            # without it: nextEditRepeated), what the model's came to (an edit, nothing to
            # change, an answer the guards refused, an edit that does not follow from the last
            # one, an engine error), and the edits the client showed (didShowInlineEdit) and
            # accepted.
            "nextEditComputed": 0, "nextEditEdits": 0, "nextEditNothing": 0,
            "nextEditRejected": 0, "nextEditUnrelated": 0, "nextEditErrors": 0,
            "nextEditShown": 0,
            "nextEditAccepted": 0, "nextEditRepeated": 0,
        }
        self._suggestions: dict[str, dict[str, Any]] = {}

    def record(self, uri: str, version: int, started: float, source: str,
               completion: Completion | None = None) -> None:
        if completion is None:
            self._append(uri, version, started, source)
        else:
            self._append(uri, version, started, source, completion.prompt_tokens,
                         completion.result)

    def record_next_edit(self, uri: str, version: int, started: float, outcome: str,
                         result: GenerationResult | None, prompt_tokens: int) -> None:
        """A next edit computed (source "next-edit:<outcome>"): from when it was planned."""
        self._append(uri, version, started, f"next-edit:{outcome}", prompt_tokens, result)

    def _append(self, uri: str, version: int, started: float, source: str,
                prompt_tokens: int = 0, result: GenerationResult | None = None) -> None:
        record = RequestRecord(uri, version, (time.perf_counter() - started) * 1000, source,
                               prompt_tokens=prompt_tokens)
        if result is not None:
            record.reused_tokens = result.reused_tokens
            record.generate_ms = result.generate_ms
            record.encoded_tokens = result.encoded_tokens
            record.generated_tokens = result.generated_tokens
            record.verify_steps = result.verify_steps
            record.draft_tokens = result.draft_tokens
            record.accepted_tokens = result.accepted_tokens
        self.recent.append(record)

    def shown(self, uri: str, text: str, alternative: bool = False) -> str:
        """Count a suggestion shown (or an `alternative` offered after it, counted apart: the
        editor shows one at a time); returns the id its accept command carries back."""
        suggestion_id = uuid.uuid4().hex[:12]
        self._suggestions[suggestion_id] = {"uri": uri, "text": text}
        if len(self._suggestions) > _SUGGESTIONS_KEPT:
            self._suggestions.pop(next(iter(self._suggestions)))
        self.counters["alternativesShown" if alternative else "shown"] += 1
        return suggestion_id

    def accepted(self, suggestion_id: str) -> None:
        if self._suggestions.pop(suggestion_id, None) is not None:
            self.counters["accepted"] += 1

    def latency(self) -> dict[str, Any]:
        """Percentiles of the requests that gave a suggestion."""
        latencies = sorted(r.latency_ms for r in self.recent if r.source in ("model", "typeahead"))
        return {
            "p50": _percentile(latencies, 50),
            "p95": _percentile(latencies, 95),
            "count": len(latencies),
        }

    def recent_json(self, count: int) -> list[dict[str, Any]]:
        return [r.as_json() for r in list(self.recent)[-count:]] if count > 0 else []


def _percentile(values: list[float], pct: float) -> float | None:
    if not values:
        return None
    index = min(len(values) - 1, max(0, round(pct / 100 * (len(values) - 1))))
    return round(values[index], 2)
