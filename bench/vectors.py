"""Vector-lane benchmark: sqlite-vec vec0 (flat, IVF by partition key) against in-memory numpy indexes.

    python bench/vectors.py --n 100000 [--data real|random|both] [--queries 200] [--json OUT]
    python bench/vectors.py --n 2000 --data both --queries 50          # smoke test, seconds

Each option stores its vectors in a SQLite file (insert rows/s and file size are measured there) and answers
top-10 cosine queries; in-memory options are hydrated from that file (timed on a fresh connection, page cache
warm because the file was just written). Recall@10 is against exact float64 brute force; it is reported
strictly (same ids) and tie-aware (a returned row counts when its exact similarity reaches the 10th best; the
real data has many near-duplicate texts). Latency is single-query, sequential, wall clock.

Options:
  vec0_flat      vec0 float[256] cosine, brute force inside sqlite-vec (the current design); kind metadata column
  vec0_ivf       vec0 with a ``part integer partition key`` set from numpy k-means; the nprobe nearest centroids
                 are passed as ``part IN (...)`` (vec0 answers k rows per partition, merged here)
  numpy_flat     float32 matrix hydrated from an ordinary table (and from vec0's shadow chunks), matvec + argpartition
  numpy_ivf      partitions stored contiguously in memory; float32, float16, int8 (per-dimension scale) or pca64
                 (uncentred PCA to 64-d) scan; compact variants rescored exactly in float32 (from memory, or for
                 int8 also fetched from SQLite by rowid). ``--ivf-dtypes`` picks the variants.
  incremental    centroids and int8 scale trained on the first 10 % of rows, the rest assigned to the nearest
                 centroid (the chosen IVF variant, largest nlist)
  vec0_rescore   sqlite-vec 0.1.10 alpha ``indexed by rescore(quantizer=int8)`` (only when that version is loaded)

Filters: every row has a ``kind`` (0: 89 %, 1: 10 %, 2: 1 %). A filtered query asks for the top 10 among one
kind. vec0 applies it as a metadata constraint inside KNN; the numpy options use a small planner (exact scan of
the kind's rows when they are few, else a masked IVF scan with nprobe scaled up). Real data is embedded with
the bundled StaticEmbedder and cached under bench/out/ as .npy.

Runs with n > 200k time the full-scan vec0 paths on ``--slow-queries`` queries only. With ``--json`` the file is
rewritten after each option (``"partial": true`` until the run ends). BLAS is pinned to one thread.
"""

from __future__ import annotations

import os

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")  # one core for the benchmark: the machine is shared; stated in the output

import argparse  # noqa: E402
import json  # noqa: E402
import math  # noqa: E402
import re  # noqa: E402
import sys  # noqa: E402
import tarfile  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable, Iterator  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import apsw  # noqa: E402
import numpy as np  # noqa: E402
import sqlite_vec  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import emit, environment, peak_rss_mb, percentiles, progress, remove_store, store_bytes  # noqa: E402

DIM = 256
K = 10
OUT = Path(__file__).resolve().parent / "out"
DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
KIND_SHARE = {1: 0.10, 2: 0.01}  # kind 0 holds the rest
BATCH = 10_000
TARGET_RECALL = 0.95
Rescorer = Callable[[np.ndarray, np.ndarray], np.ndarray]  # (query, candidate row indices) -> top-K row indices


# ----------------------------------------------------------------------------------------------- data


def split_sentences(text: str) -> list[str]:
    """Split a turn into sentences (punctuation followed by space or a newline); keep ones with 3+ words."""
    parts = re.split(r"(?<=[.!?])\s+|\n+", text)
    return [p.strip() for p in parts if len(p.split()) >= 3]


def load_corpus() -> tuple[list[list[str]], list[str]]:
    """Sentences per conversation (LoCoMo turns, BEAM messages) and the benchmark questions (held-out queries)."""
    docs: list[list[str]] = []
    questions: list[str] = []
    locomo = json.loads((DATA / "locomo" / "locomo10.json").read_text())
    for sample in locomo:
        conv = sample["conversation"]
        sessions = sorted((k for k in conv if re.fullmatch(r"session_\d+", k)), key=lambda s: int(s.split("_")[1]))
        doc = [s for key in sessions for turn in conv[key] for s in split_sentences(turn.get("text", ""))]
        docs.append(doc)
        questions.extend(str(qa["question"]) for qa in sample["qa"] if qa.get("question"))
    with tarfile.open(DATA / "beam" / "beam_100K.tar.xz") as tar:
        members = {m.name: m for m in tar.getmembers()}
        chats = sorted({name.rsplit("/", 1)[0] for name in members if name.endswith("/chat.json")})
        for chat in chats:
            name = f"{chat}/chat_trunecated.json" if f"{chat}/chat_trunecated.json" in members else f"{chat}/chat.json"
            batches = json.load(tar.extractfile(members[name]))  # type: ignore[arg-type]
            doc = [
                s
                for batch in batches
                for group in batch["turns"]
                for msg in group
                for s in split_sentences(str(msg.get("content", "")))
            ]
            docs.append(doc)
            probe = f"{chat}/probing_questions/probing_questions.json"
            if probe in members:
                questions.extend(_questions(json.load(tar.extractfile(members[probe]))))  # type: ignore[arg-type]
    return docs, questions


def _questions(obj: Any) -> Iterator[str]:
    """Every ``question`` string anywhere inside a BEAM probing-questions file."""
    if isinstance(obj, dict):
        if isinstance(obj.get("question"), str):
            yield obj["question"]
        for value in obj.values():
            yield from _questions(value)
    elif isinstance(obj, list):
        for value in obj:
            yield from _questions(value)


