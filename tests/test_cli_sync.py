"""cli.py's sync commands: sync, changes, apply, token, replica (the library's side is tests/test_sync.py).

The commands run in-process through ``main`` (text on stdout, the change set on stdout's binary side),
and a pipe and a terminal run in subprocesses, as a shell would.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import run, run_json, table_digest
from worlddb_lite import WorldDB
from worlddb_lite.cli import main

CLI = [sys.executable, "-m", "worlddb_lite.cli"]


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A store and its replica (the bundled model, loaded once), closed."""
    folder = tmp_path_factory.mktemp("cli_sync")
    with WorldDB(folder / "a.db") as db:
        db.write("Ana likes green tea", scope="ana", valid_at="2024-01-01")
        db.replica(folder / "b.db")
    return folder / "a.db", folder / "b.db"


@pytest.fixture
def pair(built: tuple[Path, Path], tmp_path: Path) -> tuple[str, str]:
    """Private copies of the two replicas (each keeps its own store id)."""
    a, b = tmp_path / "a.db", tmp_path / "b.db"
    shutil.copyfile(built[0], a)
    shutil.copyfile(built[1], b)
    return str(a), str(b)


def write(path: str, text: str, scope: str) -> str:
    with WorldDB(path) as db:
        return db.write(text, scope=scope, valid_at="2024-02-01")


def found(path: str, query: str) -> bool:
    with WorldDB(path) as db:
        return bool(db.search(query, k=1))


def root(path: str) -> str:
    with WorldDB(path) as db:
        return db.root()


def digest(path: str) -> dict[str, Any]:
    with WorldDB(path) as db:
        return table_digest(db)


def token(capsys: pytest.CaptureFixture[str], path: str) -> str:
    code, out, err = run(capsys, "token", path)
    assert code == 0, err
    return out.strip()


# ---- sync ----------------------------------------------------------------------------------------


def test_sync_both_ways_converges_and_says_so(pair: tuple[str, str], capsys: pytest.CaptureFixture[str]) -> None:
    a, b = pair
    write(a, "Ana runs on Sundays", "ana")
    write(b, "Bob plays chess", "bob")
    code, out, err = run(capsys, "sync", a, b)
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0].startswith(f"pull ({b} -> {a}): ") and lines[1].startswith(f"push ({a} -> {b}): ")
    assert "new nodes" in lines[0] and "new node" in lines[1]
    assert lines[2] == f"converged: yes, root {root(a)}"
    assert root(a) == root(b) and found(a, "chess") and found(b, "Sundays")
    echo = run_json(capsys, "sync", a, b)  # what each adopted goes back once, and adds nothing
    assert echo["converged"] and echo["pull"]["nodes"]["added"] == 0 and echo["push"]["nodes"]["added"] == 0
    again = run_json(capsys, "sync", a, b)  # then nothing moves either way
    assert again["converged"] and again["pull"]["records"] == 0 and again["push"]["records"] == 0


def test_pull_only_and_push_only(pair: tuple[str, str], capsys: pytest.CaptureFixture[str]) -> None:
    a, b = pair
    write(a, "Ana runs on Sundays", "ana")
    write(b, "Bob plays chess", "bob")
    pulled = run_json(capsys, "sync", a, b, "--pull")
    assert set(pulled) == {"pull"} and pulled["pull"]["nodes"]["added"] > 0
    assert found(a, "chess") and not found(b, "Sundays")
    code, out, _ = run(capsys, "sync", a, b, "--push")
    assert code == 0 and out.startswith(f"push ({a} -> {b}): ") and "\npull (" not in out
    assert out.splitlines()[-1] == "converged: not checked (--push syncs only part of the two stores)"
    assert found(b, "Sundays") and root(a) == root(b)


