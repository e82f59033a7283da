"""The vector index kept in the file: what hydration computes, written as segments of ``vec_segment``.

Opening a store used to code every ``node_vec`` row again (read, quantize, lay out: ~1 s at 100k
memories, ~10 s at 1M). The codes, scales, partitions, parents and types of the rows are kept instead,
in segments: a *base* written whole (``write_all``: by the operation that starts a new epoch, a
migration, ``reindex``), and small segments appended by the write that leaves ``SEGMENT_ROWS`` changed
rows outside them (``extend``). Each segment holds the hot rows whose change number lies in its
(first_seq, last_seq]; a later segment's row stands over an earlier one's. The segments written
together for one span are its pieces (``BASE_ROWS`` rows each at most). After an append, the last
two spans are merged into one while the earlier holds at most twice the later's rows (and both
together at most ``MERGE_ROWS``), so a store keeps a few spans of growing size, as a log-structured
merge tree does, and each row is rewritten a few times in all, never in one write all at once. Opening reads the current
epoch's segments (``load``) and catches up the rows changed since by ``seq``, as an open store always
did. Segments of another epoch are dead: every change of which rows the index holds (a purge, the
cold tier, re-training, re-embedding) starts a new epoch (``vector_index``).

A segment is checked as it is read (its digest, lengths, dimension, the epoch's spread): a damaged,
truncated or foreign one raises ``Damaged``, and the caller rebuilds from ``node_vec`` and says so.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import numpy as np
from blake3 import blake3

from ..store.vector_table import SegmentRow, VectorTable
from .ivf import IvfIndex, quantize

SEGMENT_ROWS = 8192  # changed rows outside the segments that make a write append one
BASE_ROWS = 65536  # rows per segment when the whole index is written (16 MiB of codes at 256 dimensions)
MERGE_ROWS = 262_144  # spans are merged while the two last are of like size and hold no more than this together
YOUNG = 4 * SEGMENT_ROWS  # a store this young has its first segments written by any write


class Damaged(Exception):
    """A segment that cannot be what the engine wrote: the index is rebuilt from node_vec."""


@dataclass(frozen=True)
class Segment:
    """One segment, decoded and checked."""

    first_seq: int
    last_seq: int
    piece: int
    pieces: int
    nids: np.ndarray
    parts: np.ndarray
    parents: np.ndarray
    type_codes: np.ndarray  # each row's number in ``type_names``
    type_names: list[str]
    codes: np.ndarray
    scales: np.ndarray
    spread: np.ndarray

    @property
    def types(self) -> list[str]:
        """Each row's node type."""
        return [self.type_names[i] for i in self.type_codes.tolist()]


def _digest(epoch: str, numbers: Iterable[int], blobs: Iterable[bytes]) -> bytes:
    digest = blake3(f"{epoch}:{':'.join(map(str, numbers))}".encode())
    for blob in blobs:
        digest.update(len(blob).to_bytes(8, "little"))
        digest.update(blob)
    return digest.digest()


def encode(
    epoch: str,
    first_seq: int,
    last_seq: int,
    piece: tuple[int, int],
    nids: np.ndarray,
    parts: np.ndarray,
    parents: np.ndarray,
    types: list[str],
    codes: np.ndarray,
    scales: np.ndarray,
    spread: np.ndarray,
) -> SegmentRow:
    """The ``vec_segment`` row of coded rows (``ivf.quantize``'s codes and scales), ``piece`` (i, of n) of its span."""
    names = sorted(set(types))
    number = {name: i for i, name in enumerate(names)}
    rows, dim = codes.shape
    blobs = (
        np.ascontiguousarray(nids, dtype="<i8").tobytes(),
        np.ascontiguousarray(parts, dtype="<i4").tobytes(),
        np.ascontiguousarray(parents, dtype="<i8").tobytes(),
        json.dumps(names).encode(),
        np.array([number[t] for t in types], dtype="<u2").tobytes(),
        np.ascontiguousarray(codes, dtype=np.int8).tobytes(),
        np.ascontiguousarray(scales, dtype="<f4").tobytes(),
        np.ascontiguousarray(spread, dtype="<f4").tobytes(),
    )
    numbers = (first_seq, last_seq, *piece, dim, rows)
    digest = _digest(epoch, numbers, blobs)
    return (epoch, *numbers, *blobs[:3], blobs[3].decode(), *blobs[4:], digest)


