"""The protocol layer under bad input (issue 14): framing errors, malformed and invalid messages,
the lifecycle (before initialize, shutdown, exit) and the per-message bookkeeping that must not
grow. Most tests drive the real server over stdio with raw bytes (tests/raw_lsp.py)."""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from lsprotocol import types

from tests.raw_lsp import RawServer, encode, frame

PARSE_ERROR = types.ErrorCodes.ParseError.value
INVALID_REQUEST = types.ErrorCodes.InvalidRequest.value
INVALID_PARAMS = types.ErrorCodes.InvalidParams.value
NOT_INITIALIZED = types.ErrorCodes.ServerNotInitialized.value
STATUS = "lsp-complete/status"
URI = "file:///work/robust.py"


def request(msg_id: Any, method: str, params: Any = None) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": msg_id, "method": method, "params": params}


def did_open(uri: str, text: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "method": "textDocument/didOpen", "params": {
        "textDocument": {"uri": uri, "languageId": "python", "version": 1, "text": text}}}


def inline_request(msg_id: int, line: int, character: int) -> dict[str, Any]:
    return request(msg_id, "textDocument/inlineCompletion", {
        "textDocument": {"uri": URI}, "position": {"line": line, "character": character},
        "context": {"triggerKind": 2}})


def open_uris(server: RawServer) -> list[str]:
    return [d["uri"] for d in server.call(STATUS, {})["result"]["documents"]]


@pytest.fixture
def server(tiny_model_path: Path) -> Iterator[RawServer]:
    s = RawServer(tiny_model_path)
    s.initialize()
    yield s
    s.close()


@pytest.fixture
def bare(tiny_model_path: Path) -> Iterator[RawServer]:
    """A server that has not been initialized."""
    s = RawServer(tiny_model_path)
    yield s
    s.close()


# --- framing (defect 6) ---------------------------------------------------------------------


def test_short_content_length_does_not_desynchronise(server: RawServer) -> None:
    body = encode(request(1, STATUS, {}))
    server.write(frame(body, len(body) - 7))
    server.send(request(2, STATUS, {}))
    assert "result" in server.response(2, timeout=10)
    # The mis-framed request is recovered (its body ran to the next header) or refused.
    first = server.wait_for(lambda m: m.get("id") == 1 or m.get("error", {}).get(
        "code") == PARSE_ERROR, 10)
    assert "result" in first or first["error"]["code"] == PARSE_ERROR


def test_long_content_length_does_not_desynchronise(server: RawServer) -> None:
    body = encode(request(1, STATUS, {}))
    server.write(frame(body, len(body) + 40))
    server.send(request(2, STATUS, {}))
    assert "result" in server.response(2, timeout=10)
    assert "result" in server.response(1, timeout=10)


def test_long_content_length_on_the_last_message_is_answered(server: RawServer) -> None:
    """Nothing follows the mis-framed body: the reader must not wait for bytes forever."""
    body = encode(request(1, STATUS, {}))
    server.write(frame(body, len(body) + 40))
    assert "result" in server.response(1, timeout=10)


def test_huge_content_length_neither_crashes_nor_swallows_the_stream(server: RawServer) -> None:
    server.write(frame(encode(request(1, STATUS, {})), 10**22))
    server.send(request(2, STATUS, {}))
    assert "result" in server.response(2, timeout=10)
    refused = server.response(1, timeout=10)  # its id was read from the start of the body
    assert refused["error"]["code"] == INVALID_REQUEST
    assert server.alive()


def test_garbage_before_a_header_is_skipped(server: RawServer) -> None:
    server.write(b'}]"garbage without a newline')
    server.send(request(2, STATUS, {}))
    assert "result" in server.response(2, timeout=10)
    server.write(b"Bogus-Header: 1\r\nContent-Length: x\r\n\r\n{}")
    server.send(request(3, STATUS, {}))
    assert "result" in server.response(3, timeout=10)


@pytest.mark.parametrize("length", [b"-5", b"abc", b"+40", b" 1 2"])
def test_a_request_whose_length_is_no_number_is_refused_not_lost(server: RawServer,
                                                                  length: bytes) -> None:
    """Round 5's 13th defect: a request after `Content-Length: -5` (or `abc`, `+40`) was
    skipped with its bytes, silently; its client waited for an answer for ever."""
    server.write(b"Content-Length: " + length + b"\r\n\r\n" + encode(request(1, STATUS, {})))
    refused = server.response(1, timeout=10)
    assert refused["error"]["code"] == INVALID_REQUEST
    assert "Content-Length" in refused["error"]["message"], refused
    server.send(request(2, STATUS, {}))  # the next message is read as before
    assert "result" in server.response(2, timeout=10)
    assert server.alive()


def test_malformed_json_gets_a_parse_error_and_the_next_message_works(server: RawServer) -> None:
    server.write(frame(b'{"jsonrpc": "2.0", "id": 1, "method": '))
    error = server.wait_for(lambda m: "error" in m, 10)
    assert error["error"]["code"] == PARSE_ERROR and error["id"] is None
    server.send(request(2, STATUS, {}))
    assert "result" in server.response(2, timeout=10)


@pytest.mark.parametrize("payload", [b"[1, 2]", b"42", b'"text"', b"null"])
def test_json_that_is_not_a_message_gets_invalid_request(server: RawServer, payload) -> None:
    server.write(frame(payload))
    error = server.wait_for(lambda m: "error" in m, 10)
    assert error["error"]["code"] == INVALID_REQUEST and error["id"] is None
    assert "result" in server.call(STATUS, {}, timeout=10)


