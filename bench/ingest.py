"""Ingest benchmark: one turn's write latency as the store grows, and dataset ingest rate.

    python bench/ingest.py [--sizes 1000,10000,100000] [--writes 300] [--json OUT]
    python bench/ingest.py --variants [--repeat 3] [--conversations N] [--json OUT]

Part 1 (System 1): a store is filled through ``conversation.ingest`` with real turn texts
(every LoCoMo turn, cycled, each made unique by its position) in conversations of 25
sessions x 20 turns under 4 scopes, embedded by the bundled model; at each size, ``--writes``
single turns are written one per transaction into a new session, and P50/P95 reported.
Part 2: ``load`` + ``ingest`` of every LoCoMo conversation and of BEAM-100K into fresh
stores (what ``worlddb ingest`` does), as turns/s. The data comes from ``../shared/data``.

``--variants`` instead ingests LoCoMo (every conversation, or the first N) into fresh file
stores five ways: plain, with the encoding gate (default threshold, window and neighbours),
with the gate's session window only (no nearest-neighbour lookup), with the context bridge,
and with the gate and the bridge; the variants take turns ``--repeat`` times (so drift
in the shared machine's load hits them alike) and the fastest run of each counts. It reports
turns/s, the ratio to plain, the share of turns the gate scored below its threshold (their
extraction skipped), the share the bridge gave context, and the facts and entities extracted.
"""

from __future__ import annotations

import argparse
import datetime as dt
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import emit, environment, percentiles, progress, remove_store, store_bytes  # noqa: E402

from worlddb_lite import WorldDB  # noqa: E402
from worlddb_lite.write.conversation import ConversationIn, IngestStats, SessionIn, TurnIn  # noqa: E402
from worlddb_lite.write.gate import EncodingGate  # noqa: E402
from worlddb_lite.write.loaders import load  # noqa: E402

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
TURNS_PER_SESSION = 20
SESSIONS_PER_CONVERSATION = 25
SCOPES = 4


def texts() -> list[str]:
    """Every LoCoMo turn text (the pool the filler cycles through)."""
    return [t.text for c in load(DATA / "locomo" / "locomo10.json", "locomo") for s in c.sessions for t in s.turns]


