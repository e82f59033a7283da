"""Issue 39: an error's next step is a structured ``Hint``; the CLI names it as a command, MCP as a tool.

No layer below the front ends names a command: its messages say what happened and why, in words.
"""

from __future__ import annotations

import ast
import asyncio
import pickle
import re
import shlex
from pathlib import Path

import pytest

import worlddb_lite
from worlddb_lite import Hint, InvalidInput, NotFound, UnknownEdgeType, WorldDB, WorldDBError
from worlddb_lite.cli import COMMAND_FOR_ACTION, COMMANDS, _advice, command_line, main
from worlddb_lite.errors import ACTION_WORDS
from worlddb_lite.mcp import TOOL_FOR_ACTION, TOOL_NAMES, _sdk, build_server

from .conftest import FakeEmbedder

PACKAGE = Path(worlddb_lite.__file__).parent
FRONT_ENDS = {"cli.py", "mcp.py", "browse.py", "background.py"}
COMMAND_WORDS = re.compile(r"\bworlddb (" + "|".join(re.escape(name) for name in sorted(COMMANDS)) + r")\b")


def _docstrings(tree: ast.AST) -> set[int]:
    """The ids of the constants that are docstrings (a module's, a class's, a function's first statement)."""
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                out.add(id(first.value))
    return out


def test_no_string_below_the_front_ends_names_a_command() -> None:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.relative_to(PACKAGE).as_posix() in FRONT_ENDS:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        documented = _docstrings(tree)  # a docstring may say which command runs the code; a message may not
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in documented:
                hit = COMMAND_WORDS.search(node.value)
                if hit:
                    found.append(f"{path.relative_to(PACKAGE)}:{node.lineno}: {hit.group(0)!r}")
    assert not found, "\n".join(found)


def test_the_scan_sees_a_command_in_a_message() -> None:
    assert COMMAND_WORDS.search("run `worlddb verify` on it") and not COMMAND_WORDS.search("a worlddb store")


def test_every_action_has_words_and_the_front_ends_name_real_commands_and_tools() -> None:
    assert set(COMMAND_FOR_ACTION) <= set(ACTION_WORDS) and set(TOOL_FOR_ACTION) <= set(ACTION_WORDS)
    assert set(COMMAND_FOR_ACTION.values()) <= set(COMMANDS)
    assert {re.search(r"memory_\w+", tool).group(0) for tool in TOOL_FOR_ACTION.values()} <= set(TOOL_NAMES)  # type: ignore[union-attr]
    assert all(callable(getattr(WorldDB, action, None)) for action in ACTION_WORDS if action != "create")


def test_str_is_a_sentence_in_words_and_the_hint_travels_with_the_error() -> None:
    err = NotFound("no node has id 00", hint=Hint("list_memories"))
    assert err.message == "no node has id 00" and str(err) == "no node has id 00 (next: list the memories)"
    assert str(NotFound("plain")) == "plain" and NotFound("plain").hint is None
    again = pickle.loads(pickle.dumps(err))
    assert again.hint == Hint("list_memories") and str(again) == str(err)
    assert str(UnknownEdgeType("no edge type 'x'")) == "no edge type 'x'"  # not KeyError's repr
    said = Hint("backup", (("dest", "b.db"), ("overwrite", ""))).said()
    assert said == "back the store up (dest b.db, with overwrite)"


def test_a_hint_survives_the_store_boundary(tmp_path: Path) -> None:
    with WorldDB(tmp_path / "s.db", embedder=FakeEmbedder()) as db:
        with pytest.raises(NotFound) as info:
            db.read("ab" * 32)
        assert info.value.hint == Hint("list_memories") and "worlddb" not in str(info.value)
        db.backup(tmp_path / "s.db.copy")
        with pytest.raises(InvalidInput) as refused:
            db.backup(tmp_path / "s.db.copy")
        assert refused.value.hint == Hint("backup", (("dest", str(tmp_path / "s.db.copy")), ("overwrite", "")))


@pytest.mark.parametrize(
    ("hint", "line"),
    [
        (Hint("verify"), "worlddb verify my.db"),
        (Hint("list_memories"), "worlddb list my.db --scope SCOPE"),
        (Hint("backup", (("dest", "a b.db"), ("overwrite", ""))), "worlddb backup my.db 'a b.db' --force"),
        (Hint("replica", (("dest", "r.db"), ("overwrite", ""))), "worlddb replica my.db r.db --force"),
        (Hint("replica"), "worlddb replica my.db DEST"),
        (
            Hint("changes", (("store", "sender"), ("scope", ""))),
            "worlddb changes SENDER --scope SCOPE --since TOKEN",
        ),
        (Hint("sync_token", (("store", "receiver"),)), "worlddb token RECEIVER"),
        (Hint("create", (("store", "/x/new.db"),)), "worlddb init /x/new.db"),
        (Hint("frobnicate"), "frobnicate"),  # no command takes it: said in words
    ],
)
def test_the_cli_names_a_hint_as_its_command(hint: Hint, line: str) -> None:
    assert command_line(hint, "my.db") == line


def test_every_hinted_command_line_is_one_the_cli_takes() -> None:
    """A hint's line runs as printed once its placeholders are filled (review, issue 39: `worlddb list DB` did not)."""
    from worlddb_lite.cli import COMMAND_FOR_ACTION, build_parser

    parser = build_parser()
    for action in COMMAND_FOR_ACTION:
        words = shlex.split(command_line(Hint(action), "my.db"))[1:]
        try:
            parser.parse_args(words)
        except SystemExit:
            pytest.fail(f"Hint({action!r}) renders {' '.join(words)!r}, which the CLI refuses")


def test_the_cli_prints_the_message_then_the_command(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = str(tmp_path / "c.db")
    assert main(["init", path]) == 0
    capsys.readouterr()
    assert main(["read", path, "abcdef12"]) == 2
    err = capsys.readouterr().err
    assert err == f"worlddb read: no node id starts with 'abcdef12'; run `worlddb list {path} --scope SCOPE`\n"
    assert main(["list", path, "--scope", "nobody"]) == 2
    assert capsys.readouterr().err.endswith(f"; run `worlddb scopes {path}`\n")
    assert _advice(NotFound("gone", hint=Hint("frobnicate")), path) == "gone (next: frobnicate)"


def _tool_error(server: object, name: str, arguments: dict[str, object]) -> str:
    _, tool_error = _sdk()
    with pytest.raises((tool_error, WorldDBError)) as info:
        asyncio.run(server.call_tool(name, arguments))  # type: ignore[attr-defined]
    return str(info.value)


def test_mcp_names_a_hint_as_its_tool(tmp_path: Path) -> None:
    with WorldDB(tmp_path / "m.db", embedder=FakeEmbedder()) as db:
        server = build_server(db)
        said = _tool_error(server, "memory_amend", {"id": "0" * 64, "text": "x"})
        assert said.endswith("NotFound: no node has id " + "0" * 64 + "; call `memory_list`"), said
        said = _tool_error(server, "memory_list", {"scope": "nobody"})
        assert "no scope named 'nobody' in m.db; call `memory_list_scopes`" in said and "worlddb " not in said
