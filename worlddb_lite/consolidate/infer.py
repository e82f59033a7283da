"""Inferred edges: the transitive closure of ``causes`` and ``subtype_of``, written as ordinary edges.

``infer(writer)`` reads the current edges of each type (both ends current), finds every node a
node reaches through them, and writes the missing a -> c edges with ``{"inferred": true}``
through the writer, so the type's handler runs as for any other edge (``subtype_of`` still
refuses a cycle). One pass reaches the whole closure: a rerun finds nothing to add. Cycles
terminate (each walk visits a node once) and never yield a self-loop. An inferred edge that was
later closed or retracted is not inferred again: someone withdrew that conclusion.
"""

from __future__ import annotations

from collections import defaultdict

from ..store import graph_rows
from ..write.writer import Writer
from .batches import BATCH, Link, Progress, check_options, write_links

TRANSITIVE = ("causes", "subtype_of")
INFERRED = {"inferred": True}


def infer(writer: Writer, *, dry_run: bool = False, progress: Progress | None = None, batch: int = BATCH) -> int:
    """Write the missing edges of the closure of ``causes`` and ``subtype_of``; how many (would be, with ``dry_run``).

    ``progress(done, total)`` runs after each committed batch of ``batch`` edges.
    """
    size = check_options(dry_run, batch)
    return write_links(writer, missing(writer), dry_run=dry_run, progress=progress, batch=size)


def missing(writer: Writer) -> list[Link]:
    """The closure's edges the store lacks, by type, then source, then target (nid order)."""
    conn = writer.graph
    out: list[Link] = []
    for edge_type in TRANSITIVE:
        pairs = graph_rows.current_pairs(conn, edge_type)
        known = graph_rows.linked_pairs(conn, edge_type)
        withdrawn = graph_rows.withdrawn_pairs(conn, edge_type, "inferred")
        out.extend(
            (src, dst, edge_type, INFERRED)
            for src, dst in closure(pairs)
            if (src, dst) not in known and (src, dst) not in withdrawn
        )
    return out


def closure(pairs: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Every (a, c) with a path a -> ... -> c of two edges or more, a != c, sorted; cycles terminate.

    One walk per source node: O(sources x edges) at worst, over a graph of causes or subtypes.
    """
    out_of: dict[int, list[int]] = defaultdict(list)
    for src, dst in pairs:
        out_of[src].append(dst)
    direct = set(pairs)
    found: list[tuple[int, int]] = []
    for start in sorted(out_of):
        seen = {start}
        frontier = list(out_of[start])
        reached: set[int] = set()
        while frontier:
            nid = frontier.pop()
            if nid in reached:
                continue
            reached.add(nid)
            frontier.extend(n for n in out_of.get(nid, ()) if n not in reached)
        found.extend((start, nid) for nid in sorted(reached - seen) if (start, nid) not in direct)
    return found
