"""What happens to raw model text before it is shown as ghost text.

Pure functions over strings, one per rule, applied in a fixed order by `clean_completion`:

1. `strip_controls`       - no control or bidi character reaches the editor (any engine's text).
2. `strip_special_tokens` - never leak FIM/control tokens; cut at stop strings.
3. `truncate_lines`       - one line, or the lines that stay inside the enclosing block.
4. `dedupe_suffix`        - never insert text that already follows the cursor.
5. `balance_brackets`     - no closer (or quote) that the text after the cursor already provides.
   Neither applies to a one-line completion that types through the closers after the cursor
   where the client replaces them (`types_through`): nothing after the cursor stays.
6. `trim_whitespace`      - no trailing whitespace, never a whitespace-only suggestion.

Every rule has golden cases in `tests/data/postprocess/<rule>.toml`; a new rule is a new function
here, a new entry in `RULE_NAMES` / `_steps`, and a new case file.

Rules that remove text do so only when they are sure: a shorter suggestion costs the user a few
keystrokes, a wrong one costs an undo. The bracket and quote logic looks at the cursor line (and
the completion) only, so it never guesses about openers on earlier lines unless the text after
the cursor settles the question.

Indentation widths are counted in characters (a tab is one), like llama.vim's `n_indent`, and
`CompletionSite.block_indent` must be counted the same way; -1 means "no enclosing block".
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from lsp_complete.languages import syntax_for

log = logging.getLogger(__name__)

DEFAULT_MAX_LINES = 12

RULE_NAMES: tuple[str, ...] = (
    "strip_controls",
    "strip_special_tokens",
    "cut_elision",
    "truncate_lines",
    "dedupe_suffix",
    "balance_brackets",
    "trim_whitespace",
)


@dataclass(frozen=True)
class CompletionSite:
    """Where a completion will be inserted, as far as post-processing needs to know."""

    # The cursor line before / after the cursor; a huge line is cut to a bounded piece at the
    # edge (pipeline.prepare): the rules below scan these character by character.
    line_prefix: str
    line_suffix: str
    suffix: str  # all text after the cursor (windowed), starts with line_suffix
    indent: str  # indentation of the cursor line
    block_indent: int  # indentation width of the innermost block opener around the cursor; -1: none
    multiline: bool  # whether a multi-line suggestion is wanted here
    language_id: str
    # A block written on an empty line between statements (the hole in the middle of code):
    # its statements may go on past the cursor's own block, down to `block_indent` (then the
    # enclosing definition's), and close brackets opened before the cursor line.
    statements: bool = False
    # The bracket that a closer beginning the cursor line would close (`if ok {`, its body
    # indented deeper, then the cursor line); "" when nothing above is open at its indentation.
    open_above: str = ""
    # The file puts a function body's opening brace on a line of its own
    # (`context.definition_brace_own_line`).
    brace_own_line: bool = False
    # The client replaces an item's range past the cursor: a one-line completion may type
    # through the closers the editor put after the cursor (`types_through`).
    replace_line_suffix: bool = False

    @classmethod
    def make(
        cls,
        line_prefix: str,
        suffix: str,
        *,
        block_indent: int = -1,
        multiline: bool = False,
        language_id: str = "",
        open_above: str = "",
        brace_own_line: bool = False,
        replace_line_suffix: bool = False,
    ) -> CompletionSite:
        """Build a site from the cursor line's prefix and the text after the cursor."""
        line_suffix = suffix.split("\n", 1)[0]
        return cls(
            line_prefix=line_prefix,
            line_suffix=line_suffix,
            suffix=suffix,
            indent=leading_whitespace(line_prefix + line_suffix),
            block_indent=block_indent,
            multiline=multiline,
            language_id=language_id,
            open_above=open_above,
            brace_own_line=brace_own_line,
            replace_line_suffix=replace_line_suffix,
        )


