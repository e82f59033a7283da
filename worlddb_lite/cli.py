"""``worlddb``: the command line. Parses, calls the facade, prints. No SQL, no handlers.

Every command takes ``--json`` for machine-readable output. Errors are turned into
one-line messages (exit code 2) in one place, ``main``.

Building the parser imports no numpy, SQLite or model (``--help`` and ``--version`` answer at
once); each handler imports the facade when it runs. tests/test_cli_start.py checks both.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import gc
import json
import math
import os
import shlex
import subprocess
import sys
import time
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from . import __version__
from .errors import Hint, InvalidInput, MissingExtra, StoreUnwritable, WorldDBError, install_hint

if TYPE_CHECKING:
    from .db import WorldDB
    from .types import Node

MCP_EXTRA = install_hint("mcp")  # the MCP server's SDK is not in the default install

# The library's values the parser shows or offers, spelled out here: reading them from their modules
# would load numpy, SQLite and the model for `--help`. tests/test_cli_start.py checks that they agree.
CONVERSATION_FORMATS = ("locomo", "beam", "longmemeval", "jsonl")  # write.loaders.FORMATS
CONSOLIDATION_STEPS = ("queue", "summaries", "timelines", "infer", "sweep", "dedup", "updates", "retention")
DEFAULT_MIN_AGE_MINUTES = 60.0  # consolidate.cycle.DEFAULT_MIN_AGE
DEFAULT_BUDGET = 2000  # retrieval.context.DEFAULT_BUDGET, tokens
DEFAULT_THRESHOLD = 0.3  # write.gate.DEFAULT_THRESHOLD
SCOPE_KINDS = ("user", "agent", "app", "run")  # types.SCOPE_KINDS

Handler = Callable[[argparse.Namespace], Any]
SCOPE_HELP = "a user's name, or agent:NAME, app:NAME, run:NAME (see `worlddb scopes`)"
COMMANDS: dict[str, tuple[str, Handler, Callable[[argparse.ArgumentParser], None]]] = {}


Arguments = Callable[[argparse.ArgumentParser], None]


def command(name: str, help_text: str, arguments: Arguments) -> Callable[[Handler], Handler]:
    """Register a sub-command with its help text and arguments."""

    def wrap(handler: Handler) -> Handler:
        COMMANDS[name] = (help_text, handler, arguments)
        return handler

    return wrap


# what a store this user may not write still answers (`WorldDB.read_only`); every other command writes
READS = frozenset(
    {"read", "history", "search", "list", "scopes", "recall", "merges", "verify", "stats", "export", "shell", "browse"}
)


def _open(args: argparse.Namespace, *, create: bool = False) -> WorldDB:
    from . import StaticEmbedder, WorldDB  # here, not at the top: the parser alone must not load them

    # opening a store written before the vector index was kept in the file writes it, once
    progress = None if getattr(args, "json", False) else _progress_bar("keeping the vector index in the file (once)")
    if args.model:
        db = WorldDB(args.db, embedder=StaticEmbedder(args.model), create=create, progress=progress)
    else:
        db = WorldDB(args.db, create=create, progress=progress)
    if db.migrated_from is not None:  # one way: say so once, where the user sees it (new-user trial)
        print(
            f"worlddb: upgraded {args.db} from schema version {db.migrated_from} to {db.stats()['schema_version']}; "
            "worlddb_lite versions before it cannot open it now",
            file=sys.stderr,
        )
    if db.read_only and args.command not in READS:
        db.close()
        raise StoreUnwritable(
            f"{args.db} is read-only here (this user may not write it or its folder), and `{args.command}` "
            f"writes; nothing was written. Run it as a user who may write both, or copy the store to a folder "
            f"you can write; {', '.join(sorted(READS))} still read it in place"
        )
    return db


def _node_text(node: Node) -> str:
    interval = f"[{node.valid_at} .. {node.invalid_at or 'open'})"
    flags = [f for f, on in (("retired", node.retired), ("retracted", node.expired_at), ("purged", node.purged)) if on]
    head = f"{node.id}  {node.type}  {interval}" + (f"  ({', '.join(flags)})" if flags else "")
    lines = [head]
    if node.name:
        lines.append(f"  name: {node.name}")
    if node.content:
        lines.append(f"  {node.content}")
    for other in node.superseded_by:
        lines.append(f"  superseded by {other}")
    for other in node.contradicted_by:
        lines.append(f"  contradicted by {other}")
    return "\n".join(lines)


STORE_VARIABLE = "WORLDDB_STORE"  # the store a command uses when none is given
SCOPE_VARIABLE = "WORLDDB_SCOPE"  # the scope the commands that write or read one scope use when none is given
SCOPED = frozenset({"write", "add-turn", "search", "list", "recall"})
SHORT = {"--scope": "-s", "--k": "-k", "--json": "-j"}  # the options every call repeats
SHORT_ID = 12  # hex characters of an id printed for people: unique among millions (8 collide by 100k memories)
LANES = (
    "Each hit's why names what ranked it, with the hit's rank there: text (full-text BM25), vector (the "
    "question's embedding), entity (a name in the question, via that name), time (a date in the question), "
    "late (the question matched token by token), notes (a note among the turns); then what moved it, with its "
    "effect on the score: session, world, person (about whom the question asks), speaker (a person's own "
    "turn), stale / changed / older (an update above what it replaced), standing (an instruction kept below "
    "the answer), rerank (--rerank)."
)


def _hit_line(node: Node) -> str:
    """One recalled memory on one line: a short id (``read`` takes it), its type, since when, who said what."""
    said = " ".join((node.content or node.name or "").split())
    speaker = node.props.get("speaker")
    until = f" until {node.invalid_at[:10]}" if node.invalid_at else ""
    who = f"{speaker}: " if isinstance(speaker, str) and speaker else ""
    return f"{node.id[:SHORT_ID]}  {node.type}  {node.valid_at[:10]}{until}  {who}{said}"


def _db_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "db",
        nargs="?",
        default=os.environ.get(STORE_VARIABLE) or None,
        help=f"path of the store file ({STORE_VARIABLE})",
    )


def _with(*extra: Callable[[argparse.ArgumentParser], object]) -> Callable[[argparse.ArgumentParser], None]:
    def arguments(p: argparse.ArgumentParser) -> None:
        _db_arg(p)
        for add in extra:
            add(p)

    return arguments


def _ref(p: argparse.ArgumentParser) -> None:
    p.add_argument("id", help="node id (64 hex characters) or a unique prefix of at least 8")


@command("init", "create an empty store (with the bundled embedder unless --model is given)", _with())
def cmd_init(args: argparse.Namespace) -> Any:
    with _open(args, create=True) as db:
        return {"path": db.path, "root": db.root(), "embedder": db.stats()["embedder"]}


@command(
    "write",
    "remember a note (text, or - to read it from stdin): stored verbatim, its facts learned; prints its id",
    _with(
        lambda p: p.add_argument("text", help="the memory, verbatim; - reads it from standard input"),
        lambda p: p.add_argument(
            "--scope",
            action="append",
            help=f"the scope to write into: {SCOPE_HELP}; repeat it for one memory several scopes hold, the first "
            "owning it (default: default)",
        ),
        lambda p: p.add_argument("--type", default="Memory", help="node type (default: Memory, a note)"),
        lambda p: p.add_argument("--name", help="optional name of the node (default: none)"),
        lambda p: p.add_argument("--valid-at", help="when it became true (ISO-8601; default: now)"),
        lambda p: p.add_argument("--speaker", help="who says it (default: the scope's person)"),
        lambda p: p.add_argument(
            "--verbatim",
            action="store_true",
            help="store the text alone: no entities or facts learned from it, nothing superseded",
        ),
        lambda p: p.add_argument("--deferred", action="store_true", help="queue its extraction for `consolidate`"),
        lambda p: p.add_argument(
            "--tag",
            action="append",
            help="a short label to filter by (recall --tag, list --tag); repeat for more (default: none)",
        ),
        lambda p: p.add_argument(
            "--new",
            action="store_true",
            help="a second memory even if the scope holds this note already (default: its id, so a retry is safe)",
        ),
    ),
)
def cmd_write(args: argparse.Namespace) -> Any:
    if args.verbatim and args.deferred:
        raise InvalidInput("--verbatim stores the text alone and --deferred queues what to learn from it; give one")
    from .db import DEFAULT_SCOPE

    with _open(args, create=True) as db:
        return db.write(
            _text_of(args.text),
            scope=args.scope or DEFAULT_SCOPE,
            type=args.type,
            name=args.name,
            valid_at=args.valid_at,
            extractor=_extractor(args),
            deferred=args.deferred,
            speaker=args.speaker,
            tags=args.tag,
            new=args.new,
        )


def _extractor(args: argparse.Namespace) -> Any:
    """What reads a memory's text: the default write path's extractor, or none with --verbatim."""
    from .db import DEFAULT_EXTRACTOR

    return None if args.verbatim else DEFAULT_EXTRACTOR


def _text_of(argument: str) -> str:
    """The text argument, or standard input when it is ``-`` (without the newline echo ends it with)."""
    return sys.stdin.read().removesuffix("\n").removesuffix("\r") if argument == "-" else argument


@command(
    "add-turn",
    "append one turn of a conversation as it is said (text, or - to read it from stdin); prints its id",
    _with(
        lambda p: p.add_argument("text", help="what was said, verbatim; - reads it from standard input"),
        lambda p: p.add_argument(
            "--scope", default="default", help=f"the conversation's scope: {SCOPE_HELP} (default: default)"
        ),
        lambda p: p.add_argument(
            "--session", help="session to append to (default: the scope's latest, or a new one after 30 minutes)"
        ),
        lambda p: p.add_argument("--speaker", help="who said it (default: no one named)"),
        lambda p: p.add_argument("--at", help="when it was said (ISO-8601; default: now)"),
        lambda p: p.add_argument("--deferred", action="store_true", help="queue its extraction for `consolidate`"),
    ),
)
def cmd_add_turn(args: argparse.Namespace) -> Any:
    text = _text_of(args.text)
    with _open(args, create=True) as db:
        return db.add_turn(
            text, scope=args.scope, session=args.session, speaker=args.speaker, at=args.at, deferred=args.deferred
        )


@command(
    "read",
    "print one node (any version)",
    _with(
        _ref,
        lambda p: p.add_argument(
            "--as-of", help="only if valid at this time (ISO-8601; default: any version, whatever its validity)"
        ),
    ),
)
def cmd_read(args: argparse.Namespace) -> Any:
    with _open(args) as db:
        return db.read(args.id, as_of=args.as_of)


@command(
    "amend",
    "write a new version that supersedes a memory (read as `write` reads a note); prints the new id",
    _with(
        _ref,
        lambda p: p.add_argument("text", help="the new content; - reads it from standard input"),
        lambda p: p.add_argument("--valid-at", help="when the new version became true (default: now)"),
        lambda p: p.add_argument("--speaker", help="who says it (default: whom the old version spoke for)"),
        lambda p: p.add_argument(
            "--verbatim", action="store_true", help="store the new text alone: nothing learned from it, nothing closed"
        ),
    ),
)
def cmd_amend(args: argparse.Namespace) -> Any:
    with _open(args) as db:
        extractor = _extractor(args)
        return db.amend(args.id, _text_of(args.text), valid_at=args.valid_at, speaker=args.speaker, extractor=extractor)


@command(
    "retire",
    "close a memory's validity (its history stays)",
    _with(
        _ref,
        lambda p: p.add_argument("--at", help="when it stopped being true (default: now)"),
    ),
)
def cmd_retire(args: argparse.Namespace) -> Any:
    with _open(args) as db:
        db.retire(args.id, at=args.at)
        return db.read(args.id)


@command("history", "every version of a memory with its validity interval", _with(_ref))
def cmd_history(args: argparse.Namespace) -> Any:
    with _open(args) as db:
        return db.history(args.id)


@command(
    "link",
    "write an edge through its type's handler (same_as stages a proposal)",
    _with(
        lambda p: p.add_argument("src", help="source node id or prefix"),
        lambda p: p.add_argument("dst", help="target node id or prefix"),
        lambda p: p.add_argument("type", help="edge type, e.g. refers_to, contradicts, same_as"),
    ),
)
def cmd_link(args: argparse.Namespace) -> Any:
    from .types import Edge

    with _open(args) as db:
        made = db.link(args.src, args.dst, args.type)
        if args.json:
            return made
        if isinstance(made, Edge):
            return _edge_text(made)
        decide = f"nothing merges until it is decided: worlddb merge DB {made.pid} accept|reject"
        return f"{_proposal_text(db, made)}\n{decide}"


def _edge_text(edge: Any) -> str:
    """One edge on one line: short id, type, source -> target, validity (``types.Edge``)."""
    closed = "  (retracted)" if edge.expired_at else ""
    return (
        f"{edge.id[:SHORT_ID]}  {edge.type}  {edge.src[:SHORT_ID]} -> {edge.dst[:SHORT_ID]}  "
        f"[{edge.valid_at} .. {edge.invalid_at or 'open'}){closed}"
    )


def _proposal_text(db: WorldDB, proposal: Any) -> str:
    """One merge proposal on one line: number, status, both sides (short id and name), score, tier, reason."""
    sides = []
    for ref in (proposal.a, proposal.b):
        try:
            name = db.read(ref).name
        except WorldDBError:  # a side that cannot be read shows its id alone
            name = None
        sides.append(f"{ref[:SHORT_ID]}" + (f" {name!r}" if name else ""))
    how = [f"score {proposal.score:.2f}"] if proposal.score is not None else []
    how += [f"tier {proposal.tier}"] if proposal.tier else []
    how += [proposal.reason] if proposal.reason else []
    decided = f", decided {proposal.decided_at[:10]}" if proposal.decided_at else ""
    return f"proposal {proposal.pid}  {proposal.status}{decided}  {sides[0]} same_as {sides[1]}" + (
        f"  ({'; '.join(how)})" if how else ""
    )


@command(
    "search",
    "full-text (BM25) search over what is valid now (or at --as-of)",
    _with(
        lambda p: p.add_argument("query", help="free text"),
        lambda p: p.add_argument("--k", type=int, default=10, help="how many hits (default 10)"),
        lambda p: p.add_argument(
            "--scope",
            action="append",
            help=f"only memories inside this scope: {SCOPE_HELP}; repeat it for several (default: the whole store)",
        ),
        lambda p: p.add_argument("--as-of", help="search what was true at this time (ISO-8601; default: now)"),
    ),
)
def cmd_search(args: argparse.Namespace) -> Any:
    with _open(args) as db:
        found = db.search(args.query, k=args.k, scope=args.scope, as_of=args.as_of)
        return [{"score": round(score, 4), "node": node} for node, score in found]


@command(
    "list",
    "list the memories of a scope in the order written, a page at a time (next page: --cursor)",
    _with(
        lambda p: p.add_argument("--scope", required=True, help=f"the scope to list: {SCOPE_HELP}"),
        lambda p: p.add_argument(
            "--type", help="only nodes of this type: Memory, Turn, Fact, Entity, Session (default: every type)"
        ),
        lambda p: p.add_argument(
            "--retired", action="store_true", help="also list retired and superseded memories (default: current only)"
        ),
        lambda p: p.add_argument("--limit", type=int, default=50, help="at most this many (1-1000; default 50)"),
        lambda p: p.add_argument(
            "--cursor", help="start after this page's end, as the previous page printed (default: the first page)"
        ),
        lambda p: p.add_argument("--tag", help="only notes with this tag (default: any)"),
        lambda p: p.add_argument("--newest", action="store_true", help="newest first (default: the order written)"),
    ),
)
def cmd_list(args: argparse.Namespace) -> Any:
    with _open(args) as db:
        page = db.list_memories(
            args.scope,
            type=args.type,
            include_retired=args.retired,
            limit=args.limit,
            cursor=args.cursor,
            tag=args.tag,
            newest_first=args.newest,
        )
    return page


@command(
    "scopes",
    "list the store's scopes, oldest first, with their kinds and ids",
    _with(
        lambda p: p.add_argument("--kind", choices=SCOPE_KINDS, help="only scopes of this kind (default: every kind)")
    ),
)
def cmd_scopes(args: argparse.Namespace) -> Any:
    from .types import scope_record

    with _open(args) as db:
        found = [scope_record(n) for n in db.scopes(kind=args.kind)]
    if args.json:
        return found
    rows = [f"{s['id'][:12]}  {s['created_at'][:10]}  {s['kind']:<5}  {s['name']}" for s in found]
    return "\n".join(rows) or "no scopes yet"


@command(
    "recall",
    "hybrid recall: BM25, vectors and the entity graph fused (RRF), with why each hit came",
    _with(
        lambda p: setattr(p, "epilog", LANES),
        lambda p: p.add_argument("query", help="free text"),
        lambda p: p.add_argument(
            "--scope",
            action="append",
            help=f"only memories inside this scope: {SCOPE_HELP}; repeat it for several (default: the whole store)",
        ),
        lambda p: p.add_argument("--k", type=int, default=10, help="how many hits (default 10)"),
        lambda p: p.add_argument(
            "--as-of",
            help="recall as things were true then: ISO-8601 or words ('last week', 'in March 2024'; default: now)",
        ),
        lambda p: p.add_argument(
            "--type", help="only hits of this node type: Memory (a note), Turn, Fact, ... (default: any)"
        ),
        lambda p: p.add_argument("--tag", help="only notes with this tag (default: any)"),
        lambda p: p.add_argument(
            "--during",
            help="only what is dated in this period: words or ISO ('last week', 'May 2024', '2024-05-01'; "
            "default: any)",
        ),
        lambda p: p.add_argument(
            "--include-superseded", action="store_true", help="also return superseded facts, marked as historical"
        ),
        lambda p: p.add_argument(
            "--context", action="store_true", help="print a token-budgeted context for a model instead of the hits"
        ),
        lambda p: p.add_argument(
            "--budget", type=int, default=DEFAULT_BUDGET, help=f"token budget of --context (default {DEFAULT_BUDGET})"
        ),
        lambda p: p.add_argument(
            "--rerank",
            metavar="FOLDER",
            help="rerank with the ONNX cross-encoder in FOLDER (model.onnx + tokenizer.json; default: no reranker); "
            "needs the rerank extra: pip install 'worlddb_lite[rerank]'",
        ),
        lambda p: p.add_argument(
            "--no-late",
            dest="late",
            action="store_false",
            help="skip the token-by-token re-ranking of the lanes' finds (a few ms faster)",
        ),
        lambda p: p.add_argument(
            "--include-cold",
            action="store_true",
            help="also rank cold-tier memories (see `worlddb retention`) by their vectors",
        ),
        lambda p: p.add_argument(
            "--min-confidence",
            type=float,
            metavar="C",
            help="return nothing when the engine's confidence that the first hit answers is under C (0 to 1; "
            "default: always return the hits)",
        ),
    ),
)
def cmd_recall(args: argparse.Namespace) -> Any:
    from . import OnnxCrossEncoder

    reranker = OnnxCrossEncoder(args.rerank) if args.rerank else None
    options: dict[str, Any] = {
        "scope": args.scope,
        "include_superseded": args.include_superseded,
        "reranker": reranker,
        "late": args.late,
        "include_cold": args.include_cold,
        "min_confidence": args.min_confidence,
    }
    with _open(args) as db:
        as_of, read_as = db.read_time(args.as_of) if args.as_of is not None else (None, None)
        if read_as is not None:
            print(f"as of {read_as}", file=sys.stderr)
        if args.context:
            context = db.context(args.query, budget=args.budget, k=args.k, as_of=as_of, **options)
            return context if args.json else context.text
        found = db.recall(
            args.query, k=args.k, as_of=as_of, type=args.type, tag=args.tag, during=args.during, **options
        )
    if found.during is not None:
        print(f"during {found.during[2]}", file=sys.stderr)
    if args.json:
        return found
    lines = []
    for rank, hit in enumerate(found.hits, start=1):
        why = ", ".join(
            f"{r.lane} #{r.rank}" + (f" via {r.via!r}" if r.via else "") + (f" {r.effect:+.4f}" if r.effect else "")
            for r in hit.why
        )
        lines.append(f"{rank:3d}. {hit.score:.4f}  {_hit_line(hit.node)}\n       why: {why}")
    if not lines:
        if found.withheld:
            floor = args.min_confidence
            sure = math.floor(found.confidence * 100) / 100  # rounded down: never "0.73 is under 0.73"
            return f"nothing relevant: the best match's confidence {sure:.2f} is under {floor:g}"
        return "no memories found"
    return "\n".join([f"confidence {found.confidence:.2f} (that the first hit answers)", *lines])


@command(
    "merges",
    "list same_as merge proposals",
    _with(
        lambda p: p.add_argument(
            "--status",
            default="pending",
            choices=["pending", "accepted", "rejected", "all"],
            help="which proposals to list (default: pending)",
        ),
    ),
)
def cmd_merges(args: argparse.Namespace) -> Any:
    with _open(args) as db:
        found = db.merge_proposals(None if args.status == "all" else args.status)
        if args.json:
            return found
        which = "" if args.status == "all" else f"{args.status} "
        return "\n".join(_proposal_text(db, p) for p in found) or f"no {which}merge proposals"


@command(
    "merge",
    "accept or reject a merge proposal",
    _with(
        lambda p: p.add_argument("pid", type=int, help="proposal number (see `worlddb merges`)"),
        lambda p: p.add_argument(
            "decision",
            choices=["accept", "reject"],
            help="accept writes same_as both ways; reject keeps both sides apart for good",
        ),
    ),
)
def cmd_merge(args: argparse.Namespace) -> Any:
    with _open(args) as db:
        (db.accept_merge if args.decision == "accept" else db.reject_merge)(args.pid)
        decided = db.merge_proposal(args.pid)
        return decided if args.json else _proposal_text(db, decided)


@command(
    "verify",
    "recompute every hash and root and check every invariant; non-zero exit on violations",
    _with(
        lambda p: p.add_argument(
            "--deep",
            action="store_true",
            help="also recompute every world root in the history log and recompose every world's embedding",
        )
    ),
)
def cmd_verify(args: argparse.Namespace) -> Any:
    with _open(args) as db:
        return db.verify(
            deep=args.deep, progress=None if args.json else (lambda m: print(f"checking {m}…", file=sys.stderr))
        )


@command("reembed", "re-embed every node in place with --model (the bundled model by default)", _with())
def cmd_reembed(args: argparse.Namespace) -> Any:
    from . import StaticEmbedder, WorldDB

    embedder = StaticEmbedder(args.model) if args.model else StaticEmbedder()
    return WorldDB.reembed(args.db, embedder=embedder, progress=None if args.json else _progress_bar("re-embedding"))


@command(
    "reindex",
    "re-train the vector index's partitions on every stored vector (after big imports)",
    _with(lambda p: p.add_argument("--partitions", type=int, help="how many (default: 4 x sqrt(vectors))")),
)
def cmd_reindex(args: argparse.Namespace) -> Any:
    with _open(args) as db:
        return db.reindex(
            partitions=args.partitions, progress=None if args.json else (lambda m: print(m, file=sys.stderr))
        )


@command(
    "ingest",
    "load a dataset file, each conversation in one transaction (progress on stderr)",
    _with(
        lambda p: p.add_argument("file", help="the dataset file (or BEAM folder / archive)"),
        lambda p: p.add_argument("--format", required=True, choices=CONVERSATION_FORMATS, help="the file's format"),
        lambda p: p.add_argument(
            "--scope", help="put every conversation in this scope (default: each conversation's own)"
        ),
        lambda p: p.add_argument(
            "--deferred", action="store_true", help="queue extraction for `worlddb consolidate` instead of running it"
        ),
        lambda p: p.add_argument(
            "--gate",
            nargs="?",
            type=float,
            const=DEFAULT_THRESHOLD,
            metavar="THRESHOLD",
            help="score turns (novelty x salience) into their salience; only turns at "
            f"or above THRESHOLD (default {DEFAULT_THRESHOLD}) are extracted",
        ),
        lambda p: p.add_argument(
            "--bridge", action="store_true", help="index each turn with what its pronouns refer to in the turns before"
        ),
    ),
)
def cmd_ingest(args: argparse.Namespace) -> Any:
    from . import EncodingGate, IngestStats, load_conversations

    gate = EncodingGate(threshold=args.gate) if args.gate is not None else None  # a bad threshold stops here
    conversations = load_conversations(
        args.file, args.format, args.scope
    )  # read and checked before anything is written
    total = sum(c.turn_count for c in conversations)
    show = None if args.json else _progress_bar("ingesting")
    started = time.perf_counter()
    done = 0
    stats = IngestStats()
    with _open(args, create=True) as db:
        for conversation in conversations:
            db.ingest(conversation, deferred=args.deferred, gate=gate, bridge=args.bridge, stats=stats)
            done += conversation.turn_count
            if show is not None:
                show(done, total)
    seconds = time.perf_counter() - started
    out: dict[str, Any] = {
        "conversations": len(conversations),
        "turns": total,
        "seconds": round(seconds, 3),
        "turns_per_s": round(total / seconds, 1) if seconds > 0 else None,
    }
    if gate is not None:
        out["below_gate"] = stats.below_gate
    if args.bridge:
        out["bridged"] = stats.bridged
    return out


MAX_MIN_AGE_MINUTES = 100 * 366 * 24 * 60.0  # a century: anything longer means "nothing is old enough"


@command(
    "consolidate",
    "the store's sleep cycle: queued extraction, summaries and timelines, profiles; idempotent, resumable",
    _with(
        lambda p: p.add_argument(
            "--only",
            action="append",
            choices=CONSOLIDATION_STEPS,
            help="run only this step (repeatable; default: every step, in order)",
        ),
        lambda p: p.add_argument(
            "--dry-run", action="store_true", help="count what each step would write, and write nothing"
        ),
        lambda p: p.add_argument(
            "--min-age",
            type=float,
            default=DEFAULT_MIN_AGE_MINUTES,
            help=f"summarise only worlds unchanged for this many minutes (default {DEFAULT_MIN_AGE_MINUTES:g})",
        ),
        lambda p: p.add_argument("--limit", type=int, help="stop after this many queued turns (default: every one)"),
    ),
)
def cmd_consolidate(args: argparse.Namespace) -> Any:
    if not 0 <= args.min_age <= MAX_MIN_AGE_MINUTES:  # also refuses nan and inf
        raise InvalidInput(f"--min-age is {args.min_age:g} minutes; give 0 to {MAX_MIN_AGE_MINUTES:g}")
    bars: dict[str, Callable[[int, int], None]] = {}

    def progress(step: str, done: int, total: int) -> None:
        bars.setdefault(step, _progress_bar(step))(done, total)

    with _open(args) as db:
        report = db.consolidate(
            only=args.only,
            dry_run=args.dry_run,
            min_age=dt.timedelta(minutes=args.min_age),
            limit=args.limit,
            progress=None if args.json else progress,
        )
        out = {**report.done, "dry_run": report.dry_run, "pending": db.queued()}
    if args.json:
        return {**out, "skipped": report.skipped}
    lines = [f"{key}: {_value_text(value)}" for key, value in out.items()]
    if report.skipped:
        lines.append(f"left alone ({len(report.skipped)}):")
        lines += [f"  {_skipped_text(s, report.ran_at, args.min_age)}" for s in report.skipped[:SKIPPED_SHOWN]]
        if len(report.skipped) > SKIPPED_SHOWN:
            lines.append(f"  and {len(report.skipped) - SKIPPED_SHOWN} more (--json lists every one)")
    return "\n".join(lines)


SKIPPED_SHOWN = 10  # lines of what consolidate left alone; --json has them all


def _skipped_text(skipped: Any, ran_at: str, min_age: float) -> str:
    """One world (or subject) consolidate left alone, and why, on one line (``summaries.Skipped``)."""
    what = f"{skipped.kind} {skipped.name!r}"
    if skipped.reason != "recent":
        return f"{what}: {skipped.detail}"
    said = f"{skipped.detail}; " if skipped.detail else ""
    ready = f"; ready at {skipped.ready_at[:16].replace('T', ' ')} UTC" if skipped.ready_at else ""
    return (
        f"{what}: {said}last changed {_ago(skipped.changed_at, ran_at)} ago, within the {min_age:g}-minute "
        f"minimum age{ready} (or run again with --min-age 0)"
    )


def _ago(then: str, now: str) -> str:
    """How long before ``now`` ``then`` was (two store times), in whole minutes, hours or days."""
    seconds = (dt.datetime.fromisoformat(now[:-1]) - dt.datetime.fromisoformat(then[:-1])).total_seconds()
    for unit, size in (("day", 86400), ("hour", 3600), ("minute", 60)):
        if seconds >= size:
            count = int(seconds // size)
            return f"{count} {unit}{'' if count == 1 else 's'}"
    return "less than a minute"


def _progress_bar(label: str) -> Callable[[int, int], None]:
    """A one-line progress bar on stderr: label, bar, counts."""
    live = sys.stderr.isatty()  # a log gets the last line only, not a line redrawn with \r

    def show(done: int, total: int) -> None:
        filled = 30 * done // max(total, 1)
        if live:
            end = "\n" if done >= total else ""
            print(f"\r{label} [{'#' * filled}{'.' * (30 - filled)}] {done:,}/{total:,}", end=end, file=sys.stderr)
        elif done >= total:
            print(f"{label}: {done:,}/{total:,}", file=sys.stderr)

    return show


def _setting(kind: Callable[[str], int | float]) -> Callable[[str], int | float | None]:
    """An argument that is a number, or ``off``."""

    def parse(text: str) -> int | float | None:
        if text == "off":
            return None
        try:
            return kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number or off") from None

    return parse


@command(
    "retention",
    "show or set how many memories keep their vectors in memory (the rest go to the cold tier at the next "
    "`worlddb consolidate`); select * from cold_memory lists them",
    _with(
        lambda p: p.add_argument(
            "--max-hot",
            type=_setting(int),
            default=False,
            metavar="N|off",
            help="at most N memories hot (default: as set before; off at first)",
        ),
        lambda p: p.add_argument(
            "--cold-below",
            type=_setting(float),
            default=False,
            metavar="SCORE|off",
            help="memories whose retention score is under SCORE go cold (default: as set before; off at first)",
        ),
    ),
)
def cmd_retention(args: argparse.Namespace) -> Any:
    with _open(args) as db:
        if args.max_hot is not False or args.cold_below is not False:
            now = db.retention()
            db.set_retention(
                max_hot_vectors=now["max_hot_vectors"] if args.max_hot is False else args.max_hot,
                cold_below=now["cold_below"] if args.cold_below is False else args.cold_below,
            )
        return db.retention()


@command("stats", "counts, sizes and the store's root", _with())
def cmd_stats(args: argparse.Namespace) -> Any:
    with _open(args) as db:
        return db.stats()


@command(
    "backup",
    "copy the store to DEST with SQLite's online backup (safe while others write), then check it",
    _with(
        lambda p: p.add_argument("dest", help="path of the copy (must not exist unless --force)"),
        lambda p: p.add_argument("--force", action="store_true", help="replace DEST if it exists"),
        lambda p: p.add_argument(
            "--no-verify", action="store_true", help="skip `worlddb verify` of the copy (it reads the whole copy)"
        ),
    ),
)
def cmd_backup(args: argparse.Namespace) -> Any:
    with _open(args) as db:
        return db.backup(args.dest, overwrite=args.force, verify=not args.no_verify)


@command("checkpoint", "fold the write-ahead log into the main file and empty it (then a plain copy is whole)", _with())
def cmd_checkpoint(args: argparse.Namespace) -> Any:
    with _open(args) as db:
        return db.checkpoint()


@command(
    "export",
    "write the store (or one scope) as JSON lines: nodes, edges, validity and roots; stdout unless -o",
    _with(
        lambda p: p.add_argument(
            "--scope", help="export only the Scope called SCOPE and what it holds (default: the whole store)"
        ),
        lambda p: p.add_argument("-o", "--output", help="write to this file (default: standard output)"),
    ),
)
def cmd_export(args: argparse.Namespace) -> Any:
    with _open(args) as db:
        records = db.export(args.scope)
        if args.output:
            count = 0
            partial = f"{args.output}.partial"  # renamed once whole: a failed export leaves no half file
            try:
                with open(partial, "w", encoding="utf-8") as out:
                    for record in records:
                        out.write(json.dumps(record, ensure_ascii=False) + "\n")
                        count += 1
                os.replace(partial, args.output)
            except OSError as exc:
                with contextlib.suppress(OSError):
                    os.remove(partial)
                raise InvalidInput(
                    f"cannot write {args.output!r}: {exc.strerror}; give a path in a folder you can write to"
                ) from None
            return {"path": args.output, "records": count, "scope": args.scope or "(whole store)"}
        try:
            for record in records:
                sys.stdout.write(json.dumps(record, ensure_ascii=False) + "\n")
            sys.stdout.flush()
        except BrokenPipeError:  # `worlddb export DB | head`: the reader took what it wanted
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        finally:
            records.close()  # ends its read snapshot while the store is still open
        return None


@command(
    "import",
    "rebuild what an export holds (same ids and roots); checked whole before anything is written; idempotent",
    _with(lambda p: p.add_argument("file", help="the .jsonl file `worlddb export` wrote; - reads standard input")),
)
def cmd_import(args: argparse.Namespace) -> Any:
    new = args.db != ":memory:" and not os.path.lexists(args.db)
    try:
        with _open(args, create=True) as db:
            return db.import_records(sys.stdin if args.file == "-" else args.file)
    except BaseException:
        if new:  # the store this command created holds nothing: a refused import leaves no empty store behind
            for suffix in ("", "-wal", "-shm", "-journal"):
                with contextlib.suppress(FileNotFoundError):
                    os.remove(args.db + suffix)
        raise


# ---- sync between replicas (sync/replicas.py) ------------------------------------------------------

SYNC_SCOPE_HELP = "only this scope's memories (a name); repeat it for several (default: every scope)"


def _sync_scope(p: argparse.ArgumentParser) -> None:
    p.add_argument("--scope", action="append", help=SYNC_SCOPE_HELP)


def _directions(p: argparse.ArgumentParser) -> None:
    one = p.add_mutually_exclusive_group()
    one.add_argument("--pull", action="store_true", help="only bring OTHER's changes into DB (default: both ways)")
    one.add_argument("--push", action="store_true", help="only send DB's changes to OTHER (default: both ways)")


def _plural(count: int, word: str, words: str | None = None) -> str:
    return f"{count} {word if count == 1 else words or word + 's'}"


def _moved(summary: dict[str, Any]) -> str:
    """What one applied change set did, on one line: records, what was new or merged, purges, conflicts."""
    nodes, edges = summary["nodes"], summary["edges"]
    size = f" ({summary['bytes']:,} bytes)" if "bytes" in summary else ""
    parts = [
        f"{_plural(summary['records'], 'record')}{size}: {_plural(nodes['added'], 'new node')} "
        f"({nodes['existing']} already held, {nodes['tightened']} with a close tightened)",
        _plural(edges["added"], "new edge"),
        _plural(summary["aliases_added"], "new alias", "new aliases"),
    ]
    if summary["purged"]:
        parts.append(f"{len(summary['purged'])} purged here")
    if summary["conflicts"]:
        parts.append(f"{_plural(summary['conflicts'], 'merge conflict')} (left as each side decided; `worlddb merges`)")
    agree = "yes" if summary["roots_agree"] else "no (this side holds rows the sender lacks)"
    return ", ".join(parts) + f"; roots agree with the sender's: {agree}"


@command(
    "sync",
    "exchange changes with another replica's file (both ways unless --pull or --push); prints what moved each "
    "way and whether the two converged",
    _with(
        lambda p: p.add_argument("other", help="the other store file: a replica made with `worlddb replica`"),
        _directions,
        _sync_scope,
    ),
)
def cmd_sync(args: argparse.Namespace) -> Any:
    with _open(args) as db:
        result = db.sync(args.other, pull=not args.push, push=not args.pull, scopes=args.scope)
        root = db.root()
    if args.json:
        return result
    lines = [
        f"{name} ({source} -> {receiver}): {_moved(result[name])}"
        for name, source, receiver in (("pull", args.other, args.db), ("push", args.db, args.other))
        if name in result
    ]
    if "converged" in result:
        converged = f"yes, root {root}" if result["converged"] else "no, the roots differ; run it again"
        lines.append(f"converged: {converged}")
    else:
        why = f"--scope {' '.join(args.scope)}" if args.scope else ("--pull" if args.pull else "--push")
        lines.append(f"converged: not checked ({why} syncs only part of the two stores)")
    return "\n".join(lines)


def _binary_out(args: argparse.Namespace) -> Any:
    """Standard output's binary side, refused on a terminal (a change set is compressed bytes)."""
    if sys.stdout.isatty():
        raise InvalidInput(
            f"refusing to write a binary change set to a terminal; redirect it (`worlddb {args.command} ... > "
            "changes.bin`), pipe it, or give -o FILE"
        )
    sys.stdout.flush()  # text written before must come first
    return sys.stdout.buffer