def test_a_request_without_jsonrpc_version_gets_invalid_request(server: RawServer) -> None:
    server.send({"id": 5, "method": STATUS, "params": {}})
    assert server.response(5, timeout=10)["error"]["code"] == INVALID_REQUEST
    server.send({"jsonrpc": "1.0", "id": 6, "method": STATUS, "params": {}})
    assert server.response(6, timeout=10)["error"]["code"] == INVALID_REQUEST


def test_oversize_message_is_skipped_and_its_request_refused(tiny_model_path: Path) -> None:
    s = RawServer(tiny_model_path, "--max-message-bytes", "100000")
    try:
        s.initialize()
        s.send(did_open(URI, "x = 1\n" * 30000))  # ~180 kB: over the cap
        s.send(request(7, STATUS, {"padding": "y" * 200000}))
        assert s.response(7, timeout=10)["error"]["code"] == INVALID_REQUEST
        assert open_uris(s) == []
        s.send(did_open(URI, "x = 1\n"))
        assert open_uris(s) == [URI]
    finally:
        s.close()


def test_default_cap_refuses_a_message_over_32_mib(server: RawServer) -> None:
    # The model loads in the background (and pages its weights in): measure after that.
    deadline = time.monotonic() + 60
    while server.call(STATUS, {}, timeout=10)["result"]["model"]["state"] == "loading":
        assert time.monotonic() < deadline
        time.sleep(0.1)
    before = server.rss_kib()
    server.send(request(8, STATUS, {"padding": "z" * (33 * 1024 * 1024)}))
    assert server.response(8, timeout=60)["error"]["code"] == INVALID_REQUEST
    assert "result" in server.call(STATUS, {}, timeout=10)
    assert server.rss_kib() - before < 16 * 1024  # discarded in chunks, never held whole


def test_invalid_utf8_in_did_open_still_opens_the_document(server: RawServer) -> None:
    body = encode(did_open(URI, "name = 'caf\u00e9'\n")).replace(b"\\u00e9", b"\xff\xfe")
    assert b"\xff" in body
    server.write(frame(body))
    assert open_uris(server) == [URI]


# --- invalid params -------------------------------------------------------------------------


def test_invalid_params_get_an_invalid_params_error(server: RawServer) -> None:
    server.send(did_open(URI, "x = 1\n"))
    server.send(inline_request(1, -1, 0))
    assert server.response(1, timeout=10)["error"]["code"] == INVALID_PARAMS
    server.send(request(2, "textDocument/inlineCompletion", {
        "position": {"line": 0, "character": 0}, "context": {"triggerKind": 2}}))
    error = server.response(2, timeout=10)["error"]
    assert error["code"] == INVALID_PARAMS
    assert "required field missing @ $.params.textDocument" in error["message"]  # named
    server.send(request(3, "textDocument/completion", "not an object"))
    assert server.response(3, timeout=10)["error"]["code"] == INVALID_PARAMS
    assert "result" in server.call(STATUS, {}, timeout=10)


def test_a_request_with_an_id_of_the_wrong_type_gets_invalid_request(server: RawServer) -> None:
    server.send({"jsonrpc": "2.0", "id": {"x": 1}, "method": STATUS, "params": {}})
    error = server.wait_for(lambda m: "error" in m, 10)
    assert error["error"]["code"] == INVALID_REQUEST and error["id"] is None


# --- lifecycle (defect 10a / 10b) -----------------------------------------------------------


def test_requests_before_initialize_get_server_not_initialized(bare: RawServer) -> None:
    bare.send(request(1, STATUS, {}))
    assert bare.response(1, timeout=30)["error"]["code"] == NOT_INITIALIZED
    bare.send(did_open(URI, "x = 1\n"))  # a notification before initialize: dropped
    bare.initialize()
    assert open_uris(bare) == []


def test_exit_without_shutdown_exits_with_1(server: RawServer) -> None:
    server.send({"jsonrpc": "2.0", "method": "exit"})
    assert server.wait_exit(30) == 1


def test_exit_after_shutdown_exits_with_0(server: RawServer) -> None:
    assert server.call("shutdown", None, timeout=30)["result"] is None
    server.send(request(9, STATUS, {}))  # after shutdown: refused, not ignored
    assert server.response(9, timeout=10)["error"]["code"] == INVALID_REQUEST
    server.send({"jsonrpc": "2.0", "method": "exit"})
    assert server.wait_exit(30) == 0


def test_exit_before_initialize_exits_with_1(bare: RawServer) -> None:
    bare.send({"jsonrpc": "2.0", "method": "exit"})
    assert bare.wait_exit(30) == 1


# --- bookkeeping (defect 1) -----------------------------------------------------------------


async def test_notifications_leave_no_request_futures() -> None:
    """pygls 2.1.1 keeps a future per notification and per generator step: none may stay."""
    from lsp_complete.server import create_server

    server = create_server()
    protocol = server.protocol
    sent: list[bytes] = []
    protocol.set_writer(type("W", (), {"write": lambda _s, d: sent.append(d),
                                       "close": lambda _s: None})())

    def deliver(message: dict[str, Any]) -> None:
        protocol.handle_message(json.loads(json.dumps(message),
                                           object_hook=protocol.structure_message))

    deliver(request(1, "initialize", {"processId": None, "capabilities": {}}))
    await asyncio.sleep(0.05)
    for n in range(50):
        uri = f"file:///work/f{n % 5}.py"
        deliver(did_open(uri, "x = 1\n"))
        deliver({"jsonrpc": "2.0", "method": "textDocument/didChange", "params": {
            "textDocument": {"uri": uri, "version": 2},
            "contentChanges": [{"range": {"start": {"line": 0, "character": 0},
                                          "end": {"line": 0, "character": 0}}, "text": "y"}]}})
        deliver({"jsonrpc": "2.0", "method": "lsp-complete/didMoveCursor", "params": {
            "textDocument": {"uri": uri}, "position": {"line": 0, "character": 1}}})
        deliver({"jsonrpc": "2.0", "method": "textDocument/didClose", "params": {
            "textDocument": {"uri": uri}}})
        deliver({"jsonrpc": "2.0", "method": "$/setTrace", "params": {"value": "off"}})
    await asyncio.sleep(0.1)
    assert protocol._request_futures == {}
    server.scheduler.stop()