def decode(row: SegmentRow, epoch: str, dim: int) -> Segment:
    """A ``vec_segment`` row checked against its digest and this store's dimension; ``Damaged`` if it fails."""
    return _check(row, epoch, dim, whole=True)


def _check_body(row: SegmentRow, codes: bytes, scales: bytes) -> None:
    """The digest and the sizes of a segment whose codes and scales are read apart from the rest (``load``)."""
    kept_epoch, first, last, piece, pieces, seg_dim, rows, nids, parts, parents, names, type_codes = row[:12]
    spread, digest = row[14:]
    if len(codes) != rows * seg_dim or len(scales) != 8 * rows:
        raise Damaged(f"the segment of change numbers {first}..{last} is truncated")
    blobs = (nids, parts, parents, names.encode(), type_codes, codes, scales, spread)
    if _digest(kept_epoch, (first, last, piece, pieces, seg_dim, rows), blobs) != digest:
        raise Damaged(f"the segment of change numbers {first}..{last} does not match its digest")


def _check(row: SegmentRow, epoch: str, dim: int, *, whole: bool) -> Segment:
    """A segment's fields, checked; ``whole`` False: its codes and scales are not in ``row`` (see ``_check_body``)."""
    kept_epoch, first, last, piece, pieces, seg_dim, rows, nids, parts, parents, names, type_codes = row[:12]
    codes, scales, spread, _ = row[12:]
    if kept_epoch != epoch or seg_dim != dim:
        raise Damaged(f"a segment of epoch {kept_epoch!r:.40} and {seg_dim} dimensions in epoch {epoch!r:.40}")
    if not (0 <= first <= last and 0 <= rows <= 1 << 31 and 0 <= piece < pieces):
        raise Damaged(f"a segment claims rows {first}..{last} ({rows} rows, piece {piece} of {pieces})")
    if whole:
        _check_body(row, codes, scales)
    blobs = (nids, parts, parents, type_codes, spread)
    for blob, size in zip(blobs, (8 * rows, 4 * rows, 8 * rows, 2 * rows, 4 * dim), strict=True):
        if len(blob) != size:
            raise Damaged(f"the segment of change numbers {first}..{last} is truncated")
    try:
        listed = json.loads(names)
    except ValueError:
        raise Damaged("a segment's type names are not JSON") from None
    if not isinstance(listed, list) or not all(isinstance(n, str) for n in listed):
        raise Damaged("a segment's type names are not a list of names")
    numbers = np.frombuffer(type_codes, dtype="<u2")
    if rows and int(numbers.max()) >= len(listed):
        raise Damaged("a segment numbers a type it does not name")
    return Segment(
        first,
        last,
        piece,
        pieces,
        np.frombuffer(nids, dtype="<i8"),
        np.frombuffer(parts, dtype="<i4"),
        np.frombuffer(parents, dtype="<i8"),
        numbers,
        listed,
        np.frombuffer(codes, dtype=np.int8).reshape(rows, dim) if whole else np.empty((0, dim), dtype=np.int8),
        np.frombuffer(scales, dtype="<f4").reshape(rows, 2) if whole else np.empty((0, 2), dtype=np.float32),
        np.frombuffer(spread, dtype="<f4"),
    )


