"""The scenarios: how the user's client talks and how the user types, each reported apart.

Clients: `generic` sends only didOpen / didChange / inlineCompletion, as most Neovim, Helix and
Emacs setups do (the default); `cancelling` also cancels the request not answered yet as it
sends the next ($/cancelRequest, as VS Code's languageclient does with the provider's token);
`ours` does that and also says where the cursor rests when a span starts
(lsp-complete/didMoveCursor), as the VS Code extension and the Neovim plugin do; `autoclose`
is the generic client in an editor that closes brackets and quotes as they are typed (VS
Code's and JetBrains' default: `(` puts `()` in, `)` types over it) and takes an item whose
range replaces those closers (replaceLineSuffix, as our clients ask); `highlight` is the
generic client in an editor that highlights occurrences: where the cursor rests it asks the
servers that offer them (textDocument/documentHighlight), as VS Code, Zed, Sublime LSP, LSP4IJ,
Emacs lsp-mode and Eglot, and Neovim setups on CursorHold do.

Each scenario's timing or work is ABOUT's entry; the report says it for the scenarios run.

A typing scenario is named `timing` (generic client), `cancelling:timing` or `ours:timing`.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

from lsp_complete.bench.spans import SpanTiming
from lsp_complete.bench.workload import Episode

ABOUT = {
    "burst": "no rest: each key as soon as the previous answer arrived",
    "rest2s": "a 2 s rest after opening the file, then burst",
    "think": "intervals drawn from real inter-key timing (the think note), answers not "
             "awaited",
    "paced": "a key every --pace-ms ms after a 1 s rest, answers not awaited",
    "busy": "think, with one CPU-bound process (a Python loop, normal priority) beside the "
            "server while the span is typed (the user compiles while typing: load.py)",
    "saved": "think, by a typist who presses Tab when the newest answer has arrived and is "
             "a block of exactly the lines still to be typed, or its first line is exactly the "
             "rest of the line (one edit; typing goes on after it), the servers deciding "
             "blocks as users' do (multiline auto): the share of the span's characters put in "
             "by Tab, and the wrong suggestions shown per key",
    "moved": "a new spot in a file already open: the whole file opened and a suggestion asked "
             "half the file away, then the span's lines deleted and typed again as in burst; "
             "its first key (the move) and the keys after it reported apart",
    "moved-pause": "moved, with 3 s spent at the first spot before the move",
    "moved-look": "moved, with 1 s spent looking at the new spot before its first key",
    "open": "never-seen files (coldfiles.py) opened and asked at once mid-line, then two "
            "characters typed",
    "he-open": "HumanEval single lines: the document asked the moment it opens (time from "
               "didOpen)",
    "he-pause": "he-open, asked 1 s after opening",
    "he-block": "HumanEval multi-line: the cursor at the start of a function body, the whole "
                "body asked at once (servers given BLOCK_OPTIONS), timed to the whole answer",
    "he-multi": "the official HumanEval multi-line holes (--humaneval-multiline): asked the "
                "moment the document opens, with the server's own multi-line rule, and again "
                "once the server is quiet (the block's time, at most 30 s), as a generic "
                "client's next request sees the block",
    "large-file": "a ~2,000-line file (--open-file) asked the moment it opens, after a key, "
                  "opened again, and opened after a restart on the same KV cache folder (a "
                  "stateless baseline keeps nothing)",
    "crossfile": "a line of module A that needs what only the module it imports from defines "
                 "(crossfile/), asked once the server is quiet at the spot, the packages' "
                 "folders the workspace; exact match, needed identifiers, edit similarity",
    "crossfile-open": "crossfile, with the imported module open in another tab",
    "crossfile-at-open": "crossfile as a generic client asks: no cursor, the line asked the "
                         "moment the file opens",
    "crossfile-pause": "crossfile-at-open, asked 1.5 s after opening (a person who looks "
                       "before typing)",
}
# Each typing timing and its rest after opening, before the first key.
REST_MS = {"burst": 0.0, "rest2s": 2000.0, "think": 0.0, "paced": 1000.0, "busy": 0.0,
           "moved": 0.0, "moved-pause": 0.0, "moved-look": 0.0, "saved": 0.0}
TIMINGS = tuple(REST_MS)
CLIENTS = ("generic", "cancelling", "ours", "autoclose", "highlight")
# What the auto-closing client asks of every server (an older one reports it unknown).
AUTOCLOSE_OPTIONS = {"replaceLineSuffix": True}
CROSSFILE_SCENARIOS = ("crossfile", "crossfile-open", "crossfile-at-open", "crossfile-pause")
HUMANEVAL_SCENARIOS = ("he-open", "he-pause", "he-block", "he-multi")
OPEN_SCENARIOS = ("open", *HUMANEVAL_SCENARIOS, "large-file", *CROSSFILE_SCENARIOS)
DEFAULT = ("burst", "rest2s", "think", "saved", "paced", "ours:rest2s", "moved", "moved-pause",
           "open", "he-open", "he-pause")
# A run with no --baseline, --models or --speculation: the stateless baselines beside this
# checkout, on what the baselines were always measured on (one scenario per former table).
BASELINES_DEFAULT = ("ours:rest2s", "paced", "he-open", "large-file", "open", "crossfile")
AWAITED = ("burst", "rest2s", "moved", "moved-pause", "moved-look")
HE_PAUSE_S = 1.0
# he-block's servers: multi-line, whole, never cut short by the time budget.
BLOCK_OPTIONS = {"multiline": "always", "maxTokens": 256, "timeBudgetMs": 120_000}
# he-multi's and saved's servers decide a block's length themselves, as users' servers do
# (the others are given multiline "never": their measures are of the line).
AS_EDITORS_ASK = {"multiline": "auto"}
BLOCK_WAIT_S = 30.0  # he-multi: the most a block is given before the second request
MOVED_PAUSE_S = 3.0
MOVED_LOOK_MS = 1000.0
CROSSFILE_PAUSE_S = 1.5

# Inter-key intervals of real typing. Dhakal et al. (CHI 2018, 136M keystrokes of 168,000
# typists): 52 words per minute on average, a mean interval of about 240 ms, right-skewed with
# a long tail of pauses. Modelled as a mixture of log-normals: keys within a burst (median
# 160 ms, mean 192 ms) and, for 4% of keys, a think pause (median 1 s); mean 229 ms. Bursts
# leave the server no idle time; pauses do.
KEY_MEDIAN_MS, KEY_SIGMA = 160.0, 0.6
PAUSE_SHARE, PAUSE_MEDIAN_MS, PAUSE_SIGMA = 0.04, 1000.0, 0.5
MIN_INTERVAL_MS, MAX_INTERVAL_MS = 30.0, 5000.0


@dataclass(frozen=True)
class Scenario:
    name: str  # as given to --scenarios, normalised ("burst", "ours:rest2s", "he-open")
    kind: str  # typing | open | humaneval | large | crossfile
    client: str = "generic"
    timing: str = ""  # typing: one of TIMINGS
    # humaneval: how long after opening the request is made; moved: how long the user stays
    # at the first spot before moving to the span
    pause_s: float = 0.0

    @property
    def awaited(self) -> bool:
        return self.timing in AWAITED

    @property
    def moved(self) -> bool:
        """The span is typed in a file already open, after a suggestion elsewhere in it."""
        return self.timing in ("moved", "moved-pause", "moved-look")

    @property
    def saves(self) -> bool:
        """The typist presses Tab on a suggestion that is exactly the rest of the line."""
        return self.timing == "saved"

    @property
    def blocks(self) -> bool:
        """Whole function bodies (HumanEval multi-line) instead of single lines."""
        return self.name == "he-block"

    @property
    def holes(self) -> bool:
        """The official multi-line holes, asked twice: at open, and once the block had its
        time."""
        return self.name == "he-multi"

    @property
    def options(self) -> dict[str, object]:
        """What every server of the scenario is given beside the run's settings."""
        client: dict[str, object] = dict(AUTOCLOSE_OPTIONS) if self.client == "autoclose" \
            else {}
        if self.holes or self.saves:
            return {**AS_EDITORS_ASK, **client}
        return dict(BLOCK_OPTIONS) if self.blocks else client

    @property
    def opens_imported(self) -> bool:
        """crossfile: the imported module is open in another tab."""
        return self.name == "crossfile-open"

    @property
    def asks_unannounced(self) -> bool:
        """crossfile: asked as a generic client asks, with no cursor notification and no
        wait for the server to be quiet (after `pause_s`)."""
        return self.name in ("crossfile-at-open", "crossfile-pause")

    @property
    def busy(self) -> bool:
        """A CPU-bound process runs beside the server while a span is typed."""
        return self.timing == "busy"


