"""The alias keys facts carry: how the writer indexes a fact and how recall finds it again.

A fact on one subject's slot carries ``slot_key``; one whose slot names a word carries
``word_key`` for each such word; a standing instruction or preference carries its kind's key
(recall's standing lanes look them up by it).
"""

from __future__ import annotations

from .extract import INSTRUCTION_SLOT, PREFERENCE_SLOT

# The alias every standing statement of a kind carries, whoever said it (recall's standing lanes)
INSTRUCTIONS = "kind: standing instruction"
PREFERENCES = "kind: stated preference"
STANDING = {INSTRUCTION_SLOT: INSTRUCTIONS, PREFERENCE_SLOT: PREFERENCES}


def slot_key(subject: str, slot: str) -> str:
    """The alias every fact on one subject's slot carries, so the facts of a slot are one index probe away."""
    return f"slot: {subject} / {slot}"


_GENERIC = frozenset({"date", "number", "of"})  # "deadline date" names what "deadline" does


def slot_words(slot: str) -> frozenset[str]:
    """The words that say what a slot is about, singular ("number of interviews" -> {"interview"})."""
    return frozenset(
        w[:-3] + "y"
        if len(w) > 4 and w.endswith("ies")
        else w[:-1]
        if len(w) > 3 and w.endswith("s") and not w.endswith(("ss", "us", "is"))
        else w
        for w in slot.lower().split()
        if w not in _GENERIC
    )


def word_key(subject: str, word: str) -> str:
    """The alias every fact on a slot naming ``word`` carries, so a changed value finds the slots near its own."""
    return f"slot word: {subject} / {word}"
