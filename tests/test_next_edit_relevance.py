"""Whether a model's next edit follows from the user's recent edits (nextedit/relevance.py)."""

from __future__ import annotations

from lsp_complete.nextedit.history import EditBlock
from lsp_complete.nextedit.relevance import changed_words, follows_from

RENAMED = EditBlock(0, ("def area(width, height):",), ("def area(w, height):",))
WINDOW = "def area(w, height):\n    # the area\n    return width * height\n"


def test_the_words_a_change_writes_and_replaces() -> None:
    assert changed_words("f(a, b)", "f(a, c, 2)") == ({"c"}, {"b"})
    assert changed_words("x = 1", "x = 1") == (set(), set())


def test_an_edit_that_carries_the_last_one_on_follows() -> None:
    assert follows_from([RENAMED], WINDOW, WINDOW.replace("return width", "return w"))
    added = EditBlock(0, ("def area(width, height):",), ("def area(width, height, depth):",))
    assert follows_from([added], "    return width * height\n",
                        "    return width * height * depth\n")


def test_an_edit_elsewhere_does_not_follow() -> None:
    assert not follows_from([RENAMED], WINDOW, WINDOW.replace("the area", "the surface"))
    assert not follows_from([], WINDOW, WINDOW.replace("return width", "return w"))


def test_an_earlier_edit_counts_too() -> None:
    typed_elsewhere = EditBlock(9, ("",), ("#",))
    assert follows_from([RENAMED, typed_elsewhere], WINDOW,
                        WINDOW.replace("return width", "return w"))


def test_undoing_the_last_edit_does_not_follow() -> None:
    removed = EditBlock(0, ("import sys", "import os"), ("import os",))
    assert not follows_from([removed], "import os\n", "import sys\nimport os\n")
    assert not follows_from([RENAMED], WINDOW, WINDOW.replace("area(w,", "area(width,"))
