"""SQL for the vector tables, with numpy arrays in and out.

``node_vec`` holds each node's effective embedding, its IVF partition and change number;
``vec_centroid`` the partitions' centroids; ``world_vec`` the composition state. ``node_vec``'s
vectors are int8 codes with a scale (``vector_codes``): they go in coded and come out decoded, as
float32; the others are float32 (``acc`` float64) blobs.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from typing import Any

import apsw
import numpy as np

from . import vector_codes
from .connection import as_bytes, as_int
from .migrations import SEGMENT_GUARDS, schema_statement

Pool = tuple[np.ndarray | None, np.ndarray, int]  # (anchor, running weighted sum, members pooled)
# a vec_segment row, its columns in order from epoch to digest (index/segments.py codes and checks them)
SegmentRow = tuple[str, int, int, int, int, int, int, bytes, bytes, bytes, str, bytes, bytes, bytes, bytes, bytes]
# vec_segment's columns after seg as schema.sql lays them out (the small ones before the codes)
_TABLE_ORDER = (
    "epoch first_seq last_seq piece pieces dim rows spread digest types nids parts parents type_codes codes scales"
).split()
_SEGMENT_COLUMNS = (
    "epoch, first_seq, last_seq, piece, pieces, dim, rows, nids, parts, parents, types, type_codes, codes, scales, "
    "spread, digest"
)
_COLUMNS = "select v.nid, v.part, v.seq, v.embedding, v.scale, n.parent, n.type from node_vec as v "
HOT = "v.nid not in (select nid from cold_node)"  # the rows the in-memory index holds (consolidate/retention.py)
_EVERY_ROW = _COLUMNS + f"join node as n on n.nid = v.nid where {HOT}"
_ROWS_SINCE = _COLUMNS + f"join node as n on n.nid = v.nid where v.seq > ? and {HOT}"


def _f32(blob: object) -> np.ndarray:
    return np.frombuffer(as_bytes(blob), dtype=np.float32).copy()


def _decoded(rows: list[tuple[Any, Any]], dim: int) -> np.ndarray:
    """The float32 vectors of stored (codes, scale) pairs, as an (n, dim) matrix."""
    codes = np.frombuffer(b"".join(as_bytes(r[0]) for r in rows), dtype=np.int8).reshape(-1, dim)
    return vector_codes.decode(codes, np.array([float(r[1]) for r in rows], dtype=np.float32))


def _segment_row(row: tuple[Any, ...]) -> SegmentRow:
    """A vec_segment row read in ``_SEGMENT_COLUMNS``' order, its fields typed."""
    blobs = [as_bytes(b) for b in (*row[7:10], *row[11:])]
    return (
        str(row[0]), as_int(row[1]), as_int(row[2]), as_int(row[3]), as_int(row[4]), as_int(row[5]), as_int(row[6]),
        blobs[0], blobs[1], blobs[2], str(row[10]), blobs[3], blobs[4], blobs[5], blobs[6], blobs[7],
    )  # fmt: skip


