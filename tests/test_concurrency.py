"""bench/concurrency.py: writer and reader processes on one file: no lock error, no lost write, consistent roots."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from worlddb_lite import StoreBusy, WorldDB
from worlddb_lite.store import connection

from .conftest import FakeEmbedder

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))
import concurrency  # noqa: E402


def test_two_writers_and_two_readers_for_a_few_seconds(tmp_path: Path) -> None:
    result = concurrency.run(str(tmp_path / "c.db"), writers=2, readers=2, seconds=3.0)
    assert result["errors"] == 0, result["first_errors"]
    assert result["writes_lost"] == 0 and result["inconsistent_roots"] == 0 and result["verify_ok"]
    assert result["writes_acked"] > 0 and result["ops"]["root_check"]["n"] > 0


def test_a_writer_waits_for_another_writers_lock_instead_of_failing(file_db_path: str) -> None:
    first = WorldDB(file_db_path, embedder=FakeEmbedder())
    second = WorldDB(file_db_path, embedder=FakeEmbedder())
    try:
        with first.batch():
            first.write("held by the first writer")
            old = connection.BUSY_TIMEOUT_MS
            second._conn.set_busy_timeout(50)  # keep the test short: 50 ms per attempt
            try:
                with pytest.raises(StoreBusy, match="another writer holds it"):
                    second.write("blocked", scope="s")
            finally:
                second._conn.set_busy_timeout(old)
        assert second.write("after the first committed", scope="s")
        assert second.verify().ok
    finally:
        first.close()
        second.close()
