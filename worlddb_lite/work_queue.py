"""The deferred-extraction queue, in the store's own file (table ``work_queue``).

An item is enqueued in the same transaction as its turn and marked done in the same
transaction as what the extractor wrote for it: killed half-way, a drain loses nothing and
repeats nothing, because an item's work and its done mark commit together or not at all.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, NamedTuple

from ._sqlite import as_int

if TYPE_CHECKING:
    from .db import WorldDB
    from .extract import Extractor


class Item(NamedTuple):
    """One turn waiting for the extractor."""

    qid: int
    turn: int
    scope: int
    said_at: str
    said_in: str | None
    speaker: str | None


def enqueue(db: WorldDB, turn: str, scope: str, said_at: str, said_in: str | None, speaker: str | None) -> None:
    """Queue a turn (call inside the transaction that wrote it)."""
    conn, store = db._conn, db._store  # the queue is part of the store, like its indexes
    conn.execute(
        "insert or ignore into work_queue (turn, scope, said_at, said_in, speaker, enqueued_at) "
        "values (?, ?, ?, ?, ?, ?)",  # a turn is queued once, however often its conversation is ingested
        (store.resolve(turn), store.resolve(scope), said_at, said_in, speaker, db._clock()))


def pending(db: WorldDB) -> int:
    """How many items wait."""
    return as_int(db._conn.execute("select count(*) from work_queue where done_at is null").fetchone()[0])  # type: ignore[index]


def drain(db: WorldDB, extractor: Extractor, *, limit: int | None = None,
          progress: Callable[[int, int], None] | None = None) -> int:
    """Process waiting items oldest first, each in its own transaction; returns how many."""
    from .facts import remember

    total = pending(db) if limit is None else min(limit, pending(db))
    done = 0
    while limit is None or done < limit:
        row = db._conn.execute(
            "select qid, turn, scope, said_at, said_in, speaker from work_queue where done_at is null "
            "order by qid limit 1").fetchone()
        if row is None:
            break
        item = Item(*row)
        with db.batch():
            turn = db._store.header(item.turn).id.hex()
            scope = db._store.header(item.scope).id.hex()
            text = db.read(turn).content or ""
            found = extractor.extract(text, speaker=item.speaker, said_at=item.said_at)
            if found.entities or found.facts:
                remember(db, found, turn=turn, scope=scope, said_at=item.said_at, said_in=item.said_in)
            db._conn.execute("update work_queue set done_at = ? where qid = ? and done_at is null",
                             (db._clock(), item.qid))
        done += 1
        if progress is not None:
            progress(done, total)
    return done
