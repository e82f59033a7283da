"""db.py: the WorldDB facade — opening, writes, bitemporal reads, identity, contradictions, bad input."""

from __future__ import annotations

import datetime as dt
import os
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import apsw
import pytest

from worlddb_lite import (
    AmbiguousId,
    CycleError,
    Direction,
    EdgeRefused,
    EmbedderMismatch,
    InvalidId,
    InvalidInput,
    InvalidTime,
    MergeError,
    MergeProposal,
    MergeStatus,
    NotAStore,
    NotCurrent,
    NotFound,
    SchemaTooNew,
    UnknownEdgeType,
    WorldDB,
    WorldDBError,
)
from worlddb_lite.edges import BaseEdgeType, CloseValidity, EdgeDraft
from worlddb_lite.retrieval.lanes import fts_query
from worlddb_lite.store import connection
from worlddb_lite.store.rows import Store

from .conftest import FakeClock, FakeEmbedder, Mentors, OtherFakeEmbedder, row_counts, table_digest

DAY = dt.timedelta(days=1)


def T(text: str) -> str:
    from worlddb_lite.text.dates import parse_time

    return parse_time(text)


# ---- opening --------------------------------------------------------------------------------


def test_open_new_store_has_a_root_and_verifies(db: WorldDB) -> None:
    assert len(db.root_id) == 64
    assert len(db.root()) == 64
    assert db.verify().ok
    stats = db.stats()
    assert stats["embedder"] == "fake-hash-32" and stats["dim"] == 32
    assert stats["schema_version"] == connection.SCHEMA_VERSION
    assert stats["nodes"] == 1 and stats["edges"] == 0


def test_reopen_keeps_everything(open_file_db: Callable[..., WorldDB]) -> None:
    with open_file_db() as db:
        a = db.write("kept across opens", scope="s", valid_at="2024-01-01")
        root, root_id = db.root(), db.root_id
    with open_file_db() as db:
        assert db.root() == root and db.root_id == root_id
        assert db.read(a).content == "kept across opens"
        assert db.verify().ok
    db.close()  # closing twice is safe


def test_memory_stores_are_independent() -> None:
    with (
        WorldDB(":memory:", embedder=FakeEmbedder()) as one,
        WorldDB(":memory:", embedder=FakeEmbedder()) as two,
    ):
        one.write("only in one", scope="s")
        assert two.stats()["nodes"] == 1


def test_random_bytes_file_is_not_a_store(tmp_path: Path) -> None:
    path = tmp_path / "random.bin"
    data = os.urandom(8192)
    path.write_bytes(data)
    with pytest.raises(NotAStore) as info:
        WorldDB(path, embedder=FakeEmbedder())
    assert isinstance(info.value, OSError)
    assert str(path) in str(info.value)
    assert path.read_bytes() == data


def _foreign_sqlite(path: Path) -> bytes:
    conn = sqlite3.connect(path)
    conn.execute("create table notes (x text)")
    conn.execute("insert into notes values ('mine')")
    conn.commit()
    conn.close()
    return path.read_bytes()


def test_a_sqlite_file_with_other_tables_is_not_a_store(tmp_path: Path) -> None:
    path = tmp_path / "other.db"
    _foreign_sqlite(path)
    with pytest.raises(NotAStore, match="not a worlddb store"):
        WorldDB(path, embedder=FakeEmbedder())
    conn = sqlite3.connect(path)
    assert conn.execute("select x from notes").fetchall() == [("mine",)]
    conn.close()


def test_opening_a_foreign_sqlite_file_leaves_it_byte_for_byte_unchanged(tmp_path: Path) -> None:
    path = tmp_path / "other.db"
    before = _foreign_sqlite(path)
    with pytest.raises(NotAStore):
        WorldDB(path, embedder=FakeEmbedder())
    assert path.read_bytes() == before


def test_opening_a_missing_path_without_create_leaves_no_file(tmp_path: Path) -> None:
    path = tmp_path / "missing.db"
    with pytest.raises(NotAStore):
        WorldDB(path, embedder=FakeEmbedder(), create=False)
    assert not path.exists()


def test_missing_path_without_create_is_not_a_store(tmp_path: Path) -> None:
    with pytest.raises(NotAStore, match=r"does not exist \(next: create the store\)") as info:
        WorldDB(tmp_path / "missing.db", embedder=FakeEmbedder(), create=False)
    assert info.value.hint is not None and info.value.hint.action == "create"


def test_newer_schema_is_refused(open_file_db: Callable[..., WorldDB], file_db_path: str) -> None:
    open_file_db().close()
    conn = apsw.Connection(file_db_path)
    conn.execute("pragma user_version = 99")
    conn.close()
    before = Path(file_db_path).read_bytes()
    with pytest.raises(SchemaTooNew, match="99") as info:
        open_file_db()
    assert isinstance(info.value, RuntimeError)
    assert Path(file_db_path).read_bytes() == before


