"""How sure the model was of a suggestion: its generated tokens' probabilities placed in the
suggestion's text, and the probability of the first line still to be typed. The server shows
only the part of a suggestion's first line the model was sure of (`minConfidencePercent`):
most lines it was unsure of are wrong from the unsure token on, a wrong suggestion costs the
user a read, and the part before it is what a word-by-word accept takes."""

from __future__ import annotations

from lsp_complete.engine.base import GenerationResult

# Where each token ends in the suggestion's text, and its probability, in order.
Certainty = tuple[tuple[int, float], ...]


def place(result: GenerationResult, heal_chars: int, text: str) -> Certainty | None:
    """The tokens of `result` in the coordinates of `text`, the suggestion made of it (which
    starts after the `heal_chars` healed characters). Tokens within the healed characters are
    left out: they spell what was typed. None when the engine gave no probabilities, or when
    postprocessing changed the text (it is then no prefix of what was generated)."""
    generated = result.text[heal_chars:]
    if not result.token_probabilities or not generated.startswith(text):
        return None
    placed: list[tuple[int, float]] = []
    start = -heal_chars
    for probability, end in zip(result.token_probabilities, result.token_ends, strict=False):
        end -= heal_chars
        if start >= len(text):
            break
        if end > 0:
            placed.append((end, probability))
        start = end
    return tuple(placed)


def rest_of(certainty: Certainty | None, typed: int) -> Certainty | None:
    """The tokens of a suggestion once its first `typed` characters are typed, in the
    coordinates of what is left of it: those that end after `typed` (one typed partway
    counts whole: the model was as unsure of it)."""
    if certainty is None:
        return None
    return tuple((end - typed, probability) for end, probability in certainty if end > typed)


def line_confidence(certainty: Certainty | None, text: str) -> float:
    """The probability of the first line of `text`: the product of the tokens that start
    before the end of that line (the token that ends it included). 1.0 when unknown."""
    confidence = 1.0
    for _, probability in _first_line_tokens(certainty, text):
        confidence *= probability
    return confidence


def sure_part(text: str, certainty: Certainty | None, minimum: float) -> str:
    """`text` up to the first token of its first line at which the probability of the line
    so far falls under `minimum` (all of it, later lines included, when none does; "" when
    the first token does)."""
    confidence = 1.0
    for start, probability in _first_line_tokens(certainty, text):
        confidence *= probability
        if confidence < minimum:
            return text[:start]
    return text


def _first_line_tokens(certainty: Certainty | None, text: str) -> list[tuple[int, float]]:
    """(where it starts, its probability) for each token that starts within the first line
    of `text`, the line break included."""
    if certainty is None:
        return []
    newline = text.find("\n")
    line_end = len(text) if newline < 0 else newline + 1
    tokens, start = [], 0
    for end, probability in certainty:
        if start >= line_end:
            break
        tokens.append((start, probability))
        start = end
    return tokens
