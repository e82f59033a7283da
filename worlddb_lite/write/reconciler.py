"""The write path: the only code that writes nodes, edges and Merkle roots.

A ``Transaction`` is one logical write: ``BEGIN IMMEDIATE``, the reconciler's session row
(which lets the guard triggers pass), the writes, the edge handlers' decisions,
the Merkle propagation, the root log, ``COMMIT``. Anything that fails rolls the
whole transaction back, so the store is byte-for-byte what it was.

Each operation validates and runs its handlers *before* its first SQL write, so a
refused operation inside a larger batch leaves nothing behind; an unexpected error
after the first write poisons the batch, and it rolls back.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import apsw
import numpy as np

from ..edges import (
    DEFAULT_EDGE_TYPES,
    CloseValidity,
    EdgeDraft,
    EdgeRegistry,
    EdgeType,
    EndView,
    SkipEdgeRow,
    StageMerge,
)
from ..errors import InvalidInput, MergeError, NotCurrent, WorldDBError
from ..index import token_index
from ..index.vector_index import VectorLane
from ..index.world_vectors import Composer
from ..models.embed import Embedder, TokenVectors, embed_checked, embedding_text, token_table
from ..store import connection, traverse
from ..store.erasure import ERASED_REASON
from ..store.hashing import (
    EMPTY_TREE,
    canonical_json,
    edge_body,
    edge_id,
    edge_leaf,
    nfc,
    node_body,
    node_id,
    state_bytes,
    world_root,
)
from ..store.merkle import MerkleWriter
from ..store.rows import Header, Store, added_text, node_state_bytes
from ..text.dates import Clock, check_interval, just_after
from ..text.names import normalise_alias
from ..types import Edge, MergeStatus

DEFAULT_NAMES = frozenset(t.name for t in DEFAULT_EDGE_TYPES)
TYPE_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_]{0,63}$")
Member = tuple[str, int]  # ('n', nid) or ('e', eid)


def _indexed(spec: NodeSpec) -> str | None:
    """The content a node is embedded by: its own, then any context the caller adds (the bridge's)."""
    if not spec.index_context or not spec.content:
        return spec.content
    return f"{spec.content}\n{spec.index_context}"


def _adopted_text_row(
    nid: int, body: str | None, fts: tuple[str, str, str | None]
) -> tuple[int, str, str, str | None, str | None]:
    """The full-text row of an adopted node from its exported (name, content, context) and its blob.

    The name and content are the blob's; what the exported content adds after them is kept
    (``rows.added_text``: raises ValueError when it does not begin with the blob's content).
    """
    said = json.loads(body) if body is not None else {}
    content = str(said.get("content") or "")
    return nid, str(said.get("name") or ""), content, added_text(content, nfc(fts[1])), fts[2]


def _text_row(nid: int, spec: NodeSpec) -> tuple[int, str, str, str | None, str | None]:
    """The full-text row of a new node (Store.index_texts): its name and content as the blob holds them (NFC)."""
    content = nfc(spec.content or "")
    return (
        nid,
        nfc(spec.name or ""),
        content,
        (spec.index_context or None) if content else None,
        spec.word_context or None,
    )


class NodeSpec(NamedTuple):
    """A node to write. ``timeless`` leaves valid_at out of the id (worlds named by name alone)."""

    type: str
    parent: int
    name: str | None = None
    content: str | None = None
    props: Mapping[str, Any] | None = None
    valid_at: str | None = None
    timeless: bool = False
    vector: Any = None
    salience: float = 0.0
    aliases: Sequence[str] = ()
    index_context: str | None = None  # indexed (FTS, vector) after the content, never stored in the blob
    word_context: str | None = None  # indexed for its words only (node_fts.context), never stored either


class EdgeSpec(NamedTuple):
    """An edge to write through its type's handler."""

    type: str
    src: int
    dst: int
    props: Mapping[str, Any] | None = None
    valid_at: str | None = None
    accepting: bool = False
    score: float | None = None
    tier: str | None = None


class AdoptedNode(NamedTuple):
    """A node exported by another store (``adopt_node``): its row, its projection and its state history.

    ``changes`` are the source's state_log entries (at, invalid_at, closed_at, expired_at, retired), oldest
    first; ``fts`` the full-text row (name, content, context), None for a node without text.
    """

    id: bytes
    type: str
    parent: int
    body: str | None
    valid_at: str
    created_at: str
    invalid_at: str | None = None
    closed_at: str | None = None
    expired_at: str | None = None
    retired: bool = False
    salience: float = 0.0
    changes: Sequence[tuple[str, str | None, str | None, str | None, int]] = ()
    fts: tuple[str, str, str | None] | None = None
    vector: Any = None
    roots: Sequence[tuple[str, bytes, int]] = ()  # the source's root history (at, root, size), for a whole world
    ord: int = 0  # its place among the rows the source's commit wrote (node.ord)


class AdoptedEdge(NamedTuple):
    """An edge exported by another store (``adopt_edge``); ``changes`` are its closes (invalid_at, closed_at)."""

    id: bytes
    type: str
    src: int
    dst: int
    props: str  # canonical JSON
    valid_at: str
    created_at: str
    invalid_at: str | None = None
    closed_at: str | None = None
    changes: Sequence[tuple[str, str]] = ()
    ord: int = 0


@dataclass(frozen=True, slots=True)
class EdgeResult:
    """What linking did: the edge row written (if any) and the proposal staged (if any)."""

    eid: int | None
    proposal: int | None
    created: bool
    edge: Edge | None = None  # the record of a newly written row (saves a re-read)


class _Writing:
    """Marks the transaction unusable if a write fails after it started (see Transaction._writing)."""

    __slots__ = ("txn",)

    def __init__(self, txn: Transaction) -> None:
        self.txn = txn

    def __enter__(self) -> None:
        return None

    def __exit__(self, exc_type: object, exc: BaseException | None, tb: object) -> None:
        if exc is not None:
            self.txn.poisoned = True
            connection.translate().__exit__(type(exc), exc, tb)


class Transaction:
    """One logical write. Use through ``Reconciler.transaction()``."""

    def __init__(self, reconciler: Reconciler) -> None:
        self.r = reconciler
        self.store = reconciler.store
        self.now = reconciler.now()
        self.dirty: dict[int, dict[int, Member]] = {}
        self.restate: set[int] = set()
        self.sizes: dict[int, int] = {}
        self.roots: dict[int, bytes] = {}
        self.edge_leaves: dict[int, bytes] = {}
        self.new_nodes: list[int] = []
        self.views: dict[int, EndView] = {}  # nodes' projections as this transaction left them
        # Index rows are written at commit in one executemany each: an FTS5 insert between
        # other statements flushes its pending terms every time (measured ~4x slower per write).
        self.pending_text: list[tuple[int, str, str, str | None, str | None]] = []
        self.pending_vectors: list[tuple[int, np.ndarray]] = []
        self.pending_edges: list[tuple[Any, ...]] = []
        self.pending_keys: dict[tuple[int, int, str], int] = {}  # edges this transaction wrote, still open
        self.pending_ids: set[bytes] = set()
        self.next_eid: int | None = None
        self.poisoned = False
        # Member order (by created_at, ord, id: schema.sql's node.ord): each world's size before this transaction,
        # the members it gained (world -> member -> (created_at, id)), and the worlds where adopted rows or a merge
        # may place members before ones already there.
        self.base: dict[int, int] = {}
        self.added: dict[int, dict[Member, tuple[str, int, bytes]]] = {}
        self.reorder: dict[int, str] = {}  # world -> the earliest created_at whose members may move
        self.adopted_here: set[int] = set()  # nodes adopt_node wrote in this transaction
        self.merging = False
        self.written = 0  # rows this transaction wrote so far: the next one's ord

    # ---- helpers ----------------------------------------------------------------

    def _writing(self) -> _Writing:
        """Context for an operation's writes: a failure half-way poisons the batch."""
        return _Writing(self)

    def _new_member(
        self, world: int, member: Member, created_at: str, raw: bytes, ord_: int | None = None
    ) -> tuple[int, int]:
        """Give a new member the next slot of ``world`` and mark it; (slot, ord).

        ``ord`` is its place among the rows this commit writes, in every world (given for an adopted row:
        its source's), so (created_at, ord) is the order written, the same on every replica. A member
        adopted, with its own time and place, is put in its place by ``flush``.
        """
        size = self.sizes.get(world)
        if size is None:
            size = self.store.member_count(world)
            self.base[world] = size
        self.sizes[world] = size + 1
        if ord_ is None:
            ord_, self.written = self.written, self.written + 1
        else:
            self._rekey(world, created_at)
        self.added.setdefault(world, {})[member] = (created_at, ord_, raw)
        self._mark(world, size, member)
        return size, ord_

    def _mark(self, world: int, slot: int, member: Member) -> None:
        self.dirty.setdefault(world, {})[slot] = member

    def end_view(self, nid: int) -> EndView:
        """What handlers see of a node (cached until this transaction changes it)."""
        view = self.views.get(nid)
        if view is None:
            header = self.store.header(nid)  # usually cached: resolving an id fills it
            valid_at, invalid_at, expired_at, retired = self.store.validity(nid)
            view = EndView(nid, header.id.hex(), header.type, valid_at, invalid_at, expired_at, retired)
            self.views[nid] = view
        return view

    def lowest_common_world(self, a: int, b: int) -> int:
        """The deepest world holding both nodes (the world whose tree covers their edge)."""
        ha, hb = self.store.header(a), self.store.header(b)
        while ha.depth > hb.depth:
            ha = self.store.header(ha.parent)  # type: ignore[arg-type]
        while hb.depth > ha.depth:
            hb = self.store.header(hb.parent)  # type: ignore[arg-type]
        while ha.nid != hb.nid:
            ha = self.store.header(ha.parent)  # type: ignore[arg-type]
            hb = self.store.header(hb.parent)  # type: ignore[arg-type]
        return ha.nid

    # ---- EdgeContext (read-only facts for handlers) -------------------------------

    def is_ancestor(self, ancestor: int, node: int) -> bool:
        """True if ``ancestor`` is ``node`` or holds it, by parent chain or contains edges."""
        self.write_pending()

        membership = self.r.registry.rules().membership  # contains, and custom types that declare it

        def containers(nid: int) -> list[int]:
            parent = self.store.header(nid).parent
            holders = self.store.current_sources(nid, membership)
            return holders if parent is None else [parent, *holders]

        return traverse.reaches(node, ancestor, containers)

    def merge_status(self, a: int, b: int) -> MergeStatus | None:
        """Status of the proposal for this pair, if any."""
        found = self.store.proposal(a, b)
        return None if found is None else found[1]

    def reaches(self, edge_type: str, src: int, dst: int) -> bool:
        """True if current edges of ``edge_type`` lead from src to dst."""
        self.write_pending()
        return traverse.reaches(src, dst, lambda nid: self.store.current_targets(edge_type, nid))

    # ---- nodes --------------------------------------------------------------------

    def add_node(self, *, type_: str, parent: int, **fields: Any) -> tuple[int, bool]:
        """Write one node inside ``parent``; returns (nid, created). See ``add_nodes``."""
        return self.add_nodes([NodeSpec(type=type_, parent=parent, **fields)])[0]

    def node_ids(self, specs: Sequence[NodeSpec]) -> list[bytes]:
        """The ids ``add_nodes`` would give ``specs`` (content addressing), without writing anything."""
        return [raw for *_, raw in self._prepare(specs)]

    def _prepare(self, specs: Sequence[NodeSpec]) -> list[tuple[NodeSpec, Header, str, str, bytes]]:
        """(spec, parent, valid time, canonical body, id) of each spec; a bad type is refused."""
        prepared: list[tuple[NodeSpec, Header, str, str, bytes]] = []
        for spec in specs:
            if not isinstance(spec.type, str) or not TYPE_NAME.match(spec.type):
                raise InvalidInput(
                    f"node type {spec.type!r} must start with a letter and use letters, digits or _ (max 64)"
                )
            parent = self.store.header(spec.parent)
            valid = spec.valid_at or self.now
            body = node_body(
                spec.type, parent.id.hex(), spec.name, spec.content, spec.props, None if spec.timeless else valid
            )
            prepared.append((spec, parent, valid, body, node_id(body)))
        return prepared

    def add_nodes(self, specs: Sequence[NodeSpec]) -> list[tuple[int, bool]]:
        """Write nodes; returns (nid, created) per spec. Same content, same node (idempotent).

        Everything that can refuse (types, text, vectors) is checked before the first write;
        texts without a vector are embedded in one call; rows go in with one executemany per table.
        """
        prepared = self._prepare(specs)
        existing = self.store.nids_of([item[4] for item in prepared])
        fresh: dict[bytes, int] = {}
        plan: list[tuple[NodeSpec, Header, str, str, bytes, str]] = []
        results: list[tuple[int, bool]] = []
        next_nid = self.store.max_nid() + 1
        for spec, parent, valid, body, raw in prepared:
            known = existing.get(raw, fresh.get(raw))
            if known is not None:
                results.append((known, False))
                continue
            fresh[raw] = next_nid
            results.append((next_nid, True))
            next_nid += 1
            plan.append((spec, parent, valid, body, raw, embedding_text(spec.name, _indexed(spec))))
        vectors = self._vectors_for(plan)
        node_rows: list[tuple[Any, ...]] = []
        state_rows: list[tuple[Any, ...]] = []
        alias_rows: list[tuple[Any, ...]] = []
        with self._writing():
            for (spec, parent, valid, body, raw, text), vector in zip(plan, vectors, strict=True):
                nid = fresh[raw]
                slot, order = self._new_member(parent.nid, ("n", nid), self.now, raw)
                depth = parent.depth + 1
                root = world_root(raw, node_state_bytes(valid, None, None, self.now, None, 0), EMPTY_TREE, 0)
                node_rows.append((nid, raw, spec.type, parent.nid, slot, depth, body, order))
                state_rows.append((nid, valid, self.now, float(spec.salience), root))
                alias_rows.extend((nid, a, normalise_alias(a), "write", self.now) for a in spec.aliases)
                if text:
                    self.pending_text.append(_text_row(nid, spec))
                    if vector is not None:
                        self.pending_vectors.append((nid, vector))
                self.store.cache_header(Header(nid, raw, spec.type, parent.nid, depth, slot))
                self.views[nid] = EndView(nid, raw.hex(), spec.type, valid, None, None, False)
                self.new_nodes.append(nid)
                self.roots[nid] = root
            self.store.insert_nodes(node_rows, state_rows, alias_rows)
        return results

    def _vectors_for(self, plan: Sequence[tuple[NodeSpec, Header, str, str, bytes, str]]) -> list[Any]:
        """Each planned node's vector: given, embedded (one batch call), or None (no text)."""
        vectors: list[Any] = [item[0].vector if item[5] else None for item in plan]
        missing = [i for i, item in enumerate(plan) if item[5] and item[0].vector is None]
        if missing and self.r.embedder is not None:
            embedded = embed_checked(self.r.embedder, [plan[i][5] for i in missing], self.r.dim)
            for i, vector in zip(missing, embedded, strict=True):
                vectors[i] = vector
        return [None if v is None else self.r.check_vector(v) for v in vectors]

    def add_root(self) -> int:
        """Create the store's root world (once, at init)."""
        body = canonical_json({"v": 1, "type": "Root", "name": None, "content": None, "parent": None, "props": {}})
        raw = node_id(body)
        existing = self.store.nid_of(raw)
        if existing is not None:
            return existing
        with self._writing():
            root = world_root(raw, node_state_bytes(self.now, None, None, self.now, None, 0), EMPTY_TREE, 0)
            nid = self.store.max_nid() + 1
            self.store.insert_nodes(
                [(nid, raw, "Root", None, None, 0, body, 0)], [(nid, self.now, self.now, 0.0, root)], []
            )
            self.store.cache_header(Header(nid, raw, "Root", None, 0, None))
            self.restate.add(nid)
        return nid

    def close(self, nid: int, at: str | None = None, *, retire: bool = False, expire: bool = False) -> None:
        """Tighten a node's validity to ``at`` (and/or retire or retract it)."""
        row = self.store.node_row(nid)
        at = at or self.now
        if row.parent is None:  # every scope hangs from it: closing it closes the whole store, as a purge would
            raise InvalidInput(
                "the store's root world cannot be retired or retracted; nothing was changed. "
                "Retire a scope or a memory inside it instead"
            )
        if row.expired_at is not None:
            raise NotCurrent(f"{row.id.hex()[:12]} was retracted; nothing of it is left to change")
        if retire and row.retired:
            raise NotCurrent(f"{row.id.hex()[:12]} is already retired")
        invalid_at, closed_at = row.invalid_at, row.closed_at
        if not expire:
            check_interval(row.valid_at, at, what=f"the validity of {row.id.hex()[:12]}")
            if invalid_at is None or at < invalid_at:
                invalid_at, closed_at = at, self.now
        expired_at = self.now if expire else None
        with self._writing():
            self.store.close_node(
                nid,
                invalid_at=invalid_at,
                closed_at=closed_at,
                expired_at=expired_at,
                retired=int(retire or bool(row.retired)),
                at=self.now,
            )
            self.views.pop(nid, None)
            self.restate.add(nid)

    # ---- edges --------------------------------------------------------------------

    def add_edge(self, type_: str, src: int, dst: int, **fields: Any) -> EdgeResult:
        """Write one edge through its type's handler. See ``add_edges``."""
        return self.add_edges([EdgeSpec(type=type_, src=src, dst=dst, **fields)])[0]

    def add_edges(self, specs: Sequence[EdgeSpec]) -> list[EdgeResult]:
        """Run each edge's on_insert handler, in order, and apply its decisions with the edge row.

        A current edge of the same type between the same nodes is returned, not written again.
        Edge rows are queued and written in one executemany before anything reads edges (a
        handler asking the context, a read, the commit), so every handler sees every earlier edge.
        """
        types = [self.r.registry.get(spec.type) for spec in specs]  # unknown types refuse first
        self._prefetch_views([n for spec in specs for n in (spec.src, spec.dst)])
        existing = self.store.current_edges_from([spec.src for spec in specs])
        results: list[EdgeResult] = []
        applied = False
        try:
            for spec, edge_type in zip(specs, types, strict=True):
                key = (spec.src, spec.dst, spec.type)
                known = self.pending_keys.get(key, existing.get(key))
                if known is not None:
                    results.append(EdgeResult(known, None, False))
                    continue
                result = self._add_edge(spec, edge_type)
                applied = True
                results.append(result)
        except BaseException:
            if applied:
                self.poisoned = True  # earlier edges of this call were applied; the batch must not commit
            raise
        return results

    def _add_edge(self, spec: EdgeSpec, edge_type: EdgeType) -> EdgeResult:
        src_view, dst_view = self.end_view(spec.src), self.end_view(spec.dst)
        valid = spec.valid_at or self.now
        clean_props = dict(spec.props or {})
        draft = EdgeDraft(spec.type, src_view, dst_view, clean_props, valid, spec.accepting)
        decisions = list(edge_type.on_insert(draft, self))
        props_json = canonical_json(clean_props)
        raw = edge_id(edge_body(spec.type, src_view.id, dst_view.id, valid, props_json))
        if raw in self.pending_ids or self.store.edge_exists(raw) is not None:
            raise NotCurrent(
                f"a {spec.type} edge with these ends, properties and valid time existed and was closed; "
                "edges never re-open: link again with a different valid_at"
            )
        for decision in decisions:  # checks that can refuse come before any write
            if isinstance(decision, CloseValidity):
                check_interval(self.end_view(decision.nid).valid_at, decision.at, what="the closed validity")
        proposal = None
        with self._writing():
            for decision in decisions:
                if isinstance(decision, CloseValidity):
                    self.close(decision.nid, decision.at)
                elif isinstance(decision, StageMerge):
                    proposal = self.store.insert_proposal(
                        decision.a, decision.b, spec.score, spec.tier or "manual", decision.reason, self.now
                    )
            if any(isinstance(d, SkipEdgeRow) for d in decisions):
                return EdgeResult(None, proposal, proposal is not None)
            if spec.type not in DEFAULT_NAMES:  # remember custom types so verify knows them later
                self.store.record_edge_type(spec.type)
            world = self.lowest_common_world(spec.src, spec.dst)
            if self.next_eid is None:
                self.next_eid = self.store.max_eid() + 1
            eid, self.next_eid = self.next_eid, self.next_eid + 1
            slot, order = self._new_member(world, ("e", eid), self.now, raw)
            self.pending_edges.append(
                (eid, raw, spec.type, spec.src, spec.dst, world, slot, props_json, valid, self.now, order)
            )
            self.pending_keys[(spec.src, spec.dst, spec.type)] = eid
            self.pending_ids.add(raw)
            self.edge_leaves[eid] = edge_leaf(raw, state_bytes(valid, None, None, self.now, None))
        record = Edge(
            raw.hex(),
            spec.type,
            src_view.id,
            dst_view.id,
            self.store.header(world).id.hex(),
            clean_props,
            valid,
            None,
            None,
            self.now,
            None,
        )
        return EdgeResult(eid, proposal, True, record)

    def check_edge(self, type_: str, src: EndView, dst: int) -> None:
        """Run a type's on_insert for an edge from a node not yet written; raises if it would refuse."""
        edge_type = self.r.registry.get(type_)
        edge_type.on_insert(EdgeDraft(type_, src, self.end_view(dst), {}, src.valid_at), self)

    def _prefetch_views(self, nids: Sequence[int]) -> None:
        """Load the handler views of many nodes in one query."""
        wanted = [n for n in set(nids) if n not in self.views]
        if len(wanted) < 2:
            return
        for nid, raw, type_, parent, depth, slot, valid_at, invalid_at, expired_at, retired in self.store.end_states(
            wanted
        ):
            self.store.cache_header(Header(nid, raw, type_, parent, depth, slot))
            self.views[nid] = EndView(nid, raw.hex(), type_, valid_at, invalid_at, expired_at, bool(retired))

    def write_pending(self, *, indexes: bool = False) -> None:
        """Write queued edge rows (before anything reads edges) and, if asked, index rows."""
        if self.pending_edges:
            self.store.insert_edges(self.pending_edges)
            self.pending_edges = []
        if indexes:
            if self.pending_text:  # (a token table loads the model: not for writes without text)
                token_index.index_texts(self.store, self.r.tokens(), self.pending_text)
            self.r.composer.commit(self.pending_vectors)
            self.pending_text, self.pending_vectors = [], []

    def close_edge(self, eid: int, at: str | None = None) -> None:
        """Run on_delete and close the edge's validity (edges are never deleted)."""
        self.write_pending()
        row = self.store.edge_row(eid)
        if row.invalid_at is not None or row.expired_at is not None:
            raise NotCurrent(f"edge {row.id.hex()[:12]} is already closed")
        at = at or self.now
        check_interval(row.valid_at, at, what="the edge's validity")
        draft = EdgeDraft(row.type, self.end_view(row.src), self.end_view(row.dst), {}, row.valid_at)
        decisions = list(self.r.registry.get(row.type).on_delete(draft, self))
        with self._writing():
            for decision in decisions:
                if isinstance(decision, CloseValidity):
                    self.close(decision.nid, decision.at)
            self.store.close_edge(eid, at, self.now)
            self.pending_keys.pop((row.src, row.dst, row.type), None)
            self.edge_leaves.pop(eid, None)
            self._mark(row.world, row.slot, ("e", eid))

    def decide_merge(self, pid: int, accept: bool) -> None:
        """Accept (writing symmetric same_as edges) or reject a pending proposal; the same decision again is a no-op."""
        proposal = self.store.proposal_row(pid)
        if proposal.status is (MergeStatus.ACCEPTED if accept else MergeStatus.REJECTED):
            return  # the same decision again (a retried call): nothing more to do
        if proposal.status is not MergeStatus.PENDING:
            raise MergeError(f"proposal {pid} is already {proposal.status.value}; decisions are final")
        a, b = self.store.proposal_pair(pid)
        if accept:
            self.write_pending()
            left = traverse.closure(a, self.store.same_as_neighbours)
            right = traverse.closure(b, self.store.same_as_neighbours)
            if self.store.rejected_between(left, right):
                raise MergeError(
                    f"accepting proposal {pid} would join two identities that a rejected merge keeps apart; "
                    "reject it, or revisit the earlier decision by hand"
                )
        with self._writing():
            self.store.decide_proposal(pid, MergeStatus.ACCEPTED if accept else MergeStatus.REJECTED, self.now)
            if accept:
                self.add_edge("same_as", a, b, accepting=True)
                self.add_edge("same_as", b, a, accepting=True)

    def add_alias(self, nid: int, alias: str, source: str | None = None) -> None:
        """Record another name for a node."""
        if not isinstance(alias, str) or not alias.strip():
            raise InvalidInput("an alias must be non-empty text")
        if self.store.is_purged(nid):  # a name for erased content would say what the purge took away
            raise NotCurrent(f"{self.store.header(nid).id.hex()[:12]} was purged; it takes no alias")
        with self._writing():
            self.store.insert_alias(nid, alias.strip(), normalise_alias(alias), source, self.now)

    # ---- adoption: rows another store already decided (sync/transfer.py, import) -------
    # An imported row carries its source's belief times and state history, so roots recompute to the
    # source's. Edge handlers do not run again: they ran in the source, whose decisions (closes,
    # proposals) the rows and states carry; running them here would decide twice, at this clock.

    def not_before(self, at: str) -> None:
        """Date this transaction no earlier than ``at`` (rows adopted from a store whose clock ran ahead).

        Its commit must follow every belief time it writes, or the history replay would meet them after
        the roots it logged; later commits follow it (``Reconciler.now``).
        """
        if at > self.now:
            self.now = at

    def allow_merge(self, origin: int | None = None) -> None:
        """Let this transaction move belief times earlier, as merging another replica's rows needs.

        ``origin``: the sync_peer its rows come from, which the change log records so they are not sent back.
        """
        if not self.merging:
            self.store.hold_session("merge", origin)
            self.merging = True

    def adopt_node(self, row: AdoptedNode) -> tuple[int, bool]:
        """Write an exported node among its parent's members, replaying its state history; (nid, created).

        A node this store holds already merges the other store's state into its own (``merge_node``).
        A node that joins a world this store held before the transaction is logged as entering it now.
        """
        known = self.store.nid_of(row.id)
        if known is not None:
            self.merge_node(known, row)
            return known, False
        parent = self.store.header(row.parent)
        with self._writing():
            nid = self.store.max_nid() + 1
            slot, order = self._new_member(parent.nid, ("n", nid), row.created_at, row.id, row.ord)
            depth = parent.depth + 1
            root = world_root(
                row.id, node_state_bytes(row.valid_at, None, None, row.created_at, None, 0), EMPTY_TREE, 0
            )
            self.store.insert_nodes(
                [(nid, row.id, row.type, parent.nid, slot, depth, row.body, order)],
                [(nid, row.valid_at, row.created_at, float(row.salience), root)],
                [],
            )
            state: tuple[str | None, str | None, str | None, int] = (None, None, None, 0)
            for at, invalid_at, closed_at, expired_at, retired in row.changes:
                self.store.close_node(
                    nid, invalid_at=invalid_at, closed_at=closed_at, expired_at=expired_at, retired=retired, at=at
                )
                state = (invalid_at, closed_at, expired_at, retired)
            if parent.nid not in self.adopted_here:
                self.store.log_state("node", nid, self.now, *state, entered=True)
            self.adopted_here.add(nid)
            self.store.log_roots((nid, logged, size, at) for at, logged, size in row.roots)
            if row.fts is not None:
                self.pending_text.append(_adopted_text_row(nid, row.body, row.fts))
                if row.vector is not None:
                    self.pending_vectors.append((nid, self.r.check_vector(row.vector)))
            self.store.cache_header(Header(nid, row.id, row.type, parent.nid, depth, slot))
            self.new_nodes.append(nid)
            self.roots[nid] = root
            self.restate.add(nid)
        return nid, True

    def merge_node(self, nid: int, row: AdoptedNode) -> bool:
        """Merge another replica's state of a node this store holds; whether anything changed.

        The join of the two: the earlier valid_at (a timeless world) and created_at (the earliest any replica
        knew it; needs ``allow_merge``), the earlier close (invalid_at, then closed_at), the earlier
        expired_at, retired if either retired it, the higher salience. Nothing ever re-opens.
        """
        cur = self.store.node_row(nid)
        invalid, closed = self._earlier_close((cur.invalid_at, cur.closed_at), (row.invalid_at, row.closed_at))
        expired = min(x for x in (cur.expired_at, row.expired_at, "~") if x is not None)
        state = (invalid, closed, None if expired == "~" else expired, int(bool(cur.retired) or row.retired))
        # the earliest creation, with its place in that commit: (created_at, ord) travel together
        created, order = min((cur.created_at, cur.ord), (row.created_at, row.ord))
        valid = min(cur.valid_at, row.valid_at)
        if row.salience > cur.salience:
            self.store.raise_salience(nid, float(row.salience))
        if state == (cur.invalid_at, cur.closed_at, cur.expired_at, cur.retired) and (created, order, valid) == (
            cur.created_at,
            cur.ord,
            cur.valid_at,
        ):
            return False
        with self._writing():
            self.store.log_state(
                "node",
                nid,
                self.now,
                *state,
                created=(cur.created_at, created),
                valid=(cur.valid_at, valid),
                order=(cur.ord, order),
            )
            if (created, order) != (cur.created_at, cur.ord) and cur.parent is not None:
                self._rekey(cur.parent, created)
            self.views.pop(nid, None)
            self.roots.pop(nid, None)
            self.restate.add(nid)
        return True

    def _earlier_close(
        self, held: tuple[str | None, str | None], sent: tuple[str | None, str | None]
    ) -> tuple[str | None, str | None]:
        """Of this store's (invalid_at, closed_at) and another replica's, the earlier close (open: none)."""
        invalid, closed = sent
        if invalid is not None and (held[0] is None or (invalid, closed or self.now) < (held[0], held[1] or "")):
            return invalid, closed or self.now
        return held

    def _rekey(self, world: int, created_at: str) -> None:
        """A member of ``world`` now sorts from ``created_at``: ``flush`` puts it back in order."""
        self.reorder[world] = min(self.reorder.get(world, created_at), created_at)

    def adopt_edge(self, row: AdoptedEdge) -> tuple[int, bool]:
        """Write an exported edge among the members of the lowest world of its ends, replaying its closes."""
        self.write_pending()
        known = self.store.edge_exists(row.id)
        if known is not None:
            self.merge_edge(known, row)
            return known, False
        if row.type not in DEFAULT_NAMES:
            if not TYPE_NAME.match(row.type):
                raise InvalidInput(f"edge type {row.type!r} must start with a letter and use letters, digits or _")
            self.store.record_edge_type(row.type)
        with self._writing():
            world = self.lowest_common_world(row.src, row.dst)
            if self.next_eid is None:
                self.next_eid = self.store.max_eid() + 1
            eid, self.next_eid = self.next_eid, self.next_eid + 1
            slot, order = self._new_member(world, ("e", eid), row.created_at, row.id, row.ord)
            self.store.insert_edges(
                [(eid, row.id, row.type, row.src, row.dst, world, slot, row.props, row.valid_at, row.created_at, order)]
            )
            invalid_at = closed_at = None
            for close, at in row.changes:
                if close is not None:  # an entry that merged or entered an open edge closes nothing
                    invalid_at, closed_at = close, at or self.now
                    self.store.close_edge(eid, invalid_at, closed_at)
            if world not in self.adopted_here:
                self.store.log_state("edge", eid, self.now, invalid_at, closed_at, None, 0, entered=True)
            self.edge_leaves[eid] = edge_leaf(
                row.id, state_bytes(row.valid_at, invalid_at, closed_at, row.created_at, None)
            )
        return eid, True

    def merge_edge(self, eid: int, row: AdoptedEdge) -> bool:
        """Merge another replica's state of an edge this store holds (as ``merge_node``); whether it changed."""
        edge = self.store.edge_row(eid)
        invalid, closed = self._earlier_close((edge.invalid_at, edge.closed_at), (row.invalid_at, row.closed_at))
        created, order = min((edge.created_at, edge.ord), (row.created_at, row.ord))
        if (invalid, closed, created, order) == (edge.invalid_at, edge.closed_at, edge.created_at, edge.ord):
            return False
        with self._writing():
            self.store.log_state(
                "edge",
                eid,
                self.now,
                invalid,
                closed,
                None,
                0,
                created=(edge.created_at, created),
                order=(edge.ord, order),
            )
            if (created, order) != (edge.created_at, edge.ord):
                self._rekey(edge.world, created)
            self.edge_leaves.pop(eid, None)
            self._mark(edge.world, edge.slot, ("e", eid))
        return True

    def adopt_alias(self, nid: int, alias: str, source: str | None, at: str) -> bool:
        """Record an exported alias with its own time, or its earlier time if held; whether it was new.

        A node purged here takes no alias: a replica that had not heard of the purge still sends the ones
        its text gave it, and they would name the erased node again.
        """
        if self.store.is_purged(nid):
            return False
        with self._writing():
            return self.store.insert_alias(nid, alias, normalise_alias(alias), source, at, earliest=True)

    def adopt_proposal(
        self,
        a: int,
        b: int,
        status: MergeStatus,
        score: float | None,
        tier: str | None,
        reason: str,
        at: str,
        decided_at: str | None,
        conflict: MergeStatus | None = None,
    ) -> str:
        """Stage an exported merge proposal, or carry its decision to a pending one here.

        ``conflict``: the other decision a replica made of it, which the sender knows of. Returns what
        happened: ``added``, ``decided``, ``existing`` or ``conflict`` (decided otherwise here, or elsewhere:
        decisions are final, so each store's stays, and merge_conflict lists the pair).
        """
        found = self.store.proposal(a, b)
        if self.store.is_purged(a) or self.store.is_purged(b):
            reason = ERASED_REASON  # it quotes the names a purge here erased
        with self._writing():
            if found is None:
                pid = self.store.insert_proposal(min(a, b), max(a, b), score, tier, reason, at)
                held, outcome = MergeStatus.PENDING, "added"
            else:
                pid, held = found
                outcome = "existing"
            if held is MergeStatus.PENDING and status is not MergeStatus.PENDING:
                self.store.decide_proposal(pid, status, decided_at or self.now)
                held, outcome = status, ("decided" if outcome == "existing" else outcome)
            # decided here and otherwise elsewhere (there are two decisions: at most one other)
            other = [s for s in (status, conflict) if s is not None and s not in (MergeStatus.PENDING, held)]
            if held is not MergeStatus.PENDING and other:
                self.store.note_conflict(pid, other[0])
                outcome = "conflict"
            return outcome

    # ---- Merkle propagation ---------------------------------------------------------

    def _leaf(self, member: Member) -> bytes:
        kind, ref = member
        if kind == "n":
            cached = self.roots.get(ref)
            if cached is not None:
                return cached
            return self.store.root_of(ref)
        cached = self.edge_leaves.get(ref)
        if cached is not None:
            return cached
        edge = self.store.edge_row(ref)
        return edge_leaf(edge.id, edge.state())

    def _order_members(self) -> None:
        """Put adopted and re-dated members in their places: slots in (created_at, ord, id) order.

        A world's members are in that order after every commit (the slots of a file written before version
        10 excepted: legacy_order), so two replicas holding the same members build the same tree. Members
        written here are dated now, after every member in place, and take the next slots in the order they
        are written (their ord). Members adopted from another replica, or re-dated by a merge, may sort
        before ones in place: the tail from the earliest of them is read and re-slotted (its length, not
        the world's, is the cost).
        """
        for world, since in self.reorder.items():
            added = self.added.get(world, {})
            before = self.base.get(world, self.sizes.get(world))
            if before is None:
                before = self.store.member_count(world)
            legacy = self.store.legacy_size(world)
            tail = self.store.members_since(world, legacy, before, since)
            low = min((slot for *_, slot in tail), default=before)
            if len(tail) != before - low:  # not a suffix: the order was broken before; put it all right
                tail, low = self.store.members_since(world, legacy, before, ""), legacy
            current = {(kind, ref): slot for kind, ref, _, _, _, slot in tail}
            keys = {(kind, ref): (created, order, raw) for kind, ref, created, order, raw, _ in tail}
            base = before
            for i, (member, key) in enumerate(added.items()):
                current[member] = base + i
                keys[member] = key
            ranked = sorted(keys, key=keys.__getitem__)
            self._reslot(world, {m: low + i for i, m in enumerate(ranked)}, current)
        self.added.clear()
        self.reorder.clear()

    def _reslot(self, world: int, target: dict[Member, int], current: dict[Member, int]) -> None:
        """Move the members whose slot differs from ``target`` and mark their new leaves."""
        moved = {m: slot for m, slot in target.items() if current[m] != slot}
        if not moved:
            return
        self.store.move_members(
            [(slot, ref) for (kind, ref), slot in moved.items() if kind == "n"],
            [(slot, ref) for (kind, ref), slot in moved.items() if kind == "e"],
        )
        for (kind, ref), slot in moved.items():
            if kind == "n":
                self.store.cache_header(self.store.header(ref)._replace(slot=slot))
        dirty = self.dirty.setdefault(world, {})
        for slot, member in list(dirty.items()):
            if member in moved:
                del dirty[slot]
        for member, slot in moved.items():
            dirty[slot] = member

    def flush(self) -> None:
        """Write the queued rows, then recompute roots bottom-up and log the changed ones."""
        self.write_pending(indexes=True)
        self._order_members()
        buckets: dict[int, set[int]] = {}
        for nid in set(self.dirty) | self.restate:
            buckets.setdefault(self.store.header(nid).depth, set()).add(nid)
        log: list[tuple[int, bytes, int, str]] = []
        writer = MerkleWriter(self.store)
        while buckets:
            depth = max(buckets)
            for world in sorted(buckets.pop(depth)):
                row = self.store.node_row(world)
                size = self.sizes.get(world, row.size)
                slots = self.dirty.pop(world, None)
                if slots:
                    top = writer.update(world, {s: self._leaf(m) for s, m in slots.items()}, size)
                else:
                    top = writer.top(world, size)
                root = world_root(row.id, row.state(), top, size)
                self.roots[world] = root
                if root == row.root and size == row.size:
                    continue
                self.store.set_root(world, root, size)
                if size > 0:
                    log.append((world, root, size, self.now))
                if row.parent is not None:
                    self._mark(row.parent, row.slot, ("n", world))  # type: ignore[arg-type]
                    buckets.setdefault(depth - 1, set()).add(row.parent)
        self.store.log_roots(log)
        self.restate.clear()


class Reconciler:
    """Owns the write transaction. One per connection."""

    def __init__(
        self,
        conn: apsw.Connection,
        store: Store,
        registry: EdgeRegistry,
        clock: Clock,
        embedder: Embedder | None,
        dim: int,
        compose: str = "attention",
    ) -> None:
        self.conn = conn
        self.store = store
        self.registry = registry
        self.clock = clock
        self.embedder = embedder
        self.dim = dim
        self.lane = VectorLane(store, dim, None if embedder is None else embedder.model_id)
        self.composer = Composer(store, self.lane, compose, dim)
        self._txn: Transaction | None = None
        # runs in every write transaction just before it commits, and must not fail it (the access log's
        # ride: recalls' bookkeeping written with a write the caller makes anyway, store/access_log.py)
        self.before_commit: Callable[[], None] | None = None

    def now(self) -> str:
        """The store's present: the clock, but never before the last commit.

        A clock that steps back (an NTP correction, a board without a real-time clock) must not
        date a commit before the one it follows: belief time orders the history that
        ``verify --deep`` replays and ``as_of`` reads name. Reads of "now" use the same time,
        so they see the commit a stepped-back clock would otherwise date in their future.
        A commit is dated after the last one, never at the same time: a world orders its members by
        (created_at, id), and a member written later must sort after every member already in place.
        """
        now, last = self.clock(), self.store.last_commit_time()
        return now if last is None or now > last else just_after(last)

    def tokens(self) -> TokenVectors | None:
        """The embedder's token table, which the token index is written in; None: it has none."""
        table = token_table(self.embedder)
        return None if table is None else table()

    def check_vector(self, vector: Any) -> np.ndarray:
        """A float32 vector of the store's dimension, or a clear error."""
        try:
            array = np.asarray(vector, dtype=np.float32).reshape(-1)
        except (TypeError, ValueError):
            raise InvalidInput("a vector must be a sequence of numbers") from None
        if array.shape[0] != self.dim:
            raise InvalidInput(
                f"vector has {array.shape[0]} dimensions but this store holds {self.dim}; embed with the store's model"
            )
        square = float(array.dot(array))  # one BLAS call; NaN or inf anywhere propagates
        if not np.isfinite(square):
            raise InvalidInput("a vector must hold finite numbers only")
        if square == 0.0:
            raise InvalidInput("a zero vector has no direction to compare by cosine; give a non-zero vector")
        return array / np.float32(np.sqrt(square))

    @property
    def active(self) -> Transaction | None:
        """The transaction in progress on this connection, if any."""
        return self._txn

    def settle(self, *, indexes: bool = True) -> None:
        """Inside a transaction, write its queued edge rows (and index rows, if asked) so reads see them.

        Roots update at commit. Node and alias rows are written at once anyway, and an index flush
        recomposes world vectors, so reads by id, alias or edge skip it (``indexes=False``).
        """
        if self._txn is not None:
            self._txn.write_pending(indexes=indexes)

    def transaction(self, *, prepare: Callable[[], None] | None = None) -> WriteScope:
        """One logical write; nested calls join the outer transaction.

        ``prepare`` runs right after BEGIN, before the reconciler's session row (used to create
        the schema of a new store in the same transaction as its root world).
        """
        return WriteScope(self, prepare)


class WriteScope:
    """Context manager behind ``Reconciler.transaction`` (a class: it is on the hot path).

    It is also the one place where a raw SQLite error raised inside a transaction, by the
    reconciler or by the caller's code in the ``with`` body, becomes a WorldDBError.
    """

    __slots__ = ("r", "txn", "outer", "prepare", "changes")

    def __init__(self, reconciler: Reconciler, prepare: Callable[[], None] | None = None) -> None:
        self.r = reconciler
        self.outer = reconciler._txn is None
        self.prepare = prepare

    def __enter__(self) -> Transaction:
        r = self.r
        if not self.outer:
            assert r._txn is not None
            self.changes = r.conn.total_changes()
            return r._txn
        with connection.translate():
            r.store.begin_write()
        try:
            with connection.translate():
                if self.prepare is not None:
                    self.prepare()  # a new store's schema: Transaction reads the last commit's time from it
                self.txn = Transaction(r)
                r._txn = self.txn
                r.store.hold_session()
        except BaseException:
            self._abort()
            raise
        return self.txn

    def _abort(self) -> None:
        r = self.r
        try:
            r.store.rollback_write()
        finally:
            txn = getattr(self, "txn", None)  # unset when BEGIN's prepare failed
            r.store.forget_uncommitted(txn.new_nodes if txn is not None else [])
            r.lane.forget()  # a search inside the transaction may have indexed rows that are now gone
            r._txn = None

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: object) -> None:
        if exc is not None:
            if not self.outer:
                if self.r.conn.total_changes() != self.changes:
                    assert self.r._txn is not None
                    self.r._txn.poisoned = True  # it wrote before failing: the batch must not commit
            else:
                self._abort()
            connection.translate().__exit__(exc_type, exc, tb)  # re-raises a raw SQLite error as WorldDBError
            return
        if not self.outer:
            return
        txn, r = self.txn, self.r
        try:
            if txn.poisoned:
                raise WorldDBError("a write in this batch failed half-way; the whole batch was rolled back")
            with connection.translate():
                txn.flush()
                if r.before_commit is not None:
                    r.before_commit()
                r.store.commit_write()
        except BaseException:
            self._abort()
            raise
        r.lane.committed()
        r._txn = None
