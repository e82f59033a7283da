"""The vector index kept in the file (issue 40): opening reads it, and it answers as the index built from node_vec."""

from __future__ import annotations

import json
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path

import apsw
import numpy as np
import pytest

from worlddb_lite import IndexRebuilt, IntegrityViolation, WorldDB
from worlddb_lite.index import segments, vector_index
from worlddb_lite.store import connection

from .conftest import FakeClock, FakeEmbedder

QUESTIONS = ["boats by the river", "the red kite over the hill", "note 17", "my sister Emma", "where do I live"]


@pytest.fixture(autouse=True)
def small_segments(monkeypatch: pytest.MonkeyPatch) -> None:
    """Segments of a few rows, so a test store has a base, appended segments and rewrites."""
    monkeypatch.setattr(segments, "SEGMENT_ROWS", 40)
    monkeypatch.setattr(segments, "BASE_ROWS", 64)
    monkeypatch.setattr(segments, "MERGE_ROWS", 200)
    monkeypatch.setattr(segments, "YOUNG", 160)


def _fill(path: Path, notes: int = 400) -> None:
    with WorldDB(path, embedder=FakeEmbedder(), clock=FakeClock()) as db:
        for start in range(0, notes, 25):  # many small writes: every one recomposes the scope's world
            db.write_many(
                [
                    {"text": f"note {i}: the {i % 9} boats by the river", "scope": f"p{i % 3}"}
                    for i in range(start, start + 25)
                ]
            )
        first = db.write("I live in Lisbon", scope="p0")
        db.amend(first, "I live in Porto")
        db.write("the red kite over the hill", scope="p1")


def _shape(db: WorldDB) -> dict[int, tuple[int, int, str]]:
    """The in-memory index's rows: nid -> (partition, parent, type)."""
    index = db._reader.vectors.index()
    names = {code: name for name, code in index.type_names.items()}
    live = index.row_nid[: index.used]
    nids = sorted(int(n) for n in live[live >= 0])
    return {n: (int(index.part[n]), int(index.parent[n]), names[int(index.type_code[n])]) for n in nids}


def _answers(db: WorldDB) -> list[list[tuple[str, float]]]:
    return [[(h.node.id, round(h.score, 9)) for h in db.recall(q, k=10).hits] for q in QUESTIONS]


@pytest.fixture
def built(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[Path], tuple[dict[int, tuple[int, int, str]], list]]]:
    """The index and answers of a store whose index is built from node_vec, as before it was kept."""

    def build(path: Path) -> tuple[dict[int, tuple[int, int, str]], list]:
        with monkeypatch.context() as patched:
            patched.setattr(segments, "load", lambda *a, **k: None)
            with WorldDB(path, embedder=FakeEmbedder()) as db:
                return _shape(db), _answers(db)

    yield build


def _loaded(path: Path) -> tuple[dict[int, tuple[int, int, str]], list]:
    loads: list[int] = []
    real = segments.load

    def counting(*args: object, **kwargs: object) -> object:
        found = real(*args, **kwargs)  # type: ignore[arg-type]
        loads.append(0 if found is None else 1)
        return found

    with pytest.MonkeyPatch.context() as patched:
        patched.setattr(segments, "load", counting)
        with warnings.catch_warnings():
            warnings.simplefilter("error", IndexRebuilt)
            with WorldDB(path, embedder=FakeEmbedder()) as db:
                shape, answers = _shape(db), _answers(db)
    assert loads == [1], "the index was not read from the file"
    return shape, answers


def _kept(path: Path) -> list[tuple[int, int, int, int]]:
    conn = apsw.Connection(str(path))
    try:
        return conn.execute("select seg, first_seq, last_seq, rows from vec_segment order by seg").fetchall()
    finally:
        conn.close()


def test_the_index_read_from_the_file_is_the_index_built_from_node_vec(tmp_path: Path, built: Callable) -> None:
    path = tmp_path / "k.db"
    _fill(path)
    kept = _kept(path)
    spans = list(dict.fromkeys((first, last) for _, first, last, _ in kept))
    assert spans[0][0] == 0 and all(b[0] == a[1] for a, b in zip(spans, spans[1:], strict=False))  # no gap
    rows = [sum(r for _, f, la, r in kept if (f, la) == span) for span in spans]
    assert len(spans) >= 2 and len(kept) > len(spans)  # merged spans, in several pieces
    assert all(a > 2 * b or a + b > segments.MERGE_ROWS for a, b in zip(rows, rows[1:], strict=False))  # as merged
    assert _loaded(path) == built(path)
    with WorldDB(path, embedder=FakeEmbedder()) as db:
        report = db.verify(deep=True)
        assert report.ok and report.checked["kept_index_rows"] > 0


