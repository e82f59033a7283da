"""extract.py and facts.py: rule-based extraction, entities with aliases, supersession on real turns."""

from __future__ import annotations

import pytest

from worlddb_lite import WorldDB
from worlddb_lite.text.extract import (
    INSTRUCTION_SLOT,
    PREFERENCE_SLOT,
    RuleExtractor,
    normalise_slot,
    resolve_date,
    says_change,
    value_kind,
)
from worlddb_lite.write.conversation import ConversationIn, SessionIn, TurnIn

RULES = RuleExtractor()


def _say(db: WorldDB, conv: str, date: str, *texts: str, speaker: str = "me") -> list[str]:
    return db.ingest(ConversationIn(conv, ["me"], [SessionIn(date, date, [TurnIn(t, speaker) for t in texts])]))


def _facts(db: WorldDB, slot: str, **kwargs: object) -> list[str]:
    return sorted(
        str(n.props["value"])
        for n in db.nodes(world=db.scope("me"), type="Fact", **kwargs)  # type: ignore[arg-type]
        if n.props["slot"] == slot
    )


def test_a_move_supersedes_where_someone_lives_and_history_keeps_both(db: WorldDB) -> None:
    _say(db, "c", "2024-01-10", "I live in Austin with my two cats.")
    _say(db, "c", "2024-02-15", "Big news: I moved to Denver!")
    assert _facts(db, "lives in") == ["Denver"]
    assert _facts(db, "lives in", as_of="2024-02-01") == ["Austin"]
    assert _facts(db, "lives in", include_superseded=True) == ["Austin", "Denver"]
    austin = next(
        n for n in db.nodes(world=db.scope("me"), type="Fact", include_superseded=True) if n.props["value"] == "Austin"
    )
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


@pytest.mark.parametrize(
    ("text", "said", "expected"),
    [
        ("I moved here yesterday", "2024-03-10T15:00:00Z", "2024-03-09"),
        ("We adopted him last week", "2024-03-10", "2024-03-03"),
        ("I started two weeks ago", "2024-03-10", "2024-02-25"),
        ("I visited Rome in May", "2024-03-10", "2023-05-01"),  # May said in March: last year's May
        ("I visited Rome in May", "2024-08-10", "2024-05-01"),
        ("nothing about time", "2024-03-10", None),
    ],
)
def test_relative_dates_resolve_against_the_session_date(text: str, said: str, expected: str | None) -> None:
    found = resolve_date(text, said)
    assert (found[:10] if found else None) == expected


def test_a_fact_dated_by_the_turn_takes_that_date(db: WorldDB) -> None:
    _say(db, "c", "2024-03-10", "I moved to Lisbon last month.")
    [fact] = [n for n in db.nodes(world=db.scope("me"), type="Fact")]
    assert fact.valid_at == "2024-02-09T00:00:00.000000Z"


def test_the_rules_find_work_jobs_favourites_and_leave_assistants_alone(db: WorldDB) -> None:
    found = RULES.extract(
        "I work at Acme Corp as a data engineer. My favourite band is Radiohead.", speaker="ana", said_at="2024-01-01"
    )
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
    _say(db, "a", "2024-05-02", "My travel budget of $500 is fixed.")
    _say(db, "b", "2024-05-02", "The travel budget of $700 was approved.")
    assert _facts(db, "travel budget") == ["$500", "$700"]  # no order between them: both stand
    [one, other] = [n for n in db.nodes(world=db.scope("me"), type="Fact") if n.props["slot"] == "travel budget"]
    assert one.contradicted_by or other.contradicted_by


def _entities(db: WorldDB) -> dict[str, str]:
    """The entities found in what was said (the speaker, "me", is one too: see the test below)."""
    return {n.name or "": str(n.props["kind"]) for n in db.nodes(world=db.scope("me"), type="Entity") if n.name != "me"}


