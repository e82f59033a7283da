"""Replay the store's history and recompute every world root it ever logged.

``root_log`` records each world's root after every commit that changed it. This module
rebuilds those roots from the immutable rows (node and edge ids, slots, creation times) and
``state_log`` (every later change of a projection), in time order, keeping each world's
Merkle tree in memory and rehashing only the paths a change touches, so a whole store's
history costs O(changes x depth x log fanout) rather than one full recomputation per logged
root. ``verify --deep`` and ``WorldDB.verify_root_history`` both read its result.

A logged root names the state at its commit time. Several commits may share a timestamp;
only the last root each world logged at that time is checked, as only it is nameable by time
(``WorldDB.root(as_of=...)`` reads the same one).
"""

from __future__ import annotations

import bisect
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from sys import intern

import apsw

from .hashing import EMPTY_TREE, edge_leaf, inner, state_bytes, world_root
from .rows import node_state_bytes


@dataclass
class _Tree:
    """One world's member tree in memory; ``set`` marks a slot, ``top`` rehashes marked paths."""

    levels: list[list[bytes]] = field(default_factory=lambda: [[]])
    dirty: set[int] = field(default_factory=set)

    def set(self, slot: int, leaf: bytes) -> None:
        leaves = self.levels[0]
        if slot < len(leaves):
            leaves[slot] = leaf
        else:  # slots arrive in order; a gap is filled with the empty tree and reported by the caller
            leaves.extend([EMPTY_TREE] * (slot - len(leaves)))
            leaves.append(leaf)
        self.dirty.add(slot)

    def top(self) -> bytes:
        """The tree's top after the marked leaves changed (the shape of merkle.compute_levels).

        A position new at some level always sits above a new, hence marked, position below it,
        so rehashing the parents of marked positions level by level covers growth too.
        """
        if not self.levels[0]:
            return EMPTY_TREE
        marked, level = self.dirty, 0
        while len(self.levels[level]) > 1:
            if len(self.levels) == level + 1:
                self.levels.append([])
            below, above = self.levels[level], self.levels[level + 1]
            above.extend([EMPTY_TREE] * ((len(below) + 1) // 2 - len(above)))
            parents = {i >> 1 for i in marked}
            for p in parents:
                left = below[2 * p]
                above[p] = inner(left, below[2 * p + 1]) if 2 * p + 1 < len(below) else left
            marked, level = parents, level + 1
        self.dirty = set()
        return self.levels[level][0]


@dataclass(frozen=True)
class Divergence:
    """A logged root that the history does not recompute to."""

    world: str  # the world's id, hex (the replay holds every node's id already)
    at: str
    logged: bytes
    recomputed: bytes


def replay(
    conn: apsw.Connection, *, world: int | None = None, progress: Callable[[int, int], None] | None = None
) -> tuple[int, list[Divergence]]:
    """Recompute every nameable logged root (of ``world`` only, if given), oldest first.

    Returns how many logged roots were checked and every one that did not recompute, in time order.
    """
    # nid -> (id, parent, slot, valid_at, created_at); only the store root has no parent and no slot
    nodes: dict[int, tuple[bytes, int | None, int | None, str, str]] = {}
    depth: dict[int, int] = {}
    created: dict[str, list[tuple[str, int]]] = defaultdict(list)  # time -> [(kind, ref)]
    for nid, raw, parent, slot, dep, valid_at, created_at in conn.execute(
        "select n.nid, n.id, n.parent, n.slot, n.depth, s.valid_at, s.created_at "
        "from node as n join node_state as s on s.nid = n.nid"
    ):
        # one string per distinct time: a commit's rows share theirs (a third of the replay's memory)
        nodes[nid] = (bytes(raw), parent, slot, intern(valid_at), intern(created_at))
        depth[nid] = dep
        created[created_at].append(("node", nid))
    edges: dict[int, tuple[bytes, int, int, str, str]] = {}
    for eid, raw, edge_world, slot, valid_at, created_at in conn.execute(
        "select eid, id, world, slot, valid_at, created_at from edge"
    ):
        edges[eid] = (bytes(raw), edge_world, slot, intern(valid_at), intern(created_at))
        created[created_at].append(("edge", eid))
    changed: dict[str, list[tuple[str, int, tuple[str | None, str | None, str | None, int]]]] = defaultdict(list)
    for kind, ref, at, invalid_at, closed_at, expired_at, retired in conn.execute(
        "select kind, ref, at, invalid_at, closed_at, expired_at, retired from state_log order by lid"
    ):
        changed[at].append((kind, ref, (invalid_at, closed_at, expired_at, int(retired or 0))))
    logged: dict[str, dict[int, tuple[bytes, int]]] = defaultdict(dict)  # time -> world -> last (root, size)
    grew: dict[int, tuple[list[int], list[str]]] = defaultdict(lambda: ([], []))  # world -> (sizes, times) logged
    for w, root, size, at in conn.execute("select world, root, size, at from root_log order by lid"):
        if world is None or w == world:
            logged[at][w] = (bytes(root), size)
        grew[w][0].append(size)
        grew[w][1].append(at)

    # A member enters its world's tree when it was created, or, if later, at the first logged root of that
    # world whose tree holds its slot: an import (ops/transfer.py) adopts members dated by their source,
    # before commits this store logged without them. Sizes only grow, so the first such root is a bisection.
    entering: dict[str, list[tuple[str, int]]] = defaultdict(list)
    outside: set[tuple[str, int]] = set()

    def enters(kind: str, ref: int, holder: int | None, slot: int | None, created_at: str) -> None:
        if holder is None or slot is None or holder not in grew:
            return
        sizes, at = grew[holder]
        first = bisect.bisect_right(sizes, slot)
        if first < len(at) and at[first] > created_at:
            entering[at[first]].append((kind, ref))
            outside.add((kind, ref))

    for nid, (_, parent, slot, _, created_at) in nodes.items():
        enters("node", nid, parent, slot, created_at)
    for eid, (_, edge_world, slot, _, created_at) in edges.items():
        enters("edge", eid, edge_world, slot, created_at)

    state: dict[tuple[str, int], tuple[str | None, str | None, str | None, int]] = {}
    trees: dict[int, _Tree] = defaultdict(_Tree)
    roots: dict[int, bytes] = {}
    dirty: set[int] = set()  # nodes whose own root must be recomputed

    def node_root(nid: int) -> bytes:
        raw, _, _, valid_at, created_at = nodes[nid]
        invalid_at, closed_at, expired_at, retired = state.get(("node", nid), (None, None, None, 0))
        tree = trees.get(nid)
        top, size = (tree.top(), len(tree.levels[0])) if tree is not None else (EMPTY_TREE, 0)
        return world_root(
            raw, node_state_bytes(valid_at, invalid_at, closed_at, created_at, expired_at, retired), top, size
        )

    def edge_leaf_now(eid: int) -> bytes:
        raw, _, _, valid_at, created_at = edges[eid]
        invalid_at, closed_at, expired_at, _ = state.get(("edge", eid), (None, None, None, 0))
        return edge_leaf(raw, state_bytes(valid_at, invalid_at, closed_at, created_at, expired_at))

    def touch(kind: str, ref: int) -> None:
        """A node's root must be recomputed; an edge's leaf is rehashed into its world's tree."""
        if kind == "node":
            dirty.add(ref)
        elif (kind, ref) not in outside:
            _, edge_world, slot, _, _ = edges[ref]
            trees[edge_world].set(slot, edge_leaf_now(ref))
            dirty.add(edge_world)

    times = sorted(set(created) | set(changed) | set(logged) | set(entering))
    checked, out = 0, []
    for step, at in enumerate(times):
        for kind, ref in created.get(at, ()):
            touch(kind, ref)
        for kind, ref, values in changed.get(at, ()):
            state[(kind, ref)] = values
            touch(kind, ref)
        for kind, ref in entering.get(at, ()):
            outside.discard((kind, ref))
            touch(kind, ref)
        # every ancestor of a change changes too; deepest first, as a child's root is a leaf of its parent
        for nid in list(dirty):
            parent = nodes[nid][1]
            while parent is not None and parent not in dirty:
                dirty.add(parent)
                parent = nodes[parent][1]
        for nid in sorted(dirty, key=lambda n: -depth[n]):
            roots[nid] = node_root(nid)
            _, parent, slot, _, _ = nodes[nid]
            if parent is not None and slot is not None and ("node", nid) not in outside:
                trees[parent].set(slot, roots[nid])
        dirty.clear()
        for w, (root, size) in logged.get(at, {}).items():
            checked += 1
            tree = trees.get(w)
            now = roots.get(w)
            if now != root or (len(tree.levels[0]) if tree else 0) != size:
                out.append(Divergence(nodes[w][0].hex() if w in nodes else f"#{w}", at, root, now or b""))
        if progress is not None and step % 1000 == 0:
            progress(step, len(times))
    return checked, out