@pytest.mark.parametrize(
    "embedder",
    [OtherFakeEmbedder(), None, type("Narrow", (FakeEmbedder,), {"dim": 16})()],
    ids=["other-model", "external-vectors", "same-model-other-dim"],
)
def test_opening_with_another_embedder_is_refused(
    open_file_db: Callable[..., WorldDB], file_db_path: str, embedder: object
) -> None:
    with open_file_db() as db:
        db.write("embedded with the fake", scope="s")
    before = Path(file_db_path).read_bytes()
    with pytest.raises(EmbedderMismatch, match="fake-hash-32"):
        WorldDB(file_db_path, embedder=embedder)
    assert Path(file_db_path).read_bytes() == before


def test_opening_a_fake_store_with_the_bundled_default_is_refused_without_loading_it(
    open_file_db: Callable[..., WorldDB], file_db_path: str
) -> None:
    open_file_db().close()
    with pytest.raises(EmbedderMismatch, match="fake-hash-32"):
        WorldDB(file_db_path)


def test_embedder_must_implement_the_protocol(tmp_path: Path) -> None:
    with pytest.raises(InvalidInput, match="Embedder"):
        WorldDB(tmp_path / "x.db", embedder=object())


def test_an_interrupted_init_does_not_brick_the_file(tmp_path: Path) -> None:
    class Interrupted(BaseException):
        pass

    def dying_clock() -> str:
        raise Interrupted

    path = tmp_path / "half.db"
    with pytest.raises(Interrupted):
        WorldDB(path, embedder=FakeEmbedder(), clock=dying_clock)
    with WorldDB(path, embedder=FakeEmbedder()) as db:
        assert db.verify().ok


# ---- worlds and writes ----------------------------------------------------------------------


def test_worlds_are_named_by_name_and_parent(db: WorldDB) -> None:
    a = db.world("projects")
    assert db.world("projects") == a
    inner = db.world("projects", parent=a)
    assert inner != a
    assert db.world("projects", parent=a) == inner
    assert db.read(inner).parent == a and db.read(inner).depth == 2
    scope = db.scope("alice")
    assert db.read(scope).type == "Scope"
    assert db.scope("alice") == scope != db.world("alice")


def test_write_stores_text_verbatim_with_metadata(db: WorldDB, clock: FakeClock) -> None:
    text = '  Alice   said:\n"I\'m moving to Porto" 🙂  '
    nid = db.write(
        text,
        scope="alice",
        type="Turn",
        name="turn 1",
        valid_at="2024-05-01T10:00:00+02:00",
        props={"speaker": "alice", "n": 1},
        aliases=["first turn"],
        salience=0.5,
    )
    node = db.read(nid)
    assert node.content == text
    assert node.type == "Turn" and node.name == "turn 1"
    assert node.valid_at == "2024-05-01T08:00:00.000000Z"
    assert node.props == {"speaker": "alice", "n": 1}
    assert node.salience == 0.5
    assert node.parent == db.scope("alice")
    assert node.created_at <= clock.peek()
    assert node.is_current and node.invalid_at is None and not node.retired
    assert db.lookup_alias("FIRST   Turn") == (nid,)


def test_write_accepts_utf8_bytes(db: WorldDB) -> None:
    nid = db.write("Zoë".encode(), scope="s", valid_at="2024-01-01")
    assert db.read(nid).content == "Zoë"
    assert db.write("Zoë", scope="s", valid_at="2024-01-01") == nid


def test_same_text_same_time_same_world_is_one_node(db: WorldDB) -> None:
    a = db.write("dedup", scope="s", valid_at="2024-01-01")
    counts = row_counts(db)
    assert db.write("dedup", scope="s", valid_at="2024-01-01") == a
    assert row_counts(db) == counts
    assert db.write("dedup", scope="t", valid_at="2024-01-01") != a
    assert db.write("dedup", scope="s", valid_at="2024-01-02") != a


def test_aliases(db: WorldDB) -> None:
    sarah = db.write("Sarah", type="Entity", name="Sarah", scope="s", aliases=["my manager"])
    db.add_alias(sarah[:8], "Sarah K.", source="user")
    db.add_alias(sarah, "Sarah K.")  # idempotent
    assert db.lookup_alias("my  MANAGER") == (sarah,)
    assert db.lookup_alias("sarah k.") == (sarah,)
    assert db.lookup_alias("nobody") == ()
    assert db.export_identity(sarah).aliases == ("Sarah K.", "my manager")
    with pytest.raises(InvalidInput):
        db.add_alias(sarah, "   ")


def test_read_by_prefix_and_case(db: WorldDB) -> None:
    a = db.write("prefix me", scope="s")
    assert db.read(a[:8]).id == a
    assert db.read(a[:13].upper()).id == a
    assert db.read(f"  {a}  ").id == a


# ---- bitemporal reads -----------------------------------------------------------------------


@pytest.fixture
def versions(db: WorldDB, clock: FakeClock) -> dict[str, str]:
    """v1 (true from 2024-01-01) is superseded by v2 (true from 2024-06-01) one day after v1 was learned."""
    before = clock.peek()
    clock.advance(DAY)
    v1 = db.write("Alice lives in Lisbon", scope="s1", valid_at="2024-01-01")
    learned_v1 = clock.peek()
    clock.advance(DAY)
    v2 = db.amend(v1, "Alice lives in Porto", valid_at="2024-06-01")
    learned_v2 = clock.peek()
    clock.advance(DAY)
    return {"v1": v1, "v2": v2, "before": before, "learned_v1": learned_v1, "learned_v2": learned_v2}


