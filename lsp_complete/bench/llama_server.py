"""Baseline (c): an external llama-server's `/infill`, driven the way llama.vim drives it.

The request mirrors llama.vim's `llama#fim`: 256 lines before the cursor line as `input_prefix`,
the cursor line up to the cursor as `prompt`, the rest of the line plus 64 lines after as
`input_suffix`, `n_indent`, `cache_prompt: true`, its samplers, and `t_max_predict_ms: 250` (the
value llama.vim uses for a first, visible request; llama-server applies it only after a newline
was generated) with `n_predict` as the length limit.  Not reproduced: llama.vim's ring buffer of
extra chunks (`input_extra` is empty) and its client-side cache, so every keystroke reaches the
server.  Only the first line of the answer is scored.
"""

from __future__ import annotations

import json
import time
import urllib.request
from typing import Any

from lsp_complete.bench.records import Completion
from lsp_complete.context.text import leading_ws

N_PREFIX = 256
N_SUFFIX = 64
T_MAX_PROMPT_MS = 500
T_MAX_PREDICT_MS = 250
RESPONSE_FIELDS = [
    "content",
    "timings/prompt_n",
    "timings/prompt_ms",
    "timings/prompt_per_token_ms",
    "timings/prompt_per_second",
    "timings/predicted_n",
    "timings/predicted_ms",
    "timings/predicted_per_token_ms",
    "timings/predicted_per_second",
    "truncated",
    "tokens_cached",
]


def llamavim_context(text: str, offset: int) -> tuple[str, str, str, int, str]:
    """(prefix, middle, suffix, indent, line_cur) as llama.vim's `s:fim_ctx_local` builds them."""
    lines = text.split("\n")
    y = text.count("\n", 0, offset)
    x = offset - (text.rfind("\n", 0, offset) + 1)
    line_cur = lines[y]
    middle, line_suffix = line_cur[:x], line_cur[x:]
    if not line_cur.strip():
        # llama.vim sends a whitespace-only line as empty and lets the model indent it.
        indent, middle, line_suffix = 0, "", ""
    else:
        indent = len(leading_ws(line_cur))
    prefix = "\n".join(lines[max(0, y - N_PREFIX) : y]) + "\n"
    suffix = line_suffix + "\n" + "\n".join(lines[y + 1 : y + 1 + N_SUFFIX]) + "\n"
    return prefix, middle, suffix, indent, line_cur


def infill_request(text: str, offset: int, n_predict: int) -> tuple[dict[str, Any], str]:
    """The JSON body llama.vim sends for the cursor at `offset`, and the cursor line."""
    prefix, middle, suffix, indent, line_cur = llamavim_context(text, offset)
    body = {
        "input_prefix": prefix,
        "input_suffix": suffix,
        "input_extra": [],
        "prompt": middle,
        "n_predict": n_predict,
        "n_indent": indent,
        "top_k": 40,
        "top_p": 0.90,
        "stream": False,
        "samplers": ["top_k", "top_p", "infill"],
        "cache_prompt": True,
        "t_max_prompt_ms": T_MAX_PROMPT_MS,
        "t_max_predict_ms": T_MAX_PREDICT_MS,
        "response_fields": RESPONSE_FIELDS,
    }
    return body, line_cur


def suggestion_from_content(content: str, line_cur: str) -> str:
    """The text to insert at the cursor, as llama.vim renders the answer's first line.

    On a whitespace-only line the model wrote the line from column 0, so the indentation already
    typed is trimmed from the suggestion (llama.vim's `l:lead`).
    """
    first = content.split("\n", 1)[0]
    if not line_cur.strip():
        lead = min(len(leading_ws(first)), len(line_cur))
        first = first[lead:]
    return first


def _int(value: Any) -> int | None:
    return int(value) if isinstance(value, int | float) else None


class LlamaServerClient:
    """Baseline (c): stateless on our side; the server keeps its own prompt cache."""

    def __init__(self, url: str, max_tokens: int, timeout_s: float = 120.0) -> None:
        base = url.rstrip("/")
        self.endpoint = base if base.endswith("/infill") else base + "/infill"
        self.max_tokens = max_tokens
        self.timeout_s = timeout_s

    def post(self, body: dict[str, Any]) -> dict[str, Any]:
        request = urllib.request.Request(
            self.endpoint,
            data=json.dumps(body).encode(),
            headers={"Content-Type": "application/json"},
            method="POST",
        )
        with urllib.request.urlopen(request, timeout=self.timeout_s) as response:
            answer: dict[str, Any] = json.loads(response.read().decode() or "{}")
            return answer

    def complete(self, text: str, offset: int, path: str = "") -> Completion:
        body, line_cur = infill_request(text, offset, self.max_tokens)
        start = time.perf_counter()
        answer = self.post(body)
        latency = (time.perf_counter() - start) * 1000
        # `response_fields` flattens nested keys to "timings/prompt_n"; accept both shapes.
        timings = answer.get("timings", {}) if isinstance(answer.get("timings"), dict) else {}
        encoded = _int(answer.get("timings/prompt_n", timings.get("prompt_n")))
        predicted = _int(answer.get("timings/predicted_n", timings.get("predicted_n")))
        cached = _int(answer.get("tokens_cached"))
        prompt = cached - predicted if cached is not None and predicted is not None else None
        return Completion(
            text=suggestion_from_content(str(answer.get("content", "")), line_cur),
            latency_ms=latency,
            prompt_tokens=prompt,
            encoded_tokens=encoded,
            generated_tokens=predicted,
        )

    def peak_rss_mb(self) -> float | None:
        return None  # another process, maybe another machine

    def close(self) -> None:
        pass