@command(
    "changes",
    "write the changes another replica has not seen (a compressed, digested change set) to stdout or -o FILE",
    _with(
        lambda p: p.add_argument(
            "--since",
            required=True,
            metavar="TOKEN",
            help="what the receiver has seen: the output of `worlddb token RECEIVER` ('' sends everything)",
        ),
        _sync_scope,
        lambda p: p.add_argument(
            "-o", "--output", help="write to this file, whole or not at all (default: standard output, not a terminal)"
        ),
    ),
)
def cmd_changes(args: argparse.Namespace) -> Any:
    to_file = args.output not in (None, "-")
    target = args.output if to_file else _binary_out(args)  # refused before the store is opened
    with _open(args) as db:
        try:
            written = db.changes(target, since=args.since, scopes=args.scope)
            if not to_file:
                target.flush()
        except BrokenPipeError:  # the reader went away: what it took is a truncated set `apply` would refuse
            written = None
        # raised outside the handler, while the store is open: the broken pipe's traceback held the change
        # set's reader, which must end its read snapshot before the store closes
        if written is None:
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            raise InvalidInput("the reader closed the pipe before the whole change set was written")
    if not to_file:
        return None
    if args.json:
        return {"path": args.output, **written}
    seen, last = written["since"], written["seq"]
    what = f"changes {seen + 1}..{last}" if last > seen else f"nothing after change {last}"
    return (
        f"wrote {_plural(written['records'], 'record')} ({written['bytes']:,} bytes) to {args.output}: "
        f"{what} of store {written['store_id']}"
    )


