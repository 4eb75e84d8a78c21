"""Prompt assembly: a prompt over budget is cut where typing does not move the cut."""

from __future__ import annotations

import dataclasses

from lsp_complete.context import CodeContext
from lsp_complete.models import FimTemplate
from lsp_complete.prompt import SegmentTokenizer, build_prompt, fit_context, heal_split

FIM = FimTemplate(prefix="<P>", suffix="<S>", middle="<M>")
MARKERS = {"<P>": 1, "<S>": 2, "<M>": 3}


def tokenize(text: str, special: bool = False) -> list[int]:
    """One token per character (like the tiny test model's byte vocabulary)."""
    if special:
        return [MARKERS[text]]
    return [ord(ch) + 16 for ch in text]


def detokenize(tokens: list[int]) -> str:
    return "".join(chr(t - 16) for t in tokens)


def context(middle: str, before_lines: int = 40) -> CodeContext:
    before = "".join(f"    value_{i} = compute({i})\n" for i in range(before_lines))
    return CodeContext(path="a.py", language_id="python", head="import os\n", before=before,
                       suffix="\n    return total\n", middle=middle, anchor=0)


def prompt_for(middle: str, max_tokens: int, before_lines: int = 40):
    return build_prompt(context(middle, before_lines), FIM, SegmentTokenizer(tokenize),
                        detokenize, max_tokens)


def test_a_prompt_within_budget_is_whole() -> None:
    prompt = prompt_for("    tot", 10_000)
    assert detokenize(prompt.segments[1]) == context("").before


def test_typing_does_not_move_the_cut_of_a_prompt_over_budget() -> None:
    budget = len(prompt_for("", 10_000)) - 200
    typed = "    total = sum(value for value in range(100)) + compute(7)"
    prompts = [prompt_for(typed[:n], budget) for n in range(1, len(typed) + 1)]
    assert all(len(p) <= budget for p in prompts)
    assert len(prompts[0]) < budget  # cut with room for the middle to grow
    # Everything before the middle stays the same while it grows: each keystroke appends.
    stable = {tuple(p.tokens[: len(p) - len(p.segments[-1])]) for p in prompts}
    assert len(stable) == 1


def test_a_middle_ending_in_spaces_heals_exactly_one_space() -> None:
    prompt = prompt_for("    ", 10_000)  # the indentation of the lines around it
    assert (prompt.heal, prompt.heal_code) == (" ", True)
    assert detokenize(prompt.segments[-1]) == "   "  # the other three stay in the prompt
    after = prompt_for("    x = ", 10_000)
    assert (after.heal, after.heal_code) == (" ", True)
    word = prompt_for("    retu", 10_000)
    assert (word.heal, word.heal_code) == ("u", False)  # the last token (one char per token)


def test_a_middle_ending_in_tabs_heals_exactly_one_tab() -> None:
    """Tab-indented code (Go, C in kernel style): as for spaces, one tab of the indentation
    is healed and the token that ends it must carry code; the others stay in the prompt."""
    ctx = CodeContext(path="a.go", language_id="go", head="", before="func f() {\n\tif ok {\n",
                      suffix="\n\t\treturn\n\t}\n}\n", middle="\t\t", anchor=0)
    tokens = SegmentTokenizer(tokenize)
    prompt = build_prompt(ctx, FIM, tokens, detokenize, 10_000)
    assert (prompt.heal, prompt.heal_code) == ("\t", True)
    assert detokenize(prompt.segments[-1]) == "\t"
    # A tab after code aligns (`int\t\t count;`, C in BSD style): more tabs, or a space,
    # may follow it; its last token is healed as usual.
    aligned = build_prompt(dataclasses.replace(ctx, middle="\t\tint\t"), FIM, tokens,
                           detokenize, 10_000)
    assert (aligned.heal, aligned.heal_code) == ("\t", False)


def test_healing_goes_back_over_what_one_token_could_write() -> None:
    """A typed word's tokens are healed back as far as one token of the vocabulary begins
    with all of them ("#incl" of "#include"), never over a line break, and only the last
    one where the engine cannot tell."""
    tokens = SegmentTokenizer(tokenize)

    def build(middle: str, begins_a_token=None):
        ctx = dataclasses.replace(context(""), middle=middle)
        return build_prompt(ctx, FIM, tokens, detokenize, 10_000, begins_a_token=begins_a_token)

    def include(text: str) -> bool:  # a vocabulary of every tail of "#include"
        return text in "#include"

    assert build("x = 1\n#incl", include).heal == "#incl"
    assert detokenize(build("x = 1\n#incl", include).segments[-1]) == "x = 1\n"
    assert build("x = 1\n#incl").heal == "l"
    assert build("#incl", include).heal == "#incl"  # the whole middle
    assert build("x = 1\n#incl", lambda text: True).heal == "#incl"  # not over the line break
    assert build("    a(#incl", include).heal == "#incl"
    assert build("    retu", include).heal == "u"

    calls: list[list[int]] = []

    def counting(tokens: list[int]) -> str:
        calls.append(tokens)
        return detokenize(tokens)

    # A server's tokenizer detokenizes by a round trip: without a vocabulary, one call.
    assert heal_split(tokenize("x = 1\n#incl"), "x = 1\n#incl", counting) == (
        tokenize("x = 1\n#inc"), "l")
    assert len(calls) == 1