def make_texts(docs: list[list[str]], n: int, seed: int = 7) -> tuple[list[str], dict[str, int]]:
    """The first n unique texts of a deterministic sequence (so a smaller n is a prefix of a larger one).

    Order: single sentences; windows of 2 then 3 consecutive sentences in a conversation; then pairs of
    sentences drawn at random (seeded) from the whole corpus until n texts exist.
    """
    seen: set[str] = set()
    texts: list[str] = []
    made = {"sentences": 0, "windows_2": 0, "windows_3": 0, "random_pairs": 0}

    def add(text: str, how: str) -> bool:
        if text not in seen:
            seen.add(text)
            texts.append(text)
            made[how] += 1
        return len(texts) >= n

    for width, how in ((1, "sentences"), (2, "windows_2"), (3, "windows_3")):
        for doc in docs:
            for i in range(len(doc) - width + 1):
                if add(" ".join(doc[i : i + width]), how):
                    return texts, made
    flat = [s for doc in docs for s in doc]
    rng = np.random.default_rng(seed)
    while True:
        a, b = rng.integers(0, len(flat), 2)
        if a != b and add(f"{flat[a]} {flat[b]}", "random_pairs"):
            return texts, made


def real_dataset(n: int, nq: int) -> tuple[np.ndarray, np.ndarray, dict[str, Any]]:
    """Embedded real texts (cached in bench/out as a prefix-stable .npy) and held-out question queries."""
    OUT.mkdir(parents=True, exist_ok=True)
    cached = sorted(
        (int(p.stem.split("-")[-1]), p) for p in OUT.glob("vectors-real-*.npy") if p.stem.split("-")[-1].isdigit()
    )
    hit = next(((size, p) for size, p in cached if size >= n), None)
    docs, questions = load_corpus()
    if hit is None:
        from worlddb_lite.models.embed import StaticEmbedder

        texts, made = make_texts(docs, n)
        progress(f"embedding {len(texts)} texts {made} ...")
        t0 = time.perf_counter()
        embedder = StaticEmbedder()
        X = np.concatenate([embedder.embed(texts[i : i + 20_000]) for i in range(0, len(texts), 20_000)])
        progress(f"embedded in {time.perf_counter() - t0:.1f}s")
        path = OUT / f"vectors-real-{len(texts)}.npy"
        np.save(path, X.astype(np.float32))
        (OUT / f"vectors-real-{len(texts)}.json").write_text(json.dumps({"made": made, "n": len(texts)}))
        index_texts = set(texts)
        hit = (len(texts), path)
    else:
        index_texts = set(make_texts(docs, n)[0])
    made = json.loads(hit[1].with_suffix(".json").read_text())["made"]
    X = np.load(hit[1], mmap_mode="r")[:n].astype(np.float32)
    composition = _prefix_composition(made, n)
    qpath = OUT / "queries-real.npy"
    pool = sorted({q for q in questions if q not in index_texts})
    order = np.random.default_rng(11).permutation(len(pool))
    if qpath.exists():
        Q = np.load(qpath)
    else:
        from worlddb_lite.models.embed import StaticEmbedder

        Q = StaticEmbedder().embed([pool[i] for i in order])
        np.save(qpath, Q)
    info = {
        "kind": "real",
        "source": "LoCoMo turns + BEAM-100K messages, sentence split; StaticEmbedder (bundled 256-d model2vec)",
        "composition": composition,
        "unique_sentences_available": sum(len(set(d)) for d in docs),
        "note": "texts beyond single sentences are windows of consecutive sentences and random sentence pairs",
        "queries": "LoCoMo + BEAM benchmark questions (not in the index), shuffled with seed 11",
    }
    return X, np.ascontiguousarray(Q[:nq], dtype=np.float32), info


def _prefix_composition(made: dict[str, int], n: int) -> dict[str, int]:
    """How many of the first n cached texts came from each generator (generators run in order)."""
    out, left = {}, n
    for how in ("sentences", "windows_2", "windows_3", "random_pairs"):
        take = min(left, made.get(how, 0))
        out[how] = take
        left -= take
    return out


def random_dataset(n: int, nq: int, seed: int = 1) -> tuple[np.ndarray, np.ndarray, dict[str, Any]]:
    """Gaussian 256-d vectors, L2-normalised (data seed 1, queries seed 2): the worst case for IVF."""
    X = np.empty((n, DIM), dtype=np.float32)
    rng = np.random.default_rng(seed)
    for i in range(0, n, 100_000):
        block = rng.standard_normal((min(100_000, n - i), DIM)).astype(np.float32)
        X[i : i + len(block)] = block / np.linalg.norm(block, axis=1, keepdims=True)
    Q = np.random.default_rng(seed + 1).standard_normal((nq, DIM)).astype(np.float32)
    Q /= np.linalg.norm(Q, axis=1, keepdims=True)
    return X, Q, {"kind": "random", "source": "N(0,1) 256-d, L2-normalised, seed 1; queries seed 2"}


def make_kinds(n: int, seed: int = 5) -> np.ndarray:
    """A node-type-like label per row: kind 1 on ~10 % of rows, kind 2 on ~1 %, kind 0 elsewhere."""
    u = np.random.default_rng(seed).random(n)
    kinds = np.zeros(n, dtype=np.int8)
    kinds[u < KIND_SHARE[1] + KIND_SHARE[2]] = 1
    kinds[u < KIND_SHARE[2]] = 2
    return kinds


# ------------------------------------------------------------------------------------ exact and recall


