"""retrieval/late.py: the late-interaction lane (MaxSim over the bundled model's token vectors)."""

from __future__ import annotations

import copy
import warnings
from pathlib import Path

import numpy as np
import pytest

from worlddb_lite import InvalidInput, StaticEmbedder, WorldDB
from worlddb_lite.models.embed import BUNDLED_MODEL, TokenVectors, _shared_model, bundled_model_path
from worlddb_lite.retrieval import late
from worlddb_lite.store import connection, queries
from worlddb_lite.write.conversation import ConversationIn, SessionIn, TurnIn


@pytest.fixture
def store(tmp_path: Path, model: StaticEmbedder) -> WorldDB:
    db = WorldDB(str(tmp_path / "late.db"), embedder=model)
    turns = [
        "We pitched our tents at the campground by the lake",
        "My new laptop arrived on Monday",
        "The quarterly report is due soon",
        "Our dogs and cats sleep on the sofa",
    ]
    db.ingest(
        ConversationIn(
            "chat",
            ["ana"],
            [SessionIn("1", "2024-01-10", [TurnIn(text, "Ana", f"D1:{i}") for i, text in enumerate(turns, start=1)])],
        ),
    )
    return db


def _texts(db: WorldDB, nids: list[int]) -> dict[int, str]:
    return {nid: f"{name} {content}" for nid, name, content in queries.indexed(db._conn, nids)}


def test_the_token_table_has_one_unit_row_and_one_weight_per_token(tokens: TokenVectors) -> None:
    assert tokens.size == tokens.weight.shape[0] == len(tokens.vocabulary)
    norms = np.linalg.norm(tokens.unit(np.arange(tokens.size)), axis=1)
    assert np.allclose(norms[norms > 0], 1.0, atol=1e-4)
    the, campground = tokens.vocabulary["the"], tokens.vocabulary["campground"]
    assert tokens.weight[the] < tokens.weight[campground]  # the model weighs a frequent word down
    assert tokens.word_ids("camping") == [tokens.vocabulary["camping"]]


def test_a_candidate_that_says_it_in_other_words_ranks_first(store: WorldDB, tokens: TokenVectors) -> None:
    view = store._reader.view(None, None, False, world=None)
    nids = [int(n) for (n,) in store.sql("select nid from node_text")]
    texts = _texts(store, nids)
    for question, word in (("Where did we go camping?", "campground"), ("Which pets do they have?", "dogs")):
        given = sorted(nids, key=lambda n: word in texts[n])  # the one that answers comes last
        ranked = late.late_lane(view, tokens, question, given)
        assert word in texts[ranked[0]]
        assert sorted(ranked) == sorted(nids)  # it re-orders what it is given, never adds


def test_a_candidate_without_a_token_row_is_read_from_its_text(store: WorldDB, tokens: TokenVectors) -> None:
    view = store._reader.view(None, None, False, world=None)
    nids = [int(n) for (n,) in store.sql("select nid from node_text")]
    texts = _texts(store, nids)
    given = sorted(nids, key=lambda n: "campground" in texts[n])
    indexed = late.late_lane(view, tokens, "Where did we go camping?", given)
    with connection.engine_write(store._conn):  # as a process of older code would have left it
        store._conn.execute("delete from node_tokens")
    assert late.late_lane(view, tokens, "Where did we go camping?", given) == indexed
    assert "campground" in texts[indexed[0]]


def test_the_lane_reads_the_stored_token_rows_not_the_texts(
    store: WorldDB, tokens: TokenVectors, monkeypatch: pytest.MonkeyPatch
) -> None:
    view = store._reader.view(None, None, False, world=None)
    nids = [int(n) for (n,) in store.sql("select nid from node_text")]

    def no_texts(*_: object) -> None:
        raise AssertionError("the late lane read texts although every candidate has a token row")

    monkeypatch.setattr(queries, "indexed", no_texts)
    assert sorted(late.late_lane(view, tokens, "Where did we go camping?", nids)) == sorted(nids)


def test_extra_candidates_are_scored_past_the_pool_cut(
    store: WorldDB, tokens: TokenVectors, monkeypatch: pytest.MonkeyPatch
) -> None:
    view = store._reader.view(None, None, False, world=None)
    nids = [int(n) for (n,) in store.sql("select nid from node_text")]
    texts = _texts(store, nids)
    camp = next(n for n in nids if "campground" in texts[n])
    others = [n for n in nids if n != camp]
    monkeypatch.setattr(late, "LATE_POOL", 2)
    assert camp not in late.late_lane(view, tokens, "Where did we go camping?", [*others, camp])  # cut off
    ranked = late.late_lane(view, tokens, "Where did we go camping?", [*others, camp], [camp, others[0]])
    assert ranked[0] == camp and sorted(ranked) == sorted([*others[:2], camp])  # an extra in the pool: once


