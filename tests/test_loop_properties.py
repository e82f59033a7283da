"""The assistant's loop as a property (issue 34): whatever the store holds, recall and context answer.

A program mixes what an assistant does to its memory: turns appended as they are said (several
sessions, some out of order, some by another speaker or the assistant), notes written (extracted now,
deferred, or stored alone), amends, retires and purges of either, consolidation and the retention step
(cold memories), with questions asked between them: lines and notes it wrote, paraphrases, and
questions nothing answers, read now or as of an earlier moment, with and without the cold tier.
Every question goes through ``recall`` and ``context``, and:

* neither raises (a refused call raises a ``WorldDBError``; the programs make none on purpose);
* every hit is current at the moment read: valid then, still believed, not purged; read now, no note
  or turn the program retired, purged or amended comes back;
* the store still verifies at the end.

A second property appends a random conversation turn by turn and ingests the same conversation whole:
the same questions get the same hits and the same context.

The default run takes 60 programs of each with the bundled model (the loop's real lanes, a few seconds);
``-m slow`` runs 2,000 longer loop programs (about 40,000 recall and context calls, a few minutes) and 500
conversations. What the property found is kept as
small tests at the end of the file.
"""

from __future__ import annotations

import datetime as dt
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from worlddb_lite import ConversationIn, SessionIn, StaticEmbedder, TurnIn, WorldDB, WorldDBError
from worlddb_lite.text.dates import format_time, parse_time
from worlddb_lite.types import Recall

from .conftest import FakeClock

FAST = settings(
    max_examples=60, deadline=None, derandomize=True, database=None, suppress_health_check=list(HealthCheck)
)
SLOW = settings(max_examples=2000, deadline=None, database=None, suppress_health_check=list(HealthCheck))

PERSON = "caroline"  # the scope's person
SPEAKERS = ["Caroline", "Mel", "assistant", None]
LINES = [  # everyday things said in a conversation
    "Hi! How was your week?",
    "Great, I went hiking on Saturday",
    "Nice, where did you go?",
    "We drove up to the lake near Sintra",
    "I started a pottery class last month",
    "My sister Emma is visiting in June",
    "I moved to Porto in the spring",
    "Work has been busy, the launch moved to Friday",
    "I've been reading a lot of science fiction lately",
    "My dog Rex got sick but he's better now",
    "We switched the standup to 9:30",
    "I live in Lisbon",
    "It's been rescheduled to March 22 at 4:30 PM",
    "Thanks, that's really helpful!",
]
NOTES = [  # things an assistant writes down
    "Our team standup is at 9:00",
    "We switched the standup to 9:30",
    "I live in Lisbon",
    "I moved to Porto",
    "My manager is Sarah",
    "My manager is now Tom",
    "The spare key is under the blue flowerpot",
    "Always answer in Portuguese",
    "I prefer tea over coffee",
    "I drink three cups of coffee a day",
    "I quit coffee last week",
    "My dentist appointment is on March 3",
    "The dentist appointment was rescheduled to March 10",
    "Emma's birthday is on July 14",
    "Caroline's barber is Tomas on Elm Street",
    "Mel's barber is Leo on Main Street",
]
QUESTIONS = [  # asked of the memory: about what was said, in other words, and about nothing stored
    "when is the standup?",
    "where do I live?",
    "who is my manager?",
    "where is the spare key?",
    "do I drink coffee?",
    "when is my dentist appointment?",
    "when is Emma's birthday?",
    "what did I do on Saturday?",
    "who is visiting in June?",
    "who is my barber?",
    "how is Rex doing?",
    "what language should you answer in?",
    "what is my blood type?",
    "what is the wifi password at the office?",
    "xqzv blorp",
    "what did I do last month?",  # periods named against the moment read, the calendar's ends included
    "what happened in December?",
    "what did I say yesterday?",
]
DAY0 = dt.datetime(2023, 1, 1, tzinfo=dt.UTC)  # the programs' dates run from here over ~18 months
# None: now (the fake clock, 2025); the calendar's first and last days too
AS_OF = [None, None, None, "2023-02-01", "2023-08-15", "2024-01-01", "2024-06-30", "0001-01-01", "9999-12-20"]
KNOWN_AS_OF = [None, None, None, "2025-01-01T00:00:05Z", "2025-01-01T00:00:30Z"]  # belief: early in the program

