"""Tiered entity resolution (WorldDB paper §3.1-3.2): which known entity, if any, a mention names.

Tiers, tried in order; the first confident one decides. A tier torn between identities hands them
on: the later tiers only score those (evidence, no search of their own) and the tiebreaker decides.

1. exact: the normalised name or an alias, through an index;
2. fuzzy: Jaro-Winkler over the names and aliases that FTS5 blocking keeps (a few dozen of the
   store: every word within one typo of a word of the name; if none, words split by a stray space
   or starting and sounding alike), word order, split words and initials forgiven;
3. phonetic: Soundex keys after digraph rewrites, so "Phillip" and "Filip" collide;
4. embedding: cosine between the mention and the entities' vectors, through a narrow probe of the
   vector index (only near-duplicates count); skipped for a name that tiers 2-3 found spelt alike
   (``ResolverConfig.spelt``): a name's vector finds what its spelling did, at far greater cost;
5. a ``Tiebreaker`` (an LLM, a person, a function) for a torn tier, with every tier's scores of its
   options, which may disagree; the default (``PreferTiers``) trusts exact, then fuzzy, then
   embedding, then phonetic, and leaves a tie within its most trusted tier ambiguous. A tie among
   more identities than ``max_options`` ("Ryan" when three Ryans are known) names nobody in
   particular: it is ``New``, with the nearest. Two is the default: offering a name two people
   share costs one false proposal for a true one, three or more cost more than they find
   (``bench/resolver.py`` on FEBRL; docs/decisions.md).

Context (a place, an employer) on both sides moves a name's score: agreement lifts a name that
shares a word with the mention, disagreement lowers any.

A match is an identity: the accepted same_as class of the entity found, so "Sarah" and "Sara"
once merged are one option, not two. The resolver only reads. What it finds becomes a pending
same_as proposal through the reconciler (``WorldDB.resolve_entity``, ``facts.write_extraction``,
``recluster``): nothing merges until ``accept_merge``. Thresholds live in ``ResolverConfig``;
``bench/resolver.py`` measured the defaults on FEBRL.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, fields
from typing import Protocol, runtime_checkable

import jellyfish
import numpy as np

from ..errors import InvalidInput, TiebreakerError
from ..store import traverse
from ..store.name_index import Name, NameIndex
from ..store.rows import Store
from ..text import caches, phonetic
from ..text.names import normalise_alias

TIERS = ("exact", "fuzzy", "phonetic", "embedding")
EMBED_K = 8  # nearest entities tier 4 looks at
NEAR_PROBE = 4  # vector-index partitions tier 4 scans: near-duplicates lie in the few nearest the vector
EMBED_CACHE = 4096  # mention vectors kept (names recur: re-clustering resolves the same ones again)
_jw = jellyfish.jaro_winkler_similarity


_SIMILARITIES = ("fuzzy", "margin", "partial", "phonetic", "embedding", "spelt", "context_centre", "context_word")


@dataclass(frozen=True)
class ResolverConfig:
    """Thresholds of the tiers. Defaults measured on FEBRL 4 (``bench/resolver.py --sweep``)."""

    fuzzy: float = 0.93  # name similarity (Jaro-Winkler family, 0..1) at which tier 2 matches
    margin: float = 0.01  # the best identity must beat the runner-up by this much to be confident
    partial: float = 0.96  # score of a mention whose every word is a word of the name ("Sarah" ~ "Sarah Chen")
    phonetic: float = 0.95  # similarity of the respelled names at which same-sounding names match
    embedding: float = 0.95  # cosine at which tier 4 matches
    spelt: float = 0.8  # tier 4 is skipped when tier 2 or 3 found a name this alike (1.0: only past a match)
    context_weight: float = 1.0  # with context on both sides, agreeing: score += weight * (similarity - centre)
    context_penalty: float = 0.4  # ... disagreeing: score -= penalty * (centre - similarity)
    context_centre: float = 0.65  # context similarity (Jaro-Winkler) that neither helps nor hurts
    context_word: float = 0.9  # agreeing context lifts only a name sharing a word this alike (Jaro-Winkler)
    block: int = 48  # names scored after FTS5 blocking
    max_options: int = 2  # identities an Ambiguous result offers (and proposals it stages); more fit: New
    max_name_chars: int = 128  # longer names are matched exactly only (fuzzy tiers cost O(length^2))
    embedding_tier: bool = True  # off: names only (a store without an embedder has no tier 4 anyway)

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, bool):
                continue
            if not isinstance(value, (int, float)) or not math.isfinite(value):
                raise InvalidInput(f"ResolverConfig.{f.name} must be a finite number, got {value!r}")
            if f.name in ("block", "max_options", "max_name_chars") and (not isinstance(value, int) or value < 1):
                raise InvalidInput(f"ResolverConfig.{f.name} must be a whole number of at least 1, got {value!r}")
            if f.name in _SIMILARITIES and not 0.0 <= value <= 1.0:
                raise InvalidInput(f"ResolverConfig.{f.name} is a similarity between 0 and 1, got {value!r}")


@dataclass(frozen=True)
class Mention:
    """A name to resolve, with what else is known about it.

    Only ``name`` is resolved: ``aliases`` ("my manager" in "my manager, Sarah") are recorded on
    the entity the mention becomes, where they feed tier 1 for later mentions, but do not decide
    this one (two different sisters are both "my sister").
    """

    name: str
    aliases: tuple[str, ...] = ()
    context: str | None = None  # short text, e.g. a place or employer: it tells namesakes apart
    kind: str | None = None  # person, pet, place, ...: an entity of another kind is never a match


@dataclass(frozen=True)
class Candidate:
    """An identity a tier put forward: one of its entities, the name it matched by, the tier and score."""

    entity: str  # node id (hex) of the member that matched best
    name: str  # that member's name or alias, folded
    tier: str  # exact, fuzzy, phonetic or embedding
    score: float  # the tier's similarity, context included (exact: 1.0)
    members: tuple[str, ...] = field(default=(), compare=False)  # the whole identity (accepted same_as class)


@dataclass(frozen=True)
class Resolved:
    """The mention is a known identity."""

    match: Candidate
    by_tiebreaker: bool = False

    @property
    def tier(self) -> str:
        return self.match.tier

    @property
    def score(self) -> float:
        return self.match.score


@dataclass(frozen=True)
class Ambiguous:
    """Several identities fit and nothing decided between them; best first."""

    options: tuple[Candidate, ...]

    @property
    def tier(self) -> str:
        return self.options[0].tier

    @property
    def score(self) -> float:
        return self.options[0].score


@dataclass(frozen=True)
class New:
    """Nobody known fits; ``nearest`` is the closest that fell short, if any."""

    nearest: Candidate | None = None
    tier: None = None
    score: None = None


Resolution = Resolved | Ambiguous | New


@runtime_checkable
class Tiebreaker(Protocol):
    """Chooses among options the tiers could not settle, or returns None to leave it ambiguous.

    The options hold each identity once per tier that scored it: after a tier is torn, the later
    tiers score its identities as evidence. A tiebreaker with ``wants_evidence = False`` is
    spared that work and gets the torn tier's options only.
    """

    def __call__(self, mention: Mention, options: Sequence[Candidate]) -> Candidate | None: ...


class PreferTiers:
    """The default tiebreaker: the option of the most trusted tier, if no other of that tier is within ``margin``."""

    ORDER = ("exact", "fuzzy", "embedding", "phonetic")
    wants_evidence = False  # it reads the most trusted tier only: later tiers need not score a torn tier's options

    def __init__(self, margin: float = ResolverConfig.margin) -> None:
        self.margin = margin

    def __call__(self, mention: Mention, options: Sequence[Candidate]) -> Candidate | None:
        ranked = sorted(options, key=lambda c: (self.ORDER.index(c.tier), -c.score))
        best = ranked[0]
        same = {best.entity, *best.members}
        rivals = [c for c in ranked[1:] if c.tier == best.tier and c.entity not in same]
        if rivals and best.score - rivals[0].score < self.margin:
            return None
        return best


# ---- similarity ------------------------------------------------------------------------


def similarity(mention: str, name: str, partial: float = ResolverConfig.partial) -> float:
    """How alike two folded names are, 0..1: the best of whole-string, word-sorted and word-aligned Jaro-Winkler.

    Word-sorted and word-aligned forms forgive swapped order ("Reid William"); word alignment
    charges words the mention lacks; neighbouring words are joined again when a stray space split
    one ("satte rley"). A mention whose words are all words of the name scores at least
    ``partial`` ("Sarah" for "Sarah Chen"); the reverse (the mention says more) does not. An
    initial counts as the word it begins, either way ("S Chen" ~ "Sarah Chen"), scoring at most
    ``partial``: it says less than the word.
    """
    if mention == name:
        return 1.0
    ours, ours_sorted, ours_flat = _parts(mention)
    theirs, theirs_sorted, theirs_flat = _parts(name)
    if not ours or not theirs:
        return 0.0
    score = _jw(mention, name)
    if len(ours) == 1 and len(theirs) == 1:
        return score  # one word each: every other form is this one
    score = max(score, _jw(ours_flat, theirs_flat), _aligned(ours, theirs))
    if len(ours) == len(theirs):  # sorted, a shared word ahead of a missing one would look like a match
        score = max(score, _jw(ours_sorted, theirs_sorted))
    elif len(ours) > len(theirs):  # a word split by a stray space ("satte rley"): join neighbours, compare again
        score = max((score, *(_jw(" ".join(sorted(joined)), theirs_sorted) for joined in _joins(ours, len(theirs)))))
    if len(ours) < len(theirs) and _within(ours, theirs):
        score = max(score, partial)
    for short, long_ in ((ours, theirs), (theirs, ours)):  # an initial stands for a word: "S Chen", "Sarah Chen"
        spelt = _spelt_out(short, long_)
        if spelt is not None:
            score = max(score, min(partial, similarity(" ".join(spelt), " ".join(long_), partial)))
    return score


def _spelt_out(short: tuple[str, ...], long_: tuple[str, ...]) -> tuple[str, ...] | None:
    """``short`` with each one-letter word replaced by an unused word of ``long_`` it begins; None if none can be."""
    if len(short) < 2 or all(len(w) > 1 for w in short):
        return None
    rest = [w for w in long_ if w not in short]
    out = []
    for word in short:
        if len(word) == 1:
            partner = next((w for w in rest if len(w) > 1 and w[0] == word), None)
            if partner is None:
                return None
            rest.remove(partner)
            word = partner
        out.append(word)
    return tuple(out)


@functools.lru_cache(maxsize=1 << 16)
def _parts(folded: str) -> tuple[tuple[str, ...], str, str]:
    """A folded name's words, its words sorted, and its letters without spaces (names recur: cached)."""
    words = tuple(folded.split())
    return words, " ".join(sorted(words)), "".join(words)


