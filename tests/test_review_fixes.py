"""Regression tests for the bugs a code review found (each failed before its fix)."""

from __future__ import annotations

import pytest

from worlddb_lite import (
    EdgeRefused,
    InvalidId,
    InvalidInput,
    MergeError,
    NotCurrent,
    WorldDB,
    WorldDBError,
)

from .conftest import table_digest


def test_a_duplicate_in_one_link_many_returns_the_first_edge_even_after_a_handler_read_edges(db):
    a, b, c, d = (db.write(t, scope="s") for t in ("a", "b", "c", "d"))
    first, _, again = db.link_many([(a, b, "refers_to"), (c, d, "precedes"), (a, b, "refers_to")])
    assert first.id == again.id
    assert db.verify().ok


def test_relinking_a_closed_edge_with_the_same_valid_time_is_a_clear_error(db):
    a, c = db.write("a", scope="s"), db.write("c", scope="s")
    edge = db.link(a, c, "refers_to", valid_at="2024-01-01")
    db.unlink(edge.id)
    before = table_digest(db)
    with pytest.raises(NotCurrent, match="different valid_at"):
        db.link(a, c, "refers_to", valid_at="2024-01-01")
    assert table_digest(db) == before
    assert db.link(a, c, "refers_to", valid_at="2024-02-01").id != edge.id


def test_amend_cannot_turn_an_existing_node_into_the_new_version(db):
    world = db.world("A")
    x = db.write("x", world=world, valid_at="2020-01-01")
    db.retire(x, at="2021-01-01")
    y = db.write("y", world=world, valid_at="2020-01-01")
    before = table_digest(db)
    with pytest.raises(InvalidInput, match="already exists"):
        db.amend(y, "x", valid_at="2020-01-01")
    assert table_digest(db) == before
    assert db.read(y).is_current


def test_containment_through_contains_edges_respects_as_of(db):
    a, b = db.world("A"), db.world("B")
    note = db.write("moved in later", world=a, valid_at="2020-01-01")
    db.link(b, note, "contains", valid_at="2024-01-01")
    assert note in [n.id for n in db.nodes(world=b)]
    assert note not in [n.id for n in db.nodes(world=b, as_of="2021-01-01")]


def test_a_refused_write_inside_a_batch_leaves_nothing_behind(db):
    with db.batch():
        with pytest.raises(InvalidInput):
            db.write("t", scope="brand-new", type="bad type")
        kept = db.write("kept", scope="other")
    assert [n.name for n in db.nodes(type="Scope")] == ["other"]
    assert db.read(kept).content == "kept"


def test_a_call_that_wrote_and_then_failed_inside_a_batch_poisons_the_batch(db):
    a, b = db.write("a", scope="s"), db.write("b", scope="s")
    before = table_digest(db)
    with pytest.raises(WorldDBError, match="rolled back"), db.batch():
        with pytest.raises(EdgeRefused):
            db.link_many([(a, b, "refers_to"), (a, a, "refers_to")])  # the second is a self-loop
    assert table_digest(db) == before


def test_same_as_inside_one_identity_is_refused_and_rejections_are_not_bypassed(db):
    a, b, c, d = (db.write(n, type="Entity", scope="s") for n in ("Sarah", "Sara", "S.", "Sarah K"))
    db.accept_merge(db.link(a, b, "same_as").pid)
    db.accept_merge(db.link(b, c, "same_as").pid)
    with pytest.raises(EdgeRefused, match="already one identity"):
        db.link(a, c, "same_as")
    db.reject_merge(db.link(c, d, "same_as").pid)
    proposal = db.link(a, d, "same_as")  # a and d are different nodes, but c (one with a) was judged apart from d
    with pytest.raises(MergeError, match="rejected merge"):
        db.accept_merge(proposal.pid)
    assert db.verify().ok


@pytest.mark.parametrize(
    "call",
    [
        lambda db, m: db.read(["x"]),
        lambda db, m: db.search("x", k="x"),
        lambda db, m: db.nodes(limit="x"),
        lambda db, m: db.nearest([0.1] * 32, k=-1),
        lambda db, m: db.nearest([0.1] * 32, k=100_000),
        lambda db, m: db.amend(m, "y", props=[1]),
        lambda db, m: db.link(m, m, "refers_to", props=[1]),
        lambda db, m: db.write("x", vector=[[1, 2], [3]]),
        lambda db, m: db.write("x", aliases=5),
        lambda db, m: db.write_many(5),
        lambda db, m: db.link_many("abc"),
    ],
)
def test_bad_arguments_raise_worlddb_errors_and_change_nothing(db, call):
    memory = db.write("m", scope="s")
    before = table_digest(db)
    with pytest.raises(WorldDBError):
        call(db, memory)
    assert table_digest(db) == before


@pytest.mark.parametrize("dim", [0, -1, "x", 10**6, True])
def test_a_bad_dimension_is_invalid_input(tmp_path, dim):
    with pytest.raises(InvalidInput):
        WorldDB(str(tmp_path / "d.db"), embedder=None, dim=dim)
    assert not (tmp_path / "d.db").exists() or (tmp_path / "d.db").stat().st_size == 0


def test_invalid_ids_of_other_types(db):
    with pytest.raises(InvalidId):
        db.read(12345)  # type: ignore[arg-type]
