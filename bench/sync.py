"""Sync (issue 26): the time and bytes to sync two replicas of a 100k-memory store that diverged by D each way.

    python bench/sync.py [--size 100000] [--diverge 1000,10000,50000] [--store-dir DIR] [--json OUT]
    python bench/sync.py --smoke            # 2,000 base memories, diverge 50,100: the smoke test's run
    python bench/sync.py --diverge 10000 --profile OUT.prof   # cProfile of the timed a.sync(b) (slower)

Target (issue 26): proportional to the difference, not to the store; 1k changes under a second.

The base: ``--size`` turns built as ``bench/recall_scale.py`` builds them (its ``build``: LoCoMo turns and
BEAM-100K messages, ingested in the scope ``scale``), cached in ``--store-dir`` under recall_scale's name
(``recall_scale-<size>-v<BUILD>.db``: a copy of recall_scale's cache there is reused; a file of an older
schema is migrated once when first opened).

The pair: side A is a copy of the base (it keeps the base's store id), side B is ``A.replica()``, so B
counts A's rows as seen. Their first ``sync`` is timed (``first_sync``: ~0 records for a base written at
schema 10 or later; a migrated base's change log starts empty, so its first exchange sends everything,
sync/replicas.py). Then one memory is written on each side and synced (``settle``: each side has now seen a
change of the other; for a migrated base this exchange sends everything again, since each side had seen
change 0 of the other, which a token cannot tell from having seen nothing; synced again while a sync
still sends something, at most SETTLE_ROUNDS times), and an idle sync is timed (``idle_sync``: should send
nothing). The pair is closed (checkpointed) and kept for every D.

For each D of ``--diverge``: the pair's files are copied twice (two pairs), D new turns are ingested on each
side of the first pair (conversations of 500 turns in sessions of 25, dated after the base; distinct texts:
recall_scale's pool of turns with the side and a number appended, side A from the pool's start, LoCoMo's
short turns, side B from its middle, LoCoMo's last turns then BEAM's longer messages, so below ~10k the two
directions differ in text length and B's writes and change sets are the bigger; timed apart, ``writes``:
these are not the sync) and the second pair gets copies of those files. Then
* ``sync``: ``a.sync(b)`` on the first pair, its wall time; ``pull`` (B to A) and ``push`` (A to B) with
  the bytes of each change set, its records and what was added; ``converged`` and whether the roots are
  equal; then ``again``: a second ``a.sync(b)`` (what a side adopted may travel back once, sync/replicas.py),
  and ``quiet``: a third (sends nothing: its time says what a sync costs with no change at this size);
* ``directions``: on the second pair, each direction by hand, as ``sync`` does it: ``changes`` (the
  sender reads and compresses its change set, ``changes_s``) and ``apply_changes`` (the receiver checks
  and applies it, ``apply_s``), bytes and records;
* ``per_1k``: seconds and bytes per 1,000 memories sent, per direction and for the whole sync.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import shutil
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import apsw

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from common import emit, environment, progress, remove_store, store_bytes  # noqa: E402
from recall_scale import BUILD, SCOPE, START_DAY, build, pool_of_turns  # noqa: E402

from worlddb_lite import WorldDB  # noqa: E402
from worlddb_lite.sync import rows as sync_rows  # noqa: E402
from worlddb_lite.write.conversation import ConversationIn, SessionIn, TurnIn  # noqa: E402

TURNS_PER_SESSION, TURNS_PER_CONVERSATION = 25, 500  # as recall_scale.py writes the base
SETTLE_ROUNDS = 4  # syncs of the pair at most before the idle one (two suffice: one writes, one echoes)


def session_days(base_size: int, count: int) -> list[int]:
    """Days (since the epoch) of a side's new sessions: after the base's last session (recall_scale dates
    one a day from START_DAY), spread evenly up to yesterday (a memory cannot be from the future)."""
    first = START_DAY + -(-base_size // TURNS_PER_SESSION) + 1
    days = max(int(time.time() // 86400) - first, 1)
    sessions = -(-count // TURNS_PER_SESSION)
    return [first + i * days // sessions for i in range(sessions)]


def new_turns(
    side: str, count: int, label: str, pool: list[tuple[str, str]], base_size: int
) -> Iterator[ConversationIn]:
    """``count`` turns for one side, none equal to a base turn or to the other side's, as conversations."""
    days = session_days(base_size, count)
    sessions: list[SessionIn] = []
    turns: list[TurnIn] = []
    number = 0
    offset = 0 if side == "a" else len(pool) // 2  # the sides start at different places of the pool
    for i in range(count):
        speaker, text = pool[(offset + i) % len(pool)]
        turns.append(TurnIn(text=f"{text.rstrip()} (noted on device {side.upper()}, {i + 1})", speaker=speaker))
        if len(turns) == TURNS_PER_SESSION or i == count - 1:
            day = days[i // TURNS_PER_SESSION]
            date = time.strftime("%Y-%m-%dT12:00:00Z", time.gmtime(day * 86400))
            sessions.append(SessionIn(f"s{len(sessions)}", date, turns))
            turns = []
        if len(sessions) * TURNS_PER_SESSION >= TURNS_PER_CONVERSATION or (i == count - 1 and sessions):
            yield ConversationIn(f"sync-{label}-{side}-{number}", [SCOPE], sessions)
            sessions, number = [], number + 1


def write_side(
    db: WorldDB, side: str, count: int, label: str, pool: list[tuple[str, str]], base_size: int
) -> dict[str, Any]:
    started, written = time.perf_counter(), 0
    for conversation in new_turns(side, count, label, pool, base_size):
        written += len(db.ingest(conversation))
    seconds = time.perf_counter() - started
    return {"memories": written, "seconds": round(seconds, 2), "per_s": round(written / seconds, 1)}


def brief(direction: dict[str, Any]) -> dict[str, Any]:
    """One direction of a sync's result without its long lists (the worlds' roots, the purged ids)."""
    return {k: v for k, v in direction.items() if k not in ("worlds", "purged")}


def timed_sync(a: WorldDB, b: WorldDB, profile: cProfile.Profile | None = None) -> dict[str, Any]:
    started = time.perf_counter()
    if profile is not None:
        profile.enable()
    try:
        result = a.sync(b)
    finally:
        if profile is not None:
            profile.disable()
    seconds = time.perf_counter() - started
    return {
        "seconds": round(seconds, 3),
        "pull": brief(result["pull"]),
        "push": brief(result["push"]),
        "records": result["pull"]["records"] + result["push"]["records"],
        "bytes": result["pull"]["bytes"] + result["push"]["bytes"],
        "converged": result["converged"],
        "roots_equal": a.root() == b.root(),
    }


def one_way(sender: WorldDB, receiver: WorldDB) -> dict[str, Any]:
    """One direction by hand: the sender's ``changes`` for the receiver's token, then ``apply_changes``."""
    buffer = io.BytesIO()
    started = time.perf_counter()
    written = sender.changes(buffer, since=receiver.sync_token())
    made = time.perf_counter() - started
    started = time.perf_counter()
    applied = receiver.apply_changes(buffer.getvalue())
    done = time.perf_counter() - started
    return {
        "records": written["records"],
        "bytes": written["bytes"],
        "changes_s": round(made, 3),
        "apply_s": round(done, 3),
        "seconds": round(made + done, 3),
        "nodes": applied.get("nodes"),
        "edges": applied.get("edges"),
        "roots_agree": applied["roots_agree"],
    }


def per_1k(seconds: float, size: int, memories: int) -> dict[str, float]:
    thousands = max(memories, 1) / 1000
    return {"s_per_1k": round(seconds / thousands, 3), "kb_per_1k": round(size / 1024 / thousands, 1)}


def copy_pair(pair: tuple[Path, Path], folder: Path, name: str) -> tuple[Path, Path]:
    """Copies of the (closed, checkpointed) pair's files; each copy keeps its file's store id and peers."""
    out = []
    for side, source in zip("ab", pair, strict=True):
        target = folder / f"{name}-{side}.db"
        remove_store(str(target))
        shutil.copyfile(source, target)
        out.append(target)
    return out[0], out[1]


def make_pair(
    base: Path, folder: Path, pool: list[tuple[str, str]], base_size: int
) -> tuple[tuple[Path, Path], dict[str, Any]]:
    """Side A (a copy of the base) and B (A's replica), synced until each has seen the other's changes."""
    a_path = folder / "pair-a.db"
    b_path = folder / "pair-b.db"
    for path in (a_path, b_path):
        remove_store(str(path))
    shutil.copyfile(base, a_path)
    out: dict[str, Any] = {}
    reader = apsw.Connection(str(a_path), flags=apsw.SQLITE_OPEN_READONLY)
    out["log_complete"] = sync_rows.log_is_complete(reader)  # False: a file migrated from before version 10
    reader.close()
    with WorldDB(str(a_path), create=False) as a:
        started = time.perf_counter()
        a.replica(b_path)
        out["replica_s"] = round(time.perf_counter() - started, 2)
        with WorldDB(str(b_path), create=False) as b:
            progress("first sync of the pair (nothing written apart)")
            out["first_sync"] = timed_sync(a, b)
            progress(f"  {out['first_sync']['records']:,} records, {out['first_sync']['seconds']} s")
            for db, side in ((a, "a"), (b, "b")):
                write_side(db, side, 1, "settle", pool, base_size)
            out["settle"] = [timed_sync(a, b)]
            while out["settle"][-1]["records"] and len(out["settle"]) < SETTLE_ROUNDS:
                out["settle"].append(timed_sync(a, b))  # what a side adopted may be sent back once (sync/replicas.py)
            out["idle_sync"] = timed_sync(a, b)
            progress(f"  settled; idle sync {out['idle_sync']['records']} records, {out['idle_sync']['seconds']} s")
            out["tokens"] = {"a": a.sync_token(), "b": b.sync_token()}
    out["file_bytes"] = store_bytes(str(a_path))
    return (a_path, b_path), out


def diverge(
    pair: tuple[Path, Path],
    folder: Path,
    count: int,
    pool: list[tuple[str, str]],
    base_size: int,
    profile: str | None,
) -> dict[str, Any]:
    first = copy_pair(pair, folder, f"d{count}")
    out: dict[str, Any] = {"writes": {}}
    for side, path in zip("ab", first, strict=True):
        with WorldDB(str(path), create=False) as db:
            progress(f"{count:,}: writing {count:,} turns on side {side.upper()}")
            out["writes"][side] = write_side(db, side, count, str(count), pool, base_size)
    second = copy_pair(first, folder, f"d{count}-by-hand")
    with WorldDB(str(first[0]), create=False) as a, WorldDB(str(first[1]), create=False) as b:
        progress(f"{count:,}: a.sync(b)")
        profiler = cProfile.Profile() if profile else None
        out["sync"] = timed_sync(a, b, profiler)
        if profiler is not None and profile:
            profiler.dump_stats(profile)
        out["again"] = timed_sync(a, b)
        out["quiet"] = timed_sync(a, b)
    with WorldDB(str(second[0]), create=False) as a, WorldDB(str(second[1]), create=False) as b:
        progress(f"{count:,}: each direction by hand")
        pull = one_way(b, a)
        push = one_way(a, b)
        out["directions"] = {"pull_b_to_a": pull, "push_a_to_b": push, "roots_equal": a.root() == b.root()}
    sync = out["sync"]
    out["per_1k"] = {
        "sync": per_1k(sync["seconds"], sync["bytes"], 2 * count),
        "pull_b_to_a": per_1k(pull["seconds"], pull["bytes"], count),
        "push_a_to_b": per_1k(push["seconds"], push["bytes"], count),
    }
    for path in (*first, *second):
        remove_store(str(path))
    progress(
        f"{count:,}: sync {sync['seconds']} s, {sync['bytes']:,} bytes, {sync['records']:,} records, "
        f"converged {sync['converged']}; by hand pull {pull['changes_s']} + {pull['apply_s']} s, "
        f"push {push['changes_s']} + {push['apply_s']} s"
    )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--size", type=int, default=100_000, help="turns in the base store")
    parser.add_argument("--diverge", default="1000,10000,50000", help="new turns on each side, comma-separated")
    parser.add_argument("--seed", type=int, default=0, help="recall_scale's build seed")
    parser.add_argument("--store-dir", default="bench/out/sync", help="where the base is cached and the pairs go")
    parser.add_argument("--smoke", action="store_true", help="2,000 base turns, diverge 50,100: seconds")
    parser.add_argument("--profile", help="write a cProfile of the timed a.sync(b) here (the last D's)")
    parser.add_argument("--json", help="write the result here too")
    args = parser.parse_args()
    if args.smoke:
        args.size, args.diverge = 2_000, "50,100"
    counts = [int(s) for s in args.diverge.split(",") if s.strip()]
    if args.size < 1 or not counts or min(counts) < 1:
        raise SystemExit("sync.py: --size and every --diverge count must be positive")
    folder = Path(args.store_dir)
    folder.mkdir(parents=True, exist_ok=True)
    base = folder / f"recall_scale-{args.size}-v{BUILD}.db"
    out: dict[str, Any] = {"params": vars(args), "base": {"path": str(base)}}
    if not base.exists():
        progress(f"building {args.size:,} turns into {base}")
        out["base"]["build"] = build(base, args.size, args.seed)
    started = time.perf_counter()
    with WorldDB(str(base), create=False) as db:  # a store of an older schema is lifted once, here
        stats = db.stats()
    out["base"].update(
        {"open_s": round(time.perf_counter() - started, 2), "nodes": stats["nodes"], "edges": stats["edges"]}
    )
    out["base"]["file_bytes"] = store_bytes(str(base))
    pool, _, _ = pool_of_turns()
    pair, out["pair"] = make_pair(base, folder, pool, args.size)
    out["diverge"] = {}
    for count in counts:
        out["diverge"][str(count)] = diverge(pair, folder, count, pool, args.size, args.profile)
    for path in pair:
        remove_store(str(path))
    out["env"] = environment()
    emit(out, args.json)


if __name__ == "__main__":
    main()