def _memories(db: WorldDB, **kwargs: Any) -> list[str]:
    return sorted(n.content or "" for n in db.nodes(type="Memory", **kwargs))


def test_default_reads_hide_superseded_versions(db: WorldDB, versions: dict[str, str]) -> None:
    assert _memories(db) == ["Alice lives in Porto"]
    assert [n.id for n, _ in db.search("Alice")] == [versions["v2"]]
    old = db.read(versions["v1"])  # read by id shows any version
    assert old.invalid_at == T("2024-06-01") and not old.is_current
    assert old.superseded_by == (versions["v2"],)
    assert [n.id for n in db.history(versions["v2"])] == [versions["v1"], versions["v2"]]
    assert [n.id for n in db.history(versions["v1"])] == [versions["v1"], versions["v2"]]


def test_as_of_on_the_valid_axis(db: WorldDB, versions: dict[str, str]) -> None:
    assert _memories(db, as_of="2024-03-01") == ["Alice lives in Lisbon"]
    assert _memories(db, as_of="2024-06-01") == ["Alice lives in Porto"]  # the switch is half-open
    assert _memories(db, as_of="2023-12-31") == []
    assert db.read(versions["v1"], as_of="2024-03-01").id == versions["v1"]
    with pytest.raises(NotFound):
        db.read(versions["v2"], as_of="2024-03-01")
    with pytest.raises(NotFound):
        db.read(versions["v1"], as_of="2024-07-01")
    assert [n.id for n, _ in db.search("Alice", as_of="2024-03-01")] == [versions["v1"]]


def test_known_as_of_on_the_belief_axis(db: WorldDB, versions: dict[str, str]) -> None:
    # before the store learned anything
    assert _memories(db, known_as_of=versions["before"]) == []
    with pytest.raises(NotFound):
        db.read(versions["v1"], known_as_of=versions["before"])
    # after it learned v1, before it learned v2: v1 still looked true, even for a valid time after 2024-06-01
    assert _memories(db, known_as_of=versions["learned_v1"]) == ["Alice lives in Lisbon"]
    assert _memories(db, as_of="2024-09-01", known_as_of=versions["learned_v1"]) == ["Alice lives in Lisbon"]
    assert db.read(versions["v1"], as_of="2024-09-01", known_as_of=versions["learned_v1"]).id == versions["v1"]
    with pytest.raises(NotFound):
        db.read(versions["v2"], known_as_of=versions["learned_v1"])
    assert [n.id for n, _ in db.search("Alice", known_as_of=versions["learned_v1"])] == [versions["v1"]]
    # after v2 was learned
    assert _memories(db, known_as_of=versions["learned_v2"]) == ["Alice lives in Porto"]


def test_include_superseded_returns_closed_versions(db: WorldDB, versions: dict[str, str]) -> None:
    nodes = {n.id: n for n in db.nodes(type="Memory", include_superseded=True)}
    assert set(nodes) == {versions["v1"], versions["v2"]}
    assert nodes[versions["v1"]].invalid_at == T("2024-06-01")
    assert nodes[versions["v1"]].superseded_by == (versions["v2"],)
    assert nodes[versions["v2"]].invalid_at is None
    hits = {n.id: n for n, _ in db.search("Alice", include_superseded=True)}
    assert set(hits) == set(nodes)
    assert hits[versions["v1"]].invalid_at == T("2024-06-01")


def test_retire_closes_validity_at_a_time(db: WorldDB) -> None:
    a = db.write("the shop is open", scope="s", valid_at="2024-01-01")
    db.retire(a[:8], at="2024-09-01")
    node = db.read(a)
    assert node.retired and node.invalid_at == T("2024-09-01") and not node.is_current
    assert db.read(a, as_of="2024-08-31").id == a
    with pytest.raises(NotFound):
        db.read(a, as_of="2024-09-01")
    assert _memories(db) == []
    assert _memories(db, as_of="2024-05-01") == ["the shop is open"]


def test_retract_stops_belief_but_keeps_what_was_believed(db: WorldDB, clock: FakeClock) -> None:
    a = db.write("a rumour", scope="s", valid_at="2024-01-01")
    believed = clock.peek()
    clock.advance(DAY)
    db.retract(a)
    node = db.read(a)
    assert node.expired_at is not None and node.invalid_at is None
    assert _memories(db) == []
    assert _memories(db, known_as_of=believed) == ["a rumour"]
    assert db.search("rumour") == []
    assert [n.id for n, _ in db.search("rumour", known_as_of=believed)] == [a]
    assert db.nodes(type="Memory", include_superseded=True) == []  # not believed any more
    with pytest.raises(NotCurrent):
        db.retire(a)


