"""How likely a recall's first hit answers the question: a confidence in [0, 1], from signals a recall has.

The fused score orders one recall's hits and says nothing across questions (a rank fusion gives every
question's first hit about the same score). What does, measured on LoCoMo's answerable questions against
its category 5 and on the blind scenario corpus (bench/abstention.py; docs/decisions.md):

* ``coverage``: the share of the question's content words (function words out, their first five
  letters) that the first hit, or a turn it stands for, holds; ``coverage_near``: the most any of the
  first three holds; ``coverage_all``: what the first ten hold together;
* ``matched``: how much of the question the first hit says in any words, token by token (the late
  lane's MaxSim: "sport" meets "tennis"); ``matched_near``: the most any of the first three says;
* ``cosine``: the question's cosine to the first hit (its stored vector);
* ``cosine_gap``: that cosine minus the mean cosine of the hits after it (up to the tenth, at least
  three): a hit that stands out from the background of what else came back;
* whose the words are: a question about a person (a hit of the first ten carries the ``person`` prior's
  reason: said by them, written for them, or naming them) is answered by that person's memories, so
  ``asked``: 1 when one does; ``asked_coverage``: the most of the question's content words (the hits'
  speakers' names out) one of those holds; ``other_coverage``: the most one of the other hits holds;
  ``asked_lead``: the first minus the second when a person is asked about. "What did Caroline realise
  after her charity race?" when Melanie ran it finds Melanie's words, not Caroline's (LoCoMo's
  category 5 asks that way): coverage and cosine are as high as for an answer, the lead is not.

Not the fused scores: they are rank fusions (every question's first hit scores about the same), and in
a store of a few memories the margin to a missing second hit says nothing about an answer.

They are weighed by a logistic (``WEIGHTS``, ``BIAS``) fit on the dev splits only, in two steps: its
direction tells questions something stored answers from those nothing does, and its scale and offset
map that onto the share of recalls whose first hit answers (``python bench/confidence_fit.py`` prints
them; the test splits judge them). A recall with no hits is 0.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence

import numpy as np

from ..text.stopwords import is_function_word
from ..text.words import WORD
from ..types import Hit
from .lanes import file_cosines
from .late import text_scores
from .view import ReadView

SIGNALS = (
    "coverage",
    "coverage_near",
    "coverage_all",
    "matched",
    "matched_near",
    "cosine",
    "cosine_gap",
    "asked",
    "asked_coverage",
    "other_coverage",
    "asked_lead",
)
ABOUT_ASKED = "person"  # the reason the person prior gives a hit about whom the question asks (retrieval/recall.py)
STEM = 5  # words compared by their first letters: "allergy" and "allergic" agree
POSSESSIVE = re.compile(r"['’]s$")
ENDINGS = ("ing", "ed", "s")  # the endings a word is compared without
READ_CHARS = 2000  # characters of a hit read for its words
BACKGROUND = 10  # the hits a first hit is compared with, at most ...
LEAST_BACKGROUND = 3  # ... and at least (fewer: no gap is told, as in a store of a few memories)
# Fit on the dev splits (LoCoMo conversations at even positions, the off-topic questions at even
# positions, the scenario corpus's dev cases): the direction for "something stored answers", each weight
# on the side bench/confidence_fit.py's SIGNS says, the scale for "the first hit answers" (python
# bench/confidence_fit.py, 2026-12-06). Correlated signals share the weight: read none alone.
WEIGHTS: Mapping[str, float] = {
    "coverage": 0.0,
    "coverage_near": 0.201,
    "coverage_all": 0.3661,
    "matched": 1.0258,
    "matched_near": 1.1801,
    "cosine": 0.5925,
    "cosine_gap": 0.1318,
    "asked": 1.3098,
    "asked_coverage": 0.0,
    "other_coverage": -0.5935,
    "asked_lead": 0.8496,
}
BIAS = -4.2455


def content_words(text: str) -> set[str]:
    """The words of ``text`` that carry its content, by their first ``STEM`` letters (function words out).

    Read to ``READ_CHARS``: a long message's words past it rarely decide whether it answers, and cost.
    A possessive is its owner: "Jon's" is "jon", as the speaker's name it may be left out as; a word is
    compared without an ending "s", "ed" or "ing" ("works", "worked", "working" and "work" agree).
    """
    said = {POSSESSIVE.sub("", w) for w in WORD.findall(text[:READ_CHARS].casefold())}
    return {_stem(w) for w in said if w and not is_function_word(w)}


def _stem(word: str) -> str:
    for ending in ENDINGS:
        if word.endswith(ending) and len(word) - len(ending) >= 3 and not word.endswith("ss"):
            return word[: -len(ending)][:STEM]
    return word[:STEM]


def signals(view: ReadView, query: str, vector: np.ndarray | None, hits: Sequence[Hit]) -> dict[str, float]:
    """The recall's signals (``SIGNALS``) for its first hit; {} when there is none."""
    if not hits:
        return {}
    asked = content_words(query)
    held = [content_words(" ".join(_said(hit))) for hit in hits[:BACKGROUND]]
    coverage = _share(asked, held[0])
    near = max(_share(asked, words) for words in held[:3])
    every = _share(asked, set().union(*held))
    ids = [bytes.fromhex(hit.node.id) for hit in hits[:BACKGROUND]]
    known = view.store.nids_of(ids)  # one query for the ten, not a lookup each
    nids = [known[raw] for raw in ids]
    matched = [0.0]
    if view.tokens is not None:
        texts = [" ".join(_said(hit)) for hit in hits[:3]]
        matched = np.clip(text_scores(view.tokens(), query, texts, READ_CHARS), 0.0, 1.0).tolist()  # float32 steps
    cosine = gap = 0.0
    if vector is not None:
        found = view.index().cosines(nids, vector)
        cold = [nid for nid in nids if nid not in found]  # the cold tier's are out of the index: read from the file
        if cold:
            found.update(file_cosines(view, cold, vector))
        cosines = [found.get(nid, 0.0) for nid in nids]  # 0: a hit with no vector at all
        cosine = cosines[0]
        rest = cosines[1:]
        gap = cosine - sum(rest) / len(rest) if len(rest) >= LEAST_BACKGROUND else 0.0
    return {
        "coverage": coverage,
        "coverage_near": near,
        "coverage_all": every,
        "matched": matched[0],
        "matched_near": max(matched),
        "cosine": cosine,
        "cosine_gap": gap,
        **whose_words(asked, hits[:BACKGROUND], held),
    }