def load(table: VectorTable, epoch: str, dim: int) -> IvfIndex | None:
    """The index as the segments of ``epoch`` hold it (``seq``: what they cover), or None when there are none.

    Two reads in the caller's snapshot: every segment's rows without their codes first (what the index
    lays out by), then the codes, each segment's scattered straight to the rows' places in the index's
    matrix and checked against its digest: the vectors are held once, never a second copy of all of them.
    A row a later segment holds again is laid out once, from the later.
    """
    if not table.has_segments(epoch):
        return None
    index = IvfIndex(dim, table.centroids())
    columns: list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = []  # nids, parts, parents, types
    type_names: dict[str, int] = {}  # every segment's names, numbered once
    heads: list[tuple[int, SegmentRow, int, int]] = []  # (seg, its row without codes, first row, end row)
    done, seq, spread = 0, 0, None
    span = (0, 0, 0)  # (first, last, pieces) of the span being read; pieces 0: none begun
    piece = 0
    for seg, row in table.segment_heads(epoch):
        segment = _check(row, epoch, dim, whole=False)
        if spread is None:
            spread = segment.spread.copy()
        elif not np.array_equal(spread, segment.spread):
            raise Damaged("the segments of one epoch were coded with different spreads")
        if segment.piece == 0:  # a new span: the last one whole, and this one starting where it ended
            if piece != span[2] or segment.first_seq != (span[1] if span[2] else 0):
                raise Damaged(f"the segments skip change numbers or pieces after {span[1]}")
            span, piece = (segment.first_seq, segment.last_seq, segment.pieces), 0
        elif (segment.first_seq, segment.last_seq, segment.pieces) != span or segment.piece != piece:
            raise Damaged(f"a piece of the segments of change numbers {span[0]}..{span[1]} is missing")
        piece += 1
        ours = np.array([type_names.setdefault(n, len(type_names)) for n in segment.type_names], dtype=np.int64)
        numbered = ours[segment.type_codes] if len(ours) else np.zeros(len(segment.nids), dtype=np.int64)
        columns.append((segment.nids, segment.parts.astype(np.int64), segment.parents, numbered))
        heads.append((seg, row, done, done + len(segment.nids)))
        done, seq = done + len(segment.nids), segment.last_seq
    if piece != span[2]:
        raise Damaged(f"a piece of the segments of change numbers {span[0]}..{span[1]} is missing")
    if spread is None:
        raise Damaged("the segments hold no spread")
    if not np.all(spread == 1.0):  # scores by such codes are not node_vec's exact scores (vector_index.py)
        raise Damaged("the segments were coded with a per-dimension spread, before node_vec's own int8 codes")
    total = done
    nids, parts, parents, type_codes = (np.concatenate([c[i] for c in columns]) for i in range(4))
    del columns
    _check_rows(table, seq, nids, parts, parents, index.nlist)
    keep = _latest(nids)
    if keep is None:
        keep = np.arange(total)
    else:
        nids, parts, parents, type_codes = nids[keep], parts[keep], parents[keep], type_codes[keep]

    def fill(where: np.ndarray, matrix: np.ndarray, scales: np.ndarray) -> None:
        """Each segment's codes and scales to their places (``where``: per row kept, -1 for the root's)."""
        target = np.full(total, -1, dtype=np.int64)
        target[keep] = where
        bodies = table.segment_bodies(epoch)
        for seg, row, lo, hi in heads:
            found = next(bodies, None)
            if found is None or found[0] != seg:
                raise Damaged("the segments changed while they were read")
            _, codes, row_scales = found
            _check_body(row, codes, row_scales)
            at = target[lo:hi]
            held = at >= 0
            matrix[at[held]] = np.frombuffer(codes, dtype=np.int8).reshape(hi - lo, dim)[held]
            scales[at[held]] = np.frombuffer(row_scales, dtype="<f4").reshape(hi - lo, 2)[held]

    index.spread = spread
    index.load(nids, parts, fill, parents, (type_codes, list(type_names)))
    index.seq = seq
    return index


def _check_rows(
    table: VectorTable, seq: int, nids: np.ndarray, parts: np.ndarray, parents: np.ndarray, nlist: int
) -> None:
    """What the rows say is possible in this store, before anything is sized or walked by it: ``Damaged`` if not.

    The digest finds damage, not an edit made on purpose (its key is public); these bounds keep an edited
    segment from sizing arrays past the store, from parent loops (a parent is always written before its
    children, so its row number is lower), or from hiding changes behind a change number not yet given.
    """
    if seq > table.max_seq():
        raise Damaged(f"the segments cover change numbers up to {seq}, past the newest vector row")
    if not len(nids):
        return
    top = table.max_nid()
    held = parents >= 0
    if int(nids.min()) < 1 or int(nids.max()) > top or (held.any() and bool((parents[held] >= nids[held]).any())):
        raise Damaged("a segment names a row, or a parent, that cannot exist")
    if int(parts.min()) < 0 or int(parts.max()) >= nlist:
        raise Damaged("a segment names a row or partition that cannot exist")


def _latest(nids: np.ndarray) -> np.ndarray | None:
    """Ascending positions of each node's last row, or None when no node is held twice."""
    reverse = nids[::-1]
    _, first_in_reverse = np.unique(reverse, return_index=True)
    if len(first_in_reverse) == len(nids):
        return None
    return np.sort(len(nids) - 1 - first_in_reverse)