def test_training_writes_the_new_epochs_index_whole(
    tmp_path: Path, built: Callable, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(vector_index, "TRAIN_AT", 100)  # partitions trained as the store grows
    path = tmp_path / "k.db"
    _fill(path)
    conn = apsw.Connection(str(path))
    epoch = conn.execute("select value from meta where key = 'vec_epoch'").fetchall()[0][0]
    assert conn.execute("select distinct epoch from vec_segment").fetchall() == [(epoch,)]
    assert conn.execute("select count(*) from vec_centroid").fetchall()[0][0] > 1
    conn.close()
    assert _loaded(path) == built(path)


def _damage(path: Path, statement: str, *args: object) -> None:
    conn = apsw.Connection(str(path))
    try:
        with conn, connection.engine_write(conn):
            conn.execute(statement, args)
    finally:
        conn.close()


DAMAGE = {
    "a flipped byte": "update vec_segment set codes = cast(substr(codes, 1, 5) || x'7f' || substr(codes, 7) as blob) "
    "where seg = (select min(seg) from vec_segment where rows > 0)",
    "cut short": "update vec_segment set codes = substr(codes, 1, length(codes) - 9) "
    "where seg = (select max(seg) from vec_segment where rows > 0)",
    "a row count changed": "update vec_segment set rows = rows + 1 where seg = (select max(seg) from vec_segment)",
    "another dimension": "update vec_segment set dim = 16 where seg = (select min(seg) from vec_segment)",
    "a segment gone": "delete from vec_segment where seg = (select min(seg) + 1 from vec_segment)",
}


@pytest.mark.parametrize("damage", DAMAGE)
def test_a_damaged_kept_index_is_rebuilt_from_node_vec_with_a_message_and_written_again(
    tmp_path: Path, built: Callable, damage: str
) -> None:
    path = tmp_path / "k.db"
    _fill(path)
    expected = built(path)
    _damage(path, DAMAGE[damage])
    with WorldDB(path, embedder=FakeEmbedder()) as db:
        assert any(v.invariant == "7-indexes" for v in db.verify().violations)
        with pytest.warns(IndexRebuilt, match="rebuilt from node_vec"):
            shape, answers = _shape(db), _answers(db)
        assert (shape, answers) == expected  # never a wrong answer
        db.write("one more note, which writes the index again", scope="p2")
    assert _loaded(path)[1] == built(path)[1]
    with WorldDB(path, embedder=FakeEmbedder()) as db:
        assert db.verify(deep=True).ok


COLUMNS = "epoch, first_seq, last_seq, piece, pieces, dim, rows, nids, parts, parents, types, type_codes, codes, scales"


def _forge(path: Path, change: Callable[[dict], None], where: str = "seg = (select max(seg) from vec_segment)") -> None:
    """Rewrite one segment through ``change`` (its fields as arrays) with a digest that matches: an edit on purpose."""
    conn = apsw.Connection(str(path))
    try:
        row = conn.execute(f"select {COLUMNS}, spread from vec_segment where {where}").fetchall()[0]
    finally:
        conn.close()
    epoch, first, last, piece, pieces, dim, rows = row[:7]
    names = json.loads(row[10])
    f = {
        "first": first, "last": last, "piece": (piece, pieces),
        "nids": np.frombuffer(row[7], dtype="<i8").copy(), "parts": np.frombuffer(row[8], dtype="<i4").copy(),
        "parents": np.frombuffer(row[9], dtype="<i8").copy(),
        "types": [names[i] for i in np.frombuffer(row[11], dtype="<u2").tolist()],
        "codes": np.frombuffer(row[12], dtype=np.int8).reshape(rows, dim).copy(),
        "scales": np.frombuffer(row[13], dtype="<f4").reshape(rows, 2).copy(), "spread": np.frombuffer(row[14], "<f4"),
    }  # fmt: skip
    change(f)
    forged = segments.encode(
        epoch, f["first"], f["last"], f["piece"], f["nids"], f["parts"], f["parents"], f["types"], f["codes"],
        f["scales"], f["spread"],
    )  # fmt: skip
    columns = COLUMNS + ", spread, digest"
    sets = ", ".join(f"{c} = ?" for c in columns.split(", "))
    _damage(path, f"update vec_segment set {sets} where {where}", *forged)


def _drop_first_row(f: dict) -> None:
    for key in ("nids", "parts", "parents", "codes", "scales"):
        f[key] = f[key][1:]
    f["types"] = f["types"][1:]


def _parents_in_a_loop(f: dict) -> None:
    f["parents"][:2] = f["nids"][1::-1]  # each of the first two rows the other's parent


FORGED = {
    "a partition that cannot exist": lambda f: f["parts"].__setitem__(slice(None), 9_999),
    "parents in a loop": _parents_in_a_loop,
    "a row number past the store": lambda f: f["nids"].__setitem__(0, 1 << 40),
    "change numbers not yet given": lambda f: f.update(last=f["last"] + 10_000),
}


@pytest.mark.parametrize("forgery", FORGED)
def test_a_forged_segment_with_a_good_digest_is_refused_before_it_sizes_or_walks_anything(
    tmp_path: Path, built: Callable, forgery: str
) -> None:
    path = tmp_path / "k.db"
    _fill(path)
    expected = built(path)
    _forge(path, FORGED[forgery])
    with WorldDB(path, embedder=FakeEmbedder()) as db:
        assert any(v.invariant == "7-indexes" for v in db.verify().violations)
        with pytest.warns(IndexRebuilt, match="damaged"):
            assert (_shape(db), _answers(db)) == expected


def test_a_segment_forged_to_leave_a_row_out_is_named_by_verify(tmp_path: Path, built: Callable) -> None:
    """A digest is no defence against an edit on purpose (its key is public): verify finds the row missing."""
    path = tmp_path / "k.db"
    _fill(path)
    _forge(path, _drop_first_row, where="seg = (select min(seg) from vec_segment where rows > 0)")
    with WorldDB(path, embedder=FakeEmbedder()) as db:
        assert any("not held in it" in v.detail for v in db.verify().violations)


def test_a_row_count_past_any_memory_is_damage_not_an_allocation(tmp_path: Path, built: Callable) -> None:
    path = tmp_path / "k.db"
    _fill(path)
    _damage(path, "update vec_segment set rows = 1099511627776 where seg = (select max(seg) from vec_segment)")
    with WorldDB(path, embedder=FakeEmbedder()) as db, pytest.warns(IndexRebuilt):
        assert _answers(db) == built(path)[1]


def test_a_write_never_fails_for_a_damaged_kept_index(tmp_path: Path, built: Callable) -> None:
    """Review: a handle that only writes (an ingest worker) met the damage in the merge and its write failed."""
    path = tmp_path / "k.db"
    _fill(path)
    _damage(path, DAMAGE["a flipped byte"].replace("min(seg)", "max(seg)"))
    _damage(path, "update vec_segment set spread = substr(spread, 1, 8) where seg = (select max(seg) from vec_segment)")
    with WorldDB(path, embedder=FakeEmbedder()) as db:
        db.write_many([{"text": f"more {i}: swifts over the roofs", "scope": "p2"} for i in range(60)])
    assert _loaded(path) == built(path)


def test_a_rollback_leaves_the_damage_to_the_next_write(tmp_path: Path, built: Callable) -> None:
    path = tmp_path / "k.db"
    _fill(path)
    _damage(path, DAMAGE["a flipped byte"])
    with WorldDB(path, embedder=FakeEmbedder()) as db:
        with pytest.warns(IndexRebuilt):
            _answers(db)  # the search finds the damage: the next write rewrites the index
        with pytest.raises(RuntimeError), db.batch():
            db.write("a note that never lands", scope="p1")
            db.sql("select 1")  # its rows written, the index rewritten inside the batch
            raise RuntimeError("the caller gives up")
        db.write("a note that lands", scope="p1")
    assert _loaded(path)[1] == built(path)[1]


def test_a_raw_write_to_the_kept_index_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "k.db"
    _fill(path, notes=50)
    conn = apsw.Connection(str(path))
    try:
        with pytest.raises(apsw.ConstraintError, match="vector index is written only by the worlddb engine"):
            conn.execute("delete from vec_segment")
    finally:
        conn.close()


def test_a_purge_writes_the_new_epochs_index_without_the_purged_memory(tmp_path: Path, built: Callable) -> None:
    path = tmp_path / "k.db"
    _fill(path)
    with WorldDB(path, embedder=FakeEmbedder()) as db:
        gone = db.write("the red kite nests in the old oak", scope="p1")
        db.purge(gone)
    shape, answers = _loaded(path)
    assert (shape, answers) == built(path)
    assert not any(gone == hit for question in answers for hit, _ in question)
    with WorldDB(path, embedder=FakeEmbedder()) as db:
        assert db.verify(deep=True).ok


def test_the_cold_tier_leaves_the_kept_index_and_comes_back(tmp_path: Path, built: Callable) -> None:
    path = tmp_path / "k.db"
    _fill(path)
    with WorldDB(path, embedder=FakeEmbedder()) as db:
        db.set_retention(max_hot_vectors=100)
        db.consolidate(only="retention")
        cold = db.retention()["cold"]
        assert cold > 0
    assert _loaded(path) == built(path)
    with WorldDB(path, embedder=FakeEmbedder()) as db:
        assert db.verify(deep=True).ok
        assert db.sql("select sum(rows) from vec_segment")[0][0] == db.sql("select count(*) from node_vec")[0][0] - cold
        db.set_retention(max_hot_vectors=None)
        db.consolidate(only="retention")
    assert _loaded(path) == built(path)


def test_what_sync_brings_is_in_the_index_after_reopening(tmp_path: Path, built: Callable) -> None:
    a, b = tmp_path / "a.db", tmp_path / "b.db"
    _fill(a, notes=100)
    with WorldDB(a, embedder=FakeEmbedder()) as db:
        db.replica(b)
        db.write_many([{"text": f"news {i}: a heron by the weir", "scope": "p0"} for i in range(120)])
    with WorldDB(b, embedder=FakeEmbedder()) as db:
        db.sync(str(a))
    shape, answers = _loaded(b)
    assert (shape, answers) == built(b)
    with WorldDB(b, embedder=FakeEmbedder()) as db:
        assert "heron" in str(db.recall("a heron by the weir", k=1).hits[0].node.content)
        assert db.verify(deep=True).ok


def test_a_store_another_process_extends_is_read_whole_by_the_next_open(tmp_path: Path, built: Callable) -> None:
    path = tmp_path / "k.db"
    _fill(path, notes=100)
    with WorldDB(path, embedder=FakeEmbedder()) as reader, WorldDB(path, embedder=FakeEmbedder()) as writer:
        before = len(_shape(reader))
        writer.write_many([{"text": f"later {i}: gulls on the pier", "scope": "p1"} for i in range(90)])
        assert len(_shape(reader)) == before + 90  # the open one catches up by change number
    assert _loaded(path) == built(path)


@pytest.mark.parametrize(
    "edit", ["drop table vec_segment", "alter table vec_segment rename column scales to s2"], ids=["dropped", "altered"]
)
def test_a_kept_index_table_dropped_or_altered_in_a_shell_is_made_again_by_the_next_write(
    tmp_path: Path, built: Callable, edit: str
) -> None:
    """New-user trial: guards stop row writes, not DDL; the store became unusable (a traceback on every command)."""
    path = tmp_path / "k.db"
    _fill(path)
    expected = built(path)
    conn = apsw.Connection(str(path))
    conn.execute(edit)
    conn.close()
    with WorldDB(path, embedder=FakeEmbedder()) as db:  # a dropped table is made again as the store opens
        if edit.startswith("alter"):
            assert any(v.invariant == "7-indexes" for v in db.verify().violations)
            with pytest.warns(IndexRebuilt):
                assert _answers(db) == expected[1]
        else:
            assert db.verify().ok and _answers(db) == expected[1]
        db.write("a note that makes the table again", scope="p2")
    with WorldDB(path, embedder=FakeEmbedder()) as db:
        assert db.verify(deep=True).ok
    assert _loaded(path)[1] == built(path)[1]


def test_the_cli_says_a_rebuilt_index_in_one_line_of_its_own(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from worlddb_lite.cli import main

    path = tmp_path / "k.db"
    with WorldDB(path) as db:  # the bundled model, as the CLI opens it
        db.write_many([{"text": f"note {i}: the {i % 9} boats by the river"} for i in range(120)])
    _damage(path, DAMAGE["a flipped byte"])
    assert main(["recall", str(path), "boats by the river"]) == 0
    err = capsys.readouterr().err
    assert "worlddb: warning: the vector index kept in the file is damaged" in err
    assert "IndexRebuilt" not in err and ".py:" not in err


def test_a_backup_that_does_not_verify_is_removed(tmp_path: Path) -> None:
    path, dest = tmp_path / "k.db", tmp_path / "copy.db"
    _fill(path, notes=100)
    _damage(path, DAMAGE["a flipped byte"])
    with WorldDB(path, embedder=FakeEmbedder()) as db, pytest.raises(IntegrityViolation, match="so it was removed"):
        db.backup(dest, verify=True)
    assert not dest.exists()


class _Other(FakeEmbedder):
    model_id = "other-fake"


def test_re_embedding_keeps_the_new_vectors_index_once_at_the_end(tmp_path: Path) -> None:
    path = tmp_path / "k.db"
    _fill(path, notes=200)
    WorldDB.reembed(path, embedder=_Other())
    with WorldDB(path, embedder=_Other()) as db:
        epoch = db.sql("select value from meta where key = 'vec_epoch'")
        assert db.sql("select distinct epoch from vec_segment") == (epoch or [("",)])
        assert db.sql("select sum(rows) from vec_segment")[0][0] == db.sql("select count(*) from node_vec")[0][0]
        assert db.verify(deep=True).ok