def _refers_to(db: WorldDB, node: str) -> set[str]:
    return {
        n.name or "" for n in db.neighbours(node, types=["refers_to"]).nodes if n.type == "Entity" and n.name != "me"
    }


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


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("I bought a Fitbit Versa last week.", {("Fitbit Versa", "product")}),
        ("I love my new iPhone 15!", {("iPhone 15", "product")}),
        ("I just got a new Ferrari, and my new Prius broke down.", {("Ferrari", "product"), ("Prius", "product")}),
        ("I bought an iPad Pro 11 yesterday.", {("iPad Pro 11", "product")}),
        ("I study at Stanford University.", {("Stanford University", "organisation")}),
        ("The Island Media Group called me back.", {("Island Media Group", "organisation")}),
        ("I moved to New York City.", {("New York City", "place")}),
        ("My manager, Sarah, signed it.", {("Sarah", "person")}),
        ("I met my new neighbor Anna.", {("Anna", "person")}),
    ],
)
def test_products_organisations_places_and_people_are_found(text: str, expected: set[tuple[str, str]]) -> None:
    assert {(e.name, e.kind) for e in RULES.extract(text, speaker="me", said_at="2024-05-01").entities} == expected


@pytest.mark.parametrize(
    "text",
    [
        "Yesterday I went hiking. On Monday in May we met at noon. Thanks!",
        "I bought a new car. I got Sam a gift for Christmas.",
        "I visited Mom in June. Our Group met on Friday.",
        "My friend Monday? No. I think The Office is funny.",
        "my new SO in Canada said hi",
    ],
)
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


def _values(text: str) -> set[tuple[str, str, bool]]:
    return {(f.slot, f.value, f.changed) for f in RULES.extract(text, speaker="me", said_at="2024-05-01").facts}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # a verb of change after the slot, in the clause or a relative clause
        ("Good news: the deadline was extended to May 20.", ("deadline", "May 20", True)),
        ("Our team size has grown to 8 people.", ("team size", "8 people", True)),
        (
            "I'm tuning the dashboard API response time, which has recently improved to 250ms.",
            ("dashboard api response time", "250ms", True),
        ),
        ("The price changed from $10 to $12.", ("price", "$12", True)),
        ("My monthly rent went up from $1,200 to $1,350 last week.", ("monthly rent", "$1,350", True)),
        # a verb of change said by the speaker, with the slot as its object
        (
            "I've adjusted our holiday gifts budget to $450, can you help me plan it?",
            ("holiday gift budget", "$450", True),
        ),
        ("We moved the launch to June 3.", ("launch", "June 3", True)),
        ("I rescheduled the standup meeting to 10:30 AM.", ("standup meeting", "10:30 AM", True)),
        ("I upgraded my Python version to 3.12.1 yesterday.", ("python version", "3.12.1", True)),
        ("I've extended my study sessions to 4 hours, which helps.", ("study session", "4 hours", True)),
        ("I bumped the sprint length to 3 weeks.", ("sprint length", "3 weeks", True)),
        ("We switched our database from MySQL to PostgreSQL last month.", ("database", "PostgreSQL", True)),
        # a new value named as such, even inside a question
        ("Can you help me meet the new sprint deadline of April 5, 2024?", ("sprint deadline", "April 5, 2024", True)),
        ("I'm worried I won't meet the new April 25 deadline.", ("deadline", "April 25", True)),
        ("How should I spend the increased budget of $6,200?", ("budget", "$6,200", True)),
        # a value stated outright
        ("My team size is 8 people.", ("team size", "8 people", False)),
        ("The deadline is now May 3.", ("deadline", "May 3", False)),
        ("I'm close to my $600 annual budget.", ("annual budget", "$600", False)),
        ("Deadline: April 5", ("deadline", "April 5", False)),
        ("- **Conversion rate**: 4.5%", ("conversion rate", "4.5%", False)),
        ("I have 8 done and my accuracy from 60% to 85% now.", ("accuracy", "85%", False)),  # the later value
    ],
)
def test_stated_and_changed_values_of_a_slot_named_by_the_text(text: str, expected: tuple[str, str, bool]) -> None:
    assert expected in _values(text)