@command(
    "apply",
    "apply a change set from another replica (`worlddb changes` wrote it), all of it or nothing",
    _with(lambda p: p.add_argument("file", help="the change set's file; - reads standard input")),
)
def cmd_apply(args: argparse.Namespace) -> Any:
    if args.file == "-" and sys.stdin.isatty():
        raise InvalidInput(
            "refusing to read a binary change set from a terminal; redirect it (`worlddb apply DB - < changes.bin`)"
        )
    with _open(args) as db:
        summary = db.apply_changes(sys.stdin.buffer if args.file == "-" else args.file)
    if args.json:
        return summary
    text = f"applied {_moved(summary)}\nfrom store {summary['from']}"
    if summary["resend"]:
        text += (
            "\nthis store lacks changes of its own the sender had seen (it was restored from an older copy): "
            "make the sender's next change set from `worlddb token` again; it will hold everything"
        )
    return text


@command(
    "token",
    "print what this store has seen of itself and of each replica: the --since a sender's `changes` needs",
    _with(),
)
def cmd_token(args: argparse.Namespace) -> Any:
    with _open(args) as db:
        token = db.sync_token()
        return {"token": token, "store_id": db.store_id} if args.json else token


@command(
    "replica",
    "copy the store to DEST as a replica with its own store id (then `worlddb sync DB DEST` exchanges changes)",
    _with(
        lambda p: p.add_argument("dest", help="path of the replica (must not exist unless --overwrite)"),
        lambda p: p.add_argument(
            "--overwrite", "--force", action="store_true", help="replace DEST if it exists (--force, as in backup)"
        ),
    ),
)
def cmd_replica(args: argparse.Namespace) -> Any:
    with _open(args) as db:
        return db.replica(args.dest, overwrite=args.overwrite)


