"""The assistant's scenarios (issue 36): the blind corpus's cases, each in a store holding its person's conversation.

    python bench/scenarios.py [--cases PATH] [--locomo PATH] [--split dev,test] [--kinds K,...] [--json OUT]

Cases: ``tests/fixtures/scenarios/cases.jsonl`` (``bench/scenario_cases.py`` loads and checks them; written
blind, before any mechanism they judge). For each case: a copy of a store where the case's LoCoMo conversation
was ingested whole into the scope of its person (the person's name, lower case), then the case's memories
(``write`` a note, ``add_turn`` a live turn, each at its time), its steps (``retire``, ``amend``), and one
``recall`` of its question (``as_of`` when the case has one), k = 10.

A hit is the expected memory when the expected text is in the hit's content or in one of the turns it stands
for (case-insensitive). Scores: top-1, top-3 and MRR@10 per kind and overall, for dev and for test apart.
``never_said`` cases (nothing answers) are not ranked here; ``bench/abstention.py`` (issue 37) scores them.

Baselines in the same run, over the same texts (the conversation's turns and the case's memories as they stand
at the read's time: retired ones out, an amend's new text from its time): flat BM25, dense (the same embedder),
their RRF, and that RRF with the newest first among near-duplicates (dense cosine >= 0.8: the newer of two
texts about one thing takes the better of their places). Progress goes to stderr, the JSON to stdout.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections import defaultdict
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import recall_metrics as rm  # noqa: E402
import scenario_cases  # noqa: E402
from common import emit, environment, progress  # noqa: E402
from recall import Bm25, Dense  # noqa: E402
from recall import Case as Docs  # noqa: E402

from worlddb_lite import StaticEmbedder, WorldDB  # noqa: E402
from worlddb_lite.types import Hit  # noqa: E402
from worlddb_lite.write.loaders import load  # noqa: E402

K = 10
NEAR = 0.8  # dense cosine at which two texts count as about one thing (the newest-first baseline)
SYSTEMS = ("worlddb", "bm25", "dense", "rrf", "rrf_newest")


def scope_of(case: scenario_cases.Case) -> str:
    return case.person.casefold()


def base_stores(cases: list[scenario_cases.Case], locomo: Path, folder: Path, embedder: StaticEmbedder) -> dict:
    """(conversation, scope) -> (store path, its turns as (id, text, time)): ingested into the person's scope."""
    wanted = {(c.conversation, scope_of(c)) for c in cases}
    conversations = {c.conversation_id: c for c in load(locomo, "locomo")}
    out: dict[tuple[str, str], tuple[Path, list[tuple[str, str, str]]]] = {}
    for conversation_id, scope in sorted(wanted):
        conversation = replace(conversations[conversation_id], scopes=[scope])
        path = folder / f"{conversation_id}-{scope}.db"
        started = time.perf_counter()
        with WorldDB(str(path), embedder=embedder) as db:
            ids = db.ingest(conversation)
            nodes = [db.read(i) for i in ids]
            turns = [(n.id, f"{n.name}: {n.content}" if n.name else str(n.content), n.valid_at) for n in nodes]
        out[(conversation_id, scope)] = (path, turns)
        progress(f"{conversation_id} into scope {scope}: {len(ids)} turns, {time.perf_counter() - started:.1f} s")
    return out


def case_texts(case: scenario_cases.Case, at: str | None) -> list[tuple[str, str, str]]:
    """Each memory's text at ``at`` (None: now): retired ones out, amended ones in their new words from the amend."""
    versions: dict[int, list[tuple[str, str | None]]] = {i: [(m.at, m.text)] for i, m in enumerate(case.memories)}
    for step in case.steps:
        versions[step.memory].append((step.at, step.text if step.op == "amend" else None))
    out = []
    for i, history in versions.items():
        current = [(when, text) for when, text in history if at is None or when <= at]
        if current and current[-1][1] is not None:
            when, text = current[-1]
            out.append((f"m{i}v{len(current)}", str(text), when))
    return out


def apply_case(db: WorldDB, case: scenario_cases.Case) -> None:
    """Write the case's memories and carry out its steps, each at its time."""
    scope, ids = scope_of(case), []
    for memory in case.memories:
        if memory.via == "write":
            ids.append(db.write(memory.text, scope=scope, valid_at=memory.at, speaker=memory.speaker))
        else:
            ids.append(
                db.add_turn(memory.text, scope=scope, session=memory.session, speaker=memory.speaker, at=memory.at)
            )
    for step in case.steps:
        if step.op == "retire":
            db.retire(ids[step.memory], at=step.at)
        else:
            ids[step.memory] = db.amend(ids[step.memory], str(step.text), valid_at=step.at)


def found(hit: Hit, expected: str) -> bool:
    want = expected.casefold()
    return any(want in str(n.content or "").casefold() for n in (hit.node, *hit.turns))


def rank_of(flags: list[bool]) -> int | None:
    return next((i + 1 for i, ok in enumerate(flags[:K]) if ok), None)


