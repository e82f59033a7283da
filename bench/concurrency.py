"""Concurrency: writer and reader processes on one store file.

    python bench/concurrency.py [--writers 4] [--readers 4] [--seconds 60] [--json OUT]

Writers write memories (one per transaction, every tenth a batch of 8) into their own scope
and a shared one; readers run hybrid recalls, BM25 searches and root checks. Every process
opens its own ``WorldDB`` with the bundled embedder. The store is WAL, writes take
``BEGIN IMMEDIATE`` and wait through SQLite's busy timeout, retried with backoff in one place
(``store.connection.with_retry``), so the claims checked are:

* no error reaches a caller (``database is locked`` / ``StoreBusy`` included): errors must be 0;
* no write is lost: every id a writer was given reads back afterwards;
* readers see consistent states: each root check reads a world's root, its member roots and
  interior edges in one read transaction (a snapshot) and recomputes the root from them;
* ``verify`` passes at the end.

Prints ops/s and P50/P95 latency per kind of operation.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import random
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import emit, environment, percentiles, progress  # noqa: E402

from worlddb_lite import NotFound, WorldDB  # noqa: E402
from worlddb_lite.store.hashing import EMPTY_TREE, edge_leaf, world_root  # noqa: E402
from worlddb_lite.store.merkle import compute_levels  # noqa: E402

WORDS = (
    "garden tea lisbon porto piano violin chess coffee bicycle river mountain train letter "
    "birthday doctor recipe cousin meeting holiday museum"
).split()
SHARED = "shared"


def _sentence(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n))


def _open_and_wait(path: str, seconds: float, ready: Any, go: Any) -> tuple[WorldDB, float]:
    """Open the store, load the model and the vector index, then start with everyone else."""
    db = WorldDB(path, create=False)
    db.nearest("warm up", k=1)
    ready.put(1)
    go.wait()
    return db, time.time() + seconds


def writer(path: str, number: int, seconds: float, ready: Any, go: Any, out: Any) -> None:
    rng = random.Random(number)
    lat: dict[str, list[float]] = {"write": [], "write_many8": []}
    errors: list[str] = []
    acked: list[str] = []
    db, deadline = _open_and_wait(path, seconds, ready, go)
    i = 0
    while time.time() < deadline:
        scope = SHARED if i % 3 == 0 else f"w{number}"
        started = time.perf_counter()
        try:
            if i % 10 == 9:
                ids = db.write_many(
                    [{"text": f"w{number} item {i}.{j}: {_sentence(rng, 8)}", "scope": scope} for j in range(8)]
                )
                lat["write_many8"].append(time.perf_counter() - started)
                acked.extend(ids)
            else:
                acked.append(db.write(f"w{number} item {i}: {_sentence(rng, 10)}", scope=scope))
                lat["write"].append(time.perf_counter() - started)
        except Exception as exc:  # every error is a failure of the claim: record it, keep going
            errors.append(f"{type(exc).__name__}: {exc}")
        i += 1
    db.close()
    out.put({"kind": "writer", "lat": lat, "errors": errors, "acked": acked})


def reader(path: str, number: int, seconds: float, ready: Any, go: Any, out: Any) -> None:
    rng = random.Random(1000 + number)
    lat: dict[str, list[float]] = {"recall": [], "search": [], "root_check": []}
    errors: list[str] = []
    inconsistent = 0
    db, deadline = _open_and_wait(path, seconds, ready, go)
    i = 0
    while time.time() < deadline:
        started = time.perf_counter()
        try:
            kind = ("recall", "search", "root_check")[i % 3]
            if kind == "recall":
                db.recall(_sentence(rng, 3), k=10)
            elif kind == "search":
                db.search(_sentence(rng, 2), k=10)
            else:
                scope = rng.choice([SHARED, *(f"w{n}" for n in range(4))])
                try:
                    world = db._reader.scope_id(scope)
                except NotFound:
                    world = db.root_id  # not written yet
                if not root_recomputes(db, world):
                    inconsistent += 1
            lat[kind].append(time.perf_counter() - started)
        except Exception as exc:
            errors.append(f"{type(exc).__name__}: {exc}\n{traceback.format_exc(limit=3)}")
        i += 1
    db.close()
    out.put({"kind": "reader", "lat": lat, "errors": errors, "inconsistent": inconsistent})


def root_recomputes(db: WorldDB, world: str) -> bool:
    """In one read transaction: the world's stored root equals the root recomputed from its members."""
    conn, store = db._conn, db._store
    with conn:  # a savepoint outside a transaction: one snapshot for every read below
        nid = store.resolve(world)
        row = store.node_row(nid)
        leaves: dict[int, bytes] = {}
        for slot, root in conn.execute(
            "select n.slot, s.root from node as n join node_state as s on s.nid = n.nid where n.parent = ?", (nid,)
        ):
            leaves[int(slot)] = bytes(root)
        for edge in store.edge_rows("where e.world = ?", (nid,)):
            leaves[edge.slot] = edge_leaf(edge.id, edge.state())
    if sorted(leaves) != list(range(len(leaves))) or len(leaves) != row.size:
        return False
    top = compute_levels([leaves[s] for s in range(len(leaves))])[-1][0] if leaves else EMPTY_TREE
    return world_root(row.id, row.state(), top, len(leaves)) == row.root