@pytest.mark.parametrize(
    "text",
    [
        "Should I increase the budget to $700?",  # a question
        "Has the deadline been moved to May 5?",
        "Can we move the launch to June 3?",
        "If the deadline moves to May 5, what then?",  # a supposition
        "If my budget is $500, which laptop fits?",
        "What if we reduced the team size to 4 people?",
        "I want to raise my budget to $50.",  # a wish, a plan, an attempt
        "I'm planning to move the launch to June 3.",
        "I'm trying to get the response time down to 200ms.",
        "We might push the release to May 9.",
        "I haven't changed the deadline to May 9.",  # a denial
        "Let's hope we can get that accuracy up to 98% by the end of the month!",
        "I had to finish a $15,000 budget proposal by Friday.",  # a budget proposal is no budget
        "My partner saw their quiz score improve from 60% to 85%.",  # someone else's
        "Sam's budget went up to $900.",
        "I'm worried about meeting my goals by June 30.",  # "meeting" the verb
        "How can I balance my 3 production deadlines?",  # a count is no deadline
        "Here is my config:\n```\ntimeout: 30\nretries: 5\n```",  # code states nothing of the speaker's
        "Set `max_budget = $500` in the file.",
    ],
)
def test_questions_suppositions_wishes_and_code_state_no_value(text: str) -> None:
    assert _values(text) == set()


@pytest.mark.parametrize(
    ("phrase", "slot"),
    [
        ("the new Sprint deadlines", "sprint deadline"),
        ("budget for groceries", "grocery budget"),
        ("sound mixing sessions with Jeremy", "jeremy sound mixing session"),
        ("my current monthly rent", "monthly rent"),
        ("total", None),
        ("it", None),
    ],
)
def test_slot_names_are_normalised_from_the_noun_phrase(phrase: str, slot: str | None) -> None:
    assert normalise_slot(phrase) == slot


@pytest.mark.parametrize(
    ("value", "kind"),
    [
        ("$1,200", "money"),
        ("87%", "percent"),
        ("April 5, 2024", "date"),
        ("March 22 at 4:30 PM", "date"),
        ("11 AM", "time"),
        ("v2.1", "version"),
        ("3.12.1", "version"),
        ("1,200 calls per day", "count"),
        ("Google", "name"),
    ],
)
def test_value_kinds(value: str, kind: str) -> None:
    assert value_kind(value) == kind


def test_a_changed_value_supersedes_the_same_thing_named_more_or_less_fully(db: WorldDB) -> None:
    _say(
        db,
        "c",
        "2024-04-01",
        "I'm getting close to my $600 annual budget for sneakers.",
        "I have a snack budget of $40 for the party.",
    )
    _say(db, "c", "2024-05-01", "I'm buying sneakers with my increased budget of $650.")
    assert _facts(db, "budget") == ["$650"]
    assert _facts(db, "annual budget") == []  # "budget" and "annual budget" name one thing: replaced
    assert _facts(db, "annual budget", include_superseded=True) == ["$600"]
    assert _facts(db, "snack budget") == ["$40"]  # the latest near value only, and a snack budget is not near
    assert db.verify().ok


def test_a_changed_value_leaves_other_things_and_other_kinds_of_value_alone(db: WorldDB) -> None:
    _say(db, "c", "2024-04-01", "My gift budget is $300.", "Our deadline is April 20.")
    _say(
        db,
        "c",
        "2024-05-01",
        "I've adjusted my snack budget to $75.",
        "How can I balance my 3 deadlines?",
        "I've increased the deadline count to 4 items.",
    )
    assert _facts(db, "gift budget") == ["$300"]  # a snack budget is another thing
    assert _facts(db, "deadline") == ["April 20"]  # "4 items" is a count, no date