async def test_a_cancelled_step_of_a_generator_handler_cancels_its_request() -> None:
    """pygls called `result()` on a cancelled step of a generator handler (`initialize`,
    `shutdown`): a CancelledError in asyncio's log, the request never answered."""
    from concurrent.futures import Future

    from lsp_complete.server import create_server

    server = create_server()
    protocol = server.protocol
    logged: list[dict[str, Any]] = []
    asyncio.get_running_loop().set_exception_handler(lambda _loop, ctx: logged.append(ctx))

    async def step() -> None:
        await asyncio.Event().wait()

    def handler() -> Any:
        yield step, (), None
        return "never"

    ended: list[Future[Any]] = []
    protocol._execute_handler("req", handler, ended.append)
    inner = [f for key, f in protocol._request_futures.items() if key != "req"]
    assert len(inner) == 1
    inner[0].cancel()
    for _ in range(5):
        await asyncio.sleep(0)
    assert logged == []
    assert len(ended) == 1 and ended[0].cancelled()  # answered: RequestCancelled
    server.scheduler.stop()


# --- the frame reader in process ------------------------------------------------------------


class Chunks:
    """A byte source giving `chunks` one per read; then the end, or nothing ever (`open`)."""

    def __init__(self, *chunks: bytes, open_end: bool = False) -> None:
        self.chunks = list(chunks)
        self.open_end = open_end

    async def read(self, n: int = -1) -> bytes:
        if self.chunks:
            return self.chunks.pop(0)
        if self.open_end:
            await asyncio.Event().wait()
        return b""


async def frames_of(source: Chunks, limit: int = 10, **kwargs: Any) -> list[Any]:
    from lsp_complete.server.framing import FrameReader, Message

    reader = FrameReader(source, **kwargs)
    out: list[Any] = []
    while len(out) < limit and (f := await reader.next_frame()) is not None:
        out.append(f.payload if isinstance(f, Message) else f)
    return out


MSG_A = {"jsonrpc": "2.0", "id": 1, "method": "a", "params": {"text": "Content-Length: 3"}}
MSG_B = {"jsonrpc": "2.0", "method": "b", "params": [1, 2, 3]}


async def test_reader_splits_messages_cut_at_every_byte() -> None:
    stream = frame(encode(MSG_A)) + b"Content-Type: x\r\n" + frame(encode(MSG_B))
    assert await frames_of(Chunks(*[stream[i:i + 1] for i in range(len(stream))])) == [
        MSG_A, MSG_B]


async def test_reader_recovers_from_wrong_lengths() -> None:
    a, b = encode(MSG_A), encode(MSG_B)
    assert await frames_of(Chunks(frame(a, len(a) + 30) + frame(b))) == [MSG_A, MSG_B]
    assert await frames_of(Chunks(frame(a, len(a) - 5) + frame(b))) == [MSG_A, MSG_B]
    assert await frames_of(Chunks(frame(a, len(a) - 5), frame(b))) == [MSG_A, MSG_B]
    # Too long and nothing follows: taken once the client has been quiet for a while.
    assert await frames_of(Chunks(frame(a, len(a) + 30), open_end=True), limit=1,
                           stall_s=0.05) == [MSG_A]


async def test_reader_refuses_oversize_messages_without_holding_them() -> None:
    from lsp_complete.server.framing import FrameReader, TooLarge

    big = encode({"jsonrpc": "2.0", "id": "big", "method": "x", "params": "p" * 1_000_000})
    stream = frame(big) + frame(encode(MSG_B))
    chunks = [stream[i:i + 65536] for i in range(0, len(stream), 65536)]
    reader = FrameReader(Chunks(*chunks), max_message_bytes=100_000)
    first = await reader.next_frame()
    assert first == TooLarge(len(big), "big")
    assert len(reader._buf) <= 2 * 65536
    second = await reader.next_frame()
    assert second is not None and second.payload == MSG_B
    # A length no stream could hold: the next header shows where the message really ended.
    out = await frames_of(Chunks(frame(encode(MSG_A), 10**22) + frame(encode(MSG_B))))
    assert out == [TooLarge(sys.maxsize, 1), MSG_B]


async def test_reader_skips_garbage_and_reports_bad_json() -> None:
    from lsp_complete.server.framing import Unparsable

    out = await frames_of(Chunks(b"\x00garbage}" + frame(b"{nope") + b"\r\n" + frame(b"[]")
                                 + b"x" * 20000 + frame(encode(MSG_B))))
    assert isinstance(out[0], Unparsable) and out[1:] == [[], MSG_B]
    assert await frames_of(Chunks(frame(b'{"t": "\xff"}'))) == [{"t": "\ufffd"}]


async def test_reader_says_what_is_wrong_in_the_clients_words() -> None:
    """A 5,000-digit id was refused with Python's advice ("use sys.set_int_max_str_digits()")."""
    from lsp_complete.server.framing import Unparsable

    out = await frames_of(Chunks(frame(b'{"id": ' + b"9" * 5000 + b"}")))
    assert len(out) == 1 and isinstance(out[0], Unparsable), out
    assert "digits" in out[0].reason and "sys." not in out[0].reason, out[0].reason


