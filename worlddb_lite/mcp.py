"""``worlddb mcp DB``: the store as an MCP server over stdio (or streamable HTTP), for an assistant to call as tools.

A thin front end, like the CLI: ``MemoryTools`` maps each tool onto one facade call and returns
plain JSON; the facade does every check. A ``WorldDBError`` becomes an MCP tool error carrying its
message (what happened and what to do, naming tools rather than CLI commands); nothing else is
expected to escape, and the hostile-input tests call the tools through the SDK's own dispatcher to
hold that. An argument a tool does not take is refused, not ignored: a model that misspells one
should hear so. Tool calls are serialised on one lock: the SDK runs synchronous tools on worker
threads, and one store handle is not shared between concurrent transactions. Over HTTP every client's
session reaches the same server, so the same handle and the same lock: concurrent clients queue, one
call at a time. The HTTP transport has no authentication; it binds to loopback by default.

Two families of tools sit side by side: the short names (``remember``, ``recall``, ...) and the
WorldDB paper's ``memory_*`` surface, named apart from Mem0's so both servers fit in one client.
"""

from __future__ import annotations

import inspect
import io
import json
import os
import re
import threading
from collections.abc import Callable
from functools import wraps
from importlib import metadata
from types import FrameType
from typing import IO, Annotated, Any, Literal, get_type_hints

from pydantic import Field, ValidationError

from . import __version__
from .db import DEFAULT_BUDGET, DEFAULT_EXTRACTOR, DEFAULT_SCOPE, MAX_SCOPES, WorldDB
from .errors import InvalidInput, WorldDBError
from .types import Hit, Node, plain, scope_record

INSTRUCTIONS = (
    "Long-term memory of one person, kept in one local SQLite file. `memory_write` (or `remember`) what is "
    "worth keeping (kept verbatim, its facts learned), `memory_recall` (or `recall`, `context`) before "
    "answering, `memory_amend` a memory that changed (the old version stays as history), `memory_retire` one "
    "that stopped being true, `memory_list` and `memory_list_scopes` to see what is kept, `purge` one the "
    "person wants erased for good."
)

# the tools' parameters, described for the model that calls them
Text = Annotated[str, Field(description="the memory, verbatim (at most 500,000 characters)")]
SCOPE_NAMES = (
    "a user's name (ana), or agent:NAME, app:NAME or run:NAME for an agent, an app or one run (see memory_list_scopes)"
)
ScopeName = Annotated[str, Field(description=f"a scope: {SCOPE_NAMES}")]
ScopeFilter = Annotated[
    str | list[str] | None,
    Field(
        description=f"only what lies inside this scope, or inside any of a list of scopes: {SCOPE_NAMES}; "
        "leave out for the whole store"
    ),
]
Ref = Annotated[
    str, Field(description="a memory's id: its 64 hex characters, or a unique prefix of at least 8 of them")
]
AsOf = Annotated[
    str | None,
    Field(
        description="read as things were true at this moment: an ISO-8601 date or time, e.g. 2024-05-01 or "
        "2024-05-01T09:30:00Z (UTC unless it has an offset); leave out for now"
    ),
]
ValidAt = Annotated[
    str | None,
    Field(description="when it became true: an ISO-8601 date or time, e.g. 2024-05-01; leave out for now"),
]
At = Annotated[
    str | None,
    Field(description="when it stopped being true: an ISO-8601 date or time, not before it began; leave out for now"),
]
K = Annotated[int, Field(description="how many hits to return, best first (1 to 1000)")]
Superseded = Annotated[
    bool, Field(description="also return versions a newer one replaced, marked with superseded_by (history)")
]
Speaker = Annotated[str | None, Field(description="who says it (default: the scope's person)")]
AmendSpeaker = Annotated[str | None, Field(description="who says it (default: whom the old version spoke for)")]
Verbatim = Annotated[
    bool, Field(description="keep the text alone: learn no facts from it, replace nothing (default: learn)")
]


