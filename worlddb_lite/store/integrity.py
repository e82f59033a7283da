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
