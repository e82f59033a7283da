"""retrieval/late.py: the late-interaction lane (MaxSim over the bundled model's token vectors)."""

from __future__ import annotations

import copy
import gc
import warnings
import weakref
from pathlib import Path

import numpy as np
import pytest

from worlddb_lite import InvalidInput, StaticEmbedder, WorldDB, reads
from worlddb_lite.conversation import ConversationIn, SessionIn, TurnIn, ingest
from worlddb_lite.embed import TokenVectors
from worlddb_lite.retrieval import late


@pytest.fixture(scope="module")
def model() -> StaticEmbedder:
    return StaticEmbedder()


@pytest.fixture(scope="module")
def tokens(model: StaticEmbedder) -> TokenVectors:
    return model.token_vectors()


@pytest.fixture
def store(tmp_path: Path, model: StaticEmbedder) -> WorldDB:
    db = WorldDB(str(tmp_path / "late.db"), embedder=model)
    turns = ["We pitched our tents at the campground by the lake",
             "My new laptop arrived on Monday",
             "The quarterly report is due soon",
             "Our dogs and cats sleep on the sofa"]
    ingest(db, ConversationIn("chat", ["ana"], [SessionIn("1", "2024-01-10", [
        TurnIn(text, "Ana", f"D1:{i}") for i, text in enumerate(turns, start=1)])]))
    return db


def _words(tokens: TokenVectors, ids: list[int]) -> list[str]:
    names = {tid: piece for piece, tid in tokens.vocabulary.items()}
    return [names[i] for i in ids]


def test_the_token_table_has_one_unit_row_and_one_weight_per_token(tokens: TokenVectors) -> None:
    assert tokens.unit.shape[0] == tokens.weight.shape[0] == len(tokens.vocabulary)
    norms = np.linalg.norm(tokens.unit, axis=1)
    assert np.allclose(norms[norms > 0], 1.0, atol=1e-4)
    the, campground = tokens.vocabulary["the"], tokens.vocabulary["campground"]
    assert tokens.weight[the] < tokens.weight[campground]  # the model weighs a frequent word down
    assert tokens.word_ids("camping") == [tokens.vocabulary["camping"]]


def test_a_text_is_read_as_its_content_tokens_in_order_and_cut(tokens: TokenVectors) -> None:
    reader = late._Reader(tokens)
    assert _words(tokens, reader.ids("The dogs, and the CATS!", 10)) == ["dogs", "cats"]
    assert _words(tokens, reader.ids("tents tents campground lake", 2)) == ["tents", "tents"]
    assert reader.ids("the and of ...", 10) == []
    assert reader.text_ids("dogs and cats") == reader.ids("dogs and cats", late.LATE_TOKENS)


