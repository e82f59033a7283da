"""Crash safety: SIGKILL a writer at a random moment, then check the file.

    python bench/crash.py --trials 500 [--mode write|ingest|consolidate|purge|mixed] [--seed 0] [--json OUT]

Each trial forks a child that writes continuously to a store and acknowledges each committed
write on a pipe, kills it with SIGKILL after a random delay, and checks what is left:

* ``pragma integrity_check`` is ok and ``WorldDB.verify(deep=True)`` passes (every logged root replays);
* every acknowledged write is there (``write``: each memory reads back with its text; an
  amend's new version supersedes the old one);
* ``ingest``: every acknowledged conversation has all its turns, and the one in flight has all
  or none (a conversation is one transaction);
* ``consolidate``: the queue of a deferred ingest is drained one item per transaction; every
  acknowledged item is done, and a turn whose item is not done has no extracted edges at all.
* ``purge``: memories holding a secret each are written and purged in turn. Every acknowledged
  purge, and any purge in flight that committed, leaves its secret in no byte of the files once
  the store has been opened again (a kill between the erasure and the end of its VACUUM and
  checkpoint leaves the store marked, and the next open finishes the wipe); a purge that did not
  commit leaves its memory whole, and no mark is left after that open.

The child is forked (no interpreter start-up), writes with caller-supplied vectors (the vector
lane and world composition run; no model load), and the store keeps its normal pragmas
(WAL, ``synchronous = normal``): SIGKILL loses no committed transaction there, only power
loss could, and this bench does not simulate that.
"""

from __future__ import annotations

import argparse
import os
import random
import select
import shutil
import signal
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import apsw
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import emit, environment, progress  # noqa: E402

from worlddb_lite import NotFound, WorldDB  # noqa: E402
from worlddb_lite.write.conversation import DEFAULT_EXTRACTOR, ConversationIn, SessionIn, TurnIn  # noqa: E402

DIM = 16
MODES = ("write", "ingest", "consolidate", "purge")
TURNS = 12
PEOPLE = ["Ana", "Ben", "Caro", "Dev"]
PLACES = ["Lisbon", "Porto", "Berlin", "Oslo", "Kyoto", "Lima"]
WORK = ["Google", "Acme", "Initech", "Globex"]


def _vector(rng: random.Random) -> list[float]:
    return [rng.uniform(-1, 1) for _ in range(DIM)]


def conversation(k: int) -> ConversationIn:
    """A small conversation the rule extractor finds entities and facts in."""
    rng = random.Random(k)
    turns = []
    for t in range(TURNS):
        who = PEOPLE[t % 2]
        choice = rng.random()
        if choice < 0.3:
            text = f"I live in {rng.choice(PLACES)} now, conversation {k} turn {t}"
        elif choice < 0.6:
            text = f"I work at {rng.choice(WORK)} since last year ({k}/{t})"
        else:
            text = f"We talked about {rng.choice(PLACES)} and {rng.choice(PEOPLE)} again ({k}/{t})"
        turns.append(TurnIn(text, speaker=who))
    return ConversationIn(f"conv-{k}", [f"user-{k % 3}"], [SessionIn("s1", "2024-03-01", turns)])


# ---- children (forked; they never return) ----------------------------------------------------


def _child(mode: str, path: str, fd: int, seed: int) -> None:
    rng = random.Random(seed)

    def ack(line: str) -> None:
        os.write(fd, (line + "\n").encode())

    db = WorldDB(path, embedder=None, dim=DIM, create=False)
    ack("ready")
    i = 0
    if mode == "write":
        last: str | None = None
        while True:
            roll = rng.random()
            if roll < 0.15 and last is not None:
                text = f"amended memory {i} of trial {seed}"
                new = db.amend(last, text)
                ack(f"a {last} {new} {text}")
                last = new
            elif roll < 0.3:
                texts = [f"batch memory {i}.{j} of trial {seed}" for j in range(8)]
                ids = db.write_many(
                    [{"text": t, "scope": f"s{j % 3}", "vector": _vector(rng)} for j, t in enumerate(texts)]
                )
                for ref, text in zip(ids, texts, strict=True):
                    ack(f"w {ref} {text}")
            else:
                text = f"memory {i} of trial {seed}"
                last = db.write(text, scope=f"s{i % 3}", vector=_vector(rng))
                ack(f"w {last} {text}")
            i += 1
    elif mode == "ingest":
        k = 0
        while True:
            db.ingest(conversation(k), extractor=DEFAULT_EXTRACTOR)
            ack(f"c {k}")
            k += 1
    elif mode == "purge":
        while True:
            secret = _secret(seed, i)
            ref = db.write(f"memory {i} holds {secret}", scope=f"s{i % 3}", vector=_vector(rng))
            ack(f"w {ref} {secret}")
            db.purge(ref)
            ack(f"p {ref} {secret}")
            i += 1
    else:
        while db.consolidate(DEFAULT_EXTRACTOR, only="queue", limit=1).queue:
            i += 1
            ack(f"d {i}")
        ack("empty")
        time.sleep(60)


