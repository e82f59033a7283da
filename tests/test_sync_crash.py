"""Crash safety of sync (issue 26): a receiver SIGKILLed during ``apply_changes`` is as it was, or fully applied.

A store and its replica wrote apart; the change set from the store (a few thousand records: new memories
in three scopes, edges, a close that tightens one the receiver holds, and a purge of a memory the receiver
holds) is applied by a forked child that is killed at chosen points: by a hook inside the apply (the first
adopted node, half-way through the nodes, among the edges, in the Merkle update, just before the commit,
after the commit before the purge's wipe, between the wipe's VACUUM and its checkpoint) and by timers at
fractions of a whole apply's time. The receiver is then opened again and must have exactly the rows it
had before or exactly the rows a complete apply leaves (``table_digest``), verify, and, once applied, hold
no byte of the purged memory (the open finishes a wipe the kill interrupted).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import os
import shutil
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from worlddb_lite import WorldDB
from worlddb_lite.ops import maintenance
from worlddb_lite.sync import rows as sync_rows
from worlddb_lite.sync.replicas import SWEPT_UPTO
from worlddb_lite.write.reconciler import Transaction

from .conftest import START, FakeClock, FakeEmbedder, child_exit_code, table_digest

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="the receiver is a forked child")

MEMORIES = 3000  # enough records that an apply takes a second or two: the timed kills land inside it
SECRET = "secret4711"
RECEIVER_OFFSET = dt.timedelta(seconds=7)  # the receiver's own clock (a separate device)
FILES = ("", "-wal", "-shm")


def _open(path: Path) -> WorldDB:
    # the same clock every time: a complete apply writes the same rows (sync_peer.synced_at) in every trial
    return WorldDB(path, embedder=FakeEmbedder(), clock=FakeClock(start=START + RECEIVER_OFFSET))


def _digest(db: WorldDB) -> dict[str, Any]:
    """``table_digest`` without the random draws an apply makes: meta's vec_epoch (a fresh mark each VACUUM
    of a purge's wipe sets, which the kept vector index names too) and each change's stamp
    (change_log.stamp); and without the sweep's mark, which moves on after the commit, once the sweep ran
    (a kill before leaves that sweep to the next apply)."""
    out = table_digest(db)
    meta = sorted(db.sql("select key, value from meta where key not in ('vec_epoch', ?)", (SWEPT_UPTO,)))
    out["meta"] = (len(meta), hashlib.sha256(repr(meta).encode()).hexdigest())
    log = db.sql("select seq, kind, ref, origin from change_log order by seq")
    out["change_log"] = (len(log), hashlib.sha256(repr(log).encode()).hexdigest())
    kept = db.sql(  # the kept vector index without its epoch (that draw again) and the digest over it
        "select first_seq, last_seq, piece, pieces, dim, rows, nids, parts, parents, types, type_codes, codes, "
        "scales, spread from vec_segment order by seg"
    )
    out["vec_segment"] = (len(kept), hashlib.sha256(repr(kept).encode()).hexdigest())
    return out


def _copy(source: Path, dest: Path) -> None:
    for suffix in FILES:
        Path(f"{dest}{suffix}").unlink(missing_ok=True)
        if Path(f"{source}{suffix}").exists():
            shutil.copy(f"{source}{suffix}", f"{dest}{suffix}")


@dataclass(frozen=True)
class Prepared:
    receiver: Path  # the receiver's files before the apply (closed)
    changes: Path
    before: dict[str, Any]
    after: dict[str, Any]
    seconds: float  # one whole apply, wipe included
    records: int


@pytest.fixture(scope="module")
def prepared(tmp_path_factory: pytest.TempPathFactory) -> Prepared:
    folder = tmp_path_factory.mktemp("sync_crash")
    with WorldDB(folder / "sender.db", embedder=FakeEmbedder(), clock=FakeClock(start=START)) as sender:
        secret = sender.write(f"the alarm code is {SECRET}", scope="ana")
        shared = [sender.write(f"shared note {i}", scope="ana") for i in range(5)]
        sender.replica(folder / "receiver.db")
        with _open(folder / "receiver.db") as receiver:
            receiver.write("a note of the receiver's own", scope="bob")
            receiver.retire(shared[0], at="2025-01-01T00:00:30Z")
        scopes = ["ana", "bob", "work"]
        ids = sender.write_many(
            [{"text": f"note {i} about topic {i % 97}", "scope": scopes[i % 3]} for i in range(MEMORIES)]
        )
        sender.link_many([(ids[i], ids[i + 1], "refers_to") for i in range(0, 200, 2)])
        sender.retire(shared[0], at="2025-01-01T00:00:20Z")  # earlier than the receiver's close: it tightens
        sender.purge(secret)  # the receiver holds it: the tombstone erases it there
        with _open(folder / "receiver.db") as receiver:
            written = sender.changes(folder / "changes.bin", since=receiver.sync_token())
            receiver.checkpoint()
    with _open(folder / "receiver.db") as receiver:
        before = _digest(receiver)
    _copy(folder / "receiver.db", folder / "applied.db")
    with _open(folder / "applied.db") as applied:
        started = time.perf_counter()
        summary = applied.apply_changes(folder / "changes.bin")
        seconds = time.perf_counter() - started
        assert summary["nodes"]["added"] >= MEMORIES and summary["nodes"]["tightened"] >= 1
        assert summary["purged"] and summary["records"] == written["records"]
        after = _digest(applied)
    with _open(folder / "applied.db") as again:  # what an apply leaves is what a reopen reads
        assert _digest(again) == after
    assert before != after
    return Prepared(folder / "receiver.db", folder / "changes.bin", before, after, seconds, written["records"])


def _kill_on(owner: Any, name: str, call: int) -> None:
    """Make ``owner.name`` SIGKILL this process on its ``call``-th call (1 is the first)."""
    original: Callable[..., Any] = getattr(owner, name)
    calls = 0

    def hooked(*args: Any, **kwargs: Any) -> Any:
        nonlocal calls
        calls += 1
        if calls == call:
            os.kill(os.getpid(), signal.SIGKILL)
        return original(*args, **kwargs)

    setattr(owner, name, hooked)


# where the hook kills the child, and what the receiver must then hold
HOOKS = {
    "first adopted node": (Transaction, "adopt_node", 1, "before"),
    "half the nodes": (Transaction, "adopt_node", MEMORIES // 2, "before"),
    "among the edges": (Transaction, "adopt_edge", 50, "before"),
    "in the merkle update": (Transaction, "flush", 1, "before"),
    "just before the commit": (sync_rows, "saw", 1, "before"),
    "after the commit, before the wipe": (maintenance, "finish_wipe", 1, "after"),
    "between the vacuum and the checkpoint": (maintenance, "checkpoint", 1, "after"),
}


def _apply_in_child(path: Path, changes: Path, hook: tuple[Any, str, int] | None) -> tuple[int, int]:
    """Fork a child that applies ``changes`` to the store at ``path``; (its pid, the read end of its pipe)."""
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never return into pytest
        code = 3
        try:
            os.close(read_fd)
            db = _open(path)
            if hook is not None:
                _kill_on(*hook)
            os.write(write_fd, b"ready\n")
            db.apply_changes(changes)
            db.close()
            code = 0
        finally:
            os._exit(code)
    os.close(write_fd)
    return pid, read_fd


def _wait_ready(read_fd: int) -> None:
    assert os.read(read_fd, 16) == b"ready\n", "the child died before it began to apply"


def _check(trial: Path, prepared: Prepared) -> str:
    """The receiver after the kill: 'before' or 'after', or the test fails."""
    with _open(trial) as db:  # the open finishes a purge's wipe a kill interrupted
        digest = _digest(db)
        report = db.verify(deep=True)
        assert report.ok, report.violations
        assert not db.stats()["wipe_pending"]
    assert digest in (prepared.before, prepared.after), [
        k for k in digest if digest[k] != prepared.before[k] and digest[k] != prepared.after[k]
    ]
    outcome = "before" if digest == prepared.before else "after"
    if outcome == "after":
        for suffix in FILES:
            file = Path(f"{trial}{suffix}")
            assert not file.exists() or SECRET.encode() not in file.read_bytes(), f"{SECRET} survives in {file.name}"
    return outcome


@pytest.mark.parametrize("where", list(HOOKS))
def test_a_kill_inside_apply_leaves_the_receiver_as_it_was_or_fully_applied(
    prepared: Prepared, tmp_path: Path, where: str
) -> None:
    owner, name, call, expected = HOOKS[where]
    trial = tmp_path / "trial.db"
    _copy(prepared.receiver, trial)
    pid, read_fd = _apply_in_child(trial, prepared.changes, (owner, name, call))
    try:
        _wait_ready(read_fd)
        assert child_exit_code(pid, f"applying changes (kill {where})") == -signal.SIGKILL, "the hook never ran"
    finally:
        os.close(read_fd)
    assert _check(trial, prepared) == expected
    if expected == "before":  # the receiver takes the same change set again, whole
        with _open(trial) as db:
            db.apply_changes(prepared.changes)
            assert _digest(db) == prepared.after


def _kill_after(pid: int, seconds: float) -> int:
    """SIGKILL the child ``seconds`` from now unless it ended before; its exit code."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        time.sleep(0.005)
    os.kill(pid, signal.SIGKILL)
    return child_exit_code(pid, "applying changes")


# fractions of one whole apply's time in this process; the child, on a loaded machine, is often slower,
# so the later ones are there for kills in the commit and the wipe (and the last for a child that finished)
@pytest.mark.parametrize("fraction", [0.1, 0.4, 0.7, 0.9, 1.05, 1.25, 1.6, 4.0])
def test_a_kill_at_any_time_during_apply_leaves_it_before_or_after(
    prepared: Prepared, tmp_path: Path, fraction: float
) -> None:
    trial = tmp_path / "trial.db"
    _copy(prepared.receiver, trial)
    pid, read_fd = _apply_in_child(trial, prepared.changes, None)
    try:
        _wait_ready(read_fd)
        assert _kill_after(pid, prepared.seconds * fraction) in (0, -signal.SIGKILL)
    finally:
        os.close(read_fd)
    _check(trial, prepared)


def test_the_change_set_is_big_enough_for_the_kills_to_land_inside(prepared: Prepared) -> None:
    assert prepared.records > MEMORIES
    assert prepared.seconds > 0.2, "an apply this quick leaves the timed kills little to hit"
