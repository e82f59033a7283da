"""Sync properties (issue 26): replicas that write apart and sync in any order end the same, losing nothing.

Two or three replicas start from one store (``replica``), each on its own clock (separate devices). Each
applies a random program of writes (now and then the same text on two replicas), amends, retires,
retracts, links between entities (``refers_to``, ``same_as``), decisions on pending merges, aliases and
purges, interleaved with syncs between random pairs (pull, push or both) and with change sets written at
one moment and applied later, again, or after newer ones (``changes`` / ``apply_changes``), and with
backups and restores of a replica from its last backup (its writes since are lost there). At the end
every replica syncs around a ring until a whole round moves nothing, and then every replica has:

* the same store root, a deep ``verify`` that passes, the same visible node ids, the same aliases, every
  merge proposal decided alike (or accepted on one and rejected on another: a conflict each keeps, never
  left pending), and the same answers to a fixed set of recalls (the first five hits, in order, with their
  scores);
* every id an acknowledged write returned (purged or not), unless the only replica that held it was
  restored from a backup older than it;
* no byte of a purged memory: each purgeable memory carries a unique token, which after ``checkpoint()``
  appears in no replica's files once any replica purged it, and no alias names it.

An operation the engine refuses (amending a closed memory, a link its handler refuses) is skipped: it was
never acknowledged. A sync of both ways must report the pair converged. What the property found (all
fixed since) is kept as small tests at the end of the file. The default run takes 25 programs (5-25 s,
by the machine's load); ``-m slow`` runs 400 longer ones (3-6 minutes).
"""

from __future__ import annotations

import datetime as dt
import io
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from worlddb_lite import WorldDB, WorldDBError
from worlddb_lite.types import MergeProposal

from .conftest import START, FakeClock, FakeEmbedder

FAST = settings(
    max_examples=25, deadline=None, derandomize=True, database=None, suppress_health_check=list(HealthCheck)
)
SLOW = settings(max_examples=400, deadline=None, suppress_health_check=list(HealthCheck))

SCOPES = ["ana", "bob", "work"]  # the seed store holds each of them
NEW_SCOPES = ["trip"]  # no replica holds it yet: two may create it apart
TEXTS = [
    "Ana likes green tea",
    "I moved to Lisbon",
    "I moved to Porto",
    "Ana's sister is Eva",
    "Bob plays chess on Sundays",
    "The quarterly report is due in May",
    "I go running every morning",
    "Eva visits in June",
]
NAMES = ["Dana", "Dana S.", "Eva", "Bob"]
ALIASES = ["my manager", "the boss", "Evie", "B."]
RETIRE_AT = [None, "2025-01-15", "2024-06-01"]
QUERIES = ["tea", "Lisbon", "sister", "chess", "running", "report", "Dana", "Eva"]
# far past every replica's clock: the end state is read at one instant everywhere
FINAL = START + dt.timedelta(days=30)


# ---- programs ---------------------------------------------------------------------------------------------

pick = st.integers(min_value=0, max_value=50)  # an index into what the replica holds, modulo its size
replica_no = st.integers(min_value=0, max_value=2)

sync = st.tuples(st.just("sync"), replica_no, replica_no, st.sampled_from(["pull", "push", "both"]))
op = st.one_of(
    sync,  # listed three times: syncs between the other operations are what the property is about
    sync,
    st.tuples(
        st.just("write"), replica_no, st.sampled_from(SCOPES + NEW_SCOPES), st.sampled_from(TEXTS), st.booleans()
    ),
    st.tuples(st.just("secret"), replica_no, st.sampled_from(SCOPES + NEW_SCOPES), st.sampled_from(TEXTS)),
    st.tuples(st.just("entity"), replica_no, st.sampled_from(SCOPES + NEW_SCOPES), st.sampled_from(NAMES)),
    st.tuples(st.just("amend"), replica_no, pick, st.sampled_from(TEXTS)),
    st.tuples(st.just("retire"), replica_no, pick, st.sampled_from(RETIRE_AT)),
    st.tuples(st.just("retract"), replica_no, pick),
    st.tuples(st.just("link"), replica_no, pick, pick, st.sampled_from(["refers_to", "same_as"])),
    st.tuples(st.just("decide"), replica_no, pick, st.booleans()),  # two replicas may decide a pair apart
    st.tuples(st.just("alias"), replica_no, pick, st.sampled_from(ALIASES)),
    st.tuples(st.just("purge"), replica_no, pick),
    sync,
    st.tuples(st.just("stash"), replica_no, replica_no),
    st.tuples(st.just("deliver"), replica_no, pick),
    st.tuples(st.just("backup"), replica_no),
    st.tuples(st.just("restore"), replica_no),  # the disk died: the replica's last copy comes back
)


