"""Extraction: turning a turn's words into entities and facts, with no model.

``Extractor`` is the protocol (an LLM extractor can be plugged in); ``RuleExtractor`` is the
deterministic default. It finds first-person facts on *functional* slots (one value at a
time: where someone lives, works, their job, a favourite, an opinion of a thing) and on
non-functional ones (visited, bought), people and pets introduced as "my sister Emma" or "my
manager, Sarah" (with "my sister" as an alias), the places, organisations and products those
facts name ("I work at Google", "I bought a Fitbit Versa", "my new iPhone 15"), facts about
people ("Emma's birthday is June 3"), and the date a fact became true when the turn says it
("last week", "in May", "yesterday"), resolved against the session's date.

Values of the speaker's own slots, stated or changed, in general English: "the deadline was extended
to May 20", "I've adjusted our gift budget to $450", "the new sprint deadline of April 5", "my
team size is 8 people", "Budget: $500", "we switched our database from MySQL to PostgreSQL". The
slot is the noun phrase the text names, normalised ("the holiday gifts budget" -> "holiday gift
budget"); the value is money, a percentage, a date or time, a version, a count with its unit or
(after "switched to") a name. A value said to change is marked ``changed``: facts.py then lets it
replace the latest value of a slot that names the same thing more or less fully. A question, wish,
plan, supposition or denial ("should I raise the budget to $50?", "if the deadline moves", "I
haven't changed it"), someone else's value ("their score") and code state nothing. A bare slot
("budget", "goal") names no one thing, and an event's date ("a meeting on May 7") is one of many:
neither replaces another value unless said to change.

Precision comes first: a name is taken only where a cue introduces it ("my sister", "work at",
"bought a"), never for every capitalised word, and never a month, weekday, holiday or pronoun. Facts
that do not parse into a clear subject, slot and value are not written: what "I love" or "I bought"
names must be a short phrase of its own clause, not a pronoun or a word pointing elsewhere ("I love
their work"), not a clause ("I love how art ..."), not a definite thing named before ("I love the way
..."), not the object of a relative clause ("something I love is ..."); a stated preference is its own
clause from "I prefer" on, not the sentence around it; a percentage said as a bound ("above 80%") is
no value.
"""

from __future__ import annotations

import datetime as dt
import functools
import re
from dataclasses import dataclass, replace
from typing import Protocol, runtime_checkable

from ..errors import InvalidInput
from . import caches
from .dates import COUNT_WORDS, MONTH, format_time, parse_time
from .words import WORD


@dataclass(frozen=True)
class EntityMention:
    """A person, pet, place, organisation or product the turn names, with other names for it."""

    name: str
    kind: str  # person, pet, place, organisation, product
    aliases: tuple[str, ...] = ()


@dataclass(frozen=True)
class FactMention:
    """One statement: subject, slot, value."""

    subject: str  # the speaker for first-person facts, else an entity's name
    slot: str
    value: str
    functional: bool  # one value at a time: a new value supersedes the old one
    valid_at: str | None = None  # when it became true, if the turn says; else the turn's time
    changed: bool = False  # the turn says the value changed ("raised the budget to $50", "the new deadline")
    event: bool = False  # one dated happening of many ("a meeting on May 7"): replaced only under its own name


@dataclass(frozen=True)
class Extraction:
    """What one turn says."""

    entities: tuple[EntityMention, ...] = ()
    facts: tuple[FactMention, ...] = ()


@runtime_checkable
class Extractor(Protocol):
    """Finds entities and facts in one turn."""

    def extract(self, text: str, *, speaker: str | None, said_at: str) -> Extraction: ...


def check_extractor(extractor: object, *, optional: bool = True) -> None:
    """An ``Extractor`` (or None, where ``optional``), or InvalidInput naming what was given."""
    if (extractor is not None or not optional) and not isinstance(extractor, Extractor):
        raise InvalidInput(
            f"extractor must have extract(text, speaker=..., said_at=...), not {type(extractor).__name__}"
        )


_NAME_WORD = r"[A-Z](?:[\w'&-]|\.(?=\w))*"  # a dot inside ("U.S"), never ending one: "Depot. I" is two sentences
_VALUE = r"(?P<value>" + _NAME_WORD + r"(?: (?:" + _NAME_WORD + r"|(?:of|de|la)(?= [A-Z])))*)"  # maybe several words
_PHRASE = r"(?P<value>[a-z][a-z -]*[a-z])"
_THING = r"(?P<value>[^.,!?;]+?)"
_END = r"(?=[.,!?;]|\s+(?:now|anymore|any more|these days|last|this|yesterday|in|since|a|two|three)\b|$)"

# (slot, functional, pattern source): the first person's facts, compiled on first use (_first_person)
_FIRST_PERSON: tuple[tuple[str, bool, str], ...] = (
    ("lives in", True, r"\bI(?: now)? (?:live|am living|'m living) in " + _VALUE),
    ("lives in", True, r"\bI (?:just |recently |have |'ve )?(?:moved|relocated) to " + _VALUE),
    ("works at", True, r"\bI (?:now )?(?:work|am working|'m working) (?:at|for) " + _VALUE),
    ("works at", True, r"\bI (?:just |recently )?(?:started (?:a new job )?at|joined|got a job at) " + _VALUE),
    ("job title", True, r"\bI (?:work|am working|'m working) as an? " + _PHRASE + _END),
    (
        "job title",
        True,
        r"\bI(?:'m| am) (?:now )?an? " + r"(?P<value>[a-z]+ (?:engineer|developer|designer|"
        r"teacher|nurse|doctor|manager|writer|lawyer|scientist|"
        r"student|chef|artist|accountant))\b",
    ),
    ("visited", False, r"\bI (?:visited|went to|travell?ed to) " + _VALUE),
)
# The same facts said of the speaker by name ("Sam moved to Porto", in a note of Sam's): {who} is the name
_BY_NAME = (
    ("lives in", True, r"\b{who}(?: now)? (?:lives|is living) in " + _VALUE),
    ("lives in", True, r"\b{who} (?:just |recently |has )?(?:moved|relocated) to " + _VALUE),
    ("works at", True, r"\b{who} (?:now )?(?:works|is working) (?:at|for) " + _VALUE),
    ("works at", True, r"\b{who} (?:just |recently )?(?:started (?:a new job )?at|joined|got a job at) " + _VALUE),
    ("job title", True, r"\b{who} (?:works|is working) as an? " + _PHRASE + _END),
    ("visited", False, r"\b{who} (?:visited|went to|travell?ed to) " + _VALUE),
)


# Speakers named for a role, not a person ("One user moved to Firefox" says nothing of the user speaking)
_ROLES = frozenset("user assistant system human ai bot model me default someone person client customer".split())
# A word before the name that makes it part of another phrase: "Uncle Sam", "the Sam I know", "one user"
_NOT_BEFORE = frozenset("a an the one our my your his her their every each some any this that no".split())