def test_nothing_to_match_gives_no_ranking(store: WorldDB, tokens: TokenVectors) -> None:
    view = store._reader.view(None, None, False, world=None)
    assert late.late_lane(view, tokens, "what is it?", [1, 2, 3]) == []  # only function words
    assert late.late_lane(view, tokens, "camping", []) == []


def test_recall_says_when_the_late_lane_ranked_a_hit(store: WorldDB) -> None:
    found = store.recall("Where did we go camping?", scope="ana", k=2)
    assert "campground" in (found.hits[0].node.content or "")
    assert "late" in {r.lane for r in found.hits[0].why}


def test_an_embedder_without_a_token_table_recalls_without_the_lane(db: WorldDB) -> None:
    db.ingest(
        ConversationIn(
            "chat",
            ["ana"],
            [SessionIn("1", "2024-01-10", [TurnIn("We pitched our tents at the campground", "Ana", "D1:1")])],
        ),
    )
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
    assert table.weight.shape == (10,) and np.allclose(np.linalg.norm(table.unit(np.arange(10)), axis=1), 1.0)


def test_recall_without_the_late_lane_when_asked(store: WorldDB, tmp_path: Path) -> None:
    found = store.recall("Where did we go camping?", scope="ana", k=4, late=False)
    assert found.hits and all("late" not in {r.lane for r in hit.why} for hit in found.hits)
    with pytest.raises(InvalidInput, match="late must be True or False"):
        store.recall("camping", scope="ana", late="no")  # type: ignore[arg-type]


def test_a_long_question_is_matched_by_its_weightiest_tokens(
    store: WorldDB, tokens: TokenVectors, monkeypatch: pytest.MonkeyPatch
) -> None:
    view = store._reader.view(None, None, False, world=None)
    nids = [int(n) for (n,) in store.sql("select nid from node_text")]
    texts = _texts(store, nids)
    assert tokens.weight[tokens.vocabulary["campground"]] > tokens.weight[tokens.vocabulary["laptop"]]
    monkeypatch.setattr(late, "LATE_ASKED", 1)
    ranked = late.late_lane(view, tokens, "laptop campground", sorted(nids, key=lambda n: "campground" in texts[n]))
    assert "campground" in texts[ranked[0]]  # "laptop" was left out, not the rarer word


def test_question_tokens_of_no_weight_give_no_ranking(store: WorldDB, tokens: TokenVectors) -> None:
    view = store._reader.view(None, None, False, world=None)
    weightless = copy.copy(tokens)
    weightless.weight = np.zeros_like(tokens.weight)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no 0/0 on the way
        assert late.late_lane(view, weightless, "Where did we go camping?", [1, 2, 3]) == []


def test_an_embedder_that_is_not_a_static_model_gets_no_late_lane(tmp_path: Path, model: StaticEmbedder) -> None:
    class Wrapped:  # another embedder with an attribute of the same name, of another shape
        model_id, dim = model.model_id, model.dim
        token_vectors = property(lambda self: model.token_vectors())

        def embed(self, texts: list[str]) -> np.ndarray:
            return model.embed(texts)

    db = WorldDB(str(tmp_path / "wrapped.db"), embedder=Wrapped())
    db.ingest(
        ConversationIn(
            "chat",
            ["ana"],
            [SessionIn("1", "2024-01-10", [TurnIn("We pitched our tents at the campground", "Ana", "D1:1")])],
        ),
    )
    found = db.recall("camping", scope="ana", k=1)
    assert found.hits and "late" not in {r.lane for r in found.hits[0].why}


def test_the_unit_rows_are_the_whole_table_normalised_bit_for_bit(tokens: TokenVectors) -> None:
    # the table keeps no float32 copy: each row made on demand must equal the old whole-table division
    model = _shared_model(str(bundled_model_path()), BUNDLED_MODEL)
    rows = np.array(model.embedding, dtype=np.float32)
    length = np.sqrt(np.einsum("ij,ij->i", rows, rows))
    rows /= np.where(length > 0, length, 1.0)[:, None]
    ids = np.arange(tokens.size)
    assert np.array_equal(tokens.unit(ids), rows)
    assert np.array_equal(tokens.weight, length)
    picked = np.array([5, 2641, 7, 2641, 29524])
    assert np.array_equal(tokens.unit(picked), rows[picked])


def test_candidates_with_the_same_best_matches_score_exactly_alike() -> None:
    # bench/aarch64.sh: a BLAS product gave two such candidates scores a float step apart on x86-64 and
    # equal ones on aarch64, so one store ranked them differently by machine; these values did it here
    column = np.array([0.7306391000747681, 0.3615676462650299, 0.21433191001415253, 0.4683673679828644], np.float32)
    best = np.repeat(column[:, None], 172, axis=1)
    weight = np.array([0.4096890985965729, 0.4941195547580719, 0.933792769908905, 0.6373119354248047], np.float32)
    assert len(set(late.maxsim(weight, best).tolist())) == 1
