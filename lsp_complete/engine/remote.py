"""What the remote engines share: connection state with backoff, the streaming loop that
applies the stop rules to a server's text, and the `RemoteEngine` base the backends fill in.

Backends (one file each): `remote_llama_server.LlamaServerEngine` (llama.cpp's llama-server
`/completion`, token prompts, one slot per file) and `remote_openai.OpenAIEngine`
(`/v1/completions`: vLLM, llama-cpp-python's server, llama-server's OpenAI endpoint, others).
The HTTP/SSE client is `http.py`; healing constraints and server-side stops are `healing.py`.

A server's answer is bounded here whatever it sends: bytes (`MAX_EVENT_BYTES` and the stream
cap derived from it), tokens (`max_tokens`, enforced on our side too) and characters
(`MAX_CHARS_PER_TOKEN`). A stream that ends without its end marker, or that breaks any rule of
HTTP, SSE or the backend's JSON, is an error, never a suggestion.
"""

from __future__ import annotations

import base64
import logging
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from lsp_complete.engine.base import (
    CancelToken,
    EngineCounters,
    GenerationRequest,
    GenerationResult,
    RemoteEngineError,
    StopReason,
)
from lsp_complete.engine.http import (
    Cancelled,
    DeadlineExceeded,
    HttpClient,
    HttpResponse,
    HttpStatusError,
    ProtocolError,
    events,
    parse_json,
    split_credentials,
)
from lsp_complete.engine.stream_rules import TextRules
from lsp_complete.engine.tokenizer import Tokenizer

log = logging.getLogger(__name__)

BACKOFF_FIRST_S = 0.25
BACKOFF_MAX_S = 4.0  # a restarted server is used again within this long

# Caps on one completion stream. An event is ~300 bytes (timings included); llama-server's last
# one repeats the prompt as text, hence the allowance per prompt token.
MAX_EVENT_BYTES = 1 << 20  # one SSE line, besides the prompt allowance
STREAM_BYTES_PER_PROMPT_TOKEN = 16
STREAM_BYTES_PER_TOKEN = 1024  # the whole stream: one event line + this per token allowed
MAX_CHARS_PER_TOKEN = 128  # longer than any token of a code model's vocabulary


@dataclass
class RemoteOptions:
    url: str  # the server's root, e.g. http://gpu-box:8080 (a trailing /v1 is accepted)
    api_key: str = ""  # sent as a bearer token; read from an environment variable by the caller
    model: str = ""  # the name the server knows the model by ("" = ask the server)
    request_timeout_s: float = 5.0  # the whole request, connect to last token
    connect_timeout_s: float = 1.0
    slots: int = 0  # llama-server: slots to use (0 = all the server has)
    healing: str = "auto"  # auto | grammar | regex | off


class SlotMap:
    """Which server slot holds which file's prompt: least recently used file gives its up."""

    def __init__(self, total: int) -> None:
        self.total = total
        self._slots: OrderedDict[str, int] = OrderedDict()
        self.evictions = 0

    def slot_for(self, key: str) -> int:
        if key in self._slots:
            self._slots.move_to_end(key)
            return self._slots[key]
        used = set(self._slots.values())
        # The first free slot, looking at no more than len(used) + 1 numbers.
        slot = next((s for s in range(self.total) if s not in used), None)
        if slot is None:
            _, slot = self._slots.popitem(last=False)
            self.evictions += 1
        self._slots[key] = slot
        return slot

    def forget(self, key: str) -> None:
        self._slots.pop(key, None)

    def resize(self, total: int) -> None:
        if total != self.total:
            self.total = total
            self._slots = OrderedDict((k, s) for k, s in self._slots.items() if s < total)

    def as_json(self) -> list[dict[str, object]]:
        # list() first: status runs on the event loop while the worker may change the map.
        return [{"uri": k, "slot": s} for k, s in list(self._slots.items())]


@dataclass
class StreamChunk:
    """What one streamed event carries, in the terms of GenerationResult."""

    text: str = ""
    tokens: int = 0  # generated tokens in this event
    finish: StopReason = ""  # the server ended generation: eog | stop | max_tokens
    prompt_n: int | None = None  # prompt tokens the server computed
    cache_n: int | None = None  # prompt tokens it took from its cache
    generated: int | None = None  # the server's own total of generated tokens (final event)


