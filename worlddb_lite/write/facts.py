"""Writing what an extractor found: Entity and Fact nodes, their edges, and supersession.

Everything goes through the facade inside the caller's transaction, so a turn and what was
learned from it land together. A fact on a functional slot that already holds another value
supersedes it when it became true later (the old value's validity closes at the new one's
valid time), is superseded by it when it is older, and contradicts it at the same time. A value
the turn says changed ("the budget was raised to $650") also replaces the latest value of the
same kind on a slot that names the same thing more or less fully ("annual budget" and "budget",
not "snack budget" and "gift budget"), found through the slot's words. A value that is one of
many (an event's date: "meeting date") is replaced only under its own name, when said to move.
Standing instructions stand side by side, except that one asking the same action as an earlier
one of the speaker ("Never use bullet points" after "Always use bullet points") replaces it.
Entities go through the tiered resolver (resolver.py) inside the scope: an exact name or alias
is that entity; any other match writes a new entity with a pending same_as proposal, so
"Sara" never silently becomes "Sarah".
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..text.extract import (
    INSTRUCTION_SLOT,
    EntityMention,
    Extraction,
    Extractor,
    FactMention,
    instruction_action,
    value_kind,
)
from ..text.slots import STANDING, slot_key, slot_words, word_key
from .identity import mention as checked_mention
from .identity import resolve_in
from .updates import link_updates
from .writer import MemoryIn, Writer

if TYPE_CHECKING:
    from ..types import Node


def understand(
    writer: Writer,
    extractor: Extractor,
    text: str,
    *,
    source: str,
    scope: str,
    said_at: str,
    said_in: str | None = None,
    speaker: str | None = None,
    speakers: dict[str, str] | None = None,
) -> list[str]:
    """System 2 for one memory: what ``text`` says, extracted and written beside ``source``; the new fact ids.

    The same code for a turn of an ingest, a queued turn or note, and a note written now. A memory
    that tells of a change is also linked to the older note it may update (``updates.link_updates``).
    """
    found = extractor.extract(text, speaker=speaker, said_at=said_at)
    if not (found.entities or found.facts or speaker):
        return []
    link_updates(writer, source, text, scope=scope, speaker=speaker)  # what no slot reads: a change in plain words
    return write_extraction(
        writer,
        found,
        said=text,
        turn=source,
        scope=scope,
        said_at=said_at,
        said_in=said_in,
        speaker=speaker,
        speakers=speakers,
    )


def write_extraction(
    writer: Writer,
    found: Extraction,
    *,
    turn: str,
    scope: str,
    said_at: str,
    said: str | None = None,
    said_in: str | None = None,
    speaker: str | None = None,
    speakers: dict[str, str] | None = None,
) -> list[str]:
    """Write ``found`` into the scope world ``scope``; returns the new fact ids.

    ``said``: the text it was read from. A standing instruction or preference is indexed with it
    (its value is the clause alone): the standing lanes match a later question to the sentence
    around the statement ("I prefer short answers when I ask about the new role"), which the value
    drops (``bench/recall.py``, BEAM-100K preference following; docs/decisions.md).

    ``turn`` is the source turn, ``said_in`` its conversation (orders facts said at one time),
    ``speaker`` who said it: a person entity the turn refers_to, the subject of its first-person facts.
    ``speakers`` (speaker name -> entity id) is kept by a caller writing many turns of one scope in one
    transaction, so a speaker is resolved once, not once per turn.
    """
    entities: dict[str, str] = {}
    mentions = list(found.entities)
    if speaker and speaker.strip() and all(m.name != speaker for m in mentions):
        # the person who said the turn: the entity graph then reaches their turns and first-person facts
        mentions.insert(0, EntityMention(speaker.strip(), "person"))
    for mention in mentions:
        known = speakers.get(mention.name) if speakers is not None and mention.name == speaker else None
        if known is not None:
            entity = known
        else:
            entity, _ = resolve_in(
                writer,
                checked_mention(mention.name, mention.aliases, None, mention.kind),
                world=scope,
                valid_at=said_at,
                source="extractor",
            )
            if speakers is not None and mention.name == speaker:
                speakers[mention.name] = entity
        entities[mention.name] = entity
        writer.link(turn, entity, "refers_to", valid_at=said_at)  # as of a past date, the graph is as it was
    facts = []
    for fact in found.facts:
        context = _around(said, fact.value) if fact.slot in STANDING and said and said != fact.value else None
        written = _fact(writer, fact, turn=turn, scope=scope, said_at=said_at, said_in=said_in, context=context)
        if written is not None:
            facts.append(written)
            subject = entities.get(fact.subject) or _entity(writer, scope, fact.subject)
            value = entities.get(fact.value)  # the value names an entity of this turn: "works at: Google"
            for target in dict.fromkeys(t for t in (subject, value) if t is not None):
                writer.link(written, target, "refers_to", valid_at=fact.valid_at or said_at)
    return facts


STANDING_CONTEXT = 400  # characters of the text on each side of a standing statement indexed with it


def _around(text: str, value: str) -> str:
    """The words around ``value`` in ``text`` (its start, if the value is not found there): a sentence or two."""
    at = max(text.lower().find(value.lower()), 0)
    return text[max(0, at - STANDING_CONTEXT) : at + len(value) + STANDING_CONTEXT]


def _entity(writer: Writer, scope: str, name: str) -> str | None:
    """The entity of the scope known exactly by ``name`` (a fact's subject names one; it is never created here)."""
    for candidate in writer.lookup_alias(name):
        node = writer.read(candidate)
        if node.type == "Entity" and node.parent == scope:
            return candidate
    return None


def _current(writer: Writer, key: str, scope: str) -> list[Node]:
    return [
        n
        for n in (writer.read(i) for i in writer.lookup_alias(key))
        if n.parent == scope and n.invalid_at is None and n.expired_at is None and not n.retired
    ]


def _changed_from(writer: Writer, fact: FactMention, scope: str) -> list[Node]:
    """The latest value a changed value replaces on slots naming the same thing less or more fully (see the module)."""
    words = slot_words(fact.slot)
    kind = value_kind(fact.value)
    near: dict[str, Node] = {}
    for word in sorted(words):
        for node in _current(writer, word_key(fact.subject, word), scope):
            other = slot_words(str(node.props.get("slot", "")))
            same = node.props.get("slot") == fact.slot  # an event's date ("meeting date") only under its own name
            if (
                other
                and (same or not node.props.get("event"))
                and (words <= other or other <= words)
                and value_kind(str(node.props.get("value", ""))) == kind
            ):
                near[node.id] = node
    latest = max(near.values(), key=lambda n: (n.valid_at, n.created_at), default=None)
    # one value, maybe said under several names ("gift budget: $400", "budget: $400")
    return [] if latest is None else [n for n in near.values() if _value(n) == _value(latest)]


def _fact(
    writer: Writer,
    fact: FactMention,
    *,
    turn: str,
    scope: str,
    said_at: str,
    said_in: str | None,
    context: str | None = None,
) -> str | None:
    valid = fact.valid_at or said_at
    key = slot_key(fact.subject, fact.slot)
    current = _current(writer, key, scope)
    replaced = _changed_from(writer, fact, scope) if fact.changed else []
    if fact.slot == INSTRUCTION_SLOT:  # the same action asked again, or reversed ("always" -> "never")
        action = instruction_action(fact.value)
        replaced = [n for n in current if instruction_action(_value(n)) == action]
    for known in (*current, *replaced):
        if _value(known) == fact.value.lower():  # already known (maybe under a fuller or shorter name):
            writer.link(known.id, turn, "refers_to", valid_at=said_at)  # this turn says it too
            return None
    words = (word_key(fact.subject, w) for w in sorted(slot_words(fact.slot)))
    standing = (STANDING[fact.slot],) if fact.slot in STANDING else ()
    written = writer.write(
        MemoryIn(
            f"{fact.subject} {fact.slot}: {fact.value}",
            world=scope,
            type="Fact",
            name=fact.slot,
            valid_at=valid,
            aliases=(key, *words, *standing),
            index_context=context,
            props={
                "subject": fact.subject,
                "slot": fact.slot,
                "value": fact.value,
                "functional": fact.functional,
                "said_in": said_in,
                **({"event": True} if fact.event else {}),
                **({"changed": True} if fact.changed else {}),
            },
        )
    )
    writer.link(written, turn, "refers_to", valid_at=said_at)
    if fact.functional or replaced:
        kind = value_kind(fact.value)  # "3 deadlines" is no value of "deadline: April 25"
        olds = {n.id: n for n in (*current, *replaced)} if fact.functional else {n.id: n for n in replaced}
        for old in olds.values():  # an instruction is text, whatever its last word looks like
            if fact.slot == INSTRUCTION_SLOT or value_kind(str(old.props.get("value", ""))) == kind:
                _reconcile(writer, written, valid, said_in, old)
    return written


def _value(node: Node) -> str:
    return str(node.props.get("value", "")).lower()


def _reconcile(writer: Writer, new: str, valid: str, said_in: str | None, old: Node) -> None:
    """Order two values of one slot by valid time, then by the order said in one conversation.

    At the same valid time in one conversation the later one wins; with no order at all, both
    stand, contradicting.
    """
    if valid > old.valid_at or (valid == old.valid_at and said_in is not None and old.props.get("said_in") == said_in):
        writer.link(new, old.id, "supersedes")
    elif valid < old.valid_at:
        writer.link(old.id, new, "supersedes")
    else:
        writer.link(new, old.id, "contradicts")
