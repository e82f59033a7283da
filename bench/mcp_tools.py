"""What the MCP tools cost an agent's context: the tool list, and one recall's answer, in characters.

    python bench/mcp_tools.py               # prints one JSON object
    python bench/mcp_tools.py --json F      # and saves it

The tool list is read into every conversation the agent has: its names, descriptions and schemas (input and
output) are counted as JSON, compact and with the usual ", " / ": " spacing (issue 38's target: 8,000).
The recall is one question over a small store of notes and turns (the answer's compact JSON text, k = 10).
Needs the mcp extra.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from worlddb_lite import WorldDB  # noqa: E402
from worlddb_lite.mcp import build_server  # noqa: E402

TARGET = 8000
NOTES = [
    "I live in Lisbon",
    "The spare key is under the blue flowerpot",
    "My sister Emma loves pottery",
    "I moved to Porto",
    "The dentist is on Friday at nine",
]
TURNS = ["Where did I leave my keys again?", "Under the blue pot, you said last week.", "Right, thanks!"]


def tool_list(server: Any, separators: tuple[str, str]) -> int:
    total = 0
    for tool in asyncio.run(server.list_tools()):
        dumped = tool.model_dump(by_alias=True, exclude_none=True)
        schemas = [dumped[key] for key in ("inputSchema", "outputSchema") if dumped.get(key)]
        total += (
            len(tool.name)
            + len(tool.description or "")
            + sum(len(json.dumps(s, separators=separators)) for s in schemas)
        )
    return total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", metavar="FILE", help="also save the figures here")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder, WorldDB(str(Path(folder) / "tools.db")) as db:
        for note in NOTES:
            db.write(note, scope="ana")
        for minute, said in enumerate(TURNS):
            db.add_turn(said, scope="ana", speaker="ana" if minute != 1 else "assistant")
        server = build_server(db)
        tools = asyncio.run(server.list_tools())
        answer = asyncio.run(server.call_tool("memory_recall", {"query": "where is the spare key?", "scope": "ana"}))
        figures = {
            "tools": len(tools),
            "tool_list_chars": tool_list(server, (",", ":")),
            "tool_list_chars_spaced": tool_list(server, (", ", ": ")),
            "target": TARGET,
            "recall_answer_chars": len(answer.content[0].text),
            "recall_hits": len(answer.structured_content["hits"]),
        }
    print(json.dumps(figures, indent=2))
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=2) + "\n")


if __name__ == "__main__":
    main()