def clean_completion(
    raw: str,
    site: CompletionSite,
    stop: Sequence[str] = (),
    *,
    max_lines: int = DEFAULT_MAX_LINES,
    disabled: frozenset[str] | set[str] = frozenset(),
) -> str:
    """Turn raw model output into the text to show at `site`; "" means show nothing.

    `disabled` names rules to skip (tests use it to prove each rule is needed by its cases).
    """
    unknown = set(disabled) - set(RULE_NAMES)
    if unknown:
        raise ValueError(f"unknown post-processing rules: {sorted(unknown)}")
    text = raw
    for name, step in _steps(site, stop, max_lines):
        if name not in disabled:
            text = step(text)
    return text


def _steps(
    site: CompletionSite, stop: Sequence[str], max_lines: int
) -> list[tuple[str, Callable[[str], str]]]:
    # The order matters: controls go before any rule reads the text, tokens are cut next,
    # lines are limited before the suffix comparisons (which look at the last line),
    # whitespace is tidied last.
    return [
        ("strip_controls", _strip_controls_logged),
        ("strip_special_tokens", lambda text: strip_special_tokens(text, stop, site.line_prefix)),
        ("cut_elision", lambda text: cut_elision(text, site.language_id, site.line_prefix,
                                                 site.brace_own_line)),
        ("truncate_lines", lambda text: truncate_lines(text, site, max_lines)),
        # A completion that types through the line suffix replaces it: nothing after the
        # cursor stays to be repeated or unbalanced.
        ("dedupe_suffix", lambda text: text if _typed_through(text, site)
         else dedupe_suffix(text, site)),
        ("balance_brackets", lambda text: text if _typed_through(text, site)
         else balance_brackets(text, site)),
        ("trim_whitespace", lambda text: trim_whitespace(text, site)),
    ]


# --------------------------------------------------------------------------------------------
# 1. control and bidi characters

# C0 controls but tab and newline, DEL, C1 controls; the bidi embeddings, overrides and
# isolates and the direction marks ("Trojan Source", CVE-2021-42574: text that reads one way
# and compiles another). A remote server is not trusted to send only code, and a local model
# can emit any byte: an ESC would be a terminal escape in a terminal editor, a NUL breaks
# buffers, a lone CR is a line break some editors show and some do not.
_CONTROL = re.compile(
    r"[\x00-\x08\x0b-\x1f\x7f-\x9f"  # C0 but \t and \n (\r included), DEL, C1
    r"\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]"  # bidi marks, embeddings, isolates
)


def strip_controls(text: str) -> str:
    """Remove control and bidi characters; a CRLF becomes a newline, a lone CR goes."""
    return _CONTROL.sub("", text.replace("\r\n", "\n"))


def _strip_controls_logged(text: str) -> str:
    """`strip_controls`, with one log line for a text that had any."""
    text = text.replace("\r\n", "\n")
    removed = _CONTROL.findall(text)
    if not removed:
        return text
    codes = sorted({f"U+{ord(ch):04X}" for ch in removed})
    log.warning("removed %d control characters from the engine's text: %s",
                len(removed), ", ".join(codes[:12]) + (", ..." if len(codes) > 12 else ""))
    return _CONTROL.sub("", text)


# --------------------------------------------------------------------------------------------
# 2. special tokens and stop strings

_SPECIAL_TOKEN = re.compile(
    r"<\|[A-Za-z_][\w.▁:-]*\|>"  # Qwen, StarCoder, CodeGemma, Llama 3: <|endoftext|>, <|file_sep|>
    r"|<｜[^｜\n]{1,64}｜>"  # DeepSeek (full-width bars): <｜fim▁hole｜>, <｜end▁of▁sentence｜>
    r"|<fim[_-][A-Za-z_]+>"  # StarCoder / SantaCoder: <fim_middle>, <fim-suffix>
    r"|<file_sep>"  # StarCoder2 file separator
    r"|<(?:PRE|SUF|MID|EOT)>"  # CodeLlama infilling
    # Codestral's [SUFFIX]/[PREFIX]; not after a name or a closer, so `d[PREFIX]` stays code.
    r"""|(?<![\w\])}'"])\[(?:PREFIX|SUFFIX|MIDDLE)\]"""
)
# A control token cut off by the token limit, e.g. "<|endoftext" at the very end.
_PARTIAL_TOKEN_AT_END = re.compile(r"(?:<\|[A-Za-z_][\w▁]{2,}\|?|<｜[^｜\n]*|<fim[_-]\w*)$")


