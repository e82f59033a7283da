"""The recall lanes, each a ranked list of nids the read may see.

* text: BM25 (FTS5) over turns, memories and summaries;
* vector: cosine over the same types, through the IVF index (filters inside the search);
* entity: the entities the query names (by exact alias, widened to their accepted same_as
  class) and every fact and turn that refers_to them, ordered by cosine to the rest of the
  query (the query without those names);
* time: the memories dated in the days or months the query names ("what did I do on 25 May,
  2022?"), ordered by cosine to the query;
* instruction and preference: the standing instruction ("Always cite sources when I ask about
  history") and the stated preference ("I prefer lightweight libraries") closest to the query,
  among the few the read may see.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from ..index.ivf import IvfIndex
from ..store import queries, traverse
from ..store.vector_table import VectorTable
from ..text.dates import named_periods
from ..text.names import normalise_alias
from ..text.stopwords import STOPWORDS
from ..text.words import words
from ..types import FIRST_PERSON, person_of
from .fusion import rrf
from .ties import by_score, ordered
from .view import ReadView

TEXT_TYPES = ("Turn", "Memory", "Summary", "Fact")  # what the text and vector lanes rank
GRAPH_TYPES = ("Turn", "Memory", "Summary", "Fact")  # what the entity lane reaches through refers_to
NOTE_TYPES = ("Memory",)  # what the notes lane ranks: what was written deliberately, not said in passing
NOTES_K = 1  # the notes lane offers the best-found note only: one lift, not every note above the turns
NOTES_MATCH = 10  # ... and only one among the first this many of the text or the vector lane (a recall's k)
MAX_QUERY_TERMS = 64  # a pasted page becomes its first 64 distinct words, not a 10,000-term OR
MAX_ENTITY_WORDS = 4  # the longest name looked up: "the Museum of Modern Art"
COMMON_SHARE = 0.02  # a BM25 word in more than this share of the rows ...
COMMON_FLOOR = 2000  # ... and in more than this many rows is left out (see uncommon_words)
KEEP_RAREST = 2  # the query's rarest words, always kept; it and COMMON_SHARE chosen with bench/recall_scale.py
ENTITY_FANOUT = 500  # past this many references an entity is checked against the other lanes' finds
TIME_FANOUT = 2000  # past this many memories of the read's world in a period named, ...
TIME_READ = 20_000  # ... or this many nodes in all, only what the other lanes found there is kept
STANDING_K = 1  # standing statements a standing lane offers: the one closest to the query (bench/recall.py)
STANDING_BATCH = 8  # statements checked for visibility at a time, closest first (not all of a long history)


def query_words(text: str, *, drop_stopwords: bool = False) -> list[str]:
    """The distinct words of free text (at most ``MAX_QUERY_TERMS``), function words dropped if asked.

    Function words stay when nothing else is left. These are FTS5's tokens (unicode61 splits at
    every character that is not a letter or digit), not ``text.words``: a term must match the index.
    """
    found = [w for w in "".join(c if c.isalnum() else " " for c in text).split() if w]
    if drop_stopwords:
        found = [w for w in found if w.casefold() not in STOPWORDS] or found
    return list(dict.fromkeys(found))[:MAX_QUERY_TERMS]


def fts_query(text: str, *, drop_stopwords: bool = False, words: Sequence[str] | None = None) -> str:
    """An FTS5 query that ORs the words of free text, each quoted (no FTS syntax from input)."""
    terms = query_words(text, drop_stopwords=drop_stopwords) if words is None else words
    return " OR ".join('"' + w.replace('"', '""') + '"' for w in terms)


def uncommon_words(view: ReadView, words: list[str]) -> list[str]:
    """``words`` without those in very many rows: they discriminate least and cost most.

    BM25 gives a word in 5% of a large store little weight, yet FTS5 must score every row it
    matches: at 100k memories the OR of a question's words matched ~24k rows and took ~70 ms.
    A word is left out when it is in more than ``COMMON_SHARE`` of the rows and more than
    ``COMMON_FLOOR`` rows (so small stores keep every word), the rarest ``KEEP_RAREST`` always stay.
    Keeping more words (a larger share, more of the rarest) buys quality at more latency than the
    target allows; a budget on the kept words' rows lost quality for no gain the machine's noise did
    not hide (``bench/recall_scale.py``; docs/decisions.md).
    """
    total = queries.text_rows(view.conn)
    limit = max(COMMON_FLOOR, COMMON_SHARE * total)
    if total <= COMMON_FLOOR or len(words) <= KEEP_RAREST:
        return words
    rows = queries.term_rows(view.conn, words)
    rarest = set(sorted(words, key=lambda w: rows[w])[:KEEP_RAREST])
    return [w for w in words if rows[w] <= limit or w in rarest]


def text_lane(
    view: ReadView, query: str, depth: int, *, types: Sequence[str] | None = TEXT_TYPES, drop_stopwords: bool = True
) -> list[int]:
    """BM25 over nodes of ``types`` (turns, memories, summaries, facts) inside the read's world.

    FTS5 ranks its matches alone (its own ``order by rank limit``); the type, validity and world
    filters then run over that short list, which deepens only if too few survive.
    """
    return start_text_lane(view, query, depth, types=types, drop_stopwords=drop_stopwords)()


def start_text_lane(
    view: ReadView, query: str, depth: int, *, types: Sequence[str] | None = TEXT_TYPES, drop_stopwords: bool = True
) -> Callable[[], list[int]]:
    """``text_lane`` begun; call the result for the lane.

    Its full-text search runs on the read's side reader (``ReadView.soon``) while the caller
    goes on: ``recall.gather`` reads the vectors meanwhile.
    """
    expression = fts_query(query, words=uncommon_words(view, query_words(query, drop_stopwords=drop_stopwords)))
    if not expression:
        return list
    fetch = with_margin(depth)
    first = view.soon(lambda conn: queries.fts_ranked(conn, expression, fetch))

    def finish() -> list[int]:
        found, limit = first(), fetch
        while True:  # most matches pass the filters: start near the depth wanted, deepen only when short
            matched = [nid for nid, _ in by_score(found, view.tie_keys)]
            ranked = (
                matched
                if types is None
                else [nid for nid, (kind, _) in zip(matched, view.kinds(matched), strict=True) if kind in types]
            )
            kept = view.inside(ranked)
            if len(kept) >= depth or len(matched) < limit:
                return kept[:depth]
            limit *= 4
            found = queries.fts_ranked(view.conn, expression, limit)

    return finish


def with_margin(k: int) -> int:
    """How many hits a lane asks for first to keep ``k`` once its filters drop the ones the read may not see.

    A few hidden hits (superseded, not yet valid, outside the world) must not cost a second search
    of 4k: at 100k memories a query naming a date searched the vectors twice (3 ms each) for one
    superseded fact, and twice k full-text matches cost FTS5 and the filters more than k + k/8.
    """
    return k + k // 8 + 1


def nearest(view: ReadView, vector: np.ndarray, k: int, types: Sequence[str] | None) -> list[tuple[int, float]]:
    """(nid, cosine) of the ``k`` nearest visible nodes of ``types`` inside the read's world."""
    index = view.index()
    links = view.links()
    fetch = with_margin(k)
    while True:  # superseded or not-yet-valid hits drop out: ask for more until k remain
        hits = _search(index, view.worlds, vector, fetch, types, links)
        shown = view.visible([nid for nid, _ in hits])
        kept = by_score([(nid, score) for nid, score in hits if nid in shown], view.tie_keys)
        if len(kept) >= k or len(hits) < fetch:
            return kept[:k]
        fetch *= 4


