"""Hybrid recall (the lanes, RRF, validity, containment, rerank), context assembly and the CLI."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from worlddb_lite import InvalidInput, NotFound, WorldDB
from worlddb_lite.cli import main
from worlddb_lite.retrieval import lanes
from worlddb_lite.retrieval import recall as recall_module
from worlddb_lite.retrieval.context import assemble, estimate_tokens
from worlddb_lite.retrieval.fusion import RRF_K, rrf
from worlddb_lite.retrieval.lanes import fts_query
from worlddb_lite.store import queries
from worlddb_lite.write.conversation import ConversationIn, SessionIn, TurnIn

from .conftest import FakeEmbedder, nid_of, table_digest


def _conversation(scope: str, sessions: list[tuple[str, list[str]]]) -> ConversationIn:
    return ConversationIn(
        f"{scope}-chat",
        [scope],
        [
            SessionIn(str(i), date, [TurnIn(text, "Ana", f"D{i}:{j}") for j, text in enumerate(turns, start=1)])
            for i, (date, turns) in enumerate(sessions, start=1)
        ],
    )


@pytest.fixture
def ana(db: WorldDB) -> WorldDB:
    db.ingest(
        _conversation(
            "ana",
            [
                ("2024-01-10", ["I live in Austin", "My sister Emma loves pottery", "The weather is grey today"]),
                ("2024-03-02", ["I moved to Denver last week", "Emma's birthday is June 3", "I adopted a kitten"]),
            ],
        ),
    )
    db.ingest(_conversation("bob", [("2024-01-11", ["I adopted a kitten named Miso", "I live in Boston"])]))
    return db


def _turn_ids(found: object) -> list[str]:
    return [t.props["turn_id"] for hit in found.hits for t in hit.turns]  # type: ignore[attr-defined]


def test_rrf_sums_reciprocal_ranks_with_k_60() -> None:
    fused = dict(rrf({"text": [1, 2], "vector": [2, 3]}))
    assert RRF_K == 60
    assert fused[2] == pytest.approx(1 / 62 + 1 / 61)
    assert fused[1] == pytest.approx(1 / 61) and fused[3] == pytest.approx(1 / 62)
    assert [nid for nid, _ in rrf({"text": [1, 2], "vector": [2, 3]})] == [2, 1, 3]


def test_rrf_among_some_scores_them_as_the_whole_fusion_does() -> None:
    lanes = {"text": [1, 2, 4], "vector": [2, 3, 4], "late": [4, 1]}
    whole = rrf(lanes, weights={"late": 2.0})
    some = rrf(lanes, weights={"late": 2.0}, among={1, 4})
    assert some == [(nid, score) for nid, score in whole if nid in {1, 4}]


def test_recall_finds_a_turn_by_its_words_and_says_which_lanes_ranked_it(ana: WorldDB) -> None:
    found = ana.recall("pottery", scope="ana", k=3)
    top = found.hits[0]
    assert top.node.content == "My sister Emma loves pottery"
    assert top.turns == (top.node,)
    assert {r.lane for r in top.why} >= {"text", "vector"}
    assert next(r for r in top.why if r.lane == "text").rank == 1
    assert found.hits == tuple(sorted(found.hits, key=lambda h: -h.score))


def test_recall_stays_inside_its_scope(ana: WorldDB) -> None:
    assert "D1:1" in _turn_ids(ana.recall("adopted a kitten", scope="bob", k=10))
    for hit in ana.recall("adopted a kitten", scope="ana", k=10).hits:
        assert all(t.props["conversation"] == "ana-chat" for t in hit.turns)
        assert hit.node.props.get("conversation", "ana-chat") == "ana-chat"
    everywhere = {t.props["conversation"] for h in ana.recall("adopted a kitten", k=10).hits for t in h.turns}
    assert everywhere == {"ana-chat", "bob-chat"}


def test_the_entity_lane_reaches_facts_and_turns_about_a_named_entity(ana: WorldDB) -> None:
    found = ana.recall("Emma", scope="ana", k=10)
    via = [r for h in found.hits for r in h.why if r.lane == "entity"]
    assert via and all(r.via == "emma" and r.edge for r in via)
    fact = next(h for h in found.hits if h.node.type == "Fact")
    assert fact.turns and fact.turns[0].type == "Turn"  # a fact stands for the turn it was learned from
    assert "Emma" in fact.turns[0].content


def test_superseded_facts_are_hidden_unless_asked_for_and_then_marked(ana: WorldDB) -> None:
    facts = [h.node for h in ana.recall("where does Ana live", scope="ana", k=20).hits if h.node.type == "Fact"]
    assert any("Denver" in (f.content or "") for f in facts)
    assert not any("Austin" in (f.content or "") for f in facts)
    found = ana.recall("where does Ana live", scope="ana", k=20, include_superseded=True)
    austin = next(h for h in found.hits if h.node.type == "Fact" and "Austin" in (h.node.content or ""))
    assert austin.node.superseded_by
    context = assemble(found, budget=4000)
    line = next(item.text for item in context.items if item.node == austin.node.id)
    assert "historical" in line and "superseded by" in line


def test_as_of_recalls_what_was_true_then(ana: WorldDB) -> None:
    then = ana.recall("where does Ana live", scope="ana", k=20, as_of="2024-02-01")
    facts = [h.node.content or "" for h in then.hits if h.node.type == "Fact"]
    assert any("Austin" in f for f in facts) and not any("Denver" in f for f in facts)
    assert all(h.node.valid_at <= "2024-02-01" for h in then.hits)
    assert ana.recall("Austin", scope="ana", as_of="2000-01-01").hits == ()  # before the first memory


@pytest.mark.parametrize(
    "query",
    [
        "AND OR NOT",
        '"unbalanced',
        "pottery*",
        "content: pottery",
        "(pottery",
        "NEAR(a b)",
        "Emma's ^ pottery -",
        "pottery " * 20_000,
    ],
)
def test_fts_syntax_and_huge_queries_never_reach_sqlite_as_syntax(ana: WorldDB, query: str) -> None:
    found = ana.recall(query, scope="ana", k=5)
    assert len(found.hits) <= 5


def test_bad_queries_and_unknown_scopes_get_clear_errors_and_change_nothing(ana: WorldDB) -> None:
    before = table_digest(ana)
    for bad in ("", "   "):
        with pytest.raises(InvalidInput, match="empty|required"):
            ana.recall(bad)
    with pytest.raises(NotFound, match="no scope named 'carol'"):
        ana.recall("kitten", scope="carol")
    with pytest.raises(InvalidInput, match="not both"):
        ana.recall("kitten", scope="ana", world=ana.root_id)
    with pytest.raises(InvalidInput, match="k must be"):
        ana.recall("kitten", k=0)
    assert table_digest(ana) == before


def test_fts_query_drops_function_words_only_when_something_else_is_left() -> None:
    assert fts_query("What did she do", drop_stopwords=True) == '"What" OR "did" OR "she" OR "do"'
    assert fts_query("What did Emma adopt", drop_stopwords=True) == '"Emma" OR "adopt"'


class Reverse:
    """A reranker that prefers the passage the fusion liked least: the order must follow it."""

    def score(self, query: str, passages: Sequence[str]) -> np.ndarray:
        return np.arange(len(passages), dtype=np.float32)


def test_a_reranker_reorders_the_fused_head(ana: WorldDB) -> None:
    plain = ana.recall("kitten", scope="ana", k=5)
    reranked = ana.recall("kitten", scope="ana", k=5, reranker=Reverse())
    fused = [h.node.id for h in ana.recall("kitten", scope="ana", k=30).hits]
    assert [h.node.id for h in reranked.hits] == list(reversed(fused))[:5]
    assert all(r.lane == "rerank" for h in reranked.hits for r in h.why[-1:])
    assert [h.node.id for h in plain.hits] == fused[:5]


def test_context_is_dated_tagged_and_within_budget(ana: WorldDB) -> None:
    found = ana.recall("Emma pottery birthday", scope="ana", k=10)
    full = assemble(found, budget=10_000)
    assert full.left_out == 0 and len(full.items) == len(found.hits)
    assert full.items[0].text.startswith("[1] 2024-")
    assert "text #" in full.text and "id " in full.text
    small = assemble(found, budget=60)
    assert small.tokens <= 60 and small.left_out > 0
    assert small.tokens == estimate_tokens(small.text.split("\n")[0]) + sum(i.tokens for i in small.items)
    assert ana.context("pottery", scope="ana", budget=500).text.startswith("Memories recalled for: pottery")


def test_cli_recall_prints_hits_json_and_context(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = str(tmp_path / "cli.db")
    with WorldDB(path) as store:
        store.ingest(_conversation("ana", [("2024-01-10", ["My sister Emma loves pottery", "I like tea"])]))
    assert main(["recall", path, "pottery", "--scope", "ana", "--k", "2"]) == 0
    out = capsys.readouterr().out
    assert "My sister Emma loves pottery" in out and "text #1" in out and "late #" in out
    assert main(["recall", path, "pottery", "--scope", "ana", "--k", "2", "--no-late"]) == 0
    assert "late #" not in capsys.readouterr().out
    assert main(["recall", path, "pottery", "--scope", "ana", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["hits"][0]["node"]["content"] == "My sister Emma loves pottery"
    assert main(["recall", path, "pottery", "--context", "--budget", "200"]) == 0
    assert capsys.readouterr().out.startswith("Memories recalled for: pottery")
    assert main(["recall", path, "pottery", "--scope", "nobody"]) == 2
    assert "no scope named 'nobody'" in capsys.readouterr().err


def test_recall_works_on_a_store_without_an_embedder(tmp_path: Path) -> None:
    with WorldDB(str(tmp_path / "v.db"), embedder=None, dim=4) as store:
        store.write("the red kite flies", vector=[1, 0, 0, 0])
        store.write("a blue boat floats", vector=[0, 1, 0, 0])
        found = store.recall("kite")
        assert [h.node.content for h in found.hits] == ["the red kite flies"]
        assert {r.lane for r in found.hits[0].why} == {"text", "world"}  # the only lane, then its world's prior


def test_recall_inside_a_batch_sees_the_batch(db: WorldDB) -> None:
    with db.batch():
        db.write("the lighthouse keeper's log")
        assert db.recall("lighthouse").hits[0].node.content == "the lighthouse keeper's log"


def test_fake_embedder_is_what_the_fixture_uses(db: WorldDB) -> None:
    assert isinstance(db._embedder, FakeEmbedder)  # the lanes above ran on a deterministic model


def test_a_large_entity_is_only_checked_against_what_the_other_lanes_found(
    ana: WorldDB, monkeypatch: pytest.MonkeyPatch
) -> None:
    view = ana._reader.view(None, None, False, world=ana._reader.scope_id("ana"))
    reached, _ = lanes.entity_lane(view, "Ana", None, 50)
    assert len(reached) >= 6  # small: every turn and fact about Ana is enumerated
    monkeypatch.setattr(lanes, "ENTITY_FANOUT", 1)  # now "Ana" is a large entity: no enumeration
    assert lanes.entity_lane(view, "Ana", None, 50)[0] == []
    some = reached[:2]
    assert sorted(lanes.entity_lane(view, "Ana", None, 50, candidates=some)[0]) == sorted(some)


def test_a_node_naming_a_small_and_a_large_entity_ranks_first_once_the_finds_are_checked(
    ana: WorldDB, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``start_entity_lane`` reads the small names' nodes at once and the large ones' among the finds later."""
    view = ana._reader.view(None, None, False, world=ana._reader.scope_id("ana"))
    about_ana, _ = lanes.entity_lane(view, "Ana", None, 50)
    about_emma, _ = lanes.entity_lane(view, "Emma", None, 50)
    shared = set(about_emma) & set(about_ana)  # the turns and facts that name both
    assert 0 < len(shared) < len(about_emma) < len(about_ana)
    monkeypatch.setattr(lanes, "ENTITY_FANOUT", len(about_emma))  # Emma small, Ana large
    begun = lanes.start_entity_lane(view, "Ana and Emma", None, 50)
    both, paths = begun(about_ana)
    assert set(both[: len(shared)]) == shared  # two of the names before one
    assert set(both) == set(about_ana) | set(about_emma)
    assert {paths[n].alias for n in about_emma} == {"emma"}  # reached first through the small name
    assert sorted(lanes.start_entity_lane(view, "Ana and Emma", None, 50)(())[0]) == sorted(about_emma)