def exact_topk(X: np.ndarray, Q: np.ndarray, rows: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Exact top-K ids (by row index) and the K-th best similarity per query, float64, over rows or all."""
    ids = np.arange(len(X)) if rows is None else rows
    Q64 = Q.astype(np.float64)
    best_s = np.full((len(Q), 0), -np.inf)
    best_i = np.zeros((len(Q), 0), dtype=np.int64)
    for start in range(0, len(ids), 65_536):
        chunk = ids[start : start + 65_536]
        sims = Q64 @ X[chunk].astype(np.float64).T
        cand_s = np.concatenate([best_s, sims], axis=1)
        cand_i = np.concatenate([best_i, np.broadcast_to(chunk, sims.shape)], axis=1)
        keep = np.argsort(-cand_s, axis=1, kind="stable")[:, :K]
        best_s = np.take_along_axis(cand_s, keep, axis=1)
        best_i = np.take_along_axis(cand_i, keep, axis=1)
    return best_i, best_s[:, -1]


def recall(found: list[np.ndarray], X: np.ndarray, Q: np.ndarray, gt: np.ndarray, kth: np.ndarray) -> dict[str, float]:
    """Strict recall@K (same ids) and tie-aware recall@K (exact similarity reaches the K-th best)."""
    strict, tied = [], []
    for i, ids in enumerate(found):
        ids = np.asarray(ids, dtype=np.int64)[:K]
        strict.append(len(set(ids.tolist()) & set(gt[i].tolist())) / K)
        if len(ids):
            sims = X[ids].astype(np.float64) @ Q[i].astype(np.float64)
            tied.append(min(K, int((sims >= kth[i] - 1e-6).sum())) / K)
        else:
            tied.append(0.0)
    return {"recall": round(float(np.mean(tied)), 4), "recall_strict": round(float(np.mean(strict)), 4)}


def run_queries(search: Callable[[np.ndarray], np.ndarray], Q: np.ndarray) -> tuple[list[np.ndarray], dict]:
    """Run one query at a time (3 untimed warm-ups first); return results and latency percentiles."""
    for q in Q[:3]:
        search(q)
    found, times = [], []
    for q in Q:
        t0 = time.perf_counter()
        found.append(search(q))
        times.append(time.perf_counter() - t0)
    return found, percentiles(times)


def measure(search: Callable[[np.ndarray], np.ndarray], ctx: Ctx, kind: int | None = None, limit: int = 0) -> dict:
    """Latency and recall of one search function (row-index results) for unfiltered or one-kind queries."""
    Q = ctx.Q[:limit] if limit else ctx.Q
    gt, kth = ctx.truth(kind)
    found, lat = run_queries(search, Q)
    return {**recall(found, ctx.X, Q, gt[: len(Q)], kth[: len(Q)]), **lat}


class Ctx:
    """One dataset with its labels, queries and cached exact answers."""

    def __init__(self, X: np.ndarray, Q: np.ndarray, kinds: np.ndarray, workdir: Path, slow_queries: int) -> None:
        self.X, self.Q, self.kinds, self.workdir = X, Q, kinds, workdir
        self.n = len(X)
        self.slow_queries = slow_queries
        self.rows_by_kind = {k: np.flatnonzero(kinds == k) for k in (0, 1, 2)}
        self._truth: dict[int | None, tuple[np.ndarray, np.ndarray]] = {}

    def truth(self, kind: int | None) -> tuple[np.ndarray, np.ndarray]:
        """Exact answers for all queries, unfiltered (None) or restricted to one kind."""
        if kind not in self._truth:
            self._truth[kind] = exact_topk(self.X, self.Q, None if kind is None else self.rows_by_kind[kind])
        return self._truth[kind]


# --------------------------------------------------------------------------------------------- sqlite


def connect(path: Path) -> apsw.Connection:
    """An apsw connection with sqlite-vec loaded and the store's pragmas."""
    conn = apsw.Connection(str(path))
    conn.enable_load_extension(True)
    conn.load_extension(sqlite_vec.loadable_path())
    conn.execute("pragma journal_mode = wal")
    conn.execute("pragma synchronous = normal")
    conn.execute("pragma cache_size = -65536")
    return conn


def vec_version() -> str:
    """The loaded sqlite-vec version string."""
    conn = apsw.Connection(":memory:")
    conn.enable_load_extension(True)
    conn.load_extension(sqlite_vec.loadable_path())
    return str(conn.execute("select vec_version()").fetchone()[0])


def bulk_insert(conn: apsw.Connection, sql: str, rows: Callable[[int, int], Iterator[tuple]], n: int) -> float:
    """Insert n rows in transactions of BATCH rows; return rows per second."""
    t0 = time.perf_counter()
    for start in range(0, n, BATCH):
        with conn:
            conn.executemany(sql, rows(start, min(n, start + BATCH)))
    conn.execute("pragma wal_checkpoint(truncate)")
    return round(n / (time.perf_counter() - t0), 1)


def single_insert_ms(conn: apsw.Connection, sql: str, make_row: Callable[[int], tuple], first_id: int) -> float:
    """Mean cost of 200 single-row inserts, each its own transaction (the way a live store adds a memory)."""
    t0 = time.perf_counter()
    for i in range(200):
        with conn:
            conn.execute(sql, make_row(first_id + i))
    return round((time.perf_counter() - t0) / 200 * 1000, 4)


# ----------------------------------------------------------------------------------------------- k-means


def assign(X: np.ndarray, C: np.ndarray) -> np.ndarray:
    """Nearest centroid (max inner product) for every row, in chunks."""
    out = np.empty(len(X), dtype=np.int32)
    for i in range(0, len(X), 32_768):
        out[i : i + 32_768] = np.argmax(X[i : i + 32_768] @ C.T, axis=1)
    return out


def kmeans(X: np.ndarray, nlist: int, iters: int = 10, sample: int = 256, seed: int = 3) -> np.ndarray:
    """Spherical k-means on a sample (``sample`` points per list, at most 262144); unit-length float32 centroids."""
    rng = np.random.default_rng(seed)
    m = min(len(X), nlist * sample, 262_144)
    S = X[np.sort(rng.choice(len(X), m, replace=False))] if m < len(X) else np.asarray(X)
    C = S[rng.choice(len(S), nlist, replace=False)].copy()
    for _ in range(iters):
        a = assign(S, C)
        sums = np.zeros_like(C)
        np.add.at(sums, a, S)
        counts = np.bincount(a, minlength=nlist)
        empty = np.flatnonzero(counts == 0)
        sums[empty] = S[rng.choice(len(S), len(empty), replace=False)]
        C = sums / np.maximum(np.linalg.norm(sums, axis=1, keepdims=True), 1e-12)
    return C.astype(np.float32)


# --------------------------------------------------------------------------------------------- options


def bench_vec0_flat(ctx: Ctx) -> dict:
    """vec0 float[256] cosine brute force with a kind metadata column; also numpy hydration from its chunks."""
    path = ctx.workdir / "vec0_flat.db"
    remove_store(str(path))
    conn = connect(path)
    conn.execute("create virtual table v using vec0(kind integer, embedding float[256] distance_metric=cosine)")
    X, kinds = ctx.X, ctx.kinds
    sql = "insert into v(rowid, kind, embedding) values (?, ?, ?)"
    rate = bulk_insert(conn, sql, lambda a, b: ((i + 1, int(kinds[i]), X[i].tobytes()) for i in range(a, b)), ctx.n)
    res: dict[str, Any] = {"insert_rows_per_s": rate, "file_bytes": store_bytes(str(path))}
    conn.close()
    conn = connect(path)
    t0 = time.perf_counter()
    M, ids = hydrate_vec0_chunks(conn, "v")
    res["hydrate_numpy_from_vec0_chunks_s"] = round(time.perf_counter() - t0, 3)
    res["hydrate_matches"] = bool(np.array_equal(ids, np.arange(1, ctx.n + 1)) and np.array_equal(M, X))
    del M, ids
    limit = ctx.slow_queries if ctx.n > 200_000 else 0
    knn = "select rowid from v where embedding match ? and k = 10"
    knn_kind = "select rowid from v where embedding match ? and k = 10 and kind = ?"

    def search(q: np.ndarray) -> np.ndarray:
        return np.fromiter((r[0] - 1 for r in conn.execute(knn, (q.tobytes(),))), dtype=np.int64)

    res["unfiltered"] = measure(search, ctx, limit=limit)
    res["filtered"] = {}
    for kind in (1, 2):

        def fsearch(q: np.ndarray, kind: int = kind) -> np.ndarray:
            return np.fromiter((r[0] - 1 for r in conn.execute(knn_kind, (q.tobytes(), kind))), dtype=np.int64)

        res["filtered"][f"kind{kind}_{KIND_SHARE[kind]:.0%}"] = measure(fsearch, ctx, kind, limit=limit)
    res["single_insert_ms"] = single_insert_ms(conn, sql, lambda i: (i, 0, ctx.Q[i % len(ctx.Q)].tobytes()), ctx.n + 1)
    if limit:
        res["queries_timed"] = limit
    conn.close()
    remove_store(str(path))
    return res


def hydrate_vec0_chunks(conn: apsw.Connection, table: str) -> tuple[np.ndarray, np.ndarray]:
    """Read every live vector of a vec0 float[256] table straight from its shadow chunks (rowid order)."""
    parts_v, parts_id = [], []
    sql = (
        f"select c.validity, c.rowids, v.vectors from {table}_chunks c "
        f"join {table}_vector_chunks00 v on v.rowid = c.chunk_id order by c.chunk_id"
    )
    for validity, rowids, vectors in conn.execute(sql):
        valid = np.unpackbits(np.frombuffer(validity, dtype=np.uint8), bitorder="little").astype(bool)
        ids = np.frombuffer(rowids, dtype=np.int64)
        vecs = np.frombuffer(vectors, dtype=np.float32).reshape(-1, DIM)
        parts_id.append(ids[valid[: len(ids)]])
        parts_v.append(vecs[valid[: len(vecs)]])
    ids = np.concatenate(parts_id)
    M = np.concatenate(parts_v)
    order = np.argsort(ids, kind="stable")
    return M[order], ids[order]


def nprobe_grid(nlist: int) -> list[int]:
    """Powers of two below nlist, then nlist itself (exhaustive)."""
    return [p for p in (2**i for i in range(13)) if p < nlist] + [nlist]


def top_partitions(C: np.ndarray, q: np.ndarray, nprobe: int) -> np.ndarray:
    """The nprobe centroids nearest to q."""
    s = C @ q
    if nprobe >= len(C):
        return np.arange(len(C))
    return np.argpartition(-s, nprobe - 1)[:nprobe]


def bench_vec0_ivf(ctx: Ctx, C: np.ndarray, parts: np.ndarray, build_s: float) -> dict:
    """vec0 with a k-means partition key; nprobe partitions queried in one statement with part IN (json_each)."""
    nlist = len(C)
    path = ctx.workdir / "vec0_ivf.db"
    remove_store(str(path))
    conn = connect(path)
    chunk = 64
    conn.execute(
        "create virtual table v using vec0(part integer partition key, kind integer, "
        f"embedding float[256] distance_metric=cosine, chunk_size={chunk})"
    )
    conn.execute("create table centroids(id integer primary key, v blob not null)")
    with conn:
        conn.executemany("insert into centroids values (?, ?)", ((i, C[i].tobytes()) for i in range(nlist)))
    X, kinds = ctx.X, ctx.kinds
    sql = "insert into v(rowid, part, kind, embedding) values (?, ?, ?, ?)"
    rate = bulk_insert(
        conn, sql, lambda a, b: ((i + 1, int(parts[i]), int(kinds[i]), X[i].tobytes()) for i in range(a, b)), ctx.n
    )
    res: dict[str, Any] = {
        "nlist": nlist,
        "chunk_size": chunk,
        "kmeans_build_s": build_s,
        "insert_rows_per_s": rate,
        "file_bytes": store_bytes(str(path)),
        "partition_size_p50_max": [int(np.median(np.bincount(parts))), int(np.bincount(parts).max())],
    }
    conn.close()
    conn = connect(path)
    t0 = time.perf_counter()
    C = np.frombuffer(b"".join(r[0] for r in conn.execute("select v from centroids order by id")), np.float32)
    C = C.reshape(nlist, DIM)
    res["hydrate_centroids_s"] = round(time.perf_counter() - t0, 4)
    knn = (
        "select rowid, distance from v where embedding match ? and k = 10 and part in (select value from json_each(?))"
    )
    knn_kind = knn + " and kind = ?"

    def searcher(nprobe: int, kind: int | None) -> Callable[[np.ndarray], np.ndarray]:
        def search(q: np.ndarray) -> np.ndarray:
            probe = json.dumps(top_partitions(C, q, nprobe).tolist())
            args = (q.tobytes(), probe) if kind is None else (q.tobytes(), probe, kind)
            rows = conn.execute(knn if kind is None else knn_kind, args).fetchall()
            rows.sort(key=lambda r: r[1])
            return np.array([r[0] - 1 for r in rows[:K]], dtype=np.int64)

        return search

    res["sweep"], chosen = sweep(lambda p: measure(searcher(p, None), ctx), nprobe_grid(nlist))
    res["chosen_nprobe"] = chosen
    res["filtered"] = {}
    base = chosen or nprobe_grid(nlist)[-1]
    for kind in (1, 2):
        rows = {}
        for mult in (1, 4):
            p = min(nlist, base * mult)
            rows[f"nprobe_{p}"] = measure(searcher(p, kind), ctx, kind)
        rows["no_partition_constraint(full scan, kind metadata)"] = measure(
            lambda q, kind=kind: np.fromiter(
                (
                    r[0] - 1
                    for r in conn.execute(
                        "select rowid from v where embedding match ? and k = 10 and kind = ?", (q.tobytes(), kind)
                    )
                ),
                dtype=np.int64,
            ),
            ctx,
            kind,
            limit=ctx.slow_queries if ctx.n > 200_000 else 0,
        )
        res["filtered"][f"kind{kind}_{KIND_SHARE[kind]:.0%}"] = rows

    def one_row(i: int) -> tuple:
        q = ctx.Q[i % len(ctx.Q)]
        return (i, int(np.argmax(C @ q)), 0, q.tobytes())

    res["single_insert_ms(incl. centroid assign)"] = single_insert_ms(conn, sql, one_row, ctx.n + 1)
    conn.close()
    remove_store(str(path))
    return res


def sweep(run: Callable[[int], dict], grid: list[int]) -> tuple[dict[str, dict], int | None]:
    """Run an nprobe grid; stop one step after recall reaches 0.99. Return results and the smallest passing nprobe."""
    out: dict[str, dict] = {}
    chosen = None
    for p in grid:
        r = run(p)
        out[str(p)] = r
        progress(f"    nprobe {p}: recall {r['recall']} p50 {r['p50_ms']} p95 {r['p95_ms']}")
        if chosen is None and r["recall"] >= TARGET_RECALL:
            chosen = p
        if r["recall"] >= 0.99 or r["p50_ms"] > 60:
            break
    return out, chosen


def build_plain_table(ctx: Ctx, parts: np.ndarray) -> tuple[Path, dict]:
    """An ordinary table (rowid, kind, part, v float32 blob): the source for the in-memory options."""
    path = ctx.workdir / "plain.db"
    remove_store(str(path))
    conn = connect(path)
    conn.execute("create table vec(rowid integer primary key, kind integer not null, part integer, v blob not null)")
    X, kinds = ctx.X, ctx.kinds
    sql = "insert into vec(rowid, kind, part, v) values (?, ?, ?, ?)"
    rate = bulk_insert(
        conn, sql, lambda a, b: ((i + 1, int(kinds[i]), int(parts[i]), X[i].tobytes()) for i in range(a, b)), ctx.n
    )
    info = {"insert_rows_per_s": rate, "file_bytes": store_bytes(str(path))}
    conn.close()
    return path, info


def hydrate_plain(path: Path) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, float]:
    """Read ids, kinds, parts and the float32 matrix from the plain table on a fresh connection."""
    conn = connect(path)
    t0 = time.perf_counter()
    ids, kinds, parts, blobs = [], [], [], []
    for rowid, kind, part, v in conn.execute("select rowid, kind, part, v from vec order by rowid"):
        ids.append(rowid)
        kinds.append(kind)
        parts.append(part)
        blobs.append(v)
    M = np.frombuffer(b"".join(blobs), dtype=np.float32).reshape(-1, DIM)
    out = (np.array(ids, np.int64), np.array(kinds, np.int8), np.array(parts, np.int32), M)
    elapsed = time.perf_counter() - t0
    conn.close()
    return (*out, elapsed)