def whose_words(asked: set[str], hits: Sequence[Hit], held: Sequence[set[str]]) -> dict[str, float]:
    """Whether the question's words are held by a memory of the person it asks about, or by someone else's.

    ``held``: each hit's content words. The names of the hits' speakers are left out of what is asked:
    "Caroline" in the question is held by every note about her and says nothing about what is asked of her.
    """
    names = set().union(*(content_words(name) for hit in hits for name in _speakers(hit)))
    asked = asked - names
    about = [any(reason.lane == ABOUT_ASKED for reason in hit.why) for hit in hits]
    theirs = max((_share(asked, words) for words, yes in zip(held, about, strict=True) if yes), default=0.0)
    others = max((_share(asked, words) for words, yes in zip(held, about, strict=True) if not yes), default=0.0)
    named = any(about)
    return {
        "asked": float(named),
        "asked_coverage": theirs,
        "other_coverage": others,
        "asked_lead": theirs - others if named else 0.0,
    }


def _share(asked: set[str], words: set[str]) -> float:
    """The share of the ``asked`` words among ``words`` (0 when nothing is asked)."""
    return len(asked & words) / len(asked) if asked else 0.0


def _said(hit: Hit) -> list[str]:
    """What a hit says: its content and name, and the turns it stands for."""
    return [hit.node.content or "", hit.node.name or "", *(turn.content or "" for turn in hit.turns)]


def _speakers(hit: Hit) -> list[str]:
    """Who said a hit and the turns it stands for (their ``speaker`` props)."""
    said = [hit.node.props.get("speaker"), *(turn.props.get("speaker") for turn in hit.turns)]
    return [who for who in said if isinstance(who, str) and who]


def confidence(signal: Mapping[str, float], weights: Mapping[str, float] = WEIGHTS, bias: float = BIAS) -> float:
    """The logistic of the weighed signals, in [0, 1]; 0 when there are none (nothing came back)."""
    if not signal:
        return 0.0
    z = bias + sum(weights[name] * float(signal.get(name, 0.0)) for name in SIGNALS)
    if math.isnan(z):  # no signal can say how sure: not sure (the clamp below would make it 1)
        return 0.0
    return 1.0 / (1.0 + math.exp(-max(-60.0, min(60.0, z))))
