"""The thirteen default edge types. Each handler is a few lines and table-tested."""

from __future__ import annotations

from collections.abc import Sequence

from ..errors import CycleError, EdgeRefused, NotCurrent
from ..types import MAY_UPDATE, MAY_UPDATE_FROM, MAY_UPDATE_TO, MergeStatus
from .base import (
    BaseEdgeType,
    CloseValidity,
    Decision,
    EdgeContext,
    EdgeDraft,
    QueryRules,
    SkipEdgeRow,
    StageMerge,
)


class Contains(BaseEdgeType):
    """A world boundary: adds a node to a world besides its parent (e.g. a second scope)."""

    name = "contains"

    def on_insert(self, edge: EdgeDraft, ctx: EdgeContext) -> Sequence[Decision]:
        super().on_insert(edge, ctx)
        if ctx.is_ancestor(edge.dst.nid, edge.src.nid):
            raise CycleError(
                f"world {edge.src.id[:12]} cannot contain {edge.dst.id[:12]}: that is its own "
                "ancestor, and a world inside itself has no boundary; use refers_to to point at it"
            )
        return []

    def on_query_rewrite(self, rules: QueryRules) -> QueryRules:
        return rules.with_(membership=rules.membership | {self.name})


class RefersTo(BaseEdgeType):
    """A reference that pierces containment: queries may follow it out of their world."""

    name = "refers_to"

    def on_query_rewrite(self, rules: QueryRules) -> QueryRules:
        return rules.with_(pierce=rules.pierce | {self.name})


class Supersedes(BaseEdgeType):
    """src replaces dst: closes dst's validity at src's valid time, only ever tightening."""

    name = "supersedes"

    def on_insert(self, edge: EdgeDraft, ctx: EdgeContext) -> Sequence[Decision]:
        super().on_insert(edge, ctx)
        if edge.dst.expired_at is not None:
            raise NotCurrent(f"{edge.dst.id[:12]} was retracted, so nothing of it is left to supersede")
        if edge.src.valid_at < edge.dst.valid_at:
            newer = "the new version" if edge.src.id.startswith("(") else edge.src.id[:12]
            raise EdgeRefused(
                f"{newer} would be true from {edge.src.valid_at}, before the version it supersedes "
                f"({edge.dst.valid_at}); give a valid time at or after that, or record the pair with contradicts"
            )
        if edge.dst.invalid_at is not None and edge.dst.invalid_at <= edge.src.valid_at:
            return []  # already closed at or before this point: validity only tightens
        return [CloseValidity(edge.dst.nid, edge.src.valid_at)]

    def on_delete(self, edge: EdgeDraft, ctx: EdgeContext) -> Sequence[Decision]:
        raise EdgeRefused(
            "a supersedes edge cannot be removed: the validity it closed never re-opens; write a new version instead"
        )

    def on_query_rewrite(self, rules: QueryRules) -> QueryRules:
        return rules.with_(annotate=rules.annotate | {self.name})


class SameAs(BaseEdgeType):
    """Identity: stages a merge proposal; the edge row exists only once a caller accepts it."""

    name = "same_as"

    def on_insert(self, edge: EdgeDraft, ctx: EdgeContext) -> Sequence[Decision]:
        super().on_insert(edge, ctx)
        status = ctx.merge_status(edge.src.nid, edge.dst.nid)
        if edge.accepting and status is MergeStatus.ACCEPTED:
            return []
        if status is MergeStatus.REJECTED:
            raise EdgeRefused(
                f"{edge.src.id[:12]} and {edge.dst.id[:12]} were judged different (merge rejected); "
                "that decision is final"
            )
        if status is not None:
            return [SkipEdgeRow(f"same_as already {status.value}")]
        if ctx.reaches("same_as", edge.src.nid, edge.dst.nid):
            raise EdgeRefused(
                f"{edge.src.id[:12]} and {edge.dst.id[:12]} are already one identity through accepted merges; "
                "there is nothing to propose"
            )
        a, b = sorted((edge.src.nid, edge.dst.nid))
        return [StageMerge(a, b, str(edge.props.get("reason", "same_as requested"))), SkipEdgeRow("pending")]

    def on_delete(self, edge: EdgeDraft, ctx: EdgeContext) -> Sequence[Decision]:
        raise EdgeRefused("an accepted merge is final; write a contradicts edge if it was wrong")


