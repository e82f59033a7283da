"""Conversations as worlds: Scope > Session > Turn, written through the public facade.

A conversation lands in one transaction: its scope worlds (deterministic ids from their
names), one Session world per session (deterministic from conversation and session id), and
every turn verbatim as a Turn node whose valid time is the session's date (or the turn's own
time) and whose belief time is the ingest time. A conversation that belongs to several scopes
is written under the first and shared into the others by ``contains`` edges on its sessions.

Two optional steps, off by default: an encoding gate (gate.py) scores each turn, stores the
score as its salience and lets only turns at or above its threshold go on to extraction; a
context bridge (bridge.py) indexes a turn together with what its pronouns refer to. Neither
changes what is stored: every turn is kept verbatim.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .. import checks
from ..errors import InvalidInput
from ..store.hashing import canonical_json, nfc
from ..text.dates import parse_time
from ..text.extract import Extractor, RuleExtractor, check_extractor
from ..types import is_assistant
from .bridge import ContextBridge
from .gate import EncodingGate
from .queue import learn_or_queue, learns
from .turns import DEFAULT_WINDOW, DEFAULT_WORD_AFTER, DEFAULT_WORD_WINDOW, TurnIn, check_turn, turn_props
from .turns import contexts as windows_of
from .turns import turn_record as record_of
from .writer import Writer

__all__ = ["ConversationIn", "IngestStats", "SessionIn", "TurnIn", "check_conversation", "ingest"]  # TurnIn: turns.py

DEFAULT_EXTRACTOR = RuleExtractor()


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


@dataclass
class IngestStats:
    """Counts that ``ingest`` adds to when given one (a conversation counts once it has landed)."""

    turns: int = 0  # turns written
    below_gate: int = 0  # turns the gate scored below its threshold (stored, not extracted)
    bridged: int = 0  # turns indexed with context from the turns before them


def _an_id(value: object, what: str) -> None:
    """An id is text (without NUL) or a whole number, as datasets write them."""
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise InvalidInput(f"{what} must be text or a whole number, got {type(value).__name__}")
    if isinstance(value, str):
        checks.text(value, what, required=False)


def check_conversation(conversation: object, *, now: str | None = None) -> ConversationIn:
    """The shape of a conversation as ``ingest`` needs it, or InvalidInput saying which part is wrong.

    Checked whole before anything is written, so a bad part stops the conversation, not half of it:
    every turn's text and props too, so a file's loader can check every conversation before the first
    lands. ``now``: no turn may be dated after it (the store's clock; the loaders use the system's).
    """
    if not isinstance(conversation, ConversationIn):
        raise InvalidInput(f"ingest takes a ConversationIn, not {type(conversation).__name__}")
    _an_id(conversation.conversation_id, "a conversation id")
    label = f"conversation {conversation.conversation_id!r}"
    if isinstance(conversation.scopes, (str, bytes, Mapping)) or not isinstance(conversation.scopes, Iterable):
        raise InvalidInput(f"{label}: scopes must be a list of scope names")
    for scope in conversation.scopes:
        checks.scope_ref(scope, f"{label}: scope")
    if isinstance(conversation.sessions, (str, bytes, Mapping)) or not isinstance(conversation.sessions, Iterable):
        raise InvalidInput(f"{label}: sessions must be a list of SessionIn")
    for session in conversation.sessions:
        if not isinstance(session, SessionIn):
            raise InvalidInput(f"{label}: a session must be a SessionIn, not {type(session).__name__}")
        _an_id(session.session_id, f"{label}: a session id")
        where = f"{label}, session {session.session_id!r}"
        if session.date is not None:
            parse_time(session.date, field=f"{where}: date")
        if isinstance(session.turns, (str, bytes, Mapping)) or not isinstance(session.turns, Iterable):
            raise InvalidInput(f"{where}: turns must be a list of TurnIn")
        for i, turn in enumerate(session.turns):
            if not isinstance(turn, TurnIn):
                raise InvalidInput(f"{where}: a turn must be a TurnIn, not {type(turn).__name__}")
            checks.text(turn.speaker, f"{where}: a turn's speaker", required=False)
            if turn.turn_id is not None:
                _an_id(turn.turn_id, f"{where}: a turn id")
            if turn.at is not None:
                parse_time(turn.at, field=f"{where}: a turn's time")
            if not callable(getattr(turn.props, "keys", None)):
                raise InvalidInput(f"{where}: a turn's props must be a mapping")
            here = f"{where}, turn {turn.turn_id or i}"
            check_turn(turn, here)
            _check_props(turn.props, here)
            when = turn.at or session.date
            if now is not None and when is not None and parse_time(when, field=f"{here}: time") > now:
                raise InvalidInput(
                    f"{here}: dated {parse_time(when)}, after now ({now}); a memory cannot be "
                    "from the future: check the dataset's dates or the machine's clock"
                )
    return conversation


def _check_props(props: Mapping[str, Any], where: str) -> None:
    """A turn's props as the write path will hash them (text keys, no lone surrogate, not nested too deep)."""
    try:
        canonical_json({"props": dict(props)})
    except InvalidInput as exc:
        raise InvalidInput(f"{where}: its props cannot be stored ({exc.message})", hint=exc.hint) from None


def _runs(walls: Sequence[bool]) -> list[list[int]]:
    """The indices between walls, in runs: ``[F, F, T, F]`` -> ``[[0, 1], [3]]``."""
    runs: list[list[int]] = [[]]
    for i, wall in enumerate(walls):
        if wall:
            runs.append([])
        else:
            runs[-1].append(i)
    return [run for run in runs if run]


