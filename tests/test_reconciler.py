"""reconciler.py: the only door. A refused write leaves the store exactly as it was; batches are atomic."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import apsw
import pytest

from worlddb_lite import WorldDB
from worlddb_lite.errors import (
    CycleError,
    EdgeRefused,
    IntegrityViolation,
    InvalidInput,
    InvalidTime,
    MergeError,
    NotCurrent,
    NotFound,
    StoreBusy,
    UnknownEdgeType,
    WorldDBError,
)
from worlddb_lite.store import connection

from .conftest import FakeClock, FakeEmbedder, Mentors, row_counts, table_digest

Ids = dict[str, Any]


def _setup(db: WorldDB) -> Ids:
    db.register_edge_type(Mentors(), replace=True)
    top = db.world("top")
    mid = db.world("mid", parent=top)
    low = db.world("low", parent=mid)
    old = db.write("Alice lives in Lisbon", world=low, valid_at="2024-03-01")
    new = db.amend(old, "Alice lives in Porto", valid_at="2024-06-01")
    e1 = db.write("Alice", type="Entity", name="Alice", world=top)
    e2 = db.write("Al", type="Entity", name="Al", world=mid)
    e3 = db.write("Bob", type="Entity", name="Bob", world=mid)
    rejected = db.link(e1, e3, "same_as")
    db.reject_merge(rejected.pid)  # type: ignore[union-attr]
    accepted = db.link(e1, e2, "same_as")
    db.accept_merge(accepted.pid)  # type: ignore[union-attr]
    a = db.write("event a", world=mid, valid_at="2024-01-01")
    b = db.write("event b", world=mid, valid_at="2024-01-02")
    db.link(a, b, "precedes")
    ref = db.link(a, new, "refers_to")
    supersedes_edge = db.neighbours(new, types=["supersedes"], include_superseded=True).edges[0].id
    same_as_edge = db.neighbours(e1, types=["same_as"]).edges[0].id
    return {
        "top": top,
        "mid": mid,
        "low": low,
        "old": old,
        "new": new,
        "e1": e1,
        "e2": e2,
        "e3": e3,
        "a": a,
        "b": b,
        "rejected": rejected.pid,
        "accepted": accepted.pid,  # type: ignore[union-attr]
        "ref_edge": ref.id,
        "supersedes_edge": supersedes_edge,
        "same_as_edge": same_as_edge,
    }  # type: ignore[union-attr]


Action = Callable[[WorldDB, Ids], object]


def _nothing(db: WorldDB, ids: Ids) -> None:
    return None


# case -> (a preparation that succeeds, the refused action, the error it raises)
REFUSALS: dict[str, tuple[Action, Action, type[WorldDBError]]] = {
    "supersedes-new-starts-before-old": (
        lambda db, i: i.update(older=db.write("older", world=i["low"], valid_at="2024-01-01")),
        lambda db, i: db.link(i["older"], i["new"], "supersedes"),
        EdgeRefused,
    ),
    "amend-new-version-starts-before-old": (
        _nothing,
        lambda db, i: db.amend(i["new"], "x", valid_at="2024-01-01"),
        EdgeRefused,
    ),
    "contains-own-parent": (_nothing, lambda db, i: db.link(i["low"], i["mid"], "contains"), CycleError),
    "contains-own-ancestor": (_nothing, lambda db, i: db.link(i["low"], i["top"], "contains"), CycleError),
    "contains-store-root": (_nothing, lambda db, i: db.link(i["top"], db.root_id, "contains"), CycleError),
    "contains-itself": (_nothing, lambda db, i: db.link(i["top"], i["top"], "contains"), EdgeRefused),
    "contains-cycle-through-contains-edge": (
        lambda db, i: db.link(i["e1"], i["e3"], "contains"),
        lambda db, i: db.link(i["e3"], i["e1"], "contains"),
        CycleError,
    ),
    "same_as-self-loop": (_nothing, lambda db, i: db.link(i["e1"], i["e1"], "same_as"), EdgeRefused),
    "same_as-after-reject": (_nothing, lambda db, i: db.link(i["e3"], i["e1"], "same_as"), EdgeRefused),
    "precedes-cycle": (_nothing, lambda db, i: db.link(i["b"], i["a"], "precedes"), CycleError),
    "unknown-edge-type": (_nothing, lambda db, i: db.link(i["a"], i["b"], "befriends"), UnknownEdgeType),
    "custom-handler-refuses": (_nothing, lambda db, i: db.link(i["a"], i["e1"], "mentors"), EdgeRefused),
    "retire-before-valid": (_nothing, lambda db, i: db.retire(i["a"], at="2023-12-31"), InvalidTime),
    "amend-superseded": (_nothing, lambda db, i: db.amend(i["old"], "x"), NotCurrent),
    "amend-retired": (lambda db, i: db.retire(i["b"]), lambda db, i: db.amend(i["b"], "x"), NotCurrent),
    "retract-twice": (lambda db, i: db.retract(i["a"]), lambda db, i: db.retract(i["a"]), NotCurrent),
    "supersede-retracted": (
        lambda db, i: db.retract(i["a"]),
        lambda db, i: db.link(i["b"], i["a"], "supersedes"),
        NotCurrent,
    ),
    "accept-rejected": (_nothing, lambda db, i: db.accept_merge(i["rejected"]), MergeError),
    # retiring twice and deciding a merge the same way twice are retries: they change nothing (tests/test_tags.py)
    "retire-superseded": (_nothing, lambda db, i: db.retire(i["old"]), NotCurrent),
    "unknown-proposal": (_nothing, lambda db, i: db.accept_merge(999), NotFound),
    "unlink-supersedes": (_nothing, lambda db, i: db.unlink(i["supersedes_edge"]), EdgeRefused),
    "unlink-same_as": (_nothing, lambda db, i: db.unlink(i["same_as_edge"]), EdgeRefused),
    "unlink-before-edge-starts": (
        _nothing,
        lambda db, i: db.unlink(i["ref_edge"], at="2000-01-01"),
        InvalidTime,
    ),
    "unlink-twice": (
        lambda db, i: db.unlink(i["ref_edge"]),
        lambda db, i: db.unlink(i["ref_edge"]),
        NotCurrent,
    ),
    "empty-text": (_nothing, lambda db, i: db.write("  \n\t "), InvalidInput),
    "bad-node-type": (_nothing, lambda db, i: db.write("x", type="no spaces allowed"), InvalidInput),
    "wrong-vector-size": (_nothing, lambda db, i: db.write("x", vector=[1.0, 2.0]), InvalidInput),
    "write-into-missing-world": (_nothing, lambda db, i: db.write("x", world="ab" * 32), NotFound),
    "non-finite-prop": (_nothing, lambda db, i: db.write("x", props={"n": float("nan")}), InvalidInput),
}


@pytest.mark.parametrize("case", sorted(REFUSALS))
def test_a_refused_write_leaves_the_store_exactly_as_it_was(db_path: str, clock: FakeClock, case: str) -> None:
    prepare, action, error = REFUSALS[case]
    db = WorldDB(db_path, embedder=FakeEmbedder(), clock=clock)
    try:
        ids = _setup(db)
        prepare(db, ids)
        file_bytes = None
        if db_path != ":memory:":  # compare the raw file too: close, read, reopen
            db.close()
            file_bytes = Path(db_path).read_bytes()
            db = WorldDB(db_path, embedder=FakeEmbedder(), clock=clock)
            db.register_edge_type(Mentors())
        before_root, before_counts, before = db.root(), row_counts(db), table_digest(db)
        with pytest.raises(error) as info:
            action(db, ids)
        assert str(info.value)  # says why
        assert db.root() == before_root
        assert row_counts(db) == before_counts
        assert table_digest(db) == before
        assert db.verify().ok
        if file_bytes is not None:
            db.close()
            assert Path(db_path).read_bytes() == file_bytes
    finally:
        db.close()


def test_a_failed_batch_rolls_back_every_write(db: WorldDB) -> None:
    db.write("before", scope="s")
    before = table_digest(db)
    with pytest.raises(RuntimeError, match="caller failed"), db.batch():
        a = db.write("one", scope="s")
        db.write("two", scope="t")
        db.link(a, db.world("new world"), "refers_to")
        raise RuntimeError("caller failed")
    assert table_digest(db) == before
    assert db.verify().ok
    # the header cache forgot the rolled-back nodes: the same writes succeed afterwards
    a2 = db.write("one", scope="s")
    assert db.read(a2).content == "one"
    assert db.verify().ok


def test_a_batch_commits_once_with_one_root_log_entry_per_world(db: WorldDB) -> None:
    logged = row_counts(db)["root_log"]
    with db.batch():
        for i in range(5):
            db.write(f"line {i}", scope="s", extractor=None)
        with db.batch():  # nested batches join the outer one
            db.write("nested", scope="s", extractor=None)
    history = db.root_history(db.scope("s"))
    assert [size for _, _, size in history] == [6]
    assert row_counts(db)["root_log"] == logged + 2  # the scope and the store root
    assert db.verify().ok


def test_a_refused_link_inside_a_batch_leaves_nothing_and_the_batch_continues(db: WorldDB) -> None:
    a = db.write("a", scope="s", valid_at="2024-05-01", extractor=None)
    before = row_counts(db)
    with db.batch():
        old = db.write("older", scope="s", valid_at="2024-01-01", extractor=None)
        with pytest.raises(EdgeRefused):
            db.link(old, a, "supersedes")
        with pytest.raises(UnknownEdgeType):
            db.link(old, a, "nope")
        db.link(old, a, "refers_to")
    after = row_counts(db)
    assert after["edge"] == before["edge"] + 1
    assert after["node"] == before["node"] + 1
    assert db.read(a).is_current
    assert db.verify().ok


def test_a_refused_amend_inside_a_batch_leaves_nothing(db: WorldDB) -> None:
    # regression: amend wrote the new version before the supersedes handler refused, leaving an orphan
    x = db.write("x fact", scope="s", valid_at="2024-05-01")
    before = table_digest(db)
    with db.batch():
        with pytest.raises(EdgeRefused):
            db.amend(x, "y fact", valid_at="2024-01-01")
    assert table_digest(db) == before
    assert [n.content for n in db.nodes(type="Memory")] == ["x fact"]


def test_a_write_that_fails_half_way_poisons_the_batch(db: WorldDB) -> None:
    kept = db.write("kept", scope="s", valid_at="2024-01-01")
    before = table_digest(db)
    conn = db._conn
    with pytest.raises(WorldDBError, match="rolled back"), db.batch():
        db.write("first", scope="s")
        # a temporary trigger makes SQLite itself refuse the next state write, half-way through retire()
        conn.execute(
            "create temp trigger fail_close before update on main.node_state "
            "when new.invalid_at is not null begin select raise(abort, 'disk said no'); end"
        )
        with pytest.raises(IntegrityViolation, match="disk said no"):
            db.retire(kept)
        conn.execute("drop trigger temp.fail_close")
        db.write("third", scope="s")
    assert table_digest(db) == before
    assert db.read(kept).is_current
    assert db.verify().ok


def test_no_session_row_survives_a_commit_or_a_rollback(db: WorldDB) -> None:
    db.write("x", scope="s")
    y = db.write("y", scope="s", valid_at="2024-01-01")
    with pytest.raises(EdgeRefused):
        db.link(y, y, "refers_to")
    assert row_counts(db)["reconciler_session"] == 0


def test_two_connections_write_the_same_file(file_db_path: str, clock: FakeClock) -> None:
    first = WorldDB(file_db_path, embedder=FakeEmbedder(), clock=clock)
    second = WorldDB(file_db_path, embedder=FakeEmbedder(), clock=clock)
    try:
        a = first.write("from the first", scope="s")
        b = second.write("from the second", scope="s")
        first.link(a, b, "refers_to")
        second.amend(a, "from the first, amended")
        assert first.root() == second.root()
        assert first.verify().ok and second.verify().ok
        assert {n.content for n in first.nodes(type="Memory")} == {
            "from the second",
            "from the first, amended",
        }
    finally:
        first.close()
        second.close()


def test_a_held_write_lock_ends_in_store_busy(file_db_path: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(connection, "BUSY_TIMEOUT_MS", 5)
    monkeypatch.setattr(connection.time, "sleep", lambda _s: None)  # keep the retry budget fast
    db = WorldDB(file_db_path, embedder=FakeEmbedder())
    holder = apsw.Connection(file_db_path)
    try:
        db.write("before", scope="s")
        before = db.root()
        holder.execute("begin immediate")
        started = time.monotonic()
        with pytest.raises(StoreBusy) as info:
            db.write("blocked", scope="s")
        assert time.monotonic() - started < 5
        assert isinstance(info.value, TimeoutError)
        holder.execute("rollback")
        assert db.root() == before
        db.write("after", scope="s")
        assert db.verify().ok
    finally:
        holder.close()
        db.close()


def test_supersedes_closes_validity_in_the_same_transaction(db: WorldDB) -> None:
    old = db.write("v1", scope="s", valid_at="2024-01-01")
    new = db.write("v2", scope="s", valid_at="2024-02-01")
    edge = db.link(new, old, "supersedes")
    node = db.read(old)
    assert node.invalid_at == "2024-02-01T00:00:00.000000Z"
    assert node.closed_at == edge.created_at  # type: ignore[union-attr]
    assert node.superseded_by == (new,)
    assert db.read(new).is_current


def test_unlink_closes_an_edge_and_keeps_it(db: WorldDB) -> None:
    a = db.write("a", scope="s", valid_at="2024-01-01", extractor=None)
    b = db.write("b", scope="s", valid_at="2024-01-01", extractor=None)
    edge = db.link(a, b, "refers_to", valid_at="2024-01-01")
    db.unlink(edge.id[:10], at="2024-06-01")  # type: ignore[union-attr]
    assert db.neighbours(a).edges == ()
    assert db.neighbours(a, as_of="2024-07-01").edges == ()
    closed = db.neighbours(a, include_superseded=True).edges
    assert [e.invalid_at for e in closed] == ["2024-06-01T00:00:00.000000Z"]
    assert db.neighbours(a, as_of="2024-03-01").edges[0].id == edge.id  # type: ignore[union-attr]
    # a new edge between the same ends can be written once the old one is closed
    again = db.link(a, b, "refers_to")
    assert again.id != edge.id  # type: ignore[union-attr]
    assert db.verify().ok


def test_linking_twice_returns_the_existing_edge(db: WorldDB) -> None:
    a = db.write("a", scope="s")
    b = db.write("b", scope="s")
    first = db.link(a, b, "implies")
    counts = row_counts(db)
    assert db.link(a, b, "implies") == first
    assert row_counts(db) == counts


# ---- batched entry points (write_many / link_many), when the package has them -----------------


def _needs(db: WorldDB, name: str) -> None:
    if not hasattr(db, name):
        pytest.skip(f"this package version has no WorldDB.{name}")


def test_write_many_is_all_or_nothing(db: WorldDB) -> None:
    _needs(db, "write_many")
    ids = db.write_many([{"text": f"line {i}", "scope": "s", "valid_at": "2024-01-01"} for i in range(5)])
    assert [db.read(i).content for i in ids] == [f"line {i}" for i in range(5)]
    assert db.write_many([{"text": "line 0", "scope": "s", "valid_at": "2024-01-01"}]) == ids[:1]
    before = table_digest(db)
    for bad in (
        [{"text": "fine", "scope": "s"}, {"text": ""}],
        [{"text": "fine", "scope": "s"}, {"text": "x", "valid_at": "soon"}],
        [{"text": "fine", "scope": "s"}, {"text": "x", "colour": "red"}],
        [{"text": "fine", "scope": "s"}, {"no": "text"}],
    ):
        with pytest.raises(WorldDBError):
            db.write_many(bad)
        assert table_digest(db) == before
    assert db.verify().ok


def test_link_many_runs_each_handler_against_the_earlier_edges_of_the_batch(db: WorldDB) -> None:
    _needs(db, "link_many")
    a, b, c = (db.write(t, scope="s", valid_at=f"2024-0{i + 1}-01") for i, t in enumerate("abc"))
    before = table_digest(db)
    with pytest.raises(CycleError):
        db.link_many([(a, b, "precedes"), (b, c, "precedes"), (c, a, "precedes")])
    with pytest.raises(CycleError):
        db.link_many([(a, b, "contains"), (b, a, "contains")])
    with pytest.raises(UnknownEdgeType):
        db.link_many([(a, b, "refers_to"), (a, c, "nope")])
    assert table_digest(db) == before
    first, second = db.link_many([(a, b, "refers_to"), (a, b, "refers_to")])
    assert first == second
    proposals = db.link_many([(a, c, "same_as"), (c, a, "same_as")])
    assert proposals[0] == proposals[1] and len(db.merge_proposals()) == 1
    db.link_many([(b, a, "supersedes"), (c, a, "supersedes")])
    assert db.read(a).invalid_at == "2024-02-01T00:00:00.000000Z"  # the earlier close stands
    assert db.verify().ok
