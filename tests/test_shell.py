"""`worlddb shell DB`: the sqlite3 shell on the store with sqlite-vec loaded, or a message saying how to get one."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import sqlite_vec

from worlddb_lite import WorldDB
from worlddb_lite.browse import load_line, shell_argv

from .conftest import run

ROOT = Path(__file__).resolve().parent.parent
# a stand-in sqlite3: writes each argument on a line of $ARGS_FILE and exits 3
FAKE = '#!/bin/sh\nfor a in "$@"; do printf "%s\\n" "$a"; done > "$ARGS_FILE"\nexit 3\n'
posix = pytest.mark.skipif(os.name != "posix", reason="the stand-in sqlite3 is a shell script")


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> str:
    path = tmp_path_factory.mktemp("shell") / "store.db"
    with WorldDB(path) as db:  # the bundled model: the CLI opens the store with it
        db.write("I live in Lisbon", scope="ana", valid_at="2024-01-01")
    return str(path)


def fake_bin(folder: Path) -> Path:
    bin_dir = folder / "bin"
    bin_dir.mkdir()
    binary = bin_dir / "sqlite3"
    binary.write_text(FAKE)
    binary.chmod(0o755)
    return bin_dir


def test_the_load_line_names_sqlite_vec_s_loadable() -> None:
    assert load_line() == f".load '{sqlite_vec.loadable_path()}'"


@posix
def test_the_shell_is_exec_d_with_sqlite_vec_and_the_views_to_try(store: str, tmp_path: Path) -> None:
    bin_dir = fake_bin(tmp_path)
    env = {
        **os.environ,
        "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
        "ARGS_FILE": str(tmp_path / "args"),
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
    }
    done = subprocess.run(
        [sys.executable, "-m", "worlddb_lite.cli", "shell", store],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 3  # the shell took the process over: its exit code is the command's
    args = (tmp_path / "args").read_text().splitlines()
    assert args == ["-cmd", load_line(), "-cmd", ".mode box", os.path.abspath(store)]
    assert done.stderr.count("\n") == 1 and "select * from memory" in done.stderr


def test_a_missing_sqlite3_says_how_to_install_it_and_prints_the_load_line(
    store: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # a folder without sqlite3
    monkeypatch.setattr(os, "execv", lambda *_: pytest.fail("nothing to exec"))
    code, out, err = run(capsys, "shell", store)
    assert code == 2 and not out
    assert "sqlite3 shell is not installed" in err and "apt-get install sqlite3" in err
    assert load_line() in err


def test_no_shell_is_opened_on_a_file_that_is_not_a_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(os, "execv", lambda *_: pytest.fail("nothing to exec"))
    code, _, err = run(capsys, "shell", str(tmp_path / "missing.db"))
    assert code == 2 and "worlddb init" in err
    assert not (tmp_path / "missing.db").exists()


@pytest.mark.skipif(
    shutil.which("sqlite3") is None, reason="the sqlite3 shell is not installed (apt-get install sqlite3)"
)
@posix
def test_the_real_shell_reads_the_views_with_sqlite_vec_loaded(store: str) -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    done = subprocess.run(
        [sys.executable, "-m", "worlddb_lite.cli", "shell", store],
        input=".mode list\nselect vec_version() is not null, text from memory where kind = 'Memory';\n",
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "1|I live in Lisbon"


def test_a_store_this_user_may_not_write_is_opened_read_only_and_immutable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(fake_bin(tmp_path)))
    argv = shell_argv(str(tmp_path / "a b.db"), sealed=True)
    assert argv[1] == "-readonly" and argv[-1] == f"file:{tmp_path / 'a%20b.db'}?immutable=1"