def fill(db: WorldDB, pool: list[str], start: int, stop: int) -> None:
    """Add turns ``start..stop`` as whole conversations (each its own transaction)."""
    per = TURNS_PER_SESSION * SESSIONS_PER_CONVERSATION
    for first in range(start, stop, per):
        last = min(first + per, stop)
        n = first // per
        sessions = []
        for s_first in range(first, last, TURNS_PER_SESSION):
            day = (s_first // TURNS_PER_SESSION) % 3650
            sessions.append(
                SessionIn(
                    str(s_first),
                    _day(day),
                    [
                        TurnIn(f"{pool[i % len(pool)]} ({i})", "user" if i % 2 else "assistant")
                        for i in range(s_first, min(s_first + TURNS_PER_SESSION, last))
                    ],
                )
            )
        db.ingest(ConversationIn(f"filler-{n}", [f"scope-{n % SCOPES}"], sessions))


def _day(offset: int) -> str:
    """A session date: days after 2015-01-01."""
    return (dt.date(2015, 1, 1) + dt.timedelta(days=offset)).isoformat()


def write_latency(sizes: list[int], writes: int, workdir: Path) -> dict[str, dict[str, object]]:
    """P50/P95 of one turn, one transaction, at each store size.

    ``system1``: the turn stored verbatim, indexed (FTS5, vector) and queued for extraction
    (``deferred``: what the caller waits for); ``inline``: the same with extraction, entity
    resolution and supersession in the same transaction.
    """
    pool = texts()
    path = str(workdir / "latency.db")
    remove_store(path)
    out: dict[str, dict[str, object]] = {}
    have = 0
    with WorldDB(path) as db:
        for size in sizes:
            progress(f"filling to {size:,} turns")
            fill(db, pool, have, size)
            have = size
            timings: dict[str, list[float]] = {"system1": [], "inline": []}
            for i in range(writes):  # the two paths alternate, so drift on a shared machine hits both alike
                kind = "system1" if i % 2 == 0 else "inline"
                turn = ConversationIn(
                    f"probe-{size}",
                    ["scope-0"],
                    [
                        SessionIn(
                            "live", _day(4000), [TurnIn(f"{pool[(size + i) % len(pool)]} [probe {size}.{i}]", "user")]
                        )
                    ],
                )
                started = time.perf_counter()
                db.ingest(turn, deferred=kind == "system1")
                timings[kind].append(time.perf_counter() - started)
            have += writes
            out[str(size)] = {kind: percentiles(t) for kind, t in timings.items()}
            out[str(size)]["file_bytes"] = store_bytes(path)
    return out


def dataset_rate(name: str, path: Path, fmt: str, workdir: Path) -> dict[str, float]:
    """turns/s of load + ingest into a fresh store, as ``worlddb ingest`` does."""
    store = str(workdir / f"{name}.db")
    remove_store(store)
    started = time.perf_counter()
    conversations = load(path, fmt)
    with WorldDB(store) as db:
        for conversation in conversations:
            db.ingest(conversation)
    seconds = time.perf_counter() - started
    turns = sum(c.turn_count for c in conversations)
    return {
        "conversations": len(conversations),
        "turns": turns,
        "seconds": round(seconds, 2),
        "turns_per_s": round(turns / seconds, 1),
        "file_bytes": store_bytes(store),
    }


VARIANTS: dict[str, dict[str, object]] = {
    "plain": {},
    "gate": {"gate": EncodingGate()},
    "gate, window only": {"gate": EncodingGate(neighbours=0)},
    "bridge": {"bridge": True},
    "gate+bridge": {"gate": EncodingGate(), "bridge": True},
}


def variants(workdir: Path, repeat: int, conversations: int | None) -> dict[str, object]:
    """LoCoMo ingested plain, gated, bridged and both: speed ratios and what each step did."""
    data = load(DATA / "locomo" / "locomo10.json", "locomo")[:conversations]
    turns = sum(c.turn_count for c in data)
    best: dict[str, float] = {}
    out: dict[str, dict[str, object]] = {}
    for round_ in range(repeat):
        for name, options in VARIANTS.items():
            progress(f"round {round_ + 1}/{repeat}: {name}")
            store = str(workdir / f"variant-{name}.db")
            remove_store(store)
            stats = IngestStats()
            started = time.perf_counter()
            with WorldDB(store) as db:
                for conversation in data:
                    db.ingest(conversation, stats=stats, **options)  # type: ignore[arg-type]
                seconds = time.perf_counter() - started
                facts = sum(len(db.nodes(world=db.scope(c.scopes[0]), type="Fact", limit=100_000)) for c in data)
                entities = sum(len(db.nodes(world=db.scope(c.scopes[0]), type="Entity", limit=100_000)) for c in data)
            best[name] = min(best.get(name, seconds), seconds)
            out[name] = {
                "turns_per_s": round(turns / best[name], 1),
                "seconds": round(best[name], 3),
                "below_gate_share": round(stats.below_gate / turns, 4),
                "bridged_share": round(stats.bridged / turns, 4),
                "facts": facts,
                "entities": entities,
            }
    for name in out:
        out[name]["speed_vs_plain"] = round(best["plain"] / best[name], 3)  # < 1: slower than plain
    return {
        "dataset": "locomo",
        "conversations": len(data),
        "turns": turns,
        "repeat": repeat,
        "gate": {
            "threshold": EncodingGate().threshold,
            "window": EncodingGate().window,
            "neighbours": EncodingGate().neighbours,
        },
        "variants": out,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="1000,10000,100000", help="store sizes (turns) to time writes at")
    parser.add_argument("--writes", type=int, default=300, help="timed single-turn writes per size")
    parser.add_argument("--skip-datasets", action="store_true", help="only the write-latency part")
    parser.add_argument(
        "--variants", action="store_true", help="only LoCoMo ingested plain / gated / bridged / both (see above)"
    )
    parser.add_argument("--repeat", type=int, default=3, help="--variants: rounds (the fastest of each counts)")
    parser.add_argument("--conversations", type=int, help="--variants: only the first N LoCoMo conversations")
    parser.add_argument("--json", help="also write the result to this file")
    args = parser.parse_args()
    sizes = sorted(int(s) for s in args.sizes.split(",") if s.strip())
    result: dict[str, object]
    if args.variants:
        with tempfile.TemporaryDirectory() as tmp:
            result = {"gate_and_bridge": variants(Path(tmp), max(1, args.repeat), args.conversations)}
        result["env"] = environment()
        emit(result, args.json)
        return
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        result = {"write_latency": write_latency(sizes, args.writes, work)}
        if not args.skip_datasets:
            progress("LoCoMo")
            result["locomo"] = dataset_rate("locomo", DATA / "locomo" / "locomo10.json", "locomo", work)
            progress("BEAM-100K")
            result["beam_100k"] = dataset_rate("beam", DATA / "beam" / "beam_100K.tar.xz", "beam", work)
    result["env"] = environment()
    emit(result, args.json)


if __name__ == "__main__":
    main()
