"""Edge types: write-time programs. See ``base`` for the protocol."""

from .base import (
    BaseEdgeType,
    CloseValidity,
    Decision,
    EdgeContext,
    EdgeDraft,
    EdgeType,
    EndView,
    QueryRules,
    SkipEdgeRow,
    StageMerge,
)
from .builtin import DEFAULT_EDGE_TYPES
from .registry import EdgeRegistry

__all__ = [
    "BaseEdgeType",
    "CloseValidity",
    "DEFAULT_EDGE_TYPES",
    "Decision",
    "EdgeContext",
    "EdgeDraft",
    "EdgeRegistry",
    "EdgeType",
    "EndView",
    "QueryRules",
    "SkipEdgeRow",
    "StageMerge",
]
