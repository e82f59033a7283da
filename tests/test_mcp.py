"""mcp.py: the MCP tools over a store, through the SDK's own dispatcher and over real stdio."""

from __future__ import annotations

import asyncio
import json
import re
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import worlddb_lite
from worlddb_lite import WorldDB
from worlddb_lite.mcp import TOOL_EFFECTS, TOOL_NAMES, MemoryTools, _sdk, build_server, version

from .conftest import FakeClock, FakeEmbedder, bench_module, table_digest

_, ToolError = _sdk()
try:  # mcp 2.x tells a crash inside a tool (UnexpectedToolError) from a deliberate ToolError
    from mcp.server.mcpserver.exceptions import UnexpectedToolError
except ImportError:  # mcp 1.x wraps every failure in ToolError alike
    UnexpectedToolError = ()  # type: ignore[assignment,misc]


def call(server: Any, name: str, arguments: dict[str, Any]) -> Any:
    """One tool call through the SDK's dispatcher (argument validation included); the JSON it returns."""
    result = asyncio.run(server.call_tool(name, arguments))
    content = result.content if hasattr(result, "content") else result
    if isinstance(content, tuple):  # mcp 1.x: (content, structured)
        content = content[0]
    text = content[0].text
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


@pytest.fixture
def served(tmp_path: Path) -> tuple[WorldDB, Any]:
    db = WorldDB(tmp_path / "mcp.db", embedder=FakeEmbedder(), clock=FakeClock())
    yield db, build_server(db)
    db.close()


def test_every_tool_is_listed_with_its_arguments(served: tuple[WorldDB, Any]) -> None:
    _, server = served
    tools = {t.name: t for t in asyncio.run(server.list_tools())}
    assert set(tools) == set(TOOL_NAMES) and all(name.startswith("memory_") for name in tools)
    schema = getattr(tools["memory_recall"], "input_schema", None) or tools["memory_recall"].inputSchema
    assert schema["required"] == ["query"] and {"scope", "k", "as_of", "kind", "tag", "during"} <= set(
        schema["properties"]
    )
    assert all(t.description for t in tools.values())


def test_the_tool_list_stays_small(served: tuple[WorldDB, Any]) -> None:
    """Issue 38: 20 tools took 15,701 characters of every conversation; the target is 8,000 (spaced JSON too)."""
    _, server = served
    assert bench_module("mcp_tools").tool_list(server, (", ", ": ")) <= 8000  # the bench's own measure
    tools = asyncio.run(server.list_tools())
    dumped = json.dumps([t.model_dump(by_alias=True, exclude_none=True) for t in tools])
    assert '"title"' not in dumped and '{"type": "null"}' not in dumped  # pydantic's filler, taken out


def test_write_recall_amend_retire_and_history(served: tuple[WorldDB, Any]) -> None:
    db, server = served
    first = call(server, "memory_write", {"text": "Ana lives in Austin", "scope": "ana", "valid_at": "2024-01-01"})[
        "id"
    ]
    assert len(first) == 12 and db.read(first).content == "Ana lives in Austin"
    call(server, "memory_write", {"text": "Bo lives in Lisbon", "scope": "bo", "valid_at": "2024-01-01"})
    hits = call(server, "memory_recall", {"query": "where does Ana live", "scope": "ana"})["hits"]
    assert sorted(h["text"] for h in hits) == ["Ana lives in Austin", "ana lives in: Austin"]  # scope bo stays out
    assert {"id", "text", "kind", "date", "score", "why"} <= set(hits[0]) and isinstance(hits[0]["why"], str)
    second = call(server, "memory_amend", {"id": first, "text": "Ana lives in Denver", "valid_at": "2024-06-01"})["id"]
    assert [n["text"] for n in call(server, "memory_read", {"id": second, "history": True})["versions"]] == [
        "Ana lives in Austin",
        "Ana lives in Denver",
    ]
    assert call(server, "memory_read", {"id": first, "as_of": "2024-03-01"})["text"] == "Ana lives in Austin"
    assert "Denver" in call(server, "memory_context", {"query": "Ana's city", "scope": "ana", "budget": 200})
    call(server, "memory_retire", {"id": second, "at": "2024-09-01"})
    assert db.read(second).invalid_at is not None
    stats = call(server, "memory_stats", {"verify": True})
    assert stats["verify"]["ok"] is True and stats["nodes"] == db.stats()["nodes"]


