"""llama.cpp's llama-server as the engine: `/completion` with token prompts, one slot per file.

The prompt goes as a token array, so the server sees exactly the segments the prompt builder
made, and `cache_prompt` + a fixed `id_slot` per open file give the server's prefix cache the
same reuse the in-process engine gets from one KV sequence per file: a keystroke re-computes
only the typed tokens. Token healing is a GBNF grammar that forces the output to begin with
the healed characters (the in-process engine masks the same tokens by hand).
"""

from __future__ import annotations

from pathlib import PurePath
from typing import Any

from lsp_complete.engine.base import (
    CancelToken,
    GenerationRequest,
    StopReason,
    common_prefix_length,
)
from lsp_complete.engine.healing import gbnf_prefix_grammar, server_stops
from lsp_complete.engine.http import Cancelled, ProtocolError
from lsp_complete.engine.remote import (
    RemoteEngine,
    RemoteOptions,
    SlotMap,
    StreamChunk,
    event_text,
)
from lsp_complete.engine.tokenizer import ServerTokenizer, Tokenizer

_FINISH: dict[str, StopReason] = {"eos": "eog", "limit": "max_tokens", "word": "stop"}
MAX_SLOTS = 4096  # what a server may claim to have (slots are looked up by number)


def _greedy(request_body: dict[str, Any]) -> dict[str, Any]:
    # Greedy like the local engine: keep the one best token, no penalties, no randomness.
    request_body.update(temperature=0, top_k=1, samplers=["top_k"], repeat_penalty=1.0)
    return request_body


