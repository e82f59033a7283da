"""An in-memory inverted-file (IVF) index over unit vectors, with world and type filters.

A *partition* is the set of rows nearest one k-means centroid; a query scans the partitions
whose centroids are nearest to it. Each partition is one contiguous region of a matrix, cut
into *cells*: one per node type, and per scope for scopes big enough to filter on
(``BIG_SCOPE`` rows). An unfiltered query scores a whole region in one product; a filtered
one scores only the matching cells, contiguous rows at full speed, instead of gathering
rows one by one (a gather costs ~3x a contiguous scan here). Cells keep spare room; a full
one makes its partition move to the end of the matrix with more room (amortised O(1) per
insert), and the matrix is compacted when moves have left more dead rows than live ones.

Every row also knows its parent and scope (its ancestor just below the root), so a small
world's members are found by walking children, and a deep world is checked row by row.

Rows are held in 8 bits (``quantize``: each dimension divided by a spread, then int8 codes
times a per-row scale), a quarter of float32, with each row's quantization error. A search ranks
by the codes; with a ``source`` of exact vectors it re-scores every row whose error bound leaves
it a chance of the top ``k``, so it returns what scoring those rows would. Without one the codes'
scores are returned: the engine's rows are ``node_vec``'s own int8 codes (spread one, error ~1e-5),
so those are the exact scores of the vectors the file keeps (``vector_index``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence

import numpy as np

QUANTIZE_CHUNK = 2048  # rows coded at a time
LOAD_CHUNK = 16384  # rows copied into the index at a time when it loads: bounds the copy's extra memory
BIG_SCOPE = 8192  # a scope with more rows than this gets cells of its own
ROW_BUDGET = 1.5  # a probe scans up to 1.5x the rows nprobe average partitions hold (see _scan)
GATHER_COST = 3.0  # scoring a row gathered from anywhere costs ~3 rows scanned in a block (bench/lane.py)
BLOCK_COST = 30.0  # visiting one more block costs about as much as scanning 30 rows
MAX_WIDEN = 4.0  # a broad filter probes at most 4x the partitions an unfiltered query does
# An unfiltered query scans the nearest 0.8 * nlist^0.69 partitions: fitted to the recall@10 >= 0.95
# points measured on real text embeddings (bench/vectors.py: ~90 of 1,265 lists at 100k, ~190 of
# 4,000 at 1M), with a margin. Finer partitions need a smaller share of them.
PROBE_SCALE = 0.8
PROBE_POWER = 0.69
MIN_PROBE = 8
# float32 vectors of node ids, in their order (a row of NaN for a node without one)
Source = Callable[[np.ndarray], np.ndarray]
# writes the rows' codes and scales into the index's matrix and scales: (place of each row given, -1 for a
# row left out, matrix, scales)
Fill = Callable[[np.ndarray, np.ndarray, np.ndarray], None]


def quantize(vectors: np.ndarray, spread: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """int8 codes of float32 rows divided by ``spread`` (default ones), and per row (scale, error).

    Row ~ codes * scale * spread, off by ``error`` (the length of the difference), which bounds how
    far a unit query's score by the codes can be from its exact score (Cauchy-Schwarz).
    """
    vectors = np.asarray(vectors, dtype=np.float32)
    rows, dim = vectors.shape
    spread = np.ones(dim, dtype=np.float32) if spread is None else spread
    codes = np.empty((rows, dim), dtype=np.int8)
    scales = np.empty((rows, 2), dtype=np.float32)
    for lo in range(0, rows, QUANTIZE_CHUNK):  # in place, a chunk at a time: a few passes over cached rows
        part = vectors[lo : lo + QUANTIZE_CHUNK]
        work = part / spread
        peak = np.maximum(work.max(axis=1), -work.min(axis=1))
        scale = np.where(peak > 0, peak / 127.0, 1.0).astype(np.float32)
        work /= scale[:, None]
        np.rint(work, out=work)
        codes[lo : lo + QUANTIZE_CHUNK] = work
        work *= scale[:, None]
        work *= spread
        work -= part
        error = np.sqrt(np.einsum("ij,ij->i", work, work))
        scales[lo : lo + QUANTIZE_CHUNK, 0] = scale
        # a hair over the float32 arithmetic's own error, so the bound holds when it is used
        scales[lo : lo + QUANTIZE_CHUNK, 1] = error * 1.001 + 1e-5
    return codes, scales


def nprobe_for(nlist: int) -> int:
    """How many partitions an unfiltered query scans."""
    return int(min(nlist, max(MIN_PROBE, math.ceil(PROBE_SCALE * nlist**PROBE_POWER))))


class IvfIndex:
    """Rows in cells of partition regions of one matrix; search probes the nearest partitions."""

    def __init__(self, dim: int, centroids: np.ndarray | None, source: Source | None = None) -> None:
        self.dim = dim
        self.centroids = centroids
        self.source = source
        self.spread = np.ones(dim, dtype=np.float32)  # each dimension's divisor before coding (quantize)
        self.nlist = 1 if centroids is None else int(centroids.shape[0])
        self.matrix = np.zeros((0, dim), dtype=np.int8)  # the rows' codes (see quantize)
        self.scales = np.zeros((0, 2), dtype=np.float32)  # each row's (scale, error)
        self.row_nid = np.zeros(0, dtype=np.int64)  # -1: spare or dead
        self.used = 0  # matrix rows handed out (live, spare or dead)
        self.size = 0
        self.p_start = np.zeros(self.nlist, dtype=np.int64)  # each partition's region
        self.p_len = np.zeros(self.nlist, dtype=np.int64)
        self.p_rows = np.zeros(self.nlist, dtype=np.int64)  # live rows per partition
        self.start: list[int] = []  # cells
        self.count: list[int] = []
        self.room: list[int] = []
        self.cell_code: list[int] = []
        self.cell_scope: list[int] = []  # -1: rows of every scope without cells of its own
        self.cells_of: list[list[int]] = [[] for _ in range(self.nlist)]
        self.cell_key: dict[tuple[int, int, int], int] = {}
        self.big_scopes: set[int] = set()
        # per node id (dense arrays grown on demand)
        self.pos = np.full(0, -1, dtype=np.int64)
        self.cell = np.zeros(0, dtype=np.int64)
        self.part = np.zeros(0, dtype=np.int64)
        self.parent = np.full(0, -1, dtype=np.int64)
        self.scope_of = np.full(0, -1, dtype=np.int64)
        self.type_code = np.full(0, -1, dtype=np.int32)
        self.subtree = np.zeros(0, dtype=np.int64)  # indexed rows at or below each node
        self.type_names: dict[str, int] = {}
        self.type_rows: dict[int, int] = {}
        # children, for a small world's members: a CSR built at load, and the ones added since
        self.kids_at = np.zeros(1, dtype=np.int64)
        self.kids = np.zeros(0, dtype=np.int64)
        self.kids_since: dict[int, list[int]] = {}
        self.seq = 0

    # ---- building -----------------------------------------------------------------

    def load(
        self,
        nids: np.ndarray,
        parts: np.ndarray,
        codes_scales: tuple[np.ndarray, np.ndarray] | Fill,
        parents: np.ndarray,
        types: Sequence[str] | tuple[np.ndarray, Sequence[str]],
    ) -> None:
        """Fill the index in one go (hydration, compaction): regions laid out in partition order.

        The rows come quantized (``quantize``), as arrays or as a ``Fill`` that writes them into place
        once the layout is known (the kept index: no second copy of the codes). ``types``: each row's
        node type, or (a number per row, the names they number), as the kept index holds them. The
        store's root (no parent) is left out: it pools everything, so it would answer any query.
        """
        kept = parents >= 0
        if isinstance(types, tuple):  # numbered: one lookup per name, not per row
            numbered, listed = types
            ours = np.array([self._code(name) for name in listed], dtype=np.int64)
            codes = ours[numbered[kept]] if len(listed) else np.zeros(int(kept.sum()), dtype=np.int64)
        else:
            keeps = kept.tolist()
            codes = np.array([self._code(t) for t, keep in zip(types, keeps, strict=True) if keep], dtype=np.int64)
        rows = np.flatnonzero(kept)  # the vectors stay where they are: a masked copy was a second matrix
        nids, parents, parts = nids[kept], parents[kept], parts[kept].astype(np.int64)
        names, seq, spread = self.type_names, self.seq, self.spread
        self.__init__(self.dim, self.centroids, self.source)  # type: ignore[misc]
        self.type_names, self.seq, self.spread = names, seq, spread
        if not len(nids):
            return
        top = int(max(nids.max(), parents.max())) + 1
        self._grow_ids(top + max(top // 16, 1024))  # room for the next nodes' ids (filled with -1: resident)
        self.parent[nids] = parents
        self.type_code[nids] = codes
        self.scope_of[nids] = self._scopes(nids)
        above = nids.copy()
        while above.size:  # every row counts once at itself and at each ancestor
            np.add.at(self.subtree, above, 1)
            above = self.parent[above]
            above = above[above >= 0]
        scopes = np.unique(self.scope_of[nids])
        self.big_scopes = {int(x) for x in scopes[self.subtree[scopes] > BIG_SCOPE].tolist()}
        skeys = np.where(np.isin(self.scope_of[nids], list(self.big_scopes)), self.scope_of[nids], -1)
        # one int64 key per row, (partition, type, scope) in that order of significance, so the
        # sorted keys put a partition's cells next to each other
        if codes.max() < 1 << 12 and skeys.max() < (1 << 32) - 1 and parts.max() < 1 << 19:
            packed = (parts << 44) | (codes << 32) | (skeys + 1)
            unique_keys, cells = np.unique(packed, return_inverse=True)
            keys = np.stack([unique_keys >> 44, (unique_keys >> 32) & 0xFFF, (unique_keys & 0xFFFFFFFF) - 1], axis=1)
        else:  # beyond the packed key's range: the same order, sorted row-wise (slower)
            keys, cells = np.unique(np.stack([parts, codes, skeys], axis=1), axis=0, return_inverse=True)
        cells = cells.reshape(-1)
        counts = np.bincount(cells, minlength=len(keys)).astype(np.int64)
        rooms = counts + np.maximum(2, counts // 8)  # ~12% spare: a full cell moves its partition
        starts = np.concatenate(([0], np.cumsum(rooms)[:-1])).astype(np.int64)
        for cell, (part, code, skey) in enumerate(keys.tolist()):
            self.cell_key[(part, code, skey)] = cell
            self.cells_of[part].append(cell)
            self.cell_code.append(code)
            self.cell_scope.append(skey)
        self.start, self.count, self.room = starts.tolist(), counts.tolist(), rooms.tolist()
        for part, cells_here in enumerate(self.cells_of):
            if cells_here:  # keys are sorted by partition first: a partition's cells are adjacent
                self.p_start[part] = starts[cells_here[0]]
                self.p_len[part] = int(rooms[cells_here].sum())
        total = int(rooms.sum())
        capacity = _with_headroom(total)  # np.zeros is not resident until written: room costs address space only
        self.matrix = np.zeros((capacity, self.dim), dtype=np.int8)
        self.scales = np.zeros((capacity, 2), dtype=np.float32)
        self.row_nid = np.full(capacity, -1, dtype=np.int64)
        order = np.argsort(cells, kind="stable")
        offsets = np.arange(len(nids)) - np.repeat(np.concatenate(([0], np.cumsum(counts)[:-1])), counts)
        positions = np.empty(len(nids), dtype=np.int64)
        positions[order] = starts[cells[order]] + offsets
        if callable(codes_scales):
            where = np.full(kept.shape[0], -1, dtype=np.int64)
            where[rows] = positions
            codes_scales(where, self.matrix, self.scales)
        else:
            vectors, row_scales = codes_scales
            for lo in range(0, len(rows), LOAD_CHUNK):  # a chunk's gathered copy at a time, not all of them
                self.matrix[positions[lo : lo + LOAD_CHUNK]] = vectors[rows[lo : lo + LOAD_CHUNK]]
            self.scales[positions] = row_scales[rows]
        self.row_nid[positions] = nids
        self.used, self.size = total, len(nids)
        self.p_rows = np.bincount(parts, minlength=self.nlist).astype(np.int64)
        self.pos[nids], self.cell[nids], self.part[nids] = positions, cells, parts
        for code, rows in zip(*np.unique(codes, return_counts=True), strict=True):
            self.type_rows[int(code)] = int(rows)
        by_parent = np.argsort(parents, kind="stable")
        self.kids = nids[by_parent]
        self.kids_at = np.searchsorted(parents[by_parent], np.arange(self.pos.shape[0] + 1)).astype(np.int64)

    def set_centroids(self, centroids: np.ndarray) -> None:
        """Adopt centroids after partitions were split (same ones, moved, plus new ones at the end)."""
        extra = centroids.shape[0] - self.nlist
        if extra > 0:
            self.p_start = np.concatenate([self.p_start, np.zeros(extra, dtype=np.int64)])
            self.p_len = np.concatenate([self.p_len, np.zeros(extra, dtype=np.int64)])
            self.p_rows = np.concatenate([self.p_rows, np.zeros(extra, dtype=np.int64)])
            self.cells_of.extend([] for _ in range(extra))
        self.centroids = centroids
        self.nlist = int(centroids.shape[0])

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

    def upsert(
        self,
        nid: int,
        part: int,
        vector: np.ndarray,
        parent: int | None,
        type_: str,
        coded: tuple[np.ndarray, np.ndarray] | None = None,
    ) -> None:
        """Add a node's vector, or replace it (moving it if its cell changed); never the root's.

        ``coded``: the vector's codes and (scale, error), quantized already (many rows at once are
        coded in one pass; a row at a time costs ~100 µs).
        """
        if parent is None:
            return
        self._grow_ids(max(nid, parent) + 1)
        counted = bool(self.pos[nid] >= 0)
        code = self._code(type_)
        scope = int(self.scope_of[nid]) if counted else nid if self.parent[parent] < 0 else int(self.scope_of[parent])
        key = (part, code, scope if scope in self.big_scopes else -1)
        cell = self._cell(key)
        if coded is None:
            row_code, row_scales = quantize(np.asarray(vector, dtype=np.float32).reshape(1, -1), self.spread)
        else:
            row_code, row_scales = coded[0].reshape(1, -1), coded[1].reshape(1, -1)
        if counted:
            if self.cell[nid] == cell:
                self.matrix[self.pos[nid]], self.scales[self.pos[nid]] = row_code[0], row_scales[0]
                return
            self._remove(nid)
        if self.count[cell] == self.room[cell]:
            if self.used - self.size > max(self.size, 4096):
                self._compact()
                self._grow_ids(max(nid, parent) + 1)
                cell = self._cell(key)  # compaction renumbers cells
            if self.count[cell] == self.room[cell]:
                self._grow_partition(part, cell)
        position = self.start[cell] + self.count[cell]
        self.matrix[position], self.scales[position] = row_code[0], row_scales[0]
        self.row_nid[position] = nid
        self.count[cell] += 1
        self.p_rows[part] += 1
        self.pos[nid], self.cell[nid], self.part[nid] = position, cell, part
        self.type_code[nid] = code
        self.type_rows[code] = self.type_rows.get(code, 0) + 1
        self.size += 1
        if counted:
            return
        self.parent[nid], self.scope_of[nid] = parent, scope  # a node's first vector: it joins its ancestors
        above = nid
        while above >= 0:
            self.subtree[above] += 1
            above = int(self.parent[above])
        self.kids_since.setdefault(parent, []).append(nid)
        if scope not in self.big_scopes and self.subtree[scope] > BIG_SCOPE:
            self.big_scopes.add(scope)  # it outgrew the shared cells: give it its own
            self._compact()

    def _cell(self, key: tuple[int, int, int]) -> int:
        cell = self.cell_key.get(key)
        if cell is None:
            cell = len(self.cell_code)
            self.cell_key[key] = cell
            self.cell_code.append(key[1])
            self.cell_scope.append(key[2])
            self.cells_of[key[0]].append(cell)
            self.start.append(0)
            self.count.append(0)
            self.room.append(0)  # full: the first row grows the partition, which places the cell
        return cell

    def _remove(self, nid: int) -> None:
        cell, position = int(self.cell[nid]), int(self.pos[nid])
        last = self.start[cell] + self.count[cell] - 1
        if position != last:  # keep the cell dense: its last row takes the freed slot
            moved = int(self.row_nid[last])
            self.matrix[position], self.scales[position] = self.matrix[last], self.scales[last]
            self.row_nid[position] = moved
            self.pos[moved] = position
        self.row_nid[last] = -1
        self.count[cell] -= 1
        self.p_rows[self.part[nid]] -= 1
        self.pos[nid] = -1
        self.type_rows[int(self.type_code[nid])] -= 1
        self.size -= 1

    def _grow_partition(self, part: int, full: int) -> None:
        """Move a partition's region to the end of the matrix, with twice the room in ``full``."""
        cells = self.cells_of[part]
        rooms = [max(8, 2 * self.room[c]) if c == full else self.room[c] for c in cells]
        total = sum(rooms)
        self._reserve(self.used + total)
        at = self.used
        for cell, room in zip(cells, rooms, strict=True):
            old, count = self.start[cell], self.count[cell]
            self.matrix[at : at + count] = self.matrix[old : old + count]
            self.scales[at : at + count] = self.scales[old : old + count]
            moved = self.row_nid[old : old + count].copy()
            self.row_nid[old : old + count] = -1
            self.row_nid[at : at + count] = moved
            self.pos[moved] = np.arange(at, at + count)
            self.start[cell], self.room[cell] = at, room
            at += room
        self.p_start[part], self.p_len[part] = self.used, total
        self.used += total

    def _compact(self) -> None:
        """Lay everything out afresh: no dead rows, cells for every big scope."""
        live = self.row_nid[: self.used] >= 0
        nids = self.row_nid[: self.used][live]
        names = {code: name for name, code in self.type_names.items()}
        self.load(
            nids,
            self.part[nids].copy(),
            (self.matrix[: self.used][live], self.scales[: self.used][live]),
            self.parent[nids].copy(),
            [names[int(c)] for c in self.type_code[nids]],
        )

    def _reserve(self, rows: int) -> None:
        if rows <= self.matrix.shape[0]:
            return
        capacity = max(rows, 2 * self.matrix.shape[0], 1024)
        matrix = np.zeros((capacity, self.dim), dtype=np.int8)
        matrix[: self.used] = self.matrix[: self.used]
        scales = np.zeros((capacity, 2), dtype=np.float32)
        scales[: self.used] = self.scales[: self.used]
        row_nid = np.full(capacity, -1, dtype=np.int64)
        row_nid[: self.used] = self.row_nid[: self.used]
        self.matrix, self.scales, self.row_nid = matrix, scales, row_nid

    def _grow_ids(self, needed: int) -> None:
        have = self.pos.shape[0]
        if needed <= have:
            return
        extra = max(needed, 2 * have, 1024) - have
        self.pos = np.concatenate([self.pos, np.full(extra, -1, dtype=np.int64)])
        self.cell = np.concatenate([self.cell, np.zeros(extra, dtype=np.int64)])
        self.part = np.concatenate([self.part, np.zeros(extra, dtype=np.int64)])
        self.parent = np.concatenate([self.parent, np.full(extra, -1, dtype=np.int64)])
        self.scope_of = np.concatenate([self.scope_of, np.full(extra, -1, dtype=np.int64)])
        self.type_code = np.concatenate([self.type_code, np.full(extra, -1, dtype=np.int32)])
        self.subtree = np.concatenate([self.subtree, np.zeros(extra, dtype=np.int64)])

    def _code(self, type_: str) -> int:
        return self.type_names.setdefault(type_, len(self.type_names))

    # ---- searching ----------------------------------------------------------------

    def search(
        self,
        query: np.ndarray,
        k: int,
        *,
        world: int | None = None,
        types: Iterable[str] | None = None,
        links: np.ndarray | None = None,
        rough: bool = False,
    ) -> list[tuple[int, float]]:
        """(nid, cosine) of the ``k`` best rows, best first, inside ``world`` and of ``types``.

        ``rough``: scored by their codes alone (each within its row's error of the exact cosine), no
        row read from the source: for a caller that only compares with a loose threshold, over rows
        that may all be alike (the source read is what costs there: write/updates.py).

        The filters work inside the search, never by over-fetching. A filter is answered
        exactly over the rows it keeps (a world's members, a type's rows) when gathering them
        costs less than scanning; otherwise only the matching cells of the probed partitions
        are scanned (rows are checked against a world below a scope), and the probe widens by
        ``1 / sqrt(share kept)`` (at most ``MAX_WIDEN`` times) so the kept neighbours, sparser
        than all neighbours, are reached.

        ``links`` are (src, dst) membership edges (``contains``): a node linked into the world
        is inside it too, with everything below it.
        """
        if self.size == 0:
            return []
        if world is not None and links is not None and len(links):
            linked = self.linked_members(world, links)
            if linked.size:
                found = dict(self.search(query, k, world=world, types=types, rough=rough))
                found.update(self.exact(linked, query, k, self._codes(types), rough=rough))
                return sorted(found.items(), key=lambda item: -item[1])[:k]
        codes = self._codes(types)
        kept = float(self.size)
        if codes is not None:
            kept = float(sum(self.type_rows.get(c, 0) for c in codes))
        in_world = self.size if world is None else int(self.subtree[world]) if world < self.subtree.shape[0] else 0
        if in_world == 0 or kept == 0:
            return []
        type_share = kept / self.size
        share = (in_world / self.size) * type_share
        widen = min(MAX_WIDEN, 1.0 / math.sqrt(max(share, 1e-9)))
        wanted = min(self.nlist, math.ceil(nprobe_for(self.nlist) * widen))
        if world is not None or codes is not None:
            # exact over the kept rows, or a filtered scan: whichever reads fewer row-equivalents
            scan = wanted * (self.size / self.nlist * self._cell_share(world, codes) + BLOCK_COST)
            if world is not None and in_world * type_share * GATHER_COST <= scan:
                return self.exact(self.members(world), query, k, codes, rough=rough)
            if world is None and kept * GATHER_COST <= scan:
                rows = np.flatnonzero(np.isin(self.type_code, list(codes or ())) & (self.pos >= 0))
                return self.exact(rows, query, k, None, rough=rough)
        return self._scan(query, k, world, codes, wanted, rough=rough)

    def near_duplicates(
        self, query: np.ndarray, k: int, *, types: Iterable[str] | None = None, probes: int
    ) -> list[tuple[int, float]]:
        """(nid, cosine) of the ``k`` best rows in only the ``probes`` partitions nearest the query.

        For callers that keep only very high cosines (the resolver's near-duplicate tier): such
        neighbours share the query's partitions, so the widened probe of ``search`` is not needed.
        """
        if self.size == 0:
            return []
        return self._scan(query, k, None, self._codes(types), probes)

    def _cell_share(self, world: int | None, codes: set[int] | None) -> float:
        """The share of all rows held by the cells a filtered scan reads.

        That is its types' rows, and only its scope's when the scope has cells of its own.
        """
        share = 1.0 if codes is None else sum(self.type_rows.get(c, 0) for c in codes) / self.size
        scope = None if world is None else int(self.scope_of[world])
        if scope in self.big_scopes:
            share *= float(self.subtree[scope]) / self.size
        return share

    def rows_of(self, types: Iterable[str]) -> int:
        """How many rows of ``types`` the index holds (a count kept as rows come and go)."""
        return sum(self.type_rows.get(code, 0) for code in self._codes(types) or ())

    def _codes(self, types: Iterable[str] | None) -> set[int] | None:
        return None if types is None else {self.type_names[t] for t in types if t in self.type_names}

    def linked_members(self, world: int, links: np.ndarray) -> np.ndarray:
        """Nodes inside ``world`` only through membership edges (and everything below them)."""
        roots = {world}
        linked: set[int] = set()
        srcs, dsts = links[:, 0], links[:, 1]
        while True:
            inside = np.zeros(len(links), dtype=bool)
            for root in roots:
                inside |= (srcs == root) | self.under(np.minimum(srcs, self.pos.shape[0] - 1), root)
            new = {int(d) for d in dsts[inside].tolist() if d < self.pos.shape[0]} - roots
            if not new:
                break
            roots |= new
            linked |= new
        if not linked:
            return np.zeros(0, dtype=np.int64)
        heads = np.array(sorted(linked), dtype=np.int64)
        return np.unique(np.concatenate([heads[self.pos[heads] >= 0], *[self.members(h) for h in heads.tolist()]]))

    def _scan(
        self, query: np.ndarray, k: int, world: int | None, codes: set[int] | None, wanted: int, *, rough: bool = False
    ) -> list[tuple[int, float]]:
        """Score what passes the filters in the partitions nearest the query, within a row budget.

        Partitions are uneven (dense regions of the embedding space hold several times the mean),
        so a fixed partition count makes the slowest queries several times the median. The probe
        therefore stops at ``ROW_BUDGET`` x the rows ``wanted`` partitions hold on average: fewer,
        fuller partitions in a dense region, more in a sparse one (at least a quarter of
        ``wanted``, at most twice). Filters count only the rows of the cells they scan.
        """
        turned = self._turned(query)
        found_ids: list[np.ndarray] = []
        found_rows: list[np.ndarray] = []  # matrix row ranges, or the kept rows of a cell
        found_scores: list[np.ndarray] = []
        whole = world is None and codes is None
        scope = None if world is None else int(self.scope_of[world])
        own = scope in self.big_scopes
        below = None if world is None or world == scope else self._member_mask(world)
        budget = ROW_BUDGET * wanted * self.size / self.nlist * self._cell_share(world, codes)
        floor = max(1, min(wanted, max(MIN_PROBE, wanted // 4)))
        scanned = 0
        for visited, part in enumerate(self._nearest_partitions(query, min(self.nlist, 2 * wanted)).tolist(), 1):
            if whole:  # one product per region; spare and dead rows drop out below
                lo, length = int(self.p_start[part]), int(self.p_len[part])
                if length:
                    found_ids.append(self.row_nid[lo : lo + length])
                    found_rows.append(np.arange(lo, lo + length))
                    found_scores.append(self._coarse(lo, lo + length, turned))
                scanned += int(self.p_rows[part])
            else:
                for cell in self.cells_of[part]:
                    count = self.count[cell]
                    if not count or (codes is not None and self.cell_code[cell] not in codes):
                        continue
                    if scope is not None and own and self.cell_scope[cell] != scope:
                        continue
                    lo = self.start[cell]
                    ids = self.row_nid[lo : lo + count]
                    scores = self._coarse(lo, lo + count, turned)
                    rows = np.arange(lo, lo + count)
                    scanned += count
                    if below is not None or (scope is not None and not own):
                        keep = below[ids] if below is not None else self.scope_of[ids] == scope
                        ids, scores, rows = ids[keep], scores[keep], rows[keep]
                    if ids.size:
                        found_ids.append(ids)
                        found_rows.append(rows)
                        found_scores.append(scores)
            if visited >= floor and scanned >= budget:
                break
        if not found_ids:
            return []
        ids = np.concatenate(found_ids)
        live = ids >= 0  # spare and dead rows drop out
        rows = np.concatenate(found_rows)[live]
        return self._best(ids[live], rows, np.concatenate(found_scores)[live], query, k, rough=rough)

    def _coarse(self, lo: int, hi: int, turned: np.ndarray) -> np.ndarray:
        """The scores of matrix rows ``lo:hi`` by their codes (within each row's error of the exact ones)."""
        scores: np.ndarray = (self.matrix[lo:hi] @ turned) * self.scales[lo:hi, 0]
        return scores

    def _turned(self, query: np.ndarray) -> np.ndarray:
        """The query scaled by the rows' spread, so that its product with a row's codes scores the row."""
        turned: np.ndarray = np.asarray(query, dtype=np.float32) * self.spread
        return turned

    def _best(
        self, ids: np.ndarray, rows: np.ndarray, coarse: np.ndarray, query: np.ndarray, k: int, *, rough: bool = False
    ) -> list[tuple[int, float]]:
        """(nid, cosine) of the ``k`` best of ``ids`` (at matrix ``rows``, scored ``coarse`` by their codes).

        A row can be in the exact top ``k`` only if its score plus its error reaches the ``k``-th best
        score minus its error; those rows are re-scored from the source, the rest never are.
        """
        if ids.size == 0:
            return []
        if self.source is None or rough:
            return [(int(ids[i]), float(coarse[i])) for i in _top(coarse, k, ids)]
        error = self.scales[rows, 1]
        if ids.size > k:
            floor = np.partition(coarse - error, ids.size - k)[ids.size - k]  # the k-th best lower bound
            short = np.flatnonzero(coarse + error >= floor)
            ids = ids[short]
        scores = self.source(ids) @ query
        held = ~np.isnan(scores)  # a row erased since the index read it
        ids, scores = ids[held], scores[held]
        return [(int(ids[i]), float(scores[i])) for i in _top(scores, k, ids)]

    def _member_mask(self, world: int) -> np.ndarray:
        """A dense flag per node id: inside ``world``."""
        mask = np.zeros(self.pos.shape[0], dtype=bool)
        mask[self.members(world)] = True
        return mask

    def _nearest_partitions(self, query: np.ndarray, wanted: int) -> np.ndarray:
        if self.centroids is None:
            return np.zeros(1, dtype=np.int64)
        return _top(self.centroids @ query, wanted)

    def under(self, ids: np.ndarray, world: int) -> np.ndarray:
        """Which of ``ids`` (rows of the parent arrays) have ``world`` among their ancestors.

        Parents never change, so this answers containment in memory for every node the index holds.
        """
        if 0 <= world < self.scope_of.shape[0] and self.scope_of[world] == world:  # a scope: one lookup per row
            return np.asarray((self.scope_of[ids] == world) & (ids != world))
        inside = np.zeros(ids.shape[0], dtype=bool)
        above = self.parent[ids]
        while True:
            alive = above >= 0
            if not alive.any():
                return inside
            inside |= above == world
            above = np.where(alive, self.parent[np.maximum(above, 0)], -1)

    def members(self, world: int) -> np.ndarray:
        """Node ids of every indexed row strictly below ``world`` (breadth first over children)."""
        out: list[np.ndarray] = []
        frontier = np.array([world], dtype=np.int64)
        while frontier.size:
            frontier = frontier[self.subtree[frontier] > 1]  # a leaf has no children to visit
            parts = [
                self.kids[self.kids_at[f] : self.kids_at[f + 1]]
                for f in frontier.tolist()
                if f + 1 < self.kids_at.shape[0]
            ]
            parts += [np.array(self.kids_since[f], dtype=np.int64) for f in frontier.tolist() if f in self.kids_since]
            frontier = np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)
            frontier = frontier[self.pos[frontier] >= 0] if frontier.size else frontier
            out.append(frontier)
        return np.concatenate(out)

    def cosines(self, nids: Sequence[int], query: np.ndarray) -> dict[int, float]:
        """Cosine to ``query`` of each of ``nids`` that the index holds (a gather, then one product)."""
        ids = np.asarray(nids, dtype=np.int64)
        ids = ids[(ids >= 0) & (ids < self.pos.shape[0])]
        ids = ids[self.pos[ids] >= 0]
        if not ids.size:
            return {}
        if self.source is None:
            scores = (np.take(self.matrix, self.pos[ids], axis=0) @ self._turned(query)) * self.scales[self.pos[ids], 0]
        else:
            scores = self.source(ids) @ query
        return {nid: score for nid, score in zip(ids.tolist(), scores.tolist(), strict=True) if score == score}

    def exact(
        self, nids: np.ndarray, query: np.ndarray, k: int, codes: set[int] | None, *, rough: bool = False
    ) -> list[tuple[int, float]]:
        """Exact top ``k`` among the given node ids (a gather, then one product; ``rough``: see ``search``)."""
        if codes is not None and nids.size:
            nids = nids[np.isin(self.type_code[nids], list(codes))]
        if nids.size == 0:
            return []
        rows = self.pos[nids]
        coarse = (np.take(self.matrix, rows, axis=0) @ self._turned(query)) * self.scales[rows, 0]
        return self._best(nids, rows, coarse, query, k, rough=rough)

    def vectors(self, nids: Sequence[int]) -> dict[int, np.ndarray]:
        """The vectors of those of ``nids`` the index holds (``vector`` each), unit length."""
        ids = [nid for nid in nids if 0 <= nid < self.pos.shape[0] and self.pos[nid] >= 0]
        out = {}
        for nid in ids:
            vector = self.vector(nid)
            out[nid] = vector / max(float(np.linalg.norm(vector)), 1e-12)
        return out

    def vector(self, nid: int) -> np.ndarray:
        """A held node's vector: exact from the source, else decoded from its codes."""
        if self.source is not None:
            return np.asarray(self.source(np.array([nid], dtype=np.int64))[0], dtype=np.float32)
        row = int(self.pos[nid])
        decoded: np.ndarray = self.matrix[row] * self.scales[row, 0] * self.spread
        return decoded


def _with_headroom(rows: int) -> int:
    """Rows to allocate for ``rows``: a quarter more.

    So the rows caught up after a load (and the partitions they make move) fit without growing the arrays,
    which copies them: at 1M memories the matrix's 2x growth right after opening held two copies of it
    (the high-water mark 968 MiB: bench/footprint.py).
    """
    return rows + max(rows // 4, 1024)


def _top(scores: np.ndarray, k: int, ids: np.ndarray | None = None) -> np.ndarray:
    """Indices of the ``k`` highest scores, best first; equal scores in the order of ``ids`` (node ids).

    With ``ids``, the rows a query returns do not depend on where the index holds them: an index read
    from the file and one built from node_vec lay rows out apart, and equal scores (the same text
    twice) would otherwise come in the order of their places.
    """
    if ids is None:
        if scores.shape[0] > k:
            part = np.argpartition(-scores, k - 1)[:k]
        else:
            part = np.arange(scores.shape[0])
        return part[np.argsort(-scores[part], kind="stable")]
    if scores.shape[0] > k:
        kth = np.partition(scores, scores.shape[0] - k)[scores.shape[0] - k]  # the k-th best score
        part = np.flatnonzero(scores >= kth)  # with every row tied with it
    else:
        part = np.arange(scores.shape[0])
    return part[np.lexsort((ids[part], -scores[part]))[:k]]


def spherical_kmeans(sample: np.ndarray, nlist: int, *, iterations: int = 8, seed: int = 0) -> np.ndarray:
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


def split_in_two(rows: np.ndarray, seed: int) -> tuple[np.ndarray, np.ndarray] | None:
    """Two centroids for one swollen partition and each row's side (0 or 1); None if it cannot split."""
    halves = spherical_kmeans(rows, 2, iterations=5, seed=seed)
    side = assign(rows, halves)
    if halves.shape[0] < 2 or side.min() == side.max():
        return None  # identical rows
    return halves, side


def assign(vectors: np.ndarray, centroids: np.ndarray | None) -> np.ndarray:
    """The nearest centroid of each row (all 0 before training), in chunks to bound memory."""
    if centroids is None:
        return np.zeros(vectors.shape[0], dtype=np.int32)
    out = np.empty(vectors.shape[0], dtype=np.int32)
    for lo in range(0, vectors.shape[0], 8192):
        out[lo : lo + 8192] = np.argmax(vectors[lo : lo + 8192] @ centroids.T, axis=1)
    return out
