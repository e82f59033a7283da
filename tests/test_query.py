"""Declarative queries: start sets chosen by the planner, operators, containment, Subgraph results."""

from __future__ import annotations

import pytest

from worlddb_lite import (
    Direction,
    Expand,
    Filter,
    InvalidInput,
    PreferSummaries,
    QuerySpec,
    WhereConnected,
    WorldDB,
)
from worlddb_lite.retrieval.query import plan


@pytest.fixture
def graph(db: WorldDB) -> dict[str, str]:
    home = db.world("home", type="Scope")
    work = db.world("work", type="Scope")
    ids = {
        "home": home,
        "work": work,
        "emma": db.write("Emma", world=home, type="Entity", name="Emma"),
        "t1": db.write("Emma took up pottery", world=home, type="Turn"),
        "t2": db.write("Emma fired her first bowl", world=home, type="Turn"),
        "office": db.write("the office moved to the fifth floor", world=work, type="Turn"),
        "boss": db.write("Grace", world=work, type="Entity", name="Grace"),
    }
    db.link(ids["t1"], ids["emma"], "refers_to")
    db.link(ids["t2"], ids["emma"], "refers_to")
    db.link(ids["t1"], ids["office"], "precedes")  # across worlds, but not refers_to
    db.link(ids["t2"], ids["boss"], "refers_to")  # refers_to may cross worlds
    ids["summary"] = db.write("Emma's pottery: a first bowl", world=home, type="Summary")
    db.link(ids["summary"], ids["t1"], "derived_from")
    db.link(ids["summary"], ids["t2"], "derived_from")
    return ids


def test_the_planner_starts_from_the_cheapest_source() -> None:
    assert plan(QuerySpec(seeds=("ab" * 32,), text="x", vector="y")) == "seeds"
    assert plan(QuerySpec(text="pottery", vector="y")) == "text"
    assert plan(QuerySpec(vector="pottery")) == "vector"
    with pytest.raises(InvalidInput, match="start set"):
        plan(QuerySpec())
    with pytest.raises(InvalidInput, match="start set"):
        plan(QuerySpec(text="   "))


def test_seeds_expand_into_a_subgraph_with_the_edges_followed(db: WorldDB, graph: dict[str, str]) -> None:
    sub = db.query(QuerySpec(seeds=(graph["emma"],), pipeline=(Expand(("refers_to",), Direction.IN),)))
    assert [n.id for n in sub.nodes] == [graph["emma"], graph["t1"], graph["t2"]]
    assert {(e.type, e.src, e.dst) for e in sub.edges} == {
        ("refers_to", graph["t1"], graph["emma"]),
        ("refers_to", graph["t2"], graph["emma"]),
    }


def test_text_start_then_filter_and_where_connected(db: WorldDB, graph: dict[str, str]) -> None:
    sub = db.query(QuerySpec(text="Emma pottery bowl", pipeline=(Filter(types=("Turn",)),)))
    assert {n.id for n in sub.nodes} == {graph["t1"], graph["t2"]}
    connected = db.query(
        QuerySpec(
            text="Emma", pipeline=(Filter(types=("Turn",)), WhereConnected("refers_to", Direction.OUT, graph["boss"]))
        )
    )
    assert [n.id for n in connected.nodes] == [graph["t2"]]


def test_containment_keeps_a_world_closed_except_through_refers_to(db: WorldDB, graph: dict[str, str]) -> None:
    spec = QuerySpec(seeds=(graph["t1"], graph["t2"]), world=graph["home"], pipeline=(Expand(),))
    ids = {n.id for n in db.query(spec).nodes}
    assert graph["office"] not in ids  # precedes does not leave the world
    assert graph["boss"] in ids  # refers_to does
    outside = db.query(QuerySpec(seeds=(graph["t1"],), pipeline=(Expand(),)))
    assert graph["office"] in {n.id for n in outside.nodes}  # without a world, everything is reachable
    assert db.query(QuerySpec(seeds=(graph["office"],), world=graph["home"])).nodes == ()


def test_vector_start_orders_by_cosine_and_text_narrows_it(db: WorldDB, graph: dict[str, str]) -> None:
    sub = db.query(QuerySpec(vector="pottery Emma", k=3, types=("Turn",)))
    assert sub.nodes[0].id == graph["t1"]
    narrowed = db.query(QuerySpec(vector="pottery Emma", text="bowl", k=3, types=("Turn",)))
    assert [n.id for n in narrowed.nodes] == [graph["t2"]]


def test_prefer_summaries_replaces_what_a_summary_covers(db: WorldDB, graph: dict[str, str]) -> None:
    spec = QuerySpec(seeds=(graph["t1"], graph["t2"], graph["emma"]), pipeline=(PreferSummaries(),))
    assert [n.id for n in db.query(spec).nodes] == [graph["summary"], graph["emma"]]


def test_as_of_applies_to_every_step(db: WorldDB, graph: dict[str, str]) -> None:
    spec = QuerySpec(seeds=(graph["emma"],), pipeline=(Expand(("refers_to",), Direction.IN),), as_of="2000-01-01")
    assert db.query(spec).nodes == ()


def test_bad_specs_are_refused(db: WorldDB, graph: dict[str, str]) -> None:
    with pytest.raises(InvalidInput, match="QuerySpec"):
        db.query({"text": "x"})  # type: ignore[arg-type]
    with pytest.raises(InvalidInput, match="hops"):
        db.query(QuerySpec(seeds=(graph["emma"],), pipeline=(Expand(hops=0),)))
    with pytest.raises(InvalidInput, match="k must be"):
        db.query(QuerySpec(text="Emma", k=0))
