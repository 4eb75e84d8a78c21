"""Alternative suggestions (an explicit request cycles through them): the engine's, each starting
with another first token and continued greedily, leaving the file's cache as the plain request
left it; the server's, computed in idle time after a suggestion is shown, answered at once to an
explicit (Invoked) request and cancelled by a keystroke. All on the tiny generated GGUF."""

from __future__ import annotations

import asyncio
import dataclasses
import os
from pathlib import Path

import llama_cpp
from lsprotocol import types

from lsp_complete.engine.base import MIN_ALTERNATIVE_PROBABILITY, CancelToken
from lsp_complete.engine.llama import LlamaEngine
from lsp_complete.engine.remote import RemoteOptions
from lsp_complete.engine.remote_llama_server import LlamaServerEngine
from lsp_complete.engine.remote_openai import OpenAIEngine
from lsp_complete.testing.lsp_client import insert, open_doc, status, wait_idle
from tests.lsp_helpers import SOURCE, start_server
from tests.test_engine import (
    BEFORE,
    SUFFIX_TEXT,
    CancelAfter,
    cancel_after_text,
    fim_request,
    make_engine,
    uncached,
)

# Middles after which the tiny model has more than one likely first token (some of them with
# a healed, half-typed word), single- and multi-line.
MIDDLES = [("    x = ", True), ("    x = ", False), ("    with op", True), ("    x = r", False),
           ("    to", True)]


def forced(fresh: LlamaEngine, request, first: int) -> str:
    """Plain greedy decoding made to start with `first`: that token appended to the prompt,
    the rest of the healed text still to produce, one token less to generate."""
    piece = fresh.piece(first)
    heal = request.heal.encode()
    rest = heal[len(piece):] if heal.startswith(piece) else b""
    after = dataclasses.replace(request, segments=[*request.segments, [first]],
                                heal=rest.decode(), heal_code=request.heal_code and bool(rest),
                                max_tokens=request.max_tokens - 1)
    return piece.decode() + uncached(fresh, after).text


def assert_kv_in_sync(engine: LlamaEngine) -> None:
    for seq in [*engine._table.files.values(), *engine._table.asides.values()]:
        held = llama_cpp.llama_memory_seq_pos_max(engine.decoder.memory, seq.seq_id) + 1
        assert held == len(seq.tokens), (seq.key, held, len(seq.tokens))
    used = {s.seq_id for s in [*engine._table.files.values(), *engine._table.asides.values()]}
    assert sorted([*used, *engine._table.free_ids]) == list(range(2 * engine.slots))  # none leaked
    for seq_id in engine._table.free_ids:
        assert llama_cpp.llama_memory_seq_pos_max(engine.decoder.memory, seq_id) == -1  # none left


# ------------------------------------------------------------------ the engine


def test_alternatives_start_differently_and_are_greedy_after_their_first_token(engine,
                                                                              fresh) -> None:
    found = 0
    for n, (middle, single_line) in enumerate(MIDDLES):
        request = fim_request(engine, f"file:///alt{n}.py", BEFORE, middle, SUFFIX_TEXT,
                              max_tokens=16, single_line=single_line)
        primary = engine.complete(request, CancelToken())
        alternatives = engine.alternatives(request, 3, CancelToken())
        firsts = [primary.first_token, *(a.first_token for a in alternatives)]
        assert None not in firsts and len(set(firsts)) == len(firsts)  # distinct first tokens...
        for alt in alternatives:
            piece = engine.piece(alt.first_token)
            # ...each satisfying the healing constraint, as the primary's does...
            heal = request.heal.encode()
            assert piece.startswith(heal) or heal.startswith(piece), (middle, piece)
            assert alt.text.startswith(request.heal)
            # ...and then exactly what greedy decoding gives after that first token.
            assert alt.text == forced(fresh, request, alt.first_token), (middle, alt)
            assert alt.text[len(request.heal):].strip()
        assert len({a.text for a in alternatives}) == len(alternatives)
        found += len(alternatives)
    assert found >= 5, "the tiny model should have alternatives at these spots"


