"""Hybrid recall: the lanes, fused by RRF, optionally reranked, returned with their reasons.

No question classifier and no keyword routing: every query runs every lane, and fusion
decides. The validity filter and containment are applied inside each lane (each lane only
ever yields nodes the read may see), so a fused list needs no second filtering.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from ..store import queries
from ..store.queries import Said
from ..text.extract import says_change
from ..text.slots import INSTRUCTIONS, PREFERENCES, slot_words
from ..text.stopwords import is_function_word
from ..text.words import words as split_words
from ..types import MAY_UPDATE, MAY_UPDATE_FROM, SPEAKER, Hit, Node, Reason, carries, is_assistant, voice
from .fusion import LANE_WEIGHTS, rrf
from .lanes import (
    NOTES_K,
    NOTES_MATCH,
    TEXT_TYPES,
    EntityPath,
    asked_people,
    named_entities,
    nearest_notes,
    notes_lane,
    standing_lanes,
    start_entity_lane,
    start_text_lane,
    time_lane,
    vector_lane,
    with_cold,
)
from .late import LATE_POOL, late_lane
from .ties import by_score
from .view import ReadView

if TYPE_CHECKING:
    from ..models.rerank import Reranker

# Each lane's list length: deeper than any k asked, so fusion and the late stage see the tails (the depths
# compared: docs/decisions.md)
LANE_DEPTH = 200
RERANK_DEPTH = 30  # how many fused candidates a reranker re-scores
HEAD_DEPTH = 50  # the fused head that speakers weigh and updates re-order (deeper moves never reach a k of 10)
SOURCE_EDGES = {"Fact": "refers_to", "Summary": "derived_from", "Memory": "refers_to"}
SOURCE_KINDS = frozenset({"Turn", "Memory"})  # what facts are learned from: a turn, or a note written with System 2
SIBLING_KINDS = frozenset({"Memory", "Fact"})  # read among their world's notes and facts, as a turn among its session
SESSION_WEIGHT = 1.0  # a turn also scores this times the best fused score of a turn of its session (bench/recall.py)
ASSISTANT_SHARE = 0.6  # an assistant's turn keeps this share of its fused score (see speaker_prior)
NAMED_SPEAKER_WEIGHT = 0.125  # a turn said by someone the query names gains this x the best fused score
REPLY_WEIGHT = 0.2  # a person's turn gains this x the fused score of the next turn, when a person said that
ANSWER_WEIGHT = 0.1  # an assistant's turn gains this x the fused score of the person's turn it answers
NOTE_KIND = "Memory"
MATCH_SHARE = 0.1  # ... or the first tenth of the memories, in a large store (see gather: the notes lane)
LATE_NOTES = 50  # the notes nearest the question the late lane also scores for the notes lane's match (bounds its cost)
AFTER_PRIORS = ("notes",)  # lanes fused after the session prior, so their lift stays with the node they rank
STANDING_LANES = frozenset({"instruction", "preference"})  # they rank what holds for every question, not answers


@dataclass(frozen=True)
class HitFilter:
    """What a filtered recall keeps: hits of a node type, carrying a tag, or dated in a period.

    Tags are a note's own (what was learned from it carries none); a hit's date is when it became
    true (a turn: when it was said). ``period``: (start, end, what the words were read as).
    """

    type: str | None
    tag: str | None
    period: tuple[str, str, str] | None

    def admits(self, hit: Hit) -> bool:
        node = hit.node
        if self.type is not None and node.type != self.type:
            return False
        if self.tag is not None and not carries(node, self.tag):
            return False
        return self.period is None or self.period[0] <= node.valid_at < self.period[1]


def recall(
    view: ReadView,
    query: str,
    *,
    k: int,
    reranker: Reranker | None = None,
    rerank_depth: int = RERANK_DEPTH,
    late: bool = True,
) -> list[Hit]:
    """The ``k`` best nodes for ``query``, fused over the lanes, each with why it was returned."""
    index = view.index()  # caught up once: nothing is written while a recall runs
    view = replace(view, index=lambda: index)
    found = gather(view, query, max(LANE_DEPTH, k), late=late)
    return order(view, query, found, k=k, reranker=reranker, rerank_depth=rerank_depth)


@dataclass(frozen=True)
class Found:
    """What the lanes found for a query: each lane's ranking, and how the entity lane reached its nodes."""

    lanes: dict[str, list[int]]
    paths: dict[int, EntityPath]
    people: tuple[str, ...] = ()  # whom the query asks about unnamed (``lanes.asked_people``): the entity lane's too
    entities: tuple[int, ...] = ()  # the entities the query names, or means by "my" (``lanes.named_entities``)


