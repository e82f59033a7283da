"""All SQL for nodes, edges, state, Merkle rows and proposals.

Reads are used by everyone; the write helpers are called only by the reconciler
(``reconciler.py``), which decides *what* to write. Every statement binds its
values as parameters: no SQL is ever formatted from input.
"""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import apsw

from ..errors import AmbiguousId, Hint, InvalidId, NotFound
from ..types import Edge, MergeProposal, MergeStatus, Node
from . import quoted
from .connection import as_bytes, as_int, as_text, engine_write, one_row, with_retry
from .hashing import ID_BYTES, state_bytes

_HEX = re.compile(r"^[0-9a-f]+$")
MIN_PREFIX = 8

NODE_SELECT = (
    "select n.nid, n.id, n.type, n.parent, n.depth, n.slot, n.body, s.valid_at, s.invalid_at, "
    "s.closed_at, s.created_at, s.expired_at, s.retired, s.salience, s.size, s.root, n.ord "
    "from node as n join node_state as s on s.nid = n.nid "
)
EDGE_SELECT = (
    "select e.eid, e.id, e.type, e.src, e.dst, e.world, e.slot, e.props, e.valid_at, e.invalid_at, "
    "e.closed_at, e.created_at, e.expired_at, e.ord from edge as e "
)


def indexed_content(content: str, added: str | None) -> str:
    """A full-text row's content: the node's own, then on a new line what is indexed with it (``added``)."""
    return f"{content}\n{added}" if added and content else content


def added_text(own: str, indexed: str) -> str | None:
    """What an indexed content adds after the node's own content (``indexed_content``'s inverse); None: nothing.

    Raises ValueError when ``indexed`` does not begin with ``own`` that way.
    """
    if indexed == own:
        return None
    if own and indexed.startswith(own + "\n"):
        return indexed[len(own) + 1 :] or None
    raise ValueError("the indexed text does not begin with the node's own text")


class Header(NamedTuple):
    """The immutable part of a node the write path needs often (cached; a tuple: built per write)."""

    nid: int
    id: bytes
    type: str
    parent: int | None
    depth: int
    slot: int | None


@dataclass(slots=True)
class NodeRow:
    """A node row joined with its projection."""

    nid: int
    id: bytes
    type: str
    parent: int | None
    depth: int
    slot: int | None
    body: str | None
    valid_at: str
    invalid_at: str | None
    closed_at: str | None
    created_at: str
    expired_at: str | None
    retired: int
    salience: float
    size: int
    root: bytes
    ord: int  # its place among its world's members written in the same commit (member order)

    def state(self) -> bytes:
        """The projection bytes the Merkle root covers."""
        return node_state_bytes(
            self.valid_at, self.invalid_at, self.closed_at, self.created_at, self.expired_at, self.retired
        )


@dataclass(slots=True)
class EdgeRow:
    """An edge row."""

    eid: int
    id: bytes
    type: str
    src: int
    dst: int
    world: int
    slot: int
    props: str
    valid_at: str
    invalid_at: str | None
    closed_at: str | None
    created_at: str
    expired_at: str | None
    ord: int

    def state(self) -> bytes:
        """The projection bytes the edge's Merkle leaf covers."""
        return state_bytes(self.valid_at, self.invalid_at, self.closed_at, self.created_at, self.expired_at)


def node_state_bytes(
    valid_at: str,
    invalid_at: str | None,
    closed_at: str | None,
    created_at: str,
    expired_at: str | None,
    retired: int,
) -> bytes:
    """The projection bytes a node's root covers (salience is ranking, not a claim)."""
    return state_bytes(valid_at, invalid_at, closed_at, created_at, expired_at, int(retired))


def visible_sql(alias: str = "s") -> str:
    """The bitemporal visibility predicate over ``?1`` (valid time) and ``?2`` (belief time).

    A row is visible when the store believed it at ?2 and it was true at ?1 as known at ?2.
    A closing learned after ?2 (closed_at > ?2) was not known then: the interval that counts
    is the one in the last state_log entry at or before ?2 (open if there is none), so two
    tightenings in a row still read correctly in between. ``alias`` is ``s`` (node_state) or
    ``e`` (edge).
    """
    a = alias
    kind, key = ("edge", "eid") if a == "e" else ("node", "nid")
    earlier = (
        f"(select l.invalid_at from state_log as l where l.kind = '{kind}' and l.ref = {a}.{key} "
        "and l.at <= ?2 order by l.lid desc limit 1)"
    )
    return (
        f"({a}.created_at <= ?2 and ({a}.expired_at is null or {a}.expired_at > ?2) "
        f"and {a}.valid_at <= ?1 and ({a}.invalid_at is null or {a}.invalid_at > ?1 "
        f"or ({a}.closed_at > ?2 and coalesce({earlier} > ?1, 1))))"
    )


def believed_sql(alias: str = "s") -> str:
    """Believed at ?2, whatever its validity (include_superseded)."""
    return f"({alias}.created_at <= ?2 and ({alias}.expired_at is null or {alias}.expired_at > ?2))"


