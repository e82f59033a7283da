"""The vector lane: vectors durable in ``node_vec``, searched through an in-memory IVF index.

Why this shape (``bench/vectors.py`` has the numbers): sqlite-vec's flat vec0 scan took
~60 ms per query at 100k vectors and its quantized options lost recall, while an inverted
file over k-means partitions, scanned with numpy, meets recall@10 >= 0.95 in a few ms. So:

* ``node_vec`` is an ordinary table (readable in any sqlite3 shell; sqlite-vec's
  ``vec_distance_cosine`` reads its blobs through ``vec_int8``) holding each vector, its partition
  (nearest centroid in ``vec_centroid`` when written) and a change sequence number.
* Each open store keeps an ``IvfIndex`` in memory, its rows in 8-bit codes: ``node_vec``'s own
  (int8 and a scale since version 15, ``store/vector_codes.py``), so the score of a row's codes is
  the exact score of the vector the file keeps and nothing is re-scored from the table (which cost
  ~5 ms a recall at 20k). It is hydrated on the first search a chunk at a time, and brought
  up to date before every search from the rows whose ``seq`` is newer than what it has seen,
  so writes from this or any other process are visible, and a rolled-back write never is.
  ``meta.vec_epoch`` changes when every vector changes at once (re-embedding, re-training)
  or the set of rows held does (a purge, the cold tier): the index is then rebuilt.
* What hydration computes is kept in the file (``segments.py``): opening reads the epoch's
  segments and catches up by ``seq``; writes append a segment every ``segments.SEGMENT_ROWS``
  changed rows, and whatever starts an epoch writes the whole index of the new one.
* Below ``TRAIN_AT`` vectors there is one partition and search is exact. Centroids are
  trained when the store reaches ``TRAIN_AT`` nodes and each time it doubles, inside the
  write transaction, up to ``AUTO_TRAIN_LIMIT`` (training costs seconds beyond that); past
  it, ``worlddb reindex`` re-trains. Rows written between trainings go to their nearest existing
  centroid, which keeps recall (``bench/lane.py`` measures it) while partitions grow.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from typing import TYPE_CHECKING

import apsw
import numpy as np

from ..errors import EmbedderMismatch, IndexRebuilt
from ..store import vector_codes
from ..store.vector_table import VectorTable
from . import segments
from .ivf import IvfIndex, assign, quantize, spherical_kmeans, split_in_two

if TYPE_CHECKING:
    from ..store.rows import Store

TRAIN_AT = 8192
AUTO_TRAIN_LIMIT = 131_072
LISTS_PER_SQRT = 4.0  # nlist = 4 sqrt(n): partitions of ~sqrt(n)/4 rows
SAMPLE_PER_LIST = 16  # k-means trains on 16 sampled vectors per partition
SPLIT_AT = 2.0  # a partition past 2x the size a fresh training would give splits in two (2-means)
MIN_SPLIT_ROWS = 64
CHUNK = 65_536


def nlist_for(rows: int) -> int:
    """How many partitions to train for a store of ``rows`` vectors."""
    return int(min(4096, max(16, round(LISTS_PER_SQRT * math.sqrt(rows)))))


def split_limit(rows: int) -> float:
    """Rows past which a partition splits: ``SPLIT_AT`` x the mean a fresh training would give now."""
    return max(MIN_SPLIT_ROWS, SPLIT_AT * rows / nlist_for(rows))


class VectorLane:
    """Writes vector rows and answers nearest-neighbour queries, keeping the two in step.

    Writes run inside the reconciler's transaction; searches use the in-memory index.
    """

    def __init__(self, store: Store, dim: int, model_id: str | None = None) -> None:
        self.store = store
        self.table = VectorTable(store.conn)
        self.dim = dim
        self.model_id = model_id  # None: the caller supplies vectors
        self._index: IvfIndex | None = None
        self._epoch: str | None = None
        self._splits: str | None = None
        self._centroids: tuple[str | None, np.ndarray | None] | None = None  # (epoch, centroids) for writes
        self.auto_train = True  # off while re-embedding, which trains once at the end
        self._kept_damaged = False  # the segments in the file failed their check: the next write rewrites them
        self._cleared = False  # this transaction cleared that flag (restored if it rolls back)

    # ---- writing ------------------------------------------------------------------

    def begin(self) -> dict[str, str]:
        """The lane's settings for one commit, after checking the store still has this handle's model."""
        state = self.store.meta_values(("vec_epoch", "vec_trained_nid", "vec_splits", "embedder_id", "embedder_dim"))
        self._check_model(state)
        return state

    def write(self, inserts: dict[int, np.ndarray], updates: dict[int, np.ndarray], state: dict[str, str]) -> None:
        """Store new and changed vectors with their partition and a fresh sequence number.

        ``state`` is what ``begin`` read at the start of the commit.
        """
        if not inserts and not updates:
            return
        centroids = self._write_centroids(state.get("vec_epoch"))
        seq = self.table.max_seq()
        nids = [*inserts, *updates]
        matrix = np.stack([inserts[n] if n in inserts else updates[n] for n in nids]).astype(np.float32)
        codes, scales = vector_codes.encode(matrix)
        parts = assign(vector_codes.decode(codes, scales), centroids).tolist()  # as a rebuild from the file assigns
        rows = [
            (nid, part, seq + i + 1, codes[i].tobytes(), float(scales[i]))
            for i, (nid, part) in enumerate(zip(nids, parts, strict=True))
        ]
        self.table.insert(rows[: len(inserts)])
        self.table.update(rows[len(inserts) :])
        if not self.auto_train:  # re-embedding: it trains and keeps the index once, at the end
            return
        if inserts:
            grown = self.table.max_nid()  # growth is read off the highest node id: no counter row to rewrite
            if centroids is not None:
                self._split_overfull(set(parts[: len(inserts)]), centroids, state, grown)
            trained = int(state.get("vec_trained_nid") or 0)
            if max(TRAIN_AT, 2 * trained) <= grown <= AUTO_TRAIN_LIMIT:
                self.train()
                return  # training wrote the new epoch's index whole
        self.keep(state.get("vec_epoch") or "")

    def keep(self, epoch: str) -> None:
        """In a write: append to the index kept in the file what changed since (``segments.extend``).

        ``epoch``: the one the commit began in (``begin``). A kept index found damaged (here, or by a
        search that read it) is written whole instead: a write never fails for the index it keeps.
        """
        if not self._kept_damaged:
            try:
                segments.extend(self.table, epoch, self.dim, self.table.max_seq())
                return
            except (segments.Damaged, apsw.SQLError):  # SQLError: the table altered in a shell
                pass  # written whole below
        self.keep_all()

    def keep_all(self, progress: Callable[[int, int], None] | None = None) -> int:
        """In a write: the index of the current epoch written whole into the file (``segments.write_all``)."""
        written = segments.write_all(self.table, self._epoch_now(), self.dim, progress)
        # until this transaction commits: a rollback leaves the damage, and forget() restores the flag
        self._cleared, self._kept_damaged = self._cleared or self._kept_damaged, False
        return written

    def kept(self) -> bool:
        """Whether the file keeps an index of the current epoch (one read)."""
        try:
            return self.table.segment_tail(self._epoch_now()) is not None
        except apsw.SQLError:  # dropped or altered in a shell: written again (``keep_all``)
            return False

    def _epoch_now(self) -> str:
        return self.store.meta_values(("vec_epoch",)).get("vec_epoch") or ""

    def _check_model(self, state: dict[str, str]) -> None:
        """Refuse to mix models: another process may have re-embedded the store since it was opened."""
        stored_id, stored_dim = state.get("embedder_id"), state.get("embedder_dim")
        if stored_dim != str(self.dim) or (self.model_id is not None and stored_id != self.model_id):
            raise EmbedderMismatch(
                f"the store was re-embedded with {stored_id!r} ({stored_dim} dimensions) after it was opened "
                f"with {self.model_id or 'caller vectors'!r} ({self.dim}); reopen it with that embedder"
            )

    def _split_overfull(self, parts: set[int], centroids: np.ndarray, state: dict[str, str], grown: int) -> None:
        """Split each touched partition that outgrew ``split_limit``, and its halves, until none does.

        Between trainings new rows go to the nearest old centroid; where the store grows in a
        direction the centroids never saw, one partition swells. Splitting it with 2-means over
        its own rows (a few hundred rows: about a millisecond) keeps partitions even and lets the
        centroids follow the data, which holds recall without re-training everything. A bulk write
        that swelled a partition far past the limit splits it down all the way: a half left over
        the limit would be split by the next single write that touches it (``bench/write_cost.py``
        after a 10x growth: a split in a third of the writes).
        """
        limit = split_limit(grown)
        todo = sorted(parts)
        while todo:
            part = todo.pop()
            if self.table.part_size(part) <= limit:
                continue
            nids, rows = self.table.part_rows(part, self.dim)
            split = split_in_two(rows, seed=part)
            if split is None:
                continue
            halves, side = split
            new = centroids.shape[0]
            centroids = np.vstack([centroids, halves[1:2]])
            centroids[part] = halves[0]
            self.table.save_centroid(part, halves[0])
            self.table.save_centroid(new, halves[1])
            todo += [part, new]
            seq = self.table.max_seq()
            self.table.set_parts_and_seq((new, seq + i + 1, int(nid)) for i, nid in enumerate(nids[side == 1]))
            splits = str(int(state.get("vec_splits") or 0) + 1)
            state["vec_splits"] = splits
            self.store.set_meta([("vec_splits", splits)])
        self._centroids = (state.get("vec_epoch"), centroids)

    def _write_centroids(self, epoch: str | None) -> np.ndarray | None:
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
        # k-means on a sample leaves some partitions far past the split limit: split them now, in the
        # write that trained, rather than one by one in the single writes that touch them next (a
        # number of partitions asked for is kept as asked)
        epoch = _new_epoch()
        if nlist is None:
            state = {**self.store.meta_values(("vec_splits",)), "vec_epoch": epoch}
            self._split_overfull(set(range(centroids.shape[0])), centroids, state, self.table.max_nid())
        self.store.set_meta([("vec_trained_nid", str(self.table.max_nid())), ("vec_epoch", epoch)])
        self._centroids = None
        say("writing the index into the file")
        self.keep_all()
        return {"vectors": total, "partitions": int(centroids.shape[0])}

    def reset(self) -> None:
        """Forget every vector (re-embedding starts over): a new epoch, no centroids."""
        self.table.clear()
        self.store.set_meta([("vec_trained_nid", "0"), ("vec_splits", "0"), ("vec_epoch", _new_epoch())])
        self._centroids = None

    def renew(self) -> None:
        """A new epoch (in the caller's transaction): every open store reads its index again.

        For a change of which rows the index holds (memories moved between tiers: consolidate/retention.py,
        a purge): the new epoch's index is written into the file whole.
        """
        self.store.set_meta([("vec_epoch", _new_epoch())])
        self.keep_all()

    # ---- reading ------------------------------------------------------------------

    def committed(self) -> None:
        """The transaction committed: what it wrote of the kept index stands."""
        self._cleared = False

    def forget(self) -> None:
        """Drop the in-memory index and cached centroids; the next search hydrates again.

        Called when a transaction rolls back: a kept index it rewrote is damaged again.
        """
        self._kept_damaged, self._cleared = self._kept_damaged or self._cleared, False
        self._index = None
        self._centroids = None

    def index(self) -> IvfIndex:
        """The in-memory index, current with every committed write.

        Outside a transaction the refresh reads inside one (a read snapshot): the meta row that
        names the partitions and the rows it describes must come from the same commit, or a
        split committed by another process in between hands this one rows in partitions it has
        no centroid for (seen under bench/concurrency.py as an IndexError).
        """
        conn = self.store.conn
        if not conn.getautocommit():
            return self._refresh()
        conn.execute("begin")
        try:
            return self._refresh()
        finally:
            conn.execute("commit")

    def _refresh(self) -> IvfIndex:
        state = self.store.meta_values(("vec_epoch", "vec_splits", "embedder_id", "embedder_dim"))
        epoch, splits = state.get("vec_epoch"), state.get("vec_splits")
        if self._index is None or epoch != self._epoch:
            self._check_model(state)
            self._index = self._hydrate(epoch)
            self._epoch, self._splits = epoch, splits
        else:
            if splits != self._splits:  # partitions were split: new centroids, moved rows follow below
                centroids = self.table.centroids()
                if centroids is not None:
                    self._index.set_centroids(centroids)
                self._splits = splits
            self._catch_up(self._index)
        return self._index

    def _hydrate(self, epoch: str | None) -> IvfIndex:
        """The index as the file keeps it, caught up; else (none kept, or damaged) coded from node_vec."""
        try:
            kept = segments.load(self.table, epoch or "", self.dim)
        except (segments.Damaged, apsw.SQLError) as exc:  # SQLError: its table altered in a shell
            warnings.warn(
                f"the vector index kept in the file is damaged ({exc}); rebuilt from node_vec, and "
                "kept in the file again by the next write",
                IndexRebuilt,
                stacklevel=2,
            )
            self._kept_damaged = True
            kept = None
        if kept is None:
            return hydrate(self.table, self.dim)
        self._catch_up(kept)
        return kept

    def _catch_up(self, index: IvfIndex) -> None:
        if self.table.max_seq() <= index.seq:
            return
        chunks = [(n, p, s, v.copy(), a, t) for n, p, s, v, a, t in self.table.everything(self.dim, index.seq)]
        if not chunks:  # only cold rows changed
            index.seq = self.table.max_seq()
            return
        nids, parts, seqs, matrix, parents = (np.concatenate([c[i] for c in chunks]) for i in range(5))
        types = [t for c in chunks for t in c[5]]
        codes, scales = quantize(matrix, index.spread)  # one pass for all: the rows since the kept index's last
        for i in np.argsort(nids, kind="stable"):  # parents (older, lower ids) before their children
            parent = int(parents[i]) if parents[i] >= 0 else None
            index.upsert(int(nids[i]), int(parts[i]), matrix[i], parent, types[i], (codes[i], scales[i]))
        index.seq = self.table.max_seq()  # cold rows are left out, not missed: read in the same snapshot


def hydrate(table: VectorTable, dim: int) -> IvfIndex:
    """A new index of every row of ``table``, read and coded a chunk at a time (no float32 copy of all).

    A decoded row codes back to its own int8 codes (its largest one is 127), with an error bound of ~1e-5.
    """
    index = IvfIndex(dim, table.centroids())
    total = table.hot_count()
    codes = np.empty((total, dim), dtype=np.int8)
    scales = np.empty((total, 2), dtype=np.float32)
    columns: list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, list[str]]] = []
    done = 0
    for nids, parts, seqs, vectors, parents, types in table.everything(dim):
        if done + len(nids) > codes.shape[0]:  # rows written since the count (outside a read transaction)
            codes = np.concatenate([codes[:done], np.empty((len(nids), dim), dtype=np.int8)])
            scales = np.concatenate([scales[:done], np.empty((len(nids), 2), dtype=np.float32)])
        codes[done : done + len(nids)], scales[done : done + len(nids)] = quantize(vectors, index.spread)
        columns.append((nids, parts, seqs, parents, types))
        done += len(nids)
    if columns:
        index.load(
            np.concatenate([c[0] for c in columns]),
            np.concatenate([c[1] for c in columns]),
            (codes[:done], scales[:done]),
            np.concatenate([c[3] for c in columns]),
            [t for c in columns for t in c[4]],
        )
        index.seq = int(max(c[2].max() for c in columns))  # a cold row's newer seq: _catch_up reads past it
    return index


def _new_epoch() -> str:
    import uuid

    return uuid.uuid4().hex
