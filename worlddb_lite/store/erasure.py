"""The statements of a purge (ops/purge.py): what it reaches, what it reads, what it erases.

The writes run inside the purge's own transaction, while its 'purge' session row is held: the
guard triggers let exactly these through (a blob may become NULL, never change). A list of nids is
bound as one JSON array (``json_each``), however long it is.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

import apsw

from .connection import as_int, as_text, one_row

ERASED_REASON = "erased by a purge"  # what a merge proposal naming a purged node says instead of its reason


def reached_from(conn: apsw.Connection, nid: int) -> list[int]:
    """What purging ``nid`` takes along: its members, its versions and what was extracted from it.

    Versions are joined by supersedes, either way, except a Fact's: an older value of a slot was
    learned from another memory, which the purge keeps. Extracted are a Fact that refers_to it when it
    is a Turn or a note (a Memory: ``write`` reads notes as ingest reads turns), and anything
    derived_from it; ``sources`` says whether a Fact was learned from a memory the purge keeps.
    """
    return [
        as_int(r[0])
        for r in conn.execute(
            "select nid from node where parent = ?1 "
            "union select e.dst from edge as e join node as n on n.nid = ?1 "
            "where e.src = ?1 and e.type = 'supersedes' and n.type != 'Fact' "
            "union select e.src from edge as e join node as n on n.nid = ?1 "
            "where e.dst = ?1 and e.type = 'supersedes' and n.type != 'Fact' "
            "union select e.src from edge as e join node as f on f.nid = e.src join node as t on t.nid = e.dst "
            "where e.dst = ?1 and ((e.type = 'refers_to' and f.type = 'Fact' and t.type in ('Turn', 'Memory')) "
            "or e.type = 'derived_from')",
            (nid,),
        )
    ]


def sources(conn: apsw.Connection, fact: int) -> set[int]:
    """The turns and notes a Fact was learned from that still hold their text (none, if it is no Fact)."""
    return {
        as_int(r[0])
        for r in conn.execute(
            "select t.nid from edge as e join node as f on f.nid = e.src join node as t on t.nid = e.dst "
            "where e.src = ? and e.type = 'refers_to' and f.type = 'Fact' and t.type in ('Turn', 'Memory') "
            "and t.body is not null",
            (fact,),
        )
    }


def orphaned_entities(conn: apsw.Connection, purged: set[int]) -> list[int]:
    """Entities outside ``purged`` that only nodes of ``purged`` refer to: found in purged text alone."""
    marks = json.dumps(sorted(purged))
    return [
        as_int(r[0])
        for r in conn.execute(
            "select distinct e.dst from edge as e join node as n on n.nid = e.dst "
            "where e.type = 'refers_to' and n.type = 'Entity' and e.src in (select value from json_each(?1)) "
            "and e.dst not in (select value from json_each(?1)) and not exists (select 1 from edge as o "
            "where o.dst = e.dst and o.type = 'refers_to' and o.src not in (select value from json_each(?1)))",
            (marks,),
        )
    ]


def contents_by_parent(conn: apsw.Connection, nids: Sequence[int]) -> list[tuple[int, str]]:
    """(parent, content) of each of ``nids`` that has a parent and a non-empty content."""
    return [
        (as_int(parent), str(content))
        for parent, content in conn.execute(
            "select parent, json_extract(body, '$.content') from node where nid in (select value from json_each(?)) "
            "and parent is not null and json_extract(body, '$.content') != ''",
            (json.dumps(list(nids)),),
        )
    ]


def widened_members(conn: apsw.Connection, world: int) -> list[tuple[int, str, str]]:
    """(nid, added, context) of the members of ``world`` indexed with more than their own text (index_text).

    ``added`` was indexed after the blob's content (a neighbour's text, a bridged name), ``context``
    for its words alone, both as node_text reads them (quoted turns rendered); a missing text is "".
    """
    return [
        (as_int(nid), str(content or "")[len(str(own)) + 1 :] if content != own else "", str(context or ""))
        for nid, own, content, context in conn.execute(
            "select t.nid, coalesce(json_extract(n.body, '$.content'), ''), t.content, t.context from node as n "
            "join index_text as x on x.nid = n.nid join node_text as t on t.nid = n.nid where n.parent = ?",
            (world,),
        )
    ]


def purged_mentions(conn: apsw.Connection, purged: Sequence[int]) -> list[tuple[int, str]]:
    """(entity, content) of each ``refers_to`` from a node of ``purged`` with content to an Entity outside it."""
    return [
        (as_int(entity), str(content))
        for entity, content in conn.execute(
            "select e.dst, json_extract(n.body, '$.content') from edge as e join node as n on n.nid = e.src "
            "join node as t on t.nid = e.dst where e.type = 'refers_to' and t.type = 'Entity' "
            "and e.src in (select value from json_each(?1)) and e.dst not in (select value from json_each(?1)) "
            "and json_extract(n.body, '$.content') is not null",
            (json.dumps(sorted(purged)),),
        )
    ]


def kept_mentions(conn: apsw.Connection, entity: int, purged: Sequence[int]) -> list[str]:
    """The contents of the nodes outside ``purged`` that refer_to ``entity``."""
    return [
        str(r[0])
        for r in conn.execute(
            "select json_extract(n.body, '$.content') from edge as e join node as n on n.nid = e.src "
            "where e.dst = ?1 and e.type = 'refers_to' and e.src not in (select value from json_each(?2)) "
            "and json_extract(n.body, '$.content') is not null",
            (entity, json.dumps(sorted(purged))),
        )
    ]


def name_of(conn: apsw.Connection, nid: int) -> str:
    """A node's name ("" if it has none)."""
    return str(
        one_row(
            conn.execute("select coalesce(json_extract(body, '$.name'), '') from node where nid = ?", (nid,)).fetchone()
        )[0]
    )


