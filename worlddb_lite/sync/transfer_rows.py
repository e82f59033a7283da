"""The SQL of export and import (``sync/transfer.py``): what a scope holds, and the rows beside its nodes.

Reads only, but for the two rows an import adds outside the reconciler's node and edge writes:
a purge tombstone and a queued extraction (the guards do not cover either table).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from typing import Any

import apsw

from ..store.connection import as_int
from .rows import PROPOSAL_ROWS


def _json(nids: Sequence[int]) -> str:
    return json.dumps(sorted(set(nids)))


def scopes_named(conn: apsw.Connection, root: int, name: str) -> list[tuple[int, str]]:
    """(nid, props JSON) of the Scope worlds under the root called ``name``."""
    return [
        (as_int(nid), str(props or "{}"))
        for nid, props in conn.execute(
            "select nid, json_extract(body, '$.props') from node "
            "where parent = ? and type = 'Scope' and json_extract(body, '$.name') = ? order by nid",
            (root, name),
        )
    ]


def subtree(conn: apsw.Connection, tops: Sequence[int]) -> set[int]:
    """The nids of these nodes and of every node below them by parent."""
    sql = (
        "with recursive below(nid) as (select value from json_each(?) union "
        "select n.nid from node as n join below on n.parent = below.nid) select nid from below"
    )
    return {as_int(r[0]) for r in conn.execute(sql, (_json(tops),))}


def members_by_edge(conn: apsw.Connection, srcs: Sequence[int], types: Sequence[str]) -> set[int]:
    """Dst of every membership edge (open or closed) leaving these nodes."""
    if not srcs or not types:
        return set()
    sql = (
        "select dst from edge where src in (select value from json_each(?1)) "
        "and type in (select value from json_each(?2))"
    )
    return {as_int(r[0]) for r in conn.execute(sql, (_json(srcs), json.dumps(sorted(types))))}


def ancestors(conn: apsw.Connection, nids: Sequence[int]) -> set[int]:
    """Every node above these by parent (the store root included)."""
    sql = (
        "with recursive above(nid) as (select parent from node where nid in (select value from json_each(?)) "
        "and parent is not null union select n.parent from node as n join above on n.nid = above.nid "
        "where n.parent is not null) select nid from above"
    )
    return {as_int(r[0]) for r in conn.execute(sql, (_json(nids),))}


def all_nids(conn: apsw.Connection) -> set[int]:
    """Every node of the store."""
    return {as_int(r[0]) for r in conn.execute("select nid from node")}


def edges_within(conn: apsw.Connection, nids: set[int]) -> Iterator[int]:
    """Eids of the edges whose two ends are among ``nids``, in eid order."""
    for eid, src, dst in conn.execute("select eid, src, dst from edge order by eid"):
        if src in nids and dst in nids:
            yield as_int(eid)


def state_changes(conn: apsw.Connection, kind: str) -> dict[int, list[tuple[Any, ...]]]:
    """Each node's or edge's state_log entries, oldest first: (at, invalid_at, closed_at, expired_at, retired)."""
    out: dict[int, list[tuple[Any, ...]]] = {}
    for ref, *rest in conn.execute(
        "select ref, at, invalid_at, closed_at, expired_at, retired from state_log where kind = ? order by lid",
        (kind,),
    ):
        out.setdefault(as_int(ref), []).append(tuple(rest))
    return out


def logged_roots(conn: apsw.Connection, worlds: set[int]) -> dict[int, list[tuple[str, bytes, int]]]:
    """The root history of these worlds: (at, root, size), oldest first."""
    out: dict[int, list[tuple[str, bytes, int]]] = {}
    for world, at, root, size in conn.execute("select world, at, root, size from root_log order by lid"):
        if world in worlds:
            out.setdefault(as_int(world), []).append((str(at), bytes(root), as_int(size)))
    return out


def fts_rows(conn: apsw.Connection, nids: Sequence[int]) -> dict[int, tuple[str, str, str | None]]:
    """The full-text rows (name, content, context) of these nodes (a node without one is left out)."""
    return {
        as_int(nid): (str(name or ""), str(content or ""), None if context is None else str(context))
        for nid, name, content, context in conn.execute(
            "select nid, name, content, context from node_text where nid in (select value from json_each(?))",
            (json.dumps(sorted(set(nids))),),
        )
    }


def purged_at(conn: apsw.Connection, raw_id: bytes) -> str | None:
    """When a node's content was purged, or None."""
    row = conn.execute("select purged_at from tombstone where id = ?", (raw_id,)).fetchone()
    return None if row is None else str(row[0])


def aliases_of(conn: apsw.Connection, nids: set[int]) -> Iterator[tuple[int, str, str, str | None, str]]:
    """(nid, alias, norm, source, created_at) of these nodes' aliases."""
    for nid, alias, norm, source, created_at in conn.execute(
        "select nid, alias, norm, source, created_at from alias order by nid, norm"
    ):
        if nid in nids:
            yield as_int(nid), str(alias), str(norm), source, str(created_at)


def proposals_within(conn: apsw.Connection, nids: set[int]) -> Iterator[tuple[Any, ...]]:
    """The proposals pairing two of these nodes, as ``sync_rows.proposals`` reads them."""
    for row in conn.execute(PROPOSAL_ROWS + " order by pid"):
        if row[0] in nids and row[1] in nids:
            yield tuple(row)


def queued_within(conn: apsw.Connection, nids: set[int]) -> Iterator[tuple[Any, ...]]:
    """(turn, scope, said_at, said_in, speaker, enqueued_at) of the waiting extractions of these turns."""
    for row in conn.execute(
        "select turn, scope, said_at, said_in, speaker, enqueued_at from work_queue where done_at is null order by qid"
    ):
        if row[0] in nids and row[1] in nids:
            yield tuple(row)


def add_tombstone(conn: apsw.Connection, raw_id: bytes, at: str) -> None:
    """Record that a node arrived purged (idempotent)."""
    conn.execute("insert or ignore into tombstone (id, purged_at) values (?, ?)", (raw_id, at))


def queue_turn(conn: apsw.Connection, row: Sequence[Any]) -> None:
    """Queue an imported turn's extraction (turn, scope, said_at, said_in, speaker, enqueued_at) unless queued."""
    conn.execute(
        "insert or ignore into work_queue (turn, scope, said_at, said_in, speaker, enqueued_at) "
        "values (?, ?, ?, ?, ?, ?)",
        tuple(row),
    )


def merges_among(
    conn: apsw.Connection, nids: Sequence[int]
) -> tuple[set[tuple[int, int]], set[tuple[int, int]], set[tuple[int, int]]]:
    """Among ``nids``: the (src, dst) of open and of closed same_as edges, and the (a, b) of accepted merges.

    Accepted here or by another replica (a noted conflict), as ``integrity.accepted_pairs`` reads them.
    """
    ids = _json(nids)
    opened: set[tuple[int, int]] = set()
    closed: set[tuple[int, int]] = set()
    for src, dst, invalid_at in conn.execute(
        "select src, dst, invalid_at from edge where type = 'same_as' and src in (select value from json_each(?1)) "
        "and dst in (select value from json_each(?1))",
        (ids,),
    ):
        (opened if invalid_at is None else closed).add((as_int(src), as_int(dst)))
    accepted = {
        (as_int(a), as_int(b))
        for a, b in conn.execute(
            "select a, b from merge_proposal where (status = 'accepted' or conflict = 'accepted') "
            "and a in (select value from json_each(?1)) and b in (select value from json_each(?1))",
            (ids,),
        )
    }
    return opened, closed, accepted