def has_special_token(text: str) -> bool:
    """Whether `text` holds a control token (the same patterns `strip_special_tokens` cuts at):
    a model's answer that leaked its template."""
    return _SPECIAL_TOKEN.search(text) is not None


def strip_special_tokens(text: str, stop: Sequence[str] = (), line_prefix: str = "") -> str:
    """Cut `text` at the first control token or stop string; keep what comes before it.

    `line_prefix` (the text before the cursor on its line) only tells whether a leading
    `[PREFIX]` is a subscript (`cache` + `[PREFIX]`) rather than a Codestral marker.

    The generic patterns are the ones no source code spells by accident; model-specific end
    markers that can be real code (`</s>` is an HTML tag) belong in the model's `stop` list.
    Code that itself spells these tokens (tokenizer code) gets a shorter suggestion, which is the
    safe way to fail.
    """
    cut = len(text)
    before = line_prefix[-1:]
    match = _SPECIAL_TOKEN.search(before + text)
    if match:
        cut = max(0, match.start() - len(before))
    for word in stop:
        if word:
            found = text.find(word, 0, cut + len(word) - 1)
            if found != -1:
                cut = min(cut, found)
    text = text[:cut]
    partial = _PARTIAL_TOKEN_AT_END.search(text)
    return text[: partial.start()] if partial else text


# --------------------------------------------------------------------------------------------
# 1b. the prompt's own elision copied back

# The head shows other definitions as signatures with their bodies elided (languages.py:
# `elision`); the model readily copies such a signature, marker and all, which no user writes.
_BRACE_ELISION = re.compile(r"\s*\{ \.\.\. \};?")
_INDENT_ELISION = re.compile(r"(?m)^(\s*(?:async\s+)?(?:def|class)\b[^\n]*:) \.\.\.[ \t]*$")


def elision_stops(language_id: str) -> tuple[str, ...]:
    """Stop strings that end generation where it starts copying an elided body, kept in the
    text for `cut_elision` (Python's ` ...` is also code, so only that rule catches it)."""
    return () if syntax_for(language_id).indent_scoped else ("{ ... }",)


def cut_elision(text: str, language_id: str, line_prefix: str = "",
                brace_own_line: bool = False) -> str:
    """Cut the suggestion where it copies an elided body (` { ... }`, or ` ...` after a
    Python header): keep the signature, drop the marker and all that follows it. The
    signature's opening brace stays on its line unless the file puts a definition's brace on
    a line of its own (`brace_own_line`): the head writes every signature the one way."""
    if syntax_for(language_id).indent_scoped:
        # The header may start before the cursor (`def ` typed): read the line whole.
        match = _INDENT_ELISION.search(line_prefix + text)
        return text[: max(0, match.end(1) - len(line_prefix))] if match else text
    match = _BRACE_ELISION.search(text)
    if match is None:
        return text
    kept = text[: match.start()]
    marker = match.group()
    signature = (line_prefix + kept).rsplit("\n", 1)[-1]
    if brace_own_line or "\n" in marker or not signature.strip():
        return kept
    return kept + marker[: marker.index("{") + 1]


# --------------------------------------------------------------------------------------------
# A small lexer: enough to tell brackets and quotes in code from those in strings and comments.
# Its settings per language (comment and string delimiters) come from `languages.syntax_for`,
# which resolves aliases ("py", "js") the same way for every stage.

_MASK = "\x00"  # stands in for characters inside string literals and comments
_OPEN_OF = {")": "(", "]": "[", "}": "{"}
_OPENERS = "([{"
_CLOSERS = ")]}"
_QUOTES = "\"'`"
_RUST_CHAR = re.compile(r"'(?:[^'\\\n]|\\(?:x[0-9a-fA-F]{2}|u\{[0-9a-fA-F]{1,6}\}|.))'")


@dataclass(frozen=True)
class _Scan:
    masked: str  # same length as the input; literal contents and comments replaced by _MASK
    open_strings: int  # strings left unterminated (by the end of their line or of the text)
    literal_line_starts: frozenset[int]  # offsets of line starts inside a multi-line literal


