"""Re-embedding a whole store in place, and rewriting its token index: one transaction each.

Vectors are an index, not content: node ids and Merkle roots do not change.
"""

from __future__ import annotations

import contextlib
import itertools
import time
from collections.abc import Callable
from typing import Any

from ..index import token_index, vector_index
from ..models.embed import embed_checked, embedding_text
from ..store import queries
from ..write.reconciler import Reconciler


def rewrite_token_index(reconciler: Reconciler) -> None:
    """Inside a write: every token index row again, and the format they are in (none: no token table)."""
    tokens = reconciler.tokens()
    token_index.rewrite(reconciler.store, tokens)
    if tokens is None:
        reconciler.store.delete_meta(["token_format"])
    else:
        reconciler.store.set_meta([("token_format", token_index.FORMAT)])


def reembed_all(reconciler: Reconciler, progress: Callable[[int, int], None] | None, batch: int) -> dict[str, Any]:
    """Every node's vector again with the reconciler's embedder, and every world recomposed, in one transaction.

    ``progress`` is called with (texts done, texts in all).
    """
    embedder, store, dim = reconciler.embedder, reconciler.store, reconciler.dim
    assert embedder is not None
    started = time.perf_counter()
    total = queries.text_count(reconciler.conn)
    done = 0
    lane = reconciler.lane
    lane.auto_train = False  # one training (and one kept index) at the end, not one per doubling on the way
    with contextlib.ExitStack() as stack:
        stack.callback(setattr, lane, "auto_train", True)
        stack.enter_context(reconciler.transaction())
        lane.reset()
        store.set_meta([("embedder_id", embedder.model_id), ("embedder_dim", str(dim))])
        rewrite_token_index(reconciler)
        chunk: list[tuple[int, str]] = []
        for nid, name, content in itertools.chain(store.texts_in_depth_order(), [(0, None, None)]):
            text = embedding_text(name, content)
            if text:
                chunk.append((nid, text))
            if chunk and (len(chunk) >= batch or nid == 0):  # nid 0 marks the end
                vectors = embed_checked(embedder, [t for _, t in chunk], dim)
                reconciler.composer.commit([(n, v) for (n, _), v in zip(chunk, vectors, strict=True)])
                done += len(chunk)
                chunk = []
                if progress is not None:
                    progress(done, total)
        if done >= vector_index.TRAIN_AT:
            lane.train()  # which keeps the new epoch's index in the file
        else:
            lane.keep_all()
    return {
        "embedder": embedder.model_id,
        "dim": dim,
        "texts": done,
        "seconds": round(time.perf_counter() - started, 3),
    }
