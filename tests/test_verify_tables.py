"""verify.py over every table: each tampering the issue-35 probe made is named, or listed as unchecked with why.

The probe wrote around the engine (a raw connection holding a forged session, as the guards let a writer that
drops or forges them do), then ran ``verify --deep``. Each case below is one such write.
"""

from __future__ import annotations

from collections.abc import Callable

import apsw
import numpy as np
import pytest

from worlddb_lite import WorldDB
from worlddb_lite.errors import WorldDBError
from worlddb_lite.store import connection
from worlddb_lite.write.conversation import ConversationIn, SessionIn, TurnIn

from .conftest import FakeClock, FakeEmbedder
from .test_verify import _populate

Ids = dict[str, str]


def _conversation() -> ConversationIn:
    turns = ["I moved to Denver.", "My sister lives in Boston.", "I work at Acme."]
    return ConversationIn("c", ["me"], [SessionIn("s", "2024-03-01", [TurnIn(t, "me") for t in turns])])


@pytest.fixture
def store(file_db_path: str, clock: FakeClock) -> tuple[str, Ids]:
    """A store that has every table filled: aliases, a purge, a drained and a pending queue, a cold tier."""
    with WorldDB(file_db_path, embedder=FakeEmbedder(), clock=clock) as db:
        ids = _populate(db)
        db.add_alias(ids["d"], "Bobby")
        db.ingest(_conversation(), deferred=True)
        db.consolidate(only="queue")
        db.ingest(
            ConversationIn("c2", ["me"], [SessionIn("t", "2024-04-01", [TurnIn("I moved to Austin.", "me")])]),
            deferred=True,
        )
        gone = db.write("my PIN is 4921", scope="people")
        db.purge(gone)
        db.set_retention(max_hot_vectors=3)
        db.consolidate()
        ids["gone"] = gone
        report = db.verify(deep=True)
        assert report.ok, report.violations
    return file_db_path, ids


def _sql(path: str, sql: str, params: tuple[object, ...] = ()) -> None:
    """One raw write holding a forged session (a probe that dropped the guards would need none)."""
    conn = connection.connect(path)
    try:
        with conn:
            conn.execute("insert into reconciler_session (holder) values ('reconciler')")
            conn.execute(sql, params)
            conn.execute("delete from reconciler_session")
    finally:
        conn.close()


def _one(path: str, sql: str, params: tuple[object, ...] = ()) -> object:
    conn = apsw.Connection(path)
    try:
        row = conn.execute(sql, params).fetchone()
        assert row is not None, sql
        return row[0]
    finally:
        conn.close()


def _nid(path: str, hex_id: str) -> int:
    return int(_one(path, "select nid from node where id = ?", (bytes.fromhex(hex_id),)))  # type: ignore[call-overload]


def _report(path: str) -> tuple[list[str], dict[str, str]]:
    with WorldDB(path, embedder=FakeEmbedder()) as db:
        report = db.verify(deep=True)
    return [f"{v.invariant}: {v.detail}" for v in report.violations], dict(report.unchecked)


Tamper = Callable[[str, Ids], None]