def write_all(table: VectorTable, epoch: str, dim: int, progress: Callable[[int, int], None] | None = None) -> int:
    """Write the whole index of ``epoch`` again (every segment dropped first), in the caller's transaction; rows.

    The rows are read, coded and written ``BASE_ROWS`` at a time: one chunk of float32 held at once.
    """
    if table.segments_usable():
        table.drop_segments()
    else:  # dropped or altered in a shell: made again
        table.recreate_segments()
    last = table.max_seq()
    total = table.hot_count()
    shown = progress if total >= BASE_ROWS else None  # a small store's index is written in a blink
    if shown is not None:
        shown(0, total)
    # the first piece covers every change up to ``last``; the others add rows of the same span
    done = _write_span(table, epoch, dim, (0, last), 0, total, shown)
    if done == 0:  # an empty index still says what it covers, so writes extend it
        table.add_segment(_empty(epoch, 0, last, dim, np.ones(dim, dtype=np.float32)))
    return done  # (a count that missed the pieces written would be read as damage, and written again)


def _write_span(
    table: VectorTable,
    epoch: str,
    dim: int,
    span: tuple[int, int],
    since: int,
    total: int,
    progress: Callable[[int, int], None] | None,
) -> int:
    """The ``total`` hot rows changed after ``since``, coded into the pieces of ``span``; how many were written.

    Each row codes back to node_vec's own int8 codes (``vector_index.hydrate``): the spread is all ones.
    """
    pieces = max(1, -(-total // BASE_ROWS))
    done = piece = 0
    spread = np.ones(dim, dtype=np.float32)
    for nids, parts, _, vectors, parents, types in table.everything(dim, since=since, chunk=BASE_ROWS):
        codes, scales = quantize(vectors)
        table.add_segment(encode(epoch, *span, (piece, pieces), nids, parts, parents, types, codes, scales, spread))
        done, piece = done + len(nids), piece + 1
        if progress is not None:
            progress(done, total)
    return done


def _empty(epoch: str, first: int, last: int, dim: int, spread: np.ndarray) -> SegmentRow:
    none = np.empty(0, dtype=np.int64)
    codes, scales = np.empty((0, dim), dtype=np.int8), np.empty((0, 2), dtype=np.float32)
    return encode(epoch, first, last, (0, 1), none, none, none, [], codes, scales, spread)


def extend(table: VectorTable, epoch: str, dim: int, newest: int) -> bool:
    """In a write's transaction: append a span of the rows changed since the last, if there are enough.

    ``newest`` is the table's newest change number. A store with no segment in this epoch gets its
    first ones here only while young (``YOUNG``); an older one's come from what started the epoch.
    Then the last spans merge while of like size (``_merge_tail``). Whether it wrote.
    """
    tail = table.segment_tail(epoch)
    if tail is None:
        if newest > YOUNG:
            return False
        write_all(table, epoch, dim)
        return True
    _, last, spread = tail
    if newest - last < SEGMENT_ROWS:
        return False
    if spread.shape != (dim,) or not np.all(spread == 1.0):
        raise Damaged("the last segment's spread is not a one per dimension (node_vec's own codes: load)")
    changed = table.hot_count_since(last)
    if not changed:  # only cold rows changed: an empty segment records that they are covered
        table.add_segment(_empty(epoch, last, newest, dim, spread))
    else:
        _write_span(table, epoch, dim, (last, newest), last, changed, None)
    _merge_tail(table, epoch, dim)
    return True


def _merge_tail(table: VectorTable, epoch: str, dim: int) -> None:
    """Merge the last two spans into one while they are of like size (the module's docstring says when)."""
    while True:
        spans = table.segment_spans(epoch)
        if len(spans) < 2:
            return
        (_, _, earlier, since), (_, last, later, _) = spans[-2], spans[-1]
        if earlier > 2 * later or earlier + later > MERGE_ROWS:
            return
        read = [decode(row, epoch, dim) for row in table.segments(epoch, since)]
        nids = np.concatenate([s.nids for s in read])
        keep = _latest(nids)
        keep = np.arange(len(nids)) if keep is None else keep
        columns = [np.concatenate([getattr(s, name) for s in read]) for name in ("parts", "parents", "codes", "scales")]
        types = [t for s in read for t in s.types]
        first, spread = read[0].first_seq, read[0].spread
        table.drop_segments(since)
        pieces = max(1, -(-len(keep) // BASE_ROWS))
        for piece in range(pieces):
            at = keep[piece * BASE_ROWS : (piece + 1) * BASE_ROWS]
            parts, parents, codes, scales = (column[at] for column in columns)
            rows = [types[i] for i in at.tolist()]
            table.add_segment(
                encode(epoch, first, last, (piece, pieces), nids[at], parts, parents, rows, codes, scales, spread)
            )
