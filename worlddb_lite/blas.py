"""One BLAS thread for a recall's small matrix products.

A recall multiplies small matrices (a question's tokens against a pool's, a query against a
partition's vectors). A multi-threaded BLAS (numpy's OpenBLAS takes every core) wakes its
workers for each such product, and they then spin waiting for the next one, holding the other
cores for the whole read: on this 2-core machine under load, one thread halved the time of every
lane, SQL-bound ones included (bench/recall_scale.py: P50 61.5 -> 33.7 ms at 100k memories). The
caller's own setting comes back when the read ends (threadpoolctl: ~20 µs a read).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

_BLAS: Any = None  # the loaded BLAS libraries, found on the first read (~5 ms)


@contextlib.contextmanager
def one_thread() -> Iterator[None]:
    """Run the body with one BLAS thread, then restore the caller's count."""
    global _BLAS
    if _BLAS is None:
        from threadpoolctl import ThreadpoolController  # deferred: it inspects the process's libraries

        _BLAS = ThreadpoolController().select(user_api="blas")
    with _BLAS.limit(limits=1):
        yield
