"""What a `worlddb` call loads before it works: the parser alone loads no numpy, SQLite or model.

The start time itself is measured by bench/cli_start.py (its targets live there, not in a test);
these catch the regression that made it slow (an eager import) without timing anything.
"""

from __future__ import annotations

import datetime as dt
import json
import subprocess
import sys
from pathlib import Path

import pytest

import worlddb_lite
from worlddb_lite import cli

ROOT = Path(__file__).resolve().parents[1]
HEAVY = ("numpy", "apsw", "sqlite_vec", "tokenizers", "safetensors", "worlddb_lite.db", "worlddb_lite.models.embed")


def loaded_after(code: str) -> list[str]:
    """The HEAVY modules a fresh interpreter holds after running ``code`` (this checkout's package)."""
    probe = f"{code}\nimport sys, json\nprint(json.dumps([m for m in {HEAVY!r} if m in sys.modules]))"
    done = subprocess.run(
        [sys.executable, "-c", probe],
        capture_output=True,
        text=True,
        cwd=ROOT,  # `python -c` imports from the current folder first: this checkout
        timeout=60,
        check=True,
    )
    return json.loads(done.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def test_building_the_parser_loads_nothing_heavy() -> None:
    assert loaded_after("import worlddb_lite.cli as c; c.build_parser().format_help()") == []


@pytest.mark.parametrize("argv", [["--version"], ["--help"], ["recall", "--help"], []], ids=str)
def test_version_and_help_load_nothing_heavy(argv: list[str]) -> None:
    code = (
        "import contextlib, io\nfrom worlddb_lite.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        f"    try:\n        main({argv!r})\n    except SystemExit:\n        pass"
    )
    assert loaded_after(code) == []


def test_the_package_loads_a_name_when_it_is_used() -> None:
    assert loaded_after("import worlddb_lite") == []
    assert loaded_after("from worlddb_lite import InvalidInput, Node") == []  # errors and types alone
    assert "worlddb_lite.db" in loaded_after("from worlddb_lite import WorldDB")


def test_every_public_name_resolves() -> None:
    for name in worlddb_lite.__all__:
        assert getattr(worlddb_lite, name) is not None, name
    assert set(worlddb_lite.__all__) <= set(dir(worlddb_lite))
    from worlddb_lite.db import WorldDB
    from worlddb_lite.write.loaders import load

    assert worlddb_lite.WorldDB is WorldDB and worlddb_lite.load_conversations is load
    with pytest.raises(AttributeError, match="no attribute 'Nope'"):
        worlddb_lite.Nope  # noqa: B018


def test_the_parsers_defaults_are_the_librarys() -> None:
    """cli.py spells out the values its parser shows (importing them would load the library)."""
    from worlddb_lite.db import CONSOLIDATION_STEPS, DEFAULT_BUDGET, DEFAULT_MIN_AGE
    from worlddb_lite.types import SCOPE_KINDS
    from worlddb_lite.write.gate import DEFAULT_THRESHOLD
    from worlddb_lite.write.loaders import FORMATS

    assert cli.CONVERSATION_FORMATS == FORMATS
    assert cli.CONSOLIDATION_STEPS == CONSOLIDATION_STEPS
    assert dt.timedelta(minutes=cli.DEFAULT_MIN_AGE_MINUTES) == DEFAULT_MIN_AGE
    assert cli.DEFAULT_BUDGET == DEFAULT_BUDGET
    assert cli.DEFAULT_THRESHOLD == DEFAULT_THRESHOLD
    assert cli.SCOPE_KINDS == SCOPE_KINDS


@pytest.mark.parametrize(
    ("argv", "called"),
    [
        (["recall", "db", "q"], "recall"),
        (["--json", "--model", "stats", "recall", "db", "q"], "recall"),  # --model's value is no command
        (["-j", "stats", "db"], "stats"),
        (["--help", "stats"], None),  # the whole parser's help
        (["--version"], None),
        (["recal", "db"], None),  # refused by the whole parser, which lists the commands
        ([], None),
    ],
)
def test_a_line_builds_only_the_command_it_calls(argv: list[str], called: str | None) -> None:
    assert cli._called(argv) == called


def test_a_parser_of_one_command_reads_a_line_as_the_whole_one() -> None:
    line = ["--json", "recall", "db", "where?", "-k", "3", "--scope", "ana", "--no-late"]
    whole, one = vars(cli.build_parser().parse_args(line)), vars(cli.build_parser("recall").parse_args(line))
    assert whole == one and one["k"] == 3 and one["json"] is True
