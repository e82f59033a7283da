"""Errors at every edge (issue 23): a full disk, a damaged file, a bad record late in a file, deep
JSON, a forged full-text row, the root world and a negative budget. Each is a clear WorldDBError
and leaves the store as it was."""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import apsw
import pytest

from worlddb_lite import (
    ConversationIn,
    InvalidInput,
    NotAStore,
    SessionIn,
    StoreUnwritable,
    TurnIn,
    WorldDB,
    WorldDBError,
    load_conversations,
)
from worlddb_lite.store import connection

from .conftest import FakeClock, FakeEmbedder, run, table_digest


def one_line_error(code: int, out: str, err: str, command: str) -> str:
    assert code == 2, err
    assert out == ""
    assert err.count("\n") == 1 and err.startswith(f"worlddb {command}: "), err
    assert "Traceback" not in err
    return err


@pytest.fixture(scope="module")
def cli_store(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A small store with the bundled model (as the CLI opens it), closed and checkpointed."""
    path = tmp_path_factory.mktemp("edges") / "store.db"
    with WorldDB(path) as db:
        for i in range(30):
            db.write(f"memory number {i}: I visited Lisbon and Porto in spring", scope="me")
    return str(path)


@pytest.fixture
def cli_copy(cli_store: str, tmp_path: Path) -> str:
    copy = tmp_path / "copy.db"
    shutil.copyfile(cli_store, copy)
    return str(copy)


# ---- a full disk ------------------------------------------------------------------------------


def _failing_open(error: type[apsw.Error]) -> Callable[..., Any]:
    """apsw.Connection whose first statement fails as on a full disk (the -shm file cannot be sized)."""
    real = apsw.Connection

    class Full:
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            self._conn = real(*args, **kwargs)

        def execute(self, *args: Any, **kwargs: Any) -> Any:
            raise error("disk I/O error" if error is apsw.IOError else "database or disk is full")

        def __getattr__(self, name: str) -> Any:
            return getattr(self._conn, name)

    return Full


@pytest.mark.parametrize("error", [apsw.IOError, apsw.FullError], ids=["ioerror", "full"])
def test_a_full_disk_on_opening_is_a_clear_error(
    error: type[apsw.Error], cli_copy: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    before = Path(cli_copy).read_bytes()
    monkeypatch.setattr(connection.apsw, "Connection", _failing_open(error))
    with pytest.raises(StoreUnwritable, match="full") as info:
        WorldDB(cli_copy, embedder=FakeEmbedder())
    assert isinstance(info.value, WorldDBError) and isinstance(info.value, OSError)
    assert "Free some space" in str(info.value)
    for argv in (["stats", cli_copy], ["write", cli_copy, "a note"], ["recall", cli_copy, "Lisbon"]):
        err = one_line_error(*run(capsys, *argv), argv[0])
        assert "disk" in err and "full" in err
    assert Path(cli_copy).read_bytes() == before


@pytest.mark.parametrize("error", [apsw.IOError, apsw.FullError, apsw.CantOpenError])
def test_a_connection_that_cannot_be_made_is_a_clear_error(
    error: type[apsw.Error], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise error("unable to open database file")

    monkeypatch.setattr(connection.apsw, "Connection", refuse)
    with pytest.raises(WorldDBError):
        WorldDB(tmp_path / "new.db", embedder=FakeEmbedder())


def test_a_full_disk_while_writing_is_a_clear_error(tmp_path: Path, clock: FakeClock) -> None:
    with WorldDB(tmp_path / "s.db", embedder=FakeEmbedder(), clock=clock) as db:
        db.write("I live in Lisbon", scope="me")
        with pytest.raises(StoreUnwritable, match="disk is full"), connection.translate():
            raise apsw.FullError("database or disk is full")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="RLIMIT_FSIZE and SIGXFSZ as on Linux")
def test_a_real_file_size_limit_reads_as_a_full_disk(cli_store: str, tmp_path: Path) -> None:
    """No tmpfs to fill here: a file size limit of one byte fails the -shm file's sizing as a full disk does."""
    copy = tmp_path / "limited.db"
    shutil.copyfile(cli_store, copy)
    before = copy.read_bytes()
    script = (
        "import resource, signal, sys\n"
        "signal.signal(signal.SIGXFSZ, signal.SIG_IGN)\n"
        "resource.setrlimit(resource.RLIMIT_FSIZE, (1, 1))\n"
        "from worlddb_lite.cli import main\n"
        "sys.exit(main(sys.argv[1:]))\n"
    )
    for argv in (["stats", str(copy)], ["write", str(copy), "a note"]):
        done = subprocess.run(  # pipes, not files: the limit must not cut the child's own output
            [sys.executable, "-c", script, *argv], capture_output=True, text=True, timeout=120, check=False
        )
        assert done.returncode == 2, done.stderr
        assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr, done.stderr
        assert "full" in done.stderr and "writable" in done.stderr
    assert copy.read_bytes() == before


# ---- a damaged store --------------------------------------------------------------------------


def test_a_truncated_store_is_called_damaged(
    cli_store: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cut = tmp_path / "cut.db"
    cut.write_bytes(Path(cli_store).read_bytes()[:4096])
    before = cut.read_bytes()
    with pytest.raises(NotAStore, match="damaged store") as info:
        WorldDB(cut, embedder=FakeEmbedder())
    assert "restore it from a backup" in str(info.value) and "not a SQLite database" not in str(info.value)
    for command in ("stats", "verify"):
        err = one_line_error(*run(capsys, command, str(cut)), command)
        assert "damaged" in err and "backup" in err and "give the path of a store" not in err
    assert cut.read_bytes() == before


def test_a_store_with_garbage_after_its_header_is_called_damaged(cli_store: str, tmp_path: Path) -> None:
    data = bytearray(Path(cli_store).read_bytes())
    data[100:] = os.urandom(len(data) - 100)
    bad = tmp_path / "garbage.db"
    bad.write_bytes(bytes(data))
    with pytest.raises(NotAStore, match="damaged store.*backup"):
        WorldDB(bad, embedder=FakeEmbedder())
    assert bad.read_bytes() == bytes(data)


def test_a_file_that_is_not_sqlite_keeps_its_message(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    other = tmp_path / "notes.txt"
    other.write_bytes(b"these are my notes, not a database\n" * 200)
    with pytest.raises(NotAStore, match="not a SQLite database.*give the path of a store"):
        WorldDB(other, embedder=FakeEmbedder())
    err = one_line_error(*run(capsys, "stats", str(other)), "stats")
    assert "not a SQLite database" in err and "damaged" not in err


# ---- ingest checks the whole file first -------------------------------------------------------


def _jsonl(path: Path, lines: list[str]) -> Path:
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_a_lone_surrogate_in_a_later_conversation_stops_the_file_before_anything_lands(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = _jsonl(
        tmp_path / "two.jsonl",
        [
            '{"conversation": "first", "text": "I live in Lisbon", "speaker": "ana"}',
            '{"conversation": "first", "text": "I work at a bakery", "speaker": "ana"}',
            '{"conversation": "second", "text": "broken \\ud800 escape", "speaker": "bo"}',
        ],
    )
    with pytest.raises(InvalidInput, match=r"conversation 'second', session '1', turn 3: the turn's text") as info:
        load_conversations(source, "jsonl")
    assert "lone surrogate" in str(info.value)
    target = tmp_path / "new.db"
    err = one_line_error(*run(capsys, "ingest", str(target), str(source), "--format", "jsonl"), "ingest")
    assert "'second'" in err and "turn 3" in err and "surrogate" in err
    assert not target.exists()  # checked before the store was even opened


def test_a_lone_surrogate_into_an_existing_store_writes_nothing(
    cli_copy: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = _jsonl(
        tmp_path / "two.jsonl",
        [
            '{"conversation": "first", "text": "I live in Lisbon"}',
            '{"conversation": "second", "text": "fine"}',
            '{"conversation": "second", "text": "\\udfff"}',
        ],
    )
    before = Path(cli_copy).read_bytes()
    one_line_error(*run(capsys, "ingest", cli_copy, str(source), "--format", "jsonl"), "ingest")
    assert Path(cli_copy).read_bytes() == before


def test_ingest_refuses_a_bad_turn_before_writing(db: WorldDB) -> None:
    before = table_digest(db)
    good = SessionIn("1", None, [TurnIn("I live in Lisbon", "ana")])
    bad = SessionIn("2", None, [TurnIn("fine", "ana"), TurnIn("half \ud800 a character", "ana", "t2")])
    with pytest.raises(InvalidInput, match="session '2', turn t2: the turn's text holds a lone surrogate"):
        db.ingest(ConversationIn("c", ["me"], [good, bad]))
    assert table_digest(db) == before


def test_a_future_date_later_in_a_file_stops_it_at_loading(tmp_path: Path) -> None:
    source = _jsonl(
        tmp_path / "dates.jsonl",
        [
            '{"conversation": "first", "text": "I live in Lisbon", "date": "2024-01-01"}',
            '{"conversation": "second", "text": "later", "date": "2999-01-01"}',
        ],
    )
    with pytest.raises(InvalidInput, match="conversation 'second'.*after now"):
        load_conversations(source, "jsonl")


# ---- deeply nested JSON -----------------------------------------------------------------------


def test_deeply_nested_json_in_an_ingest_file_is_invalid_input(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    deep = "[" * 100_000 + "]" * 100_000
    lines = tmp_path / "deep.jsonl"
    lines.write_text('{"text": "hello"}\n{"text": "x", "speaker": ' + deep + "}\n", encoding="utf-8")
    whole = tmp_path / "deep.json"
    whole.write_text(deep, encoding="utf-8")
    with pytest.raises(InvalidInput, match="deep.jsonl line 2: its JSON nests"):
        load_conversations(lines, "jsonl")
    for fmt in ("locomo", "longmemeval", "beam"):
        with pytest.raises(InvalidInput, match="too deeply"):
            load_conversations(whole, fmt)
    target = tmp_path / "new.db"
    err = one_line_error(*run(capsys, "ingest", str(target), str(lines), "--format", "jsonl"), "ingest")
    assert "too deeply" in err
    assert not target.exists()


def test_nested_props_that_parse_but_cannot_be_stored_stop_the_file(tmp_path: Path) -> None:
    nested: Any = "deep"
    for _ in range(500):  # json.loads reads this; the store refuses it (hashing.MAX_DEPTH)
        nested = [nested]
    samples = [
        {"sample_id": "ok", "conversation": {"session_1": [{"speaker": "a", "text": "I live in Lisbon"}]}},
        {"sample_id": "deep", "conversation": {"session_1": [{"speaker": "a", "text": "hi", "img_url": nested}]}},
    ]
    source = tmp_path / "locomo.json"
    source.write_text(json.dumps(samples), encoding="utf-8")
    with pytest.raises(InvalidInput, match="conversation 'deep', session '1', turn 0: its props cannot be stored"):
        load_conversations(source, "locomo")


def _nested_list(depth: int) -> Any:
    value: Any = []
    for _ in range(depth):
        value = [value]
    return value


def test_deeply_nested_props_are_invalid_input_and_write_nothing(db: WorldDB) -> None:
    db.write("I live in Lisbon", scope="me")
    before = table_digest(db)
    looped: dict[str, Any] = {}
    looped["self"] = looped
    for props in ({"x": _nested_list(100_000)}, {"x": _nested_list(65)}, looped):
        with pytest.raises(InvalidInput, match="nest deeper than 64 levels"):
            db.write("a note", scope="me", props=props)
        with pytest.raises(InvalidInput, match="nest deeper than 64 levels"):
            db.add_turn("a turn", scope="me", props=props, extractor=None)
    assert table_digest(db) == before
    db.write("a note", scope="me", props={"x": _nested_list(60)})  # deep, but within the limit


# ---- verify and the full-text index -----------------------------------------------------------


def _fts_nid(path: str, text: str) -> int:
    conn = apsw.Connection(path)
    try:
        rows = conn.execute("select nid from node_text where content like ?", (text + "%",)).fetchall()
    finally:
        conn.close()
    assert len(rows) == 1, rows
    return int(rows[0][0])


def _raw(path: str, sql: str, params: tuple[object, ...]) -> None:
    conn = apsw.Connection(path)
    try:
        with connection.engine_write(conn):  # a forged session: the guards refuse any other raw write
            conn.execute(sql, params)
    finally:
        conn.close()


def _conversation_store(path: str, clock: FakeClock) -> None:
    turns = [
        TurnIn("I just moved to Porto with my sister Marta", "ana"),
        TurnIn("How do you like the city so far?", "assistant"),
        TurnIn("Love it. She works at the harbour museum.", "ana"),
        TurnIn("We go running by the river every morning", "ana"),
        TurnIn("Sounds lovely", "bo"),
        TurnIn("Marta wants to adopt a dog named Pepper", "ana"),
    ]
    with WorldDB(path, embedder=FakeEmbedder(), clock=clock) as db:
        db.ingest(
            ConversationIn("chat", ["ana"], [SessionIn("1", "2024-03-01", turns)]),
            bridge=True,
        )
        db.write("I prefer tea over coffee, always in the morning", scope="ana")
        for text, who in (("I started a pottery class", "ana"), ("Which one?", "bo"), ("The one near Bolhão", "ana")):
            clock.advance(dt.timedelta(seconds=60))
            db.add_turn(text, scope="live", speaker=who)


def test_a_clean_store_with_windows_and_live_turns_verifies_clean(tmp_path: Path, clock: FakeClock) -> None:
    path = str(tmp_path / "clean.db")
    _conversation_store(path, clock)
    with WorldDB(path, embedder=FakeEmbedder(), clock=clock) as db:
        for deep in (False, True):
            report = db.verify(deep=deep)
            assert report.ok, report.violations


def _reindex(conn: apsw.Connection, nid: int, **forged: str) -> None:
    """Rewrite a full-text row around the engine: node_fts is contentless, so FTS5's 'delete' command with
    the values it was indexed with (node_text), then an insert with some of them ``forged``."""
    name, content, context = conn.execute(
        "select name, content, context from node_text where nid = ?", (nid,)
    ).fetchone()
    conn.execute(
        "insert into node_fts (node_fts, rowid, name, content, context) values ('delete', ?, ?, ?, ?)",
        (nid, name, content, context),
    )
    row = {"name": name, "content": content, "context": context, **forged}
    conn.execute(
        "insert into node_fts (rowid, name, content, context) values (?, ?, ?, ?)",
        (nid, row["name"], row["content"], row["context"]),
    )


Forge = Callable[[apsw.Connection, int], object]
FORGED: dict[str, tuple[Forge, str]] = {  # how, what verify --deep names (plain verify finds none of them)
    # index_text holds what a row adds to its node's blob
    "context": (
        lambda c, n: c.execute("update index_text set context = 'injected words' where nid = ?", (n,)),
        "neighbours",
    ),
    "added": (
        lambda c, n: c.execute("update index_text set added = 'injected words' where nid = ?", (n,)),
        "neighbours",
    ),
    "index-context": (lambda c, n: _reindex(c, n, context="injected words"), "around the engine"),
    "index-content-replaced": (lambda c, n: _reindex(c, n, content="Hate it. injected words"), "around the engine"),
    "index-name": (lambda c, n: _reindex(c, n, name="Mallory"), "around the engine"),
}


@pytest.mark.parametrize("case", list(FORGED))
def test_verify_finds_words_injected_into_a_full_text_row(case: str, tmp_path: Path, clock: FakeClock) -> None:
    forge, says = FORGED[case]
    path = str(tmp_path / "forged.db")
    _conversation_store(path, clock)
    nid = _fts_nid(path, "Love it. She works")
    conn = apsw.Connection(path)
    try:
        with connection.engine_write(conn):  # a forged session: the guards refuse any other raw write
            forge(conn, nid)
    finally:
        conn.close()
    with WorldDB(path, embedder=FakeEmbedder(), clock=clock) as db:
        found = [v for v in db.verify(deep=True).violations if v.invariant == "7-indexes"]
        assert found and db.verify().ok
    assert any(says in v.detail for v in found), found
    if says == "neighbours":
        assert "injected" in found[0].detail


def test_cli_verify_deep_reports_injected_context(cli_copy: str, capsys: pytest.CaptureFixture[str]) -> None:
    nid = _fts_nid(cli_copy, "memory number 7:")
    _raw(cli_copy, "insert or replace into index_text (nid, added, context) values (?, null, 'injected words')", (nid,))
    code, out, _ = run(capsys, "verify", cli_copy, "--deep")
    assert code == 1 and "injected" in out, out


def test_verify_reports_full_text_rows_of_missing_nodes(tmp_path: Path, clock: FakeClock) -> None:
    path = str(tmp_path / "rows.db")
    _conversation_store(path, clock)
    _raw(path, "insert into node_fts (rowid, name, content, context) values (99999, '', 'ghost', null)", ())
    _raw(
        path,
        "insert into node_fts (node_fts, rowid, name, content, context) "
        "select 'delete', nid, name, content, context from node_text where nid = ?",
        (_fts_nid(path, "Sounds lovely"),),
    )
    with WorldDB(path, embedder=FakeEmbedder(), clock=clock) as db:
        details = " | ".join(v.detail for v in db.verify().violations)
    assert "full-text row 99999 belongs to no node" in details and "has text but no full-text row" in details


# ---- the root world and the context budget ----------------------------------------------------


def test_the_root_world_cannot_be_retired_or_retracted(db: WorldDB) -> None:
    db.write("I live in Lisbon", scope="me")
    before = table_digest(db)
    for act in (db.retire, db.retract):
        with pytest.raises(InvalidInput, match="root world cannot be retired or retracted"):
            act(db.root_id)
    assert table_digest(db) == before
    assert db.verify().ok


def test_cli_retire_of_the_root_is_refused(cli_copy: str, capsys: pytest.CaptureFixture[str]) -> None:
    with WorldDB(cli_copy) as db:
        root = db.root_id
    before = Path(cli_copy).read_bytes()
    err = one_line_error(*run(capsys, "retire", cli_copy, root), "retire")
    assert "root world" in err
    assert Path(cli_copy).read_bytes() == before


@pytest.mark.parametrize("budget", ["-5", "0"])
def test_a_context_budget_below_one_is_refused_by_the_cli_as_by_the_api(
    budget: str, cli_copy: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    with WorldDB(cli_copy) as db, pytest.raises(InvalidInput, match="budget must be a whole number from 1"):
        db.context("Lisbon", budget=int(budget))
    called: list[str] = []
    monkeypatch.setattr(WorldDB, "recall", lambda *a, **k: called.append("recall"))  # refused before any recall
    err = one_line_error(*run(capsys, "recall", cli_copy, "Lisbon", "--context", "--budget", budget), "recall")
    assert "budget must be a whole number from 1" in err
    assert called == []
