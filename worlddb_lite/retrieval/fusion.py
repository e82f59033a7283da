"""Reciprocal rank fusion: score(d) = sum over lanes of weight(lane) / (K + rank of d in that lane).

K = 60 is the constant of Cormack, Clarke and Buettcher (SIGIR 2009), used unchanged: it
damps the head of each list so that no single lane decides alone, and it needs no score
calibration between lanes (BM25 scores and cosines are not comparable).

The lane weights are fitted on the aggregate of two benchmarks (LoCoMo and BEAM-100K), not per
question type: the static embedder's lane is the weakest and drags an even fusion down, yet it is
the lane that answers when the question shares no word with the memory, and a weight only matters
where two lanes both rank something. The figures, and what was tried: docs/decisions.md.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence

from .ties import Keys, by_score

RRF_K = 60
LANE_WEIGHTS = {  # chosen with bench/recall.py; bench/fusion_fit.py refits them
    "text": 0.75,
    "vector": 0.25,
    "entity": 0.65,
    "time": 1.0,
    "instruction": 1.0,
    "preference": 0.5,
    "late": 0.65,
    "notes": 2.0,  # chosen on the scenario corpus's dev split (bench/scenarios.py; docs/decisions.md)
}


def rrf(
    lanes: Mapping[str, Sequence[int]],
    k: int = RRF_K,
    weights: Mapping[str, float] | None = None,
    keys: Keys | None = None,
    among: Collection[int] | None = None,
) -> list[tuple[int, float]]:
    """(nid, fused score), best first; ties in member-key order (``keys``: ties.py), else the smaller nid first.

    ``weights`` per lane name (1.0 for a lane it does not name; all 1.0 when None: plain RRF).
    ``among``: only these nodes are scored (their order is the one they hold in the whole fusion).
    """
    fused: dict[int, float] = {}
    for lane, ranking in lanes.items():
        weight = 1.0 if weights is None else weights.get(lane, 1.0)
        for rank, nid in enumerate(ranking, start=1):
            if among is None or nid in among:
                fused[nid] = fused.get(nid, 0.0) + weight / (k + rank)
    if keys is not None:
        return by_score(list(fused.items()), keys)
    return sorted(fused.items(), key=lambda item: (-item[1], item[0]))
