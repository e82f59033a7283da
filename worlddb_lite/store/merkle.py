"""Merkle roots of worlds: an incremental binary tree over each world's member slots.

Every child node and every interior edge of a world takes the next free slot.
Level 0 holds leaf hashes; node (level, i) hashes nodes (level-1, 2i) and
(level-1, 2i+1), or promotes a lone left child. Changing or appending one leaf
rewrites only its path, so a write costs O(depth x log fanout), never O(world size).
A world's root covers its id, its projection, the top of its tree and its size.
"""

from __future__ import annotations

from collections.abc import Sequence

from .hashing import EMPTY_TREE, inner
from .rows import Store


def tree_height(size: int) -> int:
    """Levels above the leaves in a tree of ``size`` slots."""
    return (size - 1).bit_length() if size > 1 else 0


def compute_levels(leaves: Sequence[bytes]) -> list[list[bytes]]:
    """Every level of the tree over these leaves, from scratch: [leaves, ..., [top]]."""
    levels = [list(leaves)]
    while len(levels[-1]) > 1:
        level = levels[-1]
        levels.append(
            [inner(level[i], level[i + 1]) if i + 1 < len(level) else level[i] for i in range(0, len(level), 2)]
        )
    return levels


def compute_top(leaves: Sequence[bytes]) -> bytes:
    """The tree top over all leaves, from scratch (used by verify and tests)."""
    return compute_levels(leaves)[-1][0] if leaves else EMPTY_TREE


class MerkleWriter:
    """Reads and rewrites the stored tree rows of worlds through the store."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def top(self, world: int, size: int) -> bytes:
        """The stored top of a world's tree."""
        if size == 0:
            return EMPTY_TREE
        return self.store.merkle_get(world, tree_height(size), 0)

    def update(self, world: int, leaves: dict[int, bytes], size: int) -> bytes:
        """Write changed leaves and every node on their paths; return the new top."""
        if size == 0:
            return EMPTY_TREE
        rows = [(world, 0, slot, digest) for slot, digest in leaves.items()]
        current = dict(leaves)
        count = size
        for level in range(1, tree_height(size) + 1):
            above: dict[int, bytes] = {}
            for parent in sorted({i >> 1 for i in current}):
                left_i, right_i = 2 * parent, 2 * parent + 1
                left = current.get(left_i) or self.store.merkle_get(world, level - 1, left_i)
                if right_i < count:
                    right = current.get(right_i) or self.store.merkle_get(world, level - 1, right_i)
                    above[parent] = inner(left, right)
                else:
                    above[parent] = left
            rows.extend((world, level, i, digest) for i, digest in above.items())
            current = above
            count = (count + 1) // 2
        self.store.merkle_put(rows)
        return current[0]