def _search(
    index: IvfIndex,
    worlds: tuple[int, ...],
    vector: np.ndarray,
    k: int,
    types: Sequence[str] | None,
    links: np.ndarray | None,
) -> list[tuple[int, float]]:
    """The index's ``k`` best inside any of ``worlds`` (all: none given): each world's best, merged."""
    if len(worlds) <= 1:
        return index.search(vector, k, world=worlds[0] if worlds else None, types=types, links=links)
    best: dict[int, float] = {}
    for world in worlds:
        best.update(index.search(vector, k, world=world, types=types, links=links))
    return sorted(best.items(), key=lambda hit: (-hit[1], hit[0]))[:k]


def vector_lane(view: ReadView, vector: np.ndarray, depth: int) -> list[tuple[int, float]]:
    """(nid, cosine) over turns, memories and summaries inside the read's world, best first."""
    return nearest(view, vector, depth, TEXT_TYPES)


def notes_lane(
    view: ReadView,
    lanes: Mapping[str, Sequence[int]],
    among: Sequence[int],
    *,
    weights: Mapping[str, float],
) -> list[int]:
    """The notes (``Memory``) of ``among``, ranked among notes by what the other lanes say of them.

    A person's few deliberate notes share a scope with every turn of their conversations; ranked
    with them, a note competes against hundreds of turns in every lane. Here the notes alone are
    ordered by the same fused evidence (``lanes``, which this lane joins last), so the best-found
    note has a first place as a lane's best does. ``among``: the nodes that match the question (the
    caller's: the first of the text, vector and late lanes); a note of them no lane ranked (the late
    lane matched it word by word, but only re-orders the others' finds) follows, in ``among``'s order.
    """
    if not among or not view.index().rows_of(NOTE_TYPES):
        return []  # a store of conversations alone: no note to rank, no fusion to spend
    candidates = list(dict.fromkeys(among))
    notes = {nid for nid, (kind, _) in zip(candidates, view.kinds(candidates), strict=True) if kind in NOTE_TYPES}
    ranked = [nid for nid, _ in rrf(lanes, weights=weights, keys=view.tie_keys, among=notes)] if notes else []
    placed = set(ranked)
    return ranked + [nid for nid in candidates if nid in notes and nid not in placed]


