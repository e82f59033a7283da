"""blas.py: a recall runs its matrix products on one BLAS thread and gives the caller's count back."""

from __future__ import annotations

import os
from typing import Any

import pytest
from threadpoolctl import threadpool_info, threadpool_limits

from worlddb_lite import WorldDB
from worlddb_lite.retrieval import blas
from worlddb_lite.retrieval import reader as reader_module

from .conftest import child_exit_code


def _blas_threads() -> list[int]:
    return [int(i["num_threads"]) for i in threadpool_info() if i["user_api"] == "blas"]


def test_a_recall_runs_on_one_blas_thread_and_restores_the_callers(
    db: WorldDB, monkeypatch: pytest.MonkeyPatch
) -> None:
    db.write("we went camping by the lake", scope="ana")
    inside: list[list[int]] = []
    real = reader_module.hybrid_recall

    def watched(*args: Any, **kwargs: Any) -> Any:
        inside.append(_blas_threads())
        return real(*args, **kwargs)

    monkeypatch.setattr(reader_module, "hybrid_recall", watched)
    with threadpool_limits(limits=2, user_api="blas"):
        before = _blas_threads()
        assert before and all(n == 2 for n in before)  # numpy's BLAS is there to limit
        assert db.recall("camping", scope="ana").hits
        assert inside == [[1] * len(before)]
        assert _blas_threads() == before


def test_overlapping_reads_share_one_limit_and_the_last_gives_the_count_back() -> None:
    with threadpool_limits(limits=2, user_api="blas"):
        before = _blas_threads()
        first, second = blas.one_thread(), blas.one_thread()
        first.__enter__()
        second.__enter__()  # another thread's recall, started while the first runs
        first.__exit__(None, None, None)
        assert all(n == 1 for n in _blas_threads())  # the second still runs
        second.__exit__(None, None, None)
        assert _blas_threads() == before


def test_a_read_that_fails_gives_the_count_back() -> None:
    with threadpool_limits(limits=2, user_api="blas"):
        before = _blas_threads()
        with pytest.raises(ValueError), blas.one_thread():
            raise ValueError("a lane failed")
        assert _blas_threads() == before


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork on this platform")
def test_a_child_forked_while_a_recall_holds_the_lock_can_read_on_its_own() -> None:
    with blas.one_thread():  # a recall of another thread runs (the lock is free between its steps) ...
        with blas._LOCK:  # ... and is inside one at the fork
            pid = os.fork()
            if pid == 0:
                code = 1
                try:
                    with blas.one_thread():  # would wait for ever on the parent's lock
                        code = 0 if blas._running == 1 else 1
                finally:
                    os._exit(code)
    assert child_exit_code(pid, "on the BLAS lock", seconds=30) == 0
    assert blas._running == 0  # the parent's count is its own
