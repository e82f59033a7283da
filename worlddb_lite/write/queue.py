"""The deferred-extraction queue, in the store's own file (table ``work_queue``).

An item is enqueued in the same transaction as its turn and marked done in the same
transaction as what the extractor wrote for it: killed half-way, a drain loses nothing and
repeats nothing, because an item's work and its done mark commit together or not at all.

After extraction, identities are re-resolved off the commit path (``WorldDB.recluster``: the
2-hop neighbourhood of every node written since the last pass, in transactions of its own):
at the end of a ``drain``, and by the ``Consolidator`` after each of its drains, which also
catches entities that inline ingests wrote. Its watermark lives in the store, so a pass that
was cut short is done by the next one.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, NamedTuple

from ..store.connection import as_int

if TYPE_CHECKING:
    from ..db import WorldDB
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
        (store.resolve(turn), store.resolve(scope), said_at, said_in, speaker, db._clock()),
    )


def pending(db: WorldDB) -> int:
    """How many items wait."""
    return as_int(db._conn.execute("select count(*) from work_queue where done_at is null").fetchone()[0])  # type: ignore[index]


def drain(
    db: WorldDB,
    extractor: Extractor,
    *,
    limit: int | None = None,
    progress: Callable[[int, int], None] | None = None,
    recluster: bool = True,
) -> int:
    """Process waiting items oldest first, each in its own transaction; returns how many.

    Then, if any was processed and ``recluster``, re-resolve the neighbourhood of what they wrote.
    """
    from .facts import remember

    total = 0 if progress is None else pending(db) if limit is None else min(limit, pending(db))
    done = 0
    while limit is None or done < limit:
        with db.batch():  # the item is read inside its transaction: a purge between read and write drops it
            row = db._conn.execute(
                "select qid, turn, scope, said_at, said_in, speaker from work_queue where done_at is null "
                "order by qid limit 1"
            ).fetchone()
            if row is None:
                break
            item = Item(*row)
            turn = db._store.header(item.turn).id.hex()
            scope = db._store.header(item.scope).id.hex()
            read = db.read(turn)
            if not read.purged:  # (a purge marks its item done; this is the belt to that brace)
                found = extractor.extract(read.content or "", speaker=item.speaker, said_at=item.said_at)
                if found.entities or found.facts or item.speaker:
                    remember(
                        db,
                        found,
                        turn=turn,
                        scope=scope,
                        said_at=item.said_at,
                        said_in=item.said_in,
                        speaker=item.speaker,
                    )
            db._conn.execute(
                "update work_queue set done_at = ? where qid = ? and done_at is null", (db._clock(), item.qid)
            )
        done += 1
        if progress is not None:
            progress(done, total)
    if done and recluster:
        db.recluster()
    return done


class Consolidator:
    """A background thread that drains the queue of a store file, then re-resolves identities, every ``interval`` s.

    It opens its own connection (SQLite connections are not shared between threads), so the
    caller's writes and the drain interleave as two writers do: one transaction at a time.
    """

    def __init__(
        self,
        path: str,
        extractor: Extractor,
        *,
        interval: float = 1.0,
        open_store: Callable[[str], WorldDB] | None = None,
    ) -> None:
        import threading

        self.path = path
        self.extractor = extractor
        self.interval = interval
        self.processed = 0
        self.proposed = 0  # same_as proposals its re-resolution staged
        self.error: BaseException | None = None
        self._open = open_store
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="worlddb-consolidator", daemon=True)

    def start(self) -> Consolidator:
        self._thread.start()
        return self

    def stop(self, timeout: float = 30.0) -> None:
        """Finish the item in hand, then stop."""
        self._stop.set()
        self._thread.join(timeout)

    def _run(self) -> None:
        from ..db import WorldDB

        try:
            db = self._open(self.path) if self._open is not None else WorldDB(self.path, create=False)
            try:
                while not self._stop.is_set():
                    while not self._stop.is_set() and drain(db, self.extractor, limit=1, recluster=False):
                        self.processed += 1
                    if not self._stop.is_set():
                        self.proposed += db.recluster()  # also what inline ingests wrote meanwhile
                    self._stop.wait(self.interval)
            finally:
                db.close()
        except BaseException as exc:  # kept for the owner to see; a thread has no caller to raise to
            self.error = exc