@command(
    "mcp",
    "serve the store to an assistant as MCP tools over stdin/stdout, or streamable HTTP with --http "
    "(creates the store if missing)",
    _with(
        lambda p: p.add_argument(
            "--http",
            action="store_true",
            help="serve over streamable HTTP at http://HOST:PORT/mcp instead of stdio; without --token-file it has "
            "NO authentication and serves loopback only",
        ),
        lambda p: p.add_argument(
            "--host", default="127.0.0.1", help="address to bind with --http (default: 127.0.0.1, loopback only)"
        ),
        lambda p: p.add_argument(
            "--port", type=int, default=8765, help="port to bind with --http (default: 8765; 0 takes a free one)"
        ),
        lambda p: p.add_argument(
            "--token-file",
            help="with --http: a file holding a secret every request must send as 'Authorization: Bearer SECRET'; "
            "only its owner may read it (chmod 600) (default: none, loopback only)",
        ),
    ),
)
def cmd_mcp(args: argparse.Namespace) -> Any:
    try:  # the MCP SDK loads only for this command, and only the mcp extra installs it
        import mcp  # noqa: F401
        import pydantic  # noqa: F401

        from .mcp import check_http, serve, serve_http
    except ImportError as exc:
        raise MissingExtra(
            f"the MCP server needs the mcp package, and {exc.name or 'it'} is not installed; "
            f"it is the mcp extra: {MCP_EXTRA}"
        ) from None

    if args.token_file is not None and not args.http:
        raise InvalidInput(
            "--token-file guards the HTTP transport, and stdio has no requests to guard; add --http to serve "
            "over HTTP behind the token, or leave --token-file out"
        )
    token = None if args.token_file is None else _token(args.token_file)
    if args.http:
        check_http(args.host, token)  # before the store is opened (or created)
    with _open(args, create=True) as db:
        if args.http:
            serve_http(db, host=args.host, port=args.port, token=token)
        else:
            serve(db)


