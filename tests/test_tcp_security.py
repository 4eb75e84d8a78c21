"""Who may talk to the server: TCP mode's token and single session, and the environment
variables that settings may name as the API key (any transport).

The real server runs as a subprocess with the tiny model; refusals are checked with a raw
socket client (what a hostile local process would send), working sessions with pygls' client.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import socket
import stat
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from lsprotocol import types
from pytest_lsp.client import LanguageClient, make_test_lsp_client

from lsp_complete.config import api_key_env_refusal
from lsp_complete.server.tcp import TokenError, configured_token, write_token_file
from lsp_complete.testing.lsp_client import (
    client_capabilities,
    initialize_params,
    inline,
    open_doc,
    server_command,
    status,
    suggestion_of,
    wait_for_state,
)
from tests import flood
from tests.lsp_helpers import SOURCE, start_server

LINE, COL = 11, len("    for line in read_li")
TOKEN = "test-token-0123456789abcdefghij"
SECRET_VAR = "PLANTED_SECRET_FOR_LSP_TEST"
SECRET = "s3cr3t-value-that-must-never-leave"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def listening(port: int) -> bool:
    """Something listens on 127.0.0.1:port (Linux /proc: state 0A is LISTEN)."""
    wanted = f"0100007F:{port:04X}"
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        if fields[1] == wanted and fields[3] == "0A":
            return True
    return False


# --------------------------------------------------------------------------- the server process


@dataclass
class TcpServer:
    proc: subprocess.Popen[bytes]
    port: int
    token: str | None
    stderr: list[str] = field(default_factory=list)

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None

    def log(self) -> str:
        return "".join(self.stderr)

    async def logged(self, text: str, timeout: float = 10) -> bool:
        """`text` shows in the server's stderr (read by a thread: it may come a bit later)."""
        deadline = time.monotonic() + timeout
        while text not in self.log() and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        return text in self.log()

    def wait_exit(self, timeout: float = 15) -> int | None:
        with contextlib.suppress(subprocess.TimeoutExpired):
            return self.proc.wait(timeout)
        return None

    def stop(self) -> None:
        if self.alive:
            self.proc.terminate()
            if self.wait_exit(10) is None:
                self.proc.kill()
                self.proc.wait(10)


def launch_tcp(model: Path | None, runtime_dir: Path, *, token: str | None = TOKEN,
               args: tuple[str, ...] = (), env: dict[str, str] | None = None,
               wait_listening: bool = True) -> TcpServer:
    """`serve --tcp PORT`, its token from LSP_COMPLETE_TOKEN (or none: the server makes one)."""
    port = free_port()
    full_env = {**os.environ, "XDG_RUNTIME_DIR": str(runtime_dir), **(env or {})}
    full_env.pop("LSP_COMPLETE_TOKEN", None)
    if token is not None:
        full_env["LSP_COMPLETE_TOKEN"] = token
    proc = subprocess.Popen(
        [*server_command(model), "--tcp", str(port), *args],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        env=full_env,
    )
    server = TcpServer(proc, port, token)

    def drain() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            server.stderr.append(line.decode("utf-8", "replace"))

    threading.Thread(target=drain, daemon=True).start()
    if wait_listening:
        deadline = time.monotonic() + 60
        while not listening(port):
            if not server.alive or time.monotonic() > deadline:
                server.stop()
                raise AssertionError(f"the server did not listen:\n{server.log()}")
            time.sleep(0.05)
    return server


@pytest.fixture
def tcp_server(tiny_model_path: Path, tmp_path: Path) -> Iterator[TcpServer]:
    server = launch_tcp(tiny_model_path, tmp_path / "run")
    yield server
    server.stop()


# --------------------------------------------------------------------------- clients