@pytest.mark.parametrize(
    "edge_types, types, towards",
    [
        (("refers_to",), ("Entity",), False),
        (None, ("Entity",), False),
        (("refers_to",), None, False),
        (("refers_to",), ("Turn", "Fact"), True),
        (None, None, True),
    ],
)
def test_linked_to_named_far_nodes_is_every_link_filtered_to_them(
    ana: WorldDB, edge_types: tuple[str, ...] | None, types: tuple[str, ...] | None, towards: bool
) -> None:
    """``queries.linked(far=...)`` (the entity lane's seek for a large entity) keeps exactly those far nodes' rows."""
    view = ana._reader.view(None, None, False, world=ana._reader.scope_id("ana"))
    turns, _ = lanes.entity_lane(view, "Ana", None, 50)  # what refers to Ana, and to whatever else it names
    near = (
        turns
        if not towards
        else sorted(
            {
                far
                for _, _, far, _ in queries.linked(
                    view.conn,
                    ("refers_to",),
                    turns,
                    ("Entity",),
                    view.valid,
                    view.belief,
                    towards=False,
                    include_superseded=False,
                )
            }
        )
    )  # the entities: edges into them
    every = queries.linked(
        view.conn, edge_types, near, types, view.valid, view.belief, towards=towards, include_superseded=False
    )
    others = sorted({far for _, _, far, _ in every})
    assert len(others) >= 2
    for chosen in ([others[0]], others[1:]):
        assert queries.linked(
            view.conn,
            edge_types,
            near,
            types,
            view.valid,
            view.belief,
            towards=towards,
            include_superseded=False,
            far=chosen,
        ) == [row for row in every if row[2] in chosen]
    assert (
        queries.linked(
            view.conn,
            edge_types,
            near,
            types,
            view.valid,
            view.belief,
            towards=towards,
            include_superseded=False,
            far=[],
        )
        == []
    )


