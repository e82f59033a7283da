"""How likely a recall's first hit answers the question: a confidence in [0, 1], from signals a recall has.

The fused score orders one recall's hits and says nothing across questions (a rank fusion gives every
question's first hit about the same score). What does, measured on LoCoMo's answerable questions against
its category 5 and on the blind scenario corpus (bench/abstention.py; docs/decisions.md):

* ``coverage``: the share of the question's content words (function words out, their first five
  letters) that the first hit, or a turn it stands for, holds; ``coverage_near``: the most any of the
  first three holds; ``coverage_all``: what the first ten hold together;
* ``cosine``: the question's cosine to the first hit (its stored vector);
* ``cosine_gap``: that cosine minus the mean cosine of the hits after it (up to the tenth, at least
  three): a hit that stands out from the background of what else came back.

Not the fused scores: they are rank fusions (every question's first hit scores about the same), and in
a store of a few memories the margin to a missing second hit says nothing about an answer.

They are weighed by a logistic fit (``WEIGHTS``, ``BIAS``) on the dev splits only: ``python
bench/confidence_fit.py`` prints them, the test splits judge them. A recall with no hits is 0.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np

from ..text.stopwords import is_function_word
from ..text.words import WORD
from ..types import Hit
from .view import ReadView

SIGNALS = ("coverage", "coverage_near", "coverage_all", "cosine", "cosine_gap")
STEM = 5  # words compared by their first letters: "allergy" and "allergic" agree
READ_CHARS = 2000  # characters of a hit read for its words
BACKGROUND = 10  # the hits a first hit is compared with, at most ...
LEAST_BACKGROUND = 3  # ... and at least (fewer: no gap is told, as in a store of a few memories)
# Fit on the dev splits (LoCoMo conversations at even positions + the scenario corpus's dev cases) for
# "the first hit answers": python bench/confidence_fit.py, 2026-11-29
WEIGHTS: Mapping[str, float] = {
    "coverage": 2.2146,
    "coverage_near": 0.5729,
    "coverage_all": -1.0389,
    "cosine": -0.6101,
    "cosine_gap": 6.3927,
}
BIAS = -1.2054


def content_words(text: str) -> set[str]:
    """The words of ``text`` that carry its content, by their first ``STEM`` letters (function words out).

    Read to ``READ_CHARS``: a long message's words past it rarely decide whether it answers, and cost.
    """
    return {w[:STEM] for w in set(WORD.findall(text[:READ_CHARS].casefold())) if not is_function_word(w)}


def signals(view: ReadView, query: str, vector: np.ndarray | None, hits: Sequence[Hit]) -> dict[str, float]:
    """The recall's signals (``SIGNALS``) for its first hit; {} when there is none."""
    if not hits:
        return {}
    asked = content_words(query)
    held = [content_words(" ".join(_said(hit))) for hit in hits[:BACKGROUND]]

    def share(words: set[str]) -> float:
        return len(asked & words) / len(asked) if asked else 0.0

    coverage = share(held[0])
    near = max(share(words) for words in held[:3])
    every = share(set().union(*held))
    cosine = gap = 0.0
    if vector is not None:
        nids = [view.store.resolve(hit.node.id) for hit in hits[:BACKGROUND]]
        found = view.index().cosines(nids, vector)
        cosines = [found.get(nid, 0.0) for nid in nids]
        cosine = cosines[0]
        rest = cosines[1:]
        gap = cosine - sum(rest) / len(rest) if len(rest) >= LEAST_BACKGROUND else 0.0
    return {"coverage": coverage, "coverage_near": near, "coverage_all": every, "cosine": cosine, "cosine_gap": gap}


def _said(hit: Hit) -> list[str]:
    """What a hit says: its content and name, and the turns it stands for."""
    return [hit.node.content or "", hit.node.name or "", *(turn.content or "" for turn in hit.turns)]


def confidence(signal: Mapping[str, float], weights: Mapping[str, float] = WEIGHTS, bias: float = BIAS) -> float:
    """The logistic of the weighed signals, in [0, 1]; 0 when there are none (nothing came back)."""
    if not signal:
        return 0.0
    z = bias + sum(weights[name] * float(signal.get(name, 0.0)) for name in SIGNALS)
    return 1.0 / (1.0 + math.exp(-max(-60.0, min(60.0, z))))
