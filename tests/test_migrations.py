"""Schema migrations, on a store written by the previous version (tests/fixtures/store-v1.db).

The fixture was written by commit 1c0d9c9 with tests/fixtures/make_store.py; every test works on
a copy, so the fixture itself never changes.
"""

from __future__ import annotations

import hashlib
import shutil
import unicodedata
from pathlib import Path
from typing import Any

import apsw
import numpy as np
import pytest

from worlddb_lite import SchemaTooNew, SchemaTooOld, WorldDB
from worlddb_lite.cli import main
from worlddb_lite.index import segments
from worlddb_lite.store import connection, migrations, queries, vector_codes
from worlddb_lite.write.conversation import ConversationIn, SessionIn, TurnIn

from .conftest import nid_of

FIXTURES = Path(__file__).parent / "fixtures"
FIXTURE = FIXTURES / "store-v1.db"
# version 1 as written from c160660 on: porter stemming and the edge_type index had already reached
# schema.sql, while user_version still said 1 (written by ea48675 with make_store.py)
LATE_FIXTURE = FIXTURES / "store-v1-c160660.db"


@pytest.fixture(params=[FIXTURE, LATE_FIXTURE], ids=["1c0d9c9", "c160660"])
def old_store(tmp_path: Path, request: pytest.FixtureRequest) -> Path:
    path = tmp_path / "old.db"
    shutil.copyfile(request.param, path)
    return path


def raw_contents(path: Path) -> dict[str, Any]:
    """Every table's rows (full-text rows by rowid and text), read without worlddb_lite."""
    conn = apsw.Connection(str(path))
    try:
        tables = [
            r[0]
            for r in conn.execute(
                "select name from sqlite_schema where type = 'table' and name not like 'node_fts%' "
                "and name not like 'sqlite_%' order by name"
            )
        ]
        out = {t: sorted(conn.execute(f"select * from {t}").fetchall(), key=repr) for t in tables}
        columns = ", ".join(str(c[1]) for c in conn.execute("pragma table_info(node_fts)"))  # 2 or 3 of them
        out["node_fts"] = conn.execute(f"select rowid, {columns} from node_fts order by rowid").fetchall()
        out["user_version"] = conn.execute("pragma user_version").fetchall()
        return {k: hashlib.sha256(repr(v).encode()).hexdigest() for k, v in out.items()}
    finally:
        conn.close()


def schema_objects(conn: apsw.Connection) -> dict[str, str]:
    """Name -> type of every table, index, view and trigger (FTS5's own shadow tables left out)."""
    return {
        name: kind
        for kind, name in conn.execute(
            "select type, name from sqlite_schema where name not like 'node_fts_%' and name not like 'sqlite_%'"
        )
    }


