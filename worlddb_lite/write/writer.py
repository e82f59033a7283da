"""The door every memory comes through: checked arguments become nodes and edges in one transaction.

A ``Writer`` wraps the reconciler of one connection with what System 1 and System 2 need:
argument checks, scopes and worlds by name, verbatim writes (one or many, embedded in one
batch), new versions, links through the edge handlers, and the few reads the write path makes
inside its own transaction (a node, an alias, the nearest turns of a world). The facade and
every System 2 step (conversations, facts, identities, the queue) write through it; it never
calls the facade back.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import apsw
import numpy as np

from .. import checks
from ..edges import EndView
from ..errors import InvalidInput, NotCurrent
from ..index.ivf import IvfIndex
from ..models.embed import Embedder, embed_checked, embedding_text
from ..store import queries
from ..store.rows import Store
from ..text.dates import Clock, TimeLike, parse_time
from ..text.names import normalise_alias
from ..types import Edge, MergeProposal, Node
from .reconciler import TYPE_NAME, EdgeResult, EdgeSpec, NodeSpec, Reconciler, Transaction, WriteScope
from .resolver import NEAR_PROBE, Resolver

DEFAULT_SCOPE = "default"
RECORD_FIELDS = frozenset(
    {
        "text",
        "scope",
        "world",
        "type",
        "name",
        "valid_at",
        "props",
        "vector",
        "aliases",
        "salience",
        "index_context",
        "word_context",
    }
)


@dataclass(frozen=True)
class MemoryIn:
    """One memory to write and how, as ``WorldDB.write`` takes it (its docstring says what each field does).

    The node's fields (``write_many``'s record fields) come first; ``speaker``, ``tags`` and ``new`` are a
    note's (write/notes.py). Checked where they are used, so a bad value writes nothing.
    """

    text: str | bytes
    scope: str | Sequence[str] = DEFAULT_SCOPE
    world: str | None = None
    type: str = "Memory"
    name: str | None = None
    valid_at: TimeLike | None = None
    props: Mapping[str, Any] | None = None
    vector: Sequence[float] | np.ndarray | None = None
    aliases: Sequence[str] = ()
    salience: float = 0.0
    index_context: str | None = None
    word_context: str | None = None
    speaker: object = None
    tags: object = None
    new: object = False

    def record(self) -> dict[str, Any]:
        """The node's fields, as ``Writer.node_spec`` takes them (the text aside)."""
        return {key: getattr(self, key) for key in RECORD_FIELDS if key != "text"}


# (vector, k, world, types) -> (nid, cosine) of the k nearest visible nodes of those types inside the world
Nearest = Callable[[np.ndarray, int, int, Sequence[str]], list[tuple[int, float]]]