def test_alternatives_leave_the_files_cache_as_the_plain_request_left_it(engine,
                                                                         fresh) -> None:
    key = "file:///kv.py"
    request = fim_request(engine, key, BEFORE, "    x = ", SUFFIX_TEXT, max_tokens=16)
    primary = engine.complete(request, CancelToken())
    cached = engine.cached_tokens(key)
    generated = engine.counters.alternative_tokens
    alternatives = engine.alternatives(request, 3, CancelToken())
    assert len(alternatives) >= 2
    assert engine.counters.alternative_tokens > generated
    assert engine.cached_tokens(key) == cached  # prompt and the primary's tokens, untouched
    assert_kv_in_sync(engine)
    # The same request again: the same primary, from the cache as before.
    again = engine.complete(request, CancelToken())
    assert again.text == primary.text == uncached(fresh, request).text
    assert again.encoded_tokens <= 1, again
    # The next keystroke: as fast as ever, and what an uncached engine says.
    for typed in ("    x = b", "    x = b(", "    x = b(a"):
        keystroke = fim_request(engine, key, BEFORE, typed, SUFFIX_TEXT, max_tokens=16)
        result = engine.complete(keystroke, CancelToken())
        assert result.text == uncached(fresh, keystroke).text, typed
        assert result.encoded_tokens <= 3, (typed, result)
        assert len(engine.alternatives(keystroke, 2, CancelToken())) <= 2
        assert_kv_in_sync(engine)


def test_junk_is_left_out(engine) -> None:
    """Nothing unlikely, blank or repeated; none when none is asked."""
    request = fim_request(engine, "file:///junk.py", BEFORE, "    ", SUFFIX_TEXT,
                          max_tokens=8, single_line=True)
    assert engine.alternatives(request, 0, CancelToken()) == []
    engine.complete(request, CancelToken())
    for alt in engine.alternatives(request, 8, CancelToken()):
        assert alt.text[len(request.heal):].strip(), alt
    seen = []
    original = engine.vocabulary.first_tokens

    def spy(logits, heal: bytes, code: bool, count: int) -> list[int]:
        picks = original(logits, heal, code, count)
        seen.append(picks)
        return picks

    engine.vocabulary.first_tokens = spy
    try:
        request = fim_request(engine, "file:///junk.py", BEFORE, "    y = ", SUFFIX_TEXT)
        assert engine.alternatives(request, 8, CancelToken()) == []  # a confident model
        assert seen == [[]]
    finally:
        del engine.vocabulary.first_tokens
    assert 0 < MIN_ALTERNATIVE_PROBABILITY <= 0.05


def test_cancelling_alternatives_stops_with_no_work_after(engine, fresh) -> None:
    key = "file:///cancel-alt.py"
    request = fim_request(engine, key, BEFORE, "    x = ", SUFFIX_TEXT, max_tokens=16,
                          single_line=False)
    primary = engine.complete(request, CancelToken())
    cached = engine.cached_tokens(key)
    assert engine.alternatives(request, 3, CancelAfter(0)) == []  # cancelled before it began
    for after in (1, 3, 9, 20):  # a keystroke after that many tokens
        cancel, on_text = cancel_after_text(after)
        before = engine.counters.tokens_after_cancel
        decodes = engine.counters.generation_decodes
        alternatives = engine.alternatives(dataclasses.replace(request, on_text=on_text), 3,
                                           cancel)
        assert sum(a.generated_tokens for a in alternatives) < after, after  # cut short
        assert engine.counters.generation_decodes - decodes <= after
        assert engine.counters.tokens_after_cancel == before
        assert cancel.work_after_cancel == 0
        assert engine.cached_tokens(key) == cached
        assert_kv_in_sync(engine)
    assert engine.complete(request, CancelToken()).text == primary.text
    assert primary.text == uncached(fresh, request).text


def test_alternatives_with_every_sequence_in_use(tiny_model_path: Path, fresh) -> None:
    """All sequence ids held (files and their asides): one aside makes room, and nothing
    leaks."""
    eng = make_engine(tiny_model_path, slots=1)
    try:
        key = "file:///full.py"
        request = fim_request(eng, key, BEFORE, "    x = ", SUFFIX_TEXT, max_tokens=8)
        eng.complete(request, CancelToken())
        moved = fim_request(eng, key, BEFORE * 3, "    x", SUFFIX_TEXT)
        eng.warm(key, moved.segments, CancelAfter(2))  # interrupted: stays aside
        assert not eng._table.free_ids and eng._table.asides
        assert len(eng.alternatives(request, 2, CancelToken())) >= 1
        assert_kv_in_sync(eng)
        assert eng.complete(request, CancelToken()).text == uncached(fresh, request).text
    finally:
        eng.close()


