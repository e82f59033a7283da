"""MCP over HTTP under load: concurrent clients writing and recalling through one `worlddb mcp --http` server.

    python bench/mcp_load.py [--clients 16] [--seconds 20] [--path DB] [--json OUT]

Starts ``worlddb mcp DB --http --port 0`` on loopback (a temporary store unless ``--path``), waits
for the address it announces, warms it up with one write and one recall, then runs ``--clients``
clients at once, each with its own MCP session (the SDK's streamable HTTP client), for ``--seconds``:
each writes a short note into its own scope with ``memory_write`` and then recalls with
``memory_recall`` (in its scope, every third time over the whole store), over and over. The server
serialises tool calls on one lock over one store handle, so the clients queue.

Then it stops the server (SIGTERM, a graceful shutdown), opens the store and checks:

* errors: tool errors and transport failures seen by any client (must be 0);
* lost writes: ids a client got back from ``memory_write`` that do not read back (must be 0);
* every client scope holds exactly as many notes as were acknowledged, and ``verify`` passes.

Prints requests/s over the run and P50/P95 latency per tool, measured by the clients (queueing included).
"""

from __future__ import annotations

import argparse
import asyncio
import random
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import emit, environment, percentiles, progress  # noqa: E402

from worlddb_lite import WorldDB  # noqa: E402

try:  # mcp 2.x; 1.x names it streamablehttp_client
    from mcp.client.streamable_http import streamable_http_client as http_client
except ImportError:  # pragma: no cover
    from mcp.client.streamable_http import streamablehttp_client as http_client  # type: ignore[no-redef]
from mcp import ClientSession  # noqa: E402

CLI = [sys.executable, "-c", "from worlddb_lite.cli import main; raise SystemExit(main())", "mcp"]
ADDRESS = re.compile(r"serving .* at (http://\S+)")
PEOPLE = "Ana Bo Chen Dara Emma Farid Greta Hugo Ines Jonas".split()
PLACES = "Lisbon Porto Oslo Austin Denver Kyoto Lima Accra Quito Riga".split()
THINGS = "piano violin chess coffee bicycle garden recipe museum letter train".split()


def start_server(path: str | Path, log: Path, *extra: str) -> tuple[subprocess.Popen[bytes], str]:
    """`worlddb mcp PATH --http --port 0 [extra]` in a child process; its URL, from the line it announces.

    Also what tests/test_mcp_http.py and tests/test_mcp_transports.py start their servers with.
    """
    with log.open("wb") as err:
        child = subprocess.Popen([*CLI, str(path), "--http", "--port", "0", *extra], stderr=err)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        found = ADDRESS.search(log.read_text("utf-8", "replace"))
        if found:
            return child, found.group(1)
        if child.poll() is not None:
            break
        time.sleep(0.05)
    child.kill()
    child.wait(10)
    raise RuntimeError(f"the server did not start:\n{log.read_text('utf-8', 'replace')}")


def stop_server(child: subprocess.Popen[bytes]) -> int:
    """SIGTERM (SIGKILL if it does not end within 30 s); its exit code."""
    if child.poll() is None:
        child.terminate()
        try:
            return child.wait(30)
        except subprocess.TimeoutExpired:
            child.kill()
    return child.wait(10)


def failed(result: Any) -> bool:
    return bool(getattr(result, "is_error", getattr(result, "isError", False)))


def note(rng: random.Random, n: int, i: int) -> str:
    person, place, thing = rng.choice(PEOPLE), rng.choice(PLACES), rng.choice(THINGS)
    return f"{person} met client {n} in {place} about the {thing} (note {i})"


