"""Export and import (sync/transfer.py): round trips keep ids, roots and history; bad files write nothing."""

from __future__ import annotations

import datetime as dt
import io
import json
import re
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import START, FakeClock, FakeEmbedder, row_counts, table_digest
from worlddb_lite import WorldDB
from worlddb_lite.cli import main
from worlddb_lite.errors import InvalidInput
from worlddb_lite.store.hashing import canonical_json, node_id
from worlddb_lite.text.extract import RuleExtractor

LATER = dt.datetime(2026, 6, 1, tzinfo=dt.UTC)
QUERIES = ("where does alice live", "Maria sister", "tea")


def _open(path: Path, start: dt.datetime | None = None) -> WorldDB:
    return WorldDB(str(path), embedder=FakeEmbedder(), clock=FakeClock(start) if start else FakeClock())


@pytest.fixture
def source(tmp_path: Path) -> WorldDB:
    """A small store: two scopes, facts and a superseded version, a retired note, an alias, a merge proposal."""
    db = _open(tmp_path / "source.db")
    first = db.write("I live in Lisbon", scope="alice", extractor=RuleExtractor(), valid_at="2024-01-01")
    db.amend(first, "I live in Porto", valid_at="2024-06-01")
    db.write("My sister Maria works at Google", scope="alice", extractor=RuleExtractor())
    old = db.write("The wifi password is hunter2", scope="alice")
    db.retire(old)
    db.write("Bob likes tea", scope="bob", extractor=RuleExtractor())
    a = db.write("Dana", scope="alice", type="Entity", name="Dana")
    b = db.write("Dana S.", scope="alice", type="Entity", name="Dana S.")
    db.add_alias(a, "my manager")
    db.link(a, b, "same_as")
    yield db
    db.close()


def _lines(db: WorldDB, scope: str | None = None) -> list[str]:
    return [json.dumps(record) for record in db.export(scope)]


def _answers(db: WorldDB, scope: str | None = None) -> list[list[str]]:
    return [[hit.node.id for hit in db.recall(q, scope=scope, k=5).hits] for q in QUERIES]


def test_round_trip_into_an_empty_store(source: WorldDB, tmp_path: Path) -> None:
    lines = _lines(source)
    header = json.loads(lines[0])
    assert header["format"] == "worlddb-export" and header["store_root"] == source.root_id
    with _open(tmp_path / "copy.db", LATER) as copy:
        summary = copy.import_records(lines)
        assert summary["roots_agree"] and summary["nodes"]["existing"] == 0
        assert {w["id"] for w in summary["worlds"]} == {source.scope("alice"), source.scope("bob")}
        assert {n.id for n in source.nodes()} == {n.id for n in copy.nodes()}
        for world in header["worlds"]:
            assert copy.root(world) == source.root(world)
        report = copy.verify(deep=True)
        assert report.ok, report.violations
        assert _answers(copy) == _answers(source)
        for node in source.nodes():
            if node.type == "Memory":
                assert [v.id for v in copy.history(node.id)] == [v.id for v in source.history(node.id)]
                kept = copy.read(node.id)
                assert (kept.invalid_at, kept.retired, kept.superseded_by) == (
                    node.invalid_at,
                    node.retired,
                    node.superseded_by,
                )
        assert [(p.a, p.b, p.status) for p in copy.merge_proposals(None)] == [
            (p.a, p.b, p.status) for p in source.merge_proposals(None)
        ]
        assert copy.lookup_alias("my manager") == source.lookup_alias("my manager")


def test_second_import_changes_nothing(source: WorldDB, tmp_path: Path) -> None:
    lines = _lines(source)
    with _open(tmp_path / "copy.db", LATER) as copy:
        first = copy.import_records(lines)
        before, counts = table_digest(copy), row_counts(copy)
        again = copy.import_records(lines)
        assert again["nodes"]["added"] == 0 and again["edges"]["added"] == 0
        assert again["nodes"]["existing"] == first["nodes"]["added"]
        assert again["worlds"] == first["worlds"]
        assert row_counts(copy) == counts and table_digest(copy) == before  # root_log included


def test_import_into_a_store_with_its_own_history(source: WorldDB, tmp_path: Path) -> None:
    """Its root world logged roots without the imported scope, dated before them: the replay still agrees."""
    with _open(tmp_path / "other.db", LATER) as other:
        other.write("Carol has a cat", scope="carol", extractor=RuleExtractor())
        summary = other.import_records(_lines(source, "alice"))
        assert summary["roots_agree"]
        report = other.verify(deep=True)
        assert report.ok, report.violations


def test_receiver_clock_behind_the_source(source: WorldDB, tmp_path: Path) -> None:
    """Hours behind (a clock set to local time as UTC): the import follows the source's times."""
    with _open(tmp_path / "copy.db", START - dt.timedelta(hours=20)) as copy:
        copy.import_records(_lines(source))
        report = copy.verify(deep=True)
        assert report.ok, report.violations
        copy.write("after the import", scope="alice")
        assert copy.verify(deep=True).ok


