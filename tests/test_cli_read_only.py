"""The CLI on a store this user may not write (issue 35): the reading commands answer, the writing ones say why not.

Root writes into any folder, so when the tests run as root they run `worlddb` in-process with nobody's
effective ids (``os.seteuid``: a real permission check by the kernel, for SQLite's opens as for
``os.access``, not a patched function), and as themselves otherwise. A read-only file
system takes the same path: ``access(2)`` says EROFS there as it says EACCES here.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

import apsw
import pytest

from worlddb_lite import WorldDB
from worlddb_lite.cli import main

from .conftest import run
from .test_migrations import _say_version, undo_v15

NOBODY = 65534
READS = [
    ["stats"],
    ["recall", "where do I live"],
    ["search", "Lisbon"],
    ["list", "--scope", "me"],
    ["scopes"],
    ["export"],
]
WRITES = [["write", "I moved to Porto"], ["import", "/dev/null"], ["checkpoint"], ["retention", "--max-hot", "5"]]


@contextlib.contextmanager
def someone_else() -> Iterator[None]:
    """This process acting as the user nobody when it runs as root (the kernel checks its effective ids)."""
    if os.geteuid() != 0:
        yield
        return
    os.setegid(NOBODY)
    os.seteuid(NOBODY)
    try:
        yield
    finally:
        os.seteuid(0)
        os.setegid(0)


class Done(NamedTuple):
    returncode: int
    stdout: str
    stderr: str


def worlddb(capsys: pytest.CaptureFixture[str], *argv: str) -> Done:
    """`worlddb ARGV`, in this process, as a user who may not write what root made.

    In-process because nobody cannot run the interpreter, which lies under /root here; every module the
    command needs is loaded first, by the same command run as root on another store.
    """
    capsys.readouterr()  # what ran before
    with someone_else():
        done = Done(*run(capsys, *argv))
    return done


@pytest.fixture
def folder() -> Iterator[Path]:
    """A folder the child may enter and read (pytest's own tmp folders are root's alone)."""
    made = Path(tempfile.mkdtemp(prefix="worlddb-read-only-"))
    made.chmod(0o755)
    try:
        yield made
    finally:
        made.chmod(0o755)
        shutil.rmtree(made)


def _store(folder: Path) -> tuple[str, str]:
    path = str(folder / "store.db")
    with WorldDB(path) as db:  # closed: the -wal folded in and removed
        db.write("I live in Lisbon", scope="me", valid_at="2024-01-01")
        root = db.root()
    os.chmod(path, 0o644)
    warm = str(folder / "warm.db")  # every module the commands load, loaded while this process may read them
    shutil.copyfile(path, warm)
    for argv in [*READS, *WRITES, ["verify"]]:
        main([argv[0], warm, *argv[1:]])
    for name in os.listdir(folder):
        if name.startswith("warm.db"):
            os.remove(folder / name)
    return path, root


@pytest.mark.parametrize("locked", ["folder", "file"])
def test_a_read_only_store_answers_reads_and_refuses_writes_with_a_message(
    folder: Path, locked: str, capsys: pytest.CaptureFixture[str]
) -> None:
    path, root = _store(folder)
    if locked == "folder":
        folder.chmod(0o555)
    else:  # a file the child may not write, in a folder it may (SQLite makes the -shm there)
        folder.chmod(0o777)
        os.chmod(path, 0o444)
    before = sorted(os.listdir(folder))
    for argv in READS:
        done = worlddb(capsys, argv[0], path, *argv[1:])
        assert done.returncode == 0 and "Traceback" not in done.stderr, (argv, done.stderr)
        assert {"stats": root, "scopes": "me"}.get(argv[0], "Lisbon") in done.stdout, (argv, done.stdout)
    for argv in WRITES:
        done = worlddb(capsys, argv[0], path, *argv[1:])
        assert done.returncode == 2 and "Traceback" not in done.stderr, (argv, done.stderr)
        assert "read-only here" in done.stderr and "nothing was written" in done.stderr, (argv, done.stderr)
    if locked == "folder":
        assert sorted(os.listdir(folder)) == before  # no -wal, no -shm: nothing was made beside it
    folder.chmod(0o755)
    os.chmod(path, 0o644)
    with WorldDB(path) as db:
        assert db.root() == root and db.verify().ok


@pytest.mark.parametrize("locked", ["folder", "file"])
def test_an_older_store_that_cannot_be_written_is_refused_saying_it_needs_its_upgrade_once(
    folder: Path, locked: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # new-user trial: every reading command failed with "attempt to write a readonly database"
    path, _ = _store(folder)
    conn = apsw.Connection(path)
    with conn:
        undo_v15(conn)
    _say_version(conn, 14)
    conn.close()
    if locked == "folder":
        folder.chmod(0o555)
    else:
        folder.chmod(0o777)
        os.chmod(path, 0o444)
    done = worlddb(capsys, "recall", path, "where do I live")
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert "schema version 14" in done.stderr and "once in a place it can be written" in done.stderr, done.stderr
    folder.chmod(0o755)
    os.chmod(path, 0o644)
    with WorldDB(path) as db:  # untouched: still version 14 until a writer opens it
        assert db.migrated_from == 14 and db.verify().ok


@pytest.mark.parametrize("deep", [[], ["--deep"]])
def test_verify_checks_a_store_in_a_read_only_folder(
    folder: Path, capsys: pytest.CaptureFixture[str], deep: list[str]
) -> None:
    path, _ = _store(folder)
    folder.chmod(0o555)
    done = worlddb(capsys, "verify", path, *deep)
    assert done.returncode == 0 and done.stdout.startswith("ok: checked"), done.stderr
    assert sorted(os.listdir(folder)) == ["store.db"]


def test_a_read_only_folder_with_a_log_not_folded_in_is_refused_with_what_to_do(
    folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Read alone, the main file would miss the commits its -wal holds: refused rather than read stale."""
    source = folder / "open"
    source.mkdir()
    with WorldDB(source / "store.db") as db:
        db.write("I live in Lisbon", scope="me", valid_at="2024-01-01")
        for name in ("store.db", "store.db-wal"):  # copied while open: the log still holds the commits
            shutil.copyfile(source / name, folder / name)
    folder.chmod(0o555)
    done = worlddb(capsys, "stats", str(folder / "store.db"))
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert "write-ahead log" in done.stderr and "worlddb checkpoint" in done.stderr, done.stderr