def _scan(text: str, language_id: str) -> _Scan:
    """Mask string contents and comments, keeping string delimiters and newlines."""
    syn = syntax_for(language_id)
    out = list(text)
    inside: set[int] = set()
    open_strings = 0
    n = len(text)

    def mask(start: int, end: int) -> None:
        for j in range(start, min(end, n)):
            if text[j] == "\n":
                inside.add(j + 1)
            else:
                out[j] = _MASK

    i = 0
    while i < n:
        ch = text[i]
        long = next((d for d in syn.long_quotes if text.startswith(d, i)), None)
        if long is not None:
            end = _find_closing(text, i + len(long), long, escapes=not syn.raw_long)
            if end == -1:
                open_strings += 1
                mask(i + len(long), n)
                break
            mask(i + len(long), end)
            i = end + len(long)
        elif any(text.startswith(c, i) for c in syn.line_comments):
            end = text.find("\n", i)
            end = n if end == -1 else end
            mask(i, end)
            i = end
        elif syn.block_comment and text.startswith(syn.block_comment[0], i):
            opener, closer = syn.block_comment
            end = text.find(closer, i + len(opener))
            end = n if end == -1 else end + len(closer)
            mask(i, end)
            i = end
        elif ch == "'" and syn.char_quote:
            char = _RUST_CHAR.match(text, i)
            if char:
                mask(i + 1, char.end() - 1)
                i = char.end()
            else:
                i += 1  # a lifetime or a label: 'a, 'outer
        elif ch in syn.quotes:
            j = i + 1
            while j < n and text[j] != ch and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            if j < n and text[j] == ch:
                mask(i + 1, j)
                i = j + 1
            else:
                open_strings += 1
                mask(i + 1, j)
                i = min(j, n)
        else:
            i += 1
    return _Scan("".join(out), open_strings, frozenset(inside))


def _find_closing(text: str, start: int, delim: str, *, escapes: bool) -> int:
    """Offset of the delimiter closing a long string that starts at `start`, or -1."""
    if not escapes:
        return text.find(delim, start)
    j = start
    while j < len(text):
        if text[j] == "\\":
            j += 2
        elif text.startswith(delim, j):
            return j
        else:
            j += 1
    return -1


def _imbalance(text: str, language_id: str) -> int:
    """Closers with no opener (or the wrong one) plus unterminated strings.

    Unclosed openers do not count: a suggestion may stop in the middle of an expression.
    """
    scan = _scan(text, language_id)
    stack: list[str] = []
    bad = 0
    for ch in scan.masked:
        if ch in _OPENERS:
            stack.append(ch)
        elif ch in _CLOSERS:
            if stack and stack[-1] == _OPEN_OF[ch]:
                stack.pop()
            else:
                bad += 1
    return bad + scan.open_strings


def _push_pop(stack: list[str], masked: str) -> None:
    """Update an opener stack with a piece of masked code; stray closers are ignored."""
    for ch in masked:
        if ch in _OPENERS:
            stack.append(ch)
        elif ch in _CLOSERS and stack and stack[-1] == _OPEN_OF[ch]:
            stack.pop()


def _openers_left_open(site: CompletionSite) -> list[str]:
    """Openers of the cursor line before the cursor that the line suffix does not close."""
    scan = _scan(site.line_prefix + site.line_suffix, site.language_id)
    stack: list[str] = []
    _push_pop(stack, scan.masked[: len(site.line_prefix)])
    inner: list[str] = []  # openers of the line suffix itself
    for ch in scan.masked[len(site.line_prefix) :]:
        if ch in _OPENERS:
            inner.append(ch)
        elif ch in _CLOSERS:
            if inner and inner[-1] == _OPEN_OF[ch]:
                inner.pop()
            elif stack and stack[-1] == _OPEN_OF[ch]:
                stack.pop()
    return stack


def leading_whitespace(line: str) -> str:
    return line[: len(line) - len(line.lstrip(" \t"))]


def indent_width(line: str) -> int:
    """Indentation in characters (a tab counts as one, as in llama.vim's n_indent)."""
    return len(leading_whitespace(line))


# --------------------------------------------------------------------------------------------
# 3. how many lines


