"""One error hierarchy for the whole engine.

Every error a caller can see is a ``WorldDBError``. Subclasses also inherit the
matching built-in (``NotFound`` is a ``LookupError``, ``InvalidInput`` a
``ValueError``) so ordinary ``except`` clauses keep working. Messages say what
happened, why, and what to do next. Raw SQLite errors are translated at the
store boundary only (``store.connection.translate``).
"""

from __future__ import annotations


class WorldDBError(Exception):
    """Base class of every error worlddb_lite raises on purpose."""


class InvalidInput(WorldDBError, ValueError):
    """An argument is malformed: empty text, bad UTF-8, a bad time, a bad interval."""


class InvalidId(InvalidInput):
    """A node or edge reference is not a hex id or a long-enough unique prefix."""


class InvalidTime(InvalidInput):
    """A time value cannot be parsed, or an interval ends before it starts."""


class NotFound(WorldDBError, LookupError):
    """No node, edge or proposal matches the reference."""


class AmbiguousId(WorldDBError, LookupError):
    """An id prefix matches more than one node."""


class UnknownEdgeType(WorldDBError, KeyError):
    """An edge type that is neither built in nor registered."""

    def __str__(self) -> str:  # KeyError would repr() the message
        return str(self.args[0]) if self.args else ""


class EdgeRefused(WorldDBError, ValueError):
    """An edge handler refused the write; the store is unchanged."""


class CycleError(EdgeRefused):
    """A world was asked to contain itself or one of its ancestors."""


class NotCurrent(WorldDBError, ValueError):
    """The node was already superseded, retired or retracted; act on its current version."""


class ValidityError(WorldDBError, ValueError):
    """A validity interval would widen or re-open; validity only ever tightens."""


class MergeError(WorldDBError, ValueError):
    """A merge proposal cannot move to the requested state."""


class NotAStore(WorldDBError, OSError):
    """The file is not a worlddb_lite store (or is damaged beyond opening)."""


class StoreUnwritable(WorldDBError, OSError):
    """The disk is full, or the store's file or folder cannot be written (its -wal and -shm files among them)."""


class SchemaTooNew(WorldDBError, RuntimeError):
    """The store was written by a newer worlddb_lite; upgrade the package to open it."""


class SchemaTooOld(WorldDBError, RuntimeError):
    """The store was written by a version of worlddb_lite too old for this one to migrate."""


class EmbedderMismatch(WorldDBError, RuntimeError):
    """The store was embedded with another model than the one configured."""


class EmbedderError(WorldDBError, RuntimeError):
    """The embedder returned unusable vectors (wrong shape, NaN, zero) or could not run."""


class StoreBusy(WorldDBError, TimeoutError):
    """Another process held the write lock for longer than the retry budget."""


class StoreError(WorldDBError, RuntimeError):
    """SQLite reported an error the engine did not expect; the transaction was rolled back."""


class IntegrityViolation(WorldDBError, RuntimeError):
    """A write was stopped by a trigger that guards an invariant."""


class RerankerError(WorldDBError, RuntimeError):
    """A cross-encoder folder cannot be loaded, or the model returned unusable scores."""


class MissingExtra(WorldDBError, ImportError):
    """An optional part was asked for but its packages are not installed; the message names the pip extra."""


class TiebreakerError(WorldDBError, RuntimeError):
    """The resolver's tiebreaker raised or chose something it was not offered; nothing was written."""


def install_hint(extra: str) -> str:
    """How to add an extra: by name where the package is installed, by path in a clone of its source."""
    return f"pip install 'worlddb_lite[{extra}]' (in a clone of the source: pip install '.[{extra}]')"
