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

import json
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from ..store import queries, traverse
from ..store.connection import as_int
from ..store.rows import Store
from .reconciler import EdgeSpec, Txn, normalise_alias
from .resolver import Ambiguous, Candidate, Mention, Resolution, Resolved, Resolver, Tiebreaker

if TYPE_CHECKING:
    from ..db import WorldDB

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


def resolve_entity(
    db: WorldDB,
    txn: Txn,
    resolver: Resolver,
    mention: Mention,
    *,
    world: int,
    valid_at: str | None,
    props: Mapping[str, Any] | None,
    source: str | None,
    tiebreaker: Tiebreaker | None = None,
) -> tuple[str, Resolution]:
    """The entity ``mention`` names in ``world``: reused on an exact match, else written and proposed."""
    result = resolver.resolve(mention, world=world, tiebreaker=tiebreaker)
    store = db._store
    if isinstance(result, Resolved) and result.tier == "exact":
        add_aliases(txn, store, store.resolve(result.match.entity), mention.aliases, source)
        return result.match.entity, result
    fields = {"kind": mention.kind, "context": mention.context, **(props or {})}
    written = db.write(
        mention.name,
        world=store.header(world).id.hex(),
        type="Entity",
        name=mention.name,
        valid_at=valid_at,
        aliases=(mention.name, *mention.aliases),
        props={k: v for k, v in fields.items() if v is not None},
    )
    stage(txn, store, store.resolve(written), result, mention.name)
    return written, result


def stage(txn: Txn, store: Store, nid: int, result: Resolution, name: str) -> int:
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

_NEIGHBOURHOOD = """
with new(nid) as (select nid from node where nid > ?1 and nid <= ?2),
hop1(nid) as (
  select nid from new
  union select e.dst from edge as e join new on e.src = new.nid
    where e.type = 'refers_to' and e.invalid_at is null and e.expired_at is null
  union select e.src from edge as e join new on e.dst = new.nid
    where e.type = 'refers_to' and e.invalid_at is null and e.expired_at is null),
through(nid) as (select h.nid from hop1 as h join node as n on n.nid = h.nid where n.type != 'Entity'),
hop2(nid) as (
  select nid from hop1
  union select e.dst from edge as e join through as t on e.src = t.nid
    where e.type = 'refers_to' and e.invalid_at is null and e.expired_at is null
  union select e.src from edge as e join through as t on e.dst = t.nid
    where e.type = 'refers_to' and e.invalid_at is null and e.expired_at is null)
select h.nid from hop2 as h join node as n on n.nid = h.nid where n.type = 'Entity' and n.body is not null
order by h.nid
"""


def neighbourhood(db: WorldDB, after: int, upto: int) -> list[int]:
    """Entities within two refers_to hops of the nodes with nid in (after, upto].

    Hops go through turns, facts and other non-entities only: through an entity they would reach
    every turn that names it (the speaker's entity names them all), and turns are not identities.
    """
    return [as_int(nid) for (nid,) in db._conn.execute(_NEIGHBOURHOOD, (after, upto))]


def _partners(db: WorldDB, members: set[int]) -> set[int]:
    """Every node that has a proposal, of any status, with one of ``members``."""
    listed = json.dumps(sorted(members))
    rows = db._conn.execute(
        "select a, b from merge_proposal where a in (select value from json_each(?1)) "
        "or b in (select value from json_each(?1))",
        (listed,),
    )
    return {as_int(n) for row in rows for n in row}


def pending(db: WorldDB) -> tuple[int, int]:
    """(watermark, newest nid): re-resolution has work while the first is below the second."""
    mark = int(db._store.meta_values((WATERMARK,)).get(WATERMARK) or 0)
    return mark, db._store.max_nid()


def add_aliases(txn: Txn, store: Store, nid: int, aliases: Iterable[str], source: str | None) -> None:
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


def _aliased(store: Store) -> list[str]:
    """The meta keys of the entities waiting to be re-resolved for a new alias."""
    return store.meta_keys(ALIASED)


def recluster_pass(db: WorldDB, resolver: Resolver, *, batch: int = RECLUSTER_BATCH) -> tuple[int, bool]:
    """One transaction: re-resolve the neighbourhood of up to ``batch`` new nodes; (proposals staged, done).

    The first pass also re-resolves the entities that were given an alias since the last one.
    """
    store = db._store
    if pending(db)[0] >= pending(db)[1] and not _aliased(store):
        return 0, True  # read-only check first: an idle Consolidator takes no write lock
    with db._txn() as txn:
        resolver.index.ready()
        mark, top = pending(db)
        upto = min(top, mark + batch)
        db._settle(indexes=False)
        entities = neighbourhood(db, mark, upto) if mark < top else []
        marks = _aliased(store)
        aliased = sorted({int(key[len(ALIASED) :]) for key in marks} - set(entities))
        live = queries.with_text(db._conn, aliased)  # purged entities are not resolved again
        staged = sum(_reresolve(db, txn, resolver, nid) for nid in [*entities, *live])
        store.set_meta([(WATERMARK, str(max(mark, upto)))])
        store.delete_meta(marks)
    return staged, upto >= top


def _reresolve(db: WorldDB, txn: Txn, resolver: Resolver, nid: int) -> int:
    """Resolve every name of one entity again, passing over its class and everyone it was paired with."""
    store = db._store
    members = traverse.closure(nid, store.same_as_neighbours)
    exclude = members | _partners(db, members)
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
