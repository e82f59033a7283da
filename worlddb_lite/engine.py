"""The parts one open store is made of, opened and wired in order: what the ``WorldDB`` facade stands on.

Opening a file is a sequence that must keep its order: connect (read as it lies where this process
may not write), check the schema and the embedder recorded in the file, configure the connection,
migrate an older file, build the store, edge registry and reconciler, then either lay out a new
store (schema, meta and root world in one transaction: an interrupted init leaves no store) or bring
an old one's token index to this code's format, then the side reader, the ``Reader``, the ``Writer``
and the access log, and last a purge's wipe left pending is finished if nothing is in the way. A
failure at any step closes what was opened.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass

import apsw

from .edges import EdgeRegistry
from .errors import Hint, InvalidInput, NotFound, StoreUnwritable
from .index import embedder_record, token_index
from .index.side_reader import SideReader
from .models.embed import Embedder, token_table
from .ops import maintenance, reembed
from .retrieval.reader import Reader
from .store import connection, migrations, queries
from .store.access_log import AccessLog
from .store.rows import Store
from .text.dates import Clock
from .write.reconciler import Reconciler
from .write.writer import Writer

COMPOSE_KINDS = ("attention", "mean")  # v2 (default) and v1 composed world embeddings


@dataclass(frozen=True)
class Engine:
    """One open store: its connection and the layers over it, wired."""

    path: str
    read_only: bool  # this process may not write the file or its folder
    sealed: bool  # read as it lies: no -wal or -shm beside it (connection.read_only_place)
    conn: apsw.Connection
    store: Store
    registry: EdgeRegistry
    reconciler: Reconciler
    reader: Reader
    writer: Writer
    side: SideReader | None
    access: AccessLog  # what recalls returned, written in batches for retention
    embedder: Embedder | None
    dim: int
    compose: str
    root: int
    migrated_from: int | None  # the schema version the file had before this open lifted it (None: current)

    def close(self) -> None:
        """Write what recalls returned if the lock is free, finish a pending purge wipe, close the file."""
        if self.access.pending:  # if the lock is free at once; what cannot be written now is dropped
            self.access.write_if_free(self.conn)
            self.access.pending.clear()  # a second close has none
        if self.side is not None:
            self.side.close()
        maintenance.try_finish_wipe(self.conn, self.store)
        self.conn.close()


def open_engine(
    path: str,
    *,
    embedder: Embedder | None | object,
    default_embedder: bool,
    dim: int,
    compose: str,
    clock: Clock,
    create: bool,
    adopt_embedder: bool = False,
    progress: Callable[[int, int], None] | None = None,
) -> Engine:
    """Open (or create) the store at ``path`` and wire its layers (the module's docstring says the order).

    ``default_embedder``: ``embedder`` stands for the bundled model (left out by the caller);
    ``adopt_embedder``: open with ``embedder`` whatever the file recorded, to re-embed it. ``progress``
    gets (rows, rows in all) while the vector index is written into the file (``_keep_index``).
    """
    if compose not in COMPOSE_KINDS:
        raise InvalidInput(f"compose must be one of {', '.join(COMPOSE_KINDS)}, got {compose!r}")
    # True when this process may not write the file or its folder (a read-only folder, file or file
    # system): SQLite cannot keep the -wal and -shm files beside it, so the store is read as it lies
    # (in a folder it may write, SQLite itself reads a file it may not write, the -shm made beside it)
    read_only, sealed = connection.read_only_place(path)
    conn = connection.connect_sealed(path) if sealed else connection.connect(path, create=create)
    try:
        new = connection.check(conn, path, create)
        if not new:
            embedder_record.require(conn, path)
        chosen, model_id, dim = embedder_record.choose(
            conn, path, embedder, dim, default=default_embedder, adopt=adopt_embedder
        )
        if not new and not adopt_embedder:
            embedder_record.check(conn, path, model_id, dim)
        if not new:  # a store keeps the composition it was made with, re-embedded too
            compose = queries.meta_value(conn, "compose") or compose
        connection.configure(conn, path)
        migrated_from = None
        found = connection.user_version(conn)
        if not new and found < connection.SCHEMA_VERSION:
            if read_only and migrations.can_migrate(found):
                raise StoreUnwritable(
                    f"{path} has schema version {found}, older than this worlddb_lite's "
                    f"{connection.SCHEMA_VERSION}, and lifting it is a write this user may not make here (the "
                    "file or its folder is read-only): open it once in a place it can be written (the upgrade is one "
                    "way: older versions cannot open it after), or read it with the worlddb_lite that wrote it"
                )
            migrated_from = migrations.migrate(conn, path)
        store = Store(conn)
        registry = EdgeRegistry()
        reconciler = Reconciler(conn, store, registry, clock, chosen, dim, compose)
        if new:
            _lay_out(reconciler, model_id, compose, clock)
        elif not adopt_embedder:  # a re-embedding rewrites the token index anyway
            _refresh_token_index(reconciler)
        if not adopt_embedder and not read_only:  # re-embedding writes the new vectors' index itself
            _keep_index(reconciler, progress)
        root = queries.root_nid(conn)
        if root is None:
            raise NotFound(f"{path} has no root world", hint=Hint("verify"))
        # recall's full-text search runs on a second connection beside its vector search (side_reader.py);
        # an in-memory store has no second connection to the same data
        where = conn.db_filename("main")  # absolute: the worker opens it later, whatever the cwd is then
        side = SideReader(where, busy_timeout_ms=connection.BUSY_TIMEOUT_MS) if where and not sealed else None
        try:
            reader = Reader(
                conn=conn,
                store=store,
                registry=registry,
                vectors=reconciler.lane,
                embedder=chosen,
                dim=dim,
                root=root,
                path=path,
                now=reconciler.now,
                check_vector=reconciler.check_vector,
                settle=reconciler.settle,
                side=side,
            )
            writer = Writer(reconciler, root, reader.nearest_in)
            maintenance.try_finish_wipe(conn, store)
        except BaseException:
            if side is not None:
                side.close()
            raise
    except BaseException:
        conn.close()
        raise
    access = AccessLog()
    reconciler.before_commit = lambda: access.ride(conn)
    return Engine(
        path, read_only, sealed, conn, store, registry, reconciler, reader, writer, side, access,
        chosen, dim, compose, root, migrated_from,
    )  # fmt: skip


def _lay_out(reconciler: Reconciler, model_id: str, compose: str, clock: Clock) -> None:
    """A new store's schema, meta, root world and (empty) kept vector index, in one transaction."""
    meta = [
        ("embedder_id", model_id),
        ("embedder_dim", str(reconciler.dim)),
        ("compose", compose),
        ("created_at", clock()),
        ("store_id", uuid.uuid4().hex),  # names this file to the replicas it syncs with (sync/replicas.py)
    ]
    if token_table(reconciler.embedder) is not None:
        meta.append(("token_format", token_index.FORMAT))
    conn = reconciler.conn
    with reconciler.transaction(prepare=lambda: connection.install(conn, meta)) as txn:
        txn.add_root()
        reconciler.lane.keep_all()  # an empty index, kept from the start: writes extend it


def _keep_index(reconciler: Reconciler, progress: Callable[[int, int], None] | None) -> None:
    """Write the vector index into the file if the current epoch has none kept (a store from before version 14).

    Once: after it, writes extend it and whatever starts an epoch writes the new one. One read when there
    is nothing to do; a store this process may not write is searched from node_vec, as before.
    """
    lane = reconciler.lane
    if lane.kept():
        return
    with reconciler.transaction():
        if not lane.kept():  # another process may have written it meanwhile
            lane.keep_all(progress)


def _refresh_token_index(reconciler: Reconciler) -> None:
    """Rewrite the token index if its rows were written in another format, or before it existed.

    Once per store and code change, like a migration, holding the write lock; nothing to do for
    a store of another embedder, whose recall has no late stage.
    """
    conn = reconciler.conn
    if token_table(reconciler.embedder) is None or queries.meta_value(conn, "token_format") == token_index.FORMAT:
        return
    with reconciler.transaction():
        if queries.meta_value(conn, "token_format") != token_index.FORMAT:  # another process may have done it
            reembed.rewrite_token_index(reconciler)
