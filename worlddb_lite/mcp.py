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

One family of tools, the WorldDB paper's ``memory_*`` names (apart from generic names another server
may use). Their list is read into every conversation of the agent, so it is kept small: short
descriptions, and schemas without pydantic's titles and nulls (``_lean``).
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
from .errors import InvalidInput, NotFound, WorldDBError
from .types import SPEAKER, TAGS, Hit, Node, plain, scope_record

INSTRUCTIONS = (
    "Long-term memory of one person, kept in one local SQLite file. `memory_write` what is worth keeping, "
    "`memory_add_turn` each turn as it is said, `memory_recall` (or `memory_context`) before answering, "
    "`memory_amend` what changed (the old version stays as history), `memory_retire` what stopped being "
    "true, `memory_purge` what the person wants erased for good."
)

# the tools' parameters, described for the model that calls them; the descriptions are short on purpose:
# the whole tool list is read into every conversation (the target is 8,000 characters: tests/test_mcp.py)
Text = Annotated[str, Field(description="verbatim, up to 500,000 characters")]
ScopeName = Annotated[str, Field(description="a person's name (ana), or agent:X, app:X, run:X")]
ScopeFilter = Annotated[str | list[str] | None, Field(description="a scope, or a list of them; default all")]
Ref = Annotated[str, Field(description="a memory's id (12 or more of its hex characters)")]
AsOf = Annotated[
    str | None, Field(description="as things stood then: ISO-8601 or words ('last week', 'in March 2024')")
]
Kind = Literal["note", "turn", "fact", "summary", "entity", "session"]
KindFilter = Annotated[Kind | None, Field(description="only this kind")]
TagFilter = Annotated[str | None, Field(description="only notes with this tag")]
Speaker = Annotated[str | None, Field(description="who says it (default: the scope's person)")]
Verbatim = Annotated[bool, Field(description="keep the text alone, learn no facts")]
ValidAt = Annotated[str | None, Field(description="true since (ISO-8601); default now")]
At = Annotated[str | None, Field(description="when (ISO-8601); default now")]

# a node's type as a kind (a note is what the API calls a Memory), and back
KIND_OF_TYPE = {"Memory": "note", "Turn": "turn", "Fact": "fact", "Summary": "summary", "Entity": "entity"}
TYPE_OF_KIND = {**{kind: type_ for type_, kind in KIND_OF_TYPE.items()}, "session": "Session"}
SAID = ["Memory", "Turn", "Fact", "Summary"]  # what memory_list lists unless asked for a kind: not worlds or names
SHORT_ID = 12  # hex characters of an id in what the tools return: unique in practice, and a prefix resolves


def _short(ids: Any) -> Any:
    return [i[:SHORT_ID] for i in ids] if isinstance(ids, (list, tuple)) else ids[:SHORT_ID]


def _compact(node: Node, turns: tuple[Node, ...] = ()) -> dict[str, Any]:
    """A node as a model reads it: id, text, kind, who said it, in which session, since when; empty fields left out.

    A turn's speaker is its name; a note's is in its props; a fact's is that of the turn it was learned from.
    """
    said = turns[0] if turns and node.type == "Fact" else node
    speaker = said.props.get(SPEAKER) or (said.name if said.type == "Turn" else None)
    out: dict[str, Any] = {
        "id": _short(node.id),
        "text": node.content if node.content is not None else node.name,
        "kind": KIND_OF_TYPE.get(node.type, node.type.lower()),
        "speaker": speaker,
        "session": said.props.get("session"),
        "date": node.valid_at,
        "until": node.invalid_at,
        "tags": node.props.get(TAGS),
        "retired": node.retired or None,
        "purged": node.purged or None,
        "superseded_by": _short(list(node.superseded_by)) or None,
        "contradicted_by": _short(list(node.contradicted_by)) or None,
    }
    return {key: value for key, value in out.items() if value is not None}


def _hit(hit: Hit) -> dict[str, Any]:
    why = ", ".join(f"{r.lane}#{r.rank}" + (f" via {r.via}" if r.via else "") for r in hit.why)
    return {**_compact(hit.node, hit.turns), "score": round(hit.score, 4), "why": why}


def _extractor(verbatim: bool) -> Any:
    """What reads a memory's text: the default write path's extractor, or none for the text alone."""
    return None if verbatim else DEFAULT_EXTRACTOR


def _one_target(id: str | None, scope: str | None, tag: str | None, done: str) -> str:  # noqa: A002
    """What a retire or a purge names: an id, a scope, or a scope's tag (the tag); refused unless exactly one."""
    if (id is None) == (scope is None) or (tag is not None and scope is None):
        raise InvalidInput(f"give id (one memory), or scope (all of it), or scope and tag; nothing was {done}")
    return id if id is not None else tag if tag is not None else str(scope)