def _account(result: GenerationResult, chunk: StreamChunk) -> None:
    if chunk.prompt_n is not None:
        result.encoded_tokens = chunk.prompt_n
    if chunk.cache_n is not None:
        result.reused_tokens = chunk.cache_n
    result.generated_tokens += chunk.tokens
    if chunk.generated is not None:
        result.generated_tokens = max(result.generated_tokens, chunk.generated)


def event_text(value: Any, field: str) -> str:
    """A text field of an event: a string of valid Unicode (absent or null is ""), else the
    answer is unusable."""
    if value is None:
        return ""
    if not isinstance(value, str):
        raise ProtocolError(f"an event whose `{field}` is not a string")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate, sent as a \ud800 escape
        raise ProtocolError(f"an event whose `{field}` is not valid Unicode") from None
    return value


def _server_root(url: str) -> str:
    """The URL without trailing slashes or `/v1`; "http://" stays one (a host left out)."""
    while url.endswith("/") and not url.endswith("://"):
        url = url[:-1]
    return url.removesuffix("/v1")


class RemoteEngine:
    """Connection state, backoff and the streaming loop; backends supply requests and parsing.

    Nothing here contacts the server in __init__: a server that is down when the editor starts
    costs nothing until the first request, which then fails fast with a clear message.
    """

    backend = "remote"
    server_name = "the server"  # in messages: "the llama-server", not "the llama-server server"
    end_marker = "its end marker"  # what ends a complete stream, for the error message

    def __init__(self, options: RemoteOptions, tokenizer: Tokenizer | None = None) -> None:
        self.options = options
        # `user:password@` in the URL is sent as Basic auth and shown nowhere: self.url
        # goes into messages, logs and the status.
        try:
            url, credentials = split_credentials(options.url)
        except ValueError as exc:  # a setting's mistake: one line that names it
            raise RemoteEngineError(f"engineUrl is not a usable http(s) URL ({exc})") from None
        self.url = url = _server_root(url)
        headers = {"User-Agent": "lsp-complete"}
        if options.api_key:
            headers["Authorization"] = f"Bearer {options.api_key}"
        elif credentials:
            token = base64.b64encode(credentials.encode("utf-8")).decode("ascii")
            headers["Authorization"] = f"Basic {token}"
        try:
            self.http = HttpClient(url, headers, options.connect_timeout_s)
        except ValueError as exc:
            raise RemoteEngineError(
                f"engineUrl {url!r} is not a usable http(s) URL ({exc})") from None
        self.counters = EngineCounters()
        self.prefill_rate: float | None = None  # the server's own business
        self._tokenizer = tokenizer
        self.state = "not contacted"  # connected | unreachable | error | not contacted
        self.last_error = ""
        self._retry_at = 0.0
        self._backoff = BACKOFF_FIRST_S
        self._discovered = False
        self._sent: OrderedDict[str, list[int]] = OrderedDict()  # last prompt per file

    # ---- tokenizer

    @property
    def tokenizer(self) -> Tokenizer:
        if self._tokenizer is None:
            self._tokenizer = self._make_tokenizer()
        return self._tokenizer

    def _make_tokenizer(self) -> Tokenizer:
        raise NotImplementedError

    def tokenize(self, text: str, special: bool = False) -> list[int]:
        return self.tokenizer.tokenize(text, special)

    def detokenize(self, tokens: list[int]) -> str:
        return self.tokenizer.detokenize(tokens)

    @property
    def begins_a_token(self) -> Callable[[str], bool] | None:
        return self.tokenizer.begins_a_token

    # ---- connection state

    def _deadline(self) -> float:
        return time.monotonic() + self.options.request_timeout_s

    def _check_backoff(self) -> None:
        """Fail fast while backing off: a dead host must not cost a connect timeout for every
        keystroke."""
        if self.state == "unreachable" and time.monotonic() < self._retry_at:
            raise RemoteEngineError(self.last_error)

    def _ensure_ready(self) -> None:
        """Fail fast while backing off after a failure; learn about the server once it answers."""
        self._check_backoff()
        if not self._discovered:
            self._discovered = True  # before the call: a failing discovery must not loop
            try:
                self._discover()
            except RemoteEngineError:
                self._discovered = False
                raise

    def _discover(self) -> None:
        """Backend hook: read what the server offers (slots, model, flavour)."""

    def _check_vocab(self, server_n_vocab: Any) -> None:
        """Token ids from a local vocabulary mean nothing to a server running another model."""
        local = self._tokenizer.n_vocab if self._tokenizer is not None else None
        if isinstance(server_n_vocab, int) and local and server_n_vocab != local:
            raise self._failed(
                f"the model file given in `model` has {local} tokens but the model at {self.url} "
                f"has {server_n_vocab}: set `model` to the file (or registry name) of the model "
                "the server runs, so that the prompt's tokens mean the same to it",
                "error",
            )

    def _connected(self) -> None:
        if self.state != "connected":
            if self.state in ("unreachable", "error"):
                log.info("%s at %s answers again", self.backend, self.url)
            self.state = "connected"
            self.last_error = ""
        self._backoff = BACKOFF_FIRST_S

    def _failed(self, message: str, state: str = "unreachable",
                wait_s: float | None = None) -> RemoteEngineError:
        if (state, message) != (self.state, self.last_error):
            log.warning("%s", message)  # once per cause, not once per keystroke
        if state == "unreachable":
            # Wait a little before trying again (every keystroke would otherwise pay a
            # connect timeout), or as long as the server asked (Retry-After), and re-read its
            # configuration when it comes back.
            self._discovered = False
            self._retry_at = time.monotonic() + max(self._backoff, wait_s or 0.0)
            self._backoff = min(BACKOFF_MAX_S, self._backoff * 2)
        self.state = state
        self.last_error = message
        self.counters.extra["errors"] = self.counters.extra.get("errors", 0) + 1
        return RemoteEngineError(message)

    def _describe_failure(self, exc: BaseException, what: str) -> tuple[str, str]:
        where = f"{self.server_name} at {self.url}"
        if isinstance(exc, HttpStatusError):
            if exc.status in (401, 403):
                return (f"{where} refused the API key (HTTP {exc.status}); set the environment "
                        "variable named by apiKeyEnv", "error")
            if 300 <= exc.status < 400:
                # Not followed: the API key would go to wherever the server points.
                target = exc.location or "another address"
                return (f"{where} redirects to {target} (HTTP {exc.status}), and redirects are "
                        "not followed: set engineUrl to the address of the server itself",
                        "error")
            if exc.status == 404:
                return (f"{where} has no {what} endpoint (HTTP 404): is engine "
                        f"'{self.backend}' the right kind for it?", "error")
            if exc.status in (429, 503):
                # Busy or starting: back off as it asks, not a request per keystroke.
                wait = exc.retry_after_s
                when = f"waiting {wait:.0f} s as it asks" if wait is not None else "retrying"
                busy = "is limiting requests" if exc.status == 429 else "is not ready"
                return f"{where} {busy} ({exc}); {when}", "unreachable"
            return f"{where} rejected the request: {exc}", "error"
        if isinstance(exc, ProtocolError):
            return (f"{where} sent an unusable answer: {exc}; no suggestions from it until it "
                    "answers properly", "error")
        if isinstance(exc, DeadlineExceeded):
            budget = int(self.options.request_timeout_s * 1000)
            return (f"{where} did not answer within the {budget} ms request budget "
                    "(requestTimeoutMs); no suggestions until it does", "unreachable")
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        return (f"cannot reach {where} ({reason or type(exc).__name__}); "
                "no suggestions until it answers", "unreachable")

    def _failure(self, exc: BaseException, what: str) -> RemoteEngineError:
        wait = exc.retry_after_s if isinstance(exc, HttpStatusError) else None
        return self._failed(*self._describe_failure(exc, what), wait_s=wait)

    def request_json(self, method: str, path: str, body: Any = None,
                     cancel: CancelToken | None = None) -> Any:
        """A non-streaming call (tokenize, warm-up); raises RemoteEngineError, or Cancelled
        when `cancel` is set meanwhile."""
        self._check_backoff()
        try:
            response = self.http.open(method, path, body, cancel=cancel,
                                      deadline=self._deadline())
            try:
                data = response.read_all()
            finally:
                response.close()
            if response.status != 200:
                raise HttpStatusError(response.status, data, response.headers)
            answer = parse_json(data, "an answer") if data else None
            self._connected()
            return answer
        except (OSError, ConnectionError, DeadlineExceeded, HttpStatusError,
                ProtocolError) as exc:
            raise self._failure(exc, path) from None

    def post_json(self, path: str, body: dict[str, Any]) -> Any:
        return self.request_json("POST", path, body)

    def try_json(self, path: str) -> Any:
        """GET something optional: None when the server lacks it (any error, no state change
        beyond what a refused connection means)."""
        try:
            response = self.http.open("GET", path, cancel=None, deadline=self._deadline())
            try:
                data = response.read_all()
            finally:
                response.close()
            if response.status != 200:
                return None
            return parse_json(data, "an answer")
        except (OSError, ConnectionError, DeadlineExceeded) as exc:
            raise self._failure(exc, path) from None
        except ProtocolError as exc:  # optional: an unusable answer is no answer
            log.debug("%s at %s: unusable answer to %s: %s", self.backend, self.url, path, exc)
            return None

    # ---- generation

    def _completion_request(self, request: GenerationRequest) -> tuple[str, dict[str, Any], str]:
        """Backend hook: (path, JSON body, text to put before the output). The last is the
        healed text when the server cannot be made to generate it (healing off): the prompt
        then carries it instead, and the result must still start with it."""
        raise NotImplementedError

    def _parse(self, event: dict[str, Any]) -> StreamChunk:
        raise NotImplementedError

    def _check_result(self, request: GenerationRequest, result: GenerationResult) -> None:
        """Backend hook, after a completed stream."""

    def complete(self, request: GenerationRequest, cancel: CancelToken) -> GenerationResult:
        prompt = request.tokens
        result = GenerationResult(text="", prompt_tokens=len(prompt))
        if not prompt:
            result.stop_reason = "empty"
            return result
        if cancel.cancelled:
            result.stop_reason = "cancelled"
            return result
        self._ensure_ready()
        path, body, prefix = self._completion_request(request)
        rules = TextRules(request, prefix)
        # Whatever the server does with n_predict / max_tokens, no more than this is ours.
        max_chars = len(request.heal) + request.max_tokens * MAX_CHARS_PER_TOKEN
        max_line = MAX_EVENT_BYTES + STREAM_BYTES_PER_PROMPT_TOKEN * len(prompt)
        max_body = max_line + STREAM_BYTES_PER_TOKEN * request.max_tokens
        started = time.perf_counter()
        first: float | None = None
        response: HttpResponse | None = None
        try:
            response = self.http.open("POST", path, body, cancel=cancel,
                                      deadline=self._deadline(), stream=True,
                                      max_body=max_body, max_line=max_line)
            if response.status != 200:
                raise HttpStatusError(response.status, response.read_all(), response.headers)
            self._connected()
            self.counters.calls += 1  # as the local engine counts: calls that reached the model
            self._remember(request.key, prompt)
            result.stop_reason = "eog"  # after `[DONE]` without a finish reason
            finished = False
            for event in events(response):
                if cancel.cancelled:  # events already buffered are stale too
                    raise Cancelled()
                chunk = self._parse(event)
                if (chunk.text and not chunk.finish
                        and result.generated_tokens >= request.max_tokens):
                    # The server ignored our limit. (A closing event may still carry text:
                    # llama-cpp-python holds back what could start a stop string until then.)
                    result.stop_reason = "max_tokens"
                    break
                if first is None and (chunk.text or chunk.tokens):
                    first = time.perf_counter()
                _account(result, chunk)
                if chunk.finish:
                    # Keep reading: the server ends the stream itself, and OpenAI-style
                    # servers send the usage figures in one more event after this one.
                    finished = True
                    result.stop_reason = chunk.finish
                text = chunk.text[: max(0, max_chars - len(rules.text))]
                reason = rules.feed(text) if text else None
                if reason is not None:
                    result.stop_reason = reason
                    break
                if len(text) < len(chunk.text):
                    result.stop_reason = "max_tokens"  # more characters than tokens can carry
                    break
            else:
                if not (finished or response.done_marker):
                    # Cut short (a crash, a proxy timeout): what came is not the answer.
                    raise ProtocolError(f"an answer that ended before {self.end_marker}")
                response.drain()
        except Cancelled:
            result.stop_reason = "cancelled"
        except DeadlineExceeded as exc:
            if not rules.produced_any:
                raise self._failure(exc, path) from None
            rules.keep_whole_lines()  # a slow server: keep the lines it managed
            result.stop_reason = "budget"
        except (OSError, HttpStatusError, RemoteEngineError) as exc:
            if cancel.cancelled:
                result.stop_reason = "cancelled"
            elif isinstance(exc, RemoteEngineError) and not isinstance(exc, ProtocolError):
                raise self._failed(str(exc), "error") from None
            else:
                raise self._failure(exc, path) from None
        finally:
            if response is not None:
                response.close()  # a stream we stopped reading is closed: the server stops
        ended = time.perf_counter()
        result.prefill_ms = ((first or ended) - started) * 1000
        result.generate_ms = (ended - (first or ended)) * 1000
        result.text = rules.text
        reached = response is not None and response.status == 200
        if reached and result.encoded_tokens == 0 and result.reused_tokens == 0:
            # The server did not say what its cache saved: count the prompt as computed.
            result.encoded_tokens = len(prompt)
            self.counters.extra["no_cache_stats"] = self.counters.extra.get("no_cache_stats", 0) + 1
        self.counters.tokens_encoded += result.encoded_tokens
        self.counters.tokens_reused += result.reused_tokens
        self.counters.tokens_generated += result.generated_tokens
        if result.stop_reason != "cancelled":
            self._check_result(request, result)
        return result

    def alternatives(self, request: GenerationRequest, count: int,
                     cancel: CancelToken) -> list[GenerationResult]:
        """None from a server: neither API picks several first tokens in one request, so each
        alternative would cost a full round trip of its own (and one more for the first-step
        probabilities), each holding a server slot that other files and clients need. An
        explicit request gets the one suggestion."""
        return []

    # ---- bookkeeping shared with the Engine protocol

    def _remember(self, key: str, tokens: list[int]) -> None:
        self._sent[key] = list(tokens)
        self._sent.move_to_end(key)
        while len(self._sent) > 64:
            self._sent.popitem(last=False)

    def cached_tokens(self, key: str) -> list[int]:
        """The prompt last sent for a file: what the server's prefix cache can hold for it."""
        return list(self._sent.get(key, []))

    def cached_prefix(self, key: str, tokens: list[int]) -> int | None:
        # What the server still holds is not visible from here (its slots serve other
        # clients too): callers keep the full-context prompt.
        return None

    def restore(self, key: str) -> bool:
        return False  # the server owns its cache

    def forget(self, key: str) -> None:
        self._sent.pop(key, None)

    def persist(self, key: str | None = None) -> int:
        return 0  # the server owns its cache

    def model_changed(self) -> str | None:
        return None  # the weights are the server's; a local vocabulary is read into memory

    def describe(self) -> dict[str, object]:
        tokenizer = self._tokenizer
        return {
            "backend": self.backend,
            "url": self.url,
            "model": self.options.model,
            "device": f"remote ({self.url})",
            "state": self.state,
            "lastError": self.last_error,
            "tokenizer": tokenizer.name if tokenizer is not None else "not loaded yet",
            "apiKey": "set" if self.options.api_key else "none",
            "requestTimeoutMs": int(self.options.request_timeout_s * 1000),
            "connectionsOpened": self.http.connections_opened,
        }

    def close(self) -> None:
        self.http.close()
        if self._tokenizer is not None:
            self._tokenizer.close()