def test_write_learns_the_notes_facts_so_the_current_one_answers(served: tuple[WorldDB, Any]) -> None:
    _, server = served
    call(server, "memory_write", {"text": "I live in Lisbon", "scope": "ana", "valid_at": "2023-03-01"})
    call(server, "memory_write", {"text": "I moved to Porto", "scope": "ana", "valid_at": "2024-05-01"})
    call(server, "memory_write", {"text": "I live in Faro", "scope": "bo", "verbatim": True})
    hits = call(server, "memory_recall", {"query": "where do I live?", "scope": "ana", "k": 1})["hits"]
    assert [h["text"] for h in hits] in (["ana lives in: Porto"], ["I moved to Porto"])  # the fact, or its note
    assert (
        call(server, "memory_recall", {"query": "where do I live?", "scope": "bo", "k": 5})["hits"][0]["kind"] == "note"
    )


def test_a_retried_write_is_the_same_memory_and_new_makes_another(served: tuple[WorldDB, Any]) -> None:
    db, server = served
    first = call(server, "memory_write", {"text": "the spare key is under the blue pot", "scope": "ana"})["id"]
    assert call(server, "memory_write", {"text": "the spare key is under the blue pot", "scope": "ana"})["id"] == first
    again = call(server, "memory_write", {"text": "the spare key is under the blue pot", "scope": "ana", "new": True})
    assert again["id"] != first


def test_tags_filter_recall_and_listing_and_retire_and_purge_by_tag(served: tuple[WorldDB, Any]) -> None:
    db, server = served
    key = call(
        server, "memory_write", {"text": "the spare key is under the blue pot", "scope": "ana", "tags": ["Home"]}
    )
    doc = call(server, "memory_write", {"text": "the dentist is on Friday at nine", "scope": "ana", "tags": ["health"]})
    call(server, "memory_add_turn", {"text": "the shed key hangs on the hook", "scope": "ana", "speaker": "ana"})
    hits = call(server, "memory_recall", {"query": "where is the key", "scope": "ana", "tag": "home"})["hits"]
    assert [h["id"] for h in hits] == [key["id"]] and hits[0]["tags"] == ["home"]
    turns = call(server, "memory_recall", {"query": "where is the key", "scope": "ana", "kind": "turn"})["hits"]
    assert turns and {h["kind"] for h in turns} == {"turn"}
    listed = call(server, "memory_list", {"scope": "ana", "kind": "note"})["memories"]
    assert [m["id"] for m in listed] == [doc["id"], key["id"]]  # newest first
    said = call(server, "memory_list", {"scope": "ana"})["memories"]  # what was said and learned, no worlds
    assert {m["kind"] for m in said} <= {"note", "turn", "fact", "summary"} and len(said) >= 3
    oldest = call(server, "memory_list", {"scope": "ana", "kind": "note", "oldest_first": True})["memories"]
    assert [m["id"] for m in oldest] == [key["id"], doc["id"]]
    assert call(server, "memory_list", {"scope": "ana", "tag": "health"})["memories"][0]["id"] == doc["id"]
    assert call(server, "memory_retire", {"scope": "ana", "tag": "health"}) == {"retired": [doc["id"]]}
    with pytest.raises(ToolError, match="confirm must repeat 'health'"):
        asyncio.run(server.call_tool("memory_purge", {"scope": "ana", "tag": "health", "confirm": "ana"}))
    assert call(server, "memory_purge", {"scope": "ana", "tag": "health", "confirm": "health"})["erased"] >= 1
    assert db.read(doc["id"]).purged and not db.read(key["id"]).purged


