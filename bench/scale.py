"""Scale benchmark: bulk load, then time seed 1-hop, BM25 top-10 and vector top-10 probes.

    python bench/scale.py --nodes 100000 [--json bench/out/scale-100k.json]
    python bench/scale.py --write-growth

The load goes through the public facade (``WorldDB.write_many``, ``link_many``), so every
node is hashed, indexed and witnessed in its worlds' Merkle trees and every edge runs its
handler. Layout: 8 Scope worlds, each holding Session worlds of 200 memories (depth 3);
2.5 refers_to edges per node between random nodes; random unit 256-d vectors.
Text: 12 words per memory drawn Zipf-like (s = 1.07) from a 50k-word vocabulary; a BM25
query is 3 words drawn from the same vocabulary without its 100 most frequent words (the
stop words an FTS query would drop).
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import emit, environment, peak_rss_mb, percentiles, progress, remove_store, store_bytes  # noqa: E402

from worlddb_lite import WorldDB  # noqa: E402

DIM = 256
SCOPES = 8
SESSION_SIZE = 200
VOCAB = 50_000
CHUNK = 20_000


class Corpus:
    """Deterministic synthetic text and vectors."""

    def __init__(self, seed: int) -> None:
        self.rng = np.random.default_rng(seed)
        self.words = [f"w{i:05d}" for i in range(VOCAB)]
        ranks = np.arange(1, VOCAB + 1, dtype=np.float64)
        weights = ranks**-1.07
        self.cdf = np.cumsum(weights / weights.sum())

    def texts(self, n: int, length: int = 12) -> list[str]:
        picks = np.searchsorted(self.cdf, self.rng.random((n, length)))
        picks = np.minimum(picks, VOCAB - 1)
        return [" ".join(self.words[i] for i in row) for row in picks]

    def vectors(self, n: int) -> np.ndarray:
        v = self.rng.standard_normal((n, DIM)).astype(np.float32)
        return v / np.linalg.norm(v, axis=1, keepdims=True)

    def query(self) -> str:
        return " ".join(self.words[int(i)] for i in self.rng.integers(100, VOCAB, 3))


def load(db: WorldDB, corpus: Corpus, n: int, *, flat_scope: str | None = None) -> tuple[list[str], float]:
    """Write n memories (nested in sessions, or flat into one scope) with ``write_many``."""
    ids: list[str] = []
    started = time.perf_counter()
    scopes = [db.scope(f"scope-{i}") for i in range(SCOPES)] if flat_scope is None else [db.scope(flat_scope)]
    sessions: dict[int, str] = {}
    for begin in range(0, n, CHUNK):
        count = min(CHUNK, n - begin)
        texts, vectors = corpus.texts(count), corpus.vectors(count)
        records = []
        with db.batch():
            for j in range(count):
                i = begin + j
                if flat_scope is not None:
                    world = scopes[0]
                else:
                    s = i // SESSION_SIZE
                    if s not in sessions:
                        sessions[s] = db.world(f"session-{s}", parent=scopes[s % SCOPES], type="Session")
                    world = sessions[s]
                records.append({"text": texts[j], "world": world, "vector": vectors[j], "valid_at": "2024-01-01"})
            ids.extend(db.write_many(records))
        progress(f"  nodes {begin + count:,}/{n:,} ({(begin + count) / (time.perf_counter() - started):,.0f}/s)")
    return ids, time.perf_counter() - started


def link(db: WorldDB, ids: list[str], count: int, seed: int) -> float:
    """Write ``count`` refers_to edges between random distinct nodes with ``link_many``; returns seconds."""
    rng = random.Random(seed)
    started = time.perf_counter()
    done = 0
    while done < count:
        step = min(CHUNK * 2, count - done)
        pairs = (rng.sample(range(len(ids)), 2) for _ in range(step))
        db.link_many([(ids[a], ids[b], "refers_to") for a, b in pairs])
        done += step
        progress(f"  edges {done:,}/{count:,} ({done / (time.perf_counter() - started):,.0f}/s)")
    return time.perf_counter() - started


def probe(db: WorldDB, corpus: Corpus, ids: list[str], probes: int, vector_probes: int, seed: int) -> dict:
    rng = random.Random(seed)
    hop, bm25, vec = [], [], []
    for _ in range(probes):
        ref = ids[rng.randrange(len(ids))]
        t = time.perf_counter()
        db.neighbours(ref)
        hop.append(time.perf_counter() - t)
        query = corpus.query()
        t = time.perf_counter()
        db.search(query, k=10)
        bm25.append(time.perf_counter() - t)
    for vector in corpus.vectors(vector_probes):
        t = time.perf_counter()
        db.nearest(vector, k=10)
        vec.append(time.perf_counter() - t)
    return {"seed_1hop": percentiles(hop), "bm25_top10": percentiles(bm25), "vector_top10": percentiles(vec)}


def run_scale(args: argparse.Namespace) -> dict:
    path = args.path
    remove_store(path)
    corpus = Corpus(args.seed)
    db = WorldDB(path, embedder=None, dim=DIM)
    progress(f"loading {args.nodes:,} nodes")
    ids, node_s = load(db, corpus, args.nodes)
    edges = int(2.5 * args.nodes)
    progress(f"linking {edges:,} refers_to edges")
    edge_s = link(db, ids, edges, args.seed)
    db.close()
    db = WorldDB(path, embedder=None, dim=DIM)
    progress("probing")
    probes = probe(db, corpus, ids, args.probes, args.vector_probes, args.seed)
    db.close()
    return {
        "benchmark": "scale",
        "params": {
            "nodes": args.nodes,
            "edges": edges,
            "probes": args.probes,
            "vector_probes": args.vector_probes,
            "seed": args.seed,
            "dim": DIM,
        },
        "env": environment(),
        "load": {
            "node_seconds": round(node_s, 2),
            "edge_seconds": round(edge_s, 2),
            "nodes_per_s": round(args.nodes / node_s),
            "edges_per_s": round(edges / edge_s),
            "writes_per_s": round((args.nodes + edges) / (node_s + edge_s)),
        },
        "probes": probes,
        "file_bytes": store_bytes(path),
        "peak_rss_mb": peak_rss_mb(),
    }


def run_growth(args: argparse.Namespace) -> dict:
    """Per-write time into one scope as it grows from 1k to the largest size."""
    path = args.path
    remove_store(path)
    corpus = Corpus(args.seed)
    db = WorldDB(path, embedder=None, dim=DIM)
    sizes = [s for s in (1_000, 10_000, 100_000, 1_000_000) if s <= args.max_size]
    held = 0
    out = {}
    for size in sizes:
        progress(f"growing the scope to {size:,} memories")
        load(db, corpus, size - held, flat_scope="grow")
        held = size
        timings = []
        for text, vector in zip(corpus.texts(args.writes), corpus.vectors(args.writes), strict=True):
            t = time.perf_counter()
            db.write(text, scope="grow", vector=vector)
            timings.append(time.perf_counter() - t)
        held += args.writes
        out[str(size)] = percentiles(timings)
    db.close()
    p50 = [v["p50_ms"] for v in out.values()]
    return {
        "benchmark": "write_growth",
        "params": {"writes_per_size": args.writes, "seed": args.seed, "dim": DIM},
        "env": environment(),
        "per_size": out,
        "p50_growth_ratio": round(max(p50) / min(p50), 3),
        "file_bytes": store_bytes(path),
        "peak_rss_mb": peak_rss_mb(),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--nodes", type=int, default=100_000)
    parser.add_argument("--probes", type=int, default=1000)
    parser.add_argument(
        "--vector-probes",
        type=int,
        default=1000,
        help="vector probes (sqlite-vec 0.1.9 is brute force: ~1 s each at 1M)",
    )
    parser.add_argument("--write-growth", action="store_true", help="run the write-growth study instead")
    parser.add_argument("--max-size", type=int, default=1_000_000, help="largest scope size for --write-growth")
    parser.add_argument("--writes", type=int, default=200, help="timed single writes per size (--write-growth)")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--path", default="/tmp/worlddb-scale.db")
    parser.add_argument("--json", dest="out", help="also write the JSON result here")
    args = parser.parse_args(argv)
    emit(run_growth(args) if args.write_growth else run_scale(args), args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