def truncate_lines(text: str, site: CompletionSite, max_lines: int = DEFAULT_MAX_LINES) -> str:
    """Single-line mode: the first line. Multi-line mode: the lines that stay inside the block.

    A later line ends the suggestion when it is indented no deeper than the enclosing block's
    opener (the block ended: llama.vim's n_indent rule), or when it starts with a closer of
    something opened before the cursor line (the model is re-writing the block's end, which
    already follows). A line that closes what the completion or the cursor line opened is kept
    even at a shallow indent (`})` after `foo({`). When the cursor line itself opens a block
    (ends with `{`, `(`, `[`, or `:` in Python), the block being written is that one, so the
    cursor line's indentation is the limit. A block of statements (`site.statements`) is not
    narrowed by an opener, and may close what was opened before the cursor line while it
    stays deeper than `block_indent` (the enclosing definition's). Lines that start inside a
    multi-line string or comment are not judged by their indentation. Trailing blank lines
    are dropped.
    """
    lines = text.split("\n")
    if not site.multiline:
        return lines[0]
    kept = lines[: count_block_lines(text, site, max_lines)]
    return "\n".join(_drop_trailing_blank_lines(kept))


def count_block_lines(text: str, site: CompletionSite, max_lines: int = DEFAULT_MAX_LINES) -> int:
    """How many leading lines of `text` (blank ones included) the multi-line rule keeps.

    A generator can stop as soon as a complete line is not kept: later ones never will be.
    """
    lines = text.split("\n")
    scan = _scan(site.line_prefix + text, site.language_id)
    offset = len(site.line_prefix)
    masked_lines = scan.masked[offset:].split("\n")
    stack = _openers_left_open(site)
    _push_pop(stack, masked_lines[0])

    limit = site.block_indent
    if not site.statements and _opens_block(scan.masked[: offset + len(lines[0])],
                                            site.language_id):
        limit = max(limit, indent_width(site.indent))

    count = 1
    start = offset + len(lines[0]) + 1  # offset of the current line in the scanned text
    for line, code in zip(lines[1:], masked_lines[1:], strict=True):
        if count >= max_lines:
            break
        if line.strip() and start not in scan.literal_line_starts:
            first = code.lstrip(" \t")[:1]
            if first in _CLOSERS:
                if not (stack and stack[-1] == _OPEN_OF[first]) and (
                        not site.statements or indent_width(line) <= limit):
                    break  # closes something opened before the cursor line
            elif indent_width(line) <= limit:
                break  # the enclosing block ended
        _push_pop(stack, code)
        count += 1
        start += len(line) + 1
    return count


def _opens_block(masked_line: str, language_id: str) -> bool:
    code = masked_line.rstrip(" \t" + _MASK)
    if code.endswith(("{", "(", "[")):
        return True
    if syntax_for(language_id).indent_scoped and code.endswith(":"):
        stack: list[str] = []
        _push_pop(stack, code)
        return not stack  # not a slice, a dict entry or a lambda inside brackets
    return False


def _drop_trailing_blank_lines(lines: list[str]) -> list[str]:
    end = len(lines)
    while end > 1 and not lines[end - 1].strip():
        end -= 1
    return lines[:end]


# --------------------------------------------------------------------------------------------
# 4. text that already follows the cursor


def dedupe_suffix(text: str, site: CompletionSite) -> str:
    """Remove what the completion repeats of the text after the cursor.

    - The whole completion is already the start of the suffix: show nothing.
    - Its last lines (whole lines, trailing whitespace and blank lines ignored) equal the lines
      that follow the cursor line: the model re-wrote the following code; drop them, unless
      they close a bracket the completion itself opened.
    - Its last line ends with the start of the line suffix (`foo(x))` before `)`): drop the
      overlap. An overlap with brackets or quotes goes only if that leaves the line better
      balanced (`foo(x)` before `)` is right as it is) or is self-contained (`();` before
      `();`); one that starts or ends inside a word stays (`clas` before `s Point:` is right).
    """
    if not text.strip():
        return text
    if site.suffix.startswith(text.rstrip()):
        return ""
    lines = text.split("\n")
    cut = _repeated_tail(lines, site)
    if cut is not None:
        if cut == 0:
            return ""
        lines = _drop_trailing_blank_lines(lines[:cut])
    return _cut_result(_drop_line_suffix_overlap("\n".join(lines), site), site)