def test_times_in_words_are_read_and_said_back(served: tuple[WorldDB, Any]) -> None:
    db, server = served
    call(server, "memory_write", {"text": "Ana lives in Austin", "scope": "ana", "valid_at": "2024-01-01"})
    found = call(server, "memory_recall", {"query": "where does Ana live", "scope": "ana", "as_of": "in March 2024"})
    assert "2024-03-01 to 2024-03-31" in found["as_of"] and found["hits"]
    old = call(server, "memory_recall", {"query": "where does Ana live", "scope": "ana", "as_of": "2023"})
    assert old["hits"] == [] and old["nothing_relevant"] is True
    dated = call(server, "memory_recall", {"query": "where does Ana live", "scope": "ana", "during": "January 2024"})
    assert "2024-01-01 to 2024-01-31" in dated["during"] and dated["hits"]
    for arguments in ({"as_of": "the other day"}, {"during": "May and June 2024"}):
        with pytest.raises(ToolError, match="InvalidTime.*understood"):
            asyncio.run(server.call_tool("memory_recall", {"query": "Ana", **arguments}))


def test_links_say_who_and_what_a_memory_or_a_person_is_linked_to(served: tuple[WorldDB, Any]) -> None:
    _, server = served
    note = call(server, "memory_write", {"text": "My sister Emma lives in Oslo", "scope": "ana"})["id"]
    about = call(server, "memory_links", {"about": note})
    assert about["about"] == [note] and about["links"]
    assert all({"link", "way", "id", "kind"} <= set(link) for link in about["links"])
    emma = call(server, "memory_links", {"about": "Emma"})
    assert emma["links"] and any(link["kind"] in ("fact", "note") for link in emma["links"])
    with pytest.raises(ToolError, match="NotFound: no memory with id 'Zebedee'"):
        asyncio.run(server.call_tool("memory_links", {"about": "Zebedee"}))


def test_purge_through_mcp_erases_the_content(served: tuple[WorldDB, Any]) -> None:
    db, server = served
    secret = call(server, "memory_write", {"text": "my bank PIN is 4711", "scope": "ana"})["id"]
    report = call(server, "memory_purge", {"id": secret, "confirm": secret})
    assert report["erased"] >= 1
    assert db.read(secret).content is None and db.search("PIN") == []
    assert call(server, "memory_stats", {"verify": True})["verify"]["ok"] is True


def test_stats_names_the_file_not_the_folders_it_lies_in(served: tuple[WorldDB, Any]) -> None:
    """Issue 35: the absolute path went to the client (the folders name the person and the machine)."""
    db, server = served
    found = call(server, "memory_stats", {})
    assert found["path"] == "mcp.db" and str(Path(db.path).parent) not in json.dumps(found)
    with pytest.raises(ToolError, match="mcp.db") as refused:  # nor does a refusal that names the store
        asyncio.run(server.call_tool("memory_list", {"scope": "nobody"}))
    assert str(Path(db.path).parent) not in str(refused.value)


def test_purge_needs_its_target_repeated_and_says_every_version_goes(served: tuple[WorldDB, Any]) -> None:
    """Issue 35: purging an old version's id erased every version, with no confirmation asked."""
    db, server = served
    old = call(server, "memory_write", {"text": "Ana lives in Austin", "scope": "ana"})["id"]
    call(server, "memory_amend", {"id": old, "text": "Ana lives in Denver"})
    before = table_digest(db)
    for arguments, reason in [
        ({"id": old}, "InvalidInput: memory_purge: confirm is required"),
        ({"id": old, "confirm": "yes"}, f"confirm must repeat '{old}' exactly"),
        ({"id": old, "confirm": True}, "confirm: input should be a valid string"),
        ({"confirm": "x"}, "give id (one memory), or scope"),
        ({"id": old, "scope": "ana", "confirm": old}, "give id (one memory), or scope"),
        ({"id": old, "tag": "x", "confirm": old}, "give id (one memory), or scope"),
    ]:
        with pytest.raises(ToolError, match=re.escape(reason)) as info:
            asyncio.run(server.call_tool("memory_purge", arguments))
        assert "\n" not in str(info.value) and "pydantic" not in str(info.value), str(info.value)
        assert table_digest(db) == before, arguments
    tools = {t.name: t for t in asyncio.run(server.list_tools())}
    assert "all its versions" in tools["memory_purge"].description
    assert (
        "confirm"
        in (getattr(tools["memory_purge"], "input_schema", None) or tools["memory_purge"].inputSchema)["required"]
    )
    assert call(server, "memory_purge", {"id": old, "confirm": old})["erased"] >= 2