def programs(min_ops: int, max_ops: int) -> st.SearchStrategy[tuple[int, list[int], list[tuple[Any, ...]]]]:
    """(replicas, each replica's clock offset in seconds, the operations)."""
    return st.tuples(
        st.integers(min_value=2, max_value=3),
        st.lists(st.sampled_from([0, 7, 3600, -30]), min_size=3, max_size=3),  # a clock behind, too
        st.lists(op, min_size=min_ops, max_size=max_ops),
    )


@dataclass
class Run:
    """The replicas of one program and what each of them has been told or has heard of."""

    folder: Path
    dbs: list[WorldDB]
    clocks: list[FakeClock]
    memories: list[list[str]]  # per replica: ids of memories it wrote or received, in the order it learned them
    entities: list[list[str]]
    secrets: list[list[str]]
    acked: set[str] = field(default_factory=set)  # every id a write or amend returned
    tokens: dict[str, str] = field(default_factory=dict)  # secret memory id -> its unique token
    counter: int = 0
    stashed: list[tuple[int, bytes]] = field(default_factory=list)  # (receiver, change set) not yet applied
    # per replica: its last backup's file and what it held then (memories, entities, secrets)
    backups: dict[int, tuple[Path, tuple[list[str], list[str], list[str]]]] = field(default_factory=dict)
    done: set[str] = field(default_factory=set)  # kinds of operation that took effect, for the statistics
    log: list[str] = field(default_factory=list)  # what ran, for the failure message

    def learn(self, receiver: int, sender: int) -> None:
        """After ``receiver`` applied ``sender``'s changes it holds what the sender held."""
        for lists in (self.memories, self.entities, self.secrets):
            for ref in lists[sender]:
                if ref not in lists[receiver]:
                    lists[receiver].append(ref)


def _open(path: Path, clock: FakeClock) -> WorldDB:
    return WorldDB(path, embedder=FakeEmbedder(), clock=clock)


def _seeded_pair(tmp_path: Path) -> tuple[WorldDB, WorldDB]:
    """A store with one memory and a replica of it whose clock runs 7 s ahead."""
    a = _open(tmp_path / "a.db", FakeClock(start=START))
    a.write("Ana likes green tea", scope="ana")
    a.replica(tmp_path / "b.db")
    return a, _open(tmp_path / "b.db", FakeClock(start=START + dt.timedelta(seconds=7)))


@contextmanager
def replicas(count: int, offsets: list[int]) -> Iterator[Run]:
    """A seeded store and ``count`` - 1 replicas of it, each on a clock of its own."""
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        clocks = [FakeClock(start=START + dt.timedelta(seconds=offsets[i])) for i in range(count)]
        first = _open(folder / "r0.db", clocks[0])
        memories = [first.write(f"{scope} notes", scope=scope) for scope in SCOPES]
        entities = [first.write(name, scope="ana", type="Entity", name=name) for name in ("Dana", "Dana S.", "Eva")]
        first.link(entities[0], entities[1], "same_as")  # a pending proposal every replica may decide
        dbs = [first]
        try:
            for i in range(1, count):
                first.replica(folder / f"r{i}.db")
                dbs.append(_open(folder / f"r{i}.db", clocks[i]))
            run = Run(
                folder,
                dbs,
                clocks,
                [list(memories) for _ in dbs],
                [list(entities) for _ in dbs],
                [[] for _ in dbs],
                acked=set(memories) | set(entities),
            )
            yield run
        finally:
            for db in dbs:
                db.close()