def test_order_over_gathered_lanes_is_recall_and_reads_the_weights_when_it_runs(
    ana: WorldDB, monkeypatch: pytest.MonkeyPatch
) -> None:
    """bench/fusion_fit.py replays ``order`` over lanes ``gather`` read once, with the weights it sets."""
    from worlddb_lite.retrieval import recall as pipeline

    view = ana._reader.view(None, None, False, world=ana._reader.scope_id("ana"))
    question = "where does Ana live now"
    found = pipeline.gather(view, question, pipeline.LANE_DEPTH)
    replayed = pipeline.order(view, question, found, k=6)
    assert [(h.node.id, h.score, h.why) for h in replayed] == [
        (h.node.id, h.score, h.why) for h in ana.recall(question, scope="ana", k=6).hits
    ]
    monkeypatch.setattr(pipeline, "LANE_WEIGHTS", {lane: 0.0 for lane in found.lanes} | {"vector": 1.0})
    assert [h.score for h in pipeline.order(view, question, found, k=6)] != [h.score for h in replayed]


def test_a_stale_turn_ranks_below_the_turn_that_superseded_it_but_not_as_of_before(ana: WorldDB) -> None:
    found = ana.recall("where does Ana live", scope="ana", k=20)
    order = [t.content for h in found.hits for t in h.turns]
    assert order.index("I moved to Denver last week") < order.index("I live in Austin")
    austin = next(h for h in found.hits if h.node.content == "I live in Austin")
    assert any(r.lane == "stale" for r in austin.why)
    before = ana.recall("where does Ana live", scope="ana", k=20, as_of="2024-02-01")
    assert not any(r.lane == "stale" for h in before.hits for r in h.why)


def test_a_turn_saying_a_value_changed_ranks_above_the_earlier_turns_naming_its_slot(db: WorldDB) -> None:
    # the first turn's date is read as an event's date, not the sprint deadline: no fact supersedes it
    db.ingest(
        _conversation(
            "ana",
            [
                (
                    "2024-03-01",
                    [
                        "I have a deadline of April 1 for the first sprint of the portfolio site",
                        "The new budget is $500 for the portfolio site hosting",
                    ],
                ),
                (
                    "2024-03-20",
                    [
                        "I need to tidy the portfolio site before the demo",
                        "Please update my plan for the new sprint deadline of April 5",
                    ],
                ),
            ],
        ),
    )
    question = "what is the deadline for the first sprint of the portfolio site"
    order = _turn_ids(db.recall(question, scope="ana", k=10))
    assert order.index("D2:2") < order.index("D1:1")
    changed = next(h for h in db.recall(question, scope="ana", k=10).hits if h.node.props["turn_id"] == "D2:2")
    assert any(r.lane == "changed" for r in changed.why)
    assert order.index("D1:1") < order.index("D1:2")  # a change of another slot (budget) moves nothing
    before = _turn_ids(db.recall(question, scope="ana", k=10, as_of="2024-03-10"))
    assert "D2:2" not in before  # as of before the change, the turn saying it is not there at all


