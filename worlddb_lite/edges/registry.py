"""Which edge types a store knows: the defaults plus any a caller registers."""

from __future__ import annotations

import re

from ..errors import InvalidInput, UnknownEdgeType
from .base import EdgeType, QueryRules
from .builtin import DEFAULT_EDGE_TYPES

_NAME = re.compile(r"^[a-z][a-z0-9_]{0,63}$")


class EdgeRegistry:
    """Edge types by name. Each WorldDB has its own, seeded with the defaults."""

    def __init__(self) -> None:
        self._types: dict[str, EdgeType] = {t.name: t for t in DEFAULT_EDGE_TYPES}
        self._rules: dict[bool, QueryRules] = {}

    def register(self, edge_type: EdgeType, *, replace: bool = False) -> None:
        """Add a custom edge type; refuses to shadow an existing one unless ``replace``."""
        if not isinstance(edge_type, EdgeType):
            raise InvalidInput(
                "an edge type needs a name and on_insert / on_delete / on_query_rewrite; "
                "subclass worlddb_lite.edges.BaseEdgeType"
            )
        if not _NAME.match(edge_type.name or ""):
            raise InvalidInput(f"edge type name {edge_type.name!r} must be lower-case snake_case, 1-64 characters")
        if edge_type.name in self._types and not replace:
            raise InvalidInput(f"edge type {edge_type.name!r} already exists; pass replace=True to override it")
        self._types[edge_type.name] = edge_type
        self._rules.clear()

    def get(self, name: str) -> EdgeType:
        """The handler set for ``name``."""
        try:
            return self._types[name]
        except (KeyError, TypeError):
            known = ", ".join(sorted(self._types))
            raise UnknownEdgeType(
                f"unknown edge type {name!r}; known types: {known}. "
                "Register a custom one with WorldDB.register_edge_type()"
            ) from None

    def names(self) -> tuple[str, ...]:
        """Every known type name, sorted."""
        return tuple(sorted(self._types))

    def rules(self, *, include_superseded: bool = False) -> QueryRules:
        """Fold every type's on_query_rewrite into the rules reads apply (cached per registry state)."""
        cached = self._rules.get(include_superseded)
        if cached is None:
            cached = QueryRules(include_superseded=include_superseded)
            for edge_type in self._types.values():
                cached = edge_type.on_query_rewrite(cached)
            self._rules[include_superseded] = cached
        return cached
