"""bridge.py: a turn is indexed with what its pronouns refer to; what is stored stays verbatim."""

from __future__ import annotations

from pathlib import Path

import pytest

from worlddb_lite import InvalidInput, WorldDB
from worlddb_lite.store import queries
from worlddb_lite.text.windows import window, words_around
from worlddb_lite.write.bridge import ContextBridge, mentions
from worlddb_lite.write.conversation import ConversationIn, IngestStats, SessionIn, TurnIn

from .conftest import FakeClock, FakeEmbedder, OtherFakeEmbedder, nid_of, table_digest

PARK = ("I met Caroline at the park.", "She told me about the adoption agency.")


def _chat(*texts: str, speaker: str = "me") -> ConversationIn:
    return ConversationIn("c", ["me"], [SessionIn("1", "2024-03-01", [TurnIn(t, speaker) for t in texts])])


def _found(db: WorldDB, query: str) -> list[str]:
    return [node.content or "" for node, _ in db.search(query)]


def test_she_is_found_by_the_name_she_stands_for_only_with_the_bridge(db: WorldDB) -> None:
    plain = WorldDB(":memory:", embedder=FakeEmbedder(), clock=FakeClock())
    try:
        ids = plain.ingest(_chat(*PARK), window=0, word_window=0)  # the bridge alone: no earlier turn indexed
        assert _found(plain, "Caroline") == [PARK[0]]
    finally:
        plain.close()
    stats = IngestStats()
    assert db.ingest(_chat(*PARK), bridge=True, window=0, word_window=0, stats=stats) == ids  # not in the node id
    assert sorted(_found(db, "Caroline")) == sorted(PARK)
    assert [db.read(i).content for i in ids] == list(PARK)  # stored verbatim
    assert stats.bridged == 1 and stats.turns == 2
    assert db.verify().ok and not db.verify(deep=True).violations


def test_the_vector_carries_the_context_too(db: WorldDB) -> None:
    def closeness(store: WorldDB, bridge: bool) -> float:
        second = store.ingest(_chat(*PARK), bridge=bridge, window=0)[1]
        return next(score for node, score in store.nearest("Caroline", k=2, types=["Turn"]) if node.id == second)

    plain = WorldDB(":memory:", embedder=FakeEmbedder(), clock=FakeClock())
    try:
        assert closeness(db, True) > closeness(plain, False) + 0.2  # the fake embedder hashes words: "caroline"
    finally:
        plain.close()


def test_that_noun_points_at_the_phrase_it_names() -> None:
    bridge = ContextBridge()
    texts = [
        "We build everything with the Django framework.",
        "I keep fighting with that framework.",
        "Anyway, lunch was fine.",
    ]
    assert bridge.session(texts) == ["", "Django framework", ""]


def test_speakers_and_what_the_turn_names_itself_are_never_added() -> None:
    bridge = ContextBridge()
    texts = ["Hey Melanie, I saw Jon at the gym.", "Did he say anything?", "Jon said he is moving."]
    assert bridge.session(texts, speakers=["Caroline", "Melanie", "Caroline"]) == ["", "Jon", ""]
    assert bridge.session(["Hi Sam, how are you?", "She is fine, thanks."]) == ["", "Sam"]
    assert bridge.session(["Hi Sam, how are you?", "She is fine, thanks."], speakers=["Ana", "Sam"]) == ["", ""]


def test_mentions_skip_sentence_openers_months_and_pronouns() -> None:
    assert mentions("Yesterday I went out. In May we met Jon and the new neighbours.") == [
        ("Jon", True),
        ("neighbours", False),
    ]
    assert ("Caroline", True) in mentions("Caroline and Mel went to the lake.")  # an opener paired with a name
    assert ("Caroline", True) in mentions("Caroline loved it.", {"Caroline"})  # an opener seen before


def test_the_bridge_is_deterministic_and_leaves_the_store_alone_on_a_second_ingest(db: WorldDB) -> None:
    texts = ("My sister Emma visited Lisbon.", "She loved it there.", "It was her first trip abroad.")
    assert ContextBridge().session(texts) == ContextBridge().session(texts)
    ids = db.ingest(_chat(*texts), bridge=True)
    before = table_digest(db)
    assert db.ingest(_chat(*texts), bridge=True) == ids
    assert table_digest(db) == before
    assert db.verify().ok