def test_pull_and_push_together_is_a_usage_error(pair: tuple[str, str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["sync", *pair, "--pull", "--push"])
    assert info.value.code == 2 and "not allowed with" in capsys.readouterr().err


def test_a_scope_filter_leaves_the_other_scopes_behind(
    pair: tuple[str, str], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    a, b = pair
    write(b, "The quarterly report is due", "work")
    write(b, "Ana's birthday is in June", "ana")
    write(b, "Bob plays chess", "bob")
    code, out, err = run(capsys, "sync", a, b, "--pull", "--scope", "ana", "--scope", "bob")
    assert code == 0, err
    assert out.splitlines()[-1] == "converged: not checked (--scope ana bob syncs only part of the two stores)"
    assert found(a, "birthday") and found(a, "chess") and not found(a, "quarterly")
    # the same filter on a change set that travels as a file
    write(a, "Ana's meeting notes", "work")
    write(a, "Ana swims on Fridays", "ana")
    sent = tmp_path / "ana.bin"
    assert run(capsys, "changes", a, "--since", token(capsys, b), "--scope", "ana", "-o", str(sent))[0] == 0
    assert run(capsys, "apply", b, str(sent))[0] == 0
    assert found(b, "Fridays") and not found(b, "meeting notes")


def test_a_full_sync_after_a_scoped_one_brings_the_rest(
    pair: tuple[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    a, b = pair
    write(b, "The quarterly report is due", "work")
    write(b, "Bob plays chess", "bob")
    assert run(capsys, "sync", a, b, "--pull", "--scope", "bob")[0] == 0
    assert run_json(capsys, "sync", a, b)["converged"]
    assert found(a, "quarterly")


# ---- changes, apply, token -----------------------------------------------------------------------


def test_a_round_trip_through_files(pair: tuple[str, str], capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    a, b = pair
    write(a, "Ana runs on Sundays", "ana")
    write(b, "Bob plays chess", "bob")
    to_b, to_a = tmp_path / "to_b.bin", tmp_path / "to_a.bin"
    code, out, err = run(capsys, "changes", a, "--since", token(capsys, b), "-o", str(to_b))
    assert code == 0, err
    assert out.startswith("wrote ") and f"to {to_b}: changes " in out
    code, out, err = run(capsys, "apply", b, str(to_b))
    assert code == 0, err
    assert out.startswith("applied ") and "roots agree with the sender's: no" in out  # b holds chess, a does not
    written = run_json(capsys, "changes", b, "--since", token(capsys, a), "-o", str(to_a))
    assert written["path"] == str(to_a) and written["records"] > 0 and written["bytes"] == to_a.stat().st_size
    summary = run_json(capsys, "apply", a, str(to_a))
    assert summary["roots_agree"] and summary["nodes"]["added"] > 0
    assert root(a) == root(b) and found(a, "chess") and found(b, "Sundays")
    again = run_json(capsys, "apply", a, str(to_a))  # applying a set twice changes nothing
    assert again["nodes"]["added"] == 0 and again["roots_agree"]


def test_a_restored_receiver_is_told_to_ask_again(
    pair: tuple[str, str], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    a, b = pair
    shutil.copyfile(b, tmp_path / "b-backup.db")
    write(b, "Bob plays chess", "bob")
    assert run(capsys, "sync", a, b)[0] == 0  # a holds b's chess now
    for suffix in ("-wal", "-shm"):
        Path(b + suffix).unlink(missing_ok=True)
    shutil.copyfile(tmp_path / "b-backup.db", b)  # b's disk died: its copy from before comes back
    write(b, "Bob runs", "bob")
    sent = tmp_path / "to_b.bin"
    assert run(capsys, "changes", a, "--since", token(capsys, b), "-o", str(sent))[0] == 0
    code, out, err = run(capsys, "apply", b, str(sent))
    assert code == 0, err
    assert "restored from an older copy" in out and not found(b, "chess")
    assert run(capsys, "changes", a, "--since", token(capsys, b), "-o", str(sent))[0] == 0
    code, out, err = run(capsys, "apply", b, str(sent))
    assert code == 0 and "restored" not in out and found(b, "chess")


def test_a_round_trip_through_stdout_and_stdin(
    pair: tuple[str, str], capsysbinary: pytest.CaptureFixture[bytes], monkeypatch: pytest.MonkeyPatch
) -> None:
    a, b = pair
    write(a, "Ana runs on Sundays", "ana")
    assert main(["token", b]) == 0
    since = capsysbinary.readouterr().out.decode().strip()
    assert main(["changes", a, "--since", since]) == 0
    data = capsysbinary.readouterr().out
    assert data[:1] == b"\x78"  # a zlib stream, nothing printed around it
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data)))
    assert main(["apply", b, "-", "--json"]) == 0
    assert json.loads(capsysbinary.readouterr().out)["roots_agree"]
    assert root(a) == root(b)


def test_a_pipe_between_two_processes(pair: tuple[str, str]) -> None:
    a, b = pair
    write(b, "Bob plays chess", "bob")
    since = subprocess.run([*CLI, "token", a], capture_output=True, text=True, timeout=120, check=True).stdout.strip()
    sender = subprocess.Popen([*CLI, "changes", b, "--since", since], stdout=subprocess.PIPE)
    done = subprocess.run([*CLI, "apply", a, "-"], stdin=sender.stdout, capture_output=True, text=True, timeout=120)
    assert sender.stdout is not None
    sender.stdout.close()
    assert sender.wait(timeout=120) == 0
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("applied ") and "roots agree with the sender's: yes" in done.stdout
    assert found(a, "chess")


def test_a_reader_that_stops_early_gets_a_clear_error(tmp_path: Path) -> None:
    """`worlddb changes DB --since '' | head -c 10`: exit 2 with one line, no traceback, the store fine."""
    store = str(tmp_path / "big.db")
    with WorldDB(store) as db:  # random text: a change set larger than a pipe holds (64 KiB) after compression
        db.write_many([{"text": "note " + os.urandom(600).hex(), "scope": "me"} for _ in range(200)])
    code = f"import sys; from worlddb_lite.cli import main; sys.exit(main(['changes', {store!r}, '--since', '']))"
    done = subprocess.run(
        f"{sys.executable} -c {code!r} | head -c 10 > /dev/null; exit ${{PIPESTATUS[0]}}",
        shell=True,
        executable="/bin/bash",
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2
    assert done.stderr == "worlddb changes: the reader closed the pipe before the whole change set was written\n"
    write(store, "one more note", "me")
    with WorldDB(store) as db:
        assert db.verify().ok


def test_token_prints_the_token_alone(pair: tuple[str, str], capsys: pytest.CaptureFixture[str]) -> None:
    a, b = pair
    with WorldDB(b) as db:
        store_id, expected = db.store_id, db.sync_token()
    code, out, _ = run(capsys, "token", b)
    assert code == 0 and out == expected + "\n"
    assert run_json(capsys, "token", b) == {"token": expected, "store_id": store_id}
    assert out.startswith(store_id + ":") and run_json(capsys, "token", a)["store_id"] != store_id


def test_an_empty_since_sends_everything(
    pair: tuple[str, str], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    a, b = pair
    everything, nothing = tmp_path / "all.bin", tmp_path / "none.bin"
    write(a, "Ana runs on Sundays", "ana")
    full = run_json(capsys, "changes", a, "--since", "", "-o", str(everything))
    assert full["since"] == 0 and full["records"] > 0
    assert run_json(capsys, "apply", b, str(everything))["roots_agree"]
    code, out, _ = run(capsys, "changes", a, "--since", token(capsys, b), "-o", str(nothing))
    assert code == 0 and out.startswith("wrote 0 records ") and f": nothing after change {full['seq']} of " in out


# ---- replica -------------------------------------------------------------------------------------


def test_replica_gives_the_copy_its_own_id(
    pair: tuple[str, str], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    a, _ = pair
    copy = str(tmp_path / "c.db")
    made = run_json(capsys, "replica", a, copy)
    with WorldDB(a) as one, WorldDB(copy) as two:
        assert made["store_id"] == two.store_id != one.store_id and one.root() == two.root()
    code, _, err = run(capsys, "replica", a, copy)
    assert code == 2 and "already exists" in err
    again = run_json(capsys, "replica", a, copy, "--overwrite")
    assert again["store_id"] != made["store_id"]
    write(copy, "Cleo is Ana's cat", "pets")
    assert run_json(capsys, "sync", a, copy)["converged"] and found(a, "Cleo")


# ---- refusals: one line on stderr, exit 2, the store as it was ---------------------------------


def _refused(capsys: pytest.CaptureFixture[str], command: str, *argv: str) -> str:
    code, out, err = run(capsys, command, *argv)
    assert code == 2 and out == ""
    assert err.startswith(f"worlddb {command}: ") and err.count("\n") == 1, err
    return err


@pytest.mark.parametrize("damage", ["missing", "truncated", "flipped", "empty", "not a change set"])
def test_a_bad_change_set_is_refused_and_nothing_changes(
    pair: tuple[str, str], capsys: pytest.CaptureFixture[str], tmp_path: Path, damage: str
) -> None:
    a, b = pair
    write(a, "Ana runs on Sundays", "ana")
    sent = tmp_path / "changes.bin"
    assert run(capsys, "changes", a, "--since", token(capsys, b), "-o", str(sent))[0] == 0
    data = sent.read_bytes()
    if damage == "missing":
        sent.unlink()
    elif damage == "truncated":
        sent.write_bytes(data[: len(data) // 2])
    elif damage == "flipped":
        sent.write_bytes(data[:40] + bytes([data[40] ^ 0xFF]) + data[41:])
    elif damage == "empty":
        sent.write_bytes(b"")
    else:
        assert run(capsys, "export", a, "-o", str(sent))[0] == 0
    before = digest(b)
    err = _refused(capsys, "apply", b, str(sent))
    assert "nothing was applied" in err
    assert digest(b) == before


def test_bad_tokens_and_stores_are_refused(
    pair: tuple[str, str], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    a, b = pair
    out = str(tmp_path / "c.bin")
    assert "not a sync token" in _refused(capsys, "changes", a, "--since", "nonsense", "-o", out)
    assert "own" in _refused(capsys, "changes", a, "--since", token(capsys, a), "-o", out)
    assert "does not exist" in _refused(capsys, "changes", a, "--since", "", "-o", str(tmp_path / "no" / "c.bin"))
    assert not os.path.exists(out)
    assert "not a store file" in _refused(capsys, "sync", a, str(tmp_path / "missing.db"))
    shutil.copyfile(a, tmp_path / "copy.db")  # a plain copy keeps a's store id
    before = digest(a)
    assert "worlddb replica" in _refused(capsys, "sync", a, str(tmp_path / "copy.db"))
    assert digest(a) == before


@pytest.mark.skipif(os.name != "posix", reason="needs a pseudo-terminal")
def test_binary_is_never_written_to_or_read_from_a_terminal(pair: tuple[str, str]) -> None:
    import pty

    a, b = pair
    before = digest(b)
    main_end, terminal = pty.openpty()
    try:
        wrote = subprocess.run(
            [*CLI, "changes", a, "--since", ""], stdout=terminal, stderr=subprocess.PIPE, text=True, timeout=120
        )
        read = subprocess.run([*CLI, "apply", b, "-"], stdin=terminal, capture_output=True, text=True, timeout=120)
    finally:
        os.close(terminal)
        os.close(main_end)
    assert wrote.returncode == 2 and "refusing to write a binary change set to a terminal" in wrote.stderr
    assert "-o FILE" in wrote.stderr
    assert read.returncode == 2 and "refusing to read a binary change set from a terminal" in read.stderr
    assert digest(b) == before
