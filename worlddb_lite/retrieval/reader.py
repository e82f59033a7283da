"""Every read of one store: nodes, versions, neighbours, search, nearest, hybrid recall, queries and roots.

A ``Reader`` turns a read's arguments (times, world, filters) into a ``ReadView`` and runs it.
It never writes. What it needs of the write side it is given as callables by the facade: the
store's present (``now``), a check that makes a caller's vector a unit vector of the store's
size, and ``settle``, which writes the open transaction's queued rows so a read inside a batch
sees them.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import apsw
import numpy as np

from .. import checks
from ..edges import EdgeRegistry, QueryRules
from ..errors import Hint, InvalidInput, NotFound
from ..index.side_reader import SideReader
from ..index.vector_index import VectorLane
from ..models.embed import Embedder, embed_checked, token_table
from ..store import queries, traverse
from ..store.hashing import node_body, node_id
from ..store.rows import EdgeRow, NodeRow, Store, believed_sql, visible_sql
from ..text.dates import TimeLike, parse_time, read_period
from ..types import Direction, Identity, MergeProposal, MergeStatus, Node, Page, Recall, ScopeRef, Subgraph, carries
from . import blas, confidence, lanes
from .query import QuerySpec, execute
from .query import check as check_query
from .recall import LANE_DEPTH, HitFilter
from .recall import recall as hybrid_recall
from .view import ReadView

FILTER_DEPTH = 1000  # a filtered recall looks this deep when the lanes' first 200 give fewer than k hits
# the node types the engine writes (a caller may write others: a type some node of the store has is taken too)
NODE_TYPES = ("Memory", "Turn", "Fact", "Summary", "Entity", "Session", "Scope", "World")

if TYPE_CHECKING:
    from ..models.rerank import Reranker


class Reader:
    """Reads one store through its connection (see the module)."""

    def __init__(
        self,
        *,
        conn: apsw.Connection,
        store: Store,
        registry: EdgeRegistry,
        vectors: VectorLane,
        embedder: Embedder | None,
        dim: int,
        root: int,
        path: str,
        now: Callable[[], str],
        check_vector: Callable[[Any], np.ndarray],
        settle: Callable[..., None],
        side: SideReader | None,
    ) -> None:
        self._conn, self._store, self.registry, self.vectors = conn, store, registry, vectors
        self.embedder, self.dim, self.root_nid, self.path = embedder, dim, root, path
        self.now, self.check_vector, self._settle, self.side = now, check_vector, settle, side

    # A read inside a batch sees what the batch wrote: each of the reader's doors first writes what the open
    # transaction queued and the read needs (edges for rows; the full-text and vector rows too for a search).

    @property
    def conn(self) -> apsw.Connection:
        """The connection, for a read of rows: the open batch's queued edges written first."""
        self._settle(indexes=False)
        return self._conn

    @property
    def store(self) -> Store:
        """The store's rows, read as ``conn`` reads them."""
        self._settle(indexes=False)
        return self._store

    def searchable(self) -> apsw.Connection:
        """The connection, for a full-text or vector search: the open batch's index rows written first too."""
        self._settle()
        return self._conn

    # ---- a read's frame -------------------------------------------------------------

    def times(self, as_of: TimeLike | None, known_as_of: TimeLike | None) -> tuple[str, str]:
        now = self.now()
        valid = parse_time(as_of, field="as_of") if as_of is not None else now
        belief = parse_time(known_as_of, field="known_as_of") if known_as_of is not None else now
        return valid, belief

    def rules(self, include_superseded: bool) -> QueryRules:
        """The edge types' read rules; ``include_superseded`` must be a bool (it keys a cache)."""
        if not isinstance(include_superseded, bool):
            raise InvalidInput(f"include_superseded must be True or False, got {include_superseded!r}")
        return self.registry.rules(include_superseded=include_superseded)

    def view(
        self,
        as_of: TimeLike | None,
        known_as_of: TimeLike | None,
        include_superseded: bool,
        *,
        world: str | Sequence[str] | None,
        include_cold: bool = False,
    ) -> ReadView:
        """What one read sees: its times, its world or worlds (None or the root: everything) and its indexes."""
        conn = self.searchable()
        valid, belief = self.times(as_of, known_as_of)
        rules = self.rules(include_superseded)
        if world is None or isinstance(world, str):
            named = [] if world is None else [world]
        elif isinstance(world, Sequence) and all(isinstance(w, str) for w in world):
            named = list(world)
        else:  # the hostile tests' nearest(world=object()) met list(object()): a TypeError, not an answer
            raise InvalidInput(f"world must be a node id (hex text), got {type(world).__name__}")
        inside = tuple(dict.fromkeys(self.store.resolve(w) for w in named))
        embedder, dim = self.embedder, self.dim
        embed = None if embedder is None else (lambda text: embed_checked(embedder, [text], dim)[0])
        return ReadView(
            conn=conn,
            store=self._store,
            index=self.vectors.index,  # looked up at each read: the index object is replaced as it grows
            embed=embed,
            valid=valid,
            belief=belief,
            include_superseded=include_superseded,
            memberships=tuple(sorted(rules.membership)),
            annotate=frozenset(rules.annotate),
            worlds=() if self.root_nid in inside else inside,
            tokens=token_table(embedder),  # a static model's: the late stage
            side=self.side if conn.getautocommit() else None,  # inside a write it would miss the uncommitted
            include_cold=include_cold,
        )

    def query_vector(self, query: str | Sequence[float] | np.ndarray) -> np.ndarray:
        """A query as a unit vector: text through the store's embedder, or a caller's vector checked."""
        if isinstance(query, str):
            if self.embedder is None:
                raise InvalidInput("this store has no embedder; pass a vector instead of text")
            vector: np.ndarray = embed_checked(self.embedder, [checks.required_text(query, "query")], self.dim)[0]
            return vector
        return self.check_vector(query)

    def existing_scope(self, name: object) -> int | None:
        """The Scope called ``name`` (its id depends on its name alone), or None: reads never create one."""
        ref = checks.scope_ref(name)
        root_hex = self.store.header(self.root_nid).id.hex()
        return self.store.nid_of(node_id(node_body("Scope", root_hex, ref.name, None, ref.props, None)))

    def scope_id(self, name: str) -> str:
        """The id of the Scope called ``name``, which must exist (a recall never creates one)."""
        nid = self.existing_scope(name)
        if nid is None:
            raise NotFound(
                f"no scope named {name!r} in {self.path}; write into it first, or leave scope out "
                "to recall from the whole store"
            )
        return self.store.header(nid).id.hex()

    def named_scope(self, name: object) -> int:
        """The nid of the Scope called ``name``, which must exist (listing, retiring, purging never create one)."""
        nid = self.existing_scope(name)
        # a purged scope keeps its id (and is written into again under the same name), not its name: it is
        # gone until something is written into it again
        if nid is None or (self.store.load_nodes([nid])[0].purged and not self._holds_anything(nid)):
            raise NotFound(f"no scope named {name!r} in {self.path}", hint=Hint("scopes"))
        return nid

    def _holds_anything(self, world: int) -> bool:
        valid, belief = self.times(None, None)
        memberships = sorted(self.rules(True).membership)
        found = queries.descendants(
            self.conn, world, valid, belief, memberships=memberships, node_type=None, include_superseded=True, limit=1
        )
        return bool(found)

    def scopes(self, kind: str | None = None) -> list[Node]:
        """Every Scope world under the root (of ``kind`` if given), oldest first (a purged one has lost its name)."""
        found = self.store.load_nodes(queries.scopes(self.conn, self.root_nid))
        return [node for node in found if kind is None or ScopeRef.of(node).kind == kind]

    def page(
        self,
        scope: str,
        *,
        type: str | Sequence[str] | None,
        include_retired: bool,
        limit: int,
        cursor: str | None,
        tag: str | None = None,
        newest_first: bool = False,
    ) -> Page:
        """The nodes inside a scope in the order written (or newest first), ``limit`` at a time from ``cursor`` on."""
        if isinstance(type, (list, tuple)):
            node_type: str | list[str] | None = [str(self.node_type(t)) for t in type] or None
        else:
            node_type = self.node_type(type)
        limit = checks.whole(limit, "limit", least=1, most=1000)
        label = None if tag is None else checks.tag(tag)
        if not isinstance(newest_first, bool):
            raise InvalidInput(f"newest_first must be True or False, got {newest_first!r}")
        rules = self.rules(include_retired)
        valid, belief = self.times(None, None)
        world = self.named_scope(scope)
        after = self._after(cursor)
        nids = queries.descendants(
            self.conn,
            world,
            valid,
            belief,
            memberships=sorted(rules.membership),
            node_type=node_type,
            include_superseded=include_retired,
            limit=limit + 1,  # one more than asked: whether another page follows
            after=after,
            tag=label,
            newest_first=newest_first,
        )
        nodes = self.store.load_nodes(nids[:limit], rules.annotate)
        return Page(tuple(nodes), nodes[-1].id if len(nids) > limit else None)

    def current_in(self, scope: str, tag: str | None = None) -> tuple[list[int], list[int]]:
        """What ``retire_all`` closes: the scope's own memories true now, and its current ``contains`` edges.

        With ``tag``, only the notes carrying it and the edges to notes carrying it.

        Memories: what says something (notes, turns, facts) and lives in the scope by its parents. Not
        the entities they name, which stay who they are, nor the worlds holding them (sessions): closing
        those would say nothing more. A memory another scope owns and this one holds through a
        ``contains`` edge stays true for its owner: the edge closes, so it leaves this scope alone.
        """
        valid, belief = self.times(None, None)
        label = None if tag is None else checks.tag(tag)
        world = self.named_scope(scope)
        nids = self._own(world, valid, belief, include_superseded=False, tag=label)
        nodes = self.store.load_nodes(nids)
        held = queries.linked(
            self.conn, ("contains",), [world], None, valid, belief, towards=False, include_superseded=False
        )
        if label is not None:
            far = self.store.load_nodes([dst for _, _, dst, _ in held])
            held = [edge for edge, node in zip(held, far, strict=True) if carries(node, label)]
        owned = [
            nid
            for nid, node in zip(nids, nodes, strict=True)
            if not node.retired and node.type != "Entity" and node.members == 0
        ]
        return owned, [eid for eid, _, _, _ in held]

    def tagged(self, scope: str, tag: str) -> tuple[int, list[int]]:
        """The scope's nid and its own notes carrying ``tag``, in any state: what ``purge_tagged`` erases."""
        label = checks.tag(tag)
        valid, belief = self.times(None, None)
        world = self.named_scope(scope)
        return world, self._own(world, valid, belief, include_superseded=True, tag=label)

    def _own(self, world: int, valid: str, belief: str, *, include_superseded: bool, tag: str | None) -> list[int]:
        """Every node of ``world`` by its parents (not what it holds through edges), visible at these times."""
        return queries.descendants(
            self.conn,
            world,
            valid,
            belief,
            memberships=(),
            node_type=None,
            include_superseded=include_superseded,
            limit=-1,  # SQLite's "no limit": a retirement or a purge covers the whole scope
            tag=tag,
        )

    def _after(self, cursor: object) -> int:
        """The nid a page starts after: 0 for the first page, else the node the cursor names."""
        if cursor is None:
            return 0
        text = cursor.strip().lower() if isinstance(cursor, str) else ""
        if len(text) != 64 or any(c not in "0123456789abcdef" for c in text):
            raise InvalidInput(
                f"{cursor!r} is not a cursor; pass the cursor the previous page returned, or leave it out for the first"
            )
        nid = self.store.nid_of(bytes.fromhex(text))
        if nid is None:
            raise NotFound(f"cursor {text[:16]}… names no node of this store; start again without a cursor")
        return nid

    # ---- nodes and edges --------------------------------------------------------------

    def read(self, ref: str, *, as_of: TimeLike | None = None, known_as_of: TimeLike | None = None) -> Node:
        """A node by id or unique prefix (any version). With ``as_of``, only if visible then."""
        nid = self.store.resolve(ref)
        if as_of is not None or known_as_of is not None:
            valid, belief = self.times(as_of, known_as_of)
            if not queries.is_visible(self.conn, nid, valid, belief):
                raise NotFound(f"{ref} was not valid at {valid} as known at {belief}")
        return self.store.to_node(self.store.node_row(nid), self.rules(True).annotate)

    def history(self, ref: str) -> list[Node]:
        """Every version of a memory (joined by supersedes), oldest valid time first."""
        versions = traverse.closure(self.store.resolve(ref), self.store.version_links)
        nodes = self.store.load_nodes(sorted(versions), self.rules(True).annotate)
        return sorted(nodes, key=lambda n: (n.valid_at, n.created_at, n.id))

    def nodes(
        self,
        *,
        world: str | None,
        type: str | None,
        as_of: TimeLike | None,
        known_as_of: TimeLike | None,
        include_superseded: bool,
        limit: int,
    ) -> list[Node]:
        """Nodes inside ``world`` (the root by default), at any depth, that are visible."""
        valid, belief = self.times(as_of, known_as_of)
        rules = self.rules(include_superseded)
        node_type = checks.text(type, "type", required=False)
        start = self.store.resolve(world) if world is not None else self.root_nid
        nids = queries.descendants(
            self.conn,
            start,
            valid,
            belief,
            memberships=sorted(rules.membership),
            node_type=node_type,
            include_superseded=include_superseded,
            limit=checks.whole(limit, "limit", least=1, most=1_000_000),
        )
        return self.store.load_nodes(nids, rules.annotate)

    def neighbours(
        self,
        ref: str,
        *,
        types: Sequence[str] | None,
        direction: Direction | str,
        as_of: TimeLike | None,
        known_as_of: TimeLike | None,
        include_superseded: bool,
    ) -> Subgraph:
        """One hop from a node: the seed, its visible neighbours and the edges followed."""
        valid, belief = self.times(as_of, known_as_of)
        way = checks.choice(Direction, direction, "direction")
        for edge_type in checks.names(types, "types", "['refers_to', 'causes']") or ():
            self.registry.get(edge_type)
        annotate = self.rules(include_superseded).annotate
        seed = self.store.resolve(ref)
        edge_pred = visible_sql("e") if not include_superseded else believed_sql("e")
        node_pred = visible_sql("s") if not include_superseded else believed_sql("s")
        edges: list[EdgeRow] = []
        far_rows: dict[int, NodeRow] = {}
        for outgoing in (True, False):
            if way is not Direction.BOTH and (way is Direction.OUT) != outgoing:
                continue
            for edge_row, node_row in self.store.hop(
                seed, outgoing=outgoing, edge_pred=edge_pred, node_pred=node_pred, params=(valid, belief)
            ):
                if types and edge_row.type not in types:
                    continue
                edges.append(edge_row)
                far_rows.setdefault(node_row.nid, node_row)
        rows = [self.store.node_row(seed), *far_rows.values()]
        nodes = self.store.to_nodes(rows, annotate)
        return Subgraph(tuple(nodes), tuple(self.store.to_edge(e) for e in edges))

    # ---- search -----------------------------------------------------------------------

    def search(
        self,
        text: str,
        *,
        k: int,
        scope: str | Sequence[str] | None,
        as_of: TimeLike | None,
        known_as_of: TimeLike | None,
        include_superseded: bool,
    ) -> list[tuple[Node, float]]:
        """BM25 over names and contents (FTS5); best first, with the BM25 score (higher is better)."""
        query = lanes.fts_query(checks.required_text(text, "query"))
        k = checks.whole(k, "k", least=1, most=10_000)
        valid, belief = self.times(as_of, known_as_of)
        rules = self.rules(include_superseded)
        worlds = [self.named_scope(str(ref)) for ref in checks.scope_refs(scope)] if scope is not None else []
        if not query:
            return []
        hits = queries.bm25(
            self.searchable(),
            query,
            valid,
            belief,
            k=k,
            include_superseded=include_superseded,
            worlds=worlds,
            memberships=sorted(rules.membership),
        )
        nodes = self.store.load_nodes([nid for nid, _ in hits], rules.annotate)
        return [(node, score) for node, (_, score) in zip(nodes, hits, strict=True)]

    def nearest(
        self,
        query: str | Sequence[float] | np.ndarray,
        *,
        k: int,
        world: str | None,
        types: Sequence[str] | None,
        as_of: TimeLike | None,
        known_as_of: TimeLike | None,
        include_superseded: bool,
    ) -> list[tuple[Node, float]]:
        """Nearest neighbours by cosine inside ``world``, of ``types``; best first, with the cosine."""
        vector = self.query_vector(query)
        checks.names(types, "types", "['Turn', 'Fact']")
        k = checks.whole(k, "k", least=1, most=4096)
        view = self.view(as_of, known_as_of, include_superseded, world=world)
        kept = lanes.nearest(view, vector, k, types)
        nodes = view.nodes([nid for nid, _ in kept])
        return [(node, score) for node, (_, score) in zip(nodes, kept, strict=True)]

    def nearest_in(self, vector: np.ndarray, k: int, world: int, types: Sequence[str]) -> list[tuple[int, float]]:
        """(nid, cosine) of the ``k`` nodes of ``types`` inside ``world`` nearest to a unit ``vector``, visible now."""
        inside = self.store.header(world).id.hex()
        return lanes.nearest(self.view(None, None, False, world=inside), vector, k, types)

    def recall(
        self,
        query: str,
        *,
        scope: str | Sequence[str] | None,
        world: str | None,
        k: int,
        as_of: TimeLike | None,
        known_as_of: TimeLike | None,
        include_superseded: bool,
        reranker: Reranker | None,
        late: bool,
        include_cold: bool = False,
        min_confidence: float | None = None,
        type: str | None = None,
        tag: str | None = None,
        during: str | None = None,
    ) -> Recall:
        """Hybrid recall (see ``WorldDB.recall``)."""
        keep = self._keep(type, tag, during)
        text = checks.required_text(query, "query")
        if not text.strip():
            raise InvalidInput("the query is empty; ask with some words")
        k = checks.whole(k, "k", least=1, most=1000)
        if scope is not None and world is not None:
            raise InvalidInput("give scope (a name) or world (an id), not both")
        if reranker is not None and not callable(getattr(reranker, "score", None)):
            raise InvalidInput("reranker must implement worlddb_lite.models.rerank.Reranker (score(query, passages))")
        for flag, value in (("late", late), ("include_cold", include_cold)):
            if not isinstance(value, bool):
                raise InvalidInput(f"{flag} must be True or False, got {value!r}")
        floor = None if min_confidence is None else checks.share(min_confidence, "min_confidence")
        inside = [self.scope_id(str(ref)) for ref in checks.scope_refs(scope)] if scope is not None else world
        view = self.view(as_of, known_as_of, include_superseded, world=inside, include_cold=include_cold)
        index = view.index()  # caught up once, for the lanes and the confidence alike
        embed = None if view.embed is None else functools.lru_cache(maxsize=2)(view.embed)  # once, beside what_else
        view = replace(view, index=lambda: index, embed=embed)
        with blas.one_thread():
            # the signals read the first BACKGROUND hits whatever k is: the same first hit is as sure at k = 1
            head = max(k, confidence.BACKGROUND)
            if keep is None:
                hits = hybrid_recall(view, text, k=head, reranker=reranker, late=late)
            else:  # the hits it admits, ranked as usual, looking deeper while fewer than k pass
                for depth in (max(head, LANE_DEPTH), FILTER_DEPTH):
                    found = hybrid_recall(view, text, k=depth, reranker=reranker, late=late)
                    hits = [hit for hit in found if keep.admits(hit)][:head]
                    if len(hits) >= k or len(found) < depth:
                        break
            signal = confidence.signals(view, text, view.embed(text) if view.embed else None, hits)
            hits = hits[:k]
        sure = confidence.confidence(signal)
        during_read = None if keep is None else keep.period
        if floor is not None and sure < floor:  # found, but not likely to answer: nothing relevant
            return Recall(text, (), view.valid, view.belief, sure, signal, withheld=bool(hits), during=during_read)
        return Recall(text, tuple(hits), view.valid, view.belief, sure, signal, during=during_read)

    def _keep(self, type: object, tag: object, during: object) -> HitFilter | None:
        """The hits a filtered recall keeps (None: no filter), its arguments checked before anything runs."""
        if type is None and tag is None and during is None:
            return None
        period = None if during is None else read_period(during, field="during", now=self.now())
        return HitFilter(self.node_type(type), None if tag is None else checks.tag(tag), period)

    def node_type(self, value: object) -> str | None:
        """A node type to filter by: one the engine writes, or one this store holds; else a clear refusal."""
        named = checks.text(value, "type", required=False)
        if named is None or named in NODE_TYPES or queries.has_type(self.conn, named):
            return named
        near = next((t for t in NODE_TYPES if t.lower() == named.strip().lower()), None)
        hint = "Memory" if named.strip().lower() in ("note", "notes", "memories") else near
        raise InvalidInput(
            f"type {named!r} names no node of this store"
            + (f" (did you mean {hint!r}?)" if hint else "")
            + f"; the engine's types are {', '.join(NODE_TYPES)} (a note is a Memory)"
        )

    def query(self, spec: QuerySpec) -> Subgraph:
        """Run a declarative query: a start set and a pipeline of operators, into a Subgraph."""
        if not isinstance(spec, QuerySpec):
            raise InvalidInput("query takes a worlddb_lite.QuerySpec")
        check_query(spec)
        checks.whole(spec.k, "k", least=1, most=10_000)
        view = self.view(spec.as_of, spec.known_as_of, spec.include_superseded, world=spec.world)
        vector = None if spec.vector is None else self.query_vector(spec.vector)
        result = execute(view, spec, vector)
        edges = tuple(self.store.to_edge(self.store.edge_row(eid)) for eid in result.eids)
        return Subgraph(tuple(view.nodes(result.nids)), edges)

    # ---- identities -------------------------------------------------------------------

    def merge_proposals(self, status: MergeStatus | str | None) -> list[MergeProposal]:
        return self.store.proposals(checks.choice(MergeStatus, status, "status") if status is not None else None)

    def merge_proposal(self, pid: object) -> MergeProposal:
        return self.store.proposal_row(checks.proposal_number(pid))

    def class_nids(self, ref: str) -> set[int]:
        """Every node joined to ``ref`` through accepted same_as, transitively."""
        return traverse.closure(self.store.resolve(ref), self.store.same_as_neighbours)

    def equivalence_class(self, ref: str) -> tuple[str, ...]:
        return tuple(sorted(self.store.header(n).id.hex() for n in self.class_nids(ref)))

    def export_identity(self, ref: str) -> Identity:
        """The equivalence class of ``ref`` with the union of its members' names, aliases and provenance."""
        nids = sorted(self.class_nids(ref), key=lambda n: self.store.header(n).id)
        nodes = self.store.load_nodes(nids)
        names = sorted({n.name for n in nodes if n.name})
        aliases = sorted({a for n in nids for a in self.store.aliases(n)})
        provenance = tuple(
            {
                "node": node.id,
                "type": node.type,
                "created_at": node.created_at,
                **({"source": node.props["provenance"]} if "provenance" in node.props else {}),
            }
            for node in nodes
        )
        return Identity(tuple(n.id for n in nodes), tuple(names), tuple(aliases), provenance)

    # ---- the witness ------------------------------------------------------------------

    def root_of(self, world: str | None, *, as_of: TimeLike | None) -> str:
        """The Merkle root of a world (the whole store by default), now or as committed at ``as_of``."""
        nid = self.store.resolve(world) if world is not None else self.root_nid
        if as_of is None:
            return self.store.node_row(nid).root.hex()
        when = parse_time(as_of, field="as_of")
        found = queries.root_at(self.conn, nid, when)
        if found is None:
            raise NotFound(f"world {nid} had no members yet at {when}")
        return found.hex()

    def root_history(self, world: str | None) -> list[tuple[str, str, int]]:
        """(committed at, root, member count) for every change of a world's root, oldest first."""
        nid = self.store.resolve(world) if world is not None else self.root_nid
        return [(at, root.hex(), size) for at, root, size in queries.root_log(self.conn, nid)]
