"""Forged-file fuzz: N mutants of real change sets and exports, each refused whole or applied cleanly.

    python bench/fuzz_files.py --count 2000 --seed 1 [--family time] [--target changes] [--json bench/out/ff.json]

The harness is tests/hostile_files.py (tests/test_hostile_files.py runs it under hypothesis): each mutant is a
real file from a sender and its replica, altered in one field (times, numbers, wrong types, ids, forged edges
and proposals, states against their bodies, deep nesting, megabyte strings, dropped fields, duplicates, kinds,
order, header) and sealed again with a correct end line. A mutant is ``refused`` (a WorldDBError, the receiver
unchanged), ``applied`` (then a deep verify, a write, recall, search, list_memories and a converging sync all
work) or a failure. Unlike the tests this does not stop at the first failure: it counts them all, by class
(family, field, stage, exception with numbers and ids blurred), and prints the first few in full.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the repository, for tests.hostile_files
from common import emit, environment, peak_rss_mb, progress  # noqa: E402

from tests import hostile_files as harness  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Forged change sets and exports: refused whole or applied cleanly")
    parser.add_argument("--count", type=int, default=1000, help="mutants to try")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--family", choices=sorted(harness.FAMILIES), help="only this mutation family")
    parser.add_argument("--target", choices=harness.TARGETS, help="only this kind of file and receiver")
    parser.add_argument("--show", type=int, default=5, help="failures to print in full")
    parser.add_argument("--json", dest="out")
    args = parser.parse_args(argv)

    rng = random.Random(args.seed)
    draw = harness.Draw.from_random(rng)
    started = time.perf_counter()
    harness.template()
    progress(f"template built in {time.perf_counter() - started:.1f} s; trying {args.count:,} mutants")
    tally = harness.TALLY  # run_mutant counts every verdict there
    for i in range(1, args.count + 1):
        harness.run_mutant(harness.draw_mutation(draw, args.family, args.target))
        if i % 100 == 0 or i == args.count:
            rate = i / (time.perf_counter() - started)
            progress(f"  {i:,}/{args.count:,} ({rate:,.0f}/s): {tally.summary()}")
    classes = tally.classes()
    example: dict[str, str] = {}
    for key, text in tally.failures:
        example.setdefault(key, text[:300])
    result = {
        "benchmark": "fuzz_files",
        "seed": args.seed,
        "family": args.family,
        "target": args.target,
        "tried": tally.tried,
        "refused": tally.refused,
        "applied_ok": tally.applied_ok,
        "diverged": len(tally.diverged),
        "first_diverged": tally.diverged[:5],
        "failures": len(tally.failures),
        "failure_classes": [{"count": n, "class": key, "example": example[key]} for key, n in classes.most_common()],
        "first_failures": [text[:400] for _, text in tally.failures[: args.show]],
        "outcomes_by_family": dict(sorted(tally.by_family.items())),
        "seconds": round(time.perf_counter() - started, 1),
        "peak_rss_mb": peak_rss_mb(),
        "environment": environment(),
    }
    emit(result, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
