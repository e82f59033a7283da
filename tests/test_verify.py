"""verify.py: ok on a healthy store; names the broken invariant after each kind of tampering."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import apsw
import pytest

from worlddb_lite import WorldDB
from worlddb_lite.ops.verify import REQUIRED_TRIGGERS
from worlddb_lite.store import connection

from .conftest import FakeClock, FakeEmbedder


def _populate(db: WorldDB) -> dict[str, str]:
    home = db.world("home")
    kitchen = db.world("kitchen", parent=home)
    a = db.write("the kettle is blue", world=kitchen, valid_at="2024-01-01")
    b = db.amend(a, "the kettle is red", valid_at="2024-02-01")
    c = db.write("the fridge hums", world=kitchen, valid_at="2024-01-01")
    d = db.write("Bob", type="Entity", name="Bob", scope="people", valid_at="2024-01-01")
    e = db.write("Robert", type="Entity", name="Robert", scope="people", valid_at="2024-01-01")
    db.accept_merge(db.link(d, e, "same_as").pid)  # type: ignore[union-attr]
    db.link(b, c, "contradicts")
    db.link(c, d, "refers_to")
    db.retire(c, at="2024-06-01")
    for i in range(9):  # enough members for a tree several levels high
        db.write(f"note {i}", world=home, valid_at="2024-01-01")
    return {"home": home, "kitchen": kitchen, "a": a, "b": b, "c": c, "d": d, "e": e}


def test_verify_is_ok_on_a_healthy_store(db: WorldDB) -> None:
    _populate(db)
    seen: list[str] = []
    report = db.verify(progress=seen.append)
    assert report.ok, report.violations
    assert report.violations == ()
    assert report.checked["nodes"] == db.stats()["nodes"]
    assert report.checked["edges"] == db.stats()["edges"] == 5
    # every node but the root has text (the root is not composed either)
    assert report.checked["fts_rows"] == report.checked["vector_rows"] == report.checked["nodes"] - 1
    assert report.checked["worlds"] >= 4
    assert seen[0] == "sqlite integrity" and "merkle roots" in seen and "indexes" in seen


def test_verify_is_ok_on_a_new_store(db: WorldDB) -> None:
    assert db.verify().ok


@pytest.fixture
def store(file_db_path: str, clock: FakeClock) -> tuple[str, dict[str, str]]:
    with WorldDB(file_db_path, embedder=FakeEmbedder(), clock=clock) as db:
        ids = _populate(db)
        assert db.verify().ok
    return file_db_path, ids


def _tamper(path: str, sql: str, params: tuple[object, ...] = (), *, session: bool = True) -> None:
    """Write around the reconciler: a raw connection (sqlite-vec loaded) that forges a session row."""
    conn = connection.connect(path)
    try:
        with conn:
            if session:
                conn.execute("insert into reconciler_session (holder) values ('reconciler')")
            conn.execute(sql, params)
            if session:
                conn.execute("delete from reconciler_session")
    finally:
        conn.close()


def _nid(path: str, hex_id: str) -> int:
    conn = apsw.Connection(path)
    try:
        return int(conn.execute("select nid from node where id = ?", (bytes.fromhex(hex_id),)).fetchone()[0])
    finally:
        conn.close()


def _edge_text_column(path: str) -> str:
    """The edge table's JSON column: 'body' in the first schema, 'props' later."""
    conn = apsw.Connection(path)
    try:
        columns = {r[1] for r in conn.execute("pragma table_info(edge)")}
    finally:
        conn.close()
    return "props" if "props" in columns else "body"


def _violations(path: str) -> list[tuple[str, str]]:
    with WorldDB(path, embedder=FakeEmbedder()) as db:
        return [(v.invariant, v.detail) for v in db.verify().violations]


Tamper = Callable[[str, dict[str, str]], None]
# node_fts is contentless: a row goes by FTS5's 'delete' command with the values it was indexed with
FTS_DELETE = (
    "insert into node_fts (node_fts, rowid, name, content, context) "
    "select 'delete', nid, name, content, context from node_text where nid = ?"
)

