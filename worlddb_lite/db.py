"""The WorldDB facade: open a store file and read and write memory through one object.

>>> with WorldDB("memory.db") as db:                       # doctest: +SKIP
...     first = db.write("I live in Lisbon", scope="alice")
...     second = db.amend(first, "I live in Porto")      # the old version stays, closed
...     [v.content for v in db.history(second)]
['I live in Lisbon', 'I live in Porto']
"""

from __future__ import annotations

import contextlib
import itertools
import os
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import apsw
import numpy as np

from .checks import file_name, names
from .edges import EdgeRegistry, EdgeType, EndView, QueryRules
from .errors import EmbedderMismatch, InvalidInput, NotCurrent, NotFound, WorldDBError
from .models.embed import Embedder, StaticEmbedder, embed_checked, embedding_text, token_table
from .ops import maintenance
from .retrieval import blas, lanes
from .retrieval.context import DEFAULT_BUDGET, Context, assemble
from .retrieval.query import QuerySpec, execute
from .retrieval.query import check as check_query
from .retrieval.recall import recall as retrieval_recall
from .retrieval.view import ReadView
from .store import connection, migrations, queries, token_index, traverse, vector_index
from .store.hashing import node_id
from .store.rows import EdgeRow, NodeRow, Store, believed_sql, visible_sql
from .store.side_reader import SideReader
from .text.dates import Clock, TimeLike, parse_time, system_clock
from .write import identity
from .write.reconciler import (
    TYPE_NAME,
    EdgeResult,
    EdgeSpec,
    NodeSpec,
    Reconciler,
    Transaction,
    Txn,
    node_body,
    normalise_alias,
)
from .write.resolver import NEAR_PROBE, Mention, New, PreferTiers, Resolution, Resolver, ResolverConfig, Tiebreaker

if TYPE_CHECKING:
    from .models.rerank import Reranker

from .types import (
    Direction,
    Edge,
    Identity,
    MergeProposal,
    MergeStatus,
    Node,
    Recall,
    Subgraph,
    VerifyReport,
    Violation,
)

DEFAULT_SCOPE = "default"
EXTERNAL_VECTORS = "external"
COMPOSE_KINDS = ("attention", "mean")  # v2 (default) and v1 composed world embeddings
_DEFAULT = object()


def _pid(value: object) -> int:
    """A merge proposal number, or InvalidInput."""
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise InvalidInput(f"a merge proposal number must be an integer, got {type(value).__name__}")
    try:
        number = int(value)
    except ValueError:
        raise InvalidInput(f"{value!r} is not a merge proposal number; list them with `worlddb merges`") from None
    if not 1 <= number < 2**63:
        raise InvalidInput(f"{number} is not a merge proposal number; they start at 1")
    return number


def _choice(enum: type[Any], value: object, field: str) -> Any:
    """Convert to a string enum, or InvalidInput naming the choices."""
    try:
        return enum(value)
    except ValueError:
        choices = ", ".join(m.value for m in enum)
        raise InvalidInput(f"{field} must be one of {choices}; got {value!r}") from None


def _count(value: object, field: str, most: int) -> int:
    """A whole number between 1 and ``most``, or InvalidInput."""
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= most:
        raise InvalidInput(f"{field} must be a whole number from 1 to {most}, got {value!r}")
    return value


def _props(value: object) -> Mapping[str, Any] | None:
    """Properties: None or a mapping (its values are checked when hashed)."""
    if value is not None and not isinstance(value, Mapping):
        raise InvalidInput(f"props must be a mapping of text keys to values, got {type(value).__name__}")
    return value


def _aliases(value: object) -> list[str]:
    """A list of non-empty alias texts."""
    if isinstance(value, (str, bytes)) or not isinstance(value, (list, tuple)):
        raise InvalidInput("aliases must be a list of names")
    return [a for a in (_text(x, "alias", required=True) for x in value) if a]


