"""The store used as an assistant uses it: notes written as they come, turns appended live, recall before answering.

Each scenario asserts what the assistant should see first. A known gap is an ``xfail(strict=True)``,
so closing it turns the suite red until the mark goes.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from worlddb_lite import RuleExtractor, WorldDB

from .conftest import FakeClock

X = RuleExtractor()


@pytest.fixture
def ana(tmp_path: Path) -> Iterator[WorldDB]:
    """A person's memory of a year: notes written one by one, each through System 2."""
    with WorldDB(str(tmp_path / "ana.db"), clock=FakeClock()) as db:
        for when, text in [
            ("2023-03-01", "I live in Lisbon"),
            ("2023-03-02", "I work at Google as a data analyst"),
            ("2023-04-01", "My sister Emma loves pottery"),
            ("2024-05-01", "I moved to Porto"),
            ("2024-06-01", "I started a new job at Spotify"),
            ("2024-06-02", "Always answer me in Portuguese"),
            ("2024-06-03", "My budget for the trip to Japan is $2000"),
            ("2024-07-03", "The budget for the Japan trip was raised to $2500"),
        ]:
            db.write(text, scope="ana", valid_at=when, extractor=X)
        yield db


def _answers(db: WorldDB, question: str, **options: object) -> list[str]:
    """The hits' texts, best first, standing instructions left aside (they apply to every answer)."""
    hits = db.recall(question, scope="ana", k=10, **options).hits  # type: ignore[arg-type]
    return [h.node.content or "" for h in hits if not any(r.lane == "instruction" for r in h.why)]


@pytest.mark.parametrize(
    ("question", "first"),
    [
        ("where does ana live?", {"ana lives in: Porto", "I moved to Porto"}),
        ("where do I live?", {"ana lives in: Porto", "I moved to Porto"}),
        ("where do I work?", {"ana works at: Spotify", "I started a new job at Spotify"}),
        (
            "what is my budget for the Japan trip?",
            {"ana japan trip budget: $2500", "The budget for the Japan trip was raised to $2500"},
        ),
        ("who is Emma?", {"My sister Emma loves pottery"}),
    ],
)
def test_the_current_fact_or_note_answers_first(ana: WorldDB, question: str, first: set[str]) -> None:
    """The current value first: the fact, or the note it was learned from (it takes the stale note's place)."""
    found = _answers(ana, question)
    assert found[0] in first
    stale = {"I live in Lisbon", "I work at Google as a data analyst", "My budget for the trip to Japan is $2000"}
    assert not stale & set(found[:2])  # the old statement is not what the assistant reads first


def test_as_of_a_past_date_the_old_value_answers(ana: WorldDB) -> None:
    assert _answers(ana, "where do I live?", as_of="2023-12-31")[:2] == ["I live in Lisbon", "ana lives in: Lisbon"]


def test_a_standing_instruction_is_offered_with_every_answer(ana: WorldDB) -> None:
    hits = ana.recall("what should I cook tonight?", scope="ana", k=5).hits
    assert any(h.node.content == "ana standing instruction: Always answer me in Portuguese" for h in hits)


def test_a_standing_instruction_does_not_outrank_the_answer(ana: WorldDB) -> None:
    assert ana.recall("where do I live?", scope="ana", k=1).hits[0].node.content in {
        "ana lives in: Porto",
        "I moved to Porto",
    }


def test_a_note_among_live_turns_answers_its_question(tmp_path: Path) -> None:
    with WorldDB(str(tmp_path / "mixed.db"), clock=FakeClock()) as db:
        for i, text in enumerate(["My sister Emma loves pottery", "We went hiking near the lake last weekend"]):
            db.add_turn(text, scope="ana", speaker="ana", session="1", at=f"2024-05-01T10:0{i}:00Z")
        db.write("The spare key is under the blue flowerpot", scope="ana", valid_at="2024-05-01T11:00:00Z")
        assert db.recall("where is the spare key?", scope="ana", k=1).hits[0].node.content.startswith("The spare key")


