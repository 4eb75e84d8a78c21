"""`lsp-complete bench --baseline REF`: two versions side by side (bench/ab/)."""

from __future__ import annotations

import asyncio
import dataclasses
import gzip
import json
import os
import random
import signal
import statistics
import subprocess
import sys
from pathlib import Path

import pytest
from lsprotocol import types

from lsp_complete.bench import humaneval, install, lsp_driver, spans, stats, workload
from lsp_complete.bench.ab import drive, measures, scenarios
from lsp_complete.bench.ab.drive import LARGE_PHASES, UnitRun
from lsp_complete.bench.compat.sitecustomize import NO_EXTRA_BUFFERS
from lsp_complete.bench.records import Sample
from lsp_complete.bench.servers import base_server_env, live_checkout
from lsp_complete.bench.spans import accepted_chars
from lsp_complete.engine import llama_backend
from lsp_complete.testing.lsp_client import position_at

# --- scenarios ---------------------------------------------------------------------------------


def test_the_autoclosing_client_asks_for_items_that_replace_the_closers() -> None:
    (burst,) = scenarios.parse("autoclose:burst")
    assert (burst.client, burst.timing, burst.awaited) == ("autoclose", "burst", True)
    assert burst.options == {"replaceLineSuffix": True}
    ep = workload.Episode("e", "e.py", "python", "\n", 0, "x", ())
    assert scenarios.span_timing(burst, ep, 0, 100.0).autoclose
    assert not scenarios.span_timing(scenarios.parse("burst")[0], ep, 0, 100.0).autoclose
    (saved,) = scenarios.parse("autoclose:saved")
    assert saved.saves and saved.options == {"multiline": "auto", "replaceLineSuffix": True}
    assert scenarios.span_timing(saved, ep, 0, 100.0).autoclose


def test_scenarios_are_parsed_with_the_generic_client_by_default() -> None:
    parsed = scenarios.parse("burst, ours:rest2s,generic:think,open,he-pause,burst")
    assert [s.name for s in parsed] == ["burst", "ours:rest2s", "think", "open", "he-pause"]
    assert parsed[1].client == "ours" and parsed[1].timing == "rest2s" and parsed[1].awaited
    assert parsed[2].client == "generic" and not parsed[2].awaited
    assert parsed[4].kind == "humaneval" and parsed[4].pause_s == scenarios.HE_PAUSE_S
    assert [s.name for s in scenarios.parse(",".join(scenarios.DEFAULT))] == list(
        scenarios.DEFAULT)
    for bad in ("sprint", "theirs:burst", " , "):
        with pytest.raises(ValueError):
            scenarios.parse(bad)
    every = scenarios.parse(",".join([*scenarios.TIMINGS, *scenarios.OPEN_SCENARIOS]))
    assert all(scenarios.about(s.name) for s in every)  # each says what it does in the report
    kinds = {s.name: s.kind for s in scenarios.parse(",".join(scenarios.BASELINES_DEFAULT))}
    assert kinds["large-file"] == "large" and kinds["crossfile"] == "crossfile"
    (beside,) = scenarios.parse("crossfile-open")
    assert beside.kind == "crossfile" and beside.opens_imported and not every[-2].opens_imported
    # As a generic client asks: no cursor, at open or after a pause; "ours" waits at the spot.
    ours, at_open, paused = scenarios.parse("crossfile,crossfile-at-open,crossfile-pause")
    assert not ours.asks_unannounced and at_open.asks_unannounced and paused.asks_unannounced
    assert (at_open.pause_s, paused.pause_s) == (0.0, scenarios.CROSSFILE_PAUSE_S)
    assert {at_open.kind, paused.kind} == {"crossfile"}


def test_busy_types_as_think_with_a_cpu_bound_process_beside(monkeypatch) -> None:
    import os
    import time

    from lsp_complete.bench.ab import load
    from lsp_complete.bench.ab.load import cpu_bound_process

    (busy,) = scenarios.parse("busy")
    assert busy.kind == "typing" and busy.busy and not busy.awaited
    assert not scenarios.parse("think")[0].busy
    started: list[subprocess.Popen[bytes]] = []

    class Recorded(subprocess.Popen[bytes]):  # the loop's process, once started
        def __init__(self, *args, **kwargs) -> None:
            super().__init__(*args, **kwargs)
            started.append(self)

    def user_cpu_s(pid: int) -> float:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return int(fields[11]) / os.sysconf("SC_CLK_TCK")  # utime: field 14 of stat

    monkeypatch.setattr(load.subprocess, "Popen", Recorded)
    start = time.process_time()
    before = os.times()
    with cpu_bound_process():
        (process,) = started
        # Until the loop has had a second of a core, however long a busy machine takes to
        # give it that (bounded only so that a loop that never runs cannot hang the suite).
        deadline = time.monotonic() + 120
        while user_cpu_s(process.pid) < 1.0 and time.monotonic() < deadline:
            time.sleep(0.02)
    burned = os.times().children_user - before.children_user
    assert burned > 0.9  # the loop ran on a core, in a child, while this process waited
    # This process only waited (CPU time: a busy machine adds none to a process that
    # sleeps): the loop is not one of its threads.
    assert time.process_time() - start < 0.3
    with cpu_bound_process(active=False):
        pass
    assert len(started) == 1  # (none when not active)


def test_think_intervals_look_like_published_typing() -> None:
    """Dhakal et al. 2018: a mean of about 200-250 ms between keys, with a long tail."""
    drawn = scenarios.think_intervals(20_000, random.Random(1))
    assert 200 <= statistics.fmean(drawn) <= 250
    assert statistics.median(drawn) < statistics.fmean(drawn)  # right-skewed
    assert sum(d > 1000 for d in drawn) / len(drawn) > 0.02  # think pauses
    assert min(drawn) >= scenarios.MIN_INTERVAL_MS and max(drawn) <= scenarios.MAX_INTERVAL_MS
    assert scenarios.think_intervals(50, random.Random(3)) == \
        scenarios.think_intervals(50, random.Random(3))


def test_span_timing_per_scenario(tmp_path: Path) -> None:
    path = tmp_path / "m.py"
    path.write_text("\n".join(f"value_{i} = compute({i}, {i + 1})" for i in range(40)) + "\n")
    (ep,) = workload.build_episodes([str(path)], 1, 1, seed=0)
    n = len(ep.keystrokes)
    burst = scenarios.span_timing(scenarios.parse("burst")[0], ep, 0, 200)
    assert burst.awaited and burst.rest_ms == 0 and not burst.cursor
    ours = scenarios.span_timing(scenarios.parse("ours:rest2s")[0], ep, 0, 200)
    assert ours.awaited and ours.rest_ms == 2000 and ours.cursor and ours.cancels
    assert not burst.cancels
    cancelling = scenarios.span_timing(scenarios.parse("cancelling:saved")[0], ep, 0, 200)
    saved = scenarios.span_timing(scenarios.parse("saved")[0], ep, 0, 200)
    assert cancelling.cancels and not cancelling.cursor and not saved.cancels
    assert cancelling.delays_ms == saved.delays_ms  # the same typist, another client
    paced = scenarios.span_timing(scenarios.parse("paced")[0], ep, 0, 200)
    assert paced.delays_ms == (0.0,) + (200.0,) * (n - 1) and paced.rest_ms == 1000
    think = scenarios.span_timing(scenarios.parse("think")[0], ep, 0, 200)
    assert think.delays_ms is not None and len(think.delays_ms) == n
    assert think == scenarios.span_timing(scenarios.parse("think")[0], ep, 0, 200)  # A == B


