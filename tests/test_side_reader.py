"""The side reader: recall's full-text search on a second connection, and every way back to one."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import apsw
import pytest

from worlddb_lite import WorldDB
from worlddb_lite.index.side_reader import SideReader, Unavailable
from worlddb_lite.store import queries

from .conftest import FakeClock, FakeEmbedder, child_exit_code

TEXTS = [
    f"note {i}: the {word} by the harbour"
    for i, word in enumerate(
        ["lighthouse", "ferry", "gull", "anchor", "lighthouse keeper", "tide", "ferry timetable", "rope"]
    )
]


@pytest.fixture
def store(tmp_path: Path, clock: FakeClock) -> Iterator[WorldDB]:
    db = WorldDB(str(tmp_path / "side.db"), embedder=FakeEmbedder(), clock=clock)
    with db.batch():
        for text in TEXTS:
            db.write(text)
    yield db
    db.close()


def _answers(db: WorldDB, query: str) -> list[tuple[str, float, tuple[tuple[str, int], ...]]]:
    return [(h.node.content or "", h.score, tuple((r.lane, r.rank) for r in h.why)) for h in db.recall(query, k=5).hits]


def test_recall_searches_text_on_the_side_reader_and_finds_what_it_finds_alone(store: WorldDB) -> None:
    side = store._reader.side
    assert side is not None
    ran_on: list[str] = []
    real = side.run
    side.run = lambda task: real(  # type: ignore[method-assign]
        lambda conn: (ran_on.append(threading.current_thread().name), task(conn))[1]
    )
    with_side = [_answers(store, q) for q in ("lighthouse keeper", "ferry", "harbour tide rope")]
    assert len(ran_on) == 3 and all(name.startswith("worlddb-side-reader") for name in ran_on)
    assert side._conn is not None
    store._reader.side = None  # the Reader's is the one recall uses
    alone = [_answers(store, q) for q in ("lighthouse keeper", "ferry", "harbour tide rope")]
    assert len(ran_on) == 3 and alone == with_side  # no task reached the side reader, and the answers agree
    store._reader.side = side


def test_a_recall_inside_a_batch_searches_its_own_connection_and_sees_the_batch(store: WorldDB) -> None:
    with store.batch():
        store.write("the cormorant dried its wings")
        assert store._reader.view(None, None, False, world=None).side is None  # the side connection cannot see this
        top = store.recall("cormorant").hits[0]
        assert top.node.content == "the cormorant dried its wings"
        assert "text" in {r.lane for r in top.why}
    assert store._reader.view(None, None, False, world=None).side is store._reader.side


def test_a_side_reader_that_cannot_open_leaves_the_work_to_the_caller(store: WorldDB, tmp_path: Path) -> None:
    expected = _answers(store, "lighthouse")
    assert store._reader.side is not None
    store._reader.side.close()
    store._reader.side = SideReader(str(tmp_path / "missing" / "nowhere.db"), busy_timeout_ms=100)
    assert _answers(store, "lighthouse") == expected  # the first search could not run there and ran here
    assert store._reader.side.run(lambda conn: 1) is None  # it does not try again
    assert _answers(store, "lighthouse") == expected


def test_a_side_reader_never_reads_another_file_put_at_the_store_path(tmp_path: Path) -> None:
    path, other = tmp_path / "a.db", tmp_path / "b.db"
    for where, word in ((path, "first"), (other, "second")):
        conn = apsw.Connection(str(where))
        conn.execute("create table t (word text); insert into t values (?)", (word,))
        conn.close()
    side = SideReader(str(path), busy_timeout_ms=100)
    os.replace(other, path)  # the file the store opened is not the one at its path any more
    future = side.run(lambda conn: conn.execute("select word from t").fetchall())
    assert future is not None
    with pytest.raises(Unavailable, match="another file"):
        future.result()
    assert side.run(lambda conn: 1) is None


def test_an_error_in_the_search_is_the_error_the_caller_would_have_had(store: WorldDB) -> None:
    view = store._reader.view(None, None, False, world=None)
    wait = view.soon(lambda conn: queries.fts_ranked(conn, '"unbalanced', 5))
    with pytest.raises(apsw.SQLError):
        wait()


def test_a_store_busy_for_the_whole_timeout_is_not_waited_for_twice(store: WorldDB) -> None:
    view = store._reader.view(None, None, False, world=None)
    ran_on: list[bool] = []

    def locked(conn: apsw.Connection) -> int:
        ran_on.append(conn is view.conn)
        raise apsw.BusyError("database is locked")

    with pytest.raises(apsw.BusyError):
        view.soon(locked)()
    assert ran_on == [False]  # the side reader's connection only


def test_close_closes_the_side_connection_and_stands_the_reader_down(store: WorldDB) -> None:
    store.recall("ferry")
    side = store._reader.side
    assert side is not None and side._conn is not None
    conn = side._conn
    store.close()
    with pytest.raises(apsw.ConnectionClosedError):
        conn.execute("select 1")
    assert side._conn is None and side.run(lambda c: 1) is None
    store.close()  # twice is fine


def test_an_in_memory_store_has_no_side_reader(clock: FakeClock) -> None:
    with WorldDB(":memory:", embedder=FakeEmbedder(), clock=clock) as db:
        db.write("the lighthouse at dusk")
        assert db._reader.side is None
        assert db.recall("lighthouse").hits[0].node.content == "the lighthouse at dusk"


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork on this platform")
def test_a_forked_child_recalls_and_closes_without_the_parents_threads(store: WorldDB, tmp_path: Path) -> None:
    expected = _answers(store, "lighthouse")  # the parent's side reader and worker threads are running
    pid = os.fork()
    if pid == 0:  # the child: its recalls run on its own connections, and closing hangs on nothing
        code = 1
        try:
            inherited = _answers(store, "lighthouse") == expected
            store.close()
            with WorldDB(str(tmp_path / "side.db"), embedder=FakeEmbedder()) as again:
                fresh = _answers(again, "lighthouse") == expected and again._reader.side is not None
                fresh = fresh and again._reader.side._conn is not None  # a new worker of its own ran the search
            code = 0 if inherited and fresh else 1
        finally:
            os._exit(code)
    assert child_exit_code(pid, "recalling and closing") == 0
    assert _answers(store, "lighthouse") == expected  # the parent is unharmed


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork on this platform")
def test_a_fork_waits_for_the_workers_to_finish_and_stop_and_they_start_again_after(store: WorldDB) -> None:
    expected = _answers(store, "lighthouse")
    side = store._reader.side
    assert side is not None
    started = threading.Event()

    def slow(conn: apsw.Connection) -> int:  # a worker busy when the fork comes
        started.set()
        time.sleep(0.3)
        return int(conn.execute("select count(*) from node").fetchall()[0][0])

    task = side.run(slow)
    assert task is not None and started.wait(10)
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    finished = task.done()  # read first: the fork returned only once the task was done
    workers = [t for t in threading.enumerate() if t.name.startswith("worlddb-side-reader")]
    os.waitpid(pid, 0)
    assert finished and task.result() > 0
    assert workers == []  # no worker was alive at the fork
    assert _answers(store, "lighthouse") == expected  # the next search starts new workers
    assert [t for t in threading.enumerate() if t.name.startswith("worlddb-side-reader")]


def test_a_recall_while_the_interpreter_shuts_down_runs_on_the_callers_connection(tmp_path: Path) -> None:
    script = f"""
import atexit
from worlddb_lite import WorldDB
from tests.conftest import FakeEmbedder
db = WorldDB({str(tmp_path / "exit.db")!r}, embedder=FakeEmbedder())
db.write("the lighthouse keeper")
db.recall("lighthouse")  # the worker threads are running
atexit.register(lambda: print("at exit:", db.recall("lighthouse").hits[0].node.content))
"""
    done = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=Path(__file__).resolve().parents[1],
    )
    assert done.returncode == 0, done.stderr
    assert "at exit: the lighthouse keeper" in done.stdout and "Error" not in done.stderr
