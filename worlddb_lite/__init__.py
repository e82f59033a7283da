"""worlddb_lite: an assistant's whole memory in one SQLite file.

Start with ``WorldDB``; see DESIGN.md for the architecture and invariants.
"""

from .db import WorldDB
from .edges import BaseEdgeType, EdgeType
from .embed import Embedder, StaticEmbedder
from .errors import (
    AmbiguousId,
    CycleError,
    EdgeRefused,
    EmbedderError,
    EmbedderMismatch,
    IntegrityViolation,
    InvalidId,
    InvalidInput,
    InvalidTime,
    MergeError,
    NotAStore,
    NotCurrent,
    NotFound,
    SchemaTooNew,
    SchemaTooOld,
    StoreBusy,
    StoreError,
    TiebreakerError,
    UnknownEdgeType,
    ValidityError,
    WorldDBError,
)
from .resolver import (
    Ambiguous,
    Candidate,
    Mention,
    New,
    PreferTiers,
    Resolution,
    Resolved,
    ResolverConfig,
    Tiebreaker,
)
from .retrieval.context import Context, ContextItem
from .retrieval.query import Expand, Filter, PreferSummaries, QuerySpec, WhereConnected
from .types import (
    Direction,
    Edge,
    Hit,
    Identity,
    MergeProposal,
    MergeStatus,
    Node,
    Reason,
    Recall,
    Subgraph,
    VerifyReport,
)

__version__ = "0.1.0"

__all__ = [
    "Ambiguous", "AmbiguousId", "BaseEdgeType", "Candidate", "Context", "ContextItem", "CycleError", "Direction",
    "Edge", "EdgeRefused", "EdgeType", "Embedder", "EmbedderError", "EmbedderMismatch", "Expand", "Filter", "Hit",
    "Identity", "IntegrityViolation", "InvalidId", "InvalidInput", "InvalidTime", "Mention", "MergeError",
    "MergeProposal", "MergeStatus", "New", "Node", "NotAStore", "NotCurrent", "NotFound", "PreferSummaries",
    "PreferTiers", "QuerySpec", "Reason", "Recall", "Resolution", "Resolved", "ResolverConfig", "SchemaTooNew",
    "SchemaTooOld", "StaticEmbedder", "StoreBusy", "StoreError", "Subgraph", "Tiebreaker", "TiebreakerError",
    "UnknownEdgeType", "ValidityError", "VerifyReport", "WhereConnected", "WorldDB", "WorldDBError", "__version__",
]
