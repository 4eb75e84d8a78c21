"""Answers keystrokes that match a suggestion already shown, with no model call.

When the user types the characters a suggestion predicted, the rest of that suggestion is still
the answer: `lookup` finds it from the document state alone. Backspacing to an earlier state
finds that state's suggestion again. Editing anything after the cursor invalidates it.

`clear` forgets every suggestion (a change of settings: they were shaped by the old ones) and
starts a new `generation`. Work that computes a suggestion captures the generation when it
reads the settings it uses, and `remember` keeps nothing from an older one: a job already
queued when the settings changed would otherwise remember its old-settings answer after the
clear.

Memory stays bounded however large the document: an entry keeps the text before the cursor as
its length, a 128-bit blake2b digest and its last `TAIL_CHARS` characters, and the text after
the cursor as its length, a digest and its first `TAIL_CHARS` characters. A false match needs
two different texts of the same length, with the same edge characters, to share a 128-bit
blake2b digest: practically impossible (about 2**-64 even after 2**32 suggestions).
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass

from lsp_complete.certainty import Certainty, line_confidence

TAIL_CHARS = 256
_DIGEST_SIZE = 16


@dataclass
class Suggestion:
    text: str
    created: float
    certainty: Certainty | None = None  # how sure the model was of each part of `text`


@dataclass(frozen=True)
class Hit:
    """The rest of a remembered suggestion, and the probability of its first line."""

    text: str
    confidence: float


@dataclass(frozen=True)
class _Entry:
    before_len: int
    before_digest: bytes
    before_tail: str  # last TAIL_CHARS characters of `before`: a cheap check before hashing
    after_len: int
    after_digest: bytes
    after_head: str  # first TAIL_CHARS characters of `after`
    suggestion: Suggestion

    def remainder(self, before: str, after: str, after_digest: _LazyDigest) -> Hit | None:
        """The rest of the suggestion if the document is this entry's state plus typed text."""
        text = self.suggestion.text
        length = self.before_len
        typed_len = len(before) - length
        # Cheapest checks first: lookup runs on every keystroke and `before` may be megabytes.
        if typed_len < 0 or typed_len > len(text) or len(after) != self.after_len:
            return None
        if not text.startswith(before[length:]):
            return None
        if before[max(0, length - TAIL_CHARS) : length] != self.before_tail:
            return None
        if after[:TAIL_CHARS] != self.after_head:
            return None
        if length > TAIL_CHARS and _digest(before[:length]) != self.before_digest:
            return None  # (when length <= TAIL_CHARS the tail comparison was the whole text)
        if self.after_len > TAIL_CHARS and after_digest.get() != self.after_digest:
            return None
        return Hit(text[typed_len:],
                   line_confidence(self.suggestion.certainty, text, typed_len))


class _LazyDigest:
    """Digest of the text after the cursor, computed at most once per lookup, only if needed."""

    def __init__(self, text: str) -> None:
        self._text = text
        self._digest: bytes | None = None

    def get(self) -> bytes:
        if self._digest is None:
            self._digest = _digest(self._text)
        return self._digest


def _digest(text: str) -> bytes:
    # surrogatepass: LSP clients can send lone UTF-16 surrogates; they must hash, not raise.
    data = text.encode("utf-8", "surrogatepass")
    return hashlib.blake2b(data, digest_size=_DIGEST_SIZE).digest()


class TypeAhead:
    """Remembered suggestions per document, newest (or most recently used) last, LRU-bounded.

    Thread-safe: the LSP loop looks up while the inference worker may remember.
    """

    def __init__(self, max_entries_per_doc: int = 64, max_docs: int = 256) -> None:
        if max_entries_per_doc < 1 or max_docs < 1:
            raise ValueError("TypeAhead needs room for at least one entry and one document")
        self.max_entries_per_doc = max_entries_per_doc
        self.max_docs = max_docs
        self._docs: OrderedDict[str, OrderedDict[tuple[int, bytes, int, bytes], _Entry]]
        self._docs = OrderedDict()
        self._lock = threading.Lock()
        self._generation = 0  # one more at each `clear`
        self.stats: dict[str, int] = {
            "hits": 0,
            "misses": 0,
            "accepted": 0,
            "remembered": 0,
            "evicted": 0,
        }

    def remember(self, uri: str, before: str, after: str, text: str,
                 certainty: Certainty | None = None, *, generation: int) -> bool:
        """Keep `text`, suggested when the document was `before` + cursor + `after` (and how
        sure the model was of it), unless `clear` ran since `generation` (captured when the
        work read its settings); whether it was kept."""
        if not text.strip():
            return False  # nothing worth showing again
        before_digest = _digest(before)
        after_digest = _digest(after)
        entry = _Entry(
            before_len=len(before),
            before_digest=before_digest,
            before_tail=before[-TAIL_CHARS:],
            after_len=len(after),
            after_digest=after_digest,
            after_head=after[:TAIL_CHARS],
            suggestion=Suggestion(text, time.monotonic(), certainty),
        )
        key = (len(before), before_digest, len(after), after_digest)
        with self._lock:
            if generation != self._generation:
                return False  # shaped by settings a `clear` has replaced since
            entries = self._docs.get(uri)
            if entries is None:
                entries = self._docs[uri] = OrderedDict()
                if len(self._docs) > self.max_docs:
                    self._docs.popitem(last=False)
            self._docs.move_to_end(uri)
            entries.pop(key, None)  # a newer suggestion for the same state replaces the old one
            entries[key] = entry
            self.stats["remembered"] += 1
            while len(entries) > self.max_entries_per_doc:
                entries.popitem(last=False)
                self.stats["evicted"] += 1
            return True

    def lookup(self, uri: str, before: str, after: str) -> str | None:
        """The rest of a remembered suggestion that the typed text agrees with, or None."""
        hit = self.find(uri, before, after)
        return hit.text if hit is not None else None

    def find(self, uri: str, before: str, after: str) -> Hit | None:
        """The rest of a remembered suggestion that the typed text agrees with, and how sure
        the model was of it, or None.

        The most recently remembered or used matching entry wins: while the user types through a
        suggestion, that is the one on screen, so it stays put instead of flipping to an older
        one that also happens to match.
        """
        after_digest = _LazyDigest(after)
        with self._lock:
            entries = self._docs.get(uri)
            if entries:
                for key in reversed(entries):
                    rest = entries[key].remainder(before, after, after_digest)
                    if rest is not None and rest.text.strip():
                        entries.move_to_end(key)
                        self._docs.move_to_end(uri)
                        self.stats["hits"] += 1
                        return rest
            self.stats["misses"] += 1
            return None

    def accepted(self, uri: str, before: str, after: str) -> None:
        """A suggestion was (partly) accepted; `lookup` already serves the new state."""
        with self._lock:
            self.stats["accepted"] += 1

    def forget(self, uri: str) -> None:
        with self._lock:
            self._docs.pop(uri, None)

    @property
    def generation(self) -> int:
        """The one `remember` accepts now: capture it where the work reads its settings."""
        with self._lock:
            return self._generation

    def clear(self) -> None:
        """Forget every document's suggestions, and those of work planned before now."""
        with self._lock:
            self._docs.clear()
            self._generation += 1
