"""How fast the bundled static embedder loads and embeds on this machine.

    python bench/embed.py [--json OUT]

Prints JSON: the model's load time (import + weights, measured in a fresh process, best of
three), sentences/s when embedding the LoCoMo turns in one batch and one at a time (the
latency a single ``write`` pays), and the model's size on disk. Texts are every turn of the
10 LoCoMo conversations in ``../shared/data``; without that file, a fixed synthetic corpus.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
from common import emit, environment, percentiles, progress

from worlddb_lite.models.embed import StaticEmbedder, bundled_model_path

LOCOMO = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "locomo" / "locomo10.json"
LOAD_SNIPPET = (
    "import time; t = time.perf_counter(); from worlddb_lite.models.embed import StaticEmbedder; "
    "StaticEmbedder().embed(['warm up']); print(time.perf_counter() - t)"
)


def corpus() -> tuple[list[str], str]:
    """The LoCoMo turns (or a synthetic stand-in) and where they came from."""
    if LOCOMO.is_file():
        samples = json.loads(LOCOMO.read_text("utf-8"))
        texts = [
            turn["text"]
            for s in samples
            for key, turns in s["conversation"].items()
            if key.startswith("session_") and isinstance(turns, list)
            for turn in turns
            if turn.get("text")
        ]
        return texts, "locomo10 turns"
    rng = np.random.default_rng(0)
    words = "memory porto sister dog river flight hotel job manager moved started likes coffee week".split()
    return [" ".join(rng.choice(words, size=12)) for _ in range(5000)], "synthetic"


def load_seconds(runs_wanted: int) -> float:
    """Cold load: a fresh interpreter imports the package and embeds one text; best of several."""
    runs = []
    for _ in range(runs_wanted):
        done = subprocess.run([sys.executable, "-c", LOAD_SNIPPET], capture_output=True, text=True, check=True)
        runs.append(float(done.stdout.strip()))
    return min(runs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--limit", type=int, default=0, help="embed at most this many texts (0: all)")
    parser.add_argument("--load-runs", type=int, default=3, help="fresh processes timed for the load (best kept)")
    parser.add_argument("--json", help="also write the result to this file")
    args = parser.parse_args()

    texts, source = corpus()
    if args.limit:
        texts = texts[: args.limit]
    progress(f"{len(texts):,} texts from {source}; measuring cold load…")
    cold = load_seconds(args.load_runs)
    model = StaticEmbedder()
    model.embed(["warm up"])
    started = time.perf_counter()
    model.embed(texts)
    batch_s = time.perf_counter() - started
    progress("one text at a time…")
    singles = []
    for text in texts[:2000]:
        t = time.perf_counter()
        model.embed([text])
        singles.append(time.perf_counter() - t)
    weights = bundled_model_path() / "model.safetensors"
    emit(
        {
            "model": model.model_id,
            "dim": model.dim,
            "texts": len(texts),
            "source": source,
            "mean_chars": round(sum(map(len, texts)) / max(len(texts), 1), 1),
            "load_s": round(cold, 3),
            "batch_sentences_per_s": round(len(texts) / batch_s),
            "single_sentences_per_s": round(len(singles) / sum(singles)),
            "single_latency": percentiles(singles),
            "model_bytes": weights.stat().st_size,
            "environment": environment(),
        },
        args.json,
    )


if __name__ == "__main__":
    main()