class VectorTable:
    """Reads and writes of the vector tables on one connection."""

    def __init__(self, conn: apsw.Connection) -> None:
        self.conn = conn

    # ---- node_vec -------------------------------------------------------------------

    def insert(self, rows: Iterable[tuple[int, int, int, bytes, float]]) -> None:
        """New (nid, part, seq, int8 codes, scale) rows (``vector_codes.encode``)."""
        self.conn.executemany("insert into node_vec (nid, part, seq, embedding, scale) values (?, ?, ?, ?, ?)", rows)

    def update(self, rows: Iterable[tuple[int, int, int, bytes, float]]) -> None:
        """Changed (nid, part, seq, codes, scale) rows: worlds whose composed vector moved."""
        self.conn.executemany(
            "update node_vec set part = ?2, seq = ?3, embedding = ?4, scale = ?5 where nid = ?1", rows
        )

    def delete(self, nids: Iterable[int]) -> None:
        """Erase nodes' vectors and composition rows (an audited purge; nothing else deletes)."""
        gone = [(nid,) for nid in nids]
        self.conn.executemany("delete from node_vec where nid = ?", gone)
        self.conn.executemany("delete from world_vec where nid = ?", gone)

    def vectors_of(self, nids: Iterable[int]) -> dict[int, np.ndarray]:
        """The stored vectors of some nodes (point lookups; nodes without one are left out)."""
        found: dict[int, np.ndarray] = {}
        for nid in nids:
            for blob, scale in self.conn.execute("select embedding, scale from node_vec where nid = ?", (nid,)):
                found[nid] = vector_codes.row(as_bytes(blob), float(scale))
        return found

    def max_seq(self) -> int:
        """The newest change number (0 for an empty table); one index probe."""
        for (seq,) in self.conn.execute("select max(seq) from node_vec"):
            return 0 if seq is None else as_int(seq)
        return 0

    def max_nid(self) -> int:
        """The highest node id with a vector (0 for none); one index probe."""
        for (nid,) in self.conn.execute("select max(nid) from node_vec"):
            return 0 if nid is None else as_int(nid)
        return 0

    def count(self) -> int:
        return as_int(self.conn.execute("select count(*) from node_vec").fetchone()[0])  # type: ignore[index]

    def hot_count_since(self, since: int) -> int:
        """Rows the in-memory index holds that changed after ``since`` (through the seq index)."""
        return as_int(
            self.conn.execute(f"select count(*) from node_vec as v where v.seq > ? and {HOT}", (since,)).fetchone()[0]  # type: ignore[index]
        )

    def hot_count(self) -> int:
        """Rows the in-memory index holds: all but the cold tier's."""
        return as_int(self.conn.execute(f"select count(*) from node_vec as v where {HOT}").fetchone()[0])  # type: ignore[index]

    def nids(self) -> set[int]:
        return {as_int(r[0]) for r in self.conn.execute("select nid from node_vec")}

    def sample(self, rows: int, dim: int) -> np.ndarray:
        """About ``rows`` vectors spread evenly over the table (every n-th by nid)."""
        step = max(1, self.count() // max(rows, 1))
        found = list(self.conn.execute("select embedding, scale from node_vec where nid % ? = 0", (step,)))
        if len(found) < min(rows, self.count()) // 2:  # nids unevenly spread: take the first rows instead
            found = list(self.conn.execute("select embedding, scale from node_vec limit ?", (rows,)))
        return _decoded(found, dim)

    def chunks(self, size: int, dim: int) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        """(nids, vectors) of every row, ``size`` rows at a time in nid order."""
        after = -1
        while True:
            rows = list(
                self.conn.execute(
                    "select nid, embedding, scale from node_vec where nid > ? order by nid limit ?", (after, size)
                )
            )
            if not rows:
                return
            nids = np.array([as_int(r[0]) for r in rows], dtype=np.int64)
            yield nids, _decoded([r[1:] for r in rows], dim)
            after = int(nids[-1])

    def part_size(self, part: int) -> int:
        """Rows in one partition (through the part index)."""
        return as_int(self.conn.execute("select count(*) from node_vec where part = ?", (part,)).fetchone()[0])  # type: ignore[index]

    def part_rows(self, part: int, dim: int) -> tuple[np.ndarray, np.ndarray]:
        """(nids, vectors) of one partition."""
        rows = list(self.conn.execute("select nid, embedding, scale from node_vec where part = ?", (part,)))
        return np.array([as_int(r[0]) for r in rows], dtype=np.int64), _decoded([r[1:] for r in rows], dim)

    def set_parts_and_seq(self, rows: Iterable[tuple[int, int, int]]) -> None:
        """(part, seq, nid): rows moved to another partition, with a new change number."""
        self.conn.executemany("update node_vec set part = ?, seq = ? where nid = ?", rows)

    def set_parts(self, rows: Iterable[tuple[int, int]]) -> None:
        """(part, nid) after re-training."""
        self.conn.executemany("update node_vec set part = ? where nid = ?", rows)

    def everything(
        self, dim: int, since: int = 0, chunk: int = 8192
    ) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, list[str]]]:
        """(nids, parts, seqs, vectors, parents, types) of the rows changed after ``since`` (all: 0), in chunks.

        ``chunk`` rows at a time, so a reader holds one chunk of float32 vectors, never all of them
        (all of them were the peak of a process's memory at 100k memories: bench/footprint.py). Each
        chunk's vectors are a view of one buffer that the next chunk overwrites. Every row is read in
        table order, not through the ``seq`` index, whose order puts each row a page read apart
        (half the time at 100k rows: docs/decisions.md).
        """
        buffer = np.empty((chunk, dim), dtype=np.float32)
        nids: list[int] = []
        parts: list[int] = []
        seqs: list[int] = []
        parents: list[int] = []
        types: list[str] = []

        def cut() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, list[str]]:
            out = (
                np.array(nids, dtype=np.int64),
                np.array(parts, dtype=np.int32),
                np.array(seqs, dtype=np.int64),
                buffer[: len(nids)],
                np.array(parents, dtype=np.int64),
                list(types),
            )
            for column in (nids, parts, seqs, parents, types):
                column.clear()
            return out

        rows = self.conn.execute(_EVERY_ROW) if since <= 0 else self.conn.execute(_ROWS_SINCE, (since,))
        for nid, part, seq, blob, scale, parent, type_ in rows:
            if len(nids) == chunk:
                yield cut()
            buffer[len(nids)] = vector_codes.row(as_bytes(blob), scale)  # a row's bytes freed at once
            nids.append(nid)
            parts.append(part)
            seqs.append(seq)
            parents.append(-1 if parent is None else parent)
            types.append(type_)
        if nids:
            yield cut()

    def exact_rows(self, nids: np.ndarray, dim: int) -> np.ndarray:
        """The float32 vectors of ``nids``, in their order (a row of NaN for a node without one).

        One statement for all of them, their bytes joined once (a recall re-scores a few hundred).
        """
        out = np.full((len(nids), dim), np.nan, dtype=np.float32)
        if not len(nids):
            return out
        found: list[int] = []
        blobs: list[tuple[bytes, float]] = []
        for nid, blob, scale in self.conn.execute(
            "select nid, embedding, scale from node_vec where nid in (select value from json_each(?))",
            (json.dumps(np.unique(nids).tolist()),),
        ):
            found.append(nid)
            blobs.append((as_bytes(blob), scale))
        if not found:
            return out
        held = np.array(found, dtype=np.int64)
        order = np.argsort(held, kind="stable")
        held, rows = held[order], _decoded(blobs, dim)[order]
        at = np.minimum(np.searchsorted(held, nids), held.size - 1)
        hit = held[at] == nids
        out[hit] = rows[at[hit]]
        return out

    def clear(self) -> None:
        """Forget every vector, centroid and composition (re-embedding starts over)."""
        self.conn.execute("delete from node_vec")
        self.conn.execute("delete from vec_centroid")
        self.conn.execute("delete from world_vec")
        self.conn.execute("delete from vec_segment")

    # ---- vec_segment ----------------------------------------------------------------

    def has_segments(self, epoch: str) -> bool:
        """Whether the file keeps segments of ``epoch`` (one index probe)."""
        return self.conn.execute("select 1 from vec_segment where epoch = ? limit 1", (epoch,)).fetchone() is not None

    def segments(self, epoch: str, since: int = 0) -> Iterator[SegmentRow]:
        """The segments of ``epoch`` (from segment ``since`` on) in order, one at a time (its bytes freed after)."""
        for row in self.conn.execute(
            f"select {_SEGMENT_COLUMNS} from vec_segment where epoch = ? and seg >= ? order by seg", (epoch, since)
        ):
            yield _segment_row(row)

    def segment_heads(self, epoch: str) -> Iterator[tuple[int, SegmentRow]]:
        """(seg, row) of each segment of ``epoch`` in order, without its codes and scales (``segment_bodies``)."""
        columns = _SEGMENT_COLUMNS.replace("codes, scales", "x'', x''")
        for row in self.conn.execute(f"select seg, {columns} from vec_segment where epoch = ? order by seg", (epoch,)):
            yield as_int(row[0]), _segment_row(row[1:])

    def segment_bodies(self, epoch: str) -> Iterator[tuple[int, bytes, bytes]]:
        """(seg, codes, scales) of each segment of ``epoch`` in order, one at a time."""
        for seg, codes, scales in self.conn.execute(
            "select seg, codes, scales from vec_segment where epoch = ? order by seg", (epoch,)
        ):
            yield as_int(seg), as_bytes(codes), as_bytes(scales)

    def segment_tail(self, epoch: str) -> tuple[int, int, np.ndarray] | None:
        """(segments, the last change number they cover, the epoch's spread) of ``epoch``; None: it has none."""
        row = self.conn.execute(
            "select (select count(*) from vec_segment where epoch = ?1), last_seq, spread from vec_segment "
            "where epoch = ?1 order by seg desc limit 1",
            (epoch,),
        ).fetchone()
        if row is None:
            return None
        return as_int(row[0]), as_int(row[1]), np.frombuffer(as_bytes(row[2]), dtype="<f4").astype(np.float32)

    def add_segment(self, row: SegmentRow) -> None:
        self.conn.execute(f"insert into vec_segment ({_SEGMENT_COLUMNS}) values ({', '.join('?' * 16)})", row)

    def segment_spans(self, epoch: str) -> list[tuple[int, int, int, int]]:
        """The spans of ``epoch`` in order: (first_seq, last_seq, rows, first segment), pieces taken together."""
        return [
            (as_int(a), as_int(b), as_int(c), as_int(d))
            for a, b, c, d in self.conn.execute(
                "select first_seq, last_seq, sum(rows), min(seg) from vec_segment where epoch = ? "
                "group by first_seq, last_seq order by min(seg)",
                (epoch,),
            )
        ]

    def segments_usable(self) -> bool:
        """Whether ``vec_segment`` has the columns this code writes (a shell may have dropped or altered it)."""
        found = [str(row[1]) for row in self.conn.execute("pragma table_info(vec_segment)")]
        return found == ["seg", *_TABLE_ORDER]

    def recreate_segments(self) -> None:
        """Make ``vec_segment``, its index and its guards again as schema.sql defines them, empty."""
        self.conn.execute("drop table if exists vec_segment")  # its index and triggers go with it
        for name in ("vec_segment", "vec_segment_epoch", *SEGMENT_GUARDS):
            self.conn.execute(schema_statement(name))

    def drop_segments(self, since: int = 0) -> None:
        """Forget the index kept in the file (every epoch's), or its segments from ``since`` on."""
        self.conn.execute("delete from vec_segment where seg >= ?", (since,))

    # ---- vec_centroid ---------------------------------------------------------------

    def centroids(self) -> np.ndarray | None:
        rows = list(self.conn.execute("select centroid from vec_centroid order by part"))
        if not rows:
            return None
        return np.stack([_f32(r[0]) for r in rows])

    def save_centroid(self, part: int, centroid: np.ndarray) -> None:
        self.conn.execute(
            "insert or replace into vec_centroid (part, centroid) values (?, ?)",
            (part, centroid.astype(np.float32).tobytes()),
        )

    def save_centroids(self, centroids: np.ndarray) -> None:
        self.conn.execute("delete from vec_centroid")
        self.conn.executemany(
            "insert into vec_centroid (part, centroid) values (?, ?)",
            ((i, c.astype(np.float32).tobytes()) for i, c in enumerate(centroids)),
        )

    # ---- world_vec ------------------------------------------------------------------

    def pools(self, nids: Iterable[int]) -> dict[int, Pool]:
        """Each composed world's (anchor, running sum, members pooled)."""
        found: dict[int, Pool] = {}
        for nid in nids:
            for anchor, acc, members in self.conn.execute(
                "select anchor, acc, members from world_vec where nid = ?", (nid,)
            ):
                found[nid] = (
                    None if anchor is None else _f32(anchor),
                    np.frombuffer(as_bytes(acc), dtype=np.float64).copy(),
                    as_int(members),
                )
        return found

    def drop_pools(self, nids: Iterable[int]) -> None:
        """Forget the composition rows of worlds whose last pooled member was purged."""
        self.conn.executemany("delete from world_vec where nid = ?", ((nid,) for nid in nids))

    def save_pools(
        self,
        started: Iterable[tuple[int, np.ndarray | None, np.ndarray, int]],
        changed: Iterable[tuple[int, np.ndarray, int]],
    ) -> None:
        """Write new worlds' (anchor, running sum, members), and changed worlds' sums."""
        self.conn.executemany(
            "insert into world_vec (nid, anchor, acc, members) values (?, ?, ?, ?)",
            (
                (
                    nid,
                    None if anchor is None else np.ascontiguousarray(anchor, dtype=np.float32).tobytes(),
                    np.ascontiguousarray(acc, dtype=np.float64).tobytes(),
                    members,
                )
                for nid, anchor, acc, members in started
            ),
        )
        self.conn.executemany(
            "update world_vec set acc = ?, members = ? where nid = ?",
            ((np.ascontiguousarray(acc, dtype=np.float64).tobytes(), members, nid) for nid, acc, members in changed),
        )
