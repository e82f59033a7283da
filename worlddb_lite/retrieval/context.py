"""Context assembly: recalled memories as a token-budgeted, provenance-tagged text for a model.

Each item is dated, says what it is (who said a turn; a fact's slot and value), says whether it
is current, historical (superseded: shown so a model can answer "what did I used to ..."), stale
(a later memory changed what it says) or contested (contradicted), and why it was returned (lanes
and ranks, the entity followed).
Items go in rank order; one that does not fit the remaining budget is left out and counted,
and smaller ones after it may still fit.

Tokens are estimated as ceil(characters / 4), the usual rule of thumb for English under BPE
tokenizers: the budget is a guide for a model's window, not an exact count of any one tokenizer.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..types import Hit, Recall

DEFAULT_BUDGET = 2000  # tokens
SUMMARY_SHARE = 0.5  # of a context's budget the summaries among its hits may take first (bench/recall.py)


def estimate_tokens(text: str) -> int:
    """A tokenizer-free estimate: one token per four characters, rounded up."""
    return math.ceil(len(text) / 4)


@dataclass(frozen=True, slots=True)
class ContextItem:
    """One memory in the context: its line of text and where it came from."""

    node: str  # node id
    status: str  # "current", "historical" (superseded), "stale" (what it said changed since), "possibly stale"
    # (a newer memory about the same thing ranks above it) or "contested"
    text: str
    tokens: int


@dataclass(frozen=True, slots=True)
class Context:
    """The assembled context: its text, the items in it, and what the budget left out."""

    text: str
    items: tuple[ContextItem, ...]
    tokens: int
    budget: int
    left_out: int


MOVES_BY_ID = frozenset({"older", "newer"})  # reasons whose ``via`` is the other memory's id (shown as a prefix)


def status(hit: Hit) -> str:
    """Current, historical (a newer value superseded it), stale, possibly stale or contested (a contradiction stands).

    Stale: a turn or note still held as said, every fact learned from which a later memory changed
    (recall moved it below that memory: ``stale`` in its why). "I live in Lisbon" after "I moved to Porto".
    Possibly stale: a note a newer memory of the same person about the same thing went above (``older``
    in its why): "I drink three cups of coffee a day" after "I quit coffee last week", no slot read.
    """
    if hit.node.superseded_by or hit.node.invalid_at is not None:
        return "historical"
    if hit.node.contradicted_by:
        return "contested"
    if any(reason.lane == "stale" for reason in hit.why):
        return "stale"
    if any(reason.lane == "older" for reason in hit.why):
        return "possibly stale"
    return "current"


def line(number: int, hit: Hit) -> str:
    """One item: ``[n] date · what: text (status) ⟨why⟩``."""
    node = hit.node
    when = node.valid_at[:10]
    if node.type == "Turn":
        what = f"{node.name or 'someone'} said"
    elif node.type == "Fact":
        what = "fact"
    else:
        what = node.type.lower()
    text = " ".join((node.content or node.name or "").split())
    state = status(hit)
    note = ""
    if state == "historical":
        until = f" until {node.invalid_at[:10]}" if node.invalid_at else ""
        by = f", superseded by {', '.join(i[:12] for i in node.superseded_by)}" if node.superseded_by else ""
        note = f" (historical{until}{by})"
    elif state == "stale":
        note = " (stale: a later memory changed what it says)"
    elif state == "possibly stale":
        newer = next(r.via for r in hit.why if r.lane == "older")
        note = f" (possibly stale: a newer memory of the same person is about the same thing, {str(newer)[:12]})"
    elif state == "contested":
        note = f" (contested by {', '.join(i[:12] for i in node.contradicted_by)})"
    why = ", ".join(
        f"{r.lane} #{r.rank}"
        + (f" via {r.via[:12] if r.lane in MOVES_BY_ID else repr(r.via)}" if r.via else "")
        + (f" {r.effect:+.4f}" if r.effect else "")
        for r in hit.why
    )
    sources = ""
    if node.type != "Turn" and hit.turns:
        sources = "; from " + ", ".join(t.id[:12] for t in hit.turns)
    return f"[{number}] {when} · {what}: {text}{note} <{why}{sources}; id {node.id[:12]}>"


def header_line(query: str, as_of: str) -> str:
    """The line a context with memories opens with (what ``assemble`` charges before its first item)."""
    return f"Memories recalled for: {_asked(query)} (as of {as_of[:10]})"


def _asked(query: str) -> str:
    return " ".join(query.split())[:200]


def assemble(recall: Recall, *, budget: int = DEFAULT_BUDGET, prefer_summaries: bool = True) -> Context:
    """The hits of ``recall`` as numbered lines, in rank order, within ``budget`` tokens.

    ``prefer_summaries``: the summaries among the hits come first, in rank order, within
    ``SUMMARY_SHARE`` of the budget (the overview before the details), and a turn a placed summary
    stands for is not repeated, so the rest goes to what the summaries do not say. False leaves
    summaries out and gives the details (descending from a summary on demand).
    """
    if not recall.hits:  # said plainly, so a model does not answer from nothing
        why = "what was found is not likely to answer it" if recall.withheld else "no memory matches it"
        nothing = f"Nothing relevant is stored for: {_asked(recall.query)} (as of {recall.as_of[:10]}; {why})"
        return Context(nothing, (), estimate_tokens(nothing), budget, 0)
    header = header_line(recall.query, recall.as_of)
    used = estimate_tokens(header)
    items: list[ContextItem] = []
    left_out = 0
    covered: set[str] = set()  # the summaries placed, and the turns they stand for

    def place(hit: Hit, limit: float) -> bool:
        """Add ``hit``'s line if the tokens used stay within ``limit``; whether it was."""
        nonlocal used
        text = line(len(items) + 1, hit)
        cost = estimate_tokens(text) + 1  # the line break
        if used + cost > limit:
            return False
        used += cost
        items.append(ContextItem(hit.node.id, status(hit), text, cost))
        if hit.node.type == "Summary":
            covered.update([hit.node.id, *(turn.id for turn in hit.turns)])
        return True

    if prefer_summaries:
        for hit in recall.hits:
            if hit.node.type == "Summary":
                place(hit, budget * SUMMARY_SHARE)
    for hit in recall.hits:
        if (hit.node.type == "Summary" and not prefer_summaries) or hit.node.id in covered:
            continue
        if not place(hit, budget):
            left_out += 1
    body = "\n".join([header, *(item.text for item in items)])
    return Context(body, tuple(items), used, budget, left_out)
