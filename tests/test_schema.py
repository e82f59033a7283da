"""schema.sql: the single source of truth, readable and usable in a stock sqlite3 shell."""

from __future__ import annotations

import re
import shutil
import subprocess
import unicodedata
from pathlib import Path

import apsw
import pytest

from worlddb_lite import WorldDB
from worlddb_lite.ops.verify import REQUIRED_TRIGGERS
from worlddb_lite.store import connection
from worlddb_lite.write.conversation import ConversationIn, SessionIn, TurnIn

from .conftest import FakeEmbedder, nid_of

SQLITE3 = shutil.which("sqlite3")
needs_shell = pytest.mark.skipif(
    SQLITE3 is None, reason="the sqlite3 shell binary is not installed (apt-get install sqlite3)"
)
VIEWS = (
    "current_node",
    "node_history",
    "open_contradiction",
    "pending_merge",
    "world_tree",
    "current_edge",
    "node_text",
    "memory",
    "fact",
)


def test_the_schema_needs_no_extension_table() -> None:
    # vectors live in a plain table: a stock sqlite3 shell opens every table of a store
    sql = connection.schema_sql()
    virtual = re.findall(r"^create virtual table (\w+) using (\w+)", sql, flags=re.M)
    assert virtual == [("node_fts", "fts5")]


def test_every_table_is_strict_and_named_in_snake_case() -> None:
    sql = connection.schema_sql()
    tables = re.findall(r"create table (\w+) \((.*?)\n\)([^;]*);", sql, flags=re.S)
    assert {name for name, _, _ in tables} >= {
        "meta",
        "reconciler_session",
        "node",
        "node_state",
        "edge",
        "merkle",
        "root_log",
        "merge_proposal",
        "alias",
        "tombstone",
    }
    for name, body, options in tables:
        assert re.fullmatch(r"[a-z][a-z0-9_]*", name)
        assert "strict" in options, name
        assert "--" in body, f"{name} has no comment inside its parentheses"


def test_every_guard_trigger_is_in_the_schema() -> None:
    sql = connection.schema_sql()
    for name in REQUIRED_TRIGGERS:
        assert f"create trigger {name} " in sql


def test_store_records_its_version_and_embedder(db: WorldDB) -> None:
    assert db.sql("pragma user_version")[0][0] == connection.SCHEMA_VERSION
    meta = dict(db.sql("select key, value from meta"))
    assert meta["schema_version"] == str(connection.SCHEMA_VERSION)
    assert meta["embedder_id"] == "fake-hash-32" and meta["embedder_dim"] == "32"
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z", meta["created_at"])


def test_views_answer_on_a_populated_store(db: WorldDB) -> None:
    a = db.write("Alice lives in Lisbon", scope="alice", valid_at="2024-01-01", extractor=None)  # notes alone
    b = db.amend(a, "Alice lives in Porto", valid_at="2024-06-01", extractor=None)
    c = db.write("Alice lives in Faro", scope="alice", valid_at="2024-06-01", extractor=None)
    db.link(b, c, "contradicts")
    x = db.write("Bob", type="Entity", name="Bob", scope="alice")
    y = db.write("Robert", type="Entity", name="Robert", scope="alice")
    db.link(x, y, "same_as")
    current = {r[0] for r in db.sql("select id from current_node")}
    assert {b, c, x, y} <= current and a not in current
    history = {r[0]: r for r in db.sql("select id, superseded_by, supersedes from node_history")}
    assert history[a][1] == b and history[b][2] == a
    assert db.sql("select a_id, b_id from open_contradiction") == [(b, c)]
    assert db.sql("select a_name, b_name from pending_merge") == [("Bob", "Robert")]
    tree = {r[0]: r for r in db.sql("select id, name, members from world_tree")}
    assert db.root_id in tree and tree[db.scope("alice")][2] >= 5
    edges = db.sql("select type from current_edge order by type")
    assert edges == [("contradicts",), ("supersedes",)]


def test_check_constraints_hold_even_inside_a_session(db: WorldDB) -> None:
    conn = db._conn
    a = db.write("a", scope="s")
    nid = conn.execute("select nid from node where id = ?", (bytes.fromhex(a),)).fetchone()[0]
    with conn:
        conn.execute("insert into reconciler_session (holder) values ('reconciler')")
        for sql in (
            "insert into node (id, type, parent, slot, depth, body) values (x'00', 'Memory', 1, 0, 1, '{}')",
            f"insert into merge_proposal (a, b, proposed_at) values ({nid}, {nid}, 'x')",
            f"insert into merge_proposal (a, b, status, proposed_at) values (1, {nid}, 'maybe', 'x')",
            "insert into reconciler_session (holder) values ('someone')",
            f"update node_state set retired = 2 where nid = {nid}",
        ):
            with pytest.raises(apsw.ConstraintError):
                conn.execute(sql)
        conn.execute("delete from reconciler_session")


