"""The encoding gate: how much a turn is worth remembering as facts, with no model.

Two signals, both deterministic. *Novelty* is a normalised compression distance: what the
turn costs to compress after its context (the session's previous turns and the store's
nearest stored turns) over what it costs alone, so a repeat costs almost nothing and a new
subject costs about its own size. *Salience* is rule-based: first-person statements, numbers
and dates, names, questions and feelings raise it; filler ("ok", "lol", "thanks!") has none.
The score is their geometric mean, so a turn needs some of both.

The gate never drops a turn: ingest stores every turn verbatim, records the score as the
node's salience, and only skips System 2 extraction for turns scored below the threshold.
"""

from __future__ import annotations

import functools
import math
import re
import zlib
from collections.abc import Sequence
from dataclasses import dataclass

from ..checks import whole
from ..errors import InvalidInput
from ..text.words import WORD
from .writer import Writer

DEFAULT_THRESHOLD = 0.3
_DEFLATE_WINDOW = 30_000  # deflate looks back 32 KiB: older context cannot make a turn cheaper
_FILLER = frozenset(
    """
    ok okay k kk lol lmao haha hahaha hehe thanks thank thx ty you yes yeah yep yup no nope sure cool nice great
    awesome wow oh ah hmm hm um uh bye hi hello hey got it sounds good right alright fine yay omg totally indeed
    exactly agreed same welcome np cheers see ya later much so very too a lot really that's thats is me and will
    do true well soon take care talk let let's know keep going up thing things glad definitely absolutely
    appreciate luck congrats congratulations agree seems looks like get go one anytime anyway guess think mean for
    sharing again all best catch chat done wonderful fantastic amazing incredible cute
    """.split()
)
_STOP = frozenset(
    """
    the an of to in on at for with and or but is are was were be been am it its it's this that these those i you
    he she we they me him her us them my your his our their as by from if then than just have has had do does did
    not can could would should will what there i'm you're i've we're they're don't can't i'll you'll what's
    there's you've we've i'd you'd he's she's how so such some any about up out
    """.split()
)
_FIRST_PERSON = re.compile(
    r"\b(?:I(?:'m|'ve|'d|'ll| am| was| have| had| will)?|[Mm]y|[Mm]ine|[Ww]e|[Oo]ur)\b"
    r"(?: \w+){0,3}? (?:live|work|moved|bought|love|hate|like|started|joined|visited|got|"
    r"went|have|had|am|was|need|want|plan|decided|adopted|finished|learned|is|are|will)\b"
)
_NUMBER_OR_DATE = re.compile(
    r"\d|\b(?:january|february|march|april|may|june|july|august|september|october|november|december|monday|"
    r"tuesday|wednesday|thursday|friday|saturday|sunday|yesterday|tomorrow|tonight|last (?:week|month|year)|"
    r"next (?:week|month|year)|ago)\b",
    re.IGNORECASE,
)
_NAME = re.compile(r"(?<=[\w,;:] )[A-Z][a-z]+\b")  # a capitalised word inside a sentence, not opening it
_NOT_NAMES = frozenset({"I", "I'm", "I've", "I'd", "I'll", "Oh", "OK", "Ok"})
_QUESTION = re.compile(
    r"\?|^\s*(?:what|who|where|when|why|how|which|do|does|did|can|could|should|is|are)\b", re.IGNORECASE
)
_FEELING = (  # its source, compiled on first use (_feeling): ~10 ms that a read-only process never needs
    r"\b(?:love[ds]?|hate[ds]?|afraid|scared|excited|thrilled|sad|happy|upset|angry|worried|anxious|proud|"
    r"grateful|miss(?:ed)?|sorry|lonely|stressed|nervous|heartbroken|devastated|overwhelmed|passionate|"
    r"frustrated|disappointed|hope|fear|cried|amazing|terrible|awful)\b"
)


@functools.cache
def _feeling() -> re.Pattern[str]:
    return re.compile(_FEELING, re.IGNORECASE)