# case -> (the write, the table verify must name in a violation)
NAMED: dict[str, tuple[Tamper, str]] = {
    "change-log-row-deleted": (
        lambda p, i: _sql(p, "delete from change_log where seq = (select max(seq) / 2 from change_log)"),
        "change_log",
    ),
    "change-log-last-row-deleted": (
        lambda p, i: _sql(p, "delete from change_log where seq = (select max(seq) from change_log)"),
        "change_log",
    ),
    "change-log-row-altered": (
        lambda p, i: _sql(
            p,
            "update change_log set ref = ?1 "
            "where seq = (select min(seq) from change_log where kind = 'node' and ref = ?2)",
            (_nid(p, i["a"]), _nid(p, i["c"])),
        ),
        "change_log",
    ),
    "node-vec-negated": (
        lambda p, i: _sql(
            p,
            "update node_vec set embedding = (select embedding from node_vec where nid = ?2) where nid = ?1",
            (_nid(p, i["c"]), _nid(p, i["b"])),
        ),
        "node_vec",
    ),
    "sync-peer-is-this-store": (
        lambda p, i: _sql(p, "insert into sync_peer (store_id) select value from meta where key = 'store_id'"),
        "sync_peer",
    ),
    "store-id-malformed": (
        lambda p, i: _sql(p, "update meta set value = 'forged' where key = 'store_id'"),
        "store_id",
    ),
    "store-id-deleted": (lambda p, i: _sql(p, "delete from meta where key = 'store_id'"), "store_id"),
    "cold-node-inserted-for-a-world": (
        lambda p, i: _sql(
            p,
            "insert into cold_node (nid, moved_at, score, reason) values (?, '2024-01-01T00:00:00.000000Z', 0.1, "
            "'retention score 0.1 below cold_below 1')",
            (_nid(p, i["kitchen"]),),
        ),
        "cold_node",
    ),
    "cold-node-reason-changed": (
        lambda p, i: _sql(p, "update cold_node set reason = 'forged' where nid = (select min(nid) from cold_node)"),
        "cold_node",
    ),
    "alias-added-with-a-forged-norm": (
        lambda p, i: _sql(
            p,
            "insert into alias (nid, alias, norm, source, created_at) values (?, 'Sarah', 'zed', 'user', "
            "'2024-01-01T00:00:00.000000Z')",
            (_nid(p, i["d"]),),
        ),
        "alias",
    ),
    "alias-added-without-its-change": (
        lambda p, i: _sql(
            p,
            "drop trigger change_alias; insert into alias (nid, alias, norm, source, created_at) values "
            "(?, 'Sarah', 'sarah', 'user', '2024-01-01T00:00:00.000000Z'); " + _CHANGE_ALIAS,
            (_nid(p, i["d"]),),
        ),
        "alias",
    ),
    "legacy-order-forged": (
        lambda p, i: _sql(p, "insert into legacy_order (world, size) values (?, 3)", (_nid(p, i["home"]),)),
        "legacy_order",
    ),
    "tombstone-for-a-live-node": (
        lambda p, i: _sql(
            p,
            "insert into tombstone (id, purged_at) values (?, '2024-01-01T00:00:00.000000Z')",
            (bytes.fromhex(i["a"]),),
        ),
        "tombstone",
    ),
    "root-log-middle-row-deleted": (
        lambda p, i: _sql(
            p,
            "drop trigger root_log_no_delete; delete from root_log where lid = (select max(lid) / 2 from root_log); "
            + _ROOT_LOG_NO_DELETE,
        ),
        "root_log",
    ),
    "proposal-forged-for-a-purged-node": (
        lambda p, i: _sql(
            p,
            "insert into merge_proposal (a, b, status, tier, reason, proposed_at) values (?, ?, 'pending', 'manual', "
            "'forged', '2024-01-01T00:00:00.000000Z')",
            tuple(sorted((_nid(p, i["d"]), _nid(p, i["gone"])))),
        ),
        "merge_proposal",
    ),
    "proposal-forged-without-its-change": (
        lambda p, i: _sql(
            p,
            "drop trigger change_proposal; insert into merge_proposal (a, b, status, tier, reason, proposed_at) "
            "values (?, ?, 'pending', 'manual', 'forged', '2024-06-01T00:00:00.000000Z'); " + _CHANGE_PROPOSAL,
            tuple(sorted((_nid(p, i["a"]), _nid(p, i["c"])))),
        ),
        "merge_proposal",
    ),
    "vec-centroid-garbage": (
        lambda p, i: _sql(p, "insert or replace into vec_centroid (part, centroid) values (0, x'00000000ffffffff')"),
        "vec_centroid",
    ),
    "fts-second-row-for-a-memory": (
        lambda p, i: _sql(
            p, "insert into node_fts (rowid, name, content) values (?, '', 'bananas')", (_nid(p, i["c"]),)
        ),
        "node_fts",
    ),
    "work-queue-turn-forged": (
        lambda p, i: _sql(p, "update work_queue set turn = scope where qid = (select max(qid) from work_queue)"),
        "work_queue",
    ),
}