def test_index_context_is_checked_and_off_by_default(db: WorldDB) -> None:
    with pytest.raises(InvalidInput, match="index_context must be text"):
        db.write("hello", index_context=5)  # type: ignore[arg-type]
    with pytest.raises(InvalidInput, match="bridge must be True, False or a ContextBridge"):
        db.ingest(_chat(*PARK), bridge="yes")  # type: ignore[arg-type]
    with pytest.raises(InvalidInput, match="bridge window must be a whole number"):
        ContextBridge(window=0)
    db.ingest(_chat(*PARK), window=0, word_window=0)  # the bridge is off by default (the windows are apart)
    assert _found(db, "Caroline") == [PARK[0]]


def test_the_window_indexes_each_turn_with_the_one_before_it(db: WorldDB) -> None:
    talk = ("Did you go to the pottery class on Sunday?", "Yes, and I made a bowl!", "Lovely.")
    ids = db.ingest(_chat(*talk), word_window=1)  # window=1 by default
    assert sorted(_found(db, "pottery")) == sorted(talk[:2])  # the reply is found by what it answers
    assert "Lovely." not in _found(db, "pottery")  # only the turn right before, not two back
    assert [db.read(i).content for i in ids] == list(talk)  # stored verbatim; ids do not depend on the window
    assert db.verify().ok


def test_the_word_window_indexes_turns_around_for_their_words_alone(tmp_path: Path) -> None:
    talk = (
        "Did you go to the pottery class on Sunday?",
        "Yes, and I made a bowl!",
        "Lovely.",
        "Thanks!",
        "What glaze?",
        "A blue one.",
    )
    stores = {}
    for word_window in (1, 4):  # 1 and no turn after: nothing beyond the one before
        store = stores[word_window] = WorldDB(str(tmp_path / f"w{word_window}.db"), embedder=FakeEmbedder())
        store.ingest(_chat(*talk), word_window=word_window, word_after=0 if word_window == 1 else 2)
    wide, narrow = stores[4], stores[1]
    try:
        found = _found(wide, "pottery")
        assert sorted(found[:2]) == sorted(talk[:2]) and sorted(found[2:]) == sorted(talk[2:5])  # 4 turns back at most
        assert sorted(_found(narrow, "pottery")) == sorted(talk[:2])
        rows = dict(wide.sql("select content, context from node_text where content like 'Lovely.%'"))
        assert rows == {
            "Lovely.\nme: Yes, and I made a bowl!": (
                "me: Did you go to the pottery class on Sunday?\nme: Thanks!\nme: What glaze?"
            )
        }
        found = _found(wide, "glaze")  # the turn itself and the one after, then the two before it (2 turns ahead)
        assert sorted(found[:2]) == sorted(talk[4:]) and sorted(found[2:]) == sorted(talk[2:4])

        # only the words: the vectors (and whatever else reads the content column) are the narrow store's
        def near(store: WorldDB) -> list[tuple[str | None, float]]:
            return [(node.content, score) for node, score in store.nearest("pottery", k=6, types=["Turn"])]

        assert near(wide) == near(narrow)
        assert wide.verify(deep=True).ok
    finally:
        for store in stores.values():
            store.close()


def test_words_around_stop_at_an_assistant_turn_on_both_sides() -> None:
    texts = ["a", "b", "c", "d", "e"]
    assert words_around(texts, before=2, skip=1, after=1) == ["b", "c", "a\nd", "b\ne", "c"]
    assert words_around(texts, speakers=["u", "u", "assistant", "u"], before=3, skip=0, after=3) == [
        "u: b",
        "u: a",
        "",
        "e",
        "u: d",
    ]  # the fifth turn's speaker is unknown: a person's


