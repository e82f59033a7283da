"""Isolation between scopes: a read confined to scope A never returns a node of scope B.

Issue 7's property, on random stores of two or three scopes that share their vocabulary (the same
names and words in every scope, so the text, vector and entity lanes would all find B's nodes
without the containment filter), with random links across scopes. A node of B may appear in a
read of A only when an explicit path connects them:

* it is inside A through a ``contains`` edge (containment is what the edge says), or
* it is reached by ``refers_to`` from a node inside A (the one edge that points across worlds):
  a fact's source turns, or a query that expands along ``refers_to``.

The oracle computes both sets from the raw tables, independently of the read path. Checked:
``recall`` (with and without superseded versions), ``context``, ``nodes`` (listing a world),
``nearest``, ``query`` (a text start set expanded along every edge type) and ``resolve``. ``read``
and ``history`` take an id, not a scope: an id is the capability, so they have nothing to filter.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from worlddb_lite import Edge, MergeProposal, MergeStatus, QuerySpec, WorldDB, WorldDBError
from worlddb_lite.retrieval.query import Expand
from worlddb_lite.text.slots import INSTRUCTIONS, PREFERENCES
from worlddb_lite.types import Direction
from worlddb_lite.write.resolver import Ambiguous, Resolved

from .conftest import FakeClock, FakeEmbedder

SCOPES = ("alpha", "beta", "gamma")
NAMES = ("Alice", "Bob", "Lisbon")  # an Entity of each name may live in every scope
WORDS = ("Alice", "Bob", "Lisbon", "coffee", "moved", "sister", "Porto", "garden", "Monday", "job")
QUERIES = ("Where does Alice live?", "Bob coffee", "Lisbon garden Monday", "sister moved to Porto", "job")
KINDS = ("Memory", "Turn", "Fact", "Entity", "Summary")
MIDWAY = "2025-01-01T00:01:30Z"  # the fake clock ticks a second a call: a moment while the store is built
CROSS_EDGES = ("refers_to", "contains", "derived_from", "same_as", "contradicts", "causes")

FAST = settings(
    max_examples=40, deadline=None, derandomize=True, database=None, suppress_health_check=list(HealthCheck)
)
SLOW = settings(max_examples=400, deadline=None, suppress_health_check=list(HealthCheck))

picks = st.integers(0, 1000)
texts = st.lists(st.sampled_from(WORDS), min_size=2, max_size=5).map(" ".join)
writes = st.tuples(st.just("write"), st.sampled_from(KINDS), picks, texts, st.booleans())
links = st.tuples(st.just("link"), st.sampled_from(CROSS_EDGES), picks, picks, st.booleans())
changes = st.tuples(st.sampled_from(["amend", "retire", "unlink"]), picks, texts)
# a fact, memory or summary in one scope whose source is a turn of another (or the same) scope
sources = st.tuples(st.just("source"), st.sampled_from(["Fact", "Memory", "Summary"]), picks, picks, texts)
# a standing instruction or preference (what the standing lanes offer) in one scope, said by a turn of any scope
standing = st.tuples(st.just("standing"), st.sampled_from([INSTRUCTIONS, PREFERENCES]), picks, picks, texts)
steps = st.lists(st.one_of(writes, writes, writes, links, changes, sources, standing), min_size=8, max_size=40)
SOURCE_EDGE = {"Fact": "refers_to", "Memory": "refers_to", "Summary": "derived_from"}


@dataclass
class Built:
    db: WorldDB
    scopes: dict[str, str]  # name -> id
    nodes: list[str] = field(default_factory=list)
    edges: list[str] = field(default_factory=list)


def build(n_scopes: int, plan: list[tuple[object, ...]]) -> Built:
    """A store of ``n_scopes`` scopes, each with a session, filled and linked by ``plan``."""
    db = WorldDB(":memory:", embedder=FakeEmbedder(), clock=FakeClock())
    names = SCOPES[:n_scopes]
    built = Built(db, {name: db.scope(name) for name in names})
    sessions = {name: db.world("chat", parent=built.scopes[name], type="Session") for name in names}
    for i, name in enumerate(names):  # every scope names the same people, so the entity lane has work to do
        for entity in NAMES:
            built.nodes.append(db.write(entity, type="Entity", name=entity, aliases=[entity], scope=name))
        built.nodes.append(
            db.write(
                f"{NAMES[i % 3]} moved to Lisbon with coffee", scope=name, type="Turn", world=sessions[name], name="me"
            )
        )
    for step in plan:
        try:
            apply(built, sessions, names, step)
        except WorldDBError:
            pass  # a refused step (a cycle, an existing version ...) changes nothing
    return built


def apply(built: Built, sessions: dict[str, str], names: tuple[str, ...], step: tuple[object, ...]) -> None:
    db, nodes = built.db, built.nodes
    if step[0] == "write":
        _, kind, where, text, in_session = step
        scope = names[int(where) % len(names)]  # type: ignore[call-overload]
        world = sessions[scope] if in_session else built.scopes[scope]
        name = str(text).split()[0] if kind == "Entity" else ("me" if kind == "Turn" else None)
        nodes.append(
            db.write(
                str(text), type=str(kind), name=name, world=world, aliases=[name] if kind == "Entity" and name else []
            )
        )
    elif step[0] == "link":
        _, edge_type, src, dst, accept = step
        every = nodes + list(sessions.values())
        result = db.link(every[int(src) % len(every)], every[int(dst) % len(every)], str(edge_type))  # type: ignore[call-overload]
        if isinstance(result, MergeProposal) and accept and result.status is MergeStatus.PENDING:
            db.accept_merge(result.pid)
        elif isinstance(result, Edge):
            built.edges.append(result.id)
    elif step[0] == "source":
        _, kind, here, there, text = step
        turn = db.write(str(text), type="Turn", name="me", world=sessions[names[int(there) % len(names)]])  # type: ignore[call-overload]
        made = db.write(f"{text} noted", type=str(kind), scope=names[int(here) % len(names)])  # type: ignore[call-overload]
        db.link(made, turn, SOURCE_EDGE[str(kind)])
        nodes.extend([turn, made])
    elif step[0] == "standing":
        _, kind, here, there, text = step
        turn = db.write(f"Always {text}", type="Turn", name="me", world=sessions[names[int(there) % len(names)]])  # type: ignore[call-overload]
        made = db.write(f"me standing: {text}", type="Fact", aliases=[str(kind)], scope=names[int(here) % len(names)])  # type: ignore[call-overload]
        db.link(made, turn, "refers_to")
        nodes.extend([turn, made])
    elif step[0] == "amend":
        _, which, text = step
        nodes.append(db.amend(nodes[int(which) % len(nodes)], str(text)))  # type: ignore[call-overload]
    elif step[0] == "retire":
        db.retire(nodes[int(step[1]) % len(nodes)])  # type: ignore[call-overload]
    elif step[0] == "unlink" and built.edges:
        db.unlink(built.edges[int(step[1]) % len(built.edges)])  # type: ignore[call-overload]


# ---- the oracle: containment and refers_to paths, from the raw tables ---------------------------------


class Oracle:
    """Which node ids a read confined to a world may return, computed without the read path."""

    def __init__(self, db: WorldDB) -> None:
        self.hex = {int(nid): bytes(raw).hex() for nid, raw in db.sql("select nid, id from node")}
        self.children: dict[int, set[int]] = {}
        for nid, parent in db.sql("select nid, parent from node where parent is not null"):
            self.children.setdefault(int(parent), set()).add(int(nid))
        self.edges: dict[str, list[tuple[int, int, bool]]] = {}  # type -> (src, dst, valid now)
        for src, dst, edge_type, invalid_at, expired_at in db.sql(
            "select src, dst, type, invalid_at, expired_at from edge"
        ):
            if expired_at is None:
                self.edges.setdefault(str(edge_type), []).append((int(src), int(dst), invalid_at is None))
        self.nid = {raw: nid for nid, raw in self.hex.items()}

    def inside(self, world: str, *, closed_too: bool = False) -> set[str]:
        """Ids of every node below ``world``: parents, and ``contains`` edges (closed ones too if asked)."""
        contains: dict[int, set[int]] = {}
        for src, dst, now in self.edges.get("contains", []):
            if now or closed_too:
                contains.setdefault(src, set()).add(dst)
        found = self._closure({self.nid[world]}, lambda n: self.children.get(n, set()) | contains.get(n, set()))
        return {self.hex[n] for n in found}

    def referred(self, start: set[str], *, both_ways: bool = False) -> set[str]:
        """``start`` and every node reached from it by ``refers_to`` (either direction if asked), transitively."""
        out: dict[int, set[int]] = {}
        for src, dst, _ in self.edges.get("refers_to", []):
            out.setdefault(src, set()).add(dst)
            if both_ways:
                out.setdefault(dst, set()).add(src)
        found = self._closure({self.nid[i] for i in start}, lambda n: out.get(n, set()))
        return {self.hex[n] for n in found}

    @staticmethod
    def _closure(start: set[int], step: object) -> set[int]:
        seen, frontier = set(start), list(start)
        while frontier:
            for nxt in step(frontier.pop()):  # type: ignore[operator]
                if nxt not in seen:
                    seen.add(nxt)
                    frontier.append(nxt)
        return seen


def assert_within(ids: Iterable[str], allowed: set[str], what: str, scope: str, outside: dict[str, str]) -> None:
    leaked = sorted(set(ids) - allowed)
    assert not leaked, f"{what} in scope {scope} returned {[(i[:12], outside.get(i, '?')) for i in leaked]}"


def check_isolation(built: Built) -> None:
    db, oracle = built.db, Oracle(built.db)
    home = {i: name for name, scope in built.scopes.items() for i in oracle.inside(scope)}
    for name, scope in built.scopes.items():
        inside = oracle.inside(scope)
        inside_ever = oracle.inside(scope, closed_too=True)
        sources = oracle.referred(inside_ever)
        connected = oracle.referred(inside, both_ways=True)
        assert_within((n.id for n in db.nodes(world=scope)), inside, "nodes()", name, home)
        assert_within(
            (n.id for n in db.nodes(world=scope, include_superseded=True)),
            inside_ever,
            "nodes(include_superseded)",
            name,
            home,
        )
        for query in QUERIES:
            for superseded in (False, True):
                found = db.recall(query, scope=name, k=50, include_superseded=superseded)
                allowed = inside_ever if superseded else inside
                assert_within((h.node.id for h in found.hits), allowed, f"recall({query!r})", name, home)
                assert_within(
                    (t.id for h in found.hits for t in h.turns),
                    allowed | sources,
                    f"recall({query!r}) turns",
                    name,
                    home,
                )
            past = db.recall(query, scope=name, k=50, as_of=MIDWAY, include_superseded=True)
            assert_within((h.node.id for h in past.hits), inside_ever, f"recall({query!r}, as_of)", name, home)
            context = db.context(query, scope=name, budget=100_000)
            assert_within((item.node for item in context.items), inside, f"context({query!r})", name, home)
            assert_within(
                (n.id for n, _ in db.nearest(query, world=scope, k=50)), inside, f"nearest({query!r})", name, home
            )
            subgraph = db.query(QuerySpec(text=query, world=scope, k=50, pipeline=(Expand((), Direction.BOTH, 2),)))
            assert_within((n.id for n in subgraph.nodes), connected, f"query({query!r})", name, home)
        for entity in NAMES:
            resolution = db.resolve(entity, scope=name)
            if isinstance(resolution, Resolved):
                candidates = [resolution.match]
            elif isinstance(resolution, Ambiguous):
                candidates = list(resolution.options)
            else:
                candidates = [resolution.nearest] if resolution.nearest is not None else []
            assert_within((c.entity for c in candidates), inside, f"resolve({entity!r})", name, home)


def build_and_check(n_scopes: int, plan: list[tuple[object, ...]]) -> None:
    built = build(n_scopes, plan)
    try:
        check_isolation(built)
    finally:
        built.db.close()


@FAST
@given(st.integers(2, 3), steps)
def test_reads_in_one_scope_never_return_another_scopes_nodes(n_scopes: int, plan: list[tuple[object, ...]]) -> None:
    build_and_check(n_scopes, plan)


@pytest.mark.slow
@SLOW
@given(st.integers(2, 3), steps)
def test_scope_isolation_long(n_scopes: int, plan: list[tuple[object, ...]]) -> None:
    build_and_check(n_scopes, plan)


def test_a_summary_in_one_scope_does_not_show_the_turns_of_another() -> None:
    """Regression: a hit's source turns came through derived_from unfiltered, so a Summary in scope A
    derived from a turn in scope B showed B's turn (its text, in ``context``) to a recall in A.
    refers_to, the edge meant to cross worlds, still shows its turns."""
    db = WorldDB(":memory:", embedder=FakeEmbedder(), clock=FakeClock())
    try:
        secret = db.write("Bob said the garden secret", type="Turn", name="bob", scope="beta")
        said = db.write("Alice said the garden is hers", type="Turn", name="alice", scope="alpha")
        summary = db.write("garden summary", type="Summary", scope="alpha")
        db.link(summary, secret, "derived_from")
        db.link(summary, said, "derived_from")
        fact = db.write("the garden belongs to Bob", type="Fact", scope="alpha")
        db.link(fact, secret, "refers_to")
        hits = {h.node.id: h for h in db.recall("garden", scope="alpha", k=10).hits}
        assert [t.id for t in hits[summary].turns] == [said]
        assert [t.id for t in hits[fact].turns] == [secret]
        unconfined = {h.node.id: h for h in db.recall("garden", k=10).hits}
        assert {t.id for t in unconfined[summary].turns} == {said, secret}
    finally:
        db.close()


def test_the_lanes_would_find_the_other_scope_without_the_filter() -> None:
    """The stores above are a real test: unconfined, the same query finds nodes of both scopes."""
    built = build(2, [])
    try:
        oracle = Oracle(built.db)
        found = {h.node.id for h in built.db.recall("Alice moved to Lisbon with coffee", k=50).hits}
        for scope in built.scopes.values():
            assert found & oracle.inside(scope)
    finally:
        built.db.close()
