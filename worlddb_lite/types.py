"""Records the engine returns: frozen dataclasses, ids as lower-case hex."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

# Turn speakers that are the assistant, not the person remembered: their turns are not mined for facts
# about the person (conversation.py) and weigh less in recall (retrieval/recall.py: speaker_prior).
ASSISTANT_ROLES = frozenset({"assistant", "system"})


SPEAKER = "speaker"  # the prop naming whom a note speaks for, when not the scope's person
TAGS = "tags"  # the prop holding a note's tags: a sorted list of short lower-case labels (checks.tags)
MAY_UPDATE = "may_update"  # the edge from a newer memory telling of a change to the older note it may update
MAY_UPDATE_FROM = ("Memory", "Turn")  # ... from a note or a turn
MAY_UPDATE_TO = "Memory"  # ... to a note
PERSON_KINDS = ("user", "agent")  # scope kinds that are someone: a note in one speaks for them, "my" means them
FIRST_PERSON = frozenset({"i", "me", "my", "mine", "myself"})  # the words by which the scope's person says "me"


def is_assistant(speaker: str | None) -> bool:
    """Whether a turn's speaker is the assistant (any case), not a person."""
    return (speaker or "").casefold() in ASSISTANT_ROLES


def person_of(scope: Node) -> str | None:
    """Whom a scope is (its name), when it is a user or an agent, not an app or a run; None otherwise."""
    return scope.name if scope.type == "Scope" and scope.props.get("kind", "user") in PERSON_KINDS else None


def speaks_for(note: Node, home: Node) -> str | None:
    """Whom a note in ``home`` speaks for: the speaker it names (prop ``SPEAKER``), else the scope's person."""
    return voice(note.props.get(SPEAKER), home)


def carries(node: Node, tag: str) -> bool:
    """Whether ``node`` carries ``tag`` (a checked tag) among its props ``TAGS``."""
    labels = node.props.get(TAGS)
    return isinstance(labels, list) and tag in labels


def voice(speaker: object, home: Node) -> str | None:
    """Whom a note in ``home`` whose ``SPEAKER`` prop is ``speaker`` (maybe none) speaks for (``speaks_for``)."""
    return str(speaker or "").strip() or person_of(home)


class MergeStatus(StrEnum):
    """The life of a same_as proposal: pending until a caller decides."""

    PENDING = "pending"
    ACCEPTED = "accepted"
    REJECTED = "rejected"


class Direction(StrEnum):
    """Which way to follow edges from a node."""

    OUT = "out"
    IN = "in"
    BOTH = "both"


@dataclass(frozen=True, slots=True)
class Node:
    """A node (every node is a world) with its current projection."""

    id: str
    type: str
    name: str | None
    content: str | None
    props: Mapping[str, Any]
    parent: str | None
    depth: int
    valid_at: str
    invalid_at: str | None
    closed_at: str | None
    created_at: str
    expired_at: str | None
    retired: bool
    salience: float
    root: str
    members: int
    purged: bool = False
    superseded_by: tuple[str, ...] = ()
    contradicted_by: tuple[str, ...] = ()

    @property
    def is_current(self) -> bool:
        """Open validity, still believed and not retired (ignores as-of)."""
        return self.invalid_at is None and self.expired_at is None and not self.retired


@dataclass(frozen=True, slots=True)
class Edge:
    """A typed, content-addressed edge with its bitemporal projection."""

    id: str
    type: str
    src: str
    dst: str
    world: str
    props: Mapping[str, Any]
    valid_at: str
    invalid_at: str | None
    closed_at: str | None
    created_at: str
    expired_at: str | None


@dataclass(frozen=True, slots=True)
class MergeProposal:
    """A staged same_as: nothing merges until it is accepted."""

    pid: int
    a: str
    b: str
    status: MergeStatus
    score: float | None
    tier: str | None
    reason: str | None
    proposed_at: str
    decided_at: str | None


@dataclass(frozen=True, slots=True)
class Identity:
    """An equivalence class over accepted same_as, with the union of its provenance."""

    members: tuple[str, ...]
    names: tuple[str, ...]
    aliases: tuple[str, ...]
    provenance: tuple[Mapping[str, Any], ...]


@dataclass(frozen=True, slots=True)
class Subgraph:
    """What a query returns: nodes plus the edges traversed to reach them."""

    nodes: tuple[Node, ...]
    edges: tuple[Edge, ...] = ()


SCOPE_KINDS = ("user", "agent", "app", "run")  # whom a scope belongs to: the paper's user_id, agent_id, app_id, run_id


