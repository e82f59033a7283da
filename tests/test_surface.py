"""The facade's scope surface: listing a scope a page at a time, the scopes, retiring or purging a whole scope,
and a search within a scope. Each refusal leaves the store unchanged."""

from __future__ import annotations

from pathlib import Path

import pytest

from worlddb_lite import Hint, InvalidInput, InvalidTime, NotFound, WorldDB

from .conftest import FakeClock, FakeEmbedder, table_digest


@pytest.fixture
def two(tmp_path: Path) -> WorldDB:
    db = WorldDB(tmp_path / "surface.db", embedder=FakeEmbedder(), clock=FakeClock())
    db.write("I live in Lisbon", scope="ana", valid_at="2024-01-01")
    db.write("I like green tea", scope="ana", valid_at="2024-02-01", extractor=None)
    db.add_turn("My sister Emma lives in Oslo", scope="ana", speaker="ana", at="2024-03-01")
    db.write("I live in Faro", scope="bo", valid_at="2024-01-01")
    yield db
    db.close()


def test_a_scope_is_listed_page_by_page_without_repeats_or_gaps(two: WorldDB) -> None:
    everything = two.list_memories("ana", limit=1000)
    assert everything.cursor is None and len(everything.nodes) > 4
    seen, cursor = [], None
    while True:
        page = two.list_memories("ana", limit=3, cursor=cursor)
        assert len(page.nodes) <= 3
        seen += [n.id for n in page.nodes]
        cursor = page.cursor
        if cursor is None:
            break
    assert seen == [n.id for n in everything.nodes]  # the order written, nothing twice, nothing left out
    assert "I live in Faro" not in [n.content for n in everything.nodes]  # another scope stays out
    notes = two.list_memories("ana", type="Memory").nodes
    assert [n.content for n in notes] == ["I live in Lisbon", "I like green tea"]


def test_retired_memories_are_listed_only_when_asked(two: WorldDB) -> None:
    tea = two.list_memories("ana", type="Memory").nodes[1]
    two.retire(tea.id, at="2024-06-01")
    assert tea.id not in [n.id for n in two.list_memories("ana").nodes]
    kept = {n.id: n for n in two.list_memories("ana", include_retired=True).nodes}
    assert kept[tea.id].retired


def test_the_scopes_are_listed_oldest_first(two: WorldDB) -> None:
    assert [s.name for s in two.scopes()] == ["ana", "bo"]
    assert all(s.type == "Scope" and len(s.id) == 64 for s in two.scopes())


def test_retire_all_closes_every_current_memory_of_one_scope_in_one_transaction(two: WorldDB) -> None:
    before = table_digest(two)
    with pytest.raises(InvalidTime):  # one memory starts after this end: nothing is closed
        two.retire_all("ana", at="2024-02-15")
    assert table_digest(two) == before
    closed = two.retire_all("ana", at="2024-12-01")
    assert closed and {n.type for n in two.list_memories("ana").nodes} == {"Entity", "Session"}  # who, not what
    assert all(h.node.type == "Entity" for h in two.recall("where does ana live", scope="ana").hits)
    assert two.recall("where does ana live", scope="ana", as_of="2024-06-01").hits  # history stays
    assert [n.content for n in two.list_memories("bo", type="Memory").nodes] == ["I live in Faro"]
    assert two.retire_all("ana") == []  # nothing current is left
    assert two.verify().ok


def test_purge_scope_erases_the_scope_and_nothing_else(two: WorldDB) -> None:
    report = two.purge_scope("ana")
    assert report["purged"] and [s.name for s in two.scopes()] == ["bo"]
    assert two.search("Lisbon") == [] and two.search("Faro")
    with pytest.raises(NotFound, match=r"no scope named 'ana'.*\(next: list the scopes\)") as info:
        two.purge_scope("ana")  # gone: a second purge finds nothing to erase
    assert info.value.hint == Hint("scopes") and "(next:" not in info.value.message
    with pytest.raises(NotFound):
        two.list_memories("ana")
    two.write("a new start", scope="ana")  # the name can be used again
    assert [n.content for n in two.list_memories("ana").nodes] == ["a new start"]
    assert two.verify().ok


def test_search_within_a_scope_and_as_of(two: WorldDB) -> None:
    assert {n.content for n, _ in two.search("live", scope="bo")} >= {"I live in Faro"}
    assert "I live in Lisbon" not in {n.content for n, _ in two.search("live", scope="bo")}
    assert "I live in Lisbon" in {n.content for n, _ in two.search("live", scope="ana")}
    assert two.search("Lisbon", scope="ana", as_of="2023-06-01") == []  # not yet true then


@pytest.mark.parametrize(
    ("call", "error", "phrase"),
    [
        (lambda db: db.list_memories("nobody"), NotFound, "no scope named"),
        (lambda db: db.list_memories("ana", cursor="not-a-cursor"), InvalidInput, "not a cursor"),
        (lambda db: db.list_memories("ana", cursor="0" * 64), NotFound, "without a cursor"),
        (lambda db: db.list_memories("ana", limit=0), InvalidInput, "limit"),
        (lambda db: db.list_memories("ana", include_retired="yes"), InvalidInput, "True or False"),
        (lambda db: db.list_memories("", limit=5), InvalidInput, "scope"),
        (lambda db: db.retire_all("nobody"), NotFound, "next: list the scopes"),
        (lambda db: db.retire_all("ana", at="someday"), InvalidTime, "at"),
        (lambda db: db.purge_scope("nobody"), NotFound, "no scope named"),
        (lambda db: db.search("tea", scope="nobody"), NotFound, "no scope named"),
        (lambda db: db.search("tea", as_of="someday"), InvalidTime, "as_of"),
    ],
)
def test_bad_input_is_refused_and_changes_nothing(two: WorldDB, call: object, error: type, phrase: str) -> None:
    before = table_digest(two)
    with pytest.raises(error, match=phrase):
        call(two)  # type: ignore[operator]
    assert table_digest(two) == before
