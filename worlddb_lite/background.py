"""The background consolidator: a thread with its own store handle that drains the queue and re-resolves identities.

It sits beside the front ends, above the facade: it opens a ``WorldDB`` of its own (SQLite
connections are not shared between threads), so the caller's writes and the drain interleave as
two writers do, one transaction at a time.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from .db import Extractor, WorldDB


class Consolidator:
    """Drains the queue of a store file, then re-resolves identities, every ``interval`` seconds.

    With ``summaries``, each pass also writes the summaries, timelines and profiles of worlds that have
    been quiet for an hour and changed since theirs (``WorldDB.consolidate``).
    """

    def __init__(
        self,
        path: str,
        extractor: Extractor,
        *,
        interval: float = 1.0,
        summaries: bool = False,
        open_store: Callable[[str], WorldDB] | None = None,
    ) -> None:
        self.path = path
        self.extractor = extractor
        self.interval = interval
        self.processed = 0
        self.summarised = 0  # summaries, timelines and profiles written
        self.summaries = summaries
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
        try:
            db = self._open(self.path) if self._open is not None else WorldDB(self.path, create=False)
            try:
                while not self._stop.is_set():
                    while (
                        not self._stop.is_set()
                        and db.consolidate(self.extractor, only="queue", limit=1, recluster=False).queue
                    ):
                        self.processed += 1
                    if not self._stop.is_set():
                        self.proposed += db.recluster()  # also what inline ingests wrote meanwhile
                    if self.summaries and not self._stop.is_set():  # quiet worlds only (min_age): cheap when none
                        self.summarised += sum(db.consolidate(only=("summaries", "timelines")).done.values())
                    self._stop.wait(self.interval)
            finally:
                db.close()
        except BaseException as exc:  # kept for the owner to see; a thread has no caller to raise to
            self.error = exc