async def test_reader_refuses_a_length_that_is_no_number_with_the_id() -> None:
    from lsp_complete.server.framing import BadLength

    a, b = encode(MSG_A), encode(MSG_B)
    out = await frames_of(Chunks(b"Content-Length: -5\r\n\r\n" + a + frame(b)))
    assert out == [BadLength("-5", 1), MSG_B]
    # The id is taken only when whole: "12" cut after "1" is not 1.
    cut = b'Content-Length: x\r\n\r\n{"jsonrpc": "2.0", "id": 1'
    out = await frames_of(Chunks(cut, b'2, "method": "a"}' + frame(b)))
    assert out == [BadLength("x", 12), MSG_B]
    # A notification: refused without an id; nothing of it is taken for a message.
    assert await frames_of(Chunks(b"Content-Length: abc\r\n\r\n" + b + frame(a))) == [
        BadLength("abc", None), MSG_A]


async def test_bounded_stream_holds_back_past_the_soft_bound_and_drops_past_the_hard() -> None:
    """Issue 32: what a client has not read is bounded. Past the soft bound `room()` waits
    (the server reads no more of its requests) until the client reads; past the hard bound
    the connection is dropped, its unsent bytes thrown away."""
    import socket

    from lsp_complete.server.framing import BoundedStream

    ours, theirs = socket.socketpair()
    _, writer = await asyncio.open_connection(sock=ours)
    out = BoundedStream(writer, "test", soft=1 << 20, hard=8 << 20)
    out.write(b"x" * (2 << 20))
    assert out.unsent() > 1 << 20  # the kernel's buffer holds far less than 2 MiB
    room = asyncio.ensure_future(out.room())
    for _ in range(10):
        await asyncio.sleep(0)
    assert not room.done()  # the client reads nothing: no room

    def read(size: int) -> int:
        got = 0
        while got < size:
            got += len(theirs.recv(1 << 20))
        return got

    assert await asyncio.to_thread(read, 2 << 20) == 2 << 20
    await asyncio.wait_for(room, 30)  # read: room again
    for _ in range(9):
        out.write(b"y" * (1 << 20))
    assert out.dropped and writer.is_closing()
    with pytest.raises(ConnectionError):
        await out.room()
    out.write(b"z")  # after the drop: nothing more is queued
    assert out.unsent() == 0
    theirs.close()
    writer.close()


def test_guess_id_reads_only_the_top_level() -> None:
    from lsp_complete.server.framing import guess_id

    assert guess_id(b'{"jsonrpc": "2.0", "id": 7, "params": {"x"') == 7
    assert guess_id(b'{"params": {"id": 3}, "id": "s"}') == "s"
    assert guess_id(b'{"params": {"id": 3}, "more": "cut o') is None
    assert guess_id(b'{"id": true}') is None
    assert guess_id(b"[1]") is None
    assert guess_id(b'{"id": 12') is None  # perhaps 123 in the bytes still to come


# --- what a stranger's client may send (round 4) ---------------------------------------------


def shown(server: RawServer, text: str, timeout: float = 10) -> str:
    """The first window/showMessage whose text holds `text`."""
    message = server.wait_for(lambda m: m.get("method") == "window/showMessage"
                              and text in m["params"]["message"], timeout, f"a message on {text}")
    return str(message["params"]["message"])


def test_settings_that_would_abort_llama_cpp_are_refused(tiny_model_path: Path) -> None:
    """More slots than llama.cpp's batch has tokens, or a context smaller than one batch, made
    llama.cpp assert and abort the process at model load, from initialize or later."""
    server = RawServer(tiny_model_path)
    try:
        server.initialize({"slots": 33, "contextSize": 16})
        assert server.wait_ready()["model"]["state"] == "ready"
        assert "contextSize" in shown(server, "slots")  # one message per change
        server.notify("workspace/didChangeConfiguration",
                      {"settings": {"lspComplete": {"slots": 40}}})
        server.send(did_open(URI, "def add(a, b):\n    return \n"))
        server.send(inline_request(1, 1, 11))
        assert "result" in server.response(1, timeout=30)
        assert server.alive()
    finally:
        server.close()


