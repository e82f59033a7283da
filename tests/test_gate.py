"""gate.py: novelty by compression against what came before, rule-based salience, extraction gated."""

from __future__ import annotations

import pytest

from worlddb_lite import InvalidInput, WorldDB
from worlddb_lite.write.conversation import ConversationIn, IngestStats, SessionIn, TurnIn
from worlddb_lite.write.gate import EncodingGate, novelty, salience

HISTORY = [
    "I live in Austin with my two cats, Miso and Tofu.",
    "How long have you lived there?",
    "About six years now, since I moved for my job at Dell.",
]


def _chat(conv: str, date: str, *texts: str) -> ConversationIn:
    return ConversationIn(conv, ["me"], [SessionIn(date, date, [TurnIn(t, "me") for t in texts])])


def test_a_repeated_turn_scores_lower_than_a_novel_one() -> None:
    gate = EncodingGate()
    repeat = gate.score(HISTORY[0], HISTORY)
    novel = gate.score("My sister Emma is getting married in Lisbon next June.", HISTORY)
    assert repeat.novelty < 0.3 < 0.6 < novel.novelty
    assert repeat.score < novel.score
    assert novelty("anything at all", []) == 1.0  # nothing before it: all new


def test_filler_gets_low_salience() -> None:
    for filler in ("ok", "lol", "thanks!", "Haha, sure. See ya!", "Sounds good, thank you so much!"):
        assert salience(filler) < 0.1, filler
    assert salience("Cool, what did you think of it?") < salience("I adopted a puppy named Rex last week!")
    assert salience("I started a new job at Dell on March 3.") >= 0.7  # first person, a date, a name


def test_the_store_s_nearest_turns_make_a_repeat_from_another_session_cheap(db: WorldDB) -> None:
    gate = EncodingGate(window=0, neighbours=3)  # no window: only the stored neighbours can know it
    db.ingest(_chat("c", "2024-01-10", *HISTORY), gate=gate)
    [again, new] = db.ingest(_chat("c", "2024-02-10", HISTORY[2], "We are redoing the kitchen in oak."), gate=gate)
    assert db.read(again).salience < db.read(new).salience  # the gate's score is the turn's salience
    alone = EncodingGate(window=0, neighbours=0).session(db._writer, [HISTORY[2]], scope=db.scope("me"))[0]
    assert db.read(again).salience < alone.score


def test_gated_turns_are_stored_verbatim_but_yield_no_facts(db: WorldDB) -> None:
    texts = ("I work at Google.", "ok lol", "I moved to Denver last week.")
    stats = IngestStats()
    ids = db.ingest(_chat("c", "2024-03-01", *texts), gate=EncodingGate(threshold=0.99), stats=stats)
    assert [db.read(i).content for i in ids] == list(texts)
    assert db.nodes(world=db.scope("me"), type="Fact") == [] and db.nodes(world=db.scope("me"), type="Entity") == []
    assert stats.below_gate == 3 and stats.turns == 3
    assert all(0 <= db.read(i).salience < 0.99 for i in ids) and db.read(ids[1]).salience == 0.0
    db.ingest(_chat("d", "2024-03-02", *texts), gate=EncodingGate(threshold=0.99), deferred=True)
    assert db.queued() == 0  # a gated turn is not queued for System 2 either
    assert db.verify().ok


def test_the_gate_is_off_by_default_and_lets_salient_turns_through(db: WorldDB) -> None:
    [plain] = db.ingest(_chat("c", "2024-03-01", "I work at Google."))
    assert db.read(plain).salience == 0.0
    stats = IngestStats()
    [kept, filler] = db.ingest(
        _chat("d", "2024-03-02", "I moved to Denver last week.", "ok lol"), gate=EncodingGate(), stats=stats
    )
    assert stats.below_gate == 1 and db.read(kept).salience > EncodingGate().threshold > db.read(filler).salience
    assert {str(n.props["value"]) for n in db.nodes(world=db.scope("me"), type="Fact")} == {"Google", "Denver"}


def test_scores_are_deterministic_and_bad_settings_are_refused(db: WorldDB) -> None:
    gate = EncodingGate()
    assert gate.score("I love hiking in the Alps.", HISTORY) == gate.score("I love hiking in the Alps.", HISTORY)
    for bad in ({"threshold": 1.5}, {"threshold": "high"}, {"window": -1}, {"neighbours": 2.5}):
        with pytest.raises(InvalidInput, match="gate"):
            EncodingGate(**bad)
    with pytest.raises(InvalidInput, match="gate must be an EncodingGate"):
        db.ingest(_chat("c", "2024-03-01", "hello"), gate=0.5)  # type: ignore[arg-type]
