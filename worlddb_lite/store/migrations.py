"""Schema migrations: lift an older store file to the current schema, all steps in one transaction.

Each step moves a file from version N to N + 1 and takes the definitions it creates from
``schema.sql`` itself, so the packaged schema stays the one description of the layout. Steps
change layout and derived index rows only; no node, edge or root is rewritten, so every hash and Merkle root of the
store is the same after a migration as before it (the tests check this on a fixture written
by the previous version).
"""

from __future__ import annotations

import itertools
import re
import unicodedata
from collections.abc import Callable

import apsw
from blake3 import blake3

from ..errors import SchemaTooNew, SchemaTooOld
from ..text.windows import words_around
from . import quoted
from .connection import (
    SCHEMA_VERSION,
    as_bytes,
    as_int,
    as_text,
    engine_write,
    schema_sql,
    translate,
    user_version,
    with_retry,
)
from .rows import added_text


def schema_statement(name: str) -> str:
    """The ``create ...`` statement of ``schema.sql`` that defines the table, index or trigger ``name``."""
    found = re.search(
        rf"^create (?:virtual table|table|index|unique index|view) {re.escape(name)}\b[^;]*;"
        rf"|^create trigger {re.escape(name)}\b.*?^end;",
        schema_sql(),
        re.MULTILINE | re.DOTALL,
    )
    if found is None:
        raise LookupError(f"schema.sql defines no {name!r}")
    return found.group(0)


def _to_v2(conn: apsw.Connection) -> None:
    """Version 2: porter stems in the full-text index; membership edges indexed by (type, src).

    Both pieces reached ``schema.sql`` (commit c160660) before the version was bumped, so a
    version-1 file may already have either; each is added only where it is missing.
    """
    if not _exists(conn, "edge_type"):
        conn.execute(schema_statement("edge_type"))
    fts = conn.execute("select sql from sqlite_schema where name = 'node_fts'").fetchall()[0][0]
    if "porter" not in str(fts):
        _rebuild_fts(conn)


# node_fts as versions 2 to 6 defined it (its own copy of every row: content stored): frozen here, so
# the steps that built it still build that table, which version 7 then makes contentless.
V6_FTS = (
    "create virtual table node_fts using fts5(name, content, context, "
    "tokenize = 'porter unicode61 remove_diacritics 2')"
)


def _rebuild_fts(conn: apsw.Connection) -> None:
    """Recreate node_fts as version 6 defined it, keeping every row's name and content.

    FTS5 fixes its columns and tokenizer at creation: build the new table beside the old, copy
    every row's name and content (the content holds the index-only context of versions before 6
    too; rowids kept), then take the old one's name. Only a table without the context column
    is rebuilt: the copy leaves that column out.
    """
    conn.execute(V6_FTS.replace("node_fts", "node_fts_migrating", 1))
    conn.execute("insert into node_fts_migrating (rowid, name, content) select rowid, name, content from node_fts")
    conn.execute("drop table node_fts")
    conn.execute("alter table node_fts_migrating rename to node_fts")


def _exists(conn: apsw.Connection, name: str) -> bool:
    return bool(conn.execute("select count(*) from sqlite_schema where name = ?", (name,)).fetchall()[0][0])


def _to_v3(conn: apsw.Connection) -> None:
    """Version 3: the history tables (root_log, state_log, tombstone) refuse updates and deletes."""
    for name in (
        "root_log_append_only",
        "root_log_no_delete",
        "state_log_append_only",
        "state_log_no_delete",
        "tombstone_final",
        "tombstone_no_delete",
    ):
        conn.execute(schema_statement(name))


def _to_v4(conn: apsw.Connection) -> None:
    """Version 4: node states indexed by valid time, for the recall lane of a date the query names."""
    conn.execute(schema_statement("node_state_valid"))


def _to_v5(conn: apsw.Connection) -> None:
    """Version 5: the token index of the late-interaction stage, empty: opening the store fills it (db.py)."""
    conn.execute(schema_statement("node_tokens"))


