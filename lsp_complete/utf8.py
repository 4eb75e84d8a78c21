"""Text to UTF-8 for everything that needs bytes (documents, tree-sitter, tokenizers), never
raising on what a client can send.

JSON lets a client send a lone UTF-16 surrogate ("\\ud800"); Python keeps it in the string, and
a strict UTF-8 encode then raises on every keystroke in that file. One rule everywhere: a lone
surrogate is U+FFFD. It has the same length as the surrogate in every LSP position encoding
(one code point, one UTF-16 unit, three bytes as WTF-8 counts it), so no position moves.
"""

from __future__ import annotations

import re

_SURROGATE = re.compile("[\ud800-\udfff]")
REPLACEMENT = "\ufffd"


def cleaned(text: str) -> tuple[str, bytes]:
    """`text` with each lone surrogate replaced by U+FFFD (the same object when it has none),
    and its UTF-8 bytes: one encode for text that is already clean."""
    try:
        return text, text.encode("utf-8")
    except UnicodeEncodeError:
        text = _SURROGATE.sub(REPLACEMENT, text)
        return text, text.encode("utf-8")


def utf8(text: str) -> bytes:
    """UTF-8 bytes of `text`, lone surrogates as U+FFFD; as fast as a plain encode otherwise."""
    return cleaned(text)[1]
