"""Open documents: text, LSP positions in utf-8/16/32, incremental edits, tree-sitter trees.

Offsets are Python string indices (code points). Two sorted arrays index line starts, one in
code points and one in UTF-8 bytes, so that a keystroke costs a few C-level slices and one
numpy concatenate instead of a Python loop over the file's lines.

A lone UTF-16 surrogate (JSON can carry one) is stored as U+FFFD, which has the same length in
every position encoding: the text is always valid UTF-8 for tree-sitter and the tokenizers.

tree-sitter grammars break lines at "\\n" only: in a file whose lines end at a lone "\\r" (old
Mac), Python's came out as a few statements on one line, with no structure for the context to
use. The parser reads such a source with each lone "\\r" as "\\n" (the same length, so every
byte offset holds), and its rows are LSP lines.

The syntax tree is optional: a document built with ``parse=False`` (a file over the size
limit) tracks its text only. An owner that must stay responsive (the server) sets a
``sync_limit``: a larger file then waits for it to call ``parse_step`` in short slices, so that
no single call holds the event loop for long (tree-sitter keeps the GIL while it parses).
An owner may bound a tree's nodes (`max_nodes`, see `max_tree_nodes`): a tree over it (dense
code near the size limit) is freed, and the document stays text only (`tree_refused` says why).
"""

from __future__ import annotations

import contextlib
import logging
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np
import tree_sitter

from lsp_complete.languages import LanguageSpec, language_name, setting_keys, spec_for
from lsp_complete.utf8 import cleaned, utf8

log = logging.getLogger(__name__)

# A syntax tree costs ~100-190 bytes a node. Ordinary code has ~0.34 nodes a byte, dense code
# (a list of numbers) ~0.7: one 3.2 MB file of it held 2.1 M nodes, +410 MiB.
TREE_NODES_PER_BYTE = 0.4


def max_tree_nodes(max_bytes: int) -> int:
    """The most nodes a tree may hold for a size cap of `max_bytes`: ordinary code at the
    cap, never dense code (~300 MiB at most for the default 4 MiB cap)."""
    return int(max_bytes * TREE_NODES_PER_BYTE)

# LSP line breaks: "\r\n", "\n" and a lone "\r". The alternation order matters: "\r\n" first.
_LINE_BREAK = re.compile(r"\r\n|\r|\n")
_LONE_CR = re.compile(r"\r(?!\n)")
_LONE_CR_BYTES = re.compile(rb"\r(?!\n)")
_CODE = re.compile(r"\S")
# Control characters that do not occur in text files (tab, LF, VT, FF, CR and ESC do).
_BINARY_CONTROLS = re.compile(r"[\x00-\x08\x0e-\x1a\x1c-\x1f\x7f\ufffd]")


def line_breaks(text: str) -> int:
    """How many line breaks `text` holds, as LSP counts them: a lone CR, CRLF or LF each."""
    return len(_LINE_BREAK.findall(text))


Range = tuple[int, int, int, int]
# tree-sitter's Tree.edit arguments: start, old end and new end bytes, then the three points.
Edit = tuple[int, int, int, tuple[int, int], tuple[int, int], tuple[int, int]]

_READ_CHUNK = 1 << 16
_INDEX_CHUNK = 1 << 20


@dataclass
class _SlicedParse:
    """A parse of a snapshot of the source, advanced a slice at a time. tree-sitter resumes a
    halted parse on the next call with the same input, so the parser is this parse's own."""

    parser: tree_sitter.Parser
    source: bytes
    edits: list[Edit] = field(default_factory=list)  # made to the text since the snapshot
    old_tree: tree_sitter.Tree | None = None  # edited to the snapshot: an incremental parse

    def step(self, budget_s: float) -> tree_sitter.Tree | None:
        deadline = time.perf_counter() + budget_s
        source = self.source  # (as the parser reads it: `_parser_source`)

        def read(byte: int, _point: tuple[int, int]) -> bytes:
            return source[byte : byte + _READ_CHUNK]

        def halt(_byte: int, _error: bool) -> bool:
            return time.perf_counter() > deadline

        try:
            if self.old_tree is None:
                return self.parser.parse(read, progress_callback=halt)
            return self.parser.parse(read, self.old_tree, progress_callback=halt)
        except ValueError:  # halted by the callback: the next call resumes
            return None