def run(path: str, writers: int, readers: int, seconds: float) -> dict[str, Any]:
    with WorldDB(path) as db:  # create the store and warm it with a few memories
        db.write_many(
            [{"text": f"seed memory {i}: {_sentence(random.Random(i), 10)}", "scope": SHARED} for i in range(50)]
        )
    ctx = mp.get_context("fork")
    out, ready, go = ctx.Queue(), ctx.Queue(), ctx.Event()
    procs = [ctx.Process(target=writer, args=(path, n, seconds, ready, go, out)) for n in range(writers)]
    procs += [ctx.Process(target=reader, args=(path, n, seconds, ready, go, out)) for n in range(readers)]
    for p in procs:
        p.start()
    for _ in procs:
        ready.get(timeout=300)
    go.set()  # the clock starts once every process has its model and index loaded
    results = [out.get(timeout=seconds + 300) for _ in procs]
    for p in procs:
        p.join()
    lat: dict[str, list[float]] = {}
    errors: list[str] = []
    acked: list[str] = []
    inconsistent = 0
    for r in results:
        for kind, samples in r["lat"].items():
            lat.setdefault(kind, []).extend(samples)
        errors += r["errors"]
        acked += r.get("acked", [])
        inconsistent += r.get("inconsistent", 0)
    with WorldDB(path, create=False) as db:
        lost = 0
        for ref in acked:
            try:
                db.read(ref)
            except NotFound:
                lost += 1
        report = db.verify()
    ops = {kind: {"ops_per_s": round(len(s) / seconds, 1), **percentiles(s)} for kind, s in lat.items() if s}
    return {
        "ops": ops,
        "errors": len(errors),
        "first_errors": errors[:5],
        "writes_acked": len(acked),
        "writes_lost": lost,
        "inconsistent_roots": inconsistent,
        "verify_ok": report.ok,
        "violations": [f"{v.invariant}: {v.detail}" for v in report.violations[:5]],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--writers", type=int, default=4)
    parser.add_argument("--readers", type=int, default=4)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--path", help="store file (default: a temporary one)")
    parser.add_argument("--json", help="also write the result here")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="worlddb-conc-") as folder:
        path = args.path or str(Path(folder) / "conc.db")
        progress(f"{args.writers} writers, {args.readers} readers, {args.seconds:g} s on {path}")
        result = run(path, args.writers, args.readers, args.seconds)
    emit({"env": environment(), "params": vars(args), **result}, args.json)
    ok = not result["errors"] and not result["writes_lost"] and not result["inconsistent_roots"] and result["verify_ok"]
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