def _trigger(name: str) -> str:
    from worlddb_lite.store.migrations import schema_statement

    return schema_statement(name)


_CHANGE_ALIAS = _trigger("change_alias")
_CHANGE_PROPOSAL = _trigger("change_proposal")
_ROOT_LOG_NO_DELETE = _trigger("root_log_no_delete")


@pytest.mark.parametrize("case", sorted(NAMED))
def test_deep_verify_names_the_table_written_around_the_engine(store: tuple[str, Ids], case: str) -> None:
    path, ids = store
    tamper, table = NAMED[case]
    tamper(path, ids)
    found, _ = _report(path)
    assert any(table in v for v in found), (case, found)


def test_swapped_vectors_are_named(store: tuple[str, Ids]) -> None:
    path, ids = store
    a, c = _nid(path, ids["a"]), _nid(path, ids["c"])
    blob = "select embedding from node_vec where nid = ?"
    va, vc = _one(path, blob, (a,)), _one(path, blob, (c,))
    _sql(path, "update node_vec set embedding = ? where nid = ?", (vc, a))
    _sql(path, "update node_vec set embedding = ? where nid = ?", (va, c))
    found, _ = _report(path)
    assert sum("node_vec" in v for v in found) >= 2, found


def test_a_negated_vector_is_named(store: tuple[str, Ids]) -> None:
    """Negated in Python: every int8 code's sign turned (still a unit vector: only the deep check sees it)."""
    path, ids = store
    nid = _nid(path, ids["c"])
    blob = bytes(_one(path, "select embedding from node_vec where nid = ?", (nid,)))  # type: ignore[call-overload]
    negated = bytes(((-c) & 0xFF) for c in np.frombuffer(blob, dtype=np.int8).astype(np.int16))
    _sql(path, "update node_vec set embedding = ? where nid = ?", (negated, nid))
    found, _ = _report(path)
    assert any("node_vec" in v for v in found), found


def test_a_vector_damaged_on_disk_is_named_by_the_plain_verify(store: tuple[str, Ids]) -> None:
    """New-user trial: 64 bytes flipped inside a node_vec page left a vector of length 391; only --deep saw it."""
    path, ids = store
    nid = _nid(path, ids["c"])
    blob = bytearray(_one(path, "select embedding from node_vec where nid = ?", (nid,)))  # type: ignore[call-overload]
    blob[40:44] = bytes([0x00, 0x00, 0xC8, 0x43])  # one float now 400.0
    _sql(path, "update node_vec set embedding = ? where nid = ?", (bytes(blob), nid))
    with WorldDB(path, embedder=FakeEmbedder()) as db:
        found = [v.detail for v in db.verify().violations]
    assert any(f"vector row {nid} is not a unit vector" in d and "re-embedding" in d for d in found), found


# What verify cannot check from the file alone: the report lists the table and says why.
UNCHECKED: dict[str, tuple[Tamper, str]] = {
    "alias-deleted": (lambda p, i: _sql(p, "delete from alias where norm = 'bobby'"), "alias"),
    "sync-peer-seen-moved": (
        lambda p, i: _sql(p, "insert into sync_peer (store_id, seen) values (?, 5)", ("a" * 32,)),
        "sync_peer",
    ),
    "store-id-replaced": (
        lambda p, i: _sql(p, "update meta set value = ? where key = 'store_id'", ("b" * 32,)),
        "meta",
    ),
    "cold-node-deleted": (lambda p, i: _sql(p, "delete from cold_node"), "cold_node"),
    "work-queue-marked-done": (
        lambda p, i: _sql(p, "update work_queue set done_at = enqueued_at where done_at is null"),
        "work_queue",
    ),
    "proposal-forged": (
        lambda p, i: _sql(
            p,
            "insert into merge_proposal (a, b, status, tier, reason, proposed_at) values (?, ?, 'pending', 'manual', "
            "'forged', '2024-06-01T00:00:00.000000Z')",
            tuple(sorted((_nid(p, i["a"]), _nid(p, i["c"])))),
        ),
        "merge_proposal",
    ),
    "alias-added": (
        lambda p, i: _sql(
            p,
            "insert into alias (nid, alias, norm, source, created_at) values (?, 'Sarah', 'sarah', 'user', "
            "'2024-01-01T00:00:00.000000Z')",
            (_nid(p, i["d"]),),
        ),
        "alias",
    ),
}


