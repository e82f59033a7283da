"""The extractor-precision labels are well-formed, and bench/extract_precision.py scores them right."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / "bench"
LABELS = ROOT / "tests" / "fixtures" / "extract_labels.jsonl"
FIELDS = ("key", "dataset", "conversation", "turn_id", "speaker", "text", "subject", "slot", "value", "correct", "why")


@pytest.fixture(scope="module")
def bench():
    sys.path.insert(0, str(BENCH))
    try:
        import extract_precision
    finally:
        sys.path.remove(str(BENCH))
    return extract_precision


def test_labels_are_well_formed():
    lines = [line for line in LABELS.read_text().splitlines() if line.strip()]
    assert len(lines) >= 150
    records = [json.loads(line) for line in lines]
    for r in records:
        assert all(f in r for f in FIELDS), r.get("key")
        assert isinstance(r["correct"], bool), r["key"]
        assert r["why"].strip(), r["key"]
        assert r["key"] == "/".join((r["dataset"], r["conversation"], r["turn_id"], r["slot"], r["value"]))
        assert r["text"] and r["slot"] and r["value"] and r["subject"]
    assert len({r["key"] for r in records}) == len(records)
    assert {r["dataset"] for r in records} == {"locomo", "beam"}


def record(bench, dataset, turn, slot, value, correct):
    return {
        "key": bench.fact_key(dataset, "c1", turn, slot, value),
        "dataset": dataset,
        "conversation": "c1",
        "turn_id": turn,
        "speaker": "Ann",
        "text": "...",
        "subject": "Ann",
        "slot": slot,
        "value": value,
        "correct": correct,
        "why": "ok" if correct else "wrong",
    }


def test_score_counts_precision_dropped_and_unlabelled(bench):
    labels = [
        record(bench, "locomo", "t1", "lives in", "Paris", True),
        record(bench, "locomo", "t1", "opinion of to", "likes", False),
        record(bench, "locomo", "t2", "opinion of tea", "likes", True),
        record(bench, "beam", "t3", "snack budget", "$70", True),
        record(bench, "beam", "t3", "call date", "May 1", False),  # no longer written: dropped
    ]
    produced = {
        ("locomo", "c1", "t1"): {labels[0]["key"], labels[1]["key"]},
        ("locomo", "c1", "t2"): {labels[2]["key"], bench.fact_key("locomo", "c1", "t2", "bought", "tea")},
        ("beam", "c1", "t3"): {labels[3]["key"]},
        ("beam", "c1", "t9"): {bench.fact_key("beam", "c1", "t9", "x", "y")},  # not a labelled turn: ignored
    }
    result = bench.score(labels, produced)
    assert result["labelled"] == 5 and result["still_produced"] == 4
    assert result["dropped"] == 1 and result["dropped_keys"] == [labels[4]["key"]]
    assert result["unlabelled_new"] == 1 and result["unlabelled_keys"] == ["locomo/c1/t2/bought/tea"]
    assert result["overall"] == {"precision": 0.75, "correct": 3, "n": 4}
    assert result["per_dataset"]["locomo"] == {"precision": round(2 / 3, 4), "correct": 2, "n": 3}
    assert result["per_dataset"]["beam"] == {"precision": 1.0, "correct": 1, "n": 1}
    assert result["per_slot"]["opinion of to"] == {"precision": 0.0, "correct": 0, "n": 1}
    assert "call date" not in result["per_slot"]
    assert result["per_slot_family"]["opinion of …"] == {"precision": 0.5, "correct": 1, "n": 2}
    assert result["error_reasons"] == {"wrong": 1}


def test_score_with_nothing_produced_has_no_precision(bench):
    labels = [record(bench, "beam", "t1", "budget", "$5", True)]
    result = bench.score(labels, {})
    assert result["overall"] == {"precision": None, "correct": 0, "n": 0} and result["dropped"] == 1


def test_missing_labels_is_one_line_error(bench, tmp_path, capsys):
    assert bench.main(["--labels", str(tmp_path / "none.jsonl"), "--data", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "labels file not found" in err[0]


def test_missing_data_is_one_line_error(bench, tmp_path, capsys):
    assert bench.main(["--sample", str(tmp_path / "s.jsonl"), "--data", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "data not found" in err[0]
