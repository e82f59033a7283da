"""A stateful fuzz of the write path: random operations, every invariant checked after every step.

Each rule either succeeds or raises a WorldDBError that leaves the store exactly as it was. Anything
else (a raw SQLite error, an AssertionError, a KeyError) is a bug that hypothesis shrinks for us.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from worlddb_lite import Edge, MergeProposal, WorldDB, WorldDBError
from worlddb_lite.edges import DEFAULT_EDGE_TYPES

from .conftest import FakeClock, FakeEmbedder, table_digest

EDGE_TYPES = sorted(t.name for t in DEFAULT_EDGE_TYPES) + ["no_such_type"]
TIMES = [None, *(f"2024-{m:02d}-01" for m in range(1, 13)), "2026-01-01"]  # None: now (the fake clock, 2025)
WORDS = ["Alice", "Bob", "Lisbon", "Porto", "coffee", "meeting", "Monday", "sea", "blue", "kettle"]
NODE_TYPES = ["Memory", "Fact", "Entity", "Event", "Turn"]

texts = st.lists(st.sampled_from(WORDS), min_size=1, max_size=4).map(" ".join)
times = st.sampled_from(TIMES)
picks = st.integers(min_value=0, max_value=10_000)


class ReconcilerMachine(RuleBasedStateMachine):
    """Random writes, amends, retirements, edges and merges against one in-memory store."""

    def __init__(self) -> None:
        super().__init__()
        self.clock = FakeClock()
        self.db = WorldDB(":memory:", embedder=FakeEmbedder(), clock=self.clock)
        self.worlds: list[str] = [self.db.root_id]
        self.nodes: list[str] = []
        self.edges: list[str] = []
        self.pids: list[int] = []
        self.validity: dict[int, tuple[str, str | None, str | None, int]] = {}
        self.outcomes: Counter[str] = Counter()

    def teardown(self) -> None:
        self.db.close()

    # ---- helpers --------------------------------------------------------------------------

    def _pick(self, items: list[Any], index: int) -> Any:
        return items[index % len(items)]

    def _attempt(self, name: str, action: Callable[[], Any]) -> Any:
        """Run one operation; a WorldDBError must leave the store exactly as it was."""
        before = table_digest(self.db)
        try:
            result = action()
        except WorldDBError as exc:
            after = table_digest(self.db)
            assert after == before, f"{name} raised {type(exc).__name__} ({exc}) but changed the store"
            self.outcomes[f"{name}:{type(exc).__name__}"] += 1
            return None
        self.outcomes[f"{name}:ok"] += 1
        return result

    def _remember(self, result: Any) -> None:
        if isinstance(result, Edge):
            self.edges.append(result.id)
        elif isinstance(result, MergeProposal) and result.pid not in self.pids:
            self.pids.append(result.pid)

    # ---- rules ----------------------------------------------------------------------------

    @initialize(text=texts)
    def first_memory(self, text: str) -> None:
        self.nodes.append(self.db.write(text, scope="start", valid_at="2024-01-01"))

    @rule(name=st.sampled_from(["home", "work", "trip", "notes"]), parent=picks)
    def make_world(self, name: str, parent: int) -> None:
        world = self._attempt("world", lambda: self.db.world(name, parent=self._pick(self.worlds, parent)))
        if world is not None and world not in self.worlds:
            self.worlds.append(world)
            self.nodes.append(world)

    @rule(text=texts, world=picks, valid=times, type_=st.sampled_from(NODE_TYPES), named=st.booleans())
    def write(self, text: str, world: int, valid: str | None, type_: str, named: bool) -> None:
        target = self._pick(self.worlds, world)
        nid = self._attempt(
            "write",
            lambda: self.db.write(
                text, world=target, valid_at=valid, type=type_, name=text.split()[0] if named else None
            ),
        )
        if nid is not None and nid not in self.nodes:
            self.nodes.append(nid)

    @rule(node=picks, text=texts, valid=times)
    def amend(self, node: int, text: str, valid: str | None) -> None:
        new = self._attempt("amend", lambda: self.db.amend(self._pick(self.nodes, node), text, valid_at=valid))
        if new is not None and new not in self.nodes:
            self.nodes.append(new)

    @rule(node=picks, at=times)
    def retire(self, node: int, at: str | None) -> None:
        self._attempt("retire", lambda: self.db.retire(self._pick(self.nodes, node), at=at))

    @rule(node=picks)
    def retract(self, node: int) -> None:
        self._attempt("retract", lambda: self.db.retract(self._pick(self.nodes, node)))

    @rule(src=picks, dst=picks, type_=st.sampled_from(EDGE_TYPES))
    def link(self, src: int, dst: int, type_: str) -> None:
        every = self.nodes + self.worlds
        self._remember(
            self._attempt(f"link-{type_}", lambda: self.db.link(self._pick(every, src), self._pick(every, dst), type_))
        )

    @rule(src=picks, dst=picks)
    def supersede(self, src: int, dst: int) -> None:
        self._remember(
            self._attempt(
                "supersedes",
                lambda: self.db.link(self._pick(self.nodes, src), self._pick(self.nodes, dst), "supersedes"),
            )
        )

    @rule(src=picks, dst=picks)
    def contradict(self, src: int, dst: int) -> None:
        self._remember(
            self._attempt(
                "contradicts",
                lambda: self.db.link(self._pick(self.nodes, src), self._pick(self.nodes, dst), "contradicts"),
            )
        )

    @rule(src=picks, dst=picks)
    def propose_same_as(self, src: int, dst: int) -> None:
        self._remember(
            self._attempt(
                "same_as",
                lambda: self.db.link(self._pick(self.nodes, src), self._pick(self.nodes, dst), "same_as"),
            )
        )

    @rule(triples=st.lists(st.tuples(picks, picks, st.sampled_from(EDGE_TYPES)), min_size=1, max_size=4))
    def link_many(self, triples: list[tuple[int, int, str]]) -> None:
        if not hasattr(self.db, "link_many"):
            return
        every = self.nodes + self.worlds
        chosen = [(self._pick(every, s), self._pick(every, d), t) for s, d, t in triples]
        for result in self._attempt("link_many", lambda: self.db.link_many(chosen)) or ():
            self._remember(result)

    @precondition(lambda self: bool(self.pids))
    @rule(pid=picks, accept=st.booleans())
    def decide(self, pid: int, accept: bool) -> None:
        chosen = self._pick(self.pids, pid)
        action = self.db.accept_merge if accept else self.db.reject_merge
        self._attempt("accept" if accept else "reject", lambda: action(chosen))

    @precondition(lambda self: bool(self.edges))
    @rule(edge=picks, at=times)
    def unlink(self, edge: int, at: str | None) -> None:
        self._attempt("unlink", lambda: self.db.unlink(self._pick(self.edges, edge), at=at))

    @rule(
        texts_=st.lists(texts, min_size=1, max_size=3),
        src=picks,
        dst=picks,
        type_=st.sampled_from(EDGE_TYPES),
        fail=st.booleans(),
    )
    def batch(self, texts_: list[str], src: int, dst: int, type_: str, fail: bool) -> None:
        """Several operations in one transaction; a refused link inside it leaves nothing behind."""
        before = table_digest(self.db)
        added: list[str] = []
        try:
            with self.db.batch():
                for text in texts_:
                    added.append(self.db.write(text, scope="batch"))
                self.db._settle()  # the writes' queued edge rows land now, not inside the link below
                inner = table_digest(self.db)
                try:
                    self._remember(
                        self.db.link(self._pick(self.nodes + added, src), self._pick(self.nodes + added, dst), type_)
                    )
                except WorldDBError:
                    assert table_digest(self.db) == inner, "a refused link inside a batch left rows behind"
                if fail:
                    raise KeyboardInterrupt  # anything, even a BaseException, rolls the batch back
        except KeyboardInterrupt:
            assert table_digest(self.db) == before
            self.edges = [e for e in self.edges if self._edge_exists(e)]
            self.pids = [p for p in self.pids if self._pid_exists(p)]
            self.outcomes["batch:rolled-back"] += 1
            return
        self.nodes.extend(a for a in added if a not in self.nodes)
        self.outcomes["batch:ok"] += 1

    def _edge_exists(self, edge: str) -> bool:
        return bool(self.db.sql("select 1 from edge where id = ?", (bytes.fromhex(edge),)))

    def _pid_exists(self, pid: int) -> bool:
        return bool(self.db.sql("select 1 from merge_proposal where pid = ?", (pid,)))

    # ---- invariants -----------------------------------------------------------------------

    @invariant()
    def store_verifies(self) -> None:
        report = self.db.verify()
        assert report.ok, report.violations

    @invariant()
    def every_logged_root_recomputes(self) -> None:
        check = getattr(self.db, "verify_root_history", None)
        if check is None:  # older package versions keep no state log
            return
        for world in self.worlds:
            assert check(world) == [], world

    @invariant()
    def validity_never_widens(self) -> None:
        rows = self.db.sql("select nid, valid_at, invalid_at, expired_at, retired from node_state")
        for nid, valid_at, invalid_at, expired_at, retired in rows:
            old = self.validity.get(nid)
            if old is not None:
                old_valid, old_invalid, old_expired, old_retired = old
                assert valid_at == old_valid, f"node {nid}: valid_at moved"
                if old_invalid is not None:
                    assert invalid_at is not None and invalid_at <= old_invalid, f"node {nid}: validity widened"
                if old_expired is not None:
                    assert expired_at == old_expired, f"node {nid}: retraction changed"
                assert retired >= old_retired, f"node {nid}: un-retired"
            if invalid_at is not None:
                assert invalid_at >= valid_at
            self.validity[nid] = (valid_at, invalid_at, expired_at, retired)

    @invariant()
    def merges_are_consistent(self) -> None:
        nodes = {int(r[0]) for r in self.db.sql("select nid from node")}
        same_as = {
            (int(a), int(b))
            for a, b in self.db.sql(
                "select src, dst from edge where type = 'same_as' and invalid_at is null and expired_at is null"
            )
        }
        for src, dst in same_as:
            assert (dst, src) in same_as, "accepted same_as is not symmetric"
        for a, b, status in self.db.sql("select a, b, status from merge_proposal"):
            assert a in nodes and b in nodes and a < b, "orphan proposal"
            linked = (a, b) in same_as or (b, a) in same_as
            assert linked == (status == "accepted"), f"proposal ({a}, {b}) is {status} but linked={linked}"
        proposals = {
            (int(a), int(b)) for a, b in self.db.sql("select a, b from merge_proposal where status = 'accepted'")
        }
        for src, dst in same_as:
            assert (min(src, dst), max(src, dst)) in proposals, "same_as edge without an accepted proposal"

    @invariant()
    def indexes_match_nodes(self) -> None:
        with_text = {
            int(r[0])
            for r in self.db.sql(
                "select nid from node where coalesce(json_extract(body, '$.name'), '') != '' "
                "or coalesce(json_extract(body, '$.content'), '') != ''"
            )
        }
        fts = {int(r[0]) for r in self.db.sql("select rowid from node_fts")}
        vec = {int(r[0]) for r in self.db.sql("select rowid from node_vec")}
        above = {  # every world above a node with text holds a composed vector, the root excepted
            int(r[0])
            for r in self.db.sql(
                "with recursive up(nid) as (select parent from node where nid in (select rowid from node_fts) "
                "union select n.parent from node as n join up on n.nid = up.nid) "
                "select nid from up where nid is not null and (select parent from node where nid = up.nid) is not null"
            )
        }
        assert with_text == fts
        assert vec == with_text | above
        assert self.db.sql("select count(*) from reconciler_session")[0][0] == 0


ReconcilerMachine.TestCase.settings = settings(
    max_examples=25,
    stateful_step_count=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
TestReconcilerFuzz = ReconcilerMachine.TestCase
