"""Every MCP tool round-trips over both transports, with the official client; a bad argument is a tool error.

One server process per transport (stdio, streamable HTTP on loopback, and HTTP behind a bearer token)
takes a script that calls each tool of ``TOOL_NAMES`` once with good arguments and once with an
argument it does not take; the server answers both and lives on. A tool added without a call here
fails the test.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from tests.test_mcp_http import CLI, _client_with, http_client, is_error, start_server, stop_server
from worlddb_lite.mcp import TOOL_NAMES

Script = list[tuple[str, Callable[[dict[str, Any]], dict[str, Any]], Callable[[Any, dict[str, Any]], None]]]


def _json(result: Any) -> Any:
    text = result.content[0].text
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text  # context answers with the prompt text itself


def script() -> Script:
    """(tool, arguments from what earlier calls returned, a check of the answer), in an order that works."""

    def keep(name: str) -> Callable[[Any, dict[str, Any]], None]:
        def check(answer: Any, seen: dict[str, Any]) -> None:
            seen[name] = answer

        return check

    def has(key: str) -> Callable[[Any, dict[str, Any]], None]:
        def check(answer: Any, _: dict[str, Any]) -> None:
            assert key in answer, answer

        return check

    return [
        ("memory_write", lambda s: {"text": "the spare key is under the blue pot", "scope": "ana"}, keep("key")),
        ("memory_write", lambda s: {"text": "the bike code is 2580", "scope": ["ana", "agent:helper"]}, keep("bike")),
        (
            "memory_add_turn",
            lambda s: {"text": "I adopted a kitten called Miso", "scope": "ana", "speaker": "ana"},
            has("id"),
        ),
        ("memory_recall", lambda s: {"query": "bike code", "scope": "agent:helper"}, keep("found")),
        ("memory_context", lambda s: {"query": "kitten", "scope": "ana", "budget": 200}, lambda a, _: None),
        ("memory_read", lambda s: {"id": s["bike"]["id"][:8]}, has("text")),
        ("memory_list", lambda s: {"scope": "ana", "limit": 2}, has("memories")),
        ("memory_list_scopes", lambda s: {"kind": "agent"}, has("scopes")),
        ("memory_links", lambda s: {"about": "Miso"}, has("links")),
        (
            "memory_amend",
            lambda s: {"id": s["key"]["id"], "text": "the spare key is with the neighbour"},
            keep("amended"),
        ),
        ("memory_read", lambda s: {"id": s["amended"]["id"], "history": True}, has("versions")),
        ("memory_retire", lambda s: {"id": s["amended"]["id"]}, has("retired")),
        ("memory_write", lambda s: {"text": "scratch for the run", "scope": "run:1", "tags": ["tmp"]}, keep("scratch")),
        ("memory_retire", lambda s: {"scope": "run:1", "tag": "tmp"}, has("retired")),
        ("memory_purge", lambda s: {"id": s["scratch"]["id"], "confirm": s["scratch"]["id"]}, has("erased")),
        ("memory_purge", lambda s: {"scope": "run:1", "confirm": "run:1"}, has("erased")),
        ("memory_stats", lambda s: {}, lambda a, _: None),
    ]


@asynccontextmanager
async def session(transport: str, path: Path, tmp_path: Path) -> AsyncIterator[ClientSession]:
    if transport == "stdio":
        params = StdioServerParameters(command=CLI[0], args=[*CLI[1:], str(path)])
        async with stdio_client(params) as (read, write), ClientSession(read, write) as opened:
            await opened.initialize()
            yield opened
        return
    token = "round-trip-token-for-tests"
    guard: list[str] = []
    if transport == "http-token":
        secret = tmp_path / "token"
        secret.write_text(token + "\n", encoding="utf-8")
        secret.chmod(0o600)
        guard = ["--token-file", str(secret)]
    child, url = start_server(path, tmp_path / "server.log", *guard)
    client = _client_with(url, token) if guard else http_client(url)
    try:
        async with client as (read, write, *_), ClientSession(read, write) as opened:
            await opened.initialize()
            yield opened
    finally:
        stop_server(child)


@pytest.mark.parametrize("transport", ["stdio", "http", "http-token"])
def test_every_tool_round_trips_and_refuses_a_bad_argument(transport: str, tmp_path: Path) -> None:
    steps = script()
    assert {name for name, _, _ in steps} == set(TOOL_NAMES)  # a new tool needs a call here
    path = tmp_path / "transports.db"

    async def talk() -> dict[str, Any]:
        seen: dict[str, Any] = {}
        async with session(transport, path, tmp_path) as opened:
            listed = {tool.name for tool in (await opened.list_tools()).tools}
            assert listed == set(TOOL_NAMES)
            for name, arguments, check in steps:
                result = await opened.call_tool(name, arguments(seen))
                assert not is_error(result), (name, result.content[0].text)
                check(_json(result), seen)
            for name in TOOL_NAMES:
                refused = await opened.call_tool(name, {"bogus": 1})
                assert is_error(refused) and "bogus" in refused.content[0].text, (name, refused.content[0].text)
            alive = await opened.call_tool("memory_stats", {"verify": True})
            seen["verify"] = _json(alive)["verify"]
        return seen

    seen = asyncio.run(talk())
    assert seen["verify"]["ok"] is True
    assert seen["found"]["hits"][0]["id"] == seen["bike"]["id"]  # the other scope holds the one memory
