"""Extraction: turning a turn's words into entities and facts, with no model.

``Extractor`` is the protocol (an LLM extractor can be plugged in); ``RuleExtractor`` is the
deterministic default. It finds first-person facts on *functional* slots (one value at a
time: where someone lives, works, their job, a favourite, an opinion of a thing) and on
non-functional ones (visited, bought), people and pets introduced as "my sister Emma" or "my
manager, Sarah" (with "my sister" as an alias), the places, organisations and products those
facts name ("I work at Google", "I bought a Fitbit Versa", "my new iPhone 15"), facts about
people ("Emma's birthday is June 3"), and the date a fact became true when the turn says it
("last week", "in May", "yesterday"), resolved against the session's date.

Precision comes first: a name is taken only where a cue introduces it ("my sister", "work at",
"bought a"), never for every capitalised word, and never a month, weekday, holiday or pronoun.
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from .temporal import format_time, parse_time


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


@dataclass(frozen=True)
class Extraction:
    """What one turn says."""

    entities: tuple[EntityMention, ...] = ()
    facts: tuple[FactMention, ...] = ()


@runtime_checkable
class Extractor(Protocol):
    """Finds entities and facts in one turn."""

    def extract(self, text: str, *, speaker: str | None, said_at: str) -> Extraction:
        ...


_NAME_WORD = r"[A-Z](?:[\w'&-]|\.(?=\w))*"  # a dot inside ("U.S"), never ending one: "Depot. I" is two sentences
_VALUE = r"(?P<value>" + _NAME_WORD + r"(?: (?:" + _NAME_WORD + r"|(?:of|de|la)(?= [A-Z])))*)"  # maybe several words
_PHRASE = r"(?P<value>[a-z][a-z -]*[a-z])"
_THING = r"(?P<value>[^.,!?;]+?)"
_END = r"(?=[.,!?;]|\s+(?:now|anymore|any more|these days|last|this|yesterday|in|since|a|two|three)\b|$)"

# (slot, functional, pattern): the first person's facts
_FIRST_PERSON: tuple[tuple[str, bool, re.Pattern[str]], ...] = tuple(
    (slot, functional, re.compile(pattern, re.IGNORECASE if slot.startswith(("opinion", "favourite")) else 0))
    for slot, functional, pattern in (
        ("lives in", True, r"\bI(?: now)? (?:live|am living|'m living) in " + _VALUE),
        ("lives in", True, r"\bI (?:just |recently |have |'ve )?(?:moved|relocated) to " + _VALUE),
        ("works at", True, r"\bI (?:now )?(?:work|am working|'m working) (?:at|for) " + _VALUE),
        ("works at", True, r"\bI (?:just |recently )?(?:started (?:a new job )?at|joined|got a job at) " + _VALUE),
        ("job title", True, r"\bI (?:work|am working|'m working) as an? " + _PHRASE + _END),
        ("job title", True, r"\bI(?:'m| am) (?:now )?an? " + r"(?P<value>[a-z]+ (?:engineer|developer|designer|"
                                                             r"teacher|nurse|doctor|manager|writer|lawyer|scientist|"
                                                             r"student|chef|artist|accountant))\b"),
        ("visited", False, r"\bI (?:visited|went to|travell?ed to) " + _VALUE),
        ("bought", False, r"\bI (?:bought|purchased) (?:an? |the |some )?" + _PHRASE + _END),
    )
)
_FAVOURITE = re.compile(r"\bmy fav(?:ou)?rite (?P<kind>[a-z ]+?) is (?:now )?" + _THING + _END, re.IGNORECASE)
_LIKE = re.compile(r"\bI (?:really |absolutely )?(?:love|like|enjoy|adore) " + _THING + _END, re.IGNORECASE)
_DISLIKE = re.compile(r"\bI (?:really )?(?:hate|dislike|can't stand|cannot stand|"
                      r"(?:do not|don't) (?:really )?(?:like|love|enjoy)) " + _THING + _END, re.IGNORECASE)
_RELATIONS = ("sister", "brother", "mother", "mom", "father", "dad", "wife", "husband", "partner", "boyfriend",
              "girlfriend", "son", "daughter", "friend", "best friend", "manager", "boss", "colleague", "coworker",
              "roommate", "neighbour", "neighbor", "cousin", "aunt", "uncle", "grandmother", "grandfather")
_RELATION = re.compile(r"\b[Mm]y (?:(?:new|old|little|big|older|younger|twin) )?(?P<relation>"
                       + "|".join(sorted(_RELATIONS, key=len, reverse=True)) + r"),? (?P<name>[A-Z][a-z]+)\b")
_PET = re.compile(r"\b(?:a|my|our) (?P<kind>dog|cat|puppy|kitten|parrot|rabbit|hamster|horse|fish|turtle)"
                  r",? (?:named |called )?(?P<name>[A-Z][a-z]+)\b")
_BIRTHDAY = re.compile(r"\b(?P<name>[A-Z][a-z]+)'s birthday is (?:on )?" + _THING + _END)
_MONTH_DAY = (r"(?:January|February|March|April|May|June|July|August|September|October|November|December)"
              r" \d{1,2}(?:-\d{1,2})?(?:, \d{4})?")
# counts and amounts: one value at a time for each thing counted, budgeted, measured or scheduled
_AMOUNTS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("budget", re.compile(r"\bbudget(?: allocation)?(?: of| to| is| at)? \$(?P<value>\d[\d,]*(?:\.\d+)?)")),
    ("budget", re.compile(r"\$(?P<value>\d[\d,]*(?:\.\d+)?) (?:\w+ )?budget\b")),
    ("{what}", re.compile(r"\b(?P<what>accuracy|coverage|completion rate|success rate|conversion rate|score|"
                          r"progress)\b[^.%]{0,40}?(?P<value>\d+(?:\.\d+)?%)")),
    ("{what} date", re.compile(r"\b(?P<what>meeting|call|webinar|session|interview|appointment|deadline|launch|"
                               r"release)\b[^.?!]{0,60}? (?:on|to|for|by|of) (?P<value>" + _MONTH_DAY + ")")),
    ("number of {what}", re.compile(r"\b(?:have|has|had|secured|added|reached|total of|finalized|read|wrote|"
                                    r"completed|mentored|now) (?P<value>\d[\d,]*) (?P<what>(?:[a-z]+ )?"
                                    r"(?:sources|books|interviews|words|mentees|commits|cards|projects|clients|"
                                    r"users|subscribers|followers|sessions|problems|pages|chapters|movies|"
                                    r"episodes|songs|videos|posts|tests|features|tasks|items|members))\b")),
)
_ARTICLES = re.compile(r"^(?:the|a|an|some|my)\s+", re.IGNORECASE)
_CALENDAR = frozenset({
    "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday", "January", "February", "March",
    "April", "May", "June", "July", "August", "September", "October", "November", "December", "Today", "Tomorrow",
    "Yesterday", "Christmas", "Easter", "Halloween", "Thanksgiving",
})
# capitalised words that name no entity by themselves: pronouns, calendar words, family words ("visited Mom")
_NOT_NAMES = frozenset({
    "I", "My", "The", "This", "That", "It", "We", "You", "He", "She", "They", "Me", "Our", "Your", "His", "Her",
    "Their", "A", "An", "Mom", "Mum", "Dad", "Mother", "Father", "Grandma", "Grandpa", "Home", "Church", "School",
    "Work", *_CALENDAR,
})
# organisations and products: named after a cue, or by an organisation's own suffix
_ORG_WORD = r"[A-Z][\w&'-]*"  # no dot: "in June. Our Group" is two sentences
_ORGANISATION = re.compile(
    r"\b(?P<org>(?:" + _ORG_WORD + r" (?:of |for |and |& )?)+(?:Inc|Corp|Corporation|LLC|Ltd|Company|Group|University|"
    r"College|Institute|Hospital|Bank|Foundation|Labs|Studios?|Agency|Association|Society|Academy)\b\.?"
    r"|University of [A-Z][\w-]+(?: [A-Z][\w-]+)*)")
_ORGANISATION_CUE = re.compile(r"\bI(?:'m| am)? (?:now |also )?(?:study(?:ing)?|volunteer(?:ing)?|intern(?:ing|ed)?|"
                               r"a student|an intern|a volunteer) (?:at|with|for) " + _VALUE)
_PRODUCT = (r"(?P<value>(?:[A-Z][\w+'-]*|[a-z]{1,2}[A-Z][\w+'-]*)"  # Fitbit, iPhone
            r"(?: (?:[A-Z][\w+'-]*|[a-z]{1,2}[A-Z][\w+'-]*|\d[\w.]*))*)")  # Versa, 15, Pro
_BOUGHT = re.compile(r"\bI (?:just |recently |finally |also )?(?:(?:bought|purchased|ordered|pre-?ordered|upgraded to)"
                     r" (?:an? |the |some |myself an? )?(?:(?:brand )?new |used |second-hand )?"
                     r"|got (?:an? |myself an? )?(?:brand )?new )" + _PRODUCT)  # "got" needs "new": "got Sam a gift"
_MY_NEW = re.compile(r"\b[Mm]y (?:brand )?new " + _PRODUCT)
_LEADING = frozenset({"The", "A", "An", "At", "In", "On", "For", "From", "With", "And", "But", "To", "Of", "By", "My",
                      "Our", "Your", "So", "Then", "Now", "Also"})
_PRONOUNS = frozenset({"it", "that", "this", "them", "you", "him", "her", "those", "these", "everything", "all"})
_SLOT_KINDS = {  # the kind of entity a first-person fact's value names
    "lives in": "place", "visited": "place", "works at": "organisation"}

_MONTHS = {m: i for i, m in enumerate(("january", "february", "march", "april", "may", "june", "july", "august",
                                       "september", "october", "november", "december"), 1)}
_RELATIVE = re.compile(r"\b(?P<phrase>yesterday|today|last (?:week|month|year)|(?P<n>\d+|a|one|two|three|four|five|"
                       r"six|seven) (?P<unit>days?|weeks?|months?|years?) ago|in (?P<month>" + "|".join(_MONTHS)
                       + r"))\b", re.IGNORECASE)
_NUMBERS = {"a": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7}


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
        count = int(found.group("n")) if found.group("n").isdigit() else _NUMBERS[found.group("n").lower()]
        unit = found.group("unit").lower().rstrip("s")
        day = now - dt.timedelta(days=count * {"day": 1, "week": 7, "month": 30, "year": 365}[unit])
    return format_time(day.replace(hour=0, minute=0, second=0, microsecond=0))


def _thing(value: str) -> str:
    return _ARTICLES.sub("", value.strip().lower()).strip()


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


def _scan(text: str, me: str, when: str | None) -> tuple[tuple[EntityMention, ...], tuple[FactMention, ...]]:
    """The entities and facts of one turn (``when``: the date first-person facts became true)."""
    facts: list[FactMention] = []
    for slot, functional, pattern in _FIRST_PERSON:
        for found in pattern.finditer(text):
            value = found.group("value").strip()
            if slot in _SLOT_KINDS:  # "I work at The Home Depot.": the organisation "Home Depot"
                value = _name(value) or ""
            if value and value not in _NOT_NAMES:
                facts.append(FactMention(me, slot, value if slot != "bought" else _thing(value), functional, when))
    products = [name for name in (_name(found.group("value")) for found in _BOUGHT.finditer(text)) if name]
    facts.extend(FactMention(me, "bought", product, False, when) for product in dict.fromkeys(products))
    for found in _FAVOURITE.finditer(text):
        facts.append(FactMention(me, f"favourite {found.group('kind').lower().strip()}",
                                 found.group("value").strip(), True, when))
    for pattern, opinion in ((_DISLIKE, "dislikes"), (_LIKE, "likes")):
        for found in pattern.finditer(text):
            thing = _thing(found.group("value"))
            if thing and thing not in _PRONOUNS and not any(f.slot == f"opinion of {thing}" for f in facts):
                facts.append(FactMention(me, f"opinion of {thing}", opinion, True, when))
    for template, pattern in _AMOUNTS:
        for found in pattern.finditer(text):
            what = found.groupdict().get("what") or ""
            slot = template.format(what=what.lower().strip())
            if not any(f.slot == slot for f in facts):  # the first amount of a kind in a turn
                facts.append(FactMention(me, slot, found.group("value"), True, None))
    entities: dict[str, EntityMention] = {}

    def add(name: str | None, kind: str, *aliases: str) -> None:
        if name is None:
            return
        known = entities.get(name)
        if known is None:
            entities[name] = EntityMention(name, kind, aliases)
        else:  # named twice in one turn: one mention with every alias
            entities[name] = EntityMention(name, known.kind, (*known.aliases, *(a for a in aliases
                                                                                 if a not in known.aliases)))

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
    return tuple(entities.values()), tuple(facts)


def find_entities(text: str) -> tuple[EntityMention, ...]:
    """The people, pets, places, organisations and products ``text`` names (no dates, no model)."""
    return _scan(text, "user", None)[0]


class RuleExtractor:
    """The deterministic default extractor (regular expressions over one turn)."""

    def extract(self, text: str, *, speaker: str | None, said_at: str) -> Extraction:
        entities, facts = _scan(text, speaker or "user", resolve_date(text, said_at))
        return Extraction(entities, facts)