@functools.lru_cache(maxsize=64)
def _by_name(name: str) -> tuple[tuple[str, bool, re.Pattern[str]], ...]:
    """``_BY_NAME`` for one speaker named like a person: their name as given, or capitalised."""
    name = name.strip()
    if not name[:1].isalpha() or name.casefold() in _ROLES:
        return ()
    who = "(?:" + "|".join(re.escape(form) for form in dict.fromkeys((name, name[:1].upper() + name[1:]))) + ")"
    return tuple((slot, functional, re.compile(pattern.format(who=who))) for slot, functional, pattern in _BY_NAME)


caches.register("extract: speakers' patterns", _by_name.cache_clear)
caches.register("re: compiled patterns (a speaker's name is in them)", re.purge)


def _named_alone(text: str, start: int) -> bool:
    """Whether the name at ``start`` stands alone: no capitalised word or determiner just before it."""
    before = re.findall(r"[\w']+", text[max(0, start - 40) : start])
    return not before or (before[-1].casefold() not in _NOT_BEFORE and not before[-1][:1].isupper())


_FAVOURITE = re.compile(r"\bmy fav(?:ou)?rite (?P<kind>[a-z ]+?) is (?:now )?" + _THING + _END, re.IGNORECASE)
# The cues of an opinion and of a purchase; what follows each is read by _object and kept only if clear
_LIKE = re.compile(r"\bI (?:really |absolutely )?(?:love|like|enjoy|adore) ", re.IGNORECASE)
_DISLIKE = re.compile(
    r"\bI (?:really )?(?:hate|dislike|can't stand|cannot stand|(?:do not|don't) (?:really )?(?:like|love|enjoy)) ",
    re.IGNORECASE,
)
_BOUGHT_THING = re.compile(r"\bI (?:just |recently |finally |also )?(?:bought|purchased) (?:myself )?")
# Where the object of a cue ends: the clause does (punctuation, a spaced dash, a "->" marker), or a word
# that says when or how much and names nothing ("I don't like sushi anymore", "I love my job so much")
_OBJECT_END = re.compile(
    r"[.,!?;:()\[\]\"]|->|\s[-\u2013\u2014]|[-\u2013\u2014]\s|\s+(?:now|anymore|any more|these days|lately|since|last|"
    r"yesterday|today|so much|so many|a lot|too|as well|either|again)\b|$",
    re.IGNORECASE,
)
# Words that open another clause inside an object ("cooking when I'm tired", "a lamp and walked home"): the
# object is what comes before. Purchases are cut at more: a bought thing is a noun phrase, maybe "for" someone.
_CLAUSE_OPENER = r"because|cause|when|whenever|while|although|though|unless|which|where|who|whose|whom|so|whereas"
_OPINION_CUT = re.compile(rf"\s(?:{_CLAUSE_OPENER}|(?:and|but|or) (?:i|i'm|we|you|he|she|they|it))\b", re.IGNORECASE)
_PURCHASE_CUT = re.compile(
    rf"\s(?:{_CLAUSE_OPENER}|and|or|but|to|as|that|if|in|on|at|from|during|after|before|until|by)\b", re.IGNORECASE
)
# Words that point at something the turn does not name ("their work", "having them around", "this series",
# "how you find inspiration"): an object holding one is no clear thing
_REFERRING = frozenset(
    """
    it its it's itself them they they're their theirs themselves you your you're yours yourself he him his she
    her hers this these those that's that'll here there
    """.split()
)
# Words that cannot open the object of "I love" or "I bought": the object is elsewhere ("something I love
# is awesome", "what I like to hear"), or is a clause ("how art lets us ..."), or a definite thing named
# before ("the way the frosting turned out"), or the words are cut ("I like also cheese")
_NOT_OPENERS = _REFERRING | frozenset(
    """
    the that what how when where why who whom which whether if is are was were be been am has have had do does did
    will would can could should might must may makes made keeps gets got feels seems looks sounds means brings
    also really just even still so very always never already much more about at in on of for with from by into
    around like as than up out yesterday today tonight tomorrow
    """.split()
)
_QUANTIFIERS = frozenset("all both half some most many one each any every".split())  # "all the", "some of these"
# Words that make the cue's clause a relative one: its object comes before it ("the aquarium that I bought")
_RELATIVISERS = frozenset("that which what who whom as something anything everything nothing whatever".split())
# a phrase ending on a time says when, not what: "a job I enjoy every day", "I bought it a year ago"
_TIME_NOUNS = frozenset("day days week weeks month months year years morning evening night weekend ago".split())
OBJECT_WORDS = 12  # a longer object is a clause or a list, not one thing
_RELATIONS = (
    "sister",
    "brother",
    "mother",
    "mom",
    "father",
    "dad",
    "wife",
    "husband",
    "partner",
    "boyfriend",
    "girlfriend",
    "son",
    "daughter",
    "friend",
    "best friend",
    "manager",
    "boss",
    "colleague",
    "coworker",
    "roommate",
    "neighbour",
    "neighbor",
    "cousin",
    "aunt",
    "uncle",
    "grandmother",
    "grandfather",
)
_RELATION = re.compile(
    r"\b[Mm]y (?:(?:new|old|little|big|older|younger|twin) )?(?P<relation>"
    + "|".join(sorted(_RELATIONS, key=len, reverse=True))
    + r"),? (?P<name>[A-Z][a-z]+)\b"
)
_PET = re.compile(
    r"\b(?:a|my|our) (?P<kind>dog|cat|puppy|kitten|parrot|rabbit|hamster|horse|fish|turtle)"
    r",? (?:named |called )?(?P<name>[A-Z][a-z]+)\b"
)
_BIRTHDAY = re.compile(r"\b(?P<name>[A-Z][a-z]+)'s birthday is (?:on )?" + _THING + _END)
_MONTH_DAY = (
    r"(?:January|February|March|April|May|June|July|August|September|October|November|December)"
    r" \d{1,2}(?:-\d{1,2})?(?:, \d{4})?"
)
# the words that may follow a noun phrase's last word ("the budget for", "a deadline, which")
_BOUNDARY = r"(?:for|of|to|and|or|so|but|which|that|with|by|on|in|is|was|are|were|at|this|the|my|i|we|now|per)\b"
# counts and amounts: one value at a time for each thing counted, budgeted, measured or scheduled
_AMOUNTS: tuple[tuple[str, str], ...] = (  # (template, pattern source), compiled on first use (_amounts)
    ("budget", r"budget(?: allocation)?(?: of| to| is| at)? \$(?P<value>\d[\d,]*(?:\.\d+)?)"),
    (
        "budget",
        r"\$(?P<value>\d[\d,]*(?:\.\d+)?) (?P<what>(?:\w+ )?)budget\b(?! (?!" + _BOUNDARY + r")[a-z])",
    ),  # not "a $9 budget proposal"
    (
        "{what}",
        (
            r"\b(?P<what>accuracy|coverage|completion rate|success rate|"
            r"conversion rate|score|progress)\b[^.%]{0,40}?(?P<value>\d+(?:\.\d+)?%)"
        ),
    ),
    (
        "{what} date",
        (
            r"\b(?P<what>meeting|call|webinar|session|interview|"
            r"appointment|deadline|launch|release)\b(?! (?:my|our|your|their|his|her|the|this|that|"
            r"these|those|a|an|it|them|all|every)\b)"  # not "meeting my deadline"
            r"[^.?!]{0,60}? (?:on|to|for|by|of) "
            r"(?P<value>" + _MONTH_DAY + ")"
        ),
    ),
    (
        "number of {what}",
        (
            r"\b(?:have|has|had|secured|added|reached|total of|finalized|read|wrote|"
            r"completed|mentored|now) (?P<value>\d[\d,]*) (?P<what>(?:[a-z]+ )?"
            r"(?:sources|books|interviews|words|mentees|commits|cards|projects|clients|"
            r"users|subscribers|followers|sessions|problems|pages|chapters|movies|"
            r"episodes|songs|videos|posts|tests|features|tasks|items|members))\b"
        ),
    ),
)
_ARTICLES = re.compile(r"^(?:the|a|an|some|my)\s+", re.IGNORECASE)
_CALENDAR = frozenset(
    """
    Monday Tuesday Wednesday Thursday Friday Saturday Sunday January February March April May June July August
    September October November December Today Tomorrow Yesterday Christmas Easter Halloween Thanksgiving
    """.split()
)
# capitalised words that name no entity by themselves: pronouns, calendar words, family words ("visited Mom")
_NOT_NAMES = frozenset(
    {
        "I",
        "My",
        "The",
        "This",
        "That",
        "It",
        "We",
        "You",
        "He",
        "She",
        "They",
        "Me",
        "Our",
        "Your",
        "His",
        "Her",
        "Their",
        "A",
        "An",
        "Mom",
        "Mum",
        "Dad",
        "Mother",
        "Father",
        "Grandma",
        "Grandpa",
        "Home",
        "Church",
        "School",
        "Work",
        *_CALENDAR,
    }
)
# organisations and products: named after a cue, or by an organisation's own suffix
_ORG_WORD = r"[A-Z][\w&'-]*"  # no dot: "in June. Our Group" is two sentences
_ORGANISATION = re.compile(
    r"\b(?P<org>(?:" + _ORG_WORD + r" (?:of |for |and |& )?)+(?:Inc|Corp|Corporation|LLC|Ltd|Company|Group|University|"
    r"College|Institute|Hospital|Bank|Foundation|Labs|Studios?|Agency|Association|Society|Academy)\b\.?"
    r"|University of [A-Z][\w-]+(?: [A-Z][\w-]+)*)"
)
_ORGANISATION_CUE = re.compile(
    r"\bI(?:'m| am)? (?:now |also )?(?:study(?:ing)?|volunteer(?:ing)?|intern(?:ing|ed)?|"
    r"a student|an intern|a volunteer) (?:at|with|for) " + _VALUE
)
_PRODUCT = (
    r"(?P<value>(?:[A-Z][\w+'-]*|[a-z]{1,2}[A-Z][\w+'-]*)"  # Fitbit, iPhone
    r"(?: (?:[A-Z][\w+'-]*|[a-z]{1,2}[A-Z][\w+'-]*|\d[\w.]*))*)"
)  # Versa, 15, Pro
_BOUGHT = re.compile(
    r"\bI (?:just |recently |finally |also )?(?:(?:bought|purchased|ordered|pre-?ordered|upgraded to)"
    r" (?:an? |the |some |myself an? )?(?:(?:brand )?new |used |second-hand )?"
    r"|got (?:an? |myself an? )?(?:brand )?new )" + _PRODUCT
)  # "got" needs "new": "got Sam a gift"
_MY_NEW = re.compile(r"\b[Mm]y (?:brand )?new " + _PRODUCT)
_LEADING = frozenset(
    """
    The A An At In On For From With And But To Of By My Our Your So Then Now Also
    """.split()
)
_SLOT_KINDS = {  # the kind of entity a first-person fact's value names
    "lives in": "place",
    "visited": "place",
    "works at": "organisation",
}

