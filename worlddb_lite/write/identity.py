"""What the resolver's findings write: the entity a mention names, and same_as proposals, never a merge.

``resolve_entity``: an exact (tier 1) match in the world is that entity (the mention's other names
are added to it as aliases). Anything else writes a new entity, and a lower-tier or ambiguous
match stages one pending same_as proposal per identity, with the tier and score that found it.
All in the caller's transaction.

``recluster``: after ingests, re-resolves the entities within two refers_to hops of every node
written since the last pass (a watermark in ``meta``), to catch identities that only became
visible later: the alias "my manager" added to Sarah by "my manager, Sarah" makes an earlier
"my manager" entity an exact match. It runs in a transaction of its own, off the ingest's
commit path (the Consolidator runs it between drains). A pair that already has a proposal,
pending, accepted or rejected, is never proposed again.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from .. import checks
from ..store import queries, traverse
from ..store.rows import Store
from ..text.dates import TimeLike, parse_time
from ..text.names import normalise_alias
from .reconciler import EdgeSpec, Transaction
from .resolver import Ambiguous, Candidate, Mention, Resolution, Resolved, Tiebreaker
from .writer import MemoryIn, Writer

WATERMARK = "resolver_nid"  # meta key: nodes up to this nid have had their neighbourhood re-resolved
# meta key prefix: one row per entity given an alias after it was written, not yet re-resolved
# (a row each, so marking costs the same however many are waiting)
ALIASED = "resolver_aliased:"
RECLUSTER_BATCH = 5_000  # new nodes per recluster transaction


def matches(result: Resolution) -> list[Candidate]:
    """The identities a result proposes: its match, or its options."""
    if isinstance(result, Resolved):
        return [result.match]
    if isinstance(result, Ambiguous):
        return list(result.options)
    return []


def mention(name: object, aliases: object = (), context: object = None, kind: object = None) -> Mention:
    """A checked mention (clear errors for empty names, bad aliases, non-text context)."""
    return Mention(
        checks.required_text(name, "name").strip(),
        tuple(a.strip() for a in checks.aliases(aliases)),
        (checks.text(context, "context", required=False) or "").strip() or None,
        (checks.text(kind, "kind", required=False) or "").strip() or None,
    )


def resolve(writer: Writer, found: Mention, *, world: int | None, tiebreaker: Tiebreaker | None = None) -> Resolution:
    """Which known entity ``found`` is, among the entities directly in ``world`` (None: the whole store).

    Reads only.
    """
    return writer.resolver.resolve(found, world=world, tiebreaker=tiebreaker)


def resolve_in(
    writer: Writer,
    found: Mention,
    *,
    scope: str | None = None,
    world: str | None = None,
    valid_at: TimeLike | None = None,
    props: object = None,
    source: str | None = "resolver",
    tiebreaker: Tiebreaker | None = None,
) -> tuple[str, Resolution]:
    """The entity ``found`` names in ``world`` (an id) or else the Scope ``scope``, written if need be; one write."""
    when = parse_time(valid_at, field="valid_at") if valid_at is not None else None
    extra = checks.props(props)
    with writer.transaction() as txn:
        parent = writer.store.resolve(world) if world is not None else writer.scope_nid(txn, scope)
        return resolve_entity(
            writer, txn, found, world=parent, valid_at=when, props=extra, source=source, tiebreaker=tiebreaker
        )


def resolve_entity(
    writer: Writer,
    txn: Transaction,
    mention: Mention,
    *,
    world: int,
    valid_at: str | None,
    props: Mapping[str, Any] | None,
    source: str | None,
    tiebreaker: Tiebreaker | None = None,
) -> tuple[str, Resolution]:
    """The entity ``mention`` names in ``world``: reused on an exact match, else written and proposed."""
    result = writer.resolver.resolve(mention, world=world, tiebreaker=tiebreaker)
    store = writer.store
    if isinstance(result, Resolved) and result.tier == "exact":
        add_aliases(txn, store, store.resolve(result.match.entity), mention.aliases, source)
        return result.match.entity, result
    fields = {"kind": mention.kind, "context": mention.context, **(props or {})}
    written = writer.write(
        MemoryIn(
            mention.name,
            world=store.header(world).id.hex(),
            type="Entity",
            name=mention.name,
            valid_at=valid_at,
            aliases=(mention.name, *mention.aliases),
            props={k: v for k, v in fields.items() if v is not None},
        )
    )
    stage(txn, store, store.resolve(written), result, mention.name)
    return written, result


def stage(txn: Transaction, store: Store, nid: int, result: Resolution, name: str) -> int:
    """Stage a pending same_as proposal from ``nid`` to each identity ``result`` found; returns how many."""
    options = matches(result)
    how = (
        " (chosen by the tiebreaker)"
        if isinstance(result, Resolved) and result.by_tiebreaker
        else f" (one of {len(options)} that fit)"
        if len(options) > 1
        else ""
    )
    specs = [
        EdgeSpec(
            "same_as",
            nid,
            store.resolve(o.entity),
            score=o.score,
            tier=o.tier,
            props={"reason": f"resolver, {o.tier} tier, score {o.score:.3f}: {name!r} ~ {o.name!r}{how}"},
        )
        for o in options
    ]
    specs = [s for s in specs if s.dst != nid]
    txn.add_edges(specs)
    return len(specs)


# ---- re-resolution after ingest -------------------------------------------------------


def pending(store: Store) -> tuple[int, int]:
    """(watermark, newest nid): re-resolution has work while the first is below the second."""
    mark = int(store.meta_values((WATERMARK,)).get(WATERMARK) or 0)
    return mark, store.max_nid()


def add_aliases(txn: Transaction, store: Store, nid: int, aliases: Iterable[str], source: str | None) -> None:
    """Record aliases of a node; an entity given a new one is re-resolved by the next ``recluster``.

    An alias adds no node, so the watermark of new nodes would not bring its entity back: the
    entity is marked instead. An alias it already has changes nothing.
    """
    known = {normalise_alias(a) for a in store.aliases(nid)}
    fresh = False
    for alias in aliases:
        txn.add_alias(nid, alias, source)
        fresh = fresh or normalise_alias(alias) not in known
    if not fresh or store.header(nid).type != "Entity":
        return
    store.set_meta([(f"{ALIASED}{nid}", "")])


def add_alias(writer: Writer, ref: str, alias: str, source: str | None) -> None:
    """Record another name ``ref`` is known by, in one transaction (``add_aliases``)."""
    with writer.transaction() as txn:
        add_aliases(txn, writer.store, writer.store.resolve(ref), [alias], source)


def _aliased(store: Store) -> list[str]:
    """The meta keys of the entities waiting to be re-resolved for a new alias."""
    return store.meta_keys(ALIASED)


def recluster(writer: Writer, *, batch: int = RECLUSTER_BATCH) -> int:
    """Re-resolve the entities within two hops of every node written since the last pass; proposals staged.

    One transaction per ``batch`` new nodes, so a long backlog never holds the write lock for long.
    """
    batch = checks.whole(batch, "batch", least=1, most=10_000_000)
    total = 0
    while True:
        staged, done = recluster_pass(writer, batch=batch)
        total += staged
        if done:
            return total


def recluster_pass(writer: Writer, *, batch: int = RECLUSTER_BATCH) -> tuple[int, bool]:
    """One transaction: re-resolve the neighbourhood of up to ``batch`` new nodes; (proposals staged, done).

    The first pass also re-resolves the entities that were given an alias since the last one.
    """
    store, resolver = writer.store, writer.resolver
    if pending(store)[0] >= pending(store)[1] and not _aliased(store):
        return 0, True  # read-only check first: an idle Consolidator takes no write lock
    with writer.transaction() as txn:
        resolver.index.ready()
        mark, top = pending(store)
        upto = min(top, mark + batch)
        entities = queries.entities_near_new(writer.graph, mark, upto) if mark < top else []
        marks = _aliased(store)
        aliased = sorted({int(key[len(ALIASED) :]) for key in marks} - set(entities))
        live = queries.with_text(writer.conn, aliased)  # purged entities are not resolved again
        staged = sum(_reresolve(writer, txn, nid) for nid in [*entities, *live])
        store.set_meta([(WATERMARK, str(max(mark, upto)))])
        store.delete_meta(marks)
    return staged, upto >= top


def _reresolve(writer: Writer, txn: Transaction, nid: int) -> int:
    """Resolve every name of one entity again, passing over its class and everyone it was paired with."""
    store, resolver = writer.store, writer.resolver
    members = traverse.closure(nid, store.same_as_neighbours)
    exclude = members | queries.proposal_partners(writer.conn, members)
    world = store.header(nid).parent
    staged = 0
    for name in resolver.index.names([nid]):
        result = resolver.resolve(
            Mention(name.norm, context=name.context, kind=name.kind), world=world, exclude=exclude
        )
        found = matches(result)
        if found:
            staged += stage(txn, store, nid, result, name.norm)
            exclude |= {store.resolve(m) for o in found for m in (*o.members, o.entity)}
    return staged
