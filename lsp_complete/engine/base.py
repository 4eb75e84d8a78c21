"""The engine interface: what the pipeline, scheduler and server ask of any backend.

Owns the `Engine` protocol (every method callers use), the request, result, counters and
cancel flag that cross it, the one `EngineError` hierarchy, and the small helpers the backends
share. Nothing here loads llama.cpp: the settings and the remote engines import this module.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal, Protocol

import numpy as np

from lsp_complete.config import SpeculationMode

# Token healing on a remote server: how the healed characters are forced (`remoteHealing`).
# An alternative suggestion's first token must be at least this likely (softmax over the
# tokens healing allows there): below it the model is writing noise, not another idea.
MIN_ALTERNATIVE_PROBABILITY = 0.02

# Why generation ended ("" until it has): the model's end-of-generation (or a control) token, a
# stop string or a `line_check`, the line's end (single-line), `max_tokens`, the time budget,
# `abandon`, a cancel, a failure, or no prompt at all.
StopReason = Literal["", "eog", "stop", "newline", "max_tokens", "budget", "abandoned",
                     "cancelled", "error", "empty"]


class EngineError(Exception):
    """The model could not be loaded or used; the message says what to do."""


class RemoteEngineError(EngineError):
    """The remote server could not give an answer; the message says what to do.

    `Completer.run` turns it into an empty suggestion with the message as its `error`, so that
    the server tells the user once instead of failing requests.
    """


class ModelFileChanged(EngineError):
    """The model file was rewritten on disk while its weights were memory-mapped: touching
    them could crash the process (SIGBUS), so the engine refuses to decode; load it again."""


class PersistenceError(EngineError):
    """Saving KV caches to disk failed (a full disk, a folder gone read-only): completions
    still work. `persist` raises it once per cause, after saving what it could."""


class CancelToken:
    """Set by the scheduler when a request is superseded or cancelled.

    The engine checks it between prefill batches and between generated tokens. A *hard* cancel
    (`$/cancelRequest`, a closed file) also stops a decode already running, through llama.cpp's
    abort callback, and so does any keystroke to idle work. A newer keystroke in the same file
    cancels that file's request *softly*: the prefill batch in flight finishes, because its
    tokens are the prefix the newer prompt shares, and aborting it would throw that work away on
    every keystroke of a fast typist. `work_after_cancel` counts the tokens decoded after the
    flag was set, so tests can prove superseded work stops.
    """

    def __init__(self) -> None:
        self._event = threading.Event()
        self.cancelled_at: float | None = None
        self.hard = False
        self.work_after_cancel = 0
        self._lock = threading.Lock()

    def cancel(self, hard: bool = False) -> None:
        with self._lock:
            self.hard = self.hard or hard
            if not self._event.is_set():
                self.cancelled_at = time.monotonic()
                self._event.set()

    @property
    def cancelled(self) -> bool:
        return self._event.is_set()


@dataclass
class GenerationRequest:
    key: str  # one KV sequence per key (the document URI)
    segments: list[list[int]]  # prompt tokens, most stable segment first
    heal: str = ""  # token healing: the output must start with these characters
    heal_code: bool = False  # the token that ends the healed space or tab must carry code
    max_tokens: int = 48
    stop: tuple[str, ...] = ()
    # Stop strings that end generation but stay in the text, for post-processing to read
    # (the prompt head's elided body copied back: what of the signature to keep).
    kept_stops: tuple[str, ...] = ()
    single_line: bool = True
    deadline: float | None = None  # time.monotonic(); past it, stop at the next line end
    # Called with the text generated so far each time a line ends; True stops generation.
    line_check: Callable[[str], bool] | None = None
    # Called with the text generated so far after each token (it starts with `heal`).
    on_text: Callable[[str], None] | None = None
    # Called with the text produced so far (after `heal`) after each token; True means
    # post-processing will drop the suggestion whatever follows: stop and return no text.
    abandon: Callable[[str], bool] | None = None
    # Speculative decoding (`speculation` setting): off | lookup | draft | auto. Lossless: the
    # output is what plain greedy decoding gives; remote engines ignore it.
    speculation: SpeculationMode = "auto"
    # More tokens prompt lookup may draft from (e.g. the larger prompt for the same spot).
    draft_context: list[list[int]] = field(default_factory=list)
    # Idle work beside a suggestion (a block): generate on a scratch copy of the file's cache,
    # so the next keystroke finds exactly what the plain request left. Remote engines ignore it.
    aside: bool = False
    # Record each generated token's probability (GenerationResult.token_probabilities): one
    # exp over the vocabulary a token, paid only when the server holds back unsure lines.
    probabilities: bool = False

    @property
    def tokens(self) -> list[int]:
        return [t for segment in self.segments for t in segment]


@dataclass
class GenerationResult:
    text: str  # generated text, starting with the healed characters
    prompt_tokens: int = 0
    reused_tokens: int = 0
    encoded_tokens: int = 0
    generated_tokens: int = 0
    stop_reason: StopReason = ""
    prefill_ms: float = 0.0
    generate_ms: float = 0.0
    # Speculation: decodes that verified a draft, draft tokens verified, and accepted.
    verify_steps: int = 0
    draft_tokens: int = 0
    accepted_tokens: int = 0
    first_token: int | None = None  # the first token generated (the local engine's)
    # Each generated token's probability and where it ends in `text` (the local engine's,
    # when the request asked for them): how sure the model is of each part of the text.
    token_probabilities: list[float] = field(default_factory=list)
    token_ends: list[int] = field(default_factory=list)


@dataclass
class EngineCounters:
    calls: int = 0  # completion calls that reached the model
    warm_calls: int = 0
    tokens_encoded: int = 0  # prompt tokens decoded
    tokens_generated: int = 0
    tokens_reused: int = 0
    tokens_borrowed: int = 0  # prompt tokens copied from another file's sequence, not encoded
    tokens_after_cancel: int = 0  # decoded after the request's cancel flag was set
    max_tokens_after_cancel: int = 0  # the most any one cancelled request decoded after it
    aborted_decodes: int = 0
    evictions: int = 0
    restored_from_disk: int = 0
    # Generation: decodes made (one per token without speculation); drafts verified (one
    # decode each), draft tokens verified and accepted. Accepted per verify step:
    # draft_accepted / drafts_verified.
    generation_decodes: int = 0
    drafts_verified: int = 0
    draft_tokens: int = 0
    draft_accepted: int = 0
    near_ties: int = 0  # verify-step choices too close to call, decided by a single-token decode
    # Alternatives (`Engine.alternatives`): calls, and the tokens generated for them (counted
    # in tokens_generated too).
    alternative_calls: int = 0
    alternative_tokens: int = 0
    extra: dict[str, int] = field(default_factory=dict)


class Engine(Protocol):
    """One model behind one KV cache (or a server's), shared by all open files.

    `key` is the document URI: each file has its own cached prompt, evicted least recently
    used first. Everything but `describe` runs on the scheduler's worker thread.
    """

    # Read-only here, so that a proxy (the daemon's `SessionEngine`) may offer them as properties.
    @property
    def counters(self) -> EngineCounters: ...

    @property
    def prefill_rate(self) -> float | None:
        """Prompt tokens per second, measured at load (None: not known, as for a remote
        server)."""
        ...

    def tokenize(self, text: str, special: bool = False) -> list[int]: ...

    def detokenize(self, tokens: list[int]) -> str: ...  # special tokens give no text

    @property
    def begins_a_token(self) -> Callable[[str], bool] | None:
        """Whether some token of the vocabulary begins with a text (token healing gives
        the model back as much of the typed word as one token could write); None where the
        engine cannot tell, as with a server's tokenizer endpoint."""
        ...

    def complete(self, request: GenerationRequest, cancel: CancelToken) -> GenerationResult: ...

    def alternatives(
        self, request: GenerationRequest, count: int, cancel: CancelToken
    ) -> list[GenerationResult]:
        """Up to `count` other suggestions for the prompt of `request`, each starting with a
        different first token than greedy decoding (`complete`) picks, and than each other:
        the next most likely first tokens that satisfy the same healing constraint, each at
        least `MIN_ALTERNATIVE_PROBABILITY` likely, continued greedily with the same stop rules
        and `max_tokens` (each with the time budget the request had left when the call
        began). Most likely first; an alternative with no text (only whitespace, or one equal
        to an earlier one) is left out. The file's cache is left as `complete` left it.
        Engines that cannot do this cheaply return []."""
        ...

    def warm(
        self, key: str, segments: list[list[int]], cancel: CancelToken, extend_only: bool = False,
    ) -> int:
        """Encode a prompt ahead of time (prefill only); returns the tokens encoded. With
        `extend_only`, a prompt that would discard cached tokens is not encoded."""
        ...

    def cached_tokens(self, key: str) -> list[int]:
        """The tokens cached for a file (for status and tests)."""
        ...

    def cached_prefix(self, key: str, tokens: list[int]) -> int | None:
        """How many leading `tokens` are cached for a file; None when the engine cannot tell
        (a server's cache), and then callers take the prompt as cached."""
        ...

    def restore(self, key: str) -> bool:
        """Bring a file's KV sequence saved on disk into memory ahead of its first keystroke
        (a reopened file, a restarted server); False, taking no room, when none is saved, it
        is in memory already, or no sequence is free (a file opened to be read must not evict
        one in use: its first keystroke restores it then)."""
        ...

    def forget(self, key: str) -> None: ...

    def persist(self, key: str | None = None) -> int:
        """Write cached prompts (all, or one file's) to disk; returns how many were saved.
        PersistenceError (once per cause) when the disk store could not be written."""
        ...

    def model_changed(self) -> str | None:
        """Why the model file on disk is no longer the one loaded (rewritten, truncated, or
        another file under its name), else None: the server then loads it again. Cheap (a
        stat or two): asked before suggestions."""
        ...

    def describe(self) -> dict[str, object]: ...  # for the status request

    def close(self) -> None: ...


FileStamp = tuple[int, int, int, int]  # device, inode, size, mtime (ns)


def file_stamp(st: os.stat_result) -> FileStamp:
    """What changes when a file is rewritten in place or another takes its name."""
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


def path_stamp(path: str | os.PathLike[str]) -> FileStamp | None:
    """The stamp of the file `path` names now; None when there is none."""
    try:
        return file_stamp(os.stat(path))
    except OSError:
        return None


def common_prefix_length(a: list[int], b: list[int]) -> int:
    n = min(len(a), len(b))
    if n == 0:
        return 0
    # numpy compares 2k tokens in microseconds; a Python loop would cost ~100 µs per keystroke.
    diff = np.flatnonzero(np.asarray(a[:n], dtype=np.int32) != np.asarray(b[:n], dtype=np.int32))
    return int(diff[0]) if diff.size else n