# How much of the next line a completion must have copied before generation gives up on it.
COPY_ABANDON_CHARS = 24


def copying_next_line(produced: str, site: CompletionSite,
                      min_chars: int = COPY_ABANDON_CHARS) -> bool:
    """Whether the model is re-writing the line that follows the cursor line, far enough in
    that `dedupe_suffix` will drop the suggestion: generation can stop right there.

    Only while the first line is being written, at the end of the cursor line (where the
    dedupe rule treats it as a whole line), and once `min_chars` of it match: a line that
    merely starts like its neighbour (`x = f(1)` above `x = f(2)`) still gets its chance.
    """
    if "\n" in produced or site.line_suffix.strip():
        return False
    copied = produced.lstrip()
    if len(copied) < min_chars:
        return False
    following = _non_blank_lines(site.suffix.split("\n")[1:], 1)
    return bool(following) and following[0].startswith((site.line_prefix + produced).rstrip())


def _repeated_tail(lines: list[str], site: CompletionSite) -> int | None:
    """Index of the first completion line from which the rest repeats the following lines."""
    following = site.suffix.split("\n")[1:]
    full = list(lines)
    full[0] = site.line_prefix + full[0]
    full[-1] = full[-1] + site.line_suffix
    for start in range(len(full)):
        tail = [line.rstrip() for line in full[start:] if line.strip()]
        if not tail:
            return None
        if start == 0 and site.line_suffix.strip() and len(full) == 1:
            continue  # a single line that sits in front of code is not a whole line
        if _non_blank_lines(following, len(tail)) == tail and not _closes_own(lines, start, site):
            return start
    return None


def _closes_own(lines: list[str], start: int, site: CompletionSite) -> bool:
    """Whether lines[start:] close brackets opened in lines[:start] (not on the cursor line).

    Such a tail finishes the completion's own construct (`if x {` ... `}`) even when it looks
    like the next line, so it is not a re-write of the following code.
    """
    if start == 0:
        return False
    masked = _scan(site.line_prefix + "\n".join(lines), site.language_id).masked
    masked = masked[len(site.line_prefix) :]
    split = len("\n".join(lines[:start]))
    kept: list[str] = []
    _push_pop(kept, masked[:split])
    whole = list(kept)
    _push_pop(whole, masked[split:])
    return len(whole) < len(kept)


def _non_blank_lines(lines: list[str], count: int) -> list[str]:
    found: list[str] = []
    for line in lines:
        if len(found) == count:
            break
        if line.strip():
            found.append(line.rstrip())
    return found


def types_through(text: str, line_prefix: str, line_suffix: str, language_id: str) -> int:
    """How many characters of the line suffix a one-line completion writes again in their
    place: the closers and quotes an auto-closing editor put after the cursor (`foo(|)` +
    `o2);`, `"|"` + `hi";`). Its item replaces them (the range ends past them), as Tabby's
    does; 0 when inserting at the cursor leaves the line as well balanced (`g(|)` + `f(x)`).

    Only where the line suffix is nothing but closers and quotes (what auto-closing leaves);
    code after them (`);`, `) + c`) is left to `dedupe_suffix`, which drops what the completion
    repeats of it. Then the longest run of those closers that the completion holds in order
    and whose replacement leaves the line better balanced than inserting does.
    """
    if not text.strip() or "\n" in text:
        return 0
    run = len(line_suffix) - len(line_suffix.lstrip(_CLOSERS + _QUOTES))
    if not run or line_suffix[run:].strip():
        return 0
    if _opens_ahead_of_the_closers(text, line_prefix, language_id):
        return 0
    inserted = _imbalance(line_prefix + text + line_suffix, language_id)
    for size in range(run, 0, -1):
        if not _holds_in_order(text, line_suffix[:size]):
            continue
        if text.rstrip() == line_suffix[:size]:
            return 0  # writes only what is there: nothing to suggest (`dedupe_suffix`)
        if _imbalance(line_prefix + text + line_suffix[size:], language_id) < inserted:
            return size
    return 0


