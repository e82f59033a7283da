"""extract.py and facts.py: rule-based extraction, entities with aliases, supersession on real turns."""

from __future__ import annotations

import pytest

from worlddb_lite import WorldDB
from worlddb_lite.conversation import ConversationIn, SessionIn, TurnIn, ingest
from worlddb_lite.extract import RuleExtractor, resolve_date

RULES = RuleExtractor()


def _say(db: WorldDB, conv: str, date: str, *texts: str, speaker: str = "me") -> list[str]:
    return ingest(db, ConversationIn(conv, ["me"], [SessionIn(date, date, [TurnIn(t, speaker) for t in texts])]))


def _facts(db: WorldDB, slot: str, **kwargs: object) -> list[str]:
    return sorted(str(n.props["value"]) for n in db.nodes(world=db.scope("me"), type="Fact", **kwargs)  # type: ignore[arg-type]
                  if n.props["slot"] == slot)


def test_a_move_supersedes_where_someone_lives_and_history_keeps_both(db: WorldDB) -> None:
    _say(db, "c", "2024-01-10", "I live in Austin with my two cats.")
    _say(db, "c", "2024-02-15", "Big news: I moved to Denver!")
    assert _facts(db, "lives in") == ["Denver"]
    assert _facts(db, "lives in", as_of="2024-02-01") == ["Austin"]
    assert _facts(db, "lives in", include_superseded=True) == ["Austin", "Denver"]
    austin = next(n for n in db.nodes(world=db.scope("me"), type="Fact", include_superseded=True)
                  if n.props["value"] == "Austin")
    assert austin.invalid_at == "2024-02-15T00:00:00.000000Z"  # closed at the Denver fact's valid time
    denver = next(n for n in db.nodes(world=db.scope("me"), type="Fact") if n.props["value"] == "Denver")
    assert [v.content for v in db.history(denver.id)] == ["me lives in: Austin", "me lives in: Denver"]
    assert db.verify().ok


def test_a_preference_and_its_reversal(db: WorldDB) -> None:
    _say(db, "c", "2024-03-01", "I really love sushi.")
    _say(db, "c", "2024-05-01", "Honestly I don't like sushi anymore.")
    assert _facts(db, "opinion of sushi") == ["dislikes"]
    assert _facts(db, "opinion of sushi", as_of="2024-04-01") == ["likes"]


def test_my_sister_emma_and_emmas_birthday_are_one_entity(db: WorldDB) -> None:
    _say(db, "c", "2024-03-01", "My sister Emma is visiting next week.")
    _say(db, "c", "2024-03-20", "Emma's birthday is June 3, so I need a gift.")
    emmas = [n for n in db.nodes(world=db.scope("me"), type="Entity") if n.name == "Emma"]
    assert len(emmas) == 1
    assert emmas[0].id in db.lookup_alias("my sister")
    birthday = [n for n in db.nodes(world=db.scope("me"), type="Fact") if n.props["slot"] == "birthday"]
    assert [n.props["subject"] for n in birthday] == ["Emma"] and birthday[0].props["value"] == "June 3"
    linked = {n.id for n in db.neighbours(birthday[0].id, types=["refers_to"]).nodes}
    assert emmas[0].id in linked  # the fact refers to Emma and to its source turn


@pytest.mark.parametrize(("text", "said", "expected"), [
    ("I moved here yesterday", "2024-03-10T15:00:00Z", "2024-03-09"),
    ("We adopted him last week", "2024-03-10", "2024-03-03"),
    ("I started two weeks ago", "2024-03-10", "2024-02-25"),
    ("I visited Rome in May", "2024-03-10", "2023-05-01"),  # May said in March: last year's May
    ("I visited Rome in May", "2024-08-10", "2024-05-01"),
    ("nothing about time", "2024-03-10", None),
])
def test_relative_dates_resolve_against_the_session_date(text: str, said: str, expected: str | None) -> None:
    found = resolve_date(text, said)
    assert (found[:10] if found else None) == expected


def test_a_fact_dated_by_the_turn_takes_that_date(db: WorldDB) -> None:
    _say(db, "c", "2024-03-10", "I moved to Lisbon last month.")
    [fact] = [n for n in db.nodes(world=db.scope("me"), type="Fact")]
    assert fact.valid_at == "2024-02-09T00:00:00.000000Z"


def test_the_rules_find_work_jobs_favourites_and_leave_assistants_alone(db: WorldDB) -> None:
    found = RULES.extract("I work at Acme Corp as a data engineer. My favourite band is Radiohead.",
                          speaker="ana", said_at="2024-01-01")
    slots = {(f.slot, f.value) for f in found.facts}
    assert ("works at", "Acme Corp") in slots and ("favourite band", "Radiohead") in slots
    assert all(f.subject == "ana" for f in found.facts)
    _say(db, "c", "2024-01-01", "I live in Paris and I work at Google.", speaker="assistant")
    assert db.nodes(world=db.scope("me"), type="Fact") == []


def test_two_values_said_the_same_day_in_one_conversation_supersede_in_order(db: WorldDB) -> None:
    _say(db, "c", "2024-05-02", "So far I secured 3 interviews.", "Update: I secured 5 interviews now.")
    assert _facts(db, "number of interviews") == ["5"]
    assert _facts(db, "number of interviews", include_superseded=True) == ["3", "5"]


def test_values_at_the_same_time_from_different_conversations_contradict(db: WorldDB) -> None:
    _say(db, "a", "2024-05-02", "My budget of $500 is fixed.")
    _say(db, "b", "2024-05-02", "The budget of $700 was approved.")
    assert _facts(db, "budget") == ["500", "700"]  # no order between them: both stand
    [one, other] = [n for n in db.nodes(world=db.scope("me"), type="Fact") if n.props["slot"] == "budget"]
    assert one.contradicted_by or other.contradicted_by