caches.register("resolver: folded names", _parts.cache_clear)


def _joins(words: tuple[str, ...], count: int) -> list[tuple[str, ...]]:
    """``words`` with neighbours joined until ``count`` are left, every way (few: names have few words)."""
    if len(words) - count > 2 or len(words) > 6:
        return []
    out = [words]
    for _ in range(len(words) - count):
        out = [(*w[:i], w[i] + w[i + 1], *w[i + 2 :]) for w in out for i in range(len(w) - 1)]
    return list(dict.fromkeys(out))


def _aligned(ours: Sequence[str], theirs: Sequence[str]) -> float:
    """Each word of the shorter name paired with its best unused word of the longer, length-weighted."""
    short, long_ = (ours, theirs) if len(ours) <= len(theirs) else (theirs, ours)
    used: set[int] = set()
    total = weight = 0.0
    for word in short:
        best, at = 0.0, -1
        for j, other in enumerate(long_):
            if j not in used:
                s = _jw(word, other)
                if s > best:
                    best, at = s, j
        if at >= 0:
            used.add(at)
        total += best * len(word)
        weight += len(word)
    weight += sum(len(w) for j, w in enumerate(long_) if j not in used)  # words with no partner count as 0
    return total / weight


def _within(ours: Sequence[str], theirs: Sequence[str]) -> bool:
    rest = list(theirs)
    for word in ours:
        if word not in rest:
            return False
        rest.remove(word)
    return True


