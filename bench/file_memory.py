"""Peak memory of applying a hostile change set, or importing a hostile export, of a given size (issue 35).

    python bench/file_memory.py [--size 2000000] [--shapes props_edge,text_notes,...] [--json bench/out/fm.json]
    python bench/file_memory.py --smoke        # 200 KB files, the smoke test's run

The sender is a store holding LoCoMo's first conversation (``--conversations``; FakeEmbedder, the rule
extractor), the receiver its replica made before it. Each hostile file is that honest file (the sender's change
set for the receiver, or its export) with forged records appended until it reaches ``--size`` bytes (compressed,
for a change set; as written, for an export), each record valid on its own (ids hash to bodies, ends exist):

* ``props_edge``: one edge whose props hold as many tiny keys as fit; ``props_edges``: edges of 1,000 keys each
  (none shared);
* ``text_notes``: notes of 500,000 characters of one repeated sentence (compresses ~1000:1);
* ``body_props``: notes whose body's props hold 5,000 tiny keys (text inside the node's body string);
* ``random_aliases`` / ``tiny_aliases``: aliases of one node, 12 random letters / a counter;
* ``nested``: edges whose props nest 60 levels deep.

Each file is applied (``apply_changes``) or imported (``import_records``) in a fresh subprocess on a copy of the
receiver, so peaks do not mix: ``refused`` or ``applied``, seconds, and ``growth_mb``, the peak RSS over the RSS
just before the call. ``real`` reports the budget's figures for the honest files (``changeset.budget_ratio``):
the compressed-byte rate C each needs, which the budget's C must exceed threefold.
"""

from __future__ import annotations

import argparse
import io
import itertools
import json
import math
import random
import shutil
import subprocess
import sys
import tempfile
import time
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the repository, for tests.conftest
from blake3 import blake3  # noqa: E402
from common import emit, environment, peak_rss_mb, progress  # noqa: E402

from tests.conftest import open_device  # noqa: E402
from worlddb_lite import WorldDBError  # noqa: E402
from worlddb_lite.store.hashing import canonical_json, edge_body, edge_id, node_body, node_id  # noqa: E402
from worlddb_lite.write.loaders import load  # noqa: E402

LOCOMO = Path(__file__).resolve().parents[2] / "shared" / "data" / "locomo" / "locomo10.json"
KINDS = ("changes", "export")
SENTENCE = "the same sentence again and again, "