@pytest.mark.parametrize("options", ["slots=33", "n_ctx=63"])
def test_the_engine_refuses_what_llama_cpp_would_abort_on(tiny_model_path: Path,
                                                          options: str) -> None:
    """In a process of its own: an abort would take the test run with it."""
    import subprocess

    code = ("from lsp_complete.engine.base import EngineError\n"
            "from lsp_complete.engine.llama import LlamaEngine\n"
            f"try:\n    LlamaEngine({str(tiny_model_path)!r}, n_threads=1, {options})\n"
            "except EngineError as exc:\n    print('refused:', exc)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert b"refused:" in done.stdout and b"cannot be made" in done.stdout


def test_stdout_carries_lsp_messages_alone() -> None:
    """What else writes to file descriptor 1 (llama.cpp's backtrace when it aborts, a stray
    print) goes to stderr: on stdout it broke the client's framing."""
    code = ("import os\nfrom lsp_complete.server.framing import claim_stdout\n"
            "channel = claim_stdout()\nos.write(1, b'native junk\\n')\nprint('stray print')\n"
            "channel.write(b'Content-Length: 2\\r\\n\\r\\n{}')\nchannel.flush()\n")
    import subprocess

    done = subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout == b"Content-Length: 2\r\n\r\n{}"
    assert b"native junk" in done.stderr and b"stray print" in done.stderr


def test_a_change_that_cannot_be_read_stops_the_file_until_it_comes_whole(
        server: RawServer) -> None:
    """A didChange with a number out of range was dropped with a log line: the server's text
    then differed from the editor's for good, and its suggestions were for text nobody saw."""
    server.send(did_open(URI, "abc\n"))
    bad = {"range": {"start": {"line": -1, "character": 0}, "end": {"line": 0, "character": 0}},
           "text": "2"}
    server.notify("textDocument/didChange", {"textDocument": {"uri": URI, "version": 2},
                                             "contentChanges": [bad]})
    assert "could not be read" in shown(server, "could not be read")
    documents = server.call(STATUS, {})["result"]["documents"]
    assert "could not be read" in documents[0]["disabled"]
    server.send(inline_request(1, 0, 3))
    assert server.response(1, timeout=30)["result"]["items"] == []
    server.notify("textDocument/didChange", {"textDocument": {"uri": URI, "version": 3},
                                             "contentChanges": [{"text": "abc = 1\n"}]})
    assert server.call(STATUS, {})["result"]["documents"][0]["disabled"] == ""


def test_an_open_that_cannot_be_read_says_so_not_that_none_came(server: RawServer) -> None:
    """Round 9: a didOpen with a number out of range (a version of 2^40) was dropped with a
    log line, and the file's requests were then told as "no didOpen for this exact URI": the
    user would look for a wrong URI. The open's own failure is told, once; a reopen of an
    open file that cannot be read leaves it out of sync, as a lost change does."""
    opened = did_open(URI, "abc\n")
    opened["params"]["textDocument"]["version"] = 2**40
    server.send(opened)
    told = shown(server, "could not be read")
    assert "didOpen of file:///work/robust.py" in told and "params.textDocument" in told, told
    server.send(inline_request(1, 0, 3))
    assert server.response(1, timeout=30)["result"]["items"] == []
    server.call(STATUS, {})  # after any message the request caused
    messages = [m["params"]["message"] for m in server.messages()
                if m.get("method") == "window/showMessage"]
    assert not any("no didOpen" in m for m in messages), messages
    server.send(did_open(URI, "abc\n"))
    assert server.call(STATUS, {})["result"]["documents"][0]["disabled"] == ""
    server.send(opened)  # again, while it is open
    documents = server.call(STATUS, {})["result"]["documents"]
    assert "could not be read" in documents[0]["disabled"]


def test_bad_uris_and_roots_lose_nothing_else(tmp_path: Path, tiny_model_path: Path) -> None:
    """A lone surrogate in one workspace folder's URI, a NUL in rootPath or a path longer than
    the system allows failed initialize (the good folder and the settings lost with it); an
    unclosed `[` in a document's URI failed every request on it; executeCommand without its
    (optional) arguments failed."""
    good = tmp_path / "ws"
    good.mkdir()
    server = RawServer(tiny_model_path)
    try:
        answer = server.call("initialize", {
            "processId": None, "capabilities": {}, "rootPath": "/tmp\u0000/x",
            "workspaceFolders": [{"uri": good.as_uri(), "name": "ws"},
                                 {"uri": "file:///tmp/\ud800", "name": "bad"},
                                 {"uri": "file:///" + "a/" * 3000, "name": "long"}],
            "initializationOptions": {"threads": 1, "contextSize": 4096, "maxTokens": 7}}, 60)
        assert "result" in answer, answer
        server.notify("initialized", {})
        status = server.wait_ready()
        assert status["repository"]["roots"] == [str(good.resolve())]
        odd = "http://[::1/x.py"
        server.send({"jsonrpc": "2.0", "method": "textDocument/didOpen", "params": {
            "textDocument": {"uri": odd, "languageId": "python", "version": 1,
                             "text": "def add(a, b):\n    return \n"}}})
        server.send(request(1, "textDocument/inlineCompletion", {
            "textDocument": {"uri": odd}, "position": {"line": 1, "character": 11},
            "context": {"triggerKind": 2}}))
        assert "result" in server.response(1, timeout=30)
        server.notify("textDocument/didSave", {"textDocument": {"uri": "file:///tmp/\ud800.py"}})
        server.send(request(2, "workspace/executeCommand", {"command": "lsp-complete.accepted"}))
        assert "result" in server.response(2, timeout=10)
        assert server.alive()
        assert "Traceback" not in json.dumps(server.messages())
    finally:
        server.close()


# --- what a stranger's client may send (round 5) ---------------------------------------------


def initialize_with(server: RawServer, capabilities: dict[str, Any],
                    options: dict[str, Any] | None = None,
                    root: Path | None = None) -> dict[str, Any]:
    answer = server.call("initialize", {
        "processId": None, "capabilities": capabilities,
        "rootUri": root.as_uri() if root else None,
        "initializationOptions": {"threads": 1, "contextSize": 4096, **(options or {})}})
    assert "result" in answer, answer
    server.notify("initialized", {})
    return dict(answer["result"])


def server_request(server: RawServer, method: str, timeout: float = 30) -> dict[str, Any]:
    return server.wait_for(lambda m: m.get("method") == method and "id" in m, timeout, method)


def test_a_client_that_never_agrees_to_progress_still_gets_its_model(
        tiny_model_path: Path) -> None:
    """A client that advertises workDoneProgress but never answers (or answers malformed)
    window/workDoneProgress/create: the model stayed "loading" for ever, every suggestion
    empty, nothing told."""
    server = RawServer(None, answers=False)
    try:
        initialize_with(server, {"window": {"workDoneProgress": True}},
                        {"model": str(tiny_model_path)})
        asked = server_request(server, "window/workDoneProgress/create")
        assert server.wait_ready(timeout=30)["model"]["state"] == "ready"
        server.send({"id": asked["id"], "result": None})  # late, and without "jsonrpc"
        server.send(did_open(URI, "def add(a, b):\n    return \n"))
        server.send(inline_request(1, 1, 11))
        assert "result" in server.response(1, timeout=30)
    finally:
        server.close()


def test_a_second_initialize_is_refused_and_changes_nothing(
        tmp_path: Path, tiny_model_path: Path) -> None:
    """LSP sends initialize once. A second one switched the position encoding under the open
    documents (utf-8 to utf-16), dropped the roots and loaded the model again."""
    server = RawServer(tiny_model_path)
    try:
        result = initialize_with(server, {"general": {"positionEncodings": ["utf-8"]}})
        assert result["capabilities"]["positionEncoding"] == "utf-8"
        server.notify("workspace/didChangeWorkspaceFolders", {"event": {
            "added": [{"uri": tmp_path.as_uri(), "name": "p"}], "removed": []}})
        assert server.wait_ready()["model"]["state"] == "ready"
        server.send(did_open(URI, "s = '😀'\nx = \n"))
        before = server.call(STATUS, {})["result"]
        again = server.call("initialize", {"processId": None, "capabilities": {},
                                           "rootUri": None, "initializationOptions": {}})
        assert again["error"]["code"] == INVALID_REQUEST, again
        after = server.call(STATUS, {})["result"]
        for key in ("positionEncoding", "roots", "model"):
            assert after.get(key) == before.get(key), key
        assert open_uris(server) == [URI]
    finally:
        server.close()


async def test_an_answer_that_does_not_parse_ends_its_wait_at_once() -> None:
    """`result: null` to workspace/configuration (clients send it) did not parse and was
    dropped: the server waited out its 5 s timeout before loading the model. Such an answer
    (or one without "jsonrpc") now fails its request at once."""
    from lsp_complete.server import create_server

    server = create_server()
    protocol = server.protocol
    sent: list[bytes] = []
    protocol.set_writer(type("W", (), {"write": lambda _s, d: sent.append(d),
                                       "close": lambda _s: None})())
    protocol.handle_payload(request(1, "initialize", {"processId": None, "capabilities": {}}))
    await asyncio.sleep(0.05)
    for answer in ({"jsonrpc": "2.0", "result": None}, {"result": []}):
        sent.clear()
        waiting = protocol.send_request_async(types.WORKSPACE_CONFIGURATION,
                                              types.ConfigurationParams(items=[]))
        asked = json.loads(b"".join(sent).split(b"\r\n\r\n", 1)[1])
        protocol.handle_payload({**answer, "id": asked["id"]})
        with pytest.raises(ValueError, match="does not parse"):  # not TimeoutError
            await asyncio.wait_for(waiting, 2)
    server.scheduler.stop()


def test_a_model_that_fails_again_after_a_good_one_is_told_again(
        tmp_path: Path, tiny_model_path: Path) -> None:
    missing = tmp_path / "missing.gguf"
    server = RawServer(None)
    try:
        initialize_with(server, {}, {"model": str(missing)})
        shown(server, "missing.gguf")
        for model in (tiny_model_path, missing):
            server.notify("workspace/didChangeConfiguration",
                          {"settings": {"lspComplete": {"model": str(model)}}})
            assert server.wait_ready()["model"]["state"] == ("ready" if model != missing
                                                             else "error")
        shown(server, "missing.gguf")
    finally:
        server.close()


# --- round 5, continued ----------------------------------------------------------------------


def popups(server: RawServer) -> list[str]:
    return [m["params"]["message"] for m in server.messages()
            if m.get("method") == "window/showMessage"]


def test_a_whole_settings_tree_is_told_in_one_message(server: RawServer) -> None:
    """A client that sends its whole settings tree without the `lspComplete` section (Helix,
    Neovim setups do) got one window/showMessage per key: 300 keys, 300 popups. Now one for
    the unknown keys, naming the first ten, and one for the values refused."""
    assert server.wait_ready()["model"]["state"] == "ready"
    before = len(popups(server))
    tree = {**{f"k{i}": {"nested": i} for i in range(300)}, "maxTokens": -1, "slots": "many"}
    server.notify("workspace/didChangeConfiguration", {"settings": tree})
    time.sleep(0.5)
    assert server.call(STATUS, {})["result"]["model"]["state"] == "ready"
    told = popups(server)[before:]
    assert len(told) == 2, told
    unknown = next(m for m in told if "unknown settings" in m)
    assert "'k0'" in unknown and "'k9'" in unknown and "and 290 more" in unknown
    assert '"lspComplete"' in unknown
    assert "'k10'" not in unknown
    refused = next(m for m in told if "maxTokens" in m)
    assert "setting 'slots': expected an integer" in refused


def test_exit_right_after_shutdown_saves_the_caches_first(tmp_path: Path,
                                                          tiny_model_path: Path) -> None:
    """`exit` written right behind `shutdown`, without waiting for its answer: the event loop
    ended under the shutdown handler, whose cancelled wait reached asyncio's log as a
    CancelledError traceback, and a save queued behind a busy worker was cancelled with it
    (nothing saved). Now the save is done (or given up after SHUTDOWN_PERSIST_S) first."""
    from lsp_complete.engine.kvstore import KVStore

    cache = tmp_path / "cache"
    env = {**os.environ, "LSP_COMPLETE_CACHE_DIR": str(cache),
           "LSP_COMPLETE_SIMULATE_DECODE_MS": "700"}  # the worker busy when shutdown comes
    server = RawServer(tiny_model_path, env=env)
    try:
        server.initialize({"maxTokens": 2})
        assert server.wait_ready()["model"]["state"] == "ready"
        server.send(did_open(URI, "def add(a, b):\n    return \n"))
        server.send(inline_request(1, 1, 11))
        assert "result" in server.response(1, timeout=60)
        server.send(inline_request(2, 1, 4))  # in flight: its decode holds the worker
        time.sleep(0.1)
        server.write(frame(encode(request(3, "shutdown"))) + frame(encode(
            {"jsonrpc": "2.0", "method": "exit"})))
        assert server.wait_exit(30) == 0
        errors = server.stderr()
        assert "Traceback" not in errors and "CancelledError" not in errors, errors
    finally:
        server.close()
    store = KVStore(cache / "kv")
    try:
        assert list(store._cache), "the KV cache was saved before the process exited"
    finally:
        store.close()


def test_a_second_request_with_the_id_of_one_in_flight_is_refused(
        tiny_model_path: Path) -> None:
    """Two requests in flight with one id: pygls filed the second's future over the first's,
    and one of the two answers was lost. Ids are unique, so the second gets -32600 and the
    first goes on to its answer; once answered, its id may be used again."""
    env = {**os.environ, "LSP_COMPLETE_SIMULATE_DECODE_MS": "300"}  # the first still running
    server = RawServer(tiny_model_path, env=env)
    try:
        server.initialize({"maxTokens": 2})
        assert server.wait_ready()["model"]["state"] == "ready"
        server.send(did_open(URI, "def add(a, b):\n    return \n"))
        server.write(frame(encode(inline_request(7, 1, 11))) +
                     frame(encode(inline_request(7, 1, 4))))
        refused = server.wait_for(lambda m: m.get("id") == 7 and "error" in m, 30, "refusal")
        assert refused["error"]["code"] == INVALID_REQUEST, refused
        assert "still in flight" in refused["error"]["message"]
        assert "result" in server.response(7, timeout=60)
        time.sleep(0.5)
        assert [m for m in server.messages() if m.get("id") == 7] == []  # two answers in all
        server.send(inline_request(7, 1, 11))
        assert "result" in server.response(7, timeout=60)
    finally:
        server.close()


# --- round 10 --------------------------------------------------------------------------------


class _AllAtOnce:
    """A byte source that has everything a client wrote at once, then ends."""

    def __init__(self, data: bytes) -> None:
        self._data = data

    async def read(self, n: int = -1) -> bytes:
        data, self._data = self._data, b""
        return data


async def test_cursor_moves_a_newer_one_supersedes_are_skipped_in_the_clients_order() -> None:
    """Of cursor notifications the reader has in hand together, only the newest per document
    is acted on; any other message (here a change) is handled after the moves sent before it
    and before those sent after it, and the last move of all is acted on."""
    from lsp_complete.server import CURSOR_METHOD, create_server
    from lsp_complete.server.framing import serve

    server = create_server()
    protocol = server.protocol
    protocol.set_writer(type("W", (), {"write": lambda _s, d: None,
                                       "close": lambda _s: None})())
    protocol.handle_payload(request(1, "initialize", {"processId": None, "capabilities": {}}))
    await asyncio.sleep(0.05)
    seen: list[tuple[str, str, int]] = []
    server.files.cursor_moved = lambda uri, line, _c: seen.append(("move", uri, line))
    server.files.change = lambda params: seen.append(("change", params.text_document.uri, 0))

    def move(uri: str, line: int) -> dict[str, Any]:
        return {"jsonrpc": "2.0", "method": CURSOR_METHOD, "params": {
            "textDocument": {"uri": uri}, "position": {"line": line, "character": 0}}}

    change = {"jsonrpc": "2.0", "method": "textDocument/didChange", "params": {
        "textDocument": {"uri": "a", "version": 2},
        "contentChanges": [{"text": "x = 1\n"}]}}
    sent = [move("a", 1), move("b", 1), move("a", 2), change, move("a", 3), move("b", 2),
            move("a", 4)]
    await serve(protocol, _AllAtOnce(b"".join(frame(encode(m)) for m in sent)))
    assert seen == [("move", "b", 1), ("move", "a", 2), ("change", "a", 0), ("move", "b", 2),
                    ("move", "a", 4)]
    server.scheduler.stop()


def test_a_message_that_cannot_be_read_is_one_log_line_not_a_traceback(
        server: RawServer) -> None:
    """pygls logged cattrs' exception group (about 60 lines of traceback) for every message
    whose params do not fit their type, beside our own line: a client that sends a malformed
    didChange on each key flooded the user's log. Each is one line now, naming the field and
    why, and the client is told what it was before."""
    server.send(did_open(URI, "abc\n"))
    bad = {"range": {"start": {"line": -1, "character": 0}, "end": {"line": 0, "character": 0}},
           "text": "2"}
    for version in (2, 3, 4):
        server.notify("textDocument/didChange", {"textDocument": {"uri": URI, "version": version},
                                                 "contentChanges": [bad]})
    server.send(request(1, "textDocument/inlineCompletion", {
        "textDocument": {"uri": URI}, "position": {"line": 0, "character": 0}}))
    error = server.response(1, timeout=10)["error"]
    assert error == {"code": INVALID_PARAMS, "message": "invalid params for "
                     "textDocument/inlineCompletion: required field missing @ $.params.context"}
    assert "could not be read" in shown(server, "could not be read")
    server.call(STATUS, {})
    log = server.stderr()
    assert "Traceback" not in log and "Unable to deserialize" not in log, log
    changes = [line for line in log.splitlines() if "textDocument/didChange" in line]
    assert len(changes) == 3, log
    assert all("Position.line should be in range" in line and "but was -1" in line
               and "$.params.contentChanges[0].range.start" in line for line in changes), log
    requests = [line for line in log.splitlines() if "textDocument/inlineCompletion" in line]
    assert len(requests) == 1 and "$.params.context" in requests[0], log


def test_a_message_that_fails_to_structure_for_another_reason_keeps_its_traceback(
        caplog: pytest.LogCaptureFixture) -> None:
    """Only a message that does not fit its type is the client's mistake: a failure of the
    conversion itself is the server's, and is logged with its traceback."""
    from lsp_complete.server import create_server

    server = create_server()
    protocol = server.protocol

    class Broken:
        def structure(self, data: Any, cl: Any) -> Any:
            raise RuntimeError("a converter hook that is broken")

    protocol._converter = Broken()
    with caplog.at_level("ERROR"), pytest.raises(Exception):  # noqa: B017, PT011
        protocol.structure_message(request(1, STATUS, {}))
    assert "Traceback" in caplog.text and "a converter hook that is broken" in caplog.text
    server.scheduler.stop()


LONE_CR_SOURCE = (
    "import os\n\n\ndef mean(items):\n    total = 0\n    for item in items:\n"
    "        total += item\n    return total / len(items)\n\n\nclass Box:\n"
    "    def __init__(self, w):\n        self.w = w\n\n    def area(self):\n"
    "        return self.w * \n\n\nprint(mean([1, 2]))\n"
    + "".join(f"x{i} = {i}\n" for i in range(40)))


def test_a_file_of_lone_cr_breaks_gets_the_suggestions_of_its_lf_twin(
        tiny_model_path: Path) -> None:
    """LSP breaks lines at "\\r", "\\n" and "\\r\\n" alike. A lone-CR file's suggestions (the
    inserted text, and the range, in an inline answer and in a completion menu item) are
    those of the same file with LF or CRLF breaks: its prompt is the same. Before, the parser
    read a lone-CR Python file as a few statements on one line: the prompt lost its head, and
    the tiny model wrote something else."""
    spots = [(4, 4), (6, 16), (15, 22), (18, 0), (58, 3)]
    answers: dict[str, list[Any]] = {}
    server = RawServer(tiny_model_path)
    try:
        server.initialize()
        assert server.wait_ready()["model"]["state"] == "ready"
        for name, brk in (("lf", "\n"), ("crlf", "\r\n"), ("cr", "\r")):
            uri = f"file:///work/{name}.py"
            server.send({"jsonrpc": "2.0", "method": "textDocument/didOpen", "params": {
                "textDocument": {"uri": uri, "languageId": "python", "version": 1,
                                 "text": LONE_CR_SOURCE.replace("\n", brk)}}})
            found = []
            for line, character in spots:
                where = {"textDocument": {"uri": uri},
                         "position": {"line": line, "character": character}}
                inline = server.call("textDocument/inlineCompletion",
                                     {**where, "context": {"triggerKind": 2}}, timeout=60)
                menu = server.call("textDocument/completion", where, timeout=60)
                found.append(([(i["insertText"], i["range"]) for i in inline["result"]["items"]],
                              [(i["textEdit"]["newText"], i["textEdit"]["range"])
                               for i in menu["result"]["items"]]))
            answers[name] = found
    finally:
        server.close()
    assert any(inline for inline, _ in answers["lf"])  # (the tiny model writes something)
    assert answers["crlf"] == answers["lf"]
    assert answers["cr"] == answers["lf"]


BROKEN_SOURCE = ("import os\n\n\n"
                 + "".join(f"def func_{i}(a, b):\n    return a + b * {i}\n\n\n" for i in range(8))
                 + "def broken(x):\n    y = foo(x,\n")


@pytest.mark.parametrize("first_line", [0, 4])
def test_lines_a_formatter_replaces_in_a_broken_file_give_a_fresh_files_suggestions(
        tiny_model_path: Path, first_line: int) -> None:
    """Format on save sends one change: the whole text, or the lines from the first one it
    changed on (Neovim). In a file with a syntax error the new tree is not sound there, and
    the document kept its previous tree for the prompt's head, edited: Tree.edit squashes the
    nodes such an edit replaced, and the head became a column of " ...". The suggestion
    after the edit is now the one a freshly opened file with that text gets."""
    formatted = BROKEN_SOURCE.replace("    return", "  return").replace("    y =", "  y =")
    last = BROKEN_SOURCE.count("\n")  # (the empty line after the last line break)
    new_text = "".join(formatted.splitlines(keepends=True)[first_line:])
    assert BROKEN_SOURCE.splitlines(keepends=True)[:first_line] == \
        formatted.splitlines(keepends=True)[:first_line]
    edited, fresh = "file:///work/edited/fmt.py", "file:///work/fresh/fmt.py"
    server = RawServer(tiny_model_path)
    try:
        server.initialize()
        assert server.wait_ready()["model"]["state"] == "ready"
        server.send(did_open(edited, BROKEN_SOURCE))
        server.notify("textDocument/didChange", {
            "textDocument": {"uri": edited, "version": 2}, "contentChanges": [{
                "range": {"start": {"line": first_line, "character": 0},
                          "end": {"line": last, "character": 0}},
                "text": new_text}]})
        server.send(did_open(fresh, formatted))
        answers = {}
        for uri in (edited, fresh):
            found = server.call("textDocument/inlineCompletion", {
                "textDocument": {"uri": uri}, "position": {"line": 3, "character": 0},
                "context": {"triggerKind": 2}}, timeout=60)["result"]["items"]
            answers[uri] = [(item["insertText"], item["range"]) for item in found]
        assert "Traceback" not in server.stderr()
    finally:
        server.close()
    assert answers[fresh]  # (the tiny model writes something)
    assert answers[edited] == answers[fresh]
