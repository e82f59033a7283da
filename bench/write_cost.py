"""What one write costs on the assistant's path, as a scope grows: a note through System 2, and a live turn.

    python bench/write_cost.py [--sizes 1000,10000,100000] [--writes 200] [--corpus locomo|synthetic] [--json OUT]

One store with the bundled embedder. The scope is filled to each size with memories (``write_many``,
texts cycled from the corpus with a counter, so each is new), then ``--writes`` timed calls of each
kind, each its own transaction:
* ``write``: ``db.write(text, extractor=RuleExtractor())``, a person's first-person sentence (System 1 and 2);
* ``write_verbatim``: the same text stored alone (System 1);
* ``add_turn``: ``db.add_turn`` into one live session of the scope (windows, rewritten neighbours, System 2).
The corpus is LoCoMo's turns (``../shared/data``) or, with ``--corpus synthetic``, generated sentences;
``--corpus alike`` is the bad input of issue 36: every memory about one thing and telling of a change,
so each write finds the scope's notes close to it and may link to them (write/updates.py).
Reported per size: P50/P95/P99 ms of each kind (``common.percentiles``), file bytes, peak RSS.
"""

from __future__ import annotations

import argparse
import itertools
import json
import random
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import emit, environment, peak_rss_mb, percentiles, progress, store_bytes  # noqa: E402
from recall import DEFAULT_PATHS, source_digest  # noqa: E402

from worlddb_lite import RuleExtractor, WorldDB  # noqa: E402

SCOPE = "me"
FILL_BATCH = 5_000
PEOPLE = ["Emma", "Sam", "Ana", "Tom", "Lea"]
PLACES = ["Porto", "Lisbon", "Austin", "Denver", "Berlin", "Osaka"]
THINGS = ["pottery", "running", "chess", "the violin", "baking bread", "hiking"]


def synthetic(seed: int) -> Iterator[str]:
    """First-person sentences of the kinds the extractor reads (places, people, likes, budgets)."""
    rng = random.Random(seed)
    shapes = [
        lambda: f"I moved to {rng.choice(PLACES)} last month",
        lambda: f"My friend {rng.choice(PEOPLE)} loves {rng.choice(THINGS)}",
        lambda: f"I started {rng.choice(THINGS)} with {rng.choice(PEOPLE)}",
        lambda: f"My budget for the trip is ${rng.randint(100, 2000)}",
        lambda: f"We talked about {rng.choice(THINGS)} and {rng.choice(THINGS)} for an hour",
    ]
    while True:
        yield rng.choice(shapes)()


def alike(seed: int) -> Iterator[str]:
    """Sentences about one thing, each telling of a change: every note is near every other."""
    rng = random.Random(seed)
    while True:
        yield f"I switched the tomatoes in the garden to watering every {rng.randint(1, 9)} days"


def locomo(path: Path) -> Iterator[str]:
    """LoCoMo's turn texts, in order, again and again."""
    texts = [
        str(turn["text"])
        for sample in json.loads(path.read_text("utf-8"))
        for key, turns in sample["conversation"].items()
        if key.startswith("session_") and isinstance(turns, list)
        for turn in turns
        if str(turn.get("text", "")).strip()
    ]
    return itertools.cycle(texts)


def run(sizes: list[int], writes: int, corpus: Iterator[str]) -> dict[str, Any]:
    counter = itertools.count()

    def fresh() -> str:  # a text the store has not seen (content addressing would return the old node)
        return f"{next(corpus)} ({next(counter)})"

    out: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="write-cost-") as folder:
        path = str(Path(folder) / "store.db")
        with WorldDB(path) as db:
            held = 0
            for size in sizes:
                progress(f"filling the scope to {size:,} memories")
                while held < size:
                    count = min(FILL_BATCH, size - held)
                    db.write_many([{"text": fresh(), "scope": SCOPE} for _ in range(count)])
                    held += count
                timings: dict[str, list[float]] = {"write": [], "write_verbatim": [], "add_turn": []}
                extractor = RuleExtractor()
                for _ in range(writes):
                    for kind in timings:
                        text = fresh()
                        started = time.perf_counter()
                        if kind == "write":
                            db.write(text, scope=SCOPE, extractor=extractor)
                        elif kind == "write_verbatim":
                            db.write(text, scope=SCOPE, extractor=None)
                        else:
                            db.add_turn(text, scope=SCOPE, session=f"live-{size}", speaker=SCOPE, extractor=extractor)
                        timings[kind].append(time.perf_counter() - started)
                held += writes * len(timings)
                out[str(size)] = {kind: percentiles(samples) for kind, samples in timings.items()}
                progress(f"{size:,}: " + ", ".join(f"{k} P95 {v['p95_ms']} ms" for k, v in out[str(size)].items()))
            file_bytes = store_bytes(path)
    return {
        "benchmark": "write_cost",
        "code": {"worlddb_lite_sha256_16": source_digest(), "finished": time.strftime("%Y-%m-%dT%H:%M:%S%z")},
        "params": {"sizes": sizes, "writes_per_kind": writes},
        "env": environment(),
        "per_size": out,
        "file_bytes": file_bytes,
        "peak_rss_mb": peak_rss_mb(),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="1000,10000,100000", help="scope sizes, ascending")
    parser.add_argument("--writes", type=int, default=200, help="timed calls of each kind per size")
    parser.add_argument("--corpus", choices=("locomo", "synthetic", "alike"), default="locomo")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--json", help="also write the result to this file")
    args = parser.parse_args()
    try:
        sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    except ValueError:
        sizes = []
    if not sizes or sizes != sorted(sizes) or min(sizes) < 1 or args.writes < 1:
        raise SystemExit("--sizes takes ascending whole numbers >= 1, --writes a whole number >= 1")
    if args.corpus == "locomo":
        if not DEFAULT_PATHS["locomo"].is_file():
            raise SystemExit(f"{DEFAULT_PATHS['locomo']} does not exist; use --corpus synthetic")
        corpus = locomo(DEFAULT_PATHS["locomo"])
    elif args.corpus == "alike":
        corpus = alike(args.seed)
    else:
        corpus = synthetic(args.seed)
    emit(run(sizes, args.writes, corpus), args.json)


if __name__ == "__main__":
    main()
