"""Recalls remembered for retention: which memories a recall returned, and when, written in batches.

A read must not become a write transaction each time, so ``AccessLog`` holds what recalls returned
in memory and ``flush`` writes it into ``node_access`` in one statement per batch: when ``BATCH``
accesses are pending, when the consolidator scores retention, and when the store closes. At most
``MAX_PENDING`` wait (the oldest are dropped first): a store that cannot be written (read-only, busy
for long) loses some accesses, which only make retention's estimate coarser.
"""

from __future__ import annotations

import json
from collections import deque

import apsw

BATCH = 256  # accesses written together (about 25 recalls of 10 hits)
MAX_PENDING = 8192  # accesses held while the file cannot be written
RECENT = 8  # access times kept per memory (ops/retention.py RECENT_ACCESSES)


class AccessLog:
    """Accesses (node id, time) waiting to be written."""

    def __init__(self) -> None:
        self.pending: deque[tuple[bytes, str]] = deque(maxlen=MAX_PENDING)

    def note(self, ids: list[bytes], at: str) -> None:
        """That a recall at ``at`` returned the nodes ``ids``."""
        self.pending.extend((raw, at) for raw in ids)

    @property
    def due(self) -> bool:
        return len(self.pending) >= BATCH

    def flush(self, conn: apsw.Connection) -> int:
        """Write every pending access (inside the caller's write transaction); how many were written.

        Each memory keeps its count of recalls and its ``RECENT`` latest times; a node purged or
        gone since the recall is skipped.
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
            "recent = (select json_group_array(value) from (select value from ("
            "select value from json_each(node_access.recent) union all select value from json_each(excluded.recent)"
            ") order by value desc limit ?4) order by value)",
            [(raw, len(ats), json.dumps(sorted(ats)[-RECENT:]), RECENT) for raw, ats in times.items()],
        )
        for _ in taken:
            self.pending.popleft()
        return len(taken)
