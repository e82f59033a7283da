"""The tiered resolver: each tier, the tiebreaker, proposals (never merges), re-resolution, bad input."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from worlddb_lite import Consolidator, InvalidInput, MergeStatus, WorldDB
from worlddb_lite.errors import TiebreakerError
from worlddb_lite.index import vector_index
from worlddb_lite.store.name_index import deletions
from worlddb_lite.text.extract import EntityMention, Extraction, RuleExtractor
from worlddb_lite.text.phonetic import fold, key, keys, respell
from worlddb_lite.write.facts import write_extraction
from worlddb_lite.write.resolver import (
    Ambiguous,
    Candidate,
    Mention,
    New,
    PreferTiers,
    Resolved,
    ResolverConfig,
    similarity,
)

from .conftest import FakeClock, FakeEmbedder, table_digest

BENCH = Path(__file__).resolve().parents[1] / "bench"


def entity(db: WorldDB, name: str, scope: str = "work", **kwargs: object) -> str:
    """An entity written through the resolver; it must be new."""
    eid, result = db.resolve_entity(name, scope=scope, **kwargs)  # type: ignore[arg-type]
    assert isinstance(result, New), result
    return eid


def namesake(db: WorldDB, name: str, tag: str, scope: str = "work", **props: object) -> str:
    """A second entity of the same name (written directly, as an import would): the resolver must not collapse it."""
    return db.write(name, scope=scope, type="Entity", name=name, aliases=[name], props={"tag": tag, **props})


# ---- tier 1: exact ---------------------------------------------------------------------------------


def test_exact_tier_is_case_insensitive_and_reads_aliases(db: WorldDB) -> None:
    sarah = entity(db, "Sarah Chen", aliases=["my manager"])
    for said in ("SARAH   chen", "sarah chen", "My Manager"):
        found = db.resolve(said, scope="work")
        assert isinstance(found, Resolved) and found.match.entity == sarah
        assert (found.tier, found.score) == ("exact", 1.0)
    assert isinstance(db.resolve("Sarah Chen", scope="home"), New)  # another scope knows nobody
    assert isinstance(db.resolve("Sarah Chen"), Resolved)  # the whole store does
    again, result = db.resolve_entity("sarah chen", scope="work", aliases=["the boss"])
    assert again == sarah and isinstance(result, Resolved)  # an exact match is that entity: reused
    assert "the boss" in db.export_identity(sarah).aliases
    assert db.merge_proposals() == []


# ---- tier 2: fuzzy ---------------------------------------------------------------------------------


def test_fuzzy_tier_matches_a_misspelt_or_partial_name(db: WorldDB) -> None:
    sarah = entity(db, "Sarah Chen")
    for said in ("Sara Chen", "Chen Sarah", "Sarah Chne", "Sarah"):
        found = db.resolve(said, scope="work")
        assert isinstance(found, Resolved) and found.match.entity == sarah, said
        assert found.tier == "fuzzy" and ResolverConfig().fuzzy <= found.score <= 1.0


@pytest.mark.parametrize(
    ("known", "said"),
    [("Tom", "Tim"), ("Mark", "Mary"), ("Dan", "Don"), ("Jill", "Bill"), ("Sarah Chen", "Emily Chen")],
)
def test_a_fuzzy_near_miss_of_different_names_is_new(db: WorldDB, known: str, said: str) -> None:
    entity(db, known)
    assert isinstance(db.resolve(said, scope="work"), New)


def test_similarity_forgives_order_and_charges_missing_words() -> None:
    assert similarity("reid william", "william reid") == 1.0
    assert similarity("sarah", "sarah chen") == ResolverConfig().partial  # the mention names part of it
    assert similarity("sarah chen", "sarah") < ResolverConfig().fuzzy  # the mention says more: not partial
    assert similarity("", "sarah") == 0.0


def test_words_one_edit_apart_share_a_typo_term() -> None:
    assert deletions("lucas") == ["lucas", "ucas", "lcas", "luas", "lucs", "luca"]
    assert deletions("al") == ["al"]  # too short to drop a letter from
    for right, typo in (
        ("andrew", "anrdew"),
        ("nathan", "nahan"),
        ("noah", "nodh"),
        ("lucas", "luas"),
        ("mason", "masoh"),
        ("taliah", "talfiah"),
    ):  # swapped, missing, changed, added letters
        assert set(deletions(right)) & set(deletions(typo)), (right, typo)
    assert not set(deletions("tom")) & set(deletions("bob"))


def crowd(db: WorldDB, names: Sequence[str], scope: str = "work") -> None:
    """Entities written directly (an import): distractors that share words with the one to find."""
    db.write_many([{"text": n, "scope": scope, "type": "Entity", "name": n, "aliases": [n]} for n in names])


@pytest.mark.parametrize(
    ("known", "said"),
    [
        ("Andrew Mason", "Anrdew Masoh"),
        ("Nathan Bishop", "Nahan Bishop"),
        ("Lucas Coleman", "Luas Coleman"),
        ("Noah Reid", "Nodh Reid"),
    ],
)
def test_fuzzy_blocking_keeps_a_name_with_a_typo_in_any_word(db: WorldDB, known: str, said: str) -> None:
    first, last = known.split()
    crowd(
        db,
        [f"{first} {other}" for other in ("Smith", "Jones", "Brown", "Taylor")]
        + [f"{other} {last}" for other in ("Zoe", "Liam", "Ava", "Mia")],
    )
    target = entity(db, known)
    found = db.resolve(said, scope="work")
    assert isinstance(found, Resolved) and found.match.entity == target and found.tier == "fuzzy", found


@pytest.mark.parametrize(
    ("known", "said"),
    [("Benjamin Morrison", "Benjamin Morr Ison"), ("Ewan Whiteley", "Whiteley Ewa N"), ("Painter", "Pai Nter")],
)
def test_a_stray_space_inside_a_word_is_forgiven(db: WorldDB, known: str, said: str) -> None:
    target = entity(db, known)
    found = db.resolve(said, scope="work")
    assert isinstance(found, Resolved) and found.match.entity == target, found


def test_an_initial_stands_for_the_word_it_begins(db: WorldDB) -> None:
    sarah = entity(db, "Sarah Chen")
    crowd(db, ["Julia Chen", "Sarah Jones"])
    for said in ("S. Chen", "Chen, S.", "S Chne"):
        found = db.resolve(said, scope="work")
        assert isinstance(found, Resolved) and found.match.entity == sarah and found.tier == "fuzzy", said
        assert found.score <= ResolverConfig().partial  # an initial says less than the name
    assert isinstance(db.resolve("T. Chen", scope="work"), New)  # nobody's name begins with T
    crowd(db, ["Sam Chen"])
    assert isinstance(db.resolve("S. Chen", scope="work"), Ambiguous)  # Sarah or Sam


def test_a_mention_that_fits_more_identities_than_it_may_offer_is_new(db: WorldDB) -> None:
    crowd(db, ["Ryan Smith", "Ryan Jones", "Ryan Brown", "Ryan Taylor"])
    found = db.resolve("Ryan", scope="work")  # four people fit equally: it names nobody in particular
    assert isinstance(found, New) and found.nearest is not None and found.nearest.name.startswith("ryan")
    db.configure_resolver(ResolverConfig(max_options=4))
    wider = db.resolve("Ryan", scope="work")
    assert isinstance(wider, Ambiguous) and len(wider.options) == 4
    written, result = db.resolve_entity("Ryan", scope="work")  # four proposals, one per identity offered
    assert isinstance(result, Ambiguous) and len(db.merge_proposals()) == 4
    db.configure_resolver()
    assert isinstance(db.resolve("Ryan Smith", scope="work"), Resolved)


def test_agreeing_context_lifts_only_a_name_that_shares_a_word(db: WorldDB) -> None:
    lodge = namesake(db, "Katelyn Lodge", "a", context="Kingsford")
    assert isinstance(db.resolve("Tyler Doan", scope="work", context="Kingsford"), New)  # a suburb is not a person
    doan = namesake(db, "Tyler Dolan", "b", context="Kingsford")
    found = db.resolve("Tyler Doan", scope="work", context="Kingsford")
    assert isinstance(found, Resolved) and found.match.entity == doan != lodge
    alone = db.resolve("Tyler Doan", scope="work")
    assert isinstance(alone, Resolved) and found.score > alone.score  # the agreeing context lifted it


# ---- tier 3: phonetic ------------------------------------------------------------------------------


def test_phillip_and_filip_share_a_phonetic_key() -> None:
    assert key("phillip") == key("filip") == "F410"
    assert key("knight") == key("night") and key("wright") == key("right")
    assert key("catherine") == key("katherine") and key("cindy") == key("sindy")
    assert respell("phillip") == "fillip" and keys(fold("José-Luis O'Brien")) == ("J200", "L200", "O165")


def test_phonetic_tier_matches_phillip_and_filip(db: WorldDB) -> None:
    phillip = entity(db, "Phillip")
    assert similarity("filip", "phillip") < ResolverConfig().fuzzy  # the fuzzy tier alone would miss it
    found = db.resolve("Filip", scope="work")
    assert isinstance(found, Resolved) and found.match.entity == phillip and found.tier == "phonetic"


# ---- tier 4: embedding -----------------------------------------------------------------------------


class SynonymEmbedder(FakeEmbedder):
    """The fake embedder, except that every text about managing engineers points one way."""

    model_id = "synonym-32"

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        out = super().embed(texts)
        for row, text in enumerate(texts):
            if "engineering" in text.lower() or "manager" in text.lower():
                out[row] = 0.0
                out[row, 3] = 1.0
        return out


def test_embedding_tier_finds_what_no_spelling_shares(tmp_path: Path) -> None:
    with WorldDB(tmp_path / "s.db", embedder=SynonymEmbedder(), clock=FakeClock()) as db:
        lead = entity(db, "the engineering lead")
        found = db.resolve("my manager", scope="work")
        assert isinstance(found, Resolved) and found.match.entity == lead and found.tier == "embedding"
        db.configure_resolver(ResolverConfig(embedding_tier=False))
        assert isinstance(db.resolve("my manager", scope="work"), New)


def counted(db: WorldDB) -> list[str]:
    """The texts tier 4 embeds from now on (the resolver's embed function, wrapped)."""
    engine = db._writer.resolver
    seen: list[str] = []
    embed = engine.embed
    assert embed is not None
    engine.embed = lambda text: (seen.append(text), embed(text))[1]
    return seen


def test_tier_4_is_skipped_for_a_name_that_spelling_has_weighed(tmp_path: Path) -> None:
    with WorldDB(tmp_path / "s.db", embedder=SynonymEmbedder(), clock=FakeClock()) as db:
        entity(db, "Mark")
        lead = entity(db, "the engineering lead")
        embedded = counted(db)
        assert similarity("mary", "mark") >= ResolverConfig().spelt
        assert isinstance(db.resolve("Mary", scope="work"), New)  # spelt like Mark, though not enough to match
        assert embedded == []
        found = db.resolve("my manager", scope="work")  # nothing spelt like it: tier 4 runs
        assert isinstance(found, Resolved) and found.match.entity == lead and embedded == ["my manager"]
        db.configure_resolver(ResolverConfig(spelt=1.0))
        assert isinstance(db.resolve("Mary", scope="work"), New) and embedded[-1] == "Mary"


def test_tier_4_probes_the_nearest_partitions_of_a_trained_index(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:

    monkeypatch.setattr(vector_index, "TRAIN_AT", 64)  # partitions from a few hundred entities, not 8,192
    with WorldDB(tmp_path / "s.db", embedder=SynonymEmbedder(), clock=FakeClock()) as db:
        crowd(db, [f"Person {i} of Team {i % 7}" for i in range(400)])
        lead = entity(db, "the engineering lead")
        assert db._reconciler.lane.index().nlist > 1  # an IVF index, not one exact partition
        found = db.resolve("my manager", scope="work")
        assert isinstance(found, Resolved) and found.match.entity == lead and found.tier == "embedding"


def test_tier_4_caches_the_vectors_of_mentions(tmp_path: Path) -> None:
    with WorldDB(tmp_path / "s.db", embedder=SynonymEmbedder(), clock=FakeClock()) as db:
        lead = entity(db, "the engineering lead")
        embedded = counted(db)
        for _ in range(3):
            found = db.resolve("my manager", scope="work")
            assert isinstance(found, Resolved) and found.match.entity == lead
        assert embedded == ["my manager"]


# ---- tier 5: the tiebreaker ------------------------------------------------------------------------


def test_ambiguous_exact_matches_go_to_the_tiebreaker(db: WorldDB) -> None:
    first, second = namesake(db, "Alex Kim", "a"), namesake(db, "Alex Kim", "b")
    found = db.resolve("Alex Kim", scope="work")  # the default cannot tell two exact matches apart
    assert isinstance(found, Ambiguous) and found.tier == "exact"
    assert {o.entity for o in found.options} == {first, second}

    asked: list[tuple[Mention, tuple[Candidate, ...]]] = []

    def pick_second(mention: Mention, options: Sequence[Candidate]) -> Candidate | None:
        asked.append((mention, tuple(options)))
        return next(o for o in options if o.entity == second)

    chosen = db.resolve("Alex Kim", scope="work", tiebreaker=pick_second)
    assert isinstance(chosen, Resolved) and chosen.by_tiebreaker and chosen.match.entity == second
    assert asked and asked[0][0].name == "Alex Kim"
    assert {o.tier for o in asked[0][1]} >= {"exact", "fuzzy", "phonetic"}  # later tiers scored the options too
    eid, _ = db.resolve_entity("Alex Kim", scope="work", tiebreaker=pick_second)
    assert eid == second  # an exact match the tiebreaker chose is that entity

    written, result = db.resolve_entity("Alex Kim", scope="work")  # ambiguous: a new entity, a proposal per option
    assert isinstance(result, Ambiguous) and written not in (first, second)
    pairs = {frozenset((p.a, p.b)) for p in db.merge_proposals()}
    assert pairs == {frozenset((written, first)), frozenset((written, second))}


def test_prefer_tiers_trusts_exact_then_fuzzy_then_embedding_then_phonetic() -> None:
    def option(entity: str, tier: str, score: float) -> Candidate:
        return Candidate(entity, "x", tier, score, (entity,))

    choose = PreferTiers(margin=0.01)
    mention = Mention("x")
    assert choose(mention, [option("p", "phonetic", 1.0), option("e", "embedding", 0.95)]).entity == "e"  # type: ignore[union-attr]
    assert choose(mention, [option("e", "embedding", 0.99), option("f", "fuzzy", 0.94)]).entity == "f"  # type: ignore[union-attr]
    assert choose(mention, [option("f", "fuzzy", 0.94), option("x", "exact", 1.0)]).entity == "x"  # type: ignore[union-attr]
    assert choose(mention, [option("a", "fuzzy", 0.95), option("b", "fuzzy", 0.945)]) is None  # too close to call


def test_context_tells_namesakes_apart(db: WorldDB) -> None:
    lisbon = namesake(db, "Alex Kim", "a", context="Lisbon")
    namesake(db, "Alex Kim", "b", context="Porto")
    found = db.resolve("Alex Kim", scope="work", context="lisbon")
    assert isinstance(found, Resolved) and found.match.entity == lisbon and found.tier == "exact"
    misspelt = db.resolve("Alex Kym", scope="work", context="Lisbonn")
    assert isinstance(misspelt, Resolved) and misspelt.match.entity == lisbon


def test_an_entity_of_another_kind_is_not_a_match(db: WorldDB) -> None:
    entity(db, "Max", kind="pet")
    assert isinstance(db.resolve("Max", scope="work", kind="person"), New)
    assert isinstance(db.resolve("Max", scope="work", kind="pet"), Resolved)
    assert isinstance(db.resolve("Max", scope="work"), Resolved)  # no kind said: no constraint


# ---- proposals, decisions, identities ---------------------------------------------------------------


def test_a_lower_tier_match_stages_a_proposal_and_merges_nothing(db: WorldDB) -> None:
    sarah = entity(db, "Sarah Chen")
    sara, result = db.resolve_entity("Sara Chen", scope="work")
    assert isinstance(result, Resolved) and result.match.entity == sarah and sara != sarah
    [proposal] = db.merge_proposals()
    assert {proposal.a, proposal.b} == {sarah, sara} and proposal.status is MergeStatus.PENDING
    assert (proposal.tier, proposal.score) == ("fuzzy", result.score) and "Sara Chen" in (proposal.reason or "")
    assert db.equivalence_class(sara) == (sara,)  # nothing merged
    again, result = db.resolve_entity("Sara Chen", scope="work")
    assert again == sara and result.tier == "exact"  # the variant is its own entity now: reused
    assert len(db.merge_proposals(None)) == 1


def test_accept_and_reject_round_trip(db: WorldDB) -> None:
    sarah = entity(db, "Sarah Chen")
    sara, _ = db.resolve_entity("Sara Chen", scope="work")
    chen, _ = db.resolve_entity("Sarah Chenn", scope="work")
    by_pair = {frozenset((p.a, p.b)): p.pid for p in db.merge_proposals()}
    db.reject_merge(by_pair[frozenset((sarah, sara))])
    db.accept_merge(by_pair[frozenset((sarah, chen))])
    assert db.equivalence_class(sara) == (sara,)  # rejected: both sides independent
    assert set(db.equivalence_class(sarah)) == {sarah, chen}
    assert db.recluster() == 0  # the rejected pair is not proposed again
    found = db.resolve("Sarah Chen", scope="work")
    assert isinstance(found, Resolved) and set(found.match.members) == {sarah, chen}  # one identity, one option
    decided = {p.status for p in db.merge_proposals(None)}
    assert decided == {MergeStatus.ACCEPTED, MergeStatus.REJECTED}


def test_equivalence_class_and_export_identity_on_a_chain_of_accepted_merges(db: WorldDB) -> None:
    first = entity(db, "Sarah Chen", aliases=["my manager"])
    second, _ = db.resolve_entity("Sara Chen", scope="work", aliases=["the engineering lead"])
    db.accept_merge(db.merge_proposals()[0].pid)
    third, result = db.resolve_entity("Sara Chenn", scope="work")
    assert isinstance(result, Resolved) and set(result.match.members) == {first, second}  # the class, not a member
    db.accept_merge(db.merge_proposals()[0].pid)
    chain = {first, second, third}
    for member in chain:
        assert set(db.equivalence_class(member)) == chain
    identity = db.export_identity(third)
    assert set(identity.members) == chain
    assert set(identity.names) == {"Sarah Chen", "Sara Chen", "Sara Chenn"}
    assert {"my manager", "the engineering lead"} <= set(identity.aliases)
    assert len(identity.provenance) == 3
    assert db.verify().ok


# ---- re-resolution after ingest --------------------------------------------------------------------


def test_reclustering_finds_a_match_the_first_pass_missed(db: WorldDB) -> None:
    scope = db.scope("work")
    first = db.write("My manager moved the deadline again.", world=scope, type="Turn")
    manager = entity(db, "my manager")
    db.link(first, manager, "refers_to")
    sarah = entity(db, "Sarah")  # nothing tells them apart yet, nothing joins them either
    assert db.recluster() == 0 and db.merge_proposals() == []
    later = db.write("My manager, Sarah, signed it off.", world=scope, type="Turn")  # the alias shows up later
    again, _ = db.resolve_entity("Sarah", scope="work", aliases=["my manager"])
    db.link(later, again, "refers_to")
    assert again == sarah and db.merge_proposals() == []  # the write path reused Sarah and proposed nothing
    assert db.recluster() == 1  # the new turn's neighbourhood: Sarah is now exactly "my manager"
    [proposal] = db.merge_proposals()
    assert {proposal.a, proposal.b} == {sarah, manager} and proposal.tier == "exact"
    assert db.recluster() == 0  # nothing new since, and a staged pair is never proposed twice


def test_recluster_re_resolves_an_alias_added_later(db: WorldDB) -> None:
    manager = entity(db, "my manager")
    sarah = entity(db, "Sarah")
    assert db.recluster() == 0
    db.add_alias(sarah, "my manager")  # no new node: only the alias says it
    assert db.recluster() == 1
    [proposal] = db.merge_proposals()
    assert {proposal.a, proposal.b} == {sarah, manager} and proposal.tier == "exact"
    assert db.recluster() == 0  # done, and never proposed twice
    before = table_digest(db)
    db.add_alias(sarah, "My  Manager")  # an alias she has: nothing changes, nothing to re-resolve
    assert table_digest(db) == before
    db.add_alias(sarah, "the boss")  # an alias nobody else has: nothing to propose
    assert db.recluster() == 0


def test_an_entity_waiting_for_re_resolution_is_one_small_row_whatever_else_waits(db: WorldDB) -> None:
    from worlddb_lite.write.identity import ALIASED

    names = [
        "Amara Okafor",
        "Bjorn Lindqvist",
        "Chen Wei",
        "Dolores Ibarra",
        "Eero Saarinen",
        "Fatima Zahra",
        "Giulia Conti",
        "Hiroshi Tanaka",
        "Ingrid Bakke",
        "Jamal Haddad",
    ]
    people = [entity(db, name) for name in names]
    db.recluster()
    for i, nid in enumerate(people):
        db.add_alias(nid, f"colleague number {i}")
    rows = db.sql("select key, value from meta where key like 'resolver_aliased%'")
    assert len(rows) == len(names) and all(value == "" and key.startswith(ALIASED) for key, value in rows)
    db.recluster()
    assert db._store.meta_keys(ALIASED) == []  # a pass clears what it re-resolved


def test_the_resolver_is_part_of_the_package_api() -> None:
    import worlddb_lite

    for name in (
        "Ambiguous",
        "Candidate",
        "Mention",
        "New",
        "PreferTiers",
        "Resolution",
        "Resolved",
        "ResolverConfig",
        "Tiebreaker",
        "TiebreakerError",
    ):
        assert name in worlddb_lite.__all__ and getattr(worlddb_lite, name) is not None
    assert worlddb_lite.ResolverConfig is ResolverConfig and worlddb_lite.Resolved is Resolved


def test_remember_reuses_exact_names_and_proposes_variants(db: WorldDB) -> None:
    scope = db.scope("me")
    said = "2024-05-01T00:00:00Z"
    turns = [db.write(text, world=scope, type="Turn", valid_at=said) for text in ("one", "two", "three")]
    for turn, name in zip(turns, ("Sarah Chen", "Sarah Chen", "Sara Chen"), strict=True):
        write_extraction(
            db._writer, Extraction(entities=(EntityMention(name, "person"),)), turn=turn, scope=scope, said_at=said
        )
    people = db.nodes(world=scope, type="Entity")
    assert sorted(n.name or "" for n in people) == ["Sara Chen", "Sarah Chen"]  # one Sarah Chen: exact reuse
    [proposal] = db.merge_proposals()
    assert proposal.tier == "fuzzy"


def test_the_consolidator_reclusters_in_the_background(tmp_path: Path) -> None:
    path = str(tmp_path / "bg.db")
    with WorldDB(path, embedder=FakeEmbedder()) as db:
        scope = db.scope("work")
        manager = entity(db, "my manager")
        sarah = entity(db, "Sarah")
        turn = db.write("My manager, Sarah, signed it off.", world=scope, type="Turn")
        db.resolve_entity("Sarah", scope="work", aliases=["my manager"])
        db.link(turn, sarah, "refers_to")
    worker = Consolidator(
        path, RuleExtractor(), interval=0.05, open_store=lambda p: WorldDB(p, embedder=FakeEmbedder(), create=False)
    ).start()
    try:
        deadline = time.monotonic() + 30
        while worker.proposed == 0 and worker.error is None and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        worker.stop()
    assert worker.error is None and worker.proposed == 1
    with WorldDB(path, embedder=FakeEmbedder()) as db:
        [proposal] = db.merge_proposals()
        assert {proposal.a, proposal.b} == {sarah, manager}


# ---- the name index stays in step ------------------------------------------------------------------


def test_a_rolled_back_entity_leaves_nothing_to_match(db: WorldDB) -> None:
    entity(db, "Sarah Chen")
    with pytest.raises(RuntimeError), db.batch():
        db.resolve_entity("Zed Zimmer", scope="work")
        raise RuntimeError("the caller gives up")
    assert isinstance(db.resolve("Zed Zimmer", scope="work"), New)
    assert isinstance(db.resolve("Sarah Chen", scope="work"), Resolved)


def test_writes_of_another_connection_are_seen(file_db_path: str) -> None:
    one = WorldDB(file_db_path, embedder=FakeEmbedder())
    two = WorldDB(file_db_path, embedder=FakeEmbedder())
    try:
        sarah = entity(one, "Sarah Chen")
        assert isinstance(two.resolve("Olga Petrova", scope="work"), New)  # two has built its index
        olga = entity(one, "Olga Petrova")
        one.add_alias(sarah, "my manager")
        for said, who in (("Olga Petrova", olga), ("Olga Petrovna", olga), ("my manager", sarah)):
            found = two.resolve(said, scope="work")
            assert isinstance(found, Resolved) and found.match.entity == who, said
    finally:
        one.close()
        two.close()


# ---- configuration and bad input -------------------------------------------------------------------


@pytest.mark.parametrize(
    "bad",
    [
        {"fuzzy": 1.5},
        {"margin": -0.1},
        {"block": 0},
        {"max_options": 2.5},
        {"embedding": float("nan")},
        {"spelt": 1.5},
        {"context_word": -0.1},
    ],
)
def test_a_bad_config_is_refused(bad: dict[str, float]) -> None:
    with pytest.raises(InvalidInput, match="ResolverConfig"):
        ResolverConfig(**bad)  # type: ignore[arg-type]


def test_thresholds_are_configuration(db: WorldDB) -> None:
    entity(db, "Sarah Chen")
    db.configure_resolver(ResolverConfig(fuzzy=0.99, partial=0.9, phonetic=0.99))
    assert isinstance(db.resolve("Sara Chen", scope="work"), New)
    db.configure_resolver()
    assert isinstance(db.resolve("Sara Chen", scope="work"), Resolved)
    with pytest.raises(InvalidInput, match="ResolverConfig"):
        db.configure_resolver({"fuzzy": 0.9})  # type: ignore[arg-type]


@pytest.mark.parametrize("name", ["", "   ", "\t\n"])
def test_an_empty_name_is_refused_and_writes_nothing(db: WorldDB, name: str) -> None:
    before = table_digest(db)
    with pytest.raises(InvalidInput, match="empty"):
        db.resolve(name, scope="work")
    with pytest.raises(InvalidInput, match="empty"):
        db.resolve_entity(name, scope="work")
    assert table_digest(db) == before


@pytest.mark.parametrize("name", ["张伟", "Владимир Путин", "محمد علي", "🙂", "ا", "Ωμέγα-7"])
def test_names_in_other_scripts_fall_through_the_phonetic_tier_cleanly(db: WorldDB, name: str) -> None:
    assert keys(fold(name + "x")) == ("X000",) or keys(fold(name)) == ()  # no Latin letters, no key
    eid = entity(db, name)
    found = db.resolve(name, scope="work")
    assert isinstance(found, Resolved) and found.match.entity == eid
    assert isinstance(db.resolve(name + name, scope="work"), (New, Resolved, Ambiguous))  # no crash in any tier


def test_an_extremely_long_name_is_matched_exactly_only(db: WorldDB) -> None:
    long_name = "Sarah " * 2000
    eid = entity(db, long_name)
    found = db.resolve(long_name, scope="work")
    assert isinstance(found, Resolved) and found.match.entity == eid
    started = time.perf_counter()
    assert isinstance(db.resolve(long_name + "x", scope="work"), New)  # no fuzzy tier over 12,000 characters
    assert time.perf_counter() - started < 1.0


def test_a_tiebreaker_that_raises_writes_nothing(db: WorldDB) -> None:
    namesake(db, "Alex Kim", "a")
    namesake(db, "Alex Kim", "b")
    before = table_digest(db)

    def broken(mention: Mention, options: Sequence[Candidate]) -> Candidate | None:
        raise ConnectionError("the LLM is unreachable")

    def stranger(mention: Mention, options: Sequence[Candidate]) -> Candidate | None:
        return Candidate("0" * 64, "nobody", "exact", 1.0)

    with pytest.raises(TiebreakerError, match="ConnectionError: the LLM is unreachable.*nothing was written"):
        db.resolve_entity("Alex Kim", scope="work", tiebreaker=broken)
    with pytest.raises(TiebreakerError, match="not one of the"):
        db.resolve_entity("Alex Kim", scope="work", tiebreaker=stranger)
    assert table_digest(db) == before
    db.configure_resolver(tiebreaker=broken)  # the handle's tiebreaker: recluster fails whole, too
    with pytest.raises(TiebreakerError):
        db.resolve("Alex Kim", scope="work")


# ---- the benchmark ---------------------------------------------------------------------------------


def test_bench_smoke(tmp_path: Path) -> None:
    pytest.importorskip("recordlinkage")
    pytest.importorskip("nicknames")
    out = tmp_path / "resolver.json"
    done = subprocess.run(
        [
            sys.executable,
            str(BENCH / "resolver.py"),
            "--limit",
            "150",
            "--sizes",
            "400",
            "--probes",
            "50",
            "--json",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(out.read_text())
    for run in ("names", "names+suburb", "names+nicknames"):
        assert 0.0 < result[run]["f1"] <= 1.0 and result[run]["latency"]["n"] > 0
    assert result["baselines"]["exact_full_name"]["f1"] > 0 and result["scale_400"]["latency"]["n"] == 50
    assert result["names"]["f1"] <= result["names_ceiling"]["f1"] < 1.0


def test_bench_ceiling_charges_replaced_names_namesakes_and_collisions() -> None:
    """The names-only ceiling: what no name can tell apart, counted by hand on five pairs."""
    sys.path.insert(0, str(BENCH))
    from resolver import ceiling

    a = {
        "1": ("Sarah", "Chen", ""),
        "2": ("Ann", "Lee", ""),
        "3": ("Ann", "Lee", ""),
        "4": ("Benjamin", "Capel", ""),
        "5": ("Tom", "Hart", ""),
    }
    b = {
        "1": ("Chen", "Sara", ""),  # swapped, one typo: linkable
        "2": ("Ann", "Lee", ""),  # linkable, but "3" has exactly its name
        "3": ("", "Lee", ""),  # a part missing: linkable, and tied with "2" too
        "4": ("Joshua", "Capel", ""),  # given name replaced: no names-only resolver may link it
        "5": ("Ann", "Lee", ""),
    }  # replaced by another entity's exact name: a false link for anyone
    out = ceiling(a, b)
    assert (out["linkable_pairs"], out["namesake_ties"], out["namesake_false_links"], out["exact_collisions"]) == (
        3,
        2,
        2,
        1,
    )
    # offered: 3 true links, 2 + 1 false ones, 2 misses; withheld: 1 true, 1 false, 4 misses
    assert out["offer_namesakes"] == pytest.approx(2 * 3 / (2 * 3 + 3 + 2), abs=1e-4)
    assert out["withhold_namesakes"] == pytest.approx(2 * 1 / (2 * 1 + 1 + 4), abs=1e-4)
    assert out["f1"] == max(out["offer_namesakes"], out["withhold_namesakes"])
    # a name two share is worth offering where one six share is not: the bound offers by group size
    a = {str(i): (f"given{i}", f"surname{i}", "") for i in range(20)}
    a |= {"p1": ("Jo", "Pair", ""), "p2": ("Jo", "Pair", "")}
    a |= {f"s{i}": ("Al", "Six", "") for i in range(6)}
    b = {rec: a[rec] for rec in (*map(str, range(20)), "p1", "s0")}
    mixed = ceiling(a, b)
    assert mixed["offer_names_shared_by_at_most"] == 2
    assert mixed["f1"] > max(mixed["offer_namesakes"], mixed["withhold_namesakes"])