@command(
    "shell",
    "open the sqlite3 shell on the store with sqlite-vec loaded (try: select * from memory)",
    _with(),
)
def cmd_shell(args: argparse.Namespace) -> Any:
    from . import browse  # the shell's command line: sqlite-vec's loadable, box mode

    with _open(args) as db:  # a store (lifted to the current schema, so its views are there), then closed
        path, sealed = db.path, db.read_only
    argv = browse.shell_argv(path, sealed=sealed)
    print(f"worlddb shell: {browse.SHELL_HINT}", file=sys.stderr)
    sys.stderr.flush()
    sys.stdout.flush()
    if os.name == "posix":
        os.execv(argv[0], argv)  # the shell takes this process over: its exit code is the command's
    raise SystemExit(subprocess.call(argv))


@command(
    "browse",
    "serve the store read-only in Datasette (views, full-text search, canned queries); the browse extra",
    _with(
        lambda p: p.add_argument("--host", default="127.0.0.1", help="address to bind (default: 127.0.0.1)"),
        lambda p: p.add_argument("--port", type=int, default=8001, help="port to bind (default: 8001)"),
    ),
)
def cmd_browse(args: argparse.Namespace) -> Any:
    from . import browse

    with _open(args) as db:
        path, sealed = db.path, db.read_only
    datasette = browse.datasette_for(path, sealed=sealed)  # MissingExtra without the browse extra
    where = f"http://{args.host}:{args.port}/"
    print(f"worlddb browse: serving {path} read-only at {where} (Ctrl-C stops)", file=sys.stderr)
    browse.serve(datasette, host=args.host, port=args.port)