TAMPERING: dict[str, tuple[Tamper, str, str]] = {
    "node-root-changed": (
        lambda p, i: _tamper(p, "update node_state set root = zeroblob(32) where nid = ?", (_nid(p, i["a"]),)),
        "2-merkle",
        "does not recompute",
    ),
    "world-root-changed": (
        lambda p, i: _tamper(p, "update node_state set root = randomblob(32) where nid = ?", (_nid(p, i["home"]),)),
        "2-merkle",
        "does not recompute",
    ),
    "fts-row-deleted": (
        lambda p, i: _tamper(p, FTS_DELETE, (_nid(p, i["c"]),)),
        "7-indexes",
        "no full-text row",
    ),
    "fts-row-extra": (
        lambda p, i: _tamper(p, "insert into node_fts (rowid, name, content) values (99999, '', 'ghost')"),
        "7-indexes",
        "belongs to no node",
    ),
    "vector-row-deleted": (
        lambda p, i: _tamper(p, "delete from node_vec where rowid = ?", (_nid(p, i["d"]),)),
        "7-indexes",
        "no vector",
    ),
    "guard-trigger-dropped": (
        lambda p, i: _tamper(p, "drop trigger edge_insert_guard", session=False),
        "4-never-appends",
        "edge_insert_guard is missing",
    ),
    "session-row-left-at-rest": (
        lambda p, i: _tamper(p, "insert into reconciler_session (holder) values ('reconciler')", session=False),
        "4-never-appends",
        "session row is present at rest",
    ),
    "validity-tightened-around-the-reconciler": (  # a forged session passes the guard; the root does not match
        lambda p, i: _tamper(
            p,
            "update node_state set invalid_at = '2024-03-01T00:00:00.000000Z' where nid = ?",
            (_nid(p, i["b"]),),
        ),
        "2-merkle",
        "does not recompute",
    ),
    "merkle-top-row-changed": (
        lambda p, i: _tamper(
            p,
            "update merkle set hash = zeroblob(32) where world = ?1 and idx = 0 "
            "and level = (select max(level) from merkle where world = ?1)",
            (_nid(p, i["home"]),),
        ),
        "2-merkle",
        "stored Merkle tree",
    ),
    "root-log-truncated": (
        lambda p, i: _tamper(
            p,
            "drop trigger root_log_no_delete; "  # a raw writer can drop the guard; verify names that too
            "delete from root_log where lid = (select max(lid) from root_log where world = ?)",
            (_nid(p, i["home"]),),
        ),
        "2-merkle",
        "root history",
    ),
    "edge-forged-with-a-session": (
        lambda p, i: _tamper(
            p,
            f"insert into edge (id, type, src, dst, world, slot, {_edge_text_column(p)}, "
            "valid_at, created_at) "
            "select randomblob(32), 'refers_to', ?, ?, parent, 50, '{}', '2024-01-01T00:00:00.000000Z', "
            "'2024-01-01T00:00:00.000000Z' from node where nid = ?",
            (_nid(p, i["a"]), _nid(p, i["c"]), _nid(p, i["a"])),
        ),
        "1-content-address",
        "does not hash to its id",
    ),
    "content-erased-without-tombstone": (
        lambda p, i: _tamper_purge(p, _nid(p, i["c"])),
        "1-content-address",
        "no purge tombstone",
    ),
    "merkle-rows-for-a-memory-without-members": (
        lambda p, i: _tamper(
            p, "insert into merkle (world, level, idx, hash) values (?, 0, 0, zeroblob(32))", (_nid(p, i["c"]),)
        ),
        "2-merkle",
        "stored Merkle tree",
    ),
    "header-type-differs-from-blob": (
        lambda p, i: _tamper(
            p, "drop trigger node_blob_immutable; update node set type = 'Forged' where nid = ?", (_nid(p, i["c"]),)
        ),
        "1-content-address",
        "header disagrees with its blob",
    ),
    "accepted-merge-without-edges": (
        lambda p, i: _tamper(
            p,
            "insert into merge_proposal (a, b, status, reason, proposed_at) values (?, ?, "
            "'accepted', 'forged', '2024-01-01T00:00:00.000000Z')",
            tuple(sorted((_nid(p, i["a"]), _nid(p, i["d"])))),
        ),
        "6-no-silent-merge",
        "lacks its same_as edges",
    ),
}


def _tamper_purge(path: str, nid: int) -> None:
    conn = connection.connect(path)
    try:
        with conn:
            conn.execute("insert into reconciler_session (holder) values ('purge')")
            conn.execute("update node set body = null where nid = ?", (nid,))
            conn.execute("delete from reconciler_session")
    finally:
        conn.close()


