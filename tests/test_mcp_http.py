"""`worlddb mcp DB --http`: the same tools over the SDK's streamable HTTP transport, on loopback."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import worlddb_lite
from worlddb_lite import WorldDB
from worlddb_lite.mcp import TOOL_NAMES, version

try:  # mcp 2.x names it streamable_http_client; 1.x streamablehttp_client
    from mcp.client.streamable_http import streamable_http_client as http_client
except ImportError:  # pragma: no cover - depends on the SDK installed
    try:
        from mcp.client.streamable_http import streamablehttp_client as http_client  # type: ignore[no-redef]
    except ImportError:
        pytest.skip("the installed MCP SDK has no streamable HTTP client", allow_module_level=True)

from mcp import ClientSession

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))
from mcp_load import CLI, start_server, stop_server  # noqa: E402  (one launcher for the bench and the tests)
from mcp_load import failed as is_error  # noqa: E402


@pytest.fixture
def server(tmp_path: Path) -> Iterator[tuple[Path, str, subprocess.Popen[bytes]]]:
    path = tmp_path / "http.db"
    child, url = start_server(path, tmp_path / "server.log")
    try:
        yield path, url, child
    finally:
        stop_server(child)


def test_the_server_answers_over_http(server: tuple[Path, str, subprocess.Popen[bytes]]) -> None:
    path, url, child = server
    assert url.startswith("http://127.0.0.1:") and url.endswith("/mcp")

    async def talk() -> dict[str, Any]:
        async with http_client(url) as (read, write, *_), ClientSession(read, write) as session:
            hello = await session.initialize()
            info = getattr(hello, "server_info", None) or hello.serverInfo
            names = [t.name for t in (await session.list_tools()).tools]
            written = await session.call_tool("memory_write", {"text": "the spare key is under the blue pot"})
            found = await session.call_tool("memory_recall", {"query": "where is the spare key?", "k": 1})
            bad = await session.call_tool("memory_recall", {"query": "key", "k": "many"})
            unknown = await session.call_tool("memory_read", {"id": "nope"})
            after = await session.call_tool("memory_list_scopes", {})
            return {
                "version": info.version,
                "names": names,
                "written": written,
                "found": found,
                "bad": bad,
                "unknown": unknown,
                "after": after,
            }

    got = asyncio.run(talk())
    assert got["version"] == version() == worlddb_lite.__version__
    assert set(got["names"]) == set(TOOL_NAMES)
    assert not is_error(got["written"]) and not is_error(got["found"])
    memory = got["written"].structured_content["id"]
    hits = got["found"].structured_content["hits"]
    assert hits[0]["id"] == memory and "blue pot" in hits[0]["text"]
    assert is_error(got["bad"]) and "k" in got["bad"].content[0].text
    assert is_error(got["unknown"]) and "InvalidId" in got["unknown"].content[0].text
    assert not is_error(got["after"]) and "default" in got["after"].content[0].text  # the server lives on
    assert stop_server(child) == 0  # SIGTERM ends it quietly, the store closed
    with WorldDB(path) as db:
        assert db.read(memory).content == "the spare key is under the blue pot" and db.verify().ok


def test_concurrent_http_clients_share_one_store_safely(server: tuple[Path, str, subprocess.Popen[bytes]]) -> None:
    path, url, child = server

    async def client(n: int) -> list[str]:
        ids = []
        async with http_client(url) as (read, write, *_), ClientSession(read, write) as session:
            await session.initialize()
            for i in range(5):
                result = await session.call_tool("memory_write", {"text": f"client {n} note {i}", "scope": "load"})
                assert not is_error(result), result.content[0].text
                ids.append(result.structured_content["id"])
        return ids

    async def many() -> list[list[str]]:
        return await asyncio.gather(*(client(n) for n in range(4)))

    ids = [memory for batch in asyncio.run(many()) for memory in batch]
    assert len(set(ids)) == 20
    assert stop_server(child) == 0
    with WorldDB(path) as db:
        assert {n.id[:12] for n in db.list_memories("load", type="Memory", limit=1000).nodes} == set(ids)
        assert db.verify().ok


def test_a_port_in_use_is_refused_with_a_message(
    server: tuple[Path, str, subprocess.Popen[bytes]], tmp_path: Path
) -> None:
    _, url, _ = server
    port = url.rsplit(":", 1)[1].split("/")[0]
    done = subprocess.run(
        [*CLI, str(tmp_path / "other.db"), "--http", "--port", port], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 2 and "pick another --port" in done.stderr


def test_the_help_says_it_has_no_authentication() -> None:
    done = subprocess.run([*CLI, "--help"], capture_output=True, text=True, timeout=60)
    text = " ".join(done.stdout.split())  # argparse wraps the lines
    assert done.returncode == 0 and "NO authentication" in text and "127.0.0.1" in text and "--token-file" in text


def _client_with(url: str, token: str) -> Any:
    """The SDK's HTTP client sending a bearer token (2.x takes an httpx client, 1.x takes headers)."""
    import inspect

    headers = {"Authorization": f"Bearer {token}"}
    if "headers" in inspect.signature(http_client).parameters:
        return http_client(url, headers=headers)  # type: ignore[call-arg]
    import httpx2  # type: ignore[import-not-found]

    return http_client(url, http_client=httpx2.AsyncClient(headers=headers, follow_redirects=True))