@pytest.mark.parametrize(
    ("name", "arguments", "said"),
    [
        ("memory_recall", {}, "InvalidInput: memory_recall: query is required (the question)"),
        (
            "memory_recall",
            {"query": "x", "k": "many"},
            "InvalidInput: memory_recall: k: input should be a valid integer",
        ),
        ("memory_write", {"text": ["a\nb"]}, "InvalidInput: memory_write: text: input should be a valid string"),
        ("memory_recall", {"query": "x", "kind": "robot"}, "InvalidInput: memory_recall: kind: input should be 'note'"),
    ],
)
def test_an_argument_the_sdk_refuses_is_one_clear_line(
    served: tuple[WorldDB, Any], name: str, arguments: dict[str, Any], said: str
) -> None:
    """Issue 35: pydantic's dump came back: several lines, the arguments model's name and a URL."""
    _, server = served
    with pytest.raises(ToolError) as info:
        asyncio.run(server.call_tool(name, arguments))
    text = str(info.value)
    assert text.startswith(said) and "\n" not in text and "http" not in text and "Arguments" not in text, text


def test_the_tools_work_without_the_sdk(served: tuple[WorldDB, Any]) -> None:
    db, _ = served
    tools = MemoryTools(db)
    new = tools.memory_write("plain call", scope="s")["id"]
    assert tools.memory_read(new)["text"] == "plain call"


def test_every_parameter_is_described_and_results_are_compact(served: tuple[WorldDB, Any]) -> None:
    _, server = served
    for tool in asyncio.run(server.list_tools()):
        schema = getattr(tool, "input_schema", None) or tool.inputSchema
        for name, spec in schema.get("properties", {}).items():
            assert spec.get("description"), (tool.name, name)
        assert not tool.description.startswith(" ") and "\n        " not in tool.description, tool.name
    recall = {t.name: t for t in asyncio.run(server.list_tools())}["memory_recall"]
    described = (getattr(recall, "input_schema", None) or recall.inputSchema)["properties"]
    assert "ISO-8601" in described["as_of"]["description"] and "last week" in described["as_of"]["description"]
    result = asyncio.run(server.call_tool("memory_write", {"text": "compact, please", "scope": "ana"}))
    text = result.content[0].text
    assert "\n" not in text and json.loads(text) == result.structured_content  # one compact JSON, no indent


