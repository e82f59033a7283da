"""Purge at scale: erasing a whole scope, and one turn among many, as the store grows.

    python bench/purge.py [--sizes 1000,4000,16000] [--json OUT]

For each size N, a fresh store gets N memories in one scope (``write_many``, the bundled
embedder) and a conversation of N turns in another (``conversation.ingest``, sessions of 25 with
the context bridge on, so neighbours carry each other's words), then times:

* ``scope_s``: ``db.purge(<the scope>)``, which erases its N memories (and vacuums the file);
* ``turn_s``: ``db.purge(<a turn in the middle>)`` among the N turns.

A purge looks for the siblings that quote the purged text once per parent (``purge._quoting``):
if its time grows with N squared again, the largest size shows it.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import emit, environment, progress  # noqa: E402

from worlddb_lite import WorldDB  # noqa: E402
from worlddb_lite.write.conversation import ConversationIn, SessionIn, TurnIn  # noqa: E402

TOPICS = "gardening tea Lisbon piano chess coffee cycling rivers trains letters recipes museums".split()


def one_size(folder: Path, size: int) -> dict[str, Any]:
    db = WorldDB(str(folder / f"purge-{size}.db"))
    try:
        db.write_many(
            [
                {"text": f"note {i}: Ana talked about {TOPICS[i % len(TOPICS)]} with Ben", "scope": "notes"}
                for i in range(size)
            ]
        )
        sessions = [
            SessionIn(
                str(s),
                f"2024-01-{1 + s % 28:02d}",
                [
                    TurnIn(
                        f"In part {s}.{t} she told me about {TOPICS[(s + t) % len(TOPICS)]}",
                        speaker="Ana" if t % 2 else "Ben",
                    )
                    for t in range(25)
                ],
            )
            for s in range(max(1, size // 25))
        ]
        turns = db.ingest(ConversationIn("talk", ["talk"], sessions), bridge=True)
        t0 = time.perf_counter()
        scope = db.purge(db.scope("notes"))
        scope_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        db.purge(turns[len(turns) // 2])
        turn_s = time.perf_counter() - t0
        return {
            "memories": size,
            "turns": len(turns),
            "scope_purged": len(scope["purged"]),
            "scope_s": round(scope_s, 3),
            "turn_s": round(turn_s, 3),
        }
    finally:
        db.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="1000,4000,16000", help="memories in the purged scope (comma-separated)")
    parser.add_argument("--json", help="also write the result to this file")
    args = parser.parse_args()
    try:
        sizes = [int(x) for x in args.sizes.split(",") if x.strip()]
    except ValueError:
        raise SystemExit(f"--sizes takes whole numbers separated by commas, got {args.sizes!r}") from None
    if not sizes or min(sizes) < 1:
        raise SystemExit("--sizes needs at least one size >= 1")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for size in sizes:
            progress(f"purge: {size:,} memories and turns…")
            rows.append(one_size(Path(tmp), size))
    emit({"sizes": rows, "environment": environment()}, args.json)


if __name__ == "__main__":
    main()
