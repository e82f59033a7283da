"""The benchmark scripts run end to end on tiny inputs, so they never rot."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parent.parent / "bench"


def run(script: str, *args: str, tmp_path: Path, store: bool = True) -> dict:
    """``bench/<script> args --json OUT`` (with ``store``, also ``--path`` a store of its own); the JSON it wrote."""
    out = tmp_path / "result.json"
    place = ["--path", str(tmp_path / "bench.db")] if store else []
    done = subprocess.run(
        [sys.executable, str(BENCH / script), *args, *place, "--json", str(out)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(out.read_text())


def test_scale_smoke(tmp_path):
    result = run("scale.py", "--nodes", "400", "--probes", "20", "--vector-probes", "5", tmp_path=tmp_path)
    assert result["params"]["edges"] == 1000
    assert result["load"]["nodes_per_s"] > 0 and result["probes"]["bm25_top10"]["n"] == 20
    assert result["env"]["sqlite"] and result["file_bytes"] > 0


def test_write_growth_smoke(tmp_path):
    result = run("scale.py", "--write-growth", "--max-size", "1000", "--writes", "10", tmp_path=tmp_path)
    assert list(result["per_size"]) == ["1000"] and result["per_size"]["1000"]["n"] == 10


def test_mcp_load_smoke(tmp_path):
    """bench/mcp_load.py: concurrent HTTP clients through one `worlddb mcp --http` server, none lost."""
    result = run("mcp_load.py", "--clients", "2", "--seconds", "2", tmp_path=tmp_path)
    assert result["errors"] == 0 and result["lost_writes"] == 0 and not result["count_mismatch"]
    assert result["writes_acknowledged"] > 0 and result["read_back"] == result["writes_acknowledged"]
    assert result["latency"]["memory_recall"]["n"] > 0 and result["verify_ok"] and result["server_exit_code"] == 0


def test_fuzz_finds_no_violation_in_a_short_run(tmp_path):
    """The reconciler fuzz (bench/fuzz.py) with invariants checked after every step."""
    result = run("fuzz.py", "--ops", "400", "--seed", "11", "--full-every", "100", tmp_path=tmp_path)
    assert result["operations"]["ok"] > 100 and result["operations"]["refused"] > 0
    assert result["violation_count"] == 0, result["violations"][:5]


@pytest.mark.slow
def test_fuzz_longer_run(tmp_path):
    result = run("fuzz.py", "--ops", "5000", "--seed", "12", "--full-every", "500", tmp_path=tmp_path)
    assert result["violation_count"] == 0, result["violations"][:5]


def test_embed_smoke(tmp_path):
    out = tmp_path / "embed.json"
    done = subprocess.run(
        [sys.executable, str(BENCH / "embed.py"), "--limit", "300", "--load-runs", "1", "--json", str(out)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(out.read_text())
    assert result["dim"] == 256 and result["texts"] == 300
    assert result["load_s"] > 0 and result["batch_sentences_per_s"] > 0 and result["single_latency"]["n"] == 300


def test_lane_smoke(tmp_path):
    out = tmp_path / "lane.json"
    done = subprocess.run(
        [
            sys.executable,
            str(BENCH / "lane.py"),
            "--n",
            "3000",
            "--data",
            "random",
            "--queries",
            "5",
            "--json",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(out.read_text())["lane"]["random"]
    assert result["n"] == 3000 and result["partitions"] > 1
    for case in ("unfiltered", "type_10pct", "type_1pct", "world_10pct", "world_1pct"):
        assert 0 <= result[case]["recall_at_10"] <= 1 and result[case]["n"] == 5
    assert result["hydration"]["total_s"] > 0


def test_vectors_smoke(tmp_path):
    out = tmp_path / "vectors.json"
    done = subprocess.run(
        [
            sys.executable,
            str(BENCH / "vectors.py"),
            "--n",
            "2000",
            "--data",
            "random",
            "--queries",
            "5",
            "--slow-queries",
            "5",
            "--options",
            "vec0_flat,numpy_flat,numpy_ivf",
            "--workdir",
            str(tmp_path / "work"),
            "--json",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(out.read_text())
    assert "random" in json.dumps(result) and "recall" in json.dumps(result)


def test_ingest_smoke(tmp_path):
    if not (BENCH.parent.parent / "shared" / "data" / "locomo" / "locomo10.json").is_file():
        pytest.skip("the bench's stores are built from ../shared/data/locomo's turns")
    out = tmp_path / "ingest.json"
    done = subprocess.run(
        [
            sys.executable,
            str(BENCH / "ingest.py"),
            "--sizes",
            "300",
            "--writes",
            "5",
            "--skip-datasets",
            "--json",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(out.read_text())
    at = result["write_latency"]["300"]
    assert at["system1"]["n"] == 3 and at["inline"]["n"] == 2 and at["system1"]["p95_ms"] > 0


def test_purge_smoke(tmp_path):
    out = tmp_path / "purge.json"
    done = subprocess.run(
        [sys.executable, str(BENCH / "purge.py"), "--sizes", "60", "--json", str(out)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    (row,) = json.loads(out.read_text())["sizes"]
    assert row["memories"] == 60 and row["scope_purged"] == 61 and row["turns"] == 50 and row["scope_s"] > 0


def test_supersession_bench_counts_a_real_supersession(tmp_path):
    import io
    import tarfile

    chat = [
        {
            "batch_number": 1,
            "time_anchor": None,
            "turns": [
                [{"role": "user", "id": 0, "time_anchor": "March-01-2024", "content": "I live in Austin these days."}],
                [{"role": "user", "id": 1, "time_anchor": "April-01-2024", "content": "I moved to Denver last week."}],
            ],
        }
    ]
    probing = {
        "knowledge_update": [
            {
                "question": "Where do I live?",
                "answer": "Denver",
                "source_chat_ids": {"original_info": [0], "updated_info": [1]},
            }
        ]
    }
    archive = tmp_path / "beam_tiny.tar.xz"
    with tarfile.open(archive, "w:xz") as tar:
        for name, data in (
            ("BEAM/100K/1/chat.json", chat),
            ("BEAM/100K/1/probing_questions/probing_questions.json", probing),
        ):
            raw = json.dumps(data).encode()
            info = tarfile.TarInfo(name)
            info.size = len(raw)
            tar.addfile(info, io.BytesIO(raw))
    out = tmp_path / "supersession.json"
    done = subprocess.run(
        [sys.executable, str(BENCH / "supersession.py"), "--archive", str(archive), "--json", str(out)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(out.read_text())
    assert result["knowledge_update_questions"] == 1 and result["updated_fact_supersedes_original_fact"] == 1


def test_recall_scale_smoke(tmp_path):
    """bench/recall_scale.py --smoke: builds a small store, times recall per lane and the rerank stand-ins."""
    if not (BENCH.parent.parent / "shared" / "data" / "locomo" / "locomo10.json").is_file():
        pytest.skip("the bench takes its turns and questions from ../shared/data/locomo")
    pytest.importorskip("onnx")
    out, store = tmp_path / "recall_scale.json", tmp_path / "scale.db"
    args = [
        sys.executable,
        str(BENCH / "recall_scale.py"),
        "--smoke",
        "--size",
        "300",
        "--store",
        str(store),
        "--json",
        str(out),
    ]
    done = subprocess.run(args, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(out.read_text())
    assert result["smoke"] and result["store"]["built"]["turns"] == 300 and not result["store"]["built"]["cached"]
    assert result["recall"]["n"] == 10 and result["recall"]["p95_ms"] > 0 and result["recall"]["hits_p50"] == 10
    lanes = result["lanes"]
    assert not lanes["not_wrapped"] and lanes["text"]["mean_ms"] > 0 and lanes["vector"]["mean_ms"] > 0
    assert lanes["lane_lengths"]["vector"]["p50"] > 0 and lanes["late"]["mean_ms"] > 0
    for model in ("cross_encoder", "bi_encoder"):
        assert result["rerank_stage"][model]["n"] == 3
    assert result["quality"] == {"skipped": "--quality 0"}
    again = subprocess.run(
        args[:-2] + ["--rerank-queries", "0", "--no-late", "--quality", "4"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert again.returncode == 0, again.stderr[-2000:]
    second = json.loads(again.stdout)
    assert second["store"]["built"]["cached"]  # the built file is reused
    assert not second["params"]["late"] and second["lanes"]["late"]["mean_ms"] == 0
    quality = second["quality"]
    # only questions whose evidence lies in the store's 300 turns (the first of LoCoMo's first conversation)
    assert quality["questions"] == 4 and quality["gold_not_in_store"] > 1000
    assert 0 < quality["recall@10"] <= 1 and quality["recall@1"] <= quality["recall@10"]


def test_recall_scale_pool_places_locomo_turns():
    """The quality check finds a gold turn by its place in the pool: the place must be the turn's own."""
    locomo = BENCH.parent.parent / "shared" / "data" / "locomo" / "locomo10.json"
    if not locomo.is_file():
        pytest.skip("the bench takes its turns from ../shared/data/locomo")
    sys.path.insert(0, str(BENCH))
    try:
        import recall_scale
    finally:
        sys.path.remove(str(BENCH))
    pool, speakers, where = recall_scale.pool_of_turns()
    raw = json.loads(locomo.read_text("utf-8"))
    first, last = raw[0], raw[-1]
    turn = first["conversation"]["session_1"][0]
    assert where[(str(first["sample_id"]), turn["dia_id"])] == 0 and pool[0][0] == turn["speaker"]
    assert pool[0][1].startswith(turn["text"][:40]) and turn["speaker"] in speakers
    sessions = [k for k in last["conversation"] if k.startswith("session_") and k.count("_") == 1]
    numbers = sorted(int(k.split("_")[1]) for k in sessions)
    final = last["conversation"][f"session_{numbers[-1]}"][-1]
    place = where[(str(last["sample_id"]), final["dia_id"])]
    assert place == len(where) - 1 and pool[place][1].startswith(final["text"][:40])