def _token(path: str) -> str:
    """The secret in a token file that only its owner can read."""
    try:
        mode = os.stat(path).st_mode
        token = Path(path).read_text("utf-8").strip()
    except (OSError, UnicodeError) as exc:
        raise InvalidInput(f"cannot read the token file {path}: {exc}") from None
    if os.name == "posix" and mode & 0o066:  # Windows keeps no such bits: its ACLs are another matter
        raise InvalidInput(
            f"the token file {path} can be read or changed by others (mode {mode & 0o777:o}), so its secret is "
            f"not one; make it the owner's alone: chmod 600 {path}"
        )
    return token


@command(
    "purge",
    "erase a memory's content for good (its versions, members and extracted facts too); keeps its hash in a tombstone",
    _with(
        _ref,
        lambda p: p.add_argument(
            "--scope", help="refuse unless the memory is inside this scope (a name; default: no such check)"
        ),
    ),
)
def cmd_purge(args: argparse.Namespace) -> Any:
    with _open(args) as db:
        return db.purge(args.id, scope=args.scope)


def _value_text(value: Any) -> str:
    """A value of a result as text: a list or mapping spelled out, never a Python repr."""
    from .types import plain

    value = plain(value)
    if isinstance(value, dict):
        return ", ".join(f"{k}={_value_text(v)}" for k, v in value.items()) or "-"
    if isinstance(value, list):
        return ", ".join(_value_text(v) for v in value) or "-"
    if value is None:
        return "-"
    return value if isinstance(value, str) else json.dumps(value)