def test_a_change_since_replaced_does_not_climb_back_above_its_replacement(db: WorldDB) -> None:
    db.ingest(
        _conversation(
            "ana",
            [
                ("2024-03-01", ["I have a deadline of April 1 for the first sprint of the portfolio site"]),
                ("2024-03-10", ["Please update my plan for the new sprint deadline of April 5"]),
                ("2024-03-20", ["My sprint deadline is April 9."]),
            ],
        ),
    )
    found = db.recall("what is the deadline for the first sprint of the portfolio site", scope="ana", k=10)
    order = _turn_ids(found)
    assert order.index("D3:1") < order.index("D2:1")  # April 9 replaced April 5: it stays above
    assert not any(r.lane == "changed" for h in found.hits for r in h.why)


def test_a_change_said_earlier_does_not_rank_above_a_later_statement(db: WorldDB) -> None:
    db.ingest(
        _conversation(
            "ana",
            [
                ("2024-03-01", ["Please update my plan for the new sprint deadline of April 5"]),
                ("2024-03-20", ["I have a deadline of April 9 for the first sprint of the portfolio site"]),
            ],
        ),
    )
    found = db.recall("what is the deadline for the first sprint of the portfolio site", scope="ana", k=10)
    assert _turn_ids(found)[0] == "D2:1"
    assert not any(r.lane == "changed" for h in found.hits for r in h.why)


def test_a_turn_telling_of_an_unnamed_change_ranks_above_the_earlier_turn_about_it(
    db: WorldDB, monkeypatch: pytest.MonkeyPatch
) -> None:
    db.ingest(
        _dialogue(
            "ana",
            "2024-03-01",
            [
                (
                    "user",
                    "I have a Zoom meeting with Professor Danielle on March 22 at 3 PM to review my draft, "
                    "what should I discuss with Professor Danielle in the Zoom meeting?",
                ),
                ("user", "I might miss the meeting with Danielle: can you remind me that it's rescheduled to 4:30 PM?"),
                ("assistant", "The Zoom meeting with Professor Danielle was moved to 4:30 PM, so plan for 4:30 PM."),
            ],
        ),
    )
    question = "What time is my Zoom meeting with Professor Danielle?"
    found = db.recall(question, scope="ana", k=3)
    order = _turn_ids(found)
    assert order.index("D1:2") < order.index("D1:1")
    moved = next(h for h in found.hits if h.node.props["turn_id"] == "D1:2")
    assert any(r.lane == "changed" for r in moved.why)
    assert not any(r.lane == "changed" for h in found.hits if h.node.name == "assistant" for r in h.why)
    monkeypatch.setattr(recall_module, "says_change", lambda text: False)  # without the cue: the earlier turn wins
    order = _turn_ids(db.recall(question, scope="ana", k=3))
    assert order.index("D1:1") < order.index("D1:2")


def test_an_unnamed_change_does_not_climb_above_a_later_change_or_an_unrelated_turn(db: WorldDB) -> None:
    db.ingest(
        _dialogue(
            "ana",
            "2024-03-01",
            [
                (
                    "user",
                    "My overtime was 12 hours in February and the overtime log for the team is in the shared drive",
                ),
                ("user", "Good news on overtime: I got it down to 6 hours"),
                (
                    "user",
                    "Better news on overtime: I got it down to just 4 hours in March, and the overtime log shows it",
                ),
                ("user", "The team moved the standup to 10 AM"),
            ],
        ),
    )
    found = db.recall("How many hours of overtime have I tracked most recently?", scope="ana", k=4)
    order = _turn_ids(found)
    assert order.index("D1:3") < order.index("D1:2") < order.index("D1:1")  # newest change first, the old value last
    standup = [h for h in found.hits if h.node.props.get("turn_id") == "D1:4"]
    assert all(r.lane != "changed" for h in standup for r in h.why)  # shares no asked word: moves nothing


def test_an_unnamed_change_stays_below_a_later_statement_of_the_value(db: WorldDB) -> None:
    from worlddb_lite.retrieval.recall import changed_over_stated

    said = [
        ("2024-01-01", "My dentist appointment is on March 20 at 3 PM"),
        ("2024-02-01", "The dentist called: it's been rescheduled to March 22 at 4:30 PM"),
        ("2024-03-01", "Update from the dentist: my appointment is now March 25 at 10 AM"),
    ]
    db.ingest(
        ConversationIn(
            "ana-chat",
            ["ana"],
            [
                SessionIn(str(i), date, [TurnIn(text, "user", f"D{i}:1")])
                for i, (date, text) in enumerate(said, start=1)
            ],
        ),
    )
    view = db._reader.view(None, None, False, world=db._reader.scope_id("ana"))
    turns = {
        str(text): int(nid)
        for nid, text in db.sql("select nid, json_extract(body, '$.content') from node where type = 'Turn'")
    }
    first, change, restated = (turns[text] for _, text in said)
    query = "When is my dentist appointment?"
    # the change passes the first value, never the later statement of the newest one
    assert changed_over_stated(view, [restated, first, change], 10, query) == ([restated, change, first], {change})
    assert changed_over_stated(view, [first, restated, change], 10, query) == ([first, restated, change], set())


