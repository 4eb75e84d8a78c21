"""The engine's vocabulary rules without a model: built from a plain list of pieces, as
`llama_backend.vocab_pieces` reads them from a loaded one."""

from __future__ import annotations

import numpy as np

from lsp_complete.engine.base import MIN_ALTERNATIVE_PROBABILITY
from lsp_complete.engine.vocabulary import Vocabulary, runner_up_gap

PIECES = [b"", b"r", b"re", b"ret", b"return", b" ", b"  ", b" x", b"x", b"<eot>", b"rex",
          b"\t", b"\t\t", b"\tx"]
EOT = PIECES.index(b"<eot>")


def vocab() -> Vocabulary:
    stop = [False] * len(PIECES)
    stop[EOT] = True  # an end-of-generation token, as llama.cpp flags it
    return Vocabulary(PIECES, stop)


def ids(*pieces: bytes) -> set[int]:
    return {PIECES.index(p) for p in pieces}


def logits(values: dict[bytes, float]) -> np.ndarray:
    """A logits row: -10 everywhere but the pieces given."""
    row = np.full(len(PIECES), -10.0, dtype=np.float32)
    for piece, value in values.items():
        row[PIECES.index(piece)] = value
    return row


def test_stop_tokens_are_the_flagged_ones_and_the_empty_ones() -> None:
    v = vocab()
    assert [t for t in range(v.size) if v.is_stop(t)] == [0, EOT]
    assert v.detokenize([4, 7, 0]) == "return x"  # an empty piece gives no text


def test_begins_a_token_looks_for_a_piece_that_starts_with_the_text() -> None:
    vocab = Vocabulary([b"#include", b"#", b"in", b"<|end|>", b"\xc3\xa9t\xc3\xa9"],
                       [False, False, False, True, False])
    assert vocab.begins_a_token("#incl") and vocab.begins_a_token("#include")
    assert vocab.begins_a_token("\u00e9t")  # by its UTF-8 bytes
    assert not vocab.begins_a_token("#included") and not vocab.begins_a_token("x#in")
    assert not vocab.begins_a_token("<|e")  # a stop token writes no text


def test_healing_allows_the_pieces_that_keep_the_healed_text() -> None:
    v = vocab()
    # Pieces that start with the healed text, and pieces that are a prefix of it.
    assert set(v.heal_candidates(b"re").tolist()) == ids(b"re", b"ret", b"return", b"rex", b"r")
    assert set(v.heal_candidates(b"ret").tolist()) == ids(b"ret", b"return", b"r", b"re")
    assert EOT not in v.heal_candidates(b"<")  # a stop token never heals


def test_healed_spaces_in_code_must_end_in_a_token_that_carries_code() -> None:
    v = vocab()
    assert set(v.heal_candidates(b" ").tolist()) == ids(b" ", b"  ", b" x")
    # Never more spaces; the healed space as a token of its own (the tokenizer splits it off
    # before a digit), after which the next token must carry the code.
    assert set(v.heal_candidates(b" ", code=True).tolist()) == ids(b" ", b" x")
    assert set(v.code_starts().tolist()) == ids(b"r", b"re", b"ret", b"return", b"x", b"rex")
    row = logits({b"  ": 9.0, b" ": 8.0, b"x": 1.0, b"ret": 2.0})
    assert v.pick(row, b" ", True)[0] == PIECES.index(b" ")
    assert v.pick(row, b"", True, code_next=True)[0] == PIECES.index(b"ret")
    assert v.pick(row, b"", True)[0] == PIECES.index(b"  ")  # no constraint left


def test_a_healed_tab_in_code_must_end_in_a_token_that_carries_code() -> None:
    v = vocab()
    assert set(v.heal_candidates(b"\t").tolist()) == ids(b"\t", b"\t\t", b"\tx")
    assert set(v.heal_candidates(b"\t", code=True).tolist()) == ids(b"\t", b"\tx")
    row = logits({b"\t\t": 9.0, b"\t": 8.0, b"x": 1.0})
    assert v.pick(row, b"\t", True)[0] == PIECES.index(b"\t")
    assert v.pick(row, b"", True, code_next=True)[0] == PIECES.index(b"x")
    assert v.pick(row, b"\t", False)[0] == PIECES.index(b"\t\t")  # indentation still typed


def test_pick_is_greedy_among_the_tokens_healing_allows() -> None:
    v = vocab()
    row = logits({b"x": 5.0, b"ret": 3.0, b"return": 1.0})
    assert v.pick(row, b"", False)[2] is None  # not asked for: not computed
    token, lead, probability = v.pick(row, b"", False, probability=True)
    assert (token, lead) == (PIECES.index(b"x"), np.inf)
    assert np.isclose(probability, 1 / np.exp(row - 5.0).sum())  # among every token
    token, lead, probability = v.pick(row, b"re", False, gap=True, probability=True)
    assert token == PIECES.index(b"ret") and lead == 2.0
    allowed = row[v._allowed(b"re", False)]  # its probability among those healing allows
    assert np.isclose(probability, 1 / np.exp(allowed - 3.0).sum()) and probability > 0.5
    # No piece keeps b"q": nothing is healed, the plain greedy choice stands.
    assert v.pick(row, b"q", False)[0] == PIECES.index(b"x")


def test_alternative_first_tokens_skip_the_greedy_one_stops_and_unlikely_ones() -> None:
    v = vocab()
    row = logits({b"x": 5.0, b"<eot>": 4.8, b"ret": 4.5, b"re": 4.0, b"return": -1.0})
    firsts = v.first_tokens(row, b"", False, 3)
    assert firsts == [PIECES.index(b"ret"), PIECES.index(b"re")]  # "return": below the floor
    probability = np.exp(-1.0 - 5.0) / np.exp(row - 5.0).sum()
    assert probability < MIN_ALTERNATIVE_PROBABILITY
    assert v.first_tokens(row, b"", False, 1) == [PIECES.index(b"ret")]
    # Healing restricts them as it restricts `pick`: b"x" and b"<eot>" are not candidates.
    assert v.first_tokens(row, b"re", False, 3) == [PIECES.index(b"re")]


def test_runner_up_gap() -> None:
    assert runner_up_gap(np.array([1.0, 4.0, 2.5]), 1) == 1.5
    assert runner_up_gap(np.array([3.0]), 0) == np.inf
