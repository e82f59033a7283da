"""Issue 37: a confidence on every recall, and nothing returned below a floor, through the API, the CLI and MCP."""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from worlddb_lite import InvalidInput, StaticEmbedder, WorldDB
from worlddb_lite.mcp import build_server
from worlddb_lite.retrieval import confidence as confidence_module

from .conftest import FakeClock, run, table_digest
from .test_mcp import ToolError, call

EMBEDDER = StaticEmbedder()


@pytest.fixture
def ana(tmp_path: Path) -> Iterator[WorldDB]:
    with WorldDB(str(tmp_path / "a.db"), embedder=EMBEDDER, clock=FakeClock()) as db:
        db.write("Ana is allergic to cashews and carries an antihistamine", scope="ana")
        db.write("Ana plays the cello in a quartet on Thursdays", scope="ana")
        db.write("Ana's sister Emma lives in Porto", scope="ana")
        yield db


def test_every_recall_says_how_sure_it_is_from_named_signals(ana: WorldDB) -> None:
    found = ana.recall("is Ana allergic to cashews?", scope="ana")
    assert 0.0 <= found.confidence <= 1.0
    assert set(found.signals) == set(confidence_module.SIGNALS)
    assert found.signals["coverage"] == 1.0  # every content word of the question is in the first hit
    assert found.confidence == confidence_module.confidence(found.signals)
    assert not found.withheld


def test_a_question_the_memory_answers_is_surer_than_one_it_does_not(ana: WorldDB) -> None:
    answered = ana.recall("is Ana allergic to cashews?", scope="ana").confidence
    unknown = ana.recall("what is the wifi password at the office?", scope="ana").confidence
    assert answered > unknown


def test_words_said_by_someone_other_than_the_person_asked_about_lower_the_confidence(tmp_path: Path) -> None:
    """LoCoMo's category 5: asked of Caroline what Melanie said, in Melanie's own words."""
    chat = [
        ("Melanie", "I ran a charity race for mental health last Saturday, it was exhausting"),
        ("Caroline", "That sounds amazing, how did you feel afterwards?"),
        ("Melanie", "I realized self-care is really important after that race"),
        ("Caroline", "I went to a support group meeting yesterday and it helped a lot"),
        ("Melanie", "My kids and I painted a sunrise together over the weekend"),
        ("Caroline", "I am researching adoption agencies for the summer"),
    ]
    with WorldDB(str(tmp_path / "c.db"), embedder=EMBEDDER, clock=FakeClock()) as db:
        for speaker, text in chat:
            db.add_turn(text, scope="chat", session="s1", speaker=speaker, extractor=None)
        theirs = db.recall("What did Melanie realize after her charity race?", scope="chat")
        others = db.recall("What did Caroline realize after her charity race?", scope="chat")
    assert theirs.signals["asked"] == others.signals["asked"] == 1.0
    assert theirs.signals["asked_lead"] > 0 > others.signals["asked_lead"]
    assert theirs.confidence > others.confidence


def test_the_example_in_docs_recall_holds(tmp_path: Path) -> None:
    with WorldDB(str(tmp_path / "sure.db"), embedder=EMBEDDER) as db:
        db.write("Ana is allergic to cashews", scope="ana")
        assert db.recall("is Ana allergic to anything?", scope="ana", min_confidence=0.5).hits
        nothing = db.recall("what is Ana's blood type?", scope="ana", min_confidence=0.5)
        assert nothing.hits == () and nothing.withheld
        told = db.context("what is Ana's blood type?", scope="ana", min_confidence=0.5).text
        assert told.startswith("Nothing relevant is stored")


@pytest.mark.parametrize("said", ["ok", "thanks", "asdf qwerty", "what is the capital of Peru?", "🤔", "x"])
def test_filler_gibberish_and_world_questions_are_not_taken_for_answers(ana: WorldDB, said: str) -> None:
    """An assistant recalls on every message: "ok" or a question about the world must not pass a floor."""
    answered = ana.recall("is Ana allergic to cashews?", scope="ana").confidence
    sure = ana.recall(said, scope="ana").confidence
    assert sure < 0.5 <= answered and sure < answered - 0.3


def test_below_the_floor_nothing_is_returned_and_the_context_says_so(ana: WorldDB) -> None:
    question = "what is the wifi password at the office?"
    everything = ana.recall(question, scope="ana")
    assert everything.hits  # by default every recall returns its hits
    held = ana.recall(question, scope="ana", min_confidence=1.0)
    assert held.hits == () and held.withheld and held.confidence == everything.confidence
    assert ana.recall(question, scope="ana", min_confidence=0.0).hits == everything.hits
    text = ana.context(question, scope="ana", min_confidence=1.0).text
    assert text.startswith("Nothing relevant is stored for: what is the wifi password")