def _choose(refs: list[str], index: int) -> str | None:
    return refs[index % len(refs)] if refs else None


def _pending(db: WorldDB, index: int) -> MergeProposal | None:
    found = db.merge_proposals()
    return found[index % len(found)] if found else None


def step(run: Run, action: tuple[Any, ...]) -> None:
    """Run one operation. One that the engine refuses (a purged or closed memory, a refused link) is skipped:
    it was never acknowledged, so nothing is owed for it."""
    kind, r = action[0], action[1] % len(run.dbs)
    db = run.dbs[r]
    if kind == "sync":
        other = (r + 1 + action[2] % (len(run.dbs) - 1)) % len(run.dbs)  # never itself
        mode = action[3]
        result = db.sync(run.dbs[other], pull=mode != "push", push=mode != "pull")
        run.log.append(f"r{r}.sync(r{other}, {mode})")
        run.done.add("sync")
        if mode != "push":
            run.learn(r, other)
        if mode != "pull":
            run.learn(other, r)
        if mode == "both":
            assert result["converged"], (run.log, result)
        return
    if kind == "stash":  # a change set written now and delivered later (a file that travels slowly)
        other = (r + 1 + action[2] % (len(run.dbs) - 1)) % len(run.dbs)
        buffer = io.BytesIO()
        db.changes(buffer, since=run.dbs[other].sync_token())
        run.log.append(f"stash {len(run.stashed)}: r{r}.changes(since=r{other}.sync_token())")
        run.stashed.append((other, buffer.getvalue()))
        return
    if kind == "backup":
        path = run.folder / "backups" / f"r{r}.db"  # outside the glob of the bytes check: a backup keeps secrets
        path.parent.mkdir(exist_ok=True)
        db.backup(path, overwrite=True)
        run.backups[r] = (path, (list(run.memories[r]), list(run.entities[r]), list(run.secrets[r])))
        run.log.append(f"r{r}.backup()")
        run.done.add("backup")
        return
    if kind == "restore":
        if r in run.backups:
            restore(run, r)
        return
    if kind == "deliver":  # late, perhaps again, perhaps after newer ones: it must change nothing back
        if run.stashed:
            index = action[2] % len(run.stashed)
            receiver, data = run.stashed[index]
            run.log.append(f"r{receiver}.apply_changes(stash {index})")
            run.dbs[receiver].apply_changes(data)
            run.done.add("deliver")
        return
    before = len(run.log)
    try:
        if kind == "write":
            _, _, scope, text, twice = action
            ref = db.write(text, scope=scope)
            run.log.append(f"r{r}.write({text!r}, scope={scope!r}) -> {ref[:8]}")
            run.memories[r].append(ref)
            run.acked.add(ref)
            if twice:  # the same text learned on another device too
                o = (r + 1) % len(run.dbs)
                again = run.dbs[o].write(text, scope=scope)
                run.log.append(f"r{o}.write({text!r}, scope={scope!r}) -> {again[:8]}")
                run.memories[o].append(again)
                run.acked.add(again)
        elif kind == "secret":
            _, _, scope, text = action
            run.counter += 1
            token = f"secret{run.counter:04d}x{r}"
            ref = db.write(f"{text} {token}", scope=scope)
            run.log.append(f"r{r}.write({text + ' ' + token!r}, scope={scope!r}) -> {ref[:8]}")
            run.memories[r].append(ref)
            run.secrets[r].append(ref)
            run.acked.add(ref)
            run.tokens[ref] = token
        elif kind == "entity":
            _, _, scope, name = action
            ref = db.write(name, scope=scope, type="Entity", name=name)
            run.log.append(f"r{r}.write({name!r}, scope={scope!r}, type='Entity') -> {ref[:8]}")
            run.entities[r].append(ref)
            run.acked.add(ref)
        elif kind == "amend":
            target = _choose(run.memories[r], action[2])
            if target is None:
                return
            run.log.append(f"r{r}.amend({target[:8]}, {action[3]!r})")
            ref = db.amend(target, action[3])
            run.log[-1] += f" -> {ref[:8]}"
            run.memories[r].append(ref)
            run.acked.add(ref)
        elif kind == "retire":
            target = _choose(run.memories[r], action[2])
            if target is not None:
                run.log.append(f"r{r}.retire({target[:8]}, at={action[3]!r})")
                db.retire(target, at=action[3])
        elif kind == "retract":
            target = _choose(run.memories[r], action[2])
            if target is not None:
                run.log.append(f"r{r}.retract({target[:8]})")
                db.retract(target)
        elif kind == "link":
            src, dst = _choose(run.entities[r], action[2]), _choose(run.entities[r], action[3])
            if src is not None and dst is not None and src != dst:
                run.log.append(f"r{r}.link({src[:8]}, {dst[:8]}, {action[4]!r})")
                db.link(src, dst, action[4])
        elif kind == "decide":
            proposal = _pending(db, action[2])
            if proposal is not None:
                run.log.append(f"r{r}.{'accept' if action[3] else 'reject'}_merge({proposal.a[:8]}~{proposal.b[:8]})")
                (db.accept_merge if action[3] else db.reject_merge)(proposal.pid)
        elif kind == "alias":
            target = _choose(run.entities[r] + run.memories[r], action[2])
            if target is not None:
                run.log.append(f"r{r}.add_alias({target[:8]}, {action[3]!r})")
                db.add_alias(target, action[3])
        elif kind == "purge":
            target = _choose(run.secrets[r], action[2])
            if target is not None:
                run.log.append(f"r{r}.purge({target[:8]})")
                db.purge(target)
        else:  # pragma: no cover - the strategy lists every kind
            raise AssertionError(kind)
        if len(run.log) > before:
            run.done.add(kind)
    except WorldDBError as exc:
        run.log.append(f"  refused: {type(exc).__name__}: {str(exc)[:100]}")
        event(f"refused {kind}: {type(exc).__name__}")