def _holds_in_order(text: str, chars: str) -> bool:
    found = iter(text)
    return all(ch in found for ch in chars)


def _typed_through(text: str, site: CompletionSite) -> bool:
    return site.replace_line_suffix and types_through(
        text, site.line_prefix, site.line_suffix, site.language_id) > 0


def _drop_line_suffix_overlap(text: str, site: CompletionSite) -> str:
    head = text.rstrip(" \t")
    line_start = head.rfind("\n") + 1
    last = head[line_start:]
    after = site.line_suffix
    before = site.line_prefix if line_start == 0 else ""
    original = _imbalance(site.line_prefix + text + after, site.language_id)
    for size in range(min(len(last), len(after)), 0, -1):
        overlap = after[:size]
        if not overlap.strip() or not last.endswith(overlap):
            continue
        kept = last[: len(last) - size]
        if not _at_word_boundaries(before + kept, overlap, after[size:]):
            continue
        candidate = head[: line_start + len(kept)]
        if any(ch in _OPENERS + _CLOSERS + _QUOTES for ch in overlap):
            fixed = _imbalance(site.line_prefix + candidate + after, site.language_id)
            # A self-contained repeat (`();` before `();`) goes if it does not hurt; a lone
            # closer or quote only if the line is better without it.
            if fixed > original or (fixed == original and not _self_contained(overlap, site)):
                continue
        return candidate
    return text


def _self_contained(code: str, site: CompletionSite) -> bool:
    """Every bracket and quote of `code` is matched inside it."""
    stack: list[str] = []
    _push_pop(stack, _scan(code, site.language_id).masked)
    return not stack and _imbalance(code, site.language_id) == 0


def _at_word_boundaries(kept: str, overlap: str, rest: str) -> bool:
    """The overlap neither starts in the middle of a word of the completion nor ends inside one."""
    starts_inside = _is_word(overlap[0]) and kept[-1:] != "" and _is_word(kept[-1])
    ends_inside = _is_word(overlap[-1]) and rest[:1] != "" and _is_word(rest[0])
    return not (starts_inside or ends_inside)


def _is_word(ch: str) -> bool:
    return ch.isalnum() or ch == "_"


# --------------------------------------------------------------------------------------------
# 5. brackets and quotes


def balance_brackets(text: str, site: CompletionSite) -> str:
    """Don't emit a closer (or closing quote) that the text after the cursor already provides.

    - If the cursor line's own suffix holds closers or quotes and the completion makes the line
      worse balanced than it was without it (`if (` + `x > 0) {` + `)`), cut the completion
      before the closer or quote that causes it: the longest cut that restores the line's
      balance wins; if none does, nothing is cut.
    - If the rest of the line is empty, a closer with no opener on the cursor line or in the
      completion is removed (with what follows it) only when the next non-blank line starts with
      the same closer at a shallower indent: the code already closes that construct there.
      Without that evidence the closer may end a construct opened on an earlier line, so it stays.
      One that begins the cursor line and closes the construct open above it (`open_above`:
      `if ok {`, its body, `}`) stays too: the next line closes an outer one.

    Openers the completion leaves open are fine: the user is in the middle of an expression.
    """
    if not text.strip():
        return text
    if any(ch in _CLOSERS + _QUOTES for ch in site.line_suffix):
        return _cut_to_balance(text, site)
    if not site.line_suffix.strip():
        return _cut_closer_on_next_line(text, site)
    return text


def _cut_to_balance(text: str, site: CompletionSite) -> str:
    lang = site.language_id
    baseline = _imbalance(site.line_prefix + site.line_suffix, lang)
    if _imbalance(site.line_prefix + text + site.line_suffix, lang) <= baseline:
        return text
    if _opens_ahead_of_the_closers(text, site.line_prefix, lang):
        return text
    offset = len(site.line_prefix)
    masked = _scan(site.line_prefix + text, lang).masked[offset:]
    # Cut points: before each closer or quote delimiter (not inside a run like `"""`), longest
    # first.
    for end in range(len(text) - 1, -1, -1):
        ch = masked[end]
        if ch not in _CLOSERS + _QUOTES or (ch in _QUOTES and end and masked[end - 1] == ch):
            continue
        candidate = text[:end]
        if _imbalance(site.line_prefix + candidate + site.line_suffix, lang) <= baseline:
            return _cut_result(candidate, site)
    return text