class LlamaServerEngine(RemoteEngine):
    backend = "llama-server"
    server_name = "the llama-server"
    end_marker = "its final event (`stop: true`)"

    def __init__(self, options: RemoteOptions, tokenizer: Tokenizer | None = None) -> None:
        super().__init__(options, tokenizer)
        self.slots = SlotMap(0)  # 0: not known yet; then the server picks an idle slot
        self.slot_context: int | None = None
        self.server_model = ""
        self.healing = "off" if options.healing == "off" else "grammar"

    def _make_tokenizer(self) -> Tokenizer:
        return ServerTokenizer(self.post_json, "llama-server")

    def _discover(self) -> None:
        props = self.try_json("/props")
        props = props if isinstance(props, dict) else {}
        total = props.get("total_slots")
        if not isinstance(total, int) or total <= 0:
            slots = self.try_json("/slots")  # older servers; 501 when --slots is off
            total = len(slots) if isinstance(slots, list) else 0
        total = min(total, MAX_SLOTS)
        if self.options.slots > 0:
            total = min(total, self.options.slots) if total else self.options.slots
        self.slots.resize(total)
        settings = props.get("default_generation_settings")
        if isinstance(settings, dict) and isinstance(settings.get("n_ctx"), int):
            self.slot_context = settings["n_ctx"]
        if isinstance(props.get("model_path"), str):
            self.server_model = PurePath(props["model_path"]).name
        models = self.try_json("/v1/models")
        data = models.get("data") if isinstance(models, dict) else None
        if isinstance(data, list) and data and isinstance(data[0], dict):
            meta = data[0].get("meta")
            self.server_model = self.server_model or str(data[0].get("id", ""))
            if isinstance(meta, dict):
                self._check_vocab(meta.get("n_vocab"))

    def _slot(self, key: str) -> dict[str, Any]:
        if self.slots.total <= 0:
            return {}  # unknown: the server picks a slot (by prompt similarity)
        slot = self.slots.slot_for(key)
        self.counters.evictions = self.slots.evictions
        return {"id_slot": slot}

    def _prompt(self, request: GenerationRequest) -> list[Any]:
        if request.heal and self.healing == "off":
            # The server accepts mixed arrays: it tokenizes the string part itself.
            return [*request.tokens, request.heal]
        return request.tokens

    def _n_predict(self, request: GenerationRequest) -> int:
        """What may be generated within one slot's context; a prompt that does not fit at all
        is an error worth one clear message (the server would answer 400 to each request)."""
        if not self.slot_context:
            return request.max_tokens
        room = self.slot_context - len(request.tokens)
        if room < 8:
            raise self._failed(
                f"a prompt of {len(request.tokens)} tokens does not fit the {self.slot_context} "
                "tokens of one llama-server slot (its --ctx-size divided by --parallel): lower "
                "maxPromptTokens or give the server more context",
                "error",
            )
        return min(request.max_tokens, room)

    def _completion_request(self, request: GenerationRequest) -> tuple[str, dict[str, Any], str]:
        body = _greedy({
            "prompt": self._prompt(request),
            "n_predict": self._n_predict(request),
            "stream": True,
            "cache_prompt": True,
            "stop": server_stops(request),
            "timings_per_token": True,  # prompt_n/cache_n in every event, even if we stop early
            **self._slot(request.key),
        })
        prefix = ""
        if request.heal:
            if self.healing == "off":
                prefix = request.heal
            else:
                body["grammar"] = gbnf_prefix_grammar(request.heal, request.heal_code)
        return "/completion", body, prefix

    def _parse(self, event: dict[str, Any]) -> StreamChunk:
        stop = event.get("stop", False)
        if not isinstance(stop, bool):
            raise ProtocolError("an event whose `stop` is not true or false")
        if "content" not in event and not stop:
            raise ProtocolError("an event without `content`")
        chunk = StreamChunk(text=event_text(event.get("content"), "content"))
        tokens = event.get("tokens")
        if tokens is not None and not isinstance(tokens, list):
            raise ProtocolError("an event whose `tokens` is not a list")
        # Text counts as a token at least: an empty `tokens` must not evade max_tokens.
        chunk.tokens = max(len(tokens or ()), int(bool(chunk.text)))
        timings = event.get("timings")
        if isinstance(timings, dict):
            chunk.prompt_n = _int(timings.get("prompt_n"))
            chunk.cache_n = _int(timings.get("cache_n"))
        if chunk.cache_n is None:
            chunk.cache_n = _int(event.get("tokens_cached"))
        if stop:
            # The final event repeats totals: its own count replaces ours, never adds to it.
            chunk.finish = _FINISH.get(str(event.get("stop_type", "")), "eog")
            chunk.tokens = 0
            chunk.generated = _int(event.get("tokens_predicted"))
        return chunk

    def warm(self, key: str, segments: list[list[int]], cancel: CancelToken,
             extend_only: bool = False) -> int:
        """Prefill a file's slot (`n_predict: 0`, as llama.vim does); returns tokens computed."""
        prompt = [t for s in segments for t in s]
        if not prompt or cancel.cancelled:
            return 0
        sent = self._sent.get(key)
        if extend_only and sent and common_prefix_length(sent, prompt) < len(sent):
            return 0  # never push out a longer cached prompt for a guess at the next one
        self._ensure_ready()
        self.counters.warm_calls += 1
        body = _greedy({"prompt": prompt, "n_predict": 0, "cache_prompt": True, "stream": False,
                        **self._slot(key)})
        try:
            data = self.request_json("POST", "/completion", body, cancel=cancel)
        except Cancelled:
            return 0
        self._remember(key, prompt)
        data = data if isinstance(data, dict) else {}
        timings = data.get("timings")
        timings = timings if isinstance(timings, dict) else {}
        encoded = _int(timings.get("prompt_n"))
        reused = _int(timings.get("cache_n")) or _int(data.get("tokens_cached")) or 0
        encoded = len(prompt) - reused if encoded is None else encoded
        self.counters.tokens_encoded += encoded
        self.counters.tokens_reused += reused
        return encoded

    def forget(self, key: str) -> None:
        super().forget(key)
        self.slots.forget(key)

    def describe(self) -> dict[str, object]:
        info = super().describe()
        info.update(
            serverModel=self.server_model,
            slots=self.slots.total,
            slotContext=self.slot_context,
            slotOfFile=self.slots.as_json(),
            healing=self.healing,
        )
        return info


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None

