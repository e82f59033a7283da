"""The memory budget of reading a change set (``changeset.line_cost``): hostile shapes refused early, real sets read.

bench/file_memory.py measures the peaks; these check the refusals and that honest sets still apply.
"""

from __future__ import annotations

import io
import json
import math
import zlib
from pathlib import Path
from typing import Any

import pytest
from blake3 import blake3

from worlddb_lite import WorldDB
from worlddb_lite.errors import InvalidInput
from worlddb_lite.store.hashing import canonical_json, edge_body, edge_id
from worlddb_lite.sync import changeset
from worlddb_lite.write.loaders import load

from .conftest import open_device, table_digest

# ../shared/data beside the repository, or beside the folder of a worktree
_FOUND = (p / "shared" / "data" / "locomo" / "locomo10.json" for p in Path(__file__).resolve().parents)
LOCOMO = next((path for path in _FOUND if path.exists()), Path("missing"))
HEADER = {"kind": "header", "format": "worlddb-changes", "version": 1}


def _sealed(records: list[dict[str, Any]], header: dict[str, Any] | None = None) -> bytes:
    lines = [
        json.dumps(r, sort_keys=True, separators=(",", ":")).encode() + b"\n" for r in [header or HEADER, *records]
    ]
    body = b"".join(lines)
    end = {"digest": blake3(body).hexdigest(), "kind": "end", "records": len(records)}
    return zlib.compress(body + json.dumps(end).encode() + b"\n")


def _refused_by_budget(data: bytes) -> str:
    with pytest.raises(InvalidInput) as caught:
        changeset.read(data)
    message = caught.value.message  # without the hint's "(next: ...)"
    assert "memory" in message and "hostile set" in message and message.endswith("nothing was applied")
    return message


def test_one_record_of_a_million_tiny_props_keys_is_refused_before_it_is_parsed() -> None:
    data = _sealed([{"kind": "edge", "props": {f"k{i}": 0 for i in range(300_000)}}])
    assert len(data) < 1_000_000
    assert "than the 16 MB of the longest record" in _refused_by_budget(data)


@pytest.mark.parametrize(
    ("record", "count"),
    [
        (lambda i: {"kind": "node", "text": "the same sentence again, " * 16_000 + str(i)}, 100),  # 400 KB ~1000:1
        (lambda i: {"kind": "edge", "props": json.loads('{"a":' * 60 + str(i) + "}" * 60)}, 3000),  # 60 deep
    ],
    ids=["repetitive text", "deep nesting"],
)
def test_many_records_that_inflate_to_more_than_the_rate_allows_are_refused(record: Any, count: int) -> None:
    message = _refused_by_budget(_sealed([record(i) for i in range(count)]))
    assert f"{changeset.COST_RATE} bytes a compressed byte" in message


def test_many_tiny_aliases_are_refused() -> None:
    data = _sealed([{"kind": "alias", "alias": f"a{i}"} for i in range(400_000)])
    with pytest.raises(InvalidInput, match="hostile set"):
        changeset.read(data)


def test_a_500_000_character_repetitive_note_fits_in_the_slack_and_its_set_reads() -> None:
    note = {"kind": "node", "text": ("a long note said over and over, " * 20_000)[:500_000]}
    data = _sealed([note, *({"kind": "alias", "alias": f"{i:064x}"} for i in range(100))])
    assert len(zlib.decompress(data)) / len(data) > 100  # it compresses far beyond any rate
    assert changeset.read(data).records[0] == note


def _pair(tmp_path: Path) -> tuple[WorldDB, WorldDB]:
    a = open_device(tmp_path / "a.db")
    a.replica(tmp_path / "b.db")
    return a, open_device(tmp_path / "b.db", 7)


def test_a_hostile_set_is_refused_by_apply_with_the_store_unchanged(tmp_path: Path) -> None:
    a, b = _pair(tmp_path)
    turn = a.write("Ana met Dana", scope="ana")
    dana = a.write("Dana", scope="ana", type="Entity", name="Dana")
    buffer = io.BytesIO()
    a.changes(buffer, since=b.sync_token())
    records = [json.loads(line) for line in zlib.decompress(buffer.getvalue()).splitlines()]
    world = next(r["parent"] for r in records if r.get("id") == turn)
    valid, props = "2024-01-01T00:00:00.000000Z", {f"k{i}": 0 for i in range(300_000)}
    raw = edge_id(edge_body("refers_to", turn, dana, valid, canonical_json(props))).hex()
    edge = {
        "kind": "edge", "id": raw, "type": "refers_to", "src": turn, "dst": dana, "world": world, "slot": 0,
        "ord": 99, "props": props, "valid_at": valid, "created_at": records[1]["created_at"], "changes": [],
    }  # fmt: skip
    data = _sealed([*records[1:-1], edge], header=records[0])
    before = table_digest(b)
    with pytest.raises(InvalidInput, match="hostile set"):
        b.apply_changes(data)
    assert table_digest(b) == before
    b.apply_changes(buffer.getvalue())  # the honest set still applies
    a.close()
    b.close()


@pytest.mark.skipif(not LOCOMO.exists(), reason="LoCoMo is not in ../shared/data")
def test_real_sets_and_an_export_apply_with_room_to_spare(tmp_path: Path) -> None:
    a, b = _pair(tmp_path)
    a.ingest(load(LOCOMO, "locomo")[0])
    buffer = io.BytesIO()
    a.changes(buffer, since=b.sync_token())
    cost = sum(map(changeset.line_cost, zlib.decompress(buffer.getvalue()).splitlines(keepends=True)))
    assert cost / len(buffer.getvalue()) * 3 <= changeset.COST_RATE  # many times this set would still read
    for i in range(3):  # long repetitive notes: each compresses ~1000:1
        a.write(f"{i} " + ("the weekly report says the same thing, " * 13_000)[:499_990], scope="notes")
    buffer = io.BytesIO()
    a.changes(buffer, since=b.sync_token())
    data = buffer.getvalue()
    assert changeset.read(data, rate=math.inf).rate * 3 <= changeset.COST_RATE
    assert b.apply_changes(data)["roots_agree"]
    fresh = open_device(tmp_path / "c.db")
    (tmp_path / "export.jsonl").write_text("".join(json.dumps(r) + "\n" for r in a.export()))
    assert fresh.import_records(tmp_path / "export.jsonl")["roots_agree"]
    for db in (a, b, fresh):
        db.close()