def test_known_as_of_between_two_tightenings(db: WorldDB, clock: FakeClock) -> None:
    # regression: only the latest closing was kept, so a read known_as_of between two tightenings
    # saw the node as open after the first (then known) end
    a = db.write("Alice works at Acme", scope="s", valid_at="2024-01-01")
    db.retire(a, at="2024-09-01")
    between = clock.peek()
    clock.advance(DAY)
    b = db.write("Alice works at Initech", scope="s", valid_at="2024-06-01")
    db.link(b, a, "supersedes")
    assert db.read(a).invalid_at == T("2024-06-01")
    # as known at `between`, a ended on 2024-09-01: it was not valid on 2024-10-01
    with pytest.raises(NotFound):
        db.read(a, as_of="2024-10-01", known_as_of=between)


def test_as_of_times_are_validated(db: WorldDB) -> None:
    with pytest.raises(InvalidTime, match="as_of"):
        db.nodes(as_of="not a time")
    with pytest.raises(InvalidTime, match="known_as_of"):
        db.search("x", known_as_of="31/12/2024")


# ---- search, nearest, neighbours ------------------------------------------------------------


def test_search_is_bm25_best_first_and_safe_from_fts_syntax(db: WorldDB) -> None:
    a = db.write("the red fox jumps over the red fence", scope="s")
    b = db.write("a red herring", scope="s")
    db.write("nothing relevant", scope="s")
    hits = db.search("red fox")
    assert [n.id for n, _ in hits] == [a, b]
    assert hits[0][1] > hits[1][1]
    assert db.search("red", k=1)[0][0].id in (a, b)
    for hostile in ('"', "fox AND", "NEAR(", "red* OR -", "col:fox", "'); drop table node; --"):
        db.search(hostile)  # never an FTS syntax error
    assert db.search("!!! ???") == []
    assert fts_query('say "hi" hi') == '"say" OR "hi"'


def test_nearest_uses_the_embedder(db: WorldDB) -> None:
    a = db.write("apples and pears", scope="s")
    db.write("engines and gearboxes", scope="s")
    hits = db.nearest("pears and apples", k=2)
    assert hits[0][0].id == a
    assert hits[0][1] == pytest.approx(1.0, abs=1e-5)
    with pytest.raises(InvalidInput, match="dimensions"):
        db.nearest([1.0, 0.0], k=1)


def test_neighbours_follow_edges_in_each_direction(db: WorldDB) -> None:
    a, b, c = (db.write(text, scope="s", extractor=None) for text in "abc")  # System 1: no person to link
    db.link(a, b, "causes")
    db.link(c, a, "implies")
    assert [n.id for n in db.neighbours(a).nodes] == [a, b]
    assert [n.id for n in db.neighbours(a, direction="in").nodes] == [a, c]
    both = db.neighbours(a, direction=Direction.BOTH)
    assert {n.id for n in both.nodes} == {a, b, c} and len(both.edges) == 2
    assert [e.type for e in db.neighbours(a, types=["causes"], direction="both").edges] == ["causes"]
    with pytest.raises(UnknownEdgeType):
        db.neighbours(a, types=["nope"])


# ---- identity: same_as ------------------------------------------------------------------------


def _entity(db: WorldDB, name: str, **kwargs: Any) -> str:
    return db.write(name, type="Entity", name=name, scope="people", valid_at="2024-01-01", **kwargs)


def test_same_as_stages_a_proposal_and_writes_no_edge(db: WorldDB) -> None:
    bob, robert = _entity(db, "Bob"), _entity(db, "Robert")
    edges = row_counts(db)["edge"]
    proposal = db.link(bob, robert, "same_as", props={"reason": "same phone number"})
    assert isinstance(proposal, MergeProposal)
    assert proposal.status is MergeStatus.PENDING and proposal.reason == "same phone number"
    assert {proposal.a, proposal.b} == {bob, robert} and proposal.decided_at is None
    assert row_counts(db)["edge"] == edges
    assert db.merge_proposals() == [proposal]
    assert db.link(robert, bob, "same_as") == proposal  # the pair, in either order, is one proposal
    assert len(db.merge_proposals()) == 1
    pending = db.sql("select pid, a_name, b_name from pending_merge")
    assert pending == [(proposal.pid, "Bob", "Robert")]
    assert db.equivalence_class(bob) == (bob,)
    assert db.verify().ok


def test_accept_writes_symmetric_edges(db: WorldDB) -> None:
    bob, robert = _entity(db, "Bob"), _entity(db, "Robert")
    proposal = db.link(bob, robert, "same_as")
    db.accept_merge(proposal.pid)  # type: ignore[union-attr]
    decided = db.merge_proposal(proposal.pid)  # type: ignore[union-attr]
    assert decided.status is MergeStatus.ACCEPTED and decided.decided_at is not None
    out_bob = db.neighbours(bob, types=["same_as"]).edges
    out_robert = db.neighbours(robert, types=["same_as"]).edges
    assert [(e.src, e.dst) for e in out_bob] == [(bob, robert)]
    assert [(e.src, e.dst) for e in out_robert] == [(robert, bob)]
    assert db.equivalence_class(bob) == db.equivalence_class(robert) == tuple(sorted((bob, robert)))
    assert db.merge_proposals() == []
    assert db.merge_proposals(MergeStatus.ACCEPTED) == [decided]
    assert db.merge_proposals(None) == [decided]
    # linking again returns the accepted edge; nothing new is staged
    counts = row_counts(db)
    again = db.link(bob, robert, "same_as")
    assert again.type == "same_as"  # type: ignore[union-attr]
    assert row_counts(db) == counts
    with pytest.raises(MergeError):
        db.reject_merge(proposal.pid)  # type: ignore[union-attr]
    assert db.verify().ok