def _to_v6(conn: apsw.Connection) -> None:
    """Version 6: node_fts gains its context column (words for BM25 alone), filled for every session.

    A version-1 file may have the column already (``_to_v2`` rebuilt the table as schema.sql
    defines it). Each session's turns get the words of their neighbours as ``conversation.ingest``
    indexes them with its defaults, so a store written before is found as a new one would be
    (bench/recall_scale.py's store of 100k turns, version 5: opened and lifted in 11 s, once).
    """
    if "context" not in {str(row[1]) for row in conn.execute("pragma table_info(node_fts)")}:
        _rebuild_fts(conn)
    _fill_word_context(conn)


# The windows version 6 filled, as ingest's defaults were then: frozen here, so a later change of those
# defaults never changes what lifting an old file does.
V6_WINDOW, V6_WORD_WINDOW, V6_WORD_AFTER, V6_WINDOW_CHARS = 1, 4, 2, 1000


def _fill_word_context(conn: apsw.Connection) -> None:
    """Index every session's turns with their neighbours' words (``text.windows.words_around``), in said order.

    As ``conversation.ingest`` would with its defaults, within what the store can tell: a purged
    turn is a wall no words cross (its text is gone, and no neighbour may take words across the
    gap as if the two sides had been said together), and a version written by ``amend`` takes no
    part (it was never ingested with the session). A store ingested with other windows,
    or whose identical turns share one node, is filled as if with the defaults. Turns are read
    clipped (the windows quote at most ``WINDOW_CHARS`` of each) and a session at a time.
    """
    rows = conn.execute(
        "select n.nid, n.parent, json_extract(n.body, '$.props.speaker'), "
        "substr(json_extract(n.body, '$.content'), 1, ?), n.body is null "
        "from node as n join node as p on p.nid = n.parent "
        "where n.type = 'Turn' and p.type = 'Session' "
        "and not exists (select 1 from edge as e where e.type = 'supersedes' and e.src = n.nid) "
        "order by n.parent, n.slot",
        (V6_WINDOW_CHARS,),
    )
    for (_, purged), group in itertools.groupby(rows, key=lambda row: (row[1], bool(row[4]))):
        turns = list(group)
        if purged:
            continue
        contexts = words_around(
            [as_text(t[3]) or "" for t in turns],
            speakers=[as_text(t[2]) for t in turns],
            before=V6_WORD_WINDOW,
            skip=V6_WINDOW,
            after=V6_WORD_AFTER,
            chars=V6_WINDOW_CHARS,
        )
        conn.executemany(
            "update node_fts set context = ? where rowid = ?",
            [(context, turn[0]) for turn, context in zip(turns, contexts, strict=True) if context],
        )


def _to_v7(conn: apsw.Connection) -> None:
    """Version 7: node_fts keeps no copy of its rows (contentless); index_text holds what the blobs do not.

    What a row held beyond its node's blob goes to index_text: the text after the node's own
    content and a newline (a turn's previous turn), and the context column. Then every row is
    indexed again from node_text, as the write path indexes it from now on: the same text (BM25
    ranks as before), but for a caller's text that was not NFC (versions before 7 indexed it as
    given; the blob holds it NFC) and a row that did not begin with its node's text (verify
    flagged those), which lose what they added.
    bench/recall_scale.py's store of 100k turns (built by version 6): lifted in 44 s on a loaded machine, its
    root unchanged; 676.5 MB, 544.4 MB after a VACUUM (the freed pages are otherwise reused by later writes).
    """
    conn.execute(schema_statement("index_text"))
    own = (
        "with n(nid, own) as (select nid, coalesce(json_extract(body, '$.content'), '') from node "
        "where body is not null and json_valid(body)) "
    )
    conn.execute(
        own + "insert into index_text (nid, added, context) "
        "select f.rowid, case when n.own != '' and substr(f.content, 1, length(n.own) + 1) = n.own || char(10) "
        "then nullif(substr(f.content, length(n.own) + 2), '') end, f.context "
        "from node_fts as f join n on n.nid = f.rowid where f.context is not null or f.content != n.own"
    )
    odd = conn.execute(
        own + "select f.rowid, f.content, n.own from node_fts as f join n on n.nid = f.rowid where f.content != n.own "
        "and (n.own = '' or substr(f.content, 1, length(n.own) + 1) != n.own || char(10))"
    ).fetchall()
    for nid, content, text in odd:
        try:
            added = added_text(str(text), unicodedata.normalize("NFC", str(content or "")))
        except ValueError:  # not its node's text: verify reported it; it is indexed by its own text now
            added = None
        conn.execute("update index_text set added = ? where nid = ?", (added, nid))
    conn.execute("delete from index_text where added is null and context is null")
    conn.execute(schema_statement("node_text"))  # over the old table's row list (node_fts_docsize) for now
    conn.execute(schema_statement("node_fts").replace("node_fts", "node_fts_migrating", 1))
    conn.execute(
        "insert into node_fts_migrating (rowid, name, content, context) "
        "select nid, name, content, context from node_text"
    )
    conn.execute("drop view node_text")
    conn.execute("drop table node_fts")
    conn.execute("alter table node_fts_migrating rename to node_fts")
    conn.execute(schema_statement("node_text"))