def _type(kind: str | None) -> str | None:
    return None if kind is None else TYPE_OF_KIND[kind]


class MemoryTools:
    """The tools, each one facade call (or two) over an open store; results are JSON-ready."""

    def __init__(self, db: WorldDB) -> None:
        self.db = db

    def _moment(self, as_of: str | None) -> tuple[str | None, str | None]:
        """``as_of`` as the engine reads it, ISO-8601 or words, and what the words were read as (to echo)."""
        if as_of is None:
            return None, None
        return self.db.read_time(as_of)

    def memory_write(
        self,
        text: Text,
        scope: Annotated[
            str | list[str], Field(description=f"a scope, or up to {MAX_SCOPES} that all hold it")
        ] = DEFAULT_SCOPE,
        tags: Annotated[list[str] | None, Field(description="short labels to filter by")] = None,
        speaker: Speaker = None,
        valid_at: ValidAt = None,
        verbatim: Verbatim = False,
        new: Annotated[bool, Field(description="a second memory even if this note exists")] = False,
    ) -> dict[str, Any]:
        """Remember a note; its facts are learned ("I moved to Porto" replaces where the person lived).

        The same text again in the same scope returns the existing id (safe to retry).
        """
        extractor = _extractor(verbatim)
        found = self.db.write(
            text, scope=scope, valid_at=valid_at, speaker=speaker, extractor=extractor, tags=tags, new=new
        )
        return {"id": _short(found)}

    def memory_add_turn(
        self,
        text: Annotated[str, Field(description="what was said, verbatim")],
        scope: ScopeName = DEFAULT_SCOPE,
        speaker: Annotated[str | None, Field(description="who said it")] = None,
        session: Annotated[str | None, Field(description="default: the latest, new after 30 minutes")] = None,
        at: Annotated[str | None, Field(description="when said (ISO-8601), not before the session's last turn")] = None,
    ) -> dict[str, Any]:
        """Append one conversation turn as it is said."""
        return {"id": _short(self.db.add_turn(text, scope=scope, speaker=speaker, session=session, at=at))}

    def memory_recall(
        self,
        query: Annotated[str, Field(description="the question")],
        scope: ScopeFilter = None,
        k: Annotated[int, Field(description="hits, 1 to 1000")] = 10,
        kind: KindFilter = None,
        tag: TagFilter = None,
        during: Annotated[str | None, Field(description="only what is dated in this period, e.g. 'last week'")] = None,
        as_of: AsOf = None,
        min_confidence: Annotated[
            float | None,
            Field(description="no hits under this confidence (0 to 1)", strict=True),  # true or "0.5": refused
        ] = None,
        include_superseded: Annotated[bool, Field(description="also old versions")] = False,
        include_cold: Annotated[bool, Field(description="also the cold tier")] = False,
    ) -> dict[str, Any]:
        """Memories that answer a question, best first, each with why it came.

        ``confidence``: how likely the first hit answers; no hits: ``nothing_relevant``.
        """
        moment, read_as = self._moment(as_of)
        found = self.db.recall(
            query,
            scope=scope,
            k=k,
            as_of=moment,
            include_superseded=include_superseded,
            include_cold=include_cold,
            min_confidence=min_confidence,
            type=_type(kind),
            tag=tag,
            during=during,
        )
        answer: dict[str, Any] = {"confidence": round(found.confidence, 4), "hits": [_hit(h) for h in found.hits]}
        if as_of is not None:
            answer["as_of"] = read_as or found.as_of
        if found.during is not None:
            answer["during"] = found.during[2]
        if not found.hits:
            answer["nothing_relevant"] = True
            answer["withheld"] = found.withheld
        return answer

    def memory_context(
        self,
        query: Annotated[str, Field(description="the question")],
        scope: ScopeFilter = None,
        budget: Annotated[int, Field(description="at most this many tokens")] = DEFAULT_BUDGET,
        as_of: AsOf = None,
    ) -> str:
        """What is known about a question as dated lines for a prompt, within a token budget."""
        return self.db.context(query, scope=scope, budget=budget, as_of=self._moment(as_of)[0]).text

    def memory_list(
        self,
        scope: ScopeName,
        kind: KindFilter = None,
        tag: TagFilter = None,
        oldest_first: Annotated[bool, Field(description="oldest first (default newest)")] = False,
        include_retired: Annotated[bool, Field(description="also retired and old versions")] = False,
        limit: Annotated[int, Field(description="per page, 1 to 1000")] = 20,
        cursor: Annotated[str | None, Field(description="from the previous page")] = None,
    ) -> dict[str, Any]:
        """A scope's notes, turns, facts and summaries (or one kind), newest first, a page at a time."""
        page = self.db.list_memories(
            scope,
            type=_type(kind) or SAID,
            tag=tag,
            newest_first=not oldest_first,
            include_retired=include_retired,
            limit=limit,
            cursor=cursor,
        )
        return {"memories": [_compact(node) for node in page.nodes], "cursor": page.cursor}

    def memory_read(  # noqa: A002 (the tool's word)
        self,
        id: Ref,
        as_of: AsOf = None,
        history: Annotated[bool, Field(description="every version, oldest first")] = False,
    ) -> dict[str, Any]:
        """One memory by id, any version (with ``as_of``: only if true then)."""
        if history:
            return {"versions": [_compact(node) for node in self.db.history(id)]}
        node = self.db.read(id, as_of=self._moment(as_of)[0])
        extra = {"name": node.name, "props": dict(node.props) or None, "created_at": node.created_at}
        return {**_compact(node), "id": node.id, **{key: value for key, value in extra.items() if value is not None}}

    def memory_amend(  # noqa: A002
        self,
        id: Ref,
        text: Text,
        valid_at: ValidAt = None,
        speaker: Annotated[str | None, Field(description="who says it (default: as before)")] = None,
        verbatim: Verbatim = False,
    ) -> dict[str, Any]:
        """A new version of a memory that changed; the old one stays, closed, as history."""
        old = self.db.read(id).id
        new = self.db.amend(old, text, valid_at=valid_at, speaker=speaker, extractor=_extractor(verbatim))
        return {"id": _short(new), "supersedes": _short(old)}

    def memory_retire(  # noqa: A002
        self,
        id: Annotated[str | None, Field(description="one memory's id")] = None,
        scope: Annotated[str | None, Field(description="or every memory of a scope")] = None,
        tag: Annotated[str | None, Field(description="with scope: only its notes with this tag")] = None,
        at: At = None,
    ) -> dict[str, Any]:
        """Mark what stopped being true (it stays as history): one memory, a scope's, or a scope's tagged notes."""
        _one_target(id, scope, tag, "retired")
        if id is not None:
            node = self.db.read(id)
            self.db.retire(node.id, at=at)
            return {"retired": [_short(node.id)]}
        assert scope is not None
        return {"retired": _short(self.db.retire_all(scope, at=at, tag=tag))}

    def memory_purge(  # noqa: A002
        self,
        confirm: Annotated[str, Field(description="the id, scope or tag again: it cannot be undone")],
        id: Annotated[str | None, Field(description="a memory, all its versions and facts")] = None,
        scope: Annotated[str | None, Field(description="or a whole scope")] = None,
        tag: Annotated[str | None, Field(description="with scope: only its notes with this tag")] = None,
    ) -> dict[str, Any]:
        """Erase for good, only hashes stay: a memory with all its versions, a scope, or a scope's tagged notes.

        To keep history use ``memory_retire``.
        """
        named = _one_target(id, scope, tag, "purged")
        if confirm != named:
            raise InvalidInput(f"confirm must repeat {named!r} exactly, got {confirm!r}; nothing was purged")
        if id is not None:
            report = self.db.purge(id)
        elif tag is not None:
            assert scope is not None
            report = self.db.purge_tagged(scope, tag)
        else:
            assert scope is not None
            report = self.db.purge_scope(scope)
        return {"erased": len(report["purged"]), "checkpoint": plain(report["checkpoint"])}

    def memory_list_scopes(
        self, kind: Annotated[Literal["user", "agent", "app", "run"] | None, Field(description="default all")] = None
    ) -> dict[str, Any]:
        """Every scope, oldest first, with the name to pass as ``scope``."""
        return {"scopes": [scope_record(n) for n in self.db.scopes(kind=kind)]}

    def memory_links(
        self,
        about: Annotated[str, Field(description="a memory's id, or a name (a person, a place, a thing)")],
        as_of: AsOf = None,
    ) -> dict[str, Any]:
        """Who and what is linked to a memory or a named person or thing: each link's type, way and far end."""
        moment = self._moment(as_of)[0]
        seeds = self._named(about)
        links = []
        for seed in seeds:
            found = self.db.neighbours(seed, direction="both", as_of=moment)
            ends = {node.id: node for node in found.nodes}
            for edge in found.edges:
                far = edge.dst if edge.src == seed else edge.src
                if far in ends:
                    link = {"link": edge.type, "way": "out" if edge.src == seed else "in", **_compact(ends[far])}
                    links.append(link)
        return {"about": [_short(seed) for seed in seeds], "links": links}

    def _named(self, about: str) -> list[str]:
        """The nodes ``about`` names: a memory by id (prefix), or the entities called that name."""
        text = about.strip()
        if len(text) >= 8 and all(c in "0123456789abcdefABCDEF" for c in text):
            try:
                return [self.db.read(text).id]
            except NotFound:
                pass
        found = list(self.db.lookup_alias(text))
        if not found:
            raise NotFound(f"no memory with id {text!r} and nothing called {text!r}; try memory_recall")
        return found

    def memory_stats(
        self, verify: Annotated[bool, Field(description="also recompute every hash (slow)")] = False
    ) -> dict[str, Any]:
        """Counts, sizes and the Merkle root; with ``verify``, every hash and invariant checked."""
        found = dict(plain(self.db.stats()))
        found["path"] = os.path.basename(found["path"])  # the folders name the person and their machine
        if verify:
            report = self.db.verify()
            found["verify"] = {"ok": report.ok, "violations": plain(report.violations)}
        return found


