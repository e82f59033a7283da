"""Tags on notes, filters on recall and listing, retire and purge by tag, retried writes, times in words."""

from __future__ import annotations

import pytest

from worlddb_lite import WorldDB
from worlddb_lite.errors import InvalidInput, InvalidTime, NotCurrent, NotFound, WorldDBError
from worlddb_lite.text.dates import read_moment, read_period

NOW = "2026-12-06T17:00:00.000000Z"


@pytest.fixture
def db(tmp_path):
    store = WorldDB(str(tmp_path / "tags.db"))
    yield store
    store.close()


def test_tags_are_kept_sorted_lower_case_once(db: WorldDB) -> None:
    note = db.write("Ana's spare key is under the blue pot", scope="ana", tags=["Keys", "home", "keys "])
    assert db.read(note).props["tags"] == ["home", "keys"]
    assert db.read(db.write("one tag alone", scope="ana", tags="Work")).props["tags"] == ["work"]


@pytest.mark.parametrize(
    "tags", [[""], ["a,b"], ["x" * 41], [3], ["line\nbreak\x07"], {"a": 1}, [f"t{i}" for i in range(17)]]
)
def test_bad_tags_are_refused_and_nothing_is_written(db: WorldDB, tags: object) -> None:
    db.write("something else", scope="ana")
    before = db.root()
    with pytest.raises(InvalidInput, match="tag"):
        db.write("Ana likes green tea", scope="ana", tags=tags)  # type: ignore[arg-type]
    assert db.root() == before


def test_a_retried_note_is_the_same_memory_unless_new_is_asked(db: WorldDB) -> None:
    first = db.write("Ana's spare key is under the blue pot", scope="ana")
    assert db.write("Ana's spare key is under the blue pot", scope="ana") == first
    assert db.write("Ana's spare key is under the blue pot", scope="bo") != first  # another scope: its own
    assert db.write("Ana's spare key is under the blue pot", scope="ana", speaker="Bo") != first  # another voice
    second = db.write("Ana's spare key is under the blue pot", scope="ana", new=True)
    assert second != first
    assert db.write("!!!", scope="ana") == db.write("!!!", scope="ana")  # no word to search by: still found
    # one listed with another scope: the same memory, now held by that scope too
    assert db.write("Ana's spare key is under the blue pot", scope=["ana", "home"]) == first
    assert [n.id for n in db.list_memories("home").nodes] == [first]
    # a retired note is not current: writing it again makes a memory again
    db.retire(first)
    assert db.write("Ana's spare key is under the blue pot", scope="ana") == second  # the one still current
    db.retire(second)
    assert db.write("Ana's spare key is under the blue pot", scope="ana") not in (first, second)  # none: a new one


def test_a_retried_note_learns_its_facts_once(db: WorldDB) -> None:
    db.write("I live in Lisbon", scope="ana")
    facts = [n.id for n in db.list_memories("ana", type="Fact").nodes]
    db.write("I live in Lisbon", scope="ana")
    assert [n.id for n in db.list_memories("ana", type="Fact").nodes] == facts


def test_recall_filters_by_tag_type_and_period(db: WorldDB) -> None:
    key = db.write("Ana's spare key is under the blue pot", scope="ana", tags=["home"])
    dentist = db.write("Ana sees the dentist on Friday about her tooth", scope="ana", tags=["health"])
    turn = db.add_turn("The key to the shed is on the hook", scope="ana", speaker="ana")
    assert [h.node.id for h in db.recall("where is the key", scope="ana", tag="home").hits] == [key]
    assert [h.node.id for h in db.recall("where is the key", scope="ana", tag="HEALTH").hits] == [dentist]
    assert {h.node.type for h in db.recall("where is the key", scope="ana", type="Turn").hits} == {"Turn"}
    assert turn in [h.node.id for h in db.recall("where is the key", scope="ana", type="Turn").hits]
    found = db.recall("where is the key", scope="ana", during="2020")
    assert found.hits == () and found.during is not None and "2020-01-01 to 2020-12-31" in found.during[2]
    assert db.recall("where is the key", scope="ana", during="today").hits
    unfiltered = db.recall("where is the key", scope="ana")
    assert unfiltered.during is None and len(unfiltered.hits) > 1


