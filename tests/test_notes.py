"""write/notes.py: a note written with an extractor goes through the same System 2 as a conversation's turn."""

from __future__ import annotations

import io

import pytest

from worlddb_lite import InvalidInput, RuleExtractor, WorldDB

from .conftest import table_digest


def _facts(db: WorldDB, scope: str, *, include_superseded: bool = False) -> list[str]:
    nodes = db.nodes(world=db.scope(scope), type="Fact", include_superseded=include_superseded)
    return sorted(n.content or "" for n in nodes)


def test_a_later_note_supersedes_the_fact_of_an_earlier_one(db: WorldDB) -> None:
    db.write("I live in Lisbon", scope="ana", valid_at="2023-03-01", extractor=RuleExtractor())
    db.write("I moved to Porto", scope="ana", valid_at="2024-05-01", extractor=RuleExtractor())
    assert _facts(db, "ana") == ["ana lives in: Porto"]  # the note speaks for the scope's person
    assert _facts(db, "ana", include_superseded=True) == ["ana lives in: Lisbon", "ana lives in: Porto"]
    old = db.nodes(world=db.scope("ana"), type="Fact", include_superseded=True)
    lisbon = next(n for n in old if "Lisbon" in (n.content or ""))
    assert lisbon.superseded_by and lisbon.invalid_at == "2024-05-01T00:00:00.000000Z"
    assert db.verify().ok


def test_a_named_speaker_speaks_instead_of_the_scope(db: WorldDB) -> None:
    db.write("I live in Lisbon", scope="family", speaker="Sam", extractor=RuleExtractor())
    assert _facts(db, "family") == ["Sam lives in: Lisbon"]


def test_the_assistants_words_teach_nothing_about_the_person_in_a_note_as_in_a_turn(db: WorldDB) -> None:
    """One rule for every memory (queue.learn_or_queue): what the assistant says is not about the person."""
    db.write("I live in Lisbon", scope="ana", speaker="assistant", extractor=RuleExtractor())
    db.add_turn("I live in Porto", scope="ana", speaker="Assistant", extractor=RuleExtractor())
    db.write("I live in Lisbon", scope="ana", speaker="assistant", deferred=True, extractor=RuleExtractor())
    assert _facts(db, "ana") == [] and db.queued() == 0
    db.write("I live in Rome", scope="ana", extractor=RuleExtractor())
    assert _facts(db, "ana") == ["ana lives in: Rome"]


@pytest.mark.parametrize("scope", ["assistant", "system", "agent:assistant"])
def test_a_note_in_a_scope_named_like_the_assistant_still_speaks_for_that_scope(db: WorldDB, scope: str) -> None:
    """Only a speaker named the assistant makes a note the assistant's; a scope's name does not (review, issue 39)."""
    db.write("I moved to Porto", scope=scope, extractor=RuleExtractor())
    assert [fact.endswith("Porto") for fact in _facts(db, scope)] == [True]


def test_deferred_queues_the_same_work_for_consolidate(db: WorldDB, tmp_path) -> None:
    other = WorldDB(str(tmp_path / "inline.db"), embedder=db._embedder, clock=db._clock)
    try:
        for store, deferred in ((db, True), (other, False)):
            store.write(
                "I live in Lisbon", scope="ana", valid_at="2023-03-01", extractor=RuleExtractor(), deferred=deferred
            )
            store.write(
                "I moved to Porto", scope="ana", valid_at="2024-05-01", extractor=RuleExtractor(), deferred=deferred
            )
        assert db.queued() == 2 and _facts(db, "ana") == []
        assert db.consolidate(RuleExtractor()).queue == 2 and db.queued() == 0
        assert _facts(db, "ana") == _facts(other, "ana") == ["ana lives in: Porto"]
    finally:
        other.close()


def test_without_an_extractor_a_note_is_stored_alone(db: WorldDB) -> None:
    db.write("I live in Lisbon", scope="ana", extractor=None)
    assert _facts(db, "ana") == [] and db.nodes(type="Entity") == []


def test_by_default_a_note_goes_through_system_2(db: WorldDB) -> None:
    db.write("I live in Lisbon", scope="ana", valid_at="2024-01-01")
    db.write("I moved to Porto", scope="ana", valid_at="2024-06-01")
    assert _facts(db, "ana") == ["ana lives in: Porto"]


def test_only_notes_in_a_scope_are_read(db: WorldDB) -> None:
    db.write("I live in Lisbon", scope="ana", type="Observation", extractor=RuleExtractor())
    world = db.world("trip", parent=db.scope("ana"))
    db.write("I live in Porto", world=world, extractor=RuleExtractor())
    assert db.nodes(type="Fact") == [] and db.nodes(type="Entity") == []


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"extractor": "rules"}, "extractor must have extract"),
        ({"extractor": RuleExtractor(), "deferred": "yes"}, "deferred must be True or False"),
        ({"extractor": RuleExtractor(), "speaker": 3}, "speaker must be text"),
    ],
)
def test_bad_options_write_nothing(db: WorldDB, options: dict[str, object], message: str) -> None:
    before = table_digest(db)
    with pytest.raises(InvalidInput, match=message):
        db.write("I live in Lisbon", scope="ana", **options)  # type: ignore[arg-type]
    assert table_digest(db) == before