def test_reject_is_final_and_the_pair_cannot_be_proposed_again(db: WorldDB) -> None:
    bob, bobby = _entity(db, "Bob"), _entity(db, "Bobby")
    proposal = db.link(bob, bobby, "same_as")
    db.reject_merge(proposal.pid)  # type: ignore[union-attr]
    assert db.merge_proposal(proposal.pid).status is MergeStatus.REJECTED  # type: ignore[union-attr]
    before = table_digest(db)
    for src, dst in ((bob, bobby), (bobby, bob)):
        with pytest.raises(EdgeRefused, match="final"):
            db.link(src, dst, "same_as")
    with pytest.raises(MergeError):
        db.accept_merge(proposal.pid)  # type: ignore[union-attr]
    db.reject_merge(proposal.pid)  # type: ignore[union-attr]  # the same decision again: a retry, nothing changes
    assert table_digest(db) == before
    assert db.equivalence_class(bob) == (bob,)
    # the trigger keeps the decision final even against a raw write holding a forged session
    with pytest.raises(apsw.ConstraintError, match="final"), connection.engine_write(db._conn):
        db._conn.execute("update merge_proposal set status = 'pending'")


def test_equivalence_is_transitive_over_a_chain_of_accepted_merges(db: WorldDB) -> None:
    names = ["Robert", "Bob", "Bobby", "Rob"]
    ids = [_entity(db, n, props={"provenance": f"source-{n}"}) for n in names]
    outsider = _entity(db, "Alice")
    for left, right in zip(ids, ids[1:], strict=False):
        db.accept_merge(db.link(left, right, "same_as").pid)  # type: ignore[union-attr]
    db.add_alias(ids[2], "the boss")
    for member in ids:
        assert db.equivalence_class(member) == tuple(sorted(ids))
    assert db.equivalence_class(outsider) == (outsider,)
    identity = db.export_identity(ids[0])
    assert set(identity.members) == set(ids) and len(identity.members) == 4
    assert identity.names == tuple(sorted(names))
    assert identity.aliases == ("the boss",)
    assert {p["node"] for p in identity.provenance} == set(ids)
    assert {p["source"] for p in identity.provenance} == {f"source-{n}" for n in names}
    assert all(p["type"] == "Entity" and p["created_at"] for p in identity.provenance)
    assert db.verify().ok


def test_merge_proposals_of_a_status(db: WorldDB) -> None:
    a, b, c = _entity(db, "A"), _entity(db, "B"), _entity(db, "C")
    p1 = db.link(a, b, "same_as")
    p2 = db.link(a, c, "same_as")
    db.reject_merge(p2.pid)  # type: ignore[union-attr]
    assert [p.pid for p in db.merge_proposals("pending")] == [p1.pid]  # type: ignore[union-attr]
    assert [p.pid for p in db.merge_proposals("rejected")] == [p2.pid]  # type: ignore[union-attr]
    with pytest.raises(NotFound):
        db.merge_proposal(12345)


# ---- contradictions -------------------------------------------------------------------------


def test_contradicts_keeps_both_sides_and_flags_them(db: WorldDB) -> None:
    a = db.write("The meeting is on Monday", scope="s", valid_at="2024-01-01")
    b = db.write("The meeting is on Tuesday", scope="s", valid_at="2024-01-01")
    db.link(a, b, "contradicts")
    assert db.read(a).is_current and db.read(b).is_current
    assert db.read(a).contradicted_by == (b,)
    assert db.read(b).contradicted_by == (a,)
    assert {n.id for n in db.nodes(type="Memory")} == {a, b}
    rows = db.sql("select a_id, a_content, b_id, b_content from open_contradiction")
    assert rows == [(a, "The meeting is on Monday", b, "The meeting is on Tuesday")]
    assert db.stats()["open_contradictions"] == 1
    db.retire(b)
    assert db.sql("select count(*) from open_contradiction")[0][0] == 0
    assert db.verify().ok


def test_a_contradiction_stays_open_while_both_sides_are_valid(db: WorldDB) -> None:
    a = db.write("The meeting is on Monday", scope="s", valid_at="2024-01-01")
    b = db.write("The meeting is on Tuesday", scope="s", valid_at="2024-01-01")
    db.link(a, b, "contradicts")
    db.retire(b, at="2999-01-01")  # true until far in the future
    assert {n.id for n in db.nodes(type="Memory")} == {a, b}
    assert db.read(a).contradicted_by == (b,)
    assert db.sql("select count(*) from open_contradiction")[0][0] == 1


# ---- custom edge types ----------------------------------------------------------------------


class Replaces(BaseEdgeType):
    """A custom type with a side effect: closes the target's validity at the source's start."""

    name = "replaces"

    def on_insert(self, edge: EdgeDraft, ctx: Any) -> list[Any]:
        super().on_insert(edge, ctx)
        return [CloseValidity(edge.dst.nid, edge.src.valid_at)]