def _opens_ahead_of_the_closers(text: str, line_prefix: str, language_id: str) -> bool:
    """The completion closes only brackets it opened itself and leaves some open: the line
    suffix's closers then follow its own openers, which the next lines close (`useEffect(` +
    `() => {` + `)`: the callback's body comes, then `})`). It writes none of those closers
    again: a cut has nothing to remove (the one before its own `)` left `(`), and an item
    that replaced them would delete the editor's `)`, which, left after the cursor, goes down
    with it to the `}` the user types (VS Code: `})`)."""
    scan = _scan(line_prefix + text, language_id)  # (the prefix: for its strings, comments)
    if scan.open_strings:
        return False
    own: list[str] = []  # the completion's brackets still open
    for ch in scan.masked[len(line_prefix) :]:
        if ch in _OPENERS:
            own.append(ch)
        elif ch in _CLOSERS:
            if not own or own[-1] != _OPEN_OF[ch]:
                return False  # closes a bracket of the line before the cursor, or none
            own.pop()
    return bool(own)


def _cut_closer_on_next_line(text: str, site: CompletionSite) -> str:
    offset = len(site.line_prefix)
    masked = _scan(site.line_prefix + text, site.language_id).masked
    stack: list[str] = []
    _push_pop(stack, masked[:offset])
    for pos in range(offset, len(masked)):
        ch = masked[pos]
        if ch in _OPENERS:
            stack.append(ch)
        elif ch in _CLOSERS:
            if stack:
                if stack[-1] == _OPEN_OF[ch]:
                    stack.pop()
                continue  # a mismatch: not sure which one is wrong
            cut = pos - offset
            line_start = text.rfind("\n", 0, cut) + 1
            line = site.line_prefix + text if line_start == 0 else text[line_start:]
            if (line_start == 0 and site.open_above == _OPEN_OF[ch]
                    and not (site.line_prefix + text[:cut]).strip()):
                return text
            if _next_line_closes(site, ch, indent_width(line)):
                return _cut_result(text[:cut], site)
            return text
    return text


def _cut_result(text: str, site: CompletionSite) -> str:
    """What is left after a cut, or "" if that adds nothing to what follows the cursor."""
    body = text.rstrip()
    return "" if not body.strip() or site.suffix.startswith(body) else text


def _next_line_closes(site: CompletionSite, closer: str, width: int) -> bool:
    nxt = _non_blank_lines(site.suffix.split("\n")[1:], 1)
    if not nxt:
        return False
    line = nxt[0]
    return line.lstrip(" \t").startswith(closer) and indent_width(line) < width


# --------------------------------------------------------------------------------------------
# 6. whitespace


def trim_whitespace(text: str, site: CompletionSite | None = None) -> str:
    """Trim trailing whitespace of every line and trailing blank lines; whitespace-only -> "".

    The last line keeps its trailing whitespace when code follows on the cursor line and does
    not start with whitespace itself (`foo(` + `a, ` + `b)`): there it separates the two.
    Leading whitespace of the first line is kept as the model wrote it: the model saw the exact
    text before the cursor (and token healing makes it re-generate the healed characters), a
    space after `x =` is needed, and a second space after a space is often deliberate (two
    spaces before a Python inline comment). Line endings come back as "\\n"; editors convert
    inserted text to the document's own.
    """
    raw_lines = text.split("\n")
    lines = _drop_trailing_blank_lines([line.rstrip() for line in raw_lines])
    if not "".join(lines).strip():
        return ""
    follows = site.line_suffix if site is not None else ""
    # The line suffix lands right after the last line unless the text ended with a newline.
    last_meets_suffix = len(lines) == len(raw_lines)
    if last_meets_suffix and follows.strip() and not follows[:1].isspace():
        lines[-1] = raw_lines[-1].rstrip("\r")
    return "\n".join(lines)
