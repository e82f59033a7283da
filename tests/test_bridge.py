"""bridge.py: a turn is indexed with what its pronouns refer to; what is stored stays verbatim."""

from __future__ import annotations

import pytest

from worlddb_lite import InvalidInput, WorldDB
from worlddb_lite.bridge import ContextBridge, mentions
from worlddb_lite.conversation import ConversationIn, IngestStats, SessionIn, TurnIn, ingest

from .conftest import FakeClock, FakeEmbedder, table_digest

PARK = ("I met Caroline at the park.", "She told me about the adoption agency.")


def _chat(*texts: str, speaker: str = "me") -> ConversationIn:
    return ConversationIn("c", ["me"], [SessionIn("1", "2024-03-01", [TurnIn(t, speaker) for t in texts])])


def _found(db: WorldDB, query: str) -> list[str]:
    return [node.content or "" for node, _ in db.search(query)]


def test_she_is_found_by_the_name_she_stands_for_only_with_the_bridge(db: WorldDB) -> None:
    plain = WorldDB(":memory:", embedder=FakeEmbedder(), clock=FakeClock())
    try:
        ids = ingest(plain, _chat(*PARK))
        assert _found(plain, "Caroline") == [PARK[0]]
    finally:
        plain.close()
    stats = IngestStats()
    assert ingest(db, _chat(*PARK), bridge=True, stats=stats) == ids  # the index text is not in the node id
    assert sorted(_found(db, "Caroline")) == sorted(PARK)
    assert [db.read(i).content for i in ids] == list(PARK)  # stored verbatim
    assert stats.bridged == 1 and stats.turns == 2
    assert db.verify().ok and not db.verify(deep=True).violations


def test_the_vector_carries_the_context_too(db: WorldDB) -> None:
    def closeness(store: WorldDB, bridge: bool) -> float:
        second = ingest(store, _chat(*PARK), bridge=bridge)[1]
        return next(score for node, score in store.nearest("Caroline", k=2, types=["Turn"]) if node.id == second)

    plain = WorldDB(":memory:", embedder=FakeEmbedder(), clock=FakeClock())
    try:
        assert closeness(db, True) > closeness(plain, False) + 0.2  # the fake embedder hashes words: "caroline"
    finally:
        plain.close()


def test_that_noun_points_at_the_phrase_it_names() -> None:
    bridge = ContextBridge()
    texts = ["We build everything with the Django framework.", "I keep fighting with that framework.",
             "Anyway, lunch was fine."]
    assert bridge.session(texts) == ["", "Django framework", ""]


def test_speakers_and_what_the_turn_names_itself_are_never_added() -> None:
    bridge = ContextBridge()
    texts = ["Hey Melanie, I saw Jon at the gym.", "Did he say anything?", "Jon said he is moving."]
    assert bridge.session(texts, speakers=["Caroline", "Melanie", "Caroline"]) == ["", "Jon", ""]
    assert bridge.session(["Hi Sam, how are you?", "She is fine, thanks."]) == ["", "Sam"]
    assert bridge.session(["Hi Sam, how are you?", "She is fine, thanks."], speakers=["Ana", "Sam"]) == ["", ""]


def test_mentions_skip_sentence_openers_months_and_pronouns() -> None:
    assert mentions("Yesterday I went out. In May we met Jon and the new neighbours.") == [
        ("Jon", True), ("neighbours", False)]
    assert ("Caroline", True) in mentions("Caroline and Mel went to the lake.")  # an opener paired with a name
    assert ("Caroline", True) in mentions("Caroline loved it.", {"Caroline"})  # an opener seen before


def test_the_bridge_is_deterministic_and_leaves_the_store_alone_on_a_second_ingest(db: WorldDB) -> None:
    texts = ("My sister Emma visited Lisbon.", "She loved it there.", "It was her first trip abroad.")
    assert ContextBridge().session(texts) == ContextBridge().session(texts)
    ids = ingest(db, _chat(*texts), bridge=True)
    before = table_digest(db)
    assert ingest(db, _chat(*texts), bridge=True) == ids
    assert table_digest(db) == before
    assert db.verify().ok


def test_index_context_is_checked_and_off_by_default(db: WorldDB) -> None:
    with pytest.raises(InvalidInput, match="index_context must be text"):
        db.write("hello", index_context=5)  # type: ignore[arg-type]
    with pytest.raises(InvalidInput, match="bridge must be True, False or a ContextBridge"):
        ingest(db, _chat(*PARK), bridge="yes")  # type: ignore[arg-type]
    with pytest.raises(InvalidInput, match="bridge window must be a whole number"):
        ContextBridge(window=0)
    ingest(db, _chat(*PARK))
    assert _found(db, "Caroline") == [PARK[0]]