@pytest.mark.parametrize("case", sorted(TAMPERING))
def test_verify_reports_tampering(store: tuple[str, dict[str, str]], case: str) -> None:
    path, ids = store
    tamper, invariant, phrase = TAMPERING[case]
    tamper(path, ids)
    found = _violations(path)
    assert found, f"{case}: verify saw nothing"
    assert any(inv == invariant and phrase in detail for inv, detail in found), found


def test_every_required_trigger_is_checked(store: tuple[str, dict[str, str]]) -> None:
    path, _ = store
    for name in REQUIRED_TRIGGERS:
        _tamper(path, f"drop trigger {name}", session=False)
    found = _violations(path)
    missing = {d.split()[2] for inv, d in found if inv == "4-never-appends" and "is missing" in d}
    assert missing == set(REQUIRED_TRIGGERS)


def test_a_tampered_leaf_shows_at_every_ancestor(store: tuple[str, dict[str, str]]) -> None:
    path, ids = store
    # change a closed validity's belief time with a forged session: the leaf and its worlds stop matching
    _tamper(
        path,
        "update node_state set closed_at = '2099-01-01T00:00:00.000000Z' where nid = ?",
        (_nid(path, ids["a"]),),
    )
    found = [d for inv, d in _violations(path) if inv == "2-merkle" and "does not recompute" in d]
    assert any(ids["a"][:16] in d for d in found)
    assert any(ids["kitchen"][:16] in d for d in found)
    assert any(ids["home"][:16] in d for d in found)
    assert len(found) == 4  # the leaf, kitchen, home and the store root


def test_custom_edge_types_are_recorded_so_verify_knows_them_later(file_db_path: str) -> None:
    from worlddb_lite.edges import BaseEdgeType

    class Mentors(BaseEdgeType):
        name = "mentors"

    with WorldDB(file_db_path, embedder=FakeEmbedder()) as db:
        db.register_edge_type(Mentors())
        db.link(db.write("a", scope="s"), db.write("b", scope="s"), "mentors")
        assert db.verify().ok
    with WorldDB(file_db_path, embedder=FakeEmbedder()) as db:  # e.g. `worlddb verify`, which registers nothing
        assert db.verify().ok


def test_verify_reports_an_edge_type_nobody_recorded(store: tuple[str, dict[str, str]]) -> None:
    path, ids = store
    _tamper(
        path,
        f"insert into edge (id, type, src, dst, world, slot, {_edge_text_column(path)}, valid_at, created_at) "
        "select randomblob(32), 'forged', ?, ?, parent, 50, '{}', '2024-01-01T00:00:00.000000Z', "
        "'2024-01-01T00:00:00.000000Z' from node where nid = ?",
        (_nid(path, ids["a"]), _nid(path, ids["c"]), _nid(path, ids["a"])),
    )
    found = _violations(path)
    assert any(
        inv == "4-never-appends" and "'forged'" in d and "neither built in nor recorded" in d for inv, d in found
    ), found


def test_node_state_cannot_be_changed_without_the_reconciler(store: tuple[str, dict[str, str]]) -> None:
    path, ids = store
    with pytest.raises(apsw.ConstraintError, match="changed only by the worlddb reconciler"):
        _tamper(path, "update node_state set salience = 9 where nid = ?", (_nid(path, ids["a"]),), session=False)


def test_tampering_is_seen_by_a_store_that_was_open_all_along(store: tuple[str, dict[str, str]]) -> None:
    path, ids = store
    with WorldDB(path, embedder=FakeEmbedder()) as db:
        assert db.verify().ok
        _tamper(path, FTS_DELETE, (_nid(path, ids["b"]),))
        assert not db.verify().ok


def test_verify_file_untouched(store: tuple[str, dict[str, str]]) -> None:
    path, _ = store
    before = Path(path).read_bytes()
    with WorldDB(path, embedder=FakeEmbedder()) as db:
        assert db.verify().ok
    assert Path(path).read_bytes() == before


def test_verify_reports_a_corrupted_inner_merkle_row(store: tuple[str, dict[str, str]]) -> None:
    # regression: only the top row of each stored tree was compared
    path, ids = store
    _tamper(
        path,
        "update merkle set hash = zeroblob(32) where world = ? and level = 0 and idx = 0",
        (_nid(path, ids["home"]),),
    )
    assert _violations(path), "verify passed a store whose stored Merkle tree is corrupt"


