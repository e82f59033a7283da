"""SQL of the read path: visibility, containment, BM25, nearest neighbours, roots and counts.

Builders come in twins where the statement is worth showing: ``*_sql()`` returns it, the
function of the same name runs it. Every value is bound; only package constants and counts of
placeholders are formatted in. ``?1`` is the valid time and ``?2`` the belief time throughout.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

import apsw

from ._sqlite import as_float, as_int, one_row
from .store import believed_sql, visible_sql


def predicate(include_superseded: bool, alias: str = "s") -> str:
    """Visible at (?1, ?2), or merely believed at ?2 when closed versions are wanted."""
    return believed_sql(alias) if include_superseded else visible_sql(alias)


def is_visible(conn: apsw.Connection, nid: int, valid: str, belief: str) -> bool:
    """True if the node was true at ``valid`` as the store knew it at ``belief``."""
    sql = "select 1 from node_state as s where s.nid = ?3 and " + visible_sql()
    return conn.execute(sql, (valid, belief, nid)).fetchone() is not None


def descendants_sql(memberships: int, include_superseded: bool) -> str:
    """Nodes inside world ?3 (parents, and membership edges visible at ?1/?2), optionally of type ?N."""
    marks = ",".join("?" for _ in range(memberships)) or "''"
    type_param, limit_param = 4 + memberships, 5 + memberships
    return (
        "with recursive inside(nid) as (select ?3 union "
        "select n.nid from node as n join inside on n.parent = inside.nid union "
        f"select e.dst from edge as e join inside on e.src = inside.nid where e.type in ({marks}) "
        f"and {predicate(include_superseded, 'e')}) "
        "select i.nid from inside as i join node as n on n.nid = i.nid join node_state as s on s.nid = i.nid "
        f"where i.nid != ?3 and n.body is not null and (?{type_param} is null or n.type = ?{type_param}) "
        f"and {predicate(include_superseded)} order by i.nid limit ?{limit_param}"
    )


def descendants(
    conn: apsw.Connection, world: int, valid: str, belief: str, *, memberships: Sequence[str],
    node_type: str | None, include_superseded: bool, limit: int,
) -> list[int]:
    """The nids inside ``world`` that are visible (see ``descendants_sql``)."""
    sql = descendants_sql(len(memberships), include_superseded)
    params = [valid, belief, world, *memberships, node_type, limit]
    return [as_int(r[0]) for r in conn.execute(sql, params)]


def bm25_sql(include_superseded: bool) -> str:
    """FTS5 match ?3, visible at (?1, ?2), best ?4 first."""
    return (
        "select f.rowid, -f.rank from node_fts as f join node_state as s on s.nid = f.rowid "
        f"where node_fts match ?3 and {predicate(include_superseded)} order by f.rank limit ?4"
    )


def bm25(conn: apsw.Connection, query: str, valid: str, belief: str, *, k: int,
         include_superseded: bool) -> list[tuple[int, float]]:
    """(nid, BM25 score, higher is better) for an FTS5 query."""
    rows = conn.execute(bm25_sql(include_superseded), (valid, belief, query, k))
    return [(as_int(nid), as_float(score)) for nid, score in rows]


def visible_among(conn: apsw.Connection, nids: list[int], valid: str, belief: str, *,
                  include_superseded: bool) -> set[int]:
    """Which of ``nids`` are visible at (valid, belief): the validity filter of a vector search."""
    return {
        as_int(r[0]) for r in conn.execute(
            "select s.nid from node_state as s where s.nid in (select value from json_each(?3)) and "
            + predicate(include_superseded), (valid, belief, json.dumps(nids)))
    }


def root_at(conn: apsw.Connection, world: int, at: str) -> bytes | None:
    """The last root a world committed at or before ``at``."""
    row = conn.execute(
        "select root from root_log where world = ? and at <= ? order by lid desc limit 1", (world, at)
    ).fetchone()
    return None if row is None else bytes(row[0])


def root_log(conn: apsw.Connection, world: int) -> list[tuple[str, bytes, int]]:
    """(committed at, root, member count) of every root a world committed, oldest first."""
    return [(str(at), bytes(root), as_int(size)) for root, size, at in conn.execute(
        "select root, size, at from root_log where world = ? order by lid", (world,))]


def alias_nids(conn: apsw.Connection, norm: str) -> list[int]:
    """Nodes known by a normalised alias."""
    return [as_int(r[0]) for r in conn.execute("select nid from alias where norm = ? order by nid", (norm,))]


def meta_value(conn: apsw.Connection, key: str) -> str | None:
    """One meta value, or None (also when the file has no meta table yet)."""
    try:
        row = conn.execute("select value from meta where key = ?", (key,)).fetchone()
    except apsw.SQLError:
        return None
    return None if row is None else str(row[0])


def root_nid(conn: apsw.Connection) -> int | None:
    """The store's root world."""
    row = conn.execute("select nid from node where parent is null").fetchone()
    return None if row is None else as_int(row[0])


COUNTS = {
    "nodes": "select count(*) from node",
    "current_nodes": "select count(*) from current_node",
    "worlds": "select count(*) from node_state where size > 0",
    "edges": "select count(*) from edge",
    "pending_merges": "select count(*) from merge_proposal where status = 'pending'",
    "open_contradictions": "select count(*) from open_contradiction",
    "root_log": "select count(*) from root_log",
    "vectors": "select count(*) from node_vec",
    "composed_worlds": "select count(*) from world_vec",
    "vector_partitions": "select count(*) from vec_centroid",
}


def counts(conn: apsw.Connection) -> dict[str, int]:
    """The counts ``stats`` reports."""
    return {name: as_int(one_row(conn.execute(sql).fetchone())[0]) for name, sql in COUNTS.items()}


def text_count(conn: apsw.Connection) -> int:
    """How many nodes have text to embed (a name or content)."""
    return as_int(one_row(conn.execute(
        "select count(*) from node where coalesce(json_extract(body, '$.name'), '') != '' "
        "or coalesce(json_extract(body, '$.content'), '') != ''").fetchone())[0])


def membership_links(conn: apsw.Connection, memberships: Sequence[str], valid: str, belief: str, *,
                     include_superseded: bool) -> list[tuple[int, int]]:
    """(src, dst) of the visible membership edges (``contains`` and custom ones)."""
    if not memberships:
        return []
    marks = ",".join(f"?{i + 3}" for i in range(len(memberships)))  # ?1, ?2: the times of the predicate
    return [(as_int(a), as_int(b)) for a, b in conn.execute(
        f"select e.src, e.dst from edge as e where e.type in ({marks}) and {predicate(include_superseded, 'e')}",
        (valid, belief, *memberships))]
