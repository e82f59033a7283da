"""index/world_vectors.py: composed world embeddings kept incrementally at commit (content/effective split)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from worlddb_lite import InvalidInput, WorldDB
from worlddb_lite.index.world_vectors import compose_from_scratch, pool_weights
from worlddb_lite.models.embed import embedding_text
from worlddb_lite.store import connection, vector_codes
from worlddb_lite.write.conversation import ConversationIn, SessionIn, TurnIn

from .conftest import FakeClock, FakeEmbedder


def _nid(db: WorldDB, node_id: str) -> int:
    return int(db.sql("select nid from node where id = ?", (bytes.fromhex(node_id),))[0][0])


def _vector(db: WorldDB, node_id: str) -> np.ndarray:
    blob, scale = db.sql("select embedding, scale from node_vec where rowid = ?", (_nid(db, node_id),))[0]
    return vector_codes.row(blob, scale)


def _chain(db: WorldDB) -> list[str]:
    """Scope > Topic world > Session world > leaf: returns [scope, topic, session, leaf] ids."""
    topic = db.write("travel plans", scope="alice", type="Topic")
    session = db.write("session about Porto", world=topic, type="Session")
    leaf = db.write("I booked a flight to Porto", world=session)
    scope = db.read(topic).parent
    assert scope is not None
    return [scope, topic, session, leaf]


def test_a_write_recomposes_exactly_the_ancestors_of_the_new_leaf(db: WorldDB) -> None:
    scope, topic, session, _ = _chain(db)
    db.write("unrelated", scope="bob")
    db.write("the hotel is near the river", world=session)
    recomposed = db._reconciler.composer.last_recomposed
    assert recomposed == [_nid(db, session), _nid(db, topic), _nid(db, scope)]  # the root is not composed


def test_the_effective_vector_is_the_pool_of_the_children_and_the_content_stays_the_anchor(db: WorldDB) -> None:
    _, topic, session, leaf = _chain(db)
    second = db.write("the hotel is near the river", world=session)
    embedder = FakeEmbedder()
    content = embedder.embed(["session about Porto"])[0]
    children = np.stack([_vector(db, leaf), _vector(db, second)])
    # stored rows are int8 (store/vector_codes.py): each side off by rounding, a few thousandths at most
    assert np.allclose(_vector(db, session), compose_from_scratch("attention", content, children), atol=2e-3)
    assert not np.allclose(_vector(db, session), compose_from_scratch("mean", content, children), atol=2e-3)
    anchor = db.sql("select anchor from world_vec where nid = ?", (_nid(db, session),))[0][0]
    assert np.allclose(np.frombuffer(anchor, dtype=np.float32), content)  # the content anchor is untouched
    assert not np.allclose(_vector(db, session), content)  # the index holds the effective vector


def test_attention_weights_follow_the_anchor_and_mean_weights_are_equal() -> None:
    anchor = np.array([1.0, 0.0], dtype=np.float32)
    children = np.array([[1.0, 0.0], [0.0, 1.0]], dtype=np.float32)
    attention = pool_weights("attention", anchor, children)
    assert attention[0] == 1.0 and attention[1] < 0.5
    assert list(pool_weights("mean", anchor, children)) == [1.0, 1.0]
    assert list(pool_weights("attention", None, children)) == [1.0, 1.0]  # no text, no query: a mean


def test_incremental_sums_stay_equal_to_a_fresh_composition_after_many_writes(tmp_path: Path) -> None:
    db = WorldDB(tmp_path / "many.db", embedder=FakeEmbedder(), clock=FakeClock())
    try:
        session = db.write("a long session", scope="s", type="Session")
        for i in range(60):
            db.write(f"turn number {i} about topic {i % 7}", world=session)
        db.write_many([{"text": f"batch turn {i}", "world": session} for i in range(40)])
        report = db.verify(deep=True)
        assert report.ok, report.violations
    finally:
        db.close()


def test_deep_verify_notices_a_world_vector_that_no_longer_matches_its_members(db: WorldDB) -> None:
    _, topic, _, _ = _chain(db)
    assert db.verify(deep=True).ok
    with connection.engine_write(db._conn):  # a forged session: the guards refuse any other raw write
        db._conn.execute(
            "update node_vec set embedding = ?, scale = ? where rowid = ?",
            (np.eye(32, dtype=np.int8)[0].tobytes(), 1.0, _nid(db, topic)),  # a unit vector, another direction
        )
    assert db.verify().ok  # the shallow check counts rows only
    report = db.verify(deep=True)
    assert {v.invariant for v in report.violations} == {"7-indexes"}
    named = {v.detail[6:22] for v in report.violations}
    assert topic[:16] in named  # the tampered world; its scope, pooled from it, disagrees too
    assert all("composed vector" in v.detail for v in report.violations)


def test_verify_notices_a_lost_composition_row(db: WorldDB) -> None:
    _, topic, _, _ = _chain(db)
    with connection.engine_write(db._conn):
        db._conn.execute("delete from world_vec where nid = ?", (_nid(db, topic),))
    report = db.verify()
    assert any("no composition row" in v.detail for v in report.violations)


def test_the_composition_kind_is_fixed_when_the_store_is_created(tmp_path: Path) -> None:
    path = tmp_path / "mean.db"
    WorldDB(path, embedder=FakeEmbedder(), compose="mean").close()
    db = WorldDB(path, embedder=FakeEmbedder())  # the default asks for attention; the store says mean
    try:
        assert db.compose == "mean"
        session = db.write("a session", scope="s", type="Session")
        a = db.write("first", world=session)
        b = db.write("second", world=session)
        expected = compose_from_scratch("mean", None, np.stack([_vector(db, a), _vector(db, b)]))
        assert np.allclose(_vector(db, session), expected, atol=1e-6)
    finally:
        db.close()
    with pytest.raises(InvalidInput, match="attention, mean"):
        WorldDB(tmp_path / "bad.db", embedder=FakeEmbedder(), compose="max")


def test_a_world_pools_the_kept_vectors_whichever_commit_its_children_came_in(tmp_path: Path) -> None:
    # review: a leaf that got its first child in a later commit took its anchor from node_vec (int8-rounded),
    # a world written with its children in one commit (an ingest, a replica's apply) the float32 embedding
    db = WorldDB(tmp_path / "w.db", embedder=FakeEmbedder(), clock=FakeClock())
    topic = db.write("travel plans for the spring", scope="ana", type="Topic")
    db.write("I booked a flight to Porto", world=topic)  # its first child, a commit later
    turns = db.ingest(ConversationIn("c", ["ana"], [SessionIn("1", "2024-03-01", [TurnIn("We met at noon.")])]))
    session = db.read(turns[0]).parent
    assert session is not None
    for world in (topic, session):
        node = db.read(world)
        text = FakeEmbedder().embed([embedding_text(node.name, node.content)])
        kept = vector_codes.decode(*vector_codes.encode(text))[0]
        anchor = db.sql("select anchor from world_vec where nid = ?", (_nid(db, world),))[0][0]
        assert np.frombuffer(anchor, dtype=np.float32).tobytes() == kept.tobytes(), world
    assert db.verify(deep=True).ok
    db.close()
