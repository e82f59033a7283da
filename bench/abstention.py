"""Knowing when nothing is known (issue 37): how well a recall tells answerable questions from unanswerable ones.

    python bench/abstention.py [--sets locomo,offtopic,scenarios] [--locomo PATH] [--cases PATH] [--json OUT]

Two sets, each split into dev and test:

* ``locomo``: each LoCoMo conversation ingested into its own scope (as ``bench/recall.py`` does); its
  questions of categories 1-4 with a real evidence turn are answerable, its category-5 (adversarial)
  questions ask what the conversation never says. Conversations at even positions of the file are
  dev, at odd positions test (5 and 5).
* ``offtopic``: the LoCoMo set's answerable questions against questions that name neither speaker and that
  no conversation answers (``tests/fixtures/offtopic/questions.jsonl``, written blind: general knowledge,
  tasks, news, gibberish, other people, personal things no one said), each asked of every store of its
  split; its questions at even positions are dev (asked of the dev conversations), at odd positions test,
  so no question is both fit on and judged.
* ``scenarios``: the blind corpus (``tests/fixtures/scenarios/cases.jsonl``): its ``never_said`` cases
  against its answerable ones, each in a store holding its person's conversation (``bench/scenarios.py``),
  split as the corpus splits them.

For every question, one ``recall`` (k = 10) and its signals: ``top1_score`` (the first hit's fused
score: the baseline) and ``confidence`` (``Recall.confidence``, once the engine has one). Reported per
set and split: the AUROC of each signal, answerable against unanswerable (0.5 is a coin), the share of
answerable questions whose first hit holds the answer (LoCoMo: one of the hit's turns is gold; scenarios:
the expected text is in the hit or its turns), and, for ``confidence``, a reliability table: questions in
bins of 0.1 by confidence, each bin's count, mean confidence and share correct (correct: answerable and
the first hit holds the answer), and the count-weighted mean gap between the two (the calibration error).
Progress goes to stderr, the JSON to stdout (and ``--json``).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import scenario_cases  # noqa: E402
import scenarios  # noqa: E402
from common import emit, environment, progress  # noqa: E402
from recall import DEFAULT_PATHS, prepare_locomo  # noqa: E402

from worlddb_lite import StaticEmbedder, WorldDB  # noqa: E402

K = 10
BINS = 10
OFFTOPIC = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "offtopic" / "questions.jsonl"
SETS = ("locomo", "offtopic", "scenarios")
SIGNALS = ("top1_score", "confidence")


@dataclass(frozen=True)
class Asked:
    """One question asked of a store: whether anything stored answers it, and what the recall said."""

    split: str
    answerable: bool
    correct: bool  # answerable, and the first hit holds the answer
    signals: dict[str, float]  # signal name -> value (a signal the engine lacks is absent)


def auroc(positives: Sequence[float], negatives: Sequence[float]) -> float | None:
    """P(a random positive scores above a random negative), ties a half (Mann-Whitney U); None if a side is empty."""
    if not positives or not negatives:
        return None
    ranked = sorted([(v, 1) for v in positives] + [(v, 0) for v in negatives])
    rank_sum, i = 0.0, 0
    while i < len(ranked):
        j = i
        while j < len(ranked) and ranked[j][0] == ranked[i][0]:
            j += 1
        mean_rank = (i + 1 + j) / 2  # 1-based ranks i+1 .. j share their mean
        rank_sum += mean_rank * sum(label for _, label in ranked[i:j])
        i = j
    n_pos, n_neg = len(positives), len(negatives)
    return (rank_sum - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg)


def reliability(rows: Sequence[tuple[float, bool]], bins: int = BINS) -> dict[str, Any]:
    """Rows (confidence in [0, 1], correct) in ``bins`` equal bins: count, mean confidence, share correct; the gap."""
    table = []
    for b in range(bins):
        lo, hi = b / bins, (b + 1) / bins
        inside = [(c, ok) for c, ok in rows if lo <= c < hi or (b == bins - 1 and c == 1.0)]
        if inside:
            mean = sum(c for c, _ in inside) / len(inside)
            share = sum(ok for _, ok in inside) / len(inside)
            table.append({"bin": f"{lo:.1f}-{hi:.1f}", "count": len(inside), "confidence": mean, "correct": share})
    total = sum(row["count"] for row in table)
    gap = sum(row["count"] * abs(row["confidence"] - row["correct"]) for row in table) / total if total else None
    return {"bins": [{k: round(v, 4) if isinstance(v, float) else v for k, v in r.items()} for r in table], "gap": gap}


def summarise(asked: Sequence[Asked]) -> dict[str, Any]:
    """Per split: counts, the share answered right, each signal's AUROC, and the confidence's reliability."""
    out: dict[str, Any] = {}
    for split in sorted({a.split for a in asked}):
        rows = [a for a in asked if a.split == split]
        answerable = [a for a in rows if a.answerable]
        report: dict[str, Any] = {
            "answerable": len(answerable),
            "unanswerable": len(rows) - len(answerable),
            "top1_correct": round(sum(a.correct for a in answerable) / len(answerable), 4) if answerable else None,
            "auroc": {},
        }
        for signal in SIGNALS:
            have = [a for a in rows if signal in a.signals]
            if len(have) < len(rows):
                continue  # the engine has no such signal (yet): not reported
            value = auroc(
                [a.signals[signal] for a in have if a.answerable], [a.signals[signal] for a in have if not a.answerable]
            )
            report["auroc"][signal] = None if value is None else round(value, 4)
        if all("confidence" in a.signals for a in rows) and rows:
            report["reliability"] = reliability([(a.signals["confidence"], a.correct) for a in rows])
        out[split] = report
    return out


def signals_of(result: Any) -> dict[str, float]:
    """The signals a recall's result carries: the first hit's score (none: 0), its confidence if it has one,
    and what that was weighed from (``signal:<name>``: bench/confidence_fit.py fits on them)."""
    out = {"top1_score": float(result.hits[0].score) if result.hits else 0.0}
    confidence = getattr(result, "confidence", None)
    if isinstance(confidence, (int, float)) and not math.isnan(confidence):
        out["confidence"] = float(confidence)
    for name, value in (getattr(result, "signals", None) or {}).items():
        out[f"signal:{name}"] = float(value)
    return out


def offtopic_questions(path: Path = OFFTOPIC) -> dict[str, list[str]]:
    """The off-topic questions by split: those at even positions of the file dev, at odd positions test."""
    asked = [str(json.loads(line)["question"]) for line in path.read_text("utf-8").splitlines() if line.strip()]
    return {"dev": asked[0::2], "test": asked[1::2]}


def run_locomo(
    path: Path, limit: int | None, tell: Callable[[str], None], offtopic: dict[str, list[str]] | None = None
) -> tuple[list[Asked], list[Asked]]:
    """Every answerable and category-5 question of each conversation, asked of a store holding it alone; and
    the ``offtopic`` questions of the conversation's split, asked of it too (the second list)."""
    raw = json.loads(path.read_text("utf-8"))
    adversarial = {
        str(s["sample_id"]): [str(qa["question"]) for qa in s.get("qa", []) if str(qa.get("category")) == "5"]
        for s in raw
    }
    order = {str(s["sample_id"]): i for i, s in enumerate(raw)}
    asked: list[Asked] = []
    off: list[Asked] = []
    cases = prepare_locomo(path).cases[:limit]
    for case in cases:
        conversation_id = case.conversation.conversation_id
        split = "dev" if order[conversation_id] % 2 == 0 else "test"
        scope = case.conversation.scopes[0]
        with tempfile.TemporaryDirectory(prefix="abstention-") as tmp, WorldDB(str(Path(tmp) / "s.db")) as db:
            db.ingest(case.conversation)
            for question in case.questions:
                result = db.recall(question.text, scope=scope, k=K)
                gold = set(question.gold)
                top = result.hits[0] if result.hits else None
                correct = top is not None and any(str(t.props.get("turn_id")) in gold for t in top.turns)
                asked.append(Asked(split, True, correct, signals_of(result)))
            for text in adversarial.get(conversation_id, []):
                asked.append(Asked(split, False, False, signals_of(db.recall(text, scope=scope, k=K))))
            for text in (offtopic or {}).get(split, []):
                off.append(Asked(split, False, False, signals_of(db.recall(text, scope=scope, k=K))))
        tell(f"{conversation_id} ({split}): {len(case.questions)} answerable, {len(adversarial[conversation_id])} not")
    return asked, off


