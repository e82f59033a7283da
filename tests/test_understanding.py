"""Issue 36: what is learned follows retire and amend; "my" is the scope's person; notes compete fairly.

Each test builds its own small store with the bundled embedder (the ranking steps read real vectors).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import apsw
import pytest

from worlddb_lite import Hit, StaticEmbedder, WorldDB
from worlddb_lite.errors import EdgeRefused
from worlddb_lite.retrieval import late as late_module
from worlddb_lite.retrieval import recall as recall_module
from worlddb_lite.write.updates import NEAREST

from .conftest import FakeClock

EMBEDDER = StaticEmbedder()

# A talkative conversation in the scope, as a real one is: many turns of each person, about many things
CHATTER = [
    ("Caroline", "Hey Mel! I went to a support group yesterday and it was so powerful."),
    ("Melanie", "That's great, Caroline! I took the kids to the beach last weekend, they loved it."),
    ("Caroline", "I love that! I've been painting a lot lately, it really helps me relax."),
    ("Melanie", "Your paintings are amazing. I finally finished that pottery class I told you about."),
    ("Caroline", "Thanks! I'm also researching adoption agencies, it has been a dream of mine."),
    ("Melanie", "You'd be a wonderful mom. We went camping and roasted marshmallows with the kids."),
    ("Caroline", "Camping sounds fun. I like reading on rainy days, books really guide me."),
    ("Melanie", "I like running in the mornings, it clears my head before work."),
    ("Caroline", "I like that idea. My friends and I went hiking last week, such a great view!"),
    ("Melanie", "I like hiking too! My son wants to climb a real mountain next summer."),
]


@pytest.fixture
def caroline(tmp_path: Path) -> Iterator[WorldDB]:
    """Scope ``caroline`` holding a conversation of hers with Melanie, said a year before the notes."""
    with WorldDB(str(tmp_path / "c.db"), embedder=EMBEDDER, clock=FakeClock()) as db:
        for repeat in range(3):
            for minute, (speaker, text) in enumerate(CHATTER):
                db.add_turn(text, scope="caroline", speaker=speaker, at=f"2022-0{repeat + 3}-01T10:{minute:02d}:00Z")
        yield db


def contents(db: WorldDB, question: str, **options: object) -> list[str]:
    return [str(hit.node.content) for hit in db.recall(question, scope="caroline", **options).hits]  # type: ignore[arg-type]


def test_retiring_a_note_closes_what_was_learned_from_it_alone(tmp_path: Path) -> None:
    with WorldDB(str(tmp_path / "z.db"), embedder=EMBEDDER, clock=FakeClock()) as db:
        note = db.write("I work at Initech", scope="zed")
        once = db.write("I live in Porto", scope="zed")
        db.write("I live in Porto, by the river", scope="zed")
        assert any("Initech" in str(h.node.content) for h in db.recall("where do I work?", scope="zed").hits)
        db.retire(note)
        db.retire(once)
        seen = [str(h.node.content) for h in db.recall("where do I work?", scope="zed", k=20).hits]
        assert not any("Initech" in text for text in seen)  # neither the note nor "zed works at: Initech"
        lives = [str(h.node.content) for h in db.recall("where do I live?", scope="zed", k=20).hits]
        assert "zed lives in: Porto" in lives  # another current note still says it: it stays open
        assert not db.verify().violations


def test_retire_at_a_time_closes_the_learned_fact_then_and_an_earlier_read_still_sees_it(tmp_path: Path) -> None:
    with WorldDB(str(tmp_path / "z.db"), embedder=EMBEDDER, clock=FakeClock()) as db:
        note = db.write("I work at Initech", scope="zed", valid_at="2024-01-01")
        db.retire(note, at="2024-06-01")
        before = db.recall("where do I work?", scope="zed", as_of="2024-03-01").hits
        after = db.recall("where do I work?", scope="zed", as_of="2024-07-01").hits
        assert any(h.node.type == "Fact" and "Initech" in str(h.node.content) for h in before)
        assert not any("Initech" in str(h.node.content) for h in after)


def test_amending_a_turn_learns_from_its_new_words_and_closes_what_only_the_old_said(tmp_path: Path) -> None:
    with WorldDB(str(tmp_path / "z.db"), embedder=EMBEDDER, clock=FakeClock()) as db:
        turn = db.add_turn("My sister Elisa is coming to visit for Christmas.", scope="zed", speaker="Zed")
        db.add_turn("How fun, is she staying with you?", scope="zed", speaker="Bo")
        db.amend(turn, "My sister Elena is coming to visit for Christmas.")
        facts = [str(h.node.content) for h in db.recall("what is my sister's name?", scope="zed", k=10).hits]
        assert any("Elena" in text for text in facts)
        assert not any("Elisa" in text for text in facts)
        assert not db.verify().violations


def test_amending_an_assistant_turn_learns_nothing(tmp_path: Path) -> None:
    with WorldDB(str(tmp_path / "z.db"), embedder=EMBEDDER, clock=FakeClock()) as db:
        turn = db.add_turn("Noted: your sister Elisa visits at Christmas.", scope="zed", speaker="assistant")
        db.amend(turn, "Noted: your sister Elena visits at Christmas.")
        hits = db.recall("what is my sister's name?", scope="zed", k=10).hits
        assert [h.node.type for h in hits] == ["Turn"]  # the new version only: no fact learned from it


def test_my_means_the_scope_person_not_another_whose_memory_is_of_the_same_kind(caroline: WorldDB) -> None:
    caroline.write("Melanie's barber is Leo on Main Street", scope="caroline", speaker="Melanie", valid_at="2023-05-01")
    caroline.write("Caroline's barber is Tomas on Elm Street", scope="caroline", valid_at="2023-05-02")
    assert "Tomas" in contents(caroline, "who is my barber?")[0]
    assert "Leo" in contents(caroline, "who is Melanie's barber?")[0]
    why = caroline.recall("who is my barber?", scope="caroline").hits[0].why
    assert any(reason.lane == "person" and reason.effect for reason in why)  # the lift shows


def test_a_note_is_not_buried_by_the_turns_of_the_person_it_is_about(caroline: WorldDB) -> None:
    caroline.write("Caroline's favourite author is Ursula Le Guin", scope="caroline", valid_at="2023-05-01")
    found = contents(caroline, "which author does Caroline love?")
    assert any("Le Guin" in text for text in found[:3]), found[:5]
    hit = next(
        h
        for h in caroline.recall("which author does Caroline love?", scope="caroline").hits
        if "Guin" in str(h.node.content)
    )
    assert any(reason.lane == "notes" for reason in hit.why)  # the lane that ranked it among notes says so


def test_a_newer_note_about_the_same_thing_answers_first_and_the_older_is_told_possibly_stale(
    caroline: WorldDB,
) -> None:
    caroline.write("I drink three cups of coffee a day", scope="caroline", valid_at="2023-05-01")
    newer = caroline.write("I quit coffee last week", scope="caroline", valid_at="2023-08-01")
    hits = caroline.recall("do I drink coffee?", scope="caroline").hits
    first, *rest = [h for h in hits if "coffee" in str(h.node.content).casefold() and h.node.type == "Memory"]
    assert "quit" in str(first.node.content)
    older = rest[0]
    assert any(reason.lane == "older" and reason.via == newer for reason in older.why)
    text = caroline.context("do I drink coffee?", scope="caroline").text
    assert "possibly stale" in text
    # read before the newer note was written, the older one answers and nothing is said of it
    past = caroline.recall("do I drink coffee?", scope="caroline", as_of="2023-06-01").hits
    top = next(h for h in past if h.node.type == "Memory")
    assert "three cups" in str(top.node.content) and not any(r.lane == "older" for r in top.why)


def test_similarity_alone_closes_nothing(tmp_path: Path) -> None:
    """A hundred notes about one thing, each telling of a change: each links to few, none is closed."""
    with WorldDB(str(tmp_path / "z.db"), embedder=EMBEDDER, clock=FakeClock()) as db:
        ids = [
            db.write(
                f"Note {i} about the garden: I switched the tomatoes to watering on day {i}",
                scope="zed",
                valid_at=f"2023-01-01T00:{i // 60:02d}:{i % 60:02d}Z",
            )
            for i in range(100)
        ]
        assert all(db.read(i).invalid_at is None for i in ids)
        links = _may_update_rows(tmp_path / "z.db")
        assert links  # they are about one thing, and each tells of a change
        per_note = Counter(src for src, _ in links)
        assert max(per_note.values()) <= NEAREST  # however many are alike, a write compares a few
        hits = db.recall("when do the tomatoes get water?", scope="zed", k=10).hits
        assert len(hits) == 10 and all(h.node.invalid_at is None for h in hits)
        assert not db.verify().violations


def _may_update_rows(path: Path) -> list[tuple[str, str]]:
    """(newer id, older id) of every may_update edge, read from the file as sqlite3 reads it."""
    conn = apsw.Connection(str(path), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        rows = conn.execute(
            "select hex(s.id), hex(d.id) from edge as e join node as s on s.nid = e.src "
            "join node as d on d.nid = e.dst where e.type = 'may_update'"
        ).fetchall()
    finally:
        conn.close()
    return [(str(src).lower(), str(dst).lower()) for src, dst in rows]


def test_the_link_from_a_newer_memory_to_the_older_note_is_in_the_file(caroline: WorldDB, tmp_path: Path) -> None:
    older = caroline.write("I ride my bike to work every day", scope="caroline", valid_at="2023-05-01")
    newer = caroline.add_turn(
        "I sold the bike and got a scooter for work", scope="caroline", speaker="Caroline", at="2023-08-01T09:00:00Z"
    )
    horses = caroline.write("I ride horses on Sundays", scope="caroline", valid_at="2023-09-01")  # tells no change
    assert _may_update_rows(tmp_path / "c.db") == [(newer, older)]
    # the link goes one way, from a memory to an older note: an older note updates nothing newer
    with pytest.raises(EdgeRefused, match="not a Memory to a Turn"):
        caroline.link(older, newer, "may_update")
    later = caroline.write("I sold the bike", scope="caroline", valid_at="2023-10-01")
    with pytest.raises(EdgeRefused, match="only a newer memory"):
        caroline.link(older, later, "may_update")
    with pytest.raises(EdgeRefused, match="holds from its newer memory's time"):
        caroline.link(horses, older, "may_update", valid_at="2020-01-01")  # not before the newer one was
    scope = caroline.read(older).parent
    assert scope is not None
    with pytest.raises(EdgeRefused, match="not a Scope to a Memory"):
        caroline.link(scope, older, "may_update")


def test_of_two_newer_memories_the_newest_goes_above_the_older_note(caroline: WorldDB, tmp_path: Path) -> None:
    older = caroline.write("My doctor is Dr. Wynn at the clinic", scope="caroline", valid_at="2023-01-01")
    middle = caroline.write("I switched to Dr. Patel as my doctor", scope="caroline", valid_at="2023-03-01")
    newest = caroline.write("I switched to Dr. Okafor as my doctor", scope="caroline", valid_at="2023-06-01")
    assert set(_may_update_rows(tmp_path / "c.db")) >= {(middle, older), (newest, older)}
    hits = caroline.recall("who is my doctor?", scope="caroline").hits
    ids = [h.node.id for h in hits]
    assert ids.index(newest) < ids.index(older)
    stale = next(h for h in hits if h.node.id == older)
    assert any(r.lane == "older" and r.via == newest for r in stale.why)  # told, with the newest named
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)  # the printed order holds


def test_a_change_said_by_someone_else_links_nothing(caroline: WorldDB, tmp_path: Path) -> None:
    caroline.write("I ride my bike to work every day", scope="caroline", valid_at="2023-05-01")
    caroline.add_turn(
        "I sold the bike and got a scooter for work", scope="caroline", speaker="Melanie", at="2023-08-01T09:00:00Z"
    )
    assert _may_update_rows(tmp_path / "c.db") == []  # Melanie's bike is not Caroline's


# ../shared/data beside the repository, or beside the folder of a worktree
_FOUND = (p / "shared" / "data" / "locomo" / "locomo10.json" for p in Path(__file__).resolve().parents)
LOCOMO = next((path for path in _FOUND if path.exists()), Path("missing"))


@pytest.fixture(scope="module")
def conversation(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """LoCoMo conv-26 ingested whole into scope ``caroline`` (Caroline is one of its speakers): copied per test."""
    if not LOCOMO.exists():
        pytest.skip("LoCoMo is not in ../shared/data")
    from dataclasses import replace

    from worlddb_lite.write.loaders import load

    path = tmp_path_factory.mktemp("locomo") / "conv26.db"
    first = next(c for c in load(LOCOMO, "locomo") if c.conversation_id == "conv-26")
    with WorldDB(str(path), embedder=EMBEDDER) as db:
        db.ingest(replace(first, scopes=["caroline"]))
    return path


@pytest.fixture
def real(conversation: Path, tmp_path: Path) -> Iterator[WorldDB]:
    with WorldDB(str(conversation), embedder=EMBEDDER) as db:
        db.backup(tmp_path / "copy.db")
    with WorldDB(str(tmp_path / "copy.db"), embedder=EMBEDDER) as db:
        yield db


def test_in_a_real_conversation_an_update_in_plain_words_answers_first(real: WorldDB) -> None:
    """The issue's reproductions, with all 419 turns of conv-26 in the scope."""
    real.write("I live in Boston", scope="caroline", valid_at="2023-01-01")
    real.write("I moved to Seattle", scope="caroline", valid_at="2023-11-01")
    assert "Seattle" in contents(real, "where do I live?")[0]
    real.write("I drink three cups of coffee a day", scope="caroline", valid_at="2023-11-02")
    real.write("I quit coffee last week", scope="caroline", valid_at="2023-11-20")
    assert "quit" in contents(real, "do I drink coffee?")[0]
    real.write("I ride my bike to work", scope="caroline", valid_at="2023-11-03")
    real.write("I sold the bike and got a scooter", scope="caroline", valid_at="2023-11-21")
    assert any("scooter" in text for text in contents(real, "how do I get to work?")[:3])