def test_an_older_change_never_moves_above_a_later_change_of_the_same_thing(db: WorldDB) -> None:
    from worlddb_lite.retrieval.recall import changed_over_stated

    db.ingest(
        ConversationIn(
            "ana-chat",
            ["ana"],
            [
                SessionIn(str(i), date, [TurnIn(text, "user", f"D{i}:1")])
                for i, (date, text) in enumerate(
                    [
                        ("2024-01-10", "My overtime log is in the shared drive"),
                        ("2024-02-10", "I cut my overtime hours to 6"),
                        ("2024-03-10", "Now I got it down to just 4 hours"),
                    ],
                    start=1,
                )
            ],
        ),
    )
    view = db._reader.view(None, None, False, world=db._reader.scope_id("ana"))
    turns = {
        str(text): int(nid)
        for nid, text in db.sql("select nid, json_extract(body, '$.content') from node where type = 'Turn'")
    }
    log, older, newer = (
        turns[t]
        for t in (
            "My overtime log is in the shared drive",
            "I cut my overtime hours to 6",
            "Now I got it down to just 4 hours",
        )
    )
    query = "how many overtime hours"
    # the newer change shares no asked word with the log and stays; the older one may pass the log, not the newer
    assert changed_over_stated(view, [log, newer, older], 10, query) == ([log, newer, older], set())
    # below the older change, the newer one passes it (and the log with it)
    assert changed_over_stated(view, [log, older, newer], 10, query) == ([newer, older, log], {older, newer})


def test_a_question_naming_a_date_recalls_what_was_said_around_it(db: WorldDB) -> None:
    db.ingest(
        _conversation(
            "ana",
            [
                ("2022-05-02", ["We went hiking up the hill with the dog", "I cooked dinner for the neighbours"]),
                ("2022-05-26", ["Yesterday I finally finished the quilt for my niece"]),
                ("2022-09-10", ["My neighbours came over and we talked for hours"]),
            ],
        ),
    )
    db.ingest(_conversation("bob", [("2022-05-25", ["Bob sold his old bicycle on Saturday"])]))
    question = "What did Ana do on 25 May, 2022?"
    found = db.recall(question, scope="ana", k=3)
    assert _turn_ids(found)[0] == "D2:1"  # shares no word with the question: only its date finds it
    first = found.hits[0]
    assert any(r.lane == "time" for r in first.why)
    assert "bob" not in {t.props.get("conversation", "").split("-")[0] for h in found.hits for t in h.turns}
    month = db.recall("What happened in September 2022?", scope="ana", k=1)
    assert _turn_ids(month) == ["D3:1"]
    undated = db.recall("What did Ana do?", scope="ana", k=5)
    assert not any(r.lane == "time" for h in undated.hits for r in h.why)  # no date named: the lane is empty
    before = db.recall(question, scope="ana", k=3, as_of="2022-05-20")
    assert "D2:1" not in _turn_ids(before)  # not said yet as of then


def test_a_question_about_yesterday_recalls_what_was_said_yesterday(db: WorldDB) -> None:
    # the fixture's clock reads 1 January 2025: yesterday is 31 December 2024
    db.ingest(
        _conversation(
            "ana",
            [("2024-11-02", ["We baked bread together"]), ("2024-12-31", ["Finally finished the quilt for my niece"])],
        ),
    )
    found = db.recall("What did I do yesterday?", scope="ana", k=1)
    assert _turn_ids(found) == ["D2:1"] and any(r.lane == "time" for r in found.hits[0].why)
    assert _turn_ids(db.recall("What did I do in November?", scope="ana", k=1)) == ["D1:1"]


def test_a_busy_period_keeps_only_what_the_other_lanes_found(db: WorldDB, monkeypatch: pytest.MonkeyPatch) -> None:
    db.ingest(
        _conversation("ana", [("2022-05-25", ["I finished the quilt", "The quilt took a month", "It rained all day"])]),
    )
    view = db._reader.view(None, None, False, world=db._reader.scope_id("ana"))
    turns = {
        str(text): int(nid)
        for nid, text in db.sql("select nid, json_extract(body, '$.content') from node where type = 'Turn'")
    }
    question = "What about the quilt on 25 May 2022?"
    found = [turns["The quilt took a month"]]
    assert set(lanes.time_lane(view, question, None, 10, candidates=found)) == set(turns.values())
    monkeypatch.setattr(lanes, "TIME_FANOUT", 2)  # three turns that day: more than the lane scores
    assert lanes.time_lane(view, question, None, 10, candidates=found) == [turns["The quilt took a month"]]
    assert lanes.time_lane(view, "What about the quilt?", None, 10, candidates=found) == []  # no date named


def test_the_time_lane_offers_no_purged_memory_even_to_a_read_from_before_the_purge(db: WorldDB, clock: object) -> None:
    db.ingest(_conversation("ana", [("2022-05-25", ["I finished the quilt", "It rained all day"])]))
    before = clock.peek()  # type: ignore[attr-defined]
    rain = next(h.node.id for h in db.recall("rained", scope="ana", k=5).hits if h.node.content == "It rained all day")
    db.purge(rain)
    for read in ({}, {"known_as_of": before}):
        found = db.recall("What happened on 25 May 2022?", scope="ana", k=5, **read)
        assert rain not in {h.node.id for h in found.hits}
        assert all(h.node.content for h in found.hits if any(r.lane == "time" for r in h.why))


