"""Writing a consolidation step's edges in batches, so that a kill mid-run loses at most one batch.

Each batch is one transaction through the writer's ``link_many`` (the reconciler runs every
edge's handler). A step computes what is missing from the store as it is, so a rerun after a
kill writes only what the killed run had not committed yet: idempotence makes it resumable.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from .. import checks
from ..errors import InvalidInput
from ..write.writer import Writer

BATCH = 500  # edges a transaction commits: a kill loses at most these, and a commit costs little beside them
Progress = Callable[[int, int], None]  # (edges done, edges to do)
Link = tuple[int, int, str, Mapping[str, Any]]  # (src nid, dst nid, edge type, props)


def check_options(dry_run: object, batch: object) -> int:
    """The options every step takes, checked; the batch size."""
    if not isinstance(dry_run, bool):
        raise InvalidInput(f"dry_run must be True or False, got {dry_run!r}")
    return checks.whole(batch, "batch", least=1)


def write_links(writer: Writer, links: Sequence[Link], *, dry_run: bool, progress: Progress | None, batch: int) -> int:
    """Write ``links`` in transactions of ``batch`` edges; how many (with ``dry_run``: would be, none written).

    ``progress(done, total)`` runs after each committed batch; if it raises, what was committed stays.
    """
    total = len(links)
    if dry_run:
        if progress is not None:
            progress(total, total)
        return total
    done = 0
    for start in range(0, total, batch):
        chunk = links[start : start + batch]
        with writer.transaction():
            run: list[tuple[str, str, str]] = []
            props: Mapping[str, Any] | None = None
            for src, dst, edge_type, these in chunk:  # one link_many per run of equal props, in order
                if run and these != props:
                    writer.link_many(run, props=props)
                    run = []
                props = these
                run.append((_hex(writer, src), _hex(writer, dst), edge_type))
            if run:
                writer.link_many(run, props=props)
        done += len(chunk)
        if progress is not None:
            progress(done, total)
    return done


def _hex(writer: Writer, nid: int) -> str:
    return writer.store.header(nid).id.hex()