@pytest.mark.parametrize(("fixture", "late"), [(FIXTURE, False), (LATE_FIXTURE, True)])
def test_fixtures_are_the_two_layouts_of_version_1(fixture: Path, late: bool) -> None:
    conn = apsw.Connection(str(fixture), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        assert conn.execute("pragma user_version").fetchall()[0][0] == 1
        fts_sql = conn.execute("select sql from sqlite_schema where name = 'node_fts'").fetchall()[0][0]
        assert ("porter" in fts_sql) is late
        assert conn.execute("select count(*) from sqlite_schema where name = 'edge_type'").fetchall()[0][0] == late
    finally:
        conn.close()


def test_opening_a_version_1_store_lifts_it_and_keeps_every_hash(old_store: Path) -> None:
    before = apsw.Connection(str(old_store))
    root = bytes(
        before.execute(
            "select s.root from node as n join node_state as s on s.nid = n.nid where n.parent is null"
        ).fetchall()[0][0]
    ).hex()
    counts = {
        t: before.execute(f"select count(*) from {t}").fetchall()[0][0]
        for t in ("node", "edge", "root_log", "state_log", "alias", "node_vec", "node_fts")
    }
    before.close()

    db = WorldDB(old_store)
    assert db.migrated_from == 1
    assert db.stats()["schema_version"] == connection.SCHEMA_VERSION
    assert db.root() == root  # layout changed, content did not
    assert db.verify().ok
    assert db.verify_root_history() == []
    assert {t: db.sql(f"select count(*) from {t}")[0][0] for t in counts} == counts
    assert db.sql("select value from meta where key = 'schema_version'")[0][0] == str(connection.SCHEMA_VERSION)
    db.close()

    again = WorldDB(old_store)
    assert again.migrated_from is None  # already current: nothing to do the second time
    again.close()


def test_a_migrated_store_has_the_layout_of_a_new_one(old_store: Path, tmp_path: Path) -> None:
    WorldDB(old_store).close()
    WorldDB(tmp_path / "new.db").close()
    old, new = apsw.Connection(str(old_store)), apsw.Connection(str(tmp_path / "new.db"))
    try:
        assert schema_objects(old) == schema_objects(new)
        assert [r[1] for r in old.execute("pragma table_info(node_fts)")] == ["name", "content", "context"]
        assert list(old.execute("pragma table_info(node_fts)")) == list(new.execute("pragma table_info(node_fts)"))
        for conn in (old, new):
            fts = conn.execute("select sql from sqlite_schema where name = 'node_fts'").fetchall()[0][0]
            assert "tokenize = 'porter unicode61 remove_diacritics 2'" in fts
            assert conn.execute("select count(*) from sqlite_schema where name = 'edge_type'").fetchall()[0][0] == 1
    finally:
        old.close()
        new.close()


def test_the_migrated_full_text_index_stems_and_recall_works(old_store: Path) -> None:
    db = WorldDB(old_store)
    try:
        # "runs" and "running" share the stem "run" only with the porter tokenizer of version 2
        hits = db.search("runs")
        assert any("marathon" in (node.content or "") for node, _ in hits)
        top = db.recall("where does Ana live now?", scope="ana", k=3)
        assert any("Denver" in (h.node.content or "") for h in top.hits)
        new = db.write("I started running again", scope="ana")
        assert new in {node.id for node, _ in db.search("runs", k=10)}
        assert db.verify().ok
    finally:
        db.close()


WITH_CONTEXT = "select substr(content, 1, 16), context from node_text where context is not null"


def test_the_migration_indexes_old_turns_with_their_neighbours_words(old_store: Path, tmp_path: Path) -> None:
    with WorldDB(old_store) as db:
        rows = dict(db.sql(WITH_CONTEXT))
        # the fixture's first session: Ana, Ana, Bot (a speaker no rule reads as an assistant)
        assert rows == {
            "I live in Austin": "Ana: My sister Emma is running a marathon in May.\n"
            "Bot: Good luck to her! Running is hard.",
            "My sister Emma i": "Bot: Good luck to her! Running is hard.",
            "Good luck to her": "Ana: I live in Austin and I work at Google.",
            "I moved! I live ": "Ana: Emma's birthday is June 3.",
        }
        found = [node.content for node, _ in db.search("marathon", k=5)]
        assert found[-1] == "I live in Austin and I work at Google." and db.verify(deep=True).ok
    # the same as a store that ingested those turns now
    with WorldDB(tmp_path / "new.db") as new:
        new.ingest(
            ConversationIn(
                "ana-1",
                ["ana"],
                [
                    SessionIn(
                        "s1",
                        "2024-03-01",
                        [
                            TurnIn("I live in Austin and I work at Google.", speaker="Ana"),
                            TurnIn("My sister Emma is running a marathon in May.", speaker="Ana"),
                            TurnIn("Good luck to her! Running is hard.", speaker="Bot"),
                        ],
                    )
                ],
            ),
        )
        fresh = dict(new.sql(WITH_CONTEXT))
    assert fresh == {k: v for k, v in rows.items() if not k.startswith("I moved")}


def test_the_context_fill_stops_at_a_purged_turn_and_skips_amended_versions(tmp_path: Path) -> None:
    path = tmp_path / "v5.db"
    talk = [
        "We planned a trip to Oslo.",
        "I booked the ferry.",
        "My PIN is 4417.",
        "The hotel is near the fjord.",
        "We leave on Friday.",
    ]
    with WorldDB(path) as db:
        ids = db.ingest(
            ConversationIn("c", ["me"], [SessionIn("1", "2024-03-01", [TurnIn(text, speaker="me") for text in talk])]),
        )
        db.purge(ids[2])
        newer = db.amend(ids[4], "We leave on Saturday.")
    as_version_6(path)
    conn = apsw.Connection(str(path))  # as version 5 left it: no context anywhere
    conn.execute("update node_fts set context = null; pragma user_version = 5")
    conn.close()
    with WorldDB(path) as db:
        assert db.migrated_from == 5
        rows = dict(db.sql("select nid, context from node_text"))
        context = {node: rows.get(nid_of(db, node)) for node in [*ids, newer]}
        assert not any("4417" in (text or "") for text in context.values())
        assert context[ids[0]] == "me: I booked the ferry."  # the turn after; the purged one is a wall
        assert context[ids[3]] == "me: We leave on Friday."  # nothing from before the wall
        assert context[newer] is None  # an amended version was never said among the others
        assert db.verify(deep=True).ok


# what version 10 added, taken away again (its step adds it back)
V9_UNDO = """
drop trigger node_blob_immutable; drop trigger edge_identity_immutable; drop table legacy_order;
drop table change_log; drop table sync_peer; drop trigger edge_belief_final;
drop trigger change_node; drop trigger change_node_state; drop trigger change_edge; drop trigger change_edge_state;
drop trigger change_alias; drop trigger change_alias_time;
drop trigger change_proposal; drop trigger change_proposal_decided;
drop trigger change_tombstone;
alter table state_log drop column entered; alter table state_log drop column created_was;
alter table state_log drop column valid_was; alter table state_log drop column ord_was; drop view merge_conflict;
alter table merge_proposal drop column conflict;
drop index edge_world; alter table node drop column ord; alter table edge drop column ord;
"""


def _say_version(conn: apsw.Connection, version: int) -> None:
    """Mark a store, its newer parts taken off, as the given version (user_version and meta, guards let through)."""
    with conn:
        conn.execute(f"pragma user_version = {int(version)}")
        with connection.engine_write(conn):
            conn.execute("update meta set value = ? where key = 'schema_version'", (str(version),))


# node_vec as versions 4 to 14 defined it: float32 vectors
V14_NODE_VEC = """create table node_vec (nid integer primary key references node (nid), part integer not null default 0,
  seq integer not null, embedding blob not null check (length(embedding) % 4 = 0)) strict"""


def undo_v15(conn: apsw.Connection) -> None:
    """Take version 15 off a current store: node_vec's int8 codes decoded back to float32 rows."""
    rows = conn.execute("select nid, part, seq, embedding, scale from node_vec").fetchall()
    conn.execute("drop table node_vec")
    conn.execute(V14_NODE_VEC)
    conn.executemany(
        "insert into node_vec values (?, ?, ?, ?)",
        [(n, p, q, vector_codes.row(b, s).tobytes()) for n, p, q, b, s in rows],
    )
    for name in ("node_vec_seq", "node_vec_part", *(f"node_vec_{op}_guard" for op in ("insert", "update", "delete"))):
        conn.execute(migrations.schema_statement(name))


def undo_v14(conn: apsw.Connection) -> None:
    """Take versions 15 and 14 off a current store: float32 vectors again, then no kept vector index."""
    undo_v15(conn)
    conn.execute("drop table vec_segment")  # its index and guards go with it


def undo_v13(conn: apsw.Connection) -> None:
    """Take versions 14 and 13 off a current store: the kept vector index, then the views."""
    undo_v14(conn)
    conn.execute("drop view memory; drop view fact")


def undo_v12(conn: apsw.Connection) -> None:
    """Take versions 13 and 12 off a current store: the views, then the guards (a file of an older version has none)."""
    undo_v13(conn)
    for name in migrations.GUARDS:
        conn.execute(f"drop trigger {name}")


def as_version_6(path: Path) -> None:
    """Give a store version 6's layout: node_fts with its own copy of each row's text, no index_text."""
    conn = apsw.Connection(str(path))
    try:
        with conn:
            undo_v12(conn)
            conn.execute(migrations.V6_FTS.replace("node_fts", "node_fts_v6", 1))
            conn.execute("insert into node_fts_v6 (rowid, name, content, context) select * from node_text")
            conn.execute("drop view node_text; drop table node_fts; drop table index_text")
            conn.execute("drop view cold_memory; drop table cold_node; drop table node_access")  # version 8's
            conn.execute(V9_UNDO)
            conn.execute("alter table node_fts_v6 rename to node_fts; pragma user_version = 6")
            conn.execute("update meta set value = '6' where key = 'schema_version'")
    finally:
        conn.close()


V6_FIXTURE = FIXTURES / "store-v6.db"  # written by b85144a with tests/fixtures/make_store_v6.py
QUERIES = ["Austin", "marathon running", "tea coffee", "Emma birthday", "hotel fjord", "Denver", "Zoe", "luck"]


def ranked(conn: apsw.Connection) -> dict[str, list[tuple[int, float]]]:
    """The full-text index's BM25 ranking (as recall asks for it) of a few queries."""
    return {q: queries.fts_ranked(conn, q, 20) for q in QUERIES}


def test_version_6_lifts_to_a_contentless_index_that_ranks_as_before(tmp_path: Path) -> None:
    path = tmp_path / "v6.db"
    shutil.copyfile(V6_FIXTURE, path)
    old = apsw.Connection(str(path))
    rows = old.execute("select rowid, name, content, context from node_fts order by rowid").fetchall()
    before, root = ranked(old), old.execute("select root from node_state where nid = 1").fetchall()[0][0]
    old.close()
    with WorldDB(path) as db:
        assert db.migrated_from == 6 and db.root() == bytes(root).hex()
        assert db.sql("select sql from sqlite_schema where name = 'node_fts'")[0][0].count("content = ''")
        assert not db.sql("select count(*) from sqlite_schema where name = 'node_fts_content'")[0][0]
        lifted = db.sql("select nid, name, content, context from node_text order by nid")
        # every row reads back as it was indexed; the one text that was not NFC reads back as its blob holds it
        assert lifted == [(n, a, unicodedata.normalize("NFC", b), c) for n, a, b, c in rows]
        assert any(unicodedata.normalize("NFC", b) != b for _, _, b, _ in rows)
        assert db.sql("select count(*) from index_text")[0][0] == sum(
            1 for _, _, b, c in rows if c is not None or "\n" in b
        )
        assert ranked(db._conn) == before
        assert db.verify(deep=True).ok
        # a purge after the lift erases the text from the index too
        note = next(node.id for node, _ in db.search("fjord"))
        db.purge(note)
        assert db.search("fjord") == [] and db.verify(deep=True).ok
    db_bytes = path.read_bytes() + (tmp_path / "v6.db-wal").read_bytes() if (tmp_path / "v6.db-wal").exists() else b""
    assert b"fjord" not in path.read_bytes() and b"fjord" not in db_bytes


V7_FIXTURE = FIXTURES / "store-v7.db"  # written by b03a5d0 with tests/fixtures/make_store_v6.py


def test_version_7_lifts_to_turns_quoted_by_reference(tmp_path: Path) -> None:
    path = tmp_path / "v7.db"
    shutil.copyfile(V7_FIXTURE, path)
    old = apsw.Connection(str(path))
    rows = old.execute("select nid, name, content, context from node_text order by nid").fetchall()
    literal = old.execute("select count(*) from index_text").fetchall()[0][0]
    before, root = ranked(old), old.execute("select root from node_state where nid = 1").fetchall()[0][0]
    old.close()
    with WorldDB(path) as db:
        assert db.migrated_from == 7 and db.root() == bytes(root).hex()
        assert db.sql("select nid, name, content, context from node_text order by nid") == rows
        # every window of the fixture's sessions is its turns: none is kept as text any more
        assert db.sql(
            "select count(*), count(added_from) + count(context_from), count(added) + count(context) from index_text"
        )[0] == (literal, 7, 0)
        assert ranked(db._conn) == before and db.verify(deep=True).ok


def test_a_failed_migration_leaves_the_old_file_as_it_was(old_store: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    before = raw_contents(old_store)
    real = migrations.STEPS[1]

    def half_then_crash(conn: apsw.Connection) -> None:
        real(conn)
        raise OSError("disk pulled out mid-migration")

    monkeypatch.setitem(migrations.STEPS, 1, half_then_crash)
    with pytest.raises(OSError, match="mid-migration"):
        WorldDB(old_store)
    assert raw_contents(old_store) == before  # one transaction: all of it or none
    monkeypatch.setitem(migrations.STEPS, 1, real)
    db = WorldDB(old_store)
    assert db.migrated_from == 1 and db.verify().ok
    db.close()


def test_a_version_without_a_migration_path_is_refused_unchanged(old_store: Path) -> None:
    conn = apsw.Connection(str(old_store))
    conn.execute("pragma user_version = 0")  # older than any version a step exists for
    conn.close()
    before = old_store.read_bytes()
    with pytest.raises(SchemaTooOld, match="version 0"):
        WorldDB(old_store)
    assert old_store.read_bytes() == before


def test_a_newer_version_is_refused_with_the_upgrade_hint(old_store: Path) -> None:
    conn = apsw.Connection(str(old_store))
    conn.execute(f"pragma user_version = {connection.SCHEMA_VERSION + 1}")
    conn.close()
    with pytest.raises(SchemaTooNew, match="upgrade worlddb_lite"):
        WorldDB(old_store)


def test_every_version_below_the_current_has_a_step() -> None:
    assert all(migrations.can_migrate(v) for v in range(1, connection.SCHEMA_VERSION + 1))
    assert not migrations.can_migrate(0)
    assert "porter" in migrations.schema_statement("node_fts")
    with pytest.raises(LookupError):
        migrations.schema_statement("no_such_table")


def test_the_cli_opens_and_lifts_an_old_store(old_store: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["verify", str(old_store)]) == 0
    conn = apsw.Connection(str(old_store))
    assert conn.execute("pragma user_version").fetchall()[0][0] == connection.SCHEMA_VERSION
    conn.close()
    said = capsys.readouterr().err  # one way, so said once (new-user trial: it happened silently)
    assert f"upgraded {old_store} from schema version 1 to {connection.SCHEMA_VERSION}" in said
    assert main(["stats", str(old_store)]) == 0 and "upgraded" not in capsys.readouterr().err


def test_an_interrupted_command_says_so_in_a_line(
    old_store: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    def interrupted(*_: object, **__: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(migrations, "migrate", interrupted)  # Ctrl-C while an old store is lifted
    assert main(["stats", str(old_store)]) == 130
    said = capsys.readouterr().err
    assert said.strip() == "worlddb stats: interrupted; what it was writing was rolled back"


def test_a_migrated_store_keeps_its_history_append_only(old_store: Path) -> None:
    WorldDB(old_store).close()
    conn = apsw.Connection(str(old_store))
    try:
        for sql in (
            "update root_log set root = zeroblob(32)",
            "delete from root_log",
            "update state_log set at = '2000-01-01'",
            "delete from state_log",
        ):
            with pytest.raises(apsw.ConstraintError, match="append-only"):
                conn.execute(sql)
    finally:
        conn.close()


def _open_and_report(path: str) -> int | None:
    with WorldDB(path) as db:
        return db.migrated_from


def test_processes_opening_an_old_store_at_once_migrate_it_once(old_store: Path) -> None:
    import multiprocessing

    with multiprocessing.get_context("spawn").Pool(3) as pool:
        found = pool.map(_open_and_report, [str(old_store)] * 3)
    assert found.count(1) == 1 and found.count(None) == 2  # one lifted it; the others found it current
    with WorldDB(old_store) as db:
        assert db.verify().ok and db.stats()["schema_version"] == connection.SCHEMA_VERSION


def test_version_10_lifts_with_its_noted_merge_conflicts_as_changes(tmp_path: Path) -> None:
    path = tmp_path / "v10.db"
    with WorldDB(path) as db:
        a = db.write("Dana", scope="ana", type="Entity", name="Dana")
        db.link(a, db.write("Dana S.", scope="ana", type="Entity", name="Dana S."), "same_as")
        db.reject_merge(db.merge_proposals()[0].pid)
    conn = apsw.Connection(str(path))  # as version 10 left it: a conflict noted, and no change logged for it
    undo_v12(conn)
    conn.execute("drop trigger change_proposal_decided")
    conn.execute(
        "create trigger change_proposal_decided after update of status on merge_proposal begin "
        "insert into change_log (kind, ref, origin) values ('proposal', new.pid, null); end"
    )
    conn.execute("update merge_proposal set conflict = 'accepted'")
    last = conn.execute("select max(seq) from change_log").fetchall()[0][0]
    conn.execute("pragma user_version = 10; update meta set value = '10' where key = 'schema_version'")
    conn.close()
    with WorldDB(path) as db:
        assert db.migrated_from == 10  # (verify would want the same_as edges a real acceptance elsewhere brings)
        logged = db.sql("select kind from change_log where seq > ?", (last,))
        assert logged == [("proposal",)]
        trigger = db.sql("select sql from sqlite_master where name = 'change_proposal_decided'")
        assert "conflict" in trigger[0][0]


def test_version_12_gains_the_views_memory_and_fact_with_its_roots_unchanged(tmp_path: Path) -> None:
    path = tmp_path / "v12.db"
    with WorldDB(path) as db:
        db.write("I live in Lisbon", scope="ana", valid_at="2024-01-01")
        db.write("I moved to Porto", scope="ana", valid_at="2024-06-01")
    conn = apsw.Connection(str(path))  # as version 12 left it: no views memory and fact
    undo_v13(conn)
    _say_version(conn, 12)
    roots = conn.execute("select nid, root from node_state order by nid").fetchall()
    conn.close()
    before = raw_contents(path)
    with WorldDB(path) as db:
        assert db.migrated_from == 12 and db.verify().ok
    after = raw_contents(path)
    # opening writes the vector index into the file (v14); node_vec's rows become int8 (v15)
    derived = ("meta", "user_version", "vec_segment", "node_vec")
    assert {k: v for k, v in after.items() if k not in derived} == {
        k: v for k, v in before.items() if k not in derived
    }  # no row of any table changed: every hash and root is the same
    reader = apsw.Connection(str(path), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        assert reader.execute("select nid, root from node_state order by nid").fetchall() == roots
        facts = reader.execute("select value, until is null from fact order by since").fetchall()
        assert facts == [("Lisbon", 0), ("Porto", 1)]
        assert reader.execute("select count(*) from memory where kind = 'Memory'").fetchall() == [(2,)]
    finally:
        reader.close()


def test_version_13_gains_the_vector_index_kept_in_the_file_with_progress_and_the_same_answers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "v13.db"
    with WorldDB(path) as db:
        db.write_many([{"text": f"note {i}: the {i % 9} boats by the river", "scope": "ana"} for i in range(300)])
        answers = [h.node.id for h in db.recall("boats by the river", scope="ana").hits]
    conn = apsw.Connection(str(path))  # as version 13 left it: no vec_segment
    undo_v14(conn)
    _say_version(conn, 13)
    roots = conn.execute("select nid, root from node_state order by nid").fetchall()
    conn.close()
    monkeypatch.setattr(segments, "BASE_ROWS", 64)  # several segments, and a progress bar shown
    seen: list[tuple[int, int]] = []
    with WorldDB(path, progress=lambda done, total: seen.append((done, total))) as db:
        assert db.migrated_from == 13
        hot = db.sql("select count(*) from node_vec")[0][0]
        assert seen[0] == (0, hot) and seen[-1] == (hot, hot) and len(seen) == 1 + -(-hot // 64)
        assert db.sql("select count(*), sum(rows) from vec_segment") == [(len(seen) - 1, hot)]
        assert db.sql("select nid, root from node_state order by nid") == roots
        assert db.verify(deep=True).ok
    seen.clear()
    with WorldDB(path, progress=lambda done, total: seen.append((done, total))) as db:
        assert not seen  # written once
        assert [h.node.id for h in db.recall("boats by the river", scope="ana").hits] == answers


def test_version_14_lifts_to_int8_vectors_with_the_same_answers_and_a_kept_index_coded_again(tmp_path: Path) -> None:
    path = tmp_path / "v14.db"
    with WorldDB(path) as db:
        db.write_many([{"text": f"note {i}: the {i % 7} kites over the dunes", "scope": "ana"} for i in range(200)])
        answers = [(h.node.id, round(h.score, 3)) for h in db.recall("kites over the dunes", scope="ana").hits]
    conn = apsw.Connection(str(path))  # as version 14 left it: float32 vectors, their kept index coded from them
    with conn:
        undo_v15(conn)
        connection_floats = conn.execute("select nid, embedding from node_vec order by nid").fetchall()
    _say_version(conn, 14)
    conn.close()
    with WorldDB(path) as db:
        assert db.migrated_from == 14
        rows = db.sql("select nid, length(embedding), scale from node_vec order by nid")
        assert [r[0] for r in rows] == [r[0] for r in connection_floats]
        assert {r[1] for r in rows} == {db.dim}  # one byte a dimension
        for (nid, blob), (_, _, scale) in zip(connection_floats, rows, strict=True):
            codes = db.sql("select embedding from node_vec where nid = ?", (nid,))[0][0]
            before = np.frombuffer(blob, dtype="<f4")
            assert float(before @ vector_codes.row(codes, scale)) > 1 - 1e-3
        assert db.sql("select count(*) from vec_segment")[0][0] > 0  # coded again from the int8 rows
        assert db.verify(deep=True).ok
        again = [(h.node.id, round(h.score, 3)) for h in db.recall("kites over the dunes", scope="ana").hits]
        assert [a for a, _ in again] == [a for a, _ in answers]


def test_a_damaged_version_14_vector_row_is_left_out_by_the_migration_and_named_by_verify(tmp_path: Path) -> None:
    # new-user trial: a cut row made every command fail with a traceback; a row times 3 or one with an
    # infinite value was coded into something plain verify passed
    path = tmp_path / "v14.db"
    with WorldDB(path) as db:
        db.write_many([{"text": f"note {i} about the harbour", "scope": "ana"} for i in range(20)])
        answer = db.recall("note 3 about the harbour", scope="ana").hits[0].node.id
    conn = apsw.Connection(str(path))
    with conn:
        undo_v15(conn)
        nids = [r[0] for r in conn.execute("select nid from node_vec order by nid desc limit 3")]
        with connection.engine_write(conn):
            blob = conn.execute("select embedding from node_vec where nid = ?", (nids[1],)).fetchone()[0]
            conn.execute("update node_vec set embedding = x'0000803f' where nid = ?", (nids[0],))  # cut short
            tripled = (np.frombuffer(blob, dtype="<f4") * 3).tobytes()
            conn.execute("update node_vec set embedding = ? where nid = ?", (tripled, nids[1]))
            broken = bytearray(blob)
            broken[3] = 0x7F  # an exponent of all ones: not a number
            broken[2] |= 0x80
            conn.execute("update node_vec set embedding = ? where nid = ?", (bytes(broken), nids[2]))
    _say_version(conn, 14)
    conn.close()
    with WorldDB(path) as db:
        assert db.migrated_from == 14
        kept = {r[0] for r in db.sql("select nid from node_vec")}
        assert not kept & set(nids) and len(kept) >= 17  # the damaged rows left out, the others coded
        report = db.verify()
        assert not report.ok and {v.invariant for v in report.violations} == {"7-indexes"}
        assert db.recall("note 3 about the harbour", scope="ana").hits[0].node.id == answer
