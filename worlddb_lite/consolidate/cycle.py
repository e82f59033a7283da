"""The consolidator's run: the store's sleep cycle, one step after another, each idempotent.

Steps, in order (``STEPS``): ``queue`` (System 2 over deferred turns and notes), ``summaries``
(sessions, then scopes' timelines: consolidate/summaries.py), ``timelines`` (subjects' profiles and
histories: consolidate/timelines.py), ``infer`` (transitive closure of causes and subtype_of: consolidate/infer.py),
``sweep`` (contradictions on functional edge types and slots: consolidate/sweep.py), ``dedup`` (near
duplicates linked: consolidate/dedup.py), ``updates`` (a newer memory telling of a change linked to the
older note it may update, where no write could: write/updates.py), ``retention`` (memories moved
between the vector index's hot and cold tiers by their retention score: consolidate/retention.py). Each
commits in batches, so a kill keeps the batches done and a rerun finishes the rest; a second run
finds nothing to do. ``dry_run`` counts what a run would write and writes nothing.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from ..errors import InvalidInput
from ..store import queries
from ..text.dates import format_time
from ..text.extract import Extractor
from ..write import queue
from ..write.updates import missing_updates, write_updates
from ..write.writer import Writer
from . import retention, summaries, timelines
from .dedup import dedup
from .infer import infer
from .summaries import Skipped
from .sweep import sweep

STEPS = ("queue", "summaries", "timelines", "infer", "sweep", "dedup", "updates", "retention")
DEFAULT_MIN_AGE = dt.timedelta(hours=1)  # a world quiet this long is done for now: a live session is left alone
BATCH = 200  # summaries per transaction: a kill loses at most one batch's work, which a rerun redoes

Progress = Callable[[str, int, int], None]  # (step, done, total)


@dataclass
class Consolidation:
    """What one run did (or, dry, would do): a count per step that ran, and what it left alone.

    ``skipped``: the sessions, scopes' timelines and subjects the summaries and timelines steps did
    not summarise, each with its reason (``summaries.Skipped``): changed within ``min_age`` of
    ``ran_at`` (the store clock's time when the run began), or a session too short for a summary.
    """

    done: dict[str, int] = field(default_factory=dict)
    dry_run: bool = False
    skipped: list[Skipped] = field(default_factory=list)
    ran_at: str = ""

    def __getitem__(self, step: str) -> int:
        return self.done.get(step, 0)

    @property
    def queue(self) -> int:
        """Queued turns and notes read by System 2."""
        return self["queue"]


def steps(only: str | Sequence[str] | None) -> tuple[str, ...]:
    """The steps to run, in their order; ``only`` names one or several (None: all)."""
    if only is None:
        return STEPS
    named = [only] if isinstance(only, str) else list(only)
    unknown = [s for s in named if s not in STEPS]
    if unknown or not named:
        raise InvalidInput(f"only must name steps among {', '.join(STEPS)}; got {named!r}")
    return tuple(s for s in STEPS if s in named)


def run(
    writer: Writer,
    extractor: Extractor,
    *,
    only: str | Sequence[str] | None,
    dry_run: bool,
    min_age: dt.timedelta,
    summarizer: summaries.Summarizer,
    limit: int | None,
    recluster: bool,
    progress: Progress | None,
) -> Consolidation:
    """Run the steps ``only`` names (all by default); what each did."""
    chosen = steps(only)
    if not isinstance(min_age, dt.timedelta) or min_age < dt.timedelta(0):
        raise InvalidInput(f"min_age must be a datetime.timedelta of zero or more, got {min_age!r}")
    if not isinstance(summarizer, summaries.Summarizer):
        raise InvalidInput("summarizer must have summarize(kind, title, items) -> Drafted (consolidate/summaries.py)")
    now = dt.datetime.fromisoformat(writer.clock().replace("Z", "+00:00"))
    try:
        older_than = format_time(now - min_age)
    except OverflowError:
        raise InvalidInput(f"min_age {min_age} reaches before the year 1; give a shorter one") from None
    report = Consolidation(dry_run=dry_run, ran_at=format_time(now))
    skipped: list[Skipped] = []
    scopes = queries.worlds_of_type(writer.conn, "Scope")

    def told(step: str) -> Callable[[int, int], None] | None:
        return None if progress is None else (lambda done, total: progress(step, done, total))

    for step in chosen:
        if step == "queue":
            report.done[step] = (
                queue.pending(writer)
                if dry_run
                else queue.drain(writer, extractor, limit=limit, progress=told(step), recluster=recluster)
            )
        elif step == "summaries":  # sessions first: a timeline part reads a session after its summary is written
            changed_at = queries.items_changed(writer.conn)  # after the queue step; summaries are no items
            sessions = summaries.stale_sessions(writer, changed_at, older_than=older_than, skipped=skipped)
            done = summaries.summarise(writer, summarizer, sessions, dry_run=dry_run, batch=BATCH, progress=told(step))
            parts = summaries.stale_timelines(writer, scopes, changed_at, older_than=older_than, skipped=skipped)
            done += summaries.summarise(writer, summarizer, parts, dry_run=dry_run, batch=BATCH, progress=told(step))
            report.done[step] = done
        elif step == "timelines":
            drafted = timelines.stale_profiles(writer, scopes, older_than=older_than, skipped=skipped)
            report.done[step] = summaries.store_drafted(
                writer, drafted, dry_run=dry_run, batch=BATCH, progress=told(step)
            )
        elif step == "infer":
            report.done[step] = infer(writer, dry_run=dry_run, progress=told(step))
        elif step == "sweep":
            report.done[step] = sweep(writer, dry_run=dry_run, progress=told(step))
        elif step == "dedup":
            report.done[step] = dedup(writer, dry_run=dry_run, progress=told(step))
        elif step == "updates":
            found = missing_updates(writer)
            report.done[step] = len(found) if dry_run else write_updates(writer, found, progress=told(step))
        else:
            report.done[step] = retention.run(writer, dry_run=dry_run, progress=told(step))
    report.skipped = [_when_ready(s, min_age) for s in skipped]
    return report


def _when_ready(skipped: Skipped, min_age: dt.timedelta) -> Skipped:
    """A world left waiting, with the time it will be old enough (its last change plus ``min_age``)."""
    if skipped.reason != "recent" or skipped.changed_at is None:
        return skipped
    try:
        ready = format_time(dt.datetime.fromisoformat(skipped.changed_at.replace("Z", "+00:00")) + min_age)
    except OverflowError:  # past the calendar's end: never, in effect
        return skipped
    return dataclasses.replace(skipped, ready_at=ready)