def _to_v8(conn: apsw.Connection) -> None:
    """Version 8: index_text keeps a text that is other turns of the same world as the list of those turns.

    The table is written again with its two new columns, every added text or context that is exactly
    such turns as their list (``quoted.plan``), and node_text is defined again to render them; a row the
    view does not read back as before keeps its text. The full-text index does not change.
    bench/recall_scale.py's 100k store written by version 7: lifted in 2.7 s, 550.7 -> 495.3 MB after a VACUUM.
    """
    before = {
        as_int(nid): (as_text(content), as_text(context))
        for nid, content, context in conn.execute(
            "select nid, content, context from node_text where nid in (select nid from index_text)"
        )
    }
    rows = [
        (as_int(n), as_text(a), as_text(c)) for n, a, c in conn.execute("select nid, added, context from index_text")
    ]
    planned = quoted.plan(conn, rows)
    conn.execute("drop view node_text")
    conn.execute("drop table index_text")  # written again whole: rows shortened in place leave their pages empty
    conn.execute(schema_statement("index_text"))
    conn.executemany(
        "insert into index_text (nid, added, context, added_from, context_from) values (?, ?, ?, ?, ?)", planned
    )
    conn.execute(schema_statement("node_text"))
    literal = {nid: (added, context) for nid, added, context in rows}
    conn.executemany(
        "update index_text set added = ?, context = ?, added_from = null, context_from = null where nid = ?",
        [(*literal[nid], nid) for nid in quoted.unread(conn, before)],
    )


def _to_v9(conn: apsw.Connection) -> None:
    """Version 9: retention's tables, empty: every memory starts hot and unrecalled (consolidate/retention.py)."""
    for name in ("node_access", "cold_node", "cold_memory"):
        conn.execute(schema_statement(name))


def _to_v10(conn: apsw.Connection) -> None:
    """Version 10: sync, with member order by (created_at, ord, id) from now on.

    The old order is kept as it was (legacy_order: every world's members so far); the change log and the
    peers start empty; a store id; guards that let a merge move belief times earlier; state_log's columns
    for what a merge changed.

    The history before this step stays as it was: the change log starts empty, so the first exchange
    with any replica sends everything (sync/replicas.py).
    """
    conn.execute("alter table node add column ord integer not null default 0 check (ord >= 0)")
    conn.execute("alter table edge add column ord integer not null default 0 check (ord >= 0)")
    conn.execute(
        "alter table merge_proposal add column conflict text "
        "check (conflict in ('accepted', 'rejected') and conflict <> status)"
    )
    conn.execute(schema_statement("merge_conflict"))
    conn.execute("drop table reconciler_session")  # empty at rest; its holder check gains 'merge'
    for name in ("reconciler_session", "legacy_order", "sync_peer", "change_log"):
        conn.execute(schema_statement(name))
    for name in (
        "node_blob_immutable",
        "node_state_validity_tightens",
        "node_state_belief_final",
        "edge_identity_immutable",
    ):
        conn.execute(f"drop trigger if exists {name}")
        conn.execute(schema_statement(name))
    for name in (
        "edge_belief_final",
        "change_node",
        "change_node_state",
        "change_edge",
        "change_edge_state",
        "change_alias",
        "change_alias_time",
        "change_proposal",
        "change_proposal_decided",
        "change_tombstone",
    ):
        conn.execute(schema_statement(name))
    conn.execute("alter table state_log add column entered integer not null default 0 check (entered in (0, 1))")
    conn.execute("alter table state_log add column created_was text")
    conn.execute("alter table state_log add column valid_was text")
    conn.execute("alter table state_log add column ord_was integer")
    conn.execute("insert into legacy_order (world, size) select nid, size from node_state where size > 0")
    conn.execute("drop index node_parent")
    for name in ("node_parent", "edge_world"):
        conn.execute(schema_statement(name))
    conn.execute("insert or ignore into meta (key, value) values ('store_id', lower(hex(randomblob(16))))")