class RawConnection:
    """A bare JSON-RPC connection: what any local process can send."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer

    @classmethod
    async def open(cls, port: int) -> RawConnection:
        return cls(*await asyncio.open_connection("127.0.0.1", port))

    async def send(self, message: dict[str, Any]) -> None:
        body = json.dumps(message).encode()
        with contextlib.suppress(ConnectionError):
            self.writer.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
            await self.writer.drain()

    async def receive(self, timeout: float = 10) -> dict[str, Any] | None:
        """The next message, or None once the server closed the connection."""
        async def read() -> dict[str, Any] | None:
            length = None
            while True:
                line = await self.reader.readline()
                if not line:
                    return None
                if line in (b"\r\n", b"\n") and length is not None:
                    return json.loads(await self.reader.readexactly(length))
                if line.lower().startswith(b"content-length:"):
                    length = int(line.split(b":")[1])

        try:
            return await asyncio.wait_for(read(), timeout)
        except (ConnectionError, asyncio.IncompleteReadError):
            return None

    async def answer_to(self, msg_id: int, timeout: float = 10) -> dict[str, Any] | None:
        """The response with this id (server notifications skipped), None if closed first."""
        while True:
            message = await self.receive(timeout)
            if message is None or message.get("id") == msg_id and "method" not in message:
                return message

    async def closed_by_server(self, timeout: float = 10) -> bool:
        """The server closes the connection (whatever it sent first is ignored)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                if await self.receive(max(0.1, deadline - time.monotonic())) is None:
                    return True
            except TimeoutError:
                return False
        return False

    def close(self) -> None:
        self.writer.close()


def initialize_message(msg_id: int = 1, options: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": msg_id, "method": "initialize",
            "params": {"processId": None, "capabilities": {},
                       "initializationOptions": options}}


async def tcp_client(server: TcpServer, options: dict[str, Any] | None = None,
                     wait_ready: bool = True) -> LanguageClient:
    """pygls' client over TCP, initialized with the server's token."""
    client = make_test_lsp_client()
    await client.start_tcp("127.0.0.1", server.port)
    token = {"token": server.token} if server.token else {}
    await client.initialize_session(initialize_params(
        {"threads": 1, "contextSize": 4096, **token, **(options or {})},
        client_capabilities(work_done_progress=True),
    ))
    if wait_ready:
        await wait_for_state(client, ("ready", "error"))
    return client


async def hang_up(client: LanguageClient) -> None:
    """Drop the connection without shutdown or exit, as a crashed editor does."""
    client.protocol.writer.close()
    await client.stop()


async def suggests(client: LanguageClient, uri: str) -> str:
    open_doc(client, uri, SOURCE)
    text, _ = suggestion_of(await inline(client, uri, LINE, COL))
    return text


# --------------------------------------------------------------------------- the token


@pytest.mark.parametrize("options", [None, {"threads": 1}, {"token": "wrong-token-0123456789"},
                                     {"token": 12345}], ids=["none", "missing", "wrong", "type"])
async def test_initialize_without_the_right_token_is_refused_and_closed(tcp_server, options):
    conn = await RawConnection.open(tcp_server.port)
    await conn.send(initialize_message(1, options))
    answer = await conn.answer_to(1)
    assert answer is not None and "result" not in answer, answer
    assert "token" in answer["error"]["message"]
    assert await conn.closed_by_server()
    assert tcp_server.alive
    assert await tcp_server.logged("refused")


async def test_nothing_before_a_successful_initialize_is_processed(tcp_server) -> None:
    conn = await RawConnection.open(tcp_server.port)
    await conn.send({"jsonrpc": "2.0", "id": 1, "method": "lsp-complete/status", "params": {}})
    answer = await conn.answer_to(1)
    assert answer is not None and "result" not in answer, answer
    assert answer["error"]["code"] == -32002  # ServerNotInitialized
    await conn.send({"jsonrpc": "2.0", "method": "textDocument/didOpen", "params": {
        "textDocument": {"uri": "file:///early.py", "languageId": "python", "version": 1,
                         "text": SOURCE}}})
    await conn.send(initialize_message(2, {"token": TOKEN, "threads": 1}))
    answer = await conn.answer_to(2)
    assert answer is not None and "capabilities" in answer["result"], answer
    await conn.send({"jsonrpc": "2.0", "id": 3, "method": "lsp-complete/status", "params": {}})
    answer = await conn.answer_to(3)
    assert answer is not None and answer["result"]["documents"] == []  # the early didOpen
    conn.close()