@pytest.mark.parametrize("case", sorted(UNCHECKED))
def test_what_verify_cannot_check_is_listed_with_the_reason(store: tuple[str, Ids], case: str) -> None:
    path, ids = store
    tamper, table = UNCHECKED[case]
    tamper(path, ids)
    found, unchecked = _report(path)
    assert table in unchecked and len(unchecked[table]) > 20, (case, unchecked, found)


def test_every_table_is_checked_or_listed(store: tuple[str, Ids]) -> None:
    """Every table and index the file holds is read by verify, or named as unchecked with the reason."""
    path, _ = store
    with WorldDB(path, embedder=FakeEmbedder()) as db:
        report = db.verify(deep=True)
        names = _tables(path)
    from worlddb_lite.ops.verify_tables import CHECKED_TABLES

    unaccounted = {n for n in names if not n.startswith("node_fts_") and not n.startswith("sqlite_")} - (
        set(CHECKED_TABLES) | set(report.unchecked)
    )
    assert not unaccounted, unaccounted


RAW_WRITES = {
    "meta": "update meta set value = 'x' where key = 'created_at'",
    "meta-delete": "delete from meta where key = 'store_id'",
    "alias": "insert into alias (nid, alias, norm, source, created_at) values (1, 'x', 'x', 'user', '2024')",
    "alias-delete": "delete from alias",
    "node_vec": "update node_vec set seq = seq + 1",
    "node_vec-delete": "delete from node_vec",
    "node_tokens": "insert into node_tokens (nid, ids) values (1, x'0100')",
    "tombstone": "insert into tombstone (id, purged_at) values (zeroblob(32), '2024')",
    "change_log": "delete from change_log",
    "sync_peer": "insert into sync_peer (store_id) values ('" + "c" * 32 + "')",
    "cold_node": "delete from cold_node",
    "work_queue": "update work_queue set done_at = '2024'",
    "legacy_order": "insert into legacy_order (world, size) values (1, 1)",
    "merge_proposal": "delete from merge_proposal",
    "vec_centroid": "insert into vec_centroid (part, centroid) values (7, x'0000803f')",
    "world_vec": "delete from world_vec",
    "index_text": "delete from index_text",
    "merkle": "delete from merkle",
}


@pytest.mark.parametrize("case", sorted(RAW_WRITES))
def test_a_raw_write_is_refused(store: tuple[str, Ids], case: str) -> None:
    path, _ = store
    conn = apsw.Connection(path)
    try:
        with pytest.raises(apsw.ConstraintError, match="worlddb:"):
            conn.execute(RAW_WRITES[case])
    finally:
        conn.close()


def test_a_store_without_its_meta_rows_says_so(store: tuple[str, Ids]) -> None:
    path, _ = store
    conn = apsw.Connection(path)
    try:
        conn.execute("drop trigger if exists meta_delete_guard; delete from meta")
    finally:
        conn.close()
    with pytest.raises(WorldDBError, match=r"meta.*damaged.*\(next: verify the store"):
        WorldDB(path, embedder=FakeEmbedder()).close()


def _tables(path: str) -> set[str]:
    conn = apsw.Connection(path)
    try:
        return {str(r[0]) for r in conn.execute("select name from sqlite_schema where type = 'table'")}
    finally:
        conn.close()
