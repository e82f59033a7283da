"""How ``node_vec`` keeps a vector: int8 codes and one scale, a quarter of float32's bytes (schema 15).

A row's codes are its vector rounded to 127 steps of its largest component; its scale is one over the
codes' length, so ``codes * scale`` is a unit vector again (the engine's vectors all are). That decoded
vector is the one every reader sees: the in-memory index holds its codes, recall scores it, verify checks
it. On the bundled model's vectors of 5,000 LoCoMo turns, a decoded row's cosine to its float32 original
is 1 - 1.2e-4 on average (1 - 2.5e-4 at worst) and a query's scores move by 6e-4 on average, 5e-3 at most:
a near tie can swap (LoCoMo and BEAM-100K R@10 moved by +0.0003 and -0.001: docs/decisions.md 2026-12-07).

Pure numpy: the migration that converts a float32 table and ``vector_table`` both use it.
"""

from __future__ import annotations

import numpy as np

STEPS = 127  # int8's symmetric range


def encode(matrix: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(codes int8 (n, d), scales float64 (n,)) of the rows of ``matrix``; a zero row codes to zeros, scale 1."""
    rows = np.atleast_2d(np.asarray(matrix, dtype=np.float32))
    peak = np.abs(rows).max(axis=1, initial=0.0)
    step = np.where(peak > 0, peak / STEPS, 1.0).astype(np.float32)
    codes = np.rint(rows / step[:, None]).clip(-STEPS, STEPS).astype(np.int8)
    length = np.sqrt(np.einsum("ij,ij->i", codes.astype(np.float64), codes.astype(np.float64)))
    return codes, np.where(length > 0, 1.0 / np.where(length > 0, length, 1.0), 1.0)


def decode(codes: np.ndarray, scales: np.ndarray) -> np.ndarray:
    """The float32 rows that ``codes`` (n, d) and ``scales`` (n,) stand for."""
    return codes.astype(np.float32) * np.asarray(scales, dtype=np.float32).reshape(-1, 1)


def row(blob: bytes, scale: float) -> np.ndarray:
    """One row's float32 vector from its stored codes and scale."""
    return np.frombuffer(blob, dtype=np.int8).astype(np.float32) * np.float32(scale)