def test_a_busy_day_in_another_scope_leaves_the_time_lane_whole(db: WorldDB, monkeypatch: pytest.MonkeyPatch) -> None:
    db.ingest(_conversation("ana", [("2022-05-25", ["Yesterday I finished the quilt"])]))
    db.ingest(_conversation("bob", [("2022-05-25", ["b1", "b2", "b3", "b4"])]))
    view = db._reader.view(None, None, False, world=db._reader.scope_id("ana"))
    monkeypatch.setattr(lanes, "TIME_FANOUT", 3)  # bob's four turns are not ana's
    assert len(lanes.time_lane(view, "What did I do on 25 May 2022?", None, 10, candidates=[])) == 1


def test_the_standing_instruction_closest_to_a_question_is_recalled_with_it(
    db: WorldDB, monkeypatch: pytest.MonkeyPatch
) -> None:
    filler = [f"The REST API request number {i} went wrong again and the request log shows it" for i in range(12)]
    db.ingest(
        _conversation(
            "ana",
            [
                (
                    "2024-01-10",
                    ["Always list status codes for REST API errors.", "Always give oven temperatures in Celsius."],
                ),
                ("2024-02-10", filler),
            ],
        ),
    )
    db.ingest(_conversation("bob", [("2024-01-10", ["Always answer in French when I ask about API design."])]))
    question = "what should my REST API return when a request goes wrong"
    found = db.recall(question, scope="ana", k=5)
    given = [h for h in found.hits if h.node.props.get("turn_id") == "D1:1"]
    assert given and any(r.lane == "instruction" for r in given[0].why)
    offered = [h.node.content for h in found.hits if any(r.lane == "instruction" for r in h.why)]
    assert offered == ["Always list status codes for REST API errors."]  # the closest only
    about_design = "how should answers about API design be written"
    assert any("French" in (h.node.content or "") for h in db.recall(about_design, scope="bob", k=5).hits)
    assert all("French" not in (h.node.content or "") for h in db.recall(about_design, scope="ana", k=40).hits)
    monkeypatch.setattr(recall_module, "standing_lanes", lambda view, vector, kinds: {kind: [] for kind in kinds})
    assert "D1:1" not in _turn_ids(db.recall(question, scope="ana", k=5))  # without the lane, buried


def test_the_stated_preference_closest_to_a_question_is_recalled_with_it(db: WorldDB) -> None:
    filler = [f"The REST API request number {i} went wrong again and the request log shows it" for i in range(12)]
    db.ingest(
        _conversation(
            "ana",
            [
                (
                    "2024-01-10",
                    [
                        "I prefer plain status codes for REST API errors over custom ones.",
                        "I prefer oven temperatures in Celsius.",
                    ],
                ),
                ("2024-02-10", filler),
            ],
        ),
    )
    found = db.recall("what should my REST API return when a request goes wrong", scope="ana", k=5)
    offered = [h.node.content for h in found.hits if any(r.lane == "preference" for r in h.why)]
    assert offered == ["I prefer plain status codes for REST API errors over custom ones."]


def test_a_turn_scores_also_by_the_best_turn_of_its_session(ana: WorldDB) -> None:
    from worlddb_lite.retrieval.recall import session_prior

    view = ana._reader.view(None, None, False, world=ana._reader.scope_id("ana"))
    turns = {
        str(text): int(nid)
        for nid, text in ana.sql("select nid, json_extract(body, '$.content') from node where type = 'Turn'")
    }
    best, same, other = turns["I moved to Denver last week"], turns["I adopted a kitten"], turns["I live in Austin"]
    ranked = [(best, 0.05), (other, 0.021), (same, 0.02)]
    prior = session_prior(view, ranked, 1.0)
    assert [nid for nid, _ in prior] == [best, same, other]  # the session of the best turn lifts its other turn
    assert dict(prior)[same] == pytest.approx(0.02 + 0.05) and dict(prior)[other] == pytest.approx(0.021 + 0.021)
    assert session_prior(view, ranked, 0.0) == ranked


def _dialogue(scope: str, date: str, turns: list[tuple[str, str]]) -> ConversationIn:
    return ConversationIn(
        f"{scope}-chat",
        [scope],
        [SessionIn("1", date, [TurnIn(text, speaker, f"D1:{j}") for j, (speaker, text) in enumerate(turns, start=1)])],
    )


def test_the_persons_turn_outranks_the_assistants_reply_that_repeats_it(
    db: WorldDB, monkeypatch: pytest.MonkeyPatch
) -> None:
    db.ingest(
        _dialogue(
            "ana",
            "2024-01-10",
            [
                ("user", "My sourdough starter is called Bubbles"),
                (
                    "assistant",
                    "Bubbles is a lovely name for a sourdough starter! A sourdough starter named Bubbles "
                    "needs feeding: feed the sourdough starter daily.",
                ),
            ],
        ),
    )
    question = "what name did I give my sourdough starter"
    assert _turn_ids(db.recall(question, scope="ana", k=2)) == ["D1:1", "D1:2"]
    monkeypatch.setattr(recall_module, "ASSISTANT_SHARE", 1.0)  # without the prior the reply wins
    assert _turn_ids(db.recall(question, scope="ana", k=2)) == ["D1:2", "D1:1"]