_MONTHS = {
    m: i
    for i, m in enumerate(
        (
            "january",
            "february",
            "march",
            "april",
            "may",
            "june",
            "july",
            "august",
            "september",
            "october",
            "november",
            "december",
        ),
        1,
    )
}
_RELATIVE = re.compile(
    r"\b(?P<phrase>yesterday|today|last (?:week|month|year)|(?P<n>\d+|a|one|two|three|four|five|"
    r"six|seven) (?P<unit>days?|weeks?|months?|years?) ago|in (?P<month>" + "|".join(_MONTHS) + r"))\b",
    re.IGNORECASE,
)

# Stated and changed values: "<slot> was increased to <value>", "I moved the launch to <value>", "the new
# <slot> of <value>", "my <slot> is <value>", "<slot>: <value>". The slot is the noun phrase the text names,
# normalised (no article, no change word, singular, "X for Y" read as "Y X"); the value is a quantity: money,
# a percentage, a date or time, a version, or a count with its unit. A clause that asks, wants or supposes
# ("should I raise the budget to $50?", "if the deadline moves to May 5") states nothing.
_MONTH = MONTH
_CLOCK = r"\d{1,2}(?::\d{2})?\s?(?:[AaPp]\.[Mm]\.|[AaPp][Mm]\b)"
_DAY = _MONTH + r" \d{1,2}(?:st|nd|rd|th)?\b(?:\s?-\s?\d{1,2}\b)?(?:,? \d{4}\b)?(?:,? (?:at )?" + _CLOCK + r")?"
_UNIT_STOP = (
    r"(?!(?:to|by|for|and|or|of|in|on|at|the|from|per|with|after|before|since|than|which|that|so|but|"
    r"because|as|now|this|my|our|a|an|is|are|was|were|i|we|you|it|total|each|every|out)\b)"
)  # "8.2 out of 10" is 8.2
_QUANTITY = (
    r"(?P<value>\$\d[\d,]*(?:\.\d+)?(?:\s?(?:k|K|million|billion)\b)?"  # money
    r"|\d+(?:\.\d+)?\s?%"  # a percentage
    r"|"
    + _DAY  # a date, maybe with its time
    + r"|"
    + _CLOCK  # a time of day
    + r"|v\d+(?:\.\d+)*\b|\d+\.\d+\.\d+\b"  # a version
    r"|\d[\d,]*(?:\.\d+)?(?:\s?-\s?\d[\d,]*(?:\.\d+)?)?(?:\s?(?:ms|s|h|k|x|kb|mb|gb|tb|fps)\b)?"
    r"(?: " + _UNIT_STOP + r"[a-z][a-z-]*){0,3}(?: per [a-z]+)?)"
)  # a count and its unit
_NP = (
    r"(?P<slot>[A-Za-z][\w/-]*(?: [A-Za-z][\w/-]*){0,3}?"
    r"(?: (?:for|of|with|on) (?:the |my |our )?[\w-]+(?: [\w-]+){0,2}?)?)"
)
_NP_AFTER = r"(?P<slot>[a-z][\w-]*(?: [a-z][\w-]*){0,2})(?=[.,!?;:)]|\s+" + _BOUNDARY + r"|$)"  # "$35 monthly budget"
_DET = r"\b(?:[Mm]y|[Oo]ur|[Tt]he|[Tt]his)"  # not "their score went up": the speaker's values only
_CHANGE = (
    r"(?:increased|raised|reduced|decreased|lowered|cut|adjusted|updated|changed|extended|shortened|moved|"
    r"rescheduled|pushed(?: back| out)?|postponed|delayed|brought forward|bumped(?: up)?|boosted|improved|"
    r"dropped|grown|grew|expanded|revised|upgraded|downgraded|switched|reached|risen|rose|fallen|fell|"
    r"climbed|jumped|gone (?:up|down)|went (?:up|down)|doubled|set)"
)
_CHANGES = (  # pattern sources, compiled on first use (_compiled)
    # "the deadline was extended to May 20", "my coverage, which has recently improved to 78%"
    (
        _DET + r" " + _NP + r",? (?:(?:which|that) )?(?:has |have |had )?(?:now |recently |just |finally |"
        r"since |also |officially )?(?:been |was |were |got |is |are )?(?:now |recently |just |officially )?"
        + _CHANGE
        + r" (?:(?:from|up from|down from) "
        + _QUANTITY.replace("value", "old")
        + r" )?"
        r"(?:to|up to|down to) " + _QUANTITY
    ),
    # "I've adjusted our gift budget to $450", "we moved the launch to June 3", "I switched my plan from $10 to $15"
    (
        r"\b(?:I|[Ww]e)(?:'ve| have|'d| had)? (?:just |recently |now |also |finally |officially )?"
        + _CHANGE
        + r" "
        + _DET[2:]
        + r" "
        + _NP
        + r" (?:(?:from|up from|down from) "
        + _QUANTITY.replace("value", "old")
        + r" )?(?:to|up to|down to) "
        + _QUANTITY
    ),
    # "the new sprint deadline of April 5", "the increased budget of $6,200", "my new daily quota is 1,200 calls"
    (
        r"\b(?:[Tt]he|[Mm]y|[Oo]ur|[Aa]n?|[Tt]his) (?:new|updated|revised|increased|reduced|adjusted|extended|"
        r"higher|lower|raised|lowered) " + _NP + r" (?:of|is|at|to|will be|of about|of around) " + _QUANTITY
    ),
    # "the new April 25 deadline", "my increased $50 budget"
    (
        r"\b(?:[Tt]he|[Mm]y|[Oo]ur|[Aa]n?|[Tt]his) (?:new|updated|revised|increased|reduced|adjusted|extended|"
        r"higher|lower) " + _QUANTITY + r" " + _NP_AFTER
    ),
    # "we switched our database from MySQL to PostgreSQL", "I moved my hosting to Fly"
    (
        r"\b(?:I|[Ww]e)(?:'ve| have)? (?:just |recently |now |also |finally )?(?:switched|moved|migrated|"
        r"changed) "
        + _DET[2:]
        + r" "
        + _NP
        + r" (?:from (?:[A-Z][\w.+#-]*)(?: [A-Z][\w.+#-]*)* )?(?:over )?to "
        + _VALUE
    ),
    # "<slot> changed from 10 to 12"
    (
        _DET + r" " + _NP + r" (?:has |have )?(?:changed|gone|moved|went|grown|grew|dropped|risen|rose|"
        r"fell|fallen|increased|decreased|improved) from " + _QUANTITY.replace("value", "old") + r" to " + _QUANTITY
    ),
)
_STATES = (
    # "my budget is $500", "our team size is now 8 people", "the deadline is now May 3"
    (
        r"\b(?:[Mm]y|[Oo]ur) " + _NP + r" (?:is|are|was|were|'s) (?:now |currently |still |set (?:at|to) |"
        r"about |around |roughly )?" + _QUANTITY
    ),
    r"\b[Tt]he " + _NP + r" (?:is|are|'s) now " + _QUANTITY,
    # "my $35 monthly budget", "our April 20 deadline"
    r"\b(?:[Mm]y|[Oo]ur) (?=\$|" + _MONTH + r" \d)" + _QUANTITY + r" " + _NP_AFTER,
    # "Deadline: April 5", "- Budget: $500" at the start of a line
    r"(?m)^[ \t]*(?:[-*] )?(?:\*\*)?" + _NP + r"(?:\*\*)?:(?:\*\*)? " + _QUANTITY + r"[ \t]*$",
)