def nearest_notes(view: ReadView, vector: np.ndarray, depth: int) -> list[int]:
    """The ``depth`` notes (``Memory``) inside the read's world nearest ``vector``; [] in a store without notes."""
    if not view.index().rows_of(NOTE_TYPES):
        return []
    return [nid for nid, _ in nearest(view, vector, depth, NOTE_TYPES)]


def with_cold(
    view: ReadView, vector: np.ndarray, scored: list[tuple[int, float]], found: Sequence[int], depth: int
) -> list[int]:
    """The vector lane (``scored``) with the cold-tier memories among ``found`` (the text lane's) placed by cosine.

    A cold memory (consolidate/retention.py) is out of the in-memory index, so only its words find it; its
    vector is read from the file and scored exactly, as the index scores its hits.
    """
    hot = {nid for nid, _ in scored}
    cold = [nid for nid in queries.cold_among(view.conn, found, TEXT_TYPES) if nid not in hot]
    if cold:
        scored = scored + file_cosines(view, cold, vector)
    return [nid for nid, _ in by_score(scored, view.tie_keys)[:depth]]


def file_cosines(view: ReadView, nids: Sequence[int], vector: np.ndarray) -> list[tuple[int, float]]:
    """(nid, cosine to ``vector``) of each of ``nids`` whose vector the file holds, read and scored exactly.

    For what the in-memory index does not hold: the cold tier (consolidate/retention.py).
    """
    rows = VectorTable(view.conn).exact_rows(np.array(nids, dtype=np.int64), vector.shape[0])
    return [(nid, float(row @ vector)) for nid, row in zip(nids, rows, strict=True) if not np.isnan(row[0])]


@dataclass(frozen=True)
class EntityPath:
    """How the entity lane reached a node: the entity it names and the refers_to edge followed."""

    entity: int
    alias: str
    edge: int


def asked_people(view: ReadView, query: str) -> tuple[str, ...]:
    """Whom ``query`` asks about without naming them: the read's scope's person when it says "I", "my" or "me".

    An assistant asks its memory in the words of the person it serves ("who is my doctor?"), and a
    note in a person's scope speaks for them (``write/notes.py``): "my" is that person, not the
    speaker of every first-person turn in the scope.
    """
    if not view.worlds or not {w.split("'")[0].casefold() for w in words(query)} & FIRST_PERSON:
        return ()
    return tuple(sorted({person for node in view.nodes(list(view.worlds)) if (person := person_of(node))}))


def named_entities(view: ReadView, query: str, people: Sequence[str] = ()) -> dict[int, str]:
    """Entities inside the read's world named in ``query`` (any 1-4 word span equal to an alias), or in ``people``.

    Each is widened to its identity: everything joined to it by accepted same_as.
    """
    tokens = words(query)
    spans = {
        normalise_alias(" ".join(tokens[i:j]))
        for i in range(len(tokens))
        for j in range(i + 1, min(i + MAX_ENTITY_WORDS, len(tokens)) + 1)
        if not all(t.casefold() in STOPWORDS for t in tokens[i:j])
    } | {normalise_alias(person) for person in people}
    if not spans:
        return {}
    found = queries.nids_by_alias(view.conn, sorted(spans), "Entity")
    named: dict[int, str] = {}
    for nid, alias in found:
        named.setdefault(nid, alias)
    for nid, alias in list(named.items()):
        for other in traverse.closure(nid, view.store.same_as_neighbours):
            named.setdefault(other, alias)
    kept = view.inside(sorted(named))
    return {nid: named[nid] for nid in kept}


def what_else(view: ReadView, query: str, names: Iterable[str], vector: np.ndarray | None) -> np.ndarray | None:
    """The query's vector without the names the entity lane already matched on (``vector`` if nothing is left).

    Every node the lane ranks refers to a named entity already, so the name says nothing more
    about which of them answers; left in, it pulls the query's vector towards every short turn
    that is little more than the name (docs/decisions.md).
    """
    if vector is None or view.embed is None:
        return vector
    taken = {w for name in names for w in words(name.casefold())}
    rest = [w for w in words(query) if w.casefold() not in taken]
    return view.embed(" ".join(rest)) if rest and len(rest) < len(words(query)) else vector


