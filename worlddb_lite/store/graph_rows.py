"""The reads the consolidator's graph steps make (``consolidate/`` infer, sweep and dedup).

"Current" here is what an edge handler calls current (``EndView.current``): still valid, still
believed, not retired; for an edge, both its ends too. The steps write through the reconciler;
these functions only read.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

import apsw

from .connection import as_int

# Every statement is a literal (no SQL is formatted here); "current" is spelled out in each.
_PAIRS = (
    "select e.src, e.dst from edge as e join node_state as s on s.nid = e.src join node_state as d on d.nid = e.dst "
    "where e.type = ? and e.invalid_at is null and e.expired_at is null "
    "and s.invalid_at is null and s.expired_at is null and s.retired = 0 "
    "and d.invalid_at is null and d.expired_at is null and d.retired = 0 order by e.eid"
)


_PAIRS_FROM = _PAIRS.replace(" order by", " and e.src in (select value from json_each(?)) order by")


def current_pairs(conn: apsw.Connection, edge_type: str, srcs: Sequence[int] | None = None) -> list[tuple[int, int]]:
    """(src, dst) of the current edges of ``edge_type`` whose ends are current, in eid order (only from ``srcs``)."""
    rows = (
        conn.execute(_PAIRS, (edge_type,))
        if srcs is None
        else conn.execute(_PAIRS_FROM, (edge_type, json.dumps(sorted(set(srcs)))))
    )
    return [(as_int(src), as_int(dst)) for src, dst in rows]


def linked_pairs(conn: apsw.Connection, edge_type: str) -> set[tuple[int, int]]:
    """(src, dst) of every current edge of ``edge_type``, whatever its ends' state."""
    return {
        (as_int(src), as_int(dst))
        for src, dst in conn.execute(
            "select src, dst from edge where type = ? and invalid_at is null and expired_at is null", (edge_type,)
        )
    }


def withdrawn_pairs(conn: apsw.Connection, edge_type: str, prop: str | None = None) -> set[tuple[int, int]]:
    """(src, dst) of the closed or retracted edges of ``edge_type`` (only those whose props set ``prop`` true)."""
    closed = "select src, dst from edge where type = ? and (invalid_at is not null or expired_at is not null)"
    rows = (
        conn.execute(closed, (edge_type,))
        if prop is None
        else conn.execute(closed + " and json_extract(props, '$.' || ?) = 1", (edge_type, prop))
    )
    return {(as_int(src), as_int(dst)) for src, dst in rows}


_FACTS = (
    "select n.nid, n.parent, json_extract(n.body, '$.props.subject'), json_extract(n.body, '$.props.slot'), "
    "json_extract(n.body, '$.props.value'), s.valid_at from node as n join node_state as s on s.nid = n.nid "
    "where n.type = 'Fact' and n.body is not null and json_extract(n.body, '$.props.functional') = 1 "
    "and json_type(n.body, '$.props.value') = 'text' "
    "and s.invalid_at is null and s.expired_at is null and s.retired = 0 order by n.nid"
)
_FACTS_AMONG = _FACTS.replace(" order by", " and n.nid in (select value from json_each(?)) order by")


def current_facts(
    conn: apsw.Connection, nids: Sequence[int] | None = None
) -> list[tuple[int, int, str, str, str, str]]:
    """(nid, world, subject, slot, value, valid_at) of the current facts on functional slots, in nid order.

    With ``nids``, only those among them.
    """
    rows = conn.execute(_FACTS) if nids is None else conn.execute(_FACTS_AMONG, (json.dumps(sorted(set(nids))),))
    return [
        (as_int(nid), as_int(parent), str(subject), str(slot), str(value), str(valid_at))
        for nid, parent, subject, slot, value, valid_at in rows
        if subject is not None and slot is not None
    ]


def current_among(conn: apsw.Connection, nids: Sequence[int]) -> set[int]:
    """Which of ``nids`` are current."""
    return {
        as_int(r[0])
        for r in conn.execute(
            "select s.nid from node_state as s where s.nid in (select value from json_each(?1)) "
            "and s.invalid_at is null and s.expired_at is null and s.retired = 0",
            (json.dumps(list(nids)),),
        )
    }


def contents(conn: apsw.Connection, nids: Sequence[int]) -> dict[int, str]:
    """The content of each of ``nids`` that has one (a purged node has none)."""
    return {
        as_int(nid): str(text)
        for nid, text in conn.execute(
            "select nid, json_extract(body, '$.content') from node where nid in (select value from json_each(?1)) "
            "and json_type(body, '$.content') = 'text'",
            (json.dumps(list(nids)),),
        )
    }