@functools.cache
def _compiled(sources: tuple[str, ...], flags: int = 0) -> tuple[re.Pattern[str], ...]:
    """Patterns compiled once, when first used.

    The patterns only writes read (_CHANGES, _STATES, _FIRST_PERSON, _AMOUNTS, _MOVED) and _CHANGE_CUE
    take ~65 ms to compile, which a process that only reads (`worlddb recall`) would pay at import for
    nothing.
    """
    return tuple(re.compile(source, flags) for source in sources)


@functools.cache
def _first_person() -> tuple[tuple[str, bool, re.Pattern[str]], ...]:
    """_FIRST_PERSON compiled (on first use, as _compiled)."""
    return tuple(
        (slot, functional, re.compile(pattern, re.IGNORECASE if slot.startswith(("opinion", "favourite")) else 0))
        for slot, functional, pattern in _FIRST_PERSON
    )


@functools.cache
def _amounts() -> tuple[tuple[str, re.Pattern[str]], ...]:
    """_AMOUNTS compiled (on first use, as _compiled)."""
    return tuple((template, re.compile(source)) for template, source in _AMOUNTS)


# a clause that asks, wants, plans or supposes: what follows in it is not said to be true
_UNASSERTED = re.compile(
    r"\b(?:if|whether|unless|suppose|supposing|imagine|assuming|what if|would|could|should|might|shall|will|can|"
    r"may|wo|won't|want(?:s|ed)? to|wanna|plan(?:s|ning)? to|going to|gonna|hop(?:e|es|ing) to|need(?:s)? to|"
    r"trying to|try to|tried to|about to|thinking (?:about|of)|considering|wondering|instead of|or|not|never|"
    r"(?:do|does|did)(?:n't)?|let's|let me|\w+n't)\b",
    re.IGNORECASE,
)
_QUESTION_START = re.compile(
    r"^\W*(?:what|how|when|where|why|which|who|whom|whose|should|can|could|would|will|"
    r"do|does|did|is|are|was|were|shall|may|might|have|has|had)\b",
    re.IGNORECASE,
)
_SLOT_FUNCTION = frozenset(
    """
    is are was were be been being has have had and or but which that to i we you it they he she so if then than as
    at in by from into per a an the my our your their his her its this these those me us them also just now all
    about up down not i'm i've what how when where why who can will would should could do does did get got
    """.split()
)
_SLOT_CHANGE_WORDS = frozenset(
    """
    new updated revised current latest increased reduced adjusted extended decreased raised lowered changed higher
    lower original old previous recent improved
    """.split()
)
_NOT_SLOT_HEADS = frozenset(
    """
    total lot couple number range maximum minimum average bunch pair set list sum period amount way thing stuff
    one ones fact idea day week month year point part end start beginning step plan help other each more less most
    some any tip example code look issue
    """.split()
)