def entity_lane(
    view: ReadView, query: str, vector: np.ndarray | None, depth: int, candidates: Sequence[int] = ()
) -> tuple[list[int], dict[int, EntityPath]]:
    """Facts and turns that refers_to an entity the query names: most of the names first, then closest.

    An entity referred to by more than ``ENTITY_FANOUT`` nodes (the person a whole history is
    about) is not enumerated: only the ``candidates`` the other lanes found are checked against
    it, so the lane's cost stays bounded however large a scope grows.
    """
    return start_entity_lane(view, query, vector, depth)(candidates)


def start_entity_lane(
    view: ReadView, query: str, vector: np.ndarray | None, depth: int, entities: dict[int, str] | None = None
) -> Callable[[Sequence[int]], tuple[list[int], dict[int, EntityPath]]]:
    """``entity_lane`` begun; call the result with the other lanes' finds for the lane.

    What needs no other lane is done now: the names, and every node that refers to a name with
    few references, read, filtered and scored (``recall.gather`` does this while the text lane's
    search runs on the side reader). The names with many references are matched against the
    finds when the result is called.
    """
    entities = named_entities(view, query) if entities is None else entities  # (the caller's, when it read them)
    small = [
        e for e in sorted(entities) if queries.fan_in(view.conn, e, "refers_to", ENTITY_FANOUT + 1) <= ENTITY_FANOUT
    ]
    big = sorted(set(entities) - set(small))
    closer = what_else(view, query, entities.values(), vector)
    reached = _Reached(view, entities, closer)
    reached.take(
        queries.linked(
            view.conn,
            ("refers_to",),
            small,
            GRAPH_TYPES,
            view.valid,
            view.belief,
            towards=True,
            include_superseded=view.include_superseded,
        )
    )

    def finish(candidates: Sequence[int]) -> tuple[list[int], dict[int, EntityPath]]:
        if big and candidates:
            reached.take(
                [
                    (eid, entity, source, t)
                    for eid, source, entity, t in queries.linked(
                        view.conn,
                        ("refers_to",),
                        list(candidates),
                        ("Entity",),
                        view.valid,
                        view.belief,
                        towards=False,
                        include_superseded=view.include_superseded,
                        far=big,
                    )
                ]
            )
        return reached.ranked(depth)

    return finish


class _Reached:
    """The nodes the entity lane reached so far: the first edge to each, the query's names each refers to, its score."""

    def __init__(self, view: ReadView, entities: dict[int, str], vector: np.ndarray | None) -> None:
        self.view, self.entities, self.vector = view, entities, vector
        self.paths: dict[int, EntityPath] = {}
        self.named: dict[int, set[str]] = {}  # the query's names each node refers to
        self.kept: list[int] = []  # the reached nodes of GRAPH_TYPES the read may see
        self.score: dict[int, float] = {}

    def take(self, edges: Sequence[tuple[int, int, int, str]]) -> None:
        """Add (edge, entity, node, time) links: a node new to the lane is checked and scored once."""
        new = list(dict.fromkeys(source for _, _, source, _ in edges if source not in self.paths))
        for eid, entity, source, _ in edges:
            self.paths.setdefault(source, EntityPath(entity, self.entities[entity], eid))
            self.named.setdefault(source, set()).add(self.entities[entity])
        nids = sorted(n for n, (kind, _) in zip(new, self.view.kinds(new), strict=True) if kind in GRAPH_TYPES)
        nids = self.view.inside(nids) if self.view.worlds else nids
        self.kept += nids
        if self.vector is not None:
            self.score.update(self.view.index().cosines(nids, self.vector))

    def ranked(self, depth: int) -> tuple[list[int], dict[int, EntityPath]]:
        """The best ``depth``: most of the names, then closest, then newest; and how each was reached."""
        nids = ordered(
            self.kept,
            lambda n: (-len(self.named[n]), -self.score.get(n, -2.0)),
            self.view.tie_keys,
            newest_first=True,
        )
        kept = nids[:depth]
        return kept, {nid: self.paths[nid] for nid in kept}


