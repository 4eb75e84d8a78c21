"""Turn a CodeContext into prompt token segments for a model's FIM template.

Middle-anchored layout (see docs/ARCHITECTURE.md and the design notes):

    <fim_prefix> head before <fim_suffix> suffix <fim_middle> middle

Segments are ordered from most to least stable, and typing at the cursor only appends to
`middle`, so the engine's longest-common-prefix reuse re-encodes just the typed tokens.
Token healing drops the last token of `middle` (and those before it that one token could
write with it); generation must then start with their text.

`at_cursor` lays the same context out as FIM models are trained on it, the prefix ending at
the cursor (no healing):

    <fim_prefix> head before middle <fim_suffix> suffix <fim_middle>

A block generated in idle time uses it (`Completer.block`): it shares the head and the window
with the cached prompt, and the model decides where its middle ends as it learned to.

A repository block (`ctx.repo`: other files of the workspace) comes first of all, in the
template's repository format when it has one (Qwen2.5-Coder, StarCoder2: `file_sep` and
`repo_name` in models.toml):

    <repo_name>name\n <file_sep>path\ncontent\n ... <file_sep>current/path\n <fim_prefix>...

and otherwise as commented `Path: ...` blocks at the start of the prefix. File contents are
tokenized as text, never as special tokens: a file holding "<|file_sep|>" cannot forge one.
"""

from __future__ import annotations

import dataclasses
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

from lsp_complete.context import CodeContext
from lsp_complete.context.limits import RepoContext
from lsp_complete.languages import syntax_for
from lsp_complete.models import FimTemplate

Tokenize = Callable[[str, bool], list[int]]


@dataclass(frozen=True)
class Prompt:
    segments: list[list[int]]
    heal: str  # characters removed by token healing; the output must start with them
    # The healed space or tab ends the line's blank run: the token that ends it carries code.
    heal_code: bool = False
    repo_tokens: int = 0  # tokens of the repository block (0: none)
    repo_segments: int = 0  # leading segments that hold only the repository block
    # The context it was built from (None: built otherwise, as in tests).
    ctx: CodeContext | None = dataclasses.field(default=None, compare=False, repr=False)

    @property
    def tokens(self) -> list[int]:
        return [t for segment in self.segments for t in segment]

    def __len__(self) -> int:
        return sum(len(s) for s in self.segments)


class SegmentTokenizer:
    """Tokenizes prompt segments, remembering the stable ones: a keystroke re-tokenizes only
    the middle, not the kilobytes of window around it."""

    def __init__(self, tokenize: Tokenize, max_entries: int = 256) -> None:
        self._tokenize = tokenize
        self._cache: OrderedDict[tuple[str, bool], list[int]] = OrderedDict()
        self._max = max_entries

    def __call__(self, text: str, special: bool = False) -> list[int]:
        if not text:
            return []
        key = (text, special)
        hit = self._cache.get(key)
        if hit is not None:
            self._cache.move_to_end(key)
            return hit
        tokens = self._tokenize(text, special)
        self._cache[key] = tokens
        if len(self._cache) > self._max:
            self._cache.popitem(last=False)
        return tokens


def heal_split(tokens: list[int], middle: str, detokenize: Callable[[list[int]], str],
               begins_a_token: Callable[[str], bool] | None = None) -> tuple[list[int], str]:
    """Drop the last token of the middle (it may be a partial word) and return its text; then
    the tokens before it too, within the line, while some token begins with all the text
    dropped (`begins_a_token`). Typed text splits otherwise than the finished word: Qwen2
    reads "#incl" as "#", "incl" and "#include" as one token, so a prompt ending in "#" leads
    the model away from the word ("strings.Jo" gave "ined", "return tru" gave "eset")."""
    def dropped(kept: list[int]) -> str:  # "" where the kept tokens are not the middle's start
        text = detokenize(kept)
        return middle[len(text) :] if middle.startswith(text) else ""

    if not tokens:
        return tokens, ""
    kept, healed = tokens[:-1], dropped(tokens[:-1])
    if not healed:
        return tokens, ""
    # Without a vocabulary to ask, no second detokenize: a server's is a round trip.
    while kept and begins_a_token is not None:
        more = dropped(kept[:-1])
        if not more or "\n" in more or not begins_a_token(more):
            break
        kept, healed = kept[:-1], more
    return kept, healed