def restore(run: Run, r: int) -> None:
    """Replace replica ``r``'s file with its last backup (its clock runs on). What only it held since is gone:
    those writes are no longer owed."""
    path, held = run.backups[r]
    run.dbs[r].close()
    for suffix in ("", "-wal", "-shm"):
        (run.folder / f"r{r}.db{suffix}").unlink(missing_ok=True)
    shutil.copyfile(path, run.folder / f"r{r}.db")
    run.dbs[r] = _open(run.folder / f"r{r}.db", run.clocks[r])
    run.memories[r], run.entities[r], run.secrets[r] = (list(x) for x in held)
    known = {ref for lists in (run.memories, run.entities) for refs in lists for ref in refs}
    run.acked &= known
    run.tokens = {ref: token for ref, token in run.tokens.items() if ref in known}
    run.log.append(f"r{r} restored from its backup")
    run.done.add("restore")


def settle(run: Run) -> int:
    """Sync around the ring until a whole round moves no record; the number of rounds it took."""
    count = len(run.dbs)
    for rounds in range(1, 7):
        moved = 0
        for i in range(count):
            result = run.dbs[i].sync(run.dbs[(i + 1) % count])
            moved += result["pull"]["records"] + result["push"]["records"]
        for i in range(count):
            for j in range(count):
                run.learn(i, j)
        if moved == 0:
            return rounds
    raise AssertionError(f"six rounds of syncs around the ring still moved records: {run.log}")


def answers(db: WorldDB, clock: FakeClock, *, ordered: bool = True) -> list[list[tuple[str, float]]]:
    """The fixed recalls, read at the same instant on every replica: the first five hits in order, or every
    hit as a sorted list (``ordered`` False)."""
    clock.now = FINAL
    if ordered:
        return [[(h.node.id, round(h.score, 9)) for h in db.recall(q, k=5).hits] for q in QUERIES]
    return [sorted((h.node.id, round(h.score, 9)) for h in db.recall(q, k=100).hits) for q in QUERIES]