def _line(node: Node) -> str:
    """One node on one line: id, type, when, what it says (a listing)."""
    flag = "  (retired)" if node.retired else ("  (closed)" if node.invalid_at else "")
    text = " ".join((node.content or node.name or "").split())
    return f"{node.id}  {node.type:<8} {node.valid_at[:10]}  {text}{flag}"


def _print(result: Any, as_json: bool) -> None:
    from .types import Node, Page, plain

    if as_json:
        if isinstance(result, Page):  # a page of a listing: JSON lines, and the next page's cursor as in text
            for node in result.nodes:
                print(json.dumps(plain(node), ensure_ascii=False))
            if result.cursor:
                print(f"more: add --cursor {result.cursor}", file=sys.stderr)
        elif isinstance(result, list):  # JSON lines: one object a line (none for an empty list)
            for item in result:
                print(json.dumps(plain(item), ensure_ascii=False))
        else:
            print(json.dumps(plain(result), ensure_ascii=False, indent=2))
        return
    if isinstance(result, Node):
        print(_node_text(result))
    elif isinstance(result, Page):
        for node in result.nodes:
            print(_line(node))
        if not result.nodes:
            print("no memories found")
        if result.cursor:  # on stderr: stdout stays one memory a line
            print(f"more: add --cursor {result.cursor}", file=sys.stderr)
    elif isinstance(result, list) and not result:
        print("nothing found")
    elif isinstance(result, list) and isinstance(result[0], Node):
        print("\n".join(_node_text(n) for n in result))
    elif isinstance(result, list) and result and isinstance(result[0], dict) and "node" in result[0]:
        for hit in result:
            print(f"{hit['score']:8.3f}  " + _node_text(hit["node"]))
    elif isinstance(result, str):
        print(result)
    elif hasattr(result, "violations"):
        for v in result.violations:
            print(f"VIOLATION {v.invariant}: {v.detail}")
        counts = ", ".join(f"{k}={v}" for k, v in result.checked.items())
        print(("ok: " if result.ok else f"{len(result.violations)} violation(s); ") + f"checked {counts}")
        unchecked = getattr(result, "unchecked", {})
        if unchecked:  # what no row witnesses is said, not left out; the reasons are in --json
            print(f"unchecked (no other row witnesses them; --json says why): {', '.join(unchecked)}")
    elif isinstance(result, dict):
        for key, value in result.items():
            print(f"{key}: {_value_text(value)}")
    elif result is None:
        pass
    else:  # a record without lines of its own above: its fields, one a line, as for a mapping
        value = plain(result)
        for key, field in value.items() if isinstance(value, dict) else [("result", value)]:
            print(f"{key}: {_value_text(field)}")


class _Parser(argparse.ArgumentParser):
    """An argument parser whose usage errors can carry a hint (``hint``) about what was likely meant.

    Its options take their short forms (``SHORT``); in a command of ``SCOPED``, ``--scope`` defaults to
    ``WORLDDB_SCOPE`` when that is set (``scoped``), so a session's calls need not repeat it.
    """

    hint: str | None = None
    scoped: str | None = None  # the scope from the environment, for a command of SCOPED
    commands: dict[str, argparse.ArgumentParser]  # on the top-level parser: each command's own

    def error(self, message: str) -> NoReturn:
        super().error(f"{message}; {self.hint}" if self.hint else message)

    def add_argument(self, *names: Any, **options: Any) -> argparse.Action:
        if "--scope" in names and self.scoped:
            options["required"] = False
            if options.get("action") != "append":  # an appended list's default would be appended to: main fills it
                options["default"] = self.scoped
            options["help"] = f"{options.get('help', '')} ({SCOPE_VARIABLE}: {self.scoped})"
        return super().add_argument(*[SHORT[n] for n in names if n in SHORT], *names, **options)


HINTS = {"merge": "to list the proposals, run `worlddb merges DB`"}  # a mistyped `merges` lands on `merge`


