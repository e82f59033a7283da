"""The reads ``worlddb verify`` makes beyond the row scans of rows.py (ops/verify.py judges what they return).

They return what the file holds, unchecked: verify must report a damaged row, not stumble on it.
Whole-store reads stream where a row at a time is enough.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import apsw

from .connection import as_int, as_text, one_row
from .migrations import schema_statement


def quick_check(conn: apsw.Connection) -> Iterator[str]:
    """SQLite's own structural check: "ok", or one line per problem."""
    for (line,) in conn.execute("pragma quick_check"):
        yield line


def foreign_key_faults(conn: apsw.Connection) -> Iterator[Any]:
    """The rows ``pragma foreign_key_check`` reports, as SQLite gives them."""
    yield from conn.execute("pragma foreign_key_check")


def trigger_names(conn: apsw.Connection) -> set[str]:
    """The names of the triggers installed in the file."""
    return {r[0] for r in conn.execute("select name from sqlite_schema where type = 'trigger'")}


def session_rows(conn: apsw.Connection) -> int:
    """Rows in ``reconciler_session``: none at rest (each lives only inside its own write transaction)."""
    return as_int(one_row(conn.execute("select count(*) from reconciler_session").fetchone())[0])


def tombstone_ids(conn: apsw.Connection) -> set[bytes]:
    """The ids of every purged node."""
    return {bytes(r[0]) for r in conn.execute("select id from tombstone")}


def fts_rowids(conn: apsw.Connection) -> set[int]:
    """The rowid (a nid) of every full-text row (FTS5's own row list: node_fts keeps no content)."""
    return {int(r[0]) for r in conn.execute("select id from node_fts_docsize")}


def index_text_nids(conn: apsw.Connection) -> set[int]:
    """The nid of every index_text row."""
    return {int(r[0]) for r in conn.execute("select nid from index_text")}


def token_nids(conn: apsw.Connection) -> set[int]:
    """The nid of every token index row."""
    return {int(r[0]) for r in conn.execute("select nid from node_tokens")}


def indexed_tokens(conn: apsw.Connection) -> Iterator[tuple[int, str | None, str | None, Any]]:
    """(nid, name, content, token ids as stored) of every full-text row that has a token index row."""
    for nid, name, content, ids in conn.execute(
        "select t.nid, t.name, t.content, k.ids from node_text as t join node_tokens as k on k.nid = t.nid "
        "join node as n on n.nid = t.nid where json_valid(n.body)"
    ):
        yield as_int(nid), as_text(name), as_text(content), ids


def legacy_sizes(conn: apsw.Connection) -> dict[int, int]:
    """World -> how many first slots keep a pre-version-10 file's order (legacy_order)."""
    return {int(w): int(n) for w, n in conn.execute("select world, size from legacy_order")}


def merkle_worlds(conn: apsw.Connection) -> set[int]:
    """Every world with stored Merkle tree rows."""
    return {int(w) for (w,) in conn.execute("select distinct world from merkle")}


def merkle_tree(conn: apsw.Connection, world: int) -> dict[tuple[int, int], bytes]:
    """A world's stored Merkle tree: (level, index) -> hash."""
    return {
        (int(lv), int(i)): bytes(h)
        for lv, i, h in conn.execute("select level, idx, hash from merkle where world = ?", (world,))
    }


def last_logged_root(conn: apsw.Connection, world: int) -> bytes | None:
    """The root a world logged last, or None if it logged none."""
    row = conn.execute("select root from root_log where world = ? order by lid desc limit 1", (world,)).fetchone()
    return None if row is None else bytes(row[0])


def accepted_pairs(conn: apsw.Connection) -> set[tuple[int, int]]:
    """(a, b) of every merge proposal accepted here, or accepted by another replica (merge_conflict)."""
    return {
        (int(a), int(b))
        for a, b in conn.execute("select a, b from merge_proposal where status = 'accepted' or conflict = 'accepted'")
    }