def test_custom_edge_type_with_its_own_refusal(db: WorldDB) -> None:
    db.register_edge_type(Mentors())
    ann, ben = _entity(db, "Ann"), _entity(db, "Ben")
    note = db.write("a note", scope="s")
    edge = db.link(ann, ben, "mentors")
    assert edge.type == "mentors"  # type: ignore[union-attr]
    before = table_digest(db)
    with pytest.raises(EdgeRefused, match="two entities"):
        db.link(note, ben, "mentors")
    with pytest.raises(EdgeRefused):
        db.link(ann, ann, "mentors")  # the inherited self-loop check
    assert table_digest(db) == before
    assert [n.id for n in db.neighbours(ann, types=["mentors"]).nodes] == [ann, ben]
    assert "mentors" in db._registry.rules().pierce
    assert db.verify().ok
    with pytest.raises(InvalidInput, match="already exists"):
        db.register_edge_type(Mentors())


def test_custom_edge_type_decisions_are_applied_by_the_reconciler(db: WorldDB) -> None:
    db.register_edge_type(Replaces())
    old = db.write("old plan", scope="s", valid_at="2024-01-01")
    new = db.write("new plan", scope="s", valid_at="2024-04-01")
    db.link(new, old, "replaces")
    assert db.read(old).invalid_at == T("2024-04-01")
    assert db.verify().ok


def test_custom_types_are_per_store(db: WorldDB) -> None:
    with WorldDB(":memory:", embedder=FakeEmbedder()) as other:
        other.register_edge_type(Mentors())
    ann, ben = _entity(db, "Ann"), _entity(db, "Ben")
    with pytest.raises(UnknownEdgeType, match="register"):
        db.link(ann, ben, "mentors")


# ---- bad input -------------------------------------------------------------------------------


BAD_REFS = ["", "xyz", "g" * 8, "0" * 65, "1234567", "abc def0", "ab" * 16 + "zz"]


@pytest.mark.parametrize("ref", BAD_REFS)
@pytest.mark.parametrize(
    "call",
    [
        "read",
        "amend",
        "retire",
        "link-src",
        "link-dst",
        "world-parent",
        "write-world",
        "history",
        "root",
        "unlink",
        "equivalence",
    ],
)
def test_malformed_ids_raise_invalid_id_and_change_nothing(db: WorldDB, ref: str, call: str) -> None:
    a = db.write("a", scope="s")
    before = table_digest(db)
    action: dict[str, Callable[[], object]] = {
        "read": lambda: db.read(ref),
        "amend": lambda: db.amend(ref, "x"),
        "retire": lambda: db.retire(ref),
        "link-src": lambda: db.link(ref, a, "refers_to"),
        "link-dst": lambda: db.link(a, ref, "refers_to"),
        "world-parent": lambda: db.world("w", parent=ref),
        "write-world": lambda: db.write("x", world=ref),
        "history": lambda: db.history(ref),
        "root": lambda: db.root(ref),
        "unlink": lambda: db.unlink(ref),
        "equivalence": lambda: db.equivalence_class(ref),
    }
    with pytest.raises(InvalidId) as info:
        action[call]()
    assert isinstance(info.value, ValueError)
    assert table_digest(db) == before


@pytest.mark.parametrize("ref", [None, 12345678, b"\x00" * 31])
def test_non_text_ids_raise_invalid_id(db: WorldDB, ref: object) -> None:
    with pytest.raises(InvalidId):
        db.read(ref)  # type: ignore[arg-type]


def test_unknown_prefix_is_not_found(db: WorldDB) -> None:
    a = db.write("a", scope="s")
    other = "0" * 8 if not a.startswith("0" * 8) else "f" * 8
    with pytest.raises(NotFound) as info:
        db.read(other)
    assert isinstance(info.value, LookupError)
    with pytest.raises(NotFound):
        db.read(("0" if a[0] != "0" else "1") + a[1:])  # a full-length id that does not exist


@pytest.fixture
def crafted_store() -> Store:
    """A bare node/edge table with ids sharing an 8-hex prefix (a real collision needs ~2^16 nodes)."""
    conn = apsw.Connection(":memory:")
    conn.execute(
        "create table node (nid integer primary key, id blob unique); "
        "create table edge (eid integer primary key, id blob unique)"
    )
    for table in ("node", "edge"):
        conn.execute(
            f"insert into {table} (id) values (?), (?), (?)",
            (
                bytes.fromhex("deadbeef01" + "00" * 27),
                bytes.fromhex("deadbeef02" + "00" * 27),
                bytes.fromhex("cafebabe" + "11" * 28),
            ),
        )
    return Store(conn)