def gather(view: ReadView, query: str, depth: int, *, late: bool = True) -> Found:
    """Every lane's ranking of what the read may see, ``depth`` deep (the late stage re-ranks the others' finds)."""
    text = start_text_lane(view, query, depth)  # its search runs on the side reader while the vectors are read
    vector = view.embed(query) if view.embed is not None else None
    lanes: dict[str, list[int]] = {}
    scored: list[tuple[int, float]] = []
    if vector is not None:
        scored = vector_lane(view, vector, depth)
        lanes["vector"] = [nid for nid, _ in scored]
        standing = standing_lanes(view, vector, (INSTRUCTIONS, PREFERENCES))
        lanes["instruction"], lanes["preference"] = standing[INSTRUCTIONS], standing[PREFERENCES]
    people = asked_people(view, query)
    named = named_entities(view, query, people)
    entity = start_entity_lane(view, query, vector, depth, named)  # what needs no other lane's finds, meanwhile too
    lanes = {"text": text(), **lanes}  # first, as ever: RRF adds the lanes in order, so its float sums stay the same
    if view.include_cold and vector is not None:
        lanes["vector"] = with_cold(view, vector, scored, lanes["text"], depth)
    found = [n for ranking in lanes.values() for n in ranking]
    lanes["time"] = time_lane(view, query, vector, depth, candidates=found)
    lanes["entity"], paths = entity(found)
    unfound: list[int] = []  # the notes nearest the question no lane found: the late lane scores them too
    word_matched: list[int] = []  # the late lane's ranking with those
    if late and view.tokens is not None:  # re-ranks what the lanes above found, so it comes last
        pool = [nid for nid, _ in rrf(lanes, weights=LANE_WEIGHTS, keys=view.tie_keys)]
        taken = set(pool[:LATE_POOL])
        near = nearest_notes(view, vector, LATE_NOTES) if vector is not None else []
        unfound = [nid for nid in near if nid not in taken]
        word_matched = late_lane(view, view.tokens(), query, pool, unfound)
        left_out = set(unfound)  # the lane itself still only re-orders the others' finds
        lanes["late"] = [nid for nid in word_matched if nid not in left_out]
    if vector is not None:
        # Only a note that matches the question: among the first NOTES_MATCH (or tenth of the memories) of
        # the text, the vector or the late lane. A note first among two notes says nothing: "Caroline's GP
        # is ..." is no answer to "what is my cat's name?" (a new user's trial found it first, above the
        # turn saying it). The late lane matches word by word through the static model's token vectors, so
        # a note in other words than the question counts ("tennis" for "sport", "violin" for "instrument").
        first = max(NOTES_MATCH, int(MATCH_SHARE * view.index().rows_of(TEXT_TYPES)))
        word_first = set(word_matched[:first])
        matches = [
            *(nid for lane in ("text", "vector") for nid in lanes.get(lane, [])[:first]),
            *(nid for nid in unfound if nid in word_first),  # closest first, as no lane ranks them
            *word_matched[:first],
        ]
        notes = notes_lane(view, lanes, matches, weights=LANE_WEIGHTS)
        if named and notes:  # and one about someone the query asks about: "I live in Lisbon" is not Emma's
            about = about_asked(view, notes, _whose(view, notes, {}), query, people, sorted(named))
            notes = [nid for nid in notes if nid in about]
        lanes["notes"] = notes[:NOTES_K]
    return Found(lanes, paths, people, tuple(sorted(named)))


@dataclass(frozen=True)
class Ranked:
    """Fused nids best first (after the update moves), their fused scores, and the moves' reasons."""

    nids: list[int]
    score: dict[int, float]
    moved: dict[int, list[Reason]]
    fused: list[tuple[int, float]] = field(default_factory=list)  # the lanes' fusion alone, best first
    after_session: dict[int, float] = field(default_factory=dict)  # the scores once the session prior is added
    after_person: dict[int, float] = field(default_factory=dict)  # ... and then the person prior
    after_speaker: dict[int, float] = field(default_factory=dict)  # ... and the speaker prior (before the moves)
    after_notes: dict[int, float] = field(
        default_factory=dict
    )  # the scores once the notes lane is added (after the session prior)

    def priors(self, nids: Sequence[int], kinds: Sequence[str]) -> dict[int, list[Reason]]:
        """For each of ``nids`` (of node types ``kinds``), the priors that changed its score, and by how much."""
        before = {nid: (rank, value) for rank, (nid, value) in enumerate(self.fused, start=1)}
        out: dict[int, list[Reason]] = {}
        for nid, kind in zip(nids, kinds, strict=True):
            if nid not in before:
                continue
            rank, value = before[nid]
            session = self.after_session.get(nid, value) - value
            person = self.after_person.get(nid, value) - self.after_notes.get(nid, self.after_session.get(nid, value))
            weighed = self.after_speaker.get(nid, self.score.get(nid, value))
            speaker = weighed - self.after_person.get(nid, self.after_session.get(nid, value))
            reasons = out.setdefault(nid, [])
            if session:
                reasons.append(Reason("session" if kind == "Turn" else "world", rank, effect=round(session, 6)))
            if person:
                reasons.append(Reason("person", rank, effect=round(person, 6)))
            if speaker:
                reasons.append(Reason("speaker", rank, effect=round(speaker, 6)))
        return out