def indexed_texts(conn: apsw.Connection) -> Iterator[tuple[int, int | None, str, str, str | None, str]]:
    """(nid, parent, name, content, added, context) of every full-text row, as node_text reads it back.

    The name and content are the node's blob's; ``added`` (None: nothing) and ``context`` are what
    index_text holds beyond them (quoted turns rendered). A row of a node without a readable blob
    (purged, or not JSON) is left out: the node scan and the row sets report those. Ordered by
    parent, so a caller can read each world's members once. A missing text is "".
    """
    for nid, parent, name, own, content, context in conn.execute(
        "select t.nid, n.parent, t.name, coalesce(json_extract(n.body, '$.content'), ''), t.content, t.context "
        "from node_text as t join node as n on n.nid = t.nid "
        "where n.body is not null and json_valid(n.body) order by n.parent, n.nid"
    ):
        own, content = str(own), str(content or "")
        yield (
            as_int(nid),
            None if parent is None else as_int(parent),
            str(name),
            own,
            None if content == own else content[len(own) + 1 :],
            str(context or ""),
        )


def fts_differences(conn: apsw.Connection, limit: int = 20) -> tuple[list[int], list[str]]:
    """Where node_fts differs from an index built afresh from node_text: (rowids, terms), ``limit`` of each.

    node_fts keeps no text to compare, so the deep verify indexes every row's text again in a temp
    table (the same definition) and compares FTS5's own per-row sizes (node_fts_docsize) and per-term
    counts (fts5vocab, by column): a word put in the index around the engine shows in both.
    """
    definition = schema_statement("node_fts").replace(
        "create virtual table node_fts", "create virtual table temp.fts_expected", 1
    )
    conn.execute("drop table if exists temp.fts_expected")
    conn.execute(definition)
    try:
        conn.execute(
            "insert into temp.fts_expected (rowid, name, content, context) select t.nid, t.name, t.content, t.context "
            "from node_text as t join node as n on n.nid = t.nid where n.body is not null and json_valid(n.body)"
        )
        conn.execute("create virtual table temp.fts_terms_stored using fts5vocab(main, node_fts, col)")
        conn.execute("create virtual table temp.fts_terms_expected using fts5vocab(temp, fts_expected, col)")
        rows = [
            as_int(r[0])
            for r in conn.execute(
                "select id from (select id, sz from main.node_fts_docsize except "
                "select id, sz from temp.fts_expected_docsize) union select id from "
                "(select id, sz from temp.fts_expected_docsize except "
                "select id, sz from main.node_fts_docsize) order by 1 limit ?",
                (limit,),
            )
        ]
        terms = [
            str(r[0])
            for r in conn.execute(
                "select term from (select term, col, doc, cnt from temp.fts_terms_stored except "
                "select term, col, doc, cnt from temp.fts_terms_expected) union select term from "
                "(select term, col, doc, cnt from temp.fts_terms_expected except "
                "select term, col, doc, cnt from temp.fts_terms_stored) order by 1 limit ?",
                (limit,),
            )
        ]
        return rows, terms
    finally:
        conn.execute("drop table if exists temp.fts_terms_stored")
        conn.execute("drop table if exists temp.fts_terms_expected")
        conn.execute("drop table if exists temp.fts_expected")


def member_texts(conn: apsw.Connection, world: int) -> Iterator[tuple[str, str]]:
    """(name and speaker, content) from the blob of every member of ``world`` that still has one.

    The speaker too: a turn of an old store names it in its props alone, and the migration's
    windows quote it ("ana: ...").
    """
    for name, content in conn.execute(
        "select coalesce(json_extract(body, '$.name'), '') || ' ' || "
        "coalesce(json_extract(body, '$.props.speaker'), ''), coalesce(json_extract(body, '$.content'), '') "
        "from node where parent = ? and body is not null and json_valid(body)",
        (world,),
    ):
        yield str(name), str(content)


def linked_texts(conn: apsw.Connection, nid: int) -> Iterator[tuple[str, str]]:
    """(name, content) from the blob of every node an edge joins to ``nid``, either way."""
    for name, content in conn.execute(
        "select coalesce(json_extract(n.body, '$.name'), ''), coalesce(json_extract(n.body, '$.content'), '') "
        "from edge as e join node as n on n.nid = case when e.src = ? then e.dst else e.src end "
        "where (e.src = ? or e.dst = ?) and n.body is not null and json_valid(n.body)",
        (nid, nid, nid),
    ):
        yield str(name), str(content)