def test_remote_engines_offer_none() -> None:
    request = fim_request(_Tok(), "file:///r.py", "a", "b", "c")
    for engine in (LlamaServerEngine(RemoteOptions(url="http://127.0.0.1:9")),
                   OpenAIEngine(RemoteOptions(url="http://127.0.0.1:9"))):
        try:
            assert engine.alternatives(request, 3, CancelToken()) == []  # and no connection
            assert engine.http.connections_opened == 0
        finally:
            engine.close()


class _Tok:
    """Just enough of an engine for `fim_request`: one token per character."""

    def tokenize(self, text: str, special: bool = False) -> list[int]:
        return [ord(c) for c in text]

    def detokenize(self, tokens: list[int]) -> str:
        return "".join(chr(t) for t in tokens)


# ------------------------------------------------------------------ the server


def invoked_params(uri: str, line: int, char: int,
                   kind: types.InlineCompletionTriggerKind) -> types.InlineCompletionParams:
    return types.InlineCompletionParams(
        text_document=types.TextDocumentIdentifier(uri=uri),
        position=types.Position(line=line, character=char),
        context=types.InlineCompletionContext(trigger_kind=kind),
    )


async def ask(client, uri: str, line: int, char: int,
              kind: types.InlineCompletionTriggerKind) -> list[types.InlineCompletionItem]:
    answer = await client.text_document_inline_completion_async(
        invoked_params(uri, line, char, kind))
    if answer is None:
        return []
    return list(answer.items if isinstance(answer, types.InlineCompletionList) else answer)


AUTOMATIC = types.InlineCompletionTriggerKind.Automatic
INVOKED = types.InlineCompletionTriggerKind.Invoked
# A spot where the tiny model, through the real pipeline, has alternatives: the blank line
# before `def read_lines`.
ALT_LINE, ALT_COL = 3, 0


async def test_an_explicit_request_gets_alternatives_computed_then_and_kept(
        tiny_model_path: Path) -> None:
    client = await start_server(tiny_model_path, {"alternatives": 3})
    try:
        uri = "file:///work/alt.py"
        open_doc(client, uri, SOURCE)
        automatic = await ask(client, uri, ALT_LINE, ALT_COL, AUTOMATIC)
        assert len(automatic) == 1  # as you type: one suggestion, no more work for it
        st = await wait_idle(client)
        await asyncio.sleep(0.6)  # past re-anchoring: idle time computes no alternatives
        st = await wait_idle(client)
        assert st["engineCounters"]["alternative_calls"] == 0
        items = await ask(client, uri, ALT_LINE, ALT_COL, INVOKED)
        texts = [i.insert_text for i in items]
        assert len(texts) >= 2 and len(set(texts)) == len(texts), texts
        assert texts[0] == automatic[0].insert_text  # the one shown first, then the others
        st = await status(client)
        assert st["engineCounters"]["alternative_calls"] == 1
        generated = st["engineCounters"]["tokens_generated"]
        again = await ask(client, uri, ALT_LINE, ALT_COL, INVOKED)  # cycling on: kept
        assert [i.insert_text for i in again] == texts
        st = await status(client)
        assert st["engineCounters"]["tokens_generated"] == generated
        assert st["engineCounters"]["alternative_calls"] == 1
        assert st["counters"]["alternativesShown"] == 2 * (len(texts) - 1)
        for item in items:  # each replaces the same range and is counted when accepted
            assert item.range == automatic[0].range
            assert item.command is not None and item.command.command == "lsp-complete.accepted"
        ids = {item.command.arguments[0]["id"] for item in items}
        assert len(ids) == len(items)
        await client.workspace_execute_command_async(types.ExecuteCommandParams(
            command=items[1].command.command, arguments=items[1].command.arguments))
        assert (await status(client))["counters"]["accepted"] == 1

        # The user types what is shown; then asks explicitly: computed then, at this spot.
        typed = texts[0][0]
        insert(client, uri, 2, ALT_LINE, ALT_COL, typed)
        explicit = await ask(client, uri, ALT_LINE, ALT_COL + 1, INVOKED)
        assert len(explicit) >= 2, explicit
        assert explicit[0].insert_text == texts[0]  # typing-ahead: the rest of the one shown
        assert all(i.insert_text.startswith(typed) for i in explicit)
        again = await ask(client, uri, ALT_LINE, ALT_COL + 1, INVOKED)
        assert [i.insert_text for i in again] == [i.insert_text for i in explicit]
        assert len(await ask(client, uri, ALT_LINE, ALT_COL + 1, AUTOMATIC)) == 1
    finally:
        await client.shutdown_session()


