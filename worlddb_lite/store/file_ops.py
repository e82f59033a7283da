"""Statements on the store file as a whole: checkpoint, vacuum, busy timeout (ops/maintenance.py runs them).

Each is one statement with no retry of its own: the caller decides whether to wait, retry or give up.
"""

from __future__ import annotations

import apsw

from .connection import one_row


def checkpoint_truncate(conn: apsw.Connection) -> tuple[int, int, int]:
    """Fold the whole WAL into the main file and truncate it: (busy, WAL frames, frames folded).

    Frames are -1 when the store is not in WAL mode (an in-memory store).
    """
    busy, frames, folded = (int(v) for v in one_row(conn.execute("pragma wal_checkpoint(truncate)").fetchone()))
    return busy, frames, folded


def vacuum(conn: apsw.Connection) -> None:
    """Rebuild every page of the file from the live rows (no deleted byte survives)."""
    conn.execute("vacuum")


def busy_timeout(conn: apsw.Connection) -> int:
    """The connection's busy timeout in milliseconds (to restore after a stretch without one)."""
    return int(one_row(conn.execute("pragma busy_timeout").fetchone())[0])
