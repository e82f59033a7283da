"""worlddb_lite: an assistant's whole memory in one SQLite file.

Start with ``WorldDB``; see docs/design.md for the architecture and invariants.
"""

from .background import Consolidator
from .db import WorldDB
from .edges import BaseEdgeType, EdgeType
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
    MissingExtra,
    NotAStore,
    NotCurrent,
    NotFound,
    SchemaTooNew,
    SchemaTooOld,
    StoreBusy,
    StoreError,
    StoreUnwritable,
    TiebreakerError,
    UnknownEdgeType,
    ValidityError,
    WorldDBError,
)
from .models.embed import Embedder, StaticEmbedder
from .models.rerank import OnnxCrossEncoder, Reranker
from .retrieval.context import Context, ContextItem
from .retrieval.query import Expand, Filter, PreferSummaries, QuerySpec, WhereConnected
from .text.extract import Extractor, RuleExtractor
from .types import (
    Direction,
    Edge,
    Hit,
    Identity,
    MergeProposal,
    MergeStatus,
    Node,
    Page,
    Reason,
    Recall,
    ScopeRef,
    Subgraph,
    VerifyReport,
)
from .write.bridge import ContextBridge
from .write.conversation import ConversationIn, IngestStats, SessionIn, TurnIn
from .write.gate import EncodingGate
from .write.loaders import FORMATS as CONVERSATION_FORMATS
from .write.loaders import load as load_conversations
from .write.resolver import (
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

__version__ = "0.1.0"

__all__ = [
    "CONVERSATION_FORMATS",
    "Consolidator",
    "ContextBridge",
    "ConversationIn",
    "EncodingGate",
    "Extractor",
    "IngestStats",
    "OnnxCrossEncoder",
    "Reranker",
    "RuleExtractor",
    "SessionIn",
    "TurnIn",
    "load_conversations",
    "Ambiguous",
    "AmbiguousId",
    "BaseEdgeType",
    "Candidate",
    "Context",
    "ContextItem",
    "CycleError",
    "Direction",
    "Edge",
    "EdgeRefused",
    "EdgeType",
    "Embedder",
    "EmbedderError",
    "EmbedderMismatch",
    "Expand",
    "Filter",
    "Hit",
    "Identity",
    "IntegrityViolation",
    "InvalidId",
    "InvalidInput",
    "InvalidTime",
    "Mention",
    "MergeError",
    "MergeProposal",
    "MissingExtra",
    "MergeStatus",
    "New",
    "Node",
    "NotAStore",
    "Page",
    "NotCurrent",
    "NotFound",
    "PreferSummaries",
    "PreferTiers",
    "QuerySpec",
    "Reason",
    "Recall",
    "ScopeRef",
    "Resolution",
    "Resolved",
    "ResolverConfig",
    "SchemaTooNew",
    "SchemaTooOld",
    "StaticEmbedder",
    "StoreBusy",
    "StoreError",
    "StoreUnwritable",
    "Subgraph",
    "Tiebreaker",
    "TiebreakerError",
    "UnknownEdgeType",
    "ValidityError",
    "VerifyReport",
    "WhereConnected",
    "WorldDB",
    "WorldDBError",
    "__version__",
]