def _compact(node: Node, turns: tuple[Node, ...] = ()) -> dict[str, Any]:
    """A node as a model reads it: what it says, who said it, in which session, when; empty fields left out.

    A turn's speaker is its name; a note's is in its props; a fact's is that of the turn it was learned from.
    """
    said = turns[0] if turns and node.type == "Fact" else node
    speaker = said.props.get("speaker") or (said.name if said.type == "Turn" else None)
    out: dict[str, Any] = {
        "id": node.id,
        "type": node.type,
        "content": node.content if node.content is not None else node.name,
        "speaker": speaker,
        "session": said.props.get("session"),
        "date": node.valid_at,
        "until": node.invalid_at,
        "retired": node.retired or None,
        "purged": node.purged or None,
        "superseded_by": list(node.superseded_by) or None,
        "contradicted_by": list(node.contradicted_by) or None,
    }
    return {key: value for key, value in out.items() if value is not None}


def _hit(hit: Hit) -> dict[str, Any]:
    why = ", ".join(f"{r.lane}#{r.rank}" + (f" via {r.via}" if r.via else "") for r in hit.why)
    return {**_compact(hit.node, hit.turns), "score": round(hit.score, 6), "why": why}


def _extractor(verbatim: bool) -> Any:
    """What reads a memory's text: the default write path's extractor, or none for the text alone."""
    return None if verbatim else DEFAULT_EXTRACTOR