def test_moved_is_burst_typing_at_a_new_spot_of_an_open_file(tmp_path: Path) -> None:
    """The span's file opened whole, asked half the file away, the span's lines deleted in
    one change (as pygls applies it: UTF-16 columns) and typed back."""
    moved, pause = scenarios.parse("moved,moved-pause")
    assert moved.kind == "typing" and moved.moved and moved.awaited and moved.pause_s == 0
    assert pause.moved and pause.pause_s == scenarios.MOVED_PAUSE_S == 3.0
    assert not scenarios.parse("burst")[0].moved
    # Every typing scenario reports a span's first key and the keys after it apart.
    for scenario in scenarios.parse("moved,moved-pause,burst,think,saved"):
        names = [m.name for m in measures.measures_for(scenario)]
        for wanted in ("first key of a span p50", "first key of a span p95",
                       "keystroke p50 after a span's first key",
                       "keystroke p95 after a span's first key"):
            assert wanted in names, (scenario.name, wanted)

    from pygls.workspace import TextDocument

    from lsp_complete.bench.spans import span_range

    lines = [f"value_{i} = compute({i}, {i + 1})" for i in range(60)]
    lines[31] = '    label = "\U0001f642 done here, at last"'  # 2 UTF-16 units in one code point
    path = tmp_path / "m.py"
    path.write_text("\n".join(lines) + "\n")
    ep = workload.make_episode(workload.read_source(str(path)), 30, 2, cap=12)
    assert ep.original_text == path.read_text() and len(ep.keystrokes) == 12
    whole = workload.make_episode(workload.read_source(str(path)), 30, 2, cap=1000)
    assert "".join(k.text for k in whole.keystrokes) == "\n".join(lines[30:32])  # not past it
    doc = TextDocument("file:///m.py", ep.original_text)
    doc.apply_change(types.TextDocumentContentChangePartial(range=span_range(ep), text=""))
    assert doc.source == ep.initial_text
    spot = workload.elsewhere_offset(ep)
    spot_line = ep.original_text.count("\n", 0, spot)
    assert abs(spot_line - 30) >= 20  # far from the span
    line = ep.original_text.split("\n")[spot_line]
    assert 0 < spot - ep.original_text.rfind("\n", 0, spot) - 1 < len(line)  # mid-line


class ScriptedSession:
    """Stands in for a server: keeps the document as the edits make it, checks that every
    request is asked of that text, and answers at once with `answer(the rest of the line as
    the original file has it)`."""

    def __init__(self, answer, original: str) -> None:
        self.answer = answer
        self.original = original
        self.text = ""
        self.edits: list[str] = []

    def open(self, uri: str, language_id: str, text: str, version: int) -> None:
        self.text = text

    def insert(self, uri: str, version: int, position: types.Position, text: str) -> None:
        lines = self.text.split("\n")
        offset = sum(len(line) + 1 for line in lines[: position.line]) + position.character
        self.text = self.text[:offset] + text + self.text[offset:]
        self.edits.append(text)

    async def inline(self, uri: str, text: str, offset: int) -> lsp_driver.InlineAnswer:
        assert text == self.text
        return lsp_driver.InlineAnswer(
            self.answer(self.original[offset:].split("\n", 1)[0]), 1.0, None)


class AutoclosingSession(ScriptedSession):
    """ScriptedSession that also takes a replace (typing over a closer) and answers with the
    rest of the line as an item that replaces the closers after the cursor."""

    def replace(self, uri: str, version: int, where: types.Range, text: str) -> None:
        lines = self.text.split("\n")

        def offset(p: types.Position) -> int:
            return sum(len(line) + 1 for line in lines[: p.line]) + p.character

        assert where.start.line == where.end.line
        a, b = offset(where.start), offset(where.end)
        # Typed over (the same character: recorded as ""), or an item that replaces closers.
        self.edits.append("" if self.text[a:b] == text else text)
        self.text = self.text[:a] + text + self.text[b:]

    async def inline(self, uri: str, text: str, offset: int) -> lsp_driver.InlineAnswer:
        assert text == self.text
        after = text[offset:].split("\n", 1)[0]
        return lsp_driver.InlineAnswer(self.answer(self.original[offset:].split("\n", 1)[0]),
                                       1.0, None, replaced=len(after))


class RestingSession(AutoclosingSession):
    """AutoclosingSession that keeps when each edit and each report of a resting cursor came
    (the moved span's deletion is a replace)."""

    def __init__(self, answer, original: str) -> None:
        super().__init__(answer, original)
        self.events: list[tuple[str, float, object]] = []

    def _event(self, what: str, detail: object = None) -> None:
        self.events.append((what, asyncio.get_running_loop().time(), detail))

    def replace(self, uri: str, version: int, where: types.Range, text: str) -> None:
        super().replace(uri, version, where, text)
        self._event("replace")

    def insert(self, uri: str, version: int, position: types.Position, text: str) -> None:
        super().insert(uri, version, position, text)
        self._event("insert")

    def move_cursor(self, uri: str, position: types.Position) -> None:
        self._event("cursor", position)

    def cursor_rests(self, uri: str, position: types.Position) -> None:
        self._event("rests", position)


