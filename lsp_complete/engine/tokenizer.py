"""Tokenizers for remote engines: the prompt builder needs token ids even when no model runs here.

Token ids decide three things on our side: the prompt's token budget, which characters token
healing removes (the last token of the typed text), and, for llama-server, the exact prompt we
send (a token array, so the server's prefix cache sees the same stable segments we built).

- `GgufTokenizer` (in `llama_backend`, as it loads llama.cpp): the model's vocabulary read from
  a local GGUF (vocab only, no weights): exact, offline, microseconds per call.
- `ServerTokenizer`: the server's own `/tokenize` and `/detokenize` (llama-server, vLLM).
- `CharTokenizer`: one "token" per character, for text-prompt servers that expose no tokenizer:
  budgets become approximate and healing removes one character, which is still sound.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from typing import Any, Protocol, TypeVar

from lsp_complete.engine.base import RemoteEngineError
from lsp_complete.utf8 import cleaned


class Tokenizer(Protocol):
    name: str
    n_vocab: int | None

    def tokenize(self, text: str, special: bool = False) -> list[int]: ...

    def detokenize(self, tokens: list[int]) -> str: ...  # special tokens render as ""

    def render(self, tokens: list[int]) -> str: ...  # special tokens render as their text

    @property
    def begins_a_token(self) -> Callable[[str], bool] | None: ...  # as `Engine.begins_a_token`

    def close(self) -> None: ...


# (path, body) -> parsed JSON answer; raises RemoteEngineError when the server cannot answer.
PostJson = Callable[[str, dict[str, Any]], Any]

K = TypeVar("K")
V = TypeVar("V")


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
        text = cleaned(text)[0]  # a lone surrogate is U+FFFD, as for the in-process tokenizer
        key = (text, special)
        hit = self._encoded.get(key)
        if hit is not None:
            self._encoded.move_to_end(key)
            return list(hit)
        if self.style == "llama-server":
            body = {"content": text, "add_special": False, "parse_special": special}
        else:  # vLLM parses special tokens in text always; it cannot be told otherwise
            body = {"model": self.model, "prompt": text, "add_special_tokens": False}
        tokens = _field(self._post("/tokenize", body), "tokens", "/tokenize", list)
        if not all(isinstance(t, int) and not isinstance(t, bool) for t in tokens):
            raise RemoteEngineError("the server's /tokenize answer has tokens that are not ids")
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
            text = _field(self._post("/detokenize", {"tokens": tokens}), "content", "/detokenize",
                          str)
        else:
            text = _field(self._post("/detokenize", {"model": self.model, "tokens": tokens}),
                          "prompt", "/detokenize", str)
        _remember(self._decoded, key, text, self._max)
        return text

    # The servers render special tokens as text either way; our prompts only detokenize the
    # typed middle (plain code), so the difference does not arise.
    detokenize = _detok
    render = _detok
    begins_a_token = None  # the endpoints do not list the vocabulary

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
    begins_a_token = None  # a character is a whole token

    def close(self) -> None:
        pass


def _field(answer: Any, name: str, path: str, kind: type[V]) -> V:
    """`answer[name]`, which must be a `kind`: a malformed answer is a RemoteEngineError."""
    value = answer.get(name) if isinstance(answer, dict) else None
    if not isinstance(value, kind):
        raise RemoteEngineError(f"the server's {path} answer has no `{name}` {kind.__name__}")
    return value


def _remember(cache: OrderedDict[K, V], key: K, value: V, limit: int) -> None:
    cache[key] = value
    if len(cache) > limit:
        cache.popitem(last=False)
