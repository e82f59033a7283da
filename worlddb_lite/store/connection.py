"""The SQLite connection: apsw, pragmas, sqlite-vec, schema install, version checks.

apsw is used instead of the stdlib ``sqlite3`` because it bundles a current SQLite
and can load extensions on every platform (see docs/design.md). Raw SQLite errors are
translated into ``WorldDBError`` subclasses here and nowhere else.
"""

from __future__ import annotations

import contextlib
import os
import random
import time
import urllib.parse
from collections.abc import Callable, Iterator
from importlib import resources
from pathlib import Path
from typing import Any, TypeVar

import apsw
import sqlite_vec

from ..errors import (
    Hint,
    IntegrityViolation,
    InvalidInput,
    NotAStore,
    SchemaTooNew,
    StoreBusy,
    StoreError,
    StoreUnwritable,
    WorldDBError,
)

SCHEMA_VERSION = 15  # 2: porter stems in node_fts, index edge_type; 3: append-only history; 4: index
# node_state_valid; 5: the token index node_tokens; 6: node_fts's context column; 7: node_fts contentless,
# its text read from the blobs and index_text; 8: index_text lists the turns it quotes; 9: retention's
# node_access, cold_node, cold_memory; 10: sync's member order, change_log, sync_peer; 11: a merge conflict
# noted is a change; 12: legacy_order's digest in meta; 13: the views memory and fact; 14: the vector index
# kept in vec_segment; 15: node_vec int8 with a scale (migrations.py)
BUSY_TIMEOUT_MS = 5_000
WAL_CHECKPOINT_PAGES = 10_000
T = TypeVar("T")


def schema_sql() -> str:
    """The packaged schema."""
    return resources.files("worlddb_lite.store").joinpath("schema.sql").read_text("utf-8")


def connect(path: str | Path, *, create: bool = True) -> apsw.Connection:
    """Open a connection with sqlite-vec loaded; nothing is written to the file yet.

    With ``create`` False a missing file is an error, not a new empty file.
    """
    target = str(path)
    flags = apsw.SQLITE_OPEN_READWRITE | (apsw.SQLITE_OPEN_CREATE if create else 0)
    try:
        conn = apsw.Connection(target, flags=flags)
    except apsw.CantOpenError as exc:
        missing = _missing(target)
        raise NotAStore(
            f"cannot open {target}: {exc}; "
            + ("it does not exist" if missing and not create else "check the path and its permissions"),
            hint=Hint("create") if missing and not create else None,
        ) from None
    except (apsw.FullError, apsw.IOError) as exc:
        raise unwritable(target, exc) from None
    conn.set_busy_timeout(BUSY_TIMEOUT_MS)
    return _with_vec(conn)


def _with_vec(conn: apsw.Connection) -> apsw.Connection:
    """``conn`` with sqlite-vec loaded (its functions read the vectors in SQL)."""
    conn.enable_load_extension(True)
    conn.load_extension(sqlite_vec.loadable_path())
    conn.enable_load_extension(False)
    return conn


def _may_write(path: str) -> bool:
    """Whether this process may write ``path`` (its effective ids, where the system can tell)."""
    effective = os.access in os.supports_effective_ids
    return os.access(path, os.W_OK, effective_ids=effective)


def read_only_place(path: str) -> tuple[bool, bool]:
    """Whether this process may not write the store at ``path``, and whether it may not write its folder."""
    if path == ":memory:" or not os.path.isfile(path):
        return False, False
    folder = not _may_write(os.path.dirname(os.path.abspath(path)))
    return folder or not _may_write(path), folder


def connect_sealed(path: str) -> apsw.Connection:
    """A read-only connection to a store whose folder or file cannot be written, or StoreUnwritable.

    SQLite reads a WAL store through its -shm file, which it cannot create in a read-only folder; opened
    ``immutable`` it reads the main file alone, with no locks. That is whole only when no -wal beside it
    holds commits not yet folded in, so a store with one is refused, saying what to do.
    """
    wal = path + "-wal"
    if os.path.exists(wal) and os.path.getsize(wal) > 0:
        raise StoreUnwritable(
            f"{path} is read-only here (this user may not write it or its folder), and its write-ahead log "
            f"{wal} holds commits not yet folded into it, which SQLite cannot read without writing beside "
            "it; checkpoint it as a user who may write the folder, or copy the store with "
            "its -wal file to a folder you can write",
            hint=Hint("checkpoint", (("store", path),)),
        )
    uri = "file:" + urllib.parse.quote(os.path.abspath(path)) + "?immutable=1"
    try:
        conn = apsw.Connection(uri, flags=apsw.SQLITE_OPEN_READONLY | apsw.SQLITE_OPEN_URI)
    except apsw.Error as exc:
        raise StoreUnwritable(f"cannot open {path} read-only: {exc}; check that this user may read it") from None
    return _with_vec(conn)


