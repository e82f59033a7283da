"""The WorldDB facade: open a store file and read and write memory through one object.

>>> with WorldDB("memory.db") as db:                       # doctest: +SKIP
...     first = db.write("I live in Lisbon", scope="alice")
...     second = db.amend(first, "I live in Porto")      # the old version stays, closed
...     [v.content for v in db.history(second)]
['I live in Lisbon', 'I live in Porto']

``engine.open_engine`` opens the file and wires the layers; the facade hands each call to the one
that does it: writes to ``write`` (System 1 and System 2 in one transaction), reads to
``retrieval.Reader``, whole-store operations to ``ops``, ``consolidate`` and ``sync``. It checks
arguments and names errors (``_translated``); it holds no SQL and no write or read logic of its own.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import functools
import inspect
import os
from collections.abc import Callable, Generator, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, TypeVar

import numpy as np

from . import checks
from .checks import MAX_SCOPES, file_name
from .consolidate import cycle as consolidation
from .consolidate import retention
from .consolidate.cycle import DEFAULT_MIN_AGE, Consolidation
from .consolidate.cycle import STEPS as CONSOLIDATION_STEPS
from .consolidate.summaries import ExtractiveSummarizer, Summarizer
from .edges import EdgeType
from .engine import open_engine
from .errors import Hint, IntegrityViolation, InvalidInput
from .models.embed import Embedder
from .ops import maintenance, purge, reembed
from .ops.verify import root_history_divergences, verify_open
from .retrieval.context import DEFAULT_BUDGET, Context, assemble
from .retrieval.query import QuerySpec
from .store import connection, queries
from .sync import rows as sync_rows
from .text.dates import Clock, TimeLike, parse_time, read_moment, system_clock
from .text.extract import Extractor, check_extractor
from .types import (
    Direction,
    Edge,
    Identity,
    MergeProposal,
    MergeStatus,
    Node,
    Page,
    Recall,
    Subgraph,
    VerifyReport,
    Violation,
)
from .write import identity, live, notes, queue
from .write.conversation import DEFAULT_EXTRACTOR, ConversationIn, IngestStats
from .write.conversation import ingest as ingest_conversation
from .write.gate import EncodingGate
from .write.notes import amend_note, write_note
from .write.reconciler import WriteScope
from .write.resolver import New, PreferTiers, Resolution, ResolverConfig, Tiebreaker
from .write.turns import DEFAULT_WINDOW, DEFAULT_WORD_AFTER, DEFAULT_WORD_WINDOW
from .write.writer import DEFAULT_SCOPE, MemoryIn

if TYPE_CHECKING:
    from .models.rerank import Reranker
    from .write.bridge import ContextBridge

_DEFAULT = object()
T = TypeVar("T")

__all__ = [
    "CONSOLIDATION_STEPS",
    "DEFAULT_BUDGET",
    "DEFAULT_EXTRACTOR",
    "DEFAULT_MIN_AGE",
    "DEFAULT_SCOPE",
    "MAX_SCOPES",
    "Consolidation",
    "Extractor",
    "WorldDB",
]


def _translated(cls: type[T]) -> type[T]:
    """Every public call of the facade turns a raw SQLite error into a WorldDBError, here and at commit only.

    The layers below let apsw's errors rise; one translation at the door names them for every caller.
    """
    for name, member in list(vars(cls).items()):
        if name.startswith("_"):
            continue
        if inspect.isfunction(member):
            setattr(cls, name, _translating(member))
        elif isinstance(member, classmethod):  # reembed
            setattr(cls, name, classmethod(_translating(member.__func__)))
        elif isinstance(member, property) and member.fget is not None:  # store_id, root_id
            setattr(cls, name, property(_translating(member.fget), doc=member.__doc__))
    return cls


def _translating(method: Callable[..., Any]) -> Callable[..., Any]:
    if inspect.isgeneratorfunction(method):  # export: its rows are read as they are taken

        @functools.wraps(method)
        def stream(*args: Any, **kwargs: Any) -> Any:
            with connection.translate():
                yield from method(*args, **kwargs)

        return stream

    @functools.wraps(method)
    def call(*args: Any, **kwargs: Any) -> Any:
        with connection.translate():
            return method(*args, **kwargs)

    return call


@_translated
class WorldDB:
    """One memory store in one SQLite file.

    ``embedder``: leave it out for the bundled static model; pass an ``Embedder`` to use
    another; pass ``None`` for a store whose vectors the caller supplies (``dim`` sets
    their size). The store records the choice and refuses to open with another one.
    ``compose``: how a world's embedding pools its children's, fixed when the store is
    created: ``"attention"`` (v2, steered by the world's own text) or ``"mean"`` (v1).
    ``progress`` gets (rows, rows in all) while opening writes the vector index into the file
    (once, for a store written before it was kept there: seconds at a million memories).
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
        progress: Callable[[int, int], None] | None = None,
        _adopt_embedder: bool = False,
    ) -> None:
        checks.whole(dim, "dim", least=1, most=8192)
        self.path = file_name(path, "the store path", "give a file path or ':memory:'")
        self._clock = clock or system_clock
        parts = open_engine(
            self.path,
            embedder=embedder,
            default_embedder=embedder is _DEFAULT,
            dim=dim,
            compose=compose,
            clock=self._clock,
            create=create,
            adopt_embedder=_adopt_embedder,
            progress=progress,
        )
        self._engine = parts
        self.read_only, self._sealed, self.dim, self.compose = parts.read_only, parts.sealed, parts.dim, parts.compose
        self.migrated_from = parts.migrated_from  # the schema version the file had before this open (None: current)
        self._conn, self._store, self._registry, self._reconciler = (
            parts.conn,
            parts.store,
            parts.registry,
            parts.reconciler,
        )
        self._reader, self._writer, self._access, self._embedder = (
            parts.reader,
            parts.writer,
            parts.access,
            parts.embedder,
        )
        self._root = parts.root

    def _meta_value(self, key: str) -> str | None:
        return queries.meta_value(self._conn, key)

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
            return reembed.reembed_all(db._reconciler, progress, checks.whole(batch, "batch", least=1, most=1_000_000))
        finally:
            db.close()

    def close(self) -> None:
        """Close the file (safe to call twice), finishing a pending purge wipe first if nothing is in the way.

        Recalls not yet written for retention are written first, if the file can be written now.
        """
        self._engine.close()

    def __enter__(self) -> WorldDB:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- transactions -------------------------------------------------------------

    def _txn(self) -> WriteScope:
        return self._reconciler.transaction()

    def _settle(self, *, indexes: bool = True) -> None:
        """Inside a batch, write its queued rows so reads see them (``Reconciler.settle``)."""
        self._reconciler.settle(indexes=indexes)

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
        return self._writer.world(name, parent=parent, type=type)

    def scope(self, name: str) -> str:
        """Get or create a Scope world by name: ``ana`` (a user), ``agent:planner``, ``app:notes``, ``run:42``.

        Its id depends on its kind and name alone, so every store names the same scope with the same id.
        """
        return self._writer.scope(name)

    @property
    def root_id(self) -> str:
        """Id of the store's root world."""
        return self._store.header(self._root).id.hex()

    # ---- writes -------------------------------------------------------------------

    def write(
        self,
        text: str | bytes,
        *,
        scope: str | Sequence[str] = DEFAULT_SCOPE,
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
        speaker: str | None = None,
        extractor: Extractor | None = DEFAULT_EXTRACTOR,
        deferred: bool = False,
        tags: Sequence[str] | None = None,
        new: bool = False,
    ) -> str:
        """Store ``text`` verbatim in ``world`` (or in the Scope called ``scope``); return its id.

        A scope is a user (``ana``), an agent (``agent:planner``), an app (``app:notes``) or a run
        (``run:42``). A list of scopes writes one memory that each of them holds: it lives in the first
        and the others hold it through ``contains`` edges (recall in any of them finds it).

        With an ``extractor`` (e.g. ``RuleExtractor()``), a note (type ``Memory``) in a Scope then goes
        through System 2 in the same transaction, as a conversation's turn does: its entities and facts
        are written, and a fact supersedes the older value of its slot. The note speaks for the scope's
        person (the Scope's name) unless ``speaker`` names another. ``deferred`` queues that work for
        ``consolidate`` instead. Without either, the text is stored alone (System 1).

        ``tags`` label a note (up to 16 short labels, kept lower-case: ``recall``, ``list_memories``,
        ``retire_all`` and ``purge_tagged`` filter by them).

        ``valid_at`` is when it became true (default: now). Writing the same text with the
        same valid time into the same world returns the existing id, and so does writing a note again
        (same text and speaker as a note of the scope true now, no ``valid_at``): a retried call does
        not make a second memory; ``new=True`` does. ``index_context`` is
        indexed (full text and vector) after the text but not stored in the node, so it
        leaves the id alone: what a turn's pronouns refer to (see write/bridge.py). ``word_context``
        is indexed for its words alone (full text, weighed lower), also outside the id: the
        turns around a turn (see ``ingest``).
        """
        memory = MemoryIn(
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
            speaker=speaker,
            tags=tags,
            new=new,
        )
        return write_note(self._writer, memory, extractor=extractor, deferred=deferred)

    def write_many(self, records: Sequence[Mapping[str, Any]]) -> list[str]:
        """Write many memories in one transaction; returns their ids in order.

        Each record takes the keyword arguments of ``write`` (``text`` required). Texts are
        embedded in one batch, which is much faster than one ``write`` per text.
        """
        return self._writer.write_many(records)

    def ingest(
        self,
        conversation: ConversationIn,
        *,
        extractor: Extractor | None = DEFAULT_EXTRACTOR,
        deferred: bool = False,
        gate: EncodingGate | None = None,
        bridge: bool | ContextBridge = False,
        window: int = DEFAULT_WINDOW,
        word_window: int = DEFAULT_WORD_WINDOW,
        word_after: int = DEFAULT_WORD_AFTER,
        stats: IngestStats | None = None,
    ) -> list[str]:
        """Write one conversation in one transaction (Scope > Session > Turn); the turn ids in order.

        With an ``extractor`` (the rule-based one by default; None for none), every turn's entities
        and facts are written in the same transaction, facts superseding older values; ``deferred``
        queues the turns instead, for ``consolidate``. ``gate`` scores turns into their salience and
        sends only those at or above its threshold to extraction; ``bridge`` indexes each turn with
        what its pronouns refer to. ``window``, ``word_window`` and ``word_after`` say which
        neighbouring turns are indexed with each turn (see ``write.conversation.ingest``).
        ``stats`` is added to once the conversation has landed.
        """
        return ingest_conversation(
            self._writer,
            conversation,
            extractor=extractor,
            deferred=deferred,
            gate=gate,
            bridge=bridge,
            window=window,
            word_window=word_window,
            word_after=word_after,
            stats=stats,
        )

    def add_turn(
        self,
        text: str,
        *,
        scope: str = DEFAULT_SCOPE,
        session: str | None = None,
        speaker: str | None = None,
        at: TimeLike | None = None,
        props: Mapping[str, Any] | None = None,
        extractor: Extractor | None = DEFAULT_EXTRACTOR,
        deferred: bool = False,
    ) -> str:
        """Append one turn as it is said; its id. One transaction.

        It joins ``session`` of ``scope``, or the scope's latest session if its last turn is at most
        30 minutes older (``write.live.SESSION_GAP``), or a new session named by the turn's time.
        ``at`` is when it was said (default: now); turns of a session come in the order said. The
        turn is indexed with the turns around it as ``ingest`` indexes a whole conversation named after
        its scope, so the same turns appended live or ingested whole give the same nodes and index
        rows. ``props`` are the turn's own (a dataset's ``turn_id``, say). System 2 runs on it as in
        ``ingest`` (``extractor``, ``deferred``).
        """
        return live.add_turn(
            self._writer,
            text,
            scope=scope,
            session=session,
            speaker=speaker,
            at=at,
            props=props,
            extractor=extractor,
            deferred=deferred,
        )

    def consolidate(
        self,
        extractor: Extractor = DEFAULT_EXTRACTOR,
        *,
        only: str | Sequence[str] | None = None,
        dry_run: bool = False,
        min_age: dt.timedelta = DEFAULT_MIN_AGE,
        summarizer: Summarizer | None = None,
        limit: int | None = None,
        progress: Callable[[str, int, int], None] | None = None,
        recluster: bool = True,
    ) -> Consolidation:
        """The store's sleep cycle: the steps ``only`` names (default all, in order), each idempotent.

        ``queue``: the extractor over deferred turns and notes (at most ``limit``), then re-resolving
        identities near what they wrote if ``recluster``. ``summaries``: a Summary of each session of
        two turns or more (more words than a summary line) and a timeline of each scope, ``derived_from``
        what they quote, written by ``summarizer`` (default ``ExtractiveSummarizer()``, no model).
        ``timelines``: each subject's profile and history from its facts. Only worlds quiet for
        ``min_age`` are summarised, and only when they changed since their summary. Work commits in
        batches: a kill keeps what was done and a rerun finishes. ``dry_run`` counts what would be
        written and writes nothing. ``progress`` gets (step, done, total). Returns what each step did.
        """
        check_extractor(extractor, optional=False)
        if limit is not None:
            checks.whole(limit, "limit")
        for flag, value in (("recluster", recluster), ("dry_run", dry_run)):
            if not isinstance(value, bool):
                raise InvalidInput(f"{flag} must be True or False, got {value!r}")
        if "retention" in consolidation.steps(only) and not dry_run:
            with self._txn():  # the scores read every recall so far (waits for the lock, as a write does)
                self._access.write(self._conn)
        return consolidation.run(
            self._writer,
            extractor,
            only=only,
            dry_run=dry_run,
            min_age=min_age,
            summarizer=summarizer if summarizer is not None else ExtractiveSummarizer(),
            limit=limit,
            recluster=recluster,
            progress=progress,
        )

    def queued(self) -> int:
        """How many turns wait in the extraction queue."""
        return queue.pending(self._writer)

    def amend(
        self,
        ref: str,
        text: str | bytes,
        *,
        valid_at: TimeLike | None = None,
        props: Mapping[str, Any] | None = None,
        speaker: str | None = None,
        extractor: Extractor | None = DEFAULT_EXTRACTOR,
        deferred: bool = False,
    ) -> str:
        """Write a new version of a memory that supersedes it; the old content stays, closed.

        A note's new version is read as ``write`` reads a note (``extractor``, ``deferred``, ``speaker``):
        what it changes supersedes the old value, and a fact only the old version said closes.
        """
        return amend_note(
            self._writer,
            ref,
            text,
            extractor=extractor,
            deferred=deferred,
            speaker=speaker,
            valid_at=valid_at,
            props=props,
        )

    def retire(self, ref: str, *, at: TimeLike | None = None) -> None:
        """Close a memory's validity (it stops being true; its history stays). Retiring it again changes nothing.

        An old version (one an amend superseded) is refused: the memory's current version is what to retire.

        A fact learned from it alone (no other current turn or note says it) stands on nothing the
        person still holds: it closes at the same time, as when the memory is amended (``amend``).
        """
        notes.retire_memory(self._writer, ref, parse_time(at, field="at") if at is not None else None)

    def retract(self, ref: str) -> None:
        """Stop believing a memory from now on (belief time); what was believed before stays readable."""
        self._writer.retract(ref)

    def retire_all(self, scope: str, *, at: TimeLike | None = None, tag: str | None = None) -> list[str]:
        """Close the validity of every memory of a scope (the Scope called ``scope``) that is true now; their ids.

        Memories are the nodes that say something (notes, turns, facts); the entities they name and the
        sessions holding them stay open. A memory the scope shares with another (written to several
        scopes) stays true for the scope it lives in: only this scope's ``contains`` edge to it closes.
        One transaction: a memory that cannot be closed at ``at`` (it starts later) refuses the whole
        call. Everything stays readable as history (``as_of``); the scope stays, to be written into again.
        With ``tag``, only the notes carrying it close (each as ``retire`` closes one, with the facts
        learned from it alone), and only their ``contains`` edges.
        """
        when = parse_time(at, field="at") if at is not None else None
        with self._txn():
            nids, held = self._reader.current_in(scope, tag)
            return notes.retire_listed(self._writer, nids, held, when, with_facts=tag is not None)

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
        return self._writer.link(src, dst, type, props=props, valid_at=valid_at)

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
        return self._writer.link_many(edges, props=props, valid_at=valid_at)

    def unlink(self, edge_ref: str, *, at: TimeLike | None = None) -> None:
        """Close an edge's validity through its type's on_delete handler."""
        self._writer.unlink(edge_ref, parse_time(at, field="at") if at is not None else None)

    def add_alias(self, ref: str, alias: str, *, source: str | None = None) -> None:
        """Record another name a node is known by (an entity's is re-resolved by the next ``recluster``)."""
        identity.add_alias(self._writer, ref, alias, source)

    # ---- identity -----------------------------------------------------------------

    def accept_merge(self, pid: int) -> None:
        """Accept a same_as proposal: writes same_as both ways (symmetric)."""
        self._writer.decide_merge(pid, accept=True)

    def reject_merge(self, pid: int) -> None:
        """Reject a same_as proposal: both sides stay independent, and the pair is not proposed again."""
        self._writer.decide_merge(pid, accept=False)

    def merge_proposals(self, status: MergeStatus | str | None = MergeStatus.PENDING) -> list[MergeProposal]:
        """Proposals of a status (pending by default; None for all)."""
        return self._reader.merge_proposals(status)

    def merge_proposal(self, pid: int) -> MergeProposal:
        """One proposal by number."""
        return self._reader.merge_proposal(pid)

    def equivalence_class(self, ref: str) -> tuple[str, ...]:
        """Every node joined to ``ref`` through accepted same_as, transitively (sorted ids)."""
        return self._reader.equivalence_class(ref)

    def export_identity(self, ref: str) -> Identity:
        """The equivalence class of ``ref`` with the union of its members' names, aliases and provenance."""
        return self._reader.export_identity(ref)

    def lookup_alias(self, alias: str) -> tuple[str, ...]:
        """Ids of nodes known by this name or alias (case-insensitive)."""
        return self._writer.lookup_alias(alias)

    def configure_resolver(self, config: ResolverConfig | None = None, *, tiebreaker: Tiebreaker | None = None) -> None:
        """Set this handle's resolver thresholds and tiebreaker (defaults: the measured config, ``PreferTiers``)."""
        if config is not None and not isinstance(config, ResolverConfig):
            raise InvalidInput("config must be a worlddb_lite.ResolverConfig")
        if tiebreaker is not None and not callable(tiebreaker):
            raise InvalidInput("tiebreaker must be callable as tiebreaker(mention, options) -> option or None")
        engine = self._writer.resolver
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
        a tiebreaker settles the rest (see write/resolver.py). Looks among the entities directly in
        ``scope`` (a Scope's name) or ``world`` (an id), or in the whole store. Reads only.
        """
        found = identity.mention(name, aliases, context, kind)
        if scope is not None and world is not None:
            raise InvalidInput("give scope (a name) or world (an id), not both")
        if scope is not None:
            inside = self._reader.existing_scope(scope)
            if inside is None:
                return New()  # nothing is known in a scope that does not exist yet
        else:
            inside = self._store.resolve(world) if world is not None else None
        return identity.resolve(self._writer, found, world=inside, tiebreaker=tiebreaker)

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
        found = identity.mention(name, aliases, context, kind)
        return identity.resolve_in(
            self._writer,
            found,
            scope=scope,
            world=world,
            valid_at=valid_at,
            props=props,
            source=source,
            tiebreaker=tiebreaker,
        )

    def recluster(self, *, batch: int = identity.RECLUSTER_BATCH) -> int:
        """Re-resolve the entities within two hops of every node written since the last pass; proposals staged.

        Catches identities that became visible after their first resolution (an alias added
        later, a namesake written by another connection). One transaction per ``batch`` new nodes;
        the Consolidator runs it in the background after its drains.
        """
        return identity.recluster(self._writer, batch=batch)

    # ---- reads --------------------------------------------------------------------

    def read_time(self, value: TimeLike, *, field: str = "as_of") -> tuple[str, str | None]:
        """A moment given as ISO-8601 or in words ("last week", "in March 2024"), read against the store's clock.

        (canonical time, what the words were read as: None for ISO); words name a period, and the moment is
        its end, or now if it has not ended (``text.dates.read_moment``). Unreadable words: ``InvalidTime``.
        """
        return read_moment(value, field=field, now=self._clock())

    def read(self, ref: str, *, as_of: TimeLike | None = None, known_as_of: TimeLike | None = None) -> Node:
        """A node by id or unique prefix (any version). With ``as_of``, only if visible then."""
        return self._reader.read(ref, as_of=as_of, known_as_of=known_as_of)

    def history(self, ref: str) -> list[Node]:
        """Every version of a memory (joined by supersedes), oldest valid time first."""
        return self._reader.history(ref)

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
        return self._reader.nodes(
            world=world,
            type=type,
            as_of=as_of,
            known_as_of=known_as_of,
            include_superseded=include_superseded,
            limit=limit,
        )

    def list_memories(
        self,
        scope: str,
        *,
        type: str | Sequence[str] | None = None,
        include_retired: bool = False,
        limit: int = 50,
        cursor: str | None = None,
        tag: str | None = None,
        newest_first: bool = False,
    ) -> Page:
        """The nodes inside the Scope called ``scope``, in the order written, ``limit`` (1..1000) at a time.

        ``newest_first`` lists the last written first; ``tag`` keeps the notes carrying it.

        Default: what is true now; ``include_retired`` adds what was retired or superseded (purged nodes never
        come back). ``type`` keeps one node type (``Memory``, ``Turn``, ``Fact``, ``Entity``, ...) or a list. The page's
        ``cursor`` asks for the next page (None: this was the last); a page never repeats a node.
        """
        return self._reader.page(
            scope,
            type=type,
            include_retired=include_retired,
            limit=limit,
            cursor=cursor,
            tag=tag,
            newest_first=newest_first,
        )

    def scopes(self, kind: str | None = None) -> list[Node]:
        """Every scope of the store, or of one ``kind`` (user, agent, app, run), oldest first.

        Scope worlds: their ``name``, ``id``, ``created_at`` and kind (``scope_kind(node)``).
        """
        return self._reader.scopes(checks.scope_kind(kind))

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
        return self._reader.neighbours(
            ref,
            types=types,
            direction=direction,
            as_of=as_of,
            known_as_of=known_as_of,
            include_superseded=include_superseded,
        )

    def search(
        self,
        text: str,
        *,
        k: int = 10,
        scope: str | Sequence[str] | None = None,
        as_of: TimeLike | None = None,
        known_as_of: TimeLike | None = None,
        include_superseded: bool = False,
    ) -> list[tuple[Node, float]]:
        """BM25 over names and contents (FTS5); best first, with the BM25 score (higher is better).

        A turn also matches on its neighbours' words, weighed lower (``node_fts.context``). ``scope`` (a
        Scope's name, or a list of them) keeps what lies inside it (inside any of them).
        """
        return self._reader.search(
            text, k=k, scope=scope, as_of=as_of, known_as_of=known_as_of, include_superseded=include_superseded
        )

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
        return self._reader.nearest(
            query,
            k=k,
            world=world,
            types=types,
            as_of=as_of,
            known_as_of=known_as_of,
            include_superseded=include_superseded,
        )

    def recall(
        self,
        query: str,
        *,
        scope: str | Sequence[str] | None = None,
        world: str | None = None,
        k: int = 10,
        as_of: TimeLike | None = None,
        known_as_of: TimeLike | None = None,
        include_superseded: bool = False,
        reranker: Reranker | None = None,
        late: bool = True,
        include_cold: bool = False,
        min_confidence: float | None = None,
        type: str | None = None,
        tag: str | None = None,
        during: str | None = None,
    ) -> Recall:
        """Hybrid recall: BM25, vector, entity-graph, time and standing lanes fused by RRF (k = 60), best first.

        ``scope`` (a Scope's name: ``ana``, ``agent:planner``; or a list of them) or ``world`` (any world's
        id) confines the recall to what lies inside it (inside any of the scopes listed, by parents or
        ``contains`` edges). Superseded facts are hidden unless ``include_superseded`` (then they carry
        ``superseded_by``). ``late`` re-ranks the lanes' finds token by token with the embedder's
        token table (``retrieval/late.py``; False saves its few milliseconds). A ``reranker``
        re-scores the fused head. ``include_cold``: the vector lane also ranks the cold-tier memories
        (``set_retention``) the other lanes found by their words. Each hit says why it came; the
        hits are remembered for retention (written in batches, not by every recall).

        ``confidence`` on the result is the engine's estimate that the first hit answers the question
        (``retrieval/confidence.py``; ``signals``, what it was weighed from). ``min_confidence`` (0 to 1)
        returns no hits below it (``withheld`` says something was found); by default every recall
        returns its k hits.

        Filters keep, among the lanes' finds ranked as usual, the hits of node ``type`` (``Memory``,
        ``Turn``, ``Fact``, ...), notes carrying ``tag`` (``write``'s tags), or dated ``during`` a
        period in words or ISO ("last week", "in March 2024", "2024-05-01": ``text.dates.read_period``;
        ``Recall.during`` says how it was read).
        """
        found = self._reader.recall(
            query,
            scope=scope,
            world=world,
            k=k,
            as_of=as_of,
            known_as_of=known_as_of,
            include_superseded=include_superseded,
            reranker=reranker,
            late=late,
            include_cold=include_cold,
            min_confidence=min_confidence,
            type=type,
            tag=tag,
            during=during,
        )
        self._access.note([bytes.fromhex(hit.node.id) for hit in found.hits], self._clock())
        if self._access.due:  # never waits, never raises: see store/access_log.py
            self._access.write_if_free(self._conn)
        return found

    def set_retention(self, *, max_hot_vectors: int | None = None, cold_below: float | None = None) -> None:
        """Bound the in-memory vector index (consolidate/retention.py); None turns a setting off (the default).

        ``max_hot_vectors``: at most this many memories keep their vectors in memory, the highest
        retention scores; ``cold_below``: a memory scoring under it goes cold. Stored in the file, so
        every process honours them; ``consolidate`` (its ``retention`` step) moves the memories.
        """
        with self._txn():
            retention.write_settings(self._conn, max_hot_vectors, cold_below)

    def retention(self) -> dict[str, Any]:
        """The retention settings and how many memories are cold (``select * from cold_memory`` lists them)."""
        cap, below = retention.settings(self._store.meta_values(retention.SETTINGS))
        return {"max_hot_vectors": cap, "cold_below": below, "cold": queries.cold_count(self._conn)}

    def context(
        self,
        query: str,
        *,
        budget: int = DEFAULT_BUDGET,
        k: int = 30,
        prefer_summaries: bool = True,
        **options: Any,
    ) -> Context:
        """``recall`` (same options), assembled into a token-budgeted, provenance-tagged context text.

        ``prefer_summaries``: a summary (``consolidate``) stands for its turns, which are not repeated
        after it; False gives the details instead of the summaries.
        """
        budget = checks.whole(budget, "budget", least=1, most=1_000_000)  # refused before a recall is spent on it
        if not isinstance(prefer_summaries, bool):
            raise InvalidInput(f"prefer_summaries must be True or False, got {prefer_summaries!r}")
        return assemble(self.recall(query, k=k, **options), budget=budget, prefer_summaries=prefer_summaries)

    def query(self, spec: QuerySpec) -> Subgraph:
        """Run a declarative query: a start set and a pipeline of operators, into a Subgraph."""
        return self._reader.query(spec)

    def reindex(
        self, *, partitions: int | None = None, progress: Callable[[str], None] | None = None
    ) -> dict[str, int]:
        """Re-train the vector index's partitions on every vector now stored (one transaction).

        Training happens by itself as the store grows, up to ~131k vectors; beyond that it
        takes seconds, so run this (or ``worlddb reindex``) after large imports.
        """
        if partitions is not None:
            checks.whole(partitions, "partitions", least=1, most=65_536)
        with self._txn():
            return self._reconciler.lane.train(partitions, progress)

    # ---- maintenance --------------------------------------------------------------

    def _outside_batch(self, what: str) -> None:
        if self._reconciler.active is not None:
            raise InvalidInput(f"{what} cannot run inside a batch; call it after the batch has committed")

    def backup(self, dest: str | os.PathLike[str], *, overwrite: bool = False, verify: bool = False) -> dict[str, Any]:
        """Copy the store to ``dest`` with SQLite's online backup: safe while others write.

        ``verify`` opens the copy and runs ``verify`` on it (it reads the whole copy); a copy that
        fails is an IntegrityViolation. See ``ops.maintenance`` for when a plain file copy is safe.
        """
        self._outside_batch("backup")
        result = maintenance.backup(self._conn, self.path, dest, overwrite=overwrite)
        if verify:
            with WorldDB(dest, embedder=self._embedder, dim=self.dim, create=False) as copy:
                report = copy.verify()
            if not report.ok:
                maintenance.remove_copy(dest)  # a copy that does not verify is no backup: it must not be kept
                first = report.violations[0]
                raise IntegrityViolation(
                    f"the backup at {dest} does not verify ({first.invariant}: {first.detail}), so it was removed; "
                    "keep the store, and verify it",
                    hint=Hint("verify"),
                )
            result["verified"] = True
        return result

    def checkpoint(self) -> dict[str, Any]:
        """Fold the write-ahead log into the main file and truncate it (``busy``: it could not)."""
        self._outside_batch("checkpoint")
        # a purge's wipe left pending is finished on the way
        finished = maintenance.finish_wipe(self._conn, self._store, wait=True)
        return finished if finished is not None else maintenance.checkpoint(self._conn)

    def export(self, scope: str | None = None) -> Generator[dict[str, Any], None, None]:
        """The store (or the Scope called ``scope`` and what it holds) as records for JSON lines.

        A header (format, version, this store's root id, each exported world's root, the embedder),
        then nodes, edges, aliases, merge proposals and waiting extractions; ``import_records``
        rebuilds them in another store. A purged node comes as a tombstone, without its text.
        The records are read from one snapshot: finish iterating before writing to this store.
        """
        from .sync import transfer  # only here: a recall or a write does not load them

        self._settle()
        yield from transfer.export_records(self._reconciler, self._root, scope)

    def import_records(self, lines: Iterable[str] | str | os.PathLike[str]) -> dict[str, Any]:
        """Import an export (its lines, or the path of a .jsonl file); a summary of what was written.

        The whole file is checked first (ids against bodies, references, the header): a fault raises
        ``InvalidInput`` naming its line and nothing is written. Then everything lands in one
        transaction; importing the same file again changes nothing. ``worlds`` compares each exported
        world's root with its root here: they agree unless this store held other members in it.
        """
        from .sync import transfer  # only here: a recall or a write does not load them

        return transfer.import_source(self._reconciler, self._root, lines)

    # ---- sync ---------------------------------------------------------------------

    @property
    def store_id(self) -> str:
        """The id of this file among its replicas (copied with the file: ``replica`` gives a copy its own)."""
        return sync_rows.store_id(self._conn)

    def sync_token(self) -> str:
        """What this store has seen of itself and of each replica, for another store's ``changes(since=...)``."""
        from .sync import replicas as sync  # only here: a recall or a write does not load them

        return sync.token(self._reconciler)

    def changes(
        self,
        target: str | os.PathLike[str] | IO[bytes],
        *,
        since: str | None = None,
        scopes: Sequence[str] | None = None,
    ) -> dict[str, Any]:
        """Write a change set for the store whose ``sync_token()`` is ``since`` (None: everything) to ``target``.

        ``scopes``: only those scopes' memories (and the worlds above them). Returns the records and bytes
        written. The receiver applies it with ``apply_changes``.
        """
        from .sync import replicas as sync  # only here: a recall or a write does not load them

        self._outside_batch("changes")
        return sync.write_changes(self._reconciler, self._root, target, token_text=since, scopes=scopes)

    def apply_changes(
        self, source: bytes | str | os.PathLike[str] | IO[bytes], *, sweep: bool = True
    ) -> dict[str, Any]:
        """Apply a change set from another replica (its bytes, a path or a binary file), all of it or nothing.

        A damaged, altered or truncated set is refused (``InvalidInput``) before anything is written.
        Returns what was added and merged, the proposals in conflict, the purges carried out, ``resend``
        (this store lacks changes of its own the sender had seen, as after a restore from an older copy: the
        sender's next change set for it holds everything), and whether
        this store's roots now equal the sender's (they do unless this store holds rows the sender lacks).
        Then, with ``sweep``, the consolidator's contradiction sweep runs around what arrived (``swept``: the
        conflicts it flagged), as two devices may each hold a current value of one slot; what an apply with
        ``sweep=False``, or one killed before its sweep, brought is swept by the next apply.
        """
        from .sync import replicas as sync  # only here: a recall or a write does not load them

        self._outside_batch("apply_changes")
        if not isinstance(sweep, bool):
            raise InvalidInput(f"sweep is True or False, got {sweep!r:.40}")
        return sync.receive(self._writer, self._root, source, sweep_after=sweep)

    def sync(
        self,
        other: WorldDB | str | os.PathLike[str],
        *,
        pull: bool = True,
        push: bool = True,
        scopes: Sequence[str] | None = None,
    ) -> dict[str, Any]:
        """Exchange changes with another store file: ``pull`` its changes here, ``push`` this store's there.

        Both directions (the default) leave the two with the same rows and the same roots (``converged``);
        each direction is one transaction on its receiver. ``scopes`` limits both to those scopes.
        """
        from .sync import replicas as sync  # only here: a recall or a write does not load them

        self._outside_batch("sync")
        if not isinstance(pull, bool) or not isinstance(push, bool):
            raise InvalidInput(f"pull and push are True or False, got {pull!r:.40} and {push!r:.40}")
        scopes = sync.scope_list(scopes)
        if isinstance(other, WorldDB):
            return sync.exchange(self, other, pull=pull, push=push, scopes=scopes)
        path = checks.file_name(other, "the other store", "give the path of another worlddb store file")
        if path == ":memory:" or not os.path.isfile(path):
            raise InvalidInput(f"{path!r:.200} is not a store file; give the path of another worlddb store")
        with WorldDB(path, embedder=self._embedder, dim=self.dim, create=False) as opened:
            return sync.exchange(self, opened, pull=pull, push=push, scopes=scopes)

    def replica(self, dest: str | os.PathLike[str], *, overwrite: bool = False) -> dict[str, Any]:
        """Copy this store to ``dest`` as a replica of its own, with a new store id.

        The copy counts this store's changes as seen, so their first ``sync`` sends only what changed since.
        """
        from .sync import replicas as sync  # only here: a recall or a write does not load them

        self._outside_batch("replica")
        if not overwrite and isinstance(dest, (str, os.PathLike)) and os.path.exists(dest):
            raise InvalidInput(
                f"{os.fspath(dest)} already exists; remove it, choose another name, or overwrite it",
                hint=Hint("replica", (("dest", os.fspath(dest)), ("overwrite", ""))),
            )
        result = maintenance.backup(self._conn, self.path, dest, overwrite=overwrite)
        result["store_id"] = sync.make_replica(self._reconciler, os.fspath(dest))
        return result

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
        self._outside_batch("purge")
        start = self._store.resolve(ref)
        inside = self._store.resolve(self._reader.scope_id(scope)) if scope is not None else None
        return purge.erase_for_good(self._reconciler, [start], inside)

    def purge_tagged(self, scope: str, tag: str) -> dict[str, Any]:
        """``purge`` of every note of the Scope called ``scope`` carrying ``tag`` (any version), in one transaction.

        What was learned from them goes with them; nothing outside the scope is touched. A tag no note
        carries erases nothing (``purged`` is empty).
        """
        self._outside_batch("purge_tagged")
        world, nids = self._reader.tagged(scope, tag)
        if not nids:
            return {"purged": [], "checkpoint": None}
        return purge.erase_for_good(self._reconciler, nids, world)

    def purge_scope(self, scope: str) -> dict[str, Any]:
        """Erase the Scope called ``scope`` for good, with everything in it: ``purge`` of the scope's world.

        Its name goes too (the scope is no longer listed by ``scopes``); nothing outside it is touched.
        Writing into the same name later starts it again, empty.
        """
        self._outside_batch("purge_scope")
        world = self._store.header(self._reader.named_scope(scope)).id.hex()
        return self.purge(world, scope=scope)

    # ---- witness ------------------------------------------------------------------

    def root(self, world: str | None = None, *, as_of: TimeLike | None = None) -> str:
        """The Merkle root of a world (the whole store by default), now or as committed at ``as_of``."""
        return self._reader.root_of(world, as_of=as_of)

    def root_history(self, world: str | None = None) -> list[tuple[str, str, int]]:
        """(committed at, root, member count) for every change of a world's root, oldest first."""
        return self._reader.root_history(world)

    def verify_root_history(self, world: str | None = None) -> list[Violation]:
        """Recompute every root a world ever committed from the nodes, edges and state log."""
        nid = self._store.resolve(world) if world is not None else self._root
        return root_history_divergences(self._conn, nid)

    def verify(self, *, deep: bool = False, progress: Callable[[str], None] | None = None) -> VerifyReport:
        """Recompute every hash and root and check every invariant of docs/design.md.

        ``deep`` also recomposes every world's embedding from its members' vectors and recomputes
        every world root in the history log, reporting the first divergence.
        """
        self._settle()
        return verify_open(self._reconciler, progress, deep=deep, sealed=self._sealed)

    def sql(self, query: str, params: Sequence[Any] | Mapping[str, Any] = ()) -> list[tuple[Any, ...]]:
        """The rows of a read-only SQL query on the store, its tables and views (``memory``, ``fact``).

        >>> db.sql("select scope, text from memory where kind = ?", ("Memory",))   # doctest: +SKIP

        It reads what this handle wrote, a batch's settled rows included; a statement that would write
        (insert, DDL, attach, a pragma with a value) is refused with InvalidInput before it runs, and
        so is a query SQLite cannot run.
        """
        self._settle()
        return connection.read(self._conn, query, params)

    def stats(self) -> dict[str, Any]:
        """Counts and facts about the store, for people and monitoring."""
        self._settle()
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
