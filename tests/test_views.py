"""The views memory and fact (schema.sql), read as a person would: a plain read-only connection, no extension."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from worlddb_lite import WorldDB

from .conftest import FakeEmbedder

MIDNIGHT = "T00:00:00.000000Z"


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A store written through the public API, and the ids of what was written."""
    path = tmp_path_factory.mktemp("views") / "views.db"
    with WorldDB(path, embedder=FakeEmbedder()) as db:
        ids = {
            "lisbon": db.write("I live in Lisbon", scope="ana", valid_at="2024-01-01"),
            "porto": db.write("I moved to Porto", scope="ana", valid_at="2024-06-01"),
            "tea": db.add_turn("I love green tea", scope="ana", speaker="ana", at="2024-07-01T10:00:00Z"),
            "oolong": db.write("Oolong is nice", scope="bob", speaker="Bob", valid_at="2024-02-01", extractor=None),
            "three": db.write("The meeting is at 3pm", scope="bob", valid_at="2024-03-01", extractor=None),
            "gone": db.write("A note to forget", scope="bob", valid_at="2024-03-01", extractor=None),
            "later": db.write("The launch happens", scope="bob", valid_at="2999-01-01", extractor=None),
        }
        ids["four"] = db.amend(ids["three"], "The meeting is at 4pm", valid_at="2024-03-02", extractor=None)
        db.retire(ids["gone"])
    return {"path": path, **ids}


@pytest.fixture
def conn(store: dict[str, Any]) -> Iterator[sqlite3.Connection]:
    reader = sqlite3.connect(f"file:{store['path']}?mode=ro", uri=True)  # the stdlib's sqlite3: no sqlite-vec
    try:
        yield reader
    finally:
        reader.close()


def rows(conn: sqlite3.Connection, sql: str, *args: Any) -> list[tuple[Any, ...]]:
    return conn.execute(sql, args).fetchall()


def test_memory_shows_each_note_turn_and_fact_with_its_scope_speaker_and_text(
    store: dict[str, Any], conn: sqlite3.Connection
) -> None:
    got = {r[0]: r[1:] for r in rows(conn, "select id, scope, kind, speaker, text, valid_at, tags from memory")}
    assert got[store["lisbon"]] == ("ana", "Memory", None, "I live in Lisbon", "2024-01-01" + MIDNIGHT, None)
    assert got[store["oolong"]] == ("bob", "Memory", "Bob", "Oolong is nice", "2024-02-01" + MIDNIGHT, None)
    # a turn lies in a session under its scope; its speaker is its name
    assert got[store["tea"]] == ("ana", "Turn", "ana", "I love green tea", "2024-07-01T10:00:00.000000Z", None)
    assert all(len(i) == 64 and i == i.lower() for i in got)
    kinds = {r[0] for r in rows(conn, "select kind from memory")}
    assert kinds == {"Memory", "Turn", "Fact"}  # no entity, session or scope
    # a fact speaks with the voice of the turn it was learned from
    assert rows(conn, "select speaker, text from memory where kind = 'Fact' and text like '%tea%'") == [
        ("ana", "ana opinion of green tea: likes")
    ]


def test_memory_marks_retired_superseded_and_future_versions(store: dict[str, Any], conn: sqlite3.Connection) -> None:
    state = dict(rows(conn, "select id, state from memory"))
    assert state[store["four"]] == "current" and state[store["lisbon"]] == "current"
    assert state[store["three"]] == "stale"  # superseded by the amended version
    assert state[store["gone"]] == "stale"  # retired
    assert state[store["later"]] == "future"
    closed = dict(rows(conn, "select id, invalid_at from memory"))
    assert closed[store["three"]] == "2024-03-02" + MIDNIGHT
    current = {r[0] for r in rows(conn, "select id from current_node")}
    assert {i for i, s in state.items() if s == "current"} == current & set(state)  # the same rule as current_node


def test_fact_keeps_an_update_as_since_and_until_with_what_it_was_learned_from(
    store: dict[str, Any], conn: sqlite3.Connection
) -> None:
    got = rows(
        conn,
        "select scope, subject, slot, value, since, until, state, learned_from, learned_from_text "
        "from fact where slot = 'lives in' order by since",
    )
    assert got == [
        (
            "ana",
            "ana",
            "lives in",
            "Lisbon",
            "2024-01-01" + MIDNIGHT,
            "2024-06-01" + MIDNIGHT,
            "stale",
            store["lisbon"],
            "I live in Lisbon",
        ),
        (
            "ana",
            "ana",
            "lives in",
            "Porto",
            "2024-06-01" + MIDNIGHT,
            None,
            "current",
            store["porto"],
            "I moved to Porto",
        ),
    ]
    assert rows(conn, "select value, learned_from from fact where slot = 'opinion of green tea'") == [
        ("likes", store["tea"])
    ]


def test_the_views_answer_in_the_stock_shell_layout(store: dict[str, Any]) -> None:
    """sqlite3 -box prints them: every column named, none a blob."""
    reader = sqlite3.connect(f"file:{Path(store['path'])}?mode=ro", uri=True)
    try:
        for view in ("memory", "fact"):
            cursor = reader.execute(f"select * from {view}")
            assert all(d[0] and d[0].islower() for d in cursor.description)
            assert not any(isinstance(v, bytes) for row in cursor for v in row)
    finally:
        reader.close()


def test_memory_is_searched_through_the_full_text_index_by_its_nid(
    store: dict[str, Any], conn: sqlite3.Connection
) -> None:
    found = rows(
        conn, "select id, text from memory where nid in (select rowid from node_fts where node_fts match 'oolong')"
    )
    assert found == [(store["oolong"], "Oolong is nice")]
