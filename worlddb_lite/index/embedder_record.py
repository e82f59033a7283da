"""Which embedder a store was written with (meta ``embedder_id`` and ``embedder_dim``), and the one it opens with.

A store's vectors are only comparable with vectors of the same model, so the file records its
model at creation and refuses to open with another one (``WorldDB.reembed`` switches models).
"""

from __future__ import annotations

import apsw

from ..errors import EmbedderMismatch, Hint, IntegrityViolation, InvalidInput
from ..models.embed import BUNDLED_MODEL, Embedder, StaticEmbedder
from ..store.queries import meta_value

EXTERNAL_VECTORS = "external"  # the caller supplies every vector: no embedder


def require(conn: apsw.Connection, path: str) -> None:
    """An existing store records its embedder; a missing row is a damaged meta table, not another model."""
    for key in ("embedder_id", "embedder_dim"):
        if meta_value(conn, key) is None:
            raise IntegrityViolation(
                f"{path}: the store's meta table is damaged (its {key} row is missing: written around the engine); "
                "restore the store from a backup",
                hint=Hint("verify", (("store", path),)),
            )


def choose(
    conn: apsw.Connection, path: str, embedder: object, dim: int, *, default: bool, adopt: bool
) -> tuple[Embedder | None, str, int]:
    """(embedder, its id, its dimension) to open the store with.

    ``default``: the caller named none, so the bundled model, unless the store records caller-supplied
    vectors, or another model (an error: open it with that one). ``adopt``: the store takes whatever
    is given (a re-embedding).
    """
    existing = meta_value(conn, "embedder_id")
    if default:
        if existing is not None and existing not in (BUNDLED_MODEL, EXTERNAL_VECTORS) and not adopt:
            raise EmbedderMismatch(
                f"{path} was embedded with {existing!r}; open it with that embedder "
                "(WorldDB(path, embedder=...)) or re-embed it"
            )
        if existing == EXTERNAL_VECTORS and not adopt:
            return None, EXTERNAL_VECTORS, int(meta_value(conn, "embedder_dim") or dim)
        model = StaticEmbedder()
        return model, model.model_id, model.dim
    if embedder is None:
        return None, EXTERNAL_VECTORS, int(meta_value(conn, "embedder_dim") or dim)
    if not isinstance(embedder, Embedder):
        raise InvalidInput("embedder must implement worlddb_lite.Embedder (model_id, dim, embed)")
    return embedder, embedder.model_id, int(embedder.dim)


def check(conn: apsw.Connection, path: str, model_id: str, dim: int) -> None:
    """The store was written with this model at this dimension, or EmbedderMismatch."""
    stored_id, stored_dim = meta_value(conn, "embedder_id"), meta_value(conn, "embedder_dim")
    if stored_id != model_id or stored_dim != str(dim):
        raise EmbedderMismatch(
            f"{path} was embedded with {stored_id!r} ({stored_dim} dimensions), "
            f"not {model_id!r} ({dim}); open it with that embedder, or re-embed the store"
        )