def test_a_tag_keeps_the_notes_that_carry_it_not_what_was_learned_from_them(db: WorldDB) -> None:
    note = db.write("I live in Lisbon", scope="ana", tags=["home"])
    assert any(h.node.type == "Fact" for h in db.recall("where does Ana live", scope="ana").hits)
    assert [h.node.id for h in db.recall("where does Ana live", scope="ana", tag="home").hits] == [note]


@pytest.mark.parametrize(("option", "value"), [("during", "next blursday"), ("during", "May and June 2024")])
def test_a_period_not_understood_is_refused_with_what_was_read(db: WorldDB, option: str, value: str) -> None:
    db.write("Ana's spare key is under the blue pot", scope="ana")
    with pytest.raises(InvalidTime, match="understood"):
        db.recall("where is the key", scope="ana", **{option: value})


def test_bad_filters_are_refused(db: WorldDB) -> None:
    db.write("Ana's spare key is under the blue pot", scope="ana")
    with pytest.raises(InvalidInput):
        db.recall("key", scope="ana", tag="a,b")
    with pytest.raises(InvalidInput):
        db.list_memories("ana", newest_first="yes")  # type: ignore[arg-type]


def test_listing_newest_first_and_by_tag_pages_without_repeats(db: WorldDB) -> None:
    ids = [db.write(f"note number {i}", scope="ana", tags=["even" if i % 2 == 0 else "odd"]) for i in range(7)]
    newest, cursor, pages = [], None, 0
    while True:
        page = db.list_memories("ana", type="Memory", newest_first=True, limit=3, cursor=cursor)
        newest += [n.id for n in page.nodes]
        pages += 1
        if page.cursor is None:
            break
        cursor = page.cursor
    assert newest == ids[::-1] and pages == 3
    assert [n.id for n in db.list_memories("ana", tag="even").nodes] == ids[0::2]


def test_retire_and_purge_by_tag_touch_only_the_tagged(db: WorldDB) -> None:
    keep = db.write("Ana's spare key is under the blue pot", scope="ana", tags=["home"])
    lisbon = db.write("I live in Lisbon", scope="ana", tags=["moving"])
    other = db.write("I live in Lisbon", scope="bo", tags=["moving"])  # another scope, same tag
    retired = db.retire_all("ana", tag="moving")
    assert retired == [lisbon]
    assert not db.recall("where does Ana live", scope="ana", type="Fact").hits  # the fact learned from it closed
    assert db.read(keep).is_current and db.read(other).is_current
    erased = db.purge_tagged("ana", "moving")
    assert lisbon in erased["purged"] and keep not in erased["purged"] and other not in erased["purged"]
    assert db.read(lisbon).purged and db.read(keep).content
    assert db.purge_tagged("ana", "nothing") == {"purged": [], "checkpoint": None}
    with pytest.raises(NotFound):
        db.purge_tagged("nobody", "moving")
    assert db.verify().ok


def test_periods_in_words() -> None:
    assert read_period("last week", field="during", now=NOW)[:2] == (
        "2026-11-23T00:00:00.000000Z",
        "2026-11-30T00:00:00.000000Z",
    )
    assert (
        read_period("in march 2024", field="during", now=NOW)[2] == "'in march 2024' read as 2024-03-01 to 2024-03-31"
    )
    assert read_period("2024-05-01", field="during", now=NOW)[2].endswith("read as 2024-05-01")
    assert read_period("2024", field="during", now=NOW)[0] == "2024-01-01T00:00:00.000000Z"
    with pytest.raises(InvalidTime, match="not 'beach'"):
        read_period("last week at the beach", field="during", now=NOW)
    with pytest.raises(InvalidTime, match="no date or period"):
        read_period("whenever", field="during", now=NOW)


