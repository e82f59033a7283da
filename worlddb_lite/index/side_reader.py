"""A second, read-only connection to a store, for SQL a read runs beside its other work.

A recall's full-text search is its costliest part at scale (FTS5 scores every row its words
match: ~5 ms of ~20 at 100k memories, ~10 ms in the slowest questions), and it needs no Python
while it runs: apsw lets go of the GIL inside SQLite. Run on this connection by a worker thread,
the search uses a second core while the caller embeds the query and searches the vectors (numpy
lets go of the GIL in its products too). The hits are the same: only the order of the work changes.

What it may run: reads of committed data only. The caller's connection reads outside any
transaction, so each of its statements sees the latest commit, as this one does. A read inside a
write transaction must not use it: it would not see the uncommitted rows (``WorldDB._view`` gives
such a read no side reader).

The worker threads (``WORKERS``) are shared by every store of the process, so a server holding
many stores holds no more threads; each store's tasks run one at a time on its own connection,
opened on the first. The side reader stands down, and ``run`` hands the caller ``None`` so it does
the work itself: when the connection cannot be opened, or opens another file than the store's
(the path was replaced since the store was opened), once the reader is closed, in a process forked
from the one that made it, and while the interpreter shuts down (no new threads then). A fork
waits for the workers to finish their tasks and stop (``_stop_workers``): none of them is inside
SQLite when the process is copied. (A thread of the caller's own that is inside SQLite at a fork,
a recall running beside it, can still leave the child a lock nobody will release: fork from a
process whose other threads are idle, or use the spawn start method.)
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
WORKERS = 2  # threads shared by every side reader of the process
_THREAD_NAME = "worlddb-side-reader"

_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()


def _workers() -> ThreadPoolExecutor:
    """The process's worker threads, started on first use."""
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(WORKERS, thread_name_prefix=_THREAD_NAME)
        return _pool


def _stop_workers() -> None:
    """Before a fork: the workers finish the tasks they were given, then stop, and none start until after it.

    A fork copies the locks other threads hold, and a worker inside SQLite holds SQLite's own: the
    child would hang on its first statement. Stopped, no worker is anywhere at the fork (and Python
    3.12+ has one thread fewer to warn about). The lock is held across the fork, and let go by
    ``_start_workers`` in the parent; the next task there starts new workers.
    """
    global _pool
    _pool_lock.acquire()
    pool, _pool = _pool, None
    if pool is not None:
        on_worker = threading.current_thread().name.startswith(_THREAD_NAME)  # it cannot wait for itself
        pool.shutdown(wait=not on_worker)


def _start_workers() -> None:
    """After a fork, in the parent: tasks may start workers again."""
    _pool_lock.release()


def _forget_workers() -> None:
    """In a forked child: the parent's threads are not there, and its lock was held at the fork."""
    global _pool, _pool_lock
    _pool, _pool_lock = None, threading.Lock()


if hasattr(os, "register_at_fork"):  # POSIX only; where there is no fork there is nothing to reset
    os.register_at_fork(before=_stop_workers, after_in_parent=_start_workers, after_in_child=_forget_workers)


class Unavailable(Exception):
    """The side reader stood down before it ran a task it was given: the caller runs the task itself."""


class SideReader:
    """One store's read-only connection, used by the shared worker threads one task at a time."""

    def __init__(self, path: str, *, busy_timeout_ms: int) -> None:
        self.path = path
        self.busy_timeout_ms = busy_timeout_ms
        self._file = _identity(path)  # the file the store opened: the side must open the same one
        self._conn: apsw.Connection | None = None
        self._down: str | None = None  # why it stood down (None: it has not)
        self._lock = threading.Lock()  # one task at a time on the connection
        self._pid = os.getpid()

    def run(self, task: Callable[[apsw.Connection], T]) -> Future[T] | None:
        """Start ``task(connection)`` on a worker; None when the side reader cannot run it."""
        if self._down is not None or os.getpid() != self._pid:
            return None
        try:
            return _workers().submit(self._call, task)
        except RuntimeError:  # the interpreter is shutting down: no new threads
            return None

    def _call(self, task: Callable[[apsw.Connection], T]) -> T:
        with self._lock:
            return task(self._connection())

    def _connection(self) -> apsw.Connection:
        """The store's side connection, opened on its first task (called under the lock)."""
        if self._down is not None:
            raise Unavailable(self._down)
        if self._conn is None:
            try:
                conn = apsw.Connection(self.path, flags=apsw.SQLITE_OPEN_READONLY)
            except apsw.Error as exc:
                self._down = f"cannot open {self.path} again: {exc}"
                raise Unavailable(self._down) from None
            if _identity(self.path) != self._file:  # checked after opening: a later swap cannot slip between
                conn.close()
                self._down = f"{self.path} is another file than the store opened"
                raise Unavailable(self._down)
            conn.set_busy_timeout(self.busy_timeout_ms)
            conn.execute(f"pragma cache_size = -{CACHE_KIB}")
            conn.execute("pragma temp_store = memory")
            self._conn = conn
        return self._conn

    def close(self) -> None:
        """Stand down: a task running finishes first, later ones are the callers' own (safe to call twice)."""
        if os.getpid() != self._pid:  # a forked child: the parent's connection is not the child's to close
            self._down, self._conn = "closed", None
            return
        with self._lock:
            self._down = "closed"
            if self._conn is not None:
                self._conn.close()
                self._conn = None


def _identity(path: str) -> tuple[int, int] | None:
    """(device, inode) of the file at ``path`` (None: there is none)."""
    try:
        found = os.stat(path)
    except OSError:
        return None
    return found.st_dev, found.st_ino