@dataclass(frozen=True, slots=True)
class ScopeRef:
    """A scope named with its kind: ``agent:planner``; a bare name (``ana``) is a user's.

    A user's Scope node holds no kind, as every scope written before kinds existed, so those keep
    their ids; another kind is in the node's props, so ``run:42`` and the user ``42`` are two scopes.
    """

    kind: str
    name: str

    @classmethod
    def of(cls, scope: Node) -> ScopeRef:
        """The scope a Scope node is (a node written before kinds existed is a user's)."""
        return cls(str(scope.props.get("kind", "user")), scope.name or "")

    @property
    def props(self) -> dict[str, str]:
        """The Scope node's props: what, with its name, fixes its id."""
        return {} if self.kind == "user" else {"kind": self.kind}

    def __str__(self) -> str:
        """The spelling that names this scope again (a user called ``run:1`` is ``user:run:1``)."""
        if self.kind == "user" and self.name.partition(":")[0] not in SCOPE_KINDS:
            return self.name
        return f"{self.kind}:{self.name}"


def scope_record(scope: Node) -> dict[str, str]:
    """A Scope node as listed (CLI ``scopes --json``, MCP ``memory_list_scopes``): ``name`` names it again."""
    ref = ScopeRef.of(scope)
    return {"name": str(ref), "kind": ref.kind, "id": scope.id, "created_at": scope.created_at}


@dataclass(frozen=True, slots=True)
class Page:
    """One page of a listing: its nodes, and the cursor that asks for the next page (None: the last)."""

    nodes: tuple[Node, ...]
    cursor: str | None = None


@dataclass(frozen=True, slots=True)
class Violation:
    """One broken invariant found by ``verify``."""

    invariant: str
    detail: str


@dataclass(frozen=True, slots=True)
class VerifyReport:
    """The outcome of ``verify``: counts of what was checked, every violation, and what it cannot check.

    ``unchecked`` maps a table to why verify cannot tell a forged row of it from a real one (its guard
    triggers refuse raw writes; no other row witnesses it).
    """

    checked: Mapping[str, int]
    violations: tuple[Violation, ...] = field(default_factory=tuple)
    unchecked: Mapping[str, str] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        """True when no invariant is broken."""
        return not self.violations


@dataclass(frozen=True, slots=True)
class Reason:
    """Why a hit was returned: a lane that ranked it, at which rank, and what it followed there."""

    lane: str  # "text" (BM25), "vector", "entity", "time", "instruction", "preference", "late", "rerank";
    # "stale" / "changed": moved by an update; "standing": an instruction moved below the first answer;
    # "session" / "world" / "speaker": a prior changed its score
    # (retrieval/recall.py)
    rank: int  # 1 = the lane's best; for a prior, the hit's rank in the fused order before the priors
    via: str | None = None  # entity lane: the name in the query that led here
    edge: str | None = None  # entity lane: id of the refers_to edge followed
    effect: float | None = None  # a prior: what it added to the hit's score (negative: took away)


@dataclass(frozen=True, slots=True)
class Hit:
    """One recalled memory: the node, its fused score, the turns it stands for, and why."""

    node: Node
    # fused (RRF) plus the session and speaker priors, which weigh the first 50 (recall.HEAD_DEPTH). The hits'
    # order is the ranking, not this: a hit moved (why: stale, changed, standing) keeps its score, a turn the
    # speaker prior re-ordered takes a place turns held, and with k above 50 a hit past the weighed head can
    # outscore one in it (the head stays the same for every k)
    score: float
    turns: tuple[Node, ...]  # a turn: itself; a fact: the turns it was learned from
    why: tuple[Reason, ...]


@dataclass(frozen=True, slots=True)
class Recall:
    """What ``recall`` returns: the hits, best first, the moment they were read at, and how sure it is."""

    query: str
    hits: tuple[Hit, ...]
    as_of: str
    known_as_of: str
    # the engine's estimate that the first hit answers the question, in [0, 1] (retrieval/confidence.py),
    # the signals it was weighed from, and whether hits were found but held back under ``min_confidence``
    confidence: float = 0.0
    signals: Mapping[str, float] = field(default_factory=dict)
    withheld: bool = False
    during: tuple[str, str, str] | None = None  # a ``during`` filter: its [start, end) and what the words were read as


def plain(value: Any) -> Any:
    """Dataclasses, tuples and enums as JSON-ready values (the CLI's --json and the MCP tools)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    return value
