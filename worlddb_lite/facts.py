"""Writing what an extractor found: Entity and Fact nodes, their edges, and supersession.

Everything goes through the facade inside the caller's transaction, so a turn and what was
learned from it land together. A fact on a functional slot that already holds another value
supersedes it when it became true later (the old value's validity closes at the new one's
valid time), is superseded by it when it is older, and contradicts it at the same time.
Entities go through the tiered resolver (resolver.py) inside the scope: an exact name or alias
is that entity; any other match writes a new entity with a pending same_as proposal, so
"Sara" never silently becomes "Sarah".
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .extract import EntityMention, Extraction, FactMention

if TYPE_CHECKING:
    from .db import WorldDB
    from .types import Node


def remember(db: WorldDB, found: Extraction, *, turn: str, scope: str, said_at: str,
             said_in: str | None = None, speaker: str | None = None,
             speakers: dict[str, str] | None = None) -> list[str]:
    """Write ``found`` into the scope world ``scope``; returns the new fact ids.

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
            entity, _ = db.resolve_entity(mention.name, world=scope, aliases=mention.aliases, kind=mention.kind,
                                          valid_at=said_at, source="extractor")
            if speakers is not None and mention.name == speaker:
                speakers[mention.name] = entity
        entities[mention.name] = entity
        db.link(turn, entity, "refers_to", valid_at=said_at)  # as of a past date, the graph is as it was
    facts = []
    for fact in found.facts:
        written = _fact(db, fact, turn=turn, scope=scope, said_at=said_at, said_in=said_in)
        if written is not None:
            facts.append(written)
            subject = entities.get(fact.subject) or _entity(db, scope, fact.subject)
            value = entities.get(fact.value)  # the value names an entity of this turn: "works at: Google"
            for target in dict.fromkeys(t for t in (subject, value) if t is not None):
                db.link(written, target, "refers_to", valid_at=fact.valid_at or said_at)
    return facts


def _entity(db: WorldDB, scope: str, name: str) -> str | None:
    """The entity of the scope known exactly by ``name`` (a fact's subject names one; it is never created here)."""
    for candidate in db.lookup_alias(name):
        node = db.read(candidate)
        if node.type == "Entity" and node.parent == scope:
            return candidate
    return None


def slot_key(subject: str, slot: str) -> str:
    """The alias every fact on one subject's slot carries, so the facts of a slot are one index probe away."""
    return f"slot: {subject} / {slot}"


def _fact(db: WorldDB, fact: FactMention, *, turn: str, scope: str, said_at: str,
          said_in: str | None) -> str | None:
    valid = fact.valid_at or said_at
    key = slot_key(fact.subject, fact.slot)
    current = [n for n in (db.read(i) for i in db.lookup_alias(key))
               if n.parent == scope and n.invalid_at is None and n.expired_at is None and not n.retired]
    if any(_value(n) == fact.value.lower() for n in current):
        return None  # already known
    written = db.write(f"{fact.subject} {fact.slot}: {fact.value}", world=scope, type="Fact", name=fact.slot,
                       valid_at=valid, aliases=(key,),
                       props={"subject": fact.subject, "slot": fact.slot, "value": fact.value,
                              "functional": fact.functional, "said_in": said_in})
    db.link(written, turn, "refers_to", valid_at=said_at)
    if fact.functional:
        for old in current:
            _reconcile(db, written, valid, said_in, old)
    return written


def _value(node: Node) -> str:
    return str(node.props.get("value", "")).lower()


def _reconcile(db: WorldDB, new: str, valid: str, said_in: str | None, old: Node) -> None:
    """Order two values of one slot by valid time, then by the order said in one conversation.

    At the same valid time in one conversation the later one wins; with no order at all, both
    stand, contradicting.
    """
    if valid > old.valid_at or (valid == old.valid_at and said_in is not None
                                and old.props.get("said_in") == said_in):
        db.link(new, old.id, "supersedes")
    elif valid < old.valid_at:
        db.link(old.id, new, "supersedes")
    else:
        db.link(new, old.id, "contradicts")
