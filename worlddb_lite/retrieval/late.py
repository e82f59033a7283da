"""The late-interaction lane: the other lanes' finds re-ranked token by token (MaxSim).

A static model embeds a text as one mean of its token vectors, so a long turn's few words on
the question's subject drown in the rest, and the vector lane is the weakest lane. Here each
content token of the question is matched to its closest token in a candidate's text, and the
candidate scores the weighted mean of those best cosines (the MaxSim of ColBERT, Khattab and
Zaharia, SIGIR 2020, with the static model's token vectors instead of a transformer's): "camping"
meets "campground" and "tent", "pets" meets "dogs", wherever they stand in the text.

It ranks only what the other lanes found (the first ``LATE_POOL`` of their fusion), so it
re-orders and never adds; its ranking is fused with theirs by RRF like any lane. A candidate is
read for its first ``LATE_TOKENS`` content tokens: a long message states its subject first.

Measured (``bench/out``-style harness over both benchmarks, the same run each; recall@10, R@1):
LoCoMo 0.765 -> 0.777 (R@1 0.397 -> 0.406), BEAM-100K 0.623 -> 0.631 (R@1 0.199 -> 0.212), update
order unchanged, at weight 0.5. Weight 0.25 / 0.75: LoCoMo 0.775 / 0.776, BEAM 0.623 / 0.619 (all
tokens); a pool of 100: 0.772 / 0.625; every token of a long message: BEAM 0.623; a length
penalty: no better. Not adopted either: the query's words widened by their nearest vocabulary
tokens as a BM25 lane (LoCoMo 0.771, BEAM 0.621, update order 0.795).
"""

from __future__ import annotations

import re
from functools import lru_cache

import numpy as np

from .. import reads
from ..embed import TokenVectors
from .lanes import STOPWORDS
from .view import ReadView

LATE_POOL = 200  # candidates re-ranked: the first of the other lanes' fusion
LATE_TOKENS = 64  # content tokens read from each candidate (BEAM: all tokens 0.623, 64 gives 0.631)
LATE_QUERY = 2000  # characters of the question read
LATE_CHARS = 1500  # characters of a candidate read: enough for LATE_TOKENS content tokens


class _Reader:
    """A token table's content tokens per word and per text, each tokenized once.

    Every recall reads up to ``LATE_POOL`` texts, and successive recalls over one memory read
    many of the same ones: a remembered text costs a dictionary lookup, a new one a lookup per
    word, where the tokenizer would cost ~15 ms a recall.
    """

    WORDS = 200_000  # distinct words remembered; past this the cache starts again
    TEXTS = 20_000  # texts remembered (each cut to LATE_CHARS), likewise

    def __init__(self, tokens: TokenVectors) -> None:
        self.tokens = tokens
        self.skip = np.zeros(tokens.unit.shape[0], dtype=bool)  # function words, pieces of no letter or digit
        for piece, tid in tokens.vocabulary.items():
            if tid < self.skip.shape[0] and (piece in STOPWORDS or not piece.strip("#").isalnum()):
                self.skip[tid] = True
        self.words: dict[str, tuple[int, ...]] = {}
        self.texts: dict[str, list[int]] = {}

    def text_ids(self, text: str) -> list[int]:
        """``ids(text, LATE_TOKENS)``, remembered."""
        found = self.texts.get(text)
        if found is None:
            if len(self.texts) >= self.TEXTS:
                self.texts.clear()
            found = self.texts[text] = self.ids(text, LATE_TOKENS)
        return found

    def ids(self, text: str, most: int) -> list[int]:
        """The ids of ``text``'s first ``most`` content tokens, in order."""
        out: list[int] = []
        for word in _WORD.findall(text.lower()):
            found = self.words.get(word)
            if found is None:
                if len(self.words) >= self.WORDS:
                    self.words.clear()
                found = self.words[word] = tuple(i for i in self.tokens.word_ids(word) if not self.skip[i])
            out.extend(found)
            if len(out) >= most:
                return out[:most]
        return out


_WORD = re.compile(r"[^\W_]+")  # runs of letters and digits: the tokenizer splits at the rest anyway


@lru_cache(maxsize=4)
def _reader(tokens: TokenVectors) -> _Reader:
    return _Reader(tokens)


def late_lane(view: ReadView, tokens: TokenVectors, query: str, candidates: list[int]) -> list[int]:
    """``candidates`` (first ``LATE_POOL``) by MaxSim against ``query``, best first; [] if nothing to match."""
    reader = _reader(tokens)
    asked = np.unique(np.asarray(reader.ids(query[:LATE_QUERY], LATE_QUERY), dtype=np.int64))
    pool = list(dict.fromkeys(candidates))[:LATE_POOL]
    if not asked.size or not pool:
        return []
    texts = reads.texts(view.conn, pool, LATE_CHARS)
    kept: list[int] = []
    flat: list[int] = []
    starts: list[int] = []
    for nid in pool:
        ids = reader.text_ids(texts.get(nid, ""))
        if ids:
            kept.append(nid)
            starts.append(len(flat))
            flat.extend(ids)
    if not kept:
        return []
    cosines = tokens.unit[asked] @ tokens.unit[np.asarray(flat, dtype=np.int64)].T  # question x candidate tokens
    best = np.maximum.reduceat(cosines, np.asarray(starts), axis=1)  # each question token's best match, per candidate
    best = np.maximum(best, 0.0)  # an opposed token is no match, not a penalty
    weight = tokens.weight[asked]
    score = (weight @ best) / weight.sum()
    return [kept[i] for i in np.argsort(-score, kind="stable")]
