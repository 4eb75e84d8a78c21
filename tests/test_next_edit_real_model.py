"""Next edits from the real default model (Qwen2.5-Coder-1.5B-Instruct through its chat
template) over LSP, the two cases of issue 33: a renamed parameter carried to its use, and a
`level=` argument added at the call that logs a failure. The rename is now carried on without
the model (nextedit/repeat.py), before it is asked; the `level=` case is the model's. Slow
group: `pytest -m slow`."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from lsprotocol import types

from lsp_complete.testing.lsp_client import open_doc, replace, status
from tests.lsp_helpers import start_server
from tests.test_next_edit_server import apply, next_edit

pytestmark = pytest.mark.slow

RENAME_BEFORE = '''def greet(name, greeting="Hello"):
    message = f"{greeting}, {name}!"
    print(message)
    return message


greet("Ada")
'''
LEVEL_BEFORE = '''import logging


def log(message, level="debug"):
    logging.getLogger("app").log(getattr(logging, level.upper()), message)


def save(path, data):
    try:
        write(path, data)
        log("saved " + path)
    except OSError:
        log("could not save " + path)
'''

CASES = {
    # The text, the user's edit (line, start, end, new text), the text expected after the
    # next edit.
    # `name` renamed to `person` in the signature: its use follows.
    "rename": (RENAME_BEFORE, (0, 10, 14, "person"), RENAME_BEFORE.replace("name", "person")),
    # `level="info"` added where the success is logged: the failure's call gets its level.
    "level": (LEVEL_BEFORE, (10, 27, 27, ', level="info"'),
              LEVEL_BEFORE.replace('log("saved " + path)', 'log("saved " + path, level="info")')
              .replace('log("could not save " + path)',
                       'log("could not save " + path, level="error")')),
}


@pytest.fixture(scope="module")
def default_model() -> Path:
    from lsp_complete.model_store import resolve_model

    return resolve_model(None).path


@pytest.mark.parametrize("case", [
    "rename",
    # Measured 2026-12-03: the model copies the failure's call unchanged (raw answer: the window
    # with only the user's edit), with this system prompt and two rewordings ("apply the same
    # kind of change to the similar lines that still lack it"). Not strict: the thread policy
    # may pick other counts on another machine, and a greedy answer that flips to the right
    # one must not fail CI (it shows as XPASS in the report).
    pytest.param("level", marks=pytest.mark.xfail(
        strict=False, reason="Qwen2.5-Coder-1.5B copies the failure's log call unchanged")),
])
async def test_the_default_model_suggests_the_next_edit(default_model: Path, case: str) -> None:
    before, (line, start, end, text), expected = CASES[case]
    client = await start_server(default_model, {"threads": 2, "nextEditDelayMs": 60_000})
    try:
        uri = f"file:///work/{case}.py"
        open_doc(client, uri, before)
        replace(client, uri, 2, types.Range(start=types.Position(line=line, character=start),
                                            end=types.Position(line=line, character=end)), text)
        edited = _edited(before, line, start, end, text)
        started = time.monotonic()
        edits: list[dict[str, Any]] = await next_edit(client, uri, 2, line, start + len(text))
        elapsed = time.monotonic() - started
        records = [r for r in (await status(client))["recent"]
                   if r["source"].startswith("next-edit")]
        print(f"{case}: {elapsed:.2f}s {edits} {records}")
        assert len(edits) == 1, edits
        assert apply(edited, edits[0]) == expected
    finally:
        await client.shutdown_session()


def _edited(text: str, line: int, start: int, end: int, new: str) -> str:
    lines = text.split("\n")
    lines[line] = lines[line][:start] + new + lines[line][end:]
    return "\n".join(lines)
