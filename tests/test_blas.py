"""blas.py: a recall runs its matrix products on one BLAS thread and gives the caller's count back."""

from __future__ import annotations

from typing import Any

import pytest
from threadpoolctl import threadpool_info, threadpool_limits

from worlddb_lite import WorldDB
from worlddb_lite import db as db_module


def _blas_threads() -> list[int]:
    return [int(i["num_threads"]) for i in threadpool_info() if i["user_api"] == "blas"]


def test_a_recall_runs_on_one_blas_thread_and_restores_the_callers(db: WorldDB,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    db.write("we went camping by the lake", scope="ana")
    inside: list[list[int]] = []
    real = db_module.retrieval_recall

    def watched(*args: Any, **kwargs: Any) -> Any:
        inside.append(_blas_threads())
        return real(*args, **kwargs)

    monkeypatch.setattr(db_module, "retrieval_recall", watched)
    with threadpool_limits(limits=2, user_api="blas"):
        before = _blas_threads()
        assert before and all(n == 2 for n in before)  # numpy's BLAS is there to limit
        assert db.recall("camping", scope="ana").hits
        assert inside == [[1] * len(before)]
        assert _blas_threads() == before
