"""Summary-first reads: one Summary per topic against every memory of the topic, the detail still reachable.

    python bench/consolidate.py [--facts 10000] [--topics 100] [--runs 7] [--seed 7] [--json OUT]

A synthetic store in a temp dir: ``--topics`` worlds (type Topic), ``--facts`` notes spread over
them round-robin (deterministic text from a seeded RNG; ``write_many``, one call per topic, so
verbatim with no extractor), and one Summary per topic written by this script (``write`` with
``type="Summary"``, then ``derived_from`` from the summary to each member with ``link_many``, in one
``batch`` per topic): what the consolidator will make, made here so the read side can be measured
apart from it.

For each topic, two declarative queries from the same start set (the topic's code word through
FTS5, the topic's notes, as many as it holds, ``world`` = the topic):

* ``summary_first``: ``QuerySpec(..., pipeline=(PreferSummaries(),))``: the members collapse to
  their Summary;
* ``full_detail``: the same spec without it: every member.

After one untimed pass (what each returns), timed ``--runs`` times over every topic, the two
alternating (which goes first flips each topic and run); reported per query: the median over runs
of each run's mean, and the percentiles of every call. Nodes returned and tokens
(``retrieval/context.py``'s ``estimate_tokens`` of each node's content, summed) are per query,
averaged over topics. ``detail_reachable``: for every topic, the ``derived_from`` neighbours of the
Summary the summary-first query returned equal the topic's members
(``WorldDB.neighbours``, timed too). Progress goes to stderr, the JSON to stdout (and ``--json``).
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import emit, environment, peak_rss_mb, percentiles, progress, store_bytes  # noqa: E402

from worlddb_lite import PreferSummaries, QuerySpec, WorldDB  # noqa: E402
from worlddb_lite.retrieval.context import estimate_tokens  # noqa: E402

SYLLABLES = "ka lo mi ra ven tu sol dri an el qua bor zen fi gal oth pru ix".split()
PEOPLE = "Ana Ben Chloe Dev Elif Farid Greta Hugo Ines Jonas".split()
VERBS = "fixed bought painted sold visited moved cleaned borrowed measured planted".split()
THINGS = "bicycle garden piano kettle roof window bookshelf lamp boat fence".split()
PLACES = "Lisbon Porto Braga Faro Coimbra Evora Sintra Aveiro".split()


def code_words(rng: random.Random, n: int) -> list[str]:
    """``n`` distinct made-up words, one per topic: each topic's notes, and only they, hold its word."""
    words: dict[str, None] = {}
    while len(words) < n:
        words["".join(rng.choice(SYLLABLES) for _ in range(3)) + "ia"] = None
    return list(words)


def note(rng: random.Random, word: str, i: int) -> str:
    """One deterministic note about the topic called ``word``."""
    return (
        f"{rng.choice(PEOPLE)} {rng.choice(VERBS)} the {rng.choice(THINGS)} for the {word} project "
        f"in {rng.choice(PLACES)} on 2024-{1 + i % 12:02d}-{1 + i % 28:02d} (note {i})."
    )


def summary(word: str, notes: list[str]) -> str:
    """The topic's Summary: what a consolidator might say of its notes, in one paragraph."""
    people = Counter(n.split()[0] for n in notes).most_common(3)
    things = Counter(t for n in notes for t in THINGS if f" {t} " in n).most_common(3)
    return (
        f"Summary of the {word} project ({len(notes)} notes): mostly "
        + ", ".join(p for p, _ in people)
        + "; about the "
        + ", ".join(t for t, _ in things)
        + "."
    )