@dataclass
class _Batch:
    """The edits made inside `Document.one_parse`, to parse once: the bytes [lo, hi) they
    changed, in the text as it is now, and whether one replaced lines of code."""

    lo: int = 0
    hi: int = 0
    edited: bool = False
    lines_go: bool = False

    def add(self, start: int, old_end: int, new_end: int, lines_go: bool) -> None:
        self.lines_go = self.lines_go or lines_go
        if not self.edited:
            self.lo, self.hi, self.edited = start, new_end, True
            return
        delta = new_end - old_end

        def moved(byte: int, inside: int) -> int:  # a byte of the text before, after the edit
            return byte if byte <= start else byte + delta if byte >= old_end else inside

        self.lo = min(moved(self.lo, start), start)
        self.hi = max(moved(self.hi, new_end), new_end)


def _parser_source(data: bytes | bytearray, lone_cr: bool) -> bytes | bytearray:
    """The source as tree-sitter reads it: each lone "\\r" a "\\n" (a copy only where one
    is)."""
    return _LONE_CR_BYTES.sub(b"\n", data) if lone_cr else data


def _line_starts(text: str, base: int = 0) -> list[int]:
    return [base + m.end() for m in _LINE_BREAK.finditer(text)]


class Document:
    uri: str
    language_id: str
    version: int
    text: str
    tree: tree_sitter.Tree | None
    language: tree_sitter.Language | None

    def __init__(self, uri: str, language_id: str, version: int, text: str, parse: bool = True):
        self.uri = uri
        self.language_id = language_id
        self.version = version
        self.spec: LanguageSpec | None = spec_for(language_id, uri)
        self.language = self.spec.language if self.spec is not None else None
        # The language the text is read as: an alias, an unknown id or "plaintext" for a .py
        # or .kt file resolves to its language (the prompt, post-processing and blocks agree).
        self.language_name = language_name(language_id, uri)
        # What a per-language setting (`enabled`) is looked up by.
        self.setting_keys = setting_keys(language_id, uri)
        # Whether a syntax tree is kept at all, and the largest source parsed in one call
        # (None: any); see `set_syntax`.
        self.syntax = parse and self.spec is not None
        self.sync_limit: int | None = None
        self.max_nodes: int | None = None
        # Why the document is text only though its language has a grammar ("": it is not).
        self.tree_refused = ""
        self._parse: _SlicedParse | None = None
        self.tree = None
        # The newest tree whose syntax around the edits is sound; while the user is half-way
        # through a statement the fresh tree may be one big ERROR, and context keeps using this
        # one (Tree.edit keeps its positions current) so the prompt head does not flicker.
        self.structure_tree: tree_sitter.Tree | None = None
        # Bumped on every change; caches key on it.
        self.revision = 0
        self._batch: _Batch | None = None  # inside `one_parse`: the edits to parse at its end
        self._set_text(text)

    # ----------------------------------------------------------------- binary guard
    @staticmethod
    def is_binary(text: str) -> bool:
        """True for content that is not source code: NUL bytes or many control characters."""
        if "\x00" in text:
            return True
        sample = text[:8192]
        if not sample:
            return False
        return len(_BINARY_CONTROLS.findall(sample)) > max(8, len(sample) // 10)

    # ----------------------------------------------------------------- lines
    @property
    def line_count(self) -> int:
        return len(self._starts)

    @property
    def source(self) -> bytes:
        """A copy of the UTF-8 bytes the tree was parsed from (O(n): prefer ``text_in_bytes``)."""
        return bytes(self._bytes)

    @property
    def has_lone_cr(self) -> bool:
        """True when a lone "\\r" breaks lines (the parser reads it as "\\n")."""
        return self._lone_cr

    def line_of(self, offset: int) -> int:
        offset = min(max(offset, 0), len(self.text))
        return int(np.searchsorted(self._starts, offset, side="right")) - 1

    def line_start(self, offset: int) -> int:
        return int(self._starts[self.line_of(offset)])

    def line_range(self, line: int) -> tuple[int, int]:
        """[start, end) of ``line`` in code points, line break excluded; clamped to the text."""
        n = len(self._starts)
        if line < 0:
            line = 0
        if line >= n:
            return len(self.text), len(self.text)
        start = int(self._starts[line])
        if line + 1 < n:
            end = int(self._starts[line + 1])
            # Strip the break that ends the line ("\n", "\r\n" or "\r").
            if end > start and self.text[end - 1] == "\n":
                end -= 1
            if end > start and self.text[end - 1] == "\r":
                end -= 1
        else:
            end = len(self.text)
        return start, end

    def line_text(self, line: int) -> str:
        start, end = self.line_range(line)
        return self.text[start:end]

    # ----------------------------------------------------------------- positions
    def offset_at(self, line: int, character: int, encoding: str = "utf-16") -> int:
        if line < 0:
            return 0
        if line >= len(self._starts):
            return len(self.text)
        start, end = self.line_range(line)
        if character <= 0:
            return start
        return start + _units_to_chars(self.text[start:end], character, encoding)

    def position_at(self, offset: int, encoding: str = "utf-16") -> tuple[int, int]:
        offset = min(max(offset, 0), len(self.text))
        line = self.line_of(offset)
        start = int(self._starts[line])
        return line, _chars_to_units(self.text[start:offset], encoding)

    def byte_offset(self, offset: int) -> int:
        """UTF-8 byte offset of a code-point offset."""
        offset = min(max(offset, 0), len(self.text))
        line = self.line_of(offset)
        start = int(self._starts[line])
        return int(self._byte_starts[line]) + _byte_len(self.text[start:offset])

    def offset_of_byte(self, byte: int) -> int:
        """Code-point offset of a UTF-8 byte offset (inside a character -> its start)."""
        byte = min(max(byte, 0), len(self._bytes))
        line = int(np.searchsorted(self._byte_starts, byte, side="right")) - 1
        start_b = int(self._byte_starts[line])
        head = self._bytes[start_b:byte].decode("utf-8", "ignore")
        return int(self._starts[line]) + len(head)

    def line_of_byte(self, byte: int) -> int:
        return int(np.searchsorted(self._byte_starts, byte, side="right")) - 1

    def line_start_byte(self, byte: int) -> int:
        """Byte offset of the start of the line holding ``byte``."""
        return int(self._byte_starts[max(self.line_of_byte(byte), 0)])

    @property
    def byte_size(self) -> int:
        return len(self._bytes)

    def text_in_bytes(self, start_byte: int, end_byte: int) -> str:
        """Text between two UTF-8 byte offsets (node ranges) of the current source."""
        return self._bytes[start_byte:end_byte].decode("utf-8", "replace")

    # ----------------------------------------------------------------- syntax tree
    @property
    def needs_parse(self) -> bool:
        """A tree is wanted but not built yet: the owner must call `parse_step`."""
        return self.syntax and self.tree is None

    def set_syntax(self, enabled: bool, sync_limit: int | None = None,
                   max_nodes: int | None = None) -> None:
        """Keep a syntax tree or not (a file over the size limit: text only, memory freed).
        Enabling parses a source up to `sync_limit` bytes (None: any) at once, now and after
        each full replacement; a larger one waits for `parse_step`. A tree of more than
        `max_nodes` nodes (None: any) is freed and the document stays text only."""
        self.sync_limit = sync_limit
        self.max_nodes = max_nodes
        if not enabled or self.spec is None or self.tree_refused:
            self.syntax = False
            self.tree = self.structure_tree = None
            self._parse = None
            return
        if not self.syntax:
            self.syntax = True
            self._parse_if_small()

    def drop_tree(self) -> bool:
        """Free the syntax tree of a file not in use, still wanting one: `needs_parse` is true
        until `reparse` (or `parse_step`, for a large file) builds it again. A parse under way
        is kept (False)."""
        if not self.syntax or self._parse is not None:
            return False
        self.tree = self.structure_tree = None
        return True

    def reparse(self) -> None:
        """Build a dropped tree again now, if the source is within the sync limit."""
        if self.needs_parse and self._parse is None:
            self._parse_if_small()

    @property
    def has_tree(self) -> bool:
        """A tree is held, or being built."""
        return self.tree is not None or self._parse is not None

    def parse_step(self, budget_s: float) -> bool:
        """Advance the parse of a large file by about `budget_s` seconds; True once the tree is
        there (or none is wanted). Edits made meanwhile are applied to the new tree."""
        if not self.needs_parse:
            return True
        assert self.spec is not None
        if self._parse is None:
            parser = tree_sitter.Parser(self.spec.language)
            self._parse = _SlicedParse(parser, bytes(_parser_source(self._bytes, self._lone_cr)))
        tree = self._parse.step(budget_s)
        if tree is None:
            return False
        if self._parse.edits:  # made meanwhile: parsed again (in slices too if large)
            for edit in self._parse.edits:
                tree.edit(*edit)
            if self._sliced():
                self._parse = self._incremental(tree)
                return False
            tree = self.spec.parser().parse(_parser_source(self._bytes, self._lone_cr), tree)
        self._parse = None
        self.tree = self.structure_tree = tree
        self._bound_tree()
        return True

    def _sliced(self) -> bool:
        """Whether the source is parsed in slices (`parse_step`), not in one call."""
        return self.sync_limit is not None and len(self._bytes) > self.sync_limit

    def _incremental(self, edited: tree_sitter.Tree) -> _SlicedParse:
        """A sliced parse of the source now, reusing `edited` (edited to it already).

        The parse takes a copy (O(1): the nodes are shared, copied on a later edit): the
        caller's tree may be the structure tree, which the next keystroke edits at once. Had it
        been edited before the first slice ran, the parse would have read a tree two edits on
        from its snapshot (nodes at the wrong offsets, reused): a 1 MiB file came out with 3,533
        top-level nodes where a fresh parse has 3,397."""
        assert self.spec is not None
        return _SlicedParse(tree_sitter.Parser(self.spec.language),
                            bytes(_parser_source(self._bytes, self._lone_cr)),
                            old_tree=edited.copy())

    def _parse_if_small(self) -> None:
        self.tree = self.structure_tree = None
        self._parse = None
        limit = self.sync_limit
        if self.syntax and self.spec is not None and (limit is None or len(self._bytes) <= limit):
            self.tree = self.spec.parser().parse(_parser_source(self._bytes, self._lone_cr))
            self.structure_tree = self.tree
            self._bound_tree()

    def _bound_tree(self) -> None:
        """A tree over `max_nodes` is freed and the document stays text only while open
        (parsing it again on the next change would cost the memory and the time again)."""
        if self.tree is None or self.max_nodes is None:
            return
        nodes = self.tree.root_node.descendant_count  # (kept by tree-sitter: no walk)
        if nodes > self.max_nodes:
            self.tree_refused = f"{nodes:,} syntax nodes, over {self.max_nodes:,}"
            log.debug("%s: %s: text only", self.uri[:200], self.tree_refused)
            self.set_syntax(False)

    # ----------------------------------------------------------------- edits
    @contextlib.contextmanager
    def one_parse(self) -> Iterator[None]:
        """The edits made inside are parsed once, at the end, not once each: a didChange of
        many changes (a replace-all, a formatter's edits, many cursors) parsed the file again
        per change (2,000 changes in 430 KB of Python: 15 s). Text and positions are current
        after each edit; the tree only at the end."""
        if self._batch is not None:  # (within another: that one parses)
            yield
            return
        self._batch = batch = _Batch()
        try:
            yield
        finally:
            self._batch = None
            if batch.edited and self.tree is not None and self.spec is not None:
                self._parse_edited(batch.lo, batch.hi, batch.lines_go)

    def apply_change(self, text: str, range: Range | None, encoding: str = "utf-16") -> int:
        """Apply one LSP content change; returns the code-point offset where it started."""
        self.revision += 1
        if range is None:
            self._set_text(text)
            return 0
        start = self.offset_at(range[0], range[1], encoding)
        end = self.offset_at(range[2], range[3], encoding)
        if end < start:
            start, end = end, start
        if start == end and not text:
            return start
        self._splice(start, end, text)
        return start

    def edited(self, start: int, end: int, text: str) -> Document:
        """A copy of this document with `text` in place of [start, end) (code points), this
        one untouched: what it would be after an edit the user has not made yet. Its trees
        are copies of this one's, edited and parsed again incrementally; while a large
        file's parse is under way, or where a parse would be sliced, the copy is text only."""
        copy = object.__new__(Document)
        copy.__dict__.update(self.__dict__)
        copy._bytes = bytearray(self._bytes)
        copy._batch = None
        structure = self.structure_tree
        tree = self.tree.copy() if self.tree is not None else None
        copy.tree = tree
        copy.structure_tree = tree if structure is self.tree else (
            structure.copy() if structure is not None else None)
        if self._parse is not None or self._sliced():
            copy.syntax, copy.tree, copy.structure_tree, copy._parse = False, None, None, None
        copy._splice(start, end, text)
        return copy

    def _set_text(self, text: str) -> None:
        text, data = cleaned(text)
        self.text = text
        # A bytearray: an edit is one in-place memmove instead of two slices and two copies.
        self._bytes = bytearray(data)
        self._starts, self._byte_starts, self._lone_cr = _index_lines(data, len(text))
        if self._batch is not None:  # (the edits before are in the fresh tree)
            self._batch = _Batch()
        self._parse_if_small()

    def _splice(self, start: int, end: int, new: str) -> None:
        start_b = self.byte_offset(start)
        end_b = self.byte_offset(end)
        new, new_b = cleaned(new)
        # Points of the old text must be taken before the text changes.
        start_point = self._ts_point(start, start_b)
        old_end_point = self._ts_point(end, end_b)
        # Whether the edit replaces lines of code, not a line break alone (see below).
        lines_go = (start_point[0] != old_end_point[0]
                    and _CODE.search(self.text, start, end) is not None)

        self.text = "".join((self.text[:start], new, self.text[end:]))
        self._bytes[start_b:end_b] = new_b
        self._update_line_index(start, end, start_b, end_b, new, len(new_b))

        if self.spec is None or (self.tree is None and self._parse is None):
            return
        new_end_b = start_b + len(new_b)
        new_end_point = self._ts_point(start + len(new), new_end_b)
        edit = (start_b, end_b, new_end_b, start_point, old_end_point, new_end_point)
        if self.tree is None:  # a parse of an older snapshot is under way: edit its tree later
            assert self._parse is not None
            self._parse.edits.append(edit)
            if self.structure_tree is not None:  # (the previous tree, kept for context)
                self.structure_tree.edit(*edit)
            return
        self.tree.edit(*edit)
        structure = self.structure_tree
        if structure is not None and structure is not self.tree:
            structure.edit(*edit)
        if self._sliced():
            # Even incremental, a parse costs time in the size of the file (0.5 s a keystroke
            # in 4 MB of Python, 1.7 s in a 3.2 MB list): in slices, like the first one.
            self._parse, self.tree = self._incremental(self.tree), None
            return
        if self._batch is not None:
            self._batch.add(start_b, end_b, new_end_b, lines_go)
            return
        self._parse_edited(start_b, new_end_b, lines_go)

    def _parse_edited(self, start_b: int, end_b: int, lines_go: bool) -> None:
        """Parse the edited tree again; [start_b, end_b) the bytes the edits changed, and
        `lines_go` whether one replaced lines of code."""
        assert self.spec is not None and self.tree is not None
        structure = self.structure_tree
        self.tree = self.spec.parser().parse(_parser_source(self._bytes, self._lone_cr),
                                             self.tree)
        # Tree.edit moves the nodes after an edit but squashes those it replaced: the kept
        # tree no longer describes lines an edit replaced (a formatter's edit of the whole
        # text, a cut), and the head read a column of " ..." there. The fresh tree is kept
        # then, sound or not. A line break removed alone (a backspace) replaces nothing.
        if (structure is None or lines_go
                or _edit_is_sound(self.tree.root_node, start_b, end_b, self.spec)):
            self.structure_tree = self.tree
        self._bound_tree()

    def _update_line_index(
        self, start: int, end: int, start_b: int, end_b: int, new: str, new_len_b: int
    ) -> None:
        """Re-derive line starts only around the edit; shift the rest with one numpy add."""
        starts, byte_starts = self._starts, self._byte_starts
        # Whether offset q starts a line depends on the chars at q - 1 and q. Old starts before
        # `start` read only untouched chars, so they stay (the start at 0 always does)...
        keep = max(1, int(np.searchsorted(starts, start, side="left")))
        # ...old starts after `end` read only untouched chars too, so they just shift...
        tail = int(np.searchsorted(starts, end + 1, side="left"))
        delta = len(new) - (end - start)
        delta_b = new_len_b - (end_b - start_b)
        # ...and the starts in between are re-derived from the new text, reading one char on
        # each side so that "\r" + "\n" pairs the edit joins or splits come out right.
        new_end = start + len(new)
        lo = max(start - 1, 0)
        fresh = [q for q in _line_starts(self.text[lo:new_end + 1], lo) if start <= q <= new_end]
        fresh_b = [start_b + _byte_len(self.text[start:q]) for q in fresh]
        self._starts = np.concatenate(
            (starts[:keep], np.array(fresh, dtype=np.int64), starts[tail:] + delta)
        )
        self._byte_starts = np.concatenate(
            (byte_starts[:keep], np.array(fresh_b, dtype=np.int64), byte_starts[tail:] + delta_b)
        )
        if self._lone_cr:
            self._lone_cr = _LONE_CR.search(self.text) is not None
        else:
            # Only a "\r" in [lo, new_end] can have become lone; read one char past it.
            found = _LONE_CR.finditer(self.text, lo, new_end + 2)
            self._lone_cr = any(m.start() <= new_end for m in found)

    def _ts_point(self, offset: int, byte: int) -> tuple[int, int]:
        """tree-sitter point (row, byte column) of an offset: its rows are LSP lines, since
        the parser reads a lone "\\r" as "\\n" (`_parser_source`)."""
        line = self.line_of(offset)
        return line, byte - int(self._byte_starts[line])


def _index_lines(data: bytes, n_chars: int) -> tuple[np.ndarray, np.ndarray, bool]:
    """Line starts in code points and in bytes, and whether a lone "\\r" breaks a line, from
    the UTF-8 bytes with a few vectorised passes (a 50 MB file in well under a second; a
    Python loop over its million lines took seconds on the event loop)."""
    raw = np.frombuffer(data, dtype=np.uint8)
    breaks = raw == 0x0A
    lone_cr = False
    if b"\r" in data:
        cr = raw == 0x0D
        cr[:-1] &= ~breaks[1:]  # "\r\n" breaks once, after its "\n"
        lone_cr = bool(cr.any())
        breaks |= cr
        del cr
    byte_starts = np.flatnonzero(breaks)
    del breaks
    byte_starts += 1
    byte_starts = np.concatenate((np.zeros(1, dtype=np.int64), byte_starts.astype(np.int64)))
    if n_chars == len(data):  # ASCII: a byte is a code point
        return byte_starts, byte_starts.copy(), lone_cr
    # A code point is its bytes minus its continuation bytes (10xxxxxx): count those before
    # each line start, a chunk at a time (a running count of the whole file would be 8 bytes
    # per byte of text).
    before = np.empty(len(byte_starts), dtype=np.int64)
    seen = 0
    for lo in range(0, len(data), _INDEX_CHUNK):
        hi = min(lo + _INDEX_CHUNK, len(data))
        running = np.cumsum((raw[lo:hi] & 0xC0) == 0x80, dtype=np.int32)
        first, last = np.searchsorted(byte_starts, (lo, hi))
        inside = byte_starts[first:last] - lo  # starts in [lo, hi): count in raw[lo:start]
        before[first:last] = seen + np.where(inside > 0, running[np.maximum(inside - 1, 0)], 0)
        seen += int(running[-1])
    before[byte_starts >= len(data)] = seen  # a start at the very end (a final line break)
    return byte_starts - before, byte_starts, lone_cr


def _byte_len(text: str) -> int:
    if text.isascii():
        return len(text)
    return len(utf8(text))


def _units_to_chars(line: str, units: int, encoding: str) -> int:
    """How many code points of ``line`` the first ``units`` encoding units cover.

    A count that ends inside a character (half a surrogate pair, part of a UTF-8 sequence)
    snaps back to that character's start; a count past the end clamps to the line end.
    """
    if units >= len(line) * (4 if encoding == "utf-8" else 2 if encoding == "utf-16" else 1):
        return len(line)
    if encoding == "utf-32" or line.isascii():
        return min(units, len(line))
    if encoding == "utf-8":
        return len(utf8(line)[:units].decode("utf-8", "ignore"))
    # Document text holds no lone surrogates (see `cleaned`): the UTF-16 round trip is exact.
    encoded = line.encode("utf-16-le")[: 2 * units]
    return len(encoded.decode("utf-16-le", "ignore"))


def _chars_to_units(prefix: str, encoding: str) -> int:
    if encoding == "utf-32" or prefix.isascii():
        return len(prefix)
    if encoding == "utf-8":
        return len(utf8(prefix))
    return len(prefix.encode("utf-16-le")) // 2


def node_path(root: tree_sitter.Node, node: tree_sitter.Node) -> list[tree_sitter.Node]:
    """The nodes from ``root`` down to ``node`` (both included), in one walk down.

    Never walk up with ``Node.parent``: tree-sitter finds a parent by descending from the
    root, so each step costs the node's depth and a walk to the root is quadratic (20,000
    nested brackets: seconds per keystroke). The siblings (``prev_sibling`` and the like) cost
    the same. This is the walk ``Node.parent`` makes, once, keeping every node it passes.
    """
    path = [root]
    current = root
    while current != node:
        child = current.child_with_descendant(node)
        if child is None:
            break
        path.append(child)
        current = child
    return path


def _edit_is_sound(root: tree_sitter.Node, start_b: int, end_b: int, spec: LanguageSpec) -> bool:
    """Is the syntax around an edit free of errors, down to the innermost definition?

    Walks the path from the root to the smallest node spanning the edit. It passes through
    containers (class bodies, namespaces) so that an unrelated error elsewhere in a one-class
    Java file does not freeze the structure forever, and stops at the first definition- or
    statement-level node: an error inside it means the user is mid-statement.
    (``Node.first_child_for_byte`` would be the direct way, but it crashes in py-tree-sitter
    0.26 when the byte falls between children.)
    """
    inner = root.descendant_for_byte_range(start_b, end_b)
    chain = node_path(root, inner) if inner is not None else []
    if any(n.is_error or n.is_missing for n in chain):
        return False
    body_range: tuple[int, int] | None = None
    for node in chain[1:]:
        if body_range == (node.start_byte, node.end_byte):
            body_range = None
            continue  # a container's body: its children are the next level
        if node.type in spec.containers:
            body = node.child_by_field_name("body")
            if body is None or not (body.start_byte <= start_b and end_b <= body.end_byte):
                return not node.has_error
            body_range = (body.start_byte, body.end_byte)
            continue
        if node.type in spec.wrappers or node.type in spec.transparent:
            continue
        return not node.has_error
    # The edit sits between the children of a scope (whitespace, or across several of them):
    # the children it touches must be clean.
    scope = chain[-1] if chain else root
    return not any(
        child.has_error
        for child in scope.children
        if child.start_byte <= end_b and child.end_byte >= start_b
    )