def test_a_restated_value_refers_to_the_turn_that_restates_it(db: WorldDB) -> None:
    _say(db, "c", "2024-04-01", "My gift budget is $300.")
    _say(db, "c", "2024-04-10", "I might go over my gift budget of $300.")  # stated again: no second fact
    [fact] = [n for n in db.nodes(world=db.scope("me"), type="Fact")]
    turns = [n for n in db.neighbours(fact.id, types=["refers_to"]).nodes if n.type == "Turn"]
    assert len(turns) == 2  # both turns said it: when it changes, both are stale
    _say(db, "c", "2024-05-01", "I've raised my gift budget to $450.")
    assert _facts(db, "gift budget") == ["$450"]


def test_dates_of_events_stand_side_by_side_until_one_is_said_to_move(db: WorldDB) -> None:
    _say(
        db,
        "c",
        "2024-04-01",
        "I have a Zoom call with the creative director on April 21.",
        "I have a meeting with Wyatt on May 7.",
    )
    _say(db, "c", "2024-04-05", "I also have a meeting with Jessica on May 20.")
    assert _facts(db, "meeting date") == ["May 20", "May 7"]  # two meetings, not one meeting's new date
    _say(
        db,
        "c",
        "2024-04-10",
        "I'm worried that moving the Zoom call with the creative director to April 22 clashes with lunch.",
    )
    assert _facts(db, "zoom call date") == ["April 22"]  # said to move: the new date replaces the old one
    assert _facts(db, "zoom call date", include_superseded=True) == ["April 21", "April 22"]
    _say(db, "c", "2024-04-12", "I'm rescheduling that client meeting to May 29.")
    assert _facts(db, "meeting date") == ["May 20", "May 7"]  # another meeting, moved: these stand
    assert _facts(db, "client meeting date") == ["May 29"]
    assert db.verify().ok