class Store:
    """SQL over one connection. Caches only immutable facts (node headers)."""

    def __init__(self, conn: apsw.Connection) -> None:
        self.conn = conn
        self._headers: dict[int, Header] = {}

    # ---- ids -----------------------------------------------------------------

    def _prefix_bounds(self, ref: str | bytes, what: str) -> tuple[bytes, bytes]:
        if not isinstance(ref, str):
            raise InvalidId(f"{what} reference must be hex text, got {type(ref).__name__}")
        text = ref.strip().lower()
        if not _HEX.match(text) or len(text) > 2 * ID_BYTES:
            raise InvalidId(
                f"{ref!r} is not a {what} id: give the 64 hex characters of the id a write returned, "
                f"or a unique prefix of at least {MIN_PREFIX}"
            )
        if len(text) < MIN_PREFIX:
            raise InvalidId(f"id prefix {ref!r} is too short to be safe; give at least {MIN_PREFIX} hex characters")
        pad = 2 * ID_BYTES - len(text)
        return bytes.fromhex(text + "0" * pad), bytes.fromhex(text + "f" * pad)

    def resolve(self, ref: str | bytes) -> int:
        """The nid of a node given its full hex id, raw id bytes or a unique hex prefix."""
        if isinstance(ref, bytes) and len(ref) == ID_BYTES:
            row = self.conn.execute("select nid from node where id = ?", (ref,)).fetchone()
            if row is None:
                raise NotFound(f"no node has id {ref.hex()}")
            return int(row[0])
        if not isinstance(ref, str):
            raise InvalidId(f"a node reference must be hex text, got {type(ref).__name__}")
        lo, hi = self._prefix_bounds(ref, "node")
        if lo == hi:  # a full id: one exact lookup that also fills the header cache
            row = self.conn.execute(
                "select nid, id, type, parent, depth, slot from node where id = ?", (lo,)
            ).fetchone()
            if row is None:
                raise NotFound(f"no node has id {ref}", hint=Hint("list_memories"))
            self.cache_header(Header(*row))
            return int(row[0])
        rows = self.conn.execute("select nid, id from node where id between ? and ? limit 2", (lo, hi)).fetchall()
        if not rows:
            raise NotFound(f"no node id starts with {ref!r}", hint=Hint("list_memories"))
        if len(rows) > 1:
            raise AmbiguousId(
                f"{ref!r} matches several nodes "
                f"(e.g. {as_bytes(rows[0][1]).hex()[:16]}…, {as_bytes(rows[1][1]).hex()[:16]}…); "
                "give more characters"
            )
        return as_int(rows[0][0])

    def resolve_edge(self, ref: str) -> int:
        """The eid of an edge given its hex id or a unique prefix."""
        lo, hi = self._prefix_bounds(ref, "edge")
        rows = self.conn.execute("select eid from edge where id between ? and ? limit 2", (lo, hi)).fetchall()
        if not rows:
            raise NotFound(f"no edge id starts with {ref!r}")
        if len(rows) > 1:
            raise AmbiguousId(f"{ref!r} matches several edges; give more characters")
        return as_int(rows[0][0])

    def nid_of(self, raw_id: bytes) -> int | None:
        """The nid for an exact id, or None."""
        row = self.conn.execute("select nid from node where id = ?", (raw_id,)).fetchone()
        return None if row is None else int(row[0])

    def header(self, nid: int) -> Header:
        """Immutable header of a node (cached: ids, parents and slots never change)."""
        cached = self._headers.get(nid)
        if cached is not None:
            return cached
        row = self.conn.execute("select nid, id, type, parent, depth, slot from node where nid = ?", (nid,)).fetchone()
        if row is None:
            raise NotFound(f"no node with local number {nid}")
        header = Header(*row)
        self.cache_header(header)
        return header

    def cache_header(self, header: Header) -> None:
        """Cache a node header (bounded: cleared when it grows past a million entries)."""
        if len(self._headers) >= 1_000_000:
            self._headers.clear()
        self._headers[header.nid] = header

    def forget_uncommitted(self, nids: Iterable[int]) -> None:
        """Drop cached headers of nodes whose transaction rolled back."""
        dropped = set(nids)
        for nid in dropped:
            self._headers.pop(nid, None)

    # ---- node reads -----------------------------------------------------------

    def node_row(self, nid: int) -> NodeRow:
        """The node and its projection."""
        row = self.conn.execute(NODE_SELECT + "where n.nid = ?", (nid,)).fetchone()
        if row is None:
            raise NotFound(f"no node with local number {nid}")
        return NodeRow(*row)

    def member_count(self, world: int) -> int:
        """Member slots used in a world's Merkle tree."""
        return as_int(one_row(self.conn.execute("select size from node_state where nid = ?", (world,)).fetchone())[0])

    def validity(self, nid: int) -> tuple[str, str | None, str | None, bool]:
        """(valid_at, invalid_at, expired_at, retired) of a node."""
        row = one_row(
            self.conn.execute(
                "select valid_at, invalid_at, expired_at, retired from node_state where nid = ?", (nid,)
            ).fetchone()
        )
        return str(row[0]), as_text(row[1]), as_text(row[2]), bool(row[3])

    def root_of(self, nid: int) -> bytes:
        """A node's current Merkle root."""
        return as_bytes(one_row(self.conn.execute("select root from node_state where nid = ?", (nid,)).fetchone())[0])

    def node_rows(self, where: str, params: Sequence[Any]) -> list[NodeRow]:
        """Node rows matching a fixed WHERE clause written by this package."""
        return list(self.iter_node_rows(where, params))

    def iter_node_rows(self, where: str, params: Sequence[Any]) -> Iterator[NodeRow]:
        """``node_rows`` one at a time: a whole store's text need not fit in memory."""
        for r in self.conn.execute(NODE_SELECT + where, params):
            yield NodeRow(*r)

    def to_node(self, row: NodeRow, annotate: Iterable[str] = ()) -> Node:
        """Build the public record, with incoming supersedes / contradicts links if asked."""
        return self.to_nodes([row], annotate)[0]

    def to_nodes(self, rows: Sequence[NodeRow], annotate: Iterable[str] = ()) -> list[Node]:
        """Build public records for many rows with one annotation query for all of them."""
        wanted = set(annotate) & {"supersedes", "contradicts"}
        superseded_by: dict[int, list[str]] = {}
        contradicted_by: dict[int, set[str]] = {}
        if wanted and rows:
            marks = ",".join("?" for _ in rows)  # one placeholder per row; values stay bound
            nids = [r.nid for r in rows]
            for nid, edge_type, other in self.conn.execute(
                "select e.dst, e.type, n.id from edge as e join node as n on n.nid = e.src "
                f"where e.dst in ({marks}) and e.type in ('supersedes', 'contradicts') "
                "and e.expired_at is null and e.invalid_at is null "
                "union all select e.src, e.type, n.id from edge as e join node as n on n.nid = e.dst "
                f"where e.src in ({marks}) and e.type = 'contradicts' "
                "and e.expired_at is null and e.invalid_at is null",
                nids + nids,
            ):
                if edge_type == "supersedes" and "supersedes" in wanted:
                    superseded_by.setdefault(nid, []).append(other.hex())
                elif edge_type == "contradicts" and "contradicts" in wanted:
                    contradicted_by.setdefault(nid, set()).add(other.hex())
        return [
            self._record(row, tuple(superseded_by.get(row.nid, ())), tuple(sorted(contradicted_by.get(row.nid, ()))))
            for row in rows
        ]

    def load_nodes(self, nids: Sequence[int], annotate: Iterable[str] = ()) -> list[Node]:
        """Public records for nids, in the order given (one query for rows, one for links)."""
        if not nids:
            return []
        marks = ",".join("?" for _ in nids)
        rows = {r.nid: r for r in self.node_rows(f"where n.nid in ({marks})", list(nids))}
        return self.to_nodes([rows[n] for n in nids], annotate)

    def _record(self, row: NodeRow, superseded_by: tuple[str, ...], contradicted_by: tuple[str, ...]) -> Node:
        if row.nid not in self._headers:  # the row carries the header: later edge records need it
            self.cache_header(Header(row.nid, row.id, row.type, row.parent, row.depth, row.slot))
        body = json.loads(row.body) if row.body is not None else {}
        parent = self.header(row.parent).id.hex() if row.parent is not None else None
        return Node(
            id=row.id.hex(),
            type=row.type,
            name=body.get("name"),
            content=body.get("content"),
            props=body.get("props") or {},
            parent=parent,
            depth=row.depth,
            valid_at=row.valid_at,
            invalid_at=row.invalid_at,
            closed_at=row.closed_at,
            created_at=row.created_at,
            expired_at=row.expired_at,
            retired=bool(row.retired),
            salience=row.salience,
            root=row.root.hex(),
            members=row.size,
            purged=row.body is None,
            superseded_by=superseded_by,
            contradicted_by=contradicted_by,
        )

    # ---- edges ----------------------------------------------------------------

    def edge_row(self, eid: int) -> EdgeRow:
        """One edge."""
        row = self.conn.execute(EDGE_SELECT + "where e.eid = ?", (eid,)).fetchone()
        if row is None:
            raise NotFound(f"no edge with local number {eid}")
        return EdgeRow(*row)

    def hop(
        self, seed: int, *, outgoing: bool, edge_pred: str, node_pred: str, params: Sequence[Any]
    ) -> list[tuple[EdgeRow, NodeRow]]:
        """Edges leaving (or entering) ``seed`` with the node at their far end, in one query.

        ``edge_pred`` / ``node_pred`` are predicates written by this package over aliases e and s.
        """
        near, far = ("src", "dst") if outgoing else ("dst", "src")
        node_cols = NODE_SELECT[len("select ") : NODE_SELECT.index(" from ")]
        sql = (
            EDGE_SELECT.replace(" from edge as e ", ", " + node_cols + " from edge as e ")
            + f"join node as n on n.nid = e.{far} join node_state as s on s.nid = n.nid "
            + f"where e.{near} = ?3 and {edge_pred} and {node_pred}"
        )
        width = len(EdgeRow.__slots__)
        return [(EdgeRow(*r[:width]), NodeRow(*r[width:])) for r in self.conn.execute(sql, (*params, seed))]

    def edge_rows(self, where: str, params: Sequence[Any]) -> list[EdgeRow]:
        """Edge rows matching a fixed WHERE clause written by this package."""
        return list(self.iter_edge_rows(where, params))

    def iter_edge_rows(self, where: str, params: Sequence[Any]) -> Iterator[EdgeRow]:
        """``edge_rows`` one at a time."""
        for r in self.conn.execute(EDGE_SELECT + where, params):
            yield EdgeRow(*r)

    def to_edge(self, row: EdgeRow) -> Edge:
        """The public edge record."""
        return Edge(
            id=row.id.hex(),
            type=row.type,
            src=self.header(row.src).id.hex(),
            dst=self.header(row.dst).id.hex(),
            world=self.header(row.world).id.hex(),
            props=json.loads(row.props),
            valid_at=row.valid_at,
            invalid_at=row.invalid_at,
            closed_at=row.closed_at,
            created_at=row.created_at,
            expired_at=row.expired_at,
        )

    def edge_exists(self, raw_id: bytes) -> int | None:
        """The eid of an edge with this id, or None."""
        row = self.conn.execute("select eid from edge where id = ?", (raw_id,)).fetchone()
        return None if row is None else int(row[0])

    def current_targets(self, edge_type: str, src: int) -> list[int]:
        """Dst of current edges of a type leaving src."""
        return [
            int(r[0])
            for r in self.conn.execute(
                "select dst from edge where src = ? and type = ? and invalid_at is null and expired_at is null",
                (src, edge_type),
            )
        ]

    # ---- writes (reconciler only) ---------------------------------------------

    def max_nid(self) -> int:
        """The largest node number in use (0 for an empty store)."""
        return int(one_row(self.conn.execute("select coalesce(max(nid), 0) from node").fetchone())[0])

    def max_eid(self) -> int:
        """The largest edge number in use (0 when there are none)."""
        return int(one_row(self.conn.execute("select coalesce(max(eid), 0) from edge").fetchone())[0])

    def nids_of(self, raw_ids: Sequence[bytes]) -> dict[bytes, int]:
        """Which of these ids exist already: id -> nid (one query)."""
        if not raw_ids:
            return {}
        if len(raw_ids) == 1:
            found = self.nid_of(raw_ids[0])
            return {} if found is None else {raw_ids[0]: found}
        rows = self.conn.execute(
            "select id, nid from node where id in (select unhex(value) from json_each(?))",
            (json.dumps([r.hex() for r in raw_ids]),),
        )
        return {bytes(raw): int(nid) for raw, nid in rows}

    def insert_nodes(
        self, nodes: Sequence[tuple[Any, ...]], states: Sequence[tuple[Any, ...]], aliases: Sequence[tuple[Any, ...]]
    ) -> None:
        """Insert node rows, their projections and aliases, one executemany each.

        Rows: (nid, id, type, parent, slot, depth, body, ord); (nid, valid_at, created_at, salience, root).
        """
        self.conn.executemany(
            "insert into node (nid, id, type, parent, slot, depth, body, ord) values (?, ?, ?, ?, ?, ?, ?, ?)", nodes
        )
        self.conn.executemany(
            "insert into node_state (nid, valid_at, created_at, salience, root) values (?, ?, ?, ?, ?)", states
        )
        if aliases:
            self.conn.executemany(
                "insert or ignore into alias (nid, alias, norm, source, created_at) values (?, ?, ?, ?, ?)",
                aliases,
            )

    def index_texts(self, rows: Sequence[tuple[int, str, str, str | None, str | None]]) -> list[tuple[int, str, str]]:
        """Index (nid, name, content, added, context) rows: full text and index_text; (nid, name, content indexed).

        What is returned is what the token index reads (``write_tokens``: index/token_index.py codes it).

        ``name`` and ``content`` are the node's own, as its blob holds them (NFC); ``added`` is indexed
        after the content (a neighbour's text, bridged names: what the vector and the token index read
        too); ``context``'s words are for BM25 alone (queries.fts_ranked weighs them). node_fts keeps no
        copy of the text: index_text keeps what the blob does not, and the view node_text reads it back.
        """
        full = [(nid, name, indexed_content(content, added), context) for nid, name, content, added, context in rows]
        self.conn.executemany("insert into node_fts (rowid, name, content, context) values (?, ?, ?, ?)", full)
        extra = [(nid, added if content else None, context) for nid, _, content, added, context in rows]
        planned = quoted.plan(self.conn, [row for row in extra if row[1] or row[2]])
        self.conn.executemany(
            "insert or replace into index_text (nid, added, context, added_from, context_from) values (?, ?, ?, ?, ?)",
            planned,
        )
        # a quoted turn rendered otherwise than it was said (a text not NFC): that row keeps its text
        by_nid = {nid: (content, context) for nid, _, content, context in full}
        wrong = quoted.unread(self.conn, {row[0]: by_nid[row[0]] for row in planned if row[3] or row[4]})
        literal = {nid: (added or None, context) for nid, added, context in extra}
        self.conn.executemany(
            "update index_text set added = ?, context = ?, added_from = null, context_from = null where nid = ?",
            [(*literal[nid], nid) for nid in wrong],
        )
        return [(nid, name, content) for nid, name, content, _ in full]

    def set_word_context(self, rows: Sequence[tuple[str | None, int]]) -> None:
        """Rewrite the words-only context column of full-text rows: (context, nid) pairs.

        node_fts is contentless: the row is removed with the values it was indexed with (node_text)
        and indexed again with the new context; index_text keeps that context.
        """
        for context, nid in rows:
            row = self.conn.execute("select name, content, context from node_text where nid = ?", (nid,)).fetchone()
            if row is None:
                continue
            name, content, old = row
            self.conn.execute(
                "insert into node_fts (node_fts, rowid, name, content, context) values ('delete', ?, ?, ?, ?)",
                (nid, name, content, old),
            )
            self.conn.execute(
                "insert into node_fts (rowid, name, content, context) values (?, ?, ?, ?)",
                (nid, name, content, context),
            )
            ((_, _, kept, _, kept_from),) = quoted.plan(self.conn, [(nid, None, context)])
            self.conn.execute(
                "insert into index_text (nid, context, context_from) values (?1, ?2, ?3) "
                "on conflict (nid) do update set context = excluded.context, context_from = excluded.context_from",
                (nid, kept, kept_from),
            )
            if kept_from is not None and quoted.unread(self.conn, {nid: (content, context)}):
                self.conn.execute(
                    "update index_text set context = ?, context_from = null where nid = ?", (context, nid)
                )
            self.conn.execute(
                "delete from index_text where nid = ? and added is null and context is null "
                "and added_from is null and context_from is null",
                (nid,),
            )

    def unindex_texts(self, nids: Sequence[int]) -> None:
        """Remove nodes' full-text, index_text and token index rows (a node without one is skipped).

        node_fts is contentless: FTS5 removes a row's terms when given the values it was indexed
        with, which node_text reads from the blob and index_text; so this runs before a purge
        erases the blob.
        """
        gone = [(nid,) for nid in nids]
        self.conn.executemany(
            "insert into node_fts (node_fts, rowid, name, content, context) "
            "select 'delete', nid, name, content, context from node_text where nid = ?",
            gone,
        )
        self.conn.executemany("delete from index_text where nid = ?", gone)
        self.conn.executemany("delete from node_tokens where nid = ?", gone)

    def write_tokens(self, rows: Iterable[tuple[int, bytes]]) -> None:
        """Write token index rows, (nid, ids) as index/token_index.py codes them."""
        self.conn.executemany("insert into node_tokens (nid, ids) values (?, ?)", rows)

    def clear_tokens(self) -> None:
        """Empty the token index (before it is written again, or when the embedder has no token table)."""
        self.conn.execute("delete from node_tokens")

    def text_rows(self, batch: int) -> Iterator[list[tuple[int, str | None, str | None]]]:
        """Every full-text row's (nid, name, content), ``batch`` at a time."""
        rows = self.conn.execute("select nid, name, content from node_text")
        while chunk := [(as_int(n), a, b) for n, a, b in itertools.islice(rows, batch)]:
            yield chunk

    def set_meta(self, rows: Iterable[tuple[str, str]]) -> None:
        """Write store-level settings (embedder id and dimension, ...)."""
        with engine_write(self.conn):
            self.conn.executemany("insert or replace into meta (key, value) values (?, ?)", rows)

    def meta_keys(self, prefix: str) -> list[str]:
        """Every meta key that starts with ``prefix`` (a range over the primary key, not a scan)."""
        return [
            str(k)
            for (k,) in self.conn.execute(
                "select key from meta where key >= ?1 and key < ?1 || char(1114111)", (prefix,)
            )
        ]

    def swap_meta(self, key: str, expected: str, value: str | None) -> bool:
        """Set ``key`` to ``value`` (None: delete it) only if it still holds ``expected``; whether it did.

        One statement, so one transaction of its own outside a write: a compare-and-set between processes.
        """
        with engine_write(self.conn):
            if value is None:
                self.conn.execute("delete from meta where key = ? and value = ?", (key, expected))
            else:
                self.conn.execute("update meta set value = ? where key = ? and value = ?", (value, key, expected))
            swapped = bool(self.conn.changes())
        return swapped

    def keep_meta(self, rows: Iterable[tuple[str, str]]) -> None:
        """Write store-level settings that are not set yet (those set keep their value)."""
        with engine_write(self.conn):
            self.conn.executemany("insert or ignore into meta (key, value) values (?, ?)", rows)

    def delete_meta(self, keys: Sequence[str]) -> None:
        """Remove store-level settings (absent keys are ignored)."""
        with engine_write(self.conn):
            self.conn.executemany("delete from meta where key = ?", [(k,) for k in keys])

    def meta_values(self, keys: Sequence[str]) -> dict[str, str]:
        """Several store-level settings in one statement (absent keys are left out)."""
        marks = ", ".join("?" * len(keys))
        return {
            str(k): str(v)
            for k, v in self.conn.execute(f"select key, value from meta where key in ({marks})", tuple(keys))
        }

    def texts_in_depth_order(self) -> Iterator[tuple[int, str | None, str | None]]:
        """(nid, name, content) of every node with a body, parents before their children.

        The content is what was indexed (the full-text row: content plus any context the caller
        added, such as the turn before), so a re-embedding keeps what the first embedding saw.
        """
        for nid, name, content in self.conn.execute(
            "select n.nid, json_extract(n.body, '$.name'), coalesce(f.content, json_extract(n.body, '$.content')) "
            "from node as n left join node_text as f on f.nid = n.nid "
            "where n.body is not null order by n.depth, n.nid"
        ):
            yield as_int(nid), name, content

    def close_node(
        self, nid: int, *, invalid_at: str | None, closed_at: str | None, expired_at: str | None, retired: int, at: str
    ) -> None:
        """Write a tightened projection (the triggers refuse anything else) and log it."""
        self.conn.execute(
            "update node_state set invalid_at = ?, closed_at = ?, expired_at = ?, retired = ? where nid = ?",
            (invalid_at, closed_at, expired_at, retired, nid),
        )
        self.conn.execute(
            "insert into state_log (kind, ref, at, invalid_at, closed_at, expired_at, retired) "
            "values ('node', ?, ?, ?, ?, ?, ?)",
            (nid, at, invalid_at, closed_at, expired_at, retired),
        )

    def log_state(
        self,
        kind: str,
        ref: int,
        at: str,
        invalid_at: str | None,
        closed_at: str | None,
        expired_at: str | None,
        retired: int,
        *,
        entered: bool = False,
        created: tuple[str, str] | None = None,
        valid: tuple[str, str] | None = None,
        order: tuple[int, int] | None = None,
    ) -> None:
        """Write a node's (``kind`` 'node') or edge's merged projection and log it at ``at``.

        ``created``, ``valid`` and ``order`` are (was, now) pairs a merge changed; ``entered``: the row joins
        its world's tree only now (adopted into a world this store held), with the state given, its own.
        """
        created_was = created_now = valid_was = valid_now = None
        ord_was = ord_now = None
        if created is not None and created[1] != created[0]:
            created_was, created_now = created
        if valid is not None and valid[1] != valid[0]:
            valid_was, valid_now = valid
        if order is not None and order[1] != order[0]:
            ord_was, ord_now = order
            if kind == "node":
                self.conn.execute("update node set ord = ? where nid = ?", (ord_now, ref))
            else:
                self.conn.execute("update edge set ord = ? where eid = ?", (ord_now, ref))
        if not entered:
            if kind == "node":
                self.conn.execute(
                    "update node_state set invalid_at = ?, closed_at = ?, expired_at = ?, retired = ?, "
                    "created_at = coalesce(?, created_at), valid_at = coalesce(?, valid_at) where nid = ?",
                    (
                        invalid_at,
                        closed_at,
                        expired_at,
                        retired,
                        created_now,
                        valid_now,
                        ref,
                    ),
                )
            else:
                self.conn.execute(
                    "update edge set invalid_at = ?, closed_at = ?, created_at = coalesce(?, created_at) where eid = ?",
                    (invalid_at, closed_at, created_now, ref),
                )
        self.conn.execute(
            "insert into state_log (kind, ref, at, invalid_at, closed_at, expired_at, retired, entered, "
            "created_was, valid_was, ord_was) values (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (kind, ref, at, invalid_at, closed_at, expired_at, retired, int(entered), created_was, valid_was, ord_was),
        )

    def raise_salience(self, nid: int, salience: float) -> None:
        """Set a node's salience (ranking only: outside its root; the change log carries it to replicas)."""
        self.conn.execute("update node_state set salience = ? where nid = ?", (salience, nid))

    def legacy_size(self, world: int) -> int:
        """How many of a world's first slots keep the order of a file written before version 10."""
        row = self.conn.execute("select size from legacy_order where world = ?", (world,)).fetchone()
        return 0 if row is None else int(row[0])

    def members_since(self, world: int, low: int, high: int, since: str) -> list[tuple[str, int, str, int, bytes, int]]:
        """(kind 'n' or 'e', ref, created_at, ord, id, slot) of a world's members in [low, high) from ``since``.

        The members past ``low`` are in created_at order (the member order), so the first created at or
        after ``since`` is found by bisection over slots, and only the tail from it is read: a re-slot costs
        the members it moves, not the world's size.
        """
        lo, hi = low, high
        while lo < hi:
            mid = (lo + hi) // 2
            at = self._created_at_slot(world, mid)
            if at is not None and at >= since:
                hi = mid
            else:
                lo = mid + 1
        out: list[tuple[str, int, str, int, bytes, int]] = [
            ("n", int(nid), str(c), int(o), bytes(raw), int(slot))
            for nid, c, o, raw, slot in self.conn.execute(
                "select n.nid, s.created_at, n.ord, n.id, n.slot from node as n join node_state as s on s.nid = n.nid "
                "where n.parent = ? and n.slot >= ? and n.slot < ? and s.created_at >= ?",
                (world, lo, high, since),
            )
        ]
        out.extend(
            ("e", int(eid), str(c), int(o), bytes(raw), int(slot))
            for eid, c, o, raw, slot in self.conn.execute(
                "select eid, created_at, ord, id, slot from edge where world = ? and slot >= ? and slot < ? "
                "and created_at >= ?",
                (world, lo, high, since),
            )
        )
        return out

    def _created_at_slot(self, world: int, slot: int) -> str | None:
        """The created_at of the member in a slot of a world (None: the slot is empty)."""
        row = self.conn.execute(
            "select s.created_at from node as n join node_state as s on s.nid = n.nid where n.parent = ? "
            "and n.slot = ? union all select created_at from edge where world = ? and slot = ? limit 1",
            (world, slot, world, slot),
        ).fetchone()
        return None if row is None else str(row[0])

    def move_members(self, nodes: Sequence[tuple[int, int]], edges: Sequence[tuple[int, int]]) -> None:
        """Give members new slots: (slot, nid) and (slot, eid) pairs."""
        if nodes:
            self.conn.executemany("update node set slot = ? where nid = ?", nodes)
        if edges:
            self.conn.executemany("update edge set slot = ? where eid = ?", edges)

    def set_root(self, nid: int, root: bytes, size: int) -> None:
        """Record a world's new Merkle root and member count."""
        self.conn.execute("update node_state set root = ?, size = ? where nid = ?", (root, size, nid))

    def log_roots(self, rows: Iterable[tuple[int, bytes, int, str]]) -> None:
        """Append (world, root, size, at) rows to the root history."""
        self.conn.executemany("insert into root_log (world, root, size, at) values (?, ?, ?, ?)", rows)

    def last_commit_time(self) -> str | None:
        """The belief time of the last committed transaction that changed a root (O(1): by rowid)."""
        row = self.conn.execute("select at from root_log order by lid desc limit 1").fetchone()
        return None if row is None else str(row[0])

    def insert_edges(self, rows: Sequence[tuple[Any, ...]]) -> None:
        """Insert edge rows (eid, id, type, src, dst, world, slot, props, valid_at, created_at, ord)."""
        self.conn.executemany(
            "insert into edge (eid, id, type, src, dst, world, slot, props, valid_at, created_at, ord) "
            "values (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            rows,
        )

    def current_edges_from(self, srcs: Sequence[int]) -> dict[tuple[int, int, str], int]:
        """Current edges leaving these nodes: (src, dst, type) -> eid (one query)."""
        if not srcs:
            return {}
        rows = self.conn.execute(
            "select src, dst, type, eid from edge where src in (select value from json_each(?)) "
            "and invalid_at is null and expired_at is null",
            (json.dumps(sorted(set(srcs))),),
        )
        return {(int(a), int(b), t): int(e) for a, b, t, e in rows}

    def end_states(self, nids: Sequence[int]) -> list[tuple[Any, ...]]:
        """(nid, id, type, parent, depth, slot, valid_at, invalid_at, expired_at, retired) per node."""
        return list(
            self.conn.execute(
                "select n.nid, n.id, n.type, n.parent, n.depth, n.slot, s.valid_at, s.invalid_at, s.expired_at, "
                "s.retired from node as n join node_state as s on s.nid = n.nid "
                "where n.nid in (select value from json_each(?))",
                (json.dumps(sorted(set(nids))),),
            )
        )

    def close_edge(self, eid: int, invalid_at: str, closed_at: str) -> None:
        """Close an edge's validity and log it."""
        self.conn.execute("update edge set invalid_at = ?, closed_at = ? where eid = ?", (invalid_at, closed_at, eid))
        self.conn.execute(
            "insert into state_log (kind, ref, at, invalid_at, closed_at) values ('edge', ?, ?, ?, ?)",
            (eid, closed_at, invalid_at, closed_at),
        )

    def merkle_get(self, world: int, level: int, idx: int) -> bytes:
        """One stored Merkle node."""
        row = self.conn.execute(
            "select hash from merkle where world = ? and level = ? and idx = ?", (world, level, idx)
        ).fetchone()
        if row is None:
            raise NotFound(f"Merkle node ({level}, {idx}) of world {world} is missing", hint=Hint("verify"))
        return bytes(row[0])

    def merkle_put(self, rows: Iterable[tuple[int, int, int, bytes]]) -> None:
        """Upsert Merkle nodes (world, level, idx, hash)."""
        self.conn.executemany(
            "insert into merkle (world, level, idx, hash) values (?, ?, ?, ?) "
            "on conflict (world, level, idx) do update set hash = excluded.hash",
            rows,
        )

    # ---- proposals and aliases -------------------------------------------------

    def proposal(self, a: int, b: int) -> tuple[int, MergeStatus] | None:
        """(pid, status) of the proposal for a pair, in either order."""
        lo, hi = sorted((a, b))
        row = self.conn.execute("select pid, status from merge_proposal where a = ? and b = ?", (lo, hi)).fetchone()
        return None if row is None else (int(row[0]), MergeStatus(row[1]))

    def proposal_row(self, pid: int) -> MergeProposal:
        """One proposal as a public record."""
        row = self.conn.execute(
            "select pid, a, b, status, score, tier, reason, proposed_at, decided_at from merge_proposal where pid = ?",
            (pid,),
        ).fetchone()
        if row is None:
            raise NotFound(f"no merge proposal {pid}", hint=Hint("merge_proposals"))
        return self._proposal(row)

    def proposals(self, status: MergeStatus | None) -> list[MergeProposal]:
        """Proposals, optionally of one status, oldest first."""
        sql = "select pid, a, b, status, score, tier, reason, proposed_at, decided_at from merge_proposal"
        rows = (
            self.conn.execute(sql + " where status = ? order by pid", (status.value,))
            if status
            else self.conn.execute(sql + " order by pid")
        )
        return [self._proposal(r) for r in rows]

    def _proposal(self, row: Sequence[Any]) -> MergeProposal:
        return MergeProposal(
            pid=int(row[0]),
            a=self.header(row[1]).id.hex(),
            b=self.header(row[2]).id.hex(),
            status=MergeStatus(row[3]),
            score=row[4],
            tier=row[5],
            reason=row[6],
            proposed_at=row[7],
            decided_at=row[8],
        )

    def insert_proposal(self, a: int, b: int, score: float | None, tier: str | None, reason: str, at: str) -> int:
        """Stage a pending proposal (a < b)."""
        self.conn.execute(
            "insert into merge_proposal (a, b, score, tier, reason, proposed_at) values (?, ?, ?, ?, ?, ?)",
            (a, b, score, tier, reason, at),
        )
        return int(self.conn.last_insert_rowid())

    def decide_proposal(self, pid: int, status: MergeStatus, at: str) -> None:
        """Move a pending proposal to accepted or rejected."""
        self.conn.execute("update merge_proposal set status = ?, decided_at = ? where pid = ?", (status.value, at, pid))

    def note_conflict(self, pid: int, other: MergeStatus) -> None:
        """Record the other decision a replica made of a decided proposal (the view merge_conflict)."""
        self.conn.execute(
            "update merge_proposal set conflict = ?1 where pid = ?2 and conflict is not ?1", (other.value, pid)
        )

    def insert_alias(
        self, nid: int, alias: str, norm: str, source: str | None, at: str, *, earliest: bool = False
    ) -> bool:
        """Record an alias (idempotent); whether it was new. ``earliest``: one held takes the earlier time."""
        held = self.conn.execute("select 1 from alias where norm = ? and nid = ?", (norm, nid)).fetchone()
        if held is None:
            self.conn.execute(
                "insert into alias (nid, alias, norm, source, created_at) values (?, ?, ?, ?, ?)",
                (nid, alias, norm, source, at),
            )
        elif earliest:
            self.conn.execute(
                "update alias set created_at = ?1 where norm = ?2 and nid = ?3 and created_at > ?1", (at, norm, nid)
            )
        return held is None

    def is_purged(self, nid: int) -> bool:
        """Whether a purge erased this node's content here."""
        row = self.conn.execute("select body is null from node where nid = ?", (nid,)).fetchone()
        return bool(row and row[0])

    def aliases(self, nid: int) -> list[str]:
        """Aliases of a node."""
        return [alias for alias, _ in self.alias_rows(nid)]

    def alias_rows(self, nid: int) -> list[tuple[str, str | None]]:
        """(alias, source) of a node's aliases, by alias."""
        rows = self.conn.execute("select alias, source from alias where nid = ? order by alias", (nid,))
        return [(str(alias), source) for alias, source in rows]

    def current_sources(self, dst: int, edge_types: Iterable[str]) -> list[int]:
        """Src of current edges of these types entering dst."""
        types = sorted(edge_types)
        if not types:
            return []
        return [
            int(r[0])
            for r in self.conn.execute(
                "select src from edge where dst = ? and type in (select value from json_each(?)) "
                "and invalid_at is null and expired_at is null",
                (dst, json.dumps(types)),
            )
        ]

    def proposal_pair(self, pid: int) -> tuple[int, int]:
        """The (a, b) nids of a proposal."""
        row = self.conn.execute("select a, b from merge_proposal where pid = ?", (pid,)).fetchone()
        if row is None:
            raise NotFound(f"no merge proposal {pid}", hint=Hint("merge_proposals"))
        return int(row[0]), int(row[1])

    def rejected_between(self, left: Iterable[int], right: Iterable[int]) -> bool:
        """True if a rejected proposal pairs a node of ``left`` with a node of ``right``."""
        row = self.conn.execute(
            "select 1 from merge_proposal where status = 'rejected' and "
            "((a in (select value from json_each(?1)) and b in (select value from json_each(?2))) or "
            "(a in (select value from json_each(?2)) and b in (select value from json_each(?1)))) limit 1",
            (json.dumps(sorted(left)), json.dumps(sorted(right))),
        ).fetchone()
        return row is not None

    def record_edge_type(self, name: str) -> None:
        """Note in meta that edges of a custom type exist (verify accepts recorded types)."""
        self.conn.execute("insert or ignore into meta (key, value) values (?, 'custom')", (f"edge_type:{name}",))

    def recorded_edge_types(self) -> set[str]:
        """Custom edge types this store has edges of."""
        return {
            str(key)[len("edge_type:") :]
            for (key,) in self.conn.execute("select key from meta where substr(key, 1, 10) = 'edge_type:'")
        }

    def version_links(self, nid: int) -> list[int]:
        """Nodes joined to nid by supersedes, either way (the versions of one memory)."""
        return [
            int(r[0])
            for r in self.conn.execute(
                "select dst from edge where src = ?1 and type = 'supersedes' "
                "union select src from edge where dst = ?1 and type = 'supersedes'",
                (nid,),
            )
        ]

    def same_as_neighbours(self, nid: int) -> Iterator[int]:
        """Nodes joined to nid by a current same_as edge."""
        for (dst,) in self.conn.execute(
            "select dst from edge where src = ? and type = 'same_as' and invalid_at is null and expired_at is null",
            (nid,),
        ):
            yield int(dst)

    # ---- the write transaction ---------------------------------------------------------

    def begin_write(self) -> None:
        """BEGIN IMMEDIATE: take the write lock now, retrying while another writer holds it."""
        with_retry(lambda: self.conn.execute("begin immediate"))

    def hold_session(self, holder: str = "reconciler", origin: int | None = None) -> None:
        """Mark the open transaction as the reconciler's: the guard triggers let its writes through."""
        self.conn.execute("insert into reconciler_session (holder, origin) values (?, ?)", (holder, origin))

    def commit_write(self) -> None:
        """Drop the session mark and commit (the mark never outlives its transaction)."""
        self.conn.execute("delete from reconciler_session")
        self.conn.execute("commit")

    def rollback_write(self) -> None:
        """Roll the open transaction back, if one is open."""
        if not self.conn.getautocommit():
            self.conn.execute("rollback")

    def secure_delete(self, on: bool) -> None:
        """Zero what deletes free (a purge), or stop doing so."""
        self.conn.execute("pragma secure_delete = on" if on else "pragma secure_delete = off")
