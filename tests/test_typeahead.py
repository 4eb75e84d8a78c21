"""Typing-ahead cache: keystrokes that agree with a shown suggestion need no model call."""

from __future__ import annotations

import pytest

from lsp_complete import typeahead as typeahead_module
from lsp_complete.typeahead import TAIL_CHARS, TypeAhead

URI = "file:///work/app.py"
OTHER = "file:///work/other.py"
HEAD = "def f(x):\n    "
AFTER = "\n\nprint(f(1))\n"


def _shown(cache: TypeAhead, typed: str, text: str, uri: str = URI, head: str = HEAD) -> None:
    cache.remember(uri, head + typed, AFTER, text, generation=cache.generation)


def test_typing_through_a_suggestion() -> None:
    cache = TypeAhead()
    _shown(cache, "ret", "urn x")
    assert cache.lookup(URI, HEAD + "ret", AFTER) == "urn x"
    assert cache.lookup(URI, HEAD + "retu", AFTER) == "rn x"
    assert cache.lookup(URI, HEAD + "retur", AFTER) == "n x"
    assert cache.lookup(URI, HEAD + "return ", AFTER) == "x"
    assert cache.stats["hits"] == 4 and cache.stats["misses"] == 0


def test_a_keystroke_that_disagrees_misses() -> None:
    cache = TypeAhead()
    _shown(cache, "ret", "urn x")
    assert cache.lookup(URI, HEAD + "retx", AFTER) is None
    assert cache.lookup(URI, HEAD + "re", AFTER) is None  # before the suggestion was made
    assert cache.stats["misses"] == 2


def test_backspace_finds_the_earlier_suggestion_again() -> None:
    cache = TypeAhead()
    _shown(cache, "ret", "urn x")
    assert cache.lookup(URI, HEAD + "retu", AFTER) == "rn x"
    assert cache.lookup(URI, HEAD + "retuz", AFTER) is None
    assert cache.lookup(URI, HEAD + "retu", AFTER) == "rn x"
    assert cache.lookup(URI, HEAD + "ret", AFTER) == "urn x"


def test_typing_the_whole_suggestion_leaves_nothing_to_show() -> None:
    cache = TypeAhead()
    _shown(cache, "ret", "urn x\n")
    assert cache.lookup(URI, HEAD + "return x", AFTER) is None  # only "\n" would remain
    assert cache.lookup(URI, HEAD + "return x\n", AFTER) is None
    assert cache.lookup(URI, HEAD + "return x\n\n", AFTER) is None  # typed past it


def test_multi_line_suggestion_across_a_newline() -> None:
    cache = TypeAhead()
    _shown(cache, "if x:", "\n        return 1\n    return 0")
    assert cache.lookup(URI, HEAD + "if x:\n        ", AFTER) == "return 1\n    return 0"


def test_editing_after_the_cursor_invalidates() -> None:
    cache = TypeAhead()
    _shown(cache, "ret", "urn x")
    assert cache.lookup(URI, HEAD + "retu", AFTER + "# note\n") is None
    assert cache.lookup(URI, HEAD + "retu", AFTER.replace("1", "2")) is None  # same length


def test_editing_before_the_suggestion_point_invalidates() -> None:
    cache = TypeAhead()
    _shown(cache, "ret", "urn x")
    assert cache.lookup(URI, HEAD.replace("x", "y") + "retu", AFTER) is None


def test_other_documents_are_unaffected() -> None:
    cache = TypeAhead()
    _shown(cache, "ret", "urn x")
    _shown(cache, "ret", "urn y", uri=OTHER)
    assert cache.lookup(OTHER, HEAD + "retu", AFTER) == "rn y"
    assert cache.lookup(URI, HEAD + "retu", AFTER) == "rn x"
    cache.forget(OTHER)
    assert cache.lookup(OTHER, HEAD + "retu", AFTER) is None
    assert cache.lookup(URI, HEAD + "retu", AFTER) == "rn x"


def test_the_suggestion_on_screen_wins_over_an_older_match() -> None:
    cache = TypeAhead()
    _shown(cache, "ret", "urn x")  # older, made one character later
    _shown(cache, "re", "turn y")  # newest: the one the user now sees
    assert cache.lookup(URI, HEAD + "ret", AFTER) == "urn y"
    assert cache.lookup(URI, HEAD + "re", AFTER) == "turn y"  # only the newer one applies here


def test_used_entries_move_to_the_front() -> None:
    cache = TypeAhead()
    _shown(cache, "ret", "urn x")
    _shown(cache, "re", "turn y")
    assert cache.lookup(URI, HEAD + "retX", AFTER) is None
    _shown(cache, "retX", "yz")
    assert cache.lookup(URI, HEAD + "ret", AFTER) == "urn y"  # newest matching
    # A later remember for the same state replaces the earlier suggestion.
    _shown(cache, "re", "ad()")
    assert cache.lookup(URI, HEAD + "rea", AFTER) == "d()"
    assert cache.lookup(URI, HEAD + "ret", AFTER) == "urn x"


