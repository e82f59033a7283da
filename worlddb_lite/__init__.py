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
    StoreBusy,
    StoreError,
    UnknownEdgeType,
    ValidityError,
    WorldDBError,
)
from .types import Direction, Edge, Identity, MergeProposal, MergeStatus, Node, Subgraph, VerifyReport

__version__ = "0.1.0"

__all__ = [
    "AmbiguousId", "BaseEdgeType", "CycleError", "Direction", "Edge", "EdgeRefused", "EdgeType",
    "Embedder", "EmbedderError", "EmbedderMismatch", "Identity", "IntegrityViolation", "InvalidId", "InvalidInput",
    "InvalidTime", "MergeError", "MergeProposal", "MergeStatus", "Node", "NotAStore", "NotCurrent",
    "NotFound", "SchemaTooNew", "StaticEmbedder", "StoreBusy", "StoreError", "Subgraph", "UnknownEdgeType",
    "ValidityError", "VerifyReport", "WorldDB", "WorldDBError", "__version__",
]
