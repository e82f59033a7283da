"""The assistant's loop through the CLI and MCP (issue 34): turns, notes, amends, retires, purges,
consolidation and the cold tier, each followed by recall and context; a refused call is an error
message, never a traceback. The property over the library is tests/test_loop_properties.py.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from worlddb_lite import StaticEmbedder, WorldDB

from .conftest import FakeClock, run
from .test_mcp import call

TURNS = [  # (text, speaker, when): the conversation issue 34 was found with
    ("Hi! How was your week?", "Mel", "2023-11-01T10:00:00Z"),
    ("Great, I went hiking on Saturday", "Caroline", "2023-11-01T10:01:00Z"),
    ("Nice, where did you go?", "Mel", "2023-11-01T10:02:00Z"),
]
QUESTIONS = ["when is the standup?", "where do I live?", "what did I do on Saturday?", "what is my blood type?"]


def _cli_asks(capsys: pytest.CaptureFixture[str], db: str, *options: str) -> None:
    """Every question through recall and recall --context: each answers (exit 0, no traceback)."""
    for question in QUESTIONS:
        for mode in ((), ("--context",)):
            code, out, err = run(capsys, "recall", db, question, "--scope", "caroline", *mode, *options)
            assert code == 0 and "Traceback" not in err, err
            assert out.strip()


def test_the_loop_through_the_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = str(tmp_path / "loop.db")
    said = []
    for text, speaker, at in TURNS:
        code, out, err = run(capsys, "add-turn", db, text, "--scope", "caroline", "--speaker", speaker, "--at", at)
        assert code == 0, err
        said.append(out.strip())
    notes = []
    for text, valid_at in (
        ("Our team standup is at 9:00", "2023-12-01"),
        ("We switched the standup to 9:30", "2024-01-10"),
    ):
        code, out, err = run(capsys, "write", db, text, "--scope", "caroline", "--valid-at", valid_at)
        assert code == 0, err
        notes.append(out.strip())
    _cli_asks(capsys, db)  # issue 34: "when is the standup?" raised KeyError here
    code, out, _ = run(capsys, "recall", db, "when is the standup?", "--scope", "caroline", "--k", "3")
    assert "standup" in out
    steps: list[tuple[str, ...]] = [
        ("write", db, "I live in Lisbon", "--scope", "caroline", "--valid-at", "2023-03-01"),
        ("add-turn", db, "I moved to Porto in the spring", "--scope", "caroline", "--speaker", "Caroline"),
        ("amend", db, said[1][:12], "Great, I went kayaking on Saturday"),
        ("retire", db, notes[0][:12]),
        ("consolidate", db, "--min-age", "0"),
        ("retention", db, "--max-hot", "2"),
        ("consolidate", db, "--only", "retention", "--min-age", "0"),
        ("purge", db, said[0][:12]),
    ]
    for step in steps:
        code, _, err = run(capsys, *step)
        assert code == 0, (step, err)
        _cli_asks(capsys, db)
    _cli_asks(capsys, db, "--as-of", "2023-12-15")
    _cli_asks(capsys, db, "--include-cold")
    code, out, _ = run(capsys, "verify", db)
    assert code == 0 and out.startswith("ok")


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (("recall", "{db}", "when is the standup?", "--scope", "nobody"), "no scope named 'nobody'"),
        (("recall", "{db}", "when is the standup?", "--scope", "caroline", "--as-of", "yesterday-ish"), "as_of"),
        (("recall", "{db}", "when is the standup?", "--scope", "caroline", "--k", "0"), "k"),
        (
            ("add-turn", "{db}", "an earlier thought", "--scope", "caroline", "--session", "s", "--at", "2023-01-01"),
            "never dated before the last turn of the session it joins",
        ),
        (("retire", "{db}", "0123456789ab"), "no node id starts with"),
    ],
)
def test_refused_loop_calls_through_the_cli_say_why(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: tuple[str, ...], message: str
) -> None:
    db = str(tmp_path / "loop.db")
    for text, _, at in TURNS:
        code, _, err = run(capsys, "add-turn", db, text, "--scope", "caroline", "--session", "s", "--at", at)
        assert code == 0, err
    code, out, err = run(capsys, *(part.format(db=db) for part in argv))
    assert code == 2 and out == "", (out, err)
    assert message in err and "Traceback" not in err, err


@pytest.fixture(scope="module")
def embedder() -> StaticEmbedder:
    return StaticEmbedder()


def _mcp(db: WorldDB) -> tuple[Callable[..., Any], type[Exception]]:
    from worlddb_lite.mcp import _sdk, build_server

    _, tool_error = _sdk()
    server = build_server(db)
    return lambda tool, **arguments: call(server, tool, arguments), tool_error


def _mcp_asks(call: Callable[..., Any], **options: Any) -> None:
    for question in QUESTIONS:
        assert "hits" in call("memory_recall", query=question, scope="caroline", **options)
        assert isinstance(call("memory_context", query=question, scope="caroline", **options), str)


def test_the_loop_through_mcp(tmp_path: Path, embedder: StaticEmbedder) -> None:
    with WorldDB(str(tmp_path / "mcp.db"), embedder=embedder, clock=FakeClock()) as db:
        call, tool_error = _mcp(db)
        said = [call("memory_add_turn", text=t, scope="caroline", speaker=s, at=at)["id"] for t, s, at in TURNS]
        first = call("memory_write", text="Our team standup is at 9:00", scope="caroline", valid_at="2023-12-01")["id"]
        call("memory_write", text="We switched the standup to 9:30", scope="caroline", valid_at="2024-01-10")
        _mcp_asks(call)  # issue 34: the SDK turned the KeyError into "Error executing tool recall"
        call("memory_amend", id=said[1], text="Great, I went kayaking on Saturday")
        _mcp_asks(call)
        call("memory_retire", id=first)
        _mcp_asks(call, as_of="2023-12-15")
        call("memory_purge", id=said[0], confirm=said[0])
        _mcp_asks(call)
        for tool, arguments, message in [
            (
                "memory_recall",
                {"query": "when is the standup?", "scope": "nobody"},
                "NotFound: no scope named 'nobody'",
            ),
            ("memory_recall", {"query": "standup", "scope": "caroline", "as_of": "soon"}, "InvalidTime: as_of"),
            ("memory_add_turn", {"text": "  ", "scope": "caroline"}, "InvalidInput"),
            ("memory_amend", {"id": said[0], "text": "gone"}, "NotCurrent: " + said[0][:12] + " was purged"),
        ]:
            with pytest.raises(tool_error) as refused:
                call(tool, **arguments)
            # the engine's kind of refusal and its words: an unexpected error would name no kind ("...: 10")
            assert f"tool {tool}: {message}" in str(refused.value) and "Traceback" not in str(refused.value)
        assert db.verify().ok