def test_a_turn_said_by_the_person_the_query_names_gains(db: WorldDB) -> None:
    from worlddb_lite.retrieval.recall import NAMED_SPEAKER_WEIGHT, Found, person_prior, speaker_prior

    db.ingest(
        _dialogue(
            "ana",
            "2024-01-10",
            [
                ("Caroline", "I took a watercolour painting class last spring"),
                ("Melanie", "A painting class! Which painting class, the one with the teacher?"),
                ("assistant", "Painting classes are a good way to learn."),
            ],
        ),
    )
    view = db._reader.view(None, None, False, world=db._reader.scope_id("ana"))
    turns = {
        str(name): int(nid)
        for nid, name in db.sql("select nid, json_extract(body, '$.name') from node where type = 'Turn'")
    }
    caroline, melanie, assistant = turns["Caroline"], turns["Melanie"], turns["assistant"]
    ranked = [(assistant, 0.06), (melanie, 0.05), (caroline, 0.047)]
    named = dict(person_prior(view, ranked, "What painting class did caroline take?", Found({}, {}), depth=10))
    assert named[caroline] == pytest.approx(0.047 + NAMED_SPEAKER_WEIGHT * 0.06)  # named (any case)
    assert named[melanie] == 0.05 and named[assistant] == 0.06  # not named; an assistant is named by no one
    weighed = dict(speaker_prior(view, ranked, "What painting class did caroline take?", depth=10))
    reply = recall_module.REPLY_WEIGHT * 0.05  # Melanie answered Caroline: her turn's score lifts Caroline's
    assert weighed[caroline] == pytest.approx(0.047 + reply)  # the name is the person prior's, not this one's
    assert weighed[melanie] == 0.05  # the assistant's reply lifts nothing
    answered = recall_module.ANSWER_WEIGHT * 0.05  # the assistant answered Melanie: her turn's score lifts its answer
    assert weighed[assistant] == pytest.approx(0.06 * recall_module.ASSISTANT_SHARE + answered)
    alone = dict(speaker_prior(view, [(assistant, 0.06), (caroline, 0.047)], "Which painting class?", depth=10))
    assert alone[assistant] == pytest.approx(0.06 * recall_module.ASSISTANT_SHARE)  # what it answered: not in the head
    lifted = person_prior(view, ranked, "What painting class did caroline take?", Found({}, {}), depth=10)
    assert [nid for nid, _ in speaker_prior(view, lifted, "What painting class did caroline take?", depth=10)] == [
        caroline,
        melanie,
        assistant,
    ]
    unnamed = dict(speaker_prior(view, ranked, "Which painting class?", depth=10))
    assert unnamed[caroline] == pytest.approx(0.047 + reply)
    assert dict(speaker_prior(view, ranked[:1] + ranked[2:], "Which painting class?", depth=10))[caroline] == 0.047
    assert speaker_prior(view, ranked, "Which painting class?", depth=1)[1:] == ranked[1:]  # below the depth: as fused


def test_a_speaker_without_words_is_named_by_no_query(db: WorldDB) -> None:
    from worlddb_lite.retrieval.recall import Found, person_prior

    db.ingest(_dialogue("ana", "2024-01-10", [("-", "I took a painting class")]))
    view = db._reader.view(None, None, False, world=db._reader.scope_id("ana"))
    turn = int(db.sql("select nid from node where type = 'Turn'")[0][0])
    assert person_prior(view, [(turn, 0.05)], "which painting class?", Found({}, {}), depth=10) == [(turn, 0.05)]


def test_the_turn_said_next_is_found_past_what_was_written_between(db: WorldDB) -> None:
    from worlddb_lite.store import queries

    session = db.world("ana-chat / 1", parent=db.scope("ana"), type="Session")
    first = db.write("I adopted a kitten", world=session, type="Turn", name="Ana")
    db.write("Ana adopted a kitten", world=session, type="Memory")  # written between the two turns
    second = db.write("What is the kitten called?", world=session, type="Turn", name="Bo")
    elsewhere = db.write(
        "A turn in another session",
        world=db.world("ana-chat / 2", parent=db.scope("ana"), type="Session"),
        type="Turn",
        name="Ana",
    )
    nid = {node: nid_of(db, node) for node in (first, second, elsewhere)}
    assert queries.next_turns(db._conn, [nid[first], nid[second]]) == {nid[first]: (nid[second],)}  # the last has none


def test_the_entity_lane_orders_by_the_question_without_the_names_it_matched(ana: WorldDB) -> None:
    view = ana._reader.view(None, None, False, world=ana._reader.scope_id("ana"))
    assert view.embed is not None
    question = "What does Emma's sister love"
    vector = view.embed(question)
    rest = lanes.what_else(view, question, ["emma"], vector)
    assert rest is not None and np.allclose(rest, view.embed("What does sister love"))
    assert lanes.what_else(view, "Emma", ["emma"], vector) is vector  # nothing but the name: the query as it is
    reached, _ = lanes.entity_lane(view, question, vector, 50)
    cosine = view.index().cosines(reached, rest)
    assert reached == sorted(reached, key=lambda n: (-cosine.get(n, -2.0), -n))


def test_the_in_memory_containment_check_agrees_with_the_sql_walk(ana: WorldDB) -> None:
    from worlddb_lite.store import queries

    every = [int(r[0]) for r in ana.sql("select nid from node order by nid")]
    for scope in ("ana", "bob"):
        view = ana._reader.view(None, None, False, world=ana._reader.scope_id(scope))
        assert len(view.worlds) == 1
        sql = queries.inside(
            ana._conn,
            every,
            view.worlds,
            view.valid,
            view.belief,
            memberships=view.memberships,
            include_superseded=False,
        )
        below = view.below(every)
        assert below and below <= sql  # the index's parents never place a node wrongly
        shown = queries.visible_among(ana._conn, every, view.valid, view.belief, include_superseded=False)
        assert view.inside(every) == [n for n in every if n in sql and n in shown]


