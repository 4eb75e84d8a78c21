"""The last edit made again at the nearest other place it fits (nextedit/repeat.py)."""

from __future__ import annotations

from lsp_complete.nextedit.diff import Replacement
from lsp_complete.nextedit.history import EditBlock
from lsp_complete.nextedit.repeat import repeat_edit, token_changes


def made_again(text: str, line: int, before: str, cursor_line: int | None = None) -> str | None:
    """`text` whose line `line` was `before` until the last edit: the text after the edit is
    made again, or None."""
    lines = text.split("\n")
    last = EditBlock(line, (before,), (lines[line],))
    rep = repeat_edit(text, last, line if cursor_line is None else cursor_line)
    return None if rep is None else text[:rep.start] + rep.text + text[rep.end:]


def test_a_rename_goes_to_the_nearest_use_below_first() -> None:
    text = "x = count\ndef f(total):\n    return total + total\n"
    after = made_again(text, 1, "def f(count):")
    # The nearest line holding `count` is line 0 and line 2 has none: line 0 is renamed.
    assert after == "x = total\ndef f(total):\n    return total + total\n"
    text = "a = count\ndef f(total):\n    return count + count\n"
    # Lines 0 and 2 are as near: below wins, every use on it.
    assert made_again(text, 1, "def f(count):") == ("a = count\ndef f(total):\n"
                                                    "    return total + total\n")


def test_the_smallest_replacement_in_the_document() -> None:
    text = "def f(w):\n    return width\n"
    last = EditBlock(0, ("def f(width):",), ("def f(w):",))
    assert repeat_edit(text, last, 0) == Replacement(22, 26, "")  # "idth" of line 1


def test_an_added_argument_goes_where_the_same_tokens_surround_it() -> None:
    text = ("echo(msg, err=True)\n"
            "other(msg)\n"
            "echo(msg)\n")
    assert made_again(text, 0, "echo(msg)") == ("echo(msg, err=True)\n"
                                                "other(msg)\n"
                                                "echo(msg, err=True)\n")


def test_no_other_place_or_an_edit_too_big_or_a_value_gives_nothing() -> None:
    assert made_again("def f(total):\n    return 1\n", 0, "def f(count):") is None
    big = "a = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13]\nb = []\n"
    assert made_again(big, 0, "a = []") is None
    # True -> False is a value changed, not a name: no other True follows it.
    assert made_again("done = False\nok = True\n", 0, "done = True") is None
    # A change with nothing around it to find the place by (and a one-letter name is no
    # rename: `a` is not renamed wherever it stands).
    assert token_changes("", "#") is None
    assert made_again("b\nx = a + a\n", 0, "a") is None


def test_the_edited_lines_themselves_are_left_alone() -> None:
    text = "f(total, total)\n"
    assert made_again(text, 0, "f(count, total)") is None


def test_a_line_added_is_not_added_again() -> None:
    # `y = 2` added below `x = 1`: added again below the other `x = 1`, it would only double
    # the user's line (made again, a change that adds or removes a line mostly does).
    text = "x = 1\ny = 2\nz = 0\nx = 1\n"
    last = EditBlock(0, ("x = 1",), ("x = 1", "y = 2"))
    assert repeat_edit(text, last, 1) is None


def test_renames_are_carried_on_each_by_itself() -> None:
    # Three names renamed on one line: the next line that holds one of them gets that one.
    before = "check(mutex, required, group)"
    text = ("check(mutexKey, requiredKey, groupKey)\n"
            "x = 1\n"
            "mark(required)\n")
    assert made_again(text, 0, before) == ("check(mutexKey, requiredKey, groupKey)\n"
                                           "x = 1\n"
                                           "mark(requiredKey)\n")
    # An edit that is not renames alone must fit whole: `f(a)` -> `g(a, b)` is two changes.
    assert made_again("g(a, b)\nf(c)\n", 0, "f(a)") is None


def test_a_huge_line_is_passed_over() -> None:
    # A minified line is not tokenized (the rule runs on the server's event loop).
    huge = "data = [" + "count, " * 100_000 + "]"
    text = f"def f(total):\n{huge}\n    return count\n"
    assert made_again(text, 0, "def f(count):") == text.replace("return count", "return total")


def test_lines_end_at_any_line_break_lsp_knows() -> None:
    """Round 9: the text was split at "\\n" only: in a file of lone "\\r" line breaks (old
    Mac) the whole file was one line, so a rename was carried nowhere."""
    for eol in ("\r", "\r\n", "\n"):
        text = eol.join(["def f(w):", "    x = 1", "    return width", ""])
        last = EditBlock(0, ("def f(width):",), ("def f(w):",))
        rep = repeat_edit(text, last, 0)
        assert rep is not None, repr(eol)
        assert text[:rep.start] + rep.text + text[rep.end:] == text.replace("width", "w"), eol
