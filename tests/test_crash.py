"""bench/crash.py: a writer SIGKILLed at random leaves a store that verifies and holds every acknowledged write."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))
import crash  # noqa: E402


@pytest.mark.skipif(not hasattr(crash.os, "fork"), reason="the crash bench forks its writer")
def test_two_dozen_kills_across_writes_ingests_consolidation_and_purges_lose_nothing(tmp_path: Path) -> None:
    result = crash.run(24, "mixed", seed=7, max_delay=0.3, folder=tmp_path)
    assert result["failures"] == 0, result["first_failures"]
    assert all(mode["trials"] == 6 for mode in result["per_mode"].values())
    assert result["per_mode"]["write"]["acks_max"] > 0  # the kills landed while writes were flowing
    assert result["per_mode"]["purge"]["acks_max"] > 0  # ... and while purges were


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


def test_the_checks_see_a_purged_secret_left_in_the_files(tmp_path: Path) -> None:
    path, _ = crash.template("purge", tmp_path)
    secret = crash._secret(1, 1)
    with crash.WorldDB(str(path), embedder=None, dim=crash.DIM, create=False) as db:
        ref = db.write(f"memory 1 holds {secret}", scope="s1", vector=[0.5] * crash.DIM)
        db.purge(ref)
        acks = [f"w {ref} {secret}", f"p {ref} {secret}"]
        assert crash._check_purges(db, acks) == []
    assert crash.check("purge", str(path), acks, 0) == []
    with crash.WorldDB(str(path), embedder=None, dim=crash.DIM, create=False) as db:  # the same word, said again
        db.write(f"another memory holds {secret}", scope="s2", vector=[0.5] * crash.DIM)
    assert crash.check("purge", str(path), acks, 0) == [f"the purged secret of {ref[:12]} is still in the files"]