def test_the_same_first_hit_is_as_sure_whatever_k_is(tmp_path: Path) -> None:
    with WorldDB(str(tmp_path / "k.db"), embedder=EMBEDDER, clock=FakeClock()) as db:
        people = ["Caroline is researching adoption agencies", "Melanie paints sunrises", "Caroline went hiking"]
        for text in people + [f"note {n} about the weather and the garden" for n in range(12)]:
            db.write(text, scope="c")
        every = db.recall("What is Caroline researching?", scope="c", k=10)
        for k in (1, 3, 5):
            some = db.recall("What is Caroline researching?", scope="c", k=k)
            assert some.hits == every.hits[:k]
            assert some.confidence == every.confidence and some.signals == every.signals


@pytest.mark.parametrize("bad", [-0.1, 1.5, math.nan, "0.5", True, math.inf, 10**400])
def test_a_floor_outside_0_to_1_is_refused_and_nothing_runs(ana: WorldDB, bad: Any) -> None:
    before = table_digest(ana)
    with pytest.raises(InvalidInput, match="min_confidence must be a number from 0 to 1"):
        ana.recall("cashews", scope="ana", min_confidence=bad)
    with pytest.raises(InvalidInput, match="min_confidence must be a number from 0 to 1"):
        ana.context("cashews", scope="ana", min_confidence=bad)
    assert table_digest(ana) == before


def test_the_cli_prints_the_confidence_and_says_nothing_relevant(
    ana: WorldDB, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = str(tmp_path / "a.db")
    ana.close()
    code, out, _ = run(capsys, "recall", path, "is Ana allergic to cashews?", "--scope", "ana")
    assert code == 0 and out.startswith("confidence ") and "(that the first hit answers)" in out
    code, out, _ = run(capsys, "recall", path, "wifi password?", "--scope", "ana", "--min-confidence", "1")
    assert code == 0 and out.startswith("nothing relevant: the best match's confidence")
    code, _, err = run(capsys, "recall", path, "wifi", "--scope", "ana", "--min-confidence", "2")
    assert code != 0 and "min_confidence must be a number from 0 to 1" in err


def test_mcp_recall_takes_a_floor_and_says_nothing_relevant(ana: WorldDB) -> None:
    server = build_server(ana)
    sure = call(server, "memory_recall", {"query": "is Ana allergic to cashews?", "scope": "ana"})
    assert sure["hits"] and 0.0 <= sure["confidence"] <= 1.0 and "nothing_relevant" not in sure
    none = call(server, "memory_recall", {"query": "wifi password?", "scope": "ana", "min_confidence": 1.0})
    assert none["hits"] == [] and none["nothing_relevant"] is True and none["withheld"] is True
    assert call(server, "memory_recall", {"query": "wifi password?", "scope": "ana", "min_confidence": 0})["hits"]
    with pytest.raises(ToolError, match="min_confidence must be a number from 0 to 1"):
        call(server, "memory_recall", {"query": "wifi", "scope": "ana", "min_confidence": 3})
    for not_a_number in (True, "0.5"):  # refused as the API refuses them, not read as 1.0 or 0.5
        with pytest.raises(ToolError, match="min_confidence"):
            call(server, "memory_recall", {"query": "wifi", "scope": "ana", "min_confidence": not_a_number})


def test_no_signals_no_confidence() -> None:
    assert confidence_module.confidence({}) == 0.0
    assert confidence_module.confidence({"cosine": math.nan}) == 0.0  # not 1, which would pass any floor
    assert 0.5 < confidence_module.confidence({"coverage": 1.0}, {n: 1.0 for n in confidence_module.SIGNALS}, 0.0)


def test_a_hit_in_other_words_still_matches_the_question_token_by_token() -> None:
    from worlddb_lite.retrieval.late import text_scores

    texts = ["She plays tennis every Sunday morning", "The office printer is out of toner", "", "the and of"]
    sport, printer, empty, function = text_scores(EMBEDDER.token_vectors(), "which sport does she do?", texts, 2000)
    assert sport > printer > 0.0
    assert empty == function == 0.0


def test_a_hit_of_the_cold_tier_is_as_close_to_the_question_as_when_it_was_hot(tmp_path: Path) -> None:
    with WorldDB(str(tmp_path / "cold.db"), embedder=EMBEDDER) as db:
        db.write("Ana is allergic to cashews and carries an antihistamine", scope="ana")
        for n in range(30):
            db.write(f"Ana note {n}: the garden had {n} tomatoes and the weather was mild", scope="ana")
        question = "allergic cashews antihistamine"
        hot = db.recall(question, scope="ana", include_cold=True)
        db.set_retention(max_hot_vectors=5)
        db.consolidate()
        cold = db.recall(question, scope="ana", include_cold=True)
        assert cold.hits[0].node.id == hot.hits[0].node.id
        assert db.retention()["cold"] > 0
        assert cold.signals["cosine"] == pytest.approx(hot.signals["cosine"], abs=1e-3)


def test_a_possessive_is_its_owner_so_a_speakers_name_is_left_out_of_what_is_asked() -> None:
    assert confidence_module.content_words("What is Jon's bakery selling?") == {"jon", "baker", "sell"}
    assert (
        confidence_module.content_words("works worked working") == {"work"} == confidence_module.content_words("work")
    )
    assert confidence_module.content_words("Emma’s dog") == {"emma", "dog"}
