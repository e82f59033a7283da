"""``worlddb mcp DB``: the store as an MCP server over stdio, for an assistant to call as tools.

A thin front end, like the CLI: ``MemoryTools`` maps each tool onto one facade call and returns
plain JSON; the facade does every check. A ``WorldDBError`` becomes an MCP tool error carrying its
message (what happened and what to do); nothing else is expected to escape, and the hostile-input
tests call the tools through the SDK's own dispatcher to hold that. Tool calls are serialised on
one lock: the SDK runs synchronous tools on worker threads, and one store handle is not shared
between concurrent transactions.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from functools import wraps
from typing import Any

from .db import DEFAULT_BUDGET, DEFAULT_EXTRACTOR, DEFAULT_SCOPE, WorldDB
from .errors import WorldDBError
from .types import plain

INSTRUCTIONS = (
    "Long-term memory of one person, kept in one local SQLite file. `remember` what is worth keeping "
    "(kept verbatim, its facts learned), `recall` or `context` before answering, `amend` a memory that "
    "changed (the old version stays as history), `retire` one that stopped being true, `purge` one the "
    "person wants erased for good."
)


class MemoryTools:
    """The tools, each one facade call over an open store; results are JSON-ready."""

    def __init__(self, db: WorldDB) -> None:
        self.db = db

    def remember(
        self,
        text: str,
        scope: str = DEFAULT_SCOPE,
        valid_at: str | None = None,
        speaker: str | None = None,
        verbatim: bool = False,
    ) -> dict[str, str]:
        """Remember a note in a scope (one per person or project); returns its id.

        The text is kept verbatim and its facts are learned at once ("I moved to Porto" replaces where the
        person lived). ``speaker``: who says it (default: the scope's person). ``verbatim``: keep the text alone.
        """
        extractor = None if verbatim else DEFAULT_EXTRACTOR
        return {"id": self.db.write(text, scope=scope, valid_at=valid_at, speaker=speaker, extractor=extractor)}

    def add_turn(
        self,
        text: str,
        scope: str = DEFAULT_SCOPE,
        speaker: str | None = None,
        session: str | None = None,
        at: str | None = None,
    ) -> dict[str, str]:
        """Append one turn of the conversation as it is said (who said it, when); returns its id.

        Turns of one sitting share a session: the scope's latest unless 30 minutes passed, or ``session``.
        """
        return {"id": self.db.add_turn(text, scope=scope, speaker=speaker, session=session, at=at)}

    def recall(
        self,
        query: str,
        scope: str | None = None,
        k: int = 10,
        as_of: str | None = None,
        include_superseded: bool = False,
        late: bool = True,
    ) -> dict[str, Any]:
        """Hybrid recall (text, vectors, entity graph, named dates, then a token re-ranking ``late=False`` skips)."""
        found = self.db.recall(query, scope=scope, k=k, as_of=as_of, include_superseded=include_superseded, late=late)
        return {
            "as_of": found.as_of,
            "hits": [
                {
                    "id": h.node.id,
                    "type": h.node.type,
                    "content": h.node.content,
                    "valid_at": h.node.valid_at,
                    "invalid_at": h.node.invalid_at,
                    "score": round(h.score, 6),
                    "why": plain(h.why),
                }
                for h in found.hits
            ],
        }

    def context(
        self, query: str, scope: str | None = None, budget: int = DEFAULT_BUDGET, as_of: str | None = None
    ) -> str:
        """A dated, provenance-tagged context of at most ``budget`` tokens, ready for a prompt."""
        return self.db.context(query, scope=scope, budget=budget, as_of=as_of).text

    def read(self, id: str, as_of: str | None = None) -> dict[str, Any]:  # noqa: A002 (the tool's word)
        """One memory by id (or unique id prefix), as it was at ``as_of`` if given."""
        return dict(plain(self.db.read(id, as_of=as_of)))

    def history(self, id: str) -> dict[str, Any]:  # noqa: A002
        """Every version of a memory, oldest first, with its validity interval."""
        return {"versions": [plain(node) for node in self.db.history(id)]}

    def amend(  # noqa: A002
        self, id: str, text: str, valid_at: str | None = None, speaker: str | None = None, verbatim: bool = False
    ) -> dict[str, str]:
        """Write a new version of a memory; the old one is closed, not lost. Returns the new id.

        Read as ``remember`` reads a note: a value it changes replaces the old one. ``speaker``: who says it
        (default: whom the old version spoke for). ``verbatim``: keep the new text alone.
        """
        extractor = None if verbatim else DEFAULT_EXTRACTOR
        return {"id": self.db.amend(id, text, valid_at=valid_at, speaker=speaker, extractor=extractor)}

    def retire(self, id: str, at: str | None = None) -> dict[str, str]:  # noqa: A002
        """Close a memory's validity (it stays readable as history)."""
        self.db.retire(id, at=at)
        return {"retired": id}

    def purge(self, id: str, scope: str | None = None) -> dict[str, Any]:  # noqa: A002
        """Erase a memory's content for good (with its versions and what was learned from it)."""
        return dict(plain(self.db.purge(id, scope=scope)))

    def stats(self) -> dict[str, Any]:
        """Counts, sizes and the store's Merkle root."""
        return dict(plain(self.db.stats()))

    def verify(self) -> dict[str, Any]:
        """Recompute every hash and root; lists any broken invariant."""
        report = self.db.verify()
        return {"ok": report.ok, "checked": dict(report.checked), "violations": plain(report.violations)}


TOOL_NAMES = (
    "remember",
    "add_turn",
    "recall",
    "context",
    "read",
    "history",
    "amend",
    "retire",
    "purge",
    "stats",
    "verify",
)


def _sdk() -> tuple[type, type[Exception]]:
    """The server class and tool-error class of the installed MCP SDK (2.x names first, then 1.x)."""
    try:
        from mcp.server.mcpserver import MCPServer
        from mcp.server.mcpserver.exceptions import ToolError
    except ImportError:  # mcp 1.x
        from mcp.server.fastmcp import FastMCP as MCPServer  # type: ignore[no-redef,attr-defined,unused-ignore]
        from mcp.server.fastmcp.exceptions import ToolError  # type: ignore[no-redef,import-not-found,unused-ignore]
    return MCPServer, ToolError


def build_server(db: WorldDB) -> Any:
    """An MCP server whose tools are ``MemoryTools`` over ``db``."""
    server_class, tool_error = _sdk()
    server = server_class("worlddb", instructions=INSTRUCTIONS)
    tools, lock = MemoryTools(db), threading.Lock()

    def guarded(method: Callable[..., Any]) -> Callable[..., Any]:
        @wraps(method)
        def call(*args: Any, **kwargs: Any) -> Any:
            with lock:
                try:
                    return method(*args, **kwargs)
                except WorldDBError as exc:
                    raise tool_error(f"{type(exc).__name__}: {exc}") from None

        return call

    for name in TOOL_NAMES:
        server.add_tool(guarded(getattr(tools, name)), name=name)
    return server


def serve(db: WorldDB) -> None:
    """Answer MCP requests on stdin/stdout with ``db`` until the client leaves."""
    build_server(db).run()