def build_parser(only: str | None = None) -> _Parser:
    """The argument parser with every sub-command, or with ``only`` that one (``main``: the one called).

    A parser of one command parses and refuses its line as the whole one does (the usage names no
    command list: ``COMMAND``), and skips building the others' arguments: ~20 ms of each call.
    """
    parser = _Parser(
        prog="worlddb",
        description="worlddb_lite: an assistant's memory in one SQLite file",
        epilog=f"Options may come before or after the command. {STORE_VARIABLE} names the store when DB is left "
        f"out; {SCOPE_VARIABLE} the scope of {', '.join(sorted(SCOPED))} when --scope is left out.",
    )
    parser.add_argument("--version", action="version", version=f"worlddb {__version__}")
    scoped = os.environ.get(SCOPE_VARIABLE) or None
    _global_options(parser, json=False, model=None)  # before the command ...
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND", parser_class=_Parser)
    parser.commands = {}  # a mistyped option is refused with the command's own usage (_run)
    for name, (help_text, handler, arguments) in COMMANDS.items():
        if only is not None and name != only:
            continue
        p = sub.add_parser(name, help=help_text, description=help_text)
        parser.commands[name] = p
        p.hint = HINTS.get(name)
        p.scoped = scoped if name in SCOPED else None
        arguments(p)
        _global_options(p, json=argparse.SUPPRESS, model=argparse.SUPPRESS)  # ... or after: set only when given
        p.set_defaults(handler=handler)
    return parser


def _global_options(p: argparse.ArgumentParser, *, json: Any, model: Any) -> None:
    """``--json`` and ``--model`` (with these defaults), which every command takes, before or after its name."""
    p.add_argument("--json", action="store_true", default=json, help="print JSON (default: text for people)")
    p.add_argument(
        "--model",
        default=model,
        help="folder of a model2vec model, or a hub name where a hub is reachable (default: the bundled one)",
    )


def _called(argv: Sequence[str]) -> str | None:
    """The command a line calls, when nothing before it asks for the whole parser (--help, --version)."""
    words = iter(argv)
    for word in words:
        if word in ("-h", "--help", "--version", "--"):
            return None
        if word == "--model":
            next(words, None)  # its value
        elif not word.startswith("-"):
            return word if word in COMMANDS else None
    return None


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``worlddb`` command. Returns the exit code."""
    code = _run(sys.argv[1:] if argv is None else list(argv))
    if argv is None:
        # The process ends now (the `worlddb` script): frozen, the objects the imports made are not
        # swept for cycles once more at exit, 30-50 ms after a recall (bench/cli_start.py).
        gc.freeze()
    return code


# an error's next step (errors.Hint: a WorldDB method) as the command that takes it
COMMAND_FOR_ACTION = {
    "backup": "backup",
    "changes": "changes",
    "checkpoint": "checkpoint",
    "create": "init",
    "list_memories": "list",
    "merge_proposals": "merges",
    "replica": "replica",
    "scopes": "scopes",
    "search": "search",
    "set_retention": "retention",
    "sync_token": "token",
    "verify": "verify",
}
FLAG_FOR = {("backup", "overwrite"): "--force", ("replica", "overwrite"): "--force"}  # not the parameter's name
# what a command cannot run without, when the hint does not give it: said as a placeholder to fill in
REQUIRED = {"list": ("scope", "SCOPE"), "changes": ("since", "TOKEN"), "replica": ("dest", "DEST")}
SWITCHES = {"overwrite"}  # options that take no value


def command_line(hint: Hint, db: str | None) -> str:
    """The ``worlddb`` line that takes ``hint``'s step on the store ``db`` (DB when unknown)."""
    command = COMMAND_FOR_ACTION.get(hint.action)
    if command is None:  # a step no command takes: said in words
        return hint.said()
    given = dict(hint.args)
    needed = REQUIRED.get(command)
    if needed is not None and not given.get(needed[0]):
        given[needed[0]] = needed[1]  # a placeholder, said in capitals
    store = given.pop("store", None) or db
    # another store than the one in hand (the receiver of a token, the sender of a change set) is named by its role
    where = store.upper() if store in ("sender", "receiver") else shlex.quote(store) if store else "DB"
    words = ["worlddb", command, where]
    if "dest" in given:
        words.append(_word(given.pop("dest")))
    for key, value in given.items():
        words.append(FLAG_FOR.get((command, key), "--" + key.replace("_", "-")))
        if key not in SWITCHES:
            words.append(_word(value or key.upper()))
    return " ".join(words)


def _word(value: str) -> str:
    """A value on the command line: a placeholder as it is, anything else quoted for the shell."""
    return value if value.isupper() and value.isalpha() else shlex.quote(value)


def _advice(exc: WorldDBError, db: str | None) -> str:
    """The error's message, then its next step as the command to run (in words where none takes it)."""
    if exc.hint is None:
        return exc.message
    if exc.hint.action not in COMMAND_FOR_ACTION:
        return str(exc)
    return f"{exc.message}; run `{command_line(exc.hint, db)}`"


def _warn(message: Warning | str, category: type[Warning], *_: object, **__: object) -> None:
    """A warning as one line of the command's own (a Python warning names a source line a user has no use for)."""
    print(f"worlddb: warning: {message}", file=sys.stderr)


def _run(line: list[str]) -> int:
    with warnings.catch_warnings():  # the caller's own way of showing warnings comes back after the command
        warnings.showwarning = _warn
        return _command(line)


def _command(line: list[str]) -> int:
    parser = build_parser(_called(line))
    if not line:  # `worlddb` alone: what it can do, not an error
        parser.print_help()
        return 0
    args, unknown = parser.parse_known_args(line)
    if unknown:  # said with the command's usage, not the top level's
        parser.commands.get(args.command, parser).error(f"unrecognized arguments: {' '.join(unknown)}")
    if "db" in vars(args) and not args.db:
        command = parser.commands.get(args.command, parser)
        after = line[line.index(args.command) + 1 :] if args.command in line else []
        first = next((word for word in after if not word.startswith("-")), None)
        if first is not None and os.path.isfile(first):  # DB was given: an argument after it is missing
            command.error(f"{first} is the store; {args.command} needs more after it, as its usage shows")
        command.error(f"{args.command} needs the store's file: give DB or set {STORE_VARIABLE}")
    if args.command in SCOPED and getattr(args, "scope", "") is None and os.environ.get(SCOPE_VARIABLE):
        args.scope = [os.environ[SCOPE_VARIABLE]]  # an appended --scope left out (add_argument)
    try:
        result = args.handler(args)
    except WorldDBError as exc:
        print(f"worlddb {args.command}: {_advice(exc, getattr(args, 'db', None))}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # each write is one transaction: what was under way rolled back
        print(f"worlddb {args.command}: interrupted; what it was writing was rolled back", file=sys.stderr)
        return 130
    try:
        _print(result, args.json)
        sys.stdout.flush()
    except BrokenPipeError:  # the reader went away (`worlddb recall ... | head`): what it took was enough
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # so the exit's own flush cannot fail too
        return 0
    if hasattr(result, "violations") and result.violations:
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