class Writer:
    """Writes into one store through its reconciler; every method joins the caller's transaction if one is open.

    ``nearest`` searches a world's visible nodes by vector (the facade supplies it: the read
    path's own search, which the write path may not import).
    """

    def __init__(self, reconciler: Reconciler, root: int, nearest: Nearest) -> None:
        self.reconciler = reconciler
        self.store: Store = reconciler.store
        self.conn: apsw.Connection = reconciler.conn
        self.root = root
        self._nearest = nearest
        self._resolver: Resolver | None = None

    @property
    def clock(self) -> Clock:
        return self.reconciler.clock

    @property
    def embedder(self) -> Embedder | None:
        return self.reconciler.embedder

    @property
    def dim(self) -> int:
        return self.reconciler.dim

    def transaction(self) -> WriteScope:
        """One logical write; nested calls join the outer one."""
        return self.reconciler.transaction()

    def settle(self, *, indexes: bool = True) -> None:
        """Inside a transaction, write what it queued so reads see it (``Reconciler.settle``)."""
        self.reconciler.settle(indexes=indexes)

    def set_word_context(self, rows: Sequence[tuple[str | None, int]]) -> None:
        """Rewrite turns' words-only context, (context, nid) pairs; rows queued in this transaction go first."""
        self.settle()
        self.store.set_word_context(rows)

    # ---- worlds -------------------------------------------------------------------

    def world(self, name: object, *, parent: str | None = None, type: str = "World") -> str:
        """Get or create the world called ``name`` inside ``parent`` (the root by default); its id."""
        checked = checks.required_text(name, "world name")
        with self.transaction() as txn:
            parent_nid = self.store.resolve(parent) if parent is not None else self.root
            nid, _ = txn.add_node(type_=type, parent=parent_nid, name=checked, timeless=True)
            return self.store.header(nid).id.hex()

    def scope_nid(self, txn: Transaction, scope: object) -> int:
        """The Scope world called ``scope`` (``checks.scope_ref``), created inside ``txn`` if need be."""
        ref = checks.scope_ref(scope)
        nid, _ = txn.add_node(type_="Scope", parent=self.root, name=ref.name, props=ref.props, timeless=True)
        return nid

    def scope(self, scope: object) -> str:
        """Get or create the Scope world called ``scope``; its id."""
        with self.transaction() as txn:
            return self.store.header(self.scope_nid(txn, scope)).id.hex()

    # ---- memories -----------------------------------------------------------------

    def write(self, memory: MemoryIn) -> str:
        """Store ``memory``'s text verbatim (System 1: its note options are write/notes.py's); its id."""
        with self.transaction() as txn:
            nid, _ = txn.add_nodes([self.node_spec(txn, memory.text, **memory.record())])[0]
            return self.store.header(nid).id.hex()

    def write_many(self, records: Sequence[Mapping[str, Any]]) -> list[str]:
        """Write many memories in one transaction, embedded in one batch; their ids in order."""
        with self.transaction() as txn:
            return [self.store.header(nid).id.hex() for nid, _ in txn.add_nodes(self.specs(txn, records))]

    def specs(self, txn: Transaction, records: Sequence[Mapping[str, Any]]) -> list[NodeSpec]:
        """``write_many``'s records checked into NodeSpecs."""
        if isinstance(records, (str, bytes, Mapping)) or not isinstance(records, Sequence):
            raise InvalidInput("records must be a list of mappings, each with at least 'text'")
        specs = []
        for record in records:
            if not isinstance(record, Mapping) or "text" not in record:
                raise InvalidInput("each record is a mapping with at least 'text'")
            unknown = set(record) - RECORD_FIELDS
            if unknown:
                raise InvalidInput(f"unknown record fields {sorted(unknown)}; allowed: {sorted(RECORD_FIELDS)}")
            specs.append(self.node_spec(txn, **record))
        return specs

    def node_spec(
        self,
        txn: Transaction,
        text: str | bytes,
        *,
        scope: str = DEFAULT_SCOPE,
        world: str | None = None,
        type: str = "Memory",
        name: str | None = None,
        valid_at: TimeLike | None = None,
        props: Mapping[str, Any] | None = None,
        vector: Sequence[float] | np.ndarray | None = None,
        aliases: Sequence[str] = (),
        salience: float = 0.0,
        index_context: str | None = None,
        word_context: str | None = None,
    ) -> NodeSpec:
        """Validate one memory's arguments into a NodeSpec.

        Everything is checked before the scope world is created, so bad input writes nothing.
        """
        content = checks.memory_text(text, "text")
        checked_name = checks.text(name, "name", required=False)
        checked_props = checks.props(props)
        when = parse_time(valid_at, field="valid_at") if valid_at is not None else None
        checked_vector = None if vector is None else self.reconciler.check_vector(vector)
        names = checks.aliases(aliases)
        weight = checks.number(salience, "salience")
        if not isinstance(type, str) or not TYPE_NAME.match(type):
            raise InvalidInput(f"node type {type!r} must start with a letter and use letters, digits or _ (max 64)")
        return NodeSpec(
            type=type,
            parent=self.store.resolve(world) if world is not None else self.scope_nid(txn, scope),
            name=checked_name,
            content=content,
            props=checked_props,
            valid_at=when,
            vector=checked_vector,
            aliases=names,
            salience=weight,
            index_context=checks.text(index_context, "index_context", required=False),
            word_context=checks.text(word_context, "word_context", required=False),
        )

    def on_tombstones(self, world: str, records: Sequence[Mapping[str, Any]]) -> list[bool]:
        """Whether each of ``write_many``'s ``records`` into ``world`` would land on a node a purge erased.

        The same content written again finds its purged node (content addressing). Only a world
        that holds a purged child can say yes, so a new session costs one index probe, not the ids.
        """
        if not queries.holds_purged(self.conn, self.store.resolve(world)):
            return [False] * len(records)
        with self.transaction() as txn:
            ids = txn.node_ids(self.specs(txn, records))
        existing = self.store.nids_of(ids)
        kept = set(queries.with_text(self.conn, list(existing.values())))
        return [raw in existing and existing[raw] not in kept for raw in ids]

    def amend(
        self,
        ref: str,
        text: str | bytes,
        *,
        valid_at: TimeLike | None = None,
        props: Mapping[str, Any] | None = None,
    ) -> str:
        """Write a new version of a memory that supersedes it, under its aliases; the old content stays, closed."""
        content = checks.memory_text(text, "text")
        valid = parse_time(valid_at, field="valid_at") if valid_at is not None else None
        extra = checks.props(props) or {}
        with self.transaction() as txn:
            old_nid = self.store.resolve(ref)
            old = self.store.node_row(old_nid)
            current = self.store.to_node(old, ("supersedes",))
            if current.purged:  # closed too, but "superseded by: none; retired: False" would not say why
                raise NotCurrent(f"{current.id[:12]} was purged: its content is gone and it takes no new version")
            if not current.is_current:
                newer = ", ".join(i[:12] for i in current.superseded_by) or "none"
                raise NotCurrent(
                    f"{current.id[:12]} is no longer current (superseded by: {newer}; "
                    f"retired: {'yes' if current.retired else 'no'}); amend its current version"
                )
            # Ask the supersedes handler first, so a refusal writes nothing (not even the new node).
            view = EndView(-1, "(new version)", old.type, valid or txn.now, None, None, False)
            txn.check_edge("supersedes", view, old_nid)
            if old.parent is None:
                raise InvalidInput("the root world has no versions; amend a memory inside it")
            nid, created = txn.add_node(
                type_=old.type,
                parent=old.parent,
                name=current.name,
                content=content,
                props={**current.props, **extra},
                valid_at=valid,
            )
            if not created:  # content addressing found an existing node: it cannot become the new version
                existing = self.store.header(nid).id.hex()[:12]
                raise InvalidInput(
                    f"a node with this content and valid time already exists ({existing}); "
                    "give the new version a different valid_at"
                )
            # the new version is the same thing: it answers to the old one's names (an extracted fact's slot
            # alias among them, through which the write path and the sweep find a slot's current values)
            for alias, source in self.store.alias_rows(old_nid):
                txn.add_alias(nid, alias, source)
            txn.add_edge("supersedes", nid, old_nid, valid_at=valid)  # the edge holds from the new version on
            return self.store.header(nid).id.hex()

    def retract(self, ref: str) -> None:
        """Stop believing a memory from now on (belief time)."""
        with self.transaction() as txn:
            txn.close(self.store.resolve(ref), expire=True)

    # ---- edges --------------------------------------------------------------------

    def link(self, src: str, dst: str, type: str, **options: Any) -> Edge | MergeProposal:
        """One edge through its type's handler (see ``link_many``)."""
        return self.link_many([(src, dst, type)], **options)[0]

    def link_many(
        self,
        edges: Sequence[tuple[str, str, str]],
        *,
        props: Mapping[str, Any] | None = None,
        valid_at: TimeLike | None = None,
    ) -> list[Edge | MergeProposal]:
        """Write (src, dst, type) edges in one transaction, each through its handler, in order.

        A current edge of the same type between the same nodes is returned, not written twice;
        same_as returns the staged proposal.
        """
        valid = parse_time(valid_at, field="valid_at") if valid_at is not None else None
        checked = checks.props(props)
        if isinstance(edges, (str, bytes)) or not isinstance(edges, Sequence):
            raise InvalidInput("edges must be a list of (src, dst, type) triples")
        with self.transaction() as txn:
            specs = []
            for item in edges:
                if not isinstance(item, (tuple, list)) or len(item) != 3:
                    raise InvalidInput("each edge is a (src, dst, type) triple")
                src, dst, edge_type = item
                specs.append(
                    EdgeSpec(edge_type, self.store.resolve(src), self.store.resolve(dst), props=checked, valid_at=valid)
                )
            results = txn.add_edges(specs)
            return [self._outcome(txn, spec, result) for spec, result in zip(specs, results, strict=True)]

    def unlink(self, edge_ref: str, when: str | None) -> None:
        """Close an edge's validity through its type's on_delete handler."""
        with self.transaction() as txn:
            txn.close_edge(self.store.resolve_edge(edge_ref), when)

    def decide_merge(self, pid: object, *, accept: bool) -> None:
        """Accept (same_as both ways) or reject a same_as proposal."""
        with self.transaction() as txn:
            txn.decide_merge(checks.proposal_number(pid), accept=accept)

    def _outcome(self, txn: Transaction, spec: EdgeSpec, result: EdgeResult) -> Edge | MergeProposal:
        if result.edge is not None:
            return result.edge
        if result.eid is not None:
            txn.write_pending()
            return self.store.to_edge(self.store.edge_row(result.eid))
        found = self.store.proposal(spec.src, spec.dst)
        assert found is not None  # a same_as that wrote no row always has a proposal
        return self.store.proposal_row(found[0])

    # ---- the reads the write path makes ---------------------------------------------
    # Each read through the writer first writes what the transaction queued and the read needs (edges;
    # index rows for the vector reads), so no step of System 2 or the consolidator flushes by hand.

    @property
    def graph(self) -> apsw.Connection:
        """The connection, for a read of nodes and edges inside this transaction: its queued edges written first."""
        self.settle(indexes=False)
        return self.conn

    def vectors(self) -> IvfIndex:
        """The vector index with every memory this transaction wrote in it (its queued index rows written first)."""
        self.settle()
        return self.reconciler.lane.index()

    def read(self, ref: str) -> Node:
        """A node by id or unique prefix (any version), with what supersedes or contradicts it."""
        self.settle(indexes=False)
        row = self.store.node_row(self.store.resolve(ref))
        return self.store.to_node(row, self.reconciler.registry.rules(include_superseded=True).annotate)

    def lookup_alias(self, alias: object) -> tuple[str, ...]:
        """Ids of nodes known by this name or alias (case-insensitive)."""
        self.settle(indexes=False)
        norm = normalise_alias(checks.required_text(alias, "alias"))
        return tuple(self.store.header(nid).id.hex() for nid in queries.alias_nids(self.conn, norm))

    def nearest(self, vector: np.ndarray, k: int, world: int, types: Sequence[str]) -> list[tuple[Node, float]]:
        """The ``k`` nodes of ``types`` inside ``world`` nearest to ``vector``, visible now, best first."""
        self.settle()
        checked = self.reconciler.check_vector(vector)
        kept = self._nearest(checked, k, world, types)
        annotate = self.reconciler.registry.rules(include_superseded=False).annotate
        nodes = self.store.load_nodes([nid for nid, _ in kept], annotate)
        return [(node, score) for node, (_, score) in zip(nodes, kept, strict=True)]

    def embed(self, texts: Sequence[str]) -> np.ndarray | None:
        """``texts`` as unit vectors in one batch (None: the store has no embedder)."""
        if self.embedder is None:
            return None
        return embed_checked(self.embedder, texts, self.dim)

    @property
    def resolver(self) -> Resolver:
        """The identity resolver of this connection (its name index lives in the connection's temp schema).

        It reads same_as classes: the transaction's queued edges are written first.
        """
        self.settle(indexes=False)
        if self._resolver is None:
            embedder, dim = self.embedder, self.dim
            embed = (
                None
                if embedder is None  # an entity is embedded by its name and content, both the name
                else (lambda text: embed_checked(embedder, [embedding_text(text, text)], dim)[0])
            )
            self._resolver = Resolver(
                self.store,
                embed=embed,
                nearest=self._entity_nearest,
                cosines=lambda vector, nids: self.reconciler.lane.index().cosines(nids, vector),
            )
        return self._resolver

    def _entity_nearest(self, vector: np.ndarray, k: int, world: int | None) -> list[tuple[int, float]]:
        """(nid, cosine) of the ``k`` nearest entities to ``vector`` in ``world`` (None: all), best first.

        With no world this is the resolver's near-duplicate probe: tier 4 keeps only cosines at its
        high threshold, and such neighbours lie in the partitions nearest the vector, so it scans
        ``NEAR_PROBE`` of them instead of a top-k search's widened probe (bench/resolver.py).
        """
        if world is None:
            return self.reconciler.lane.index().near_duplicates(vector, k, types=["Entity"], probes=NEAR_PROBE)
        return self._nearest(vector, k, world, ["Entity"])