def rank(view: ReadView, query: str, found: Found) -> Ranked:
    """The lanes' findings fused, weighed by session and speaker, and the updates re-ordered.

    Apart from ``order`` so that fusion and the priors can be replayed over findings read once
    (``bench/fusion_fit.py`` fits their weights that way); it reads ``LANE_WEIGHTS`` and the
    priors' weights when it runs.
    """
    fused_only = rrf(
        {lane: nids for lane, nids in found.lanes.items() if lane not in AFTER_PRIORS},
        weights=LANE_WEIGHTS,
        keys=view.tie_keys,
    )
    ranked = session_prior(view, fused_only, SESSION_WEIGHT)
    after_session = dict(ranked)
    ranked = with_lanes(view, ranked, {lane: found.lanes.get(lane, []) for lane in AFTER_PRIORS})
    after_notes = dict(ranked)
    head_nids = [nid for nid, _ in ranked[:HEAD_DEPTH]]
    told = queries.said(view.conn, head_nids)  # the head's turns, read once
    whose = _whose(view, head_nids, told)  # the head's person memories (the priors and moves below keep its set)
    ranked = person_prior(view, ranked, query, found, HEAD_DEPTH, told=told, whose=whose)
    after_person = dict(ranked)
    weighed = speaker_prior(view, ranked, query, HEAD_DEPTH, told=told)
    fused = turns_in_their_places(ranked, weighed, set(told))
    ranked = weighed
    head = fused[:HEAD_DEPTH]
    notes = [nid for nid, (kind, _) in zip(head, view.kinds(head), strict=True) if kind in SOURCE_KINDS - {"Turn"}]
    learned = learned_from(view, [*told, *notes])  # the head's turns and notes: the moves below re-order the head
    fused, stale = stale_after_fresh(view, fused, HEAD_DEPTH, learned=learned)
    fused, changed = changed_over_stated(view, fused, HEAD_DEPTH, query, told=told, learned=learned)
    fused, older = newer_over_older(view, fused, HEAD_DEPTH, told=told, whose=whose)
    fused, standing = answer_first(view, found, fused)
    # moved below the turn that superseded it, or above the turns whose value it changed
    moved: dict[int, list[Reason]] = {nid: [Reason("stale", fused.index(nid) + 1)] for nid in stale}
    for nid in changed:
        moved.setdefault(nid, []).append(Reason("changed", fused.index(nid) + 1))
    scores = dict(ranked)
    for nid, newer in older.items():
        moved.setdefault(nid, []).append(Reason("older", fused.index(nid) + 1, via=view.store.header(newer).id.hex()))
        moved.setdefault(newer, []).append(Reason("newer", fused.index(newer) + 1, via=view.store.header(nid).id.hex()))
        scores[newer] = max(scores.get(newer, 0.0), scores[nid])  # one no lane found takes the older's score
    for nid in standing:
        moved.setdefault(nid, []).append(Reason("standing", fused.index(nid) + 1))
    return Ranked(
        fused,
        scores,
        moved,
        fused_only,
        after_session,
        after_person,
        after_speaker=dict(ranked),
        after_notes=after_notes,
    )


def order(
    view: ReadView,
    query: str,
    found: Found,
    *,
    k: int,
    reranker: Reranker | None = None,
    rerank_depth: int = RERANK_DEPTH,
) -> list[Hit]:
    """``rank``'s first ``k``, re-scored by a reranker if given, as hits that say why they came."""
    ranked = rank(view, query, found)
    fused, later = ranked.nids, {nid: list(reasons) for nid, reasons in ranked.moved.items()}
    if reranker is not None and fused:
        fused = _rerank(view, reranker, query, fused, rerank_depth, later)  # adds its ranks to ``later``
    top = one_of_duplicates(view, fused, k)
    nodes = view.nodes(top)
    turns = _turns(view, nodes, top, ranked.score)
    for nid, reasons in ranked.priors(top, [node.type for node in nodes]).items():  # every score change shows
        later[nid] = [*reasons, *later.get(nid, ())]
    ranks = {lane: {nid: place for place, nid in enumerate(ranking, start=1)} for lane, ranking in found.lanes.items()}
    return [
        Hit(node, score, turns[nid], (*_lane_reasons(view, nid, ranks, found.paths), *later.get(nid, ())))
        for node, nid, score in zip(
            nodes,
            top,
            shown_scores([ranked.score[nid] for nid in top], [nid in ranked.moved for nid in top]),
            strict=True,
        )
    ]


def shown_scores(scores: Sequence[float], moved: Sequence[bool]) -> list[float]:
    """The hits' scores in their order, never rising: a hit an update moved takes its neighbour's score.

    The moves (stale, changed, older, newer, standing) re-order without re-scoring, and a score
    printed out of rank order would say the order is wrong. A moved hit shows the score of the
    nearest unmoved hit above it (below it, at the top); then any hit still above the one before it
    (the speaker prior orders turns among the places turns hold) shows that one's score.
    """
    out = list(scores)
    kept = [i for i, flag in enumerate(moved) if not flag]
    for i, flag in enumerate(moved):
        if flag and kept:
            above = [j for j in kept if j < i]
            out[i] = scores[above[-1]] if above else scores[kept[0]]
    for i in range(1, len(out)):
        out[i] = min(out[i], out[i - 1])
    return out


