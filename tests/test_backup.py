"""maintenance.py: online backups (safe under concurrent writers) and TRUNCATE checkpoints."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from worlddb_lite import InvalidInput, WorldDB
from worlddb_lite.cli import main

from .conftest import FakeEmbedder

ROOT = Path(__file__).resolve().parents[1]


def test_a_backup_restores_and_recalls(file_db_path: str, tmp_path: Path) -> None:
    with WorldDB(file_db_path, embedder=FakeEmbedder()) as db:
        ref = db.write("the spare key is under the blue flowerpot", scope="alice")
        db.write_many([{"text": f"filler memory {i}", "scope": "alice"} for i in range(50)])
        dest = tmp_path / "copy.db"
        result = db.backup(dest, verify=True)
        assert result["verified"] and result["pages"] > 0 and dest.stat().st_size == result["bytes"]
        assert not Path(f"{dest}-wal").exists() and not Path(f"{dest}.partial").exists()
        root = db.root()
    restored = tmp_path / "restored.db"
    shutil.copy(dest, restored)  # a backup is one self-contained file
    with WorldDB(restored, embedder=FakeEmbedder(), create=False) as copy:
        assert copy.verify().ok and copy.root() == root
        assert copy.recall("where is the spare key", scope="alice").hits[0].node.id == ref


def test_backup_refuses_to_overwrite_or_copy_onto_itself(file_db_path: str, tmp_path: Path) -> None:
    with WorldDB(file_db_path, embedder=FakeEmbedder()) as db:
        db.write("x")
        with pytest.raises(InvalidInput, match="is the store itself"):
            db.backup(file_db_path, overwrite=True)
        dest = tmp_path / "copy.db"
        dest.write_text("precious")
        with pytest.raises(InvalidInput, match="already exists"):
            db.backup(dest)
        assert dest.read_text() == "precious"
        db.backup(dest, overwrite=True)
        with pytest.raises(InvalidInput, match="does not exist"):
            db.backup(tmp_path / "no" / "such" / "dir.db")
        with pytest.raises(InvalidInput, match="inside a batch"), db.batch():
            db.backup(tmp_path / "other.db")


def test_a_memory_store_backs_up_to_a_file(tmp_path: Path) -> None:
    with WorldDB(":memory:", embedder=FakeEmbedder()) as db:
        db.write("held in memory only", scope="s")
        db.backup(tmp_path / "m.db", verify=True)
    with WorldDB(tmp_path / "m.db", embedder=FakeEmbedder(), create=False) as copy:
        assert copy.search("memory")[0][0].content == "held in memory only"


WRITER = textwrap.dedent("""
    import sys, time
    from worlddb_lite import WorldDB
    db = WorldDB(sys.argv[1], embedder=None, dim=8)
    print("ready", flush=True)
    i = 0
    while True:
        db.write(f"concurrent memory {i}", scope="w")
        i += 1
""")


def test_backups_taken_while_another_process_writes_verify(file_db_path: str, tmp_path: Path) -> None:
    WorldDB(file_db_path, embedder=None, dim=8).close()
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    writer = subprocess.Popen([sys.executable, "-c", WRITER, file_db_path], stdout=subprocess.PIPE, env=env, text=True)
    try:
        assert writer.stdout is not None and writer.stdout.readline().strip() == "ready"
        counts = []
        with WorldDB(file_db_path, embedder=None, dim=8) as db:
            for n in range(4):
                time.sleep(0.3)
                dest = tmp_path / f"b{n}.db"
                db.backup(dest, verify=True)
                with WorldDB(dest, embedder=None, dim=8, create=False) as copy:
                    counts.append(copy.stats()["nodes"])
        assert counts == sorted(counts) and counts[-1] > counts[0]  # each copy a later snapshot
    finally:
        writer.kill()
        writer.wait()


def test_checkpoint_empties_the_wal_so_a_plain_copy_is_whole(file_db_path: str, tmp_path: Path) -> None:
    db = WorldDB(file_db_path, embedder=FakeEmbedder())
    try:
        ids = [db.write(f"memory {i}", scope="s") for i in range(20)]
        assert Path(file_db_path + "-wal").stat().st_size > 0  # recent writes live in the WAL only
        result = db.checkpoint()
        assert result["busy"] is False and Path(file_db_path + "-wal").stat().st_size == 0
        shutil.copy(file_db_path, tmp_path / "plain.db")  # the store is still open
    finally:
        db.close()
    with WorldDB(tmp_path / "plain.db", embedder=FakeEmbedder(), create=False) as copy:
        assert copy.verify().ok and {n.id for n in copy.nodes(type="Memory")} == set(ids)


def test_cli_backup_and_checkpoint(file_db_path: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with WorldDB(file_db_path) as db:  # the bundled model: the CLI opens stores with it
        db.write("a memory for the command line", scope="me")
    dest = tmp_path / "cli.db"
    assert main(["backup", file_db_path, str(dest), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["verified"] is True
    assert main(["backup", file_db_path, str(dest)]) == 2
    assert "already exists" in capsys.readouterr().err
    assert main(["checkpoint", file_db_path, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["busy"] is False