def test_ambiguous_prefix(crafted_store: Store) -> None:
    with pytest.raises(AmbiguousId, match="several") as info:
        crafted_store.resolve("deadbeef")
    assert isinstance(info.value, LookupError)
    with pytest.raises(AmbiguousId):
        crafted_store.resolve_edge("DEADBEEF0")
    assert crafted_store.resolve("deadbeef01") == 1
    assert crafted_store.resolve("deadbeef02") == 2
    assert crafted_store.resolve("cafebabe") == 3
    assert crafted_store.resolve_edge("deadbeef02") == 2
    assert crafted_store.resolve(bytes.fromhex("cafebabe" + "11" * 28)) == 3
    with pytest.raises(NotFound):
        crafted_store.resolve("deadbeef03")
    with pytest.raises(InvalidId, match="too short"):
        crafted_store.resolve("cafebab")


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("", InvalidInput),
        ("   \n\t", InvalidInput),
        (b"\xff\xfe not utf-8", InvalidInput),
        ("lone \ud800 surrogate", InvalidInput),
        ("nul \x00 inside", InvalidInput),
        (None, InvalidInput),
        (42, InvalidInput),
        (b"", InvalidInput),
    ],
    ids=["empty", "blank", "bad-utf8", "surrogate", "nul", "None", "int", "empty-bytes"],
)
def test_bad_text_is_refused_and_changes_nothing(db: WorldDB, text: object, error: type[WorldDBError]) -> None:
    a = db.write("a", scope="s")
    before = table_digest(db)
    for action in (lambda: db.write(text), lambda: db.amend(a, text)):  # type: ignore[arg-type]
        with pytest.raises(error):
            action()
    assert table_digest(db) == before


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"name": b"\xff"}, InvalidInput),
        ({"scope": ""}, InvalidInput),
        ({"type": ""}, InvalidInput),
        ({"type": "9lives"}, InvalidInput),
        ({"valid_at": "soon"}, InvalidTime),
        ({"valid_at": True}, InvalidTime),
        ({"props": {1: "x"}}, InvalidInput),
        ({"props": {"x": float("inf")}}, InvalidInput),
        ({"props": {"x": object()}}, InvalidInput),
        ({"vector": [0.0] * 31}, InvalidInput),
        ({"vector": [float("nan")] * 32}, InvalidInput),
        ({"aliases": [""]}, InvalidInput),
    ],
    ids=[
        "name-bytes",
        "empty-scope",
        "empty-type",
        "type-digit",
        "valid-word",
        "valid-bool",
        "prop-int-key",
        "prop-inf",
        "prop-object",
        "vector-dim",
        "vector-nan",
        "alias-empty",
    ],
)
def test_bad_write_arguments(db: WorldDB, kwargs: dict[str, Any], error: type[WorldDBError]) -> None:
    before = table_digest(db)
    with pytest.raises(error):
        db.write("text", **kwargs)
    assert table_digest(db) == before


def test_world_names_must_be_text(db: WorldDB) -> None:
    before = table_digest(db)
    for name in ("", "  ", None):
        with pytest.raises(InvalidInput):
            db.world(name)  # type: ignore[arg-type]
    assert table_digest(db) == before


def test_cycle_errors(db: WorldDB) -> None:
    a = db.world("a")
    b = db.world("b", parent=a)
    x = db.write("x", scope="s")
    y = db.write("y", scope="s")
    db.link(x, y, "subtype_of")
    before = table_digest(db)
    with pytest.raises(CycleError) as info:
        db.link(b, a, "contains")
    assert isinstance(info.value, EdgeRefused)
    with pytest.raises(CycleError):
        db.link(y, x, "subtype_of")
    assert table_digest(db) == before


def test_retire_at_a_time_before_valid_at(db: WorldDB) -> None:
    a = db.write("x", scope="s", valid_at="2024-05-01")
    before = table_digest(db)
    with pytest.raises(InvalidTime, match="before it starts"):
        db.retire(a, at="2024-04-30")
    assert table_digest(db) == before
    db.retire(a, at="2024-05-01")  # an empty interval is allowed
    assert db.read(a).invalid_at == T("2024-05-01")


@pytest.mark.parametrize("call", ["accept", "reject", "proposal", "status", "direction", "zero", "bool"])
def test_bad_enum_and_number_arguments_are_worlddb_errors(db: WorldDB, call: str) -> None:
    a = db.write("a", scope="s")
    action: dict[str, Callable[[], object]] = {
        "accept": lambda: db.accept_merge("first"),  # type: ignore[arg-type]
        "reject": lambda: db.reject_merge("first"),  # type: ignore[arg-type]
        "proposal": lambda: db.merge_proposal("first"),  # type: ignore[arg-type]
        "status": lambda: db.merge_proposals("maybe"),
        "zero": lambda: db.accept_merge(0),
        "bool": lambda: db.accept_merge(True),
        "direction": lambda: db.neighbours(a, direction="sideways"),
    }
    # regression: these escaped as plain ValueError from int() / the enum constructors
    with pytest.raises(InvalidInput):
        action[call]()


def test_the_root_world_has_no_versions_to_amend(db: WorldDB) -> None:
    """Found in review: the root reached an assert; it is a clear error, and nothing is written."""
    before = table_digest(db)
    with pytest.raises(InvalidInput, match="root world has no versions"):
        db.amend(db.root_id, "a new root")
    assert table_digest(db) == before


