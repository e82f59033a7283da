"""Recalls remembered for retention: which memories a recall returned, and when, written in batches.

A read must not become a write transaction each time, nor wait for one: ``AccessLog`` holds what
recalls returned in memory and writes them into ``node_access`` in one statement. Once ``BATCH`` are
pending, the next write transaction of this process takes them with it (``ride``: an assistant appends
every turn, so its recalls never write). A process that only recalls writes them itself at ``ALONE``
pending and at close (``write_if_free``), only if the write lock is free at once and no transaction is
open on the connection: that write cost ~30 ms on the recall that made it (bench/recall_scale.py). A
store that is busy, read-only or damaged keeps them for a later try (the next after another batch); at
most ``MAX_PENDING`` wait, the oldest dropped first, which only makes retention's estimate coarser.
The consolidator writes them with the ordinary transaction (``write``).
"""

from __future__ import annotations

import json
from collections import deque

import apsw

from .connection import BUSY_TIMEOUT_MS

BATCH = 256  # accesses written together (about 25 recalls of 10 hits)
ALONE = 4 * BATCH  # pending at which a recall writes them itself: no write of this process took them
MAX_PENDING = 8192  # accesses held while the file cannot be written
RECENT = 8  # access times kept per memory (consolidate/retention.py reads them)


class AccessLog:
    """Accesses (node id, time) waiting to be written."""

    def __init__(self) -> None:
        self.pending: deque[tuple[bytes, str]] = deque(maxlen=MAX_PENDING)
        self._next = ALONE  # pending count at which a recall's next try is made

    def note(self, ids: list[bytes], at: str) -> None:
        """That a recall at ``at`` returned the nodes ``ids``."""
        self.pending.extend((raw, at) for raw in ids)

    @property
    def due(self) -> bool:
        """Whether a recall should write them now (``write_if_free``)."""
        return len(self.pending) >= min(self._next, MAX_PENDING)

    def ride(self, conn: apsw.Connection) -> None:
        """In a write transaction about to commit: write a due batch with it; a failure leaves that write whole."""
        if len(self.pending) < BATCH:
            return
        try:
            with conn:  # a savepoint: an error rolls back these rows only
                self.write(conn)
        except apsw.Error:
            pass  # kept pending: a recall or the next write tries again

    def write_if_free(self, conn: apsw.Connection) -> bool:
        """Write the pending accesses in a transaction of their own if that needs no wait; whether it did.

        Nothing is raised: a busy lock (another process writing), an open transaction (a read being
        iterated), a read-only file or a damaged row leave the accesses pending for a later try.
        """
        if not self.pending or not conn.getautocommit():
            return False
        try:
            conn.set_busy_timeout(0)
            try:
                conn.execute("begin immediate")
            finally:
                conn.set_busy_timeout(BUSY_TIMEOUT_MS)
            try:
                self.write(conn)
                conn.execute("commit")
            except apsw.Error:
                conn.execute("rollback")
                raise
        except apsw.Error:
            self._next = len(self.pending) + BATCH
            return False
        return True

    def write(self, conn: apsw.Connection) -> int:
        """Write every pending access (inside the caller's write transaction); how many were written.

        Each memory keeps its count of recalls and its ``RECENT`` latest times (a list someone made
        unreadable in the sqlite3 shell starts again); a node purged or gone since the recall is skipped.
        """
        if not self.pending:
            return 0
        taken = list(self.pending)
        times: dict[bytes, list[str]] = {}
        for raw, at in taken:
            times.setdefault(raw, []).append(at)
        conn.executemany(
            "insert into node_access (nid, hits, recent) "
            "select n.nid, ?2, json(?3) from node as n where n.id = ?1 and n.body is not null "
            "on conflict (nid) do update set hits = hits + excluded.hits, "
            "recent = case when not json_valid(node_access.recent) then excluded.recent else ("
            "select json_group_array(value) from (select value from ("
            "select value from json_each(node_access.recent) union all select value from json_each(excluded.recent)"
            ") order by value desc limit ?4) order by value) end",
            [(raw, len(ats), json.dumps(sorted(ats)[-RECENT:]), RECENT) for raw, ats in times.items()],
        )
        for _ in taken:
            self.pending.popleft()
        self._next = ALONE
        return len(taken)