def test_the_tools_round_trip(served: tuple[WorldDB, Any]) -> None:
    db, server = served
    written = call(
        server, "memory_write", {"text": "I live in Lisbon", "scope": ["ana", "bo", "ana"], "valid_at": "2024-01-01"}
    )
    assert db.read(written["id"]).parent == db.scope("ana")  # one memory both scopes hold, ana's
    ids = {"ana": written["id"]}
    assert [h["id"] for h in call(server, "memory_recall", {"query": "Lisbon", "scope": "bo"})["hits"]] == [ids["ana"]]
    call(server, "memory_write", {"text": "keep answers short", "scope": "agent:helper"})
    agents = call(server, "memory_list_scopes", {"kind": "agent"})["scopes"]
    assert [(s["name"], s["kind"]) for s in agents] == [("agent:helper", "agent")]
    assert call(server, "memory_purge", {"scope": "agent:helper", "confirm": "agent:helper"})["erased"] >= 1
    db.add_turn("My sister Emma lives in Oslo", scope="ana", speaker="ana", at="2024-03-01")
    hits = call(server, "memory_recall", {"query": "where does Emma live", "scope": "ana", "k": 2})["hits"]
    turn = next(h for h in hits if h["kind"] == "turn")
    assert turn["speaker"] == "ana" and turn["session"] and turn["date"].startswith("2024-03-01") and turn["why"]
    assert [s["name"] for s in call(server, "memory_list_scopes", {})["scopes"]] == ["ana", "bo"]
    first = call(server, "memory_list", {"scope": "ana", "limit": 2})
    rest = call(server, "memory_list", {"scope": "ana", "limit": 1000, "cursor": first["cursor"]})
    every = call(server, "memory_list", {"scope": "ana", "limit": 1000})
    assert [m["id"] for m in first["memories"] + rest["memories"]] == [m["id"] for m in every["memories"]]
    assert rest["cursor"] is None
    assert call(server, "memory_read", {"id": ids["ana"][:8]})["text"] == "I live in Lisbon"
    amended = call(server, "memory_amend", {"id": ids["ana"][:10], "text": "I live in Porto", "valid_at": "2024-06-01"})
    assert amended["supersedes"] == ids["ana"]
    old = call(server, "memory_read", {"id": ids["ana"]})
    assert old["text"] == "I live in Lisbon" and old["superseded_by"] == [amended["id"]]  # the old one stays
    assert call(server, "memory_retire", {"id": amended["id"], "at": "2024-09-01"}) == {"retired": [amended["id"]]}
    assert db.read(amended["id"]).invalid_at == "2024-09-01T00:00:00.000000Z"
    listed = call(server, "memory_list", {"scope": "ana", "kind": "note", "include_retired": True})["memories"]
    assert {m["text"] for m in listed} == {"I live in Lisbon", "I live in Porto"}
    assert call(server, "memory_retire", {"scope": "ana"})["retired"]
    assert call(server, "memory_list", {"scope": "ana", "kind": "turn"})["memories"] == []
    purged = call(server, "memory_purge", {"scope": "bo", "confirm": "bo"})
    assert purged["erased"] >= 1 and [s["name"] for s in call(server, "memory_list_scopes", {})["scopes"]] == ["ana"]
    assert db.search("Lisbon", scope="ana") and call(server, "memory_stats", {"verify": True})["verify"]["ok"] is True


def test_the_tools_refuse_bad_input_with_a_tool_error_and_change_nothing(served: tuple[WorldDB, Any]) -> None:
    db, server = served
    known = call(server, "memory_write", {"text": "kept", "scope": "ana"})["id"]
    call(server, "memory_write", {"text": "other", "scope": "bo"})
    before = table_digest(db)
    for name, arguments, reason in [
        ("memory_write", {"text": "x", "scope": []}, "1 to 100 scopes"),
        ("memory_write", {"text": "x", "scope": ["ana", ""]}, "InvalidInput"),  # all or none: ana gets nothing
        ("memory_write", {"text": "", "scope": "ana"}, "InvalidInput"),
        ("memory_write", {"text": "x", "valid_at": "soon"}, "InvalidTime"),
        ("memory_write", {"text": "x", "tags": ["a,b"]}, "is not a tag"),
        ("memory_write", {"text": "x", "tags": "work"}, "tags: input should be a valid list"),
        ("memory_write", {"text": "x", "tags": ["x" * 41]}, "1 to 40 characters"),
        ("memory_recall", {"query": "kept", "scope": "nobody"}, "NotFound"),
        ("memory_recall", {"query": "kept", "k": 0}, "k"),
        ("memory_recall", {"query": "kept", "as_of": "the other day"}, "InvalidTime"),
        ("memory_recall", {"query": "kept", "tag": ""}, "is not a tag"),
        ("memory_list", {"scope": "nobody"}, "memory_list_scopes"),
        ("memory_list", {"scope": "ana", "cursor": "page-2"}, "not a cursor"),
        ("memory_list", {"scope": "ana", "limit": 5000}, "limit"),
        ("memory_list", {"scope": "ana", "kind": "Memory"}, "kind: input should be"),
        ("memory_read", {"id": "1234567"}, "too short"),
        ("memory_read", {"id": "zz"}, "InvalidId"),
        ("memory_read", {"id": "0" * 12}, "memory_list"),  # over MCP the advice names tools, not commands
        ("memory_read", {}, "id"),
        ("memory_amend", {"id": "0" * 64, "text": "x"}, "NotFound"),
        ("memory_retire", {"id": known, "at": "1999-01-01"}, "before it starts"),
        ("memory_retire", {"scope": "nobody"}, "NotFound"),
        ("memory_retire", {"tag": "x"}, "give id"),
        ("memory_purge", {"scope": "ana"}, "confirm"),
        ("memory_purge", {"scope": "ana", "confirm": "ANA"}, "repeat 'ana'"),
        ("memory_purge", {"scope": "nobody", "confirm": "nobody"}, "NotFound"),
        ("memory_purge", {"scope": "nobody", "tag": "x", "confirm": "x"}, "NotFound"),
        ("memory_list", {"scope": "ana", "limt": 5}, "takes no argument 'limt'"),
        ("memory_list_scopes", {"kinds": "user"}, "takes no argument"),
        ("memory_list_scopes", {"kind": "robot"}, "kind"),
        ("memory_write", {"text": "x", "scope": "run:"}, "names a kind but no scope"),
        ("memory_recall", {"query": "kept", "scope": ["ana", "agent:nobody"]}, "NotFound"),
        ("memory_write", {"text": "x", "scopes": ["a"]}, "takes no argument"),
        ("remember", {"text": "x"}, "Unknown tool|unknown tool|remember"),  # the short family is gone
    ]:
        with pytest.raises(ToolError, match=reason) as info:
            asyncio.run(server.call_tool(name, arguments))
        assert not isinstance(info.value, UnexpectedToolError), (name, arguments, info.value.__cause__)
        assert "worlddb " not in str(info.value), (name, str(info.value))  # no CLI command over MCP
        assert table_digest(db) == before, (name, arguments)


