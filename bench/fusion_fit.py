"""Fit recall's fusion weights and priors on the benchmarks: lanes read once, fusion replayed per setting.

    python bench/fusion_fit.py                        # fit on every conversation of LoCoMo and BEAM-100K
    python bench/fusion_fit.py --fit-on even          # fit on half the conversations, report the other half
    python bench/fusion_fit.py --limit 2 --rounds 1   # a quick look (2 conversations per benchmark)

Each conversation is ingested once into its own store (kept under ``--stores``, reused by later
runs: delete the folder after changing how ingest writes). Every question's lanes are read once
(``retrieval.recall.gather``); each setting tried then replays only ``retrieval.recall.rank`` over
them (fusion, the session and speaker priors, the update moves; the turns a node stands for are read
once), so one setting costs seconds, not a benchmark run. The late stage's pool is the one read
with the weights in the code, not the ones tried: a fitted setting is to be confirmed by
``bench/recall.py``.

The search: coordinate ascent over every lane weight and the priors' weights, as
``retrieval.recall`` reads them when it runs (its ``LANE_WEIGHTS``, imported from ``fusion``, and
its ``*_WEIGHT``/``*_SHARE`` constants; set there and put back after each setting), each multiplied
by 0.5, 0.75, 1.33 and 2 in turn. The first multiple that raises the mean of the benchmarks' turn
recall@10 by more than ``--min-gain`` is kept before the next knob is tried (not the best of the
four); a knob at 0 never moves. Metrics are
``bench/recall.py``'s (``recall_metrics``). ``--fit-on even|odd`` fits on every other conversation
of each benchmark and reports the rest too: a fit that gains only where it was fitted is noise.
"""

from __future__ import annotations

import argparse
import copy
import sys
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import recall_metrics as rm  # noqa: E402
from common import emit, environment, progress  # noqa: E402
from recall import DEFAULT_PATHS, Case, Question, first_known, prepare, source_digest, turn_ids  # noqa: E402

from worlddb_lite import WorldDB
from worlddb_lite.retrieval import blas  # noqa: E402
from worlddb_lite.retrieval import recall as pipeline  # noqa: E402
from worlddb_lite.retrieval.view import ReadView  # noqa: E402

OUT = Path(__file__).resolve().parent / "out"
PRIORS = ("SESSION_WEIGHT", "ASSISTANT_SHARE", "NAMED_SPEAKER_WEIGHT", "REPLY_WEIGHT", "ANSWER_WEIGHT")
STEPS = (0.5, 0.75, 1.33, 2.0)
K = 50  # hits asked per question: recall@20 and the session metrics need the deeper ranks


@dataclass
class Asked:
    """One question, its lanes read once, and what it is scored against."""

    dataset: str
    conversation: str
    question: Question
    view: ReadView
    found: pipeline.Found
    known: set[str]
    said_in: dict[int, list[str]] = field(default_factory=dict)  # node -> the dataset turn ids it stands for

    def ranking(self, nids: list[int]) -> list[str]:
        """Dataset turn ids of the first ``K`` nodes, as ``bench/recall.py``'s ``ranking_from_hits`` reads hits."""
        head = nids[:K]
        new = [nid for nid in head if nid not in self.said_in]
        if new:  # a node's turns are read once per question, however many settings rank it
            turns = pipeline._turns(self.view, self.view.nodes(new), new)
            for nid in new:
                self.said_in[nid] = turn_ids(turns[nid])
        return first_known((tid for nid in head for tid in self.said_in[nid]), self.known, K)


Setting = dict[str, Any]  # {"weights": {lane: w}, prior name: value}


def current() -> Setting:
    return {"weights": dict(pipeline.LANE_WEIGHTS), **{name: getattr(pipeline, name) for name in PRIORS}}


def applied(setting: Setting) -> None:
    pipeline.LANE_WEIGHTS = dict(setting["weights"])
    for name in PRIORS:
        setattr(pipeline, name, setting[name])


def read_lanes(dataset: str, cases: list[Case], stores: Path) -> tuple[list[Asked], list[WorldDB]]:
    """Every question of ``cases`` with its lanes, each conversation in its own (cached) store."""
    asked: list[Asked] = []
    opened: list[WorldDB] = []
    for n, case in enumerate(cases, 1):
        if not case.questions:
            continue
        cid = case.conversation.conversation_id
        path = stores / dataset / f"{cid}.db"
        fresh = not path.exists()
        path.parent.mkdir(parents=True, exist_ok=True)
        db = WorldDB(str(path))
        opened.append(db)
        if fresh:
            db.ingest(case.conversation)
        view = db._reader.view(None, None, False, world=db._reader.scope_id(case.conversation.scopes[0]))
        index = view.index()
        view = replace(view, index=lambda index=index: index)
        known = {t for t, _ in case.docs}
        for question in case.questions:
            found = pipeline.gather(view, question.text, max(pipeline.LANE_DEPTH, K))
            asked.append(Asked(dataset, cid, question, view, found, known))
        progress(f"fusion_fit: {dataset} {n}/{len(cases)} conversations read ({'ingested' if fresh else 'cached'})")
    return asked, opened


