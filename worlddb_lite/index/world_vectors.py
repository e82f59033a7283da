"""Composed world embeddings, kept incrementally at commit.

Every world's *effective* embedding (the one the vector index holds) pools its children's
effective embeddings; the world's *content* embedding (its own text) is the stable anchor the
pool is steered by. The pool is ``compose.compose`` (v1 mean, v2 attention with the anchor as
query) written as a normalised weighted sum: softmax's denominator and the final L2
normalisation cancel, so each child's weight ``exp(scale * (cos(anchor, child) - 1))`` depends
on that child alone. The unnormalised sum is stored per world, so a change below a world
costs O(1) there, and a commit recomposes exactly the ancestors of what it changed:
O(depth), never O(world size). A world without text has no anchor and mean-pools. The store's
root is not composed: it would pool everything, and no query wants it back.

Children join a world for good (history stays in the pool), so a delta is a new child vector
or a child's effective vector replaced by a new one; only an audited purge takes one out.

Every vector pooled is the one ``node_vec`` keeps (int8, ``store/vector_codes.py``): a new node's, an
anchor, a world's effective vector passed up. So a pool is the same sum whichever commit a child came
in, on every replica, and recomposing it from the stored rows (``verify --deep``) gives it back.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import TYPE_CHECKING

import numpy as np

from ..errors import InvalidInput
from ..models.compose import compose, default_scale
from ..store import vector_codes

if TYPE_CHECKING:
    from ..store.rows import Store
    from .vector_index import VectorLane

Delta = tuple[np.ndarray | None, np.ndarray | None]  # (old vector or None: joined, new vector or None: purged)


class Composer:
    """Writes leaf vectors and recomposes their ancestors, inside the caller's transaction."""

    def __init__(self, store: Store, lane: VectorLane, kind: str, dim: int) -> None:
        self.store = store
        self.lane = lane
        self.kind = kind
        self.dim = dim
        self.last_recomposed: list[int] = []  # worlds the last commit recomposed (for tests and stats)

    def commit(self, new_vectors: Sequence[tuple[int, np.ndarray]]) -> None:
        """Index new nodes' vectors and bring every affected world's effective vector up to date."""
        if not new_vectors:
            self.last_recomposed = []
            return
        state = self.lane.begin()  # refuses a handle whose model the store no longer has
        inserts: dict[int, np.ndarray] = {}
        deltas: dict[int, list[Delta]] = {}
        levels: dict[int, set[int]] = {}
        kept = _kept(np.stack([vector for _, vector in new_vectors]))
        for (nid, _), vector in zip(new_vectors, kept, strict=True):
            inserts[nid] = vector
            self._push(nid, None, vector, deltas, levels)
        self._recompose(inserts, deltas, levels, state)

    def remove(self, nids: Collection[int]) -> None:
        """Drop purged nodes' vectors and pools, and recompose every world above them.

        ``nids`` must hold every descendant of each node in it (a purge erases whole subtrees),
        so only their topmost members leave a pool that stays. A world left with no pooled member
        falls back to its own content vector, or, without text, loses its vector too.
        """
        if not nids:
            self.last_recomposed = []
            return
        state = self.lane.begin()
        gone = set(nids)
        deltas: dict[int, list[Delta]] = {}
        levels: dict[int, set[int]] = {}
        for nid, vector in self.lane.table.vectors_of(sorted(gone)).items():
            if self.store.header(nid).parent not in gone:
                self._push(nid, vector, None, deltas, levels)
        self.lane.table.delete(gone)
        self._recompose({}, deltas, levels, state)

    def _recompose(
        self,
        inserts: dict[int, np.ndarray],
        deltas: dict[int, list[Delta]],
        levels: dict[int, set[int]],
        state: dict[str, str],
    ) -> None:
        """Apply the deltas world by world, deepest first, pushing each world's change to its parent."""
        updates: dict[int, np.ndarray] = {}
        dropped: list[int] = []
        recomposed: list[int] = []
        while levels:
            depth = max(levels)
            worlds = sorted(levels.pop(depth))
            pools = self.lane.table.pools(worlds)
            # a pooled world's stored vector is its normalised sum, kept (bit for bit): only worlds without
            # a pool yet, or whose pool cancelled out, need their vector read
            stored: dict[int, np.ndarray] = {}
            for world in worlds:
                unit = _normalised(pools[world][1]) if world in pools and world not in inserts else None
                if unit is not None:
                    stored[world] = _kept(unit[None, :])[0]
            stored.update(self.lane.table.vectors_of([w for w in worlds if w not in inserts and w not in stored]))
            started: list[tuple[int, np.ndarray | None, np.ndarray, int]] = []
            changed: list[tuple[int, np.ndarray, int]] = []
            for world in worlds:
                old = inserts.get(world, stored.get(world))
                if world in pools:
                    anchor, acc, members = pools[world]
                else:  # a leaf (or a textless world) gets its first child: its vector so far is its content
                    anchor, acc, members = old, np.zeros(self.dim, dtype=np.float64), 0
                changes = deltas.pop(world)
                for before, after in changes:
                    if after is not None:
                        acc += self._weighted(anchor, after)
                    if before is None:
                        members += 1
                    else:
                        acc -= self._weighted(anchor, before)
                    if after is None:
                        members -= 1
                if members == 0:  # its last pooled member was purged: the world is a leaf again
                    dropped.append(world)
                    if anchor is None:  # no text of its own either: it has no vector any more
                        self.lane.table.delete([world])
                        if old is not None:
                            self._push(world, old, None, deltas, levels)
                        recomposed.append(world)
                        continue
                    effective = anchor
                else:
                    fallback = next((a for _, a in reversed(changes) if a is not None), old)
                    effective = _kept(_unit(acc, anchor if anchor is not None else fallback)[None, :])[0]  # type: ignore[arg-type]
                    if world in pools:
                        changed.append((world, acc, members))
                    else:
                        started.append((world, anchor, acc, members))
                if world in inserts or old is None:
                    inserts[world] = effective
                else:
                    updates[world] = effective
                recomposed.append(world)
                self._push(world, old, effective, deltas, levels)
            self.lane.table.save_pools(started, changed)
        self.lane.table.drop_pools(dropped)
        self.lane.write(inserts, updates, state)
        self.last_recomposed = recomposed

    def _push(
        self,
        nid: int,
        old: np.ndarray | None,
        new: np.ndarray | None,
        deltas: dict[int, list[Delta]],
        levels: dict[int, set[int]],
    ) -> None:
        header = self.store.header(nid)
        if header.parent is None or self.store.header(header.parent).parent is None:
            return  # the root pools everything and is never searched: it is not composed
        deltas.setdefault(header.parent, []).append((old, new))
        levels.setdefault(header.depth - 1, set()).add(header.parent)

    def _weighted(self, anchor: np.ndarray | None, vector: np.ndarray) -> np.ndarray:
        weighted: np.ndarray = pool_weights(self.kind, anchor, vector[None, :])[0] * vector.astype(np.float64)
        return weighted