def topk(scores: np.ndarray, k: int) -> np.ndarray:
    """Indices of the k largest scores, best first."""
    if len(scores) <= k:
        return np.argsort(-scores)
    idx = np.argpartition(-scores, k - 1)[:k]
    return idx[np.argsort(-scores[idx])]


def bench_numpy_flat(ctx: Ctx, M: np.ndarray, kinds: np.ndarray) -> dict:
    """Exact float32 matvec over the hydrated matrix; filters: mask when the kind is common, gather when rare."""
    res: dict[str, Any] = {"memory_bytes": int(M.nbytes + kinds.nbytes)}
    res["unfiltered"] = measure(lambda q: topk(M @ q, K), ctx)
    rows = {k: np.flatnonzero(kinds == k) for k in (1, 2)}

    def masked(q: np.ndarray, kind: int) -> np.ndarray:
        s = M @ q
        s[kinds != kind] = -np.inf
        return topk(s, K)

    def gathered(q: np.ndarray, kind: int) -> np.ndarray:
        r = rows[kind]
        return r[topk(M[r] @ q, K)]

    res["filtered"] = {
        f"kind{k}_{KIND_SHARE[k]:.0%}": {
            "mask": measure(lambda q, k=k: masked(q, k), ctx, k),
            "gather": measure(lambda q, k=k: gathered(q, k), ctx, k),
        }
        for k in (1, 2)
    }
    return res


