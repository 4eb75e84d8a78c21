"""Tokenizers for remote engines: the prompt builder needs token ids even when no model runs here.

Token ids decide three things on our side: the prompt's token budget, which characters token
healing removes (the last token of the typed text), and, for llama-server, the exact prompt we
send (a token array, so the server's prefix cache sees the same stable segments we built).

- `GgufTokenizer`: the model's vocabulary read from a local GGUF (vocab only, no weights):
  exact, offline, microseconds per call.
- `ServerTokenizer`: the server's own `/tokenize` and `/detokenize` (llama-server, vLLM).
- `CharTokenizer`: one "token" per character, for text-prompt servers that expose no tokenizer:
  budgets become approximate and healing removes one character, which is still sound.
"""

from __future__ import annotations

import ctypes
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

import llama_cpp

from lsp_complete.engine.llama import EngineError, _init_backend, vocab_tokenize


class Tokenizer(Protocol):
    name: str
    n_vocab: int | None

    def tokenize(self, text: str, special: bool = False) -> list[int]: ...

    def detokenize(self, tokens: list[int]) -> str: ...  # special tokens render as ""

    def render(self, tokens: list[int]) -> str: ...  # special tokens render as their text

    def close(self) -> None: ...


class GgufTokenizer:
    """The vocabulary of a local GGUF file, loaded without its weights."""

    def __init__(self, path: str | Path) -> None:
        _init_backend()
        self.path = Path(path)
        self.name = f"local vocabulary ({self.path.name})"
        params = llama_cpp.llama_model_default_params()
        params.vocab_only = True
        params.n_gpu_layers = 0
        self._model = llama_cpp.llama_model_load_from_file(str(self.path).encode(), params)
        if not self._model:
            raise EngineError(f"llama.cpp could not read the vocabulary of {self.path}")
        self._vocab = llama_cpp.llama_model_get_vocab(self._model)
        self.n_vocab: int | None = llama_cpp.llama_vocab_n_tokens(self._vocab)
        self._pieces: dict[tuple[int, bool], bytes] = {}

    def tokenize(self, text: str, special: bool = False) -> list[int]:
        return vocab_tokenize(self._vocab, text, special)

    def _piece(self, token: int, special: bool) -> bytes:
        key = (token, special)
        piece = self._pieces.get(key)
        if piece is None:
            buf = ctypes.create_string_buffer(256)
            n = llama_cpp.llama_token_to_piece(self._vocab, token, buf, 256, 0, special)
            piece = self._pieces[key] = buf.raw[: max(n, 0)]
        return piece

    def detokenize(self, tokens: list[int]) -> str:
        # Same rule as LlamaEngine.detokenize: control tokens contribute no text.
        return b"".join(self._piece(t, False) for t in tokens).decode("utf-8", errors="replace")

    def render(self, tokens: list[int]) -> str:
        return b"".join(self._piece(t, True) for t in tokens).decode("utf-8", errors="replace")

    def close(self) -> None:
        if getattr(self, "_model", None):
            llama_cpp.llama_model_free(self._model)
            self._model = None


# (path, body) -> parsed JSON answer; raises RemoteEngineError when the server cannot answer.
PostJson = Callable[[str, dict[str, Any]], Any]


class ServerTokenizer:
    """A server's tokenizer endpoints, with small caches (the prompt builder asks again for the
    same stable segments, and healing detokenizes the same few middle tokens)."""

    def __init__(self, post: PostJson, style: str, model: str = "", n_vocab: int | None = None,
                 max_entries: int = 512) -> None:
        if style not in ("llama-server", "vllm"):
            raise ValueError(f"unknown tokenizer style {style!r}")
        self._post = post
        self.style = style
        self.model = model
        self.name = f"server /tokenize ({style})"
        self.n_vocab = n_vocab
        self._max = max_entries
        self._encoded: OrderedDict[tuple[str, bool], list[int]] = OrderedDict()
        self._decoded: OrderedDict[tuple[int, ...], str] = OrderedDict()

    def tokenize(self, text: str, special: bool = False) -> list[int]:
        if not text:
            return []
        key = (text, special)
        hit = self._encoded.get(key)
        if hit is not None:
            self._encoded.move_to_end(key)
            return list(hit)
        if self.style == "llama-server":
            body = {"content": text, "add_special": False, "parse_special": special}
        else:  # vLLM parses special tokens in text always; it cannot be told otherwise
            body = {"model": self.model, "prompt": text, "add_special_tokens": False}
        tokens = [int(t) for t in self._post("/tokenize", body)["tokens"]]
        _remember(self._encoded, key, tokens, self._max)
        return list(tokens)

    def _detok(self, tokens: list[int]) -> str:
        if not tokens:
            return ""
        key = tuple(tokens)
        hit = self._decoded.get(key)
        if hit is not None:
            return hit
        if self.style == "llama-server":
            text = str(self._post("/detokenize", {"tokens": tokens})["content"])
        else:
            text = str(self._post("/detokenize", {"model": self.model, "tokens": tokens})["prompt"])
        _remember(self._decoded, key, text, self._max)
        return text

    # The servers render special tokens as text either way; our prompts only detokenize the
    # typed middle (plain code), so the difference does not arise.
    detokenize = _detok
    render = _detok

    def close(self) -> None:
        pass


class CharTokenizer:
    """One token per character (its code point). Only for servers that take text prompts."""

    name = "characters (the server has no tokenizer endpoint)"
    n_vocab: int | None = None

    def tokenize(self, text: str, special: bool = False) -> list[int]:
        return [ord(c) for c in text]

    def detokenize(self, tokens: list[int]) -> str:
        return "".join(map(chr, tokens))

    render = detokenize

    def close(self) -> None:
        pass


def _remember(cache: OrderedDict, key: Any, value: Any, limit: int) -> None:
    cache[key] = value
    if len(cache) > limit:
        cache.popitem(last=False)