def one_of_duplicates(view: ReadView, fused: list[int], k: int) -> list[int]:
    """The first ``k`` of ``fused`` without a hit that a hit ranked above it restates or is restated by.

    The consolidator links near-duplicate memories with ``duplicates`` (consolidate/dedup.py) instead of
    deleting them; a group linked that way returns once, as its best-ranked member. Without such
    links (no dedup ran) this is ``fused[:k]``: one indexed probe of the edge table.
    """
    window = fused[: k + HEAD_DEPTH]  # the dropped are replaced from below, up to this depth
    rows = queries.linked(
        view.conn,
        ("duplicates",),
        window,
        None,
        view.valid,
        view.belief,
        towards=False,
        include_superseded=False,  # a link closed since (or made after an as_of read) counts for nothing
        far=window,
    )
    if not rows:
        return fused[:k]
    group = {nid: nid for nid in window}  # union-find over the links: one hit per connected group

    def root(nid: int) -> int:
        while group[nid] != nid:
            group[nid] = group[group[nid]]
            nid = group[nid]
        return nid

    for _, src, dst, _ in rows:
        group[root(src)] = root(dst)
    seen: set[int] = set()
    kept = []
    for nid in window:
        if root(nid) not in seen:
            seen.add(root(nid))
            kept.append(nid)
    return kept[:k]


def turns_in_their_places(
    neutral: list[tuple[int, float]], weighed: list[tuple[int, float]], turns: set[int]
) -> list[int]:
    """The order with the speaker prior's turns re-ordered among the places turns hold in ``neutral``.

    The speaker prior reads what only a turn has (who said it, the reply after it, the turn it
    answers), so it weighs turns against turns: a note or a fact keeps the place the lanes and
    the priors every kind gets (``session_prior``) gave it. Without this, every turn of a
    talkative session gains from its neighbours and together they bury a note first in every lane.
    """
    reordered = iter([nid for nid, _ in weighed if nid in turns])
    return [next(reordered) if nid in turns else nid for nid, _ in neutral]


def leader(view: ReadView, found: Found) -> int | None:
    """The memory the query's own lanes put first: fused over every lane but the standing ones."""
    fused = rrf(
        {lane: nids for lane, nids in found.lanes.items() if lane not in STANDING_LANES},
        weights=LANE_WEIGHTS,
        keys=view.tie_keys,
    )
    return fused[0][0] if fused else None


def answer_first(view: ReadView, found: Found, fused: list[int]) -> tuple[list[int], set[int]]:
    """The standing instructions or preferences that came first go just below the first answer.

    One holds for every question, so the standing lanes offer the closest whatever is asked
    (``lanes.standing_lanes``); offered, it goes with the answer, not in its place. Lower down it
    keeps its rank. One the query's own lanes put first is an answer like any other.
    """
    standing = {nid for lane in STANDING_LANES for nid in found.lanes.get(lane, ())}
    if not fused or fused[0] not in standing:
        return fused, set()  # the common case: no second fusion
    standing.discard(leader(view, found))
    answer = next((i for i, nid in enumerate(fused) if nid not in standing), None)
    if not answer:  # the first is an answer already, or there is none to go below
        return fused, set()
    return [fused[answer], *fused[:answer], *fused[answer + 1 :]], set(fused[:answer])


def with_lanes(
    view: ReadView, ranked: list[tuple[int, float]], lanes: Mapping[str, Sequence[int]]
) -> list[tuple[int, float]]:
    """``ranked`` with each of ``lanes`` fused in (RRF, their ``LANE_WEIGHTS``), re-sorted; a node new to it joins.

    For the lanes fused after the session prior (``AFTER_PRIORS``): the notes lane lifts the note it
    ranks first, and that lift must not reach every note and fact of its world through the prior.
    """
    extra = rrf(lanes, weights=LANE_WEIGHTS)
    if not extra:
        return ranked
    scores = dict(ranked)
    for nid, value in extra:
        scores[nid] = scores.get(nid, 0.0) + value
    return by_score(list(scores.items()), view.tie_keys)


def session_prior(view: ReadView, ranked: list[tuple[int, float]], weight: float) -> list[tuple[int, float]]:
    """Add to each fused turn ``weight`` x the best fused score among the turns of its Session, and re-sort.

    A note or fact (``SIBLING_KINDS``) gains the same from the notes and facts of its own world: the
    prior reads every memory in its world, so a session's turns no longer bury a note that leads the lanes.
    A summary (``consolidate``) gains nothing: it competes on what the lanes say of it (every prior
    tried for summaries cost LoCoMo recall@10 0.01 to 0.02: docs/decisions.md).

    A turn is read in its conversation: the session where the best evidence lies is the likeliest
    home of the rest of it (session recall ran ahead of turn recall). The session's best turn
    counts, not a sum, which would favour long sessions. Only turns already fused are moved: no
    turn enters on its session's strength alone. Chosen with ``bench/recall.py`` on both
    benchmarks; the figures, and the priors tried beside it, are in docs/decisions.md.
    """
    if weight == 0 or not ranked:
        return ranked
    nids = [nid for nid, _ in ranked]
    kinds = dict(zip(nids, view.kinds(nids), strict=True))
    turns = {nid: parent for nid, (kind, parent) in kinds.items() if kind == "Turn" and parent is not None}
    parents = sorted(set(turns.values()))
    sessions = {p for p, (kind, _) in zip(parents, view.kinds(parents), strict=True) if kind == "Session"}
    session_of = {nid: parent for nid, parent in turns.items() if parent in sessions}  # turn -> where it was said
    session_of.update(  # (a world's notes and facts as one group, apart from any session's turns)
        {nid: -parent for nid, (kind, parent) in kinds.items() if kind in SIBLING_KINDS and parent is not None}
    )
    best: dict[int, float] = {}
    for nid, value in ranked:  # best first: the first score seen of a session is its best
        if nid in session_of:
            best.setdefault(session_of[nid], value)
    scored = [(nid, value + weight * best[session_of[nid]] if nid in session_of else value) for nid, value in ranked]
    return by_score(scored, view.tie_keys)


