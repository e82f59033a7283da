"""write/queue.py: deferred extraction survives a killed process and processes each turn once."""

from __future__ import annotations

import datetime as dt
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from worlddb_lite import WorldDB
from worlddb_lite.cli import main
from worlddb_lite.text.extract import RuleExtractor
from worlddb_lite.write.conversation import ConversationIn, SessionIn, TurnIn

from .conftest import FakeClock, FakeEmbedder

ROOT = Path(__file__).resolve().parents[1]


def _moves(n: int) -> ConversationIn:
    cities = ["Austin", "Denver", "Boston", "Chicago", "Seattle", "Portland", "Miami", "Dallas"]
    return ConversationIn(
        "c",
        ["me"],
        [
            SessionIn(
                str(i),
                (dt.date(2024, 1, 1) + dt.timedelta(days=i)).isoformat(),
                [TurnIn(f"I moved to {cities[i % len(cities)]}.", "me")],
            )
            for i in range(n)
        ],
    )


def test_deferred_ingest_queues_turns_and_a_drain_writes_the_same_facts(tmp_path: Path) -> None:
    inline = WorldDB(tmp_path / "inline.db", embedder=FakeEmbedder(), clock=FakeClock())
    deferred = WorldDB(tmp_path / "deferred.db", embedder=FakeEmbedder(), clock=FakeClock())
    try:
        inline.ingest(_moves(5))
        deferred.ingest(_moves(5), deferred=True)
        assert deferred.nodes(world=deferred.scope("me"), type="Fact") == [] and deferred.queued() == 5
        deferred.ingest(_moves(5), deferred=True)  # the same conversation again queues nothing new
        assert deferred.queued() == 5
        seen: list[tuple[int, int]] = []
        progress = lambda step, d, t: seen.append((d, t))  # noqa: E731
        assert deferred.consolidate(RuleExtractor(), only="queue", progress=progress).queue == 5
        assert seen[-1] == (5, 5) and deferred.queued() == 0
        assert deferred.consolidate(RuleExtractor()).queue == 0

        def facts(db: WorldDB) -> list[tuple[str | None, str | None]]:
            return sorted(
                (n.content, n.invalid_at) for n in db.nodes(world=db.scope("me"), type="Fact", include_superseded=True)
            )

        assert facts(deferred) == facts(inline)
        assert deferred.verify().ok
    finally:
        inline.close()
        deferred.close()


SLOW_DRAIN = textwrap.dedent("""
    import sys, time
    sys.path.insert(0, {root!r})
    from tests.conftest import FakeEmbedder
    from worlddb_lite import WorldDB
    from worlddb_lite.text.extract import RuleExtractor

    class Slow(RuleExtractor):
        def extract(self, text, **kw):
            time.sleep(0.05)  # slow enough to be killed in the middle of the queue
            return super().extract(text, **kw)

    db = WorldDB({path!r}, embedder=FakeEmbedder())
    db.consolidate(Slow(), only="queue", progress=lambda step, done, total: print(done, flush=True))
""")


@pytest.mark.skipif(sys.platform == "win32", reason="SIGKILL")
def test_a_drain_killed_mid_queue_loses_nothing_and_repeats_nothing(tmp_path: Path) -> None:
    path = str(tmp_path / "queue.db")
    with WorldDB(path, embedder=FakeEmbedder()) as db:
        db.ingest(_moves(40), deferred=True)
    worker = subprocess.Popen(
        [sys.executable, "-c", SLOW_DRAIN.format(root=str(ROOT), path=path)], stdout=subprocess.PIPE, text=True
    )
    assert worker.stdout is not None
    for _ in range(8):  # let it finish a few items, then kill it without warning
        worker.stdout.readline()
    os.kill(worker.pid, signal.SIGKILL)
    worker.wait(timeout=30)
    with WorldDB(path, embedder=FakeEmbedder()) as db:
        left = db.queued()
        assert 0 < left < 40  # some done, some not
        assert db.consolidate(RuleExtractor()).queue == left
        facts = db.nodes(world=db.scope("me"), type="Fact", include_superseded=True)
        assert len(facts) == 40  # one fact per turn: none lost, none written twice
        turns = {n.id for n in db.nodes(world=db.scope("me"), type="Turn")}
        per_turn = [len([e for e in db.neighbours(f.id, types=["refers_to"]).edges if e.dst in turns]) for f in facts]
        assert per_turn == [1] * 40
        done = db.sql("select count(*), count(distinct turn) from work_queue where done_at is not null")
        assert tuple(done[0]) == (40, 40)
        assert db.verify().ok