def parse(text: str) -> list[Scenario]:
    """`--scenarios`: a comma list of DEFAULT's names (a typing timing may carry `generic:`,
    `cancelling:` or `ours:` in front). Raises ValueError naming what is unknown."""
    scenarios: list[Scenario] = []
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        scenario = _one(item)
        if scenario.name not in (s.name for s in scenarios):
            scenarios.append(scenario)
    if not scenarios:
        raise ValueError("--scenarios: none given")
    return scenarios


def _one(item: str) -> Scenario:
    if item == "open":
        return Scenario("open", "open")
    if item == "large-file":
        return Scenario(item, "large")
    if item in CROSSFILE_SCENARIOS:
        return Scenario(item, "crossfile",
                        pause_s=CROSSFILE_PAUSE_S if item == "crossfile-pause" else 0.0)
    if item in HUMANEVAL_SCENARIOS:
        return Scenario(item, "humaneval", pause_s=HE_PAUSE_S if item == "he-pause" else 0.0)
    client, _, timing = item.rpartition(":")
    client = client or "generic"
    if client not in CLIENTS or timing not in TIMINGS:
        raise ValueError(f"--scenarios: unknown scenario {item!r}; use {', '.join(TIMINGS)} "
                         "(optionally cancelling:TIMING, ours:TIMING, autoclose:TIMING or "
                         "highlight:TIMING) or "
                         f"{', '.join(OPEN_SCENARIOS)}")
    name = timing if client == "generic" else f"{client}:{timing}"
    pause_s = MOVED_PAUSE_S if timing == "moved-pause" else 0.0
    return Scenario(name, "typing", client=client, timing=timing, pause_s=pause_s)