def test_a_bare_slot_names_no_one_thing_and_is_replaced_only_when_said_to_change(db: WorldDB) -> None:
    _say(db, "c", "2024-04-01", "I saved $1,200, which is 60% of my $2,000 goal.")
    _say(db, "c", "2024-05-01", "I saved $3,200 for the car, which is 64% of my $5,000 goal.")
    assert _facts(db, "goal") == ["$2,000", "$5,000"]  # two goals: neither replaces the other
    _say(db, "c", "2024-06-01", "I've raised the goal to $6,000.")
    assert _facts(db, "goal") == ["$2,000", "$6,000"]  # said to change: the latest goal only


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "Always format code snippets with syntax highlighting when I ask about implementation details.",
            ["Always format code snippets with syntax highlighting when I ask about implementation details."],
        ),
        (
            "Thanks! Please always include the source. From now on, answer in bullet points",
            ["Please always include the source.", "From now on, answer in bullet points"],
        ),
        ("Going forward, never use emojis!", ["Going forward, never use emojis!"]),
        ("Always good to hear! See you later!", []),  # no verb in the imperative
        ("Never been to an animal shelter before, but it must be great!", []),
        ("Always happy to help.", []),
        ("I always use tabs.", []),  # a habit, not an instruction
        ("Always include version numbers?", []),  # a question
        ("Never give up! Always be yourself.", []),  # encouragements: the verb acts on nothing
        ("Always use tabs.", ["Always use tabs."]),
    ],
)
def test_standing_instructions_are_sentences_opening_with_always_never_or_from_now_on(
    text: str, expected: list[str]
) -> None:
    facts = RuleExtractor().extract(text, speaker="user", said_at="2024-01-01T00:00:00Z").facts
    assert [f.value for f in facts if f.slot == INSTRUCTION_SLOT] == expected
    assert all(not f.functional for f in facts if f.slot == INSTRUCTION_SLOT)  # many stand side by side


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "I prefer Bootstrap over Foundation due to its documentation. Can you help?",
            ["I prefer Bootstrap over Foundation due to its documentation"],
        ),
        (
            "My app must stay small, so I prefer minimal dependencies, how do I keep it so?",
            ["I prefer minimal dependencies"],
        ),  # inside a question, still stated: the preference's own clause, not the question
        (
            "I'd rather walk than drive. My preference is dark mode.",
            ["I'd rather walk than drive", "My preference is dark mode"],
        ),
        ("Do you prefer tea or coffee?", []),  # someone else's
        ("Would I prefer the red one?", []),  # asked, not stated
        ("Honestly I preferred the old design.", []),  # no longer
        ("I rather liked the old design.", []),  # an adverb, not a preference
        ("I don't know if I prefer tea.", []),  # supposed, not stated
        ("I think if I prefer tea, I should say so.", []),  # supposed, though an "I" comes before the "if"
        ("My preference is dark mode if it is available.", ["My preference is dark mode if it is available"]),
    ],
)
def test_stated_preferences_are_the_speakers_own_clauses(text: str, expected: list[str]) -> None:
    facts = RuleExtractor().extract(text, speaker="user", said_at="2024-01-01T00:00:00Z").facts
    assert [f.value for f in facts if f.slot == PREFERENCE_SLOT] == expected
    assert all(not f.functional for f in facts if f.slot == PREFERENCE_SLOT)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (  # the clause ends at "so I want", and at the "->->" marker
            "I prefer automated deployments over manual ones, so I want to make sure I'm doing it right ->-> 3,23",
            ["I prefer automated deployments over manual ones"],
        ),
        (
            "I prefer using bullet points over paragraphs, but how can I make sure that improves ATS parsing?",
            ["I prefer using bullet points over paragraphs"],
        ),
        (  # a comma inside one phrase does not end it; one before "can you" does
            "I prefer simple, minimal dependencies, can you help me keep my Flask app small?",
            ["I prefer simple, minimal dependencies"],
        ),
        ("I'm adding video samples to my portfolio like I prefer, but can you help?", []),  # nothing after it
        ("I'd rather show you a photo. This is a new yoga pose.", []),  # this exchange, not a preference
        ("I prefer it.", []),  # a pronoun: what is preferred is not named
        (
            "I prefer to learn through visual aids and step-by-step explanations and worked examples of every "
            "single concept in triangle geometry and its many applications today",
            [],
        ),  # past PREFERENCE_WORDS: a run-on, not one preference
    ],
)
def test_a_stated_preference_is_its_own_short_clause(text: str, expected: list[str]) -> None:
    facts = RULES.extract(text, speaker="user", said_at="2024-01-01T00:00:00Z").facts
    assert [f.value for f in facts if f.slot == PREFERENCE_SLOT] == expected


def _opinions(text: str) -> set[tuple[str, str]]:
    found = RULES.extract(text, speaker="me", said_at="2024-05-01").facts
    return {(f.slot.removeprefix("opinion of "), f.value) for f in found if f.slot.startswith("opinion of ")}


@pytest.mark.parametrize(
    "text",
    [
        "Yeah, I love to. It's peaceful and special.",  # "to" and no verb
        "That's what I like to hear!",  # the object of a relative clause comes before it
        "This is the book that I love most of all.",
        "Being my own boss and doing something I love is awesome.",  # "is": the object is before the cue
        "I love your commitment. Keep going!",  # a reference the turn does not resolve
        "I love them for that. They bring so much joy.",
        "I love working on it to chill out.",
        "I love how art lets us get our emotions out.",  # a clause, not a thing
        "I love that you chose pottery for your art.",
        "I love the way the frosting turned out!",  # a definite thing named before
        "Melanie, I love all the yellow leaves, it looks so cozy.",
        "I like also cheese pizza and prosciutto.",  # an adverb: the words are cut
        "I like to just take a look at the sunset- it reminds me to enjoy the small things.",
        "I'm grateful to have a job I enjoy every day.",  # a time, not a thing
        "I love going on road trips with friends and family and cousins and hiking and playing board games.",
    ],
)
def test_an_opinion_of_no_clear_thing_is_not_written(text: str) -> None:
    assert _opinions(text) == set()


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("I love traveling - it's a way to learn about cultures.", {("traveling", "likes")}),  # a dash ends it
        ("That's why I love my job so much - connecting with the crowd.", {("job", "likes")}),
        (
            "I love experimenting in the kitchen, coming up with something tasty.",
            {("experimenting in the kitchen", "likes")},
        ),
        ("I like to relax by reading.", {("to relax by reading", "likes")}),
        ("I love cooking when I'm tired.", {("cooking", "likes")}),  # the clause after "when" is cut off
        ("Great idea, except I don't like dark beer.", {("dark beer", "dislikes")}),
        ("I like games that test my strategizing.", {("games that test my strategizing", "likes")}),
    ],
)
def test_a_clean_opinion_is_still_written(text: str, expected: set[tuple[str, str]]) -> None:
    assert _opinions(text) == expected