def test_fusion_fit_smoke(tmp_path):
    """bench/fusion_fit.py: lanes read once, settings replayed; the fit never ends below where it started."""
    if not (BENCH.parent.parent / "shared" / "data" / "locomo" / "locomo10.json").is_file():
        pytest.skip("the fit reads ../shared/data/locomo")
    out = tmp_path / "fit.json"
    args = [
        sys.executable,
        str(BENCH / "fusion_fit.py"),
        "--datasets",
        "locomo",
        "--limit",
        "1",
        "--rounds",
        "1",
        "--stores",
        str(tmp_path / "stores"),
        "--json",
        str(out),
    ]
    done = subprocess.run(args, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(out.read_text())
    before, after = result["before"]["fitted_on"]["locomo"], result["after"]["fitted_on"]["locomo"]
    assert before["questions"] == after["questions"] > 50 and 0.3 < before["recall@10"] <= 1
    assert after["recall@10"] >= before["recall@10"]  # a step is kept only if the mean grows
    assert len(result["steps"]) == 1 or after["recall@10"] > before["recall@10"]
    assert result["steps"][0]["start"] == before["recall@10"]
    assert (tmp_path / "stores" / "locomo").is_dir() and "ingested" in done.stderr


def test_recall_bench_rerank_variants_smoke(tmp_path):
    """bench/recall.py --rerank: worlddb asked as it is and through a (stand-in) bi-encoder, plain and fused."""
    locomo = BENCH.parent.parent / "shared" / "data" / "locomo" / "locomo10.json"
    if not locomo.is_file():
        pytest.skip("the bench reads ../shared/data/locomo")
    onnx = pytest.importorskip("onnx")
    sys.path.insert(0, str(BENCH))
    import rerank as rerank_bench  # bench/rerank.py: its tiny stand-in encoder gives token vectors

    folder = tmp_path / "tiny-bi"
    folder.mkdir()
    onnx.save(rerank_bench.tiny_encoder(["alice went to porto", "bob likes tea"], folder), str(folder / "model.onnx"))
    out = tmp_path / "recall.json"
    done = subprocess.run(
        [
            sys.executable,
            str(BENCH / "recall.py"),
            "--dataset",
            "locomo",
            "--systems",
            "worlddb",
            "--limit-conversations",
            "1",
            "--limit-questions",
            "3",
            "--rerank",
            "none,bi-encoder,bi-encoder-rrf",
            "--rerank-depth",
            "5,30",
            "--rerank-folder",
            str(folder),
            "--json",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    systems = json.loads(out.read_text())["systems"]
    assert list(systems) == [
        "worlddb",
        "worlddb+bi-encoder@5",
        "worlddb+bi-encoder@30",
        "worlddb+bi-encoder-rrf@5",
        "worlddb+bi-encoder-rrf@30",
    ]
    assert "rerank" not in systems["worlddb"]
    for name, system in list(systems.items())[1:]:
        assert system["overall"]["n"] == 3 and system["rerank"]["score_latency"]["n"] == 3
        assert system["rerank"]["depth"] == int(name.split("@")[1])
        assert system["rerank"]["passages_per_call"] == system["rerank"]["depth"]
    # a depth-5 re-sort leaves the ranks past 5 as recall fused them
    assert systems["worlddb+bi-encoder@5"]["overall"]["recall@20"] == systems["worlddb"]["overall"]["recall@20"]


def test_recall_bench_cross_encoder_variants_smoke(tmp_path):
    """bench/recall.py --rerank cross-encoder: the folder a user names (here a tiny one) re-orders the head."""
    locomo = BENCH.parent.parent / "shared" / "data" / "locomo" / "locomo10.json"
    if not locomo.is_file():
        pytest.skip("the bench reads ../shared/data/locomo")
    pytest.importorskip("onnx")
    import numpy as np

    from .test_rerank import VOCAB, build

    folder = build(tmp_path / "tiny-ce", np.random.default_rng(7).standard_normal((len(VOCAB), 8)).astype(np.float32))
    out = tmp_path / "recall.json"
    base = [
        sys.executable,
        str(BENCH / "recall.py"),
        "--dataset",
        "locomo",
        "--systems",
        "worlddb",
        "--limit-conversations",
        "1",
        "--limit-questions",
        "3",
        "--rerank-depth",
        "5",
    ]
    done = subprocess.run(
        [
            *base,
            "--rerank",
            "none,cross-encoder,cross-encoder-rrf",
            "--rerank-weights",
            "0.5",
            "--cross-encoder",
            str(folder),
            "--json",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    systems = json.loads(out.read_text())["systems"]
    assert list(systems) == ["worlddb", "worlddb+cross-encoder@5", "worlddb+cross-encoder-rrf@5,w=0.5"]
    for system in list(systems.values())[1:]:
        assert system["overall"]["n"] == 3 and system["rerank"]["passages_per_call"] == 5
        assert system["rerank"]["id"].removeprefix("rrf(k=60,w=0.5):").startswith("onnx:tiny-ce@")
    assert systems["worlddb+cross-encoder@5"]["overall"]["recall@20"] == systems["worlddb"]["overall"]["recall@20"]
    # asked for without a folder, or with one that holds no model: a clear error, not a traceback
    for extra, said in (
        (["--rerank", "cross-encoder"], "--cross-encoder FOLDER"),
        (["--rerank", "cross-encoder", "--cross-encoder", str(tmp_path)], str(tmp_path)),
    ):
        bad = subprocess.run([*base, *extra], capture_output=True, text=True, timeout=300)
        assert bad.returncode != 0 and said in bad.stderr and "Traceback" not in bad.stderr


def test_assistant_bench_smoke(tmp_path):
    """bench/assistant.py on a LoCoMo file of its own: notes alone and notes among live turns, with the baselines."""
    sample = {
        "sample_id": "conv-x",
        "conversation": {
            "speaker_a": "Ana",
            "speaker_b": "Ben",
            "session_1_date_time": "1:56 pm on 8 May, 2023",
            "session_1": [
                {"speaker": "Ana", "dia_id": "D1:1", "text": "I adopted a puppy called Rex"},
                {"speaker": "Ben", "dia_id": "D1:2", "text": "Lovely! What breed is Rex?"},
                {"speaker": "Ana", "dia_id": "D1:3", "text": "A beagle, he loves the beach"},
            ],
            "session_2_date_time": "10:04 am on 12 June, 2023",
            "session_2": [{"speaker": "Ana", "dia_id": "D2:1", "text": "Rex learned to sit at the pottery class"}],
        },
        "observation": {
            "session_1_observation": {
                "Ana": [["Ana adopted a puppy named Rex.", "D1:1"], ["Rex is a beagle who loves the beach.", "D1:3"]]
            },
            "session_2_observation": {"Ana": [["Rex learned to sit.", "D2:1"]]},
        },
        "qa": [
            {"question": "What breed is Ana's dog?", "answer": "beagle", "evidence": ["D1:3"], "category": 4},
            {"question": "What did Rex learn?", "answer": "to sit", "evidence": ["D2:1"], "category": 4},
        ],
    }
    path = tmp_path / "locomo.json"
    path.write_text(json.dumps([sample]))
    out = tmp_path / "assistant.json"
    done = subprocess.run(
        [sys.executable, str(BENCH / "assistant.py"), str(path), "--json", str(out)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(out.read_text())
    assert result["questions"] == 2 and result["ceiling_notes_cite_gold"] == 1.0
    assert set(result["systems"]) == {"notes/worlddb", "notes/bm25", "notes/dense", "notes/rrf", "mixed/worlddb"}
    assert all(0 <= s["recall@10"] <= 1 and s["n"] == 2 for s in result["systems"].values())
    assert result["systems"]["notes/worlddb"]["recall@10"] == 1.0  # two questions, three notes: all found
    assert 0 <= result["mixed_note_in_top10_when_a_note_cites_gold"] <= 1
    bad = subprocess.run(
        [sys.executable, str(BENCH / "assistant.py"), str(path), "--modes", "turns"], capture_output=True, text=True
    )
    assert bad.returncode != 0 and "--modes takes" in bad.stderr


def test_write_cost_smoke(tmp_path):
    """bench/write_cost.py on generated sentences: a note through System 2, a verbatim note and a live turn."""
    out = tmp_path / "write_cost.json"
    done = subprocess.run(
        [
            sys.executable,
            str(BENCH / "write_cost.py"),
            "--sizes",
            "20,40",
            "--writes",
            "3",
            "--corpus",
            "synthetic",
            "--json",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(out.read_text())
    assert set(result["per_size"]) == {"20", "40"}
    for per_kind in result["per_size"].values():
        assert set(per_kind) == {"write", "write_verbatim", "add_turn"}
        assert all(v["n"] == 3 and v["p95_ms"] > 0 for v in per_kind.values())
    bad = subprocess.run(
        [sys.executable, str(BENCH / "write_cost.py"), "--sizes", "40,20"], capture_output=True, text=True
    )
    assert bad.returncode != 0 and "ascending" in bad.stderr


def test_consolidate_bench_smoke(tmp_path):
    """bench/consolidate.py: a Summary per topic collapses its notes, and its derived_from edges reach them all."""
    result = run("consolidate.py", "--facts", "200", "--topics", "4", "--runs", "1", tmp_path=tmp_path, store=False)
    queries = result["queries"]
    assert queries["summary_first"]["nodes_mean"] == 1 and queries["full_detail"]["nodes_mean"] == 50
    assert queries["full_detail"]["tokens_mean"] > 10 * queries["summary_first"]["tokens_mean"]
    assert queries["summary_first"]["latency"]["n"] == queries["full_detail"]["latency"]["n"] == 4
    assert queries["detail_reachable"] == {**queries["detail_reachable"], "topics_checked": 4, "all_equal": True}
    assert result["build"]["derived_from_edges"] == 200 and result["build"]["summaries"] == 4


def test_footprint_smoke(tmp_path):
    """bench/footprint.py --sizes 300: builds through recall_scale, measures cold starts, RSS, bytes per table."""
    if not (BENCH.parent.parent / "shared" / "data" / "locomo" / "locomo10.json").is_file():
        pytest.skip("the store is built from ../shared/data/locomo (bench/recall_scale.py)")
    args = ["--sizes", "300", "--store-dir", str(tmp_path / "stores")]
    args += ["--queries", "10", "--runs", "1", "--rerank-queries", "2", "--no-heap", "--no-install-size"]
    result = run("footprint.py", *args, tmp_path=tmp_path, store=False)
    size = result["sizes"]["300"]
    assert not size["build"]["cached"] and size["build"]["memories"] == 300 and size["build"]["memories_per_s"] > 0
    assert size["file"]["bytes_per_memory"] > 0 and "node" in size["file"]["tables_mb"]
    assert size["file"]["column_bytes_mb"] and size["file"]["objects"][0]["bytes"] > 0
    assert size["cold_start"]["in_process"]["launch_to_first_recall_s"] > 0 and size["cold_start"]["in_process"]["hits"]
    assert size["cold_start"]["cli"]["wall_s"] > 0 and size["cold_start"]["cli"]["hits"]
    recall = size["recall"]
    assert recall["recalls"] == 11 and recall["latency_after_first"]["n"] == 10 and recall["peak_rss_mb"] > 0
    assert recall["ivf"]["rows"] > 300 and any(".matrix" in name for name in recall["arrays_mb"])
    rerank = size["reranker"]
    if isinstance(rerank, str):  # no onnx / onnxruntime here: said so, not faked
        assert rerank.startswith("unavailable")
    else:
        assert rerank["status"].startswith("unavailable") and rerank["stand_in"]["recall"]["recalls"] == 3
    assert "100k" not in result["targets"]
    again = subprocess.run(
        [sys.executable, str(BENCH / "footprint.py"), *args, "--no-reranker"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert again.returncode == 0, again.stderr[-2000:]
    second = json.loads(again.stdout)
    assert second["sizes"]["300"]["build"]["cached"] and second["sizes"]["300"]["reranker"] == "skipped: --no-reranker"


def test_retention_smoke(tmp_path):
    """bench/retention.py --sizes 400 --cap 100: the capped process's index holds the cap's rows, not the store's."""
    if not (BENCH.parent.parent / "shared" / "data" / "locomo" / "locomo10.json").is_file():
        pytest.skip("the store is built from ../shared/data/locomo (bench/recall_scale.py)")
    args = ["--sizes", "400", "--cap", "100", "--queries", "5", "--store-dir", str(tmp_path / "stores")]
    size = run("retention.py", *args, tmp_path=tmp_path, store=False)["sizes"]["400"]
    hot, capped = size["all_hot"], size["capped"]
    assert hot["tier"]["cold"] == 0 and capped["tier"]["cold"] == capped["tier"]["moved"] > 0
    assert capped["index_rows"] < hot["index_rows"] and capped["peak_rss_mb"] > 0


def test_sync_bench_smoke(tmp_path):
    """bench/sync.py --smoke: replicas that diverged by 50 and 100 turns converge, sending about what changed."""
    if not (BENCH.parent.parent / "shared" / "data" / "locomo" / "locomo10.json").is_file():
        pytest.skip("the base store is built from ../shared/data/locomo (bench/recall_scale.py)")
    result = run("sync.py", "--smoke", "--store-dir", str(tmp_path / "stores"), tmp_path=tmp_path, store=False)
    pair = result["pair"]
    assert pair["log_complete"] and pair["first_sync"]["records"] == 0 and pair["idle_sync"]["records"] == 0
    assert pair["settle"][0]["converged"] and pair["settle"][0]["records"] > 0 and len(pair["settle"]) < 4
    records = {}
    for count in (50, 100):
        case = result["diverge"][str(count)]
        sync, by_hand = case["sync"], case["directions"]
        assert case["writes"]["a"]["memories"] == case["writes"]["b"]["memories"] == count
        assert sync["converged"] and sync["roots_equal"] and by_hand["roots_equal"]
        for direction, hand in (("pull", "pull_b_to_a"), ("push", "push_a_to_b")):
            assert sync[direction]["nodes"]["added"] >= count  # each side's new turns reach the other
            assert by_hand[hand]["records"] == sync[direction]["records"] and by_hand[hand]["apply_s"] > 0
        assert case["again"]["records"] <= sync["records"] and case["quiet"]["records"] == 0  # an echo at most
        assert case["again"]["converged"] and case["per_1k"]["sync"]["s_per_1k"] > 0
        records[count] = sync["records"]
    assert records[50] < records[100] < 3 * records[50]  # grows with the difference, not with the store


def test_scenarios_smoke(tmp_path):
    if not (BENCH.parent.parent / "shared" / "data" / "locomo" / "locomo10.json").is_file():
        pytest.skip("the scenarios hold LoCoMo conversations: ../shared/data/locomo is absent")
    result = run("scenarios.py", "--split", "dev", "--limit", "3", tmp_path=tmp_path, store=False)
    assert result["cases"] == 3
    for system in ("worlddb", "bm25", "dense", "rrf", "rrf_newest"):
        assert result["systems"][system]["dev"]["overall"]["n"] == 3


def test_file_memory_smoke(tmp_path):
    """bench/file_memory.py: 200 KB hostile files, each applied or imported in a process of its own."""
    from .test_changeset_memory import LOCOMO

    if not LOCOMO.exists():
        pytest.skip("LoCoMo is not in ../shared/data")
    result = run("file_memory.py", "--smoke", "--locomo", str(LOCOMO), tmp_path=tmp_path, store=False)
    runs = result["runs"]
    assert len(runs) == 6 and all(r["verdict"] == "applied" or r["unchanged"] for r in runs.values())
    assert runs["honest/changes"]["verdict"] == "applied" and runs["honest/export"]["verdict"] == "applied"
    assert result["real"]["honest/changes"]["cost_per_byte"] > 0


def test_mcp_tools_smoke(tmp_path):
    result = run("mcp_tools.py", tmp_path=tmp_path, store=False)
    assert result["tools"] == 12 and 0 < result["tool_list_chars"] <= result["tool_list_chars_spaced"]
    assert result["recall_hits"] == 10 and result["recall_answer_chars"] > 0


def test_cli_start_smoke(tmp_path):
    """bench/cli_start.py: each command timed as a fresh process (the targets are the bench's, not checked here)."""
    result = run("cli_start.py", "--runs", "1", tmp_path=tmp_path, store=False)
    timed = result["results"]["this"]
    assert set(timed) == {"pass", "version", "help", "recall", "stats"}
    assert all(row["n"] == 1 and row["median_ms"] > 0 for row in timed.values())
    assert timed["recall"]["target_ms"] == 500 and "met" in timed["recall"] and result["env"]["python"]