def alias_norms(conn: apsw.Connection, nid: int) -> list[str]:
    """The normalised aliases of a node."""
    return [str(norm) for (norm,) in conn.execute("select norm from alias where nid = ?", (nid,))]


def own_text(conn: apsw.Connection, nid: int) -> tuple[str | None, str | None, int]:
    """(name, content, member count) of a node, read from its blob and its projection."""
    name, content, size = one_row(
        conn.execute(
            "select json_extract(n.body, '$.name'), json_extract(n.body, '$.content'), s.size "
            "from node as n join node_state as s on s.nid = n.nid where n.nid = ?",
            (nid,),
        ).fetchone()
    )
    return as_text(name), as_text(content), as_int(size)


def unexpired(conn: apsw.Connection, nid: int) -> bool:
    """Whether the node's projection is still believed (no ``expired_at``)."""
    row = conn.execute("select expired_at from node_state where nid = ?", (nid,)).fetchone()
    return row is not None and row[0] is None


def erase_blob(conn: apsw.Connection, nid: int) -> None:
    """Empty a node's blob; its id, the hash of that blob, stays."""
    conn.execute("update node set body = null where nid = ? and body is not null", (nid,))


def erase_records(conn: apsw.Connection, nid: int, raw_id: bytes, at: str) -> None:
    """Erase what else names or quotes a node and leave its tombstone (its hash and the purge's time).

    Its aliases go, its proposals lose their reasons, its queued extraction is marked done, and its
    recalls and tier (retention) are forgotten.
    """
    conn.execute("delete from alias where nid = ?", (nid,))
    # a proposal's reason quotes both names ("'Sarah' ~ 'Sara'"); the decision itself stays
    conn.execute("update merge_proposal set reason = ?2 where a = ?1 or b = ?1", (nid, ERASED_REASON))
    conn.execute(
        "update work_queue set done_at = coalesce(done_at, ?), speaker = null, said_in = null where turn = ?",
        (at, nid),
    )
    conn.execute("delete from node_access where nid = ?", (nid,))  # when it was recalled, and its tier
    conn.execute("delete from cold_node where nid = ?", (nid,))
    conn.execute("insert or ignore into tombstone (id, purged_at) values (?, ?)", (raw_id, at))


def drop_aliases(conn: apsw.Connection, pairs: Sequence[tuple[int, str]]) -> None:
    """Delete the aliases given as (nid, norm)."""
    conn.executemany("delete from alias where nid = ? and norm = ?", pairs)


def optimize_fts(conn: apsw.Connection) -> None:
    """Merge the full-text index's segments into one: a deleted row's terms leave the old segments."""
    conn.execute("insert into node_fts (node_fts) values ('optimize')")