def person_prior(
    view: ReadView,
    ranked: list[tuple[int, float]],
    query: str,
    found: Found,
    depth: int,
    *,
    told: Mapping[int, Said] | None = None,
    whose: Mapping[int, str] | None = None,
) -> list[tuple[int, float]]:
    """Each memory of the head about a person the query asks about gains ``NAMED_SPEAKER_WEIGHT`` x the best score.

    About them (``about_asked``): a turn they said, a note written for them, or a note or fact that
    names them; "I", "my" and "me" say the scope's person (``lanes.asked_people``). "What did
    Caroline research?" is answered by Caroline's own turns, which rarely say her name, and by her
    notes; the same lift for every kind, so a note of hers is not buried by her turns, and a memory
    of someone else's of the same kind ("Melanie's GP") stays below.
    """
    head = ranked[:depth]
    if not head:
        return ranked
    nids = [nid for nid, _ in head]
    if whose is None:
        whose = _whose(view, nids, queries.said(view.conn, nids) if told is None else told)
    about = about_asked(view, nids, whose, query, found.people, found.entities)
    best = head[0][1]
    weighed = [(nid, value + NAMED_SPEAKER_WEIGHT * best if nid in about else value) for nid, value in head]
    return by_score(weighed, view.tie_keys) + ranked[depth:]


def speaker_prior(
    view: ReadView, ranked: list[tuple[int, float]], query: str, depth: int, *, told: Mapping[int, Said] | None = None
) -> list[tuple[int, float]]:
    """Weigh each turn of the fused head by who said it and who answered, and re-sort the head.

    * An assistant's turn (``types.is_assistant``) keeps ``ASSISTANT_SHARE`` of its score.
      The memory is of the person: what they said is what is asked back, while the assistant's
      replies are long, repeat the person's words and outrank them on both text and vector
      (BEAM-100K: 77% of the evidence messages are the user's, against 35% of the fused head).
    * A person's turn gains ``REPLY_WEIGHT`` x the fused score of the turn written next in its
      world (``queries.next_turns``), when that is in the head and a person said it too: a reply
      repeats what it answers
      ("Yeah, I painted that lake sunrise last year!" after the photo of it). An assistant's reply
      lifts nothing: it would lift every stale message it answered.
    * An assistant's turn gains ``ANSWER_WEIGHT`` x the fused score of the person's turn it answers
      (the turn written just before it), when that is in the head: the answer to a question about
      the subject holds the plan, the summary or the list that was asked for.

    Only the fused head (``HEAD_DEPTH``) is weighed: speakers are read from the node bodies (``told``,
    when the caller has read them). How the weights were chosen, and what was tried beside them:
    docs/decisions.md.
    """
    head = ranked[:depth]
    if told is None:
        told = queries.said(view.conn, [nid for nid, _ in head])
    said_by = {nid: speaker for nid, (speaker, _, _) in told.items() if speaker}
    if not said_by:
        return ranked
    fused = dict(head)
    person = {nid for nid, speaker in said_by.items() if not is_assistant(speaker)}
    following = {  # the version of the turn said next that the read found, if it found one
        nid: next((v for v in versions if v in said_by), versions[-1])
        for nid, versions in queries.next_turns(view.conn, sorted(person)).items()
    }
    replies = {nid: after for nid, after in following.items() if after in person}
    answers = {after: nid for nid, after in following.items() if after in said_by and after not in person}
    weighed = []
    for nid, value in head:
        if is_assistant(said_by.get(nid)):
            value *= ASSISTANT_SHARE
        if nid in replies:
            value += REPLY_WEIGHT * fused[replies[nid]]
        if nid in answers:
            value += ANSWER_WEIGHT * fused[answers[nid]]
        weighed.append((nid, value))
    return by_score(weighed, view.tie_keys) + ranked[depth:]


def _lane_reasons(
    view: ReadView, nid: int, ranks: dict[str, dict[int, int]], paths: dict[int, EntityPath]
) -> list[Reason]:
    """The lanes that ranked a returned hit, at which rank, and (entity lane) the name and edge followed.

    Built for the returned hits only: naming an edge costs a row read.
    """
    reasons = []
    for lane, rank_of in ranks.items():
        if nid not in rank_of:
            continue
        path = paths.get(nid) if lane == "entity" else None
        edge = view.store.edge_row(path.edge).id.hex() if path is not None else None
        reasons.append(Reason(lane, rank_of[nid], path.alias if path else None, edge))
    return reasons


