"""The context bridge: what a turn's pronouns point to, added to what is indexed for it.

"She told me about the adoption agency" names nobody, so neither BM25 nor the embedding can
find it by "Caroline". The bridge slides a window over the session's previous turns, keeps the
things they named (capitalised names, the entities the rule extractor finds, noun phrases after
"the/that/this/a/my"), and for a turn that uses a pronoun (he, she, they, it, that, this, there)
or "that <noun>" without naming them, returns them as extra index text. The stored turn stays
verbatim: only its full-text row and its vector carry the context. Deterministic: the same
session gives the same contexts.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Sequence
from dataclasses import dataclass

from ..checks import whole
from ..text.extract import find_entities
from ..text.words import WORD

_PERSONAL = frozenset({"he", "him", "his", "she", "her", "hers", "they", "them", "their", "theirs"})
_THING = frozenset({"it", "its", "that", "this", "there", "those", "these"})
_IT = frozenset({"it", "its", "there"})
_DEMONSTRATIVE = re.compile(r"\b(that|this|those|these)\b(?: ([a-z][\w-]*))?", re.IGNORECASE)
_REFERENCE = re.compile(r"\b(?:that|this|those|these|the) ([a-z][\w-]*)", re.IGNORECASE)
# capitalised words that name nothing by themselves (sentence openers are skipped anyway)
_NOT_NAMES = frozenset(
    """
    I I'm I've I'd I'll Im Ive OK Ok Oh Hey Hi Hello Thanks Yes No Mr Mrs Ms Dr Monday Tuesday Wednesday Thursday
    Friday Saturday Sunday January February March April May June July August September October November December
    Christmas Easter Halloween Thanksgiving God Lol LOL Wow Haha Omg OMG
    """.split()
)
_OPENER = re.compile(r"(?:^|[.!?]\s+)([A-Z][a-z]+)\b(?: (?:and|&) ([A-Z][a-z]+))?")
_NAME = re.compile(r"(?<=[\w,;:)] )(?:[A-Z][\w'-]*|[a-z]{1,2}[A-Z][\w-]*)(?: (?:[A-Z][\w'-]*|\d[\w.]*))*")
_PHRASE = re.compile(r"\b(?i:the|that|this|a|an|my|our|his|her|their) ((?:[A-Za-z][\w-]* ){0,2}[A-Za-z][\w-]*)")
# words that end or cannot be part of a noun phrase, and heads too vague to point at anything
_NOT_IN_PHRASE = frozenset(
    """
a an the this that these those my our your his her their its it i you he she we they me him us them and or but
so if of to in on at for with from by about as into over after before than then is are was were be been being
am has have had do does did will would can could should may might must not no just really very too also
said told made got went came took gave get go make take know think feel felt like love loved want need
much many more most some any all every each other such own same
who whom whose which where when what why how while because since until
now then here there again yet still already ever even without up down out off
""".split()
)
_VAGUE = frozenset(
    """
time times day days week weeks month months year years moment while way ways thing things stuff lot bit kind sort
one ones part point idea end start place people person guy everything something anything nothing morning evening
night weekend today tomorrow yesterday best first last next rest whole fun great good nice amazing awesome
photo photos pic pics picture pictures image job work experience fan
""".split()
)
# praise before a noun says nothing about which thing it is: "the great work" is "work"
_PRAISE = frozenset(
    "great good nice amazing awesome big new best little cool real huge whole special beautiful "
    "wonderful fun lovely fantastic incredible".split()
)


@dataclass(frozen=True)
class ContextBridge:
    """A sliding window over a session: ``window`` previous turns, at most ``most`` terms added per turn."""

    window: int = 4
    most: int = 3

    def __post_init__(self) -> None:
        whole(self.window, "bridge window", least=1)
        whole(self.most, "bridge most", least=1)

    def session(self, texts: Sequence[str], *, speakers: Sequence[str | None] = ()) -> list[str]:
        """The context to index with each turn of a session, in order ("" for none).

        ``speakers``' names are never added: in a dialogue "she" is rarely the one spoken to.
        """
        skip = {s.split()[0].casefold() for s in speakers if s and s.split()}
        known: set[str] = set()  # names seen so far: "Caroline" opening a sentence is one if seen before
        names = []
        for text in texts:
            names.append(mentions(text, known))
            known.update(term for term, name in names[-1] if name)
        out = []
        for i, text in enumerate(texts):
            recent: list[tuple[str, bool, int]] = []  # (term, is a name, turns ago), most recent first
            for age in range(1, min(i, self.window) + 1):
                recent.extend(
                    (term, name, age) for term, name in names[i - age] if all(term != seen for seen, _, _ in recent)
                )
            out.append(self._context(text, recent, skip))
        return out

    def _context(self, text: str, recent: list[tuple[str, bool, int]], skip: set[str]) -> str:
        words = {w.casefold() for w in WORD.findall(text)}
        personal = bool(words & _PERSONAL)
        if not (personal or words & _THING):
            return ""
        said = _words(text)
        fresh = [
            (term, name, age)
            for term, name, age in recent  # not what the turn names itself, nor a speaker
            if _words(term) not in said and term.split()[0].casefold() not in skip
        ]
        heads = {m.group(1).casefold() for m in _REFERENCE.finditer(text)}
        chosen = [term for term, _, _ in fresh if term.split()[-1].casefold() in heads]  # "that framework"
        matched = {term.split()[-1].casefold() for term in chosen}
        thing = bool(words & _IT) or any(  # "that"/"this" alone is a pronoun; before a matched noun it is not
            (m.group(2) or "").casefold() not in matched for m in _DEMONSTRATIVE.finditer(text)
        )
        if personal:  # he, she, they: the people (names) of the window
            chosen += [term for term, name, _ in fresh if name][:2]
        if thing:  # it, that, there: what the turn just before named
            chosen += [term for term, _, age in fresh if age == 1][:2]
        return "; ".join(list(dict.fromkeys(chosen))[: self.most])


def _words(text: str) -> str:
    """Casefolded words between spaces: a whole-word test is then a substring test (" jon " in it)."""
    return " " + " ".join(WORD.findall(text.casefold())) + " "


def mentions(text: str, known: Collection[str] = ()) -> list[tuple[str, bool]]:
    """What one turn names, in order: (term, True) for names, (term, False) for noun phrases.

    A capitalised word inside a sentence is a name; one opening a sentence only if ``known``
    holds it or it is paired with a name ("Caroline and Mel"), since most openers are not names.
    """
    found: list[tuple[str, bool]] = [(e.name, True) for e in find_entities(text)]
    inside = []
    for match in _NAME.finditer(text):
        name = match.group(0)
        while name.split() and name.split()[0] in _NOT_NAMES:
            name = " ".join(name.split()[1:])
        if name and name not in _NOT_NAMES:
            inside.append(name)
    for match in _OPENER.finditer(text):
        if match.group(1) in known or (match.group(2) or "") in inside:
            found.append((match.group(1), True))
    for name in inside:
        if (name, True) not in found:
            found.append((name, True))
    for match in _PHRASE.finditer(text):
        words = match.group(1).split()
        for i, word in enumerate(words):  # the phrase stops at the first word that cannot be in it
            if word.casefold() in _NOT_IN_PHRASE or (i and len(word) > 4 and word.endswith("ed")):
                words = words[:i]  # ("the city held": a verb; "the cabin surrounded": a participle)
                break
        while words and words[0].casefold() in _PRAISE:
            words = words[1:]
        if words and words[-1].casefold() not in _VAGUE and (" ".join(words), False) not in found:
            found.append((" ".join(words), False))
    return found