def _singular(word: str) -> str:
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 3 and word.endswith("s") and not word.endswith(("ss", "us", "is")):
        return word[:-1]
    return word


def normalise_slot(phrase: str) -> str | None:
    """A noun phrase as a slot name ("the new Sprint deadlines for my app" -> "app sprint deadline"), or None."""
    words = [w.strip("*'\"").lower() for w in phrase.split()]
    tail: list[str] = []
    for i, word in enumerate(words):  # "X for Y" reads as "Y X"
        if word in ("for", "of", "with", "on") and i > 0:
            tail = words[i + 1 :]
            words = words[:i]
            break
    cut = [i for i, w in enumerate(words) if w in _SLOT_FUNCTION]
    if cut:  # "budget was": only what follows the last function word names the slot
        words = words[cut[-1] + 1 :]
    tail = [w for w in tail if w not in _SLOT_FUNCTION]
    words = [w for w in (*tail[-2:], *words) if w not in _SLOT_CHANGE_WORDS and w]
    if not words or not all(re.fullmatch(r"[a-z][a-z0-9/-]*", w) for w in words):
        return None
    words = [_singular(w) for w in words[-4:]]
    if words[-1] in _NOT_SLOT_HEADS or words[-1] in _SLOT_FUNCTION or len(words[-1]) < 2:
        return None
    return " ".join(words)


def value_kind(value: str) -> str:
    """What a value is: money, percent, date, time, version, count or name (one kind replaces only its own)."""
    value = value.strip()
    if value.startswith("$"):
        return "money"
    if value.endswith("%"):
        return "percent"
    if re.match(_MONTH + r" \d", value):
        return "date"
    if re.fullmatch(_CLOCK, value):
        return "time"
    if re.fullmatch(r"v\d+(?:\.\d+)*|\d+\.\d+\.\d+", value):
        return "version"
    if value[:1].isdigit():
        return "count"
    return "name"


_MOVED = (  # its source, compiled on first use (_compiled)
    r"\b(?:new|moved?|moving|rescheduled?|rescheduling|postponed?|pushed|extended|changed|shifted|"
    r"delayed|bumped|brought forward)\b"
)
_BEFORE = {
    template: re.compile(r"(?:\b[\w'-]+ ){0,3}$" if template == "budget" else r"(?:\b[\w'-]+ ){0,2}$")
    for template in ("budget", "{what}", "{what} date", "number of {what}")
}
_OTHERS = re.compile(r"\b(?:their|his|her|its|your)\b|\w's\b", re.IGNORECASE)
# a bound, not a value: "an accuracy exceeding 90%", "an accuracy rate above 80%"
_BOUND = re.compile(
    r"\b(?:above|over|under|below|beyond|exceed(?:s|ed|ing)?|(?:more|less|greater|higher|lower) than|at (?:least|most))"
    r"\s*$",
    re.IGNORECASE,
)
_ONWARD = re.compile(r"\s*(?:to|->|→|and then|then)\s+(\$?\d[\d,]*(?:\.\d+)?%?)")


def _named(words: str) -> str:
    """What words before a noun say of it: only what follows their last preposition ("on the dining out")."""
    return re.split(r"\b(?:for|of|with|on|to|from|over|under|within|into|about|at|in|by)\b", words.lower())[-1]


def _digits(value: str) -> str:
    return "".join(c for c in value if c.isdigit())


_CLAUSE_REACH = 400  # how far back a clause is read from its value (a longer sentence is read from there)


def _asserted(text: str, start: int, strict: bool) -> bool:
    """Whether the clause holding ``text[start:]`` states something (not a question, wish or supposition).

    ``strict``: a verb of change must be said outright; a noun phrase ("the new deadline of May 3") presupposes
    its value even inside a question, and is refused only under "if", "whether" and the like.
    """
    reach = max(0, start - _CLAUSE_REACH)  # never the whole text before: long texts hold many matches
    sentence_start = max(reach - 1, *(text.rfind(mark, reach, start) for mark in (". ", "? ", "! ", "\n", "; "))) + 1
    prefix = text[sentence_start:start]
    clause = re.split(r",|\bbut\b|\band\b|\bso\b|\bbecause\b|\bsince\b|\bthe fact that\b", prefix)[-1]
    if not strict:
        return (
            re.search(r"\b(?:if|whether|unless|suppose|supposing|imagine|assuming|what if)\b", clause, re.IGNORECASE)
            is None
        )
    if _UNASSERTED.search(clause):
        return False
    return not (clause == prefix and _QUESTION_START.search(prefix))


_CODE = re.compile(r"```.*?(?:```|$)|`[^`\n]*`", re.DOTALL)  # code states no value of the speaker's


def _values(text: str, me: str, when: str | None) -> list[FactMention]:
    """Stated and changed values of the speaker's slots (see ``_CHANGES`` and ``_STATES``)."""
    found: dict[str, FactMention] = {}
    for changed, patterns in ((True, _compiled(_CHANGES)), (False, _compiled(_STATES))):
        for index, pattern in enumerate(patterns):
            for match in pattern.finditer(text):
                slot = normalise_slot(match.group("slot"))
                value = match.group("value").strip().rstrip(",")
                strict = changed and index in (0, 1, 4, 5) or (not changed and index < 2)
                where = match.start("value") if strict else match.start()  # a verb is read in its own clause
                if slot is None or slot in found or not _asserted(text, where, strict):
                    continue
                # a bare "budget" or "goal" does not say which one: it replaces a value only when said to change
                found[slot] = FactMention(me, slot, value, " " in slot, when, changed)
    return list(found.values())