def newest_among_near(ranked: list[str], vectors: dict[str, np.ndarray], when: dict[str, str]) -> list[str]:
    """``ranked`` with each group of near-duplicates (cosine >= NEAR) re-ordered newest first in its places."""
    groups: list[list[int]] = []
    for i, doc in enumerate(ranked):
        for group in groups:
            if float(vectors[ranked[group[0]]] @ vectors[doc]) >= NEAR:
                group.append(i)
                break
        else:
            groups.append([i])
    out = list(ranked)
    for group in groups:
        newest = sorted((ranked[i] for i in group), key=lambda d: when[d], reverse=True)
        for place, doc in zip(group, newest, strict=True):
            out[place] = doc
    return out


def run(cases: list[scenario_cases.Case], locomo: Path) -> dict[str, Any]:
    embedder = StaticEmbedder()
    ranks: dict[str, list[tuple[scenario_cases.Case, int | None]]] = defaultdict(list)
    with tempfile.TemporaryDirectory(prefix="scenarios-") as tmp:
        folder = Path(tmp)
        bases = base_stores(cases, locomo, folder, embedder)
        for n, case in enumerate(cases, start=1):
            base, turns = bases[(case.conversation, scope_of(case))]
            copy = folder / "case.db"
            with WorldDB(str(base), embedder=embedder) as db:
                db.backup(copy, overwrite=True)
            with WorldDB(str(copy), embedder=embedder) as db:
                apply_case(db, case)
                hits = db.recall(case.question, scope=scope_of(case), as_of=case.as_of, k=K).hits
            ranks["worlddb"].append((case, rank_of([found(h, str(case.expected)) for h in hits])))
            docs = [(i, t, w) for i, t, w in turns if case.as_of is None or w <= case.as_of]
            docs += case_texts(case, case.as_of)
            hit = {i: str(case.expected).casefold() in t.casefold() for i, t, _ in docs}
            flat = Docs(conversation=None, docs=[(i, t) for i, t, _ in docs], session_of={}, questions=[])  # type: ignore[arg-type]
            bm25, dense = Bm25(), Dense(embedder)
            bm25.index(flat)
            dense.index(flat)
            b, d = bm25.query(case.question, 50), dense.query(case.question, 50)
            fused = [str(x) for x in rm.rrf([b, d], 50)]
            vectors = dict(zip((i for i, _, _ in docs), dense.matrix, strict=True))
            newest = newest_among_near(fused, vectors, {i: w for i, _, w in docs})
            for name, ranked in (("bm25", b), ("dense", d), ("rrf", fused), ("rrf_newest", newest)):
                ranks[name].append((case, rank_of([hit[x] for x in ranked])))
            bm25.close()
            dense.close()
            if n % 20 == 0:
                progress(f"{n}/{len(cases)} cases")
    return {system: report(rows) for system, rows in ranks.items()}


def scores(ranks: list[int | None]) -> dict[str, float]:
    n = len(ranks)
    return {
        "n": n,
        "top1": round(sum(r == 1 for r in ranks) / n, 4) if n else 0.0,
        "top3": round(sum(r is not None and r <= 3 for r in ranks) / n, 4) if n else 0.0,
        "mrr@10": round(sum(1 / r for r in ranks if r is not None) / n, 4) if n else 0.0,
    }


def report(rows: list[tuple[scenario_cases.Case, int | None]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for split in sorted({case.split for case, _ in rows}):
        mine = [(case, r) for case, r in rows if case.split == split]
        kinds = sorted({case.kind for case, _ in mine})
        out[split] = {
            "overall": scores([r for _, r in mine]),
            "per_kind": {kind: scores([r for case, r in mine if case.kind == kind]) for kind in kinds},
        }
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="The blind scenario corpus: top-1, top-3, MRR@10 per kind")
    parser.add_argument("--cases", default=str(scenario_cases.DEFAULT_PATH))
    parser.add_argument("--locomo", default=str(scenario_cases.LOCOMO_PATH))
    parser.add_argument("--split", default="dev,test", help="which splits to run (dev, test or both)")
    parser.add_argument("--kinds", help="only these kinds (comma list)")
    parser.add_argument("--limit", type=int, help="only the first N cases (a smoke run)")
    parser.add_argument("--json", help="also write the result to this file")
    args = parser.parse_args(argv)
    locomo = Path(args.locomo)
    if not locomo.exists():
        print(f"LoCoMo not found at {locomo}; give --locomo PATH", file=sys.stderr)
        return 2
    splits, kinds = set(args.split.split(",")), set(args.kinds.split(",")) if args.kinds else None
    cases = [
        c
        for c in scenario_cases.load(args.cases)
        if c.expected is not None and c.split in splits and (kinds is None or c.kind in kinds)
    ][: args.limit]
    started = time.perf_counter()
    systems = run(cases, locomo)
    result = {
        "benchmark": "scenarios",
        "cases": len(cases),
        "k": K,
        "systems": systems,
        "seconds": round(time.perf_counter() - started, 1),
        "environment": environment(),
    }
    emit(result, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