def _forged(shape: str, anchor: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Endless valid records of ``shape`` naming the honest file's nodes (``anchor``: ids and a time)."""
    scope, entity, turn, at = anchor["scope"], anchor["entity"], anchor["turn"], anchor["at"]
    rng = random.Random(7)

    def edge(props: dict[str, Any], i: int) -> dict[str, Any]:
        valid = f"2023-01-01T00:00:00.{i % 1_000_000:06d}Z"
        raw = edge_id(edge_body("refers_to", turn, entity, valid, canonical_json(props))).hex()
        return {
            "kind": "edge", "id": raw, "type": "refers_to", "src": turn, "dst": entity, "world": scope,
            "slot": 0, "ord": 10**6 + i, "props": props, "valid_at": valid, "created_at": at,
            "invalid_at": None, "closed_at": None, "expired_at": None, "changes": [],
        }  # fmt: skip

    def note(content: str, props: dict[str, Any], i: int) -> dict[str, Any]:
        body = node_body("Note", scope, None, content, props, at)
        return {
            "kind": "node", "id": node_id(body).hex(), "type": "Note", "parent": scope, "slot": 0,
            "ord": 10**6 + i, "body": body, "valid_at": at, "invalid_at": None, "closed_at": None,
            "created_at": at, "expired_at": None, "retired": False, "salience": 0.0, "changes": [],
        }  # fmt: skip

    def alias(text: str) -> dict[str, Any]:
        return {"kind": "alias", "node": entity, "alias": text, "source": None, "created_at": at}

    if shape == "props_edge":
        yield edge({f"k{i}": 0 for i in range(anchor["keys"])}, 0)
        return
    for i in range(10**9):
        if shape == "props_edges":
            yield edge({f"k{i}.{j}": 0 for j in range(1000)}, i)
        elif shape == "text_notes":
            yield note(f"{i} " + SENTENCE * (500_000 // len(SENTENCE) - 1), {}, i)
        elif shape == "body_props":
            yield note(f"note {i}", {f"k{j}": i for j in range(5000)}, i)
        elif shape == "random_aliases":
            yield alias("".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(12)))
        elif shape == "tiny_aliases":
            yield alias(f"a{i}")
        elif shape == "nested":
            props: dict[str, Any] = {"leaf": i}
            for _ in range(59):
                props = {"a": props}
            yield edge(props, i)
        else:
            raise SystemExit(f"no shape {shape!r}")


SHAPES = ("props_edge", "props_edges", "text_notes", "body_props", "random_aliases", "tiny_aliases", "nested")


def _grown(kind: str, honest: list[dict[str, Any]], records: Iterator[dict[str, Any]], size: int) -> bytes:
    """The honest file with forged records appended until it holds about ``size`` bytes (streamed: a text set
    inflates to gigabytes)."""
    if kind == "export":
        # the forger leaves out the logged roots, which its new members would not recompute to
        lines = [json.dumps({k: v for k, v in r.items() if k != "roots"}).encode() + b"\n" for r in honest]
        total = sum(map(len, lines))
        for record in records:
            lines.append(json.dumps(record).encode() + b"\n")
            total += len(lines[-1])
            if total > size:
                lines.pop()
                break
        return b"".join(lines)
    packer, hasher, out, count, total = zlib.compressobj(6), blake3(), [], -1, 0
    for record in itertools.chain(honest, records):
        line = json.dumps(record, ensure_ascii=False, sort_keys=True, separators=(",", ":")).encode() + b"\n"
        hasher.update(line)
        out.append(packer.compress(line))
        total, count = total + len(out[-1]), count + 1
        if total > size:  # compressed output lags by up to zlib's window: a little past size
            break
    end = {"digest": hasher.hexdigest(), "kind": "end", "records": count}
    out.append(packer.compress(json.dumps(end, sort_keys=True, separators=(",", ":")).encode() + b"\n"))
    return b"".join(out) + packer.flush()


def _props_keys(kind: str, honest: list[dict[str, Any]], anchor: dict[str, Any], size: int) -> int:
    """As many tiny keys as one edge's props hold within ``size`` (a bisection on the file's size)."""
    low, high = 1, 8 * size
    while high - low > max(1000, low // 100):
        mid = (low + high) // 2
        data = _grown(kind, honest, _forged("props_edge", {**anchor, "keys": mid}), 10**12)
        low, high = (mid, high) if len(data) <= size else (low, mid)
    return low


def build(folder: Path, size: int, shapes: list[str], conversations: int, locomo: Path) -> dict[str, Any]:
    """The receiver's store (``receiver.db``), the honest files and each hostile one, in ``folder``."""
    sender = open_device(folder / "sender.db")
    sender.replica(folder / "receiver.db")
    receiver = open_device(folder / "receiver.db", 5)
    for conversation in load(locomo, "locomo")[:conversations]:
        sender.ingest(conversation)
    buffer = io.BytesIO()
    sender.changes(buffer, since=receiver.sync_token())
    honest = {"changes": buffer.getvalue(), "export": b"".join(json.dumps(r).encode() + b"\n" for r in sender.export())}
    records = {
        "changes": [json.loads(line) for line in zlib.decompress(honest["changes"]).splitlines()[:-1]],
        "export": [json.loads(line) for line in honest["export"].splitlines()],
    }
    sender.close()
    receiver.close()
    nodes = [r for r in records["changes"] if r["kind"] == "node"]
    anchor = {
        "scope": next(r["id"] for r in nodes if r["type"] == "Scope"),
        "entity": next(r["id"] for r in nodes if r["type"] == "Entity"),
        "at": max(r["created_at"] for r in nodes),
    }
    anchor["turn"] = next(
        r["id"] for r in nodes if r["type"] == "Turn" and json.loads(r["body"])["parent"] != anchor["scope"]
    )
    files: dict[str, str] = {}
    for kind, honest_data in honest.items():
        files[f"honest/{kind}"] = str(folder / f"honest.{kind}")
        Path(files[f"honest/{kind}"]).write_bytes(honest_data)
        for shape in shapes:
            progress(f"building {shape} ({kind})")
            extra = {"keys": _props_keys(kind, records[kind], anchor, size)} if shape == "props_edge" else {}
            data = _grown(kind, records[kind], _forged(shape, {**anchor, **extra}), size)
            files[f"{shape}/{kind}"] = str(folder / f"{shape}.{kind}")
            Path(files[f"{shape}/{kind}"]).write_bytes(data)
    return files


def _status_mb(field: str) -> float:
    """A figure of /proc/self/status in MB (VmRSS now, VmHWM the peak; ru_maxrss would include the parent's)."""
    with open("/proc/self/status") as status:
        kb = next(line.split()[1] for line in status if line.startswith(field + ":"))
    return int(kb) / 1024


def one(receiver: str, path: str, kind: str) -> dict[str, Any]:
    """Apply or import ``path`` into a copy of ``receiver`` (run in a fresh process): verdict, seconds, growth."""
    copy = Path(tempfile.mkdtemp()) / "receiver.db"
    shutil.copyfile(receiver, copy)
    db = open_device(copy, 10)
    call: Callable[[], Any] = (lambda: db.apply_changes(path)) if kind == "changes" else (
        lambda: db.import_records(path)
    )  # fmt: skip
    before_root = db.root()
    with open("/proc/self/clear_refs", "w") as clear:
        clear.write("5")  # the peak (VmHWM) starts again from the RSS now
    base = _status_mb("VmRSS")
    started = time.perf_counter()
    try:
        call()
        verdict, why = "applied", ""
    except WorldDBError as exc:
        verdict, why = "refused", str(exc)[:300]
    seconds = time.perf_counter() - started
    growth = _status_mb("VmHWM") - base
    unchanged = db.root() == before_root if verdict == "refused" else None
    db.close()
    shutil.rmtree(copy.parent)
    return {
        "verdict": verdict,
        "seconds": round(seconds, 2),
        "growth_mb": round(max(growth, 0.0), 1),
        "unchanged": unchanged,
        "why": why,
    }


def real_ratios(files: dict[str, str]) -> dict[str, Any]:
    """What each honest change set needs of the budget: ``rate``, the least ``COST_RATE`` it passes with (its
    ``COST_SLACK`` helps a small set), and ``cost_per_byte``, its whole cost over its compressed bytes (what a
    large set of such records needs)."""
    from worlddb_lite.sync import changeset

    if not hasattr(changeset, "line_cost"):  # a run against a tree without the budget
        return {}
    out = {}
    for name, path in files.items():
        if name == "honest/changes" or name.startswith("real/"):
            data = Path(path).read_bytes()
            cost = sum(map(changeset.line_cost, zlib.decompress(data).splitlines(keepends=True)))
            rate = changeset.read(data, rate=math.inf).rate
            out[name] = {"bytes": len(data), "rate": round(rate, 1), "cost_per_byte": round(cost / len(data), 1)}
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Peak memory of hostile change sets and exports")
    parser.add_argument("--size", type=int, default=2_000_000, help="bytes of each hostile file")
    parser.add_argument("--shapes", default=",".join(SHAPES))
    parser.add_argument("--kinds", default=",".join(KINDS))
    parser.add_argument("--conversations", type=int, default=1, help="LoCoMo conversations the sender holds")
    parser.add_argument("--locomo", type=Path, default=LOCOMO, help="LoCoMo's locomo10.json")
    parser.add_argument("--real", nargs="*", default=[], help="more honest change sets to report the ratio of")
    parser.add_argument("--smoke", action="store_true", help="200 KB files, two shapes")
    parser.add_argument("--one", nargs=3, metavar=("RECEIVER", "FILE", "KIND"), help=argparse.SUPPRESS)
    parser.add_argument("--json", dest="out")
    args = parser.parse_args(argv)
    if args.one:
        print(json.dumps(one(*args.one)))
        return 0
    if args.smoke:
        args.size, args.shapes = 200_000, "props_edge,text_notes"
    shapes, kinds = args.shapes.split(","), args.kinds.split(",")
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        files = build(folder, args.size, shapes, args.conversations, args.locomo)
        files.update({f"real/{Path(p).name}": p for p in args.real})
        runs: dict[str, Any] = {}
        for name, path in files.items():
            kind = name.split("/")[1] if not name.startswith("real/") else "changes"
            if kind not in kinds:
                continue
            done = subprocess.run(
                [sys.executable, __file__, "--one", str(folder / "receiver.db"), path, kind],
                capture_output=True,
                text=True,
                check=False,
            )
            if done.returncode != 0:
                raise SystemExit(f"{name}: {done.stderr[-2000:]}")
            runs[name] = {"bytes": Path(path).stat().st_size, **json.loads(done.stdout.splitlines()[-1])}
            r = runs[name]
            progress(f"{name}: {r['bytes']:,} bytes, {r['verdict']} in {r['seconds']} s, +{r['growth_mb']} MB")
        ratios = real_ratios(files)
    result = {
        "benchmark": "file_memory",
        "size": args.size,
        "conversations": args.conversations,
        "runs": runs,
        "real": ratios,
        "worst_growth_mb": max((r["growth_mb"] for r in runs.values()), default=0.0),
        "seconds": round(time.perf_counter() - started, 1),
        "peak_rss_mb": peak_rss_mb(),
        "environment": environment(),
    }
    emit(result, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