def test_words_of_the_context_column_weigh_less_than_the_content(db: WorldDB, monkeypatch: pytest.MonkeyPatch) -> None:
    inside = nid_of(db, db.write("pottery class", word_context="filler words here"))
    beside = nid_of(db, db.write("filler words here", word_context="pottery class"))  # same words and length

    def scores() -> dict[int, float]:
        return dict(queries.fts_ranked(db._conn, "pottery", 5))

    assert 0 < scores()[beside] < scores()[inside] and 0 < queries.CONTEXT_WEIGHT < 1
    monkeypatch.setattr(queries, "CONTEXT_WEIGHT", 1.0)  # read when the query runs
    assert scores()[beside] == pytest.approx(scores()[inside])


def test_window_zero_indexes_each_turn_alone_and_bad_windows_are_refused(db: WorldDB) -> None:
    talk = ("Did you go to the pottery class?", "Yes, I made a bowl!")
    db.ingest(_chat(*talk), window=0, word_window=0)
    assert _found(db, "pottery") == [talk[0]]
    assert window(["a", "b", "c"], speakers=["x", None, "z"], turns=2) == ["", "x: a", "x: a\nb"]
    assert window(["a", "b", "c", "d"], turns=3, skip=1) == ["", "", "a", "a\nb"]  # the nearest left out
    assert window(["a", "b", "c"], turns=1, skip=1) == ["", "", ""]
    assert window(["a" * 50, "b"], turns=1, chars=10) == ["", "a" * 10]
    # an assistant's turn is indexed alone and lends its words to none; the window stops at it
    assert window(["q", "reply", "more", "again"], speakers=["user", "Assistant", "user", "user"], turns=2) == [
        "",
        "",
        "",
        "user: more",
    ]
    assert window(["a", "b", "c"], speakers=["x", "system", "y"], turns=1) == ["", "", ""]
    with pytest.raises(InvalidInput, match="window turns"):
        window(["a"], turns=-1)
    with pytest.raises(InvalidInput, match="window skip"):
        window(["a"], skip=True)
    for bad in ({"window": -1}, {"word_window": 1.5}, {"word_window": True}, {"word_after": -2}):
        with pytest.raises(InvalidInput, match="must be a whole number of turns"):
            db.ingest(_chat("another"), **bad)  # type: ignore[arg-type]
    with pytest.raises(InvalidInput, match="word_context must be text"):
        db.write("hello", word_context=5)  # type: ignore[arg-type]


def test_a_re_embedding_keeps_the_context_the_first_embedding_saw(tmp_path: Path) -> None:
    path = str(tmp_path / "re.db")
    with WorldDB(path, embedder=FakeEmbedder()) as store:
        second = store.ingest(_chat(*PARK), bridge=True, window=0)[1]
        before = next(s for n, s in store.nearest("Caroline", k=2, types=["Turn"]) if n.id == second)
    WorldDB.reembed(path, embedder=OtherFakeEmbedder())
    with WorldDB(path, embedder=OtherFakeEmbedder()) as store:
        after = next(s for n, s in store.nearest("Caroline", k=2, types=["Turn"]) if n.id == second)
        assert after == pytest.approx(before, abs=1e-5)  # same hashing model, same text: "Caroline" still in it
        assert store.read(second).content == PARK[1]
        assert store.verify(deep=True).ok


def test_a_conversation_in_decomposed_unicode_is_indexed_as_its_blobs_hold_it(tmp_path: Path) -> None:
    # review: contexts and bridged names quoted the caller's NFD text ("Rene\u0301") while the blobs hold NFC,
    # so verify --deep reported the bridged row's words as said by nobody
    texts = ["We met Rene\u0301 at the cafe\u0301 yesterday.", "He said the garden was lovely.", "He knows it."]
    with WorldDB(str(tmp_path / "s.db")) as db:
        turns = [TurnIn(t, speaker="Ana\u0301"[: 3 + i % 2]) for i, t in enumerate(texts)]
        db.ingest(ConversationIn("c1", ["s"], [SessionIn("s1", "2024-05-01", turns)]), bridge=True)
        report = db.verify(deep=True)
        assert report.ok, report.violations
        assert db.search("René") and db.search("cafe\u0301")  # either form finds it
