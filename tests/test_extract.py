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


def _entities(db: WorldDB) -> dict[str, str]:
    """The entities found in what was said (the speaker, "me", is one too: see the test below)."""
    return {n.name or "": str(n.props["kind"]) for n in db.nodes(world=db.scope("me"), type="Entity")
            if n.name != "me"}


def _refers_to(db: WorldDB, node: str) -> set[str]:
    return {n.name or "" for n in db.neighbours(node, types=["refers_to"]).nodes
            if n.type == "Entity" and n.name != "me"}


def test_the_speaker_is_a_person_their_turns_and_first_person_facts_refer_to(db: WorldDB) -> None:
    _say(db, "c", "2024-01-01", "I work at Google.", "Nice weather.")
    [me] = [n for n in db.nodes(world=db.scope("me"), type="Entity") if n.name == "me"]
    assert me.props["kind"] == "person"
    sources = {n.type for n in db.neighbours(me.id, types=["refers_to"], direction="in").nodes if n.id != me.id}
    assert sources == {"Turn", "Fact"}
    turns = [n for n in db.neighbours(me.id, types=["refers_to"], direction="in").nodes if n.type == "Turn"]
    assert len(turns) == 2  # every turn by the speaker, with or without a fact in it


def test_where_someone_works_is_an_organisation_the_fact_refers_to(db: WorldDB) -> None:
    _say(db, "c", "2024-01-01", "I work at Google.")
    assert _entities(db) == {"Google": "organisation"}
    [fact] = db.nodes(world=db.scope("me"), type="Fact")
    assert fact.props["value"] == "Google" and _refers_to(db, fact.id) == {"Google"}
    _say(db, "c", "2024-06-01", "I joined Acme Corp in March.")  # the new employer: one more organisation
    assert _entities(db) == {"Google": "organisation", "Acme Corp": "organisation"}
    assert _facts(db, "works at") == ["Acme Corp"]
    assert db.verify().ok


@pytest.mark.parametrize(("text", "expected"), [
    ("I bought a Fitbit Versa last week.", {("Fitbit Versa", "product")}),
    ("I love my new iPhone 15!", {("iPhone 15", "product")}),
    ("I just got a new Ferrari, and my new Prius broke down.", {("Ferrari", "product"), ("Prius", "product")}),
    ("I bought an iPad Pro 11 yesterday.", {("iPad Pro 11", "product")}),
    ("I study at Stanford University.", {("Stanford University", "organisation")}),
    ("The Island Media Group called me back.", {("Island Media Group", "organisation")}),
    ("I moved to New York City.", {("New York City", "place")}),
    ("My manager, Sarah, signed it.", {("Sarah", "person")}),
    ("I met my new neighbor Anna.", {("Anna", "person")}),
])
def test_products_organisations_places_and_people_are_found(text: str, expected: set[tuple[str, str]]) -> None:
    assert {(e.name, e.kind) for e in RULES.extract(text, speaker="me", said_at="2024-05-01").entities} == expected


@pytest.mark.parametrize("text", [
    "Yesterday I went hiking. On Monday in May we met at noon. Thanks!",
    "I bought a new car. I got Sam a gift for Christmas.",
    "I visited Mom in June. Our Group met on Friday.",
    "My friend Monday? No. I think The Office is funny.",
    "my new SO in Canada said hi",
])
def test_capitalised_words_without_a_cue_are_not_entities(text: str) -> None:
    assert RULES.extract(text, speaker="me", said_at="2024-05-01").entities == ()


def test_my_manager_comma_sarah_is_one_person_with_the_alias(db: WorldDB) -> None:
    _say(db, "c", "2024-03-01", "My manager, Sarah, wants the report by Friday.")
    _say(db, "c", "2024-03-02", "I told my manager I need another week.")
    [sarah] = [n for n in db.nodes(world=db.scope("me"), type="Entity") if n.name != "me"]
    assert sarah.name == "Sarah" and db.lookup_alias("my manager") == (sarah.id,)


def test_a_bought_product_is_linked_from_the_purchase(db: WorldDB) -> None:
    _say(db, "c", "2024-03-01", "I bought a Fitbit Versa to track my runs.")
    [fact] = db.nodes(world=db.scope("me"), type="Fact")
    assert (fact.props["slot"], fact.props["value"]) == ("bought", "Fitbit Versa")
    assert _refers_to(db, fact.id) == {"Fitbit Versa"}
    assert _entities(db) == {"Fitbit Versa": "product"}
