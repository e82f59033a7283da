"""One BLAS thread while a recall runs.

A recall multiplies small matrices (a question's tokens against a pool's, a query against a
partition's vectors). A multi-threaded BLAS (numpy's OpenBLAS takes every core) wakes its
workers for each such product, and they then spin waiting for the next one, holding the other
cores for the whole read: on a 2-core machine under load, one thread halved the time of every
lane, SQL-bound ones included (``bench/recall_scale.py``; docs/decisions.md).

The count is the process's, not the thread's: while any recall runs, every thread of the process
(the caller's too) has one BLAS thread. Overlapping recalls share one limit: the first to start
sets it, the last to end gives the caller's count back (threadpoolctl; ~15 µs a read).
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterator
from typing import Any

_LOCK = threading.Lock()
_BLAS: Any = None  # the loaded BLAS libraries, found on the first read (~5 ms)
_limit: Any = None  # the limit in force, while any recall runs
_running = 0  # recalls running now


def _forget_recalls() -> None:
    """In a forked child: the parent's recalls are not running here, and the lock may have been held at the fork.

    The BLAS keeps the thread count it had at the fork (one, if a recall was running then).
    """
    global _LOCK, _limit, _running
    _LOCK, _limit, _running = threading.Lock(), None, 0


if hasattr(os, "register_at_fork"):  # POSIX only
    os.register_at_fork(after_in_child=_forget_recalls)


@contextlib.contextmanager
def one_thread() -> Iterator[None]:
    """Run the body with one BLAS thread; the last body to end restores the caller's count."""
    global _BLAS, _limit, _running
    with _LOCK:
        if _running == 0:
            if _BLAS is None:
                from threadpoolctl import ThreadpoolController  # deferred: it inspects the process's libraries

                _BLAS = ThreadpoolController().select(user_api="blas")
            _limit = _BLAS.limit(limits=1)
        _running += 1
    try:
        yield
    finally:
        with _LOCK:
            _running -= 1
            if _running == 0:
                _limit.restore_original_limits()
                _limit = None
