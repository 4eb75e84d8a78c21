"""Pathological documents cost bounded work: a huge line is seen through `max_line_chars`,
deep trees are walked once, long import lists are deduplicated with sets and capped.

Costs are checked by counting the work (characters scanned, parent steps taken), never by
the clock; the end-to-end tests check that the real server still answers another file.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from lsp_complete import postprocess
from lsp_complete.config import Settings
from lsp_complete.context import ContextLimits
from lsp_complete.documents import Document
from lsp_complete.pipeline import prepare
from lsp_complete.postprocess import clean_completion
from lsp_complete.testing.lsp_client import inline, open_doc, status, suggestion_of
from tests.lsp_helpers import SOURCE, start_server

# A 4 MB line of minified-looking code, the cursor in its middle.
HUGE_LINE = "x = [" + "'ab', (1, 2), " * (4_000_000 // 14) + "\n"


def test_a_huge_line_reaches_post_processing_as_a_bounded_piece(monkeypatch) -> None:
    limits = ContextLimits()
    doc = Document("file:///work/big.py", "python", 1, HUGE_LINE)
    cursor = len(HUGE_LINE) // 2
    site = prepare(doc, cursor, None, Settings(), limits).site
    assert site.line_prefix == HUGE_LINE[cursor - limits.max_line_chars : cursor]
    assert site.line_suffix == HUGE_LINE[cursor : cursor + limits.max_line_chars]
    assert site.suffix.startswith(site.line_suffix)
    assert site.indent == ""

    scanned: list[int] = []
    real_scan = postprocess._scan

    def counting_scan(text: str, language_id: str):
        scanned.append(len(text))
        return real_scan(text, language_id)

    monkeypatch.setattr(postprocess, "_scan", counting_scan)
    raw = " 'cd', (3, 4)),\n    y = 2"
    clean_completion(raw, site, (), max_lines=12)
    assert scanned, "post-processing scans the cursor line"
    # The per-character scans see the bounded line and the completion, never the 4 MB line.
    assert max(scanned) <= 2 * limits.max_line_chars + len(raw)


def test_the_indent_of_a_huge_line_comes_from_its_start() -> None:
    text = "    y = " + "1 + " * 100_000 + "1\n"
    doc = Document("file:///work/big.py", "python", 1, text)
    site = prepare(doc, len(text) - 2, None, Settings()).site
    assert site.indent == "    "
    assert len(site.line_prefix) <= ContextLimits().max_line_chars


@pytest.fixture
async def client(tiny_model_path: Path):
    c = await start_server(tiny_model_path)
    yield c
    await c.shutdown_session()


async def test_a_huge_line_leaves_the_server_answering_other_files(client) -> None:
    big = "file:///work/big.py"
    open_doc(client, big, HUGE_LINE)
    await asyncio.wait_for(inline(client, big, 0, len(HUGE_LINE) // 2), 120)
    # A line of word characters ending in a bracket before the cursor: the partly typed word
    # is looked for in a bounded window (a regex over the whole line is quadratic).
    word_line = "a" * 2_000_000 + "("
    open_doc(client, "file:///work/word.py", word_line + "\n")
    await asyncio.wait_for(inline(client, "file:///work/word.py", 0, len(word_line)), 120)
    other = "file:///work/other.py"
    open_doc(client, other, SOURCE)
    text, item = suggestion_of(
        await asyncio.wait_for(inline(client, other, 11, len("    for line in read_li")), 120)
    )
    assert item is not None and text.startswith("read_li")
    assert (await status(client))["model"]["state"] == "ready"