def test_moments_in_words_are_the_end_of_the_period_or_now() -> None:
    assert read_moment("2024-05-01", field="as_of", now=NOW) == ("2024-05-01T00:00:00.000000Z", None)
    moment, said = read_moment("in March 2024", field="as_of", now=NOW)
    assert moment == "2024-03-31T23:59:59.999999Z" and said is not None and "2024-03-01 to 2024-03-31" in said
    assert read_moment("today", field="as_of", now=NOW)[0] == NOW
    with pytest.raises(InvalidTime):
        read_moment("the day after tomorrow", field="as_of", now=NOW)


def test_a_filter_looks_deeper_when_the_first_finds_hold_too_few(db: WorldDB) -> None:
    """Review: 300 notes about Porto hid the one tagged note at k = 5 (the filter saw the first 200 finds)."""
    db.write_many([{"text": f"Porto note number {i} about the harbour", "scope": "ana"} for i in range(300)])
    rare = db.write("Porto tagged rare", scope="ana", tags=["rare"])
    assert [h.node.id for h in db.recall("Porto", scope="ana", tag="rare", k=5).hits] == [rare]


def test_retries_compare_what_is_stored(db: WorldDB) -> None:
    """Review: NFD text, a first word cut at the 2,000th character, other tags, tags passed in props."""
    import unicodedata

    nfd = unicodedata.normalize("NFD", "Café au lait")
    assert db.write(nfd, scope="ana") == db.write(nfd, scope="ana")
    long = "x" * 2001 + " tail"
    assert db.write(long, scope="ana") == db.write(long, scope="ana")
    home = db.write("keep the tags", scope="ana", tags=["home"])
    assert db.write("keep the tags", scope="ana", tags=["family"]) != home  # another call, not a retry
    assert db.write("keep the tags", scope="ana", tags=["home"]) == home
    assert db.read(db.write("I moved", scope="ana", props={"tags": "Work"})).props["tags"] == ["work"]
    with pytest.raises(InvalidInput, match="not both"):
        db.write("I moved", scope="ana", props={"tags": ["a"]}, tags=["b"])
    with pytest.raises(InvalidInput, match="is not a tag"):
        db.write("I moved", scope="ana", props={"tags": ["a,b"]})


@pytest.mark.parametrize("kind", ["note", "memory", "Bogus"])
def test_an_unknown_type_filter_is_refused_with_the_types(db: WorldDB, kind: str) -> None:
    db.write("Ana's spare key is under the blue pot", scope="ana")
    with pytest.raises(InvalidInput, match="names no node of this store.*a note is a Memory"):
        db.recall("key", scope="ana", type=kind)
    with pytest.raises(InvalidInput, match="names no node of this store"):
        db.list_memories("ana", type=kind)
    db.write("call the plumber", type="Task", scope="ana")  # a type of the caller's own, once written, is taken
    assert [n.content for n in db.list_memories("ana", type="Task").nodes] == ["call the plumber"]


def test_retire_again_changes_nothing_and_an_old_version_is_refused(db: WorldDB) -> None:
    old = db.write("My manager is Sarah", scope="ana", valid_at="2024-01-10")
    new = db.amend(old, "My manager is Tom", valid_at="2024-06-01")
    assert db.amend(old[:12], "My manager is Tom", valid_at="2024-06-01") == new  # a retried amend
    before = db.root()
    with pytest.raises(NotCurrent, match="old version"):
        db.retire(old)
    db.retire(new)
    after = db.root()
    db.retire(new)
    assert db.root() == after != before


def test_the_same_merge_decision_again_changes_nothing(db: WorldDB) -> None:
    db.write("Robert Smith", type="Entity", name="Robert Smith", scope="me", valid_at="2024-01-01")
    db.resolve_entity("Robert Smyth", scope="me")
    (proposal,) = db.merge_proposals()
    db.accept_merge(proposal.pid)
    before = db.root()
    db.accept_merge(proposal.pid)  # a retried call
    assert db.root() == before
    with pytest.raises(WorldDBError, match="decisions are final"):
        db.reject_merge(proposal.pid)