# A change said of anything, the thing maybe unnamed: "it's been rescheduled to March 22 at 4:30 PM",
# "I've managed to get it down to just 4 hours", "commits ..., which has now reached 165".
_LEVEL = r"(?:just |only |about |around |roughly )?"
_CHANGE_CUE = (  # its source, compiled on first use (_compiled): read only where a cue word stands
    r"\b"
    + _CHANGE
    + r"\b(?: [\w'-]+){0,4}? (?:to|up to|down to) "
    + _LEVEL
    + _QUANTITY
    + r"|\b(?:reached|hit) "
    + _LEVEL
    + _QUANTITY.replace("value", "reached")
    + r"|\b(?:get|got|gotten|bring|brought) (?:it|that|them) (?:down|up) to "
    + _LEVEL
    + _QUANTITY.replace("value", "brought")
)  # "Rescheduled to 4:30 PM." opens a sentence
CUE_CHARS = 4000  # a turn is read for a change in its first 4,000 characters: the rest of a long one is a paste


# the words a change cue opens with: the pattern is tried only where one stands (a scan of it costs ~0.3 ms a message)
_CUE_WORDS = (
    frozenset(
        alternative.split("(")[0].split()[0]  # the first word of each of _CHANGE's alternatives
        for alternative in re.split(r"\|(?![^()]*\))", _CHANGE[3:-1])
    )
    | {"reached", "hit", "get", "got", "gotten", "bring", "brought"}
)


# The words by which a person tells that something is no longer as it was, whatever changed: "I quit coffee",
# "we sold the hatchback", "I'm at Studio Nova now", "no longer eats meat", "got Mubi instead"
_TELLS_CHANGE = re.compile(
    r"\b(?:moved|switched|quit|stopped|gave up|given up|replaced|sold|cancell?ed|changed|swapped|traded|"
    r"no longer|any ?more|instead)\b",
    re.IGNORECASE,
)


def tells_change(text: str) -> bool:
    """Whether ``text`` tells that something is no longer as it was (a word of change), the thing unnamed.

    Looser than ``says_change`` (no value needed): read only of a person's newer memory about the
    same thing as an older note of theirs (write/updates.py links the two; recall ranks by the link).
    """
    return _TELLS_CHANGE.search(text[:CUE_CHARS]) is not None


def says_change(text: str) -> bool:
    """Whether ``text`` says some value changed to a new one, named or not (outside code and suppositions).

    Looser than the changed values above, which must name their slot: recall uses it to rank a turn
    that tells of a change above the earlier turns about the same thing (retrieval/recall.py). Read
    inside a question too ("can you tell me how it was shortened to 5-7 months?" presupposes it).
    """
    return _says_change(text[:CUE_CHARS])


# Recall reads the same head turns again and again (~50 a recall, ~20 µs each). At most 4,096 texts
# of at most CUE_CHARS characters (~16 MB), process-wide; a purge empties it (caches.forget).
@functools.lru_cache(maxsize=4096)
def _says_change(head: str) -> bool:
    prose = _CODE.sub(" ", head)
    for word in WORD.finditer(prose.lower()):  # the pattern is tried only where a cue word opens it
        if word.group() in _CUE_WORDS and (word.start() == 0 or not prose[word.start() - 1].isalpha()):
            found = _compiled((_CHANGE_CUE,), re.IGNORECASE)[0].match(prose, word.start())
            if found is not None and _asserted(prose, found.start(), strict=False):
                return True
    return False


caches.register("extract: turns read for change cues", _says_change.cache_clear)


def resolve_date(text: str, said_at: str) -> str | None:
    """The date a relative expression in ``text`` points to, against ``said_at`` (None if none)."""
    found = _RELATIVE.search(text)
    if found is None:
        return None
    now = dt.datetime.fromisoformat(parse_time(said_at).replace("Z", "+00:00"))
    phrase = found.group("phrase").lower()
    if phrase == "today":
        day = now
    elif phrase == "yesterday":
        day = now - dt.timedelta(days=1)
    elif phrase.startswith("last "):
        day = now - dt.timedelta(days={"week": 7, "month": 30, "year": 365}[phrase.split()[1]])
    elif found.group("month"):
        month = _MONTHS[found.group("month").lower()]
        year = now.year if month <= now.month else now.year - 1  # "in May" said in March means last May
        day = now.replace(year=year, month=month, day=1)
    else:
        count = int(found.group("n")) if found.group("n").isdigit() else COUNT_WORDS[found.group("n").lower()]
        unit = found.group("unit").lower().rstrip("s")
        day = now - dt.timedelta(days=count * {"day": 1, "week": 7, "month": 30, "year": 365}[unit])
    return format_time(day.replace(hour=0, minute=0, second=0, microsecond=0))


def _name(value: str) -> str | None:
    """A cue's capitalised value as an entity name, or None when it names nothing ("The", "May", "Mom")."""
    words = value.strip().rstrip(".").split()
    while words and (words[0] in _LEADING or words[0] in _CALENDAR):  # "In June Acme Corp" is "Acme Corp"
        words = words[1:]
    name = " ".join(words)
    if not name or name in _NOT_NAMES:
        return None
    if len(words) == 1 and len(name) < 3 and name.isupper():
        return None  # "SO", "TV": an abbreviation, not a name
    return name


def _object(text: str, cue: int, start: int, cut: re.Pattern[str]) -> str | None:
    """What the cue ending at ``start`` acts on, as a short clear phrase ("my Job" -> "Job"), or None.

    None when the cue opens a relative clause (its object is before it), or when the words hold a
    reference the turn does not resolve, open where no object can, or run on past ``OBJECT_WORDS``: a
    fact is written only when its subject, slot and value are clear.
    """
    before = re.findall(r"[\w']+", text[max(0, cue - 30) : cue].lower())
    if before and before[-1] in _RELATIVISERS:
        return None
    end = _OBJECT_END.search(text, start)
    phrase = text[start : end.start() if end is not None else len(text)]
    clause = cut.search(phrase)
    said = (phrase[: clause.start()] if clause is not None else phrase).split()
    words = [word.lower() for word in said]
    head = words[1:] if words[:1] == ["to"] else words  # "to discover new places": read from the verb
    if head[:1] and head[0] in _QUANTIFIERS:  # "all the yellow leaves" is as definite as "the yellow leaves"
        head = head[2:] if head[1:2] == ["of"] else head[1:]
    if (
        not head
        or len(words) > OBJECT_WORDS
        or head[0] in _NOT_OPENERS
        or words[-1] in _TIME_NOUNS
        or _REFERRING.intersection(words)
    ):
        return None
    return _ARTICLES.sub("", " ".join(said)).strip() or None