def _secret(seed: int, i: int) -> str:
    """A word no other memory holds (lower case: the full-text index keeps terms folded)."""
    return f"zq{seed:x}x{i}qz"


# ---- checks -------------------------------------------------------------------------------


def check(mode: str, path: str, acks: list[str], queued: int) -> list[str]:
    """What is wrong with the store after the kill (empty: nothing)."""
    problems: list[str] = []
    conn = apsw.Connection(path)
    try:
        lines = [r[0] for r in conn.execute("pragma integrity_check")]
        if lines != ["ok"]:
            problems.append(f"integrity_check: {lines[:3]}")
            return problems
    finally:
        conn.close()
    with WorldDB(path, embedder=None, dim=DIM, create=False) as db:
        report = db.verify(deep=True)  # deep: every logged root replays from the history too
        problems += [f"verify {v.invariant}: {v.detail}" for v in report.violations[:5]]
        if mode == "write":
            problems += _check_writes(db, acks)
        elif mode == "ingest":
            problems += _check_ingest(db, acks)
        elif mode == "purge":
            problems += _check_purges(db, acks)
        else:
            problems += _check_drain(db, acks, queued)
    if mode == "purge":  # read once every connection has closed: the main file is all there is
        problems += _check_purged_bytes(path, acks)
    return problems


def _check_writes(db: WorldDB, acks: list[str]) -> list[str]:
    problems = []
    for line in acks:
        kind, rest = line.split(" ", 1)
        try:
            if kind == "w":
                ref, text = rest.split(" ", 1)
                node = db.read(ref)
                if node.content != text:
                    problems.append(f"acknowledged write {ref[:12]} reads back {node.content!r}")
            elif kind == "a":
                old, new, text = rest.split(" ", 2)
                if db.read(new).content != text or new not in db.read(old).superseded_by:
                    problems.append(f"acknowledged amend {old[:12]} -> {new[:12]} is not there")
        except NotFound:
            problems.append(f"acknowledged {line[:80]!r} is missing")
    return problems


def _check_ingest(db: WorldDB, acks: list[str]) -> list[str]:
    acked = {int(line.split()[1]) for line in acks if line.startswith("c ")}
    counts = {
        str(k): int(n)
        for k, n in db._conn.execute(
            "select json_extract(body, '$.props.conversation'), count(*) from node where type = 'Turn' group by 1"
        )
    }
    problems = [
        f"conversation {k} has {n} of {TURNS} turns (not all or nothing)" for k, n in counts.items() if n != TURNS
    ]
    problems += [f"acknowledged conversation {k} is missing" for k in acked if f"conv-{k}" not in counts]
    return problems


def _check_purges(db: WorldDB, acks: list[str]) -> list[str]:
    """Each written memory is whole or purged (purged if its purge was acknowledged), and no wipe is left pending."""
    purged = {line.split()[1] for line in acks if line.startswith("p ")}
    problems = []
    for line in acks:
        if line.startswith("w "):
            _, ref, secret = line.split()
            try:
                node = db.read(ref)
            except NotFound:
                problems.append(f"acknowledged write {ref[:12]} is missing")
                continue
            if ref in purged and not node.purged:
                problems.append(f"acknowledged purge of {ref[:12]} did not land")
            elif not node.purged and secret not in (node.content or ""):
                problems.append(f"memory {ref[:12]} is neither whole nor purged: {node.content!r}")
    if db.stats()["wipe_pending"]:
        problems.append("a purge's wipe is still pending after the store was opened again")
    return problems


def _check_purged_bytes(path: str, acks: list[str]) -> list[str]:
    """No byte of the store's files holds the secret of a memory that reads as purged."""
    data = b"".join(Path(path + suffix).read_bytes().lower() for suffix in ("", "-wal") if Path(path + suffix).exists())
    with WorldDB(path, embedder=None, dim=DIM, create=False) as db:
        gone = [line.split()[1:] for line in acks if line.startswith("w ") and db.read(line.split()[1]).purged]
    return [f"the purged secret of {ref[:12]} is still in the files" for ref, secret in gone if secret.encode() in data]


def _check_drain(db: WorldDB, acks: list[str], queued: int) -> list[str]:
    acked = max([int(line.split()[1]) for line in acks if line.startswith("d ")], default=0)
    done, total = (int(v) for v in db._conn.execute("select count(done_at), count(*) from work_queue").fetchone())  # type: ignore[misc]
    problems = []
    if total != queued:
        problems.append(f"the queue holds {total} items, {queued} were queued")
    if done < acked:
        problems.append(f"{acked} items were acknowledged but only {done} are done")
    half = db._conn.execute(
        "select count(*) from work_queue as q join edge as e on e.src = q.turn or e.dst = q.turn "
        "where q.done_at is null and e.type = 'refers_to'"
    ).fetchone()[0]  # type: ignore[index]
    if half:
        problems.append(f"{half} refers_to edges touch turns whose item is not done (half an item landed)")
    return problems


