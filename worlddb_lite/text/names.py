"""A name's normal form: the one key exact alias lookup, the resolver and recall's entity lane all compare."""

from __future__ import annotations


def normalise_alias(alias: str) -> str:
    """Casefolded, whitespace-collapsed form used for exact alias lookup."""
    return " ".join(alias.casefold().split())