def _scan(text: str, me: str, when: str | None) -> tuple[tuple[EntityMention, ...], tuple[FactMention, ...]]:
    """The entities and facts of one turn (``when``: the date first-person facts became true)."""
    facts: list[FactMention] = []
    patterns = [(rule, False) for rule in _first_person()] + [(rule, True) for rule in _by_name(me)]
    for (slot, functional, pattern), by_name in patterns:
        for found in pattern.finditer(text):
            if by_name and not _named_alone(text, found.start()):
                continue
            value = found.group("value").strip()
            if slot in _SLOT_KINDS:  # "I work at The Home Depot.": the organisation "Home Depot"
                value = _name(value) or ""
            if value and value not in _NOT_NAMES:
                facts.append(FactMention(me, slot, value, functional, when))
    for found in _BOUGHT_THING.finditer(text):
        thing = _object(text, found.start(), found.end(), _PURCHASE_CUT)
        if thing and re.fullmatch(r"[a-z][a-z -]*[a-z]", thing):  # a name is a product: _BOUGHT
            facts.append(FactMention(me, "bought", thing, False, when))
    products = [name for name in (_name(found.group("value")) for found in _BOUGHT.finditer(text)) if name]
    facts.extend(FactMention(me, "bought", product, False, when) for product in dict.fromkeys(products))
    for found in _FAVOURITE.finditer(text):
        facts.append(
            FactMention(
                me, f"favourite {found.group('kind').lower().strip()}", found.group("value").strip(), True, when
            )
        )
    opinions = {f.slot for f in facts}  # the first opinion of a thing stands ("I don't like X", then "I like X")
    for pattern, opinion in ((_DISLIKE, "dislikes"), (_LIKE, "likes")):
        for found in pattern.finditer(text):
            thing = (_object(text, found.start(), found.end(), _OPINION_CUT) or "").lower()
            if thing and f"opinion of {thing}" not in opinions:
                opinions.add(f"opinion of {thing}")
                facts.append(FactMention(me, f"opinion of {thing}", opinion, True, when))
    prose = _CODE.sub(" ", text)
    values = _values(prose, me, when)
    for template, pattern in _amounts():
        for found in pattern.finditer(prose):
            what = (found.groupdict().get("what") or "").lower().strip()
            # the words just before: "the dining out budget", "the sprint deadline", "their quiz score"
            before = _BEFORE[template].search(prose, max(0, found.start() - 80), found.start())
            pre = before.group(0) if before is not None and template != "number of {what}" else ""
            pre = "" if template == "budget" and "what" in found.groupdict() else pre  # "$35 monthly budget"
            if _OTHERS.search(f"{pre} {what}"):
                continue  # "their quiz score", "Sam's budget": not the speaker's
            if template == "{what}" and _BOUND.search(prose, found.end("what"), found.start("value")):
                continue
            if template == "budget":  # what the text names, else "budget"
                slot = normalise_slot(f"{_named(pre or what)} budget") or "budget"
            elif template != "number of {what}":
                slot = template.format(what=normalise_slot(f"{_named(pre)} {what}") or what)
            else:
                slot = template.format(what=what)
            value = found.group("value").rstrip(",")
            value = "$" + value if template == "budget" else value
            onward = _ONWARD.match(prose, found.end())
            if onward is not None and value_kind(onward.group(1)) == value_kind(value):
                value = onward.group(1)  # "from 60% to 85%": the value is 85%
            strict = slot.startswith("number") or " to " in found.group(0)  # a verb, or a noun phrase
            if any(f.slot == slot for f in (*facts, *values)) or not _asserted(prose, found.start("value"), strict):
                continue  # the first amount of a kind a turn states
            named = set(slot.split()) - {"number", "of", "date"}
            if any(named <= set(v.slot.split()) and _digits(v.value) == _digits(value) for v in values):
                continue  # the same value under the fuller name the text gives it ("snack budget")
            if template == "{what} date":  # an event's date: many meetings, one value each; a change only when said
                near = max(0, found.start() - len(pre) - 40)
                moved = _compiled((_MOVED,), re.IGNORECASE)[0].search(prose, near, found.end()) is not None
                facts.append(FactMention(me, slot, value, False, None, moved, event=True))
            else:
                facts.append(FactMention(me, slot, value, " " in slot, None))  # "budget" alone: see _values
    facts.extend(f for f in values if not any(g.slot == f.slot for g in facts))
    facts.extend(_standing(prose, me))
    entities: dict[str, EntityMention] = {}

    def add(name: str | None, kind: str, *aliases: str) -> None:
        if name is None:
            return
        known = entities.get(name)
        if known is None:
            entities[name] = EntityMention(name, kind, aliases)
        else:  # named twice in one turn: one mention with every alias
            entities[name] = EntityMention(
                name, known.kind, (*known.aliases, *(a for a in aliases if a not in known.aliases))
            )

    for found in _RELATION.finditer(text):
        relation = found.group("relation").lower()
        name = _name(found.group("name"))
        if name is not None:
            add(name, "person", f"my {relation}")
            facts.append(FactMention(name, f"relationship to {me}", relation, True, None))
    for found in _PET.finditer(text):
        add(_name(found.group("name")), "pet", f"my {found.group('kind').lower()}")
    for found in _BIRTHDAY.finditer(text):
        name = _name(found.group("name"))
        if name is not None:
            add(name, "person")
            facts.append(FactMention(name, "birthday", found.group("value").strip(), True, None))
    for fact in facts:  # where someone lives or went is a place, where they work an organisation
        kind = _SLOT_KINDS.get(fact.slot) if fact.subject == me else None
        if kind is not None:
            add(_name(fact.value), kind)
    for product in products:
        add(product, "product")
    for found in _ORGANISATION_CUE.finditer(text):
        add(_name(found.group("value")), "organisation")
    for found in _ORGANISATION.finditer(text):
        org = _name(found.group("org"))
        if org is not None and " " in org:  # "Our Group" names no organisation
            add(org, "organisation")
    for found in _MY_NEW.finditer(text):
        add(_name(found.group("value")), "product")
    return tuple(entities.values()), _once(facts)


def _once(facts: list[FactMention]) -> tuple[FactMention, ...]:
    """Each fact once, where it was first said: a fact said twice is one fact, changed or an event if once so."""
    first: dict[tuple[str, str, str], FactMention] = {}
    for fact in facts:
        key = (fact.subject, fact.slot, fact.value.lower())
        known = first.setdefault(key, fact)
        if known is not fact:
            first[key] = replace(known, changed=known.changed or fact.changed, event=known.event or fact.event)
    return tuple(first.values())