class NumpyIVF:
    """In-memory IVF: rows sorted by partition, one contiguous array per storage dtype, optional exact rescore."""

    def __init__(
        self,
        M: np.ndarray,
        kinds: np.ndarray,
        parts: np.ndarray,
        C: np.ndarray,
        dtype: str,
        fit: np.ndarray | None = None,
    ) -> None:
        """Lay out M by partition in ``dtype``: float32, float16, int8 (per-dimension scale) or pcaR (R-d float32).

        ``fit`` is the sample the int8 scale / PCA basis is learned from (default: all rows); later rows are
        clipped to that scale, as they would be in a live store.
        """
        order = np.argsort(parts, kind="stable")
        self.C = C
        self.ids = order.astype(np.int64)  # row index (rowid - 1) at each sorted position
        self.kinds = kinds[order]
        counts = np.bincount(parts, minlength=len(C))
        self.offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
        self.dtype = dtype
        self.scale = np.ones(DIM, dtype=np.float32)
        self.proj: np.ndarray | None = None
        fit = M if fit is None else fit
        S = M[order]
        if dtype == "float32":
            self.data = S
        elif dtype == "float16":
            self.data = S.astype(np.float16)
        elif dtype == "int8":
            self.scale = (np.abs(fit).max(axis=0) / 127.0).astype(np.float32)
            self.scale[self.scale == 0] = 1.0
            self.data = np.clip(np.rint(S / self.scale), -127, 127).astype(np.int8)
        else:  # uncentred PCA: the rank-R basis that best keeps inner products
            sample = fit[np.random.default_rng(9).choice(len(fit), min(len(fit), 50_000), replace=False)]
            self.proj = np.linalg.svd(sample, full_matrices=False)[2][: int(dtype[3:])].T.astype(np.float32)
            self.data = S @ self.proj
        self.full = M  # float32 by row index, for in-memory rescore (not counted for the compact variants)
        self.rows_by_kind = {k: np.flatnonzero(self.kinds == k) for k in (1, 2)}

    def memory_bytes(self) -> int:
        """Bytes of the scanned structure (vectors, ids, kinds, offsets, centroids)."""
        return int(self.data.nbytes + self.ids.nbytes + self.kinds.nbytes + self.offsets.nbytes + self.C.nbytes)

    def candidates(self, q: np.ndarray, nprobe: int, kind: int | None, depth: int) -> tuple[np.ndarray, np.ndarray]:
        """Scan the probed partitions (masked by kind); return the best ``depth`` row indices and their scores."""
        qs = self.project(q)
        ids_parts, score_parts = [], []
        for p in top_partitions(self.C, q, nprobe):
            a, b = self.offsets[p], self.offsets[p + 1]
            if a == b:
                continue
            block = self.data[a:b]
            s = (block if block.dtype == np.float32 else block.astype(np.float32)) @ qs
            if kind is not None:
                s[self.kinds[a:b] != kind] = -np.inf
            score_parts.append(s)
            ids_parts.append(self.ids[a:b])
        if not score_parts:
            return np.zeros(0, np.int64), np.zeros(0, np.float32)
        s = np.concatenate(score_parts)
        best = topk(s, depth)
        best = best[np.isfinite(s[best])]
        return np.concatenate(ids_parts)[best], s[best]

    def exact_subset(self, q: np.ndarray, kind: int) -> np.ndarray:
        """Exact scan of one kind's rows (a rare filter): gather, score, top-K."""
        pos = self.rows_by_kind[kind]
        block = self.data[pos]
        s = (block if block.dtype == np.float32 else block.astype(np.float32)) @ self.project(q)
        best = topk(s, K if self.dtype == "float32" else 100)
        return self.ids[pos[best]]

    def project(self, q: np.ndarray) -> np.ndarray:
        """The query in the stored vectors' space (scaled for int8, projected for PCA)."""
        return (q @ self.proj if self.proj is not None else q * self.scale).astype(np.float32)

    def rescore_memory(self, q: np.ndarray, ids: np.ndarray) -> np.ndarray:
        """Exact float32 rescore from the in-memory matrix."""
        return ids[topk(self.full[ids] @ q, K)]


