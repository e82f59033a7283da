"""The SQL of the deferred-extraction queue (table ``work_queue``): add, count, take the next, mark done."""

from __future__ import annotations

from typing import NamedTuple

import apsw

from .connection import as_int


class Item(NamedTuple):
    """One turn waiting for the extractor."""

    qid: int
    turn: int
    scope: int
    said_at: str
    said_in: str | None
    speaker: str | None


def add(
    conn: apsw.Connection, turn: int, scope: int, said_at: str, said_in: str | None, speaker: str | None, at: str
) -> None:
    """Queue a turn; a turn is queued once, however often its conversation is ingested."""
    conn.execute(
        "insert or ignore into work_queue (turn, scope, said_at, said_in, speaker, enqueued_at) "
        "values (?, ?, ?, ?, ?, ?)",
        (turn, scope, said_at, said_in, speaker, at),
    )


def waiting(conn: apsw.Connection) -> int:
    """How many items wait."""
    return as_int(conn.execute("select count(*) from work_queue where done_at is null").fetchone()[0])  # type: ignore[index]


def next_item(conn: apsw.Connection) -> Item | None:
    """The oldest waiting item, if any."""
    row = conn.execute(
        "select qid, turn, scope, said_at, said_in, speaker from work_queue where done_at is null order by qid limit 1"
    ).fetchone()
    return None if row is None else Item(*row)


def mark_done(conn: apsw.Connection, qid: int, at: str) -> None:
    """Mark an item done (in the transaction that wrote its work)."""
    conn.execute("update work_queue set done_at = ? where qid = ? and done_at is null", (at, qid))
