"""One error hierarchy for the whole engine.

Every error a caller can see is a ``WorldDBError``. Subclasses also inherit the
matching built-in (``NotFound`` is a ``LookupError``, ``InvalidInput`` a
``ValueError``) so ordinary ``except`` clauses keep working. Messages say what
happened and why; what to do next, when it is an operation of the engine, is a
``Hint`` the front ends name in their own words (a CLI command, an MCP tool), so
no layer below them names a command. Raw SQLite errors are translated at the
store boundary only (``store.connection.translate``).
"""

from __future__ import annotations

from dataclasses import dataclass

# What each action is in plain words, for str(err) read from Python.
ACTION_WORDS = {
    "backup": "back the store up",
    "changes": "write the change set",
    "checkpoint": "checkpoint the store",
    "create": "create the store",
    "list_memories": "list the memories",
    "merge_proposals": "list the merge proposals",
    "replica": "make a replica",
    "scopes": "list the scopes",
    "search": "search the memories",
    "set_retention": "set the retention settings",
    "sync_token": "take a sync token",
    "verify": "verify the store",
}


@dataclass(frozen=True)
class Hint:
    """The next step after an error: an operation of the engine, named as its ``WorldDB`` method.

    ``args`` are the arguments worth naming, as (parameter, value) pairs: ``("overwrite", "")`` for a
    flag, ``("scope", "ana")``, ``("dest", path)``, or ``("store", "receiver")`` when it is another store's.
    """

    action: str
    args: tuple[tuple[str, str], ...] = ()

    def said(self) -> str:
        """The step in plain words, with no command or tool name."""
        words = ACTION_WORDS.get(self.action, self.action.replace("_", " "))
        named = [f"{key} {value}" if value else f"with {key}" for key, value in self.args]
        return f"{words} ({', '.join(named)})" if named else words


class WorldDBError(Exception):
    """Base class of every error worlddb_lite raises on purpose; ``hint`` is the next step, if one helps."""

    hint: Hint | None = None

    def __init__(self, *args: object, hint: Hint | None = None) -> None:
        super().__init__(*args)
        self.hint = hint

    @property
    def message(self) -> str:
        """What happened and why, without the hint."""
        return str(self.args[0]) if len(self.args) == 1 else Exception.__str__(self)

    def __str__(self) -> str:  # a whole sentence for a Python caller: the hint in plain words
        return f"{self.message} (next: {self.hint.said()})" if self.hint else self.message


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
    """An edge type that is neither built in nor registered (``message``: KeyError would repr() it)."""


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


class IndexRebuilt(UserWarning):
    """A warning, not an error: the vector index kept in the file could not be used.

    Damaged, edited, or its table altered: the index was built from the vectors themselves (``node_vec``);
    no answer changes, and the next write keeps it in the file again.
    """