@needs_shell
def test_the_whole_schema_loads_in_the_stock_shell(tmp_path: Path) -> None:
    path = tmp_path / "shell.db"
    script = tmp_path / "schema.sql"
    script.write_text(connection.schema_sql(), encoding="utf-8")
    assert SQLITE3 is not None
    result = subprocess.run([SQLITE3, str(path)], stdin=script.open("rb"), capture_output=True, timeout=30)
    assert result.returncode == 0, result.stderr.decode()
    shown = subprocess.run([SQLITE3, str(path), ".schema node"], capture_output=True, text=True, timeout=30)
    assert "blake3('worlddb/node/v1'" in shown.stdout  # comments inside the parentheses survive
    views = subprocess.run(
        [SQLITE3, str(path), "; ".join(f"select count(*) from {v}" for v in VIEWS)],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert views.returncode == 0, views.stderr
    assert views.stdout.split() == ["0"] * len(VIEWS)


@needs_shell
def test_the_shell_reads_a_real_store(tmp_path: Path) -> None:
    path = tmp_path / "real.db"
    with WorldDB(path, embedder=FakeEmbedder()) as db:
        a = db.write("readable in the shell", scope="s", valid_at="2024-01-01")
    assert SQLITE3 is not None
    result = subprocess.run(
        [SQLITE3, str(path), "select id, content from current_node where type = 'Memory'"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == f"{a}|readable in the shell"


def test_the_wal_is_folded_in_large_steps_and_fully_on_close(tmp_path: Path) -> None:
    path = tmp_path / "wal.db"
    db = WorldDB(path, embedder=FakeEmbedder())
    assert db.sql("pragma wal_autocheckpoint")[0][0] == connection.WAL_CHECKPOINT_PAGES
    db.write_many([{"text": f"memory {i}", "scope": "s"} for i in range(50)])
    db.close()
    wal = Path(str(path) + "-wal")
    assert not wal.exists() or wal.stat().st_size == 0  # a copy of the closed file is the whole store


def test_the_full_text_index_keeps_no_copy_of_the_text(tmp_path: Path) -> None:
    """node_fts is contentless and index_text lists the turns it quotes: a text is in the file once (its blob)."""
    path = tmp_path / "once.db"
    said = "Quorbly Zanthic Muffle met Zoe\u0308 at the cafe"  # not NFC: the blob holds it NFC
    with WorldDB(path, embedder=FakeEmbedder()) as db:
        note = db.write(said, scope="s")
        turns = db.ingest(
            ConversationIn(
                "c",
                ["s"],
                [SessionIn("1", "2024-03-01", [TurnIn("Vintrel Oxbow skates", "ana"), TurnIn("Nice!", "ana")])],
            )
        )
        nid, reply = nid_of(db, note), nid_of(db, turns[1])
        assert not db.sql("select count(*) from sqlite_schema where name = 'node_fts_content'")[0][0]
        assert db.sql("select content from node_text where nid = ?", (nid,))[0][0] == unicodedata.normalize("NFC", said)
        # the reply is indexed with the turn before it: index_text lists that turn, node_text renders it
        first = nid_of(db, turns[0])
        assert db.sql("select added, added_from from index_text where nid = ?", (reply,))[0] == (
            None,
            f"[{first}]",
        )
        assert db.sql("select content from node_text where nid = ?", (reply,))[0][0] == (
            "Nice!\nana: Vintrel Oxbow skates"
        )
        # a text that is not exactly turns of the world (a bridged name, a caller's context) stays text
        other = db.write("Tea at noon", scope="s", index_context="Quorbly Zanthic", word_context="Muffle")
        assert db.sql(
            "select added, context, added_from, context_from from index_text where nid = ?", (nid_of(db, other),)
        )[0] == ("Quorbly Zanthic", "Muffle", None, None)
        assert [n.id for n, _ in db.search("Zoë")] == [note] and db.verify(deep=True).ok
        db.checkpoint()
    data = path.read_bytes()
    assert data.count(b"Quorbly Zanthic Muffle") == 1 and data.count(b"Vintrel Oxbow skates") == 1