def check_converged(run: Run) -> None:
    log = "\n".join(run.log)
    dbs = run.dbs
    roots = [db.root() for db in dbs]
    assert len(set(roots)) == 1, f"roots differ: {roots}\n{log}"
    for i, db in enumerate(dbs):
        report = db.verify(deep=True)
        assert report.ok, f"r{i}: {report.violations}\n{log}"
    for clock in run.clocks:
        clock.now = FINAL
    visible = [sorted(n.id for n in db.nodes(limit=100_000)) for db in dbs]
    assert all(v == visible[0] for v in visible), f"visible nodes differ\n{log}"
    found = [answers(db, clock) for db, clock in zip(dbs, run.clocks, strict=True)]
    for i in range(1, len(dbs)):
        assert found[i] == found[0], f"recall differs between r0 and r{i}:\n{found[0]}\n{found[i]}\n{log}"
    decisions: dict[tuple[str, str], list[str]] = {}  # each proposal's status on every replica
    for db in dbs:
        for p in db.merge_proposals(None):
            decisions.setdefault((min(p.a, p.b), max(p.a, p.b)), []).append(p.status.value)
    for pair, statuses in decisions.items():  # the strongest decision everywhere, or a conflict each keeps
        same = len(statuses) == len(dbs) and len(set(statuses)) == 1
        conflict = len(statuses) == len(dbs) and set(statuses) == {"accepted", "rejected"}
        assert same or conflict, f"proposal {pair[0][:8]}~{pair[1][:8]}: {statuses}\n{log}"
    names = [[sorted(db.lookup_alias(alias)) for alias in ALIASES] for db in dbs]  # in row order: a file's own
    assert all(n == names[0] for n in names), f"aliases differ: {names}\n{log}"
    for ref in run.acked:  # no acknowledged write is lost: each replica can still name it
        for i, db in enumerate(dbs):
            assert db.read(ref).id == ref, f"r{i} lost {ref}\n{log}"
    purged = {ref for ref in run.tokens if any(db.read(ref).purged for db in dbs)}
    for i, found_names in enumerate(names):  # a purged memory's aliases went with it
        assert not purged & {ref for refs in found_names for ref in refs}, f"r{i} names a purged memory\n{log}"
    for ref in purged:
        assert all(db.read(ref).purged for db in dbs), f"the purge of {ref[:8]} did not reach every replica\n{log}"
    for db in dbs:
        db.checkpoint()
    for path in sorted(run.folder.glob("r*.db*")):
        data = path.read_bytes()
        for ref in purged:
            assert run.tokens[ref].encode() not in data, f"{run.tokens[ref]} ({ref[:8]}) survives in {path.name}\n{log}"


def play(count: int, offsets: list[int], ops: list[tuple[Any, ...]]) -> None:
    with replicas(count, offsets) as run:
        for action in ops:
            step(run, action)
        for kind in sorted(run.done):
            event(f"ran {kind}")
        event(f"settled in {settle(run)} rounds")
        check_converged(run)


@FAST
@given(programs(8, 25))
def test_replicas_that_write_apart_and_sync_in_any_order_converge(case: tuple[int, list[int], list[Any]]) -> None:
    play(*case)


@pytest.mark.slow
@SLOW
@given(programs(20, 80))
def test_replicas_converge_long(case: tuple[int, list[int], list[Any]]) -> None:
    play(*case)


# ---- findings of the property, each at its smallest --------------------------------------------------------


def test_a_scope_first_made_on_two_replicas_apart_verifies_after_sync(tmp_path: Path) -> None:
    """Both replicas create the scope "work" (each writes into it) before they sync; the scope's world is one
    node (its id is its name), and the side whose copy was created later has its created_at moved earlier by
    the merge. Its logged roots of that world must still replay (verify invariant 2-merkle)."""
    a = _open(tmp_path / "a.db", FakeClock(start=START))
    a.write("Ana likes green tea", scope="ana")
    a.replica(tmp_path / "b.db")
    b = _open(tmp_path / "b.db", FakeClock(start=START))
    try:
        a.write("Bob plays chess", scope="work")
        b.write("Eva visits in June", scope="work")
        assert a.sync(b)["converged"]
        for db in (a, b):
            report = db.verify(deep=True)
            assert report.ok, report.violations
    finally:
        a.close()
        b.close()