def test_at_the_cursor_the_prefix_ends_with_the_middle_and_nothing_is_healed() -> None:
    """The layout FIM models are trained on, for a block in idle time: the same head and
    window as the keystroke's prompt, then the typed middle, then the suffix and the middle
    marker; in SPM order the suffix first."""
    ctx = context("    x = ")
    tokens = SegmentTokenizer(tokenize)
    usual = build_prompt(ctx, FIM, tokens, detokenize, 10_000)
    at = build_prompt(ctx, FIM, tokens, detokenize, 10_000, at_cursor=True)
    assert (at.heal, at.heal_code) == ("", False)
    assert at.segments[:2] == usual.segments[:2]
    assert at.tokens[len(at.segments[0]) + len(at.segments[1]):] == (
        tokenize("    x = ") + [MARKERS["<S>"]] + tokenize("\n    return total\n")
        + [MARKERS["<M>"]])
    spm = dataclasses.replace(FIM, order="spm")
    at_spm = build_prompt(ctx, spm, tokens, detokenize, 10_000, at_cursor=True)
    assert at_spm.tokens[0] == MARKERS["<S>"] and at_spm.tokens[-1] == MARKERS["<M>"]
    assert detokenize(at_spm.segments[-2]) == "    x = "


def test_indentation_still_being_typed_may_grow() -> None:
    """Two of four spaces typed under a block opener: the suggestion may add the other two."""
    ctx = CodeContext(path="a.c", language_id="c", head="", before="int main() {\n",
                      suffix="\n    return 0;\n}\n", middle="  ", anchor=0)
    prompt = build_prompt(ctx, FIM, SegmentTokenizer(tokenize), detokenize, 10_000)
    assert not prompt.heal_code
    full = build_prompt(dataclasses.replace(ctx, middle="    "), FIM,
                        SegmentTokenizer(tokenize), detokenize, 10_000)
    assert full.heal_code


def test_tab_indentation_still_being_typed_may_grow() -> None:
    """One of two tabs typed in a block whose lines are two tabs deep: the suggestion may
    add the other; at the lines' depth it may not. In an empty block (the closer below as
    deep as the line) nothing says more indentation is coming, as for spaces."""
    ctx = CodeContext(path="a.go", language_id="go", head="", before="func f() {\n\tif ok {\n",
                      suffix="\n\t\treturn\n\t}\n}\n", middle="\t", anchor=0)
    tokens = SegmentTokenizer(tokenize)
    assert not build_prompt(ctx, FIM, tokens, detokenize, 10_000).heal_code
    deep = dataclasses.replace(ctx, middle="\t\t")
    assert build_prompt(deep, FIM, tokens, detokenize, 10_000).heal_code
    closing = dataclasses.replace(ctx, suffix="\n\t}\n}\n")
    assert build_prompt(closing, FIM, tokens, detokenize, 10_000).heal_code
    mixed = dataclasses.replace(ctx, middle="\t ")
    assert build_prompt(mixed, FIM, tokens, detokenize, 10_000).heal_code


def _count(text: str) -> int:
    return len(tokenize(text))


def test_a_cold_first_prompt_keeps_the_nearest_lines_and_the_headers_within_budget() -> None:
    head = "import os\nimport sys\n\nclass Ledger:\n    def total(self):\n"
    before = "".join(f"        value_{i} = compute({i})\n" for i in range(12))
    suffix = " + tax\n        return total\n    def other(self):\n"
    ctx = CodeContext(path="a.py", language_id="python", head=head, before=before,
                      suffix=suffix, middle="        tot", anchor=0)
    fitted = fit_context(ctx, 160, _count)
    assert _count(fitted.head) + _count(fitted.before) + _count(fitted.suffix) <= 160
    # The rest of the cursor line, the lines just above, the enclosing headers: kept.
    assert fitted.suffix.startswith(" + tax")
    assert fitted.before and before.endswith(fitted.before)
    assert fitted.before.endswith("value_11 = compute(11)\n")
    assert fitted.head.endswith("    def total(self):\n") and head.endswith(fitted.head)
    # Older lines go first.
    assert "value_0 " not in fitted.before
    # Within budget already: unchanged.
    assert fit_context(ctx, 10_000, _count) == ctx


def test_a_cold_first_prompt_is_the_same_at_every_keystroke() -> None:
    """Typing only grows the middle: the fitted context's other parts, and so every prompt
    token before the middle, stay the same (each keystroke encodes just what was typed)."""
    ctx = context("    tot", before_lines=30)
    first = fit_context(ctx, 200, _count)
    later = fit_context(dataclasses.replace(ctx, middle="    total = ", suffix=ctx.suffix), 200,
                        _count)
    assert dataclasses.replace(first, middle="") == dataclasses.replace(later, middle="")
    a = build_prompt(first, FIM, SegmentTokenizer(tokenize), detokenize, 10_000, heal=False)
    b = build_prompt(later, FIM, SegmentTokenizer(tokenize), detokenize, 10_000, heal=False)
    assert a.segments[:-1] == b.segments[:-1]
    assert b.tokens[: len(a.tokens)] == a.tokens
