"""The process's caches that hold memory text, in one registry that a purge empties.

A purge erases a memory's words from the store's files; a cache in this process keyed by them (a
turn's text, a name's folded form, a word's tokens) would keep them as long as the process runs,
an MCP server or a consolidator. So each such cache registers how to empty it, beside its own
definition, and ``forget()`` empties every one (``ops/purge.py`` calls it)::

    register("dedup: texts read", _read.cache_clear)  # a module's cache: held for good
    register("resolver: name vectors", self._forget)  # an object's cache: held as long as the object lives
"""

from __future__ import annotations

import inspect
import threading
import weakref
from collections.abc import Callable

Clear = Callable[[], object]

_LOCK = threading.Lock()
_CACHES: list[tuple[str, Callable[[], Clear | None]]] = []  # (name, the clear, or None once its object is gone)


def register(name: str, clear: Clear) -> None:
    """Have ``forget`` call ``clear``; a bound method is held weakly, so a closed store's caches can go."""
    # weakly: a registry that held each resolver or token table would keep every store's caches alive
    held: Callable[[], Clear | None] = weakref.WeakMethod(clear) if inspect.ismethod(clear) else lambda: clear
    with _LOCK:
        _CACHES[:] = [(n, c) for n, c in _CACHES if c() is not None]
        _CACHES.append((name, held))


def registered() -> list[tuple[str, Clear]]:
    """(name, clear) of every cache registered whose object still lives."""
    with _LOCK:
        found = [(name, held()) for name, held in _CACHES]
    return [(name, clear) for name, clear in found if clear is not None]


def forget() -> None:
    """Empty every registered cache (a purge must leave no memory's words in this process)."""
    for _, clear in registered():
        clear()