def _to_v11(conn: apsw.Connection) -> None:
    """Version 11: noting another replica's decision of a merge is a change that travels.

    The trigger change_proposal_decided fires on merge_proposal.conflict too, as on a decision.
    """
    conn.execute("drop trigger change_proposal_decided")
    conn.execute(schema_statement("change_proposal_decided"))
    # a conflict noted at version 10 was no change: it travels now, to replicas that hear of it through others
    conn.execute(
        "insert into change_log (kind, ref) select 'proposal', pid from merge_proposal where conflict is not null"
    )


# The tables version 12 guards (schema.sql): every raw insert, update and delete is refused outside an
# engine transaction (tombstone's updates and deletes were refused already, by version 3's triggers).
GUARDED = (
    "meta",
    "alias",
    "node_vec",
    "node_tokens",
    "tombstone",
    "change_log",
    "sync_peer",
    "cold_node",
    "work_queue",
    "legacy_order",
    "merge_proposal",
    "vec_centroid",
    "world_vec",
    "index_text",
    "merkle",
)
GUARDS = tuple(
    f"{table}_{op}_guard"
    for table in GUARDED
    for op in ("insert", "update", "delete")
    if table != "tombstone" or op == "insert"
)
SEGMENT_GUARDS = tuple(f"vec_segment_{op}_guard" for op in ("insert", "update", "delete"))  # version 14


def legacy_digest(conn: apsw.Connection) -> str:
    """A digest of legacy_order by world id ('' for a file created at version 10 or later)."""
    digest = blake3()
    for raw, size in conn.execute(
        "select n.id, l.size from legacy_order as l join node as n on n.nid = l.world order by n.id"
    ):
        digest.update(bytes(raw) + as_int(size).to_bytes(8, "big"))
    return "" if conn.execute("select 1 from legacy_order limit 1").fetchone() is None else digest.hexdigest()[:32]


def _to_v12(conn: apsw.Connection) -> None:
    """Version 12: raw writes to every table whose rows matter are refused; legacy_order's digest kept in meta.

    verify compares legacy_order with the digest, so a forged row (which would switch off the member-order
    check and make sync send everything) is named; a file created at version 10 or later has neither. The
    digest is written before the guards, which refuse any write outside an engine transaction.
    """
    digest = legacy_digest(conn)
    if digest:
        conn.execute("insert or replace into meta (key, value) values ('legacy_digest', ?)", (digest,))
    for name in GUARDS:
        conn.execute(schema_statement(name))


def _to_v13(conn: apsw.Connection) -> None:
    """Version 13: the views memory and fact, what a person reads first in the sqlite3 shell or ``worlddb browse``."""
    conn.execute(schema_statement("memory"))
    conn.execute(schema_statement("fact"))


def _to_v14(conn: apsw.Connection) -> None:
    """Version 14: the table that keeps the vector index in the file, empty; the engine fills it on open."""
    for name in ("vec_segment", "vec_segment_epoch", *SEGMENT_GUARDS):
        conn.execute(schema_statement(name))