def test_in_a_real_conversation_my_is_the_scope_person(real: WorldDB) -> None:
    real.write("Melanie's barber is Leo on Main Street", scope="caroline", speaker="Melanie", valid_at="2023-11-01")
    real.write("Caroline's barber is Tomas on Elm Street", scope="caroline", valid_at="2023-11-02")
    assert "Tomas" in contents(real, "who is my barber?")[0]


def test_in_a_real_conversation_a_note_is_first_in_its_own_words(real: WorldDB) -> None:
    real.write("Caroline's favourite author is Ursula Le Guin", scope="caroline", valid_at="2023-11-03")
    assert "Le Guin" in contents(real, "who is Caroline's favourite author?")[0]


@pytest.mark.xfail(strict=True, reason="a lexical gap: 'writer' and 'author' share no word, the vectors are far")
def test_in_a_real_conversation_a_note_is_not_buried_by_her_turns(real: WorldDB) -> None:
    """Every turn of Caroline's gains by her name; the note about her gains the same (issue: not in the top 200)."""
    real.write("Caroline's favourite author is Ursula Le Guin", scope="caroline", valid_at="2023-11-03")
    found = contents(real, "which writer does Caroline like?")
    assert any("Le Guin" in text for text in found[:5])  # not the first: "writer" and "author" share no word