def test_receiver_clock_years_behind_the_source_is_told(source: WorldDB, tmp_path: Path) -> None:
    """Issue 35: a store's clock follows the latest belief time it adopts, so one years ahead of it (a device
    without a real-time clock, or a forged file) is refused, not adopted: every later write would be dated then."""
    with _open(tmp_path / "copy.db", dt.datetime(2020, 1, 1, tzinfo=dt.UTC)) as copy:
        before = table_digest(copy)
        with pytest.raises(InvalidInput, match="more than 1 day ahead of this store's clock .* is wrong"):
            copy.import_records(_lines(source))
        assert table_digest(copy) == before


def test_tighter_close_applies_and_never_reopens(source: WorldDB, tmp_path: Path) -> None:
    note = source.write("Buy milk", scope="alice", valid_at="2024-03-01")
    with _open(tmp_path / "copy.db", LATER) as copy:
        copy.import_records(_lines(source))
        source.retire(note, at="2024-04-01")
        summary = copy.import_records(_lines(source))
        assert summary["nodes"]["tightened"] == 1
        assert copy.read(note).invalid_at == source.read(note).invalid_at
        assert summary["roots_agree"]  # closed_at is carried, so the roots still agree
        assert copy.verify(deep=True).ok
    with _open(tmp_path / "older.db", LATER) as older:  # a close the receiver holds stays closed
        older.import_records(_lines(source))
        lines = [json.loads(x) for x in _lines(source)]
        for record in lines:
            if record.get("id") == note:
                record.update(invalid_at=None, closed_at=None, retired=False, changes=[])
        older.import_records([json.dumps(r) for r in lines])
        assert older.read(note).invalid_at is not None and older.read(note).retired


def test_scope_export_holds_only_that_scope(source: WorldDB, tmp_path: Path) -> None:
    lines = _lines(source, "alice")
    text = "\n".join(lines)
    assert "Bob likes tea" not in text and "I live in Porto" in text
    with _open(tmp_path / "copy.db", LATER) as copy:
        summary = copy.import_records(lines)
        assert [w["id"] for w in summary["worlds"]] == [source.scope("alice")] and summary["roots_agree"]
        assert not copy.search("tea")
        assert _answers(copy, "alice") == _answers(source, "alice")
        assert copy.verify(deep=True).ok


def test_shared_memory_comes_with_the_scope_that_holds_it(tmp_path: Path) -> None:
    with _open(tmp_path / "source.db") as db:
        home = db.scope("home")
        note = db.write("The boiler is serviced in May", scope="alice")
        db.link(home, note, "contains")
        db.write("Alice's private note", scope="alice")
        lines = _lines(db, "home")
    text = "\n".join(lines)
    assert "boiler" in text and "private note" not in text
    with _open(tmp_path / "copy.db", LATER) as copy:
        assert copy.import_records(lines)["roots_agree"]
        assert [h.node.id for h in copy.recall("boiler", scope="home").hits] == [note]
        assert copy.verify(deep=True).ok


def test_purged_text_never_leaves(source: WorldDB, tmp_path: Path) -> None:
    secret = source.write("My bank PIN is 4711", scope="alice")
    source.purge(secret)
    lines = _lines(source)
    assert "4711" not in re.sub(r"[0-9a-f]{64}", "", "\n".join(lines))  # ids and roots are hashes: may hold it
    (tomb,) = [json.loads(x) for x in lines if secret in x and '"kind": "node"' in x]
    assert tomb["body"] is None and tomb["purged_at"]
    with _open(tmp_path / "copy.db", LATER) as copy:
        assert copy.import_records(lines)["roots_agree"]
        assert copy.read(secret).purged
        assert copy.verify(deep=True).ok


def _refused(copy: WorldDB, lines: list[str], *words: str) -> None:
    before = table_digest(copy)
    with pytest.raises(InvalidInput) as caught:
        copy.import_records(lines)
    for word in words:
        assert word in str(caught.value)
    assert table_digest(copy) == before