async def client(url: str, n: int, deadline: float, out: dict[str, Any]) -> None:
    rng = random.Random(n)
    scope = f"client-{n}"
    async with http_client(url) as (read, write, *_), ClientSession(read, write) as session:
        await session.initialize()
        i = 0
        while time.monotonic() < deadline:
            calls: list[tuple[str, dict[str, Any]]] = [("memory_write", {"text": note(rng, n, i), "scope": scope})]
            query = f"where did {rng.choice(PEOPLE)} talk about the {rng.choice(THINGS)}?"
            calls.append(("memory_recall", {"query": query, "k": 5, **({"scope": scope} if i % 3 else {})}))
            for tool, arguments in calls:
                began = time.perf_counter()
                try:
                    result = await session.call_tool(tool, arguments)
                except Exception as exc:  # a transport failure counts as an error, and the client goes on
                    out["errors"].append(f"{tool}: {type(exc).__name__}: {exc}")
                    continue
                out["latency"][tool].append(time.perf_counter() - began)
                if failed(result):
                    out["errors"].append(f"{tool}: {result.content[0].text[:200]}")
                elif tool == "memory_write":
                    out["written"].setdefault(scope, []).append(result.structured_content["id"])
            i += 1


async def load(url: str, clients: int, seconds: float) -> dict[str, Any]:
    out: dict[str, Any] = {"errors": [], "written": {}, "latency": {"memory_write": [], "memory_recall": []}}
    async with http_client(url) as (read, write, *_), ClientSession(read, write) as session:  # warm up
        await session.initialize()
        await session.call_tool("memory_write", {"text": "warm up: Ana lives in Lisbon", "scope": "warmup"})
        await session.call_tool("memory_recall", {"query": "where does Ana live?"})
    began = time.monotonic()
    await asyncio.gather(*(client(url, n, began + seconds, out) for n in range(clients)))
    out["elapsed_s"] = time.monotonic() - began
    return out


def check(path: str, written: dict[str, list[str]]) -> dict[str, Any]:
    """Every acknowledged id reads back; each client scope holds exactly the notes acknowledged."""
    lost, count_mismatch, present = [], {}, 0
    with WorldDB(path, create=False) as db:
        for scope, ids in written.items():
            for memory in ids:
                try:
                    if db.read(memory).content:
                        present += 1
                        continue
                except Exception:  # noqa: BLE001 - any failure to read it back is a lost write
                    pass
                lost.append(memory)
            listed, cursor = 0, None
            while True:
                page = db.list_memories(scope, type="Memory", limit=1000, cursor=cursor)
                listed += len(page.nodes)
                cursor = page.cursor
                if cursor is None:
                    break
            if listed != len(ids):
                count_mismatch[scope] = {"acknowledged": len(ids), "stored": listed}
        verify_ok = db.verify().ok
        nodes = db.stats()["nodes"]
    return {
        "read_back": present,
        "lost_writes": len(lost),
        "lost_sample": lost[:5],
        "count_mismatch": count_mismatch,
        "verify_ok": verify_ok,
        "store_nodes": nodes,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--path", help="store file (default: a temporary one)")
    parser.add_argument("--json", help="also write the result here")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="worlddb-mcp-load-") as folder:
        path = args.path or str(Path(folder) / "mcp.db")
        child, url = start_server(path, Path(folder) / "server.log")
        progress(f"{args.clients} clients, {args.seconds:g} s against {url} ({path})")
        try:
            run = asyncio.run(load(url, args.clients, args.seconds))
        finally:
            exit_code = stop_server(child)
        checked = check(path, run["written"])
    calls = sum(len(samples) for samples in run["latency"].values())
    acknowledged = sum(len(ids) for ids in run["written"].values())
    result = {
        "requests": calls,
        "requests_per_s": round(calls / run["elapsed_s"], 1),
        "elapsed_s": round(run["elapsed_s"], 2),
        "latency": {tool: percentiles(samples) for tool, samples in run["latency"].items() if samples},
        "errors": len(run["errors"]),
        "error_sample": run["errors"][:5],
        "writes_acknowledged": acknowledged,
        **checked,
        "server_exit_code": exit_code,
    }
    emit({"env": environment(), "params": vars(args), **result}, args.json)
    ok = not result["errors"] and not result["lost_writes"] and not result["count_mismatch"] and result["verify_ok"]
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