def _rerank(
    view: ReadView, reranker: Reranker, query: str, fused: list[int], depth: int, reasons: dict[int, list[Reason]]
) -> list[int]:
    """Re-order the fused head by the reranker's scores; the tail keeps its fused order."""
    head = fused[:depth]
    nodes = view.nodes(head)
    scores = reranker.score(query, [" ".join(t for t in (n.name, n.content) if t) for n in nodes])
    order = sorted(range(len(head)), key=lambda i: (-float(scores[i]), i))
    for rank, i in enumerate(order, start=1):
        reasons.setdefault(head[i], []).append(Reason("rerank", rank))
    return [head[i] for i in order] + fused[depth:]


def _turns(
    view: ReadView, nodes: Sequence[Node], nids: Sequence[int], score: Mapping[int, float] | None = None
) -> dict[int, tuple[Node, ...]]:
    """The turns each hit stands for: a turn itself; a fact or summary the turns it came from.

    With ``score`` (the recall's fused scores), a summary's turns come best first: those the recall
    ranked too, by their scores, then the rest as written.
    """
    found: dict[int, list[int]] = {nid: [nid] for nid, node in zip(nids, nodes, strict=True) if node.type == "Turn"}
    for edge_type in sorted(set(SOURCE_EDGES.values())):
        sources = [nid for nid, node in zip(nids, nodes, strict=True) if SOURCE_EDGES.get(node.type) == edge_type]
        rows = queries.linked(
            view.conn, (edge_type,), sources, ("Turn",), view.valid, view.belief, towards=False, include_superseded=True
        )
        if view.worlds and edge_type != "refers_to":  # only refers_to may point out of the world
            within = queries.inside(
                view.conn,
                [turn for _, _, turn, _ in rows],
                view.worlds,
                view.valid,
                view.belief,
                memberships=view.memberships,
                include_superseded=view.include_superseded,
            )
            rows = [row for row in rows if row[2] in within]
        for _, src, turn, _ in rows:
            found.setdefault(src, []).append(turn)
    summaries = {nid for nid, node in zip(nids, nodes, strict=True) if node.type == "Summary"}
    for src, turns in found.items():
        if src in summaries and score is not None:  # sorted is stable: the unranked stay as written, after
            found[src] = sorted(turns, key=lambda t: (t not in score, -score.get(t, 0.0)))
    loaded = dict(zip(nids, nodes, strict=True))  # a turn hit is its own turn: loaded once
    wanted = sorted({t for ts in found.values() for t in ts} - set(loaded))
    loaded.update(zip(wanted, view.nodes(wanted), strict=True))
    return {nid: tuple(loaded[t] for t in found.get(nid, ())) for nid in nids}


Learned = tuple[list[tuple[int, int, int, str]], set[int]]  # (refers_to rows fact -> turn, the facts still current)


def learned_from(view: ReadView, turns: Sequence[int]) -> Learned:
    """The facts learned from ``turns`` (rows as ``queries.linked`` gives them), and which of them still hold."""
    rows = queries.linked(
        view.conn, ("refers_to",), turns, ("Fact",), view.valid, view.belief, towards=True, include_superseded=True
    )
    facts = sorted({fact for _, _, fact, _ in rows})
    if not view.include_superseded:  # the read's own visibility: asked once a read (ReadView.visible)
        return rows, view.visible(facts)
    return rows, queries.visible_among(view.conn, facts, view.valid, view.belief, include_superseded=False)


def stale_after_fresh(view: ReadView, fused: list[int], depth: int, *, learned: Learned) -> tuple[list[int], set[int]]:
    """A stale turn and the turn that superseded it trade places, when both are in the head and the stale one leads.

    A turn is stale when every fact learned from it has been superseded at the read's time; the
    turns that said the superseding facts are fresher. A note (``SOURCE_KINDS``) is read the same way:
    "I moved to Porto" takes the place of "I live in Lisbon", which takes its. The fresher goes up,
    not only the stale one down: the question found the old statement, and the rule that
    understood the slot says what answers it now. Turns are never closed themselves (they are
    what was said), so without this the old statement of a changed fact can outrank the new one.
    Read at an earlier ``as_of`` nothing is superseded yet, and nothing moves.
    """
    head = fused[:depth]
    rows, current = learned
    facts_of: dict[int, set[int]] = {}
    for _, turn, fact, _ in rows:
        facts_of.setdefault(turn, set()).add(fact)
    every_fact = sorted({f for fs in facts_of.values() for f in fs})
    newer = queries.linked(
        view.conn,
        ("supersedes",),
        sorted(set(every_fact) - current),
        ("Fact",),
        view.valid,
        view.belief,
        towards=True,
        include_superseded=False,
    )
    said = queries.linked(
        view.conn,
        ("refers_to",),
        sorted({new for _, _, new, _ in newer}),
        tuple(sorted(SOURCE_KINDS)),
        view.valid,
        view.belief,
        towards=False,
        include_superseded=True,
    )
    turn_of_fact: dict[int, set[int]] = {}
    for _, fact, turn, _ in said:
        turn_of_fact.setdefault(fact, set()).add(turn)
    fresher: dict[int, set[int]] = {}  # old fact -> turns that said what superseded it
    for _, old, new, _ in newer:
        fresher.setdefault(old, set()).update(turn_of_fact.get(new, ()))
    order = list(head)
    moved: set[int] = set()
    for turn in [t for t in head if t in facts_of]:  # in the head's order: the same on every replica
        facts = facts_of[turn]
        if facts & current:
            continue  # something it said still stands
        successors = {t for f in facts for t in fresher.get(f, ()) if t != turn}
        present = [t for t in successors if t in order]
        if present and order.index(turn) < min(order.index(t) for t in present):
            fresh = min(present, key=order.index)  # they trade places: the understood update answers first
            here, there = order.index(turn), order.index(fresh)
            order[here], order[there] = fresh, turn
            moved.add(turn)
    return order + fused[depth:], moved