def test_the_caches_start_again_when_full_and_answer_the_same(tokens: TokenVectors,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    reader = late._Reader(tokens)
    monkeypatch.setattr(late._Reader, "WORDS", 3)
    monkeypatch.setattr(late._Reader, "TEXTS", 2)
    first = [reader.text_ids(t) for t in ("red apples", "green pears", "blue plums", "red apples")]
    assert len(reader.words) <= 3 and len(reader.texts) <= 2
    assert first[0] == first[3] == reader.ids("red apples", late.LATE_TOKENS)


def test_a_candidate_that_says_it_in_other_words_ranks_first(store: WorldDB, tokens: TokenVectors) -> None:
    view = store._view(None, None, False, world=None)
    nids = [int(n) for (n,) in store._conn.execute("select rowid from node_fts where content is not null")]
    texts = reads.texts(store._conn, nids, 1000)
    for question, word in (("Where did we go camping?", "campground"), ("Which pets do they have?", "dogs")):
        given = sorted(nids, key=lambda n: word in texts[n])  # the one that answers comes last
        ranked = late.late_lane(view, tokens, question, given)
        assert word in texts[ranked[0]]
        assert sorted(ranked) == sorted(nids)  # it re-orders what it is given, never adds


def test_nothing_to_match_gives_no_ranking(store: WorldDB, tokens: TokenVectors) -> None:
    view = store._view(None, None, False, world=None)
    assert late.late_lane(view, tokens, "what is it?", [1, 2, 3]) == []  # only function words
    assert late.late_lane(view, tokens, "camping", []) == []


def test_recall_says_when_the_late_lane_ranked_a_hit(store: WorldDB) -> None:
    found = store.recall("Where did we go camping?", scope="ana", k=2)
    assert "campground" in (found.hits[0].node.content or "")
    assert "late" in {r.lane for r in found.hits[0].why}


def test_an_embedder_without_a_token_table_recalls_without_the_lane(db: WorldDB) -> None:
    ingest(db, ConversationIn("chat", ["ana"], [SessionIn("1", "2024-01-10", [
        TurnIn("We pitched our tents at the campground", "Ana", "D1:1")])]))
    found = db.recall("campground", scope="ana", k=1)
    assert found.hits and "late" not in {r.lane for r in found.hits[0].why}


def test_a_word_splits_as_the_whole_tokenizer_splits_it(tokens: TokenVectors) -> None:
    full = tokens._tokenizer  # the fast path skips its normalizer and pre-tokenizer only where that changes nothing
    for word in ("memory", "campground", "xylophonists", "2024", "b12", "café", "naïve", "straße", "日本", "ｆｕｌｌ"):
        assert tokens.word_ids(word) == full.encode(word, add_special_tokens=False).ids, word


def test_a_tokenizer_whose_model_alone_splits_differently_is_used_whole() -> None:
    class Encoding:
        ids = [7, 8]

    class Tokenizer:
        model = None  # no tokenize of its own

        def get_vocab(self) -> dict[str, int]:
            return {f"t{i}": i for i in range(10)}

        def encode(self, word: str, add_special_tokens: bool = True) -> Encoding:
            return Encoding()

    class Model:
        embedding = np.eye(10, 4, dtype=np.float32) + 0.1
        tokenizer = Tokenizer()

    table = TokenVectors(Model())
    assert table.word_ids("memory") == [7, 8]
    assert table.weight.shape == (10,) and np.allclose(np.linalg.norm(table.unit, axis=1), 1.0)


def test_recall_without_the_late_lane_when_asked(store: WorldDB, tmp_path: Path) -> None:
    found = store.recall("Where did we go camping?", scope="ana", k=4, late=False)
    assert found.hits and all("late" not in {r.lane for r in hit.why} for hit in found.hits)
    with pytest.raises(InvalidInput, match="late must be True or False"):
        store.recall("camping", scope="ana", late="no")  # type: ignore[arg-type]


def test_content_tokens_are_judged_without_the_vocabulary_word_marks() -> None:
    class Table:  # a sentencepiece / byte-level vocabulary marks where words start
        vocabulary = {"▁camping": 0, "▁the": 1, "ing": 2, ",": 3, "Ġdog": 4, "Ġof": 5, "##s": 6, "▁": 7}
        unit = np.eye(8, dtype=np.float32)

    skip = late._Reader(Table()).skip  # type: ignore[arg-type]
    assert [bool(x) for x in skip] == [False, True, False, True, False, True, False, True]


def test_a_long_question_is_matched_by_its_weightiest_tokens(store: WorldDB, tokens: TokenVectors,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    view = store._view(None, None, False, world=None)
    nids = [int(n) for (n,) in store._conn.execute("select rowid from node_fts where content is not null")]
    texts = reads.texts(store._conn, nids, 1000)
    assert tokens.weight[tokens.vocabulary["campground"]] > tokens.weight[tokens.vocabulary["laptop"]]
    monkeypatch.setattr(late, "LATE_ASKED", 1)
    ranked = late.late_lane(view, tokens, "laptop campground", sorted(nids, key=lambda n: "campground" in texts[n]))
    assert "campground" in texts[ranked[0]]  # "laptop" was left out, not the rarer word


def test_question_tokens_of_no_weight_give_no_ranking(store: WorldDB, tokens: TokenVectors) -> None:
    view = store._view(None, None, False, world=None)
    weightless = copy.copy(tokens)
    weightless.weight = np.zeros_like(tokens.weight)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no 0/0 on the way
        assert late.late_lane(view, weightless, "Where did we go camping?", [1, 2, 3]) == []


def test_a_reader_goes_with_its_token_table_and_keeps_no_long_word(tokens: TokenVectors) -> None:
    table = copy.copy(tokens)
    reader = late._reader(table)
    assert late._reader(table) is reader and table in late._READERS
    blob = "q" * (late._Reader.LONGEST + 1)
    assert reader.ids(blob, 5) == reader.ids(blob, 5) and blob not in reader.words
    gone = weakref.ref(table)
    held = len(late._READERS)
    del table, reader
    gc.collect()
    assert gone() is None and len(late._READERS) == held - 1


def test_an_embedder_that_is_not_a_static_model_gets_no_late_lane(tmp_path: Path, model: StaticEmbedder) -> None:
    class Wrapped:  # another embedder with an attribute of the same name, of another shape
        model_id, dim = model.model_id, model.dim
        token_vectors = property(lambda self: model.token_vectors())

        def embed(self, texts: list[str]) -> np.ndarray:
            return model.embed(texts)

    db = WorldDB(str(tmp_path / "wrapped.db"), embedder=Wrapped())
    ingest(db, ConversationIn("chat", ["ana"], [SessionIn("1", "2024-01-10", [
        TurnIn("We pitched our tents at the campground", "Ana", "D1:1")])]))
    found = db.recall("camping", scope="ana", k=1)
    assert found.hits and "late" not in {r.lane for r in found.hits[0].why}