def test_consolidate_inside_a_batch_joins_it(db: WorldDB) -> None:
    from worlddb_lite import ConversationIn, RuleExtractor, SessionIn, TurnIn

    talk = ConversationIn("c", ["me"], [SessionIn("1", "2024-01-01", [TurnIn("I live in Austin", "me")])])
    db.ingest(talk, deferred=True)
    with db.batch():
        assert db.consolidate(RuleExtractor()).queue == 1
    assert db.queued() == 0 and [n.content for n in db.nodes(type="Fact")] == ["me lives in: Austin"]


def test_an_amended_memory_keeps_its_aliases(db: WorldDB) -> None:
    old = db.write("Sarah, my manager", scope="ana", type="Entity", name="Sarah", aliases=["my manager"])
    new = db.amend(old, "Sarah Connor, my manager")
    assert set(db.lookup_alias("my manager")) == {old, new}
    assert db._store.alias_rows(db._store.resolve(new)) == db._store.alias_rows(db._store.resolve(old))


# ---- sql: the public read-only query -------------------------------------------------------------


def test_sql_reads_what_the_handle_wrote(db: WorldDB) -> None:
    key = db.write("The spare key is under the blue pot", scope="ana")
    assert db.sql("select id, scope, kind, text from memory") == [
        (key, "ana", "Memory", "The spare key is under the blue pot")
    ]
    assert db.sql("select count(*) from node where lower(hex(id)) = ?", (key,)) == [(1,)]
    assert db.sql("select count(*) from node where lower(hex(id)) = :id", {"id": key}) == [(1,)]
    assert db.sql("pragma user_version")[0][0] == db.stats()["schema_version"]
    assert ("text",) in [(row[1],) for row in db.sql("pragma table_info(memory)")]
    with db.batch():  # a batch's rows are settled before the read
        db.write("The dentist is on Friday", scope="ana")
        assert len(db.sql("select * from memory")) == 2


@pytest.mark.parametrize(
    "statement",
    [
        "delete from node",
        "update meta set value = 'x'",
        "insert into meta (key, value) values ('x', 'y')",
        "drop view memory",
        "create temp table t (x)",
        "attach ':memory:' as other",
        "begin",
        "pragma user_version = 3",
        "pragma wal_checkpoint",
        "select 1; delete from node",
    ],
)
def test_sql_refuses_writes(db: WorldDB, statement: str) -> None:
    db.write("The spare key is under the blue pot", scope="ana")
    root, rows = db.root(), db.sql("select * from node")
    db.sql("select count(*) from node")  # a cached statement must not slip past the check
    with pytest.raises(InvalidInput, match="only reads"):
        db.sql(statement)
    assert db.sql("select * from node") == rows and db.root() == root
    assert db.sql("pragma user_version")[0][0] == db.stats()["schema_version"]
    assert db.verify().ok
    db.write("A write through the API still works", scope="ana")  # the guard was lifted after the call


@pytest.mark.parametrize(
    ("query", "params"),
    [("selec 1", ()), ("select ?", ()), ("select ?", 3), ("select :x", {"y": 1}), (3, ()), ("select '\ud800'", ())],
)
def test_sql_a_query_sqlite_cannot_run_is_invalid_input(db: WorldDB, query: Any, params: Any) -> None:
    before = table_digest(db)
    with pytest.raises(InvalidInput):
        db.sql(query, params)
    assert table_digest(db) == before


def test_a_raw_sqlite_error_from_below_is_named_at_the_facade_door() -> None:
    """Issue 39: the layers let apsw's errors rise; every public method, property and classmethod names them."""
    from worlddb_lite.errors import StoreError

    for name, member in vars(WorldDB).items():
        if name.startswith("_"):
            continue
        inner = member.fget if isinstance(member, property) else getattr(member, "__func__", member)
        assert hasattr(inner, "__wrapped__"), f"WorldDB.{name} is not translated (db._translated)"
    db = WorldDB(":memory:")
    db._conn.close()  # every statement now fails inside apsw
    calls = {
        "write": lambda: db.write("x"),
        "recall": lambda: db.recall("x"),
        "store_id": lambda: db.store_id,
        "export": lambda: list(db.export()),
        "sql": lambda: db.sql("select 1"),
    }
    for what, call in calls.items():
        with pytest.raises((StoreError, InvalidInput), match="closed"):  # not apsw.ConnectionClosedError
            call()
            pytest.fail(f"{what} ran on a closed connection")


def test_every_kind_of_read_inside_a_batch_sees_what_the_batch_wrote(db: WorldDB) -> None:
    """Issue 39: the reader's doors (rows, searches, views) write the batch's queued rows first; none by hand."""
    with db.batch():
        note = db.write("the heron nests by the old mill", scope="ana", extractor=None)
        other = db.write("Ana keeps bees", scope="ana", extractor=None)
        db.link(note, other, "refers_to")
        assert db.read(note).content.startswith("the heron")
        assert note in [n.id for n in db.nodes(world=db.scope("ana"), type="Memory")]
        assert [n.id for n, _ in db.search("heron", k=1)] == [note]
        assert db.nearest("the heron nests by the old mill", k=1)[0][0].id == note
        assert db.recall("where does the heron nest?", scope="ana", k=1).hits[0].node.id == note
        assert other in [n.id for n in db.neighbours(note).nodes]
    assert db.verify().ok