def test_conflicting_merge_decisions_leave_both_replicas_verifying(tmp_path: Path) -> None:
    """A same_as proposal accepted on one replica and rejected on the other: the sync reports the conflict,
    the roots agree, and both stores still verify (invariant 6-no-silent-merge: no same_as edge without an
    accepted proposal)."""
    a = _open(tmp_path / "a.db", FakeClock(start=START))
    x = a.write("Dana", scope="ana", type="Entity", name="Dana")
    y = a.write("Dana S.", scope="ana", type="Entity", name="Dana S.")
    a.link(x, y, "same_as")
    a.replica(tmp_path / "b.db")
    b = _open(tmp_path / "b.db", FakeClock(start=START + dt.timedelta(seconds=7)))
    try:
        (mine,) = a.merge_proposals()
        (theirs,) = b.merge_proposals()
        a.accept_merge(mine.pid)
        b.reject_merge(theirs.pid)
        result = a.sync(b)
        assert result["pull"]["conflicts"] == 1 and result["push"]["conflicts"] == 1
        assert result["converged"]
        for db in (a, b):
            report = db.verify()
            assert report.ok, report.violations
    finally:
        a.close()
        b.close()


def test_stale_notes_rank_alike_on_every_replica(tmp_path: Path) -> None:
    """Each replica writes "I moved to Lisbon" (two notes: another valid time), one pulls the other's, then
    each writes "I moved to Porto". Once synced both hold the same rows (the same root), and a recall must
    rank them alike: the stale Lisbon notes are moved below the Porto ones in the same order everywhere."""
    clocks = [FakeClock(start=START), FakeClock(start=START)]
    a = _open(tmp_path / "a.db", clocks[0])
    for scope in SCOPES:
        a.write(f"{scope} notes", scope=scope)
    a.replica(tmp_path / "b.db")
    b = _open(tmp_path / "b.db", clocks[1])
    try:
        b.write("I moved to Lisbon", scope="work")
        a.write("I moved to Lisbon", scope="work")
        a.sync(b, push=False)
        a.write("I moved to Porto", scope="work")
        b.write("I moved to Porto", scope="work")
        assert a.sync(b)["converged"]
        every = [answers(db, clock, ordered=False) for db, clock in zip((a, b), clocks, strict=True)]
        assert every[0] == every[1]  # the same hits with the same scores
        first = [answers(db, clock) for db, clock in zip((a, b), clocks, strict=True)]
        assert first[0] == first[1]  # ... in the same order
    finally:
        a.close()
        b.close()


def test_an_alias_given_before_a_purge_was_heard_of_does_not_come_back(tmp_path: Path) -> None:
    """b aliases a memory, a purges it before it heard of the alias; after a sync neither replica holds
    the alias (it is the memory's content, as its text is) and its words are in neither file."""
    a, b = _seeded_pair(tmp_path)
    try:
        secret = a.write("my locker code is secret4711", scope="ana")
        a.sync(b, pull=False)
        b.add_alias(secret, "aliasword9876")
        a.purge(secret)
        assert a.sync(b)["converged"]
        for db in (a, b):
            assert db.read(secret).purged
            assert db.lookup_alias("aliasword9876") == ()
            db.checkpoint()
    finally:
        a.close()
        b.close()
    for path in sorted(tmp_path.glob("*.db*")):
        data = path.read_bytes()
        assert b"secret4711" not in data and b"aliasword9876" not in data, path.name


def test_an_alias_given_to_a_purged_memory_is_refused(tmp_path: Path) -> None:
    """a purges a memory, then aliases it: add_alias refuses (the memory has no content left to name; it was
    taken, kept in this file only and never sent), and no replica names the purged memory after a sync."""
    a, b = _seeded_pair(tmp_path)
    try:
        secret = a.write("my locker code is secret4711", scope="ana")
        a.purge(secret)
        with pytest.raises(WorldDBError, match="purged"):
            a.add_alias(secret, "aliasword9876")
        assert a.sync(b)["converged"]
        for db in (a, b):
            assert db.lookup_alias("aliasword9876") == ()
    finally:
        a.close()
        b.close()
