"""bench/crash.py: a writer SIGKILLed at random leaves a store that verifies and holds every acknowledged write."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))
import crash  # noqa: E402


@pytest.mark.skipif(not hasattr(crash.os, "fork"), reason="the crash bench forks its writer")
def test_twenty_kills_across_writes_ingests_and_consolidation_lose_nothing(tmp_path: Path) -> None:
    result = crash.run(21, "mixed", seed=7, max_delay=0.3, folder=tmp_path)
    assert result["failures"] == 0, result["first_failures"]
    assert all(mode["trials"] == 7 for mode in result["per_mode"].values())
    assert result["per_mode"]["write"]["acks_max"] > 0  # the kills landed while writes were flowing


@pytest.mark.slow
def test_five_hundred_kills_lose_nothing(tmp_path: Path) -> None:
    result = crash.run(500, "mixed", seed=1, max_delay=0.4, folder=tmp_path)
    assert result["failures"] == 0, result["first_failures"]


def test_the_checks_see_a_lost_write(tmp_path: Path) -> None:
    path, _ = crash.template("write", tmp_path)
    missing = "0" * 64
    problems = crash.check("write", str(path), [f"w {missing} a memory that never landed"], 0)
    assert problems  # a NotFound would be raised: the check must not pass silently


def test_the_checks_see_half_a_conversation(tmp_path: Path) -> None:
    path, _ = crash.template("ingest", tmp_path)
    assert crash.check("ingest", str(path), ["c 10000"], 0) == []
    assert crash.check("ingest", str(path), ["c 3"], 0) == ["acknowledged conversation 3 is missing"]
