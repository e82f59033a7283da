"""Composed world embeddings (WorldDB paper §4.2/§5): pure numpy, no database code.

A world's composed embedding summarises the worlds it contains:

* v1, ``mean_pool``: the mean of the children's vectors, L2-normalised. The world's own
  content vector does not take part (as in the paper), so v1 is a summary of the children only.
* v2, ``attention_pool``: parameter-free attention. The world's own content vector is the
  query, its children's vectors are keys and values; a child that points away from what the
  world itself is about gets a small weight, so a few off-topic children cannot drag the
  summary off-theme the way they drag a mean.

``compose`` dispatches on the kind and gives a world with no children its own content vector.

Every input row is L2-normalised before use: the store keeps unit (cosine) vectors, and
normalising makes a child's weight depend on its direction only, never on its length. A zero
row stays zero (it has no direction): it adds nothing to a sum or to an attention output.
Outputs are unit-length float32 rows, the store's format. Invalid input (NaN or infinity,
wrong shapes, a dimension mismatch, a result with no direction) raises ``InvalidInput``,
which is a ``ValueError``.
"""

from __future__ import annotations

import math
from typing import Final

import numpy as np
import numpy.typing as npt

from ..errors import InvalidInput

KINDS: Final = ("mean", "attention")

# Below this norm a vector counts as zero: far under float32 resolution of a unit vector,
# far above the rounding noise of summing a few thousand float64 rows.
_ZERO_NORM: Final = 1e-12


def default_scale(dim: int) -> float:
    """The attention scale for unit vectors of dimension ``dim``: ``sqrt(dim)``.

    Transformer attention divides ``q·k`` by ``sqrt(d)`` because its vectors have norm about
    ``sqrt(d)`` (unit-variance entries), which makes the logits ``sqrt(d)·cos(q, k)``. Our
    vectors are unit length, so dividing by ``sqrt(d)`` would squeeze every logit into
    ``[-1/sqrt(d), 1/sqrt(d)]`` and softmax would be almost uniform, i.e. a mean pool. We
    rescale unit vectors to the norm ``sqrt(d)`` they would have had, which gives the same
    logits as standard attention: ``scale · cos(q, k)`` with ``scale = sqrt(d)``.
    """
    if dim < 1:
        raise InvalidInput(f"vectors need at least one dimension, got {dim}")
    return math.sqrt(dim)


def _query(query: npt.ArrayLike) -> npt.NDArray[np.float64]:
    """A finite 1-D float64 vector, or InvalidInput."""
    try:
        q = np.asarray(query, dtype=np.float64)
    except (TypeError, ValueError):
        raise InvalidInput("the query (content) vector must be a sequence of numbers") from None
    if q.ndim != 1 or q.shape[0] == 0:
        raise InvalidInput(f"the query (content) vector must be 1-D and non-empty, got shape {q.shape}")
    if not np.isfinite(q).all():
        raise InvalidInput("the query (content) vector holds NaN or infinity; embed it again")
    return q


def _children(children: npt.ArrayLike, dim: int | None) -> npt.NDArray[np.float64]:
    """A finite (n, dim) float64 matrix; any empty input becomes shape (0, dim)."""
    try:
        c = np.asarray(children, dtype=np.float64)
    except (TypeError, ValueError):
        raise InvalidInput("children must be an (n, d) array of numbers") from None
    if c.size == 0:  # np.empty(0), [] and (0, d) all mean "no children"
        return np.zeros((0, dim if dim is not None else (c.shape[-1] if c.ndim == 2 else 0)))
    if c.ndim != 2:
        raise InvalidInput(f"children must be an (n, d) array, one row per child, got shape {c.shape}")
    if dim is not None and c.shape[1] != dim:
        raise InvalidInput(f"children have {c.shape[1]} dimensions but the query has {dim}; embed both with one model")
    if not np.isfinite(c).all():
        bad = sorted({int(i) for i in np.nonzero(~np.isfinite(c))[0]})
        raise InvalidInput(f"children rows {bad[:10]} hold NaN or infinity; re-embed those children")
    return c


