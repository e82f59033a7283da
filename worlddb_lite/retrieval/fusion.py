"""Reciprocal rank fusion: score(d) = sum over lanes of weight(lane) / (K + rank of d in that lane).

K = 60 is the constant of Cormack, Clarke and Buettcher (SIGIR 2009), used unchanged: it
damps the head of each list so that no single lane decides alone, and it needs no score
calibration between lanes (BM25 scores and cosines are not comparable).

The lane weights were chosen on the aggregate of two benchmarks, not per question type
(``bench/recall.py``; LoCoMo turn recall@10 and BEAM-100K recall@10 and update order): the
static embedder's lane is the weakest and drags an even fusion down (LoCoMo 0.632 even vs
0.689 weighted), yet it is the lane that answers when the question shares no word with the
memory, and a weight only matters where two lanes both rank something.

Measured and not adopted (both benchmarks, same run each): K = 20 or 10 instead of 60 (LoCoMo
recall@10 0.722 -> 0.721 / BEAM 0.427 -> 0.436 at K = 20: within noise on LoCoMo, and the issue
fixes K = 60); other weights (vector 0.5, entity 0.75 or 1.0: LoCoMo 0.675-0.707, BEAM
unchanged); a Rocchio pseudo-relevance lane (the query vector moved towards the top 3-10 fused
hits, as a fourth lane over the fused head: LoCoMo 0.647-0.674, BEAM 0.364-0.415); a BM25
feedback lane (the question plus the 4-8 words most frequent in the first 5 fused turns: LoCoMo
recall@1 0.379 -> 0.392 but recall@10 flat, and a second full-text query's cost); a coverage prior
(a head turn gains by the share of the question's IDF mass it holds: LoCoMo 0.736-0.749, BEAM
0.608-0.614); the time lane at 0.25-2 (LoCoMo 0.761-0.764 where 1 gives 0.763; the same lane as a
prior on the head alone, 0.757).

Refitted once the late stage, the deeper lanes and the priors were in place: a coordinate search
over every lane weight and prior of ``retrieval.recall`` on the mean recall@10 of both benchmarks,
each setting replayed over lane rankings read once (a script that replayed fusion and the priors
but not the update moves; ``bench/fusion_fit.py`` now does the same through ``recall.rank``).
Fitted on every other conversation of each benchmark (alphabetical order), it gained on the
conversations it had not seen too: LoCoMo 0.758 -> 0.763 and 0.794 -> 0.805, BEAM 0.644 -> 0.647
(and 0.660 -> 0.660 the other way). The fit on every conversation was kept, rounded: text 1.0 ->
0.75, entity and late 0.5 -> 0.65, ``NAMED_SPEAKER_WEIGHT`` 0.1 -> 0.125 (the replay without the
update moves: LoCoMo 0.776 -> 0.789, BEAM 0.652 -> 0.657). ``bench/recall.py``: LoCoMo turn
recall@10 0.776 -> 0.788 (session recall@5 0.932 -> 0.935), BEAM-100K 0.652 -> 0.656 (recall@1
0.217 -> 0.205), update order unchanged; among 100k memories (``bench/recall_scale.py --quality
800``) LoCoMo 0.633 -> 0.661. From here ``bench/fusion_fit.py --fit-on even`` moves only the
preference lane (0.5 -> 0.375, held-out mean +0.0003): a local optimum, left as it is.
Replayed the same way and not adopted (LoCoMo / BEAM recall@10 against the replay's 0.789 / 0.657
after the refit, or its 0.776 / 0.652 before): the fused score plus a share of the raw BM25, late
or cosine score (before: 0.774-0.778 / 0.636-0.658, recall@1 up); a bonus for the first three of
the text and late lanes (0.786-0.788 / 0.652-0.654); a bonus for a node in the first 20 of three
or four lanes (0.778-0.785 / 0.648-0.657); the session's own BM25 rank or score, its turns
concatenated (0.785-0.793 / 0.610-0.657, and an index of sessions to keep); the entity lane ordered
by the late stage's MaxSim instead of cosine, refitted (0.790 / 0.659, +3 ms a recall).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

RRF_K = 60
LANE_WEIGHTS = {
    "text": 0.75,
    "vector": 0.25,
    "entity": 0.65,
    "time": 1.0,
    "instruction": 1.0,
    "preference": 0.5,
    "late": 0.65,
}


def rrf(
    lanes: Mapping[str, Sequence[int]], k: int = RRF_K, weights: Mapping[str, float] | None = None
) -> list[tuple[int, float]]:
    """(nid, fused score), best first; ties go to the smaller nid so the order is deterministic.

    ``weights`` per lane name (1.0 for a lane it does not name; all 1.0 when None: plain RRF).
    """
    fused: dict[int, float] = {}
    for lane, ranking in lanes.items():
        weight = 1.0 if weights is None else weights.get(lane, 1.0)
        for rank, nid in enumerate(ranking, start=1):
            fused[nid] = fused.get(nid, 0.0) + weight / (k + rank)
    return sorted(fused.items(), key=lambda item: (-item[1], item[0]))
