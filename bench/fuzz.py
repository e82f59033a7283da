"""Reconciler fuzz: random operation sequences with the invariants checked after every step.

    python bench/fuzz.py --ops 100000 --seed 1 [--json bench/out/fuzz-1.json]

Operations: write (into random scopes and nested worlds), world creation, amend, retire,
retract, supersede, contradict, same_as propose / accept / reject, edges of every default
type between random nodes, unlink, alias. Operations that the engine refuses must raise a
``WorldDBError`` and leave the store exactly as it was (same store root, same row counts).

After every step: the touched nodes and edges hash back to their ids; no validity interval
widened or re-opened (every node's interval is tracked across steps); every same_as edge
has an accepted proposal and its mirror, and no proposal points at a missing node; the FTS
and vector tables hold one row per text node. Every ``--full-every`` steps and at the end,
``WorldDB.verify()`` recomputes everything (all hashes, all Merkle roots, all invariants).
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
import zlib
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import emit, environment, progress, remove_store  # noqa: E402

from worlddb_lite import WorldDB, WorldDBError  # noqa: E402
from worlddb_lite.store.hashing import edge_body, edge_id, node_id  # noqa: E402

EDGE_TYPES = (
    "refers_to",
    "contains",
    "implies",
    "derived_from",
    "instance_of",
    "subtype_of",
    "causes",
    "precedes",
    "contradicts",
    "supersedes",
    "same_as",
)
WORDS = (
    "Sarah",
    "Tom",
    "Lisbon",
    "Porto",
    "tea",
    "coffee",
    "manager",
    "dog",
    "Rex",
    "piano",
    "moved",
    "likes",
    "works",
    "at",
    "Acme",
    "in",
    "May",
    "the",
    "my",
    "ünïcode",
    "日本",
)
TABLES = ("node", "node_state", "edge", "merge_proposal", "alias", "root_log", "merkle")


class HashEmbedder:
    """Deterministic 16-d embedder so the fuzz never loads a model."""

    model_id = "fuzz-hash-16"
    dim = 16

    def embed(self, texts: list[str]) -> np.ndarray:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            for word in text.lower().split():
                out[row, zlib.crc32(word.encode("utf-8")) % self.dim] += 1.0  # stable across runs
        out[:, 0] += 1e-3
        return out / np.linalg.norm(out, axis=1, keepdims=True)


class Fuzzer:
    """Drives one store with random operations and checks it after each."""

    def __init__(self, path: str, seed: int) -> None:
        self.rng = random.Random(seed)
        self.db = WorldDB(path, embedder=HashEmbedder())
        self.conn = self.db._conn  # the checker reads raw rows; writes go through the facade only
        self.worlds: list[str] = [self.db.scope("fuzz-a"), self.db.scope("fuzz-b")]
        self.nodes: list[str] = []
        self.text_nodes = 2  # the two scopes created above have names
        self.intervals: dict[int, tuple[str, str | None]] = {}
        self.touched: set[int] = set()
        self.conn.set_update_hook(self._on_change)
        self.violations: list[dict[str, Any]] = []
        self.counts = {"ok": 0, "refused": 0}
        self.step = 0
        self.clock_tick = 0

    def _on_change(self, _kind: int, _db: str, table: str, rowid: int) -> None:
        if table == "node_state":
            self.touched.add(rowid)

    # ---- operations -----------------------------------------------------------------

    def text(self) -> str:
        return " ".join(self.rng.choice(WORDS) for _ in range(self.rng.randint(1, 6)))

    def when(self) -> str:
        return f"20{self.rng.randint(10, 30)}-{self.rng.randint(1, 12):02d}-{self.rng.randint(1, 28):02d}"

    def pick(self) -> str:
        return self.rng.choice(self.nodes) if self.nodes and self.rng.random() < 0.85 else self.rng.choice(self.worlds)

    def op(self) -> tuple[str, Any]:
        r = self.rng.random()
        db = self.db
        if r < 0.25 or not self.nodes:
            world = self.rng.choice(self.worlds)
            return "write", lambda: self.nodes.append(db.write(self.text(), world=world, valid_at=self.when()))
        if r < 0.30:
            parent = self.rng.choice(self.worlds)
            return "world", lambda: self.worlds.append(db.world(self.text(), parent=parent))
        if r < 0.40:
            target = self.rng.choice(self.nodes)
            return "amend", lambda: self.nodes.append(db.amend(target, self.text(), valid_at=self.when()))
        if r < 0.45:
            return "retire", lambda: db.retire(self.rng.choice(self.nodes), at=self.when())
        if r < 0.48:
            return "retract", lambda: db.retract(self.rng.choice(self.nodes))
        if r < 0.55:
            pid = self.rng.randint(1, 40)
            return "accept", lambda: db.accept_merge(pid)
        if r < 0.58:
            pid = self.rng.randint(1, 40)
            return "reject", lambda: db.reject_merge(pid)
        if r < 0.62:
            edges = [r[0].hex() for r in self.conn.execute("select id from edge order by random() limit 1")]
            return "unlink", lambda: db.unlink(edges[0] if edges else "00000000")
        if r < 0.65:
            return "alias", lambda: db.add_alias(self.rng.choice(self.nodes), self.text())
        if r < 0.67:  # hostile: bad ids, bad times, unknown types, values of the wrong type
            bad = self.rng.choice(["zz", "0" * 64, "1234", self.rng.choice(self.nodes)[:6], None, 42, b"\xff"])
            hostile = self.rng.choice(
                [
                    lambda: db.link(bad, self.pick(), self.rng.choice(EDGE_TYPES + ("nope",))),
                    lambda: db.write(bad, scope="fuzz-a"),
                    lambda: db.write("x", scope="fuzz-a", valid_at=bad),
                    lambda: db.read(bad),
                    lambda: db.link(self.pick(), self.pick(), "refers_to", props=bad),
                ]
            )
            return "bad", hostile
        if r < 0.71:  # several edges in one call, all or nothing
            triples = [(self.pick(), self.pick(), self.rng.choice(EDGE_TYPES)) for _ in range(self.rng.randint(2, 4))]
            return "link_many", lambda: db.link_many(triples)
        if r < 0.74:
            world = self.rng.choice(self.worlds)
            records = [{"text": self.text(), "world": world, "valid_at": self.when()} for _ in range(3)]
            return "write_many", lambda: self.nodes.extend(db.write_many(records))
        if r < 0.77:  # a batch in which one inner call is refused and caught
            return "batch", self.batch_with_a_refusal
        edge_type = self.rng.choice(EDGE_TYPES)
        src, dst = self.pick(), self.pick()
        return f"link:{edge_type}", lambda: db.link(src, dst, edge_type, valid_at=self.when())

    def batch_with_a_refusal(self) -> None:
        db = self.db
        with db.batch():
            written = db.write(self.text(), world=self.rng.choice(self.worlds), valid_at=self.when())
            try:
                db.link(self.pick(), self.pick(), self.rng.choice(EDGE_TYPES))
            except WorldDBError:
                pass  # a refusal that wrote nothing lets the batch commit; one that wrote poisons it
            db.link(written, self.pick(), "refers_to")
        self.nodes.append(written)

    # ---- checks -----------------------------------------------------------------------

    def fingerprint(self) -> tuple[Any, ...]:
        maxes = tuple(
            self.conn.execute(f"select coalesce(max(rowid), 0) from {t}").fetchone()[0]  # noqa: S608
            for t in ("node", "edge", "merge_proposal", "root_log")
        )
        decided = self.conn.execute("select count(*) from merge_proposal where status != 'pending'").fetchone()[0]
        aliases = self.conn.execute("select count(*) from alias").fetchone()[0]
        return (self.db.root(), maxes, decided, aliases)

    def bad(self, invariant: str, detail: str) -> None:
        self.violations.append({"step": self.step, "invariant": invariant, "detail": detail})

    def check_step(self, before_max: tuple[int, int]) -> None:
        node_max, edge_max = before_max
        for nid, raw, body in self.conn.execute("select nid, id, body from node where nid > ?", (node_max,)):
            if body is not None and node_id(body) != raw:
                self.bad("hash", f"node {nid} does not hash to its id")
            if body is not None and (json.loads(body).get("name") or json.loads(body).get("content")):
                self.text_nodes += 1
        for eid, raw, edge_type, src, dst, valid_at, props in self.conn.execute(
            "select e.eid, e.id, e.type, a.id, b.id, e.valid_at, e.props from edge as e "
            "join node as a on a.nid = e.src join node as b on b.nid = e.dst where e.eid > ?",
            (edge_max,),
        ):
            if edge_id(edge_body(edge_type, src.hex(), dst.hex(), valid_at, props)) != raw:
                self.bad("hash", f"edge {eid} does not hash to its id")
        # Every node_state row this step touched (SQLite's update hook reports each one, whatever
        # code wrote it) against its interval after the previous step.
        touched, self.touched = self.touched, set()
        for nid in touched:
            row = self.conn.execute("select valid_at, invalid_at from node_state where nid = ?", (nid,)).fetchone()
            if row is None:
                continue  # inserted, then rolled back
            old = self.intervals.get(nid)
            if old is not None and (row[0] != old[0] or (old[1] is not None and (row[1] is None or row[1] > old[1]))):
                self.bad("validity", f"node {nid}: [{old[0]}, {old[1]}) became [{row[0]}, {row[1]})")
            self.intervals[nid] = (row[0], row[1])
        orphan = self.conn.execute(
            "select count(*) from merge_proposal as m where not exists (select 1 from node where nid = m.a) "
            "or not exists (select 1 from node where nid = m.b)"
        ).fetchone()[0]
        if orphan:
            self.bad("merge", f"{orphan} proposals point at missing nodes")
        asym = self.conn.execute(
            "select count(*) from edge as e where e.type = 'same_as' and e.invalid_at is null and not exists "
            "(select 1 from edge as f where f.type = 'same_as' and f.src = e.dst and f.dst = e.src "
            "and f.invalid_at is null)"
        ).fetchone()[0]
        if asym:
            self.bad("merge", f"{asym} same_as edges have no mirror")
        unaccepted = self.conn.execute(
            "select count(*) from edge as e where e.type = 'same_as' and not exists (select 1 from merge_proposal "
            "as m where m.status = 'accepted' and m.a = min(e.src, e.dst) and m.b = max(e.src, e.dst))"
        ).fetchone()[0]
        if unaccepted:
            self.bad("merge", f"{unaccepted} same_as edges without an accepted proposal")
        fts = self.conn.execute("select count(*) from node_fts_docsize").fetchone()[0]
        vec = self.conn.execute("select count(*) from node_vec").fetchone()[0]
        # a vector per node with text, plus a composed one per textless world above them
        composed = self.conn.execute("select count(*) from world_vec where anchor is null").fetchone()[0]
        if not self.text_nodes == fts == vec - composed:
            self.bad(
                "indexes",
                f"text nodes {self.text_nodes}, fts rows {fts}, vector rows {vec} "
                f"({composed} composed for worlds without text)",
            )

    def full_check(self) -> None:
        report = self.db.verify(deep=True)
        for v in report.violations:
            self.bad(v.invariant, v.detail)

    def run(self, ops: int, full_every: int) -> None:
        started = time.perf_counter()
        for self.step in range(1, ops + 1):
            name, action = self.op()
            before = self.fingerprint()
            before_max = (before[1][0], before[1][1])
            try:
                action()
                self.counts["ok"] += 1
            except WorldDBError:
                self.counts["refused"] += 1
                if self.fingerprint() != before:
                    self.bad("atomicity", f"refused {name} changed the store")
            except Exception as exc:  # noqa: BLE001 - anything else escaping is itself a finding
                self.bad("error-type", f"{name} raised {type(exc).__name__}: {exc}")
            self.check_step(before_max)
            if self.step % full_every == 0:
                self.full_check()
                rate = self.step / (time.perf_counter() - started)
                progress(f"  step {self.step:,}/{ops:,} ({rate:,.0f} ops/s), violations {len(self.violations)}")
        self.full_check()


def run_fuzz(ops: int, seed: int, path: str, full_every: int = 1000) -> dict[str, Any]:
    """Run the fuzz and return counts and violations."""
    remove_store(path)
    fuzzer = Fuzzer(path, seed)
    started = time.perf_counter()
    fuzzer.run(ops, full_every)
    stats = fuzzer.db.stats()
    fuzzer.db.close()
    return {
        "benchmark": "fuzz",
        "params": {"ops": ops, "seed": seed, "full_every": full_every},
        "env": environment(),
        "seconds": round(time.perf_counter() - started, 1),
        "operations": fuzzer.counts,
        "store": {k: stats[k] for k in ("nodes", "edges", "worlds", "pending_merges", "open_contradictions")},
        "violations": fuzzer.violations[:200],
        "violation_count": len(fuzzer.violations),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Reconciler fuzz with invariant checks after every step")
    parser.add_argument("--ops", type=int, default=100_000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--full-every", type=int, default=1000, help="steps between full verify() runs")
    parser.add_argument("--path", default="/tmp/worlddb-fuzz.db")
    parser.add_argument("--json", dest="out")
    args = parser.parse_args(argv)
    result = run_fuzz(args.ops, args.seed, args.path, args.full_every)
    emit(result, args.out)
    return 1 if result["violation_count"] else 0


if __name__ == "__main__":
    sys.exit(main())
