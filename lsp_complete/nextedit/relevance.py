"""Whether a model's next edit follows from the user's recent edits, and so is worth
showing. Pure. A next edit carries them on: it writes or removes a name that they wrote or
removed. A model prompted with the window rewrites it in other ways too (a comment reworded, a
line elsewhere "improved", the user's own edit undone); those are not shown.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from lsp_complete.nextedit.history import EditBlock
from lsp_complete.nextedit.repeat import differing, tokens

_WORD = re.compile(r"[^\W\d]\w*")


def changed_words(before: str, after: str) -> tuple[set[str], set[str]]:
    """(added, removed): the words in the tokens the change wrote and in those it replaced."""
    old, new = tokens(before), tokens(after)
    added: set[str] = set()
    removed: set[str] = set()
    for i1, i2, j1, j2 in differing(old, new):
        removed.update(t for t in old[i1:i2] if _WORD.fullmatch(t))
        added.update(t for t in new[j1:j2] if _WORD.fullmatch(t))
    return added, removed


def recent_words(history: Sequence[EditBlock]) -> tuple[set[str], set[str]]:
    """(added, removed): the words the recent edits wrote and replaced. Both empty: no edit
    of the model can follow from them, so it need not be asked."""
    user_added: set[str] = set()
    user_removed: set[str] = set()
    for block in history:
        wrote, replaced = changed_words("\n".join(block.original), "\n".join(block.updated))
        user_added |= wrote
        user_removed |= replaced
    return user_added, user_removed


def follows_from(history: Sequence[EditBlock], before: str, after: str) -> bool:
    """Whether the edit `before` -> `after` writes or removes a word that the user's recent
    edits (`history`) wrote or removed, without only undoing them (writing back what they
    removed, removing what they wrote). No recent edit: nothing follows."""
    user_added, user_removed = recent_words(history)
    added, removed = changed_words(before, after)
    if not (added | removed) & (user_added | user_removed):
        return False
    return not (added <= user_removed and removed <= user_added)