def test_an_editor_that_highlights_asks_where_the_cursor_rests_before_the_first_key(
        tmp_path: Path) -> None:
    """highlight:moved-look: at the new spot the cursor rests a second before the first key;
    an editor that highlights occurrences asks the server where, HIGHLIGHT_DELAY_MS after it
    came to rest (never in a shorter rest), and a generic one says nothing."""
    look, plain, moved = scenarios.parse("highlight:moved-look,moved-look,highlight:moved")
    assert look.moved and look.awaited and look.client == "highlight"
    path = tmp_path / "m.py"
    path.write_text("\n".join(f"value_{i} = compute({i}, {i + 1})" for i in range(60)) + "\n")
    ep = workload.make_episode(workload.read_source(str(path)), 30, 1, cap=4)
    timing = scenarios.span_timing(look, ep, 0, 200)
    assert timing.highlights and not timing.cursor and timing.look_ms == scenarios.MOVED_LOOK_MS
    assert scenarios.span_timing(plain, ep, 0, 200) == dataclasses.replace(timing,
                                                                           highlights=False)
    assert scenarios.span_timing(moved, ep, 0, 200).look_ms == 0

    def drive(look_ms: float, highlights: bool = True) -> list[tuple[str, float, object]]:
        session = RestingSession(lambda rest: "", ep.original_text)
        timing = dataclasses.replace(scenarios.span_timing(look, ep, 0, 200), look_ms=look_ms,
                                     highlights=highlights)
        asyncio.run(spans.type_moved_span(session, ep, 100, timing))  # type: ignore[arg-type]
        return session.events

    events = drive(400)
    kinds = [what for what, _, _ in events]
    assert kinds[:3] == ["replace", "rests", "insert"], kinds
    (_, deleted, _), (_, asked, where), (_, typed, _) = events[:3]
    assert where == spans.span_range(ep).start  # where typing starts
    assert asked - deleted >= spans.HIGHLIGHT_DELAY_MS / 1000 * 0.9
    assert typed - deleted >= 0.4 * 0.9
    assert "rests" not in [what for what, _, _ in drive(spans.HIGHLIGHT_DELAY_MS / 2)]
    assert "rests" not in [what for what, _, _ in drive(400, highlights=False)]

    # Typing: it asks in a gap between keys long enough, where the cursor is then.
    session = RestingSession(lambda rest: "", ep.original_text)
    gaps = spans.SpanTiming(delays_ms=(0.0, 300.0, 100.0, 100.0), highlights=True)
    asyncio.run(spans.type_span(session, ep, 100, gaps))  # type: ignore[arg-type]
    kinds = [what for what, _, _ in session.events]
    assert kinds == ["insert", "rests", "insert", "insert", "insert"], kinds
    first_key = ep.keystrokes[0]
    assert session.events[1][2] == position_at(ep.text_after(first_key.typed), first_key.offset)


def test_an_autoclosing_editor_puts_the_closers_in_and_types_over_them(tmp_path: Path) -> None:
    import asyncio

    path = tmp_path / "a.py"
    path.write_text("".join(f"x{i} = f(a[{i}], \"s\")\n" for i in range(30)))
    ep = workload.make_episode(workload.read_source(str(path)), 25, 1)
    assert ep.typed == 'x25 = f(a[25], "s")'
    edits = spans.autoclosed(ep)
    assert [e for e, _ in edits] == [*"x25 = ", "f", "()", "a", "[]", "2", "5", "", ",", " ",
                                     '""', "s", "", ""]
    assert [c for _, c in edits][6:] == ["", ")", ")", "])", "])", "])", ")", ")", ")",
                                         '")', '")', ")", ""]
    # A quote after a word character is not closed; a bracket only before what allows it.
    (ep2,) = [workload.make_episode(workload.read_source(str(_file(tmp_path, "it's(x)"))), 25,
                                    1)]
    assert [e for e, _ in spans.autoclosed(ep2)][:5] == ["i", "t", "'", "s", "()"]

    # Typed as such an editor does, the span is the original line, and each answer (the rest
    # of the line as an item over the closers) completes the line exactly.
    session = AutoclosingSession(lambda rest: rest, ep.original_text)
    answers = asyncio.run(spans.type_span(session, ep, 100, spans.SpanTiming(autoclose=True)))
    assert session.text == ep.original_text
    assert session.edits.count("") == 3  # `]`, `"`, `)` typed over
    assert all(a.after == "" for a in answers)
    samples = spans.key_samples("d", "autoclose:burst", ep, answers, {}, "B")
    assert all(s.line_exact for s in samples[:-1])
    # Inserted at the cursor instead (no replace), the same text leaves the closers doubled.
    session = ScriptedSession(lambda rest: rest, ep.original_text)
    session.replace = AutoclosingSession.replace.__get__(session)  # type: ignore[method-assign]
    answers = asyncio.run(spans.type_span(session, ep, 100, spans.SpanTiming(autoclose=True)))
    samples = spans.key_samples("d", "autoclose:burst", ep, answers, {}, "B")
    assert [a.after for a in answers][7] == ")"
    assert not samples[7].line_exact and samples[0].line_exact


@pytest.mark.parametrize(("replacing", "tabs"), [(True, True), (False, False)])
def test_the_typist_in_an_autoclosing_editor_takes_a_line_over_the_closers(
        tmp_path: Path, replacing: bool, tabs: bool) -> None:
    """The rest of the line as an item over the closers the editor put: Tab takes it, the
    closers replaced (the span typed back). The same text inserted at the cursor would leave
    them doubled: the typist types on, and the answers are not line-exact."""
    import asyncio

    path = tmp_path / "a.py"
    path.write_text("".join(f"x{i} = f(a[{i}], 2)\n" for i in range(30)))
    ep = workload.make_episode(workload.read_source(str(path)), 25, 1)
    # Suggestions only once the call's paren is typed (the editor has put its `)` then).
    session = AutoclosingSession(lambda rest: "" if "(" in rest else rest, ep.original_text)
    if not replacing:
        async def inserting(uri: str, text: str, offset: int) -> lsp_driver.InlineAnswer:
            answer = await AutoclosingSession.inline(session, uri, text, offset)
            return answer._replace(replaced=0)
        session.inline = inserting  # type: ignore[method-assign]
    delays = tuple([0.0] + [15.0] * (len(ep.keystrokes) - 1))
    steps = asyncio.run(spans.type_with_tab(session, ep, 100, spans.SpanTiming(
        delays_ms=delays, autoclose=True)))
    assert session.text == ep.original_text
    assert any(s.accepted for s in steps) == tabs
    if tabs:  # `x25 = f(` typed, then Tab: the rest of the line, the editor's `)` replaced
        typed = len("x25 = f(")
        assert [s.accepted for s in steps][typed - 1 :] == [0, len(ep.typed) - typed]
        assert session.edits[typed] == ep.typed[typed:]


def _file(tmp_path: Path, line: str) -> Path:
    path = tmp_path / "q.py"
    path.write_text("".join(f"{line} + {i}\n" for i in range(30)))
    return path


def _typist_episode(tmp_path: Path) -> workload.Episode:
    path = tmp_path / "t.py"
    path.write_text("".join(f"total_{i} = compute({i}, scale) + offset\n" for i in range(40)))
    return workload.make_episode(workload.read_source(str(path)), 20, 2)


@pytest.mark.parametrize(("answer", "tabs", "wrong"), [
    (lambda rest: rest, True, False),  # always the rest of the line: Tab at the second step
    (lambda rest: rest[:-1], False, False),  # one short of it: typed to the end, not wrong
    (lambda rest: "print()", False, True),  # always something else: typed, wrong each time
])
def test_the_typist_presses_tab_on_exactly_the_rest_of_the_line(tmp_path, answer, tabs,
                                                                  wrong) -> None:
    import asyncio

    from lsp_complete.bench.spans import SpanTiming, type_with_tab

    ep = _typist_episode(tmp_path)
    session = ScriptedSession(answer, ep.original_text)
    timing = SpanTiming(delays_ms=tuple([0.0] + [15.0] * (len(ep.keystrokes) - 1)))
    steps = asyncio.run(type_with_tab(session, ep, 100, timing))  # type: ignore[arg-type]
    assert session.text == ep.original_text  # the span typed back, by keys and Tabs
    accepted = sum(s.accepted for s in steps)
    typed = sum(1 for s in steps if s.accepted == 0)
    assert accepted + typed == len(ep.keystrokes) == len(ep.typed)
    breaks = ep.typed.count("\n")
    if tabs:  # the first key typed (nothing was suggested yet), then Tab and a line break in turn
        assert [s.accepted > 0 for s in steps] == [i % 2 == 1 for i in range(len(steps))]
        assert accepted == len(ep.typed) - 1 - breaks
    else:
        assert accepted == 0 and len(steps) == len(ep.keystrokes)
    assert all(s.shown for s in steps)
    # Wrong: shown, not empty, and not how the line goes on.
    assert any(s.wrong for s in steps) == wrong