def test_the_cli_ingests_deferred_and_consolidates(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "chat.jsonl"
    path.write_text(
        '{"session": "1", "date": "2024-03-01", "text": "I live in Austin"}\n'
        '{"session": "2", "date": "2024-04-01", "text": "I moved to Denver"}\n'
    )
    store = str(tmp_path / "store.db")
    assert main(["ingest", store, str(path), "--format", "jsonl", "--scope", "me", "--deferred", "--json"]) == 0
    capsys.readouterr()
    assert main(["consolidate", store, "--limit", "1", "--json"]) == 0
    assert '"pending": 1' in capsys.readouterr().out
    assert main(["consolidate", store]) == 0
    assert "queue: 1/1" in capsys.readouterr().err  # a progress line per step (one line: stderr is no terminal)
    with WorldDB(store) as db:
        assert [n.content for n in db.nodes(world=db.scope("me"), type="Fact")] == ["user lives in: Denver"]


def test_a_background_consolidator_drains_what_is_queued_while_the_caller_writes(tmp_path: Path) -> None:
    from worlddb_lite import Consolidator

    path = str(tmp_path / "bg.db")
    db = WorldDB(path, embedder=FakeEmbedder())
    worker = Consolidator(
        path, RuleExtractor(), interval=0.01, open_store=lambda p: WorldDB(p, embedder=FakeEmbedder())
    ).start()
    try:
        db.ingest(_moves(12), deferred=True)
        deadline = time.monotonic() + 30
        while db.queued() and time.monotonic() < deadline:
            time.sleep(0.02)
        assert db.queued() == 0 and worker.error is None
    finally:
        worker.stop()
    assert worker.processed == 12
    assert len(db.nodes(world=db.scope("me"), type="Fact", include_superseded=True)) == 12
    db.close()


def test_a_turn_purged_while_a_drain_waits_to_write_is_not_extracted(tmp_path: Path) -> None:
    """Another process purges the turn between the drain's choice of it and its transaction."""
    path = str(tmp_path / "race.db")
    db = WorldDB(path, embedder=FakeEmbedder())
    other = WorldDB(path, embedder=FakeEmbedder())
    (turn,) = db.ingest(
        ConversationIn(
            "c",
            ["me"],
            [SessionIn("1", "2024-01-02", [TurnIn("I work at Vexmoor Holdings now", speaker="Quillonzorb")])],
        ),
        deferred=True,
    )
    real = db._writer.transaction
    purges: list[object] = []

    def purge_first() -> object:  # the other process's purge lands before the drain's transaction
        if not purges:
            purges.append(other.purge(turn))
        return real()

    db._writer.transaction = purge_first  # type: ignore[method-assign,assignment]
    try:
        assert db.consolidate(RuleExtractor()).queue == 0
    finally:
        db._writer.transaction = real  # type: ignore[method-assign]
    assert purges and db.queued() == 0
    assert db.nodes(type="Entity") == [] and db.nodes(type="Fact") == []
    assert db.search("Quillonzorb") == [] and db.search("Vexmoor") == []
    other.close()
    db.close()
    raw = b"".join(Path(path + s).read_bytes().lower() for s in ("", "-wal") if Path(path + s).exists())
    assert b"quillonzorb" not in raw and b"vexmoor" not in raw