async def test_the_right_token_gives_a_working_session_and_is_not_a_setting(tcp_server) -> None:
    client = await tcp_client(tcp_server)
    try:
        assert (await status(client))["model"]["state"] == "ready"
        assert (await suggests(client, "file:///work/a.py")).startswith("read_li")
        # The token is the transport's: it never reaches the settings ("unknown setting").
        assert not [m for m in client.messages if "token" in m.message]
    finally:
        await client.shutdown_session()
        await client.stop()
    assert tcp_server.wait_exit() == 0


# --------------------------------------------------------------------------- one session


async def test_a_second_connection_is_refused_and_the_first_keeps_working(tcp_server) -> None:
    first = await tcp_client(tcp_server)
    try:
        uri = "file:///work/private.py"
        before = await suggests(first, uri)
        assert before.startswith("read_li")
        second = await RawConnection.open(tcp_server.port)
        await second.send(initialize_message(1, {"token": TOKEN}))  # even the right token
        await second.send({"jsonrpc": "2.0", "id": 2, "method": "lsp-complete/status"})
        assert await second.closed_by_server()
        assert await tcp_server.logged("another client")
        # A third one that connects and hangs up at once: the server and the session stay.
        third = await RawConnection.open(tcp_server.port)
        third.close()
        await asyncio.sleep(0.5)
        assert tcp_server.alive
        st = await status(first)
        assert [d["uri"] for d in st["documents"]] == [uri]
        text, _ = suggestion_of(await inline(first, uri, LINE, COL))
        assert text == before
    finally:
        await first.shutdown_session()
        await first.stop()


async def test_second_connection_received_nothing_of_the_first_session(tcp_server) -> None:
    first = await tcp_client(tcp_server)
    try:
        intruder = await RawConnection.open(tcp_server.port)
        await suggests(first, "file:///work/a.py")  # traffic while the intruder is connected
        received = b""
        with contextlib.suppress(TimeoutError, ConnectionError):
            received = await asyncio.wait_for(intruder.reader.read(), 5)
        assert received == b""  # closed without a byte: no response, no notification
    finally:
        await first.shutdown_session()
        await first.stop()


async def test_a_hang_up_keeps_the_server_and_the_next_session_starts_fresh(tcp_server) -> None:
    first = await tcp_client(tcp_server)
    open_doc(first, "file:///work/secret.py", SOURCE)
    await status(first)  # the didOpen is handled
    await hang_up(first)
    await asyncio.sleep(1)
    assert tcp_server.alive, tcp_server.log()

    second = await tcp_client(tcp_server)
    st = await status(second)
    assert st["documents"] == []  # nothing of the first session is visible
    assert (await suggests(second, "file:///work/b.py")).startswith("read_li")
    await second.shutdown_session()  # shutdown, then exit: the server ends
    await second.stop()
    assert tcp_server.wait_exit() == 0


async def test_shutdown_then_hang_up_ends_the_server(tcp_server) -> None:
    client = await tcp_client(tcp_server, wait_ready=False)
    await client.shutdown_async(None)
    await hang_up(client)
    assert tcp_server.wait_exit() == 0


async def test_a_client_that_does_not_read_cannot_grow_the_server(tcp_server) -> None:
    """Issue 32, over TCP: a client that asks and never reads is not read either while its
    unsent answers are over a bound; it gets every answer once it reads."""
    sock = socket.create_connection(("127.0.0.1", tcp_server.port))
    try:
        sock.sendall(flood.big_status_setup(None, {"token": tcp_server.token}))
        assert {0, flood.SETUP_DONE} <= flood.read_answers(sock, {0, flood.SETUP_DONE})
        before = flood.rss_mib(tcp_server.proc.pid)
        sent = await asyncio.to_thread(flood.send_while_taken, sock, flood.status_flood())
        grown = flood.rss_mib(tcp_server.proc.pid) - before
        print(f"{sent} of {flood.REQUESTS} requests taken; the server grew by {grown:.0f} MiB")
        assert grown < 200, f"{sent} requests taken, the server grew by {grown:.0f} MiB"
        assert sent < flood.REQUESTS
        answered = await asyncio.to_thread(flood.read_answers, sock, set(range(1, sent + 1)))
        assert answered >= set(range(1, sent + 1))
    finally:
        sock.close()


