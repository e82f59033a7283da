"""The function words that recall leaves out: of BM25 terms, of the late stage's tokens, of slot words."""

import re

# Function words: as BM25 terms they match nearly every turn and only add noise and cost (what else was tried:
# docs/decisions.md).
STOPWORDS = frozenset(
    """
a about after again all am an and any are as at be been before being both but by can could did do does
doing down during each few for from further had has have having he her here hers herself him himself his
how i if in into is it its itself just me more most my myself no nor not now of off on once only or other
our ours out over own same she should so some such than that the their theirs them themselves then there
these they this those through to too under until up very was we were what when where which while who whom
why will with would you your yours yourself yourselves s t don ve ll re d m
""".split()
)

_APOSTROPHE = re.compile(r"['’]")


def is_function_word(word: str) -> bool:
    """A function word, contractions included: "i'm" and "don't" are, as their parts are (lower case)."""
    return word in STOPWORDS or all(part in STOPWORDS for part in _APOSTROPHE.split(word))