def _unit_rows(m: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """Rows divided by their norms; zero rows stay zero."""
    norms = np.linalg.norm(m, axis=-1, keepdims=True)
    out: npt.NDArray[np.float64] = np.divide(m, norms, out=np.zeros_like(m), where=norms > _ZERO_NORM)
    return out


def _unit_output(v: npt.NDArray[np.float64], what: str) -> npt.NDArray[np.float32]:
    """Normalise a composed vector, refusing one with no direction."""
    norm = float(np.linalg.norm(v))
    if not norm > _ZERO_NORM:
        raise InvalidInput(f"{what} is the zero vector (zero inputs, or children that cancel out); it has no direction")
    return (v / norm).astype(np.float32)


def mean_pool(children: npt.ArrayLike) -> npt.NDArray[np.float32]:
    """v1: the mean of the children's unit vectors, L2-normalised.

    ``children`` is (n, d) with n >= 1; with no children there is nothing to average, so this
    raises InvalidInput (``compose`` falls back to the world's content vector instead).
    """
    c = _children(children, None)
    if c.shape[0] == 0:
        raise InvalidInput("mean_pool needs at least one child; a world without children is its content vector")
    return _unit_output(_unit_rows(c).mean(axis=0), "the mean of the children")


def attention_weights(
    query: npt.ArrayLike, children: npt.ArrayLike, *, scale: float | None = None
) -> npt.NDArray[np.float64]:
    """Softmax weights of each child for the query: ``softmax(scale · cos(query, child))``.

    ``scale`` defaults to ``sqrt(d)`` (see ``default_scale`` for why, with unit vectors, not
    ``1/sqrt(d)``). A zero query or a zero child has cosine 0. Returns an (n,) array summing to 1;
    with no children, an empty array.
    """
    q = _query(query)
    c = _children(children, q.shape[0])
    s = default_scale(q.shape[0]) if scale is None else float(scale)
    if not (math.isfinite(s) and s >= 0.0):
        raise InvalidInput(f"the attention scale must be a finite number >= 0, got {scale!r}")
    if c.shape[0] == 0:
        return np.zeros(0)
    logits = s * (_unit_rows(c) @ _unit_rows(q))
    logits -= logits.max()  # stable softmax: the largest term is exp(0) = 1, nothing overflows
    weights: npt.NDArray[np.float64] = np.exp(logits)
    weights /= weights.sum()
    return weights


def attention_pool(
    query: npt.ArrayLike, children: npt.ArrayLike, *, scale: float | None = None
) -> npt.NDArray[np.float32]:
    """v2: parameter-free attention pool of the children, queried by the world's content vector.

    Keys and values are the children's unit vectors; the output is ``sum_i w_i · child_i`` with
    ``w = attention_weights(query, children, scale=scale)``, L2-normalised. With no children
    the result is the query itself, normalised (a world with no children is its content). A zero
    query attends uniformly, so the result equals ``mean_pool(children)``.
    """
    q = _query(query)
    c = _children(children, q.shape[0])
    if c.shape[0] == 0:
        return _unit_output(q, "the query (content) vector")
    weights = attention_weights(q, c, scale=scale)
    return _unit_output(weights @ _unit_rows(c), "the attention pool of the children")


def compose(kind: str, content: npt.ArrayLike, children: npt.ArrayLike) -> npt.NDArray[np.float32]:
    """The composed embedding of one world: ``kind`` is "mean" (v1) or "attention" (v2).

    ``content`` is the world's own embedding (d,), ``children`` its children's (n, d). With no
    children both kinds return the content vector, normalised. Otherwise "mean" pools the
    children only (the content takes no part, as in the paper's v1) and "attention" uses the
    content as the query over the children (v2).
    """
    if kind not in KINDS:
        raise InvalidInput(f"unknown composition kind {kind!r}; valid kinds are {', '.join(map(repr, KINDS))}")
    q = _query(content)
    c = _children(children, q.shape[0])
    if c.shape[0] == 0:
        return _unit_output(q, "the content vector of a world without children")
    if kind == "mean":
        return mean_pool(c)
    return attention_pool(q, c)