def sqlite_rescorer(path: Path) -> Rescorer:
    """Exact rescore with float32 vectors fetched from the plain table by rowid (one prepared statement)."""
    conn = connect(path)
    sqls = {}

    def rescore(q: np.ndarray, ids: np.ndarray) -> np.ndarray:
        m = len(ids)
        if m not in sqls:
            sqls[m] = f"select rowid, v from vec where rowid in ({','.join('?' * m)})"
        rows = conn.execute(sqls[m], [int(i) + 1 for i in ids]).fetchall()
        rid = np.fromiter((r[0] - 1 for r in rows), dtype=np.int64, count=len(rows))
        V = np.frombuffer(b"".join(r[1] for r in rows), dtype=np.float32).reshape(-1, DIM)
        return rid[topk(V @ q, K)]

    return rescore


def ivf_search(
    index: NumpyIVF, nprobe: int, kind: int | None = None, depth: int = K, rescore: Rescorer | None = None
) -> Callable[[np.ndarray], np.ndarray]:
    """A query function: scan nprobe partitions of an in-memory IVF, keep depth candidates, optionally rescore."""

    def search(q: np.ndarray) -> np.ndarray:
        ids = index.candidates(q, nprobe, kind, depth)[0]
        return ids if rescore is None else rescore(q, ids)

    return search


def subset_search(index: NumpyIVF, kind: int, rescore: Rescorer | None) -> Callable[[np.ndarray], np.ndarray]:
    """A query function: exact scan of one kind's rows (the plan for a selective filter)."""

    def search(q: np.ndarray) -> np.ndarray:
        ids = index.exact_subset(q, kind)
        return ids if rescore is None else rescore(q, ids)

    return search


def sweep_ivf(ctx: Ctx, index: NumpyIVF, depth: int, rescore: Rescorer | None) -> dict:
    """nprobe sweep of one in-memory IVF variant."""
    sw, chosen = sweep(lambda p: measure(ivf_search(index, p, None, depth, rescore), ctx), nprobe_grid(len(index.C)))
    return {"sweep": sw, "chosen_nprobe": chosen}