def scored(asked: list[Asked], setting: Setting) -> dict[str, dict[str, float]]:
    """Per dataset: turn recall@1/5/10/20 and (BEAM) knowledge-update order under ``setting``."""
    saved = current()
    applied(setting)
    try:
        rows: dict[str, list[dict[str, float]]] = {}
        updates: dict[str, list[bool]] = {}
        for item in asked:
            ranked = item.ranking(pipeline.rank(item.view, item.question.text, item.found).nids)
            rows.setdefault(item.dataset, []).append(
                {f"recall@{k}": rm.recall_at_k(ranked, item.question.gold, k) for k in (1, 5, 10, 20)}
            )
            if item.question.original and item.question.updated:
                order = rm.knowledge_update_order(ranked, item.question.original, item.question.updated)[1]
                updates.setdefault(item.dataset, []).append(order in ("updated_above", "only_updated_ranked"))
    finally:
        applied(saved)
    out = {}
    for dataset, found in rows.items():
        out[dataset] = {key: round(sum(r[key] for r in found) / len(found), 4) for key in found[0]}
        out[dataset]["questions"] = len(found)
        if dataset in updates:
            out[dataset]["update_order"] = round(sum(updates[dataset]) / len(updates[dataset]), 4)
    return out


def objective(figures: dict[str, dict[str, float]]) -> float:
    """The mean over the benchmarks of turn recall@10: no benchmark is fitted alone."""
    return sum(f["recall@10"] for f in figures.values()) / len(figures)


def knobs(setting: Setting) -> list[tuple[str, float]]:
    return [(f"weights.{lane}", w) for lane, w in setting["weights"].items()] + [(n, setting[n]) for n in PRIORS]


def with_knob(setting: Setting, name: str, value: float) -> Setting:
    changed = copy.deepcopy(setting)
    if name.startswith("weights."):
        changed["weights"][name.removeprefix("weights.")] = value
    else:
        changed[name] = value
    return changed


def fit(asked: list[Asked], rounds: int, min_gain: float) -> tuple[Setting, list[dict[str, Any]]]:
    """Coordinate ascent from the code's setting; every kept step is logged."""
    setting = current()
    best = objective(scored(asked, setting))
    steps: list[dict[str, Any]] = [{"start": round(best, 4)}]
    for round_ in range(1, rounds + 1):
        moved = False
        for name, value in knobs(setting):
            for step in STEPS if value else ():
                tried = with_knob(setting, name, round(value * step, 4))
                gained = objective(scored(asked, tried))
                if gained > best + min_gain:
                    setting, best, moved = tried, gained, True
                    steps.append(
                        {"round": round_, "knob": name, "value": round(value * step, 4), "objective": round(best, 4)}
                    )
                    progress(f"fusion_fit: {name} -> {value * step:.4g}: {best:.4f}")
                    break
        if not moved:
            break
    return setting, steps


def split(asked: list[Asked], part: str) -> list[Asked]:
    """``all``, or every other conversation (``even``/``odd``) of each benchmark, in the dataset's order."""
    if part == "all":
        return asked
    kept = []
    for dataset in dict.fromkeys(a.dataset for a in asked):
        order = list(dict.fromkeys(a.conversation for a in asked if a.dataset == dataset))
        start = 0 if part == "even" else 1
        chosen = set(order[start::2])
        kept += [a for a in asked if a.dataset == dataset and a.conversation in chosen]
    return kept


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--datasets", nargs="+", default=["locomo", "beam"], choices=sorted(DEFAULT_PATHS))
    parser.add_argument("--stores", default=str(OUT / "fit-stores"), help="one store per conversation, kept")
    parser.add_argument("--fit-on", choices=("all", "even", "odd"), default="all")
    parser.add_argument("--rounds", type=int, default=2, help="passes over every knob (stops early when none moves)")
    parser.add_argument("--min-gain", type=float, default=0.0005, help="objective gain a change must bring")
    parser.add_argument("--limit", type=int, help="conversations per benchmark (a quick look)")
    parser.add_argument("--json", help="also write the result to this file")
    args = parser.parse_args()
    if args.rounds < 1 or (args.limit is not None and args.limit < 1):
        raise SystemExit("--rounds and --limit must be >= 1")
    started = time.perf_counter()
    asked: list[Asked] = []
    opened: list[WorldDB] = []
    try:
        with blas.one_thread():
            for dataset in args.datasets:
                path = DEFAULT_PATHS[dataset]
                if not path.exists():
                    raise SystemExit(f"fusion_fit: {path} not found (../shared/data holds the benchmarks)")
                cases = prepare(dataset, path).cases[: args.limit]
                found, dbs = read_lanes(dataset, cases, Path(args.stores))
                asked += found
                opened += dbs
            fitted_on = split(asked, args.fit_on)
            held_out = split(asked, {"even": "odd", "odd": "even"}[args.fit_on]) if args.fit_on != "all" else []
            before = current()
            setting, steps = fit(fitted_on, args.rounds, args.min_gain)
            result = {
                "code": {"worlddb_lite_sha256_16": source_digest()},
                "params": {
                    "datasets": args.datasets,
                    "fit_on": args.fit_on,
                    "rounds": args.rounds,
                    "min_gain": args.min_gain,
                    "limit": args.limit,
                    "steps": STEPS,
                },
                "before": {
                    "setting": before,
                    "fitted_on": scored(fitted_on, before),
                    **({"held_out": scored(held_out, before)} if held_out else {}),
                },
                "after": {
                    "setting": setting,
                    "fitted_on": scored(fitted_on, setting),
                    **({"held_out": scored(held_out, setting)} if held_out else {}),
                },
                "steps": steps,
                "seconds": round(time.perf_counter() - started, 1),
                "environment": environment(),
            }
    finally:
        for db in opened:
            db.close()
    emit(result, args.json)


if __name__ == "__main__":
    main()