TOOL_NAMES = (
    "memory_write",
    "memory_add_turn",
    "memory_recall",
    "memory_context",
    "memory_list",
    "memory_read",
    "memory_amend",
    "memory_retire",
    "memory_purge",
    "memory_list_scopes",
    "memory_links",
    "memory_stats",
)
# What each tool does to the store, for a client to show or ask before it runs (MCP tool annotations):
# (reads only, destroys what was there, a repeat with the same arguments changes nothing more). A recall
# notes its hits in the access log and changes no memory: read-only. A write repeated returns the same
# note (not for turns: each is said once). Nothing reaches outside the file.
TOOL_EFFECTS: dict[str, tuple[bool, bool, bool]] = {
    "memory_write": (False, False, True),
    "memory_add_turn": (False, False, False),
    "memory_recall": (True, False, True),
    "memory_context": (True, False, True),
    "memory_list": (True, False, True),
    "memory_read": (True, False, True),
    "memory_amend": (False, False, False),
    "memory_retire": (False, True, True),
    "memory_purge": (False, True, True),
    "memory_list_scopes": (True, False, True),
    "memory_links": (True, False, True),
    "memory_stats": (True, False, True),
}
# an error's next step (errors.Hint: a WorldDB method) as the tool that takes it, with its arguments
TOOL_FOR_ACTION = {
    "list_memories": "`memory_list`",
    "search": "`memory_recall`",
    "scopes": "`memory_list_scopes`",
    "verify": "`memory_stats` with verify",
}