def pool_weights(kind: str, anchor: np.ndarray | None, children: np.ndarray) -> np.ndarray:
    """Unnormalised weights of unit child rows: 1 for a mean, exp(scale * (cos - 1)) for attention.

    The ``- 1`` keeps every weight in (0, 1] (cos <= 1), so float64 sums never overflow.
    """
    if kind == "mean" or anchor is None:
        return np.ones(children.shape[0], dtype=np.float64)
    cosines = children.astype(np.float64) @ anchor.astype(np.float64)
    return np.exp(default_scale(children.shape[1]) * (cosines - 1.0))


def compose_from_scratch(kind: str, anchor: np.ndarray | None, children: np.ndarray) -> np.ndarray:
    """One world's effective vector computed directly with ``compose.compose``.

    ``verify --deep`` compares the incremental sums with it. A world without text mean-pools.
    """
    fallback = anchor if anchor is not None else children[-1]
    try:
        return compose(kind if anchor is not None else "mean", fallback, children)
    except InvalidInput:  # the children cancel out: the composer keeps the fallback too
        return fallback


def _kept(rows: np.ndarray) -> np.ndarray:
    """Rows as ``node_vec`` gives them back (float32, int8-rounded)."""
    return vector_codes.decode(*vector_codes.encode(rows))


def _unit(acc: np.ndarray, fallback: np.ndarray) -> np.ndarray:
    """The normalised pool as float32; ``fallback`` if the pool cancelled to nothing (v and -v)."""
    unit = _normalised(acc)
    return fallback if unit is None else unit


def _normalised(acc: np.ndarray) -> np.ndarray | None:
    norm = float(np.linalg.norm(acc))
    if norm < 1e-9:
        return None
    unit: np.ndarray = (acc / norm).astype(np.float32)
    return unit