def test_the_typist_presses_enter_and_the_editor_indents(tmp_path) -> None:
    """Enter puts the next line's indentation in with the line break (one key, one request
    at the indented line), as editors do."""
    import asyncio

    from lsp_complete.bench.spans import SpanTiming, type_with_tab

    path = tmp_path / "i.py"
    path.write_text("def f(scale, offset):\n" + "".join(
        f"    total_{i} = compute({i}, scale) + offset\n" for i in range(40)))
    ep = workload.make_episode(workload.read_source(str(path)), 20, 2)
    session = ScriptedSession(lambda rest: "print()", ep.original_text)  # never taken
    timing = SpanTiming(delays_ms=tuple([0.0] + [15.0] * (len(ep.keystrokes) - 1)))
    steps = asyncio.run(type_with_tab(session, ep, 100, timing))  # type: ignore[arg-type]
    assert session.text == ep.original_text
    assert len(steps) == len(ep.keystrokes) == len(ep.typed) - len("    ")
    assert [s.rest for s in steps].count("total_20 = compute(20, scale) + offset") == 1


class BlockSession(ScriptedSession):
    """Answers with the rest of the span's lines as the original file has them, and then
    `tail` (a line the user will not type, or nothing)."""

    def __init__(self, original: str, span_end: int, tail: str) -> None:
        super().__init__(lambda rest: rest, original)
        self.span_end, self.tail = span_end, tail

    async def inline(self, uri: str, text: str, offset: int) -> lsp_driver.InlineAnswer:
        assert text == self.text
        return lsp_driver.InlineAnswer(self.original[offset:self.span_end] + self.tail, 1.0,
                                       None)


@pytest.mark.parametrize(("tail", "block"), [("", True), ("\nprint(total_0)", False)])
def test_the_typist_takes_a_block_only_when_it_is_the_lines_still_to_type(tmp_path, tail,
                                                                          block) -> None:
    """A block of exactly the lines still to be typed goes in with one Tab; one that goes on
    past them is taken a line at a time (its first line is the rest of the line)."""
    import asyncio

    from lsp_complete.bench.spans import SpanTiming, type_with_tab

    ep = _typist_episode(tmp_path)
    session = BlockSession(ep.original_text, ep.start_offset + len(ep.typed), tail)
    timing = SpanTiming(delays_ms=tuple([0.0] + [15.0] * (len(ep.keystrokes) - 1)))
    steps = asyncio.run(type_with_tab(session, ep, 100, timing))  # type: ignore[arg-type]
    assert session.text == ep.original_text
    tabs = [s.accepted for s in steps if s.accepted]
    first_line_rest = len(ep.typed.split("\n")[0]) - 1  # the first key is typed
    if block:
        assert tabs == [len(ep.typed) - 1] and len(steps) == 2
    else:
        assert tabs[0] == first_line_rest and len(tabs) == ep.typed.count("\n") + 1


# --- measures and statistics -------------------------------------------------------------------


def test_accepted_characters_are_the_common_prefix_with_the_rest_of_the_line() -> None:
    assert accepted_chars("    ret", "urn total\nmore", "    return total") == 9
    assert accepted_chars("    ret", "urn x", "    return total") == 4
    assert accepted_chars("    return total", "", "    return total") == 0


def _spans(side: str, latency: float, exact: bool, n_units: int = 12,
           cpu: float = 1.0) -> list[UnitRun]:
    """Spans of 10 keys: latencies `latency` + 0..9 ms, the first `exact` keys line-exact."""
    runs = []
    for unit in range(n_units):
        samples = [Sample("d", "burst", f"s{unit}", k, latency + k + unit % 3, "x",
                          encoded_tokens=int(latency) // 10 + k,
                          line_exact=exact and k < 5, fresh=True, side=side,
                          extra={"accepted_chars": 2 if exact else 1, "line_end": k == 9})
                   for k in range(10)]
        runs.append(UnitRun("burst", side, unit, f"s{unit}", unit % 2, 10, cpu * (1 + unit % 2),
                            0.0, samples))
    return runs


def _rows(runs: list[UnitRun], seed: int = 0) -> dict[str, measures.Row]:
    rows = measures.scenario_rows(scenarios.parse("burst")[0], runs, seed, resamples=400)
    return {row.measure: row for row in rows}


def test_a_version_against_itself_is_the_same() -> None:
    rows = _rows(_spans("A", 100, True) + _spans("B", 100, True))
    for row in rows.values():
        assert row.ratio == 1.0 and row.verdict == "same", row
        assert row.low is not None and row.high is not None and row.low <= 1 <= row.high
    assert measures.identical_share(_spans("A", 100, True) + _spans("B", 100, True), "burst") == 1


def test_slower_and_worse_is_a_regression_better_is_an_improvement() -> None:
    rows = _rows(_spans("A", 100, True) + _spans("B", 200, False, cpu=1.5))
    assert rows["keystroke p95"].ratio == pytest.approx((200 + 9 + 2) / (100 + 9 + 2), rel=0.05)
    for name in ("keystroke p50", "keystroke p95", "first key of a span p50",
                 "tokens encoded / key", "CPU s / keystroke"):
        assert rows[name].verdict == "regression" and rows[name].low > 1, rows[name]
    for name in ("line-exact", "characters accepted / key"):
        assert rows[name].verdict == "regression" and rows[name].high < 1, rows[name]
    assert rows["line-exact"].ratio == 0.0 and rows["CPU s / keystroke"].ratio == 1.5
    better = _rows(_spans("A", 200, False, cpu=1.5) + _spans("B", 100, True))
    assert better["keystroke p95"].verdict == "improvement"
    assert better["line-exact"].ratio == float("inf") and better["line-exact"].verdict == \
        "improvement"
    # Seeded: the same samples give the same intervals.
    again = _rows(_spans("A", 100, True) + _spans("B", 200, False, cpu=1.5))
    assert again == rows