def test_a_note_first_in_every_lane_is_not_buried_by_a_talkative_session(tmp_path: Path) -> None:
    turns = [
        "My sister Emma loves pottery",
        "We went hiking near the lake last weekend",
        "I started a new job at the bakery",
        "Emma and I made a vase together",
        "The bakery opens at six, so I wake up early",
        "Where did I leave my keys again?",
        "I keep losing things lately",
        "Emma says I should get a key hook",
    ]
    with WorldDB(str(tmp_path / "talk.db"), clock=FakeClock()) as db:
        for i, text in enumerate(turns):
            db.add_turn(text, scope="ana", speaker="ana", session="1", at=f"2024-05-01T10:{i:02d}:00Z")
        db.write("The spare key is under the blue flowerpot", scope="ana", valid_at="2024-05-01T11:00:00Z")
        assert db.recall("where is the spare key?", scope="ana", k=1).hits[0].node.content.startswith("The spare key")


def test_the_context_marks_a_note_a_later_one_changed_as_stale(ana: WorldDB) -> None:
    lines = ana.context("where do I live?", scope="ana", budget=2000).text.splitlines()
    lisbon = next(line for line in lines if "memory: I live in Lisbon" in line)
    porto = next(line for line in lines if "memory: I moved to Porto" in line)
    assert "(stale: a later memory changed what it says)" in lisbon and "stale" not in porto
    assert lines.index(porto) < lines.index(lisbon)  # the note that changed it took its place


def test_a_note_that_contradicts_itself_keeps_both_values_contested(tmp_path: Path) -> None:
    with WorldDB(str(tmp_path / "c.db"), clock=FakeClock()) as db:
        db.write("I live in Lisbon and I live in Porto", scope="ana", valid_at="2024-01-01")
        facts = db.nodes(world=db.scope("ana"), type="Fact")
        assert sorted(f.content or "" for f in facts) == ["ana lives in: Lisbon", "ana lives in: Porto"]
        assert all(f.contradicted_by for f in facts)
        items = db.context("where do I live?", scope="ana").items
        assert {i.status for i in items if "lives in" in i.text} == {"contested"}


def test_a_long_note_is_kept_whole_and_a_fact_said_many_times_is_one_fact(tmp_path: Path) -> None:
    text = ("I live in Lisbon and I love pottery. " * 14_000)[:500_000]
    with WorldDB(str(tmp_path / "long.db"), clock=FakeClock()) as db:
        note = db.write(text, scope="ana", valid_at="2024-01-01")
        assert db.read(note).content == text
        facts = sorted(f.content or "" for f in db.nodes(world=db.scope("ana"), type="Fact"))
        assert facts == ["ana lives in: Lisbon", "ana opinion of pottery: likes"]


def test_a_session_name_is_the_scopes_own(tmp_path: Path) -> None:
    with WorldDB(str(tmp_path / "s.db"), clock=FakeClock()) as db:
        mine = db.add_turn("hello", scope="ana", session="s1", speaker="ana", at="2024-01-01T10:00:00Z")
        theirs = db.add_turn("hello", scope="bo", session="s1", speaker="bo", at="2024-01-01T10:00:00Z")
        assert db.read(mine).parent != db.read(theirs).parent
        assert [h.node.id for h in db.recall("hello", scope="ana").hits if h.node.type == "Turn"] == [mine]


def test_a_note_past_the_size_limit_is_refused_and_nothing_is_written(tmp_path: Path) -> None:
    from worlddb_lite import InvalidInput
    from worlddb_lite.checks import MAX_TEXT_CHARS

    with WorldDB(str(tmp_path / "big.db"), clock=FakeClock()) as db:
        kept = db.write("I live in Lisbon", scope="ana", valid_at="2024-01-01")
        before = db.root()
        with pytest.raises(InvalidInput, match="split it"):
            db.write("x" * (MAX_TEXT_CHARS + 1), scope="ana")
        with pytest.raises(InvalidInput, match="split it"):
            db.amend(kept, "y" * (MAX_TEXT_CHARS + 1))
        with pytest.raises(InvalidInput, match="split it"):
            db.add_turn("z" * (MAX_TEXT_CHARS + 1), scope="ana", speaker="ana")
        assert db.root() == before