class MemoryTools:
    """The tools, each one facade call over an open store; results are JSON-ready."""

    def __init__(self, db: WorldDB) -> None:
        self.db = db

    def remember(
        self,
        text: Text,
        scope: ScopeName = DEFAULT_SCOPE,
        valid_at: ValidAt = None,
        speaker: Speaker = None,
        verbatim: Verbatim = False,
    ) -> dict[str, str]:
        """Remember a note in a scope (one per person or project); returns its id.

        The text is kept verbatim and its facts are learned at once ("I moved to Porto" replaces where the
        person lived). ``speaker``: who says it (default: the scope's person). ``verbatim``: keep the text alone.
        """
        extractor = _extractor(verbatim)
        return {"id": self.db.write(text, scope=scope, valid_at=valid_at, speaker=speaker, extractor=extractor)}

    def add_turn(
        self,
        text: Annotated[str, Field(description="what was said, verbatim")],
        scope: ScopeName = DEFAULT_SCOPE,
        speaker: Annotated[str | None, Field(description="who said it")] = None,
        session: Annotated[
            str | None, Field(description="the session to join (default: the scope's latest, new after 30 minutes)")
        ] = None,
        at: Annotated[str | None, Field(description="when it was said: ISO-8601; leave out for now")] = None,
    ) -> dict[str, str]:
        """Append one turn of the conversation as it is said (who said it, when); returns its id.

        Turns of one sitting share a session: the scope's latest unless 30 minutes passed, or ``session``.
        """
        return {"id": self.db.add_turn(text, scope=scope, speaker=speaker, session=session, at=at)}

    def recall(
        self,
        query: Annotated[str, Field(description="the question or words to recall by")],
        scope: ScopeFilter = None,
        k: K = 10,
        as_of: AsOf = None,
        include_superseded: Superseded = False,
        late: Annotated[bool, Field(description="re-rank the finds token by token (false: a few ms faster)")] = True,
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
        self,
        query: Annotated[str, Field(description="the question the context is for")],
        scope: ScopeFilter = None,
        budget: Annotated[
            int, Field(description="at most this many tokens (about 4 characters each)")
        ] = DEFAULT_BUDGET,
        as_of: AsOf = None,
    ) -> str:
        """A dated, provenance-tagged context of at most ``budget`` tokens, ready for a prompt."""
        return self.db.context(query, scope=scope, budget=budget, as_of=as_of).text

    def read(self, id: Ref, as_of: AsOf = None) -> dict[str, Any]:  # noqa: A002 (the tool's word)
        """One memory by id (or unique id prefix), as it was at ``as_of`` if given."""
        return dict(plain(self.db.read(id, as_of=as_of)))

    def history(self, id: Ref) -> dict[str, Any]:  # noqa: A002
        """Every version of a memory, oldest first, with its validity interval."""
        return {"versions": [plain(node) for node in self.db.history(id)]}

    def amend(  # noqa: A002
        self,
        id: Ref,
        text: Text,
        valid_at: ValidAt = None,
        speaker: AmendSpeaker = None,
        verbatim: Verbatim = False,
    ) -> dict[str, str]:
        """Write a new version of a memory; the old one is closed, not lost. Returns the new id.

        Read as ``remember`` reads a note: a value it changes replaces the old one. ``speaker``: who says it
        (default: whom the old version spoke for). ``verbatim``: keep the new text alone.
        """
        extractor = _extractor(verbatim)
        return {"id": self.db.amend(id, text, valid_at=valid_at, speaker=speaker, extractor=extractor)}

    def retire(self, id: Ref, at: At = None) -> dict[str, str]:  # noqa: A002
        """Close a memory's validity (it stays readable as history)."""
        self.db.retire(id, at=at)
        return {"retired": id}

    def purge(  # noqa: A002
        self,
        id: Ref,
        confirm: Annotated[
            bool,
            Field(
                strict=True,  # JSON true only: not "yes", not 1
                description="true, to say the erasure is meant: every version of the memory and all that was "
                "learned from them go for good, and it cannot be undone",
            ),
        ],
        scope: Annotated[str | None, Field(description="refuse unless the memory lies inside this scope")] = None,
    ) -> dict[str, Any]:
        """Erase a memory for good: EVERY version of it and every fact learned from any of them; cannot be undone.

        The id of any one version, older or newer, names them all; only their hashes stay. Only with ``confirm``
        true. To close a memory that stopped being true and keep its history, use ``memory_retire``.
        """
        if confirm is not True:
            raise InvalidInput("confirm must be true to purge: it erases every version for good; nothing was purged")
        return dict(plain(self.db.purge(id, scope=scope)))

    def stats(self) -> dict[str, Any]:
        """Counts, sizes and the store's Merkle root; the store's file name, not where it lies."""
        found = dict(plain(self.db.stats()))
        found["path"] = os.path.basename(found["path"])  # the folders name the person and their machine
        return found

    def verify(self) -> dict[str, Any]:
        """Recompute every hash and root; lists any broken invariant."""
        report = self.db.verify()
        return {"ok": report.ok, "checked": dict(report.checked), "violations": plain(report.violations)}

    # ---- the WorldDB paper's surface ------------------------------------------------------

    def memory_write(
        self,
        text: Text,
        scope: Annotated[
            str | list[str],
            Field(
                description=f"the scope to write into, or a list of up to {MAX_SCOPES} that all hold the one "
                f"memory (the first owns it and learns its facts): {SCOPE_NAMES}"
            ),
        ] = DEFAULT_SCOPE,
        valid_at: ValidAt = None,
        speaker: Speaker = None,
        verbatim: Verbatim = False,
    ) -> dict[str, Any]:
        """Remember a text in one or more scopes, verbatim, its facts learned; returns its id.

        "I moved to Porto" replaces where the person lived. A list of scopes stores one memory that each of
        them holds (a recall in any finds it), in one transaction.
        """
        extractor = _extractor(verbatim)
        return {"id": self.db.write(text, scope=scope, valid_at=valid_at, speaker=speaker, extractor=extractor)}

    def memory_recall(
        self,
        query: Annotated[str, Field(description="the question or words to recall by")],
        scope: ScopeFilter = None,
        k: K = 10,
        as_of: AsOf = None,
        include_superseded: Superseded = False,
        include_cold: Annotated[
            bool, Field(description="also rank memories of the cold tier (out of the in-memory vector index)")
        ] = False,
        min_confidence: Annotated[
            float | None,
            Field(
                description="return no hits when the confidence that the first answers is under this (0 to 1)",
                strict=True,  # true, false or "0.5" are not numbers: refused, as the API refuses them
            ),
        ] = None,
    ) -> dict[str, Any]:
        """Hybrid recall (words, meaning, the people and things named, dates), best first.

        Each hit says what it is, who said it (speaker), in which session, since when it holds (date) and
        why it came. Superseded versions are left out unless asked for. ``confidence``: how likely the first
        hit answers. No hits: ``nothing_relevant: true``, and ``withheld: true`` when some were found but the
        confidence is under ``min_confidence``.
        """
        found = self.db.recall(
            query,
            scope=scope,
            k=k,
            as_of=as_of,
            include_superseded=include_superseded,
            include_cold=include_cold,
            min_confidence=min_confidence,
        )
        answer: dict[str, Any] = {
            "as_of": found.as_of,
            "confidence": round(found.confidence, 4),
            "hits": [_hit(h) for h in found.hits],
        }
        if not found.hits:
            answer["nothing_relevant"] = True
            answer["withheld"] = found.withheld
        return answer

    def memory_list(
        self,
        scope: ScopeName,
        type: Annotated[  # noqa: A002 (the tool's word)
            str | None, Field(description="only nodes of this type: Memory (a note), Turn, Fact, Entity, Session")
        ] = None,
        include_retired: Annotated[
            bool, Field(description="also list memories that were retired or superseded (history)")
        ] = False,
        limit: Annotated[int, Field(description="at most this many per page (1 to 1000)")] = 50,
        cursor: Annotated[
            str | None, Field(description="the cursor the previous page returned; leave out for the first page")
        ] = None,
    ) -> dict[str, Any]:
        """The memories of a scope in the order written, a page at a time; ``cursor`` is null on the last page."""
        page = self.db.list_memories(scope, type=type, include_retired=include_retired, limit=limit, cursor=cursor)
        return {"memories": [_compact(node) for node in page.nodes], "cursor": page.cursor}

    def memory_read(self, id: Ref, as_of: AsOf = None) -> dict[str, Any]:  # noqa: A002
        """One memory by id (or a unique prefix of at least 8 hex characters), any version.

        With ``as_of``, only if it was true then.
        """
        node = self.db.read(id, as_of=as_of)
        extra = {"name": node.name, "props": dict(node.props) or None, "created_at": node.created_at}
        return {**_compact(node), **{key: value for key, value in extra.items() if value is not None}}

    def memory_amend(  # noqa: A002
        self,
        id: Ref,
        text: Text,
        valid_at: ValidAt = None,
        speaker: AmendSpeaker = None,
        verbatim: Verbatim = False,
    ) -> dict[str, str]:
        """Write a new memory that supersedes one that changed; the old one stays, closed, as history."""
        old = self.db.read(id).id
        extractor = _extractor(verbatim)
        new = self.db.amend(old, text, valid_at=valid_at, speaker=speaker, extractor=extractor)
        return {"id": new, "supersedes": old}

    def memory_retire(self, id: Ref, at: At = None) -> dict[str, Any]:  # noqa: A002
        """Close one memory's validity: it stopped being true (it stays readable as history)."""
        node = self.db.read(id)
        self.db.retire(node.id, at=at)
        return {"retired": node.id, "until": self.db.read(node.id).invalid_at}

    def memory_retire_all(self, scope: ScopeName, at: At = None) -> dict[str, Any]:
        """Close the validity of every memory of a scope that is true now, in one transaction (history stays)."""
        return {"scope": scope, "retired": len(self.db.retire_all(scope, at=at))}

    def memory_purge_scope(
        self,
        scope: ScopeName,
        confirm: Annotated[str, Field(description="the scope's name again: the purge cannot be undone")],
    ) -> dict[str, Any]:
        """Erase a scope and everything in it for good (content, index rows, the scope's name); only hashes stay.

        Only when ``confirm`` repeats the scope's name exactly. Nothing outside the scope is touched.
        """
        if confirm != scope:
            raise InvalidInput(
                f"confirm must repeat the scope's name ({scope!r}) exactly, got {confirm!r}; nothing was purged"
            )
        report = self.db.purge_scope(scope)
        return {"purged_scope": scope, "erased": len(report["purged"]), "checkpoint": plain(report["checkpoint"])}

    def memory_list_scopes(
        self,
        kind: Annotated[
            Literal["user", "agent", "app", "run"] | None,
            Field(description="only scopes of this kind; leave out for every kind"),
        ] = None,
    ) -> dict[str, Any]:
        """Every scope of the store (of one kind if asked), oldest first.

        Each with the name to pass as ``scope``, its kind, its id and when it was created.
        """
        return {"scopes": [scope_record(n) for n in self.db.scopes(kind=kind)]}


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
    "memory_write",
    "memory_recall",
    "memory_list",
    "memory_read",
    "memory_amend",
    "memory_retire",
    "memory_retire_all",
    "memory_purge_scope",
    "memory_list_scopes",
)
# What each tool does to the store, for a client to show or ask before it runs (MCP tool annotations):
# (reads only, destroys what was there, a repeat with the same arguments changes nothing more). A recall
# notes its hits in the access log and changes no memory: read-only. Nothing reaches outside the file.
TOOL_EFFECTS: dict[str, tuple[bool, bool, bool]] = {
    "remember": (False, False, False),
    "add_turn": (False, False, False),
    "recall": (True, False, True),
    "context": (True, False, True),
    "read": (True, False, True),
    "history": (True, False, True),
    "amend": (False, False, False),
    "retire": (False, True, True),
    "purge": (False, True, True),
    "stats": (True, False, True),
    "verify": (True, False, True),
    "memory_write": (False, False, False),
    "memory_recall": (True, False, True),
    "memory_list": (True, False, True),
    "memory_read": (True, False, True),
    "memory_amend": (False, False, False),
    "memory_retire": (False, True, True),
    "memory_retire_all": (False, True, True),
    "memory_purge_scope": (False, True, True),
    "memory_list_scopes": (True, False, True),
}
# the facade's advice names CLI commands; over MCP it names the tools that do the same
TOOL_FOR_COMMAND = {
    "`worlddb list`": "`memory_list`",
    "`worlddb search`": "`memory_recall`",
    "`worlddb scopes`": "`memory_list_scopes`",
    "`worlddb write` printed": "`memory_write` returned",
    "`worlddb verify`": "`verify`",
    "`worlddb stats`": "`stats`",
}