def test_an_opinion_said_with_so_much_is_reversed_later(db: WorldDB) -> None:
    _say(db, "c", "2024-03-01", "I love my job so much!")
    _say(db, "c", "2024-05-01", "Honestly I don't like my job anymore.")
    assert _facts(db, "opinion of job") == ["dislikes"]
    assert _facts(db, "opinion of job", as_of="2024-04-01") == ["likes"]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("I bought a metal detector and walk along the beaches.", ["metal detector"]),  # a clause after "and"
        ("I bought some new devices and refurbished my gaming desk.", ["new devices"]),
        ("I bought a console for my partner as a gift on the 17th.", ["console for my partner"]),
        ("I bought a cross necklace to feel closer to my faith- which has made me happy.", ["cross necklace"]),
        ("I bought new props for the yoga class!", ["new props for the yoga class"]),
        ("I bought it a year ago in Paris.", []),  # a pronoun and a time
        ("Here is the new aquarium that I bought the day before yesterday.", []),  # its object is before it
        ("I bought this month, finally.", []),
    ],
)
def test_a_purchase_is_a_concrete_thing(text: str, expected: list[str]) -> None:
    facts = RULES.extract(text, speaker="me", said_at="2024-05-01").facts
    assert [f.value for f in facts if f.slot == "bought"] == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("I completed 15 classification problems with a consistent accuracy rate above 80%", set()),  # a bound
        ("I've completed 25 problems with an accuracy exceeding 90%, but I'm not sure", set()),
        ("I completed 25 problems with an accuracy of 90%.", {("accuracy", "90%")}),
    ],
)
def test_a_percentage_said_as_a_bound_is_no_value(text: str, expected: set[tuple[str, str]]) -> None:
    found = RULES.extract(text, speaker="me", said_at="2024-05-01").facts
    assert {(f.slot, f.value) for f in found if f.value.endswith("%")} == expected


def test_a_score_out_of_ten_is_the_score() -> None:
    text = "I've increased my interview answer clarity score from 6.5 to 8.2 out of 10 in Greg's assessments"
    assert ("interview answer clarity score", "8.2", True) in _values(text)


def test_an_instruction_reversed_later_replaces_the_earlier_and_others_stand(db: WorldDB) -> None:
    _say(db, "c", "2024-01-10", "Always use bullet points when I ask about plans.")
    _say(db, "c", "2024-01-10", "Always include sources when I ask about history.")
    _say(db, "c", "2024-02-15", "Never use bullet points when I ask about plans!")
    assert _facts(db, INSTRUCTION_SLOT) == [
        "Always include sources when I ask about history.",
        "Never use bullet points when I ask about plans!",
    ]
    assert "Always use bullet points when I ask about plans." in _facts(db, INSTRUCTION_SLOT, as_of="2024-02-01")
    found = db.recall("how should my plans look", scope="me", k=10)
    offered = [h.node.content for h in found.hits if any(r.lane == "instruction" for r in h.why)]
    assert offered == ["Never use bullet points when I ask about plans!"]  # the old one is no longer offered


