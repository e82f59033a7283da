"""Conversations as worlds: Scope > Session > Turn, written through the public facade.

A conversation lands in one transaction: its scope worlds (deterministic ids from their
names), one Session world per session (deterministic from conversation and session id), and
every turn verbatim as a Turn node whose valid time is the session's date (or the turn's own
time) and whose belief time is the ingest time. A conversation that belongs to several scopes
is written under the first and shared into the others by ``contains`` edges on its sessions.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .errors import InvalidInput
from .extract import Extractor, RuleExtractor
from .facts import remember
from .temporal import parse_time
from .work_queue import enqueue

if TYPE_CHECKING:
    from .db import WorldDB

DEFAULT_EXTRACTOR = RuleExtractor()
ASSISTANT_ROLES = {"assistant", "system"}  # what an assistant says about itself is not about the person
MAX_TURN_CHARS = 500_000  # a longer paste (a 1 MB log) is refused: split it; BEAM-100K's longest message is 349k


@dataclass(frozen=True)
class TurnIn:
    """One utterance, verbatim."""

    text: str
    speaker: str | None = None
    turn_id: str | None = None  # the dataset's own id (LoCoMo dia_id, BEAM message id, ...)
    at: str | None = None  # when it was said, if the source says; else the session's date
    props: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class SessionIn:
    """One sitting of a conversation."""

    session_id: str
    date: str | None
    turns: Sequence[TurnIn]


@dataclass(frozen=True)
class ConversationIn:
    """A conversation to remember: its id, its scopes (first = home) and its sessions."""

    conversation_id: str
    scopes: Sequence[str]
    sessions: Sequence[SessionIn]

    @property
    def turn_count(self) -> int:
        return sum(len(s.turns) for s in self.sessions)


def check_turn(turn: TurnIn, where: str) -> None:
    """A clear error for a turn the store must not take."""
    if not isinstance(turn.text, str) or not turn.text.strip():
        raise InvalidInput(f"{where}: the turn has no text")
    if len(turn.text) > MAX_TURN_CHARS:
        raise InvalidInput(f"{where}: the turn holds {len(turn.text):,} characters, more than {MAX_TURN_CHARS:,}; "
                           "split it into several turns")
    if "\x00" in turn.text:
        raise InvalidInput(f"{where}: the turn holds a NUL character (binary data?); decode it to text first")


def ingest(db: WorldDB, conversation: ConversationIn, *,
           extractor: Extractor | None = DEFAULT_EXTRACTOR, deferred: bool = False) -> list[str]:
    """Write one conversation in one transaction; returns the turn ids in order.

    With an ``extractor`` (the rule-based one by default; None for none), every turn's
    entities and facts are written in the same transaction, facts superseding older values.
    ``deferred`` queues the turns instead (in the same transaction), for ``work_queue.drain``.
    """
    if not conversation.scopes:
        raise InvalidInput(f"conversation {conversation.conversation_id!r} names no scope")
    now = db._clock()  # the store's clock: a test clock in tests
    for session in conversation.sessions:
        for i, turn in enumerate(session.turns):
            where = (f"conversation {conversation.conversation_id!r}, session {session.session_id!r}, "
                     f"turn {turn.turn_id or i}")
            check_turn(turn, where)
            when = turn.at or session.date
            if when is not None and parse_time(when, field=f"{where}: time") > now:
                raise InvalidInput(f"{where}: dated {parse_time(when)}, after now ({now}); a memory cannot be "
                                   "from the future: check the dataset's dates or the machine's clock")
    ids: list[str] = []
    with db.batch():
        home, *shared = [db.scope(name) for name in conversation.scopes]
        for session in conversation.sessions:
            world = db.world(f"{conversation.conversation_id} / {session.session_id}", parent=home, type="Session")
            for other in shared:
                db.link(other, world, "contains")
            written = db.write_many([
                {"text": turn.text, "world": world, "type": "Turn",
                 "valid_at": turn.at or session.date,
                 "props": {k: v for k, v in {**turn.props, "speaker": turn.speaker, "turn_id": turn.turn_id,
                                             "session": session.session_id,
                                             "conversation": conversation.conversation_id}.items() if v is not None}}
                for turn in session.turns
            ])
            ids.extend(written)
            if extractor is None and not deferred:
                continue
            for turn, turn_id in zip(session.turns, written, strict=True):
                if (turn.speaker or "").lower() in ASSISTANT_ROLES:
                    continue
                when = turn.at or session.date
                said_at = parse_time(when, field="turn time") if when else db.read(turn_id).valid_at
                if deferred:
                    enqueue(db, turn_id, home, said_at, conversation.conversation_id, turn.speaker)
                    continue
                assert extractor is not None
                found = extractor.extract(turn.text, speaker=turn.speaker, said_at=said_at)
                if found.entities or found.facts:
                    remember(db, found, turn=turn_id, scope=home, said_at=said_at,
                             said_in=conversation.conversation_id)
    return ids