def build(db: WorldDB, facts: int, topics: int, seed: int) -> tuple[list[dict[str, Any]], dict[str, float]]:
    """The synthetic store; per topic its world, code word, member ids and Summary id; build timings."""
    rng = random.Random(seed)
    words = code_words(rng, topics)
    texts: list[list[str]] = [[] for _ in range(topics)]
    for i in range(facts):
        texts[i % topics].append(note(rng, words[i % topics], i))
    out: list[dict[str, Any]] = []
    write_s = summary_s = 0.0
    for t, word in enumerate(words):
        world = db.world(f"topic {t:04d} {word}", type="Topic")
        t0 = time.perf_counter()
        members = db.write_many([{"text": text, "world": world} for text in texts[t]]) if texts[t] else []
        write_s += time.perf_counter() - t0
        t0 = time.perf_counter()
        with db.batch():
            made = db.write(summary(word, texts[t]), type="Summary", world=world, extractor=None)
            db.link_many([(made, member, "derived_from") for member in members])
        summary_s += time.perf_counter() - t0
        out.append({"world": world, "word": word, "members": members, "summary": made})
        if (t + 1) % max(1, topics // 10) == 0:
            progress(f"consolidate: {t + 1}/{topics} topics written")
    return out, {"write_many_s": round(write_s, 3), "summaries_s": round(summary_s, 3)}


def spec(topic: dict[str, Any], summaries_first: bool) -> QuerySpec:
    """The topic's notes from its code word, collapsed to their Summary or not."""
    return QuerySpec(
        text=topic["word"],
        world=topic["world"],
        k=max(1, len(topic["members"])),
        types=("Memory",),
        pipeline=(PreferSummaries(),) if summaries_first else (),
    )


def measure(db: WorldDB, topics: list[dict[str, Any]], runs: int) -> dict[str, Any]:
    """Both queries over every topic, ``runs`` times, alternating; then the reachability check."""
    modes = {"summary_first": True, "full_detail": False}
    seconds: dict[str, list[list[float]]] = {m: [] for m in modes}
    shape: dict[str, dict[str, list[int]]] = {m: {"nodes": [], "tokens": []} for m in modes}
    returned: dict[int, list[str]] = {}
    for n, topic in enumerate(topics):  # an untimed pass first: what each query returns, and warm caches
        for m in modes:
            got = db.query(spec(topic, modes[m]))
            shape[m]["nodes"].append(len(got.nodes))
            shape[m]["tokens"].append(sum(estimate_tokens(node.content or "") for node in got.nodes))
            if modes[m]:
                returned[n] = [node.id for node in got.nodes]
    for run in range(runs):
        for m in modes:
            seconds[m].append([])
        for n, topic in enumerate(topics):
            order = list(modes) if (run + n) % 2 == 0 else list(reversed(modes))
            for m in order:
                t0 = time.perf_counter()
                db.query(spec(topic, modes[m]))
                seconds[m][-1].append(time.perf_counter() - t0)
        progress(f"consolidate: run {run + 1}/{runs} done")
    queries = {
        m: {
            "nodes_mean": round(statistics.fmean(shape[m]["nodes"]), 2),
            "tokens_mean": round(statistics.fmean(shape[m]["tokens"]), 1),
            "ms_median_of_runs": round(statistics.median(statistics.fmean(r) for r in seconds[m]) * 1000, 4),
            "per_run_mean_ms": [round(statistics.fmean(r) * 1000, 4) for r in seconds[m]],
            "latency": percentiles([s for r in seconds[m] for s in r]),
        }
        for m in modes
    }
    mismatched: list[str] = []
    hop_s: list[float] = []
    for n, topic in enumerate(topics):
        if returned[n] != [topic["summary"]]:
            mismatched.append(f"{topic['word']}: the summary-first query returned {len(returned[n])} nodes")
            continue
        t0 = time.perf_counter()
        hop = db.neighbours(topic["summary"], types=["derived_from"], direction="out")
        hop_s.append(time.perf_counter() - t0)
        if {node.id for node in hop.nodes[1:]} != set(topic["members"]):
            mismatched.append(f"{topic['word']}: derived_from neighbours differ from the topic's members")
    return {
        **queries,
        "tokens_ratio": round(
            queries["full_detail"]["tokens_mean"] / max(queries["summary_first"]["tokens_mean"], 1), 1
        )
        if topics
        else None,
        "speedup": round(
            queries["full_detail"]["ms_median_of_runs"] / max(queries["summary_first"]["ms_median_of_runs"], 1e-9), 2
        ),
        "detail_reachable": {
            "topics_checked": len(topics),
            "all_equal": not mismatched,
            "mismatches": mismatched[:10],
            "neighbours_latency": percentiles(hop_s) if hop_s else None,
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--facts", type=int, default=10_000, help="notes in the store, spread over the topics")
    parser.add_argument("--topics", type=int, default=100, help="topics: a world and a Summary each")
    parser.add_argument("--runs", type=int, default=7, help="timed passes over every topic (median taken)")
    parser.add_argument("--seed", type=int, default=7, help="the RNG seed of the notes' text")
    parser.add_argument("--json", help="also write the result to this file")
    args = parser.parse_args()
    if args.topics < 1 or args.facts < args.topics or args.runs < 1:
        raise SystemExit("--topics and --runs must be >= 1, and --facts at least --topics (a topic needs a note)")
    with tempfile.TemporaryDirectory(prefix="consolidate-bench-") as tmp:
        path = str(Path(tmp) / "store.db")
        db = WorldDB(path)
        try:
            progress(f"consolidate: writing {args.facts:,} notes over {args.topics} topics…")
            t0 = time.perf_counter()
            topics, timings = build(db, args.facts, args.topics, args.seed)
            build_s = time.perf_counter() - t0
            measured = measure(db, topics, args.runs)
        finally:
            db.close()
        size = store_bytes(path)
    summary_first, full = measured["summary_first"], measured["full_detail"]
    progress(
        f"summary_first: {summary_first['nodes_mean']} nodes, {summary_first['tokens_mean']} tokens, "
        f"{summary_first['ms_median_of_runs']} ms | full_detail: {full['nodes_mean']} nodes, "
        f"{full['tokens_mean']} tokens, {full['ms_median_of_runs']} ms | detail reachable: "
        f"{measured['detail_reachable']['all_equal']}"
    )
    emit(
        {
            "bench": "consolidate",
            "params": {"facts": args.facts, "topics": args.topics, "runs": args.runs, "seed": args.seed},
            "build": {
                "s": round(build_s, 3),
                **timings,
                "summaries": len(topics),
                "derived_from_edges": sum(len(t["members"]) for t in topics),
                "file_bytes": size,
            },
            "queries": measured,
            "peak_rss_mb": peak_rss_mb(),
            "env": environment(),
        },
        args.json,
    )


if __name__ == "__main__":
    main()