# --------------------------------------------------------------------------- where the token is


async def test_a_generated_token_is_written_to_a_private_file(tiny_model_path, tmp_path) -> None:
    server = launch_tcp(tiny_model_path, tmp_path / "run", token=None)
    try:
        assert await server.logged("token in ")
        path = Path(server.log().split("token in ", 1)[1].split()[0])
        assert path.parent == tmp_path / "run" / "lsp-complete"
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
        server.token = path.read_text().strip()
        assert len(server.token) >= 32
        client = await tcp_client(server)
        assert (await status(client))["model"]["state"] == "ready"
        await client.shutdown_session()
        await client.stop()
        assert server.wait_exit() == 0
        assert not path.exists()  # removed at exit
    finally:
        server.stop()


async def test_token_file_option(tiny_model_path, tmp_path) -> None:
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN + "\n")
    token_file.chmod(0o600)
    server = launch_tcp(tiny_model_path, tmp_path / "run", token=None,
                        args=("--token-file", str(token_file)))
    server.token = TOKEN
    try:
        client = await tcp_client(server)
        assert (await status(client))["model"]["state"] == "ready"
        await client.shutdown_session()
        await client.stop()
        assert server.wait_exit() == 0
        assert token_file.exists()  # the user's file is not ours to remove
    finally:
        server.stop()
    # A token file that others can read is no secret: the server does not start.
    token_file.chmod(0o644)
    server = launch_tcp(tiny_model_path, tmp_path / "run", token=None,
                        args=("--token-file", str(token_file)), wait_listening=False)
    try:
        assert server.wait_exit() == 2
        assert await server.logged("open to other users")
    finally:
        server.stop()