@dataclass(frozen=True)
class GateScore:
    """What the gate thought of one turn; ``kept`` turns go on to extraction."""

    novelty: float  # 0 (said before) .. 1 (nothing like it in the context)
    salience: float  # 0 (filler) .. 1 (a dated first-person statement about someone, with feeling)
    score: float  # sqrt(novelty x salience), stored as the turn's salience
    kept: bool


def _cost(data: bytes) -> int:
    """Raw-deflate size in bytes (no header or checksum, which would drown a short turn)."""
    packer = zlib.compressobj(9, zlib.DEFLATED, -15)
    return len(packer.compress(data) + packer.flush())


_EMPTY = _cost(b"")


def novelty(text: str, context: Sequence[str]) -> float:
    """(C(context + text) - C(context)) / C(text): 0 if the context already says it, ~1 if nothing like it."""
    turn = text.encode("utf-8")
    alone = _cost(turn) - _EMPTY
    if alone <= 0:
        return 0.0
    before = "\n".join(context).encode("utf-8")[-_DEFLATE_WINDOW:]
    if not before:
        return 1.0
    packer = zlib.compressobj(9, zlib.DEFLATED, -15)
    head = packer.compress(before)
    fork = packer.copy()
    without = len(head + packer.flush())
    with_turn = len(head + fork.compress(b"\n" + turn) + fork.flush())
    return min(1.0, max(0.0, (with_turn - without) / alone))


def salience(text: str) -> float:
    """Rule-based importance in 0..1; a turn of filler words only scores 0.

    Substance (content words) plus first-person statements, numbers or dates, names, questions, feelings.
    """
    words = WORD.findall(text.lower())
    content = [w for w in words if w not in _FILLER and w not in _STOP]
    if not content:
        return 0.0
    score = 0.15 + min(0.15, 0.015 * len(content))
    if _FIRST_PERSON.search(text):
        score += 0.25
    if _NUMBER_OR_DATE.search(text):
        score += 0.15
    if any(name not in _NOT_NAMES for name in _NAME.findall(text)):
        score += 0.15
    if _QUESTION.search(text):
        score += 0.1
    if _feeling().search(text):
        score += 0.15
    return round(min(1.0, score), 4)


@dataclass(frozen=True)
class EncodingGate:
    """Scores turns against their context; turns scored below ``threshold`` skip extraction.

    ``window``: how many of the session's previous turns are context; ``neighbours``: how many of
    the scope's nearest stored turns join them (0 for none; needs a store with an embedder).
    """

    threshold: float = DEFAULT_THRESHOLD
    window: int = 8
    neighbours: int = 3

    def __post_init__(self) -> None:
        if (
            isinstance(self.threshold, bool)
            or not isinstance(self.threshold, (int, float))
            or not 0.0 <= self.threshold <= 1.0
        ):
            raise InvalidInput(
                f"gate threshold must be a number from 0 to 1, not {self.threshold!r}; "
                f"{DEFAULT_THRESHOLD} is the default"
            )
        whole(self.window, "gate window")
        whole(self.neighbours, "gate neighbours")

    def score(self, text: str, context: Sequence[str]) -> GateScore:
        """Score one turn against the texts before it (``context``, oldest first)."""
        new, weight = novelty(text, context), salience(text)
        score = round(math.sqrt(new * weight), 4)
        return GateScore(round(new, 4), weight, score, score >= self.threshold)

    def session(self, writer: Writer, texts: Sequence[str], *, scope: str) -> list[GateScore]:
        """Score a session's turns in order, each against its window and its nearest turns in ``scope``.

        Call it before the session is written, so a turn is not found as its own neighbour.
        """
        vectors = writer.embed(texts) if self.neighbours and texts else None  # one batch; None: no embedder
        scores = []
        for i, text in enumerate(texts):
            context = list(texts[max(0, i - self.window) : i])
            if vectors is not None:  # the store's nearest turns, as context older than the window
                found = writer.nearest(vectors[i], self.neighbours, writer.store.resolve(scope), ["Turn"])
                context = [node.content or "" for node, _ in reversed(found)] + context
            scores.append(self.score(text, context))
        return scores