def test_the_large_file_reports_each_phase_and_cross_file_lines_their_scores() -> None:
    """Each large-file phase is its own measure (a slower restart is that phase's regression
    alone); a cross-file line's scores are its quality measures."""
    def large(side: str, restart_ms: float) -> list[UnitRun]:
        return [UnitRun("large-file", side, u, "big.py", u % 2, 4, 1.0, 0.0, [
            Sample("d", "large-file", phase, i, restart_ms if i == 3 else 100.0 + i, "x",
                   side=side) for i, phase in enumerate(LARGE_PHASES)]) for u in range(6)]

    scenario = scenarios.parse("large-file")[0]
    rows = {r.measure: r for r in measures.scenario_rows(
        scenario, large("A", 100.0) + large("B", 300.0), 0, resamples=200)}
    assert list(rows) == list(LARGE_PHASES)
    assert rows["restart-from-disk"].ratio == 3.0
    assert rows["restart-from-disk"].verdict == "regression"
    assert [rows[p].ratio for p in LARGE_PHASES[:3]] == [1.0, 1.0, 1.0]

    def lines(side: str, em: float) -> list[UnitRun]:
        return [UnitRun("crossfile-open", side, u, f"pkg/a.py:{u}", u % 2, 1, 1.0, 0.0, [
            Sample("d", "crossfile", f"pkg/a.py:{u}", 0, 50.0, "x", side=side,
                   extra={"em": em, "needed": 1.0, "es": 0.5})])
                for u in range(6)]

    rows = {r.measure: r for r in measures.scenario_rows(
        scenarios.parse("crossfile-open")[0], lines("A", 0.0) + lines("B", 1.0), 0,
        resamples=200)}
    assert rows["exact match"].a == 0.0 and rows["exact match"].b == 1.0
    assert rows["exact match"].verdict == "improvement"
    assert rows["needed identifiers"].ratio == 1.0 and rows["edit similarity"].ratio == 1.0


def test_keys_after_the_first_and_each_language_are_reported_apart() -> None:
    """A slower first key must not hide faster later keys, nor one language another."""
    a, b = _spans("A", 100, True), _spans("B", 100, True)
    for run in b:  # B: the first key much slower, the later keys faster
        run.samples[0].latency_ms = 5000
        for sample in run.samples[1:]:
            sample.latency_ms -= 50
    for runs in (a, b):
        for run in runs:
            for sample in run.samples:
                sample.extra["language"] = "go" if run.unit % 2 else "rust"
    for run in b:  # B loses every exact line in Go only
        if run.unit % 2:
            for sample in run.samples:
                sample.line_exact = False
    rows = _rows(a + b)
    assert rows["keystroke p95 after a span's first key"].verdict == "improvement"
    by_language = {(r.scenario, r.measure): r for r in measures.language_rows(
        scenarios.parse("burst")[0], a + b, 0, resamples=400)}
    assert by_language[("burst · go", "line-exact")].verdict == "regression"
    assert by_language[("burst · rust", "line-exact")].ratio == 1.0
    only_one = [dataclasses.replace(run, samples=[dataclasses.replace(
        s, extra={**s.extra, "language": "go"}) for s in run.samples]) for run in a + b]
    assert measures.language_rows(scenarios.parse("burst")[0], only_one, 0) == []


def test_units_that_failed_on_either_side_are_left_out_and_few_units_get_no_verdict() -> None:
    a, b = _spans("A", 100, True, n_units=6), _spans("B", 200, True, n_units=6)
    b[0] = dataclasses.replace(b[0], error="the server exited", samples=[])
    a_runs, b_runs = measures.paired(a + b, "burst")
    assert [r.unit for r in a_runs] == [r.unit for r in b_runs] == [1, 2, 3, 4, 5]
    few = _rows(_spans("A", 100, True, n_units=3) + _spans("B", 200, True, n_units=3))
    assert few["keystroke p95"].verdict == "too few units" and few["keystroke p95"].n == 3


def test_each_baseline_is_compared_with_the_candidate_on_its_own() -> None:
    """Two baselines: B against each, paired on the units both ran (a unit that failed on A2
    leaves B/A1's pair in)."""
    a1, a2 = _spans("A1", 100, True), _spans("A2", 200, False, cpu=1.5)
    b = _spans("B", 150, True)
    a2[0] = dataclasses.replace(a2[0], error="the server exited", samples=[])
    burst = scenarios.parse("burst")[0]
    one = {r.measure: r for r in measures.scenario_rows(burst, a1 + a2 + b, 0, 400, "A1")}
    two = {r.measure: r for r in measures.scenario_rows(burst, a1 + a2 + b, 0, 400, "A2")}
    assert {r.baseline for r in one.values()} == {"A1"} and one["keystroke p95"].n == 12
    assert {r.baseline for r in two.values()} == {"A2"} and two["keystroke p95"].n == 11
    assert one["keystroke p95"].verdict == "regression"
    assert two["keystroke p95"].verdict == "improvement"
    assert two["line-exact"].verdict == "improvement" and one["line-exact"].ratio == 1.0
    assert measures.identical_share(a1 + a2 + b, "burst", "A2") == 1


def test_baselines_are_split_on_commas_and_take_turns() -> None:
    from lsp_complete.bench.ab import baseline_specs, drive

    assert baseline_specs("215d7a9") == ["215d7a9"]
    assert baseline_specs("215d7a9, 2764f02,") == ["215d7a9", "2764f02"]
    for bad in (",", "a,b,a"):
        with pytest.raises(ValueError):
            baseline_specs(bad)
    assert drive.baseline_keys(1) == ["A"] and drive.baseline_keys(2) == ["A1", "A2"]
    sides = [drive.Side(key, None, {}, Path()) for key in ("A1", "A2", "B")]  # type: ignore[arg-type]
    orders = [[s.key for s in drive.turn_order(sides, i)] for i in range(4)]
    assert orders == [["A1", "A2", "B"], ["A2", "B", "A1"], ["B", "A1", "A2"],
                      ["A1", "A2", "B"]]  # each side in each place equally often
    two = sides[::2]
    assert [[s.key for s in drive.turn_order(two, i)] for i in range(2)] == [["A1", "B"],
                                                                            ["B", "A1"]]


def test_ratios_and_memory() -> None:
    assert stats.ratio(0.0, 0.0) == 1.0 and stats.ratio(0.0, 0.5) == float("inf")
    assert stats.ratio(None, 1.0) is None and stats.ratio(2.0, 1.0) == 0.5
    assert measures.rss_row("burst", 800, 900).verdict == "regression"
    assert measures.rss_row("burst", 800, 810).verdict == "same"
    assert measures.rss_row("burst", 800, None).verdict == "n/a"


# --- the official HumanEval single-line file --------------------------------------------------


