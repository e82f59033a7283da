"""A second, read-only connection with its own thread: SQL a read runs beside its other work.

A recall's full-text search is its costliest part at scale (FTS5 scores every row its words
match: ~5 ms of ~20 at 100k memories, ~10 ms in the slowest questions), and it needs no Python
while it runs: apsw lets go of the GIL inside SQLite. Run on this connection, the search uses a
second core while the caller embeds the query and searches the vectors (numpy lets go of the GIL
in its products too). The hits are the same: only the order of the work changes.

What it may run: reads of committed data only. The caller's connection reads outside any
transaction (each statement sees the latest commit), so this one sees what the caller would.
A caller inside a write transaction must not use it: it would not see the uncommitted rows
(``WorldDB._view`` gives such a read no side reader).

The connection is opened in the worker thread on the first task, and a failure to open it (a
file the process may not read again, an in-memory store has no second connection) is kept: every
later task fails the same way, and ``run`` hands the caller ``None`` so it does the work itself.
So it does in a process forked from the one that made the reader (the child has no worker thread).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TypeVar

import apsw

T = TypeVar("T")
CACHE_KIB = 16_384  # the side connection's page cache: it reads the full-text index alone (77 MB at 100k)


class SideReader:
    """One worker thread and the read-only connection it alone uses."""

    def __init__(self, path: str, *, busy_timeout_ms: int) -> None:
        self.path = path
        self.busy_timeout_ms = busy_timeout_ms
        self._conn: apsw.Connection | None = None
        self._failed: BaseException | None = None
        self._pool: ThreadPoolExecutor | None = None
        self._lock = threading.Lock()
        self._pid = os.getpid()  # a forked child has no worker thread: it runs its reads itself

    def run(self, task: Callable[[apsw.Connection], T]) -> Future[T] | None:
        """Start ``task(connection)`` on the worker; None when there is no side connection to run it on."""
        if os.getpid() != self._pid:  # before the lock: another thread may have held it at the fork
            return None
        with self._lock:
            if self._failed is not None:
                return None
            if self._pool is None:
                self._pool = ThreadPoolExecutor(1, thread_name_prefix="worlddb-side-reader")
            return self._pool.submit(self._call, task)

    def _call(self, task: Callable[[apsw.Connection], T]) -> T:
        return task(self._connection())

    def _connection(self) -> apsw.Connection:
        """The worker's connection, opened on its first task (only the worker thread calls this)."""
        if self._conn is None:
            try:
                conn = apsw.Connection(self.path, flags=apsw.SQLITE_OPEN_READONLY)
                conn.set_busy_timeout(self.busy_timeout_ms)
                conn.execute(f"pragma cache_size = -{CACHE_KIB}")
            except apsw.Error as exc:
                self._failed = exc
                raise
            self._conn = conn
        return self._conn

    def close(self) -> None:
        """Let the worker finish what it was given, then close its connection (safe to call twice)."""
        with self._lock:
            pool, self._pool = self._pool, None
            self._failed = self._failed or RuntimeError("the side reader is closed")
        if pool is not None:
            pool.shutdown(wait=True)
        if self._conn is not None:
            self._conn.close()
            self._conn = None
