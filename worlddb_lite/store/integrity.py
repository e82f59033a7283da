"""The reads ``worlddb verify`` makes beyond the row scans of rows.py (ops/verify.py judges what they return).

They return what the file holds, unchecked: verify must report a damaged row, not stumble on it.
Whole-store reads stream where a row at a time is enough.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import apsw

from .connection import as_int, as_text, one_row


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
    """The rowid (a nid) of every full-text row."""
    return {int(r[0]) for r in conn.execute("select rowid from node_fts")}


def token_nids(conn: apsw.Connection) -> set[int]:
    """The nid of every token index row."""
    return {int(r[0]) for r in conn.execute("select nid from node_tokens")}


def indexed_tokens(conn: apsw.Connection) -> Iterator[tuple[int, str | None, str | None, Any]]:
    """(nid, name, content, token ids as stored) of every full-text row that has a token index row."""
    for nid, name, content, ids in conn.execute(
        "select f.rowid, f.name, f.content, t.ids from node_fts as f join node_tokens as t on t.nid = f.rowid"
    ):
        yield as_int(nid), as_text(name), as_text(content), ids


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
    """(a, b) of every accepted merge proposal, as stored."""
    return {(int(a), int(b)) for a, b in conn.execute("select a, b from merge_proposal where status = 'accepted'")}