def _to_v15(conn: apsw.Connection) -> None:
    """Version 15: ``node_vec`` keeps int8 codes and a scale instead of float32 (``vector_codes``).

    The table is built again beside the old one, a chunk of rows coded at a time (one chunk's floats held,
    never the table's), and takes its name. The kept index coded the float32 rows: it is dropped, and the
    engine writes it again from the new rows on the first open that may write (as after version 14).

    A row that is not a unit float32 vector of the store's dimension (damaged on disk: version 14's plain
    ``verify`` named it) is left out rather than coded into something that looks whole: ``verify`` then
    names its node as one without a vector, and re-embedding writes it again.
    """
    import numpy as np

    from . import vector_codes

    statement = schema_statement("node_vec")
    conn.execute(statement.replace("create table node_vec", "create table node_vec_migrating", 1))
    dim = conn.execute("select value from meta where key = 'embedder_dim'").fetchone()
    width = 4 * int(dim[0]) if dim and str(dim[0]).isdigit() else None
    after, chunk = -1, 8192
    while True:
        rows = conn.execute(
            "select nid, part, seq, embedding from node_vec where nid > ? order by nid limit ?", (after, chunk)
        ).fetchall()
        if not rows:
            break
        after = as_int(rows[-1][0])
        width = width or len(as_bytes(rows[0][3]))
        rows = [r for r in rows if isinstance(r[3], bytes) and len(r[3]) == width]
        if not rows or width % 4:
            continue
        vectors = np.frombuffer(b"".join(as_bytes(r[3]) for r in rows), dtype="<f4").reshape(-1, width // 4)
        with np.errstate(all="ignore"):
            squared = np.einsum("ij,ij->i", vectors.astype(np.float64), vectors.astype(np.float64))
        whole = np.isfinite(vectors).all(axis=1) & (np.abs(squared - 1.0) <= 2e-3)  # as version 14's verify
        codes, scales = vector_codes.encode(vectors[whole])  # only the rows kept are coded
        kept = [r for r, ok in zip(rows, whole.tolist(), strict=True) if ok]
        conn.executemany(
            "insert into node_vec_migrating (nid, part, seq, embedding, scale) values (?, ?, ?, ?, ?)",
            ((r[0], r[1], r[2], codes[i].tobytes(), float(scales[i])) for i, r in enumerate(kept)),
        )
    conn.execute("drop table node_vec")  # its indexes and guard triggers with it
    conn.execute("alter table node_vec_migrating rename to node_vec")
    for name in ("node_vec_seq", "node_vec_part", *(f"node_vec_{op}_guard" for op in ("insert", "update", "delete"))):
        conn.execute(schema_statement(name))
    with engine_write(conn):
        conn.execute("delete from vec_segment")


# STEPS[n] lifts a file from version n to n + 1.
STEPS: dict[int, Callable[[apsw.Connection], None]] = {
    1: _to_v2,
    2: _to_v3,
    3: _to_v4,
    4: _to_v5,
    5: _to_v6,
    6: _to_v7,
    7: _to_v8,
    8: _to_v9,
    9: _to_v10,
    10: _to_v11,
    11: _to_v12,
    12: _to_v13,
    13: _to_v14,
    14: _to_v15,
}
assert all(v in STEPS for v in range(min(STEPS), SCHEMA_VERSION)), "a schema version bump needs its step"


def can_migrate(version: int) -> bool:
    """Whether a file at ``version`` can be lifted to the current schema."""
    return version == SCHEMA_VERSION or (version in STEPS and all(v in STEPS for v in range(version, SCHEMA_VERSION)))


def migrate(conn: apsw.Connection, path: str) -> int | None:
    """Lift the file to ``SCHEMA_VERSION`` in one write transaction; return the version it had.

    None: another process lifted it first (it was current by the time the write lock was held).

    A crash or error part-way leaves the file at its old version (the transaction rolls back).
    Another process migrating at the same time is harmless: the version is read again under
    the write lock, and a file already current is left alone.
    """

    def run() -> int | None:
        conn.execute("begin immediate")
        try:
            found = user_version(conn)
            if found == SCHEMA_VERSION:
                conn.execute("commit")
                return None
            if found > SCHEMA_VERSION:  # a newer worlddb_lite lifted it meanwhile
                raise SchemaTooNew(
                    f"{path} has schema version {found}, newer than this worlddb_lite "
                    f"(version {SCHEMA_VERSION}); upgrade worlddb_lite to open it"
                )
            if not can_migrate(found):
                raise SchemaTooOld(
                    f"{path} has schema version {found}, which this worlddb_lite cannot migrate "
                    f"(it lifts versions {min(STEPS)} to {SCHEMA_VERSION}); open it with the "
                    "worlddb_lite that wrote it and export what you need"
                )
            for version in range(found, SCHEMA_VERSION):
                STEPS[version](conn)
            conn.execute(f"pragma user_version = {SCHEMA_VERSION}")
            with engine_write(conn):  # past version 12, meta is guarded
                conn.execute("update meta set value = ? where key = 'schema_version'", (str(SCHEMA_VERSION),))
            conn.execute("commit")
            return found
        except BaseException:
            if not conn.getautocommit():
                conn.execute("rollback")
            raise

    with translate():
        return with_retry(run)
