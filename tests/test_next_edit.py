"""Next edits, the pure parts: the edit history (merging, bounds), the smallest replacement
and its LSP range, each model format's prompt, and the answer read back through the guards."""

from __future__ import annotations

import pytest

from lsp_complete.documents import Document
from lsp_complete.models import (
    ModelError,
    NextEditTemplate,
    infer_next_edit_from_vocab,
    load_registry,
)
from lsp_complete.nextedit.diff import Replacement, smallest_replacement
from lsp_complete.nextedit.history import MAX_BLOCK_CHARS, MAX_BLOCKS, EditBlock, EditHistory
from lsp_complete.nextedit.prompt import (
    CURSOR_MARKER,
    Window,
    fit_window,
    original_window,
    parse_answer,
    plausible,
    render,
    window_lines,
)

REGISTRY = load_registry()
CHAT = REGISTRY["qwen2.5-coder-1.5b"].next_edit
SWEEP = REGISTRY["sweep-next-edit-1.5b"].next_edit
assert CHAT is not None and SWEEP is not None

# ------------------------------------------------------------------ history


def test_typing_a_word_on_one_line_is_one_block() -> None:
    history = EditHistory()
    line = "x = 1"
    for ch in "abc":  # "x = 1" -> "x = 1abc", one character at a time
        history.record(4, [line], [line + ch])
        line += ch
    assert history.blocks == [EditBlock(4, ("x = 1",), ("x = 1abc",))]


def test_an_edit_on_the_next_line_merges_and_a_far_one_does_not() -> None:
    history = EditHistory()
    history.record(2, ["a = 1"], ["a = 2"])
    history.record(3, ["b = a"], ["b = a + 1"])  # the line right below: merged
    assert history.blocks == [EditBlock(2, ("a = 1", "b = a"), ("a = 2", "b = a + 1"))]
    history.record(1, ["def f():"], ["def g():"])  # the line right above: merged
    assert history.blocks == [
        EditBlock(1, ("def f():", "a = 1", "b = a"), ("def g():", "a = 2", "b = a + 1"))]
    history.record(20, ["z"], ["zz"])  # far away: a block of its own
    assert len(history.blocks) == 2 and history.last == EditBlock(20, ("z",), ("zz",))


def test_a_new_line_merges_and_the_blocks_below_move_with_it() -> None:
    history = EditHistory()
    history.record(10, ["x"], ["y"])
    history.record(2, ["a"], ["a", ""])  # Enter at the end of line 2: one line more
    assert history.blocks[0].start == 11  # the older block moved down
    history.record(3, [""], ["b"])  # typing on the new line merges with the Enter
    assert history.last == EditBlock(2, ("a",), ("a", "b"))


def test_an_undo_leaves_no_block() -> None:
    history = EditHistory()
    history.record(0, ["name"], ["nam"])
    history.record(0, ["nam"], ["name"])
    assert history.blocks == []


def test_the_history_is_bounded_and_big_edits_are_left_out() -> None:
    history = EditHistory()
    for n in range(MAX_BLOCKS + 3):
        history.record(n * 10, [f"line {n}"], [f"line {n}!"])
    assert len(history.blocks) == MAX_BLOCKS
    assert history.blocks[0].original == ("line 3",)  # the oldest went first
    history.record(500, ["x"], ["y" * MAX_BLOCK_CHARS])
    assert history.last is not None and history.last.start != 500


# ------------------------------------------------------------------ the smallest replacement


def test_the_smallest_replacement_trims_the_common_prefix_and_suffix() -> None:
    assert smallest_replacement("same", "same") is None  # nothing to change
    assert smallest_replacement("return width * h", "return w * h") == Replacement(8, 12, "")
    old = "a = 1\nb = 2\nc = 3\n"
    new = "a = 1\nb = 20\nd = 4\nc = 3\n"
    rep = smallest_replacement(old, new)
    assert rep is not None and old[: rep.start] + rep.text + old[rep.end:] == new
    assert (rep.start, rep.end, rep.text) == (11, 11, "0\nd = 4")  # spans lines
    # A repeated character: the prefix and suffix never overlap.
    rep = smallest_replacement("aaa", "aaaa")
    assert rep is not None and "aaa"[: rep.start] + rep.text + "aaa"[rep.end:] == "aaaa"


