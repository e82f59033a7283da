"""Retention's bound: a process's memory as the store grows, with and without the hot tier capped.

For each size, a store of that many turns (``bench/recall_scale.py``'s, cached under ``--store-dir``)
is measured twice by a fresh process that opens it and answers ``--queries`` recalls
(``bench/footprint.py``'s child): once with every memory hot, once after
``set_retention(max_hot_vectors=--cap)`` and ``consolidate(only="retention")``. It reports each
process's peak RSS, the rows its vector index holds, recall latency, and how long the retention step
took. Expected: without the cap the index and the RSS grow with the store; with it, the index stays at
the cap and the RSS grows only with what SQLite reads.

    python bench/retention.py --sizes 20000,80000 --cap 20000 --json bench/out/retention.json
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from common import emit, environment, progress  # noqa: E402
from footprint import recall_run, store_queries  # noqa: E402
from recall_scale import build  # noqa: E402

from worlddb_lite import WorldDB  # noqa: E402


def tiered(path: Path, cap: int | None) -> dict[str, Any]:
    """Set the cap (None: none) and run the retention step; its seconds and the cold count."""
    with WorldDB(str(path), create=False) as db:
        db.set_retention(max_hot_vectors=cap)
        started = time.perf_counter()
        moved = db.consolidate(only="retention")["retention"]
        seconds = time.perf_counter() - started
        return {"cap": cap, "moved": moved, "retention_s": round(seconds, 3), **db.retention()}


def measure(path: Path, queries: list[str], cap: int | None) -> dict[str, Any]:
    tier = tiered(path, cap)
    ran = recall_run(path, queries, None)
    return {
        "tier": tier,
        "peak_rss_mb": ran["peak_rss_mb"],
        "index_rows": (ran.get("ivf") or {}).get("rows"),
        "recall_ms": {k: ran["latency_after_first"][k] for k in ("p50_ms", "p95_ms")},
        "first_recall_s": ran["first_recall_s"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="20000,80000", help="store sizes in turns, comma-separated")
    parser.add_argument("--cap", type=int, default=20_000, help="max_hot_vectors for the capped runs")
    parser.add_argument("--queries", type=int, default=100, help="recalls per process")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--store-dir", default="bench/out/retention", help="where the stores are built and kept")
    parser.add_argument("--json", help="write the result here too")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    folder = Path(args.store_dir)
    folder.mkdir(parents=True, exist_ok=True)
    out: dict[str, Any] = {"params": vars(args), "sizes": {}}
    for size in sizes:
        path = folder / f"retention-{size}-{args.seed}.db"
        if not path.exists():
            progress(f"building {size:,} turns into {path}")
            build(path, size, args.seed)
        WorldDB(str(path), create=False).close()  # a store of an older schema is lifted before it is read raw
        queries = store_queries(path, args.queries, args.seed)
        progress(f"{size:,}: every memory hot")
        hot = measure(path, queries, None)
        progress(f"{size:,}: at most {args.cap:,} hot")
        capped = measure(path, queries, args.cap)
        out["sizes"][str(size)] = {"all_hot": hot, "capped": capped}
        progress(
            f"{size:,}: peak RSS {hot['peak_rss_mb']} MB with {hot['index_rows']:,} rows in the index, "
            f"{capped['peak_rss_mb']} MB with {capped['index_rows']:,}"
        )
    out["env"] = environment()
    emit(out, args.json)


if __name__ == "__main__":
    main()
