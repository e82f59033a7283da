"""bench/recall.py: the metric definitions on hand-made rankings, the three dataset formats from tiny
files, and the baselines end to end on a tiny LoCoMo file."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from worlddb_lite import WorldDB

from .conftest import bench_module

BENCH = Path(__file__).resolve().parent.parent / "bench"
sys.path.insert(0, str(BENCH))
import recall_metrics as rm  # noqa: E402

recall = bench_module("recall")  # noqa: E402


# ---- metrics -----------------------------------------------------------------------


def test_recall_at_k_counts_the_share_of_gold_in_the_top_k():
    ranked = ["a", "b", "c", "d"]
    assert rm.recall_at_k(ranked, ["b", "d", "x"], 1) == 0
    assert rm.recall_at_k(ranked, ["b", "d", "x"], 2) == pytest.approx(1 / 3)
    assert rm.recall_at_k(ranked, ["b", "d", "x"], 10) == pytest.approx(2 / 3)
    assert rm.recall_at_k(ranked, ["b", "b"], 2) == 1.0  # gold is a set
    assert rm.recall_at_k(ranked, [], 5) == 0.0


def test_recall_any_and_all():
    ranked = ["a", "b", "c"]
    assert rm.recall_any(ranked, ["c", "z"], 3) == 1.0 and rm.recall_any(ranked, ["c", "z"], 2) == 0.0
    assert rm.recall_all(ranked, ["a", "c"], 3) == 1.0 and rm.recall_all(ranked, ["a", "c"], 2) == 0.0
    assert rm.recall_all(ranked, ["a", "z"], 3) == 0.0


def test_ndcg_standard_and_longmemeval_discounts():
    # standard: rank i is divided by log2(i + 1)
    assert rm.ndcg(["g"], ["g"], 10) == 1.0
    assert rm.ndcg(["x", "g"], ["g"], 10) == pytest.approx(1 / math.log2(3))
    assert rm.ndcg(["x", "g1", "g2"], ["g1", "g2"], 10) == pytest.approx(
        (1 / math.log2(3) + 1 / math.log2(4)) / (1 + 1 / math.log2(3))
    )
    assert rm.ndcg(["x", "y"], ["g"], 10) == 0.0 and rm.ndcg(["x"], [], 10) == 0.0
    assert rm.ndcg(["x", "g"], ["g"], 1) == 0.0
    # LongMemEval: rel_1 + sum_{i>=2} rel_i / log2(i), so ranks 1 and 2 weigh the same
    assert rm.ndcg(["x", "g"], ["g"], 10, discount="longmemeval") == 1.0
    assert rm.ndcg(["x", "y", "g"], ["g"], 10, discount="longmemeval") == pytest.approx(1 / math.log2(3))
    # the ideal holds as many relevant entries as the corpus has (duplicates count)
    assert rm.ndcg(["g"], ["g"], 10, corpus=["g", "g", "x"], discount="longmemeval") == pytest.approx(1 / 2)


def test_session_recall_any_uses_the_first_distinct_sessions():
    session_of = {f"t{i}": s for i, s in enumerate(["s1"] * 5 + ["s2", "s3", "s4", "s5", "s6"])}
    ranked = [f"t{i}" for i in range(10)]
    assert rm.session_recall_any(ranked, {"s5"}, session_of, 5) == 1.0  # the 9th turn, the 5th session
    assert rm.session_recall_any(ranked, {"s6"}, session_of, 5) == 0.0
    assert rm.session_recall_any(ranked, {"s1", "s6"}, session_of, 5) == 1.0
    assert rm.session_recall_any(ranked[:3], {"s2"}, session_of, 5) == 0.0


def test_turn_to_session_widens_k_to_k_distinct_sessions():
    session_of = {"a_1": "a", "a_3": "a", "b_1": "b", "c_1": "c", "c_3": "c"}
    corpus = ["a_1", "a_3", "b_1", "c_1", "c_3"]
    ranked = ["a_1", "a_3", "c_3", "b_1", "c_1"]
    # k = 2 sessions needs the top 3 turns (a, a, c): gold b is not there, gold c is
    assert rm.turn_to_session(ranked, ["b_1"], corpus, session_of, 2)[:2] == (0.0, 0.0)
    any_, all_, ndcg = rm.turn_to_session(ranked, ["c_1"], corpus, session_of, 2)
    assert (any_, all_) == (1.0, 1.0)
    # labels per ranked turn: a, a, c -> 0, 0, 1; the ideal puts both c turns first: 1 + 1/log2(2)
    assert ndcg == pytest.approx((1 / math.log2(3)) / 2)
    assert rm.turn_to_session(ranked, ["c_1", "b_1"], corpus, session_of, 2)[:2] == (1.0, 0.0)
    assert rm.turn_to_session(ranked, ["c_1", "b_1"], corpus, session_of, 3)[:2] == (1.0, 1.0)


@pytest.mark.parametrize(
    ("ranked", "expected"),
    [
        (["u", "x", "o"], (True, "updated_above")),
        (["o", "x", "u"], (False, "original_above")),
        (["x", "u"], (True, "only_updated_ranked")),
        (["o", "x"], (False, "only_original_ranked")),
        (["x", "y"], (False, "neither_ranked")),
        ([], (False, "neither_ranked")),
    ],
)
def test_knowledge_update_order(ranked, expected):
    assert rm.knowledge_update_order(ranked, ["o"], ["u"]) == expected


def test_knowledge_update_order_takes_the_best_rank_of_each_side_and_a_shared_id_ties():
    assert rm.knowledge_update_order(["o2", "u1", "o1", "u2"], ["o1", "o2"], ["u1", "u2"]) == (False, "original_above")
    assert rm.knowledge_update_order(["x", "u2", "o1"], ["o1", "o2"], ["u1", "u2"]) == (True, "updated_above")
    assert rm.knowledge_update_order(["m", "o"], ["m"], ["m"]) == (False, "tie")


def test_rrf_sums_reciprocal_ranks():
    fused = rm.rrf([["a", "b", "c"], ["c", "b", "d"]], depth=10)
    # b: 1/62 + 1/62; a: 1/61; c: 1/63 + 1/61; d: 1/63
    assert fused == ["c", "b", "a", "d"]
    assert rm.rrf([["a"], ["b"]], depth=10) == ["a", "b"]  # a tie keeps the first seen
    assert rm.rrf([["a", "b", "c"], []], depth=2) == ["a", "b"]


def test_locomo_evidence_is_parsed_robustly():
    real = {rm.normalise_dia_id(t): t for t in ("D8:6", "D9:17", "D9:1", "D4:4", "D11:26", "D30:5")}
    kept, dropped = rm.parse_locomo_evidence(
        ["D8:6; D9:17", "D9:1 D4:4", "D:11:26", "D30:05", "D", "D99:1", "D8:6"], real
    )
    assert kept == ["D8:6", "D9:17", "D9:1", "D4:4", "D11:26", "D30:5"]
    assert dropped == ["D", "D99:1"]


def test_beam_source_ids_flatten():
    assert rm.flatten_ids([1, [2, 3]]) == ["1", "2", "3"]
    assert rm.flatten_ids({"original_info": [4], "updated_info": [5, 6]}) == ["4", "5", "6"]
    assert rm.flatten_ids(None) == []


def test_ranking_from_hits_walks_hits_and_their_turns_in_order():
    def turn(tid):
        return SimpleNamespace(props={"turn_id": tid})

    hits = [
        SimpleNamespace(turns=(turn("D1:2"),)),
        SimpleNamespace(turns=(turn("D1:5"), turn("D1:2"), turn("D1:1"))),
        SimpleNamespace(turns=()),
        SimpleNamespace(turns=(SimpleNamespace(props={}), turn("ghost"), turn("D1:3"))),
    ]
    known = {"D1:1", "D1:2", "D1:3", "D1:5"}
    assert recall.ranking_from_hits(hits, known, 50) == ["D1:2", "D1:5", "D1:1", "D1:3"]
    assert recall.ranking_from_hits(hits, known, 2) == ["D1:2", "D1:5"]


# ---- the formats -------------------------------------------------------------------


def _turn(speaker, dia_id, text, **extra):
    return {"speaker": speaker, "dia_id": dia_id, "text": text, **extra}


def write_locomo(path: Path) -> Path:
    sample = {
        "sample_id": "conv-t",
        "conversation": {
            "speaker_a": "Ana",
            "speaker_b": "Ben",
            "session_1_date_time": "1:56 pm on 8 May, 2023",
            "session_1": [
                _turn("Ana", "D1:1", "Hi Ben, how was your week?"),
                _turn("Ben", "D1:2", "Busy. I practised the xylophone for the recital in Zanzibar."),
                _turn("Ana", "D1:3", "Look at my new garden!", img_url=["http://x"], blip_caption="a photo of tulips"),
            ],
            "session_2_date_time": "10:00 am on 9 June, 2023",
            "session_2": [
                _turn("Ben", "D2:1", "I adopted a dog called Pepper."),
                _turn("Ana", "D2:2", "Lovely! I started painting sunsets."),
                _turn("Ben", "D2:3", "Pepper loves the beach."),
            ],
        },
        "qa": [
            {
                "question": "Where is Ben's xylophone recital?",
                "answer": "Zanzibar",
                "evidence": ["D1:2"],
                "category": 4,
            },
            {
                "question": "What pets and hobbies?",
                "answer": "a dog; painting",
                "evidence": ["D2:1; D2:2"],
                "category": 1,
            },
            {"question": "When did Ben adopt Pepper?", "answer": "June 2023", "evidence": ["D7:7"], "category": 2},
            {"question": "What is Ana's cat called?", "adversarial_answer": "Tom", "evidence": [], "category": 5},
        ],
    }
    path.write_text(json.dumps([sample]))
    return path


def test_locomo_documents_questions_and_skips(tmp_path):
    prepared = recall.prepare("locomo", write_locomo(tmp_path / "locomo.json"))
    (case,) = prepared.cases
    docs = dict(case.docs)
    assert docs["D1:2"] == "Ben: Busy. I practised the xylophone for the recital in Zanzibar."
    assert docs["D1:3"] == "Ana: Look at my new garden! [image: a photo of tulips]"
    assert case.session_of["D2:1"] == "2"
    assert [(q.group, q.gold) for q in case.questions] == [("4", ["D1:2"]), ("1", ["D2:1", "D2:2"])]
    assert prepared.skipped == {"category 5": 1, "no evidence id names a real turn": 1}
    assert prepared.dropped_ids["evidence ids naming no real turn"] == 1


def test_locomo_scores_recall_and_session_recall():
    case = recall.Case(
        SimpleNamespace(),
        [(t, t) for t in ("D1:1", "D1:2", "D2:1", "D2:2")],
        {"D1:1": "1", "D1:2": "1", "D2:1": "2", "D2:2": "2"},
        [],
    )
    question = recall.Question("q", "?", "1", ["D2:1", "D2:2"])
    row = recall.score("locomo", ["D1:1", "D2:2", "D1:2", "D2:1"], question, case)
    assert row["recall@1"] == 0 and row["recall@5"] == 1.0 and row["session_recall_any@5"] == 1.0
    assert row["ndcg@10"] == pytest.approx((1 / math.log2(3) + 1 / math.log2(5)) / (1 + 1 / math.log2(3)))


def write_beam(root: Path) -> Path:
    folder = root / "BEAM" / "100K"
    chat_dir = folder / "1"
    (chat_dir / "probing_questions").mkdir(parents=True)

    def msg(i, role, content, anchor=None):
        return {
            "role": role,
            "id": i,
            "index": f"1,{i}",
            "question_type": "main_question",
            "time_anchor": anchor,
            "content": content,
        }

    full = [
        {
            "batch_number": 1,
            "time_anchor": "March-01-2024",
            "turns": [
                [msg(0, "user", "I run the dashboard API at 400ms.", "March-01-2024"), msg(1, "assistant", "Noted.")],
                [
                    msg(2, "user", "After caching the dashboard API answers in 250ms.", "March-09-2024"),
                    msg(3, "assistant", "Great improvement."),
                ],
                [msg(4, "user", "An extra message only the full chat has.", "March-10-2024")],
            ],
        }
    ]
    truncated = [{**full[0], "turns": full[0]["turns"][:2]}]
    (chat_dir / "chat.json").write_text(json.dumps(full))
    (chat_dir / "chat_trunecated.json").write_text(json.dumps(truncated))
    probing = {
        "knowledge_update": [
            {
                "question": "How fast is the dashboard API?",
                "answer": "250ms",
                "source_chat_ids": {"original_info": [0], "updated_info": [2]},
            }
        ],
        "event_ordering": [{"question": "In what order?", "answer": "...", "source_chat_ids": [[0], [2, 4]]}],
        "abstention": [{"question": "What is my cat called?", "ideal_response": "Not said."}],
        "summarization": [{"question": "Summarise", "answer": "...", "source_chat_ids": [4]}],
    }
    (chat_dir / "probing_questions" / "probing_questions.json").write_text(json.dumps(probing))
    return folder


def test_beam_folder_documents_gold_and_knowledge_update(tmp_path):
    prepared = recall.prepare("beam", write_beam(tmp_path))
    (case,) = prepared.cases
    assert case.docs == [
        ("0", "user: I run the dashboard API at 400ms."),
        ("1", "assistant: Noted."),
        ("2", "user: After caching the dashboard API answers in 250ms."),
        ("3", "assistant: Great improvement."),
    ]  # chat_trunecated.json wins
    by_type = {q.group: q for q in case.questions}
    assert set(by_type) == {"knowledge_update", "event_ordering"}
    assert by_type["knowledge_update"].gold == ["0", "2"]
    assert (by_type["knowledge_update"].original, by_type["knowledge_update"].updated) == (["0"], ["2"])
    assert by_type["event_ordering"].gold == ["0", "2"]  # nested lists flattened, message 4 is not in the chat
    assert prepared.skipped == {"abstention: no source_chat_ids": 1, "summarization: no source id in the chat": 1}
    assert prepared.dropped_ids["source ids not in the chat"] == 2


def write_longmemeval(path: Path) -> Path:
    def turn(role, content, has_answer=None):
        out = {"role": role, "content": content}
        if has_answer is not None:
            out["has_answer"] = has_answer
        return out

    base = {
        "question_type": "single-session-user",
        "question_date": "2023/05/30 (Tue) 23:40",
        "haystack_dates": ["2023/05/20 (Sat) 02:21", "2023/05/25 (Thu) 10:00", "2023/05/26 (Fri) 11:00"],
        "haystack_session_ids": ["sharegpt_x1", "answer_q1_1", "ultrachat_y2"],
        "answer_session_ids": ["answer_q1_1"],
    }
    sessions = [
        [turn("user", "Tell me a joke about penguins."), turn("assistant", "Why do penguins...")],
        [
            turn("user", "Hi!", False),
            turn("assistant", "Hello!"),
            turn("user", "I got my degree in Business Administration last year.", True),
            turn("assistant", "Congratulations on the Business Administration degree!"),
        ],
        [turn("user", "What is a good pasta recipe?"), turn("assistant", "Try carbonara.")],
    ]
    records = [
        {
            **base,
            "question_id": "q1",
            "question": "What degree did I graduate with?",
            "answer": "Business Administration",
            "haystack_sessions": sessions,
        },
        {
            **base,
            "question_id": "q2_abs",
            "question": "What degree did my sister get?",
            "answer": "unknown",
            "haystack_sessions": sessions,
        },
    ]
    path.write_text(json.dumps(records))
    return path


def test_longmemeval_official_corpus_gold_and_metrics(tmp_path):
    prepared = recall.prepare("longmemeval", write_longmemeval(tmp_path / "lme.json"))
    assert prepared.skipped == {"abstention (_abs)": 1}
    case = prepared.cases[0]
    assert [t for t, _ in case.docs] == ["sharegpt_x1_1", "answer_q1_1_1", "answer_q1_1_3", "ultrachat_y2_1"]
    assert dict(case.docs)["answer_q1_1_3"] == "I got my degree in Business Administration last year."
    (question,) = case.questions
    assert question.gold == ["answer_q1_1_3"] and question.group == "single-session-user"
    row = recall.score(
        "longmemeval", ["sharegpt_x1_1", "answer_q1_1_1", "answer_q1_1_3", "ultrachat_y2_1"], question, case
    )
    assert row["turn_recall_any@5"] == 1.0 and row["turn_recall_all@5"] == 1.0
    assert row["turn_ndcg_any@5"] == pytest.approx(1 / math.log2(3))  # rank 3 under upstream's discount
    assert row["session_recall_any@5"] == 1.0
    # session labels: sharegpt, answer, answer, ultrachat -> 0 1 1 0; the ideal has both answer turns first
    assert row["session_ndcg_any@5"] == pytest.approx((1 + 1 / math.log2(3)) / 2)
    result = recall.run("longmemeval", tmp_path / "lme.json", ["bm25"], 50, None, None)
    assert result["counts"]["questions_used"] == 1
    assert result["systems"]["bm25"]["overall"]["turn_recall_any@5"] == 1.0


# ---- end to end --------------------------------------------------------------------


def run_cli(*args: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(BENCH / "recall.py"), *args], capture_output=True, text=True, timeout=300, cwd=tmp_path
    )


def test_baselines_end_to_end_on_a_tiny_locomo_file(tmp_path):
    data = write_locomo(tmp_path / "locomo.json")
    out = tmp_path / "result.json"
    done = run_cli(
        "--dataset", "locomo", str(data), "--systems", "bm25,dense,rrf", "--json", str(out), tmp_path=tmp_path
    )
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(out.read_text())
    assert json.loads(done.stdout) == result
    assert result["counts"]["questions_used"] == 2 and result["counts"]["conversations"] == 1
    assert set(result["systems"]) == {"bm25", "dense", "rrf"}
    bm25 = result["systems"]["bm25"]
    assert bm25["per_category"]["4"]["recall@1"] == 1.0  # the xylophone recital in Zanzibar
    for system in result["systems"].values():
        assert 0 <= system["overall"]["recall@10"] <= 1 and system["overall"]["n"] == 2
        assert system["query_latency"]["n"] == 2 and system["query_latency"]["p95_ms"] > 0
        assert system["ingest_s"] >= 0 and system["indexed"]
    assert result["systems"]["rrf"]["overall"]["recall@20"] == 1.0  # every document is ranked


def test_a_baseline_fills_the_budget_as_context_assembles_lines():
    text_of = {"a": "x" * 40, "b": "y" * 400, "c": "z" * 8}  # 10, 100 and 2 tokens, each + 1 for its line break
    got = recall.fill(["a", "b", "c"], text_of, 30, 5)
    assert got.inside == {"a", "c"} and got.tokens == 5 + 11 + 3 and got.items == 2 and not got.exhausted
    assert recall.fill(["a", "c"], text_of, 30, 5).exhausted  # everything offered fitted
    header = recall.header_tokens("Where is the   recital?")
    assert header == recall.estimate_tokens("Memories recalled for: Where is the recital? (as of 2026-11-25)")
    fills = {1000: got, 4000: recall.ContextFill(frozenset({"a", "b"}), 0, 0, True)}
    assert recall.context_recall(["a", "b"], fills) == {"context_recall@1000": 0.5, "context_recall@4000": 1.0}


def test_a_context_item_stands_for_the_turns_it_was_derived_from(tmp_path):
    """A Turn item is its own turn; a Summary its derived_from turns, through a summary of summaries too."""
    (case,) = recall.prepare("locomo", write_locomo(tmp_path / "locomo.json")).cases
    store = recall.WorldDBSystem()
    store.open(case)
    try:
        store.index(case)
        db = store.db
        turns = {db.read(nid).props["turn_id"]: nid for nid in store.written}
        first = db.write("Ben practised for a recital.", type="Summary", scope=store.scope, extractor=None)
        second = db.write("Ben got a dog.", type="Summary", scope=store.scope, extractor=None)
        both = db.write("Ben's year.", type="Summary", scope=store.scope, extractor=None)
        db.link_many(
            [
                (first, turns["D1:2"], "derived_from"),
                (second, turns["D2:1"], "derived_from"),
                (second, turns["D2:3"], "derived_from"),
                (both, first, "derived_from"),
                (both, second, "derived_from"),
            ]
        )
        assert store.sources(turns["D1:3"]) == {"D1:3"}
        assert store.sources(first) == {"D1:2"}
        assert store.sources(both) == {"D1:2", "D2:1", "D2:3"}
        facts = [n for n in db.nodes(world=db.scope(store.scope), type="Fact")]
        for fact in facts:  # what the extractor learned points at the turns it came from
            sources = store.sources(fact.id)
            assert sources and sources <= set(turns)
        got = store.context("Where is Ben's xylophone recital?", 1000, recall.CONTEXT_K)
        assert "D1:2" in got.inside and got.tokens <= 1000 and got.items > 0
    finally:
        store.close()


def test_context_recall_is_reported_for_every_system(tmp_path):
    data = write_locomo(tmp_path / "locomo.json")
    out = tmp_path / "result.json"
    done = run_cli("--dataset", "locomo", str(data), "--budgets", "60,1000", "--json", str(out), tmp_path=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(out.read_text())
    assert result["params"]["budgets"] == [60, 1000] and result["consolidate"] is None
    for name, system in result["systems"].items():
        for group in (system["overall"], *system["per_category"].values()):
            assert 0 <= group["context_recall@60"] <= group["context_recall@1000"] <= 1
        assert system["context"]["60"]["mean_tokens"] <= 60 and system["context"]["1000"]["mean_items"] > 0
        if name in ("dense", "rrf"):  # they rank all six documents, which fit 1,000 tokens: every gold turn is in
            assert system["overall"]["context_recall@1000"] == 1.0
            assert system["context"]["1000"]["ranking_ran_out_share"] == 1.0
    assert "context_recall@1000" in done.stderr  # the table


def test_worlddb_runs_or_says_clearly_that_recall_is_missing(tmp_path):
    data = write_locomo(tmp_path / "locomo.json")
    done = run_cli("--dataset", "locomo", str(data), "--systems", "worlddb", tmp_path=tmp_path)
    if not hasattr(WorldDB, "recall"):
        assert done.returncode != 0 and "WorldDB.recall does not exist" in done.stderr
        assert "--systems bm25,dense,rrf" in done.stderr
        return
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout)
    assert result["counts"]["questions_used"] == 2 and result["systems"]["worlddb"]["query_latency"]["n"] == 2


def test_cli_refuses_a_shallow_depth(tmp_path):
    data = write_locomo(tmp_path / "locomo.json")
    done = run_cli("--dataset", "locomo", str(data), "--systems", "bm25", "--depth", "10", tmp_path=tmp_path)
    assert done.returncode != 0 and "at least 50" in done.stderr


def test_the_code_digest_hashes_the_package_this_process_imported(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = recall.source_digest()
    other = tmp_path / "worlddb_lite"
    other.mkdir()
    (other / "__init__.py").write_text("# another checkout\n")
    monkeypatch.setattr(recall, "worlddb_lite", SimpleNamespace(__file__=str(other / "__init__.py")))
    first = recall.source_digest()
    (other / "__init__.py").write_text("# another checkout, changed\n")
    assert len({real, first, recall.source_digest()}) == 3  # not the files beside bench/recall.py