def newer_over_older(
    view: ReadView,
    fused: list[int],
    depth: int,
    *,
    told: Mapping[int, Said],
    whose: Mapping[int, str] | None = None,
) -> tuple[list[int], dict[int, int]]:
    """A person's newer memory that tells of a change goes just above their older note about the same thing.

    System 2 linked the two when the newer was written (``may_update``, write/updates.py: the same
    person's, close in vector space, sharing a content word, the newer with a word of change). The
    newer may be one no lane found ("I sold the bike and got a scooter" for "how do I get to
    work?"). Nothing is closed: the older stays, told as possibly stale (``older`` in its why,
    naming the newer). A read as of a time before the newer sees no link.
    Returns the order and, for each older note a newer memory went above, that newer one (the newest).
    """
    head = fused[:depth]
    said = _whose(view, head, told) if whose is None else whose
    notes = [nid for nid in head if nid in said and nid not in told]
    links = queries.linked(
        view.conn,
        (MAY_UPDATE,),
        notes,
        None,
        view.valid,
        view.belief,
        towards=True,
        include_superseded=view.include_superseded,
    )
    if not links:
        return fused, {}
    ends = sorted({new for _, _, new, _ in links})
    kinds = dict(zip(ends, view.kinds(ends), strict=True))
    # inside the read's world (not another scope's), and a memory (a file from another device may say otherwise)
    shown = set(view.inside([nid for nid in ends if kinds[nid][0] in MAY_UPDATE_FROM]))
    newer: dict[int, set[int]] = {}
    for _, old, new, _ in links:
        if new in shown:
            newer.setdefault(old, set()).add(new)
    every = sorted({new for news in newer.values() for new in news})
    keys = view.tie_keys(every)
    age = {nid: (node.valid_at, keys[nid]) for nid, node in zip(every, view.bare_nodes(every), strict=True)}
    order = list(fused)
    older: dict[int, int] = {}
    for old in [nid for nid in head if nid in newer]:  # in the head's order: the same on every replica
        new = max(newer[old], key=age.__getitem__)  # the newest of those that may update it
        older[old] = new  # told possibly stale, wherever the newer ranks
        if new in order and order.index(new) < order.index(old):
            continue  # already above it
        if new in order:
            order.remove(new)
        order.insert(order.index(old), new)
    return order, older


def about_asked(
    view: ReadView,
    nids: Sequence[int],
    whose: Mapping[int, str],
    query: str,
    people: Sequence[str],
    entities: Sequence[int],
) -> set[int]:
    """Those of ``nids`` about a person the query asks about: said by them, written for them, or naming them.

    Said or written for: a turn's speaker, or a note's speaker or scope's person (``whose``: ``_whose``), every
    word of it among the query's words or ``people`` (whom "I", "my" and "me" mean). Naming: a note
    or a fact that refers to one of ``entities`` (those the query names or means).
    """
    asked = {w.casefold() for w in re.findall(r"\w+", " ".join([query, *people]))}
    found = {nid for nid, who in whose.items() if who.split() and set(who.split()) <= asked}
    kinds = dict(zip(nids, view.kinds(nids), strict=True))
    named = [nid for nid in nids if kinds[nid][0] in SIBLING_KINDS and nid not in found]
    linked = queries.linked(
        view.conn,
        ("refers_to",),
        named,
        ("Entity",),
        view.valid,
        view.belief,
        towards=False,
        include_superseded=view.include_superseded,
        far=entities,
    )
    return found | {nid for _, nid, _, _ in linked}


