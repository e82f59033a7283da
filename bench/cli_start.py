"""How long a `worlddb` command takes from the shell: start, import, work, exit.

    python bench/cli_start.py [--runs 10] [--compare OTHER_CHECKOUT] [--json OUT]

Builds a store of five notes in a temporary folder (through the public API), then runs each
command as a fresh process, ``--runs`` times, the commands taking turns so that a noisy moment
hits them all: ``worlddb --version``, ``worlddb --help``, ``worlddb recall DB "..."`` and
``worlddb stats DB``, and ``python -c pass`` for the floor. Prints the median and P90 of each
beside its target (issue 38: 150 ms for --version and --help, 500 ms for a command on a small
store). The CLI run is this checkout's (``PYTHONPATH``), called as the ``worlddb`` script calls it;
``--compare`` times another checkout's in alternation with it (e.g. a `git worktree` of an older
commit), for before/after figures on one machine. Each command runs once untimed first, so the
bytecode caches exist, as they do after an install (``PYTHONDONTWRITEBYTECODE`` is unset for it).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # this checkout's package, whatever is installed

from common import emit, environment, progress  # noqa: E402

from worlddb_lite import WorldDB  # noqa: E402

# what the console script `worlddb` runs (setuptools' wrapper: import main, exit with its code)
SCRIPT = "import sys; from worlddb_lite.cli import main; sys.exit(main())"
TARGETS_MS = {"version": 150, "help": 150, "recall": 500, "stats": 500}
NOTES = (
    "Ana lives in Lisbon",
    "Ana's sister Emma loves pottery",
    "Ana's dentist is Dr Sato on Pine Street",
    "Ana runs on Sundays",
    "Ana drinks green tea every morning",
)


def build_store(path: str) -> None:
    """A store of five notes in one scope, written as an assistant would."""
    with WorldDB(path) as db:
        for note in NOTES:
            db.write(note, scope="ana")


def commands(store: str) -> dict[str, list[str]]:
    """Name -> arguments of each command timed (``pass`` is the interpreter alone)."""
    return {
        "pass": ["-c", "pass"],
        "version": ["-c", SCRIPT, "--version"],
        "help": ["-c", SCRIPT, "--help"],
        "recall": ["-c", SCRIPT, "recall", store, "where does Ana live?"],
        "stats": ["-c", SCRIPT, "stats", store],
    }


def child_env(checkout: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(checkout), env.get("PYTHONPATH")) if p)
    return env


def run_once(arguments: list[str], env: dict[str, str], cwd: str) -> float:
    """Seconds of one run of ``python ARGUMENTS`` in ``cwd``, which must succeed.

    ``cwd`` is not a checkout: ``python -c`` imports from the current folder first.
    """
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, *arguments], env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"python {' '.join(arguments)} failed ({done.returncode}): {done.stderr[-2000:]}")
    return seconds


def summary(samples: list[float], target_ms: float | None) -> dict[str, object]:
    ms = [s * 1000 for s in samples]
    median = statistics.median(ms)
    out: dict[str, object] = {
        "median_ms": round(median, 1),
        "p90_ms": round(float(np.percentile(ms, 90)), 1),
        "min_ms": round(min(ms), 1),
        "n": len(ms),
    }
    if target_ms is not None:
        out["target_ms"] = target_ms
        out["met"] = median <= target_ms
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=10, help="timed runs of each command (default 10)")
    parser.add_argument("--only", action="append", choices=["pass", *TARGETS_MS], help="time only this command")
    parser.add_argument("--compare", metavar="CHECKOUT", help="also time this checkout's CLI, in alternation")
    parser.add_argument("--json", help="also write the result to this file")
    args = parser.parse_args()

    checkouts = {"this": ROOT}
    if args.compare:
        checkouts["compare"] = Path(args.compare).resolve()
    with tempfile.TemporaryDirectory() as folder:
        store = str(Path(folder) / "five.db")
        build_store(store)
        chosen = {k: v for k, v in commands(store).items() if not args.only or k in args.only or k == "pass"}
        envs = {label: child_env(path) for label, path in checkouts.items()}
        samples: dict[tuple[str, str], list[float]] = {}
        for env in envs.values():  # untimed: writes the bytecode caches, loads the files into the page cache
            for arguments in chosen.values():
                run_once(arguments, env, folder)
        for turn in range(args.runs):
            progress(f"run {turn + 1}/{args.runs}")
            for name, arguments in chosen.items():
                for label, env in envs.items():
                    samples.setdefault((label, name), []).append(run_once(arguments, env, folder))

    results = {
        label: {name: summary(samples[label, name], TARGETS_MS.get(name)) for name in chosen} for label in checkouts
    }
    result = {
        "benchmark": "cli_start",
        "env": environment(),
        "params": {
            "runs": args.runs,
            "notes": len(NOTES),
            "checkouts": {label: str(path) for label, path in checkouts.items()},
            "dont_write_bytecode_in_caller": bool(os.environ.get("PYTHONDONTWRITEBYTECODE")),
        },
        "targets_ms": TARGETS_MS,
        "results": results,
    }
    for label, per in results.items():
        for name, row in per.items():
            met = "met" if row.get("met") else "MISSED"
            target = f"  target {row['target_ms']} ms: {met}" if "target_ms" in row else ""
            progress(f"{label:<8} {name:<8} median {row['median_ms']:7.1f} ms  P90 {row['p90_ms']:7.1f} ms{target}")
    emit(result, args.json)


if __name__ == "__main__":
    main()
