"""Graph walks shared by the write path and the reads: one closure function, no copies."""

from __future__ import annotations

from collections.abc import Callable, Iterable


def closure(start: int, neighbours: Callable[[int], Iterable[int]], *, goal: int | None = None) -> set[int]:
    """Every node reachable from ``start`` (itself included), stopping early once ``goal`` is seen."""
    seen = {start}
    frontier = [start]
    while frontier and goal not in seen:
        for other in neighbours(frontier.pop()):
            if other not in seen:
                seen.add(other)
                frontier.append(other)
    return seen


def reaches(start: int, goal: int, neighbours: Callable[[int], Iterable[int]]) -> bool:
    """True if ``goal`` is reachable from ``start`` (or is ``start``)."""
    return goal in closure(start, neighbours, goal=goal)