def test_retiring_an_entity_closes_no_fact_that_names_it(tmp_path: Path) -> None:
    """Facts are learned from turns and notes: an entity a fact names holds none of them up."""
    with WorldDB(str(tmp_path / "z.db"), embedder=EMBEDDER, clock=FakeClock()) as db:
        acme = db.write("Acme Corp", scope="zed", type="Entity", name="Acme Corp")
        fact = db.write("Acme Corp is headquartered in Oslo", scope="zed", type="Fact")
        db.link(fact, acme, "refers_to")
        db.retire(acme)
        assert db.read(fact).invalid_at is None


def test_a_note_in_other_words_than_the_question_matches_through_the_late_lane(
    caroline: WorldDB, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The note shares no word with the question ("tennis" for "sport", "Saturday" for "weekends").
    # Among the conversation's turns its vector is not the closest, so with the match kept to the
    # first of the text and the vector lanes only the late lane's word-by-word match lets it in.
    caroline.write("I play tennis every Saturday morning with Jess.", scope="caroline", valid_at="2023-05-01")
    monkeypatch.setattr(recall_module, "NOTES_MATCH", 1)
    monkeypatch.setattr(recall_module, "MATCH_SHARE", 0.0)
    question = "What sport do I do on weekends?"

    def note_hit(late: bool) -> Hit:
        return next(
            h for h in caroline.recall(question, scope="caroline", late=late, k=50).hits if h.node.type == "Memory"
        )

    assert not any(reason.lane == "notes" for reason in note_hit(late=False).why)
    matched = note_hit(late=True)
    assert any(reason.lane == "notes" for reason in matched.why)
    assert str(caroline.recall(question, scope="caroline").hits[0].node.content).startswith("I play tennis")


def test_a_note_outside_the_late_pool_is_matched_yet_not_added_to_the_late_lane(
    caroline: WorldDB, monkeypatch: pytest.MonkeyPatch
) -> None:
    caroline.write("I play tennis every Saturday morning with Jess.", scope="caroline", valid_at="2023-05-01")
    monkeypatch.setattr(recall_module, "NOTES_MATCH", 1)
    monkeypatch.setattr(recall_module, "MATCH_SHARE", 0.0)
    monkeypatch.setattr(recall_module, "LATE_POOL", 1)  # the pool: the fused first only, a turn
    monkeypatch.setattr(late_module, "LATE_POOL", 1)
    hits = caroline.recall("What sport do I do on weekends?", scope="caroline").hits
    note = next(h for h in hits if h.node.type == "Memory")
    lanes = {reason.lane for reason in note.why}
    assert "notes" in lanes and "late" not in lanes  # scored to be matched, not ranked by the lane it re-orders
    assert sum(any(reason.lane == "late" for reason in h.why) for h in hits) == 1


def test_another_scope_s_change_neither_links_to_nor_shows_in_a_shared_note_s_scope(tmp_path: Path) -> None:
    """A note held by two scopes is its home scope's person's; a change written in the other scope is not read."""
    with WorldDB(str(tmp_path / "s.db"), embedder=EMBEDDER, clock=FakeClock()) as db:
        shared = db.write("I ride my bike to work", scope=["alice", "bob"], valid_at="2024-03-02")
        bobs = db.write("I sold the bike and got a scooter", scope="bob", valid_at="2024-09-01")
        assert _may_update_rows(tmp_path / "s.db") == []  # the shared note speaks for alice, not for bob
        hits = db.recall("how do I get to work?", scope="alice").hits
        assert bobs not in [h.node.id for h in hits]
        assert all(r.lane != "older" for h in hits for r in h.why)
        assert "scooter" not in db.context("how do I get to work?", scope="alice").text
        assert shared in [h.node.id for h in hits]


def test_the_consolidator_links_what_no_write_could_see(tmp_path: Path) -> None:
    """Written before the note it updates, or without System 2: the updates step links it, once."""
    with WorldDB(str(tmp_path / "o.db"), embedder=EMBEDDER, clock=FakeClock()) as db:
        first = db.write("I quit coffee last week", scope="caroline", valid_at="2023-08-01")
        older = db.write("I drink three cups of coffee a day", scope="caroline", valid_at="2023-05-01")
        plain = db.write_many(
            [{"text": "I stopped drinking coffee at the office", "scope": "caroline", "valid_at": "2023-09-01"}]
        )[0]
        assert _may_update_rows(tmp_path / "o.db") == []  # the newer ones came first, or had no System 2
        assert db.consolidate(only="updates", dry_run=True)["updates"] == 3
        assert db.consolidate(only="updates")["updates"] == 3
        assert sorted(_may_update_rows(tmp_path / "o.db")) == sorted([(first, older), (plain, older), (plain, first)])
        assert db.consolidate(only="updates")["updates"] == 0  # nothing left to do
        top = db.recall("do I drink coffee?", scope="caroline").hits
        ids = [h.node.id for h in top]
        assert ids.index(plain) < ids.index(older)  # the newest of those that may update it goes above


def test_an_amended_note_keeps_what_may_update_it(caroline: WorldDB, tmp_path: Path) -> None:
    older = caroline.write("I ride my bike to work", scope="caroline", valid_at="2023-05-01")
    newer = caroline.write("I sold the bike and got a scooter for work", scope="caroline", valid_at="2023-09-01")
    fixed = caroline.amend(older, "I ride my bike to work every day", valid_at="2023-05-02")
    assert (newer, fixed) in _may_update_rows(tmp_path / "c.db")
    ids = [h.node.id for h in caroline.recall("how do I get to work?", scope="caroline").hits]
    assert newer in ids and (fixed not in ids or ids.index(newer) < ids.index(fixed))


def test_retiring_a_note_inside_the_batch_that_wrote_it_closes_what_was_learned_from_it(tmp_path: Path) -> None:
    """Review of issue 39: the facts learned from a note alone are read with the batch's queued edges."""
    with WorldDB(str(tmp_path / "z.db"), embedder=EMBEDDER, clock=FakeClock()) as db:
        with db.batch():
            note = db.write("I live in Lisbon", scope="me")
            db.retire(note)
        assert db.sql("select count(*), count(until) from fact") == [(1, 1)]
        with db.batch():
            tagged = db.write("I work at Initech", scope="me", tags=["job"])
            assert db.retire_all("me", tag="job") == [tagged]
        assert db.sql("select count(*), count(until) from fact") == [(2, 2)]
