"""Folding and phonetic keys for names: Soundex after digraph rewrites, so "Phillip" and "Filip" collide.

Plain Soundex keeps a word's first letter as spelled (P410 for "Phillip", F410 for "Filip"), so
names that sound alike but start with different letters never meet. Rewriting the spellings that
sound as one letter first (PH->F, CK->K, KN->N, WR->R, ...) and a leading C by the vowel after it
(K before a/o/u, S before e/i/y) makes the key follow the sound. Only Latin letters have a key: a
word in another script gets none, and the phonetic tier passes over it instead of guessing.
"""

from __future__ import annotations

import re
import unicodedata

import jellyfish

# Anywhere in a word. Order matters: "sch" before "ch"-free rules, "ph" before "h" is dropped by Soundex.
DIGRAPHS = (("sch", "sk"), ("ph", "f"), ("ck", "k"), ("qu", "kw"), ("gh", "g"), ("dg", "j"), ("x", "ks"))
# Only at the start of a word, where the first letter is silent ("Knight", "Wright", "Psmith", "Gnome").
LEADING = (("kn", "n"), ("wr", "r"), ("gn", "n"), ("pn", "n"), ("ps", "s"), ("wh", "w"), ("ae", "e"))
_LATIN = re.compile(r"[^a-z]")
_APOSTROPHE = re.compile(r"['’]")  # "O'Brien" is one word
_ASCII = {i: None if chr(i) == "'" else " " for i in range(128) if not chr(i).isalnum()}
_LEAD = dict(LEADING)


def fold(text: str) -> str:
    """Casefolded, accents and apostrophes dropped, punctuation a space: "José-Luis O'Brien" -> "jose luis obrien"."""
    if text.isascii():  # the common case, ~10x faster: no accents to strip
        return " ".join(text.lower().translate(_ASCII).split())
    decomposed = unicodedata.normalize("NFKD", _APOSTROPHE.sub("", text.casefold()))
    kept = "".join(
        " " if not (c.isalnum() or unicodedata.combining(c)) else c for c in decomposed if not unicodedata.combining(c)
    )
    return " ".join(kept.split())


def respell(word: str) -> str:
    """A folded Latin word spelled as it sounds (the rewrites above); other characters dropped."""
    letters = word if word.isascii() and word.isalpha() else _LATIN.sub("", word)
    if not letters:
        return ""
    lead = _LEAD.get(letters[:2])
    if lead is not None:
        letters = lead + letters[2:]
    elif letters[0] == "c" and len(letters) > 1:
        letters = ("s" if letters[1] in "eiy" else "k" if letters[1] in "aoulr" else "c") + letters[1:]
    for spelled, sounds in DIGRAPHS:
        if spelled in letters:
            letters = letters.replace(spelled, sounds)
    return letters


def key(word: str) -> str | None:
    """The phonetic key of one folded word, or None when it has no Latin letters."""
    spelled = respell(word)
    return jellyfish.soundex(spelled) if spelled else None


def keys(name: str) -> tuple[str, ...]:
    """The keys of a folded name's words, in order, leaving out words without one."""
    return tuple(k for k in (key(w) for w in name.split()) if k is not None)
