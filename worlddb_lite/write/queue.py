"""The deferred-extraction queue, in the store's own file (table ``work_queue``).

An item is enqueued in the same transaction as its turn and marked done in the same
transaction as what the extractor wrote for it: killed half-way, a drain loses nothing and
repeats nothing, because an item's work and its done mark commit together or not at all.

After extraction, identities are re-resolved off the commit path (``identity.recluster``: the
2-hop neighbourhood of every node written since the last pass, in transactions of its own):
at the end of a ``drain``, and by the ``Consolidator`` after each of its drains, which also
catches entities that inline ingests wrote. Its watermark lives in the store, so a pass that
was cut short is done by the next one.
"""

from __future__ import annotations

from collections.abc import Callable

from ..store import work_queue
from ..text.extract import Extractor
from ..types import is_assistant
from .facts import understand
from .identity import recluster as recluster_identities
from .writer import Writer


def enqueue(writer: Writer, turn: str, scope: str, said_at: str, said_in: str | None, speaker: str | None) -> None:
    """Queue a turn (call inside the transaction that wrote it)."""
    store = writer.store
    work_queue.add(writer.conn, store.resolve(turn), store.resolve(scope), said_at, said_in, speaker, writer.clock())


def learns(extractor: Extractor | None, deferred: bool, *, by_assistant: bool = False) -> bool:
    """Whether System 2 runs: with an extractor, or queued for one, on words that are not the assistant's."""
    return (extractor is not None or deferred) and not by_assistant


def learn_or_queue(
    writer: Writer,
    extractor: Extractor | None,
    text: str,
    *,
    deferred: bool,
    source: str,
    scope: str,
    said_at: str,
    said_in: str | None,
    speaker: str | None,
    speakers: dict[str, str] | None = None,
    by_assistant: bool | None = None,
) -> bool:
    """System 2 on a memory that speaks for someone: now, or queued when ``deferred``; whether either ran.

    The one place a turn of an ingest, a live turn, a note and an amended note take that turn; the
    assistant's own words are not about the person (``by_assistant``: whether the assistant said it, when
    ``speaker``, whom the facts are about, does not say: a note speaks for its scope's person, whatever the
    scope is called), and without an extractor nothing is learned.
    """
    assistant = is_assistant(speaker) if by_assistant is None else by_assistant
    if not learns(extractor, deferred, by_assistant=assistant):
        return False
    if deferred:
        enqueue(writer, source, scope, said_at, said_in, speaker)
    else:
        assert extractor is not None
        understand(
            writer,
            extractor,
            text,
            source=source,
            scope=scope,
            said_at=said_at,
            said_in=said_in,
            speaker=speaker,
            speakers=speakers,
        )
    return True


def pending(writer: Writer) -> int:
    """How many items wait."""
    return work_queue.waiting(writer.conn)


def drain(
    writer: Writer,
    extractor: Extractor,
    *,
    limit: int | None = None,
    progress: Callable[[int, int], None] | None = None,
    recluster: bool = True,
) -> int:
    """Process waiting items oldest first, each in its own transaction; returns how many.

    Then, if any was processed and ``recluster``, re-resolve the neighbourhood of what they wrote.
    """
    total = 0 if progress is None else pending(writer) if limit is None else min(limit, pending(writer))
    done = 0
    while limit is None or done < limit:
        with writer.transaction():  # the item is read inside its transaction: a purge between read and write drops it
            item = work_queue.next_item(writer.conn)
            if item is None:
                break
            turn = writer.store.header(item.turn).id.hex()
            scope = writer.store.header(item.scope).id.hex()
            read = writer.read(turn)
            if not read.purged:  # (a purge marks its item done; this is the belt to that brace)
                understand(
                    writer,
                    extractor,
                    read.content or "",
                    source=turn,
                    scope=scope,
                    said_at=item.said_at,
                    said_in=item.said_in,
                    speaker=item.speaker,
                )
            work_queue.mark_done(writer.conn, item.qid, writer.clock())
        done += 1
        if progress is not None:
            progress(done, total)
    if done and recluster:
        recluster_identities(writer)
    return done
