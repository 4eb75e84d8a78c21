"""How sure the model was of a suggestion: its generated tokens' probabilities placed in the
suggestion's text, and the probability of the first line still to be typed. The server holds
back a suggestion whose line the model was unsure of (`minConfidencePercent`): most such lines
are wrong, and a wrong suggestion costs the user a read."""

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


def line_confidence(certainty: Certainty | None, text: str, typed: int = 0) -> float:
    """The probability of the first line of `text[typed:]`: the product of the tokens that
    end after `typed` and start before the end of that line (the token that ends it
    included). 1.0 when unknown."""
    if certainty is None:
        return 1.0
    newline = text.find("\n", typed)
    line_end = len(text) if newline < 0 else newline + 1
    confidence, start = 1.0, 0
    for end, probability in certainty:
        if start >= line_end:
            break
        if end > typed:
            confidence *= probability
        start = end
    return confidence
