"""Typing one span of a file over LSP, as an editor sends it: the replay, the paced replay and
the A/B scenarios (bench/ab/) all type through `type_span`.

A span opens its file (or, moved: opens the whole file, is asked elsewhere in it first, then
deletes the span's lines), optionally says where the cursor rests (lsp-complete/didMoveCursor,
which only lsp-complete's own editor plugins send), optionally rests, then types: each
keystroke is an incremental didChange and an automatic inlineCompletion request at the new
cursor. Either every key waits for the previous answer (burst typing: the next key as soon as
the answer is there), or keys go out on a schedule with their answers not awaited (a typist
who never waits), which is where answers go stale.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lsprotocol import types

from lsp_complete.bench import lsp_driver
from lsp_complete.bench.records import Sample
from lsp_complete.bench.workload import Episode, elsewhere_offset, line_exact
from lsp_complete.testing.lsp_client import position_at


@dataclass(frozen=True)
class SpanTiming:
    cursor: bool = False  # send lsp-complete/didMoveCursor where typing starts
    rest_ms: float = 0.0  # after opening (and the cursor), before the first key
    # Milliseconds before each key, counted from the previous key's sending (the first from
    # the end of the rest); answers are then not awaited. None: each key is sent as soon as
    # the previous answer arrived.
    delays_ms: tuple[float, ...] | None = None

    @property
    def awaited(self) -> bool:
        return self.delays_ms is None


@dataclass(frozen=True)
class KeyAnswer:
    """What the client saw for one keystroke's request."""

    suggestion: str
    latency_ms: float
    error: str | None
    version: int
    sent_at: float  # event-loop time the request went out
    done_at: float  # event-loop time its answer arrived


def span_version(index: int) -> int:
    """The document version a span starts at: client-chosen, one range per span, so status
    records of different spans on the same file never collide."""
    return (index + 1) * 100_000


def span_uri(ep: Episode) -> str:
    return Path(ep.path).resolve().as_uri()


async def type_span(
    session: lsp_driver.ServerSession,
    ep: Episode,
    version: int,
    timing: SpanTiming,
    on_key: Callable[[], Any] = lambda: None,
) -> list[KeyAnswer]:
    """Open the span's file at `version` and type it; returns one answer per keystroke, all
    arrived. The document stays open (the caller reads the server's records, then closes)."""
    uri = span_uri(ep)
    session.open(uri, ep.language_id, ep.initial_text, version)
    if timing.cursor:
        session.move_cursor(uri, position_at(ep.initial_text, ep.start_offset))
    if timing.rest_ms > 0:
        await asyncio.sleep(timing.rest_ms / 1000)
    return await type_keys(session, ep, version, timing, on_key)


async def type_moved_span(
    session: lsp_driver.ServerSession,
    ep: Episode,
    version: int,
    timing: SpanTiming,
    pause_s: float = 0.0,
) -> tuple[KeyAnswer, list[KeyAnswer]]:
    """A new spot in a file already open: the whole file opened at `version` and a first
    suggestion asked half the file away (`elsewhere_offset`), `pause_s` spent there, then the
    span's lines deleted in one change and typed again. Returns the first answer and one per
    keystroke; the document stays open."""
    uri, text = span_uri(ep), ep.original_text
    spot = elsewhere_offset(ep)
    session.open(uri, ep.language_id, text, version)
    if timing.cursor:
        session.move_cursor(uri, position_at(text, spot))
    first = await _ask(session, uri, text, spot, version)
    if pause_s > 0:
        await asyncio.sleep(pause_s)
    version += 1
    session.replace(uri, version, span_range(ep), "")
    if timing.cursor:
        session.move_cursor(uri, position_at(ep.initial_text, ep.start_offset))
    return first, await type_keys(session, ep, version, timing)


def span_range(ep: Episode) -> types.Range:
    """Where the span's text lies in the whole file: deleting it leaves `ep.initial_text`."""
    text = ep.original_text
    return types.Range(start=position_at(text, ep.start_offset),
                       end=position_at(text, ep.start_offset + len(ep.typed)))


async def type_keys(
    session: lsp_driver.ServerSession,
    ep: Episode,
    version: int,
    timing: SpanTiming,
    on_key: Callable[[], Any] = lambda: None,
) -> list[KeyAnswer]:
    """Type the span's keys into its open document, which is `ep.initial_text` at `version`;
    each key's answer awaited or, with `timing.delays_ms`, all collected at the end."""
    uri = span_uri(ep)
    loop = asyncio.get_running_loop()
    answered: list[KeyAnswer] = []
    pending: list[asyncio.Task[KeyAnswer]] = []  # not awaited: every answer collected at the end
    text = ep.initial_text
    due = loop.time()
    for k, ks in enumerate(ep.keystrokes):
        if timing.delays_ms is not None:  # an absolute schedule: a slow send does not drift it
            due += timing.delays_ms[k] / 1000
            await asyncio.sleep(max(0.0, due - loop.time()))
        before = position_at(text, ks.offset - 1)
        text = ep.text_after(k + 1)
        version += 1
        session.insert(uri, version, before, ks.char)
        request = _ask(session, uri, text, ks.offset, version)
        if timing.awaited:
            answered.append(await request)
        else:
            pending.append(asyncio.create_task(request))
        on_key()
    return answered + list(await asyncio.gather(*pending))


async def _ask(session: lsp_driver.ServerSession, uri: str, text: str, offset: int,
               version: int) -> KeyAnswer:
    loop = asyncio.get_running_loop()
    sent = loop.time()
    suggestion, latency, error = await session.inline(uri, text, offset)
    return KeyAnswer(suggestion, latency, error, version, sent, loop.time())


def is_newest(answers: Sequence[KeyAnswer], k: int) -> bool:
    """Answer k arrived before the next keystroke went out (or is the span's last): the
    suggestion was still for the text on screen."""
    return k == len(answers) - 1 or answers[k].done_at <= answers[k + 1].sent_at


def key_samples(
    engine: str,
    workload: str,
    ep: Episode,
    answers: Sequence[KeyAnswer],
    status: dict[str, Any],
    with_fresh: bool,
    side: str | None = None,
) -> list[Sample]:
    """One sample per keystroke: the answer, the server's record of it (`status`' recent
    requests; absent fields stay None), line-exact and, `with_fresh`, whether it was fresh
    (newest when it arrived, and neither superseded nor failed); `side`: an A/B run's."""
    records = lsp_driver.stats_by_version(status, span_uri(ep))
    samples: list[Sample] = []
    for k, (ks, answer) in enumerate(zip(ep.keystrokes, answers, strict=True)):
        c = lsp_driver.completion_with_stats(answer.suggestion, answer.latency_ms,
                                             records.get(answer.version), answer.error)
        fields: dict[str, Any] = {"line_exact": line_exact(ks.typed_prefix, c.text, ks.full_line)}
        if with_fresh:
            fields["fresh"] = is_newest(answers, k) and c.source not in ("superseded", "error")
        if answer.error:
            fields["extra"] = {"error": answer.error}
        samples.append(Sample.of(engine, workload, ep.name, k, c, side=side, **fields))
    return samples
