"""A model file rewritten on disk while the server uses it (issue 32, defect 2): `cp new.gguf
model.gguf` truncates the very file whose weights were memory-mapped, and the next decode
died of SIGBUS (exit 135). The server now reads the weights into memory when they fit, guards
a mapping otherwise, and loads a changed file again (or says why it cannot)."""

from __future__ import annotations

import shutil
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

from lsp_complete.testing import write_tiny_gguf
from lsp_complete.testing.lsp_client import inline, open_doc, poll_status, status, suggestion_of
from tests.lsp_helpers import SOURCE, start_server

URI = "file:///work/model_file.py"
LINE, COL = 11, len("    for line in read_li")


async def test_a_model_file_rewritten_in_place_is_loaded_again(tmp_path: Path) -> None:
    model = write_tiny_gguf(tmp_path / "model.gguf")
    other = write_tiny_gguf(tmp_path / "other.gguf", seed=1)
    client = await start_server(model, {"maxTokens": 8, "persistCache": False})
    process = client._server  # the subprocess pygls' client started
    try:
        open_doc(client, URI, SOURCE)
        suggestion_of(await inline(client, URI, LINE, COL))
        assert (await status(client))["engine"]["weights"] == "in memory"

        with open(model, "r+b") as f:  # what `cp` does first: the same file, truncated
            f.truncate(1000)
        for col in (COL - 1, COL - 2):  # answered (with nothing), not a crash
            suggestion_of(await inline(client, URI, LINE, col))
        st = await poll_status(client, lambda s: s["model"]["state"] != "loading", 30)
        assert process.returncode is None, f"the server died: {process.returncode}"
        assert st["model"]["state"] == "error"  # a 1000-byte file is no model: said so
        messages = [m.message for m in client.messages]
        assert any("rewritten on disk" in m for m in messages), messages
        assert any("truncated or corrupt" in m for m in messages), messages

        shutil.copyfile(other, model)  # the copy completes: the new model is loaded
        suggestion_of(await inline(client, URI, LINE, COL - 3))
        st = await poll_status(client, lambda s: s["model"]["state"] == "ready", 30)
        assert st["model"]["state"] == "ready", (st["model"], [m.message for m in client.messages])
        assert st["model"]["error"] == ""  # the failed load's error went with it
        assert st["engine"]["path"] == str(model)
        suggestion_of(await inline(client, URI, LINE, COL - 4))
        assert (await status(client))["recent"][-1]["source"] in ("model", "empty")
        assert process.returncode is None
    finally:
        await client.shutdown_session()
    assert process.returncode != -signal.SIGBUS


def test_a_mapped_model_rewritten_in_place_is_refused_not_a_sigbus(tmp_path: Path) -> None:
    """A model too big to read into memory stays mapped: a rewrite is caught before the next
    decode touches a page that is gone (in a child process: a SIGBUS would kill pytest)."""
    model = write_tiny_gguf(tmp_path / "model.gguf")
    script = textwrap.dedent(f"""
        from lsp_complete.engine.base import CancelToken, GenerationRequest, ModelFileChanged
        from lsp_complete.engine.llama import LlamaEngine
        engine = LlamaEngine({str(model)!r}, n_ctx=1024, n_threads=1, mmap=True)
        assert engine.describe()["weights"] == "memory-mapped"
        prompt = engine.tokenize("def helper(value):\\n    return value * 2\\n" * 8)
        request = GenerationRequest(key="a", segments=[prompt], max_tokens=4)
        engine.complete(request, CancelToken())
        assert engine.model_changed() is None
        with open({str(model)!r}, "r+b") as f:
            f.truncate(1000)
        assert "rewritten" in engine.model_changed()
        for _ in range(2):
            try:
                engine.complete(request, CancelToken())
            except ModelFileChanged as exc:
                print("refused:", exc)
        engine.close()
        print("closed")
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, (done.returncode, done.stderr[-2000:])
    assert done.stdout.count("refused:") == 2 and "closed" in done.stdout