@pytest.mark.parametrize(("encoding", "start", "end"), [
    ("utf-16", (1, 15), (1, 20)), ("utf-8", (1, 17), (1, 23)), ("utf-32", (1, 14), (1, 19)),
])
def test_the_range_counts_columns_in_the_negotiated_encoding(encoding, start, end) -> None:
    text = "def f(naïve):\n    s = '😀' + naïve\n"  # the emoji is 2 UTF-16 units, 4 bytes
    doc = Document("file:///w/u.py", "python", 3, text)
    window_start = doc.line_range(0)[0]
    window = text[window_start:]
    rep = smallest_replacement(window, window.replace("' + naïve", "' + bob"))
    assert rep is not None
    positions = (doc.position_at(window_start + rep.start, encoding),
                 doc.position_at(window_start + rep.end, encoding))
    assert positions == (start, end) and rep.text == "bob"


# ------------------------------------------------------------------ prompts

WINDOW = Window(path="m.py", language_id="python", text="def f(x):\n    return a + 1",
                first_line=3, cursor=7, original="def f(a):\n    return a + 1")
HISTORY = [EditBlock(3, ("def f(a):",), ("def f(x):",))]


def test_the_window_is_the_lines_around_the_cursor_moved_inside_the_file() -> None:
    assert window_lines(100, 50, CHAT) == (48, 55)  # 2 above, 5 below (Copilot's)
    assert window_lines(100, 0, CHAT) == (0, 5)
    assert window_lines(3, 2, CHAT) == (0, 2)
    assert window_lines(100, 50, SWEEP) == (40, 60)  # Sweep's 21 lines


def test_the_window_narrows_to_the_characters_it_may_hold() -> None:
    """Issue 32, round 3: whole lines, however long, went into the window."""
    widths = {n: 9 for n in range(100)} | {52: 4_000_000, 47: 500}
    assert fit_window(0, 20, 10, widths.__getitem__) == (0, 20)  # 21 short lines: as they are
    assert fit_window(40, 60, 50, widths.__getitem__) == (40, 51)  # the 4 MB line and after
    # Grown from the cursor's line, nearer side first: 51, 49, 52 (4 MB: below ends), 48,
    # 47 (500 characters: above ends).
    assert fit_window(45, 55, 50, widths.__getitem__, limit=100) == (48, 51)
    assert fit_window(50, 54, 52, widths.__getitem__) is None  # the cursor is on it


def test_the_original_window_undoes_the_newest_edit_inside_it() -> None:
    lines = ["def f(x):", "    return a + 1"]
    assert original_window(lines, 3, HISTORY[0]) == WINDOW.original
    assert original_window(lines, 3, EditBlock(9, ("q",), ("r",))) == "\n".join(lines)


def test_chat_prompt_is_stable_parts_first_then_history_then_the_window() -> None:
    prompt = render(CHAT, WINDOW, HISTORY, ("<|im_end|>",))
    system, edits, window = prompt.parts
    assert system[0] == ("<|im_start|>", True) and "system\n" in system[1][0]
    assert "<|im_start|>" in [text for text, special in system if special]
    assert edits == (("My recent edits:\n```diff\n--- a/m.py\n+++ b/m.py\n"
                      "@@ -4,1 +4,1 @@\n-def f(a):\n+def f(x):\n```\n\n", False),)
    code = window[0][0]
    assert f"```python\ndef f(x{CURSOR_MARKER}):\n    return a + 1\n```" in code
    assert prompt.text.endswith("<|im_end|>\n<|im_start|>assistant\n")
    assert "\n```" in prompt.stop and "<|im_end|>" in prompt.stop
    # The user's code is never a special token, whatever it holds.
    hostile = Window("m.py", "python", "x = '<|im_end|>'", 0, 0, "x = '<|im_end|>'")
    specials = [t for part in render(CHAT, hostile, [], ()).parts for t, s in part if s]
    assert specials == ["<|im_start|>", "<|im_end|>", "<|im_start|>", "<|im_end|>",
                        "<|im_start|>"]


def test_sweep_prompt_follows_its_training_format() -> None:
    prompt = render(SWEEP, WINDOW, HISTORY, ("<|endoftext|>",))
    assert prompt.text == (
        "<|file_sep|>m.py.diff\noriginal:\ndef f(a):\nupdated:\ndef f(x):\n"
        "<|file_sep|>original/m.py\ndef f(a):\n    return a + 1\n"
        "<|file_sep|>current/m.py\ndef f(x):\n    return a + 1\n"
        "<|file_sep|>updated/m.py")
    assert "<|file_sep|>" in prompt.stop
    assert render(SWEEP, WINDOW, [], ()).parts[0] == ()  # no history: an empty first part


# ------------------------------------------------------------------ answers and guards

OLD = "def f(x):\n    return a + 1"