def test_word_counts_are_remembered_until_the_next_write(ana: WorldDB, db_path: str, clock: object) -> None:
    from worlddb_lite.store import queries

    def fresh(word: str) -> int:
        return int(ana.sql("select count(*) from node_fts where node_fts match ?", (word,))[0][0])

    assert queries.term_rows(ana._conn, ["kitten", "kittens", "zebra"]) == {
        "kitten": fresh("kitten"),
        "kittens": fresh("kitten"),
        "zebra": 0,
    }  # stemmed as the index stems
    before = fresh("kitten")
    ana.write("Another kitten arrived", scope="ana")
    assert queries.term_rows(ana._conn, ["kitten"])["kitten"] == before + 1 == fresh("kitten")
    if db_path != ":memory:":  # a write by another connection is seen too
        other = WorldDB(db_path, embedder=FakeEmbedder(), clock=clock)  # type: ignore[arg-type]
        try:
            other.write("A third kitten", scope="ana")
        finally:
            other.close()
        assert queries.term_rows(ana._conn, ["kitten"])["kitten"] == before + 2


def test_kinds_read_from_the_index_agree_with_the_store(ana: WorldDB) -> None:
    every = [int(r[0]) for r in ana.sql("select nid from node order by nid")]
    view = ana._reader.view(None, None, False, world=ana._reader.scope_id("ana"))
    held = [n for n in every if n < view.index().pos.shape[0] and view.index().pos[n] >= 0]
    assert held  # the index answers for most; the rest (the root, nodes without text) go through headers
    assert view.kinds(every) == [(ana._store.header(n).type, ana._store.header(n).parent) for n in every]


def test_one_recall_catches_the_vector_index_up_once(ana: WorldDB, monkeypatch: pytest.MonkeyPatch) -> None:
    lane = ana._reconciler.lane
    real = lane.index
    calls = []

    def counted() -> object:
        calls.append(1)
        return real()

    monkeypatch.setattr(lane, "index", counted)
    assert ana.recall("Emma pottery kitten", scope="ana", k=5).hits
    assert len(calls) == 1


def test_a_read_asks_sqlite_whether_a_node_is_visible_once(ana: WorldDB, monkeypatch: pytest.MonkeyPatch) -> None:
    asked: list[int] = []
    real = queries.visible_among

    def counting(conn: object, nids: Sequence[int], *args: object, **kwargs: object) -> set[int]:
        asked.extend(nids)
        return real(conn, nids, *args, **kwargs)  # type: ignore[arg-type]

    before = [(h.node.id, h.score) for h in ana.recall("Where does Ana work and live?", scope="ana", k=10).hits]
    monkeypatch.setattr(queries, "visible_among", counting)
    after = [(h.node.id, h.score) for h in ana.recall("Where does Ana work and live?", scope="ana", k=10).hits]
    assert after == before and asked  # the lanes share one answer per node
    assert len(asked) == len(set(asked))


def test_a_contraction_the_question_shares_is_no_reason_to_move_a_change_up(db: WorldDB) -> None:
    """Found in review: "I'm" was one word that no stop list held, so any change-telling turn saying it moved up."""
    db.ingest(
        ConversationIn(
            "c",
            ["ana"],
            [
                SessionIn(
                    "1", "2024-01-01", [TurnIn("I'm fixing the login bug in auth.py before the release", "user")]
                ),
                SessionIn(
                    "2",
                    "2024-02-01",
                    [TurnIn("I'm glad to say the dentist appointment has been moved to March 22", "user")],
                ),
            ],
        )
    )
    found = db.recall("I'm stuck on the login bug in auth.py", scope="ana", k=2)
    assert "login bug" in (found.hits[0].node.content or "")
    assert not any(r.lane == "changed" for h in found.hits for r in h.why)


def test_a_note_scores_also_by_the_best_note_or_fact_of_its_world(db: WorldDB) -> None:
    """As a turn by its session's best: a note is read among its scope's notes and facts, so turns do not bury it."""
    from worlddb_lite.retrieval.recall import session_prior

    note = nid_of(db, db.write("The spare key is under the blue flowerpot", scope="ana"))
    other = nid_of(db, db.write("The wifi password is on the fridge", scope="ana"))
    (turn,) = db.ingest(_dialogue("ana", "2024-01-01", [("ana", "Where did I leave my keys again?")]))
    turn_nid = nid_of(db, turn)
    view = db._reader.view(None, None, False, world=db._reader.scope_id("ana"))
    ranked = [(turn_nid, 0.05), (note, 0.04), (other, 0.01)]
    prior = dict(session_prior(view, ranked, 1.0))
    assert prior[turn_nid] == pytest.approx(0.05 + 0.05)  # its session's best: itself
    assert prior[note] == pytest.approx(0.04 + 0.04) and prior[other] == pytest.approx(0.01 + 0.04)


def test_every_prior_that_changes_a_score_shows_in_why_with_its_effect(db: WorldDB) -> None:
    """A prior moves a hit only where its why says so: the session's, the world's and the speaker's."""
    db.ingest(
        _dialogue(
            "ana",
            "2024-03-01",
            [("ana", "My sister Emma loves pottery"), ("ana", "Where did I leave my keys again?")],
        )
    )
    db.write("The spare key is under the blue flowerpot", scope="ana")
    for hit in db.recall("where is the spare key?", scope="ana", k=5).hits:
        priors = [r for r in hit.why if r.lane in ("session", "world", "speaker")]
        assert all(r.effect for r in priors) and all(r.effect is None for r in hit.why if r not in priors)
        lanes = {r.lane for r in priors}
        assert ("world" in lanes) == (hit.node.type != "Turn") and not (
            {"session", "speaker"} & lanes and hit.node.type != "Turn"
        )
        fused = hit.score - sum(r.effect or 0.0 for r in priors)
        assert fused > 0  # what the lanes gave it, before the priors