def test_official_single_line_file_is_read_as_our_tasks(tmp_path: Path) -> None:
    """Same construction as the built-in tasks: the line's indentation in the document."""
    problem = humaneval.load_problems(1)[0]
    lines = problem["canonical_solution"].split("\n")
    index = next(i for i, line in enumerate(lines) if line.startswith("        "))
    row = {  # the fields of openai/human-eval-infilling's HumanEval-SingleLineInfilling
        "task_id": f"SingleLineInfilling/{problem['task_id']}/L{index}",
        "entry_point": problem["entry_point"],
        "prompt": problem["prompt"] + "".join(line + "\n" for line in lines[:index]),
        "suffix": "\n".join(lines[index + 1:]),
        "canonical_solution": lines[index] + "\n",
        "test": problem["test"],
    }
    path = tmp_path / "HumanEval-SingleLineInfilling.jsonl.gz"
    with gzip.open(path, "wt", encoding="utf-8") as f:
        f.write(json.dumps(row) + "\n")
    (task,) = humaneval.load_single_line_file(path)
    (ours,) = [t for t in humaneval.tasks_for_problem(problem) if t.line_index == index]
    assert (task.task_id, task.line_index, task.name) == (ours.task_id, index, ours.name)
    assert task.text == ours.text and task.offset == ours.offset and task.target == ours.target
    assert task.exact_match(lines[index].strip())
    assert humaneval.PassRunner().passed(task, lines[index].strip())
    assert humaneval.sample_tasks([task, ours], 1, seed=0) == \
        humaneval.sample_tasks([task, ours], 1, seed=0)


def _multi_line_file(tmp_path: Path, holes: int) -> Path:
    """The first problems' lines 1-2 masked, as openai/human-eval-infilling's
    HumanEval-MultiLineInfilling writes them."""
    rows = []
    for problem in humaneval.load_problems(holes):
        lines = problem["canonical_solution"].split("\n")
        rows.append({
            "task_id": f"MultiLineInfilling/{problem['task_id']}/L1_L2",
            "entry_point": problem["entry_point"],
            "prompt": problem["prompt"] + lines[0] + "\n",
            "suffix": "\n".join(lines[3:]),
            "canonical_solution": lines[1] + "\n" + lines[2] + "\n",
            "test": problem["test"],
        })  # fmt: skip
    path = tmp_path / "HumanEval-MultiLineInfilling.jsonl.gz"
    with gzip.open(path, "wt", encoding="utf-8") as f:
        f.writelines(json.dumps(row) + "\n" for row in rows)
    return path


def test_official_multi_line_file_is_one_empty_indented_line(tmp_path: Path) -> None:
    """The masked lines are one empty line, indented as their first (an editor's auto-indent),
    the cursor after the indentation; the masked lines put back pass, and match exactly."""
    (task,) = humaneval.load_multi_line_file(_multi_line_file(tmp_path, 1))
    problem = humaneval.load_problems(1)[0]
    lines = problem["canonical_solution"].split("\n")
    assert task.name == "HumanEval/0#L1_L2" and task.target_lines == 2
    before, after = task.text[:task.offset], task.text[task.offset:]
    hole = before[before.rfind("\n") + 1:]
    assert hole == lines[1][: len(lines[1]) - len(lines[1].lstrip())] and not hole.strip()
    assert after.startswith("\n" + lines[3])
    answer = lines[1].lstrip() + "\n" + lines[2]
    assert task.exact_match(answer) and not task.exact_match(lines[1].lstrip())
    assert humaneval.PassRunner().passed(task, answer)
    assert not humaneval.PassRunner().passed(task, lines[1].lstrip())


# --- installing a version ----------------------------------------------------------------------


def test_a_git_ref_is_exported_at_its_commit(tmp_path: Path) -> None:
    root = install.CHECKOUT_ROOT
    if not (root / ".git").exists():
        pytest.skip("not a git checkout")
    commit = install.resolve_commit(root, "HEAD")
    assert len(commit) == 40
    tree = install.export_commit(root, commit, tmp_path / "src")
    assert (tree / "pyproject.toml").is_file() and (tree / "lsp_complete" / "__init__.py").is_file()
    with pytest.raises(install.InstallError):
        install.resolve_commit(root, "no-such-ref-anywhere")


def test_a_copy_that_the_server_would_not_import_is_refused(tmp_path: Path) -> None:
    """A venv whose interpreter imports lsp_complete from elsewhere (here: this interpreter,
    which finds this checkout or the editable install) must not pass as that version."""
    fake = install.ServerVersion(
        label="fake", kind="git", python=sys.executable, pythonpath=None, cwd=str(tmp_path),
        source_digest="0" * 64, venv=str(tmp_path / "venv"))
    with pytest.raises(install.InstallError, match="would import"):
        install.verify(fake)
    # A copy of this checkout (edits meanwhile do not leak in), verified once.
    checkout, package = install.resolve(None, tmp_path / "cache")
    assert package == Path(checkout.pythonpath or "") / "lsp_complete"
    assert checkout.source_digest == install.package_digest(install.CHECKOUT_ROOT / "lsp_complete")
    altered = dataclasses.replace(checkout, source_digest="0" * 64)
    with pytest.raises(install.InstallError, match="not the ones built"):
        install.verify(altered)


def test_every_measured_server_loads_models_as_todays_engine_does(tmp_path: Path) -> None:
    """An earlier release turned llama.cpp's extra CPU buffer types on, which crashes its
    first decode on a CPU with AMX: every server the bench starts has them off where today's
    engine turns them off, and the bench's start-up module turns them off when told to."""
    checkout = install.this_checkout()
    ask = ("import llama_cpp; "
           "print(llama_cpp.llama_cpp.llama_model_default_params().use_extra_bufts, "
           "llama_cpp.llama_model_default_params().use_extra_bufts)")

    def loaded_with(env: dict[str, str]) -> str:
        done = subprocess.run([checkout.python, "-c", ask], capture_output=True, text=True,
                              env=env, cwd=str(tmp_path), timeout=120, check=True)
        return done.stdout.strip()

    safe = llama_backend.extra_buffer_types_safe()
    env = checkout.server_env(dict(os.environ))
    assert loaded_with(env) == f"{safe} {safe}"
    assert loaded_with({**env, NO_EXTRA_BUFFERS: "1"}) == "False False"
    assert loaded_with({**env, NO_EXTRA_BUFFERS: "0"}) == "True True"  # llama.cpp's default


# --- a server that dies ------------------------------------------------------------------------


async def test_a_server_that_died_fails_every_request_at_once(tiny_model_path: Path,
                                                             tmp_path: Path) -> None:
    """pygls fails only the requests pending when the process ends; one sent after that was
    never answered, and the bench waited for ever on a baseline that had crashed."""
    session = lsp_driver.ServerSession(
        str(tiny_model_path), {"model": str(tiny_model_path)},
        env=live_checkout().server_env(base_server_env(str(tmp_path / "kv"))),
        log_path=tmp_path / "server.log")
    await asyncio.wait_for(session.start(), 120)
    assert session.pid is not None
    os.kill(session.pid, signal.SIGSEGV)
    while session.running:  # reaped, and pygls told: its pending requests failed by now
        await asyncio.sleep(0.05)
    await asyncio.sleep(0.5)
    with pytest.raises(lsp_driver.ServerExited, match="SIGSEGV.*its log: .*server.log"):
        await asyncio.wait_for(session.status(), 30)
    with pytest.raises(lsp_driver.ServerExited, match="SIGSEGV"):
        session.open("file:///x.py", "python", "x = 1\n", 1)
    with pytest.raises(lsp_driver.ServerExited, match="SIGSEGV"):
        await asyncio.wait_for(session.inline("file:///x.py", "x = 1\n", 5), 30)
    await asyncio.wait_for(session.stop(), 30)
    assert not session.running


