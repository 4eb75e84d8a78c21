"""An OpenAI-compatible `/v1/completions` server as the engine (vLLM, llama-cpp-python's
`python -m llama_cpp.server`, llama-server's OpenAI endpoint, others).

The prompt is the raw FIM text (the template's markers as text, which these servers parse as
special tokens), except for llama-server, whose OpenAI endpoint takes token arrays as well.
The stable-first prompt layout is what lets a server's prefix cache (vLLM's automatic prefix
caching, llama-cpp-python's longest-prefix reuse) skip everything but the typed tokens.

Token healing, per server (`remoteHealing`, "auto" picks from `/v1/models`' `owned_by`):
- llama.cpp servers ("grammar"): a GBNF `grammar` that forces the healed characters first;
- vLLM ("regex"): structured outputs with a regular expression (`structured_outputs.regex`
  from vLLM 0.12 on, `guided_regex` before);
- anything else ("off"): the full typed text is sent and the output is taken as following it.
A server that ignores the constraint is noticed (the output does not start with the healed
text) and healing is switched off for it.
"""

from __future__ import annotations

import logging
import re
from typing import Any

from lsp_complete.engine.base import (
    CancelToken,
    GenerationRequest,
    GenerationResult,
    StopReason,
)
from lsp_complete.engine.healing import gbnf_prefix_grammar, regex_prefix, server_stops
from lsp_complete.engine.http import ProtocolError
from lsp_complete.engine.remote import RemoteEngine, RemoteOptions, StreamChunk, event_text
from lsp_complete.engine.tokenizer import CharTokenizer, ServerTokenizer, Tokenizer

log = logging.getLogger(__name__)

# `owned_by` in /v1/models -> which server this is.
_FLAVORS = {"me": "llama-cpp-python", "llamacpp": "llama-server", "vllm": "vllm"}
_AUTO_HEALING = {"llama-cpp-python": "grammar", "llama-server": "grammar", "vllm": "regex"}
_FINISH: dict[str, StopReason] = {"length": "max_tokens", "stop": "eog"}