HOSTILE_TEXT = st.one_of(
    st.text(max_size=40),
    st.sampled_from(
        [
            '"unbalanced',
            "a AND (b OR",
            "NEAR(x y)",
            "*",
            "col:val",
            "'; drop table node; --",
            "\x00",
            "\ud800",
            "0" * 64,
            "x" * 5000,
            "日本語",
            "2024-13-45",
            "-1",
            "",
        ]
    ),
)
HOSTILE_VALUE = st.one_of(
    HOSTILE_TEXT,
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.lists(st.integers(), max_size=3),
    st.dictionaries(st.text(max_size=5), st.integers(), max_size=2),
)
ARGUMENT_NAMES = (
    "text",
    "scope",
    "valid_at",
    "query",
    "k",
    "as_of",
    "include_superseded",
    "budget",
    "id",
    "at",
    "confirm",
    "cursor",
    "limit",
    "kind",
    "tag",
    "tags",
    "during",
    "history",
    "new",
    "about",
    "include_retired",
    "unknown",
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    name=st.sampled_from(TOOL_NAMES),
    arguments=st.dictionaries(st.sampled_from(ARGUMENT_NAMES), HOSTILE_VALUE, max_size=4),
)
def test_hostile_tool_arguments_give_tool_errors_and_leave_the_store_unchanged(
    served: tuple[WorldDB, Any], name: str, arguments: dict[str, Any]
) -> None:
    db, server = served
    if not db.stats()["nodes"] > 1:
        db.write("Ana lives in Austin", scope="ana", valid_at="2024-01-01")
    before = table_digest(db)
    try:
        asyncio.run(server.call_tool(name, arguments))
    except ToolError as exc:
        assert not isinstance(exc, UnexpectedToolError), (name, arguments, exc.__cause__)
        assert table_digest(db) == before, (name, arguments)
    assert db.verify().ok