class Contradicts(BaseEdgeType):
    """Two claims that cannot both hold: keeps both sides and surfaces the conflict on reads."""

    name = "contradicts"

    def on_query_rewrite(self, rules: QueryRules) -> QueryRules:
        return rules.with_(annotate=rules.annotate | {self.name})


class Acyclic(BaseEdgeType):
    """An order relation: refuses an edge that would close a cycle."""

    def on_insert(self, edge: EdgeDraft, ctx: EdgeContext) -> Sequence[Decision]:
        super().on_insert(edge, ctx)
        if ctx.reaches(self.name, edge.dst.nid, edge.src.nid):
            raise CycleError(
                f"{self.name} from {edge.src.id[:12]} to {edge.dst.id[:12]} would close a cycle; "
                f"{self.name} is an order and cannot loop"
            )
        return []


class Implies(BaseEdgeType):
    """src being true makes dst true."""

    name = "implies"


class DerivedFrom(BaseEdgeType):
    """src was produced from dst (a summary from its turns, a fact from its source)."""

    name = "derived_from"


class InstanceOf(BaseEdgeType):
    """src is an instance of the class dst."""

    name = "instance_of"


class SubtypeOf(Acyclic):
    """src is a subclass of dst; the hierarchy has no cycles."""

    name = "subtype_of"


class Causes(BaseEdgeType):
    """src brought about dst."""

    name = "causes"


class Precedes(Acyclic):
    """src happened before dst; the order has no cycles."""

    name = "precedes"


class Duplicates(BaseEdgeType):
    """src restates dst (the earlier memory, the one kept): both stay; recall returns one of them.

    The consolidator's dedup writes it (consolidate/dedup.py) between memories of one type and scope;
    closing it undoes the link, and dedup does not link that pair again.
    """

    name = "duplicates"

    def on_insert(self, edge: EdgeDraft, ctx: EdgeContext) -> Sequence[Decision]:
        super().on_insert(edge, ctx)
        if edge.src.type != edge.dst.type:
            raise EdgeRefused(
                f"a {edge.src.type} cannot restate a {edge.dst.type}: duplicates links two memories of one type; "
                "use refers_to or derived_from"
            )
        return []


class MayUpdate(BaseEdgeType):
    """src, a person's newer memory telling of a change, is about the same thing as dst, their older note.

    System 2 writes it (write/updates.py); recall ranks src above dst and tells dst as possibly
    stale. It closes nothing: a similarity is no proof, only an understood slot supersedes.
    """

    name = MAY_UPDATE

    def on_insert(self, edge: EdgeDraft, ctx: EdgeContext) -> Sequence[Decision]:
        super().on_insert(edge, ctx)
        if edge.src.type not in MAY_UPDATE_FROM or edge.dst.type != MAY_UPDATE_TO:
            raise EdgeRefused(
                f"may_update links a newer memory ({' or '.join(MAY_UPDATE_FROM)}) to an older {MAY_UPDATE_TO}, "
                f"not a {edge.src.type} to a {edge.dst.type}; use refers_to for other links"
            )
        if edge.src.valid_at < edge.dst.valid_at:
            raise EdgeRefused(
                f"{edge.src.id[:12]} became true ({edge.src.valid_at}) before {edge.dst.id[:12]} "
                f"({edge.dst.valid_at}); only a newer memory may update an older one"
            )
        if edge.valid_at < edge.src.valid_at:
            raise EdgeRefused(
                f"a may_update link holds from its newer memory's time ({edge.src.valid_at}), not from "
                f"{edge.valid_at}; leave valid_at out, or give that time"
            )
        return []


DEFAULT_EDGE_TYPES: tuple[BaseEdgeType, ...] = (
    Contains(),
    RefersTo(),
    Supersedes(),
    SameAs(),
    Contradicts(),
    Implies(),
    DerivedFrom(),
    InstanceOf(),
    SubtypeOf(),
    Causes(),
    Precedes(),
    Duplicates(),
    MayUpdate(),
)
