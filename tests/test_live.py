"""write/live.py: a conversation appended turn by turn is indexed as the same conversation ingested whole."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

from worlddb_lite import ConversationIn, InvalidInput, SessionIn, TurnIn, WorldDB

from .conftest import FakeClock, FakeEmbedder, nid_of, table_digest

SAID = [  # (session, time, speaker, text)
    ("1", "2024-01-02T10:00:00Z", "ana", "I adopted a kitten called Miso last week"),
    ("1", "2024-01-02T10:01:00Z", "assistant", "Congratulations! How is Miso settling in?"),
    ("1", "2024-01-02T10:02:00Z", "ana", "She hides under the sofa, but she loves the red laser toy"),
    ("1", "2024-01-02T10:03:00Z", "ana", "My sister Emma will visit on Saturday to meet her"),
    ("1", "2024-01-02T10:04:00Z", "ana", "Emma is allergic to cats, so we will meet in the garden"),
    ("2", "2024-02-10T09:00:00Z", "ana", "I live in Lisbon now"),
    ("2", "2024-02-10T09:01:00Z", "ana", "The new flat has a balcony where Miso sleeps"),
    ("2", "2024-02-10T09:02:00Z", "ana", "I moved to Porto in the end, the Lisbon flat fell through"),
]


def _stores(tmp_path: Path) -> tuple[WorldDB, WorldDB]:
    return (
        WorldDB(str(tmp_path / "whole.db"), embedder=FakeEmbedder(), clock=FakeClock()),
        WorldDB(str(tmp_path / "live.db"), embedder=FakeEmbedder(), clock=FakeClock()),
    )


def _index(db: WorldDB) -> dict[str, object]:
    rows = db.sql(
        "select n.id, f.name, f.content, f.context from node_text as f join node as n on n.nid = f.nid order by n.id"
    )
    vectors = db.sql(
        "select n.id, v.embedding from node_vec as v join node as n on n.nid = v.nid "
        "where n.type = 'Turn' order by n.id"
    )
    tokens = db.sql("select n.id, t.ids from node_tokens as t join node as n on n.nid = t.nid order by n.id")
    facts = sorted(n.content or "" for n in db.nodes(type="Fact", include_superseded=True))
    current = sorted(n.content or "" for n in db.nodes(type="Fact"))
    updates = db.sql(
        "select s.id, d.id from edge as e join node as s on s.nid = e.src join node as d on d.nid = e.dst "
        "where e.type = 'may_update' order by 1, 2"
    )
    return {"fts": rows, "vectors": vectors, "tokens": tokens, "facts": facts, "current": current, "updates": updates}


def test_turns_appended_live_are_indexed_as_the_conversation_ingested_whole(tmp_path: Path) -> None:
    whole, live = _stores(tmp_path)
    try:
        sessions = [
            SessionIn(s, None, [TurnIn(text, who, at=at) for s2, at, who, text in SAID if s2 == s]) for s in ("1", "2")
        ]
        for db in (whole, live):  # a note the last turn may update (write/updates.py)
            db.write("I live in the Lisbon flat", scope="ana", valid_at="2023-12-01")
        batch = whole.ingest(ConversationIn("ana", ["ana"], sessions))
        appended = [live.add_turn(text, scope="ana", session=s, speaker=who, at=at) for s, at, who, text in SAID]
        assert appended == batch  # the same nodes
        assert _index(live) == _index(whole)  # full text (words-only context included), vectors, tokens, facts
        assert "ana lives in: Porto" in _index(live)["current"]
        assert _index(live)["updates"]  # the move links to the note, live as in the batch
        hits = [h.node.id for h in live.recall("where does ana live now?", scope="ana", k=5).hits]
        assert hits == [h.node.id for h in whole.recall("where does ana live now?", scope="ana", k=5).hits]
        assert live.verify().ok
    finally:
        whole.close()
        live.close()


def test_a_pause_longer_than_the_gap_starts_a_new_session(db: WorldDB) -> None:
    first = db.add_turn("I started a pottery class", scope="ana", at="2024-01-02T10:00:00Z")
    same = db.add_turn("The teacher is called Bruno", scope="ana", at="2024-01-02T10:20:00Z")
    later = db.add_turn("I finished my first bowl", scope="ana", at="2024-01-02T12:00:00Z")
    named = db.add_turn("Back to the bowl", scope="ana", session="2024-01-02T10:00:00.000000Z")
    sessions = [db.read(t).props["session"] for t in (first, same, later, named)]
    assert sessions[0] == sessions[1] == sessions[3] != sessions[2]
    assert db.read(db.read(first).parent).name == f"ana / {sessions[0]}"


def test_the_latest_turn_context_is_rewritten_as_turns_arrive(db: WorldDB) -> None:
    first = db.add_turn(
        "Did you go to the pottery class on Sunday?", scope="me", speaker="me", at="2024-01-02T10:00:00Z"
    )
    nid = nid_of(db, first)
    context = lambda: db.sql("select context from node_text where nid = ?", (nid,))[0][0]  # noqa: E731
    assert context() is None
    db.add_turn("Yes, and I made a bowl!", scope="me", speaker="me", at="2024-01-02T10:01:00Z")
    assert context() == "me: Yes, and I made a bowl!"
    db.add_turn("What glaze?", scope="me", speaker="me", at="2024-01-02T10:02:00Z")
    db.add_turn("A blue one", scope="me", speaker="me", at="2024-01-02T10:03:00Z")
    assert context() == "me: Yes, and I made a bowl!\nme: What glaze?"  # two turns after, no more


def test_a_purged_turn_is_a_wall_no_words_cross(db: WorldDB) -> None:
    db.add_turn("My locker code is 4471", scope="me", speaker="me", at="2024-01-02T10:00:00Z")
    secret = db.add_turn("and the spare is 9902", scope="me", speaker="me", at="2024-01-02T10:01:00Z")
    db.purge(secret)
    after = db.add_turn("ok, noted", scope="me", speaker="me", at="2024-01-02T10:02:00Z")
    row = db.sql(
        "select content, context from node_text where nid = (select nid from node where lower(hex(id)) = ?)", (after,)
    )[0]
    assert "4471" not in repr(row) and "9902" not in repr(row)


@pytest.mark.parametrize(
    ("text", "options", "message"),
    [
        ("   ", {}, "no text"),
        ("hello", {"at": "2099-01-01"}, "after now"),
        ("hello", {"session": "  "}, "session is blank"),
        ("hello", {"speaker": 3}, "speaker must be text"),
        ("hello", {"extractor": "rules"}, "extractor must have extract"),
        ("x" * 500_001, {}, "characters"),
    ],
)
def test_bad_turns_write_nothing(db: WorldDB, text: str, options: dict[str, object], message: str) -> None:
    before = table_digest(db)
    with pytest.raises(InvalidInput, match=message):
        db.add_turn(text, scope="me", **options)  # type: ignore[arg-type]
    assert table_digest(db) == before


def test_a_turn_said_before_the_last_one_of_its_session_is_refused(db: WorldDB) -> None:
    db.add_turn("second thought", scope="me", session="s", at="2024-01-02T10:05:00Z")
    before = table_digest(db)
    with pytest.raises(InvalidInput, match="never dated before the last turn of the session it joins"):
        db.add_turn("first thought", scope="me", session="s", at="2024-01-02T10:00:00Z")
    assert table_digest(db) == before
    db.add_turn("an earlier sitting", scope="me", session="t", at=dt.datetime(2024, 1, 1, tzinfo=dt.UTC))


def test_the_cli_appends_a_turn_from_an_argument_or_stdin(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    import io

    from worlddb_lite.cli import main

    store = str(tmp_path / "cli.db")
    monkeypatch.setattr("sys.stdin", io.StringIO("I adopted a kitten called Miso\n"))
    assert main(["add-turn", store, "-", "--scope", "ana", "--speaker", "ana", "--at", "2024-01-02T10:00:00Z"]) == 0
    assert (
        main(["add-turn", store, "She loves the red laser toy", "--scope", "ana", "--at", "2024-01-02T10:01:00Z"]) == 0
    )
    first, second = capsys.readouterr().out.split()
    with WorldDB(store) as db:
        assert db.read(first).content == "I adopted a kitten called Miso"  # echo's newline is not part of it
        assert db.read(first).parent == db.read(second).parent  # one sitting
    assert main(["add-turn", store, "   ", "--scope", "ana"]) == 2


def test_mcp_add_turn_appends_and_refuses_bad_input(tmp_path: Path) -> None:
    import asyncio

    from worlddb_lite.mcp import _sdk, build_server

    _, tool_error = _sdk()
    with WorldDB(str(tmp_path / "mcp.db"), embedder=FakeEmbedder(), clock=FakeClock()) as db:
        server = build_server(db)
        asyncio.run(server.call_tool("memory_add_turn", {"text": "I live in Lisbon", "scope": "ana", "speaker": "ana"}))
        assert [n.content for n in db.nodes(type="Fact")] == ["ana lives in: Lisbon"]
        with pytest.raises(tool_error, match="InvalidInput"):
            asyncio.run(server.call_tool("memory_add_turn", {"text": "  ", "scope": "ana"}))


def test_one_order_rule_a_turn_before_the_scopes_last_is_refused_not_moved(db: WorldDB) -> None:
    """Issue 38: one minute earlier was refused, sixty minutes earlier silently started a session of its own."""
    db.add_turn("hello", scope="me", speaker="me", at="2024-01-02T10:00:00Z")
    db.add_turn("hello again", scope="me", speaker="me", at="2024-01-02T10:05:00Z")
    before = table_digest(db)
    for at in ("2024-01-02T10:04:00Z", "2024-01-02T09:05:00Z", "2023-06-01"):
        with pytest.raises(InvalidInput, match="never dated before the last turn of the session it joins"):
            db.add_turn("an earlier line", scope="me", speaker="me", at=at)
    assert table_digest(db) == before
    earlier = db.add_turn("an earlier sitting", scope="me", speaker="me", session="morning", at="2024-01-02T09:05:00Z")
    later = db.add_turn("after a long pause", scope="me", speaker="me", at="2024-01-02T11:00:00Z")
    assert db.read(earlier).props["session"] == "morning"
    assert db.read(later).props["session"] == "2024-01-02T11:00:00.000000Z"  # 55 minutes of silence: a new one


def test_a_retried_turn_is_the_turn_already_kept(db: WorldDB) -> None:
    first = db.add_turn("hello", scope="me", speaker="me", at="2024-01-02T10:00:00Z")
    db.add_turn("hello again", scope="me", speaker="me", at="2024-01-02T10:05:00Z")
    before = table_digest(db)
    assert db.add_turn("hello", scope="me", speaker="me", at="2024-01-02T10:00:00Z") == first
    assert table_digest(db) == before
    with pytest.raises(InvalidInput):  # another speaker at that time is another turn, and out of order
        db.add_turn("hello", scope="me", speaker="you", at="2024-01-02T10:00:00Z")


def test_a_turn_said_again_is_not_another_turn_at_the_same_time(db: WorldDB) -> None:
    """Review: a retry matched any turn of the scope with that text, speaker and time, swallowing new ones."""
    first = db.add_turn("ok", scope="me", speaker="me", at="2024-05-01T10:00:00Z", props={"turn_id": "D1:1"})
    db.add_turn("do you like it?", scope="me", speaker="you", at="2024-05-01T10:00:00Z")
    third = db.add_turn("ok", scope="me", speaker="me", at="2024-05-01T10:00:00Z", props={"turn_id": "D1:3"})
    assert third != first
    assert db.add_turn("ok", scope="me", speaker="me", at="2024-05-01T10:00:00Z", props={"turn_id": "D1:3"}) == third
    one = db.add_turn("hello", scope="us", session="s1", at="2024-05-01T10:00:00Z")
    assert db.add_turn("hello", scope="us", session="s2", at="2024-05-01T10:00:00Z") != one
