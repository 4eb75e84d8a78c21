"""The real server over stdio (pytest-lsp client) with the tiny generated GGUF."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from lsprotocol import types

from lsp_complete.config import Settings
from lsp_complete.context import ContextLimits
from lsp_complete.documents import Document
from lsp_complete.engine.base import CancelToken
from lsp_complete.pipeline import load_completer, prepare
from lsp_complete.testing.lsp_client import (
    inline,
    inline_params,
    insert,
    open_doc,
    status,
    suggestion_of,
)
from tests.lsp_helpers import SOURCE, load_failure_told, start_server

UNICODE_SOURCE = '''def greet(name):
    x = "😀 中文 𝄞" ; print(nam
    return x
'''


@pytest.fixture(scope="module")
def reference(tiny_model_path: Path):
    """The in-process pipeline: what the server must answer for a fresh document."""
    settings = Settings(model=str(tiny_model_path), threads=1, context_size=4096,
                        persist_cache=False)
    completer, _, _ = load_completer(settings)

    def expected(text: str, line: int, col_chars: int, language: str = "python") -> str:
        doc = Document("file:///ref", language, 1, text)
        start, _ = doc.line_range(line)
        prepared = prepare(doc, start + col_chars, None, settings, ContextLimits())
        completer.engine.forget(doc.uri)
        return completer.run(prepared, CancelToken()).text

    yield expected
    completer.engine.close()


@pytest.fixture
async def client(tiny_model_path: Path):
    c = await start_server(tiny_model_path)
    yield c
    await c.shutdown_session()


async def test_initialize_advertises_the_features(tiny_model_path: Path) -> None:
    c = await start_server(tiny_model_path, encodings=["utf-16", "utf-8"], wait_ready=False)
    try:
        st = await status(c)
        assert st["positionEncoding"] == "utf-8"  # preferred when the client offers it
    finally:
        await c.shutdown_session()


async def test_initialize_names_every_method_of_ours(tiny_model_path: Path) -> None:
    """`experimental.lspComplete` names each request and notification of ours, so that a
    client that looks finds them (it had left out blockReady)."""
    from pytest_lsp.client import make_test_lsp_client

    from lsp_complete.server import protocol
    from lsp_complete.testing.lsp_client import client_capabilities, initialize_params, launch

    c = make_test_lsp_client()
    await launch(c, tiny_model_path)
    result = await c.initialize_session(initialize_params({"threads": 1},
                                                          client_capabilities()))
    try:
        assert result.capabilities.experimental is not None
        named = set(result.capabilities.experimental["lspComplete"].values())
        ours = {value for name, value in vars(protocol).items()
                if name.endswith("_METHOD") and value.startswith("lsp-complete/")}
        assert ours and ours | {protocol.NEXT_EDIT_METHOD} <= named
    finally:
        await c.shutdown_session()


async def test_inline_completion_at_the_cursor_matches_the_pipeline(client, reference) -> None:
    uri = "file:///work/count.py"
    open_doc(client, uri, SOURCE)
    line, col = 11, len("    for line in read_li")
    text, item = suggestion_of(await inline(client, uri, line, col))
    expected = reference(SOURCE, line, col)
    assert expected, "the tiny model should suggest something here"
    assert item is not None
    # The item replaces the partly typed word, as the spec prefers.
    assert item.range.start == types.Position(line=line, character=col - len("read_li"))
    assert item.range.end == types.Position(line=line, character=col)
    assert text == "read_li" + expected
    assert item.command is not None and item.command.command == "lsp-complete.accepted"
    # Accepting runs the item's command: the server counts it (acceptance tracking).
    await client.workspace_execute_command_async(
        types.ExecuteCommandParams(command=item.command.command, arguments=item.command.arguments)
    )
    counters = (await status(client))["counters"]
    assert counters["accepted"] == 1 and counters["shown"] >= 1


@pytest.mark.parametrize("encoding", ["utf-16", "utf-8"])
async def test_non_ascii_positions_never_shift(tiny_model_path, reference, encoding) -> None:
    c = await start_server(tiny_model_path, encodings=[encoding])
    try:
        uri = "file:///work/unicode.py"
        open_doc(c, uri, UNICODE_SOURCE)
        line_text = UNICODE_SOURCE.split("\n")[1]
        chars = len(line_text)
        units = len(line_text.encode("utf-16-le")) // 2 if encoding == "utf-16" else len(
            line_text.encode("utf-8"))
        text, item = suggestion_of(await inline(c, uri, 1, units))
        expected = reference(UNICODE_SOURCE, 1, chars)
        assert expected, "pick a line where the tiny model suggests something"
        assert text == "nam" + expected
        assert item.range.start.character == units - 3
        st = await status(c)
        assert st["positionEncoding"] == encoding
    finally:
        await c.shutdown_session()


async def test_classic_completion_offers_one_ai_item(client, reference) -> None:
    uri = "file:///work/classic.py"
    open_doc(client, uri, SOURCE)
    line, col = 11, len("    for line in read_li")
    result = await client.text_document_completion_async(
        types.CompletionParams(
            text_document=types.TextDocumentIdentifier(uri=uri),
            position=types.Position(line=line, character=col),
        )
    )
    assert isinstance(result, types.CompletionList) and len(result.items) == 1
    item = result.items[0]
    assert item.text_edit.new_text == "read_li" + reference(SOURCE, line, col)


async def test_typing_changes_and_close(client) -> None:
    uri = "file:///work/typing.py"
    open_doc(client, uri, "def f(x):\n    \n")
    version = 1
    for i, ch in enumerate("return x"):
        version += 1
        insert(client, uri, version, 1, 4 + i, ch)
    await inline(client, uri, 1, 12)
    st = await status(client)
    assert {d["uri"]: d["version"] for d in st["documents"]}[uri] == version
    client.text_document_did_close(
        types.DidCloseTextDocumentParams(text_document=types.TextDocumentIdentifier(uri=uri))
    )
    st = await status(client)
    assert uri not in [d["uri"] for d in st["documents"]]
    # A document that is no longer open gets an empty answer, not an error.
    assert suggestion_of(await inline(client, uri, 1, 12))[1] is None


async def test_configuration_changes_apply(client) -> None:
    uri = "file:///work/config.py"
    open_doc(client, uri, SOURCE)
    line, col = 11, len("    for line in read_li")
    client.workspace_did_change_configuration(
        types.DidChangeConfigurationParams(settings={"enabled": {"python": False}})
    )
    assert suggestion_of(await inline(client, uri, line, col))[1] is None
    client.workspace_did_change_configuration(
        types.DidChangeConfigurationParams(
            settings={"lspComplete": {"enabled": {"python": True}, "maxTokens": 1}}
        )
    )
    text, item = suggestion_of(await inline(client, uri, line, col))
    st = await status(client)
    assert st["recent"][-1]["generatedTokens"] <= 1
    client.workspace_did_change_configuration(
        types.DidChangeConfigurationParams(settings={"maxTokens": "lots", "bogus": 1})
    )
    await asyncio.sleep(0.2)
    assert any("maxTokens" in m.message for m in client.messages)
    assert any("bogus" in m.message for m in client.messages)


async def test_out_of_range_settings_are_refused_and_the_model_still_loads(tiny_model_path):
    # slots: 100000 once asked llama.cpp for more sequences than it has: model in error state.
    c = await start_server(tiny_model_path, {"slots": 100_000})
    try:
        st = await status(c)
        assert st["model"]["state"] == "ready"
        assert st["engine"]["slots"] == 4  # the default, kept
        await asyncio.sleep(0.1)
        assert any("slots" in m.message and "100000" in m.message for m in c.messages)
    finally:
        await c.shutdown_session()


async def test_cancel_request_answers_and_server_stays_consistent(client, reference) -> None:
    uri = "file:///work/cancel.py"
    open_doc(client, uri, SOURCE)
    line, col = 11, len("    for line in read_li")
    pending = asyncio.ensure_future(  # sent now, not when awaited
        client.protocol.send_request_async(
            types.TEXT_DOCUMENT_INLINE_COMPLETION, inline_params(uri, line, col),
            msg_id="cancel-me",
        )
    )
    client.protocol.notify(types.CANCEL_REQUEST, types.CancelParams(id="cancel-me"))
    try:
        answer = await asyncio.wait_for(pending, 30)
    except TimeoutError:
        raise
    except Exception as exc:  # RequestCancelled is a valid answer
        assert "cancel" in str(exc).lower()
    else:
        assert answer is None or isinstance(answer, types.InlineCompletionList)
    text, _ = suggestion_of(await inline(client, uri, line, col))
    assert text == "read_li" + reference(SOURCE, line, col)


async def test_bad_requests_get_empty_answers_and_the_server_keeps_serving(client) -> None:
    # A document never opened, a line past the end, a column past the end of a line.
    assert suggestion_of(await inline(client, "file:///never.py", 0, 0))[1] is None
    uri = "file:///work/bounds.py"
    open_doc(client, uri, "x = 1\n")
    assert suggestion_of(await inline(client, uri, 50, 0))[1] is None
    await inline(client, uri, 0, 500)  # clamped to the line end: any answer, but an answer
    # An unknown method gets MethodNotFound.
    with pytest.raises(Exception, match="[Mm]ethod"):
        await client.protocol.send_request_async("lsp-complete/noSuchThing", {})
    # A huge line and binary content: no crash; binary is refused with a message.
    open_doc(client, "file:///work/huge.py", "x = '" + "a" * 200_000 + "'\n")
    await inline(client, "file:///work/huge.py", 0, 100_000)
    open_doc(client, "file:///work/blob.bin", "\x00\x01\x02binary\x00" * 100, "plaintext")
    assert suggestion_of(await inline(client, "file:///work/blob.bin", 0, 3))[1] is None
    await asyncio.sleep(0.1)
    assert any("binary" in m.message for m in client.messages)
    # Still serving.
    open_doc(client, "file:///work/ok.py", SOURCE)
    st = await status(client)
    assert st["model"]["state"] == "ready"


async def test_unloadable_model_is_reported_and_completions_are_empty(tmp_path: Path) -> None:
    bad = tmp_path / "broken.gguf"
    bad.write_bytes(b"GGUF" + b"\x00" * 100)
    c = await start_server(bad)
    try:
        st = await status(c)
        assert st["model"]["state"] == "error"
        await asyncio.sleep(0.1)
        assert c.messages and c.messages[0].type == types.MessageType.Error
        uri = "file:///work/a.py"
        open_doc(c, uri, SOURCE)
        assert suggestion_of(await inline(c, uri, 11, 10))[1] is None
    finally:
        await c.shutdown_session()


async def test_a_model_that_fails_to_load_is_one_line_in_the_log(
        tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    """Round 7: besides the one message the client got, the worker logged the failed load
    with a Python traceback on stderr. Now the log has that message, in one line."""
    bad = tmp_path / "broken.gguf"
    bad.write_bytes(b"GGUF" + b"\x00" * 100)
    c = await start_server(bad)
    try:
        told = await load_failure_told(c)
    finally:
        await c.shutdown_session()
    err = capfd.readouterr().err
    assert "Traceback" not in err, err
    assert [line for line in err.splitlines() if "GGUF" in line] == [
        f"ERROR lsp_complete.server.client: {told}"], err


async def test_loading_reports_progress(tiny_model_path: Path) -> None:
    c = await start_server(tiny_model_path)
    try:
        kinds = [type(v).__name__ for values in c.progress_reports.values() for v in values]
        assert "WorkDoneProgressBegin" in kinds and "WorkDoneProgressEnd" in kinds
    finally:
        await c.shutdown_session()


def test_malformed_json_rpc_does_not_kill_the_server(tiny_model_path: Path) -> None:
    def frame(payload: bytes) -> bytes:
        return b"Content-Length: %d\r\n\r\n" % len(payload) + payload

    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"capabilities": {}, "processId": None}}
    status_req = {"jsonrpc": "2.0", "id": 2, "method": "lsp-complete/status", "params": {}}
    stream = (
        frame(b"{this is not json")
        + frame(json.dumps({"jsonrpc": "2.0", "id": 7, "method": 42}).encode())
        + frame(json.dumps(init).encode())
        + frame(json.dumps(status_req).encode())
        + frame(json.dumps({"jsonrpc": "2.0", "id": 3, "method": "shutdown"}).encode())
        + frame(json.dumps({"jsonrpc": "2.0", "method": "exit"}).encode())
    )
    proc = subprocess.run(
        [sys.executable, "-m", "lsp_complete", "serve", "--model", str(tiny_model_path)],
        input=stream, capture_output=True, timeout=60,
    )
    out = proc.stdout.decode("utf-8", errors="replace")
    assert '"id": 1' in out or '"id":1' in out
    assert '"id": 2' in out or '"id":2' in out
    assert proc.returncode == 0


async def test_clients_with_inline_completion_get_no_duplicate_menu_item(tiny_model_path):
    from pytest_lsp.client import make_test_lsp_client

    from lsp_complete.testing.lsp_client import SERVER, wait_for_state

    c = make_test_lsp_client()
    await c.start_io(*SERVER, "--model", str(tiny_model_path))
    try:
        await c.initialize_session(
            types.InitializeParams(
                capabilities=types.ClientCapabilities(
                    text_document=types.TextDocumentClientCapabilities(
                        inline_completion=types.InlineCompletionClientCapabilities()
                    )
                ),
                initialization_options={"threads": 1},
            )
        )
        await wait_for_state(c, ("ready",))
        uri = "file:///work/both.py"
        open_doc(c, uri, SOURCE)
        result = await c.text_document_completion_async(
            types.CompletionParams(
                text_document=types.TextDocumentIdentifier(uri=uri),
                position=types.Position(line=11, character=len("    for line in read_li")),
            )
        )
        assert not result.items
        assert (await status(c))["engineCounters"]["calls"] == 0
    finally:
        await c.shutdown_session()


async def _pulling_settings(model: Path, section: dict) -> Any:
    """The real server, started by a client that holds `section` as its `lspComplete`
    settings and answers workspace/configuration with it; the model ready."""
    from pytest_lsp.client import make_test_lsp_client

    from lsp_complete.testing.lsp_client import SERVER, wait_for_state

    c = make_test_lsp_client()
    c.set_configuration(section, section="lspComplete")
    await c.start_io(*SERVER, "--model", str(model))
    try:
        await c.initialize_session(
            types.InitializeParams(
                capabilities=types.ClientCapabilities(
                    workspace=types.WorkspaceClientCapabilities(configuration=True)
                ),
            )
        )
        await wait_for_state(c, ("ready",))
    except BaseException:
        await c.shutdown_session()  # the caller's `finally` is not reached
        raise
    return c


async def test_settings_come_from_workspace_configuration(tiny_model_path):
    c = await _pulling_settings(tiny_model_path, {"maxTokens": 2, "multiline": "never"})
    try:
        uri = "file:///work/pulled.py"
        open_doc(c, uri, SOURCE)
        await inline(c, uri, 11, len("    for line in read_li"))
        assert (await status(c))["recent"][-1]["generatedTokens"] <= 2
    finally:
        await c.shutdown_session()


async def test_vscodes_own_settings_for_the_section_are_taken_without_a_warning(
        tiny_model_path):
    """VS Code answers workspace/configuration with its `lspComplete` section as the
    extension declares it (package.json): every default there, `nextEdit` a checkbox
    (false), client-only keys beside the server's. None is worth a warning to the user."""
    package = Path(__file__).parent.parent / "editors" / "vscode" / "package.json"
    declared = json.loads(package.read_text())["contributes"]["configuration"]["properties"]
    section = {key.removeprefix("lspComplete."): spec.get("default")
               for key, spec in declared.items() if key.startswith("lspComplete.")}
    assert section["nextEdit"] is False
    section["nextEdit"] = True  # a user who turned them on
    c = await _pulling_settings(tiny_model_path, section)
    try:
        await asyncio.sleep(0.2)
        assert [m.message for m in c.messages if m.type <= types.MessageType.Warning] == []
    finally:
        await c.shutdown_session()