def test_a_corrupted_inner_merkle_row_surfaces_after_the_next_write(
    store: tuple[str, dict[str, str]],
) -> None:
    # documents the consequence of the gap above; passes today and after the fix
    path, ids = store
    home = _nid(path, ids["home"])
    _tamper(path, "update merkle set hash = zeroblob(32) where world = ? and level = 0 and idx = 0", (home,))
    with WorldDB(path, embedder=FakeEmbedder()) as db:
        sibling = db.sql("select lower(hex(id)) from node where parent = ? and slot = 1", (home,))[0][0]
        db.retire(sibling)
        assert not db.verify().ok


def _damage(path: str) -> None:
    """Zero every other page after the schema pages (a disk that lost sectors)."""
    data = bytearray(Path(path).read_bytes())
    page = int.from_bytes(data[16:18], "big") or 65536
    for start in range(3 * page, len(data), 2 * page):
        data[start : start + page] = bytes(page)
    Path(path).write_bytes(bytes(data))


def test_verify_reports_a_damaged_file_instead_of_crashing(file_db_path: str, clock: FakeClock) -> None:
    # regression: apsw.CorruptError escaped WorldDB() and verify()
    from worlddb_lite.errors import WorldDBError

    with WorldDB(file_db_path, embedder=FakeEmbedder(), clock=clock) as db, db.batch():
        for i in range(200):
            db.write(f"memory number {i} " * 5, scope="s", valid_at="2024-01-01")
    _damage(file_db_path)
    try:
        db = WorldDB(file_db_path, embedder=FakeEmbedder())
    except WorldDBError:
        return  # refusing to open a damaged store with a WorldDBError is fine
    try:
        report = db.verify()
    except WorldDBError:
        return
    finally:
        db.close()
    assert not report.ok and any(v.invariant == "sqlite" for v in report.violations)


# ---- verify --deep: every logged root, replayed from the history -------------------------------


def _deep_history_violations(path: str) -> list[str]:
    with WorldDB(path, embedder=FakeEmbedder()) as db:
        report = db.verify(deep=True)
        assert report.checked["logged_roots"] > 0
        return [
            d
            for inv, d in ((v.invariant, v.detail) for v in report.violations)
            if inv == "2-merkle" and "root history diverges" in d
        ]


def test_the_history_tables_refuse_rewrites(store: tuple[str, dict[str, str]]) -> None:
    path, _ = store
    _tamper(path, "insert into tombstone (id, purged_at) values (zeroblob(32), '2024-01-01T00:00:00.000000Z')")
    for sql in (
        "update root_log set size = 0",
        "delete from state_log",
        "delete from tombstone",
        "update tombstone set purged_at = '2000-01-01'",
    ):
        with pytest.raises(apsw.ConstraintError, match="append-only|final"):
            _tamper(path, sql)  # even holding a forged reconciler session


def test_deep_verify_replays_every_logged_root(store: tuple[str, dict[str, str]]) -> None:
    path, _ = store
    with WorldDB(path, embedder=FakeEmbedder()) as db:
        seen: list[str] = []
        report = db.verify(deep=True, progress=seen.append)
        assert report.ok, report.violations
        nameable = db.sql("select count(*) from (select distinct world, at from root_log)")[0][0]
        assert report.checked["logged_roots"] == nameable
        assert any(s.startswith("root history") for s in seen)
        assert "logged_roots" not in db.verify().checked  # the plain check does not replay


def test_deep_verify_names_the_first_divergence_of_a_rewritten_past(store: tuple[str, dict[str, str]]) -> None:
    """A past state change rewritten: today's state still checks out; only the replay sees it."""
    path, ids = store
    kettle = _nid(path, ids["a"])
    conn = apsw.Connection(path)
    (at,) = conn.execute(
        "select at from state_log where kind = 'node' and ref = ? order by lid limit 1", (kettle,)
    ).fetchone()
    conn.close()
    _tamper(path, "drop trigger state_log_append_only", session=False)
    _tamper(
        path,
        "update state_log set closed_at = '2099-01-01T00:00:00.000000Z' "
        "where lid = (select min(lid) from state_log where kind = 'node' and ref = ?)",
        (kettle,),
    )
    with WorldDB(path, embedder=FakeEmbedder()) as db:
        # the present is intact: only the dropped guard shows without the replay
        assert [v.detail for v in db.verify().violations] == [
            "guard trigger state_log_append_only is missing; the store can be written around the reconciler"
        ]
    found = _deep_history_violations(path)
    assert len(found) == 1 and f"diverges first at {at}" in found[0], found