def ingest(
    writer: Writer,
    conversation: ConversationIn,
    *,
    extractor: Extractor | None = DEFAULT_EXTRACTOR,
    deferred: bool = False,
    gate: EncodingGate | None = None,
    bridge: bool | ContextBridge = False,
    window: int = DEFAULT_WINDOW,
    word_window: int = DEFAULT_WORD_WINDOW,
    word_after: int = DEFAULT_WORD_AFTER,
    stats: IngestStats | None = None,
) -> list[str]:
    """Write one conversation in one transaction; returns the turn ids in order.

    With an ``extractor`` (the rule-based one by default; None for none), every turn's
    entities and facts are written in the same transaction, facts superseding older values.
    ``deferred`` queues the turns instead (in the same transaction), for ``queue.drain``.
    ``gate`` (e.g. ``EncodingGate(threshold=0.3)``) scores every turn into its salience and
    sends only turns at or above the threshold to extraction; ``bridge`` (True, or a
    ``ContextBridge``) indexes each turn with what its pronouns refer to. ``window`` turns before
    each turn are indexed with it (full text, vector and token index); the turns before those, up to
    the ``word_window``-th, and the ``word_after`` turns after it, for their words alone (full text,
    weighed lower). ``stats`` is added to.
    """
    for label, value in (("window", window), ("word_window", word_window), ("word_after", word_after)):
        checks.whole(value, label, unit="turns")
    check_conversation(conversation, now=writer.clock())  # the store's clock: a test clock in tests
    check_extractor(extractor)
    if deferred not in (True, False):
        raise InvalidInput(f"deferred must be True or False, got {deferred!r}")
    if stats is not None and not all(hasattr(stats, name) for name in ("turns", "below_gate", "bridged")):
        raise InvalidInput(f"stats must be an IngestStats or None, not {type(stats).__name__}")
    if not conversation.scopes:
        raise InvalidInput(f"conversation {conversation.conversation_id!r} names no scope")
    if gate is not None and not isinstance(gate, EncodingGate):
        raise InvalidInput(f"gate must be an EncodingGate or None, not {type(gate).__name__}")
    if not isinstance(bridge, (bool, ContextBridge)):
        raise InvalidInput(f"bridge must be True, False or a ContextBridge, not {type(bridge).__name__}")
    bridging = ContextBridge() if bridge is True else bridge or None
    ids: list[str] = []
    counts = IngestStats()
    speaker_entities: dict[str, str] = {}  # speaker -> person entity, resolved once per conversation
    with writer.transaction():
        home, *shared = [writer.scope(name) for name in conversation.scopes]
        for session in conversation.sessions:
            world = writer.world(f"{conversation.conversation_id} / {session.session_id}", parent=home, type="Session")
            for other in shared:
                writer.link(other, world, "contains")
            texts = [nfc(turn.text) for turn in session.turns]  # as the blobs hold them: contexts quote these
            scores = gate.session(writer, texts, scope=home) if gate is not None else None  # before the session lands
            speakers = [nfc(turn.speaker) if turn.speaker else turn.speaker for turn in session.turns]
            records = [
                record_of(
                    turn.text,
                    world=world,
                    speaker=turn.speaker,
                    valid_at=turn.at or session.date,
                    props=turn_props(
                        turn.props,
                        speaker=turn.speaker,
                        session=session.session_id,
                        conversation=conversation.conversation_id,
                        turn_id=turn.turn_id,
                    ),
                    index_context=None,
                    word_context=None,
                    salience=scores[i].score if scores is not None else 0.0,
                )
                for i, turn in enumerate(session.turns)
            ]
            # a turn purged before (the same transcript ingested again) is a wall no words cross
            walls = writer.on_tombstones(world, records)
            bridged, contexts, farther = [""] * len(texts), [""] * len(texts), [""] * len(texts)
            for run in _runs(walls):
                said, who = [texts[i] for i in run], [speakers[i] for i in run]
                run_bridged = bridging.session(said, speakers=who) if bridging is not None else [""] * len(run)
                before, far = windows_of(said, who, window=window, word_window=word_window, word_after=word_after)
                for j, i in enumerate(run):
                    bridged[i], farther[i] = run_bridged[j], far[j]
                    contexts[i] = "\n".join(c for c in (run_bridged[j], before[j]) if c)
            written = writer.write_many(
                [
                    {**record, "index_context": contexts[i] or None, "word_context": farther[i] or None}
                    for i, record in enumerate(records)
                ]
            )
            ids.extend(written)
            counts.turns += len(written)
            counts.bridged += sum(1 for context in bridged if context)
            counts.below_gate += sum(1 for score in scores or () if not score.kept)
            if not learns(extractor, deferred):
                continue
            for i, (turn, turn_id) in enumerate(zip(session.turns, written, strict=True)):
                said_by_assistant = is_assistant(turn.speaker)
                if (scores is not None and not scores[i].kept) or walls[i] or said_by_assistant:
                    continue  # not worth System 2, a turn a purge erased, the assistant's (the turn itself is stored)
                when = turn.at or session.date
                said_at = parse_time(when, field="turn time") if when else writer.read(turn_id).valid_at
                learn_or_queue(
                    writer,
                    extractor,
                    turn.text,
                    deferred=deferred,
                    source=turn_id,
                    scope=home,
                    said_at=said_at,
                    said_in=conversation.conversation_id,
                    speaker=turn.speaker,
                    speakers=speaker_entities,
                    by_assistant=said_by_assistant,
                )
    if stats is not None:  # counted once the conversation has landed
        stats.turns += counts.turns
        stats.below_gate += counts.below_gate
        stats.bridged += counts.bridged
    return ids