def _whose(view: ReadView, nids: Sequence[int], told: Mapping[int, Said]) -> dict[int, str]:
    """Whose each of ``nids`` that is a person's memory (a turn, a note) is, casefolded.

    Whose: a turn's speaker; a note's speaker, or its scope's person. An assistant's turn, a fact or
    a summary is no one's. Only a note's speaker prop and parent are read, not its record.
    """
    kinds = dict(zip(nids, view.kinds(nids), strict=True))
    notes = queries.note_speakers(view.conn, [nid for nid in nids if kinds[nid][0] == NOTE_KIND], SPEAKER)
    homes = sorted({parent for parent, _ in notes.values()})
    home_of = dict(zip(homes, view.bare_nodes(homes), strict=True))
    said: dict[int, str] = {}
    for nid, (parent, speaker) in notes.items():
        whose = voice(speaker, home_of[parent])
        if whose and not is_assistant(whose):
            said[nid] = whose.casefold()
    for nid, (speaker, _, _) in told.items():
        if nid in kinds and speaker and not is_assistant(speaker):
            said[nid] = speaker.casefold()
    return said


def changed_over_stated(
    view: ReadView,
    fused: list[int],
    depth: int,
    query: str,
    *,
    told: Mapping[int, Said] | None = None,
    learned: Learned | None = None,
) -> tuple[list[int], set[int]]:
    """Move a turn that says a value changed above the earlier turns in the head about the same thing.

    Two signs that a turn says a change, and what "the same thing" is for each:

    * a fact learned from it is a changed value of a named slot ("the new sprint deadline of
      April 5", "the coverage has improved to 78%"; extract.py marks it, facts.py supersedes the old
      value when that was extracted too). Often it was not: the earlier turn said it in words no
      rule reads ("a deadline of April 1 for the first sprint"), so ``stale_after_fresh`` has
      nothing to go on. An earlier turn is about the same thing when every word of the slot is
      among its words. Only a change that is still the current value counts: one since replaced
      (by a later change or a plain statement) moves nothing.
    * it tells of a change without naming what changed (``extract.says_change``: "it's been
      rescheduled to March 22 at 4:30 PM", "I got it down to just 4 hours"). The query says what
      is asked: an earlier turn is about the same thing when it holds at least half of the query's
      words that the changing turn holds (at least one).

    Earlier means said before: valid time, then the order written (turns of one conversation are
    written in the order said). A fact learned from turns of the head is read as the latest of them. A
    change never moves above a later turn about the same thing that says a change or states a value
    the store still holds ("my appointment is now March 25"): an older value must not climb over a
    newer one. An assistant's turns tell of no change of the person's.

    Chosen with ``bench/recall.py`` on BEAM-100K's knowledge-update questions (LoCoMo's turns rarely
    say a value changed); docs/decisions.md has the figures.
    """
    head = fused[:depth]
    if told is None:
        told = queries.said(view.conn, head)  # the head's turns -> (speaker, words, valid time)
    if not told:
        return fused, set()
    rows, current = learned if learned is not None else learned_from(view, list(told))
    # the turns' rows only: ``learned`` also holds the head's notes, which ``stale_after_fresh`` reads; this
    # step reads a source's words and time from ``told``, and moves no note (issue 34: a note's row was looked up there)
    rows = [row for row in rows if row[1] in told]
    holding = [row for row in rows if row[2] in current]  # a change since replaced moves nothing
    changed = queries.changed_slots(view.conn, sorted({fact for _, _, fact, _ in holding}))
    slots = {fact: words for fact, slot in changed.items() if (words := slot_words(slot))}  # the slot's words
    said: dict[int, list[tuple[frozenset[str], int]]] = {}  # turn -> (words of what changed, how many to share)
    for _, turn, fact, _ in holding:
        if fact in slots:
            said.setdefault(turn, []).append((slots[fact], len(slots[fact])))
    words_of: dict[int, frozenset[str]] = {}

    def words_in(turn: int) -> frozenset[str]:
        if turn not in words_of:
            words_of[turn] = slot_words(" ".join(split_words(told[turn][1].lower())))
        return words_of[turn]

    asked = slot_words(" ".join(w for w in split_words(query.lower()) if not is_function_word(w)))
    for turn, (speaker, text, _) in told.items():
        if not is_assistant(speaker) and says_change(text):
            if shared := words_in(turn) & asked:
                said.setdefault(turn, []).append((shared, math.ceil(len(shared) / 2)))
    stating = {turn for _, turn, _, _ in holding}  # turns a current fact was learned from
    keys = view.tie_keys(list(told))  # the order written, the same on every replica (ties.py)

    def said_when(turn: int) -> tuple[str, tuple[str, int, bytes]]:
        return told[turn][2], keys[turn]

    source: dict[int, int] = {}  # a fact in the head -> the latest turn that said it: it was said then
    for _, turn, fact, _ in rows:
        if fact not in source or said_when(turn) > said_when(source[fact]):
            source[fact] = turn
    order = list(head)
    moved: set[int] = set()
    for turn in sorted(said, key=order.index):
        when = said_when(turn)
        above: list[int] = []
        later: list[int] = []
        for rank, other in enumerate(order[: order.index(turn)]):
            was = other if other in told else source.get(other, other)
            if was in told and any(len(what & words_in(was)) >= needed for what, needed in said[turn]):
                if said_when(was) < when:
                    above.append(rank)
                elif was in said or was in stating:
                    later.append(rank)
        target = max([min(above, default=len(order)), *(rank + 1 for rank in later)])
        if target < order.index(turn):
            order.remove(turn)
            order.insert(target, turn)
            moved.add(turn)
    return order + fused[depth:], moved
