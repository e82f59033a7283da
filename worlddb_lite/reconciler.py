"""The write path: the only code that writes nodes, edges and Merkle roots.

A ``Txn`` is one logical write: ``BEGIN IMMEDIATE``, the reconciler's session row
(which lets the guard triggers pass), the writes, the edge handlers' decisions,
the Merkle propagation, the root log, ``COMMIT``. Anything that fails rolls the
whole transaction back, so the store is byte-for-byte what it was.

Each operation validates and runs its handlers *before* its first SQL write, so a
refused operation inside a larger batch leaves nothing behind; an unexpected error
after the first write poisons the batch, and it rolls back.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import apsw
import numpy as np

from . import _sqlite
from .edges import CloseValidity, EdgeDraft, EdgeRegistry, EndView, SkipEdgeRow, StageMerge
from .embed import Embedder
from .errors import InvalidInput, MergeError, NotCurrent, WorldDBError
from .hashing import EMPTY_TREE, canonical_json, edge_id, edge_leaf, node_id, state_bytes, world_root
from .store import Header, Store, node_state_bytes
from .temporal import Clock, check_interval
from .types import Edge, MergeStatus
from .worlds import MerkleWriter

_TYPE_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_]{0,63}$")
Member = tuple[str, int]  # ('n', nid) or ('e', eid)


def normalise_alias(alias: str) -> str:
    """Casefolded, whitespace-collapsed form used for exact alias lookup."""
    return " ".join(alias.casefold().split())


@dataclass(frozen=True, slots=True)
class EdgeResult:
    """What linking did: the edge row written (if any) and the proposal staged (if any)."""

    eid: int | None
    proposal: int | None
    created: bool
    edge: Edge | None = None  # the record of a newly written row (saves a re-read)


class _Writing:
    """Marks the transaction unusable if a write fails after it started (see Txn._writing)."""

    __slots__ = ("txn",)

    def __init__(self, txn: Txn) -> None:
        self.txn = txn

    def __enter__(self) -> None:
        return None

    def __exit__(self, exc_type: object, exc: BaseException | None, tb: object) -> bool:
        if exc is not None:
            self.txn.poisoned = True
            _sqlite.translate().__exit__(type(exc), exc, tb)
        return False


class Txn:
    """One logical write. Use through ``Reconciler.transaction()``."""

    def __init__(self, reconciler: Reconciler) -> None:
        self.r = reconciler
        self.store = reconciler.store
        self.now = reconciler.clock()
        self.dirty: dict[int, dict[int, Member]] = {}
        self.restate: set[int] = set()
        self.sizes: dict[int, int] = {}
        self.roots: dict[int, bytes] = {}
        self.edge_leaves: dict[int, bytes] = {}
        self.new_nodes: list[int] = []
        self.views: dict[int, EndView] = {}  # nodes' projections as this transaction left them
        # Index rows are written at commit in one executemany each: an FTS5 insert between
        # other statements flushes its pending terms every time (measured ~4x slower per write).
        self.pending_text: list[tuple[int, str, str]] = []
        self.pending_vectors: list[tuple[int, np.ndarray]] = []
        self.poisoned = False

    # ---- helpers ----------------------------------------------------------------

    def _writing(self) -> _Writing:
        """Context for an operation's writes: a failure half-way poisons the batch."""
        return _Writing(self)

    def _next_slot(self, world: int) -> int:
        size = self.sizes.get(world)
        if size is None:
            row = self.store.conn.execute("select size from node_state where nid = ?", (world,)).fetchone()
            size = int(row[0])
        self.sizes[world] = size + 1
        return size

    def _mark(self, world: int, slot: int, member: Member) -> None:
        self.dirty.setdefault(world, {})[slot] = member

    def end_view(self, nid: int) -> EndView:
        """What handlers see of a node (cached until this transaction changes it)."""
        view = self.views.get(nid)
        if view is None:
            header = self.store.header(nid)
            row = self.store.conn.execute(
                "select valid_at, invalid_at, expired_at, retired from node_state where nid = ?", (nid,)
            ).fetchone()
            view = EndView(nid, header.id.hex(), header.type, row[0], row[1], row[2], bool(row[3]))
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
        seen: set[int] = set()
        frontier = [node]
        while frontier:
            current = frontier.pop()
            if current == ancestor:
                return True
            if current in seen:
                continue
            seen.add(current)
            parent = self.store.header(current).parent
            if parent is not None:
                frontier.append(parent)
            frontier.extend(
                int(r[0]) for r in self.store.conn.execute(
                    "select src from edge where dst = ? and type = 'contains' and invalid_at is null "
                    "and expired_at is null", (current,))
            )
        return False

    def merge_status(self, a: int, b: int) -> MergeStatus | None:
        """Status of the proposal for this pair, if any."""
        found = self.store.proposal(a, b)
        return None if found is None else found[1]

    def reaches(self, edge_type: str, src: int, dst: int) -> bool:
        """True if current edges of ``edge_type`` lead from src to dst."""
        seen: set[int] = set()
        frontier = [src]
        while frontier:
            current = frontier.pop()
            if current == dst:
                return True
            if current in seen:
                continue
            seen.add(current)
            frontier.extend(self.store.current_targets(edge_type, current))
        return False

    # ---- nodes --------------------------------------------------------------------

    def add_root(self) -> int:
        """Create the store's root world (once, at init)."""
        body = canonical_json({"v": 1, "type": "Root", "name": None, "content": None,
                               "parent": None, "props": {}})
        raw = node_id(body)
        existing = self.store.nid_of(raw)
        if existing is not None:
            return existing
        with self._writing():
            nid = self.store.insert_node(raw, "Root", None, None, 0, body)
            self._insert_state(nid, raw, self.now, 0.0)
            self.store.remember(Header(nid, raw, "Root", None, 0, None))
            self.restate.add(nid)
        return nid

    def add_node(
        self,
        *,
        type_: str,
        parent: int,
        name: str | None = None,
        content: str | None = None,
        props: Mapping[str, Any] | None = None,
        valid_at: str | None = None,
        timeless: bool = False,
        vector: np.ndarray | None = None,
        salience: float = 0.0,
        aliases: Sequence[str] = (),
    ) -> tuple[int, bool]:
        """Write a node inside ``parent``; returns (nid, created). Same content, same node.

        ``timeless`` leaves valid_at out of the id (worlds and scopes named by their name alone).
        """
        if not isinstance(type_, str) or not _TYPE_NAME.match(type_):
            raise InvalidInput(
                f"node type {type_!r} must start with a letter and use letters, digits or _ (max 64)"
            )
        parent_header = self.store.header(parent)
        valid = valid_at or self.now
        record: dict[str, Any] = {
            "v": 1, "type": type_, "name": name, "content": content,
            "parent": parent_header.id.hex(), "props": dict(props or {}),
        }
        if not timeless:
            record["valid_at"] = valid
        body = canonical_json(record)
        raw = node_id(body)
        existing = self.store.nid_of(raw)
        if existing is not None:
            return existing, False
        text = " ".join(t for t in (name, content) if t)
        if vector is None and text and self.r.embedder is not None:
            vector = self.r.embedder.embed([text])[0]
        if vector is not None:
            vector = self.r.check_vector(vector)
        with self._writing():
            slot = self._next_slot(parent)
            nid = self.store.insert_node(raw, type_, parent, slot, parent_header.depth + 1, body)
            root = self._insert_state(nid, raw, valid, salience)
            if text:
                self.pending_text.append((nid, name or "", content or ""))
                if vector is not None:
                    self.pending_vectors.append((nid, vector))
            for alias in aliases:
                self.store.insert_alias(nid, alias, normalise_alias(alias), "write", self.now)
            self.store.remember(Header(nid, raw, type_, parent, parent_header.depth + 1, slot))
            self.views[nid] = EndView(nid, raw.hex(), type_, valid, None, None, False)
            self.new_nodes.append(nid)
            self.roots[nid] = root
            self._mark(parent, slot, ("n", nid))
        return nid, True

    def _insert_state(self, nid: int, raw: bytes, valid: str, salience: float) -> bytes:
        root = world_root(raw, node_state_bytes(valid, None, None, self.now, None, 0), EMPTY_TREE, 0)
        self.store.insert_state(nid, valid, self.now, salience, root)
        return root

    def close(self, nid: int, at: str | None = None, *, retire: bool = False, expire: bool = False) -> None:
        """Tighten a node's validity to ``at`` (and/or retire or retract it)."""
        row = self.store.node_row(nid)
        at = at or self.now
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
            self.store.close_node(nid, invalid_at=invalid_at, closed_at=closed_at,
                                  expired_at=expired_at, retired=int(retire or bool(row.retired)))
            self.views.pop(nid, None)
            self.restate.add(nid)

    # ---- edges --------------------------------------------------------------------

    def add_edge(
        self,
        type_: str,
        src: int,
        dst: int,
        *,
        props: Mapping[str, Any] | None = None,
        valid_at: str | None = None,
        accepting: bool = False,
        score: float | None = None,
        tier: str | None = None,
    ) -> EdgeResult:
        """Run the type's on_insert handler and apply its decisions with the edge row."""
        edge_type = self.r.registry.get(type_)
        found = self.store.conn.execute(
            "select eid from edge where src = ? and dst = ? and type = ? and invalid_at is null "
            "and expired_at is null limit 1", (src, dst, type_),
        ).fetchone()
        if found is not None:
            return EdgeResult(int(found[0]), None, False)
        src_view, dst_view = self.end_view(src), self.end_view(dst)
        valid = valid_at or self.now
        clean_props = dict(props or {})
        draft = EdgeDraft(type_, src_view, dst_view, clean_props, valid, accepting)
        decisions = list(edge_type.on_insert(draft, self))
        body = canonical_json({"v": 1, "type": type_, "src": src_view.id, "dst": dst_view.id,
                               "valid_at": valid, "props": clean_props})
        raw = edge_id(body)
        skip = any(isinstance(d, SkipEdgeRow) for d in decisions)
        proposal = None
        for decision in decisions:  # checks that can refuse come before any write
            if isinstance(decision, CloseValidity):
                check_interval(self.store.node_row(decision.nid).valid_at, decision.at, what="the closed validity")
        with self._writing():
            for decision in decisions:
                if isinstance(decision, CloseValidity):
                    self.close(decision.nid, decision.at)
                elif isinstance(decision, StageMerge):
                    proposal = self.store.insert_proposal(
                        decision.a, decision.b, score, tier or "manual", decision.reason, self.now)
            if skip:
                return EdgeResult(None, proposal, proposal is not None)
            world = self.lowest_common_world(src, dst)
            slot = self._next_slot(world)
            eid = self.store.insert_edge(raw, type_, src, dst, world, slot, body, valid, self.now)
            self.edge_leaves[eid] = edge_leaf(raw, state_bytes(valid, None, None, self.now, None))
            self._mark(world, slot, ("e", eid))
        record = Edge(raw.hex(), type_, src_view.id, dst_view.id, self.store.header(world).id.hex(),
                      clean_props, valid, None, None, self.now, None)
        return EdgeResult(eid, proposal, True, record)

    def close_edge(self, eid: int, at: str | None = None) -> None:
        """Run on_delete and close the edge's validity (edges are never deleted)."""
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
            self.edge_leaves.pop(eid, None)
            self._mark(row.world, row.slot, ("e", eid))

    def decide_merge(self, pid: int, accept: bool) -> None:
        """Accept (writing symmetric same_as edges) or reject a pending proposal."""
        proposal = self.store.proposal_row(pid)
        if proposal.status is not MergeStatus.PENDING:
            raise MergeError(f"proposal {pid} is already {proposal.status.value}; decisions are final")
        a, b = self.store.resolve(bytes.fromhex(proposal.a)), self.store.resolve(bytes.fromhex(proposal.b))
        with self._writing():
            self.store.decide_proposal(pid, MergeStatus.ACCEPTED if accept else MergeStatus.REJECTED, self.now)
            if accept:
                self.add_edge("same_as", a, b, accepting=True)
                self.add_edge("same_as", b, a, accepting=True)

    def add_alias(self, nid: int, alias: str, source: str | None = None) -> None:
        """Record another name for a node."""
        if not isinstance(alias, str) or not alias.strip():
            raise InvalidInput("an alias must be non-empty text")
        with self._writing():
            self.store.insert_alias(nid, alias.strip(), normalise_alias(alias), source, self.now)

    # ---- Merkle propagation ---------------------------------------------------------

    def _leaf(self, member: Member) -> bytes:
        kind, ref = member
        if kind == "n":
            cached = self.roots.get(ref)
            if cached is not None:
                return cached
            row = self.store.conn.execute("select root from node_state where nid = ?", (ref,)).fetchone()
            return bytes(row[0])
        cached = self.edge_leaves.get(ref)
        if cached is not None:
            return cached
        edge = self.store.edge_row(ref)
        return edge_leaf(edge.id, edge.state())

    def flush(self) -> None:
        """Write the index rows, then recompute roots bottom-up and log the changed ones."""
        self.store.index_texts(self.pending_text)
        self.store.index_vectors(self.pending_vectors)
        self.pending_text, self.pending_vectors = [], []
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
    ) -> None:
        self.conn = conn
        self.store = store
        self.registry = registry
        self.clock = clock
        self.embedder = embedder
        self.dim = dim
        self._txn: Txn | None = None

    def check_vector(self, vector: Any) -> np.ndarray:
        """A float32 vector of the store's dimension, or a clear error."""
        try:
            array = np.asarray(vector, dtype=np.float32).reshape(-1)
        except (TypeError, ValueError):
            raise InvalidInput("a vector must be a sequence of numbers") from None
        if array.shape[0] != self.dim:
            raise InvalidInput(
                f"vector has {array.shape[0]} dimensions but this store holds {self.dim}; "
                "embed with the store's model"
            )
        if not np.isfinite(array.dot(array)):  # one BLAS call; NaN or inf anywhere propagates
            raise InvalidInput("a vector must hold finite numbers only")
        return array

    @property
    def active(self) -> Txn | None:
        """The transaction in progress on this connection, if any."""
        return self._txn

    def transaction(self) -> _Transaction:
        """One logical write; nested calls join the outer transaction."""
        return _Transaction(self)