def test_the_cli_writes_a_note_that_is_understood(tmp_path, capsys, monkeypatch) -> None:
    from worlddb_lite.cli import main

    store = str(tmp_path / "cli.db")
    assert main(["write", store, "I live in Lisbon", "--scope", "ana", "--valid-at", "2023-03-01"]) == 0
    monkeypatch.setattr("sys.stdin", io.StringIO("I moved to Porto\n"))
    assert main(["write", store, "-", "--scope", "ana", "--valid-at", "2024-05-01"]) == 0
    assert main(["write", store, "I live in Faro", "--scope", "bo", "--verbatim"]) == 0  # the text alone
    with WorldDB(store) as db:
        assert [n.content for n in db.nodes(type="Fact")] == ["ana lives in: Porto"]
        assert "I moved to Porto" in [n.content for n in db.nodes(type="Memory")]  # stdin's newline left out


def test_an_amended_note_is_read_again_and_its_new_value_supersedes_the_old(db: WorldDB) -> None:
    old = db.write("I live in Lisbon", scope="ana", valid_at="2023-03-01")
    db.amend(old, "I live in Porto", valid_at="2024-05-01")
    assert _facts(db, "ana") == ["ana lives in: Porto"]
    assert _facts(db, "ana", include_superseded=True) == ["ana lives in: Lisbon", "ana lives in: Porto"]
    assert [h.node.content for h in db.recall("where does ana live?", scope="ana", k=2).hits] in (
        ["ana lives in: Porto", "I live in Porto"],
        ["I live in Porto", "ana lives in: Porto"],
    )


def test_a_fact_only_the_old_version_said_closes_when_the_new_version_starts(db: WorldDB) -> None:
    old = db.write("I work at Google", scope="ana", valid_at="2023-03-01")
    db.write("I work at Google", scope="ana", valid_at="2023-03-02")  # another note says it too
    gone = db.write("I live in Lisbon", scope="ana", valid_at="2023-03-01")
    db.amend(gone, "I enjoy green tea", valid_at="2024-05-01")
    db.amend(old, "I enjoy black tea", valid_at="2024-05-01")
    assert "ana lives in: Lisbon" not in _facts(db, "ana")
    assert "ana works at: Google" in _facts(db, "ana")  # the other note still says it
    lisbon = next(n for n in db.nodes(type="Fact", include_superseded=True) if n.content == "ana lives in: Lisbon")
    assert lisbon.invalid_at == "2024-05-01T00:00:00.000000Z" and not lisbon.superseded_by
    assert "ana lives in: Lisbon" in [
        h.node.content for h in db.recall("where do I live?", scope="ana", as_of="2023-12-31").hits
    ]


def test_a_verbatim_amend_leaves_the_facts_alone(db: WorldDB) -> None:
    old = db.write("I live in Lisbon", scope="ana", valid_at="2023-03-01")
    db.amend(old, "I live in Porto", valid_at="2024-05-01", extractor=None)
    assert _facts(db, "ana") == ["ana lives in: Lisbon"]


def test_a_note_naming_the_scopes_person_reaches_their_facts(db: WorldDB) -> None:
    db.write("I live in Lisbon", scope="sam", valid_at="2023-03-01")
    db.write("Sam moved to Porto", scope="sam", valid_at="2024-05-01")  # third person, by name
    assert _facts(db, "sam") == ["sam lives in: Porto"]


def test_an_amend_chain_closes_what_the_current_version_no_longer_says(db: WorldDB) -> None:
    note = db.write("I live in Lisbon", scope="ana", valid_at="2023-01-01")
    note = db.amend(note, "I live in Lisbon. I work at Google.", valid_at="2023-06-01")
    db.amend(note, "I work at Google.", valid_at="2024-01-01")
    assert _facts(db, "ana") == ["ana works at: Google"]  # the first version holds nothing up


def test_amending_a_turn_closes_none_of_its_facts(db: WorldDB) -> None:
    turn = db.add_turn("I work at Google", scope="ana", speaker="ana", at="2024-01-01T10:00:00Z")
    db.amend(turn, "I work at Google, as an engineer", valid_at="2024-03-01")
    assert _facts(db, "ana") == ["ana works at: Google"]


def test_a_deferred_amend_closes_nothing_before_the_queue_reads_it(db: WorldDB) -> None:
    note = db.write("I live in Lisbon", scope="ana", valid_at="2023-01-01")
    db.amend(note, "I live in Lisbon, still.", valid_at="2024-01-01", deferred=True)
    assert _facts(db, "ana") == ["ana lives in: Lisbon"]
    db.consolidate()
    assert _facts(db, "ana") == ["ana lives in: Lisbon"]


def test_an_amend_speaks_for_whom_the_old_version_spoke(db: WorldDB) -> None:
    note = db.write("I live in Lisbon", scope="family", speaker="Sam", valid_at="2023-01-01")
    db.amend(note, "I moved to Porto", valid_at="2024-01-01")
    assert _facts(db, "family") == ["Sam lives in: Porto"]


def test_the_cli_refuses_verbatim_with_deferred(tmp_path, capsys) -> None:
    from worlddb_lite.cli import main

    store = str(tmp_path / "v.db")
    assert main(["write", store, "I live in Lisbon", "--scope", "ana", "--verbatim", "--deferred"]) == 2
    assert "give one" in capsys.readouterr().err