def run_scenarios(cases_path: Path, locomo: Path, limit: int | None, tell: Callable[[str], None]) -> list[Asked]:
    """The blind corpus's never-said cases and its answerable ones, each asked after its memories are written."""
    cases = scenario_cases.load(cases_path)[:limit]
    embedder = StaticEmbedder()
    asked: list[Asked] = []
    with tempfile.TemporaryDirectory(prefix="abstention-") as tmp:
        folder = Path(tmp)
        bases = scenarios.base_stores(cases, locomo, folder, embedder)
        for n, case in enumerate(cases, start=1):
            base, _ = bases[(case.conversation, scenarios.scope_of(case))]
            copy = folder / "case.db"
            with WorldDB(str(base), embedder=embedder) as db:
                db.backup(copy, overwrite=True)
            with WorldDB(str(copy), embedder=embedder) as db:
                scenarios.apply_case(db, case)
                result = db.recall(case.question, scope=scenarios.scope_of(case), as_of=case.as_of, k=K)
            answerable = case.expected is not None
            correct = answerable and bool(result.hits) and scenarios.found(result.hits[0], str(case.expected))
            asked.append(Asked(case.split, answerable, correct, signals_of(result)))
            if n % 40 == 0:
                tell(f"{n}/{len(cases)} scenario cases")
    return asked


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sets", default=",".join(SETS), help="which sets to run (comma list)")
    parser.add_argument("--locomo", default=str(DEFAULT_PATHS["locomo"]))
    parser.add_argument("--cases", default=str(scenario_cases.DEFAULT_PATH))
    parser.add_argument("--limit", type=int, help="only the first N conversations / cases of each set (a smoke run)")
    parser.add_argument("--json", help="also write the result to this file")
    args = parser.parse_args(argv)
    sets = [s for s in args.sets.split(",") if s]
    unknown = [s for s in sets if s not in SETS]
    if unknown or not sets:
        print(f"--sets takes some of {', '.join(SETS)}, not {args.sets!r}", file=sys.stderr)
        return 2
    locomo = Path(args.locomo)
    if not locomo.is_file():
        print(f"LoCoMo not found at {locomo}; give --locomo PATH", file=sys.stderr)
        return 2
    started = time.perf_counter()
    result: dict[str, Any] = {"benchmark": "abstention", "k": K, "sets": {}}
    if "locomo" in sets or "offtopic" in sets:
        offtopic = offtopic_questions() if "offtopic" in sets else None
        asked, off = run_locomo(locomo, args.limit, progress, offtopic)
        if "locomo" in sets:
            result["sets"]["locomo"] = summarise(asked)
        if "offtopic" in sets:
            result["sets"]["offtopic"] = summarise([a for a in asked if a.answerable] + off)
    if "scenarios" in sets:
        result["sets"]["scenarios"] = summarise(run_scenarios(Path(args.cases), locomo, args.limit, progress))
    result["seconds"] = round(time.perf_counter() - started, 1)
    result["environment"] = environment()
    emit(result, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
