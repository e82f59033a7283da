"""Equal scores in the same order on every replica: by the nodes' member keys, not their row numbers.

A row number (nid) is this file's own: two replicas that hold the same memories number them in the order
each learned them (sync/replicas.py), so a tie broken by it would rank the same memories apart on two devices.
The member key, (created_at, ord, id), is the same everywhere once they have synced; on one store written
in order it follows the row numbers (later writes, later keys), so a tie goes the way it went before,
but for rows of one commit in different worlds.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

Key = tuple[str, int, bytes]
Keys = Callable[[Sequence[int]], Mapping[int, Key]]
_NONE: Key = ("", 0, b"")  # a node gone from the file (none is, inside one read)


def ordered(nids: Sequence[int], primary: Callable[[int], Any], keys: Keys, *, newest_first: bool = False) -> list[int]:
    """``nids`` sorted by ``primary``; those it ties, oldest key first (or newest). Keys are read only for ties."""
    first = sorted(nids, key=primary)
    tied = {n for a, b in zip(first, first[1:], strict=False) if primary(a) == primary(b) for n in (a, b)}
    if not tied:
        return first
    found = keys(sorted(tied))
    rank = {n: i for i, n in enumerate(sorted(tied, key=lambda n: found.get(n, _NONE), reverse=newest_first))}
    return sorted(first, key=lambda n: (primary(n), rank.get(n, 0)))


def by_score(items: Sequence[tuple[int, float]], keys: Keys, *, newest_first: bool = False) -> list[tuple[int, float]]:
    """(nid, score) pairs best first; equal scores in member-key order."""
    score = dict(items)
    return [(n, score[n]) for n in ordered(list(score), lambda n: -score[n], keys, newest_first=newest_first)]