def build_prompt(
    ctx: CodeContext,
    fim: FimTemplate | None,
    tokenize: SegmentTokenizer,
    detokenize: Callable[[list[int]], str],
    max_tokens: int,
    heal: bool = True,
    at_cursor: bool = False,
    begins_a_token: Callable[[str], bool] | None = None,
) -> Prompt:
    healed, heal_code = "", False
    if at_cursor:
        middle_tokens = tokenize(ctx.middle, False)
    elif heal and _heals_one_blank(ctx):
        # Heal exactly one trailing space (or indentation tab): the prompt then ends the way
        # the tokenizer splits indented code ("           " + " depth", "\t" + "\tif"), and
        # the engine makes the first token that space or tab followed by code. Healing a whole
        # run of spaces let the model answer with more spaces until the token limit (no
        # suggestion at all on 1 in 10 HumanEval lines); a run of tabs, with one tab too many.
        middle_tokens, healed, heal_code = tokenize(ctx.middle[:-1], False), ctx.middle[-1], True
    else:
        middle_tokens = tokenize(ctx.middle, False)
        if heal:
            middle_tokens, healed = heal_split(middle_tokens, ctx.middle, detokenize,
                                               begins_a_token)

    head = tokenize(ctx.head, False)
    before = tokenize(ctx.before, False)
    repo, commented = _repo_tokens(ctx, fim, tokenize)
    if commented:  # no repository format: the block opens the prefix, as comments
        head = repo + head
    if fim is None:
        # Prefix-only model: no suffix at all.
        segments = [head, before, middle_tokens]
    else:
        suffix_part = tokenize(fim.suffix, True) + tokenize(ctx.suffix, False)
        middle_mark = tokenize(fim.middle, True) if fim.middle else []
        prefix_part = tokenize(fim.prefix, True) + head
        if fim.order == "spm":
            lead, marked = [suffix_part, prefix_part, before], middle_mark
        else:
            lead, marked = [prefix_part, before], suffix_part + middle_mark
        # The typed middle before the middle marker, as FIM training has it; else after it,
        # where typing only appends.
        ends = [middle_tokens, marked] if at_cursor else [marked, middle_tokens]
        segments = [*lead, *ends]
    repo_segments = 0
    if repo and not commented:
        segments, repo_segments = [repo, *segments], 1
    # The repository block has its own budget (repoContextTokens): the file's own context
    # keeps its room.
    segments = _fit(segments, before, len(middle_tokens), max_tokens + len(repo))
    return Prompt(segments=segments, heal=healed, heal_code=heal_code, repo_tokens=len(repo),
                  repo_segments=repo_segments, ctx=ctx)


# The template's special tokens and separators in a prompt, besides the context's own text.
_TEMPLATE_TOKENS = 8