def respelled(folded: str) -> str:
    """A folded name spelled as it sounds, word by word (what the phonetic tier compares)."""
    return " ".join(w for w in (phonetic.respell(w) for w in folded.split()) if w)


# ---- the resolver ----------------------------------------------------------------------

Embed = Callable[[str], np.ndarray]
Nearest = Callable[[np.ndarray, int, int | None], list[tuple[int, float]]]  # vector, k, world -> (nid, cosine)
Cosines = Callable[[np.ndarray, Sequence[int]], dict[int, float]]  # vector, nids -> {nid: cosine}


@dataclass
class _Scored:
    """One identity's best evidence within a tier."""

    nid: int
    name: str
    score: float
    members: frozenset[int]


class Resolver:
    """Resolves mentions against one connection's entities. Read-only; see the module docstring."""

    def __init__(
        self,
        store: Store,
        *,
        config: ResolverConfig | None = None,
        tiebreaker: Tiebreaker | None = None,
        embed: Embed | None = None,
        nearest: Nearest | None = None,
        cosines: Cosines | None = None,
    ) -> None:
        self.store = store
        self.index = NameIndex(store.conn)
        self.config = config or ResolverConfig()
        self.tiebreaker: Tiebreaker = tiebreaker or PreferTiers(self.config.margin)
        self.embed = embed
        self.nearest = nearest
        self.cosines = cosines
        self._vectors: dict[str, np.ndarray] = {}
        caches.register("resolver: name vectors", self._forget)

    def resolve(
        self,
        mention: Mention,
        *,
        world: int | None = None,
        exclude: Iterable[int] = (),
        tiebreaker: Tiebreaker | None = None,
    ) -> Resolution:
        """Resolve ``mention`` among the entities of ``world`` (None: the whole store).

        Identities holding a node of ``exclude`` are passed over (the entity's own class when
        re-resolving it, and every node it already has a proposal with).
        """
        name = mention.name.strip() if isinstance(mention.name, str) else ""
        if not name:
            raise InvalidInput("the name to resolve is empty; give the entity's name")
        self.index.ready()
        skip = frozenset(exclude)
        chooser = tiebreaker or self.tiebreaker
        classes: dict[int, frozenset[int]] = {}
        options: list[Candidate] = []
        near: Candidate | None = None
        folded = phonetic.fold(name)
        table: set[int] = set()  # the nodes of the identities on the table, once a tier was torn
        spelt = -math.inf  # the best score of the spelling tiers (2 and 3)
        for tier in TIERS:
            if tier != "exact" and len(name) > self.config.max_name_chars:
                break  # a very long name is matched exactly or not at all
            if tier == "embedding" and not table and spelt >= self.config.spelt:
                break  # a name that spelling has weighed: its vector would find the same neighbours
            if table:  # torn: later tiers weigh in on the identities on the table, with no search of their own
                if getattr(chooser, "wants_evidence", True):
                    options.extend(
                        self._candidate(s, tier)
                        for s in self._rescore(tier, mention, name, folded, table, skip, classes)
                    )
                continue
            found = self._tier(tier, mention, name, folded, world, skip, classes)
            if not found:
                continue
            threshold = self._threshold(tier)
            best = found[0]
            if tier in ("fuzzy", "phonetic"):
                spelt = max(spelt, best.score)
            if best.score < threshold:
                if near is None:
                    near = self._candidate(best, tier)
                continue
            runner = found[1].score if len(found) > 1 else -math.inf
            if best.score - runner >= self.config.margin:
                return Resolved(self._candidate(best, tier))
            # torn: the best and every identity within the margin of it go to the tiebreaker
            torn = [s for s in found if best.score - s.score < self.config.margin]
            if len(torn) > self.config.max_options:  # more fit than may be offered: it names nobody in particular
                return New(self._candidate(best, tier))
            options.extend(self._candidate(s, tier) for s in torn)
            table.update(m for s in torn for m in s.members)
        if not options:
            return New(near)
        return self._break_tie(mention, self._distinct(options), chooser)

    # ---- tiers ---------------------------------------------------------------------

    def _threshold(self, tier: str) -> float:
        c = self.config
        return {"exact": -math.inf, "fuzzy": c.fuzzy, "phonetic": c.phonetic, "embedding": c.embedding}[tier]

    def _tier(
        self,
        tier: str,
        mention: Mention,
        name: str,
        folded: str,
        world: int | None,
        skip: frozenset[int],
        classes: dict[int, frozenset[int]],
    ) -> list[_Scored]:
        """The identities a tier finds, best first, with their scores."""
        c = self.config
        if tier == "exact":
            scored = [(n, 1.0) for n in self.index.exact(normalise_alias(name), world)]
        elif tier == "fuzzy":
            names = self.index.block(folded, world, c.block)
            scored = [(n, similarity(folded, n.folded, c.partial)) for n in names]
            if mention.context or not names:  # the second, wider pass (see NameIndex.widen)
                seen = {(n.nid, n.norm) for n in names}
                more = [
                    n
                    for n in self.index.widen(folded, world, c.block, context=mention.context)
                    if (n.nid, n.norm) not in seen
                ]
                scored += [(n, similarity(folded, n.folded, c.partial)) for n in more]
        elif tier == "phonetic":
            keys = phonetic.keys(folded)
            if not keys:
                return []  # no Latin letters: nothing to say about the sound
            spelled = respelled(folded)
            wanted = sorted(keys)  # the same sounds, word for word: a shared surname alone is not a match
            names = [n for n in self.index.sounds_like(keys, world, c.block) if sorted(n.keys) == wanted]
            scored = [(n, similarity(spelled, respelled(n.folded), c.partial)) for n in names]
        else:
            scored = self._embedded(name, world)
        kept = [(n, s + self._context(mention, n)) for n, s in scored if _kind_fits(mention, n)]
        return self._identities(kept, skip, classes)

    def _rescore(
        self,
        tier: str,
        mention: Mention,
        name: str,
        folded: str,
        table: set[int],
        skip: frozenset[int],
        classes: dict[int, frozenset[int]],
    ) -> list[_Scored]:
        """A tier's scores for the identities already on the table (evidence for the tiebreaker)."""
        names = [n for n in self.index.names(table) if _kind_fits(mention, n)]
        partial = self.config.partial
        if tier == "fuzzy":
            scored = [(n, similarity(folded, n.folded, partial)) for n in names]
        elif tier == "phonetic":
            spelled = respelled(folded)
            scored = [(n, similarity(spelled, respelled(n.folded), partial)) for n in names if spelled]
        elif self.config.embedding_tier and self.embed is not None and self.cosines is not None:
            cosine = self.cosines(self._vector(name), [n.nid for n in names])
            scored = [(n, cosine[n.nid]) for n in names if n.nid in cosine]
        else:
            return []
        return self._identities([(n, s + self._context(mention, n)) for n, s in scored], skip, classes)

    def _embedded(self, name: str, world: int | None) -> list[tuple[Name, float]]:
        """Entities whose vectors are close to the mention's.

        The search runs over all entities and keeps those of ``world``: the index's own world
        filter is exact but several times slower, so it runs only when all ``EMBED_K`` hits are
        close enough to count, and more of the world's may hide behind them.
        """
        if not self.config.embedding_tier or self.embed is None or self.nearest is None:
            return []
        vector = self._vector(name)
        floor = self.config.embedding - self.config.margin
        hits = self.nearest(vector, EMBED_K, None)
        if world is not None and len(hits) == EMBED_K and hits[-1][1] >= floor:
            hits = self.nearest(vector, EMBED_K, world)
        close = {nid: score for nid, score in hits if score >= floor}
        if not close:
            return []
        first: dict[int, Name] = {}
        for n in self.index.names(close, world):  # each entity by the first name it is indexed by
            first.setdefault(n.nid, n)
        return [(n, close[nid]) for nid, n in first.items()]

    def _vector(self, name: str) -> np.ndarray:
        """The mention's vector, from a small cache: names recur, and a static embedder is deterministic."""
        vector = self._vectors.pop(name, None)
        if vector is None:
            assert self.embed is not None
            vector = self.embed(name)
            if len(self._vectors) >= EMBED_CACHE:
                self._vectors.pop(next(iter(self._vectors)))
        self._vectors[name] = vector  # most recent last
        return vector

    def _forget(self) -> None:
        self._vectors.clear()

    def _context(self, mention: Mention, name: Name) -> float:
        """What the contexts say: agreeing lifts the score, disagreeing lowers it.

        Agreement vouches only for a name that shares a word with the mention (``context_word``
        alike): living in one suburb does not make "Tyler Doan" and "Katelyn Lodge" one person.
        """
        if not mention.context or not name.context:
            return 0.0
        alike = _jw(phonetic.fold(mention.context), phonetic.fold(str(name.context)))
        c = self.config
        if alike < c.context_centre:
            return c.context_penalty * (alike - c.context_centre)
        if not _share_word(phonetic.fold(mention.name), name.folded, c.context_word):
            return 0.0
        return c.context_weight * (alike - c.context_centre)

    def _identities(
        self, scored: list[tuple[Name, float]], skip: frozenset[int], classes: dict[int, frozenset[int]]
    ) -> list[_Scored]:
        """Group names into identities (accepted same_as classes), best score first; drop skipped ones."""
        scored.sort(key=lambda item: (-item[1], item[0].nid))
        out: list[_Scored] = []
        seen: set[int] = set()
        for n, score in scored:
            if n.nid in seen:
                continue
            members = classes.get(n.nid)
            if members is None:
                members = frozenset(traverse.closure(n.nid, self.store.same_as_neighbours))
                for m in members:
                    classes[m] = members
            seen |= members
            if not members & skip:
                out.append(_Scored(n.nid, n.folded, score, members))
            if len(out) > self.config.max_options:
                break
        return out

    # ---- results -------------------------------------------------------------------

    def _ids(self, nids: Iterable[int]) -> set[str]:
        return {self.store.header(n).id.hex() for n in nids}

    def _candidate(self, scored: _Scored, tier: str) -> Candidate:
        members = tuple(sorted(self._ids(scored.members)))
        return Candidate(self.store.header(scored.nid).id.hex(), scored.name, tier, round(scored.score, 4), members)

    def _distinct(self, options: list[Candidate]) -> list[Candidate]:
        """One option per identity and tier, best first; at most ``max_options`` identities."""
        options.sort(key=lambda c: -c.score)
        kept: list[Candidate] = []
        identities: list[set[str]] = []
        for option in options:
            same = next((i for i in identities if option.entity in i), None)
            if same is None:
                if len(identities) == self.config.max_options:
                    continue
                same = set(option.members) | {option.entity}
                identities.append(same)
            if not any(k.tier == option.tier and k.entity in same for k in kept):
                kept.append(option)
        return kept

    def _break_tie(self, mention: Mention, evidence: list[Candidate], tiebreaker: Tiebreaker) -> Resolution:
        """Ask the tiebreaker, with every tier's evidence; no choice leaves one option per identity."""
        try:
            choice = tiebreaker(mention, tuple(evidence))
        except Exception as exc:
            raise TiebreakerError(
                f"the tiebreaker raised {type(exc).__name__}: {exc} while choosing among {len(evidence)} candidates "
                f"for {mention.name!r}; nothing was written. Fix the tiebreaker, or resolve without it "
                "(the default leaves such a mention ambiguous)"
            ) from exc
        if choice is None:
            ranked = sorted(evidence, key=lambda c: (PreferTiers.ORDER.index(c.tier), -c.score))
            options: list[Candidate] = []
            for option in ranked:  # each identity once, by its most trusted evidence
                if not any(option.entity in (*o.members, o.entity) for o in options):
                    options.append(option)
            return Ambiguous(tuple(options))
        if choice not in evidence:
            raise TiebreakerError(
                f"the tiebreaker returned {choice!r}, which is not one of the {len(evidence)} options it was given "
                f"for {mention.name!r}; return one of them, or None to leave the mention ambiguous"
            )
        return Resolved(choice, by_tiebreaker=True)


def _share_word(ours: str, theirs: str, alike: float) -> bool:
    """Whether a word of one folded name is at least ``alike`` (Jaro-Winkler) to a word of the other."""
    words = _parts(theirs)[0]
    return any(_jw(w, v) >= alike for w in _parts(ours)[0] for v in words)


def _kind_fits(mention: Mention, name: Name) -> bool:
    return not mention.kind or not name.kind or mention.kind == name.kind