async def test_an_explicit_request_without_alternatives_gets_one_item(
        tiny_model_path: Path) -> None:
    client = await start_server(tiny_model_path, {"alternatives": 0})
    try:
        uri = "file:///work/none.py"
        open_doc(client, uri, SOURCE)
        assert len(await ask(client, uri, ALT_LINE, ALT_COL, AUTOMATIC)) == 1
        await wait_idle(client)
        assert len(await ask(client, uri, ALT_LINE, ALT_COL, INVOKED)) == 1
        assert (await status(client))["engineCounters"]["alternative_calls"] == 0
    finally:
        await client.shutdown_session()


async def test_a_keystroke_cancels_the_alternatives_being_computed(
        tiny_model_path: Path) -> None:
    # Every decode takes 40 ms, as on a slow laptop: the explicit request is long enough to
    # interrupt.
    client = await start_server(tiny_model_path, {"alternatives": 3, "maxTokens": 48,
                                                  "multiline": "always"},
                                env={**os.environ, "LSP_COMPLETE_SIMULATE_DECODE_MS": "40"})
    try:
        uri = "file:///work/slow.py"
        open_doc(client, uri, SOURCE)
        assert len(await ask(client, uri, ALT_LINE, ALT_COL, AUTOMATIC)) == 1
        await wait_idle(client)
        primary = (await status(client))["engineCounters"]["tokens_generated"]
        explicit = asyncio.ensure_future(ask(client, uri, ALT_LINE, ALT_COL, INVOKED))
        for _ in range(500):  # until the first alternative is being generated
            counters = (await status(client))["engineCounters"]
            if counters["alternative_calls"] and counters["tokens_generated"] > primary:
                break
            await asyncio.sleep(0.01)
        else:
            raise AssertionError(f"no alternatives computed: {counters}")
        insert(client, uri, 2, ALT_LINE, ALT_COL, "x")  # a keystroke, no request yet
        await explicit  # answered (stale now: the text changed)
        st = await wait_idle(client)
        counters = st["engineCounters"]
        # Stopped at once: at most the decode in flight finished after the keystroke...
        assert counters["max_tokens_after_cancel"] <= 1, counters
        # ...far short of what the three alternatives would have generated.
        assert counters["alternative_tokens"] == counters["tokens_generated"] - primary
        assert counters["alternative_tokens"] < 10, counters
        await asyncio.sleep(0.3)
        assert (await status(client))["engineCounters"] == counters  # no further work
        # The file is served as usual afterwards.
        assert len(await ask(client, uri, ALT_LINE, ALT_COL + 1, AUTOMATIC)) == 1
    finally:
        await client.shutdown_session()


async def test_idle_time_computes_no_alternatives(tiny_model_path: Path) -> None:
    """Typing at a typist's pace, then a long pause on the suggestion: no alternatives are
    computed (each costs several suggestions' worth of CPU) until one is asked for."""
    client = await start_server(tiny_model_path, {"alternatives": 3})
    try:
        uri = "file:///work/typing.py"
        open_doc(client, uri, SOURCE)
        for i, char in enumerate("xyzw"):
            insert(client, uri, 2 + i, ALT_LINE, ALT_COL + i, char)
            await ask(client, uri, ALT_LINE, ALT_COL + i + 1, AUTOMATIC)
            await asyncio.sleep(0.5)
        await asyncio.sleep(2.5)
        st = await wait_idle(client)
        assert st["engineCounters"]["alternative_calls"] == 0
        await ask(client, uri, ALT_LINE, ALT_COL + 4, INVOKED)
        assert (await status(client))["engineCounters"]["alternative_calls"] == 1
    finally:
        await client.shutdown_session()