def _missing(target: str) -> bool:
    """Whether the file SQLite could not open is absent (not when the name cannot even be looked up)."""
    try:
        return not Path(target).exists()
    except OSError:  # the file system cannot look the name up (too long, ...)
        return False


def unwritable(target: str, exc: apsw.Error) -> StoreUnwritable:
    """The error for a file SQLite could not read or grow, nor create its -wal and -shm files beside.

    A full disk shows up as FullError when a page is written, but as a bare IOError when the
    -shm file cannot be sized on opening: both are said as the disk or the folder, with what to do.
    """
    where = target if target != ":memory:" else "memory"
    cause = "the disk is full" if isinstance(exc, apsw.FullError) else "the disk may be full, or the folder read-only"
    return StoreUnwritable(
        f"cannot write {where} or its -wal/-shm files beside it ({exc}): {cause}; nothing was written. "
        "Free some space or make the folder writable (or copy the store elsewhere), then try again"
    )


def configure(conn: apsw.Connection, path: str) -> None:
    """The store's pragmas, applied only once the file is known to be (or become) a store.

    WAL changes the file header, so a foreign SQLite file must never reach this point.
    """
    with translate():
        if path != ":memory:":
            conn.execute("pragma journal_mode = wal")
            # fold the WAL into the file every ~40 MB instead of ~4 MB: a checkpoint lands on one
            # unlucky write, so fewer of them lower a single write's P95 (chosen with bench/ingest.py;
            # docs/decisions.md); closing the store folds whatever is left
            conn.execute(f"pragma wal_autocheckpoint = {WAL_CHECKPOINT_PAGES}")
        conn.execute("pragma synchronous = normal")
        conn.execute("pragma foreign_keys = on")
        # 16 MiB of page cache, not 64: a recall touches a few MiB of pages (the OS caches the file
        # anyway), while 64 MiB filled on the first recall and stayed, a quarter of a process's peak
        # at 100k memories (bench/footprint.py)
        conn.execute("pragma cache_size = -16384")
        conn.execute("pragma temp_store = memory")


def as_int(value: apsw.SQLiteValue) -> int:
    """``int(value)`` for a value read from SQLite; NULL is a TypeError, as ``int(None)`` is."""
    if value is None:
        raise TypeError("expected a number from SQLite, got NULL")
    return int(value)


def as_float(value: apsw.SQLiteValue) -> float:
    """``float(value)`` for a value read from SQLite; NULL is a TypeError, as ``float(None)`` is."""
    if value is None:
        raise TypeError("expected a number from SQLite, got NULL")
    return float(value)


def as_text(value: apsw.SQLiteValue) -> str | None:
    """A text read from SQLite (a name, a content that may be erased), NULL kept as None."""
    return None if value is None else str(value)


def as_bytes(value: apsw.SQLiteValue) -> bytes:
    """A blob read from SQLite, unchanged; any other value is a TypeError."""
    if not isinstance(value, bytes):
        raise TypeError(f"expected a blob from SQLite, got {type(value).__name__}")
    return value


def one_row(row: Any | None) -> Any:
    """A fetched row the query always yields (an aggregate, a known key); none is a TypeError, as ``None[0]`` is."""
    if row is None:
        raise TypeError("expected a row from SQLite, got none")
    return row


def user_version(conn: apsw.Connection) -> int:
    """The schema version recorded in the file header."""
    try:
        return as_int(conn.execute("pragma user_version").fetchall()[0][0])
    except apsw.NotADBError:
        raise NotAStore("the file is not a SQLite database, so it cannot be a worlddb store") from None
    except apsw.CorruptError:
        raise NotAStore("the file is a damaged SQLite database; restore it from a backup") from None


