"""text/caches.py: one registry of the caches that hold memory text; forget() empties them all."""

from __future__ import annotations

import gc

from worlddb_lite.text import caches


class _Holder:
    def __init__(self) -> None:
        self.texts = {"a turn's words": 1}
        caches.register("test: a holder", self.forget)

    def forget(self) -> None:
        self.texts.clear()


def test_forget_empties_a_registered_cache_and_an_object_gone_is_dropped() -> None:
    holder = _Holder()
    assert ("test: a holder", holder.forget) in caches.registered()
    caches.forget()
    assert holder.texts == {}
    del holder
    gc.collect()
    assert "test: a holder" not in dict(caches.registered())  # held weakly: a closed store's caches can go
