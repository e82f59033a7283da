"""worlddb_lite: an assistant's whole memory in one SQLite file.

Start with ``WorldDB``; see docs/design.md for the architecture and invariants.

Every public name loads on first use (PEP 562), so ``import worlddb_lite.cli`` or ``worlddb --help``
does not pay for numpy, SQLite and the model: ``from worlddb_lite import WorldDB`` imports the facade
then, as an eager import would have.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # what the names are, for mypy and editors; at run time ``__getattr__`` loads them
    from .background import Consolidator
    from .consolidate.summaries import Drafted, ExtractiveSummarizer, Summarizer, SummaryItem
    from .db import WorldDB
    from .edges import BaseEdgeType, EdgeType
    from .errors import (
        AmbiguousId,
        CycleError,
        EdgeRefused,
        EmbedderError,
        EmbedderMismatch,
        Hint,
        IndexRebuilt,
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
    from .write.conversation import ConversationIn, IngestStats, SessionIn
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
    from .write.turns import TurnIn
    from .write.writer import MemoryIn

__version__ = "0.1.0"

# public name -> (module, attribute): read by ``__getattr__`` the first time the name is asked for
_LAZY: dict[str, tuple[str, str]] = {
    "Consolidator": (".background", "Consolidator"),
    "WorldDB": (".db", "WorldDB"),
    "BaseEdgeType": (".edges", "BaseEdgeType"),
    "EdgeType": (".edges", "EdgeType"),
    "AmbiguousId": (".errors", "AmbiguousId"),
    "CycleError": (".errors", "CycleError"),
    "EdgeRefused": (".errors", "EdgeRefused"),
    "EmbedderError": (".errors", "EmbedderError"),
    "EmbedderMismatch": (".errors", "EmbedderMismatch"),
    "Hint": (".errors", "Hint"),
    "IndexRebuilt": (".errors", "IndexRebuilt"),
    "IntegrityViolation": (".errors", "IntegrityViolation"),
    "InvalidId": (".errors", "InvalidId"),
    "InvalidInput": (".errors", "InvalidInput"),
    "InvalidTime": (".errors", "InvalidTime"),
    "MergeError": (".errors", "MergeError"),
    "MissingExtra": (".errors", "MissingExtra"),
    "NotAStore": (".errors", "NotAStore"),
    "NotCurrent": (".errors", "NotCurrent"),
    "NotFound": (".errors", "NotFound"),
    "SchemaTooNew": (".errors", "SchemaTooNew"),
    "SchemaTooOld": (".errors", "SchemaTooOld"),
    "StoreBusy": (".errors", "StoreBusy"),
    "StoreError": (".errors", "StoreError"),
    "StoreUnwritable": (".errors", "StoreUnwritable"),
    "TiebreakerError": (".errors", "TiebreakerError"),
    "UnknownEdgeType": (".errors", "UnknownEdgeType"),
    "ValidityError": (".errors", "ValidityError"),
    "WorldDBError": (".errors", "WorldDBError"),
    "Embedder": (".models.embed", "Embedder"),
    "StaticEmbedder": (".models.embed", "StaticEmbedder"),
    "OnnxCrossEncoder": (".models.rerank", "OnnxCrossEncoder"),
    "Reranker": (".models.rerank", "Reranker"),
    "Context": (".retrieval.context", "Context"),
    "ContextItem": (".retrieval.context", "ContextItem"),
    "Expand": (".retrieval.query", "Expand"),
    "Filter": (".retrieval.query", "Filter"),
    "PreferSummaries": (".retrieval.query", "PreferSummaries"),
    "QuerySpec": (".retrieval.query", "QuerySpec"),
    "WhereConnected": (".retrieval.query", "WhereConnected"),
    "Extractor": (".text.extract", "Extractor"),
    "RuleExtractor": (".text.extract", "RuleExtractor"),
    "Direction": (".types", "Direction"),
    "Edge": (".types", "Edge"),
    "Hit": (".types", "Hit"),
    "Identity": (".types", "Identity"),
    "MergeProposal": (".types", "MergeProposal"),
    "MergeStatus": (".types", "MergeStatus"),
    "Node": (".types", "Node"),
    "Page": (".types", "Page"),
    "Reason": (".types", "Reason"),
    "Recall": (".types", "Recall"),
    "ScopeRef": (".types", "ScopeRef"),
    "Subgraph": (".types", "Subgraph"),
    "VerifyReport": (".types", "VerifyReport"),
    "ContextBridge": (".write.bridge", "ContextBridge"),
    "ConversationIn": (".write.conversation", "ConversationIn"),
    "IngestStats": (".write.conversation", "IngestStats"),
    "SessionIn": (".write.conversation", "SessionIn"),
    "TurnIn": (".write.turns", "TurnIn"),
    "MemoryIn": (".write.writer", "MemoryIn"),
    "Summarizer": (".consolidate.summaries", "Summarizer"),
    "ExtractiveSummarizer": (".consolidate.summaries", "ExtractiveSummarizer"),
    "SummaryItem": (".consolidate.summaries", "SummaryItem"),
    "Drafted": (".consolidate.summaries", "Drafted"),
    "EncodingGate": (".write.gate", "EncodingGate"),
    "CONVERSATION_FORMATS": (".write.loaders", "FORMATS"),
    "load_conversations": (".write.loaders", "load"),
    "Ambiguous": (".write.resolver", "Ambiguous"),
    "Candidate": (".write.resolver", "Candidate"),
    "Mention": (".write.resolver", "Mention"),
    "New": (".write.resolver", "New"),
    "PreferTiers": (".write.resolver", "PreferTiers"),
    "Resolution": (".write.resolver", "Resolution"),
    "Resolved": (".write.resolver", "Resolved"),
    "ResolverConfig": (".write.resolver", "ResolverConfig"),
    "Tiebreaker": (".write.resolver", "Tiebreaker"),
}


def __getattr__(name: str) -> Any:
    """Load a public name from its module on first use, and keep it (PEP 562)."""
    try:
        module, attribute = _LAZY[name]
    except KeyError:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
    value = getattr(importlib.import_module(module, __name__), attribute)
    globals()[name] = value  # later lookups find it without this function
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})


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
    "MemoryIn",
    "Summarizer",
    "ExtractiveSummarizer",
    "SummaryItem",
    "Drafted",
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
    "IndexRebuilt",
    "Hint",
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
