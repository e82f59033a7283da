"""bench/abstention.py (issue 37): its AUROC and reliability table on hand-made numbers, and a run end to end
on a tiny LoCoMo file."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import BENCH, bench_module
from .test_recall_bench import write_locomo

abstention = bench_module("abstention")


def test_auroc_is_the_share_of_pairs_ranked_right_ties_counting_a_half() -> None:
    assert abstention.auroc([0.9, 0.8], [0.1, 0.2]) == 1.0
    assert abstention.auroc([0.1, 0.2], [0.9, 0.8]) == 0.0
    assert abstention.auroc([0.5], [0.5]) == 0.5
    assert abstention.auroc([0.9, 0.4], [0.5, 0.1]) == pytest.approx(0.75)  # 3 of 4 pairs in order
    assert abstention.auroc([0.3, 0.3, 0.7], [0.3, 0.1]) == pytest.approx((1.5 + 1.5 + 2) / 6)
    assert abstention.auroc([], [0.1]) is None


def test_reliability_bins_confidences_and_weighs_the_gap_by_count() -> None:
    rows = [(0.05, False), (0.05, False), (0.95, True), (0.95, False), (1.0, True)]
    table = abstention.reliability(rows)
    assert [(b["bin"], b["count"]) for b in table["bins"]] == [("0.0-0.1", 2), ("0.9-1.0", 3)]
    top = table["bins"][1]
    assert top["correct"] == pytest.approx(2 / 3, abs=1e-4) and top["confidence"] == pytest.approx(0.9667, abs=1e-4)
    assert table["gap"] == pytest.approx((2 * 0.05 + 3 * abs(0.9667 - 2 / 3)) / 5, abs=1e-3)


def test_a_signal_the_engine_lacks_is_not_reported() -> None:
    asked = [
        abstention.Asked("dev", True, True, {"top1_score": 0.9}),
        abstention.Asked("dev", False, False, {"top1_score": 0.2}),
    ]
    report = abstention.summarise(asked)["dev"]
    assert report["auroc"] == {"top1_score": 1.0} and "reliability" not in report
    assert report["answerable"] == 1 and report["unanswerable"] == 1 and report["top1_correct"] == 1.0


def test_the_bench_runs_end_to_end_on_a_tiny_locomo_file(tmp_path: Path) -> None:
    locomo = write_locomo(tmp_path / "locomo.json")
    out = tmp_path / "result.json"
    done = subprocess.run(
        [sys.executable, str(BENCH / "abstention.py"), "--sets", "locomo", "--locomo", str(locomo), "--json", str(out)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    dev = json.loads(out.read_text())["sets"]["locomo"]["dev"]
    assert dev["answerable"] == 2 and dev["unanswerable"] == 1  # categories 1-4 with real evidence; category 5
    assert dev["auroc"]["top1_score"] is not None


def test_bad_arguments_are_refused_with_a_reason(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, str(BENCH / "abstention.py"), "--sets", "beam", "--locomo", str(tmp_path / "none.json")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2 and "--sets takes some of locomo, offtopic, scenarios" in done.stderr


def test_the_fit_learns_a_signal_that_tells_right_from_wrong_in_its_own_units() -> None:
    import numpy as np

    fitting = bench_module("confidence_fit")
    rng = np.random.default_rng(0)
    x = np.column_stack([rng.uniform(0, 1, 400), rng.uniform(0, 1, 400)])  # the first tells, the second is noise
    y = (x[:, 0] + 0.1 * rng.standard_normal(400) > 0.5).astype(float)
    weights, bias = fitting.fit(x, y)
    assert weights[0] > 5 * abs(weights[1])
    assert abs(-bias / weights[0] - 0.5) < 0.1  # the fit's even odds sit where the answer turns, in x's own units


def test_the_two_step_fit_ranks_by_answerable_and_says_how_often_the_first_hit_is_right() -> None:
    """Direction from answerable vs not, scale from first hit right: here half the answerable recalls are right."""
    import numpy as np

    fitting = bench_module("confidence_fit")
    abstention = bench_module("abstention")
    from worlddb_lite.retrieval.confidence import SIGNALS, confidence

    rng = np.random.default_rng(1)
    asked = []
    for n in range(600):
        answerable = n % 3 != 0
        tells = float(answerable) + 0.3 * rng.standard_normal()  # the first signal tells answerable from not
        values = {f"signal:{name}": float(rng.uniform()) for name in SIGNALS}
        values[f"signal:{SIGNALS[0]}"] = tells
        asked.append(abstention.Asked("dev", answerable, answerable and n % 2 == 0, values))
    weights, bias = fitting.fit_confidence(asked)
    named = dict(zip(SIGNALS, weights, strict=True))
    sure = [confidence({s: a.signals[f"signal:{s}"] for s in SIGNALS}, named, bias) for a in asked]
    ranked = abstention.auroc(
        [c for a, c in zip(asked, sure, strict=True) if a.answerable],
        [c for a, c in zip(asked, sure, strict=True) if not a.answerable],
    )
    assert ranked > 0.95  # ordered by what tells answerable from not ...
    assert abs(np.mean(sure) - np.mean([a.correct for a in asked])) < 0.05  # ... sure as often as it is right