def think_intervals(n: int, rng: random.Random) -> list[float]:
    """`n` inter-key intervals in ms from the mixture above."""
    intervals = []
    for _ in range(n):
        if rng.random() < PAUSE_SHARE:
            value = rng.lognormvariate(math.log(PAUSE_MEDIAN_MS), PAUSE_SIGMA)
        else:
            value = rng.lognormvariate(math.log(KEY_MEDIAN_MS), KEY_SIGMA)
        intervals.append(min(MAX_INTERVAL_MS, max(MIN_INTERVAL_MS, value)))
    return intervals


def span_timing(scenario: Scenario, ep: Episode, seed: int, pace_ms: float) -> SpanTiming:
    """How `ep` is typed in `scenario`: the same for both versions (think intervals are
    seeded by the span)."""
    cursor = scenario.client == "ours"
    cancels = scenario.client in ("cancelling", "ours")
    autoclose = scenario.client == "autoclose"
    highlights = scenario.client == "highlight"
    look_ms = MOVED_LOOK_MS if scenario.timing == "moved-look" else 0.0
    n = len(ep.keystrokes)
    delays: tuple[float, ...] | None = None  # awaited: each key once the answer came
    if scenario.timing in ("think", "busy", "saved"):  # the same intervals as think
        rng = random.Random(f"think:{seed}:{ep.name}")
        delays = tuple([0.0, *think_intervals(n - 1, rng)][:n])
    elif scenario.timing == "paced":
        delays = tuple([0.0] + [pace_ms] * (n - 1))[:n]
    return SpanTiming(cursor, REST_MS[scenario.timing], delays, cancels, autoclose, highlights,
                      look_ms)


def about(name: str) -> str:
    """What scenario `name` does (a typing one's timing; `cancelling:` cancels the request
    not answered yet, `ours:` that and sends the cursor too, `autoclose:` types in an editor
    that closes brackets and quotes, `highlight:` in one that highlights occurrences)."""
    return ABOUT[name.rpartition(":")[2]]