def time_lane(
    view: ReadView, query: str, vector: np.ndarray | None, depth: int, *, candidates: Sequence[int]
) -> list[int]:
    """The memories valid from within the periods the query names (``dates.named_periods``), closest first.

    A question that names a date asks about what was said around it, which neither its words nor
    its vector find: the turns of 25 May rarely say "25 May". Without a date named, the lane is
    empty. A period where the read's world holds more than ``TIME_FANOUT`` memories (a busy month
    of a large store), or the store more than ``TIME_READ`` nodes, keeps only the ``candidates``
    the other lanes found in it, so the lane never scores a whole month. Ordered by cosine to the
    query (newest first in a store without vectors); a purged memory is never offered.
    """
    found: list[int] = []
    for start, end in named_periods(query, view.valid):
        dated = queries.valid_between(view.conn, start, end, TIME_READ + 1)  # the index alone: cheap
        dated = [n for n, (kind, _) in zip(dated, view.kinds(dated), strict=True) if kind in TEXT_TYPES]
        held = len(view.below(dated)) if view.worlds else len(dated)  # by parents, in memory
        if len(dated) > TIME_READ or held > TIME_FANOUT:
            dated = queries.valid_between(view.conn, start, end, len(candidates), among=candidates)
        found.extend(dated)
    found = list(dict.fromkeys(found))
    if vector is not None and found:
        score = view.index().cosines(found, vector)
        found = ordered(found, lambda n: -score.get(n, -2.0), view.tie_keys, newest_first=True)  # purged: last
    kept: list[int] = []
    for lo in range(0, len(found), depth):  # closest first: most reads check one slice
        kept += queries.with_text(view.conn, view.inside(found[lo : lo + depth]))
        if len(kept) >= depth:
            break
    return kept[:depth]


def standing_lanes(
    view: ReadView, vector: np.ndarray, kinds: Sequence[str], k: int = STANDING_K
) -> dict[str, list[int]]:
    """Per kind (an alias, facts.STANDING), the turns that gave the ``k`` statements of it closest to the query.

    An instruction or a preference is said once and holds for every later question on its
    subject, which rarely shares its words ("Always include error status codes when I ask about
    API error handling"; later: "what typical errors should I handle with a REST API?"), so
    neither BM25 nor cosine over the whole history ranks it near the top. Among the handful a
    person states, the closest by cosine is the one likeliest to apply. Each lane runs for every
    query (no routing): a question none applies to gets the closest one all the same, one rank
    among the fused. It ranks by the statement's own words (the fact) and yields the turn that
    said it, which is read in its session like every turn (``recall.session_prior``); a
    statement the read sees no turn of (written directly as a fact, or its turns retired) is
    yielded itself. All kinds are read together (one visibility check, one edge read): a lane
    each, mostly one cost. Inside a world only the statements held under it by their parents are
    weighed (facts.py writes each into its speaker's scope), so the cost follows the reader's
    scope, not the whole store; one put into a world only by a membership edge is not offered.

    ``k``, the lanes' weights (``fusion.LANE_WEIGHTS``) and keeping preferences a lane apart from
    instructions were chosen with ``bench/recall.py`` on BEAM-100K; the figures: docs/decisions.md.
    """
    ranked: dict[str, list[int]] = {}  # kind -> its statements with a vector, closest first
    for kind in kinds:
        nids = queries.alias_nids(view.conn, normalise_alias(kind))  # every scope's: few per scope, many in all
        if view.worlds:  # the read's own, by their parents (facts.py writes them into the scope)
            nids = sorted(view.below(nids))
        score = view.index().cosines(nids, vector)
        ranked[kind] = [n for n, _ in by_score(list(score.items()), view.tie_keys, newest_first=True)]
    closest: dict[str, list[int]] = {kind: [] for kind in kinds}
    for lo in range(0, max(map(len, ranked.values()), default=0), STANDING_BATCH):  # closest first
        wanted = [n for kind, nids in ranked.items() if len(closest[kind]) < k for n in nids[lo : lo + STANDING_BATCH]]
        if not wanted:
            break
        seen = set(view.inside(wanted))  # the read may see the closest, mostly: one check for every kind
        for kind, nids in ranked.items():
            closest[kind] += [n for n in nids[lo : lo + STANDING_BATCH] if n in seen][: k - len(closest[kind])]
    picked = [n for nids in closest.values() for n in nids]
    said = queries.linked(
        view.conn, ("refers_to",), picked, ("Turn",), view.valid, view.belief, towards=False, include_superseded=True
    )
    shown = set(view.inside(sorted({turn for _, _, turn, _ in said})))
    first: dict[int, int] = {}  # statement -> the first turn the read sees that said it (read in its session)
    for _, fact, turn, _ in said:
        if turn in shown:
            first[fact] = min(turn, first.get(fact, turn))
    return {kind: list(dict.fromkeys(first.get(n, n) for n in nids)) for kind, nids in closest.items()}
