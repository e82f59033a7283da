"""Replay the store's history and recompute every world root it ever logged.

``root_log`` records each world's root after every commit that changed it. This module
rebuilds those roots from the rows (node and edge ids, creation times; slots only for a file's
members from before version 10, the rest ordered by (created_at, ord, id) as the reconciler orders them)
and ``state_log`` (every later change of a projection, when an adopted row entered, what a merge
moved earlier), in time order, keeping each world's
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
from typing import Any

import apsw

from .hashing import EMPTY_TREE, edge_leaf, inner, state_bytes, world_root
from .rows import node_state_bytes


@dataclass
class _Tree:
    """One world's member tree in memory; ``set`` marks a slot, ``top`` rehashes marked paths.

    Slots below ``legacy`` hold the members of a file written before version 10 at their stored slots;
    the others follow in (created_at, ord, id) order (``place``), as the reconciler keeps them.
    """

    levels: list[list[bytes]] = field(default_factory=lambda: [[]])
    dirty: set[int] = field(default_factory=set)
    legacy: int = 0
    keys: list[tuple[str, int, bytes]] = field(default_factory=list)  # the ordered members' keys, in order
    where: dict[tuple[str, int], tuple[str, int, bytes]] = field(default_factory=dict)  # member -> its key

    def set(self, slot: int, leaf: bytes) -> None:
        leaves = self.levels[0]
        if slot < len(leaves):
            leaves[slot] = leaf
        else:  # slots arrive in order; a gap is filled with the empty tree and reported by the caller
            leaves.extend([EMPTY_TREE] * (slot - len(leaves)))
            leaves.append(leaf)
        self.dirty.add(slot)

    def place(self, member: tuple[str, int], key: tuple[str, int, bytes], leaf: bytes) -> None:
        """Put an ordered member's leaf at its key's place, moving it if its key changed."""
        leaves, base = self.levels[0], self.legacy
        if len(leaves) < base:  # the legacy slots are all filled before any ordered member arrives
            leaves.extend([EMPTY_TREE] * (base - len(leaves)))
        old = self.where.get(member)
        if old == key:
            at = base + bisect.bisect_left(self.keys, key)
            leaves[at] = leaf
            self.dirty.add(at)
            return
        low = len(leaves)
        if old is not None:
            i = bisect.bisect_left(self.keys, old)
            del self.keys[i]
            del leaves[base + i]
            low = base + i
        i = bisect.bisect_left(self.keys, key)
        self.keys.insert(i, key)
        leaves.insert(base + i, leaf)
        self.where[member] = key
        self.dirty.update(range(min(low, base + i), len(leaves)))

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
    # nid -> (id, parent, slot, valid_at, created_at, ord); only the store root has no parent and no slot
    nodes: dict[int, tuple[bytes, int | None, int | None, str, str, int]] = {}
    depth: dict[int, int] = {}
    for nid, raw, parent, slot, dep, valid_at, created_at, order in conn.execute(
        "select n.nid, n.id, n.parent, n.slot, n.depth, s.valid_at, s.created_at, n.ord "
        "from node as n join node_state as s on s.nid = n.nid"
    ):
        # one string per distinct time: a commit's rows share theirs (a third of the replay's memory)
        nodes[nid] = (bytes(raw), parent, slot, intern(valid_at), intern(created_at), order)
        depth[nid] = dep
    edges: dict[int, tuple[bytes, int, int, str, str, int]] = {}
    for eid, raw, edge_world, slot, valid_at, created_at, order in conn.execute(
        "select eid, id, world, slot, valid_at, created_at, ord from edge"
    ):
        edges[eid] = (bytes(raw), edge_world, slot, intern(valid_at), intern(created_at), order)
    legacy = {int(w): int(size) for w, size in conn.execute("select world, size from legacy_order")}

    # A merge may have moved a row's valid_at, created_at or ord (state_log's valid_was, created_was, ord_was):
    # before that entry the row had the value logged there, after it the next such value or the row's own.
    # Each entry carries the values in force from it on; a row starts from the first entry's earlier value.
    State = tuple[str | None, str | None, str | None, int]
    # (kind, ref, state, [valid_at, created_at, ord] from the entry on: filled in once the next merge is read)
    changed: dict[str, list[tuple[str, int, State, list[Any]]]] = defaultdict(list)
    entered: dict[tuple[str, int], str] = {}
    times: dict[tuple[str, int], list[Any]] = {}  # (kind, ref) -> [valid_at, created_at, ord] at the start
    pending: dict[tuple[str, int], list[list[Any]]] = defaultdict(list)  # entries waiting for "after" values
    rows = conn.execute(
        "select kind, ref, at, invalid_at, closed_at, expired_at, retired, entered, valid_was, created_was, ord_was "
        "from state_log order by lid"
    )
    for kind, ref, at, invalid_at, closed_at, expired_at, retired, came, *was in rows:
        key = (kind, ref)
        if came:
            entered.setdefault(key, at)
        after: list[Any] = [None, None, None]
        if any(w is not None for w in was):
            for i, value in enumerate(was):
                if value is None:
                    continue
                begun = times.setdefault(key, [None, None, None])
                if begun[i] is None:
                    begun[i] = value
                for earlier in pending[key]:  # the previous merge's values last until this one
                    if earlier[i] is None:
                        earlier[i] = value
            pending[key].append(after)
        changed[at].append((kind, ref, (invalid_at, closed_at, expired_at, int(retired or 0)), after))
    for key, entries in pending.items():  # the last merge's values are the row's own
        current = nodes[key[1]] if key[0] == "node" else edges[key[1]]
        for entry in entries:
            for i, column in enumerate((3, 4, 5)):
                if entry[i] is None:
                    entry[i] = current[column]

    def start_times(kind: str, ref: int) -> tuple[str, str, int]:
        """(valid_at, created_at, ord) of a row before any merge moved them."""
        row = nodes[ref] if kind == "node" else edges[ref]
        start = times.get((kind, ref), [None, None, None])
        return (
            row[3] if start[0] is None else start[0],
            row[4] if start[1] is None else start[1],
            row[5] if start[2] is None else start[2],
        )

    logged: dict[str, dict[int, tuple[bytes, int]]] = defaultdict(dict)  # time -> world -> last (root, size)
    grew: dict[int, tuple[list[int], list[str]]] = defaultdict(lambda: ([], []))  # world -> (sizes, times) logged
    for w, root, size, at in conn.execute("select world, root, size, at from root_log order by lid"):
        if world is None or w == world:
            logged[at][w] = (bytes(root), size)
        grew[w][0].append(size)
        grew[w][1].append(at)

    # A member enters its world's tree when it was created, or later when state_log says so: a sync or an
    # import adopted it, dated by its source, into a world this store held. Before version 10 an import left
    # no such entry: a legacy member enters at the first logged root of its world whose tree holds its slot
    # (sizes only grow, so that is a bisection).
    entering: dict[str, list[tuple[str, int]]] = defaultdict(list)
    outside: set[tuple[str, int]] = set()

    def enters(kind: str, ref: int, holder: int | None, slot: int | None) -> None:
        if holder is None or slot is None:
            return
        created_at = start_times(kind, ref)[1]
        came = entered.get((kind, ref))
        if came is None and slot < legacy.get(holder, 0) and holder in grew:
            sizes, at = grew[holder]
            first = bisect.bisect_right(sizes, slot)
            came = at[first] if first < len(at) else None
        when = created_at if came is None or came <= created_at else came
        entering[when].append((kind, ref))
        outside.add((kind, ref))

    for nid, (_, parent, slot, *_) in nodes.items():
        enters("node", nid, parent, slot)
    for eid, (_, edge_world, slot, *_) in edges.items():
        enters("edge", eid, edge_world, slot)

    state: dict[tuple[str, int], tuple[str | None, str | None, str | None, int]] = {}
    now_times: dict[tuple[str, int], tuple[str, str, int]] = {}  # (valid_at, created_at, ord) once a merge moved them
    trees: dict[int, _Tree] = {}
    roots: dict[int, bytes] = {}
    dirty: set[int] = set()  # nodes whose own root must be recomputed

    def tree_of(w: int) -> _Tree:
        tree = trees.get(w)
        if tree is None:
            tree = trees[w] = _Tree(legacy=legacy.get(w, 0))
        return tree

    def in_force(kind: str, ref: int) -> tuple[str, str, int]:
        found = now_times.get((kind, ref))
        return found if found is not None else start_times(kind, ref)

    def node_root(nid: int) -> bytes:
        raw = nodes[nid][0]
        valid_at, created_at, _ = in_force("node", nid)
        invalid_at, closed_at, expired_at, retired = state.get(("node", nid), (None, None, None, 0))
        tree = trees.get(nid)
        top, size = (tree.top(), len(tree.levels[0])) if tree is not None else (EMPTY_TREE, 0)
        return world_root(
            raw, node_state_bytes(valid_at, invalid_at, closed_at, created_at, expired_at, retired), top, size
        )

    def edge_leaf_now(eid: int) -> bytes:
        raw = edges[eid][0]
        valid_at, created_at, _ = in_force("edge", eid)
        invalid_at, closed_at, expired_at, _ = state.get(("edge", eid), (None, None, None, 0))
        return edge_leaf(raw, state_bytes(valid_at, invalid_at, closed_at, created_at, expired_at))

    def put(kind: str, ref: int, holder: int, slot: int, leaf: bytes) -> None:
        """A member's leaf into its world's tree: at its slot if legacy, else at its key's place."""
        tree = tree_of(holder)
        if slot < tree.legacy:
            tree.set(slot, leaf)
        else:
            _, created_at, order = in_force(kind, ref)
            tree.place((kind, ref), (created_at, order, (nodes[ref] if kind == "node" else edges[ref])[0]), leaf)

    def touch(kind: str, ref: int) -> None:
        """A node's root must be recomputed; an edge's leaf is rehashed into its world's tree."""
        if kind == "node":
            dirty.add(ref)
        elif (kind, ref) not in outside:
            _, edge_world, slot, *_ = edges[ref]
            put("edge", ref, edge_world, slot, edge_leaf_now(ref))
            dirty.add(edge_world)

    order = sorted(set(changed) | set(logged) | set(entering))
    checked, out = 0, []
    for step, at in enumerate(order):
        for kind, ref, values, moved in changed.get(at, ()):
            state[(kind, ref)] = values
            if moved[0] is not None:  # a merge: the times and place in force from here on
                now_times[(kind, ref)] = (moved[0], moved[1], moved[2])
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
            _, parent, slot, *_ = nodes[nid]
            if parent is not None and slot is not None and ("node", nid) not in outside:
                put("node", nid, parent, slot, roots[nid])
        dirty.clear()
        for w, (root, size) in logged.get(at, {}).items():
            checked += 1
            tree = trees.get(w)
            now = roots.get(w)
            if now != root or (len(tree.levels[0]) if tree else 0) != size:
                out.append(Divergence(nodes[w][0].hex() if w in nodes else f"#{w}", at, root, now or b""))
        if progress is not None and step % 1000 == 0:
            progress(step, len(order))
    return checked, out