def bench_numpy_ivf(
    ctx: Ctx,
    M: np.ndarray,
    kinds: np.ndarray,
    parts: np.ndarray,
    C: np.ndarray,
    plain: Path,
    depths: list[int],
    dtypes: list[str],
) -> dict:
    """Sweep nprobe for each storage dtype of the in-memory IVF (compact ones rescored), plus filtered queries."""
    return {dtype: bench_ivf_dtype(ctx, M, kinds, parts, C, plain, depths, dtype) for dtype in dtypes}


def bench_ivf_dtype(
    ctx: Ctx,
    M: np.ndarray,
    kinds: np.ndarray,
    parts: np.ndarray,
    C: np.ndarray,
    plain: Path,
    depths: list[int],
    dtype: str,
) -> dict:
    """One storage dtype of the in-memory IVF: nprobe sweeps per rescore variant, then the filtered cases."""
    t0 = time.perf_counter()
    index = NumpyIVF(M, kinds, parts, C, dtype)
    res: dict[str, Any] = {"layout_s": round(time.perf_counter() - t0, 3), "memory_bytes": index.memory_bytes()}
    progress(f"  numpy_ivf {dtype}")
    variants: dict[str, tuple[int, Rescorer | None]] = {}
    if dtype == "float32":
        variants["no_rescore"] = (K, None)
    elif dtype == "float16":  # numpy has no fast float16 matvec: one variant is enough to show it
        variants[f"rescore{depths[0]}_memory"] = (depths[0], index.rescore_memory)
    else:
        for depth in depths:
            variants[f"rescore{depth}_memory"] = (depth, index.rescore_memory)
        if dtype == "int8":
            variants[f"rescore{depths[-1]}_sqlite"] = (depths[-1], sqlite_rescorer(plain))
    res["variants"] = {}
    for name, (depth, rescore) in variants.items():
        progress(f"   {name}")
        res["variants"][name] = sweep_ivf(ctx, index, depth, rescore)
    first = next(iter(res["variants"].values()))
    base = first["chosen_nprobe"] or nprobe_grid(len(C))[-1]
    depth, rescore = next(iter(variants.values()))
    res["filtered"] = {}
    for kind in (1, 2):
        rows = {}
        for mult in (1, 2, 4):
            p = min(len(C), base * mult)
            rows[f"masked_ivf_nprobe_{p}"] = measure(ivf_search(index, p, kind, depth, rescore), ctx, kind)
        rows["exact_subset(gather kind rows)"] = measure(subset_search(index, kind, rescore), ctx, kind)
        res["filtered"][f"kind{kind}_{KIND_SHARE[kind]:.0%}"] = rows
    return res