def test_entries_per_document_are_bounded_lru() -> None:
    cache = TypeAhead(max_entries_per_doc=3)
    for i in range(3):
        _shown(cache, f"v{i}", f" = {i}")
    assert cache.lookup(URI, HEAD + "v0", AFTER) == " = 0"  # used: now most recent
    _shown(cache, "v3", " = 3")  # evicts v1, the least recently used
    assert cache.lookup(URI, HEAD + "v1", AFTER) is None
    assert cache.lookup(URI, HEAD + "v0", AFTER) == " = 0"
    assert cache.lookup(URI, HEAD + "v2", AFTER) == " = 2"
    assert cache.lookup(URI, HEAD + "v3", AFTER) == " = 3"
    assert cache.stats["evicted"] == 1


def test_documents_are_bounded_lru() -> None:
    cache = TypeAhead(max_docs=2)
    for name in ("a", "b", "c"):
        _shown(cache, "x", "yz", uri=name)
    assert cache.lookup("a", HEAD + "x", AFTER) is None
    assert cache.lookup("c", HEAD + "x", AFTER) == "yz"


def test_whitespace_suggestions_are_not_remembered() -> None:
    cache = TypeAhead()
    _shown(cache, "x", "  \n")
    assert cache.stats["remembered"] == 0
    assert cache.lookup(URI, HEAD + "x", AFTER) is None


def test_clear_forgets_every_document() -> None:
    cache = TypeAhead()
    _shown(cache, "x", "yz")
    _shown(cache, "x", "yz", uri=OTHER)
    cache.clear()
    assert cache.lookup(URI, HEAD + "x", AFTER) is None
    assert cache.lookup(OTHER, HEAD + "x", AFTER) is None


def test_work_planned_before_a_clear_remembers_nothing_after_it() -> None:
    """A job queued before a change of settings (which clears typing-ahead) ends after it:
    its answer, shaped by the old settings, is not kept. Work planned after the clear is."""
    cache = TypeAhead()
    planned_before = cache.generation
    cache.clear()
    assert not cache.remember(URI, HEAD + "x", AFTER, "yz", generation=planned_before)
    assert cache.lookup(URI, HEAD + "x", AFTER) is None
    assert cache.stats["remembered"] == 0
    planned_after = cache.generation
    assert cache.remember(URI, HEAD + "x", AFTER, "yz", generation=planned_after)
    assert cache.lookup(URI, HEAD + "x", AFTER) == "yz"


def test_accepted_counts() -> None:
    cache = TypeAhead()
    cache.accepted(URI, HEAD, AFTER)
    assert cache.stats["accepted"] == 1


def test_bad_bounds_are_rejected() -> None:
    with pytest.raises(ValueError):
        TypeAhead(max_entries_per_doc=0)


def test_memory_is_bounded_for_a_large_document() -> None:
    big = "x = 1\n" * 200_000  # 1.2 MB
    cache = TypeAhead()
    cache.remember(URI, big, big, "print(x)", generation=cache.generation)
    entry = next(iter(cache._docs[URI].values()))
    assert len(entry.before_tail) == TAIL_CHARS and len(entry.after_head) == TAIL_CHARS
    assert cache.lookup(URI, big + "pri", big) == "nt(x)"
    # A change far from the cursor (same lengths, same edges) is caught by the digest.
    changed = "y" + big[1:]
    assert cache.lookup(URI, changed + "pri", big) is None
    assert cache.lookup(URI, big + "pri", changed) is None


def test_lone_surrogates_hash() -> None:
    cache = TypeAhead()
    text = "s = '\ud83d'" * 100  # clients can send broken UTF-16
    cache.remember(URI, text, "", "  # done", generation=cache.generation)
    assert cache.lookup(URI, text + "  #", "") == " done"


def test_a_miss_costs_no_hashing(monkeypatch: pytest.MonkeyPatch) -> None:
    """Keystrokes that do not match never hash the document."""
    big = "a" * 1_000_000
    cache = TypeAhead()
    for i in range(64):
        cache.remember(URI, big + str(i), big, "suggestion", generation=cache.generation)
    calls = 0
    real = typeahead_module._digest

    def counting(text: str) -> bytes:
        nonlocal calls
        calls += 1
        return real(text)

    monkeypatch.setattr(typeahead_module, "_digest", counting)
    assert cache.lookup(URI, big + "9z", big) is None
    assert calls == 0
    assert cache.lookup(URI, big + "9sug", big) == "gestion"
    assert calls == 2  # one for the text before the suggestion point, one for the text after


def test_lookup_on_a_megabyte_document_hashes_each_side_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """What a keystroke costs in a big file does not grow with the entries remembered: a hit
    hashes the text before and after the suggestion once each, a miss not at all (hashing
    itself is C, ~1-3 ms a megabyte; its speed is the benchmark's to measure)."""
    big = "x = 1\n" * 170_000  # ~1 MB each side
    cache = TypeAhead()
    for i in range(64):
        cache.remember(URI, big + f"v{i}", big, " = compute()", generation=cache.generation)
    hashed: list[int] = []
    real = typeahead_module._digest

    def counting(text: str) -> bytes:
        hashed.append(len(text))
        return real(text)

    monkeypatch.setattr(typeahead_module, "_digest", counting)
    for _ in range(20):
        assert cache.lookup(URI, big + "v63 = c", big) == "ompute()"
        assert cache.lookup(URI, big + "w", big) is None
    assert len(hashed) == 2 * 20