def _post(url: str, headers: dict[str, str]) -> Any:
    import urllib.request

    return urllib.request.Request(url, data=b"{}", headers={"Content-Type": "application/json", **headers})


def test_a_token_guards_every_request(tmp_path: Path) -> None:
    import urllib.error
    import urllib.request

    secret = tmp_path / "token"
    secret.write_text("s3cret-token-for-tests\n", encoding="utf-8")
    secret.chmod(0o600)
    child, url = start_server(tmp_path / "t.db", tmp_path / "t.log", "--token-file", str(secret))
    try:
        for header in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": "Basic s3cret-token-for-tests"}):
            with pytest.raises(urllib.error.HTTPError) as refused:
                urllib.request.urlopen(_post(url, header), timeout=10)
            assert refused.value.code == 401
        for scheme in ("bearer", "BEARER", "Bearer "):  # RFC 7235: the scheme's name is case-insensitive
            with pytest.raises(urllib.error.HTTPError) as passed:  # past the guard, the SDK refuses a bare {}
                urllib.request.urlopen(_post(url, {"Authorization": f"{scheme} s3cret-token-for-tests"}), timeout=10)
            assert passed.value.code != 401, scheme

        async def talk() -> Any:
            async with (
                _client_with(url, "s3cret-token-for-tests") as (read, write, *_),
                ClientSession(read, write) as session,
            ):
                await session.initialize()
                return await session.call_tool("memory_write", {"text": "a note behind a token"})

        assert not is_error(asyncio.run(talk()))
    finally:
        assert stop_server(child) == 0
    with WorldDB(tmp_path / "t.db") as db:
        assert [n.content for n in db.nodes(type="Memory")] == ["a note behind a token"]  # the refused wrote nothing


def test_a_host_beyond_loopback_needs_a_token_and_nothing_is_created(tmp_path: Path) -> None:
    done = subprocess.run(
        [*CLI, str(tmp_path / "open.db"), "--http", "--host", "0.0.0.0", "--port", "0"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2 and "--token-file" in done.stderr
    assert not (tmp_path / "open.db").exists()


@pytest.mark.parametrize("mode", [0o644, 0o640, 0o604, 0o660], ids=oct)
def test_a_token_file_others_can_read_is_refused_and_nothing_is_created(tmp_path: Path, mode: int) -> None:
    """Issue 35: a world-readable token file was taken silently; its secret is no secret."""
    secret = tmp_path / "token"
    secret.write_text("s3cret-token-for-tests\n", encoding="utf-8")
    secret.chmod(mode)
    args = [str(tmp_path / "t.db"), "--http", "--port", "0", "--token-file", str(secret)]
    done = subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=30)
    assert done.returncode == 2 and "chmod 600" in done.stderr and f"mode {mode:o}" in done.stderr
    assert "Traceback" not in done.stderr and not (tmp_path / "t.db").exists()


def test_a_token_file_without_http_is_refused_and_nothing_is_created(tmp_path: Path) -> None:
    """Issue 35: --token-file without --http was dropped silently (stdio served, no token asked)."""
    secret = tmp_path / "token"
    secret.write_text("s3cret-token-for-tests\n", encoding="utf-8")
    secret.chmod(0o600)
    args = [str(tmp_path / "t.db"), "--token-file", str(secret)]
    done = subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL)
    assert done.returncode == 2 and "--http" in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "t.db").exists()
