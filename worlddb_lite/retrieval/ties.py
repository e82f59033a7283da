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
    return _ordered([(n, primary(n)) for n in nids], keys, newest_first)


def by_score(items: Sequence[tuple[int, float]], keys: Keys, *, newest_first: bool = False) -> list[tuple[int, float]]:
    """(nid, score) pairs best first; equal scores in member-key order."""
    score = dict(items)
    return [(n, score[n]) for n in _ordered([(n, -v) for n, v in score.items()], keys, newest_first)]


def _ordered(valued: list[tuple[int, Any]], keys: Keys, newest_first: bool) -> list[int]:
    """The nids of (nid, value) pairs by value; each run of equal values in member-key order.

    Each value is computed once and the sort is by it alone (a recall orders ~700 nids ~12 times).
    """
    valued.sort(key=lambda pair: pair[1])
    first = [n for n, _ in valued]
    runs: list[tuple[int, int]] = []  # [start, end) of each run of equal values
    i, total = 1, len(valued)
    while i < total:
        if valued[i][1] != valued[i - 1][1]:
            i += 1
            continue
        start = i - 1
        while i < total and valued[i][1] == valued[start][1]:
            i += 1
        runs.append((start, i))
    if not runs:
        return first
    found = keys(sorted({n for start, end in runs for n in first[start:end]}))
    for start, end in runs:
        first[start:end] = sorted(first[start:end], key=lambda n: found.get(n, _NONE), reverse=newest_first)
    return first