def check(conn: apsw.Connection, path: str, create: bool) -> bool:
    """Decide whether the file is an empty new store (True) or an existing one (False); write nothing.

    A store newer than this code is refused; an older one is accepted here and migrated by the caller.
    """
    # the raw pragma, not user_version(): its own NotAStore would hide which of the two failures this is
    try:
        version = as_int(conn.execute("pragma user_version").fetchall()[0][0])
        tables = {r[0] for r in conn.execute("select name from sqlite_schema where type = 'table'")}
    except apsw.NotADBError:
        raise NotAStore(
            f"{path} is not a SQLite database, so it cannot be a worlddb store; "
            "give the path of a store or a new file name"
        ) from None
    except apsw.CorruptError:  # a truncated copy, or pages overwritten: the header is a store's, the rest is not
        raise NotAStore(
            f"{path} is a damaged store (SQLite reports it malformed) and cannot be opened; restore it from "
            "a backup; `sqlite3 FILE .recover` may salvage rows"
        ) from None
    except (apsw.FullError, apsw.IOError) as exc:  # a WAL store's reader creates its -shm file first
        raise unwritable(path, exc) from None
    if version == 0 and not tables:
        if not create:
            raise NotAStore(f"{path} holds no worlddb store yet", hint=Hint("create", (("store", path),)))
        return True
    if "meta" not in tables or "node" not in tables:
        raise NotAStore(
            f"{path} is a SQLite database but not a worlddb store (no meta/node tables); "
            "use a new file name for a new store"
        )
    if version > SCHEMA_VERSION:
        raise SchemaTooNew(
            f"{path} has schema version {version}, newer than this worlddb_lite "
            f"(version {SCHEMA_VERSION}); upgrade worlddb_lite to open it"
        )
    return False  # an older version is lifted by migrations.migrate once the pragmas are set


def install(conn: apsw.Connection, meta: list[tuple[str, str]]) -> None:
    """Create the schema and its meta rows inside the caller's open transaction."""
    conn.execute(schema_sql())
    conn.execute(f"pragma user_version = {SCHEMA_VERSION}")
    with engine_write(conn):
        conn.executemany(
            "insert into meta (key, value) values (?, ?)", [("schema_version", str(SCHEMA_VERSION)), *meta]
        )


@contextlib.contextmanager
def engine_write(conn: apsw.Connection) -> Iterator[None]:
    """The maintenance path: the engine's own write outside a reconciler transaction, guards let through.

    A setting, a purge's wipe mark, a replica's new id: one savepoint holding a reconciler_session row,
    which the guard triggers of version 12 (schema.sql) require of every write to meta and the others.

    Inside a transaction that holds a session already, it is a plain savepoint. The row never outlives
    the savepoint: an error rolls it back with the write.
    """
    with conn:
        held = conn.execute("select 1 from reconciler_session limit 1").fetchone() is not None
        if not held:
            conn.execute("insert into reconciler_session (holder) values ('reconciler')")
        yield
        if not held:
            conn.execute("delete from reconciler_session")


# what a read may do: select, read a column, call a function, recurse; a pragma only from this list, and
# one outside _NAMED_PRAGMAS only without a value (``pragma user_version`` reads, ``= 5`` would write)
_READ_ACTIONS = frozenset({apsw.SQLITE_SELECT, apsw.SQLITE_READ, apsw.SQLITE_FUNCTION, apsw.SQLITE_RECURSIVE})
_NAMED_PRAGMAS = frozenset(
    {"table_info", "table_xinfo", "table_list", "index_list", "index_info", "index_xinfo", "foreign_key_list"}
    | {"foreign_key_check", "integrity_check", "quick_check"}
)
_VALUE_PRAGMAS = frozenset(
    {"user_version", "schema_version", "application_id", "data_version", "journal_mode", "foreign_keys"}
    | {"page_count", "page_size", "freelist_count", "encoding", "auto_vacuum", "synchronous", "cache_size"}
    | {"busy_timeout", "query_only", "temp_store", "wal_autocheckpoint", "compile_options", "database_list"}
    | {"function_list", "module_list", "pragma_list", "collation_list"}
)

# what a query SQLite cannot run raises: its syntax or a function's argument, its parameters (a missing name is a
# KeyError, a value of no SQL type a TypeError), a text that is not UTF-8
_BAD_QUERY = (apsw.SQLError, apsw.BindingsError, apsw.MismatchError, apsw.RangeError, KeyError, TypeError, ValueError)


