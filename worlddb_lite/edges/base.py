"""The edge-type protocol: handlers decide, the reconciler writes.

A handler never touches SQL. ``on_insert`` and ``on_delete`` look at the edge and
a read-only ``EdgeContext`` and return a list of ``Decision`` records (or raise
``EdgeRefused``); the reconciler turns the decisions into SQL inside the same
transaction as the edge row. ``on_query_rewrite`` adjusts the ``QueryRules`` that
every read applies, so an edge type can hide, annotate or pierce.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, NamedTuple, Protocol, runtime_checkable

from ..errors import EdgeRefused
from ..types import MergeStatus


class EndView(NamedTuple):
    """What a handler may know about one end of an edge (immutable; a tuple: built per write)."""

    nid: int
    id: str
    type: str
    valid_at: str
    invalid_at: str | None
    expired_at: str | None
    retired: bool

    @property
    def current(self) -> bool:
        """Still open and believed."""
        return self.invalid_at is None and self.expired_at is None and not self.retired


@dataclass(frozen=True, slots=True)
class EdgeDraft:
    """An edge about to be written (or closed)."""

    type: str
    src: EndView
    dst: EndView
    props: Mapping[str, Any]
    valid_at: str
    accepting: bool = False  # True only when accept_merge writes an accepted same_as


# Decisions: plain records the reconciler applies in order.


@dataclass(frozen=True, slots=True)
class CloseValidity:
    """Close a node's validity at ``at`` (tightening only; never re-opens)."""

    nid: int
    at: str


@dataclass(frozen=True, slots=True)
class StageMerge:
    """Record a pending same_as proposal between two nodes."""

    a: int
    b: int
    reason: str


@dataclass(frozen=True, slots=True)
class SkipEdgeRow:
    """Do not write the edge row itself (the decision stands in for it)."""

    reason: str


Decision = CloseValidity | StageMerge | SkipEdgeRow


@dataclass(frozen=True, slots=True)
class QueryRules:
    """What every read applies; edge types adjust it through on_query_rewrite.

    ``membership``: edge types that add a node to a world besides its parent.
    ``pierce``: edge types a query may follow out of its world.
    ``annotate``: edge types whose (incoming) links are reported on each node.
    """

    include_superseded: bool = False
    membership: frozenset[str] = field(default_factory=frozenset)
    pierce: frozenset[str] = field(default_factory=frozenset)
    annotate: frozenset[str] = field(default_factory=frozenset)

    def with_(self, **changes: Any) -> QueryRules:
        """A copy with some fields changed."""
        return replace(self, **changes)


class EdgeContext(Protocol):
    """Read-only facts a handler may ask the reconciler for."""

    def is_ancestor(self, ancestor: int, node: int) -> bool:
        """True if ``ancestor`` is ``node`` or contains it (parent chain or contains edges)."""
        ...

    def merge_status(self, a: int, b: int) -> MergeStatus | None:
        """The status of the same_as proposal for this pair, if any."""
        ...

    def reaches(self, edge_type: str, src: int, dst: int) -> bool:
        """True if current edges of ``edge_type`` lead from ``src`` to ``dst``."""
        ...


@runtime_checkable
class EdgeType(Protocol):
    """An edge type: a name and three handlers.

    An optional ``functional`` attribute (``BaseEdgeType`` has it, False) says the type holds one
    current dst per src; the consolidator's contradiction sweep reads it with ``is_functional``.
    """

    name: str

    def on_insert(self, edge: EdgeDraft, ctx: EdgeContext) -> Sequence[Decision]:
        """Decide what writing this edge does; raise EdgeRefused to stop the write."""
        ...

    def on_delete(self, edge: EdgeDraft, ctx: EdgeContext) -> Sequence[Decision]:
        """Decide what closing this edge does; raise EdgeRefused to keep it."""
        ...

    def on_query_rewrite(self, rules: QueryRules) -> QueryRules:
        """Adjust the rules every read applies."""
        ...


def is_functional(edge_type: EdgeType) -> bool:
    """True if the type says it holds one current dst per src (``functional = True``)."""
    return getattr(edge_type, "functional", False) is True


class BaseEdgeType:
    """Sensible defaults: no self-loops, no side effects, no query change.

    Subclass it to register a custom edge type::

        class Mentors(BaseEdgeType):
            name = "mentors"
            def on_insert(self, edge, ctx):
                super().on_insert(edge, ctx)  # keeps the self-loop check
                if edge.src.type != "Entity":
                    raise EdgeRefused("mentors links entities")
                return []

        db.register_edge_type(Mentors())

    Set ``functional = True`` on a type that holds one current dst per src ("lives_in"): the
    consolidator flags a src with several current ones (``consolidate/sweep.py``).
    """

    name: str = ""
    allow_self_loop: bool = False
    # One current dst per src (a person lives in one city): the consolidator's sweep
    # (consolidate/sweep.py) flags the dsts of a src holding several with contradicts edges.
    functional: bool = False

    def on_insert(self, edge: EdgeDraft, ctx: EdgeContext) -> Sequence[Decision]:
        """Refuse self-loops unless the type allows them."""
        if edge.src.nid == edge.dst.nid and not self.allow_self_loop:
            raise EdgeRefused(f"a {self.name} edge from a node to itself says nothing; link two different nodes")
        return []

    def on_delete(self, edge: EdgeDraft, ctx: EdgeContext) -> Sequence[Decision]:
        """Closing the edge has no side effect by default."""
        return []

    def on_query_rewrite(self, rules: QueryRules) -> QueryRules:
        """Reads are unchanged by default."""
        return rules