def version() -> str:
    """The installed package's version (the source tree's when it is not installed)."""
    try:
        return metadata.version("worlddb_lite")
    except metadata.PackageNotFoundError:
        return __version__


def _advice(message: str) -> str:
    for command, tool in TOOL_FOR_COMMAND.items():
        message = message.replace(command, tool)
    return message


def _described(method: Callable[..., Any]) -> dict[str, str]:
    """What each parameter of a tool is, as its ``Field`` describes it to the model."""
    out = {}
    for name, hint in get_type_hints(method, include_extras=True).items():
        for extra in getattr(hint, "__metadata__", ()):
            if getattr(extra, "description", None):
                out[name] = extra.description
    return out


def _invalid(tool: str, error: ValidationError, described: dict[str, str]) -> str:
    """The arguments pydantic refused, on one line: each one's name and what is wrong with it."""
    said = []
    for problem in error.errors(include_url=False):
        where = ".".join(str(part) for part in problem["loc"]) or "the arguments"
        if problem["type"] == "missing":
            said.append(f"{where} is required" + (f" ({described[where]})" if where in described else ""))
        else:
            given = repr(problem.get("input"))
            given = given if len(given) <= 40 else given[:37] + "..."
            said.append(f"{where}: {problem['msg'][:1].lower()}{problem['msg'][1:]}, got {given}")
    return " ".join(f"{tool}: {'; '.join(said)}".split())  # no line breaks, whatever the input held