def test_deep_verify_names_a_forged_root_in_the_middle_of_the_log(store: tuple[str, dict[str, str]]) -> None:
    path, ids = store
    home = _nid(path, ids["home"])
    conn = apsw.Connection(path)
    lids = [r[0] for r in conn.execute("select lid from root_log where world = ? order by lid", (home,))]
    (at,) = conn.execute("select at from root_log where lid = ?", (lids[1],)).fetchone()
    conn.close()
    _tamper(path, "drop trigger root_log_append_only", session=False)
    _tamper(path, "update root_log set root = randomblob(32) where lid = ?", (lids[1],), session=False)
    found = _deep_history_violations(path)
    assert len(found) == 1 and f"diverges first at {at}" in found[0] and ids["home"][:16] in found[0], found


def test_the_in_memory_tree_of_the_replay_matches_a_tree_built_from_scratch() -> None:
    import random

    from worlddb_lite.store.merkle import compute_top
    from worlddb_lite.store.merkle_replay import _Tree

    rng = random.Random(7)
    tree, leaves = _Tree(), []
    for step in range(300):
        if leaves and rng.random() < 0.4:
            slot = rng.randrange(len(leaves))
        else:
            slot = len(leaves)
            leaves.append(b"")
        leaves[slot] = rng.randbytes(32)
        tree.set(slot, leaves[slot])
        if rng.random() < 0.5 or step < 20:  # several changes between tops too
            assert tree.top() == compute_top(leaves), step


def test_a_clock_that_steps_back_neither_breaks_the_history_nor_hides_a_write(file_db_path: str) -> None:
    """NTP corrections and boards without a real-time clock: commits stay in order, reads see them."""
    import datetime as dt

    clock = FakeClock()
    with WorldDB(file_db_path, embedder=FakeEmbedder(), clock=clock) as db:
        notes = [db.write("before the step", scope="s")]
        clock.advance(-dt.timedelta(minutes=5))  # the clock jumps back
        notes.append(db.write("after the step", scope="s"))
        db.retire(notes[0])
        notes.append(db.amend(notes[1], "after the step, corrected"))
        assert [db.read(n).content for n in notes] == ["before the step", "after the step", "after the step, corrected"]
        assert {n.id for n, _ in db.search("step")} == {notes[2]}  # visible although the clock reads earlier
        times = [at for at, _, _ in db.root_history()]
        assert times == sorted(times)
        report = db.verify(deep=True)
        assert report.ok, report.violations


def test_verify_reads_one_snapshot_while_another_process_writes(tmp_path: Path) -> None:
    # review: verify read each check at whatever was committed by then, so a writer in another process
    # made it report broken hashes, roots and indexes (and FTS5's quick_check stale blobs) on a healthy store
    path = str(tmp_path / "busy.db")
    with WorldDB(path, embedder=FakeEmbedder()) as db:
        db.write_many([{"text": f"note {i} about gardening and tea number{i}", "scope": "a"} for i in range(1000)])
    stop = tmp_path / "stop"
    writer = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, pathlib\n"
            f"sys.path.insert(0, {str(Path(__file__).resolve().parent.parent)!r})\n"
            "from tests.conftest import FakeEmbedder\n"
            "from worlddb_lite import WorldDB\n"
            f"db = WorldDB({path!r}, embedder=FakeEmbedder())\n"
            "i = 0\n"
            f"while not pathlib.Path({str(stop)!r}).exists():\n"
            "    db.write(f'concurrent note {i} word{i}', scope='a'); i += 1\n",
        ]
    )
    try:
        with WorldDB(path, embedder=FakeEmbedder()) as db:
            deadline = time.monotonic() + 30
            while len(db.search("concurrent", k=5)) < 5 and time.monotonic() < deadline:
                time.sleep(0.05)  # the writer is under way
            reports, until = [], time.monotonic() + 3
            while time.monotonic() < until:
                reports.append(db.verify(deep=True))
    finally:
        stop.touch()
        writer.wait(timeout=60)
    assert [v for r in reports for v in r.violations] == []