def test_configured_token_sources(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("LSP_COMPLETE_TOKEN", raising=False)
    assert configured_token(None) is None  # then the server makes one
    monkeypatch.setenv("LSP_COMPLETE_TOKEN", TOKEN)
    assert configured_token(None) == TOKEN
    monkeypatch.setenv("LSP_COMPLETE_TOKEN", "short")
    with pytest.raises(TokenError, match="at least"):
        configured_token(None)
    path = tmp_path / "t"
    path.write_text("  " + TOKEN + "\n")
    path.chmod(0o600)
    assert configured_token(path) == TOKEN  # the file wins over the environment
    with pytest.raises(TokenError, match="cannot read"):
        configured_token(tmp_path / "absent")


def test_the_token_folder_is_private(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    path = write_token_file(4242, TOKEN)
    assert path == tmp_path / "lsp-complete" / "tcp-4242.token"
    assert path.read_text() == TOKEN + "\n"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    # A folder others may enter is made private again; a planted symlink is refused.
    path.parent.chmod(0o755)
    write_token_file(4242, TOKEN)
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    path.unlink()
    path.symlink_to(tmp_path / "elsewhere")
    write_token_file(4242, TOKEN)  # replaced, not followed
    assert not (tmp_path / "elsewhere").exists() and not path.is_symlink()


# --------------------------------------------------------------------------- apiKeyEnv


def test_api_key_env_names_settings_may_use() -> None:
    assert api_key_env_refusal("LSP_COMPLETE_API_KEY") is None
    assert api_key_env_refusal("LSP_COMPLETE_TEAM_KEY") is None
    assert api_key_env_refusal("") is None  # no key at all
    assert api_key_env_refusal("TEAM_KEY", allowed="TEAM_KEY") is None  # serve --api-key-env
    for name in ("HOME", "AWS_SECRET_ACCESS_KEY", "lsp_complete_x", "TEAM_KEY"):
        refusal = api_key_env_refusal(name)
        assert refusal is not None and "--api-key-env" in refusal and name in refusal


class HeaderRecorder:
    """An HTTP server that answers 404 to everything and keeps each request's headers."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, dict[str, str]]] = []
        recorder = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def _answer(self) -> None:
                recorder.requests.append((self.path, dict(self.headers.items())))
                length = int(self.headers.get("Content-Length") or 0)
                self.rfile.read(length)
                body = b'{"error": "not found"}'
                self.send_response(404)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            do_GET = do_POST = _answer

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def authorizations(self) -> list[str]:
        return [headers.get("Authorization", "") for _, headers in self.requests]

    async def wait_for_requests(self, timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        while not self.requests and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        assert self.requests, "the engine never asked the server"

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def recorder() -> Iterator[HeaderRecorder]:
    server = HeaderRecorder()
    yield server
    server.close()


def remote(url: str, model: Path, key_env: str) -> dict[str, Any]:
    return {"engine": "openai", "engineUrl": url, "model": str(model), "apiKeyEnv": key_env}


async def start_stdio(model_options: dict[str, Any], env: dict[str, str],
                      args: tuple[str, ...] = ()) -> LanguageClient:
    client = make_test_lsp_client()
    await client.start_io(*server_command(None), *args, env={**os.environ, **env})
    await client.initialize_session(initialize_params(
        {"threads": 1, "contextSize": 4096, **model_options}, client_capabilities()))
    await wait_for_state(client, ("ready", "error"))
    return client


@pytest.mark.parametrize(("key_env", "args", "sent"), [
    (SECRET_VAR, (), False),  # any variable: refused
    ("LSP_COMPLETE_TEST_KEY", (), True),  # the prefix: honoured
    (SECRET_VAR, ("--api-key-env", SECRET_VAR), True),  # named on the command line: honoured
], ids=["planted", "prefixed", "command-line"])
async def test_api_key_env_from_initialization_options(recorder, tiny_model_path, key_env, args,
                                                       sent) -> None:
    env = {SECRET_VAR: SECRET, "LSP_COMPLETE_TEST_KEY": SECRET}
    client = await start_stdio(remote(recorder.url, tiny_model_path, key_env), env, args)
    try:
        await inline_request_reaches(client, recorder)
        refused = [m.message for m in client.messages if "apiKeyEnv" in m.message]
        if sent:
            assert f"Bearer {SECRET}" in recorder.authorizations() and not refused
        else:
            assert not any(recorder.authorizations()), recorder.requests
            assert refused and SECRET_VAR in refused[0] and SECRET not in refused[0]
    finally:
        await client.shutdown_session()


async def inline_request_reaches(client: LanguageClient, recorder: HeaderRecorder) -> None:
    open_doc(client, "file:///work/a.py", SOURCE)
    with contextlib.suppress(Exception):
        await inline(client, "file:///work/a.py", LINE, COL)
    await recorder.wait_for_requests()


async def test_api_key_env_from_configuration_over_tcp(recorder, tcp_server,
                                                       tiny_model_path) -> None:
    """`workspace/didChangeConfiguration` from an authenticated TCP client: the same rule."""
    client = await tcp_client(tcp_server)
    try:
        settings = remote(recorder.url, tiny_model_path, "HOME")
        client.workspace_did_change_configuration(
            types.DidChangeConfigurationParams(settings={"lspComplete": settings}))
        deadline = time.monotonic() + 30
        while (await status(client))["model"].get("engine") != "openai":
            assert time.monotonic() < deadline, "the remote engine was never loaded"
            await asyncio.sleep(0.1)
        await inline_request_reaches(client, recorder)
        assert not any(recorder.authorizations()), recorder.requests
        assert any("apiKeyEnv" in m.message and "HOME" in m.message for m in client.messages)
    finally:
        await client.shutdown_session()
        await client.stop()


def test_the_bench_hands_its_api_key_over_in_a_variable_the_server_honours(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from lsp_complete.bench.ab import server_options

    monkeypatch.setenv("TEAM_KEY", SECRET)
    monkeypatch.setenv("LSP_COMPLETE_API_KEY", "")  # restored after the test
    args = argparse.Namespace(engine="openai", engine_url="http://gpu:8000", remote_model="",
                              api_key_env="TEAM_KEY", repo_context_tokens=None)
    options = server_options(args)
    assert "apiKeyEnv" not in options  # it would be refused
    assert os.environ["LSP_COMPLETE_API_KEY"] == SECRET  # the server's environment is ours


async def test_stdio_still_works_without_any_token(tiny_model_path) -> None:
    client = await start_server(tiny_model_path)
    try:
        assert (await status(client))["model"]["state"] == "ready"
    finally:
        await client.shutdown_session()
