"""What a word is, once for the whole package: letters and digits, with inner apostrophes ("don't", "Emma's")."""

from __future__ import annotations

import re

WORD = re.compile(r"\w+(?:['’]\w+)*")
_POSSESSIVE = re.compile(r"['’]s$")


def words(text: str) -> list[str]:
    """The words of free text, in order, possessives folded ("Emma's" -> "Emma")."""
    return [_POSSESSIVE.sub("", w) for w in WORD.findall(text)]
