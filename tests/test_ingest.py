"""conversation.py and loaders.py: datasets become Scope > Session > Turn worlds, one transaction each."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from worlddb_lite import InvalidInput, WorldDB, WorldDBError
from worlddb_lite.checks import MAX_TEXT_CHARS
from worlddb_lite.cli import main
from worlddb_lite.write.conversation import ConversationIn, IngestStats, SessionIn, TurnIn
from worlddb_lite.write.gate import EncodingGate
from worlddb_lite.write.loaders import load

from .conftest import table_digest

SHARED = Path(__file__).resolve().parents[2] / "shared" / "data"


def _locomo(tmp_path: Path) -> Path:
    sample = {
        "sample_id": "conv-x",
        "qa": [],
        "conversation": {
            "speaker_a": "Ana",
            "speaker_b": "Ben",
            "session_1_date_time": "1:56 pm on 8 May, 2023",
            "session_1": [
                {"speaker": "Ana", "dia_id": "D1:1", "text": "I adopted a puppy called Rex"},
                {"speaker": "Ben", "dia_id": "D1:2", "text": "Lovely! What breed is Rex?"},
            ],
            "session_2_date_time": "10:04 am on 12 June, 2023",
            "session_2": [{"speaker": "Ana", "dia_id": "D2:1", "text": "Rex learned to sit", "img_url": ["x.jpg"]}],
        },
    }
    path = tmp_path / "locomo.json"
    path.write_text(json.dumps([sample]))
    return path


def test_locomo_sessions_become_dated_session_worlds_of_verbatim_turns(db: WorldDB, tmp_path: Path) -> None:
    [conv] = load(_locomo(tmp_path), "locomo")
    assert [s.date for s in conv.sessions] == ["2023-05-08T13:56:00.000000Z", "2023-06-12T10:04:00.000000Z"]
    ids = db.ingest(conv)
    turns = [db.read(i) for i in ids]
    assert [t.content for t in turns] == [
        "I adopted a puppy called Rex",
        "Lovely! What breed is Rex?",
        "Rex learned to sit",
    ]
    assert [t.props["speaker"] for t in turns] == ["Ana", "Ben", "Ana"]
    assert turns[2].props["turn_id"] == "D2:1" and turns[2].props["img_url"] == ["x.jpg"]
    assert turns[0].valid_at == "2023-05-08T13:56:00.000000Z" and turns[0].type == "Turn"
    session = db.read(turns[0].parent)  # type: ignore[arg-type]
    assert session.type == "Session" and session.name == "conv-x / 1"
    assert db.read(session.parent).name == "conv-x"  # type: ignore[arg-type]  # the scope
    assert turns[2].parent != turns[0].parent
    before = table_digest(db)
    assert db.ingest(conv) == ids  # the same conversation again: the same nodes, nothing new
    assert table_digest(db) == before
    assert db.verify().ok


def test_a_conversation_in_two_scopes_is_inside_both(db: WorldDB) -> None:
    conv = ConversationIn("c1", ["user:ana", "agent:helper"], [SessionIn("s1", "2024-01-02", [TurnIn("hello there")])])
    [turn] = db.ingest(conv)
    for scope in ("user:ana", "agent:helper"):
        assert turn in {n.id for n in db.nodes(world=db.scope(scope))}


def test_a_giant_or_empty_turn_stops_its_conversation_before_anything_is_written(db: WorldDB) -> None:
    db.ingest(ConversationIn("ok", ["s"], [SessionIn("1", None, [TurnIn("fine")])]))
    before = table_digest(db)
    giant = ConversationIn("big", ["s"], [SessionIn("1", None, [TurnIn("a"), TurnIn("x" * (MAX_TEXT_CHARS + 1))])])
    with pytest.raises(InvalidInput, match=r"conversation 'big', session '1', turn 1: .* split it"):
        db.ingest(giant)
    with pytest.raises(InvalidInput, match="no text"):
        db.ingest(ConversationIn("empty", ["s"], [SessionIn("1", None, [TurnIn("   ")])]))
    with pytest.raises(InvalidInput, match="NUL"):
        db.ingest(ConversationIn("binary", ["s"], [SessionIn("1", None, [TurnIn("ab\x00cd")])]))
    assert table_digest(db) == before


def test_beam_chats_take_their_session_dates_from_time_anchors(db: WorldDB, tmp_path: Path) -> None:
    chat = [
        {
            "batch_number": 1,
            "time_anchor": None,
            "turns": [
                [
                    {
                        "role": "user",
                        "id": 0,
                        "time_anchor": "March-15-2024",
                        "index": "1,1",
                        "content": "Plan my project",
                    },
                    {"role": "assistant", "id": 1, "content": "Sure, here is a plan"},
                ],
                [{"role": "user", "id": 2, "content": "Thanks, now the budget"}],
            ],
        }
    ]
    (tmp_path / "BEAM" / "100K" / "7").mkdir(parents=True)
    (tmp_path / "BEAM" / "100K" / "7" / "chat.json").write_text(json.dumps(chat))
    [conv] = load(tmp_path / "BEAM", "beam")
    assert conv.conversation_id == "beam-7" and [s.session_id for s in conv.sessions] == ["0.0", "0.1"]
    assert [s.date for s in conv.sessions] == ["2024-03-15T00:00:00.000000Z"] * 2  # the anchor carries over
    assert [t.speaker for t in conv.sessions[0].turns] == ["user", "assistant"]
    assert len(db.ingest(conv)) == 3


@pytest.mark.skipif(not (SHARED / "beam" / "beam_100K.tar.xz").is_file(), reason="needs ../shared/data")
def test_the_real_datasets_load_whole() -> None:
    locomo = load(SHARED / "locomo" / "locomo10.json", "locomo")
    assert len(locomo) == 10 and sum(c.turn_count for c in locomo) == 5882
    assert sum(len(c.sessions) for c in locomo) == 272
    beam = load(SHARED / "beam" / "beam_100K.tar.xz", "beam")
    assert len(beam) == 20 and sum(c.turn_count for c in beam) == 5094


def test_longmemeval_haystacks_become_one_conversation_per_question(db: WorldDB, tmp_path: Path) -> None:
    record = {
        "question_id": "q1",
        "question_type": "single-session-user",
        "question": "What did I buy?",
        "answer": "a bike",
        "question_date": "2023/05/30 (Tue) 10:00",
        "haystack_session_ids": ["s_a", "answer_s_b"],
        "haystack_dates": ["2023/05/20 (Sat) 02:21", "2023/05/25 (Thu) 18:40"],
        "haystack_sessions": [
            [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello"}],
            [{"role": "user", "content": "I bought a bike", "has_answer": True}],
        ],
        "answer_session_ids": ["answer_s_b"],
    }
    path = tmp_path / "longmemeval_s.json"
    path.write_text(json.dumps([record]))
    [conv] = load(path, "longmemeval")
    assert conv.conversation_id == "q1" and [s.date for s in conv.sessions] == [
        "2023-05-20T02:21:00.000000Z",
        "2023-05-25T18:40:00.000000Z",
    ]
    assert conv.sessions[1].turns[0].turn_id == "answer_s_b_1" and conv.sessions[1].turns[0].props == {
        "has_answer": True
    }
    ids = db.ingest(conv)
    assert db.read(ids[2]).props["has_answer"] is True
    record["haystack_dates"] = ["2023/05/20 (Sat) 02:21"]
    path.write_text(json.dumps([record]))
    with pytest.raises(InvalidInput, match=r"record 0 \(q1\): haystack ids, dates and sessions differ"):
        load(path, "longmemeval")


def test_malformed_files_name_the_record_and_the_field(tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"text": "fine"}\n{"text": 5}\n')
    with pytest.raises(InvalidInput, match="bad.jsonl line 2: 'text' should be str"):
        load(bad, "jsonl")
    bad.write_text('{"text": "fine"}\nnot json\n')
    with pytest.raises(InvalidInput, match="line 2: not a UTF-8 JSON object"):
        load(bad, "jsonl")
    bad.write_text('{"text": "fine", "date": "the day after tomorrow"}\n')
    with pytest.raises(InvalidInput, match="line 1 date"):
        load(bad, "jsonl")
    broken = tmp_path / "locomo.json"
    broken.write_text('[{"sample_id": "a", "conversation": {"session_1": [{"text": "no speaker"}]}}]')
    with pytest.raises(InvalidInput, match=r"sample 0 \(a\) session_1 turn 0: missing 'speaker'"):
        load(broken, "locomo")
    broken.write_text('[{"sample_id": "a", "conversation": {"session_1_date_time": "someday", "session_1": []}}]')
    with pytest.raises(InvalidInput, match="cannot read the date 'someday'"):
        load(broken, "locomo")
    with pytest.raises(InvalidInput, match="unknown format 'csv'"):
        load(broken, "csv")
    with pytest.raises(InvalidInput, match="does not exist"):
        load(tmp_path / "nope.json", "locomo")


def test_the_cli_ingests_json_lines_and_stops_at_a_bad_conversation_without_half_of_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "chat.jsonl"
    lines = [
        {"conversation": "c1", "session": "1", "date": "2024-03-01", "speaker": "me", "text": "I live in Austin"},
        {"conversation": "c1", "session": "2", "date": "2024-04-01", "speaker": "me", "text": "I moved to Denver"},
        {"conversation": "c2", "text": "fine"},
        {"conversation": "c2", "text": "   "},
    ]
    path.write_text("\n".join(json.dumps(line) for line in lines))
    store = str(tmp_path / "store.db")
    assert main(["ingest", store, str(path), "--format", "jsonl", "--scope", "me"]) == 2
    assert "conversation 'c2', session '1', turn 4: the turn has no text" in capsys.readouterr().err
    assert not Path(store).exists()  # the whole file is checked before the store is opened: c1 did not land either
    path.write_text("\n".join(json.dumps(line) for line in lines[:3]))
    assert main(["ingest", store, str(path), "--format", "jsonl", "--scope", "me", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["conversations"] == 2 and out["turns"] == 3


def test_a_turn_dated_in_the_future_or_unreadably_is_refused_before_anything_is_written(db: WorldDB) -> None:
    before = table_digest(db)
    with pytest.raises(InvalidInput, match="cannot be from the future"):
        db.ingest(ConversationIn("f", ["s"], [SessionIn("1", "2999-01-01", [TurnIn("hello from the future")])]))
    with pytest.raises(InvalidInput, match="cannot read 'next Tuesday'"):
        db.ingest(ConversationIn("u", ["s"], [SessionIn("1", "next Tuesday", [TurnIn("when?")])]))
    assert table_digest(db) == before


def test_the_cli_ingests_with_the_gate_and_the_bridge_and_reports_what_they_did(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "chat.jsonl"
    lines = [
        {"conversation": "c1", "session": "1", "date": "2024-03-01", "speaker": "me", "text": text}
        for text in ("I met Caroline at the park.", "She told me about the adoption agency.", "ok lol")
    ]
    path.write_text("\n".join(json.dumps(line) for line in lines))
    store = str(tmp_path / "store.db")
    assert main(["ingest", store, str(path), "--format", "jsonl", "--scope", "me", "--gate", "--bridge", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["turns"] == 3 and out["below_gate"] == 1 and out["bridged"] == 1
    with WorldDB(store) as db:
        found = [n.content for n, _ in db.search("Caroline")]  # the bridge's, then the word window's
        assert set(found[:2]) == {lines[0]["text"], lines[1]["text"]} and found[2:] == ["ok lol"]
        assert db.verify().ok
    assert main(["ingest", store, str(path), "--format", "jsonl", "--gate", "1.5"]) == 2
    assert "gate threshold must be a number from 0 to 1" in capsys.readouterr().err


def test_ingest_stats_add_up_across_conversations_and_skip_a_failed_one(db: WorldDB) -> None:
    stats = IngestStats()
    chat = ConversationIn("a", ["s"], [SessionIn("1", "2024-01-02", [TurnIn("I saw Jon."), TurnIn("He waved.")])])
    db.ingest(chat, bridge=True, gate=EncodingGate(), stats=stats)
    db.ingest(ConversationIn("b", ["s"], [SessionIn("1", None, [TurnIn("thanks!")])]), gate=EncodingGate(), stats=stats)
    with pytest.raises(InvalidInput):
        db.ingest(ConversationIn("c", ["s"], [SessionIn("1", None, [TurnIn("fine"), TurnIn(" ")])]), stats=stats)
    assert stats == IngestStats(turns=3, below_gate=1, bridged=1)


@pytest.mark.skipif(not (SHARED / "locomo" / "locomo10.json").is_file(), reason="needs ../shared/data")
def test_the_ingest_bench_compares_the_gate_and_the_bridge(tmp_path: Path) -> None:
    import subprocess
    import sys

    out = tmp_path / "variants.json"
    bench = Path(__file__).resolve().parents[1] / "bench" / "ingest.py"
    done = subprocess.run(
        [sys.executable, str(bench), "--variants", "--repeat", "1", "--conversations", "1", "--json", str(out)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    found = json.loads(out.read_text())["gate_and_bridge"]["variants"]
    assert set(found) == {"plain", "gate", "gate, window only", "bridge", "gate+bridge"}
    assert found["plain"]["speed_vs_plain"] == 1.0 and found["bridge"]["bridged_share"] > 0
    assert found["gate+bridge"]["below_gate_share"] == found["gate"]["below_gate_share"]


def test_ids_may_be_numbers_or_empty_and_dates_any_time_the_store_reads(db: WorldDB) -> None:
    """As before the shape checks: what datasets write (numeric ids, datetime dates) ingests."""
    import datetime as dt

    sessions = [
        SessionIn(7, dt.datetime(2024, 3, 1, tzinfo=dt.UTC), [TurnIn("I live in Austin", "me", 1)]),  # type: ignore[arg-type]
        SessionIn("", "2024-04-01", [TurnIn("I moved to Denver", "me", at=dt.date(2024, 4, 2))]),  # type: ignore[arg-type]
    ]
    ids = db.ingest(ConversationIn(42, {"me"}, sessions))  # type: ignore[arg-type]
    assert [db.read(i).valid_at[:10] for i in ids] == ["2024-03-01", "2024-04-02"]


@pytest.mark.parametrize(
    ("conversation", "message"),
    [
        ("talk", "ingest takes a ConversationIn"),
        (ConversationIn("c", "me", []), "scopes must be a list"),
        (ConversationIn("c", ["me"], [SessionIn("1", "next tuesday-ish", [])]), "date"),
        (ConversationIn("c", ["me"], [SessionIn("1", None, ["hello"])]), "a turn must be a TurnIn"),  # type: ignore[list-item]
        (ConversationIn("c", ["me"], [SessionIn("1", None, [TurnIn("hi", speaker=3)])]), "speaker must be text"),  # type: ignore[arg-type]
    ],
)
def test_a_conversation_of_the_wrong_shape_is_refused_whole(db: WorldDB, conversation: object, message: str) -> None:
    before = table_digest(db)
    with pytest.raises(WorldDBError, match=message):
        db.ingest(conversation)  # type: ignore[arg-type]
    assert table_digest(db) == before


def test_an_ingested_turns_id_field_stands_over_its_props_id(db: WorldDB) -> None:
    """write/turns.py keeps ingest's nodes as they were: a TurnIn's turn_id (None too) replaces props['turn_id'],
    so a transcript ingested before issue 39 is the same nodes ingested again (review, issue 39)."""
    turns = [TurnIn("hello there", speaker="ana", props={"turn_id": "kept?"}), TurnIn("hi", "bo", turn_id="t2")]
    (first, second) = db.ingest(ConversationIn("c", ["ana"], [SessionIn("s1", "2024-01-01", turns)]))
    assert "turn_id" not in db.read(first).props
    assert db.read(second).props["turn_id"] == "t2"
    live = db.add_turn("a live one", scope="ana", session="s1", props={"turn_id": "t3"})
    assert db.read(live).props["turn_id"] == "t3"  # a live turn's id comes in its props
