"""Reciprocal rank fusion: score(d) = sum over lanes of 1 / (K + rank of d in that lane).

K = 60 is the constant of Cormack, Clarke and Buettcher (SIGIR 2009), used unchanged: it
damps the head of each list so that no single lane decides alone, and it needs no score
calibration between lanes (BM25 scores and cosines are not comparable).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

RRF_K = 60


def rrf(lanes: Mapping[str, Sequence[int]], k: int = RRF_K) -> list[tuple[int, float]]:
    """(nid, fused score), best first; ties go to the smaller nid so the order is deterministic."""
    fused: dict[int, float] = {}
    for ranking in lanes.values():
        for rank, nid in enumerate(ranking, start=1):
            fused[nid] = fused.get(nid, 0.0) + 1.0 / (k + rank)
    return sorted(fused.items(), key=lambda item: (-item[1], item[0]))