def _read_only(action: int, name: str | None, value: str | None, _db: str | None, _trigger: str | None) -> int:
    """The authorizer of ``read``: SQLITE_OK for a read, SQLITE_DENY for anything that could change the store."""
    if action in _READ_ACTIONS:
        return apsw.SQLITE_OK
    if action == apsw.SQLITE_PRAGMA and name is not None:
        pragma = name.lower()
        if pragma in _NAMED_PRAGMAS or (pragma in _VALUE_PRAGMAS and value is None):
            return apsw.SQLITE_OK
    return apsw.SQLITE_DENY


def read(conn: apsw.Connection, query: str, params: Any = ()) -> list[tuple[Any, ...]]:
    """Every row ``query`` yields on ``conn``, which an authorizer keeps read-only for this one call.

    The authorizer is consulted as each statement is prepared (never from the statement cache), so an
    insert, update, delete, DDL, attach, transaction or writing pragma is refused before it runs:
    InvalidInput, the store unchanged; so is a query SQLite cannot run (its syntax, its parameters). It is
    the caller's connection, so it sees what the caller wrote.
    """
    if not isinstance(query, str):
        raise InvalidInput(f"the SQL query must be a str, not {type(query).__name__}")
    previous = conn.authorizer
    conn.authorizer = _read_only
    try:
        with translate():  # a busy, damaged or unreadable file is said as everywhere else
            try:
                return [tuple(row) for row in conn.execute(query, params, can_cache=False)]
            except apsw.AuthError:
                raise InvalidInput(
                    "WorldDB.sql only reads (select, and pragmas that read); it refused a statement that would "
                    "change the store: write through the API (write, amend, retire, link, purge, ...)"
                ) from None
            except _BAD_QUERY as exc:
                raise InvalidInput(f"SQLite could not run the query ({exc}); nothing was written") from None
    finally:
        conn.authorizer = previous


class translate:  # noqa: N801  (used like a function: ``with translate():``)
    """Turn raw SQLite errors into WorldDBError subclasses (the store boundary).

    A class rather than a generator context manager: it wraps every write.
    """

    __slots__ = ()

    def __enter__(self) -> None:
        return None

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: object) -> None:
        if exc is None or isinstance(exc, WorldDBError):
            return None
        named = named_error(exc)
        if named is not None:
            raise named from None
        return None


def named_error(exc: BaseException) -> WorldDBError | None:
    """The WorldDBError a raw SQLite (or size) error stands for; None for any other error."""
    if isinstance(exc, apsw.ConstraintError):
        message = str(exc)
        if "worlddb:" in message:
            return IntegrityViolation(message.split("ConstraintError: ", 1)[-1])
        return IntegrityViolation(f"the store refused the write: {message}")
    if isinstance(exc, apsw.ConnectionClosedError):
        return StoreError("this store handle is closed; open the store again")
    if isinstance(exc, apsw.BusyError):
        return StoreBusy("another process held the store's write lock past the retry budget; try again")
    if isinstance(exc, apsw.NotADBError):
        return NotAStore("the file is not a SQLite database")
    if isinstance(exc, apsw.CorruptError):
        return NotAStore(
            "the store file is damaged (SQLite reports corruption); restore it from a backup", hint=Hint("verify")
        )
    if isinstance(exc, (apsw.FullError, apsw.IOError)):
        return unwritable("the store", exc)
    if isinstance(exc, (apsw.TooBigError, OverflowError)):
        return InvalidInput(f"a value is too large to store: {exc}")
    if isinstance(exc, apsw.Error):
        return StoreError(f"SQLite refused the operation ({exc}); nothing was written")
    return None


def with_retry(action: Callable[[], T], *, attempts: int = 8) -> T:
    """Run a write transaction, retrying with backoff when the file is locked.

    The busy timeout already waits inside SQLite; this catches the cases it cannot
    (a deadlock-avoidance BUSY on upgrade) so "database is locked" never reaches a caller
    until the budget is spent.
    """
    delay = 0.01
    for attempt in range(attempts):
        try:
            return action()
        except (apsw.BusyError, StoreBusy):
            if attempt == attempts - 1:
                raise StoreBusy(
                    f"the store stayed locked through {attempts} attempts; another writer holds it"
                ) from None
            time.sleep(delay * (1 + random.random()))
            delay = min(delay * 2, 1.0)
    raise AssertionError("unreachable")