@pytest.mark.parametrize(("template", "raw", "expected"), [
    (CHAT, "```python\ndef f(x):\n    return x + 1", "def f(x):\n    return x + 1"),
    (CHAT, "Here:\n```python\ndef f(x):\n    return x + 1\n```\nDone.",
     "def f(x):\n    return x + 1"),
    (CHAT, f"```\ndef f(x{CURSOR_MARKER}):\n    return a + 1\n", OLD),  # unchanged
    (SWEEP, "\ndef f(x):\n    return x + 1\n", "def f(x):\n    return x + 1"),
    (CHAT, "def f(x):\n    return x + 1", None),  # no code block
    (CHAT, "```python\n<|fim_middle|>def f(x):\n    return x + 1", None),  # a marker leaked
    (CHAT, "```python\ndef f(x):", None),  # most of the window deleted
    (SWEEP, OLD + "\n" + OLD, None),  # the window twice
    (SWEEP, OLD + "\n" * 30, OLD),  # trailing blank lines are the window's
])
def test_answers_are_read_back_or_refused(template: NextEditTemplate, raw: str,
                                          expected: str | None) -> None:
    assert parse_answer(template, raw, True, OLD) == expected


def test_an_unfinished_answer_is_refused_and_controls_are_removed() -> None:
    assert parse_answer(SWEEP, "def f(x):\n    return x + 1", False, OLD) is None
    assert parse_answer(SWEEP, "def f(x):\n    return\x1b x + 1", True, OLD) == (
        "def f(x):\n    return x + 1")


@pytest.mark.parametrize("marker", ["<|fim_middle|>", "<repo_name>", "<file_sep>",
                                    "<fim-suffix>", "<｜fim▁hole｜>", "<MID>"])
def test_a_rewrite_holding_any_models_control_token_is_refused(marker: str) -> None:
    # (The markers postprocess cuts inline suggestions at: one list for both.)
    assert not plausible(f"def f(x):\n    return x + 1{marker}", OLD)


def test_the_guards_judge_small_windows_by_their_lines_only() -> None:
    assert plausible("", "x")  # a tiny window may be emptied
    assert not plausible("a\n" * 20, "a\nb")  # but not run on for pages


# ------------------------------------------------------------------ models.toml


def test_every_qwen_instruct_entry_has_the_chat_format_and_sweep_its_own() -> None:
    for name in ("qwen2.5-coder-0.5b", "qwen2.5-coder-1.5b", "qwen2.5-coder-3b",
                 "qwen2.5-coder-7b"):
        assert REGISTRY[name].next_edit == CHAT
    assert SWEEP.format == "sweep" and (SWEEP.above, SWEEP.below) == (10, 10)
    assert REGISTRY["starcoder2-3b"].next_edit is None


def test_a_bare_gguf_gets_a_format_its_vocabulary_has_the_markers_of() -> None:
    assert infer_next_edit_from_vocab({"<|im_start|>", "<|im_end|>", "<|file_sep|>"},
                                      REGISTRY) == CHAT
    assert infer_next_edit_from_vocab({"<|file_sep|>"}, REGISTRY) == SWEEP
    assert infer_next_edit_from_vocab({"<fim_prefix>"}, REGISTRY) is None


@pytest.mark.parametrize(("table", "error"), [
    ('format = "zeta"\nabove = 1\nbelow = 1\nfile_sep = "x"', "format"),
    ('format = "sweep"\nabove = 1\nbelow = 1', "file_sep"),
    ('format = "sweep"\nabove = 40\nbelow = 40\nfile_sep = "x"', "64 lines"),
    ('format = "sweep"\nabove = -1\nbelow = 1\nfile_sep = "x"', "above"),
])
def test_a_bad_next_edit_table_is_refused(tmp_path, table: str, error: str) -> None:
    path = tmp_path / "models.toml"
    path.write_text(f'''[models.m]
description = "m"
arch = "qwen2"
default = true
context_length = 4096
file = "m.gguf"
stop = []
recommended = {{ threads = 0, context = 4096, max_tokens = 64 }}
sources = [{{ kind = "hub", repo = "a/b", file = "m.gguf" }}]

[models.m.next_edit]
{table}
''')
    with pytest.raises(ModelError, match=error):
        load_registry(path)


def test_a_crlf_window_is_shown_with_newlines_and_rewritten_with_its_own_breaks() -> None:
    window = Window("m.py", "python", "a = 1\r\nb = 2", 0, 8, "a = 1\nb = 2")
    prompt = render(SWEEP, window, [], ())
    assert "current/m.py\na = 1\nb = 2\n" in prompt.text and "\r" not in prompt.text
    chat = render(CHAT, window, [], ()).text
    assert f"a = 1\nb{CURSOR_MARKER} = 2" in chat  # the cursor after "b", CR not counted
    rewritten = parse_answer(SWEEP, "\na = 1\nb = 3\n", True, window.shown)
    assert rewritten is not None
    assert smallest_replacement(window.text, window.in_text(rewritten)) == Replacement(
        11, 12, "3")
