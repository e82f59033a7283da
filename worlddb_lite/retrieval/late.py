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
first ``LATE_TOKENS`` content tokens: a long message states its subject first. Its own words
alone: LoCoMo 0.771 against 0.776, BEAM the same.

Measured (``bench/recall.py``, recall@10 and recall@1): LoCoMo 0.765 -> 0.776 (R@1 0.399 -> 0.408),
BEAM-100K 0.623 -> 0.631 (R@1 0.199 -> 0.212), update order unchanged, at weight 0.5 with lanes 100
deep and a pool of 200; lanes 200 deep and a pool of 300 then took BEAM to 0.645 (recall.py). Its cost is
timed apart by ``bench/recall_scale.py`` (the ``late`` lane); ``recall(late=False)`` skips it.

Measured around it and not adopted (LoCoMo / BEAM recall@10, one harness run each):
- late weight 0.25 / 0.75 / 1.0: 0.775 / 0.776 / 0.777 and 0.623 / 0.624 / 0.629 (update order 0.846
  at 0.75, 0.821 at 1.0); the vector lane at 0.1 / 0.5 beside it: 0.776 / 0.770, 0.637 / 0.619
  (update order 0.821 / 0.846);
- (lanes 100 deep) a pool of 100: 0.772 / 0.625 (every token read), of 300: LoCoMo 0.776; every
  token of a long message: BEAM 0.623; 1,500 characters read instead of 800: the same figures;
  (lanes 200 deep) a pool of 200: 0.773 / 0.645;
- a length penalty, or the candidate's tokens matched back to the question's (30%): no better;
- a question token weighed down by how many of the pool match it (cosine >= 0.8 or 0.9, BM25's IDF
  within the pool): 0.782 / 0.621; the speaker's name left out of the text: 0.773 / 0.627; the
  model's token weights squared or square-rooted: within 0.002 on both;
- instead of this lane, the query's words widened by their nearest vocabulary tokens as a BM25
  lane: 0.771 / 0.621, update order 0.795.
"""

from __future__ import annotations

import string
from itertools import chain, islice
from weakref import WeakKeyDictionary, ref

import numpy as np

from .. import reads
from ..embed import TokenVectors
from .lanes import STOPWORDS
from .view import ReadView

LATE_POOL = 300  # candidates re-ranked: the first of the other lanes' fusion (their lanes are 200 deep)
LATE_TOKENS = 64  # content tokens read from each candidate (BEAM: all tokens 0.623, 64 gives 0.631)
LATE_QUERY = 2000  # characters of the question read
LATE_ASKED = 32  # distinct question tokens matched at most (no benchmark question has more than 30)
LATE_CHARS = 800  # characters of a candidate read: enough for LATE_TOKENS content tokens (1500: the same figures)

# ASCII punctuation becomes a space, then the text splits at spaces: a third of a regex's cost. A
# word still holding other punctuation ("café—") is tokenized whole once, and the pieces dropped.
_APART = str.maketrans(dict.fromkeys(string.punctuation, " "))
_WORD_MARKS = "#▁Ġ"  # where a vocabulary marks a piece as a word's start or continuation


class _Reader:
    """A token table's content tokens per word and per text, each tokenized once.

    Every recall reads up to ``LATE_POOL`` texts, and successive recalls over one memory read
    many of the same ones: a remembered text costs a dictionary lookup, a new one a lookup per
    word, where the tokenizer would cost ~15 ms a recall.
    """

    WORDS = 100_000  # distinct words remembered (each at most LONGEST characters); past this it starts again
    TEXTS = 10_000  # texts remembered (each cut to LATE_CHARS: ~15 MB at most), likewise
    LONGEST = 40  # a longer "word" (a hash, a blob of base64) is tokenized each time, not kept

    def __init__(self, tokens: TokenVectors) -> None:
        self._tokens = ref(tokens)  # weak: _READERS holds this reader only as long as the table lives
        self.skip = np.zeros(tokens.unit.shape[0], dtype=bool)  # function words, pieces of no letter or digit
        for piece, tid in tokens.vocabulary.items():
            core = piece.lstrip(_WORD_MARKS)  # "##ing" (WordPiece), "▁the" (sentencepiece), "Ġdog" (byte-level)
            function_word = not piece.startswith("##") and core.lower() in STOPWORDS  # "##s" ends a word
            if tid < self.skip.shape[0] and (function_word or not core.isalnum()):
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
        words = text.lower().translate(_APART).split()
        found = list(map(self.words.get, words))  # one C-level pass; a new word is rare after the first recalls
        if None in found:
            for at, word in enumerate(words):
                if found[at] is None:
                    found[at] = self._learn(word)
        return list(islice(chain.from_iterable(found), most))  # type: ignore[arg-type]

    def _learn(self, word: str) -> tuple[int, ...]:
        tokens = self._tokens()
        assert tokens is not None, "a reader outlived its token table"
        ids = tuple(i for i in tokens.word_ids(word) if not self.skip[i])
        if len(word) <= self.LONGEST:
            if len(self.words) >= self.WORDS:
                self.words.clear()
            self.words[word] = ids
        return ids


_READERS: WeakKeyDictionary[TokenVectors, _Reader] = WeakKeyDictionary()  # gone with their token table


def _reader(tokens: TokenVectors) -> _Reader:
    reader = _READERS.get(tokens)
    if reader is None:
        reader = _READERS[tokens] = _Reader(tokens)
    return reader


def late_lane(view: ReadView, tokens: TokenVectors, query: str, candidates: list[int]) -> list[int]:
    """``candidates`` (first ``LATE_POOL``) by MaxSim against ``query``, best first; [] if nothing to match."""
    reader = _reader(tokens)
    asked = np.unique(np.asarray(reader.ids(query[:LATE_QUERY], LATE_QUERY), dtype=np.int64))
    asked = asked[tokens.weight[asked] > 0]
    if asked.size > LATE_ASKED:  # the cost grows with the question: keep its weightiest tokens
        asked = np.sort(asked[np.argsort(-tokens.weight[asked], kind="stable")[:LATE_ASKED]])
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
    # cosines over the distinct tokens (a pool shares most of its words), then spread to every position
    distinct, position = np.unique(np.asarray(flat, dtype=np.int64), return_inverse=True)
    cosines = (tokens.unit[asked] @ tokens.unit[distinct].T)[:, position]  # question x candidate tokens
    best = np.maximum.reduceat(cosines, np.asarray(starts), axis=1)  # each question token's best match, per candidate
    best = np.maximum(best, 0.0)  # an opposed token is no match, not a penalty
    weight = tokens.weight[asked]
    score = (weight @ best) / weight.sum()
    return [kept[i] for i in np.argsort(-score, kind="stable")]
