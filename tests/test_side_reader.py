"""The side reader: recall's full-text search on a second connection, and every way back to one."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import apsw
import pytest

from worlddb_lite import WorldDB, reads
from worlddb_lite.side_reader import SideReader

from .conftest import FakeClock, FakeEmbedder

TEXTS = [f"note {i}: the {word} by the harbour" for i, word in enumerate(
    ["lighthouse", "ferry", "gull", "anchor", "lighthouse keeper", "tide", "ferry timetable", "rope"])]


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
    side = store._side
    assert side is not None
    seen: list[str] = []
    real = side.run
    side.run = lambda task: (seen.append(threading.current_thread().name), real(task))[1]  # type: ignore[method-assign]
    with_side = [_answers(store, q) for q in ("lighthouse keeper", "ferry", "harbour tide rope")]
    assert len(seen) == 3 and side._conn is not None  # each recall's search went to the worker's connection
    store._side = None
    assert [_answers(store, q) for q in ("lighthouse keeper", "ferry", "harbour tide rope")] == with_side
    store._side = side


def test_a_recall_inside_a_batch_searches_its_own_connection_and_sees_the_batch(store: WorldDB) -> None:
    with store.batch():
        store.write("the cormorant dried its wings")
        assert store._view(None, None, False, world=None).side is None  # the side connection cannot see this
        top = store.recall("cormorant").hits[0]
        assert top.node.content == "the cormorant dried its wings"
        assert "text" in {r.lane for r in top.why}
    assert store._view(None, None, False, world=None).side is store._side


def test_a_side_reader_that_cannot_open_leaves_the_work_to_the_caller(store: WorldDB, tmp_path: Path) -> None:
    expected = _answers(store, "lighthouse")
    store._side = SideReader(str(tmp_path / "missing" / "nowhere.db"), busy_timeout_ms=100)
    assert _answers(store, "lighthouse") == expected  # the first search failed there and ran here
    assert store._side.run(lambda conn: 1) is None  # it does not try again
    assert _answers(store, "lighthouse") == expected


def test_an_error_in_the_search_is_the_error_the_caller_would_have_had(store: WorldDB) -> None:
    view = store._view(None, None, False, world=None)
    wait = view.soon(lambda conn: reads.fts_ranked(conn, '"unbalanced', 5))
    with pytest.raises(apsw.SQLError):
        wait()


def test_close_ends_the_worker_and_its_connection(store: WorldDB) -> None:
    store.recall("ferry")
    side = store._side
    assert side is not None and side._pool is not None
    workers = list(side._pool._threads)
    conn = side._conn
    assert workers and conn is not None
    store.close()
    assert not any(t.is_alive() for t in workers)
    with pytest.raises(apsw.ConnectionClosedError):
        conn.execute("select 1")
    assert side.run(lambda c: 1) is None
    store.close()  # twice is fine


def test_an_in_memory_store_has_no_side_reader(clock: FakeClock) -> None:
    with WorldDB(":memory:", embedder=FakeEmbedder(), clock=clock) as db:
        db.write("the lighthouse at dusk")
        assert db._side is None
        assert db.recall("lighthouse").hits[0].node.content == "the lighthouse at dusk"


def test_a_forked_child_runs_its_reads_itself(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    side = SideReader(str(tmp_path / "any.db"), busy_timeout_ms=100)
    monkeypatch.setattr("worlddb_lite.side_reader.os.getpid", lambda: -1)  # as in a child of the process that made it
    assert side.run(lambda conn: 1) is None
    assert side._pool is None  # no worker was started in the child
