"""The contradiction sweep: several current values where one is allowed get ``contradicts`` edges.

Two places say "one value at a time":

* an edge type registered with ``functional = True`` (``edges.BaseEdgeType``): a src with
  current edges of that type to several dsts has its dsts flagged pairwise;
* a fact on a functional slot (``write/facts.py``: "lives in", "works at", "job title"): two
  current facts of one subject's slot, in one scope, with different values of the same kind. The
  write path supersedes or contradicts a value it sees arrive, so these are values that came by
  other paths: an import from another device, a fact written by hand, a queue drained out of order.

Nothing else is flagged: a slot of many values ("visited") never, a superseded value never (it is
no longer current). Each flag is an ordinary edge through the ``contradicts`` handler, from the
later value (valid time, then written order) to the earlier, with ``{"sweep": <type or slot>}``;
a pair already linked by ``contradicts`` either way is left alone, so a rerun adds nothing.
"""

from __future__ import annotations

import itertools
from collections import defaultdict
from collections.abc import Collection, Iterable
from typing import NamedTuple

from ..edges.base import is_functional
from ..store import graph_rows, queries
from ..text.extract import value_kind
from ..text.names import normalise_alias
from ..text.slots import slot_key
from ..write.writer import Writer
from .batches import BATCH, Link, Progress, check_options, write_links

CONTRADICTS = "contradicts"


def sweep(
    writer: Writer,
    *,
    dry_run: bool = False,
    progress: Progress | None = None,
    batch: int = BATCH,
    near: Collection[int] | None = None,
) -> int:
    """Flag the conflicts on functional edge types and fact slots; how many edges (would be, with ``dry_run``).

    ``progress(done, total)`` runs after each committed batch of ``batch`` edges. ``near``: only the
    conflicts these nodes take part in (as a fact, or as the src of a functional edge), found through the
    slot's alias (``text/slots.slot_key``) rather than by reading every current fact: what a sync brought
    (sync/replicas.py). A fact written by hand without that alias is then found by a whole sweep only.
    """
    size = check_options(dry_run, batch)
    return write_links(writer, conflicts(writer, near), dry_run=dry_run, progress=progress, batch=size)


def conflicts(writer: Writer, near: Collection[int] | None = None) -> list[Link]:
    """The ``contradicts`` edges the sweep would write (``near``: see ``sweep``), edge types first, then facts."""
    registry = writer.reconciler.registry
    flagged = {frozenset(pair) for pair in graph_rows.linked_pairs(writer.graph, CONTRADICTS)}
    found: list[Link] = []
    for name in registry.names():
        if is_functional(registry.get(name)):
            found.extend(_pairs(_functional_edges(writer, name, near), flagged))
    found.extend(_pairs(_functional_facts(writer, near), flagged))
    return found


class Claim(NamedTuple):
    """One value in a group that allows one, ordered by ``order``."""

    order: tuple[str, int]
    nid: int
    value: tuple[str, str]  # (value casefolded, value_kind) of a fact; ("#<nid>", "node") of an edge's dst
    label: str  # the edge type or the slot, kept in the flag's props


def _functional_edges(writer: Writer, edge_type: str, near: Collection[int] | None) -> list[list[Claim]]:
    """The dsts of each src (of ``near``) holding several current edges of ``edge_type``, in written order."""
    dsts: dict[int, dict[int, None]] = defaultdict(dict)
    for src, dst in graph_rows.current_pairs(writer.conn, edge_type, None if near is None else list(near)):
        dsts[src][dst] = None
    return [
        [Claim(("", d), d, (f"#{d}", "node"), edge_type) for d in sorted(ends)]
        for _, ends in sorted(dsts.items())
        if len(ends) > 1
    ]


def _functional_facts(writer: Writer, near: Collection[int] | None) -> list[list[Claim]]:
    """The current facts of each (world, subject, slot) holding several values, by valid time then written order.

    With ``near``, only the groups holding one of those nodes.
    """
    conn = writer.conn
    if near is None:
        rows = graph_rows.current_facts(conn)
    else:  # the slots of the near facts, through the alias each fact of a slot carries
        keys = {
            normalise_alias(slot_key(subject, slot))
            for _, _, subject, slot, _, _ in graph_rows.current_facts(conn, list(near))
        }
        peers = [nid for nid, _ in queries.nids_by_alias(conn, sorted(keys), "Fact")] if keys else []
        rows = graph_rows.current_facts(conn, [*near, *peers]) if keys else []
    groups: dict[tuple[int, str, str], list[Claim]] = defaultdict(list)
    for nid, world, subject, slot, value, valid_at in rows:
        claim = Claim((valid_at, nid), nid, (value.strip().casefold(), value_kind(value)), slot)
        groups[(world, subject.casefold(), slot.casefold())].append(claim)
    chosen = None if near is None else set(near)
    return [
        facts
        for _, facts in sorted(groups.items())
        if len({c.value for c in facts}) > 1 and (chosen is None or any(c.nid in chosen for c in facts))
    ]


def _pairs(groups: Iterable[list[Claim]], flagged: set[frozenset[int]]) -> list[Link]:
    """Later -> earlier ``contradicts`` for each conflicting pair of a group not flagged yet (``flagged`` grows).

    Two values conflict when they differ and, for facts, are of one kind: "3 deadlines" is no value
    of "deadline: April 25" (the write path's rule, ``write/facts.py``).
    """
    out: list[Link] = []
    for group in groups:
        for a, b in itertools.combinations(sorted(group), 2):  # a is the earlier of the two
            pair = frozenset((a.nid, b.nid))
            if pair in flagged or a.value[0] == b.value[0] or a.value[1] != b.value[1]:
                continue
            flagged.add(pair)
            out.append((b.nid, a.nid, CONTRADICTS, {"sweep": a.label}))
    return out