def test_bad_files_are_refused_whole(source: WorldDB, tmp_path: Path) -> None:
    lines = _lines(source)
    with _open(tmp_path / "copy.db", LATER) as copy:
        copy.write("already here", scope="zed")
        _refused(copy, [*lines[:5], lines[5][: len(lines[5]) // 2], *lines[6:]], "line 6", "JSON")
        tampered = json.loads(lines[3])
        tampered["body"] = tampered["body"].replace("Lisbon", "Paris").replace("alice", "mallory")
        _refused(copy, [*lines[:3], json.dumps(tampered), *lines[4:]], "line 4", "body")
        header = json.loads(lines[0])
        _refused(copy, [json.dumps({**header, "format": "something-else"}), *lines[1:]], "line 1", "format")
        _refused(copy, [json.dumps({**header, "version": 99}), *lines[1:]], "line 1", "version")
        orphan = json.loads(lines[3])
        orphan["parent"] = "ab" * 32
        _refused(copy, [lines[0], json.dumps(orphan)], "line 2", "parent")
        _refused(copy, [], "empty")


def test_every_field_that_reaches_sql_is_checked_first(tmp_path: Path) -> None:
    # review: alias.source, a proposal's score/tier/decided_at and queued work's speaker/said_in went unchecked
    with _open(tmp_path / "queued.db") as db:
        db.write("My sister Rita lives in Porto", scope="ana", extractor=RuleExtractor())
        db.write("I moved to Braga", scope="ana", deferred=True)
        a, b = (db.write(n, scope="ana", type="Entity", name=n) for n in ("Dana", "Dana S."))
        db.add_alias(a, "my manager", source="a note")
        db.link(a, b, "same_as")
        lines = _lines(db)
    records = [json.loads(line) for line in lines]
    cases = [("alias", "source", []), ("proposal", "score", "high"), ("proposal", "tier", 3)]
    cases += [("proposal", "decided_at", "soon"), ("queued", "speaker", 5), ("queued", "said_in", {})]
    with _open(tmp_path / "copy.db", LATER) as copy:
        for kind, field, value in cases:
            at = next(i for i, r in enumerate(records) if r["kind"] == kind)
            bad = [*lines[:at], json.dumps({**records[at], field: value}), *lines[at + 1 :]]
            _refused(copy, bad, f"line {at + 1}", field)


def test_cli_round_trip_with_stdin(tmp_path: Path, monkeypatch: Any, capsys: Any) -> None:
    path = str(tmp_path / "source.db")
    with WorldDB(path) as db:  # the bundled model, which the CLI opens stores with
        db.write("I live in Lisbon", scope="alice", extractor=RuleExtractor())
        db.write("Bob likes tea", scope="bob")
    out = tmp_path / "memories.jsonl"
    assert main(["export", path, "--scope", "alice", "-o", str(out), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["records"] == len(out.read_text().splitlines())
    assert main(["export", path]) == 0
    whole = capsys.readouterr().out
    assert json.loads(whole.splitlines()[0])["scope"] is None
    copy = str(tmp_path / "copy.db")
    monkeypatch.setattr(sys, "stdin", io.StringIO(whole))
    assert main(["import", copy, "-", "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["roots_agree"] and summary["nodes"]["added"] > 0
    assert main(["import", copy, str(out)]) == 0
    printed = capsys.readouterr().out
    assert "roots_agree: true" in printed and "added=0" in printed
    assert main(["import", copy, str(tmp_path / "missing.jsonl")]) == 2
    assert "cannot read" in capsys.readouterr().err


def test_a_body_whose_content_is_not_text_is_refused(source: WorldDB, tmp_path: Path) -> None:
    # review: such a body, re-hashed so its id matched, was indexed from str() of the value and read back as
    # other text, so a later purge's delete corrupted the full-text index; a non-JSON body raised a TypeError
    lines = _lines(source)
    at = next(i for i, line in enumerate(lines) if '"type": "Memory"' in line)
    record = json.loads(lines[at])
    for content in (7, [None, "x"], {"note": None}, True):
        body = json.loads(record["body"])
        body["content"] = content
        text = canonical_json(body)
        bad = {**record, "body": text, "id": node_id(text).hex()}
        with _open(tmp_path / "copy.db", LATER) as copy:
            _refused(copy, [*lines[:at], json.dumps(bad), *lines[at + 1 :]], f"line {at + 1}", "'content'")
    garbled = {**record, "body": "{not json", "id": node_id("{not json").hex()}
    with _open(tmp_path / "copy.db", LATER) as copy:
        _refused(copy, [*lines[:at], json.dumps(garbled), *lines[at + 1 :]], f"line {at + 1}", "not JSON")


def test_a_file_cut_short_or_missing_a_line_is_refused_and_writes_nothing(source: WorldDB, tmp_path: Path) -> None:
    """Version 2's end line counts the records (new-user trial, issue 39: a file cut at a line's end imported
    what it held and lost an alias silently)."""
    lines = [json.dumps(r) for r in source.export()]
    assert json.loads(lines[-1]) == {"kind": "end", "records": len(lines) - 2}
    target = _open(tmp_path / "target.db")
    before = table_digest(target)
    for cut, said in (
        (lines[:-1], "cut short"),
        (lines[:-2] + lines[-1:], "lines are missing"),
        (lines + [lines[1]], "after the end line"),
    ):
        with pytest.raises(InvalidInput, match=said):
            target.import_records(cut)
        assert table_digest(target) == before
    assert target.import_records(lines)["nodes"]["added"] > 0


def test_a_version_1_export_without_an_end_line_is_still_read(source: WorldDB, tmp_path: Path) -> None:
    records = list(source.export())[:-1]
    records[0] = {**records[0], "version": 1}
    target = _open(tmp_path / "target.db")
    assert target.import_records([json.dumps(r) for r in records])["nodes"]["added"] > 0
    with pytest.raises(InvalidInput, match="versions 1, 2: a newer worlddb_lite wrote it"):
        target.import_records([json.dumps({**records[0], "version": 3})])