# ---- trials -------------------------------------------------------------------------------


def template(mode: str, folder: Path) -> tuple[Path, int]:
    """A closed store file each trial copies: empty, or (consolidate) a deferred ingest to drain."""
    path = folder / f"template-{mode}.db"
    queued = 0
    with WorldDB(path, embedder=None, dim=DIM) as db:
        if mode == "ingest":
            db.ingest(conversation(10_000), extractor=DEFAULT_EXTRACTOR)  # entities exist already
        if mode == "consolidate":
            for k in range(16):
                db.ingest(conversation(k), deferred=True)
            queued = int(db._conn.execute("select count(*) from work_queue").fetchone()[0])  # type: ignore[index]
    return path, queued


def trial(mode: str, source: Path, queued: int, folder: Path, rng: random.Random, max_delay: float) -> dict[str, Any]:
    path = folder / "trial.db"
    for suffix in ("", "-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    shutil.copy(source, path)
    read_fd, write_fd = os.pipe()
    seed = rng.randrange(1 << 30)
    pid = os.fork()
    if pid == 0:  # the child: write until killed; never return into the parent's code
        os.close(read_fd)
        try:
            _child(mode, str(path), write_fd, seed)
        finally:
            os._exit(3)
    os.close(write_fd)
    buffer = b""
    while b"\n" not in buffer:  # wait until the child has opened the store
        chunk = os.read(read_fd, 65536)
        if not chunk:
            break
        buffer += chunk
    delay = rng.uniform(0, max_delay)
    deadline = time.perf_counter() + delay
    while (left := deadline - time.perf_counter()) > 0:  # drain the pipe so the child never blocks on it
        ready, _, _ = select.select([read_fd], [], [], left)
        if ready:
            buffer += os.read(read_fd, 65536)
    os.kill(pid, signal.SIGKILL)
    _, status = os.waitpid(pid, 0)
    while chunk := os.read(read_fd, 65536):  # what it acknowledged before dying
        buffer += chunk
    os.close(read_fd)
    lines = buffer.decode().splitlines()
    complete = lines if buffer.endswith(b"\n") else lines[:-1]  # a torn last line was not acknowledged
    acks = [line for line in complete if line not in ("ready", "empty")]
    exited_early = not (os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL)
    problems = check(mode, str(path), acks, queued)
    if exited_early:
        problems.append(f"the child ended before the kill (status {status})")
    return {"acks": len(acks), "delay_s": round(delay, 3), "problems": problems}


def run(trials: int, mode: str, seed: int, max_delay: float, folder: Path, say: Any = None) -> dict[str, Any]:
    """Run ``trials`` kills (modes in turn for ``mixed``); the result counts failures per mode."""
    rng = random.Random(seed)
    modes = MODES if mode == "mixed" else (mode,)
    templates = {m: template(m, folder) for m in modes}
    per: dict[str, dict[str, Any]] = {m: {"trials": 0, "failures": 0, "acks": []} for m in modes}
    failures: list[dict[str, Any]] = []
    started = time.perf_counter()
    for n in range(trials):
        m = modes[n % len(modes)]
        result = trial(m, *templates[m], folder, rng, max_delay)
        stats = per[m]
        stats["trials"] += 1
        stats["acks"].append(result["acks"])
        if result["problems"]:
            stats["failures"] += 1
            failures.append({"trial": n, "mode": m, **result})
        if say is not None and (n + 1) % 25 == 0:
            say(f"{n + 1}/{trials} trials, {len(failures)} failures")
    summary = {
        m: {
            "trials": s["trials"],
            "failures": s["failures"],
            "acks_median": float(np.median(s["acks"])) if s["acks"] else 0.0,
            "acks_max": max(s["acks"], default=0),
        }
        for m, s in per.items()
    }
    return {
        "trials": trials,
        "failures": len(failures),
        "per_mode": summary,
        "first_failures": failures[:5],
        "seconds": round(time.perf_counter() - started, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=100)
    parser.add_argument("--mode", choices=[*MODES, "mixed"], default="mixed")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--max-delay", type=float, default=0.4, help="kill within this many seconds of start")
    parser.add_argument("--json", help="also write the result here")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="worlddb-crash-") as folder:
        result = run(args.trials, args.mode, args.seed, args.max_delay, Path(folder), progress)
    emit({"env": environment(), "params": vars(args), **result}, args.json)
    sys.exit(1 if result["failures"] else 0)


if __name__ == "__main__":
    main()
