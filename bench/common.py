"""Shared helpers for the benchmark scripts: environment facts, percentiles, output."""

from __future__ import annotations

import json
import os
import platform
import resource
import sys
from pathlib import Path
from typing import Any

import apsw
import numpy as np
import sqlite_vec


def environment() -> dict[str, Any]:
    """Versions and machine facts every result carries."""
    return {
        "python": sys.version.split()[0],
        "sqlite": apsw.sqlite_lib_version(),
        "apsw": apsw.apsw_version(),
        "sqlite_vec": getattr(sqlite_vec, "__version__", "?"),
        "numpy": np.__version__,
        "machine": platform.machine(),
        "cpus": os.cpu_count(),
    }


def percentiles(samples_s: list[float]) -> dict[str, float]:
    """P50/P95/P99 and mean of durations given in seconds, reported in milliseconds."""
    arr = np.asarray(samples_s) * 1000.0
    return {
        "p50_ms": round(float(np.percentile(arr, 50)), 4),
        "p95_ms": round(float(np.percentile(arr, 95)), 4),
        "p99_ms": round(float(np.percentile(arr, 99)), 4),
        "mean_ms": round(float(arr.mean()), 4),
        "n": len(samples_s),
    }


def peak_rss_mb() -> float:
    """Peak resident set size of this process (Linux reports KiB)."""
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0, 1)


def store_bytes(path: str) -> int:
    """Size of the store file plus its WAL."""
    return sum(Path(path + suffix).stat().st_size for suffix in ("", "-wal") if Path(path + suffix).exists())


def remove_store(path: str) -> None:
    """Delete a store file and its WAL/SHM."""
    for suffix in ("", "-wal", "-shm"):
        Path(path + suffix).unlink(missing_ok=True)


def emit(result: dict[str, Any], out: str | None) -> None:
    """Print the JSON result and optionally write it to a file."""
    text = json.dumps(result, indent=2)
    print(text)
    if out:
        Path(out).parent.mkdir(parents=True, exist_ok=True)
        Path(out).write_text(text + "\n")


def progress(message: str) -> None:
    """A progress line on stderr (stdout carries the JSON)."""
    print(message, file=sys.stderr, flush=True)
