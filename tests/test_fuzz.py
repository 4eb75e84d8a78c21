"""Property-based fuzzing of the protocol layer (issue 14).

One long-lived server (the tiny model) takes random LSP traffic: known methods with random
params, random edit sequences (out-of-range and negative positions, huge numbers, lone
surrogates, stray control characters), unknown methods, cancellations, malformed JSON and
garbage bytes between messages. Every request must get a response, the server must stay up, its
memory must stay bounded, and at the end its status must be sane. The examples are derandomized
(the same run every time) and their number fixed, to keep the run short and stable in CI.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lsp_complete.server.framing import FrameReader, Message
from tests.raw_lsp import RawServer, encode, frame

EXAMPLES = 400
WARM_UP = 10  # examples before the memory baseline is taken
RSS_GROWTH_LIMIT_KIB = 30 * 1024
URIS = [f"file:///work/fuzz/f{n}.py" for n in range(4)] + ["untitled:Untitled-1"]

# --- value strategies -----------------------------------------------------------------------

numbers = st.one_of(
    st.integers(0, 6),
    st.integers(0, 6),  # mostly small: positions inside the documents
    st.sampled_from([-1, -(2**31), 2**31 - 1, 2**31, 2**53, 2**64, 10**30]),
    st.integers(),
    st.floats(allow_nan=True, allow_infinity=True),
)
chars = st.one_of(
    st.characters(),
    st.characters(categories=["Cs"]),  # lone surrogates
    st.sampled_from(list("\n\r\t\x00(){}[]:.'\" ") + ["\r\n", "def ", "return ", "    "]),
)
texts = st.lists(chars, max_size=40).map("".join)
json_values = st.recursive(
    st.one_of(st.none(), st.booleans(), numbers, texts),
    lambda inner: st.one_of(st.lists(inner, max_size=4),
                            st.dictionaries(st.sampled_from(
                                ["uri", "line", "character", "textDocument", "position", "id",
                                 "text", "range", "version"]) | texts, inner, max_size=4)),
    max_leaves=12,
)
uris = st.sampled_from(URIS) | texts
positions = st.one_of(
    st.fixed_dictionaries({"line": numbers, "character": numbers}),
    json_values,
)
text_documents = st.one_of(st.fixed_dictionaries({"uri": uris}), json_values)

# --- message strategies ---------------------------------------------------------------------


def notification(method: str, params: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "method": method, "params": params}


def request(method: str, params: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": None, "method": method, "params": params}  # id set on send


did_open = st.builds(
    lambda uri, language, version, text: notification("textDocument/didOpen", {
        "textDocument": {"uri": uri, "languageId": language, "version": version, "text": text}}),
    uris, st.sampled_from(["python", "javascript", "rust", "plaintext", "?"]), numbers,
    st.one_of(texts, st.just("def f(x):\n    return x\n" * 20)),
)
change = st.one_of(
    st.fixed_dictionaries({"range": st.fixed_dictionaries({"start": positions, "end": positions}),
                           "text": texts}),
    st.fixed_dictionaries({"text": texts}),
    json_values,
)
did_change = st.builds(
    lambda uri, version, changes: notification("textDocument/didChange", {
        "textDocument": {"uri": uri, "version": version}, "contentChanges": changes}),
    uris, numbers, st.lists(change, max_size=4),
)
did_close = st.builds(lambda doc: notification("textDocument/didClose", {"textDocument": doc}),
                      text_documents)
cursor = st.builds(lambda doc, pos: notification("lsp-complete/didMoveCursor",
                                                 {"textDocument": doc, "position": pos}),
                   text_documents, positions)
inline = st.builds(
    lambda doc, pos, kind: request("textDocument/inlineCompletion", {
        "textDocument": doc, "position": pos, "context": {"triggerKind": kind}}),
    text_documents, positions, st.sampled_from([1, 2, 0, 9]),
)
completion = st.builds(lambda doc, pos: request("textDocument/completion",
                                                {"textDocument": doc, "position": pos}),
                       text_documents, positions)
status = st.builds(lambda recent: request("lsp-complete/status", {"recent": recent}), numbers)
command = st.builds(lambda args: request("workspace/executeCommand", {
    "command": "lsp-complete.accepted", "arguments": args}), st.lists(json_values, max_size=2))
cancel = st.builds(lambda msg_id: notification("$/cancelRequest", {"id": msg_id}),
                   st.one_of(st.integers(0, 3000), json_values))
unknown = st.builds(lambda method, params, is_request: (request if is_request else notification)(
    method, params), st.sampled_from(["textDocument/hover", "lsp-complete/nope", "$/ping"]) | texts,
    json_values, st.booleans())
raw = st.one_of(  # bytes, not a message: the framing must cope
    st.sampled_from([b"garbage", b"\r\n", b"}", b"Content-Length: x\r\n\r\n"]),
    st.builds(frame, st.sampled_from([b"{", b"[1,", b'{"jsonrpc": "2.0", "method": 5}', b"null",
                                      b"\xff\xfe", b'{"jsonrpc":"2.0","method":"$/x","params":'
                                      b'"\xc3"}'])),
)
messages = st.lists(st.one_of(did_open, did_change, did_change, did_close, cursor, inline,
                              completion, status, command, cancel, unknown, raw),
                    min_size=1, max_size=12)


# --- the test -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def fuzz_server(tiny_model_path: Path) -> Iterator[RawServer]:
    server = RawServer(tiny_model_path)
    server.initialize()
    assert server.wait_ready()["model"]["state"] == "ready"
    yield server
    server.close()


def test_every_request_is_answered_and_memory_stays_bounded(fuzz_server: RawServer) -> None:
    server = fuzz_server
    rss: list[int] = []
    internal_errors: list[str] = []
    outcomes: dict[Any, int] = {}
    next_id = iter(range(1, 10**9))

    @settings(max_examples=EXAMPLES, derandomize=True, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @given(messages)
    def exchange(batch: list[Any]) -> None:
        sent: list[int] = []
        data = bytearray()
        for message in batch:
            if isinstance(message, bytes):
                data += message
                continue
            message = dict(message)
            if "id" in message:
                message["id"] = next(next_id)
                sent.append(message["id"])
            data += frame(encode(message))
        server.write(bytes(data))
        for msg_id in sent:
            answer = server.response(msg_id, timeout=30)
            assert ("result" in answer) != ("error" in answer), answer
            outcome = answer["error"]["code"] if "error" in answer else "result"
            outcomes[outcome] = outcomes.get(outcome, 0) + 1
            if outcome == -32603:  # an internal error is a bug past the protocol layer
                internal_errors.append(answer["error"]["message"])
        assert server.alive()
        rss.append(server.rss_kib())

    started = time.monotonic()
    exchange()
    elapsed = time.monotonic() - started
    # Settled: every document closed, the worker idle, the status whole.
    for uri in URIS:
        server.notify("textDocument/didClose", {"textDocument": {"uri": uri}})
    deadline = time.monotonic() + 30
    while True:
        final = server.call("lsp-complete/status", {}, timeout=30)["result"]
        if final["scheduler"]["idle"] or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert final["model"]["state"] == "ready"
    assert final["scheduler"]["idle"]
    assert all(doc["uri"] not in URIS for doc in final["documents"])
    growth = rss[-1] - rss[min(WARM_UP, len(rss) - 1)]
    print(f"fuzz: {len(rss)} examples in {elapsed:.1f} s, RSS {rss[0] / 1024:.1f} -> "
          f"{rss[-1] / 1024:.1f} MiB (growth after warm-up {growth / 1024:.1f} MiB), "
          f"answers {outcomes}, internal errors: {len(internal_errors)} {internal_errors[:3]}")
    assert growth < RSS_GROWTH_LIMIT_KIB
    assert internal_errors == []


# --- the frame reader alone: any cut of a stream gives the same messages ----------------------


class Cut:
    def __init__(self, chunks: list[bytes]) -> None:
        self.chunks = chunks

    async def read(self, n: int = -1) -> bytes:
        return self.chunks.pop(0) if self.chunks else b""


@settings(max_examples=200, derandomize=True, deadline=None, database=None)
@given(st.lists(json_values, min_size=1, max_size=6), st.lists(st.integers(1, 50), max_size=30))
def test_any_cut_of_the_stream_gives_the_same_messages(values: list[Any], cuts: list[int]) -> None:
    import asyncio

    stream = b"".join(frame(json.dumps(v).encode()) for v in values)
    chunks, at = [], 0
    for size in cuts:
        chunks.append(stream[at:at + size])
        at += size
    chunks.append(stream[at:])

    async def read_all() -> list[Any]:
        reader = FrameReader(Cut([c for c in chunks if c]))
        out = []
        while (f := await reader.next_frame()) is not None:
            assert isinstance(f, Message)
            out.append(f.payload)
        return out

    decoded = asyncio.run(read_all())
    assert json.dumps(decoded) == json.dumps(values)  # NaN != NaN: compare the text