def version() -> str:
    """The installed package's version (the source tree's when it is not installed)."""
    try:
        return metadata.version("worlddb_lite")
    except metadata.PackageNotFoundError:
        return __version__


def advice(exc: WorldDBError) -> str:
    """The error's message with its next step named as a tool, or in words where no tool takes it."""
    if exc.hint is None:
        return exc.message
    tool = TOOL_FOR_ACTION.get(exc.hint.action)
    return f"{exc.message}; call {tool}" if tool else str(exc)


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


def _lean(schema: dict[str, Any]) -> dict[str, Any]:
    """A tool's JSON schema as a model needs it: no titles, and an optional value's type without its null.

    Leaving a parameter out is how a tool is told "none"; the server still takes an explicit null.
    """
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key == "title" or (key == "default" and value is None):
            continue
        if key == "properties" and isinstance(value, dict):
            value = {name: _lean(part) for name, part in value.items()}
        elif key == "anyOf" and isinstance(value, list):
            kept = [_lean(part) for part in value if part != {"type": "null"}]
            if len(kept) == 1:
                out.update(kept[0])
                continue
            value = kept
        elif isinstance(value, dict):
            value = _lean(value)
        out[key] = value
    return out


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

    async def list_tools(self: Any, *args: Any, **kwargs: Any) -> Any:
        listed = await parent.list_tools(self, *args, **kwargs)
        for tool in listed:
            for field in ("inputSchema", "input_schema"):
                if isinstance(getattr(tool, field, None), dict):
                    setattr(tool, field, _lean(getattr(tool, field)))
            for field in ("outputSchema", "output_schema"):  # "an object": says nothing the result does not
                if hasattr(tool, field):
                    setattr(tool, field, None)
        return listed

    server_type = type("WorldDBServer", (server_class,), {"call_tool": call_tool, "list_tools": list_tools})
    server = server_type("worlddb", instructions=INSTRUCTIONS, version=version())

    def guarded(method: Callable[..., Any]) -> Callable[..., Any]:
        @wraps(method)
        def call(*args: Any, **kwargs: Any) -> Any:
            with lock:
                try:
                    return _result(method(*args, **kwargs))
                except WorldDBError as exc:
                    said = advice(exc)
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