def bench_incremental(ctx: Ctx, M: np.ndarray, kinds: np.ndarray, nlist: int, dtype: str, depth: int) -> dict:
    """Centroids (and int8 scale) trained on the first 10 % of rows; the other 90 % assigned one by one."""
    first = max(nlist * 4, ctx.n // 10)
    t0 = time.perf_counter()
    C = kmeans(M[:first], nlist)
    train_s = round(time.perf_counter() - t0, 2)
    t0 = time.perf_counter()
    for q in M[first : first + 2000]:
        int(np.argmax(C @ q))
    assign_ms = (time.perf_counter() - t0) / 2000 * 1000
    parts = assign(M, C)
    index = NumpyIVF(M, kinds, parts, C, dtype, fit=M[:first])

    counts = np.bincount(parts, minlength=nlist)
    swept = sweep_ivf(ctx, index, K, None) if dtype == "float32" else sweep_ivf(ctx, index, depth, index.rescore_memory)
    return {
        "trained_on_rows": first,
        "kmeans_s": train_s,
        "assign_one_row_ms": round(assign_ms, 4),
        "partition_size_p50_max": [int(np.median(counts)), int(counts.max())],
        **swept,
    }


def bench_vec0_rescore(ctx: Ctx) -> dict:
    """sqlite-vec 0.1.10 alpha: ``indexed by rescore(quantizer=..., oversample=N)`` (no metadata/partitions)."""
    return {f"rescore_{q}": bench_vec0_rescore_one(ctx, q, o) for q, o in (("int8", 8), ("bit", 16))}


def bench_vec0_rescore_one(ctx: Ctx, quant: str, oversample: int) -> dict:
    """One vec0 rescore index: insert, size, unfiltered recall and latency."""
    path = ctx.workdir / f"vec0_rescore_{quant}.db"
    remove_store(str(path))
    conn = connect(path)
    conn.execute(
        "create virtual table v using vec0(embedding float[256] distance_metric=cosine "
        f"indexed by rescore(quantizer={quant}, oversample={oversample}))"
    )
    X = ctx.X
    sql = "insert into v(rowid, embedding) values (?, ?)"
    rate = bulk_insert(conn, sql, lambda a, b: ((i + 1, X[i].tobytes()) for i in range(a, b)), ctx.n)
    res: dict[str, Any] = {"oversample": oversample, "insert_rows_per_s": rate, "file_bytes": store_bytes(str(path))}
    conn.close()
    conn = connect(path)
    knn = "select rowid from v where embedding match ? and k = 10"

    def search(q: np.ndarray) -> np.ndarray:
        return np.fromiter((r[0] - 1 for r in conn.execute(knn, (q.tobytes(),))), dtype=np.int64)

    res["unfiltered"] = measure(search, ctx, limit=ctx.slow_queries if ctx.n > 200_000 else 0)
    res["filtered"] = "not supported: rescore indexes reject metadata and partition key columns"
    conn.close()
    remove_store(str(path))
    return res


# ------------------------------------------------------------------------------------------------ driver


def run_dataset(ctx: Ctx, args: argparse.Namespace, res: dict[str, Any], save: Callable[[], None]) -> None:
    """All options on one dataset, filling ``res`` and calling ``save`` after each option (partial results)."""
    only = set(args.options.split(",")) if args.options else None

    def want(name: str) -> bool:
        return only is None or name in only

    n = ctx.n
    nlists = sorted({max(8, int(round(f * math.sqrt(n)))) for f in args.nlist_factors})
    if want("vec0_rescore"):
        if "0.1.10" in vec_version():
            progress("vec0_rescore")
            res["vec0_rescore"] = bench_vec0_rescore(ctx)
        else:
            res["vec0_rescore"] = f"skipped: needs sqlite-vec 0.1.10 alpha, loaded {vec_version()}"
    if want("vec0_flat"):
        progress("vec0_flat")
        res["vec0_flat"] = bench_vec0_flat(ctx)
        save()
    t0 = time.perf_counter()
    C0 = kmeans(ctx.X, nlists[0])
    parts0 = assign(ctx.X, C0)
    build_s = round(time.perf_counter() - t0, 2)
    if want("vec0_ivf"):
        progress(f"vec0_ivf nlist {nlists[0]}")
        res["vec0_ivf"] = bench_vec0_ivf(ctx, C0, parts0, build_s)
        save()
    if want("numpy_flat") or want("numpy_ivf"):
        plain, info = build_plain_table(ctx, parts0)
        ids, kinds, parts, M, hyd = hydrate_plain(plain)
        assert np.array_equal(M, ctx.X) and np.array_equal(parts, parts0)
        res["plain_table"] = {**info, "hydrate_s(rowid, kind, part, v)": round(hyd, 3)}
        if want("numpy_flat"):
            progress("numpy_flat")
            res["numpy_flat"] = bench_numpy_flat(ctx, M, kinds)
            save()
        if want("numpy_ivf"):
            res["numpy_ivf"] = {}
            for nl in nlists:
                progress(f"numpy_ivf nlist {nl}")
                if nl == nlists[0]:
                    C, p, bs = C0, parts0, build_s
                else:
                    t0 = time.perf_counter()
                    C = kmeans(ctx.X, nl)
                    p = assign(ctx.X, C)
                    bs = round(time.perf_counter() - t0, 2)
                counts = np.bincount(p, minlength=nl)
                save()
                res["numpy_ivf"][f"nlist_{nl}"] = {
                    "kmeans_build_s(train+assign all)": bs,
                    "partition_size_p50_max": [int(np.median(counts)), int(counts.max())],
                    **bench_numpy_ivf(ctx, M, kinds, p, C, plain, args.rescore_depths, args.ivf_dtypes.split(",")),
                }
            if want("incremental") or only is None:
                nl = nlists[-1]
                progress(f"incremental nlist {nl}")
                res["incremental"] = {
                    "nlist": nl,
                    "dtype": args.incremental_dtype,
                    **bench_incremental(ctx, M, kinds, nl, args.incremental_dtype, args.rescore_depths[0]),
                }
        remove_store(str(plain))
    save()


def main() -> None:
    """Parse arguments, run the datasets, print JSON."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=100_000, help="vectors in the index")
    ap.add_argument("--data", choices=("real", "random", "both"), default="both")
    ap.add_argument("--queries", type=int, default=200, help="timed queries per measurement")
    ap.add_argument("--slow-queries", type=int, default=40, help="queries for full-scan vec0 paths when n > 200k")
    ap.add_argument("--nlist-factors", type=float, nargs="+", default=[1.0, 4.0], help="nlist = factor * sqrt(n)")
    ap.add_argument("--rescore-depths", type=int, nargs="+", default=[50, 100])
    ap.add_argument(
        "--ivf-dtypes", default="float32,int8", help="in-memory IVF storage variants: float32,float16,int8,pca64"
    )
    ap.add_argument("--incremental-dtype", default="int8", help="the IVF variant for the incremental-insert test")
    ap.add_argument("--options", default="", help="comma list: vec0_flat,vec0_ivf,numpy_flat,numpy_ivf,vec0_rescore")
    ap.add_argument("--workdir", default=None, help="where the temporary .db files go (default: a per-run folder)")
    ap.add_argument("--json", default=None, help="also write the JSON here")
    args = ap.parse_args()
    workdir = Path(args.workdir) if args.workdir else OUT / f"vecbench-{os.getpid()}"
    workdir.mkdir(parents=True, exist_ok=True)
    result: dict[str, Any] = {
        "benchmark": "vectors",
        "n": args.n,
        "k": K,
        "queries": args.queries,
        "environment": {
            **environment(),
            "vec_version": vec_version(),
            "blas_threads": os.environ["OPENBLAS_NUM_THREADS"],
        },
        "datasets": {},
    }
    kinds_all = ("real", "random") if args.data == "both" else (args.data,)
    t_start = time.perf_counter()
    for kind in kinds_all:
        progress(f"== dataset {kind} n={args.n}")
        t0 = time.perf_counter()
        X, Q, info = (real_dataset if kind == "real" else random_dataset)(args.n, args.queries)
        info["load_s"] = round(time.perf_counter() - t0, 2)
        ctx = Ctx(X, Q, make_kinds(args.n), workdir, args.slow_queries)
        t0 = time.perf_counter()
        for k in (None, 1, 2):
            ctx.truth(k)
        info["exact_truth_s"] = round(time.perf_counter() - t0, 2)
        result["datasets"][kind] = {"info": info, "options": {}}
        run_dataset(ctx, args, result["datasets"][kind]["options"], lambda: save_partial(result, args.json))
    result["elapsed_s"] = round(time.perf_counter() - t_start, 1)
    result["peak_rss_mb"] = peak_rss_mb()
    emit(result, args.json)
    for leftover in workdir.glob("*"):
        leftover.unlink()
    workdir.rmdir()


def save_partial(result: dict[str, Any], out: str | None) -> None:
    """Write the results so far (a long run that dies still leaves its numbers)."""
    if out:
        Path(out).parent.mkdir(parents=True, exist_ok=True)
        Path(out).write_text(json.dumps({**result, "partial": True}, indent=2) + "\n")


if __name__ == "__main__":
    main()