class _Transaction:
    """Context manager behind ``Reconciler.transaction`` (a class: it is on the hot path)."""

    __slots__ = ("r", "txn", "outer")

    def __init__(self, reconciler: Reconciler) -> None:
        self.r = reconciler
        self.outer = reconciler._txn is None

    def __enter__(self) -> Txn:
        r = self.r
        if not self.outer:
            assert r._txn is not None
            return r._txn
        _sqlite.with_retry(lambda: r.conn.execute("begin immediate"))
        self.txn = Txn(r)
        r._txn = self.txn
        try:
            with _sqlite.translate():
                r.conn.execute("insert into reconciler_session (holder) values ('reconciler')")
        except BaseException:
            self._abort()
            raise
        return self.txn

    def _abort(self) -> None:
        r = self.r
        try:
            if not r.conn.getautocommit():
                r.conn.execute("rollback")
        finally:
            r.store.forget_uncommitted(self.txn.new_nodes)
            r._txn = None

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        if not self.outer:
            return
        if exc_type is not None:
            self._abort()
            return
        txn, r = self.txn, self.r
        try:
            if txn.poisoned:
                raise WorldDBError("a write in this batch failed half-way; the whole batch was rolled back")
            with _sqlite.translate():
                txn.flush()
                r.conn.execute("delete from reconciler_session")
                r.conn.execute("commit")
        except BaseException:
            self._abort()
            raise
        r._txn = None