def test_a_reversed_instruction_replaces_the_earlier_whatever_its_last_word(db: WorldDB) -> None:
    _say(db, "c", "2024-01-10", "Always round discounts to 10%")
    _say(db, "c", "2024-02-15", "Never round discounts to 10%.")
    assert _facts(db, INSTRUCTION_SLOT) == ["Never round discounts to 10%."]


def test_an_instruction_is_offered_through_a_later_turn_when_its_first_is_retired(db: WorldDB) -> None:
    _say(db, "c", "2024-01-10", "Always list status codes for REST API errors.")
    _say(db, "c", "2024-02-15", "Always list status codes for REST API errors.")  # said again: the same fact
    first = next(
        h.node
        for h in db.recall("REST API errors", scope="me", k=10).hits
        if h.node.type == "Turn" and h.node.valid_at.startswith("2024-01-10")
    )
    db.retire(first.id)
    found = db.recall("what should my REST API return when a request goes wrong", scope="me", k=10)
    offered = [h.node for h in found.hits if any(r.lane == "instruction" for r in h.why)]
    assert [(n.type, n.valid_at[:10]) for n in offered] == [("Turn", "2024-02-15")]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Can you remind me that it's rescheduled to March 22 at 4:30 PM?", True),  # asked, yet presupposed
        ("I'm happy: I've managed to get it down to just 4 hours in March", True),
        ("the commits merged into the main branch, which has now reached 165, keep growing", True),
        ("I've adjusted the snack budget to $75 for the marathon", True),
        ("How it was shortened to 5-7 months is what I want to know", True),
        ("If the deadline is pushed back to May 5, what then?", False),  # supposed
        ("I went to the store and then to the gym", False),  # no changed value
        ("We need to go to 5 stores", False),
        ("Run `budget = increased to 5` in the shell", False),  # code
        ("Rescheduled to 4:30 PM.", True),  # a sentence may open with it
        ("Got it down to 4 hours!", True),
    ],
)
def test_says_change_finds_a_change_told_even_of_an_unnamed_thing(text: str, expected: bool) -> None:
    assert says_change(text) is expected


def test_a_long_text_of_suppositions_is_read_in_one_pass() -> None:
    text = "if x moved to 5 " * 18_750  # 300 KB, every match supposed: each clause is read from near it
    assert says_change(text) is False
    assert RULES.extract(text, speaker="me", said_at="2024-01-01T00:00:00.000000Z").facts == ()


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Sam moved to Porto", [("sam", "lives in", "Porto")]),
        ("sam lives in Lisbon now", [("sam", "lives in", "Lisbon")]),
        ("Sam works at Google", [("sam", "works at", "Google")]),
        ("Samantha moved to Porto", []),  # another name that starts the same
        ("Tom moved to Porto", []),  # someone else: not the speaker's fact
        ("Uncle Sam moved to Porto", []),  # part of another name
        ("The Sam I know works at Acme", []),
    ],
)
def test_the_speakers_facts_said_by_name_are_the_speakers(text: str, expected: list[tuple[str, str, str]]) -> None:
    found = RuleExtractor().extract(text, speaker="sam", said_at="2024-01-01T00:00:00Z").facts
    assert [(f.subject, f.slot, f.value) for f in found] == expected


@pytest.mark.parametrize("text", ["One user moved to Firefox after the update.", "Our test user works at Acme"])
def test_a_speaker_named_for_a_role_takes_no_third_person_facts(text: str) -> None:
    assert RuleExtractor().extract(text, speaker="user", said_at="2024-01-01T00:00:00Z").facts == ()


def test_a_fact_said_twice_is_one_fact_that_keeps_the_change() -> None:
    from worlddb_lite.text.extract import FactMention, _once

    plain = FactMention("ana", "budget", "$50", True)
    changed = FactMention("ana", "budget", "$50", True, changed=True)
    assert _once([plain, FactMention("ana", "budget", "$60", True), changed]) == (
        FactMention("ana", "budget", "$50", True, changed=True),
        FactMention("ana", "budget", "$60", True),
    )