def fit_context(ctx: CodeContext, budget: int, count: Callable[[str], int]) -> CodeContext:
    """`ctx` cut to about `budget` tokens besides its middle (the repository block aside),
    for a small first prompt. Kept first: the rest of the cursor line, the lines just above,
    the head's last lines (the headers of the enclosing definitions), the next line below;
    then older lines above, the rest of the head, more lines below. The cut depends only on
    the context's text, so the same window gives the same prompt at every keystroke."""
    above = ctx.before.splitlines(keepends=True)
    head = ctx.head.splitlines(keepends=True)
    rest, *below = ctx.suffix.split("\n")
    left = budget - _TEMPLATE_TOKENS - count(rest)
    if left >= count(ctx.before) + count(ctx.head) + count(ctx.suffix) - count(rest):
        return ctx
    kept = {"above": 0, "head": 0, "below": 0}
    lines = {"above": above[::-1], "head": head[::-1], "below": below}

    def grow(part: str, most_lines: int, most_tokens: int) -> None:
        nonlocal left
        spent = 0
        while kept[part] < min(most_lines, len(lines[part])):
            cost = count(lines[part][kept[part]]) + (part == "below")  # + its line break
            if cost > min(left, most_tokens - spent):
                return
            left -= cost
            spent += cost
            kept[part] += 1

    grow("above", 4, left)
    grow("head", len(head), budget // 3)
    grow("below", 1, left)
    grow("above", len(above), left)
    grow("head", len(head), left)
    grow("below", len(below), left)
    return dataclasses.replace(
        ctx,
        head="".join(head[len(head) - kept["head"] :]),
        before="".join(above[len(above) - kept["above"] :]),
        suffix="\n".join([rest, *below[: kept["below"]]]),
    )


def _repo_tokens(ctx: CodeContext, fim: FimTemplate | None,
                 tokenize: SegmentTokenizer) -> tuple[list[int], bool]:
    """The repository block's tokens, and whether they are comments opening the prefix
    (a template without a repository format) rather than a segment of their own."""
    repo = ctx.repo
    if repo is None or not repo.files:
        return [], False
    if fim is not None and fim.file_sep:
        return _repo_format(repo, fim, tokenize), False
    return tokenize(repo_comment_text(repo, ctx.language_id), False), True


def _repo_format(repo: RepoContext, fim: FimTemplate, tokenize: SegmentTokenizer) -> list[int]:
    assert fim.file_sep is not None
    sep = tokenize(fim.file_sep, True)
    tokens = tokenize(fim.repo_name, True) + tokenize(repo.name + "\n", False) \
        if fim.repo_name else []
    for file in repo.files:
        tokens += sep + tokenize(f"{file.path}\n{file.text}\n", False)
    return tokens + sep + tokenize(repo.current_path + "\n", False)


def repo_comment_text(repo: RepoContext, language_id: str) -> str:
    """The block for templates without a repository format: one commented `Path: ...` block
    per file, in the current file's comment syntax."""
    mark = syntax_for(language_id).comment_prefix
    parts = []
    for file in repo.files:
        lines = "".join(f"{mark} {line}".rstrip() + "\n" for line in file.text.split("\n"))
        parts.append(f"{mark} Path: {file.path}\n{lines}")
    return "".join(parts) + "\n"


# The blanks an indentation is made of.
_BLANKS = (" ", "\t")


def _heals_one_blank(ctx: CodeContext) -> bool:
    """The middle ends in a space, or in a tab of the line's indentation (a tab after code
    may align more: `int\t\t count;`), and the indentation is not still being typed."""
    line = ctx.middle.rsplit("\n", 1)[-1]
    blank_end = line.endswith(" ") or (line.endswith("\t") and not line.strip())
    return blank_end and not _still_indenting(ctx, line)


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" \t"))


def _still_indenting(ctx: CodeContext, line: str) -> bool:
    """The cursor line (`line`, the middle's last) holds only spaces (or only tabs), fewer
    than both its neighbours call for: the user is typing the indentation a space (a tab) at
    a time, and the suggestion may add more of it.

    The line above calls for its own indentation, one level more after a block opener (the
    level taken from the line below when that is deeper, else 4); the line below, for its own.
    """
    unit = line[:1]
    if unit not in _BLANKS or line.strip(unit):
        return False
    above_text = ctx.before + ctx.middle[: len(ctx.middle) - len(line)]
    above = next((s for s in reversed(above_text.split("\n")) if s.strip()), None)
    below = next((s for s in ctx.suffix.split("\n")[1:] if s.strip()), None)
    if above is None or below is None:
        return False
    wanted = _indent(above)
    if above.rstrip().endswith((":", "{", "(", "[")):
        wanted += _indent(below) - wanted if _indent(below) > wanted else 4
    return len(line) < min(wanted, _indent(below))


# Cutting the window for a prompt over budget: as if the middle were at least this long, and
# in steps of this many tokens. The middle grows with every keystroke; a cut that followed it
# would move the window's first token (and so the whole prompt after the head) every time.
_MIDDLE_RESERVE = 128
_CUT_STEP = 64


def _fit(segments: list[list[int]], before: list[int], middle: int,
         max_tokens: int) -> list[list[int]]:
    """Keep the prompt within budget by cutting the window's oldest tokens (rarely needed:
    the context limits already bound the windows), at a point typing does not move."""
    total = sum(len(s) for s in segments)
    if total <= max_tokens:
        return segments
    excess = total - middle + max(middle, _MIDDLE_RESERVE) - max_tokens
    excess = -(-excess // _CUT_STEP) * _CUT_STEP
    fitted = []
    for segment in segments:
        if segment is before and excess > 0:
            cut = min(excess, len(segment))
            segment = segment[cut:]
            excess -= cut
        fitted.append(segment)
    return fitted
