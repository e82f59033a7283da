"""Backups and checkpoints: copies of a live store that are whole and consistent.

The store runs in WAL mode and folds its write-ahead log into the main file only every
``connection.WAL_CHECKPOINT_PAGES`` pages (~40 MB), so while it is open the main file alone
can lack minutes of recent writes. Three ways to copy it, safest first:

* ``backup`` (``worlddb backup DB DEST``): SQLite's online backup API reads one consistent
  snapshot (a WAL read transaction: writers keep writing meanwhile) into a temporary file
  beside DEST, which is renamed into place only once complete. Always safe.
* a plain file copy after ``checkpoint`` (``worlddb checkpoint DB``): a TRUNCATE checkpoint
  folds the whole WAL into the main file and empties it. If it reports ``busy`` false and
  nothing writes until the copy ends, the main file alone is the whole store. Copy the
  ``-wal`` file too if it is not empty (a write landed after the checkpoint): the two
  files together, copied while no one writes, are the store.
* a plain copy of a store no process has open: the last connection to close folds and
  removes the WAL, so the main file is everything.

Never copy the main file of a store that is being written without its WAL: the copy can miss
committed writes, or hold half of a checkpoint.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import apsw

from ..checks import file_name
from ..errors import Hint, InvalidInput, WorldDBError
from ..store import connection, file_ops, queries
from ..store.rows import Store


def backup(
    conn: apsw.Connection, source: str, dest: str | os.PathLike[str], *, overwrite: bool = False
) -> dict[str, Any]:
    """Copy the store on ``conn`` (file ``source``) to ``dest`` through the online backup API.

    One ``step(-1)``: the whole snapshot is read in one WAL read transaction, so concurrent
    writers neither block it nor restart it. The copy is written to ``DEST.partial`` and
    renamed, so a crash never leaves a half backup under the final name.
    """
    target = Path(file_name(dest, "the backup destination", "give a file path"))
    try:
        if source != ":memory:" and target.exists() and target.resolve() == Path(source).resolve():
            raise InvalidInput(f"the backup destination {target} is the store itself; give another path")
        if target.is_dir():
            raise InvalidInput(f"the backup destination {target} is a folder; give a file path inside it")
        if target.exists() and not overwrite:
            raise InvalidInput(
                f"{target} already exists; remove it, choose another name, or overwrite it",
                hint=Hint("backup", (("dest", str(target)), ("overwrite", ""))),
            )
        if not target.parent.is_dir():
            raise InvalidInput(f"the folder {target.parent} does not exist; create it first")
        return _copy(conn, target)
    except OSError as exc:  # the folder is not writable, the name is too long, the disk is full ...
        raise InvalidInput(
            f"cannot write the backup to {target} ({exc.strerror or exc}); choose a writable path"
        ) from None


def remove_copy(dest: str | os.PathLike[str]) -> None:
    """Remove a backup that failed its check (and the -wal and -shm its check may have left beside it)."""
    for name in (os.fspath(dest), f"{os.fspath(dest)}-wal", f"{os.fspath(dest)}-shm"):
        Path(name).unlink(missing_ok=True)


def _copy(conn: apsw.Connection, target: Path) -> dict[str, Any]:
    """Write the snapshot to ``TARGET.partial``, then rename it into place."""
    partial = target.with_name(target.name + ".partial")
    for leftover in (partial, Path(f"{partial}-wal"), Path(f"{partial}-shm")):
        leftover.unlink(missing_ok=True)  # from an interrupted earlier backup
    started = time.perf_counter()
    try:
        copy = apsw.Connection(str(partial))
    except apsw.Error:
        raise InvalidInput(f"cannot create {partial}; choose a writable path") from None
    try:
        with copy.backup("main", conn, "main") as job:
            connection.with_retry(lambda: job.step(-1))
            pages = job.page_count
        # the copy is a WAL-mode file like its source: fold it so DEST is one self-contained file
        file_ops.checkpoint_truncate(copy)
    except BaseException:
        copy.close()
        partial.unlink(missing_ok=True)
        raise
    copy.close()
    os.replace(partial, target)
    _fsync_dir(target.parent)
    return {
        "path": str(target),
        "pages": pages,
        "bytes": target.stat().st_size,
        "seconds": round(time.perf_counter() - started, 3),
    }


# meta key: a purge's wipe is not finished. Its value is the step left and the purge's own token:
# "vacuum <token>" (written with the erasure: a crash may come before the file is rewritten), then
# "checkpoint <token>" (the main file keeps the old pages until a checkpoint completes; a reader
# holding an older snapshot stops one). ``finish_wipe`` carries it on; each
# step changes the mark only if it is still the one it read, so a newer purge's mark is never lost.
WIPE_PENDING = "wipe_pending"


@contextlib.contextmanager
def no_waiting(conn: apsw.Connection) -> Iterator[None]:
    """Run the body with no busy timeout: a statement another connection is in the way of fails at once."""
    waits = file_ops.busy_timeout(conn)
    conn.set_busy_timeout(0)
    try:
        yield
    finally:
        conn.set_busy_timeout(waits)


def checkpoint(conn: apsw.Connection, *, wait: bool = True) -> dict[str, Any]:
    """Fold the whole WAL into the main file and truncate it to zero bytes.

    ``busy`` True means another connection held a read snapshot or the write lock past the busy
    timeout, so the WAL could not be emptied: a plain copy of the main file is then not safe.
    ``wait`` False gives up at once instead of waiting out the busy timeout (for a retry in passing).
    """
    with no_waiting(conn) if not wait else contextlib.nullcontext():
        busy, frames, folded = file_ops.checkpoint_truncate(conn)
    if frames < 0:  # -1: the store is not in WAL mode (an in-memory store): nothing to fold
        return {"busy": False, "wal_frames": 0, "checkpointed": 0}
    return {"busy": bool(busy), "wal_frames": frames, "checkpointed": folded}


def vacuum(conn: apsw.Connection, *, retry: bool = True) -> float:
    """Rewrite the file so no deleted byte survives anywhere in it; the seconds it took.

    ``pragma secure_delete`` zeroes what a delete frees, but a b-tree page that was re-balanced
    earlier still holds stale copies of its old cells in its unallocated middle; only a VACUUM
    (every page rebuilt from live rows) clears those. It rewrites the whole file: a purge-time cost.
    The rewritten pages reach the main file only with a checkpoint (``checkpoint``). ``retry`` False:
    one attempt, for a try in passing (under ``no_waiting`` it fails at once when the file is locked).
    """
    started = time.perf_counter()
    if retry:
        connection.with_retry(lambda: file_ops.vacuum(conn))
    else:
        file_ops.vacuum(conn)
    return round(time.perf_counter() - started, 3)


def _fsync_dir(folder: Path) -> None:
    """Make the rename durable (POSIX: the directory entry lives in the folder's own blocks)."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def finish_wipe(conn: apsw.Connection, store: Store, *, wait: bool, mark: str | None = None) -> dict[str, Any] | None:
    """Carry a purge's wipe on from the step its mark says is left (``WIPE_PENDING``); None: none is.

    ``mark``: the purge's own (it always runs both steps); else the one the store holds. "vacuum":
    the file is rewritten first. Then the checkpoint, which puts the rewritten pages in the main
    file and empties the WAL; the mark goes once one has completed. Each step changes the mark only
    if it is still this one, so a newer purge's mark, written meanwhile, stays for its own wipe.
    ``wait`` False: no busy timeout and one attempt at each step, so anyone in the way stops it at once.
    """
    if mark is None:
        mark = None if conn.in_transaction else queries.meta_value(conn, WIPE_PENDING)
        if mark is None:
            return None
    step, _, token = mark.partition(" ")
    seconds = 0.0
    with contextlib.nullcontext() if wait else no_waiting(conn):
        if step == "vacuum":
            seconds = vacuum(conn, retry=wait)
            _swap_mark(store, mark, f"checkpoint {token}", retry=wait)
        result = checkpoint(conn, wait=wait)
        if not result["busy"]:
            _swap_mark(store, f"checkpoint {token}", None, retry=wait)
            checkpoint(conn, wait=False)  # and the WAL emptied of that write too
    return {**result, "vacuum_seconds": seconds}


def try_finish_wipe(conn: apsw.Connection, store: Store) -> None:
    """``finish_wipe`` in passing (open, close): it never waits; anyone in the way leaves it for later."""
    try:
        finish_wipe(conn, store, wait=False)
    except (WorldDBError, apsw.Error):
        pass


def _swap_mark(store: Store, expected: str, value: str | None, *, retry: bool) -> None:
    """The wipe's mark moved on, if it is still ``expected`` (one statement: its own transaction)."""

    def swap() -> bool:
        return store.swap_meta(WIPE_PENDING, expected, value)

    if retry:
        connection.with_retry(swap)
    else:
        swap()