def _result(value: Any) -> Any:
    """A dict as one compact JSON text plus the same structured content; text stays text."""
    if not isinstance(value, dict):
        return value
    from mcp.types import CallToolResult  # the SDK's types: loaded with the server

    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    return CallToolResult.model_validate(
        {"content": [{"type": "text", "text": text}], "structuredContent": value}, by_alias=True
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
    from mcp.types import ToolAnnotations

    server_class, tool_error = _sdk()
    tools, lock = MemoryTools(db), threading.Lock()
    parent: Any = server_class  # the SDK's class, subclassed below to check argument names
    takes = {name: set(inspect.signature(getattr(tools, name)).parameters) for name in TOOL_NAMES}
    described = {name: _described(getattr(tools, name)) for name in TOOL_NAMES}

    async def call_tool(self: Any, name: str, arguments: dict[str, Any] | None, *rest: Any, **options: Any) -> Any:
        unknown = sorted(set(arguments or {}) - takes.get(name, set(arguments or {})))
        if unknown:  # the SDK would drop them silently
            allowed = ", ".join(sorted(takes[name])) or "no arguments"
            raise tool_error(
                f"InvalidInput: {name} takes no argument {', '.join(map(repr, unknown))}; it takes {allowed}"
            )
        try:
            return await parent.call_tool(self, name, arguments, *rest, **options)
        except tool_error as exc:
            if isinstance(exc.__cause__, ValidationError):  # the SDK's dump: lines, a URL, the model's name
                raise tool_error(f"InvalidInput: {_invalid(name, exc.__cause__, described.get(name, {}))}") from None
            raise

    server_type = type("WorldDBServer", (server_class,), {"call_tool": call_tool})
    server = server_type("worlddb", instructions=INSTRUCTIONS, version=version())

    def guarded(method: Callable[..., Any]) -> Callable[..., Any]:
        @wraps(method)
        def call(*args: Any, **kwargs: Any) -> Any:
            with lock:
                try:
                    return _result(method(*args, **kwargs))
                except WorldDBError as exc:
                    said = _advice(str(exc))
                    for where in {db.path, os.path.abspath(db.path)} - {":memory:"}:  # as stats: the name alone
                        said = said.replace(where, os.path.basename(where))
                    raise tool_error(f"{type(exc).__name__}: {said}") from None

        return call

    for name in TOOL_NAMES:
        method = getattr(tools, name)
        reads, destroys, repeatable = TOOL_EFFECTS[name]
        hints = ToolAnnotations.model_validate(  # the protocol's names: both SDK generations take them
            {"readOnlyHint": reads, "destructiveHint": destroys, "idempotentHint": repeatable, "openWorldHint": False}
        )
        server.add_tool(guarded(method), name=name, description=inspect.getdoc(method), annotations=hints)
    return server


LOOPBACK = ("127.0.0.1", "localhost", "::1")
HTTP_PATH = "/mcp"


def serve(db: WorldDB) -> None:
    """Answer MCP requests on stdin/stdout with ``db`` until the client leaves."""
    import sys

    server = build_server(db)
    stdin = sys.stdin
    sys.stdin = io.TextIOWrapper(io.BufferedReader(_WholeCharacters(stdin.buffer)), encoding="utf-8")
    try:
        server.run()
    finally:
        sys.stdin = stdin


# a JSON escape: \uXXXX (its hex kept) or any other, so an escaped backslash is never read as the start of one
_ESCAPE = re.compile(rb"\\(?:u([0-9a-fA-F]{4})|.)", re.DOTALL)


def _whole_characters(line: bytes) -> bytes:
    r"""``line`` with each lone surrogate escape (``\ud800`` not part of a pair) read as U+FFFD.

    The SDK's JSON parser refuses a request holding one and leaves it unanswered (the client waits for
    ever); it already reads bytes that are not UTF-8 as U+FFFD, and this does the same for the escapes.
    """
    if b"\\u" not in line:
        return line
    escapes = [(m.start(), m.end(), int(m[1], 16) if m[1] else 0) for m in _ESCAPE.finditer(line)]
    out, last, at = [], 0, 0
    while at < len(escapes):
        start, end, code = escapes[at]
        after = escapes[at + 1] if at + 1 < len(escapes) else (-1, -1, 0)
        if 0xD800 <= code <= 0xDBFF and after[0] == end and 0xDC00 <= after[2] <= 0xDFFF:
            at += 2  # a whole pair: one character
            continue
        if 0xD800 <= code <= 0xDFFF:
            out += [line[last:start], rb"\ufffd"]
            last = end
        at += 1
    return b"".join([*out, line[last:]])


class _WholeCharacters(io.RawIOBase):
    """Standard input's bytes a line at a time, lone surrogate escapes read as U+FFFD (``_whole_characters``)."""

    def __init__(self, source: IO[bytes]) -> None:
        self.source, self.left = source, b""

    def readable(self) -> bool:
        return True

    def readinto(self, into: Any) -> int:
        if not self.left:
            self.left = _whole_characters(self.source.readline())
        size = min(len(into), len(self.left))
        into[:size] = self.left[:size]
        self.left = self.left[size:]
        return size


def check_http(host: str, token: str | None) -> None:
    """Refuse an empty token, and a host beyond loopback without one (before any store is opened)."""
    if token is not None and not token.strip():
        raise InvalidInput("the token is empty; put a long random secret in the token file")
    if host not in LOOPBACK and token is None:
        raise InvalidInput(
            f"refusing to serve on {host}, which is not a loopback address, without a token: anyone who reaches "
            "it could read and change the store. Give --token-file FILE, or keep --host 127.0.0.1"
        )


def _bearer(app: Any, token: str) -> Any:
    """``app`` behind a bearer token: an HTTP request without ``Authorization: Bearer <token>`` gets 401.

    The scheme's name is matched in any case (``bearer``, ``BEARER``: RFC 7235), the token exactly.
    """
    import hmac

    expected = token.encode()

    async def guarded(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope.get("type") == "http":
            scheme, _, given = dict(scope.get("headers") or ()).get(b"authorization", b"").partition(b" ")
            right = hmac.compare_digest(given.strip(b" "), expected)  # the same time whatever the guess
            if not (right and scheme.lower() == b"bearer"):
                body = b'{"error": "missing or wrong bearer token"}'
                headers = [(b"content-type", b"application/json"), (b"www-authenticate", b"Bearer")]
                await send({"type": "http.response.start", "status": 401, "headers": headers})
                await send({"type": "http.response.body", "body": body})
                return
        await app(scope, receive, send)

    return guarded


def serve_http(db: WorldDB, host: str = "127.0.0.1", port: int = 8765, token: str | None = None) -> None:
    """Answer MCP requests over streamable HTTP at ``http://host:port/mcp`` until SIGINT or SIGTERM.

    Every client shares one server, so one store handle and one lock (``build_server``). With a
    ``token``, every request must carry ``Authorization: Bearer <token>`` (else 401, and nothing runs);
    without one, anyone who reaches the port reads and writes the store, so a host that is not loopback
    is refused. The SDK's DNS-rebinding check guards a loopback host. ``port`` 0 takes a free port; the
    address served is announced on stderr (stdout stays quiet, as it must for stdio) once the socket listens.
    """
    import signal
    import socket
    import sys

    import uvicorn  # the MCP SDK's own HTTP server

    server = build_server(db)
    try:
        app = server.streamable_http_app(host=host)
    except TypeError:  # mcp 1.x: the host lives in the server's settings
        server.settings.host = host
        app = server.streamable_http_app()
    if not 0 <= port <= 65535:
        raise InvalidInput(f"port must be 0 to 65535 (0 takes a free one), got {port}")
    check_http(host, token)
    if token is not None:
        app = _bearer(app, token.strip())
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(socket.getaddrinfo(host, port, family, socket.SOCK_STREAM)[0][4])
        sock.listen(128)
    except OSError as exc:
        sock.close()
        raise InvalidInput(f"cannot serve on {host}:{port}: {exc.strerror or exc}; pick another --port") from None
    bound = sock.getsockname()[1]
    shown = f"[{host}]" if ":" in host else host
    print(f"worlddb: serving {db.path} over MCP at http://{shown}:{bound}{HTTP_PATH}", file=sys.stderr, flush=True)
    config = uvicorn.Config(app, log_level="warning", access_log=False, timeout_graceful_shutdown=5)

    def leave(signum: int, frame: FrameType | None) -> None:
        raise SystemExit(0)  # uvicorn re-raises the signal it shut down on: end quietly, the store closed

    main = threading.current_thread() is threading.main_thread()  # only there may signals be handled
    previous = {sig: signal.signal(sig, leave) for sig in (signal.SIGINT, signal.SIGTERM)} if main else {}
    try:
        with sock:
            uvicorn.Server(config).run(sockets=[sock])
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
