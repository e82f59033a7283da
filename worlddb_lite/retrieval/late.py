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
row (tokenizing the pool here cost ~6 ms a recall at 100k memories).

Adopted on the figures of ``bench/recall.py`` and, among 100k memories where it matters more, of
``bench/recall_scale.py --quality``; they, and what was tried around it, are in docs/decisions.md.
Its cost is timed apart by ``bench/recall_scale.py`` (the ``late`` lane);
``recall(late=False)`` skips it.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..index.token_index import content_tokens, index_rows
from ..models.embed import TokenVectors
from ..store import queries
from .view import ReadView

LATE_POOL = 300  # candidates re-ranked: the first of the other lanes' fusion (their lanes are 200 deep)
LATE_QUERY = 2000  # characters of the question read
LATE_ASKED = 32  # distinct question tokens matched at most (no benchmark question has more than 30)


def late_lane(
    view: ReadView, tokens: TokenVectors, query: str, candidates: list[int], extra: Sequence[int] = ()
) -> list[int]:
    """``candidates`` (first ``LATE_POOL``) and ``extra`` by MaxSim against ``query``, best first; [] if none.

    ``extra`` is scored past the pool's cut (recall.py: the notes nearest the question, which a note
    no other lane found needs to be matched at all).
    """
    pool = list(dict.fromkeys([*list(dict.fromkeys(candidates))[:LATE_POOL], *extra]))
    kept, score = late_scores(view, tokens, query, pool)
    return [kept[i] for i in np.argsort(-score, kind="stable")]


def late_scores(view: ReadView, tokens: TokenVectors, query: str, pool: Sequence[int]) -> tuple[list[int], np.ndarray]:
    """Those of ``pool`` with content tokens in the index, and each one's MaxSim against ``query``."""
    asked = asked_tokens(tokens, query)
    if not asked.size or not pool:
        return [], np.zeros(0)
    reader = content_tokens(tokens)
    rows = queries.token_rows(view.conn, pool)
    missing = [nid for nid in pool if nid not in rows]
    if missing:  # read by another process between the v5 migration and the token index's rewrite
        rows.update(index_rows(tokens, queries.indexed(view.conn, missing)))
    kept = [nid for nid in pool if rows.get(nid)]  # an empty row: a text of function words only
    if not kept:
        return [], np.zeros(0)
    return kept, match(tokens, asked, [reader.decode(rows[nid]) for nid in kept])


def text_scores(tokens: TokenVectors, query: str, texts: Sequence[str], most: int) -> np.ndarray:
    """Each of ``texts``' (its first ``most`` characters) MaxSim against ``query``: 0 for one of no content tokens.

    How much of the question a text says in any words ("sport" meets "tennis"): how sure a recall is
    (``confidence.py``) reads its first hits' own words, not the index rows, which hold their neighbours' too.
    """
    asked = asked_tokens(tokens, query)
    reader = content_tokens(tokens)
    said = [np.asarray(reader.ids(text[:most], most), dtype=reader.dtype) for text in texts]
    scores = np.zeros(len(texts))
    some = [i for i, ids in enumerate(said) if ids.size]
    if asked.size and some:
        scores[some] = match(tokens, asked, [said[i] for i in some])
    return scores


def asked_tokens(tokens: TokenVectors, query: str) -> np.ndarray:
    """The question's distinct content tokens of some weight, its ``LATE_ASKED`` weightiest at most."""
    reader = content_tokens(tokens)
    asked = np.unique(np.asarray(reader.ids(query[:LATE_QUERY], LATE_QUERY), dtype=np.int64))
    asked = asked[tokens.weight[asked] > 0]
    if asked.size > LATE_ASKED:  # the cost grows with the question: keep its weightiest tokens
        asked = np.sort(asked[np.argsort(-tokens.weight[asked], kind="stable")[:LATE_ASKED]])
    return asked


def match(tokens: TokenVectors, asked: np.ndarray, texts: Sequence[np.ndarray]) -> np.ndarray:
    """Each text's (its token ids, none empty) MaxSim against the ``asked`` tokens."""
    flat = np.concatenate(texts)  # every candidate's tokens, one after another
    sizes = np.fromiter(map(len, texts), dtype=np.int64, count=len(texts))
    starts = np.concatenate(([0], np.cumsum(sizes[:-1])))
    # cosines over the distinct tokens (a pool shares most of its words), then spread to every position;
    # distinct by a mark per vocabulary entry: a fifth of np.unique's sort
    present = np.zeros(tokens.size, dtype=bool)
    present[flat] = True
    distinct = np.flatnonzero(present)
    position = np.zeros(present.shape[0], dtype=np.int32)
    position[distinct] = np.arange(distinct.size, dtype=np.int32)
    cosines = (tokens.unit(asked) @ tokens.unit(distinct).T)[:, position[flat]]  # question x candidate tokens
    best = np.maximum.reduceat(cosines, starts, axis=1)  # each question token's best match, per candidate
    best = np.maximum(best, 0.0)  # an opposed token is no match, not a penalty
    return maxsim(tokens.weight[asked], best)


def maxsim(weight: np.ndarray, best: np.ndarray) -> np.ndarray:
    """Each candidate's score: its best matches (question tokens x candidates), averaged by token weight.

    An elementwise product summed row by row in float64, not a BLAS product: candidates with the same
    best matches score exactly alike on every machine (x86-64's kernel put such ties a float step apart,
    so the same store ranked them differently on aarch64: bench/aarch64.sh).
    """
    weights = weight.astype(np.float64)
    out: np.ndarray = (weights[:, None] * best).sum(axis=0) / weights.sum()
    return out