pick = st.integers(min_value=0, max_value=1_000)  # an index into what the program wrote, modulo its size
day = st.integers(min_value=0, max_value=540)
minute = st.integers(min_value=0, max_value=180)

turn = st.tuples(
    st.just("turn"),
    st.sampled_from(LINES),
    st.sampled_from(SPEAKERS),
    st.sampled_from([None, "a", "b"]),  # no session (the latest, or a new one after a pause), or a named one
    day,
    minute,
    st.sampled_from(["now", "now", "deferred", "none"]),
)
note = st.tuples(
    st.just("note"),
    st.sampled_from(NOTES),
    st.one_of(st.none(), day),
    st.sampled_from(["now", "now", "deferred", "none"]),
    st.sampled_from([PERSON, PERSON, PERSON, "mel"]),
)
amend = st.tuples(st.just("amend"), pick, st.sampled_from(NOTES + LINES[:4]), st.one_of(st.none(), day))
retire = st.tuples(st.just("retire"), pick)
purge = st.tuples(st.just("purge"), pick)
consolidate = st.tuples(st.just("consolidate"))
cold = st.tuples(st.just("retention"), st.integers(min_value=1, max_value=4))
ask = st.tuples(
    st.just("ask"),
    st.one_of(st.sampled_from(QUESTIONS), st.sampled_from(NOTES), st.sampled_from(LINES)),
    st.sampled_from(AS_OF),
    st.booleans(),  # include_cold
    st.integers(min_value=1, max_value=12),
    st.sampled_from(KNOWN_AS_OF),
    st.sampled_from([False, False, True]),  # include_superseded
)
merge = st.tuples(st.just("merge"), pick, pick, st.booleans())  # two entities System 2 wrote; accept or reject
chat = st.tuples(  # a whole conversation ingested into the scope, beside the turns appended live
    st.just("ingest"),
    st.lists(st.tuples(st.sampled_from(LINES), st.sampled_from(SPEAKERS[:3])), min_size=1, max_size=5),
    day,
)
op = st.one_of(turn, turn, turn, note, note, amend, retire, purge, consolidate, cold, merge, chat, ask, ask)