def _number(value: object, field: str) -> float:
    """A finite number, or InvalidInput."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InvalidInput(f"{field} must be a number, got {type(value).__name__}")
    try:
        number = float(value)
    except OverflowError:  # an int too large for a float
        number = float("inf")
    if not np.isfinite(number):
        raise InvalidInput(f"{field} must be a finite number")
    return number


def _text(value: str | bytes | None, field: str, *, required: bool) -> str | None:
    """Validate caller text: UTF-8, and non-empty where required."""
    if value is None:
        if required:
            raise InvalidInput(f"{field} is required")
        return None
    if isinstance(value, bytes):
        try:
            value = value.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise InvalidInput(f"{field} is not valid UTF-8 ({exc.reason}); decode it first") from None
    if not isinstance(value, str):
        raise InvalidInput(f"{field} must be text, got {type(value).__name__}")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidInput(f"{field} is not valid UTF-8 (it holds undecodable bytes)") from None
    if "\x00" in value:
        raise InvalidInput(f"{field} holds a NUL character; remove it")
    if required and not value.strip():
        raise InvalidInput(f"{field} is empty; there is nothing to remember")
    return value


class WorldDB:
    """One memory store in one SQLite file.

    ``embedder``: leave it out for the bundled static model; pass an ``Embedder`` to use
    another; pass ``None`` for a store whose vectors the caller supplies (``dim`` sets
    their size). The store records the choice and refuses to open with another one.
    ``compose``: how a world's embedding pools its children's, fixed when the store is
    created: ``"attention"`` (v2, steered by the world's own text) or ``"mean"`` (v1).
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        embedder: Embedder | None | object = _DEFAULT,
        dim: int = 256,
        compose: str = "attention",
        clock: Clock | None = None,
        create: bool = True,
        _adopt_embedder: bool = False,
    ) -> None:
        if isinstance(dim, bool) or not isinstance(dim, int) or not 1 <= dim <= 8192:
            raise InvalidInput(f"dim must be a whole number from 1 to 8192, got {dim!r}")
        if compose not in COMPOSE_KINDS:
            raise InvalidInput(f"compose must be one of {', '.join(COMPOSE_KINDS)}, got {compose!r}")
        self.path = file_name(path, "the store path", "give a file path or ':memory:'")
        self._clock = clock or system_clock
        self._conn = connection.connect(self.path, create=create)
        try:
            new = connection.check(self._conn, self.path, create)
            self._embedder, model_id, self.dim = self._choose_embedder(embedder, dim, _adopt_embedder)
            if not new and not _adopt_embedder:
                self._check_meta(model_id)
                compose = self._meta_value("compose") or compose
            self.compose = compose
            connection.configure(self._conn, self.path)
            # the version this file had before it was lifted to the current schema (None: it was current)
            self.migrated_from: int | None = None
            if not new and connection.user_version(self._conn) < connection.SCHEMA_VERSION:
                self.migrated_from = migrations.migrate(self._conn, self.path)
            self._store = Store(self._conn)
            self._registry = EdgeRegistry()
            self._reconciler = Reconciler(
                self._conn, self._store, self._registry, self._clock, self._embedder, self.dim, compose
            )
            if new:  # schema, meta and root world in one transaction: an interrupted init leaves no store
                meta = [
                    ("embedder_id", model_id),
                    ("embedder_dim", str(self.dim)),
                    ("compose", compose),
                    ("created_at", self._clock()),
                ]
                if token_table(self._embedder) is not None:
                    meta.append(("token_format", token_index.FORMAT))
                prepare = lambda: connection.install(self._conn, meta)  # noqa: E731
                with self._reconciler.transaction(prepare=prepare) as txn:
                    txn.add_root()
            elif not _adopt_embedder:  # a re-embedding rewrites the token index anyway
                self._refresh_token_index()
            self._root = self._root_nid()
        except BaseException:
            self._conn.close()
            raise
        # recall's full-text search runs on a second connection beside its vector search (side_reader.py);
        # an in-memory store has no second connection to the same data
        where = self._conn.db_filename("main")  # absolute: the worker opens it later, whatever the cwd is then
        self._side = SideReader(where, busy_timeout_ms=connection.BUSY_TIMEOUT_MS) if where else None
        self._try_finish_wipe()

    # ---- opening ------------------------------------------------------------------

    def _choose_embedder(self, embedder: object, dim: int, adopt: bool) -> tuple[Embedder | None, str, int]:
        existing = self._meta_value("embedder_id")
        if embedder is _DEFAULT:
            if existing is not None and existing not in ("minilm-l6-static-256", EXTERNAL_VECTORS) and not adopt:
                raise EmbedderMismatch(
                    f"{self.path} was embedded with {existing!r}; open it with that embedder "
                    "(WorldDB(path, embedder=...)) or re-embed it"
                )
            if existing == EXTERNAL_VECTORS and not adopt:
                return None, EXTERNAL_VECTORS, int(self._meta_value("embedder_dim") or dim)
            model = StaticEmbedder()
            return model, model.model_id, model.dim
        if embedder is None:
            return None, EXTERNAL_VECTORS, int(self._meta_value("embedder_dim") or dim)
        if not isinstance(embedder, Embedder):
            raise InvalidInput("embedder must implement worlddb_lite.Embedder (model_id, dim, embed)")
        return embedder, embedder.model_id, int(embedder.dim)

    def _refresh_token_index(self) -> None:
        """Rewrite the token index if its rows were written in another format, or before it existed.

        Once per store and code change, like a migration (4.5 s for 112k texts, holding the write
        lock); nothing to do for a store of another embedder, whose recall has no late stage.
        """
        if token_table(self._embedder) is None or self._meta_value("token_format") == token_index.FORMAT:
            return
        with self._txn():
            if self._meta_value("token_format") != token_index.FORMAT:  # another process may have done it
                self._rewrite_token_index()

    def _rewrite_token_index(self) -> None:
        """Inside a write: every token index row again, and the format they are in (none: no token table)."""
        tokens = self._reconciler.tokens()
        self._store.reindex_tokens(tokens)
        if tokens is None:
            self._store.delete_meta(["token_format"])
        else:
            self._store.set_meta([("token_format", token_index.FORMAT)])

    def _meta_value(self, key: str) -> str | None:
        return queries.meta_value(self._conn, key)

    def _check_meta(self, model_id: str) -> None:
        stored_id, stored_dim = self._meta_value("embedder_id"), self._meta_value("embedder_dim")
        if stored_id != model_id or stored_dim != str(self.dim):
            raise EmbedderMismatch(
                f"{self.path} was embedded with {stored_id!r} ({stored_dim} dimensions), "
                f"not {model_id!r} ({self.dim}); open it with that embedder, or re-embed the store"
            )

    @classmethod
    def reembed(
        cls,
        path: str | os.PathLike[str],
        *,
        embedder: Embedder | object = _DEFAULT,
        progress: Callable[[int, int], None] | None = None,
        batch: int = 4096,
    ) -> dict[str, Any]:
        """Re-embed every node of the store at ``path`` in place and recompose every world.

        ``embedder`` is the bundled model by default; the store then opens with it. One
        transaction: an interruption leaves the old vectors and model in place. Node ids and
        Merkle roots do not change (vectors are an index, not content). ``progress`` is called
        with (texts done, texts in all).
        """
        if embedder is None:
            raise InvalidInput("reembed needs an embedder: leave it out for the bundled model, or pass one")
        db = cls(path, embedder=embedder, create=False, _adopt_embedder=True)
        try:
            return db._reembed_all(progress, _count(batch, "batch", 1_000_000))
        finally:
            db.close()

    def _reembed_all(self, progress: Callable[[int, int], None] | None, batch: int) -> dict[str, Any]:
        assert self._embedder is not None
        started = time.perf_counter()
        with connection.translate():
            total = queries.text_count(self._conn)
        done = 0
        lane = self._reconciler.lane
        lane.auto_train = False  # one training at the end, not one per doubling on the way
        with contextlib.ExitStack() as stack:
            stack.callback(setattr, lane, "auto_train", True)
            stack.enter_context(self._txn())
            lane.reset()
            self._store.set_meta([("embedder_id", self._embedder.model_id), ("embedder_dim", str(self.dim))])
            self._rewrite_token_index()
            chunk: list[tuple[int, str]] = []
            for nid, name, content in itertools.chain(self._store.texts_in_depth_order(), [(0, None, None)]):
                text = embedding_text(name, content)
                if text:
                    chunk.append((nid, text))
                if chunk and (len(chunk) >= batch or nid == 0):  # nid 0 marks the end
                    vectors = embed_checked(self._embedder, [t for _, t in chunk], self.dim)
                    self._reconciler.composer.commit([(n, v) for (n, _), v in zip(chunk, vectors, strict=True)])
                    done += len(chunk)
                    chunk = []
                    if progress is not None:
                        progress(done, total)
            if done >= vector_index.TRAIN_AT:
                lane.train()
        return {
            "embedder": self._embedder.model_id,
            "dim": self.dim,
            "texts": done,
            "seconds": round(time.perf_counter() - started, 3),
        }

    def _root_nid(self) -> int:
        nid = queries.root_nid(self._conn)
        if nid is None:
            raise NotFound(f"{self.path} has no root world; run `worlddb verify` on it")
        return nid

    def close(self) -> None:
        """Close the file (safe to call twice), finishing a pending purge wipe first if nothing is in the way."""
        if self._side is not None:
            self._side.close()
        self._try_finish_wipe()
        self._conn.close()

    def _try_finish_wipe(self) -> None:
        """``_finish_wipe`` in passing (open, close): it never waits; anyone in the way leaves it for later."""
        try:
            self._finish_wipe(wait=False)
        except (WorldDBError, apsw.Error):
            pass

    def _finish_wipe(self, *, wait: bool, mark: str | None = None) -> dict[str, Any] | None:
        """Carry a purge's wipe on from the step its mark says is left (``maintenance.WIPE_PENDING``); None: none is.

        ``mark``: the purge's own (it always runs both steps); else the one the store holds. "vacuum":
        the file is rewritten first. Then the checkpoint, which puts the rewritten pages in the main
        file and empties the WAL; the mark goes once one has completed. Each step changes the mark only
        if it is still this one, so a newer purge's mark, written meanwhile, stays for its own wipe.
        ``wait`` False: no busy timeout and one attempt at each step, so anyone in the way stops it at once.
        """
        if mark is None:
            mark = None if self._conn.in_transaction else self._meta_value(maintenance.WIPE_PENDING)
            if mark is None:
                return None
        step, _, token = mark.partition(" ")
        seconds = 0.0
        with contextlib.nullcontext() if wait else maintenance.no_waiting(self._conn):
            if step == "vacuum":
                seconds = maintenance.vacuum(self._conn, retry=wait)
                self._swap_mark(mark, f"checkpoint {token}", retry=wait)
            result = maintenance.checkpoint(self._conn, wait=wait)
            if not result["busy"]:
                self._swap_mark(f"checkpoint {token}", None, retry=wait)
                maintenance.checkpoint(self._conn, wait=False)  # and the WAL emptied of that write too
        return {**result, "vacuum_seconds": seconds}

    def _swap_mark(self, expected: str, value: str | None, *, retry: bool) -> None:
        """The wipe's mark moved on, if it is still ``expected`` (one statement: its own transaction)."""

        def swap() -> bool:
            return self._store.swap_meta(maintenance.WIPE_PENDING, expected, value)

        with connection.translate():
            if retry:
                connection.with_retry(swap)
            else:
                swap()

    def __enter__(self) -> WorldDB:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- transactions -------------------------------------------------------------

    def _txn(self) -> Transaction:
        return self._reconciler.transaction()

    @contextlib.contextmanager
    def batch(self) -> Iterator[WorldDB]:
        """Group many writes into one transaction: all land, or none do.

        >>> with db.batch():                                  # doctest: +SKIP
        ...     for line in lines:
        ...         db.write(line)
        """
        with self._txn():
            yield self

    def register_edge_type(self, edge_type: EdgeType, *, replace: bool = False) -> None:
        """Add a custom edge type (subclass ``worlddb_lite.edges.BaseEdgeType``)."""
        self._registry.register(edge_type, replace=replace)

    # ---- worlds -------------------------------------------------------------------

    def world(self, name: str, *, parent: str | None = None, type: str = "World") -> str:
        """Get or create the world called ``name`` inside ``parent`` (the root by default).

        Its id depends only on type, name and parent, so the same call always names the same world.
        """
        name = _text(name, "world name", required=True)  # type: ignore[assignment]
        with self._txn() as txn:
            parent_nid = self._store.resolve(parent) if parent is not None else self._root
            nid, _ = txn.add_node(type_=type, parent=parent_nid, name=name, timeless=True)
            return self._store.header(nid).id.hex()

    def scope(self, name: str) -> str:
        """Get or create a Scope world (a user, agent, app or run) by name."""
        return self.world(name, type="Scope")

    @property
    def root_id(self) -> str:
        """Id of the store's root world."""
        return self._store.header(self._root).id.hex()

    # ---- writes -------------------------------------------------------------------

    def write(
        self,
        text: str | bytes,
        *,
        scope: str = DEFAULT_SCOPE,
        world: str | None = None,
        type: str = "Memory",
        name: str | None = None,
        valid_at: TimeLike | None = None,
        props: Mapping[str, Any] | None = None,
        vector: Sequence[float] | np.ndarray | None = None,
        aliases: Sequence[str] = (),
        salience: float = 0.0,
        index_context: str | None = None,
        word_context: str | None = None,
    ) -> str:
        """Store ``text`` verbatim in ``world`` (or in the Scope called ``scope``); return its id.

        ``valid_at`` is when it became true (default: now). Writing the same text with the
        same valid time into the same world returns the existing id. ``index_context`` is
        indexed (full text and vector) after the text but not stored in the node, so it
        leaves the id alone: what a turn's pronouns refer to (see bridge.py). ``word_context``
        is indexed for its words alone (full text, weighed lower), also outside the id: the
        turns around a turn (see conversation.ingest).
        """
        with self._txn() as txn:
            spec = self._node_spec(
                txn,
                text,
                scope=scope,
                world=world,
                type=type,
                name=name,
                valid_at=valid_at,
                props=props,
                vector=vector,
                aliases=aliases,
                salience=salience,
                index_context=index_context,
                word_context=word_context,
            )
            nid, _ = txn.add_nodes([spec])[0]
            return self._store.header(nid).id.hex()

    def write_many(self, records: Sequence[Mapping[str, Any]]) -> list[str]:
        """Write many memories in one transaction; returns their ids in order.

        Each record takes the keyword arguments of ``write`` (``text`` required). Texts are
        embedded in one batch, which is much faster than one ``write`` per text.
        """
        with self._txn() as txn:
            return [self._store.header(nid).id.hex() for nid, _ in txn.add_nodes(self._specs(txn, records))]

    def _on_tombstones(self, world: str, records: Sequence[Mapping[str, Any]]) -> list[bool]:
        """Whether each of ``write_many``'s ``records`` into ``world`` would land on a node a purge erased.

        The same content written again finds its purged node (content addressing). Only a world
        that holds a purged child can say yes, so a new session costs one index probe, not the ids.
        """
        with connection.translate():
            if not queries.holds_purged(self._conn, self._store.resolve(world)):
                return [False] * len(records)
        with self._txn() as txn:
            ids = txn.node_ids(self._specs(txn, records))
        with connection.translate():
            existing = self._store.nids_of(ids)
            kept = set(queries.with_text(self._conn, list(existing.values())))
        return [raw in existing and existing[raw] not in kept for raw in ids]

    def _specs(self, txn: Txn, records: Sequence[Mapping[str, Any]]) -> list[NodeSpec]:
        """``write_many``'s records checked into NodeSpecs."""
        allowed = {
            "text",
            "scope",
            "world",
            "type",
            "name",
            "valid_at",
            "props",
            "vector",
            "aliases",
            "salience",
            "index_context",
            "word_context",
        }
        if isinstance(records, (str, bytes, Mapping)) or not isinstance(records, Sequence):
            raise InvalidInput("records must be a list of mappings, each with at least 'text'")
        specs = []
        for record in records:
            if not isinstance(record, Mapping) or "text" not in record:
                raise InvalidInput("each record is a mapping with at least 'text'")
            unknown = set(record) - allowed
            if unknown:
                raise InvalidInput(f"unknown record fields {sorted(unknown)}; allowed: {sorted(allowed)}")
            specs.append(self._node_spec(txn, **record))
        return specs

    def _node_spec(
        self,
        txn: Txn,
        text: str | bytes,
        *,
        scope: str = DEFAULT_SCOPE,
        world: str | None = None,
        type: str = "Memory",
        name: str | None = None,
        valid_at: TimeLike | None = None,
        props: Mapping[str, Any] | None = None,
        vector: Sequence[float] | np.ndarray | None = None,
        aliases: Sequence[str] = (),
        salience: float = 0.0,
        index_context: str | None = None,
        word_context: str | None = None,
    ) -> NodeSpec:
        """Validate one memory's arguments into a NodeSpec (shared by write and write_many).

        Everything is checked before the scope world is created, so bad input writes nothing.
        """
        content = _text(text, "text", required=True)
        name = _text(name, "name", required=False)
        props = _props(props)
        when = parse_time(valid_at, field="valid_at") if valid_at is not None else None
        checked = None if vector is None else self._reconciler.check_vector(vector)
        names = _aliases(aliases)
        weight = _number(salience, "salience")
        if not isinstance(type, str) or not TYPE_NAME.match(type):
            raise InvalidInput(f"node type {type!r} must start with a letter and use letters, digits or _ (max 64)")
        return NodeSpec(
            type=type,
            parent=self._store.resolve(world) if world is not None else self._scope_nid(txn, scope),
            name=name,
            content=content,
            props=props,
            valid_at=when,
            vector=checked,
            aliases=names,
            salience=weight,
            index_context=_text(index_context, "index_context", required=False),
            word_context=_text(word_context, "word_context", required=False),
        )

    def _scope_nid(self, txn: Txn, scope: str) -> int:
        name = _text(scope, "scope", required=True)
        nid, _ = txn.add_node(type_="Scope", parent=self._root, name=name, timeless=True)
        return nid

    def amend(
        self,
        ref: str,
        text: str | bytes,
        *,
        valid_at: TimeLike | None = None,
        props: Mapping[str, Any] | None = None,
    ) -> str:
        """Write a new version of a memory that supersedes it; the old content stays, closed."""
        content = _text(text, "text", required=True)
        valid = parse_time(valid_at, field="valid_at") if valid_at is not None else None
        with self._txn() as txn:
            old_nid = self._store.resolve(ref)
            old = self._store.node_row(old_nid)
            current = self._store.to_node(old, ("supersedes",))
            if not current.is_current:
                newer = ", ".join(i[:12] for i in current.superseded_by) or "none"
                raise NotCurrent(
                    f"{current.id[:12]} is no longer current (superseded by: {newer}; "
                    f"retired: {current.retired}); amend its current version"
                )
            merged = {**current.props, **(_props(props) or {})}
            # Ask the supersedes handler first, so a refusal writes nothing (not even the new node).
            txn.check_edge(
                "supersedes", EndView(-1, "(new version)", old.type, valid or txn.now, None, None, False), old_nid
            )
            nid, created = txn.add_node(
                type_=old.type,
                parent=old.parent,  # type: ignore[arg-type]
                name=current.name,
                content=content,
                props=merged,
                valid_at=valid,
            )
            if not created:  # content addressing found an existing node: it cannot become the new version
                existing = self._store.header(nid).id.hex()[:12]
                raise InvalidInput(
                    f"a node with this content and valid time already exists ({existing}); "
                    "give the new version a different valid_at"
                )
            txn.add_edge("supersedes", nid, old_nid, valid_at=valid)  # the edge holds from the new version on
            return self._store.header(nid).id.hex()

    def retire(self, ref: str, *, at: TimeLike | None = None) -> None:
        """Close a memory's validity (it stops being true; its history stays)."""
        when = parse_time(at, field="at") if at is not None else None
        with self._txn() as txn:
            txn.close(self._store.resolve(ref), when, retire=True)

    def retract(self, ref: str) -> None:
        """Stop believing a memory from now on (belief time); what was believed before stays readable."""
        with self._txn() as txn:
            txn.close(self._store.resolve(ref), expire=True)

    def link(
        self,
        src: str,
        dst: str,
        type: str,
        *,
        props: Mapping[str, Any] | None = None,
        valid_at: TimeLike | None = None,
    ) -> Edge | MergeProposal:
        """Write an edge through its type's handler. same_as returns the staged proposal.

        A current edge of the same type between the same nodes is returned, not written twice.
        """
        return self.link_many([(src, dst, type)], props=props, valid_at=valid_at)[0]

    def link_many(
        self,
        edges: Sequence[tuple[str, str, str]],
        *,
        props: Mapping[str, Any] | None = None,
        valid_at: TimeLike | None = None,
    ) -> list[Edge | MergeProposal]:
        """Write many (src, dst, type) edges in one transaction, each through its handler, in order.

        All land or none do. Same result per edge as ``link``.
        """
        valid = parse_time(valid_at, field="valid_at") if valid_at is not None else None
        props = _props(props)
        if isinstance(edges, (str, bytes)) or not isinstance(edges, Sequence):
            raise InvalidInput("edges must be a list of (src, dst, type) triples")
        with self._txn() as txn:
            specs = []
            for item in edges:
                if not isinstance(item, (tuple, list)) or len(item) != 3:
                    raise InvalidInput("each edge is a (src, dst, type) triple")
                src, dst, edge_type = item
                specs.append(
                    EdgeSpec(edge_type, self._store.resolve(src), self._store.resolve(dst), props=props, valid_at=valid)
                )
            results = txn.add_edges(specs)
            return [self._edge_outcome(txn, spec, result) for spec, result in zip(specs, results, strict=True)]

    def _edge_outcome(self, txn: Txn, spec: EdgeSpec, result: EdgeResult) -> Edge | MergeProposal:
        if result.edge is not None:
            return result.edge
        if result.eid is not None:
            txn.write_pending()
            return self._store.to_edge(self._store.edge_row(result.eid))
        found = self._store.proposal(spec.src, spec.dst)
        assert found is not None  # a same_as that wrote no row always has a proposal
        return self._store.proposal_row(found[0])

    def unlink(self, edge_ref: str, *, at: TimeLike | None = None) -> None:
        """Close an edge's validity through its type's on_delete handler."""
        when = parse_time(at, field="at") if at is not None else None
        with self._txn() as txn:
            txn.close_edge(self._store.resolve_edge(edge_ref), when)

    def add_alias(self, ref: str, alias: str, *, source: str | None = None) -> None:
        """Record another name a node is known by (an entity's is re-resolved by the next ``recluster``)."""
        with self._txn() as txn:
            identity.add_aliases(txn, self._store, self._store.resolve(ref), [alias], source)

    # ---- identity -----------------------------------------------------------------

    def accept_merge(self, pid: int) -> None:
        """Accept a same_as proposal: writes same_as both ways (symmetric)."""
        with self._txn() as txn:
            txn.decide_merge(_pid(pid), accept=True)

    def reject_merge(self, pid: int) -> None:
        """Reject a same_as proposal: both sides stay independent, and the pair is not proposed again."""
        with self._txn() as txn:
            txn.decide_merge(_pid(pid), accept=False)

    def merge_proposals(self, status: MergeStatus | str | None = MergeStatus.PENDING) -> list[MergeProposal]:
        """Proposals of a status (pending by default; None for all)."""
        with connection.translate():
            return self._store.proposals(_choice(MergeStatus, status, "status") if status is not None else None)

    def merge_proposal(self, pid: int) -> MergeProposal:
        """One proposal by number."""
        with connection.translate():
            return self._store.proposal_row(_pid(pid))

    def equivalence_class(self, ref: str) -> tuple[str, ...]:
        """Every node joined to ``ref`` through accepted same_as, transitively (sorted ids)."""
        self._settle(indexes=False)
        return tuple(sorted(self._store.header(n).id.hex() for n in self._class_nids(ref)))

    def _class_nids(self, ref: str) -> set[int]:
        return traverse.closure(self._store.resolve(ref), self._store.same_as_neighbours)

    def export_identity(self, ref: str) -> Identity:
        """The equivalence class of ``ref`` with the union of its members' names, aliases and provenance."""
        self._settle(indexes=False)
        nids = sorted(self._class_nids(ref), key=lambda n: self._store.header(n).id)
        nodes = self._store.load_nodes(nids)
        names = sorted({n.name for n in nodes if n.name})
        aliases = sorted({a for n in nids for a in self._store.aliases(n)})
        provenance = tuple(
            {
                "node": node.id,
                "type": node.type,
                "created_at": node.created_at,
                **({"source": node.props["provenance"]} if "provenance" in node.props else {}),
            }
            for node in nodes
        )
        return Identity(tuple(n.id for n in nodes), tuple(names), tuple(aliases), provenance)

    def lookup_alias(self, alias: str) -> tuple[str, ...]:
        """Ids of nodes known by this name or alias (case-insensitive)."""
        self._settle(indexes=False)
        norm = normalise_alias(_text(alias, "alias", required=True) or "")
        return tuple(self._store.header(nid).id.hex() for nid in queries.alias_nids(self._conn, norm))

    # ---- identity resolution --------------------------------------------------------

    def configure_resolver(self, config: ResolverConfig | None = None, *, tiebreaker: Tiebreaker | None = None) -> None:
        """Set this handle's resolver thresholds and tiebreaker (defaults: the measured config, ``PreferTiers``)."""
        if config is not None and not isinstance(config, ResolverConfig):
            raise InvalidInput("config must be a worlddb_lite.write.resolver.ResolverConfig")
        if tiebreaker is not None and not callable(tiebreaker):
            raise InvalidInput("tiebreaker must be callable as tiebreaker(mention, options) -> option or None")
        engine = self._resolver()
        engine.config = config or ResolverConfig()
        engine.tiebreaker = tiebreaker or PreferTiers(engine.config.margin)

    def resolve(
        self,
        name: str,
        *,
        scope: str | None = None,
        world: str | None = None,
        aliases: Sequence[str] = (),
        context: str | None = None,
        kind: str | None = None,
        tiebreaker: Tiebreaker | None = None,
    ) -> Resolution:
        """Which known entity ``name`` is: ``Resolved``, ``Ambiguous`` or ``New``, with the tier and score.

        Tiers run in order (exact, fuzzy, phonetic, embedding) and the first confident one decides;
        a tiebreaker settles the rest (see resolver.py). Looks among the entities directly in
        ``scope`` (a Scope's name) or ``world`` (an id), or in the whole store. Reads only.
        """
        mention = self._mention(name, aliases, context, kind)
        if scope is not None and world is not None:
            raise InvalidInput("give scope (a name) or world (an id), not both")
        self._settle(indexes=False)  # edges (same_as classes); names are indexed at once
        with connection.translate():
            if scope is not None:
                inside = self._existing_scope(scope)
                if inside is None:
                    return New()  # nothing is known in a scope that does not exist yet
            else:
                inside = self._store.resolve(world) if world is not None else None
            return self._resolver().resolve(mention, world=inside, tiebreaker=tiebreaker)

    def resolve_entity(
        self,
        name: str,
        *,
        scope: str = DEFAULT_SCOPE,
        world: str | None = None,
        aliases: Sequence[str] = (),
        context: str | None = None,
        kind: str | None = None,
        valid_at: TimeLike | None = None,
        props: Mapping[str, Any] | None = None,
        source: str | None = "resolver",
        tiebreaker: Tiebreaker | None = None,
    ) -> tuple[str, Resolution]:
        """The entity ``name`` names in ``scope`` (or ``world``), written if need be; (its id, how it resolved).

        An exact match is that entity (``aliases`` are added to it, marked ``source``). Otherwise a
        new Entity is written, and a match of a lower tier, or each option of an ambiguous result,
        becomes a pending same_as proposal: nothing merges until ``accept_merge``. One transaction.
        """
        mention = self._mention(name, aliases, context, kind)
        when = parse_time(valid_at, field="valid_at") if valid_at is not None else None
        extra = _props(props)
        with self._txn() as txn:
            parent = self._store.resolve(world) if world is not None else self._scope_nid(txn, scope)
            self._settle(indexes=False)  # edges (same_as classes); names are indexed at once
            return identity.resolve_entity(
                self,
                txn,
                self._resolver(),
                mention,
                world=parent,
                valid_at=when,
                props=extra,
                source=source,
                tiebreaker=tiebreaker,
            )

    def recluster(self, *, batch: int = identity.RECLUSTER_BATCH) -> int:
        """Re-resolve the entities within two hops of every node written since the last pass; proposals staged.

        Catches identities that became visible after their first resolution (an alias added
        later, a namesake written by another connection). One transaction per ``batch`` new nodes;
        the Consolidator runs it in the background after its drains.
        """
        batch = _count(batch, "batch", 10_000_000)
        total = 0
        while True:
            staged, done = identity.recluster_pass(self, self._resolver(), batch=batch)
            total += staged
            if done:
                return total

    def _mention(self, name: str, aliases: Sequence[str], context: str | None, kind: str | None) -> Mention:
        """A validated mention (clear errors for empty names, bad aliases, non-text context)."""
        text = _text(name, "name", required=True) or ""
        return Mention(
            text.strip(),
            tuple(a.strip() for a in _aliases(aliases)),
            (_text(context, "context", required=False) or "").strip() or None,
            (_text(kind, "kind", required=False) or "").strip() or None,
        )

    def _resolver(self) -> Resolver:
        """The resolver of this handle (its name index lives in the temp schema of the connection)."""
        engine: Resolver | None = self.__dict__.get("_resolver_engine")
        if engine is None:
            embedder = self._embedder
            embed = (
                None
                if embedder is None
                # an entity is embedded by its name and content, both the name
                else (lambda text: embed_checked(embedder, [embedding_text(text, text)], self.dim)[0])
            )
            engine = Resolver(
                self._store,
                embed=embed,
                nearest=self._entity_nearest,
                cosines=lambda vector, nids: self._reconciler.lane.index().cosines(nids, vector),
            )
            self.__dict__["_resolver_engine"] = engine
        return engine

    def _entity_nearest(self, vector: np.ndarray, k: int, world: int | None) -> list[tuple[int, float]]:
        """(nid, cosine) of the ``k`` nearest entities to ``vector`` in ``world`` (None: all), best first.

        With no world this is the resolver's near-duplicate probe: tier 4 keeps only cosines at its
        high threshold, and such neighbours lie in the partitions nearest the vector, so it scans
        ``NEAR_PROBE`` of them instead of a top-k search's widened probe (bench/resolver.py).
        """
        if world is None:
            return self._reconciler.lane.index().near_duplicates(vector, k, types=["Entity"], probes=NEAR_PROBE)
        inside = self._store.header(world).id.hex()
        return lanes.nearest(self._view(None, None, False, world=inside), vector, k, ["Entity"])

    # ---- reads --------------------------------------------------------------------

    def _settle(self, *, indexes: bool = True) -> None:
        """Inside a batch, write its queued edge rows (and index rows, if asked) so reads see them.

        Roots update at commit. Node and alias rows are written at once anyway, and an index flush
        recomposes world vectors, so reads by id, alias or edge skip it (``indexes=False``).
        """
        active = self._reconciler.active
        if active is not None:
            with connection.translate():
                active.write_pending(indexes=indexes)

    def _times(self, as_of: TimeLike | None, known_as_of: TimeLike | None) -> tuple[str, str]:
        now = self._reconciler.now()
        valid = parse_time(as_of, field="as_of") if as_of is not None else now
        belief = parse_time(known_as_of, field="known_as_of") if known_as_of is not None else now
        return valid, belief

    def _rules(self, include_superseded: bool) -> QueryRules:
        """The edge types' read rules; ``include_superseded`` must be a bool (it keys a cache)."""
        if not isinstance(include_superseded, bool):
            raise InvalidInput(f"include_superseded must be True or False, got {include_superseded!r}")
        return self._registry.rules(include_superseded=include_superseded)

    def _annotations(self, include_superseded: bool) -> frozenset[str]:
        return self._rules(include_superseded).annotate

    def read(self, ref: str, *, as_of: TimeLike | None = None, known_as_of: TimeLike | None = None) -> Node:
        """A node by id or unique prefix (any version). With ``as_of``, only if visible then."""
        self._settle(indexes=False)
        with connection.translate():
            nid = self._store.resolve(ref)
            if as_of is not None or known_as_of is not None:
                valid, belief = self._times(as_of, known_as_of)
                if not queries.is_visible(self._conn, nid, valid, belief):
                    raise NotFound(f"{ref} was not valid at {valid} as known at {belief}")
            return self._store.to_node(self._store.node_row(nid), self._annotations(True))

    def history(self, ref: str) -> list[Node]:
        """Every version of a memory (joined by supersedes), oldest valid time first."""
        self._settle(indexes=False)
        with connection.translate():
            versions = traverse.closure(self._store.resolve(ref), self._store.version_links)
            nodes = self._store.load_nodes(sorted(versions), self._annotations(True))
            return sorted(nodes, key=lambda n: (n.valid_at, n.created_at, n.id))

    def nodes(
        self,
        *,
        world: str | None = None,
        type: str | None = None,
        as_of: TimeLike | None = None,
        known_as_of: TimeLike | None = None,
        include_superseded: bool = False,
        limit: int = 1000,
    ) -> list[Node]:
        """Nodes inside ``world`` (the root by default), at any depth, that are visible.

        Containment: only descendants of the world (through parents and contains edges).
        Default: what is valid and believed now; ``include_superseded`` adds closed versions.
        """
        self._settle(indexes=False)
        valid, belief = self._times(as_of, known_as_of)
        rules = self._rules(include_superseded)
        membership = sorted(rules.membership)
        type = _text(type, "type", required=False)
        with connection.translate():
            start = self._store.resolve(world) if world is not None else self._root
            nids = queries.descendants(
                self._conn,
                start,
                valid,
                belief,
                memberships=membership,
                node_type=type,
                include_superseded=include_superseded,
                limit=_count(limit, "limit", 1_000_000),
            )
            return self._store.load_nodes(nids, rules.annotate)

    def neighbours(
        self,
        ref: str,
        *,
        types: Sequence[str] | None = None,
        direction: Direction | str = Direction.OUT,
        as_of: TimeLike | None = None,
        known_as_of: TimeLike | None = None,
        include_superseded: bool = False,
    ) -> Subgraph:
        """One hop from a node: the seed, its visible neighbours and the edges followed."""
        self._settle(indexes=False)
        valid, belief = self._times(as_of, known_as_of)
        direction = _choice(Direction, direction, "direction")
        for edge_type in names(types, "types", "['refers_to', 'causes']") or ():
            self._registry.get(edge_type)
        annotate = self._annotations(include_superseded)
        with connection.translate():
            seed = self._store.resolve(ref)
            edge_pred = visible_sql("e") if not include_superseded else believed_sql("e")
            node_pred = visible_sql("s") if not include_superseded else believed_sql("s")
            edges: list[EdgeRow] = []
            far_rows: dict[int, NodeRow] = {}
            for outgoing in (True, False):
                if direction is not Direction.BOTH and (direction is Direction.OUT) != outgoing:
                    continue
                for edge_row, node_row in self._store.hop(
                    seed, outgoing=outgoing, edge_pred=edge_pred, node_pred=node_pred, params=(valid, belief)
                ):
                    if types and edge_row.type not in types:
                        continue
                    edges.append(edge_row)
                    far_rows.setdefault(node_row.nid, node_row)
            rows = [self._store.node_row(seed), *far_rows.values()]
            nodes = self._store.to_nodes(rows, annotate)
            return Subgraph(tuple(nodes), tuple(self._store.to_edge(e) for e in edges))

    def search(
        self,
        text: str,
        *,
        k: int = 10,
        as_of: TimeLike | None = None,
        known_as_of: TimeLike | None = None,
        include_superseded: bool = False,
    ) -> list[tuple[Node, float]]:
        """BM25 over names and contents (FTS5); best first, with the BM25 score (higher is better).

        A turn also matches on its neighbours' words, weighed lower (``node_fts.context``).
        """
        self._settle()
        query = lanes.fts_query(_text(text, "query", required=True) or "")
        if not query:
            return []
        valid, belief = self._times(as_of, known_as_of)
        annotate = self._annotations(include_superseded)
        with connection.translate():
            hits = queries.bm25(
                self._conn, query, valid, belief, k=_count(k, "k", 10_000), include_superseded=include_superseded
            )
            nodes = self._store.load_nodes([nid for nid, _ in hits], annotate)
            return [(node, score) for node, (_, score) in zip(nodes, hits, strict=True)]

    def nearest(
        self,
        query: str | Sequence[float] | np.ndarray,
        *,
        k: int = 10,
        world: str | None = None,
        types: Sequence[str] | None = None,
        as_of: TimeLike | None = None,
        known_as_of: TimeLike | None = None,
        include_superseded: bool = False,
    ) -> list[tuple[Node, float]]:
        """Nearest neighbours by cosine; best first, with the cosine similarity.

        ``world`` keeps nodes below that world, ``types`` nodes of those types: both filters
        work inside the index search. Worlds are found by their composed embeddings too.
        """
        self._settle()
        vector = self._query_vector(query)
        names(types, "types", "['Turn', 'Fact']")
        k = _count(k, "k", 4096)
        with connection.translate():
            view = self._view(as_of, known_as_of, include_superseded, world=world)
            kept = lanes.nearest(view, vector, k, types)
            nodes = view.nodes([nid for nid, _ in kept])
            return [(node, score) for node, (_, score) in zip(nodes, kept, strict=True)]

    def recall(
        self,
        query: str,
        *,
        scope: str | None = None,
        world: str | None = None,
        k: int = 10,
        as_of: TimeLike | None = None,
        known_as_of: TimeLike | None = None,
        include_superseded: bool = False,
        reranker: Reranker | None = None,
        late: bool = True,
    ) -> Recall:
        """Hybrid recall: BM25, vector, entity-graph, time and standing lanes fused by RRF (k = 60), best first.

        ``scope`` (a Scope's name) or ``world`` (any world's id) confines the recall to what lies
        inside it. Superseded facts are hidden unless ``include_superseded`` (then they carry
        ``superseded_by``). ``late`` re-ranks the lanes' finds token by token with the embedder's
        token table (``retrieval/late.py``; False saves its few milliseconds). A ``reranker``
        re-scores the fused head. Each hit says why it came.
        """
        self._settle()
        text = _text(query, "query", required=True) or ""
        if not text.strip():
            raise InvalidInput("the query is empty; ask with some words")
        k = _count(k, "k", 1000)
        if scope is not None and world is not None:
            raise InvalidInput("give scope (a name) or world (an id), not both")
        if reranker is not None and not callable(getattr(reranker, "score", None)):
            raise InvalidInput("reranker must implement worlddb_lite.models.rerank.Reranker (score(query, passages))")
        if not isinstance(late, bool):
            raise InvalidInput(f"late must be True or False, got {late!r}")
        with connection.translate():
            inside = self._scope_id(scope) if scope is not None else world
            view = self._view(as_of, known_as_of, include_superseded, world=inside)
            with blas.one_thread():
                hits = retrieval_recall(view, text, k=k, reranker=reranker, late=late)
            return Recall(text, tuple(hits), view.valid, view.belief)

    def context(self, query: str, *, budget: int = DEFAULT_BUDGET, k: int = 30, **options: Any) -> Context:
        """``recall`` (same options), assembled into a token-budgeted, provenance-tagged context text."""
        return assemble(self.recall(query, k=k, **options), budget=_count(budget, "budget", 1_000_000))

    def query(self, spec: QuerySpec) -> Subgraph:
        """Run a declarative query: a start set and a pipeline of operators, into a Subgraph."""
        if not isinstance(spec, QuerySpec):
            raise InvalidInput("query takes a worlddb_lite.QuerySpec")
        check_query(spec)
        self._settle()
        _count(spec.k, "k", 10_000)
        with connection.translate():
            view = self._view(spec.as_of, spec.known_as_of, spec.include_superseded, world=spec.world)
            vector = None if spec.vector is None else self._query_vector(spec.vector)
            result = execute(view, spec, vector)
            edges = tuple(self._store.to_edge(self._store.edge_row(eid)) for eid in result.eids)
            return Subgraph(tuple(view.nodes(result.nids)), edges)

    def _query_vector(self, query: str | Sequence[float] | np.ndarray) -> np.ndarray:
        """A query as a unit vector: text through the store's embedder, or a caller's vector checked."""
        if isinstance(query, str):
            if self._embedder is None:
                raise InvalidInput("this store has no embedder; pass a vector instead of text")
            vector: np.ndarray = embed_checked(self._embedder, [_text(query, "query", required=True) or ""], self.dim)[
                0
            ]
            return vector
        return self._reconciler.check_vector(query)

    def _existing_scope(self, name: str) -> int | None:
        """The Scope called ``name`` (its id depends on its name alone), or None: reads never create one."""
        name = _text(name, "scope", required=True) or ""
        return self._store.nid_of(
            node_id(node_body("Scope", self._store.header(self._root).id.hex(), name, None, None, None))
        )

    def _scope_id(self, name: str) -> str:
        """The id of the Scope called ``name``, which must exist (a recall never creates one)."""
        nid = self._existing_scope(name)
        if nid is None:
            raise NotFound(
                f"no scope named {name!r} in {self.path}; write into it first, or leave scope out "
                "to recall from the whole store"
            )
        return self._store.header(nid).id.hex()

    def _view(
        self, as_of: TimeLike | None, known_as_of: TimeLike | None, include_superseded: bool, *, world: str | None
    ) -> ReadView:
        """What one read sees: its times, its world (None or the root: everything) and its indexes."""
        valid, belief = self._times(as_of, known_as_of)
        rules = self._rules(include_superseded)
        inside = self._store.resolve(world) if world is not None else None
        embedder = self._embedder
        embed = None if embedder is None else (lambda text: embed_checked(embedder, [text], self.dim)[0])
        return ReadView(
            conn=self._conn,
            store=self._store,
            index=self._reconciler.lane.index,
            embed=embed,
            valid=valid,
            belief=belief,
            include_superseded=include_superseded,
            memberships=tuple(sorted(rules.membership)),
            annotate=frozenset(rules.annotate),
            world=None if inside == self._root else inside,
            tokens=token_table(embedder),  # a static model's: the late stage
            side=self._side if self._conn.getautocommit() else None,  # inside a write it would miss the uncommitted
        )

    def reindex(
        self, *, partitions: int | None = None, progress: Callable[[str], None] | None = None
    ) -> dict[str, int]:
        """Re-train the vector index's partitions on every vector now stored (one transaction).

        Training happens by itself as the store grows, up to ~131k vectors; beyond that it
        takes seconds, so run this (or ``worlddb reindex``) after large imports.
        """
        if partitions is not None:
            _count(partitions, "partitions", 65_536)
        with self._txn():
            return self._reconciler.lane.train(partitions, progress)

    # ---- maintenance --------------------------------------------------------------

    def _outside_batch(self, what: str) -> None:
        if self._reconciler.active is not None:
            raise InvalidInput(f"{what} cannot run inside a batch; call it after the batch has committed")

    def backup(self, dest: str | os.PathLike[str], *, overwrite: bool = False, verify: bool = False) -> dict[str, Any]:
        """Copy the store to ``dest`` with SQLite's online backup: safe while others write.

        ``verify`` opens the copy and runs ``verify`` on it (it reads the whole copy); a copy that
        fails is an IntegrityViolation. See ``maintenance`` for when a plain file copy is safe.
        """
        from .errors import IntegrityViolation

        self._outside_batch("backup")
        result = maintenance.backup(self._conn, self.path, dest, overwrite=overwrite)
        if verify:
            with WorldDB(dest, embedder=self._embedder, dim=self.dim, create=False) as copy:
                report = copy.verify()
            if not report.ok:
                first = report.violations[0]
                raise IntegrityViolation(
                    f"the backup at {dest} does not verify ({first.invariant}: {first.detail}); "
                    "keep the store, and run `worlddb verify` on it"
                )
            result["verified"] = True
        return result

    def checkpoint(self) -> dict[str, Any]:
        """Fold the write-ahead log into the main file and truncate it (``busy``: it could not)."""
        self._outside_batch("checkpoint")
        with connection.translate():
            finished = self._finish_wipe(wait=True)  # a purge's wipe left pending is finished on the way
        return finished if finished is not None else maintenance.checkpoint(self._conn)

    def purge(self, ref: str, *, scope: str | None = None) -> dict[str, Any]:
        """Erase a memory's content for good: blob, full-text row, vector, aliases (right to be forgotten).

        Also erases everything below it, its other versions and the facts extracted from it;
        with ``scope`` (a Scope's name) nothing outside that scope. Ids, Merkle leaves and a
        tombstone (hash and time) remain, so ``verify`` still passes. The file is then vacuumed and
        its WAL emptied, so the bytes are gone from disk; returns the purged ids and that checkpoint
        (``busy``: another reader held an older snapshot, so the main file and the WAL keep the old
        pages until a checkpoint completes. The store stays marked (``maintenance.WIPE_PENDING``,
        ``stats()["wipe_pending"]``), and the next open, close or ``checkpoint()`` of it, in any
        process, tries again; call ``checkpoint()`` once that reader is done to be sure).
        """
        from .ops import purge

        self._outside_batch("purge")
        with connection.translate():
            start = self._store.resolve(ref)
            inside = self._store.resolve(self._scope_id(scope)) if scope is not None else None
        self._conn.execute("pragma secure_delete = on")  # freed space is zeroed, not left readable
        try:
            with self._reconciler.transaction(prepare=lambda: purge.hold(self._conn)) as txn:
                ids = purge.erase(txn, self._conn, purge.targets(self._conn, self._store, start, inside))
                # marked with the erasure and cleared once a checkpoint has completed: a crash before the
                # VACUUM, or a reader in the checkpoint's way, leaves the mark for the next open, close or checkpoint
                mark = f"vacuum {uuid.uuid4().hex}"
                self._store.set_meta([(maintenance.WIPE_PENDING, mark)])
        finally:
            self._conn.execute("pragma secure_delete = off")
        with connection.translate():
            wiped = self._finish_wipe(wait=True, mark=mark)
        assert wiped is not None
        return {"purged": ids, "checkpoint": wiped}

    # ---- witness ------------------------------------------------------------------

    def root(self, world: str | None = None, *, as_of: TimeLike | None = None) -> str:
        """The Merkle root of a world (the whole store by default), now or as committed at ``as_of``."""
        with connection.translate():
            nid = self._store.resolve(world) if world is not None else self._root
            if as_of is None:
                return self._store.node_row(nid).root.hex()
            when = parse_time(as_of, field="as_of")
            found = queries.root_at(self._conn, nid, when)
            if found is None:
                raise NotFound(f"world {nid} had no members yet at {when}")
            return found.hex()

    def root_history(self, world: str | None = None) -> list[tuple[str, str, int]]:
        """(committed at, root, member count) for every change of a world's root, oldest first."""
        with connection.translate():
            nid = self._store.resolve(world) if world is not None else self._root
            return [(at, root.hex(), size) for at, root, size in queries.root_log(self._conn, nid)]

    def verify_root_history(self, world: str | None = None) -> list[Violation]:
        """Recompute every root a world ever committed from the nodes, edges and state log."""
        from .ops.verify import root_history_divergences

        with connection.translate():
            nid = self._store.resolve(world) if world is not None else self._root
            return root_history_divergences(self._conn, nid)

    def verify(self, *, deep: bool = False, progress: Callable[[str], None] | None = None) -> VerifyReport:
        """Recompute every hash and root and check every invariant of DESIGN.md.

        ``deep`` also recomposes every world's embedding from its members' vectors and recomputes
        every world root in the history log, reporting the first divergence.
        """
        self._settle()
        from .ops.verify import verify_store

        with connection.translate():
            return verify_store(
                self._conn,
                self._store,
                self._registry,
                self._embedder is not None,
                progress,
                deep=deep,
                tokens=token_table(self._embedder),
            )

    def stats(self) -> dict[str, Any]:
        """Counts and facts about the store, for people and monitoring."""
        self._settle()
        with connection.translate():
            files = [Path(self.path + suffix) for suffix in ("", "-wal")] if self.path != ":memory:" else []
            return {
                "path": self.path,
                "schema_version": connection.user_version(self._conn),
                "embedder": self._meta_value("embedder_id"),
                "dim": self.dim,
                **queries.counts(self._conn),
                "file_bytes": sum(f.stat().st_size for f in files if f.exists()),
                # a purge's wipe still waits for a checkpoint: the purged text may be in the main file
                "wipe_pending": self._meta_value(maintenance.WIPE_PENDING) is not None,
                "root": self.root(),
            }