# (rows, highest key) and the first missing key of each append-only log
_GAPS = {
    "root_log": (
        "select count(*), coalesce(max(lid), 0) from root_log",
        "select min(k) from (select 1 as k where not exists (select 1 from root_log where lid = 1) "
        "union all select lid + 1 from root_log as a where lid < ?1 "
        "and not exists (select 1 from root_log as b where b.lid = a.lid + 1))",
    ),
    "state_log": (
        "select count(*), coalesce(max(lid), 0) from state_log",
        "select min(k) from (select 1 as k where not exists (select 1 from state_log where lid = 1) "
        "union all select lid + 1 from state_log as a where lid < ?1 "
        "and not exists (select 1 from state_log as b where b.lid = a.lid + 1))",
    ),
    "change_log": (
        "select count(*), coalesce(max(seq), 0) from change_log",
        "select min(k) from (select 1 as k where not exists (select 1 from change_log where seq = 1) "
        "union all select seq + 1 from change_log as a where seq < ?1 "
        "and not exists (select 1 from change_log as b where b.seq = a.seq + 1))",
    ),
}


def gaps(conn: apsw.Connection, table: str) -> tuple[int, int, int | None]:
    """(rows, highest key, first missing key or None) of an append-only log numbered from 1.

    The logs are never deleted from (their guards refuse it), so their keys run 1, 2, ... without a gap.
    """
    counting, first_missing = _GAPS[table]
    count, top = one_row(conn.execute(counting).fetchone())
    if as_int(count) == as_int(top):
        return as_int(count), as_int(top), None
    missing = one_row(conn.execute(first_missing, (as_int(top),)).fetchone())[0]
    return as_int(count), as_int(top), None if missing is None else as_int(missing)


def meta_rows(conn: apsw.Connection) -> dict[str, str]:
    """Every meta row, key -> value."""
    return {str(k): str(v) for k, v in conn.execute("select key, value from meta")}


# change_log rows whose thing this file does not hold: (seq, kind, ref)
_CHANGE_ORPHANS = """
select c.seq, c.kind, c.ref from change_log as c where case c.kind
  when 'node' then not exists (select 1 from node where nid = c.ref)
  when 'edge' then not exists (select 1 from edge where eid = c.ref)
  when 'alias' then not exists (select 1 from node where nid = c.ref)
  when 'proposal' then not exists (select 1 from merge_proposal where pid = c.ref)
  else not exists (select 1 from node as n join tombstone as t on t.id = n.id where n.nid = c.ref) end
order by c.seq limit 20
"""


def change_orphans(conn: apsw.Connection) -> list[tuple[int, str, int]]:
    """Change log rows naming a node, edge, proposal or purge this file does not hold (20 at most)."""
    return [(as_int(s), str(k), as_int(r)) for s, k, r in conn.execute(_CHANGE_ORPHANS)]


# what the change log must list, as (kind, ref, how many rows at least): every node, edge, proposal and
# tombstone once, a node's aliases once each (their inserts), and a second row for what changed after it was
# written (state_log) while no replica merged into the store (a merge may log it as adopted, not changed)
_CHANGE_DUE = (
    "select 'node', nid, 1 from node union all select 'edge', eid, 1 from edge "
    "union all select 'alias', nid, count(*) from alias group by nid "
    "union all select 'proposal', pid, 1 from merge_proposal "
    "union all select 'tombstone', n.nid, 1 from tombstone as t join node as n on n.id = t.id "
    "union all select kind, ref, 2 from state_log where entered = 0 and not exists (select 1 from sync_peer) "
    "group by kind, ref"
)


def change_missing(conn: apsw.Connection, limit: int = 20) -> list[tuple[str, int]]:
    """(kind, ref) of what this file wrote that its change log does not list, as sync needs it (``limit`` at most).

    The log's rows are counted once (kind, ref); the things it must list are compared with the counts in
    Python: a correlated count per thing scanned the log each time (3 s at 5k nodes).
    """
    logged = {
        (str(k), as_int(r)): as_int(n)
        for k, r, n in conn.execute("select kind, ref, count(*) from change_log group by kind, ref")
    }
    missing: list[tuple[str, int]] = []
    for kind, ref, due in conn.execute(_CHANGE_DUE):
        key = (str(kind), as_int(ref))
        if logged.get(key, 0) < as_int(due):
            missing.append(key)
            if len(missing) >= limit:
                break
    return missing