async def test_a_unit_whose_server_dies_is_an_error_and_the_next_unit_gets_a_new_one(
        tiny_model_path: Path, tmp_path: Path) -> None:
    cfg = drive.AbConfig(model_path=str(tiny_model_path), threads=1, max_tokens=8,
                         out=tmp_path, settle_s=0.1)
    side = drive.Side("A", live_checkout(), cfg.init_options(), tmp_path / "A.log")
    pids: list[int | None] = []

    async def ask(side: drive.Side, index: int) -> list[Sample]:
        session = side.live
        assert isinstance(session, lsp_driver.ServerSession)
        pids.append(session.pid)
        if index == 0:
            os.kill(session.pid or 0, signal.SIGKILL)
        text = "def f(x):\n    return x\n"
        session.open("file:///f.py", "python", text, 1)
        completion, error = await lsp_driver.ask(session, "file:///f.py", 1, text, 21)
        session.close("file:///f.py")
        return [Sample.of(side.engine, "burst", "f", 0, completion, error, side=side.key)]

    await drive.start(side, cfg)
    try:
        runs = await asyncio.wait_for(drive.run_units(
            cfg, scenarios.parse("burst")[0], [side], [("f", 1), ("f", 1)], ask), 300)
    finally:
        await drive.stop(side)
    assert runs[0].error is not None and "SIGKILL" in runs[0].error, runs[0]
    assert runs[1].error is None and runs[1].samples[0].source != "error", runs[1]
    assert len(set(pids)) == 2


async def test_a_cancelling_client_cancels_the_request_not_answered_yet(
        tiny_model_path: Path, tmp_path: Path) -> None:
    """As VS Code's client does: each key's request goes out after $/cancelRequest for the one
    still unanswered, which the server answers as cancelled, and the bench records no error."""
    env = {**live_checkout().server_env(base_server_env(str(tmp_path / "kv"))),
           "LSP_COMPLETE_SIMULATE_DECODE_MS": "20"}  # requests overlap, as on a laptop
    session = lsp_driver.ServerSession(
        str(tiny_model_path), {"model": str(tiny_model_path), "maxTokens": 16,
                               "multiline": "never"}, env=env, log_path=tmp_path / "s.log")
    await asyncio.wait_for(session.start(), 120)
    try:
        path = tmp_path / "m.py"
        path.write_text("\n".join(f"value_{i} = compute({i}, {i + 1})" for i in range(40)))
        (ep,) = workload.build_episodes([str(path)], 1, 1, seed=0)
        n = len(ep.keystrokes)
        timing = spans.SpanTiming(delays_ms=(0.0,) + (30.0,) * (n - 1), cancels=True)
        answers = await asyncio.wait_for(
            spans.type_span(session, ep, spans.span_version(0), timing), 120)
        assert len(answers) == n and all(a.error is None for a in answers)
        sources = [r["source"] for r in (await session.status(recent=n + 8))["recent"]]
        assert "cancelled" in sources, sources
    finally:
        await asyncio.wait_for(session.stop(), 30)


# --- end to end ----------------------------------------------------------------------------------


def test_baseline_runs_end_to_end(tiny_model_path: Path, tmp_path: Path) -> None:
    """This checkout as the baseline (installed from its folder into a venv) against itself.
    Times are not checked: only that every measure has a ratio and that quality, where the
    server's choices do not depend on timing (a rest before typing, a pause before asking),
    is about the same on both sides."""
    out, cache = tmp_path / "ab", tmp_path / "cache"
    proc = subprocess.run([
        sys.executable, "-m", "lsp_complete", "bench", "--baseline", str(install.CHECKOUT_ROOT),
        "--quick", "--model", str(tiny_model_path), "--out", str(out), "--baseline-cache",
        str(cache), "--scenarios", "rest2s,saved,open,he-pause", "--max-tokens", "8",
        "--resamples", "200", "--settle-ms", "200",
    ], capture_output=True, text=True, timeout=600)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert (out / "ab-report.md").stat().st_size > 0
    data = json.loads((out / "ab-samples.json").read_text())
    a, b = data["meta"]["sides"]["A"], data["meta"]["sides"]["B"]
    assert a["kind"] == "folder" and b["kind"] == "checkout"
    assert Path(a["package_dir"]).is_relative_to(cache) and a["python"].startswith(str(cache))
    assert a["source_digest"] == b["source_digest"]  # the same code, installed apart
    rows = data["rows"]
    found = {(r["scenario"], r["measure"]) for r in rows}
    for scenario in ("rest2s", "saved", "open", "he-pause"):
        expected = [m.name for m in measures.measures_for(scenarios.parse(scenario)[0])]
        assert {(scenario, m) for m in [*expected, "peak RSS"]} <= found
    assert all(r["ratio"] is not None for r in rows), [r for r in rows if r["ratio"] is None]
    quality = [r for r in rows if r["measure"] in ("line-exact", "line-exact (first 3 keys)",
                                                   "HumanEval EM", "HumanEval pass@1")]
    assert len(quality) == 4
    assert all(0.5 <= r["ratio"] <= 2.0 for r in quality), quality
    units = data["units"]
    assert {(u["scenario"], u["side"]) for u in units} == {
        (s, side) for s in ("rest2s", "saved", "open", "he-pause") for side in "AB"}
    assert all(u["error"] is None and u["cpu_s"] is not None for u in units)
    assert "regression" in (out / "ab-report.md").read_text()  # the legend at least
    # Deterministic given the samples: the report rebuilt from them has the same rows.
    (out / "ab-report.md").unlink()
    rerun = subprocess.run([sys.executable, "-m", "lsp_complete", "bench", "--rerender",
                            str(out)], capture_output=True, text=True, timeout=120)
    assert rerun.returncode == 0, rerun.stderr[-2000:]
    assert json.loads((out / "ab-samples.json").read_text())["rows"] == rows
    assert (out / "ab-report.md").stat().st_size > 0


