"""The consolidator's graph steps: inferred edges, the contradiction sweep, near-duplicate links.

Each step is idempotent (a second run writes nothing), writes nothing with ``dry_run``, and
commits in batches, so a run killed after a batch is finished by a rerun.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

import pytest

from worlddb_lite import WorldDB
from worlddb_lite.consolidate.dedup import dedup, restates
from worlddb_lite.consolidate.infer import closure, infer
from worlddb_lite.consolidate.sweep import sweep
from worlddb_lite.edges import BaseEdgeType, Decision, EdgeContext, EdgeDraft
from worlddb_lite.edges.builtin import Causes
from worlddb_lite.text.slots import slot_key

from .conftest import FakeClock, FakeEmbedder, nid_of, table_digest

Step = Callable[..., int]


class LivesIn(BaseEdgeType):
    """A custom functional type: one current city per person."""

    name = "lives_in"
    functional = True


class Likes(BaseEdgeType):
    """A custom type of many values: never swept."""

    name = "likes"


def edges(db: WorldDB, edge_type: str) -> set[tuple[str, str, str]]:
    """(src, dst, props) of the current edges of a type; an entity by its name, anything else by its content."""
    rows = db.sql(
        "select iif(a.type = 'Entity', json_extract(a.body, '$.name'), null), json_extract(a.body, '$.content'), "
        "iif(b.type = 'Entity', json_extract(b.body, '$.name'), null), json_extract(b.body, '$.content'), e.props "
        "from edge as e join node as a on a.nid = e.src join node as b on b.nid = e.dst "
        "where e.type = ? and e.invalid_at is null and e.expired_at is null",
        (edge_type,),
    )
    return {(str(an or ac), str(bn or bc), str(props)) for an, ac, bn, bc, props in rows}


def entity(db: WorldDB, name: str) -> str:
    return db.write(name, type="Entity", name=name, scope="ana", extractor=None)


def chain(db: WorldDB, edge_type: str, *names: str) -> dict[str, str]:
    ids = {name: entity(db, name) for name in dict.fromkeys(names)}
    db.link_many([(ids[a], ids[b], edge_type) for a, b in zip(names, names[1:], strict=False)])
    return ids


# ---- inferred edges ---------------------------------------------------------------


class SpyCauses(Causes):
    """The built-in causes handler, counting the edges it is asked about."""

    def __init__(self) -> None:
        self.seen: list[dict[str, Any]] = []

    def on_insert(self, edge: EdgeDraft, ctx: EdgeContext) -> Sequence[Decision]:
        self.seen.append(dict(edge.props))
        return super().on_insert(edge, ctx)


def test_closure_of_a_causal_chain(db: WorldDB) -> None:
    spy = SpyCauses()
    db.register_edge_type(spy, replace=True)
    chain(db, "causes", "rain", "flood", "evacuation", "shortage")
    assert infer(db._writer) == 3
    assert spy.seen == [{}] * 3 + [{"inferred": True}] * 3  # the ordinary handler ran for each
    inferred = '{"inferred":true}'
    assert {(a, b) for a, b, props in edges(db, "causes") if props == inferred} == {
        ("rain", "evacuation"),
        ("rain", "shortage"),
        ("flood", "shortage"),
    }
    assert len(edges(db, "causes")) == 6  # the three stated ones, untouched
    assert infer(db._writer) == 0  # idempotent
    assert len(spy.seen) == 6


def test_inferred_edges_go_through_the_handlers(db: WorldDB) -> None:
    ids = chain(db, "subtype_of", "poodle", "dog", "mammal", "animal")
    assert infer(db._writer) == 3
    # subtype_of's handler refuses a cycle: the inferred poodle -> animal makes animal -> poodle a cycle too
    from worlddb_lite.errors import CycleError

    with pytest.raises(CycleError):
        db.link(ids["animal"], ids["poodle"], "subtype_of")
    assert ("poodle", "animal", '{"inferred":true}') in edges(db, "subtype_of")


def test_cycles_terminate_without_self_loops(db: WorldDB) -> None:
    chain(db, "causes", "stress", "insomnia", "stress")
    assert infer(db._writer) == 0  # a -> b -> a adds nothing: a -> a says nothing
    chain(db, "causes", "a", "b", "c", "a")
    assert infer(db._writer) == 3  # a -> c, b -> a, c -> b
    assert all(src != dst for src, dst, _ in edges(db, "causes"))
    assert infer(db._writer) == 0


def test_closure_is_the_whole_closure() -> None:
    assert closure([(1, 2), (2, 3), (3, 4)]) == [(1, 3), (1, 4), (2, 4)]
    assert closure([(1, 2), (2, 1)]) == []
    assert closure([(1, 2), (2, 3), (3, 1)]) == [(1, 3), (2, 1), (3, 2)]


def test_closed_premises_and_withdrawn_inferences(db: WorldDB) -> None:
    ids = chain(db, "causes", "a", "b", "c")
    db.retire(ids["b"])  # a middle no longer current: no path through it
    assert infer(db._writer) == 0
    ids = chain(db, "causes", "x", "y", "z")
    assert infer(db._writer) == 1
    row = next(iter(db.sql("select id from edge where json_extract(props, '$.inferred') = 1")), None)
    assert row is not None
    db.unlink(bytes(row[0]).hex())
    assert infer(db._writer) == 0  # a withdrawn inference is not made again


# ---- the contradiction sweep ----------------------------------------------------------


def fact(db: WorldDB, subject: str, slot: str, value: str, *, functional: bool, valid_at: str | None = None) -> str:
    """A fact written by hand, as an import would bring it: no extractor, no supersession."""
    return db.write(
        f"{subject} {slot}: {value}",
        type="Fact",
        name=slot,
        scope="ana",
        extractor=None,
        valid_at=valid_at,
        aliases=(slot_key(subject, slot),),
        props={"subject": subject, "slot": slot, "value": value, "functional": functional},
    )


def plant_conflicts(db: WorldDB) -> None:
    db.register_edge_type(LivesIn())
    db.register_edge_type(Likes())
    ana, bob = entity(db, "Ana"), entity(db, "Bob")
    lisbon, porto, oslo = entity(db, "Lisbon"), entity(db, "Porto"), entity(db, "Oslo")
    db.link_many([(ana, lisbon, "lives_in"), (ana, porto, "lives_in"), (bob, oslo, "lives_in")])
    db.link_many([(ana, lisbon, "likes"), (ana, porto, "likes")])  # many values: fine
    db.write("I live in Lisbon", scope="ana")  # the extractor's fact: ana lives in Lisbon
    fact(db, "ana", "lives in", "Madrid", functional=True)  # another path: no supersession
    fact(db, "ana", "visited", "Paris", functional=False)
    fact(db, "ana", "visited", "Rome", functional=False)  # a slot of many values
    db.write("I work at Acme", scope="ana", valid_at="2024-01-01")
    db.write("I work at Globex", scope="ana", valid_at="2024-06-01")  # supersedes Acme: nothing to flag


def test_sweep_flags_a_planted_conflict_and_nothing_else(db: WorldDB) -> None:
    plant_conflicts(db)
    before = edges(db, "contradicts")
    assert before == set()
    assert sweep(db._writer) == 2
    assert edges(db, "contradicts") == {
        ("Porto", "Lisbon", '{"sweep":"lives_in"}'),
        ("ana lives in: Madrid", "ana lives in: Lisbon", '{"sweep":"lives in"}'),
    }
    assert {(row[1], row[3]) for row in db.sql("select * from open_contradiction")} == {
        ("Porto", "Lisbon"),
        ("ana lives in: Madrid", "ana lives in: Lisbon"),
    }
    assert sweep(db._writer) == 0


def test_sweep_leaves_a_pair_already_flagged(db: WorldDB) -> None:
    a = fact(db, "ana", "lives in", "Lisbon", functional=True)
    b = fact(db, "ana", "lives in", "Porto", functional=True)
    c = fact(db, "ana", "lives in", "Oslo", functional=True)
    db.link(a, b, "contradicts")  # flagged by hand, in the other direction
    assert sweep(db._writer) == 2  # Oslo against each of the others
    assert sweep(db._writer) == 0
    assert {(x, y) for x, y, _ in edges(db, "contradicts")} == {  # from the later value to the earlier
        ("ana lives in: Lisbon", "ana lives in: Porto"),
        ("ana lives in: Oslo", "ana lives in: Lisbon"),
        ("ana lives in: Oslo", "ana lives in: Porto"),
    }
    assert len(db.read(c).contradicted_by) == 2


def test_a_sweep_near_some_nodes_flags_only_their_conflicts(db: WorldDB) -> None:
    plant_conflicts(db)
    madrid = next(n.id for n in db.nodes(type="Fact") if "Madrid" in (n.content or ""))
    near = {nid_of(db, madrid)}
    assert sweep(db._writer, near=near, dry_run=True) == 1  # the fact's slot, found through its alias
    assert sweep(db._writer, near=near) == 1
    assert {x for x, _, _ in edges(db, "contradicts")} == {"ana lives in: Madrid"}
    held = {n.name: nid_of(db, n.id) for n in db.nodes(type="Entity")}
    assert sweep(db._writer, near={held["Porto"], held["Bob"]}) == 0  # a dst; a src of one value
    assert sweep(db._writer, near={held["Ana"]}) == 1  # the src of two current lives_in edges
    assert sweep(db._writer) == 0


# ---- near-duplicates ---------------------------------------------------------------

DENTIST = (
    "Remember the dentist is on Friday at 3pm",
    "Remember: the dentist is on Friday at 3pm!",
    "remember the dentist appointment is on Friday at 3 pm",
)


def test_restates() -> None:
    assert restates(DENTIST[0], DENTIST[1])
    assert restates(DENTIST[0], DENTIST[2])
    assert not restates("I live in Lisbon", "I live in Porto")
    assert not restates("i now live in lisbon with my cat", "i now live in porto with my cat")
    assert not restates("The dentist is on Friday at 3pm", "The dentist is on Monday at 3pm")
    assert not restates("The dentist is on Friday at 3pm", "The dentist is on Friday at 4pm")
    assert not restates("Thanks!", "Thanks!")  # too short to say
    assert not restates(DENTIST[0], DENTIST[0] + " and bring the insurance card and the old x-rays")


def write_memories(db: WorldDB) -> dict[str, str]:
    ids = {text: db.write(text, scope="ana", extractor=None) for text in DENTIST}
    ids["lisbon"] = db.write("I live in Lisbon these days with Rui", scope="ana", extractor=None)
    ids["porto"] = db.write("I live in Porto these days with Rui", scope="ana", extractor=None)
    ids["other scope"] = db.write(DENTIST[1], scope="bob", extractor=None)  # bob's own note
    ids["unrelated"] = db.write("The plumber comes on Tuesday morning", scope="ana", extractor=None)
    return ids


def test_dedup_links_restatements_and_not_different_values(db: WorldDB) -> None:
    write_memories(db)
    assert dedup(db._writer, threshold=0.8) == 2
    found = {(a, b) for a, b, _ in edges(db, "duplicates")}
    assert found == {(DENTIST[1], DENTIST[0]), (DENTIST[2], DENTIST[0])}
    assert all(db.read(i).is_current for i in db.lookup_alias("Lisbon") or ())  # nothing closed
    assert dedup(db._writer, threshold=0.8) == 0


def test_recall_returns_one_of_a_duplicate_group(db: WorldDB) -> None:
    ids = write_memories(db)
    before = [h.node.id for h in db.recall("when is the dentist", scope="ana", k=10).hits]
    assert sum(1 for i in before if i in {ids[t] for t in DENTIST}) == 3
    dedup(db._writer, threshold=0.8)
    after = [h.node.id for h in db.recall("when is the dentist", scope="ana", k=10).hits]
    assert sum(1 for i in after if i in {ids[t] for t in DENTIST}) == 1
    assert [i for i in after if i not in {ids[t] for t in DENTIST}] == [
        i for i in before if i not in {ids[t] for t in DENTIST}
    ]  # nothing else moved
    assert after[0] == before[0]  # the best-ranked of the group stays


# ---- every step: dry run, batches, a kill and a rerun -------------------------------------


def plant_everything(db: WorldDB) -> None:
    chain(db, "causes", "rain", "flood", "evacuation", "shortage", "protest")
    plant_conflicts(db)
    write_memories(db)


STEPS: list[tuple[str, Step]] = [
    ("infer", infer),
    ("sweep", sweep),
    ("dedup", lambda writer, **kw: dedup(writer, threshold=0.8, **kw)),
]


@pytest.mark.parametrize(("name", "step"), STEPS, ids=[n for n, _ in STEPS])
def test_dry_run_writes_nothing(db: WorldDB, name: str, step: Step) -> None:
    plant_everything(db)
    db._writer.settle()
    before = table_digest(db)
    would = step(db._writer, dry_run=True)
    assert would > 0
    assert table_digest(db) == before
    assert step(db._writer) == would


def graph(db: WorldDB) -> set[tuple[str, str, str, str]]:
    """Every current edge as (type, src, dst, props): what the steps wrote, free of times and row numbers."""
    rows = db.sql(
        "select e.type, lower(hex(a.id)), lower(hex(b.id)), e.props from edge as e "
        "join node as a on a.nid = e.src join node as b on b.nid = e.dst "
        "where e.invalid_at is null and e.expired_at is null"
    )
    return {(str(t), str(a), str(b), str(p)) for t, a, b, p in rows}


class Killed(Exception):
    pass


@pytest.mark.parametrize(("name", "step"), STEPS, ids=[n for n, _ in STEPS])
def test_a_kill_mid_run_then_a_rerun(tmp_path: Any, name: str, step: Step) -> None:
    whole = WorldDB(str(tmp_path / "whole.db"), embedder=FakeEmbedder(), clock=FakeClock())
    killed = WorldDB(str(tmp_path / "killed.db"), embedder=FakeEmbedder(), clock=FakeClock())
    try:
        for store in (whole, killed):
            plant_everything(store)
        total = step(whole._writer, batch=1)
        assert total >= 2
        calls: list[tuple[int, int]] = []

        def die(done: int, todo: int) -> None:
            calls.append((done, todo))
            raise Killed  # after the first batch committed

        with pytest.raises(Killed):
            step(killed._writer, batch=1, progress=die)
        assert calls == [(1, total)]
        assert len(graph(killed)) == len(graph(whole)) - total + 1  # the first batch stayed
        assert step(killed._writer, batch=1) == total - 1  # the rerun finishes it
        assert graph(killed) == graph(whole)
        assert step(killed._writer) == 0
    finally:
        whole.close()
        killed.close()


def test_options_are_checked(db: WorldDB) -> None:
    from worlddb_lite.errors import InvalidInput

    calls: list[Callable[[], int]] = [
        lambda: infer(db._writer, dry_run="yes"),  # type: ignore[arg-type]
        lambda: sweep(db._writer, batch=0),
        lambda: dedup(db._writer, threshold=1.5),
    ]
    for call in calls:
        with pytest.raises(InvalidInput):
            call()


def test_props_are_json(db: WorldDB) -> None:
    write_memories(db)
    dedup(db._writer, threshold=0.8)
    for _, _, props in edges(db, "duplicates"):
        assert 0.8 <= json.loads(props)["cosine"] <= 1.0
