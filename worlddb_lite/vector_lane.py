"""The vector lane: vectors durable in ``node_vec``, searched through an in-memory IVF index.

Why this shape (``bench/vectors.py`` has the numbers): sqlite-vec's flat vec0 scan took
~60 ms per query at 100k vectors and its quantized options lost recall, while an inverted
file over k-means partitions, scanned with numpy, meets recall@10 >= 0.95 in a few ms. So:

* ``node_vec`` is an ordinary table (readable in any sqlite3 shell; sqlite-vec's
  ``vec_distance_cosine`` reads its blobs) holding each vector, its partition (nearest
  centroid in ``vec_centroid`` when written) and a change sequence number.
* Each open store keeps an ``IvfIndex`` in memory, hydrated on the first search, and brought
  up to date before every search from the rows whose ``seq`` is newer than what it has seen,
  so writes from this or any other process are visible, and a rolled-back write never is.
  ``meta.vec_epoch`` changes when every vector changes at once (re-embedding, re-training):
  the index is then rebuilt.
* Below ``TRAIN_AT`` vectors there is one partition and search is exact. Centroids are
  trained when the store reaches ``TRAIN_AT`` and each time it doubles, inside the write
  transaction, up to ``AUTO_TRAIN_LIMIT`` (training costs seconds beyond that); past it,
  ``worlddb reindex`` re-trains. Rows written between trainings go to their nearest existing
  centroid, which keeps recall (measured) while partitions grow.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING

import numpy as np

from .vector_table import VectorTable

if TYPE_CHECKING:
    from .store import Store

TRAIN_AT = 8192
EXACT_ROWS = 16_384  # a filter keeping at most this many rows is answered exactly (a gather, ~ms)
MAX_WIDEN = 4.0  # a broad filter probes at most 4x the partitions an unfiltered query does
AUTO_TRAIN_LIMIT = 131_072
LISTS_PER_SQRT = 4.0  # nlist = 4 sqrt(n): partitions of ~sqrt(n)/4 rows
PROBE_SHARE = 0.1  # scan the nearest 10% of partitions (recall@10 >= 0.95 measured)
MIN_PROBE = 8
KMEANS_ITERATIONS = 8
SAMPLE_PER_LIST = 16
CHUNK = 65_536


def nlist_for(rows: int) -> int:
    """How many partitions to train for a store of ``rows`` vectors."""
    return int(min(4096, max(16, round(LISTS_PER_SQRT * math.sqrt(rows)))))


def nprobe_for(nlist: int) -> int:
    """How many partitions a query scans."""
    return int(min(nlist, max(MIN_PROBE, math.ceil(PROBE_SHARE * nlist))))


class IvfIndex:
    """Vectors grouped by partition, each partition a contiguous block of one matrix.

    A partition has spare room at its end; a full one moves to the end of the matrix with
    twice the room (amortised O(1) per insert), and the matrix is compacted when moves have
    left more dead space than live rows. Every row also knows its node's parent and type,
    so world and type filters apply while scanning.
    """

    def __init__(self, dim: int, centroids: np.ndarray | None) -> None:
        self.dim = dim
        self.centroids = centroids
        self.nlist = 1 if centroids is None else int(centroids.shape[0])
        self.matrix = np.zeros((0, dim), dtype=np.float32)
        self.row_nid = np.zeros(0, dtype=np.int64)  # -1: free slot
        self.start = np.zeros(self.nlist, dtype=np.int64)
        self.count = np.zeros(self.nlist, dtype=np.int64)
        self.room = np.zeros(self.nlist, dtype=np.int64)
        self.used = 0  # matrix rows handed out (live, spare or dead)
        self.size = 0
        # per node id (dense arrays grown on demand): position, partition, parent, type code
        self.pos = np.full(0, -1, dtype=np.int64)
        self.part = np.zeros(0, dtype=np.int32)
        self.parent = np.full(0, -1, dtype=np.int64)
        self.type_code = np.full(0, -1, dtype=np.int32)
        self.type_names: dict[str, int] = {}
        self.type_rows = np.zeros(0, dtype=np.int64)  # live rows per type code
        self.subtree = np.zeros(0, dtype=np.int64)  # per node id: indexed rows at or below it
        self.scope_of = np.full(0, -1, dtype=np.int64)  # per node id: its ancestor just below the root
        self.kids_at: np.ndarray = np.zeros(1, dtype=np.int64)  # CSR of children built at load ...
        self.kids: np.ndarray = np.zeros(0, dtype=np.int64)
        self.kids_since: dict[int, list[int]] = {}  # ... and children added after it
        self.seq = 0

    # ---- building -----------------------------------------------------------------

    def load(self, nids: np.ndarray, parts: np.ndarray, vectors: np.ndarray,
             parents: np.ndarray, types: Sequence[str]) -> None:
        """Fill an empty index in one go (hydration): sort by partition, give each 25% spare room.

        The store's root (no parent) is left out: it pools everything, so it would answer any query.
        """
        kept = parents >= 0
        nids, parts, vectors, parents = nids[kept], parts[kept], vectors[kept], parents[kept]
        types = [t for t, keep in zip(types, kept.tolist(), strict=True) if keep]
        order = np.lexsort((nids, parts))
        nids, parts, vectors = nids[order], parts[order], vectors[order]
        parents = parents[order]
        types = [types[i] for i in order]
        counts = np.bincount(parts, minlength=self.nlist).astype(np.int64)
        rooms = counts + np.maximum(4, counts // 4)
        starts = np.concatenate(([0], np.cumsum(rooms)[:-1])).astype(np.int64)
        total = int(rooms.sum())
        self.matrix = np.zeros((total, self.dim), dtype=np.float32)
        self.row_nid = np.full(total, -1, dtype=np.int64)
        offsets = np.arange(len(nids)) - np.repeat(np.concatenate(([0], np.cumsum(counts)[:-1])), counts)
        positions = starts[parts] + offsets
        self.matrix[positions] = vectors
        self.row_nid[positions] = nids
        self.start, self.count, self.room, self.used = starts, counts, rooms, total
        self.size = len(nids)
        self._grow_ids(int(max(nids.max(), parents.max())) + 1 if len(nids) else 0)
        self.pos[nids] = positions
        self.part[nids] = parts
        self.parent[nids] = parents
        self.type_code[nids] = [self._code(t) for t in types]
        self.type_rows = np.bincount(self.type_code[nids], minlength=len(self.type_names)).astype(np.int64)
        self.subtree = np.zeros(self.pos.shape[0], dtype=np.int64)
        above = nids.copy()
        while above.size:  # every row counts once at itself and at each ancestor
            np.add.at(self.subtree, above, 1)
            above = self.parent[above]
            above = above[above >= 0]
        self.scope_of = np.full(self.pos.shape[0], -1, dtype=np.int64)
        self.scope_of[nids] = self._scopes(nids)
        has_parent = parents >= 0
        by_parent = np.argsort(parents[has_parent], kind="stable")
        children, owners = nids[has_parent][by_parent], parents[has_parent][by_parent]
        self.kids = children
        self.kids_at = np.searchsorted(owners, np.arange(self.pos.shape[0] + 1)).astype(np.int64)
        self.kids_since = {}

    def _scopes(self, nids: np.ndarray) -> np.ndarray:
        """Each node's ancestor just below the root (itself for a scope), climbing all at once.

        The root is never indexed, so its parent reads as unknown (-1): a node whose parent
        has no parent is a scope.
        """
        node = nids.copy()
        scope = np.full(nids.shape[0], -1, dtype=np.int64)
        pending = np.flatnonzero(node >= 0)
        while pending.size:
            up = self.parent[node[pending]]
            is_scope = (up >= 0) & (self.parent[np.maximum(up, 0)] < 0)
            scope[pending[is_scope]] = node[pending[is_scope]]
            climbing = ~is_scope & (up >= 0)
            node[pending[climbing]] = up[climbing]
            pending = pending[climbing]
        return scope

    def upsert(self, nid: int, part: int, vector: np.ndarray, parent: int | None, type_: str) -> None:
        """Add a node's vector, or replace it (moving it if its partition changed); not the root's."""
        if parent is None:
            return
        self._grow_ids(max(nid, parent) + 1)
        counted = bool(self.pos[nid] >= 0)
        if counted:
            if self.part[nid] == part:
                self.matrix[self.pos[nid]] = vector
                return
            self._remove(nid)
        if self.count[part] == self.room[part]:
            self._move_to_end(part)
        position = int(self.start[part] + self.count[part])
        self.matrix[position] = vector
        self.row_nid[position] = nid
        self.count[part] += 1
        self.pos[nid], self.part[nid] = position, part
        self.parent[nid] = -1 if parent is None else parent
        code = self._code(type_)
        self.type_code[nid] = code
        if code >= self.type_rows.shape[0]:
            self.type_rows = np.concatenate([self.type_rows, np.zeros(code + 1 - self.type_rows.shape[0], np.int64)])
        self.type_rows[code] += 1
        self.size += 1
        self.scope_of[nid] = nid if self.parent[parent] < 0 else self.scope_of[parent]
        if not counted:  # a node's first vector: it joins its ancestors' subtrees for good
            above = nid
            while above >= 0:
                self.subtree[above] += 1
                above = int(self.parent[above])
            if parent is not None:
                self.kids_since.setdefault(parent, []).append(nid)

    def _remove(self, nid: int) -> None:
        part, position = int(self.part[nid]), int(self.pos[nid])
        last = int(self.start[part] + self.count[part] - 1)
        if position != last:  # keep the block dense: the last row takes the freed slot
            moved = int(self.row_nid[last])
            self.matrix[position] = self.matrix[last]
            self.row_nid[position] = moved
            self.pos[moved] = position
        self.row_nid[last] = -1
        self.count[part] -= 1
        self.pos[nid] = -1
        self.type_rows[self.type_code[nid]] -= 1
        self.size -= 1

    def _move_to_end(self, part: int) -> None:
        if self.used - self.size > max(self.size, 1024):
            self._compact()
        count = int(self.count[part])
        room = max(8, 2 * int(self.room[part]))
        self._reserve(self.used + room)
        old, new = int(self.start[part]), self.used
        self.matrix[new:new + count] = self.matrix[old:old + count]
        self.row_nid[new:new + count] = self.row_nid[old:old + count]
        self.row_nid[old:old + count] = -1
        self.pos[self.row_nid[new:new + count]] = np.arange(new, new + count)
        self.start[part], self.room[part] = new, room
        self.used += room

    def _compact(self) -> None:
        live = self.row_nid[: self.used] >= 0
        nids = self.row_nid[: self.used][live]
        self_parts = self.part[nids]
        vectors = self.matrix[: self.used][live]
        parents, codes = self.parent[nids], self.type_code[nids]
        names = {code: name for name, code in self.type_names.items()}
        self.load(nids, self_parts, vectors, parents, [names[int(c)] for c in codes])

    def _reserve(self, rows: int) -> None:
        if rows <= self.matrix.shape[0]:
            return
        capacity = max(rows, 2 * self.matrix.shape[0], 1024)
        matrix = np.zeros((capacity, self.dim), dtype=np.float32)
        matrix[: self.used] = self.matrix[: self.used]
        row_nid = np.full(capacity, -1, dtype=np.int64)
        row_nid[: self.used] = self.row_nid[: self.used]
        self.matrix, self.row_nid = matrix, row_nid

    def _grow_ids(self, needed: int) -> None:
        have = self.pos.shape[0]
        if needed <= have:
            return
        size = max(needed, 2 * have, 1024)
        self.pos = np.concatenate([self.pos, np.full(size - have, -1, dtype=np.int64)])
        self.subtree = np.concatenate([self.subtree, np.zeros(size - self.subtree.shape[0], dtype=np.int64)])
        self.scope_of = np.concatenate([self.scope_of, np.full(size - self.scope_of.shape[0], -1, dtype=np.int64)])
        self.part = np.concatenate([self.part, np.zeros(size - have, dtype=np.int32)])
        self.parent = np.concatenate([self.parent, np.full(size - have, -1, dtype=np.int64)])
        self.type_code = np.concatenate([self.type_code, np.full(size - have, -1, dtype=np.int32)])

    def _code(self, type_: str) -> int:
        return self.type_names.setdefault(type_, len(self.type_names))

    # ---- searching ----------------------------------------------------------------

    def search(self, query: np.ndarray, k: int, *, world: int | None = None,
               types: Iterable[str] | None = None) -> list[tuple[int, float]]:
        """(nid, cosine) of the ``k`` best rows, best first, inside ``world`` and of ``types``.

        The filters work inside the search, never by over-fetching. A filter that keeps at
        most ``EXACT_ROWS`` rows is served exactly from those rows (a world's members, a
        type's rows). A broader one is applied to every scanned block, and the probe widens
        by ``1 / sqrt(share kept)`` (at most ``MAX_WIDEN`` times) so the filtered neighbours,
        sparser than all neighbours, are still reached.
        """
        if self.size == 0:
            return []
        codes = None
        kept = float(self.size)
        if types is not None:
            codes = np.array(sorted({self.type_names[t] for t in types if t in self.type_names}), dtype=np.int32)
            if codes.size == 0:
                return []
            kept = float(self.type_rows[codes].sum())
        in_world = self.size if world is None else int(self.subtree[world]) if world < self.subtree.shape[0] else 0
        if in_world == 0 or kept == 0:
            return []
        if world is not None and in_world <= EXACT_ROWS:
            return self.exact(self.members(world), query, k, codes)
        if codes is not None and kept <= EXACT_ROWS:
            rows = np.flatnonzero(np.isin(self.type_code, codes) & (self.pos >= 0))
            if world is not None:
                rows = rows[self._inside(rows, world)]
            return self.exact(rows, query, k, None)
        share = (in_world / self.size) * (kept / self.size)
        widen = min(MAX_WIDEN, 1.0 / math.sqrt(max(share, 1e-9)))
        wanted = min(self.nlist, math.ceil(nprobe_for(self.nlist) * widen)) if self.nlist > 1 else 1
        return self._scan(query, k, world, codes, wanted)

    def _scan(self, query: np.ndarray, k: int, world: int | None, codes: np.ndarray | None,
              wanted: int) -> list[tuple[int, float]]:
        """Score the rows of the ``wanted`` partitions nearest the query that pass the filters."""
        found_ids: list[np.ndarray] = []
        found_scores: list[np.ndarray] = []
        filtered = world is not None or codes is not None
        for part in self._probe_order(query)[:wanted].tolist():
            count = int(self.count[part])
            if not count:
                continue
            lo = int(self.start[part])
            ids = self.row_nid[lo:lo + count]
            block = self.matrix[lo:lo + count]
            if filtered:
                keep = self._keep(ids, world, codes)
                ids, block = ids[keep], block[keep]
                if not ids.size:
                    continue
            found_ids.append(ids)
            found_scores.append(block @ query)
        if not found_ids:
            return []
        ids = np.concatenate(found_ids)
        scores = np.concatenate(found_scores)
        return [(int(ids[i]), float(scores[i])) for i in _top(scores, k)]

    def members(self, world: int) -> np.ndarray:
        """Node ids of every indexed row strictly below ``world`` (breadth first over children)."""
        out: list[np.ndarray] = []
        frontier = np.array([world], dtype=np.int64)
        while frontier.size:
            frontier = frontier[self.subtree[frontier] > 1] if frontier.size > 1 else frontier  # leaves: no kids
            parts = [self.kids[self.kids_at[f]:self.kids_at[f + 1]] for f in frontier.tolist()
                     if f + 1 < self.kids_at.shape[0]]
            parts += [np.array(self.kids_since[f], dtype=np.int64) for f in frontier.tolist() if f in self.kids_since]
            frontier = np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)
            frontier = frontier[self.pos[frontier] >= 0] if frontier.size else frontier
            out.append(frontier)
        return np.concatenate(out)

    def exact(self, nids: np.ndarray, query: np.ndarray, k: int,
              codes: np.ndarray | None) -> list[tuple[int, float]]:
        """Exact top ``k`` among the given node ids."""
        if codes is not None and nids.size:
            nids = nids[np.isin(self.type_code[nids], codes)]
        if nids.size == 0:
            return []
        scores = self.matrix[self.pos[nids]] @ query
        return [(int(nids[i]), float(scores[i])) for i in _top(scores, k)]

    def _probe_order(self, query: np.ndarray) -> np.ndarray:
        if self.centroids is None:
            return np.zeros(1, dtype=np.int64)
        return np.argsort(-(self.centroids @ query), kind="stable")

    def _keep(self, ids: np.ndarray, world: int | None, codes: np.ndarray | None) -> np.ndarray:
        """Which of ``ids`` pass the filters."""
        keep = np.ones(ids.shape[0], dtype=bool)
        if codes is not None:
            keep = self.type_code[ids] == codes[0] if codes.size == 1 else np.isin(self.type_code[ids], codes)
        if world is not None:
            keep &= self._inside(ids, world)
        return keep

    def _inside(self, ids: np.ndarray, world: int) -> np.ndarray:
        """Which of ``ids`` have ``world`` among their ancestors (climbing all rows at once)."""
        if self.scope_of[world] == world:  # a scope: one lookup per row instead of a climb
            return np.asarray((self.scope_of[ids] == world) & (ids != world))
        inside = np.zeros(ids.shape[0], dtype=bool)
        above = self.parent[ids]
        while True:
            alive = above >= 0
            if not alive.any():
                return inside
            inside |= above == world
            above = np.where(alive, self.parent[np.maximum(above, 0)], -1)


def _top(scores: np.ndarray, k: int) -> np.ndarray:
    """Indices of the ``k`` highest scores, best first."""
    if scores.shape[0] > k:
        part = np.argpartition(-scores, k - 1)[:k]
    else:
        part = np.arange(scores.shape[0])
    return part[np.argsort(-scores[part], kind="stable")]


def spherical_kmeans(sample: np.ndarray, nlist: int, *, iterations: int = KMEANS_ITERATIONS,
                     seed: int = 0) -> np.ndarray:
    """Unit centroids for cosine search: k-means with normalised means, deterministic seed."""
    rng = np.random.default_rng(seed)
    nlist = min(nlist, sample.shape[0])
    centroids = sample[rng.choice(sample.shape[0], nlist, replace=False)].copy()
    for _ in range(iterations):
        assigned = assign(sample, centroids)
        sums = np.zeros_like(centroids)
        np.add.at(sums, assigned, sample)
        norms = np.linalg.norm(sums, axis=1, keepdims=True)
        empty = norms[:, 0] == 0
        sums[empty] = sample[rng.choice(sample.shape[0], int(empty.sum()))]  # reseed empty lists
        norms[empty] = 1.0
        centroids = (sums / norms).astype(np.float32)
    return centroids


def assign(vectors: np.ndarray, centroids: np.ndarray | None) -> np.ndarray:
    """The nearest centroid of each row (all 0 before training), in chunks to bound memory."""
    if centroids is None:
        return np.zeros(vectors.shape[0], dtype=np.int32)
    out = np.empty(vectors.shape[0], dtype=np.int32)
    for lo in range(0, vectors.shape[0], 8192):
        out[lo:lo + 8192] = np.argmax(vectors[lo:lo + 8192] @ centroids.T, axis=1)
    return out


class VectorLane:
    """Writes vector rows and answers nearest-neighbour queries, keeping the two in step.

    Writes run inside the reconciler's transaction; searches use the in-memory index.
    """

    def __init__(self, store: Store, dim: int) -> None:
        self.store = store
        self.table = VectorTable(store.conn)
        self.dim = dim
        self._index: IvfIndex | None = None
        self._epoch: str | None = None
        self._centroids: tuple[str | None, np.ndarray | None] | None = None  # (epoch, centroids) for writes

    # ---- writing ------------------------------------------------------------------

    def write(self, inserts: dict[int, np.ndarray], updates: dict[int, np.ndarray],
              progress: Callable[[str], None] | None = None) -> None:
        """Store new and changed vectors with their partition and a fresh sequence number."""
        if not inserts and not updates:
            return
        centroids = self._write_centroids()
        seq = self.table.max_seq()
        for rows, write in ((inserts, self.table.insert), (updates, self.table.update)):
            if not rows:
                continue
            nids = list(rows)
            matrix = np.stack([rows[n] for n in nids]).astype(np.float32)
            parts = assign(matrix, centroids)
            write([(nid, int(part), seq + i + 1, matrix[i].tobytes())
                   for i, (nid, part) in enumerate(zip(nids, parts, strict=True))])
            seq += len(nids)
        total = int(self.store.meta_value("vec_rows") or 0) + len(inserts)
        self.store.set_meta([("vec_rows", str(total))])
        trained = int(self.store.meta_value("vec_trained_rows") or 0)
        if total >= max(TRAIN_AT, 2 * trained) and total <= AUTO_TRAIN_LIMIT:
            self.train(progress=progress)

    def _write_centroids(self) -> np.ndarray | None:
        epoch = self.store.meta_value("vec_epoch")
        if self._centroids is None or self._centroids[0] != epoch:
            self._centroids = (epoch, self.table.centroids())
        return self._centroids[1]

    def train(self, nlist: int | None = None, progress: Callable[[str], None] | None = None) -> dict[str, int]:
        """Train centroids on a sample of the vectors and re-assign every row (in the caller's transaction)."""
        say = progress or (lambda _m: None)
        total = self.table.count()
        lists = nlist or nlist_for(total)
        say(f"sampling {min(total, SAMPLE_PER_LIST * lists):,} of {total:,} vectors")
        sample = self.table.sample(SAMPLE_PER_LIST * lists, self.dim)
        say(f"training {lists:,} partitions")
        centroids = spherical_kmeans(sample, lists)
        self.table.save_centroids(centroids)
        done = 0
        for nids, matrix in self.table.chunks(CHUNK, self.dim):
            self.table.set_parts(zip(assign(matrix, centroids).tolist(), nids.tolist(), strict=True))
            done += len(nids)
            say(f"assigned {done:,}/{total:,}")
        self.store.set_meta([("vec_trained_rows", str(total)), ("vec_epoch", _new_epoch())])
        self._centroids = None
        return {"vectors": total, "partitions": int(centroids.shape[0])}

    def reset(self) -> None:
        """Forget every vector (re-embedding starts over): a new epoch, no centroids."""
        self.table.clear()
        self.store.set_meta([("vec_trained_rows", "0"), ("vec_rows", "0"), ("vec_epoch", _new_epoch())])
        self._centroids = None

    # ---- reading ------------------------------------------------------------------

    def forget(self) -> None:
        """Drop the in-memory index and cached centroids; the next search hydrates again."""
        self._index = None
        self._centroids = None

    def index(self) -> IvfIndex:
        """The in-memory index, current with every committed write."""
        epoch = self.store.meta_value("vec_epoch")
        if self._index is None or epoch != self._epoch:
            self._index = self._hydrate()
            self._epoch = epoch
        else:
            self._catch_up(self._index)
        return self._index

    def _hydrate(self) -> IvfIndex:
        index = IvfIndex(self.dim, self.table.centroids())
        nids, parts, seqs, matrix, parents, types = self.table.everything(self.dim)
        index.load(nids, parts, matrix, parents, types)
        index.seq = int(seqs.max()) if seqs.size else 0
        return index

    def _catch_up(self, index: IvfIndex) -> None:
        if self.table.max_seq() <= index.seq:
            return
        nids, parts, seqs, matrix, parents, types = self.table.everything(self.dim, index.seq)
        for i in np.argsort(seqs, kind="stable"):
            index.upsert(int(nids[i]), int(parts[i]), matrix[i], int(parents[i]) if parents[i] >= 0 else None,
                         types[i])
        index.seq = int(seqs.max())


def _new_epoch() -> str:
    import uuid

    return uuid.uuid4().hex