# Standing statements: what the speaker asks of every later answer on a subject, kept verbatim, one
# of many (they never replace each other). An instruction ("Always cite sources when I ask about
# history") and a preference ("I prefer lightweight libraries over frameworks").
INSTRUCTION_SLOT = "standing instruction"
PREFERENCE_SLOT = "stated preference"
STANDING_CHARS = 300  # a longer statement is kept to its first 300 characters
# A sentence that opens with "always", "never" or "from now on" and then a verb in the imperative
# (one of _IMPERATIVES: "Always good to hear!" and "Never been there" are no instructions).
_EVERY_TIME = r"always|never"  # the words that make a sentence an instruction for every later answer ...
_FROM_NOW = r"from now on|going forward|in (?:the )?future"  # ... or from now on
_INSTRUCTION = re.compile(
    rf"(?:^|(?<=[.!?\n]))[ \t]*(?P<sentence>(?:please,? )?(?:(?:{_EVERY_TIME}) |(?:{_FROM_NOW}),? (?:please )?"
    rf"(?:(?:{_EVERY_TIME}) )?)(?:please )?(?P<verb>[a-z-]+)\b[^.!?\n]*[.!?]?)",
    re.IGNORECASE,
)
_IMPERATIVES = frozenset(
    """
add address answer apply ask assume attach avoid be bold break call check cite clarify compare confirm consider
convert define describe detail display double-check emphasise emphasize end explain express flag focus follow
format give highlight include indent keep label let limit link list maintain make mark mention name note number
offer omit organise organize outline output phrase present print prioritise prioritize provide put quote recap
recommend refer reference remind reply report respond round separate show skip sort speak specify spell start
state stay stick structure suggest summarise summarize tailor talk tell translate treat try use verify warn wrap
write
""".split()
)
# The clause of a sentence in which the speaker states a preference of their own ("you prefer" is not one)
# ("I rather liked it" is no preference: "rather" only after "'d" or "would")
_PREFERENCE = re.compile(
    r"(?:^|(?<=[.!?\n,;]))[ \t]*(?P<sentence>[^.!?\n,;]*?(?P<cue>\bI(?:(?: really| generally| usually| strongly"
    r"| do| always| still)* prefer|(?:'d| would)(?: really| much)? (?:prefer|rather))\b|\bmy preference is\b)"
    r"[^.!?\n]*)",
    re.IGNORECASE,
)
_SUPPOSED = re.compile(r"\b(?:if|whether|unless|suppose|what if)\b", re.IGNORECASE)  # "I don't know if I prefer tea"
# A preference is its own clause, from the cue on: it ends where the sentence or clause does ("I prefer
# X, can you help ...", "I prefer X, so I want ...", "I prefer X ->-> 3,23"), and runs to PREFERENCE_WORDS at most
_PREFERENCE_END = re.compile(
    r"[.,!?;:\n]|->|\s[-\u2013\u2014]\s|\s(?:so|but|because|although|though|while|whereas)\b"
    r"|\s(?:and|or) (?:I|I'm|I've|I'll|we|you|it)\b",
    re.IGNORECASE,
)
PREFERENCE_WORDS = 20
# what a preference cannot open with ("I prefer it"), and the listener: "I'd rather show you a photo" is about
# this exchange, not a standing preference
_NOT_PREFERRED = _NOT_OPENERS - {"the", "to"}
_LISTENER = frozenset({"you", "your", "you're", "yours"})
# A comma ends the clause only before a word that opens another phrase ("X, can you ...", "X, like my ...");
# before any other it joins two words of one phrase ("simple, minimal dependencies", "a sleek, modern look")
_PHRASE_OPENERS = _NOT_OPENERS | frozenset(
    """
    i i'm i've i'd i'll we we're and or but nor to rather especially given since because although though while
    whereas please not plus instead maybe perhaps etc
    """.split()
)


def _preference_end(text: str, start: int, stop: int) -> int:
    """Where the preference clause opening at ``start`` ends (at ``stop``, its sentence's end, at the latest)."""
    for end in _PREFERENCE_END.finditer(text, start, stop):
        if end.group() != ",":
            return end.start()
        following = re.match(r"\s*([\w']+)", text[end.end() : end.end() + 40])
        if following is None or following.group(1).lower() in _PHRASE_OPENERS:
            return end.start()
    return stop


# what may follow an instruction's verb without being what it acts on: "Never give up!" and "Always be
# yourself." are encouragements, not instructions ("Always use tabs." is one)
_NOT_AN_OBJECT = frozenset("up down out off away back over on in it yourself yourselves myself".split())
_INSTRUCTION_CUE = re.compile(rf"^(?:(?:please|{_EVERY_TIME}|{_FROM_NOW})\W+)+", re.IGNORECASE)


def instruction_action(instruction: str) -> str:
    """What an instruction asks, whichever way: "Never use bullet points!" -> "use bullet points".

    Two instructions of one speaker asking the same action are one instruction said twice or
    reversed ("Always ..." then "Never ..."): the later replaces the earlier (facts.py).
    """
    return " ".join(re.findall(r"[\w'-]+", _INSTRUCTION_CUE.sub("", instruction.strip()).lower()))


def _standing(text: str, me: str) -> list[FactMention]:
    """The speaker's standing instructions and stated preferences (see ``INSTRUCTION_SLOT``).

    An instruction is not a question ("Always use tabs?"); a preference may sit inside one ("I
    prefer Bootstrap over Foundation, can you help me set it up?").
    """
    found = []
    for match in _INSTRUCTION.finditer(text):
        sentence = match.group("sentence").strip()
        acts_on = re.findall(r"[a-z][\w'-]*", text[match.end("verb") : match.end("sentence")].lower())
        if (
            match.group("verb").lower() in _IMPERATIVES
            and not sentence.endswith("?")
            and any(word not in _NOT_AN_OBJECT for word in acts_on)
        ):
            found.append(FactMention(me, INSTRUCTION_SLOT, sentence[:STANDING_CHARS], False))
    for match in _PREFERENCE.finditer(text):
        sentence = match.group("sentence").strip()
        before = text[match.start("sentence") : match.start("cue")]
        if _QUESTION_START.search(sentence) or _SUPPOSED.search(before):
            continue  # asked ("do I prefer ...") or supposed ("if I prefer ..."; "... if you can" is fine)
        value = text[match.start("cue") : _preference_end(text, match.end("cue"), match.end("sentence"))].strip()
        preferred = value[match.end("cue") - match.start("cue") :].lower().split()
        if (
            preferred  # "... like I prefer": what is preferred comes before
            and preferred[0] not in _NOT_PREFERRED
            and not _LISTENER.intersection(preferred)
            and len(value.split()) <= PREFERENCE_WORDS
        ):
            found.append(FactMention(me, PREFERENCE_SLOT, value, False))
    return list({(f.slot, f.value.lower()): f for f in found}.values())


def find_entities(text: str) -> tuple[EntityMention, ...]:
    """The people, pets, places, organisations and products ``text`` names (no dates, no model)."""
    return _scan(text, "user", None)[0]


class RuleExtractor:
    """The deterministic default extractor (regular expressions over one turn)."""

    def extract(self, text: str, *, speaker: str | None, said_at: str) -> Extraction:
        entities, facts = _scan(text, speaker or "user", resolve_date(text, said_at))
        return Extraction(entities, facts)