def test_the_server_answers_over_stdio(tmp_path: Path) -> None:
    """The real thing: `worlddb mcp DB` in a child process, spoken to by the SDK's stdio client."""
    from mcp import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    path = str(tmp_path / "stdio.db")
    params = StdioServerParameters(
        command=sys.executable, args=["-c", "from worlddb_lite.cli import main; main()", "mcp", path]
    )

    async def talk() -> tuple[list[str], str, bool]:
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            hello = await session.initialize()
            info = getattr(hello, "server_info", None) or hello.serverInfo
            assert info.version == version() == worlddb_lite.__version__
            listed = (await session.list_tools()).tools
            names = [t.name for t in listed]
            wire = {t.name: t.annotations.model_dump(by_alias=True) for t in listed}  # as the client read them
            assert wire["memory_purge"]["destructiveHint"] and not wire["memory_purge"]["readOnlyHint"]
            assert wire["memory_recall"]["readOnlyHint"] and wire["memory_write"]["openWorldHint"] is False
            await session.call_tool("memory_write", {"text": "the spare key is under the blue pot", "scope": "home"})
            found = await session.call_tool("memory_recall", {"query": "where is the spare key", "scope": "home"})
            written = await session.call_tool("memory_write", {"text": "the bike lock code is 2580", "scope": "home"})
            recalled = await session.call_tool("memory_recall", {"query": "bike lock code", "scope": "home", "k": 1})
            assert json.loads(recalled.content[0].text)["hits"][0]["id"] == json.loads(written.content[0].text)["id"]
            refused = await session.call_tool("memory_read", {"id": "nope"})
            return names, found.content[0].text, bool(getattr(refused, "is_error", getattr(refused, "isError", False)))

    names, found, refused = asyncio.run(talk())
    assert set(names) == set(TOOL_NAMES)
    assert "blue pot" in found
    assert refused
    with WorldDB(path) as db:  # the child closed the store cleanly; the memory is on disk
        assert db.verify().ok and db.stats()["nodes"] > 1


def test_every_tool_says_what_it_does_to_the_store(served: tuple[WorldDB, Any]) -> None:
    """Annotations: a client can mark what only reads, what destroys, and ask before a destructive call."""
    _, server = served
    told = {t.name: t.annotations for t in asyncio.run(server.list_tools())}
    assert set(told) == set(TOOL_NAMES) == set(TOOL_EFFECTS)
    hints = {name: (a.model_dump(by_alias=True) if a else {}) for name, a in told.items()}
    destroys = {name for name, h in hints.items() if h.get("destructiveHint")}
    reads = {name for name, h in hints.items() if h.get("readOnlyHint")}
    assert destroys == {"memory_retire", "memory_purge"}
    assert {"memory_recall", "memory_context", "memory_list", "memory_read", "memory_links", "memory_stats"} <= reads
    assert not reads & {"memory_write", "memory_add_turn", "memory_amend"} and not reads & destroys
    assert all(h.get("openWorldHint") is False for h in hints.values())


def test_a_lone_surrogate_escape_over_stdio_is_answered_and_the_server_keeps_serving(tmp_path: Path) -> None:
    """Issue 35: the SDK's JSON parser refused a request holding "\\ud800" and left it unanswered (the client hung).

    Such an escape is read as U+FFFD, as the SDK reads bytes that are not UTF-8; a whole pair stays one character.
    """
    import select
    import subprocess

    path = tmp_path / "stdio.db"
    child = subprocess.Popen(
        [sys.executable, "-c", "from worlddb_lite.cli import main; main()", "mcp", str(path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    assert child.stdin is not None and child.stdout is not None
    hello = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}
    lines = [
        json.dumps({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": hello}),
        json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"memory_write",'
        '"arguments":{"text":"a\\ud800b \\ud83d\\ude00 \\\\ud800","scope":"s"}}}',
        '{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"memory_list","arguments":{"scope":"s","kind":"note"}}}',
    ]
    answers: dict[int, Any] = {}
    try:
        for line in lines:
            child.stdin.write(line.encode() + b"\n")
            child.stdin.flush()
            asked = json.loads(line).get("id")
            while asked is not None and asked not in answers and select.select([child.stdout], [], [], 20)[0]:
                answer = json.loads(child.stdout.readline() or "{}")
                answers[answer.get("id", -1)] = answer
    finally:
        child.stdin.close()
        child.wait(timeout=30)
    assert set(answers) == {0, 1, 2}, answers
    listed = answers[2]["result"]["structuredContent"]["memories"]
    assert listed[0]["text"] == "a\ufffdb \U0001f600 \\ud800"
