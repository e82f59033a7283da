"""Declarative queries (paper section 4.1): a start set, then a pipeline of operators, into a Subgraph.

A ``QuerySpec`` names where to start (node ids, text through FTS5, or a vector) and what to do
next (``Expand`` along edges, ``Filter`` by type or world, ``WhereConnected``,
``PreferSummaries``). The planner starts from the cheapest source given: seeds (an index probe
each), then text (one FTS5 query), then a vector (an index search); any other source given
narrows that start set instead (text: must match, a turn also on its neighbours' words, which
``node_fts.context`` holds; vector: orders it by cosine).

Every node is read at the spec's valid/belief time. Containment: with a ``world``, nothing
outside it enters the result, except through ``refers_to``, the edge whose purpose is to point
across worlds.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from ..checks import names, whole
from ..errors import InvalidInput
from ..store import queries
from ..store.rows import Store
from ..types import Direction
from .lanes import fts_query, nearest, text_lane
from .view import ReadView

CROSSES_WORLDS = "refers_to"  # the one edge type a contained query may follow out of its world


@dataclass(frozen=True)
class Expand:
    """Follow edges of ``edge_types`` (all types when empty) ``hops`` times in ``direction``."""

    edge_types: tuple[str, ...] = ()
    direction: Direction = Direction.OUT
    hops: int = 1


@dataclass(frozen=True)
class Filter:
    """Keep nodes of these ``types`` and/or inside ``world`` (an id)."""

    types: tuple[str, ...] | None = None
    world: str | None = None


@dataclass(frozen=True)
class WhereConnected:
    """Keep nodes with a visible ``edge_type`` edge to (OUT), from (IN) or with (BOTH) ``node``."""

    edge_type: str
    direction: Direction
    node: str


@dataclass(frozen=True)
class PreferSummaries:
    """Replace nodes a Summary was derived from by that Summary (once per Summary)."""


Operator = Expand | Filter | WhereConnected | PreferSummaries


@dataclass(frozen=True)
class QuerySpec:
    """A start set and a pipeline; read at ``as_of`` / ``known_as_of`` (now by default)."""

    seeds: tuple[str, ...] = ()
    text: str | None = None
    vector: str | Sequence[float] | None = None  # text to embed, or a vector
    world: str | None = None
    pipeline: tuple[Operator, ...] = ()
    k: int = 20  # how many nodes a text or vector start set holds
    as_of: str | None = None
    known_as_of: str | None = None
    include_superseded: bool = False
    types: tuple[str, ...] | None = field(default=None)  # start-set node types (all when None)


def check(spec: QuerySpec) -> None:
    """Refuse a spec whose fields are not what they should be (InvalidInput), before anything is read.

    Ids, times, ``k`` and the vector are checked where they are used; this checks the rest.
    """
    if spec.text is not None and not isinstance(spec.text, str):
        raise InvalidInput(f"a query's text must be text, got {type(spec.text).__name__}")
    if not isinstance(spec.seeds, (list, tuple)):
        raise InvalidInput("a query's seeds must be a list of node ids")
    names(spec.types, "a query's types", "['Turn', 'Fact']")
    if not isinstance(spec.pipeline, (list, tuple)):
        raise InvalidInput("a query's pipeline must be a list of operators")
    for op in spec.pipeline:
        if isinstance(op, Expand):
            names(op.edge_types, "Expand edge_types", "['refers_to']")
            _direction(op.direction)
            whole(op.hops, "Expand hops", least=1)
        elif isinstance(op, Filter):
            names(op.types, "Filter types", "['Turn']")
        elif isinstance(op, WhereConnected):
            if not isinstance(op.edge_type, str):
                raise InvalidInput(f"WhereConnected edge_type must be an edge type name, got {op.edge_type!r}")
            _direction(op.direction)
        elif not isinstance(op, PreferSummaries):
            raise InvalidInput(
                f"unknown query operator {op!r:.100}; use Expand, Filter, WhereConnected or PreferSummaries"
            )


def _direction(value: object) -> None:
    if not isinstance(value, str) or value not in {d.value for d in Direction}:
        raise InvalidInput(f"a direction is one of out, in, both; got {value!r:.100}")


def plan(spec: QuerySpec) -> str:
    """The start set the planner picks: "seeds", then "text", then "vector" (cheapest first)."""
    if spec.seeds:
        return "seeds"
    if spec.text is not None and spec.text.strip():
        return "text"
    if spec.vector is not None:
        return "vector"
    raise InvalidInput("a query needs a start set: seeds (node ids), text, or a vector")


@dataclass
class _Result:
    """The subgraph as it is built: nodes in order, edges in the order traversed."""

    nids: list[int]
    eids: list[int] = field(default_factory=list)


def execute(view: ReadView, spec: QuerySpec, vector: np.ndarray | None) -> _Result:
    """Run ``spec``: the start set, the narrowing sources, then each operator in turn."""
    start = plan(spec)
    if start == "seeds":
        nids = view.inside(list(dict.fromkeys(view.store.resolve(s) for s in spec.seeds)))
    elif start == "text":
        nids = text_lane(view, spec.text or "", spec.k, types=spec.types, drop_stopwords=False)
    else:
        assert vector is not None
        nids = [nid for nid, _ in nearest(view, vector, spec.k, spec.types)]
    if start == "seeds" and spec.types is not None:
        nids = _typed(view.store, nids, spec.types)
    if start != "text" and spec.text is not None and spec.text.strip():
        matched = {
            nid
            for nid, _ in queries.bm25(
                view.conn,
                fts_query(spec.text),
                view.valid,
                view.belief,
                k=1_000_000,
                include_superseded=view.include_superseded,
            )
        }
        nids = [n for n in nids if n in matched]
    if start == "seeds" and vector is not None:
        cosine = view.index().cosines(nids, vector)
        nids = sorted(nids, key=lambda n: -cosine.get(n, -2.0))
    result = _Result(nids)
    for op in spec.pipeline:
        _apply(view, op, result)
    return result


def _typed(store: Store, nids: list[int], types: Sequence[str]) -> list[int]:
    return [n for n in nids if store.header(n).type in types]


def _apply(view: ReadView, op: Operator, result: _Result) -> None:
    if isinstance(op, Expand):
        _expand(view, op, result)
    elif isinstance(op, Filter):
        nids = result.nids if op.types is None else _typed(view.store, result.nids, op.types)
        if op.world is not None:
            world = view.store.resolve(op.world)
            inside = queries.inside(
                view.conn,
                nids,
                world,
                view.valid,
                view.belief,
                memberships=view.memberships,
                include_superseded=view.include_superseded,
            )
            nids = [n for n in nids if n in inside]
        result.nids = nids
    elif isinstance(op, WhereConnected):
        other = view.store.resolve(op.node)
        keep: set[int] = set()
        for towards in _towards(op.direction):  # OUT: node -> other, so other is the far end of an outgoing edge
            for _, near, far, _ in queries.linked(
                view.conn,
                (op.edge_type,),
                result.nids,
                None,
                view.valid,
                view.belief,
                towards=towards,
                include_superseded=view.include_superseded,
            ):
                if far == other:
                    keep.add(near)
        result.nids = [n for n in result.nids if n in keep]
    elif isinstance(op, PreferSummaries):
        summary_of: dict[int, int] = {}
        for _, near, far, _ in queries.linked(
            view.conn,
            ("derived_from",),
            result.nids,
            ("Summary",),
            view.valid,
            view.belief,
            towards=True,
            include_superseded=view.include_superseded,
        ):
            summary_of.setdefault(near, far)
        allowed = set(view.inside(sorted(set(summary_of.values()))))
        result.nids = list(dict.fromkeys(summary_of[n] if summary_of.get(n) in allowed else n for n in result.nids))
    else:  # pragma: no cover - the Operator union is closed
        raise InvalidInput(f"unknown query operator {op!r}")


def _towards(direction: Direction) -> tuple[bool, ...]:
    return {Direction.OUT: (False,), Direction.IN: (True,), Direction.BOTH: (False, True)}[direction]


def _expand(view: ReadView, op: Expand, result: _Result) -> None:
    seen, traversed = set(result.nids), set(result.eids)
    frontier = list(result.nids)
    for _ in range(op.hops):
        if not frontier:  # nothing left to follow: more hops add nothing
            break
        rows = [
            row
            for towards in _towards(op.direction)
            for row in queries.linked(
                view.conn,
                op.edge_types or None,
                frontier,
                None,
                view.valid,
                view.belief,
                towards=towards,
                include_superseded=view.include_superseded,
            )
        ]
        fresh = sorted({far for _, _, far, _ in rows if far not in seen})
        allowed = set(view.inside(fresh)) if view.worlds else set(fresh)
        frontier = []
        for eid, _, far, edge_type in rows:
            if far not in seen and (far in allowed or edge_type == CROSSES_WORLDS):
                seen.add(far)
                frontier.append(far)
                result.nids.append(far)
            if far in seen and eid not in traversed:
                traversed.add(eid)
                result.eids.append(eid)
