"""token_index.py: each full-text row's content tokens, written beside it, whole after every open."""

from __future__ import annotations

import copy
import gc
import shutil
import weakref
from pathlib import Path

import apsw
import numpy as np
import pytest

from worlddb_lite import StaticEmbedder, WorldDB
from worlddb_lite.index import token_index
from worlddb_lite.index.token_index import ContentTokens, content_tokens
from worlddb_lite.models.embed import TokenVectors
from worlddb_lite.ops import reembed
from worlddb_lite.store import connection, queries
from worlddb_lite.write.conversation import ConversationIn, SessionIn, TurnIn

from .conftest import FakeEmbedder, meta_of

FIXTURE = Path(__file__).parent / "fixtures" / "store-v1.db"


def _words(tokens: TokenVectors, ids: list[int]) -> list[str]:
    names = {tid: piece for piece, tid in tokens.vocabulary.items()}
    return [names[i] for i in ids]


def _chat(db: WorldDB, *texts: str) -> None:
    db.ingest(
        ConversationIn(
            "chat",
            ["ana"],
            [SessionIn("1", "2024-01-10", [TurnIn(text, "Ana", f"D1:{i}") for i, text in enumerate(texts, start=1)])],
        ),
    )


def _index(db: WorldDB) -> dict[int, bytes]:
    return {int(n): bytes(b) for n, b in db.sql("select nid, ids from node_tokens")}


def _fts(db: WorldDB) -> dict[int, tuple[str, str]]:
    return {int(n): (a, b) for n, a, b in db.sql("select nid, name, content from node_text")}


def test_a_text_is_read_as_its_content_tokens_in_order_and_cut(tokens: TokenVectors) -> None:
    reader = ContentTokens(tokens)
    assert _words(tokens, reader.ids("The dogs, and the CATS!", 10)) == ["dogs", "cats"]
    assert _words(tokens, reader.ids("tents tents campground lake", 2)) == ["tents", "tents"]
    assert reader.ids("the and of ...", 10) == []
    row = reader.decode(reader.row("Ana", "dogs and cats " + "lake " * 500))
    assert row.dtype == np.dtype("<u2") and row.size == token_index.TOKENS  # the bundled vocabulary fits 16 bits
    assert list(row[:3]) == reader.ids("Ana dogs cats", 3)
    assert reader.row(None, "x " * 1000 + "dogs") == reader.row("", "x " * 1000)  # read up to TEXT_CHARS only
    assert reader.row("Ana", "dogs") == reader.row(None, "Ana dogs")  # the name, a space, the content


def test_the_word_cache_starts_again_when_full_and_answers_the_same(
    tokens: TokenVectors, monkeypatch: pytest.MonkeyPatch
) -> None:
    reader = ContentTokens(tokens)
    monkeypatch.setattr(ContentTokens, "WORDS", 3)
    first = [reader.ids(t, 10) for t in ("red apples", "green pears", "blue plums", "red apples")]
    assert len(reader.words) <= 3
    assert first[0] == first[3] == ContentTokens(tokens).ids("red apples", 10)


def test_content_tokens_are_judged_without_the_vocabulary_word_marks() -> None:
    class Table:  # a sentencepiece / byte-level vocabulary marks where words start
        vocabulary = {"▁camping": 0, "▁the": 1, "ing": 2, ",": 3, "Ġdog": 4, "Ġof": 5, "##s": 6, "▁": 7}
        size = 8

    skip = ContentTokens(Table()).skip  # type: ignore[arg-type]
    assert [bool(x) for x in skip] == [False, True, False, True, False, True, False, True]


def test_a_vocabulary_past_16_bits_is_written_in_32(tokens: TokenVectors) -> None:
    class Table:
        vocabulary = {"dog": 70_000}
        size = 70_001

        def word_ids(self, word: str) -> list[int]:
            return [70_000]

    table = Table()
    reader = ContentTokens(table)  # type: ignore[arg-type]
    assert reader.dtype == np.dtype("<i4") and list(reader.decode(reader.row(None, "dog dog"))) == [70_000, 70_000]


def test_the_content_tokens_go_with_their_token_table_and_keep_no_long_word(tokens: TokenVectors) -> None:
    table = copy.copy(tokens)
    reader = content_tokens(table)
    assert content_tokens(table) is reader and table in token_index._CONTENT
    blob = "q" * (ContentTokens.LONGEST + 1)
    assert reader.ids(blob, 5) == reader.ids(blob, 5) and blob not in reader.words
    gone = weakref.ref(table)
    gc.collect()  # other tests' tables that are garbage already go first
    held = len(token_index._CONTENT)
    del table, reader
    gc.collect()
    assert gone() is None and len(token_index._CONTENT) == held - 1


def test_every_full_text_row_gets_its_token_row_in_the_same_write(
    tmp_path: Path, model: StaticEmbedder, tokens: TokenVectors
) -> None:
    with WorldDB(str(tmp_path / "t.db"), embedder=model) as db:
        _chat(db, "We pitched our tents at the campground", "Our dogs sleep on the sofa")
        db.write("I prefer green tea in the morning", scope="ana")
        fts, index = _fts(db), _index(db)
        assert set(index) == set(fts) and len(fts) >= 3
        reader = content_tokens(tokens)
        assert all(index[nid] == reader.row(*text) for nid, text in fts.items())
        assert meta_of(db, "token_format") == token_index.FORMAT
        report = db.verify(deep=True)
        assert report.ok and report.checked["token_rows"] == len(fts)


