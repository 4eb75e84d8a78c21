"""Typing one span of a file over LSP, as an editor sends it: every typing scenario
(bench/ab/) types through `type_span`, but the typist who presses
Tab (`type_with_tab`, the saved scenario), whose keys depend on the answers.

A span opens its file (or, moved: opens the whole file, is asked elsewhere in it first, then
deletes the span's lines), optionally says where the cursor rests (lsp-complete/didMoveCursor,
which only lsp-complete's own editor plugins send), optionally rests (an editor that highlights
occurrences asks a server that offers them where, textDocument/documentHighlight), then types:
each keystroke is an incremental didChange and an automatic inlineCompletion request at the new
cursor (Enter inserts the line break and the indentation the editor keeps). Either every
key waits for the previous answer (burst typing: the next key as soon as
the answer is there), or keys go out on a schedule with their answers not awaited (a typist
who never waits), which is where answers go stale.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lsprotocol import types

from lsp_complete.bench import lsp_driver
from lsp_complete.bench.records import Completion, Sample
from lsp_complete.bench.workload import Episode, elsewhere_offset, first_line, line_exact
from lsp_complete.testing.lsp_client import position_at

# VS Code's occurrence highlight waits 250 ms after the cursor stops (a kickstart.nvim setup's
# CursorHold the same; Emacs lsp-mode and Eglot 500 ms).
HIGHLIGHT_DELAY_MS = 250.0


@dataclass(frozen=True)
class SpanTiming:
    cursor: bool = False  # send lsp-complete/didMoveCursor where typing starts
    rest_ms: float = 0.0  # after opening (and the cursor), before the first key
    # Milliseconds before each key, counted from the previous key's sending (the first from
    # the end of the rest); answers are then not awaited. None: each key is sent as soon as
    # the previous answer arrived.
    delays_ms: tuple[float, ...] | None = None
    # $/cancelRequest for the request not answered yet as the next one goes out (VS Code's
    # client with the provider's token, our Neovim plugin, most others do).
    cancels: bool = False
    # The editor closes the brackets and quotes typed (VS Code's and JetBrains' default):
    # `(` puts `()` in, typing `)` there types over it (`autoclosed`).
    autoclose: bool = False
    # The editor highlights occurrences: HIGHLIGHT_DELAY_MS after the cursor comes to rest it
    # asks the server where (`Session.cursor_rests`), in rests at least that long.
    highlights: bool = False
    # A moved span: the person looks at the new spot this long before the first key.
    look_ms: float = 0.0

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
    # The cursor line after the cursor that stays once the answer is taken: the closers an
    # auto-closing editor put there, less those the answer replaces ("" without them).
    after: str = ""


def span_version(index: int) -> int:
    """The document version a span starts at: client-chosen, one range per span, so status
    records of different spans on the same file never collide."""
    return (index + 1) * 100_000


def span_uri(ep: Episode) -> str:
    return Path(ep.path).resolve().as_uri()


async def type_span(
    session: lsp_driver.Session,
    ep: Episode,
    version: int,
    timing: SpanTiming,
    opened: bool = False,
) -> list[KeyAnswer]:
    """Open the span's file at `version` (unless `opened`: it is open, `ep.initial_text` at
    `version`) and type it; returns one answer per keystroke, all arrived, each awaited or,
    with `timing.delays_ms`, all collected at the end. The document stays open (the caller
    reads the server's records, then closes)."""
    uri = span_uri(ep)
    if not opened:
        session.open(uri, ep.language_id, ep.initial_text, version)
        if timing.cursor:
            session.move_cursor(uri, position_at(ep.initial_text, ep.start_offset))
        await rest(session, uri, position_at(ep.initial_text, ep.start_offset),
                   timing.rest_ms, timing.highlights)
    loop = asyncio.get_running_loop()
    answered: list[KeyAnswer] = []
    pending: list[asyncio.Task[KeyAnswer]] = []  # not awaited: every answer collected at the end
    text = ep.initial_text
    edits = autoclosed(ep) if timing.autoclose else [(ks.text, "") for ks in ep.keystrokes]
    due = loop.time()
    for k, (ks, (typed, closers)) in enumerate(zip(ep.keystrokes, edits, strict=True)):
        at = ks.offset - len(ks.text)
        before = position_at(text, at)
        if timing.delays_ms is not None:  # an absolute schedule: a slow send does not drift it
            due = await _rest_until(session, uri, before, timing.highlights,
                                    timing.delays_ms[k], due)
        plain = ep.text_after(ks.typed)
        text = plain[: ks.offset] + closers + plain[ks.offset :]
        version += 1
        # ("" types over the closer the editor put: it replaces it by the same character)
        _replace(session, uri, version, before, 0 if typed else len(ks.text), typed or ks.text)
        if timing.cancels:
            session.cancel_pending()
        request = _ask(session, uri, text, ks.offset, version)
        if timing.awaited:
            answered.append(await request)
        else:
            pending.append(asyncio.create_task(request))
    return answered + list(await asyncio.gather(*pending))


async def type_moved_span(
    session: lsp_driver.Session,
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
    await rest(session, uri, position_at(text, spot), pause_s * 1000, timing.highlights)
    version += 1
    session.replace(uri, version, span_range(ep), "")
    where = position_at(ep.initial_text, ep.start_offset)
    if timing.cursor:
        session.move_cursor(uri, where)
    await rest(session, uri, where, timing.look_ms, timing.highlights)
    return first, await type_span(session, ep, version, timing, opened=True)


async def rest(session: lsp_driver.Session, uri: str, where: types.Position, rest_ms: float,
               highlights: bool) -> None:
    """The cursor rests at `where` for `rest_ms` from now (`_rest_until`)."""
    if rest_ms > 0:
        await _rest_until(session, uri, where, highlights, rest_ms,
                          asyncio.get_running_loop().time())


_PAIRS = {"(": ")", "[": "]", "{": "}", '"': '"', "'": "'"}
# An editor closes a bracket only before these (VS Code's autoCloseBefore), or at a line's end.
_CLOSE_BEFORE = frozenset(";:.,=}])> \t")


def autoclosed(ep: Episode) -> list[tuple[str, str]]:
    """Each key of `ep` as an auto-closing editor makes it: (what it inserts, the closers it
    has put after the cursor once the key is in). An opener whose closer the line has later
    inserts both, when what follows the cursor allows; typing that closer then types over it
    (inserts nothing). Quotes too, but not after a word character. Pairs are matched within a
    line (`_line_pairs`), so none is left open at a line's end."""
    lines = ep.original_text.split("\n")
    edits: list[tuple[str, str]] = []
    closers: list[int] = []  # columns (of the original line) of the closers put, innermost first
    row = -1
    for ks in ep.keystrokes:
        if ks.line != row:
            row, pairs, closers = ks.line, _line_pairs(lines[ks.line]), []
        line, col = lines[row], ks.col
        if ks.text[0] == "\n":
            edits.append((ks.text, ""))
            continue
        if closers and closers[0] == col:
            closers = closers[1:]
            edits.append(("", "".join(line[c] for c in closers)))
            continue
        after = line[closers[0]] if closers else ""
        word_before = col > 0 and (line[col - 1].isalnum() or line[col - 1] == "_")
        if col in pairs and (after == "" or after in _CLOSE_BEFORE) and not (
                ks.text in "\"'" and word_before):
            closers = [pairs[col], *closers]
            edits.append((ks.text + line[pairs[col]], "".join(line[c] for c in closers)))
            continue
        edits.append((ks.text, "".join(line[c] for c in closers)))
    return edits


def _line_pairs(line: str) -> dict[int, int]:
    """Openers of `line` and the columns of their closers on it: brackets matched as nested,
    quotes to the next unescaped same quote."""
    pairs: dict[int, int] = {}
    stack: list[int] = []
    i = 0
    while i < len(line):
        ch = line[i]
        if ch in "\"'":
            end = line.find(ch, i + 1)
            while end > 0 and line[end - 1] == "\\":
                end = line.find(ch, end + 1)
            if end > 0:
                pairs[i], i = end, end + 1
                continue
        if ch in "([{":
            stack.append(i)
        elif ch in ")]}" and stack:
            opener = stack.pop()
            if _PAIRS[line[opener]] == ch:
                pairs[opener] = i
        i += 1
    return pairs


def span_range(ep: Episode) -> types.Range:
    """Where the span's text lies in the whole file: deleting it leaves `ep.initial_text`."""
    text = ep.original_text
    return types.Range(start=position_at(text, ep.start_offset),
                       end=position_at(text, ep.start_offset + len(ep.typed)))


@dataclass(frozen=True)
class TypistStep:
    """One step of the typist who presses Tab: a key typed, or Tab, then the request."""

    answer: KeyAnswer  # the request made after the step
    accepted: int  # characters the step inserted with Tab (0: it typed one key)
    rest: str  # the rest of the line after the step, as the file has it
    shown: bool  # the answer arrived before the next step: the typist saw it

    @property
    def wrong(self) -> bool:
        """Shown, not empty, and its first line is not how the line goes on: it would have
        put in what the user did not want (one that only stops short is not wrong)."""
        shown = first_line(self.answer.suggestion)
        return self.shown and bool(shown) and not self.rest.startswith(shown)


def takes_line(suggestion: str, after: str, rest: str) -> bool:
    """Tab on `suggestion` completes the line: its first line, then what stays after the
    cursor (`after`), is exactly `rest`, the line's rest as the file has it (not empty)."""
    return bool(rest) and first_line(suggestion) + after == rest


def block_rest(ep: Episode, k: int, suggestion: str) -> str:
    """The suggestion when it is a block whose lines are exactly the lines still to be typed
    from the first `k` characters of the span on (it ends where one of them ends), else ""."""
    left = ep.typed[k:]
    if "\n" not in suggestion or not left.startswith(suggestion):
        return ""
    return suggestion if left[len(suggestion):][:1] in ("", "\n") else ""


async def type_with_tab(
    session: lsp_driver.Session,
    ep: Episode,
    version: int,
    timing: SpanTiming,
) -> list[TypistStep]:
    """Open the span's file and type it on `timing`'s schedule without waiting for answers,
    pressing Tab instead of the next key whenever the newest answer has arrived, for the text
    as it is, and is either a block whose lines are exactly the lines still to be typed
    (`block_rest`: the block goes in) or its first line is exactly the rest of the line (that
    rest goes in, and typing goes on at the line break). It stops after the span's
    keystrokes (a Tab may take it past a keystroke cap). In an auto-closing editor the
    closers it put stay after the cursor (`autoclosed`): Tab takes a line whose first line and
    what stays of those closers are the rest of the line (the item replaces the others); a
    block only with none there. The document stays open."""
    assert timing.delays_ms is not None
    uri = span_uri(ep)
    session.open(uri, ep.language_id, ep.initial_text, version)
    loop = asyncio.get_running_loop()
    made: list[tuple[asyncio.Task[KeyAnswer], int, int]] = []  # request, accepted, k after
    # Each key by where it starts: what it inserts ("" types over a closer) and the closers
    # after the cursor once it is in.
    edits = autoclosed(ep) if timing.autoclose else [(ks.text, "") for ks in ep.keystrokes]
    keys = {ks.typed - len(ks.text): (ks.text, *edit)
            for ks, edit in zip(ep.keystrokes, edits, strict=True)}
    end = ep.keystrokes[-1].typed if ep.keystrokes else 0
    k, closers, due = 0, "", loop.time()
    while k < end:
        where = position_at(ep.text_after(k), ep.start_offset + k)
        due = await _rest_until(session, uri, where, timing.highlights,
                                timing.delays_ms[len(made)], due)
        newest = made[-1][0] if made else None
        rest = first_line(ep.typed[k:])  # whole past a keystroke cap: Tab takes the file's line
        version += 1
        answer = newest.result() if newest is not None and newest.done() else None
        arrived = answer.suggestion if answer is not None else ""
        block = "" if closers else block_rest(ep, k, arrived)
        if block:
            session.insert(uri, version, where, block)
            accepted, k = len(block), k + len(block)
        elif answer is not None and arrived and takes_line(arrived, answer.after, rest):
            _replace(session, uri, version, where, len(closers) - len(answer.after),
                     first_line(arrived))
            accepted, k, closers = len(rest), k + len(rest), ""
        else:
            key, typed, closers = keys.get(k, (ep.typed[k], ep.typed[k], closers))
            _replace(session, uri, version, where, 0 if typed else len(key), typed or key)
            accepted, k = 0, k + len(key)
        if timing.cancels:
            session.cancel_pending()
        plain, at = ep.text_after(k), ep.start_offset + k
        request = _ask(session, uri, plain[:at] + closers + plain[at:], at, version)
        made.append((asyncio.create_task(request), accepted, k))
    answers = list(await asyncio.gather(*(task for task, _, _ in made)))
    return [TypistStep(answer, accepted, first_line(ep.typed[after:]), is_newest(answers, i))
            for i, (answer, (_, accepted, after)) in enumerate(zip(answers, made, strict=True))]


async def _rest_until(session: lsp_driver.Session, uri: str, where: types.Position,
                      highlights: bool, rest_ms: float, since: float) -> float:
    """The cursor rests at `where` until `rest_ms` after `since` (the loop's clock), which is
    returned: an editor that highlights occurrences (`highlights`) asks the server where once
    HIGHLIGHT_DELAY_MS of it have passed, in a rest that long."""
    loop = asyncio.get_running_loop()
    if highlights and rest_ms >= HIGHLIGHT_DELAY_MS:
        await asyncio.sleep(max(0.0, since + HIGHLIGHT_DELAY_MS / 1000 - loop.time()))
        session.cursor_rests(uri, where)
    until = since + rest_ms / 1000
    await asyncio.sleep(max(0.0, until - loop.time()))
    return until


def _replace(session: lsp_driver.Session, uri: str, version: int, where: types.Position,
             replaced: int, text: str) -> None:
    """`text` in place of the `replaced` characters after `where` (on its line), as an editor
    applies an item or types over a closer: an insert when none is replaced."""
    if not replaced:
        session.insert(uri, version, where, text)
        return
    end = types.Position(line=where.line, character=where.character + replaced)
    session.replace(uri, version, types.Range(start=where, end=end), text)


async def _ask(session: lsp_driver.Session, uri: str, text: str, offset: int,
               version: int) -> KeyAnswer:
    loop = asyncio.get_running_loop()
    sent = loop.time()
    suggestion, latency, error, replaced = await session.inline(uri, text, offset)
    end = text.find("\n", offset)
    after = text[offset : len(text) if end < 0 else end][replaced:]
    return KeyAnswer(suggestion, latency, error, version, sent, loop.time(), after)


def is_newest(answers: Sequence[KeyAnswer], k: int) -> bool:
    """Answer k arrived before the next keystroke went out (or is the span's last): the
    suggestion was still for the text on screen."""
    return k == len(answers) - 1 or answers[k].done_at <= answers[k + 1].sent_at


def fresh(newest: bool, c: Completion) -> bool:
    """The answer was shown: the newest when it arrived (`is_newest`), neither superseded nor
    failed."""
    return newest and c.source not in ("superseded", "error")


def with_records(answers: Sequence[KeyAnswer], status: dict[str, Any],
                 uri: str) -> list[Completion]:
    """Each answer with the server's record of it (`status`' recent requests for `uri`;
    absent fields stay None)."""
    records = lsp_driver.stats_by_version(status, uri)
    return [lsp_driver.completion_with_stats(a.suggestion, a.latency_ms, records.get(a.version),
                                             a.error) for a in answers]


def key_samples(engine: str, workload: str, ep: Episode, answers: Sequence[KeyAnswer],
                status: dict[str, Any], side: str) -> list[Sample]:
    """One sample per keystroke: the answer with the server's record of it (`with_records`),
    line-exact, whether it was fresh (newest when it arrived, and neither superseded nor
    failed), what Tab would have accepted of it (`accepted_chars`), whether its key ends a
    line, and the language."""
    samples: list[Sample] = []
    completions = with_records(answers, status, span_uri(ep))
    for k, (ks, answer, c) in enumerate(zip(ep.keystrokes, answers, completions, strict=True)):
        shown = fresh(is_newest(answers, k), c)
        line_end = k == len(ep.keystrokes) - 1 or ep.keystrokes[k + 1].text[0] == "\n"
        extra = {"accepted_chars": accepted_chars(ks.typed_prefix, c.text, ks.full_line)
                 if shown else 0, "line_end": line_end, "language": ep.language_id}
        samples.append(Sample.of(engine, workload, ep.name, k, c, answer.error, side=side,
                                 fresh=shown,
                                 line_exact=line_exact(ks.typed_prefix, c.text, ks.full_line,
                                                       answer.after),
                                 extra=extra))
    return samples


def accepted_chars(typed_prefix: str, suggestion: str, full_line: str) -> int:
    """What Tab would have accepted correctly: the length of the common prefix of the
    suggestion's first line and the rest of the line as it was actually typed."""
    rest, shown = full_line[len(typed_prefix):], first_line(suggestion)
    return len(os.path.commonprefix([rest, shown]))