def programs(most: int) -> st.SearchStrategy[list[tuple[Any, ...]]]:
    """Operations, then six questions at the end whatever came before."""
    return st.tuples(st.lists(op, min_size=most // 3, max_size=most), st.lists(ask, min_size=6, max_size=6)).map(
        lambda parts: [*parts[0], *parts[1]]
    )


@pytest.fixture(scope="module")
def embedder() -> StaticEmbedder:
    return StaticEmbedder()


def _day(days: int, minutes: int = 0) -> str:
    return format_time(DAY0 + dt.timedelta(days=days, minutes=minutes))


@dataclass
class Loop:
    """One store under a program, and what the program knows of what it wrote."""

    db: WorldDB
    written: list[str] = field(default_factory=list)  # ids of the notes and turns written (amends included)
    gone: set[str] = field(default_factory=set)  # retired, purged or replaced by an amend: never current now
    purged: set[str] = field(default_factory=set)
    outcomes: Counter[str] = field(default_factory=Counter)
    calls: int = 0
    chats: int = 0

    def attempt(self, name: str, action: Any) -> tuple[bool, Any]:
        """Run one write: done and its result, or refused (a ``WorldDBError``); never any other failure."""
        try:
            result = action()
        except WorldDBError:
            self.outcomes[f"{name} refused"] += 1
            return False, None
        self.outcomes[name] += 1
        return True, result

    def run(self, program: list[tuple[Any, ...]]) -> None:
        for step in program:
            getattr(self, f"_{step[0]}")(*step[1:])

    def _extraction(self, how: str) -> dict[str, Any]:
        return {"extractor": None} if how == "none" else {"deferred": how == "deferred"}

    def _turn(self, text: str, speaker: str | None, session: str | None, days: int, minutes: int, how: str) -> None:
        done, nid = self.attempt(
            "turn",
            lambda: self.db.add_turn(
                text, scope=PERSON, session=session, speaker=speaker, at=_day(days, minutes), **self._extraction(how)
            ),
        )
        if done:
            self.written.append(nid)

    def _note(self, text: str, days: int | None, how: str, scope: str) -> None:
        valid_at = _day(days) if days is not None else None
        done, nid = self.attempt(
            "note", lambda: self.db.write(text, scope=scope, valid_at=valid_at, **self._extraction(how))
        )
        if done and nid not in self.written:
            self.written.append(nid)

    def _target(self, index: int) -> str | None:
        alive = [nid for nid in self.written if nid not in self.gone]
        return alive[index % len(alive)] if alive else None

    def _amend(self, index: int, text: str, days: int | None) -> None:
        if (ref := self._target(index)) is None:
            return
        valid_at = _day(days) if days is not None else None
        done, new = self.attempt("amend", lambda: self.db.amend(ref, text, valid_at=valid_at))
        if done and new != ref:
            self.gone.add(ref)
            self.written.append(new)

    def _retire(self, index: int) -> None:
        if (ref := self._target(index)) is not None and self.attempt("retire", lambda: self.db.retire(ref))[0]:
            self.gone.add(ref)

    def _purge(self, index: int) -> None:
        if (ref := self._target(index)) is None:
            return
        done, report = self.attempt("purge", lambda: self.db.purge(ref))
        if done:
            erased = set(report["purged"])
            self.purged |= erased
            self.gone |= erased

    def _consolidate(self) -> None:
        self.attempt("consolidate", lambda: self.db.consolidate(min_age=dt.timedelta(0)))

    def _retention(self, cap: int) -> None:
        self.attempt("retention", lambda: self.db.set_retention(max_hot_vectors=cap))
        self.attempt("retention", lambda: self.db.consolidate(only="retention", min_age=dt.timedelta(0)))

    def _merge(self, first: int, second: int, accept: bool) -> None:
        entities = [node.id for node in self.db.nodes(type="Entity")]
        if len(entities) < 2 or entities[first % len(entities)] == entities[second % len(entities)]:
            return
        done, proposal = self.attempt(
            "merge", lambda: self.db.link(entities[first % len(entities)], entities[second % len(entities)], "same_as")
        )
        if done and getattr(proposal, "status", None) == "pending":
            self.attempt("merge", lambda: (self.db.accept_merge if accept else self.db.reject_merge)(proposal.pid))

    def _ingest(self, turns: list[tuple[str, str]], days: int) -> None:
        self.chats += 1
        session = SessionIn("1", None, [TurnIn(text, who, at=_day(days, i)) for i, (text, who) in enumerate(turns)])
        done, ids = self.attempt(
            "ingest", lambda: self.db.ingest(ConversationIn(f"chat{self.chats}", [PERSON], [session]))
        )
        if done:
            self.written.extend(nid for nid in ids if nid not in self.written)

    def _ask(
        self, question: str, as_of: str | None, include_cold: bool, k: int, known: str | None, superseded: bool
    ) -> None:
        options: dict[str, Any] = {
            "scope": PERSON,
            "as_of": as_of,
            "include_cold": include_cold,
            "k": k,
            "known_as_of": known,
            "include_superseded": superseded,
        }
        found = self.db.recall(question, **options)
        self.calls += 1
        self.check(found, superseded=superseded, now=as_of is None and known is None and not superseded)
        context = self.db.context(question, **options)
        self.calls += 1
        assert {item.node for item in context.items} <= {hit.node.id for hit in found.hits} | _turn_ids(found)

    def check(self, found: Recall, *, superseded: bool, now: bool) -> None:
        """Every hit believed at the belief time read, and valid at the moment read unless ``superseded``.

        A hit's validity is the node's as the store holds it now: a close the store learned after the belief
        time read (``closed_at``) was not known then. ``include_superseded`` reads every version believed,
        whatever its validity (``rows.believed_sql``).
        """
        at, known = parse_time(found.as_of), parse_time(found.known_as_of)
        for hit in found.hits:
            node = hit.node
            assert not node.purged and node.id not in self.purged, node.content
            assert parse_time(node.created_at) <= known, (node.content, node.created_at, found.known_as_of)
            assert node.expired_at is None or parse_time(node.expired_at) > known, (node.content, node.expired_at)
            if superseded:
                continue
            closed = node.invalid_at is not None and (node.closed_at is None or parse_time(node.closed_at) <= known)
            assert parse_time(node.valid_at) <= at, (node.content, node.valid_at, found.as_of)
            assert not closed or parse_time(node.invalid_at or "") > at, (node.content, node.invalid_at, node.closed_at)
            if now:  # read now: nothing the program retired, purged or replaced
                assert node.is_current and node.id not in self.gone, (node.content, node.id)


def _turn_ids(found: Recall) -> set[str]:
    return {turn.id for hit in found.hits for turn in hit.turns}


def _loop(embedder: StaticEmbedder, program: list[tuple[Any, ...]]) -> Loop:
    loop = Loop(WorldDB(":memory:", embedder=embedder, clock=FakeClock()))
    try:
        loop.db.scope(PERSON)  # asked of from the start, as an assistant's scope is
        loop.run(program)
        assert loop.db.verify().ok, loop.db.verify().violations[:3]
    finally:
        loop.db.close()
    return loop


@pytest.fixture(scope="module")
def tally() -> Iterator[Counter[str]]:
    """Programs run and calls made, printed at the end of the module (``-s`` shows it)."""
    counts: Counter[str] = Counter()
    yield counts
    print(f"\nloop property: {counts['programs']} programs, {counts['calls']} recall and context calls, none raised")


@FAST
@given(program=programs(30))
def test_recall_and_context_answer_whatever_the_loop_wrote(
    embedder: StaticEmbedder, tally: Counter[str], program: list[Any]
) -> None:
    tally.update(programs=1, calls=_loop(embedder, program).calls)


@pytest.mark.slow
@SLOW
@given(program=programs(60))
def test_recall_and_context_answer_whatever_the_loop_wrote_slow(
    embedder: StaticEmbedder, tally: Counter[str], program: list[Any]
) -> None:
    tally.update(programs=1, calls=_loop(embedder, program).calls)


# ---- appended live or ingested whole ----------------------------------------------------------------------

sitting = st.tuples(
    day,  # the sessions' days come in any order: a later sitting may be appended first
    st.lists(st.tuples(st.sampled_from(LINES), st.sampled_from(SPEAKERS[:3]), minute), min_size=1, max_size=6),
)
conversations = st.lists(sitting, min_size=1, max_size=4, unique_by=lambda s: s[0])


def _said(sessions: list[tuple[int, list[tuple[str, str, int]]]]) -> list[tuple[str, list[tuple[str, str, str]]]]:
    """Each session's name and its turns (text, speaker, time), in the order said within it."""
    out = []
    for number, (days, turns) in enumerate(sessions):
        at = sorted(minutes for _, _, minutes in turns)  # said in order, a minute or more apart
        out.append(
            (
                f"s{number}",
                [(text, who, _day(days, at[i] + i)) for i, (text, who, _) in enumerate(turns)],
            )
        )
    return out


asked = st.lists(st.sampled_from(QUESTIONS + LINES), min_size=3, max_size=3)


@FAST
@given(sessions=conversations, questions=asked)
def test_turns_appended_live_answer_as_the_conversation_ingested_whole(
    embedder: StaticEmbedder, sessions: list[Any], questions: list[str]
) -> None:
    _live_and_whole(embedder, sessions, questions)


@pytest.mark.slow
@settings(SLOW, max_examples=500)
@given(sessions=conversations, questions=asked)
def test_turns_appended_live_answer_as_the_conversation_ingested_whole_slow(
    embedder: StaticEmbedder, sessions: list[Any], questions: list[str]
) -> None:
    _live_and_whole(embedder, sessions, questions)


def _live_and_whole(embedder: StaticEmbedder, sessions: list[Any], questions: list[str]) -> None:
    said = _said(sessions)
    whole = WorldDB(":memory:", embedder=embedder, clock=FakeClock())
    live = WorldDB(":memory:", embedder=embedder, clock=FakeClock())
    try:
        conversation = ConversationIn(
            PERSON,
            [PERSON],
            [SessionIn(name, None, [TurnIn(t, who, at=at) for t, who, at in turns]) for name, turns in said],
        )
        batch = whole.ingest(conversation)
        appended = [
            live.add_turn(t, scope=PERSON, session=name, speaker=who, at=at)
            for name, turns in said
            for t, who, at in turns
        ]
        assert appended == batch
        for question in questions:
            for as_of in (None, "2023-08-15"):
                got = [
                    live.recall(question, scope=PERSON, as_of=as_of, k=8),
                    whole.recall(question, scope=PERSON, as_of=as_of, k=8),
                ]
                assert [[(h.node.id, round(h.score, 9)) for h in r.hits] for r in got][0] == [
                    (h.node.id, round(h.score, 9)) for h in got[1].hits
                ]
                texts = [db.context(question, scope=PERSON, as_of=as_of).text for db in (live, whole)]
                assert texts[0] == texts[1]
    finally:
        whole.close()
        live.close()


# ---- what the property found ------------------------------------------------------------------------------


def test_notes_among_live_turns_answer(embedder: StaticEmbedder) -> None:
    """Issue 34: the step that moves a turn saying a change looked a note's source up among the head's turns."""
    with WorldDB(":memory:", embedder=embedder, clock=FakeClock()) as db:
        for i, said in enumerate(
            ["Hi! How was your week?", "Great, I went hiking on Saturday", "Nice, where did you go?"]
        ):
            db.add_turn(said, scope=PERSON, speaker="Caroline" if i % 2 else "Mel", at=f"2023-11-01T10:0{i}:00Z")
        db.write("Our team standup is at 9:00", scope=PERSON, valid_at="2023-12-01")
        newer = db.write("We switched the standup to 9:30", scope=PERSON, valid_at="2024-01-10")
        found = db.recall("when is the standup?", scope=PERSON, k=5)
        assert newer in {hit.node.id for hit in found.hits}
        assert "9:30" in db.context("when is the standup?", scope=PERSON).text


@pytest.mark.parametrize("as_of", ["0001-01-01", "9999-12-20"])
def test_a_read_at_the_calendar_s_ends_answers(embedder: StaticEmbedder, as_of: str) -> None:
    """A question naming a period, read as of the calendar's first or last days, raised ValueError (year 10000)."""
    with WorldDB(":memory:", embedder=embedder, clock=FakeClock()) as db:
        db.write("I went hiking", scope=PERSON, valid_at="0001-01-01")
        for question in (
            "what did I do in December?",
            "this month",
            "yesterday",
            "today",
            "what did I do in July 1900?",
        ):
            assert db.recall(question, scope=PERSON, as_of=as_of).as_of.startswith(as_of)
            db.context(question, scope=PERSON, as_of=as_of)


def test_a_purged_turn_is_recalled_at_no_belief_time(embedder: StaticEmbedder) -> None:
    """Read as known before its purge, a purged turn came back empty through the speaker's entity."""
    with WorldDB(":memory:", embedder=embedder, clock=FakeClock()) as db:
        turn = db.add_turn("Hi! How was your week?", scope=PERSON, speaker="Caroline", at="2023-01-01T00:00:00Z")
        db.write("Our team standup is at 9:00", scope=PERSON)
        known = db._clock()  # type: ignore[attr-defined]  # a belief time after both writes, before the purge
        db.purge(turn)
        for question in ("Caroline's barber is Tomas on Elm Street", "how was your week?"):
            found = db.recall(question, scope=PERSON, known_as_of=known)
            assert turn not in {hit.node.id for hit in found.hits} and found.hits
            assert all(not hit.node.purged and not any(t.purged for t in hit.turns) for hit in found.hits)