def test_a_store_of_another_embedder_keeps_no_token_rows(db: WorldDB) -> None:
    _chat(db, "We pitched our tents at the campground")
    assert _fts(db) and not _index(db) and meta_of(db, "token_format") is None
    assert db.verify(deep=True).ok


def test_opening_a_store_of_another_format_rewrites_its_rows(tmp_path: Path, model: StaticEmbedder) -> None:
    path = str(tmp_path / "t.db")
    with WorldDB(path, embedder=model) as db:
        _chat(db, "We pitched our tents at the campground", "Our dogs sleep on the sofa")
        before = _index(db)
        victim = min(before)
        with connection.engine_write(db._conn):  # written as other code would have (the guards need a session)
            db._conn.execute("update meta set value = 'an older format' where key = 'token_format'")
            db._conn.execute("update node_tokens set ids = x'0100' where nid = ?", (victim,))
            db._conn.execute("delete from node_tokens where nid = ?", (max(before),))
        broken = db.verify(deep=True)
        assert {v.invariant for v in broken.violations} == {"7-indexes"} and len(broken.violations) == 2
    with WorldDB(path, embedder=model) as db:
        assert _index(db) == before and meta_of(db, "token_format") == token_index.FORMAT
        assert db.verify(deep=True).ok


def test_a_purge_takes_the_token_row_and_rewrites_the_neighbours_that_quoted_it(
    tmp_path: Path, model: StaticEmbedder
) -> None:
    with WorldDB(str(tmp_path / "t.db"), embedder=model) as db:
        _chat(db, "Zorblatquux is the name of my pet lizard", "He eats crickets every morning")
        secret = db.sql("select nid from node_text where content like 'Zorblatquux%'")[0][0]
        ref = bytes(db.sql("select id from node where nid = ?", (secret,))[0][0]).hex()
        db.purge(ref, scope="ana")
        index, fts = _index(db), _fts(db)
        assert secret not in index and set(index) == set(fts)
        reader = content_tokens(model.token_vectors())
        assert all(index[nid] == reader.row(*text) for nid, text in fts.items())  # no row still holds its tokens
        assert db.verify(deep=True).ok


def test_re_embedding_moves_the_token_index_with_the_model(tmp_path: Path, model: StaticEmbedder) -> None:
    path = str(tmp_path / "t.db")
    with WorldDB(path, embedder=model) as db:
        _chat(db, "We pitched our tents at the campground")
        rows = _index(db)
    WorldDB.reembed(path, embedder=FakeEmbedder())
    with WorldDB(path, embedder=FakeEmbedder()) as db:
        assert not _index(db) and meta_of(db, "token_format") is None and db.verify(deep=True).ok
    WorldDB.reembed(path)
    with WorldDB(path) as db:
        assert _index(db) == rows and meta_of(db, "token_format") == token_index.FORMAT


def test_a_migrated_store_has_its_token_index_filled_on_open(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    shutil.copyfile(FIXTURE, path)
    with WorldDB(path) as db:
        assert db.migrated_from == 1
        assert set(_index(db)) == set(_fts(db)) and _index(db)
        assert db.verify(deep=True).ok


def test_the_whole_index_is_rewritten_batch_by_batch(tmp_path: Path, model: StaticEmbedder) -> None:
    with WorldDB(str(tmp_path / "t.db"), embedder=model) as db:
        _chat(db, "We pitched our tents at the campground", "Our dogs sleep on the sofa", "The lake was cold")
        before = _index(db)
        with db.batch():
            assert token_index.rewrite(db._store, model.token_vectors(), batch=1) == len(before)
        assert _index(db) == before


def test_verify_names_token_rows_in_a_store_whose_embedder_has_no_token_table(db: WorldDB) -> None:
    _chat(db, "We pitched our tents at the campground")
    nid = min(_fts(db))
    with connection.engine_write(db._conn):
        db._conn.execute("insert into node_tokens (nid, ids) values (?, x'0100')", (nid,))
    report = db.verify()
    assert [v.invariant for v in report.violations] == ["7-indexes"]
    assert "has no token table" in report.violations[0].detail


def test_a_store_another_process_refreshed_meanwhile_is_not_rewritten_again(
    tmp_path: Path, model: StaticEmbedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = str(tmp_path / "t.db")
    with WorldDB(path, embedder=model) as db:
        _chat(db, "We pitched our tents at the campground")
        with connection.engine_write(db._conn):
            db._conn.execute("update meta set value = 'an older format' where key = 'token_format'")
    seen: list[str | None] = []
    real = queries.meta_value

    def racing(conn: apsw.Connection, key: str) -> str | None:
        found = real(conn, key)
        if key == "token_format":  # stale when first read; current once the write lock is held
            seen.append(found)
            if len(seen) == 2:
                conn.execute("update meta set value = ? where key = 'token_format'", (token_index.FORMAT,))
                return token_index.FORMAT
        return found

    rewrites: list[int] = []
    monkeypatch.setattr(queries, "meta_value", racing)  # what opening a store reads it with (engine.py)
    monkeypatch.setattr(reembed, "rewrite_token_index", lambda reconciler: rewrites.append(1))
    WorldDB(path, embedder=model).close()
    assert seen[:1] == ["an older format"] and len(seen) >= 2 and not rewrites
