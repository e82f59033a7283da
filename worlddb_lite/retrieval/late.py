"""The late-interaction lane: the other lanes' finds re-ranked token by token (MaxSim).

A static model embeds a text as one mean of its token vectors, so a long turn's few words on
the question's subject drown in the rest, and the vector lane is the weakest lane. Here each
content token of the question is matched to its closest token in a candidate's text, and the
candidate scores the weighted mean of those best cosines (the MaxSim of ColBERT, Khattab and
Zaharia, SIGIR 2020, with the static model's token vectors instead of a transformer's): "camping"
meets "campground" and "tent", "pets" meets "dogs", wherever they stand in the text.

It ranks only what the other lanes found (the first ``LATE_POOL`` of their fusion), so it
re-orders and never adds; its ranking is fused with theirs by RRF like any lane. A candidate is
read as the full-text index holds it (its own words, then any context the bridge added) for its
first ``token_index.TOKENS`` content tokens, which the token index wrote down with its full-text
row (tokenizing the pool here cost ~6 ms a recall at 100k memories). Its own words alone: LoCoMo
0.771 against 0.776, BEAM the same.

Measured (``bench/recall.py``, recall@10 and recall@1): LoCoMo 0.765 -> 0.776 (R@1 0.399 -> 0.408),
BEAM-100K 0.623 -> 0.631 (R@1 0.199 -> 0.212), update order unchanged, at weight 0.5 with lanes 100
deep and a pool of 200; lanes 200 deep and a pool of 300 then took BEAM to 0.645 (recall.py). Among
100k memories it matters more: LoCoMo recall@10 0.616 without it, 0.661 with it (weight 0.65;
``bench/recall_scale.py``'s quality check, 800 questions). Its cost is
timed apart by ``bench/recall_scale.py`` (the ``late`` lane); ``recall(late=False)`` skips it.

Measured around it and not adopted (LoCoMo / BEAM recall@10, one harness run each):
- late weight 0.25 / 0.75 / 1.0: 0.775 / 0.776 / 0.777 and 0.623 / 0.624 / 0.629 (update order 0.846
  at 0.75, 0.821 at 1.0); the vector lane at 0.1 / 0.5 beside it: 0.776 / 0.770, 0.637 / 0.619
  (update order 0.821 / 0.846);
- (lanes 100 deep) a pool of 100: 0.772 / 0.625 (every token read), of 300: LoCoMo 0.776; every
  token of a long message: BEAM 0.623; 1,500 characters read instead of 800: the same figures;
  (lanes 200 deep) a pool of 200: 0.773 / 0.645; of 450 or 600: 0.776 / 0.652 (with the answer's lift), as at 300;
- a length penalty, or the candidate's tokens matched back to the question's (30%): no better;
- a question token weighed down by how many of the pool match it (cosine >= 0.8 or 0.9, BM25's IDF
  within the pool): 0.782 / 0.621; the speaker's name left out of the text: 0.773 / 0.627; the
  model's token weights squared or square-rooted: within 0.002 on both;
- instead of this lane, the query's words widened by their nearest vocabulary tokens as a BM25
  lane: 0.771 / 0.621, update order 0.795.
- (after the refit of the lane weights, LoCoMo 0.788) each token's vector mixed with its neighbours'
  in the text, question and candidate alike (v + a x the mean of the tokens either side, a = 0.2 /
  0.5): 0.784 / 0.785, and every position scored instead of each distinct token (0.788 at a = 0),
  ~15 ms more a recall.
"""

from __future__ import annotations

import numpy as np

from ..models.embed import TokenVectors
from ..store import queries
from ..store.token_index import content_tokens, index_rows
from .view import ReadView

LATE_POOL = 300  # candidates re-ranked: the first of the other lanes' fusion (their lanes are 200 deep)
LATE_QUERY = 2000  # characters of the question read
LATE_ASKED = 32  # distinct question tokens matched at most (no benchmark question has more than 30)


def late_lane(view: ReadView, tokens: TokenVectors, query: str, candidates: list[int]) -> list[int]:
    """``candidates`` (first ``LATE_POOL``) by MaxSim against ``query``, best first; [] if nothing to match."""
    reader = content_tokens(tokens)
    asked = np.unique(np.asarray(reader.ids(query[:LATE_QUERY], LATE_QUERY), dtype=np.int64))
    asked = asked[tokens.weight[asked] > 0]
    if asked.size > LATE_ASKED:  # the cost grows with the question: keep its weightiest tokens
        asked = np.sort(asked[np.argsort(-tokens.weight[asked], kind="stable")[:LATE_ASKED]])
    pool = list(dict.fromkeys(candidates))[:LATE_POOL]
    if not asked.size or not pool:
        return []
    rows = queries.token_rows(view.conn, pool)
    missing = [nid for nid in pool if nid not in rows]
    if missing:  # read by another process between the v5 migration and the token index's rewrite
        rows.update(index_rows(tokens, queries.indexed(view.conn, missing)))
    kept = [nid for nid in pool if rows.get(nid)]  # an empty row: a text of function words only
    if not kept:
        return []
    blobs = [rows[nid] for nid in kept]
    flat = reader.decode(b"".join(blobs))  # every candidate's tokens, one after another
    sizes = np.fromiter(map(len, blobs), dtype=np.int64, count=len(blobs)) // reader.dtype.itemsize
    starts = np.concatenate(([0], np.cumsum(sizes[:-1])))
    # cosines over the distinct tokens (a pool shares most of its words), then spread to every position;
    # distinct by a mark per vocabulary entry: a fifth of np.unique's sort
    present = np.zeros(tokens.unit.shape[0], dtype=bool)
    present[flat] = True
    distinct = np.flatnonzero(present)
    position = np.zeros(present.shape[0], dtype=np.int32)
    position[distinct] = np.arange(distinct.size, dtype=np.int32)
    cosines = (tokens.unit[asked] @ tokens.unit[distinct].T)[:, position[flat]]  # question x candidate tokens
    best = np.maximum.reduceat(cosines, starts, axis=1)  # each question token's best match, per candidate
    best = np.maximum(best, 0.0)  # an opposed token is no match, not a penalty
    weight = tokens.weight[asked]
    score = (weight @ best) / weight.sum()
    return [kept[i] for i in np.argsort(-score, kind="stable")]