def alias_rows(conn: apsw.Connection) -> Iterator[tuple[int, str, str, bool]]:
    """(nid, alias, norm, whether its node keeps its blob) of every alias."""
    for nid, alias, norm, live in conn.execute(
        "select a.nid, a.alias, a.norm, n.body is not null from alias as a left join node as n on n.nid = a.nid"
    ):
        yield as_int(nid), str(alias), str(norm), bool(live)


def live_tombstones(conn: apsw.Connection) -> list[int]:
    """Nodes that have a purge tombstone yet keep their blob."""
    return [
        as_int(r[0])
        for r in conn.execute(
            "select n.nid from tombstone as t join node as n on n.id = t.id where n.body is not null limit 20"
        )
    ]


def proposal_rows(conn: apsw.Connection) -> Iterator[tuple[int, str, str | None, str | None, bool]]:
    """(pid, status, decided_at, reason, whether a side is purged) of every merge proposal."""
    for pid, status, decided, reason, purged in conn.execute(
        "select m.pid, m.status, m.decided_at, m.reason, exists (select 1 from node as n "
        "where n.nid in (m.a, m.b) and n.body is null) from merge_proposal as m"
    ):
        yield as_int(pid), str(status), as_text(decided), as_text(reason), bool(purged)


def cold_rows(conn: apsw.Connection) -> Iterator[tuple[int, str | None, float, str, bool]]:
    """(nid, its type, score, reason, whether it has a blob and a vector and no members) of every cold row."""
    for nid, kind, score, reason, leaf in conn.execute(
        "select c.nid, n.type, c.score, c.reason, n.body is not null "
        "and exists (select 1 from node_vec as v where v.nid = c.nid) "
        "and not exists (select 1 from node as k where k.parent = c.nid) "
        "from cold_node as c left join node as n on n.nid = c.nid"
    ):
        yield as_int(nid), as_text(kind), float(score), str(reason), bool(leaf)


def queue_faults(conn: apsw.Connection) -> list[int]:
    """Queued extractions whose turn (or note) is not inside their scope, or is purged yet pending (20 at most)."""
    return [
        as_int(r[0])
        for r in conn.execute(
            "with recursive up (qid, at) as (select q.qid, t.parent from work_queue as q "
            "join node as t on t.nid = q.turn union all "
            "select up.qid, n.parent from up join node as n on n.nid = up.at where n.parent is not null) "
            "select q.qid from work_queue as q left join node as t on t.nid = q.turn "
            "where t.nid is null or (t.body is null and q.done_at is null) "
            "or not exists (select 1 from up where up.qid = q.qid and up.at = q.scope) limit 20"
        )
    ]


def peer_ids(conn: apsw.Connection) -> set[str]:
    """The store ids of every peer."""
    return {str(r[0]) for r in conn.execute("select store_id from sync_peer")}


def legacy_exceeding(conn: apsw.Connection) -> list[int]:
    """legacy_order rows that keep more slots than their world has."""
    return [
        as_int(r[0])
        for r in conn.execute(
            "select l.world from legacy_order as l left join node_state as s on s.nid = l.world "
            "where s.size is null or l.size > s.size"
        )
    ]


def centroid_rows(conn: apsw.Connection) -> Iterator[tuple[int, Any]]:
    """(part, centroid blob) of every IVF centroid."""
    for part, blob in conn.execute("select part, centroid from vec_centroid"):
        yield as_int(part), blob


def vector_parts(conn: apsw.Connection) -> set[int]:
    """The IVF partitions node_vec rows name."""
    return {as_int(r[0]) for r in conn.execute("select distinct part from node_vec")}


def embedded_texts(conn: apsw.Connection) -> Iterator[tuple[int, str | None, str | None]]:
    """(nid, name, content as indexed) of every node with a blob: what its vector embeds (ops/reembed.py)."""
    for nid, name, content in conn.execute(
        "select n.nid, json_extract(n.body, '$.name'), coalesce(f.content, json_extract(n.body, '$.content')) "
        "from node as n left join node_text as f on f.nid = n.nid where n.body is not null and json_valid(n.body) "
        "order by n.nid"
    ):
        yield as_int(nid), as_text(name), as_text(content)