class OpenAIEngine(RemoteEngine):
    backend = "openai"
    server_name = "the OpenAI-compatible server"
    end_marker = "`data: [DONE]` or a `finish_reason`"

    def __init__(self, options: RemoteOptions, tokenizer: Tokenizer | None = None) -> None:
        super().__init__(options, tokenizer)
        self.model = options.model
        self.flavor = "unknown"
        self.server_version: tuple[int, ...] = ()
        self.healing = options.healing if options.healing != "auto" else "off"

    def _discover(self) -> None:
        models = self.try_json("/v1/models")
        data = models.get("data") if isinstance(models, dict) else None
        first = data[0] if isinstance(data, list) and data and isinstance(data[0], dict) else {}
        self.flavor = _FLAVORS.get(str(first.get("owned_by", "")), "generic")
        self.model = self.options.model or str(first.get("id", ""))
        meta = first.get("meta")
        if isinstance(meta, dict):
            self._check_vocab(meta.get("n_vocab"))
        if self.flavor == "vllm":
            version = self.try_json("/version")
            text = version.get("version", "") if isinstance(version, dict) else ""
            self.server_version = tuple(int(n) for n in re.findall(r"\d{1,9}", str(text))[:3])
        if self.options.healing == "auto":
            self.healing = _AUTO_HEALING.get(self.flavor, "off")

    def _make_tokenizer(self) -> Tokenizer:
        # Budgets and healing need token ids; the prompt itself goes as text (see module doc).
        self._ensure_ready()
        if self.flavor == "llama-server":
            return ServerTokenizer(self.post_json, "llama-server")
        if self.flavor == "vllm":
            return ServerTokenizer(self.post_json, "vllm", model=self.model)
        return CharTokenizer()

    @property
    def _token_prompt(self) -> bool:
        return self.flavor == "llama-server" and not isinstance(self.tokenizer, CharTokenizer)

    def _completion_request(self, request: GenerationRequest) -> tuple[str, dict[str, Any], str]:
        heal = request.heal
        healing = self.healing if heal else "off"
        prefix = heal if healing == "off" else ""
        prompt: Any
        if self._token_prompt:
            prompt = request.tokens + ([heal] if prefix else [])
        else:
            prompt = self.tokenizer.render(request.tokens) + prefix
        body: dict[str, Any] = {
            "prompt": prompt,
            "max_tokens": request.max_tokens,
            "temperature": 0,
            "top_p": 1,
            "stream": True,
            "stop": server_stops(request) if not prefix else _stops_after(request, prefix),
            "stream_options": {"include_usage": True},
        }
        if self.model:
            body["model"] = self.model
        if self.flavor in ("llama-cpp-python", "llama-server"):
            # llama-cpp-python's server defaults to repeat_penalty 1.1: greedy means none.
            body.update(top_k=1, repeat_penalty=1.0)
        if self.flavor == "llama-server":
            body["cache_prompt"] = True
        if healing == "grammar":
            body["grammar"] = gbnf_prefix_grammar(heal, request.heal_code)
        elif healing == "regex":
            if self.server_version and self.server_version < (0, 12):
                body["guided_regex"] = regex_prefix(heal, request.heal_code)
            else:
                body["structured_outputs"] = {"regex": regex_prefix(heal, request.heal_code)}
        return "/v1/completions", body, prefix

    def _parse(self, event: dict[str, Any]) -> StreamChunk:
        chunk = StreamChunk()
        choices = event.get("choices")
        usage = event.get("usage")  # null in every event but the last, when sent at all
        if choices is None and not isinstance(usage, dict):
            raise ProtocolError("an event with neither `choices` nor `usage`")
        if choices is not None and not isinstance(choices, list):
            raise ProtocolError("an event whose `choices` is not a list")
        if choices:
            choice = choices[0]
            if not isinstance(choice, dict) or "text" not in choice:
                raise ProtocolError("an event whose choice has no `text`")
            chunk.text = event_text(choice["text"], "text")
            finish = choice.get("finish_reason")
            if finish is not None and not isinstance(finish, str):
                raise ProtocolError("an event whose `finish_reason` is not a string")
            # One event per generated token (bytes of a partial character give empty text);
            # the closing event carries none. The usage figures, when sent, replace the count.
            chunk.tokens = int(bool(chunk.text) or not finish)
            if finish:
                chunk.finish = _FINISH.get(str(finish), "eog")
        if isinstance(usage, dict):
            details = usage.get("prompt_tokens_details")
            cached = details.get("cached_tokens") if isinstance(details, dict) else None
            prompt_tokens = usage.get("prompt_tokens")
            if isinstance(cached, int) and isinstance(prompt_tokens, int):
                chunk.cache_n, chunk.prompt_n = cached, prompt_tokens - cached
            if isinstance(usage.get("completion_tokens"), int):
                chunk.generated = usage["completion_tokens"]
        timings = event.get("timings")  # llama-server's endpoint adds its own figures
        if isinstance(timings, dict):
            if isinstance(timings.get("prompt_n"), int):
                chunk.prompt_n = timings["prompt_n"]
            if isinstance(timings.get("cache_n"), int):
                chunk.cache_n = timings["cache_n"]
        return chunk

    def _check_result(self, request: GenerationRequest, result: GenerationResult) -> None:
        heal, text = request.heal, result.text
        if not heal or self.healing == "off" or not text:
            return
        if text.startswith(heal) or heal.startswith(text):
            return
        self.counters.extra["heal_ignored"] = self.counters.extra.get("heal_ignored", 0) + 1
        if self.options.healing == "auto":
            log.warning("%s at %s ignored the %s constraint of token healing: healing is off "
                        "for it from now on", self.flavor, self.url, self.healing)
            self.healing = "off"

    def warm(self, key: str, segments: list[list[int]], cancel: CancelToken,
             extend_only: bool = False) -> int:
        return 0  # these servers have no prefill-only request; their caches fill on use

    def describe(self) -> dict[str, object]:
        info = super().describe()
        info.update(model=self.model, flavor=self.flavor, healing=self.healing,
                    promptAs="tokens" if self._tokenizer and self._token_prompt else "text")
        return info


def _stops_after(request: GenerationRequest, prefix: str) -> list[str]:
    # With healing off the healed text is in the prompt, not the output: no overlap to fear.
    return server_stops(GenerationRequest(key=request.key, segments=[], heal="",
                                          stop=request.stop, single_line=request.single_line))