def test_multi_line_holes_end_to_end(tiny_model_path: Path, tmp_path: Path) -> None:
    """he-multi against (e), the PSM reference written to the model's end: every hole asked
    at open and again once the server is quiet, on both sides, each answer scored; without
    the official file the run says what it needs. Times are not checked."""
    base = [sys.executable, "-m", "lsp_complete", "bench", "--baseline", "psm-to-end",
            "--quick", "--model", str(tiny_model_path), "--scenarios", "he-multi",
            "--max-tokens", "8", "--resamples", "200", "--settle-ms", "200"]
    refused = subprocess.run([*base, "--out", str(tmp_path / "none")], capture_output=True,
                             text=True, timeout=300)
    assert refused.returncode != 0 and "--humaneval-multiline" in refused.stderr
    out = tmp_path / "ab"
    proc = subprocess.run([*base, "--out", str(out), "--holes", "2", "--humaneval-multiline",
                           str(_multi_line_file(tmp_path, 2))],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    data = json.loads((out / "ab-samples.json").read_text())
    assert data["meta"]["sides"]["A"]["engine"] == "e"
    units = data["units"]
    assert sorted((u["side"], u["name"]) for u in units) == sorted(
        (side, f"HumanEval/{n}#L1_L2") for side in "AB" for n in (0, 1))
    for unit in units:
        assert unit["error"] is None, unit
        assert [s["index"] for s in unit["samples"]] == [0, 1]
        assert all(s["passed"] is not None for s in unit["samples"])
        assert unit["samples"][1]["extra"]["ready_ms"] > 0
    found = {r["measure"] for r in data["rows"] if r["scenario"] == "he-multi"}
    assert {m.name for m in measures.measures_for(scenarios.parse("he-multi")[0])} <= found
    # The report says the hole's servers decide blocks themselves (the run's default: never).
    assert 'he-multi: its servers also given {"multiline": "auto"}' in \
        (out / "ab-report.md").read_text()


def test_two_baselines_and_moved_spans_end_to_end(tiny_model_path: Path,
                                                   tmp_path: Path) -> None:
    """Two git refs of this repository as the baselines, this checkout as the candidate, in
    the moved scenarios, an auto-closing editor's burst and the typist who presses Tab, on
    one-line and 3-line spans: every
    unit on all three servers, each side in each place in turn, B compared with each baseline
    on its own, and each moved span's first key reported apart from the keys after it. Times
    are not checked."""
    root = install.CHECKOUT_ROOT
    try:
        refs = [install.resolve_commit(root, ref) for ref in ("HEAD", "HEAD~1")]
    except install.InstallError:
        pytest.skip("not a git checkout with two commits")
    out, cache = tmp_path / "ab", tmp_path / "cache"
    names = ("moved", "moved-pause", "autoclose:burst", "saved")
    proc = subprocess.run([
        sys.executable, "-m", "lsp_complete", "bench", "--baseline", "HEAD,HEAD~1",
        "--quick", "--model", str(tiny_model_path), "--out", str(out), "--baseline-cache",
        str(cache), "--scenarios", ",".join(names), "--max-tokens", "8",
        "--resamples", "200", "--settle-ms", "200",
    ], capture_output=True, text=True, timeout=900)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    data = json.loads((out / "ab-samples.json").read_text())
    meta = data["meta"]
    assert meta["baselines"] == ["A1", "A2"]
    assert [meta["sides"][key]["commit"] for key in ("A1", "A2")] == refs
    assert meta["sides"]["A1"]["kind"] == "git" and meta["sides"]["B"]["role"] == "candidate"
    assert meta["settings"]["scenario_options"]["autoclose:burst"] == {"replaceLineSuffix": True}
    rows = data["rows"]
    for baseline in ("A1", "A2"):
        for name in names:
            expected = [m.name for m in measures.measures_for(scenarios.parse(name)[0])]
            mine = [r for r in rows if r["baseline"] == baseline and r["scenario"] == name]
            assert [r["measure"] for r in mine] == [*expected, "peak RSS"]
            assert all(r["ratio"] is not None for r in mine), mine
    units = data["units"]
    assert all(u["error"] is None for u in units)
    for name in names:
        mine = [u for u in units if u["scenario"] == name]
        assert sorted(u["side"] for u in mine) == sorted(["A1", "A2", "B"] * (len(mine) // 3))
        first = {u["unit"]: u["side"] for u in mine if u["order"] == 0}
        assert [first[i] for i in sorted(first)] == ["A1", "A2", "B"][:len(first)]
    # --quick types a one-line and a 3-line span, its keys crossing a line break.
    sizes = {name: int(name.rsplit("-", 1)[1]) - int(name.rsplit(":", 1)[1].split("-")[0]) + 1
             for name in {u["name"] for u in units}}
    assert sorted(sizes.values()) == [1, 3], sizes
    for unit in units:  # each sample says which version served it
        assert unit["samples"] and {s["side"] for s in unit["samples"]} == {unit["side"]}
        if unit["scenario"] == "saved":  # the span's characters, by keys and Tab
            assert unit["samples"][0]["extra"]["span_chars"] >= len(unit["samples"])
            continue
        if unit["scenario"] == "autoclose:burst":  # a request a key, types-over included
            assert unit["keystrokes"] == len(unit["samples"])
            assert all(s["source"] != "error" for s in unit["samples"])
            continue
        # The request before the move, then every key of the span, first and later apart.
        assert unit["keystrokes"] == len(unit["samples"]) + 1
        assert [s["index"] for s in unit["samples"]] == list(range(len(unit["samples"])))
        first = unit["samples"][0]
        assert first["extra"]["before_move_ms"] > 0 and first["extra"]["before_move_error"] is None
        assert all(s["source"] != "error" for s in unit["samples"])
    apart = ("first key of a span p50", "first key of a span p95",
             "keystroke p50 after a span's first key", "keystroke p95 after a span's first key")
    for row in rows:
        if row["measure"] in apart:
            assert row["a"] is not None and row["b"] is not None, row
    report_md = (out / "ab-report.md").read_text()
    assert "## B against A1: HEAD " in report_md and "## B against A2: HEAD~1 " in report_md
    (out / "ab-report.md").unlink()
    rerun = subprocess.run([sys.executable, "-m", "lsp_complete", "bench", "--rerender",
                            str(out)], capture_output=True, text=True, timeout=120)
    assert rerun.returncode == 0, rerun.stderr[-2000:]
    assert json.loads((out / "ab-samples.json").read_text())["rows"] == rows
    assert (out / "ab-report.md").read_text() == report_md


def test_the_cross_file_oracle_is_a_side_of_the_cross_file_lines(tiny_model_path: Path,
                                                                 tmp_path: Path) -> None:
    """psm-oracle (o) answers the cross-file lines given their imported definitions, beside
    the candidate; without cross-file lines it has nothing to be given and is refused. Times
    are not checked."""
    base = [sys.executable, "-m", "lsp_complete", "bench", "--baseline", "psm-oracle",
            "--quick", "--model", str(tiny_model_path), "--max-tokens", "8",
            "--resamples", "200", "--settle-ms", "200"]
    refused = subprocess.run([*base, "--scenarios", "burst", "--out", str(tmp_path / "no")],
                             capture_output=True, text=True, timeout=300)
    assert refused.returncode != 0 and "crossfile" in refused.stderr
    out = tmp_path / "ab"
    proc = subprocess.run([*base, "--scenarios", "crossfile-at-open", "--crossfile", "2",
                           "--out", str(out)], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    data = json.loads((out / "ab-samples.json").read_text())
    assert data["meta"]["sides"]["A"]["engine"] == "o"
    units = data["units"]
    assert len(units) == 4 and all(u["error"] is None for u in units), units
    oracle = [u["samples"][0] for u in units if u["side"] == "A"]
    assert all(s["prompt_tokens"] and {"em", "needed"} <= set(s["extra"]) for s in oracle)
