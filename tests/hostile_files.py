"""The harness behind tests/test_hostile_files.py and bench/fuzz_files.py: forged files in, a verdict out.

A forged file is a real change set (``changes`` between two replicas) or a real export (``export``), altered
field by field and then sealed again as a well-formed file: a change set's end line gets the right record count
and the blake3 digest of the bytes before it, and (when a mutation asks) a node whose body changed gets the id
of its new body, with every reference to it renamed and every edge that names it re-hashed. The integrity check
cannot tell such a file from an honest one; only the checks on what the records say can.

Each mutant is applied to a fresh copy of the receiving store, and the verdict is one of:

* ``refused``: a ``WorldDBError``, and the receiver's tables and root exactly as before;
* ``applied``: no error, and then ``verify(deep=True)`` passes, an ordinary write, ``recall``, ``search`` and
  ``list_memories`` work, and a sync of both ways with the sender reports ``converged`` (for an import into a
  store that is no replica of the sender this last step is left out: an honest import does not converge there);
* ``failure``: anything else (another exception type at any step, a refusal that changed the store, a deep
  verify that fails, a sync that does not converge).

The mutations are plain data (``Mutation``) so that hypothesis (the tests) and ``random`` (the bench) draw from
the same catalogue: ``FAMILIES`` maps each family to the function that draws one of its mutations.
"""

from __future__ import annotations

import atexit
import datetime as dt
import io
import json
import random
import re
import shutil
import tempfile
import threading
import zlib
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from blake3 import blake3

from worlddb_lite import WorldDB, WorldDBError
from worlddb_lite.store.hashing import canonical_json, edge_body, edge_id, node_id
from worlddb_lite.text.extract import RuleExtractor

from .conftest import START, FakeClock, FakeEmbedder, table_digest

# ---- the honest files ---------------------------------------------------------------------------------------

TARGETS = ("changes", "full", "export-replica", "export-fresh")
# changes: the set the receiver's token asks for; full: everything (since=None); export-replica: the sender's
# export imported into its replica; export-fresh: the same export imported into a store made apart


class Raw:
    """JSON text written as it stands (a value json.dumps cannot write: 100,000 levels, 5,000 digits)."""

    def __init__(self, text: str, label: str) -> None:
        self.text = text
        self.label = label

    def __repr__(self) -> str:
        return f"Raw({self.label})"


def _dumps(obj: Any, *, compact: bool) -> str:
    """``obj`` as JSON (compact and sorted, as a change set's lines are), each ``Raw`` spliced in as written."""
    raws: list[str] = []

    def swap(value: Any) -> Any:
        if isinstance(value, Raw):
            raws.append(value.text)
            return f"\x00raw{len(raws) - 1}\x00"
        if isinstance(value, dict):
            return {k: swap(v) for k, v in value.items()}
        if isinstance(value, list):
            return [swap(v) for v in value]
        return value

    if compact:
        text = json.dumps(swap(obj), ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    else:
        text = json.dumps(swap(obj))
    for i, raw in enumerate(raws):
        text = text.replace(f'"\\u0000raw{i}\\u0000"', raw)
    return text


def seal(records: list[dict[str, Any]]) -> bytes:
    """A header and records as a change set whose end line is right: count and digest agree with the lines."""
    body = b"".join(_dumps(r, compact=True).encode("utf-8") + b"\n" for r in records)
    end = {"digest": blake3(body).hexdigest(), "kind": "end", "records": len(records) - 1}
    return zlib.compress(body + _dumps(end, compact=True).encode("utf-8") + b"\n", 6)


def unseal(data: bytes) -> list[dict[str, Any]]:
    """The header and records of an honest change set (the end line dropped: ``seal`` writes it again)."""
    lines = zlib.decompress(data).splitlines()
    return [json.loads(line) for line in lines[:-1]]


def export_lines(records: list[dict[str, Any]]) -> list[str]:
    return [_dumps(r, compact=False) for r in records]


@dataclass
class Template:
    """Closed store files to copy for each mutant, and the honest files their sender wrote."""

    folder: Path
    sets: dict[str, list[dict[str, Any]]]  # target -> header and records (a change set's, or an export's)

    def open(self, name: str, into: Path, offset: dt.timedelta) -> WorldDB:
        for suffix in ("", "-wal"):
            src = self.folder / f"{name}.db{suffix}"
            if src.exists():
                shutil.copyfile(src, into / f"{name}.db{suffix}")
        # each copy on a clock past everything the template wrote, the receiver's a little ahead
        clock = FakeClock(start=START + dt.timedelta(days=2) + offset)
        return WorldDB(into / f"{name}.db", embedder=FakeEmbedder(), clock=clock)


def _scenario(a: WorldDB, b: WorldDB) -> None:
    """Writes on both replicas after they parted: notes, facts, an amend, a retire, a retract, entities, aliases,
    a same_as accepted and one rejected, a pending one, refers_to links, a purge and a deferred note."""
    lisbon = a.write("I live in Lisbon", scope="ana", extractor=RuleExtractor(), valid_at="2024-01-01")
    a.amend(lisbon, "I live in Porto", valid_at="2024-06-01")
    a.write("My sister Maria works at Google", scope="ana", extractor=RuleExtractor())
    old = a.write("The wifi password is hunter2", scope="ana")
    a.retire(old)
    doubt = a.write("Bob may visit in May", scope="bob")
    a.retract(doubt)
    dana, dana_s, eva, evie, rex = (
        a.write(n, scope="ana", type="Entity", name=n) for n in ("Dana", "Dana S.", "Eva", "Evie", "Rex")
    )
    a.add_alias(dana, "my manager", source="a note")
    a.accept_merge(a.link(dana, dana_s, "same_as").pid)
    a.reject_merge(a.link(eva, evie, "same_as").pid)
    a.link(dana, rex, "same_as")  # left pending
    a.link(dana, eva, "refers_to")
    secret = a.write("the locker code is 4471", scope="bob")
    a.purge(secret)
    a.write("I moved to Braga", scope="ana", deferred=True)
    b.write("Bob plays chess on Sundays", scope="bob")
    kim = b.write("Kim", scope="ana", type="Entity", name="Kim")
    b.add_alias(kim, "the boss")


def build_template(folder: Path) -> Template:
    """Sender ``a``, its replica ``b`` (both wrote after the split) and ``c``, a store made apart."""
    folder.mkdir(parents=True, exist_ok=True)
    a = WorldDB(folder / "a.db", embedder=FakeEmbedder(), clock=FakeClock(start=START))
    try:
        a.write("Ana likes green tea", scope="ana")
        a.write("Bob likes coffee", scope="bob")
        a.replica(folder / "b.db")
        b = WorldDB(folder / "b.db", embedder=FakeEmbedder(), clock=FakeClock(start=START + dt.timedelta(seconds=7)))
        try:
            _scenario(a, b)
            sets: dict[str, list[dict[str, Any]]] = {}
            buffer = io.BytesIO()
            a.changes(buffer, since=b.sync_token())
            sets["changes"] = unseal(buffer.getvalue())
            buffer = io.BytesIO()
            a.changes(buffer)
            sets["full"] = unseal(buffer.getvalue())
            exported = [json.loads(json.dumps(r)) for r in a.export()]
            sets["export-replica"] = exported
            sets["export-fresh"] = exported
        finally:
            b.close()
        WorldDB(folder / "c.db", embedder=FakeEmbedder(), clock=FakeClock(start=START)).close()
    finally:
        a.close()
    return Template(folder, sets)


_TEMPLATE: Template | None = None
_TEMPLATE_LOCK = threading.Lock()


def template() -> Template:
    """One template per process (built in a temporary folder removed at exit)."""
    global _TEMPLATE
    with _TEMPLATE_LOCK:
        if _TEMPLATE is None:
            folder = Path(tempfile.mkdtemp(prefix="hostile-files-"))
            atexit.register(shutil.rmtree, folder, True)
            _TEMPLATE = build_template(folder / "template")
        return _TEMPLATE


# ---- the mutations -------------------------------------------------------------------------------------------

HEX64 = re.compile(r"^[0-9a-f]{64}$")
_REHASHED = " (re-hashed)"  # the node took the id of its new body, and every reference followed

HOSTILE_TIMES: list[Any] = [
    "9999-12-31T23:59:59.999999Z",
    "2030-13-45T25:61:61Z",
    "2024-02-30",
    "2024-02-30T00:00:00.000000Z",
    "2026-12-01T00:00:00Z",  # no fraction
    "2026-12-01T00:00:00.000000+02:00",
    "2026-12-01T00:00:00+02:00",
    "0001-01-01T00:00:00.000000Z",
    "0000-01-01T00:00:00.000000Z",
    "1969-12-31T23:59:59.999999Z",
    "",
    " ",
    "now",
    "2026-12-01T00:00:00.000000Z\x00",
    0,
    -1,
    1735689600,
    1.5,
    10**400,
    True,
    [],
    {},
]
HOSTILE_NUMBERS: list[Any] = [
    10**400,
    Raw("9" * 5000, "5000 digits"),  # past Python's int_max_str_digits: json.loads itself raises ValueError
    Raw("1e400", "1e400"),  # a float JSON cannot hold: it reads as inf
    Raw("-1e400", "-1e400"),
    -1,
    -(2**63) - 1,
    2**63,
    2**64,
    1.5,
    -0.0,
    1e308,
    0,
    True,
    "3",
    None,
    [],
]
HOSTILE_VALUES: list[Any] = [None, True, 0, -1, 10**400, 1.5, "", "x", [], {}, [None], {"a": None}, "\x00", "\ud7ff"]
EDGE_TYPES = ["same_as", "refers_to", "contains", "supersedes", "contradicts", "derived_from", "mentors", "frobs", ""]
KINDS = ["node", "edge", "alias", "proposal", "queued", "tombstone", "header", "end", "nodes", "", "NODE", "x" * 300]


@dataclass
class Mutation:
    """One alteration of an honest file, as data: ``apply`` turns a copy of the records into the mutant."""

    family: str
    target: str
    what: str  # e.g. "node.valid_at = '2024-02-30'": the record's kind, the field and the value
    apply: Callable[[list[dict[str, Any]]], list[dict[str, Any]]] = field(repr=False)
    rehash: bool = False

    @property
    def field_name(self) -> str:
        return self.what.split(" ", 1)[0]


class Draw:
    """Choices for a mutation: hypothesis's ``data.draw`` in the tests, a ``random.Random`` in the bench."""

    def __init__(self, pick: Callable[[list[Any], str], Any], integer: Callable[[int, int, str], int]) -> None:
        self.pick = pick
        self.integer = integer

    @classmethod
    def from_random(cls, rng: random.Random) -> Draw:
        return cls(lambda options, _label: rng.choice(options), lambda lo, hi, _label: rng.randint(lo, hi))


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 48 else f"{text[:40]}...({len(text)} chars)"


def _paths(record: dict[str, Any], test: Callable[[str, Any], bool]) -> list[tuple[str | int, ...]]:
    """Paths (keys and list indexes) to every value of ``record`` that ``test(key, value)`` selects."""
    found: list[tuple[str | int, ...]] = []

    def walk(value: Any, path: tuple[str | int, ...], key: str) -> None:
        if path and test(key, value):
            found.append(path)
        if isinstance(value, dict):
            for k, v in value.items():
                walk(v, (*path, k), k)
        elif isinstance(value, list):
            for i, v in enumerate(value):
                walk(v, (*path, i), f"{key}[{i}]")

    walk(record, (), "")
    return found


def _set(record: dict[str, Any], path: tuple[str | int, ...], value: Any) -> None:
    target: Any = record
    for step in path[:-1]:
        target = target[step]
    target[path[-1]] = value


def _name(record: dict[str, Any], path: tuple[str | int, ...]) -> str:
    return f"{record.get('kind')}." + ".".join(str(p) for p in path)


def _ids(records: list[dict[str, Any]], kind: str = "node") -> list[str]:
    return [r["id"] for r in records if r.get("kind") == kind and isinstance(r.get("id"), str)]


def _rename(records: list[dict[str, Any]], old: str, new: str) -> None:
    """Every mention of node id ``old`` (fields, and the text of other nodes' bodies) becomes ``new``."""

    def swap(value: Any) -> Any:
        if isinstance(value, str) and old in value:
            return value.replace(old, new)
        if isinstance(value, dict):
            return {swap(k): swap(v) for k, v in value.items()}
        if isinstance(value, list):
            return [swap(v) for v in value]
        return value

    for i, record in enumerate(records):
        records[i] = swap(record)


def rehash(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Give every node the id of its body and every edge the id of its endpoints, type, time and props, so that a
    changed body is a well-formed new node (renamed wherever it is named) and not a refused id mismatch."""
    for _ in range(64):  # a renamed parent changes its children's bodies: repeat until nothing moves
        moved = False
        for record in records:
            if record.get("kind") != "node" or not isinstance(record.get("body"), str):
                continue
            try:
                fresh = node_id(record["body"]).hex()
            except Exception:  # a body the hash function cannot take stays as it is  # noqa: BLE001
                continue
            old = record.get("id")
            if isinstance(old, str) and HEX64.match(old) and fresh != old:
                _rename(records, old, fresh)
                moved = True
                break
        if not moved:
            break
    for record in records:
        if record.get("kind") != "edge":
            continue
        try:
            props = canonical_json(record["props"])
            record["id"] = edge_id(
                edge_body(record["type"], record["src"], record["dst"], record["valid_at"], props)
            ).hex()
        except Exception:  # noqa: BLE001  (a field the mutation made unhashable: the id stays)
            pass
    return records


def _edit_body(record: dict[str, Any], edit: Callable[[dict[str, Any]], None]) -> None:
    body = json.loads(record["body"])
    edit(body)
    record["body"] = _dumps(body, compact=True) if _has_raw(body) else canonical_json(body)


def _has_raw(value: Any) -> bool:
    if isinstance(value, Raw):
        return True
    if isinstance(value, dict):
        return any(_has_raw(v) for v in value.values())
    if isinstance(value, list):
        return any(_has_raw(v) for v in value)
    return False


def _pick_record(
    draw: Draw, records: list[dict[str, Any]], kinds: tuple[str, ...] | None = None, header: bool = False
) -> int:
    options = [i for i, r in enumerate(records) if (header or i > 0) and (kinds is None or r.get("kind") in kinds)]
    return draw.pick(options or [len(records) - 1], "record")


def _field_mutation(
    draw: Draw,
    target: str,
    records: list[dict[str, Any]],
    family: str,
    select: Callable[[str, Any], bool],
    values: list[Any],
    *,
    header: bool = True,
    body_too: bool = False,
) -> Mutation:
    """Replace one selected value (a top-level field, a nested one, or one inside a node's hashed body)."""
    candidates: list[tuple[int, tuple[str | int, ...], bool]] = []
    for i, record in enumerate(records):
        if i == 0 and not header:
            continue
        candidates += [(i, path, False) for path in _paths(record, select)]
        if body_too and record.get("kind") == "node" and isinstance(record.get("body"), str):
            candidates += [(i, path, True) for path in _paths(json.loads(record["body"]), select)]
    index, path, in_body = draw.pick(candidates, f"{family} field")
    value = draw.pick(values, f"{family} value")
    again = in_body and draw.pick([True, False], "rehash")
    where = _name(records[index], ("body", *path) if in_body else path)

    def apply(rs: list[dict[str, Any]]) -> list[dict[str, Any]]:
        if in_body:
            _edit_body(rs[index], lambda body: _set(body, path, value))
        else:
            _set(rs[index], path, value)
        return rehash(rs) if again else rs

    return Mutation(family, target, f"{where} = {_short(value)}{_REHASHED if again else ''}", apply, again)


STAMP = re.compile(r"^\d{4}-\d\d-\d\dT")


def _is_time(key: str, value: Any) -> bool:
    """A field named ``..._at``, a time in a state's change list, or any text that is a time (a world's root log)."""
    if key.endswith("_at"):
        return True
    if key.startswith("changes[") and (value is None or isinstance(value, str)):
        return True
    return isinstance(value, str) and bool(STAMP.match(value))


def times(draw: Draw, target: str, records: list[dict[str, Any]]) -> Mutation:
    return _field_mutation(draw, target, records, "time", _is_time, HOSTILE_TIMES, body_too=True)


def numbers(draw: Draw, target: str, records: list[dict[str, Any]]) -> Mutation:
    def numeric(_key: str, value: Any) -> bool:
        return isinstance(value, (int, float)) and not isinstance(value, bool)

    return _field_mutation(draw, target, records, "number", numeric, HOSTILE_NUMBERS)


def wrong_types(draw: Draw, target: str, records: list[dict[str, Any]]) -> Mutation:
    def anything(key: str, _value: Any) -> bool:
        return "[" not in key or key.startswith("changes[")

    return _field_mutation(draw, target, records, "type", anything, HOSTILE_VALUES, body_too=True)


def ids(draw: Draw, target: str, records: list[dict[str, Any]]) -> Mutation:
    known = _ids(records) + _ids(records, "edge")
    some = draw.pick(known, "an id")
    missing = blake3(b"never written").hexdigest()
    values = [
        some[:63],
        some[:32],
        some + "00",
        "zz" * 32,
        some.upper(),
        some[:62] + "g0",
        "",
        missing,
        draw.pick(known, "another id"),
        draw.pick(known, "another id"),
        "00" * 32,
    ]

    def hexy(key: str, value: Any) -> bool:
        return isinstance(value, str) and bool(HEX64.match(value))

    mutation = _field_mutation(draw, target, records, "id", hexy, values)
    if draw.pick([False, True], "rename a key of the header's roots"):  # the roots dict keys are ids too
        fake = draw.pick(values, "root key")

        def roots(rs: list[dict[str, Any]]) -> list[dict[str, Any]]:
            for key in ("roots", "worlds"):
                if isinstance(rs[0].get(key), dict) and rs[0][key]:
                    first = next(iter(rs[0][key]))
                    rs[0][key] = {fake: rs[0][key].pop(first), **rs[0][key]}
            return rs

        return Mutation("id", target, f"header.roots key = {_short(fake)}", roots)
    return mutation


def edges(draw: Draw, target: str, records: list[dict[str, Any]]) -> Mutation:
    """An edge the sender never wrote, well formed and with the id of what it says: a same_as without an accepted
    proposal, a self-loop, a type nobody registered, an end that is in neither store nor set."""
    template_edges = [r for r in records if r.get("kind") == "edge"]
    nodes = [r for r in records if r.get("kind") == "node" and r.get("type") != "Scope"]
    entities = [r["id"] for r in nodes if r.get("type") == "Entity"] or [r["id"] for r in nodes]
    base = dict(draw.pick(template_edges, "template edge"))
    shape = draw.pick(["same_as", "self-loop", "unknown type", "missing end", "any", "retype"], "edge shape")
    edge_type = draw.pick(EDGE_TYPES, "edge type")
    src = draw.pick(entities, "src")
    dst = draw.pick(entities, "dst")
    if shape == "same_as":
        edge_type = "same_as"
    elif shape == "self-loop":
        dst = src
    elif shape == "unknown type":
        edge_type = draw.pick(["frobs", "mentors", "", "SAME_AS", "same_as ", "x" * 200], "unknown type")
    elif shape == "missing end":
        which = draw.pick(["src", "dst", "both"], "end")
        gone = blake3(b"no such node").hexdigest()
        src = gone if which in ("src", "both") else src
        dst = gone if which in ("dst", "both") else dst
    if shape == "retype":  # an honest edge given another type (re-hashed: a new edge, not a mismatch)
        index = records.index(draw.pick(template_edges, "edge to retype"))

        def retype(rs: list[dict[str, Any]]) -> list[dict[str, Any]]:
            rs[index]["type"] = edge_type
            return rehash(rs)

        return Mutation("edge", target, f"edge.type = {edge_type!r} (re-hashed)", retype, True)
    valid_at = draw.pick([base["valid_at"], "2024-01-01T00:00:00.000000Z", "9999-12-31T23:59:59.999999Z"], "time")
    forged = {**base, "type": edge_type, "src": src, "dst": dst, "valid_at": valid_at, "changes": []}
    forged.update(invalid_at=None, closed_at=None, expired_at=None)
    forged["id"] = edge_id(edge_body(edge_type, src, dst, valid_at, canonical_json(forged["props"]))).hex()
    mirror = draw.pick([False, True], "with its mirror")
    at = draw.integer(1, len(records), "position")

    def add(rs: list[dict[str, Any]]) -> list[dict[str, Any]]:
        extra = [forged]
        if mirror:
            back = {**forged, "src": dst, "dst": src}
            back["id"] = edge_id(edge_body(edge_type, dst, src, valid_at, canonical_json(back["props"]))).hex()
            extra.append(back)
        return [*rs[:at], *extra, *rs[at:]]

    return Mutation("edge", target, f"edge.{shape} type={edge_type!r} mirror={mirror}", add)


def proposals(draw: Draw, target: str, records: list[dict[str, Any]]) -> Mutation:
    """A merge proposal forged: accepted for a pair with no same_as edges, between a node and itself, between
    non-entities, or with a status nobody uses."""
    nodes = _ids(records)
    base = next((r for r in records if r.get("kind") == "proposal"), None) or {
        "kind": "proposal",
        "score": None,
        "tier": "manual",
        "reason": "same_as requested",
        "proposed_at": "2025-01-01T00:00:01.000000Z",
        "decided_at": None,
    }
    a = draw.pick(nodes, "a")
    b = draw.pick([a, *nodes], "b")
    status = draw.pick(["accepted", "rejected", "pending", "maybe", ""], "status")
    forged = {**base, "a": a, "b": b, "status": status}
    forged["decided_at"] = None if status == "pending" else "2025-01-01T00:00:02.000000Z"
    return Mutation("proposal", target, f"proposal status={status!r} self={a == b}", lambda rs: [*rs, forged])


def states(draw: Draw, target: str, records: list[dict[str, Any]]) -> Mutation:
    """A node's state that contradicts its own hashed body or itself: valid before the body says, closed before
    valid, expired before created, retired with no close, purged with its text, text-less and not purged."""
    index = _pick_record(draw, records, ("node", "edge"))
    record = records[index]
    case = draw.pick(
        [
            "valid before body",
            "invalid before valid",
            "closed before created",
            "expired before created",
            "retired open",
            "purged with text",
            "no text not purged",
            "changes junk",
            "changes reversed",
        ],
        "state",
    )
    inside = None
    if isinstance(record.get("body"), str):
        inside = json.loads(record["body"]).get("valid_at")
    earlier = "2000-01-01T00:00:00.000000Z"

    def apply(rs: list[dict[str, Any]]) -> list[dict[str, Any]]:
        r = rs[index]
        if case == "valid before body":
            r["valid_at"] = earlier if inside is None else _minus_day(inside)
        elif case == "invalid before valid":
            r["invalid_at"], r["closed_at"] = earlier, r.get("created_at")
        elif case == "closed before created":
            r["closed_at"], r["invalid_at"] = earlier, r.get("invalid_at") or r.get("valid_at")
        elif case == "expired before created":
            r["expired_at"] = earlier
        elif case == "retired open":
            r["retired"], r["invalid_at"], r["closed_at"] = True, None, None
        elif case == "purged with text":
            r["purged_at"] = r.get("created_at")
        elif case == "no text not purged":
            r["body"] = None
            r.pop("purged_at", None)
        elif case == "changes junk":
            r["changes"] = [[earlier, None, None, None, False], ["x", 1, [], {}, "yes"], []]
        else:
            r["changes"] = list(reversed(r.get("changes") or [])) + [[earlier, earlier, earlier, earlier, True]]
        return rs

    return Mutation("state", target, f"{record.get('kind')}.{case.replace(' ', '_')}", apply)


def _minus_day(stamp: str) -> str:
    try:
        when = dt.datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%S.%fZ")
    except ValueError:
        return "2000-01-01T00:00:00.000000Z"
    return (when - dt.timedelta(days=1)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def nesting(draw: Draw, target: str, records: list[dict[str, Any]]) -> Mutation:
    depth = draw.pick([64, 1000, 5000, 100_000], "depth")
    shape = draw.pick(["list", "dict"], "shape")
    text = "[" * depth + "]" * depth if shape == "list" else '{"a":' * depth + "null" + "}" * depth
    deep = Raw(text, f"{depth} nested {shape}s")
    spot = draw.pick(["field", "props", "body props", "body content"], "where")
    index = _pick_record(draw, records, ("node",) if spot.startswith("body") else ("node", "edge", "alias", "proposal"))
    record = records[index]
    if spot == "field":
        key = draw.pick(sorted(k for k in record if k != "kind"), "field")
    else:
        key = "props"
    again = spot.startswith("body") and draw.pick([True, False], "rehash")

    def apply(rs: list[dict[str, Any]]) -> list[dict[str, Any]]:
        r = rs[index]
        if spot == "field":
            r[key] = deep
        elif spot == "props":
            r["props"] = {"deep": deep}
        elif not isinstance(r.get("body"), str):
            r["body"] = _dumps({"content": deep}, compact=True)
        elif spot == "body props":
            _edit_body(r, lambda body: body.__setitem__("props", {"deep": deep}))
        else:
            _edit_body(r, lambda body: body.__setitem__("content", deep))
        return rehash(rs) if again else rs

    where = f"{record.get('kind')}.{key if spot == 'field' else spot.replace(' ', '.')}"
    return Mutation("nesting", target, f"{where} = {deep!r}{_REHASHED if again else ''}", apply, again)


def sizes(draw: Draw, target: str, records: list[dict[str, Any]]) -> Mutation:
    megabytes = draw.pick([1, 3], "megabytes")
    letters = draw.pick(["a", "é", "日本 ", "\u2028"], "letters")
    big = (letters * (megabytes << 20))[: megabytes << 20]  # that many characters (up to 3 bytes each in UTF-8)
    index = _pick_record(draw, records, header=True)
    record = records[index]
    strings = sorted(k for k, v in record.items() if isinstance(v, str) and k != "kind") or ["extra"]
    key = draw.pick([*strings, "body content", "props"], "field")
    if key in ("body content", "props") and record.get("kind") not in ("node", "edge"):
        key = strings[0]
    again = key == "body content" and draw.pick([True, False], "rehash")

    def apply(rs: list[dict[str, Any]]) -> list[dict[str, Any]]:
        r = rs[index]
        if key == "body content":
            if isinstance(r.get("body"), str):
                _edit_body(r, lambda body: body.__setitem__("content", big))
            else:
                r["body"] = big
        elif key == "props":
            r["props"] = {"long": big}
        else:
            r[key] = big
        return rehash(rs) if again else rs

    where = f"{record.get('kind')}.{key.replace(' ', '.')}"
    return Mutation("size", target, f"{where} = {megabytes} MB{_REHASHED if again else ''}", apply, again)


def drops(draw: Draw, target: str, records: list[dict[str, Any]]) -> Mutation:
    index = _pick_record(draw, records, header=True)
    record = records[index]
    key = draw.pick(sorted(k for k in record if k != "kind") or ["kind"], "field")

    def apply(rs: list[dict[str, Any]]) -> list[dict[str, Any]]:
        rs[index].pop(key, None)
        return rs

    return Mutation("drop", target, f"{record.get('kind')}.{key} dropped", apply)


def duplicates(draw: Draw, target: str, records: list[dict[str, Any]]) -> Mutation:
    """A record twice (next to itself or elsewhere), the copy the same or with one close moved."""
    index = _pick_record(draw, records)
    at = draw.integer(1, len(records), "position")
    variant = draw.pick(["same", "closed", "later created"], "copy")
    copy = json.loads(_dumps(records[index], compact=True))
    if variant == "closed" and "invalid_at" in copy:
        copy["invalid_at"] = copy["closed_at"] = "2025-01-01T00:00:30.000000Z"
    elif variant == "later created" and "created_at" in copy:
        copy["created_at"] = "2025-01-01T00:00:31.000000Z"

    def apply(rs: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [*rs[:at], copy, *rs[at:]]

    return Mutation("duplicate", target, f"{records[index].get('kind')} twice ({variant})", apply)


def kinds(draw: Draw, target: str, records: list[dict[str, Any]]) -> Mutation:
    index = _pick_record(draw, records)
    kind = draw.pick(KINDS, "kind")

    def apply(rs: list[dict[str, Any]]) -> list[dict[str, Any]]:
        rs[index]["kind"] = kind
        return rs

    return Mutation("kind", target, f"{records[index].get('kind')}.kind = {_short(kind)}", apply)


def orders(draw: Draw, target: str, records: list[dict[str, Any]]) -> Mutation:
    """The same records in another order: reversed, edges first, children before their parents, shuffled."""
    how = draw.pick(["reversed", "edges first", "aliases first", "shuffled"], "order")
    seed = draw.integer(0, 1000, "seed")

    def apply(rs: list[dict[str, Any]]) -> list[dict[str, Any]]:
        head, rest = rs[:1], rs[1:]
        if how == "reversed":
            rest.reverse()
        elif how == "edges first":
            rest.sort(key=lambda r: r.get("kind") != "edge")
        elif how == "aliases first":
            rest.sort(key=lambda r: r.get("kind") not in ("alias", "proposal", "queued"))
        else:
            random.Random(seed).shuffle(rest)
        return head + rest

    return Mutation("order", target, f"records {how}", apply)


def headers(draw: Draw, target: str, records: list[dict[str, Any]]) -> Mutation:
    """A header that lies: another store's id (or the receiver's own), tokens out of range, roots and scopes of
    another shape, a reset or a legacy order nobody asked for, the format's own fields."""
    head = records[0]
    other_ids = [
        "0" * 32,
        "f" * 32,
        "",
        "zz" * 16,
        "ab" * 64,
        7,
        None,
        head.get("store_id", "") + "0",
        "RECEIVER",
    ]
    choices: dict[str, list[Any]] = {
        "store_id": other_ids,
        "since": [-1, 0, 10**400, 2**63, 1.5, "6", None, 10**9],
        "seq": [-1, 0, 10**400, 2**63, 1.5, "6", None, 10**9],
        "tip": ["", "00" * 8, "zz", 7, None, "ab" * 200],
        "echo": [None, {}, {"seen": 10**400, "tip": "x"}, {"seen": -1, "tip": None}, [], "x", {"seen": 10**9}],
        "roots": [{}, [], None, "x", {"ab" * 32: "cd" * 32}, {"": ""}],
        "store_root": ["", "ab" * 32, None, 7],
        "scopes": [["nope"], ["ana"], "ana", [7], [None], [], {}, ["ana"] * 1000],
        "reset": [True, "yes", 1, None],
        "legacy": ["x", "ab" * 32, None, 7, ["a"]],
        "sent_at": HOSTILE_TIMES,
        "version": [2, 0, "1", 1.0, True, None, 10**400],
        "format": ["worlddb-export", "worlddb-changes ", "", None],
        "scope": ["ana", "nope", 7, [], ""],
        "worlds": [{}, [], None, {"ab" * 32: "cd" * 32}],
        "embedder": ["other-model", "", None, 7],
        "dim": [0, -1, 31, 33, 10**400, 1.5, "32", None],
        "package": ["9.9.9", "", None, 7],
        "exported_at": HOSTILE_TIMES,
        "extra": ["unknown field", 7, None],
    }
    key = draw.pick(sorted(k for k in choices if k in head or k == "extra"), "header field")
    value = draw.pick(choices[key], "header value")

    def apply(rs: list[dict[str, Any]]) -> list[dict[str, Any]]:
        rs[0][key] = value
        return rs

    return Mutation("header", target, f"header.{key} = {_short(value)}", apply)


FAMILIES: dict[str, Callable[[Draw, str, list[dict[str, Any]]], Mutation]] = {
    "time": times,
    "number": numbers,
    "type": wrong_types,
    "id": ids,
    "edge": edges,
    "proposal": proposals,
    "state": states,
    "nesting": nesting,
    "size": sizes,
    "drop": drops,
    "duplicate": duplicates,
    "kind": kinds,
    "order": orders,
    "header": headers,
}


def draw_mutation(draw: Draw, family: str | None = None, target: str | None = None) -> Mutation:
    target = target or draw.pick(list(TARGETS), "target")
    family = family or draw.pick(sorted(FAMILIES), "family")
    return FAMILIES[family](draw, target, template().sets[target])


# ---- one trial ---------------------------------------------------------------------------------------------


@dataclass
class Verdict:
    mutation: Mutation
    outcome: str  # refused | applied | diverged (applied cleanly, a forgery no check can see) | failure
    stage: str = ""
    error: str = ""

    @property
    def ok(self) -> bool:
        return self.outcome != "failure"

    def describe(self) -> str:
        m = self.mutation
        return f"[{m.family}/{m.target}] {m.what}: {self.stage}: {self.error}"

    def key(self) -> str:
        """The failure's class: family, field, stage and exception, with numbers and ids blurred."""
        m = self.mutation
        error = re.sub(r"[0-9a-f]{16,}", "<id>", self.error)
        error = re.sub(r"\d+", "N", error)[:90]
        return f"{m.family} | {m.target} | {m.field_name} | {self.stage} | {error}"


def _error(exc: BaseException) -> str:
    text = str(exc).replace("\n", " ")
    return f"{type(exc).__name__}: {text[:200]}"


@dataclass
class Tally:
    """Counts of verdicts; a failure is kept as its class and description (not the mutant, which may be large)."""

    tried: int = 0
    refused: int = 0
    applied_ok: int = 0
    diverged: list[str] = field(default_factory=list)  # descriptions of the applied forgeries no check can see
    failures: list[tuple[str, str]] = field(default_factory=list)  # (class, description)
    by_family: Counter[str] = field(default_factory=Counter)

    def add(self, verdict: Verdict) -> None:
        self.tried += 1
        self.by_family[f"{verdict.mutation.family}:{verdict.outcome}"] += 1
        if verdict.outcome == "refused":
            self.refused += 1
        elif verdict.outcome == "applied":
            self.applied_ok += 1
        elif verdict.outcome == "diverged":
            self.diverged.append(verdict.describe())
        else:
            self.failures.append((verdict.key(), verdict.describe()))

    def classes(self) -> Counter[str]:
        return Counter(key for key, _ in self.failures)

    def summary(self) -> str:
        return (
            f"{self.tried} mutants: {self.refused} refused, {self.applied_ok} applied, {len(self.diverged)} applied "
            f"but never converging (forgeries no check can see), {len(self.failures)} failed"
        )


TALLY = Tally()  # every trial of this process: the test module prints it at teardown


def mutant_bytes(mutation: Mutation) -> bytes | list[str]:
    records = json.loads(json.dumps(template().sets[mutation.target]))  # a deep copy of the honest file
    records = mutation.apply(records)
    if mutation.target.startswith("export"):
        return export_lines(records)
    return seal(records)


@dataclass
class _Stores:
    sender: WorldDB
    receiver: WorldDB
    converges: bool


def _stores(folder: Path, target: str) -> _Stores:
    t = template()
    sender = t.open("a", folder, dt.timedelta(0))
    receiver = t.open("c" if target == "export-fresh" else "b", folder, dt.timedelta(seconds=7))
    return _Stores(sender, receiver, target != "export-fresh")


def run_mutant(mutation: Mutation, folder: Path | None = None) -> Verdict:
    """Apply one mutant to a fresh copy of its receiver and judge what it left (see the module docstring)."""
    with _folder(folder) as where:
        verdict = _judge(mutation, where)
    TALLY.add(verdict)
    return verdict


@contextmanager
def _folder(folder: Path | None) -> Iterator[Path]:
    if folder is not None:
        folder.mkdir(parents=True, exist_ok=True)
        yield folder
        return
    with tempfile.TemporaryDirectory(prefix="hostile-mutant-") as tmp:
        yield Path(tmp)


def _judge(mutation: Mutation, folder: Path) -> Verdict:
    try:
        data = mutant_bytes(mutation)
    except Exception as exc:  # noqa: BLE001  (the harness itself could not write this mutant: say so)
        return Verdict(mutation, "failure", "forge", _error(exc))
    stores = _stores(folder, mutation.target)
    try:
        return _check(mutation, data, stores)
    finally:
        for db in (stores.sender, stores.receiver):
            try:
                db.close()
            except Exception:  # noqa: BLE001, S110  (a store the mutant broke may not close cleanly)
                pass


def _check(mutation: Mutation, data: bytes | list[str], stores: _Stores) -> Verdict:
    receiver, sender = stores.receiver, stores.sender
    if mutation.family == "header" and "RECEIVER" in mutation.what and isinstance(data, bytes):
        # the receiver's own id in the header: forge that one here, where the receiver is known
        records = unseal(data)
        records[0]["store_id"] = receiver.store_id
        data = seal(records)
    before = table_digest(receiver)
    try:
        if isinstance(data, bytes):
            receiver.apply_changes(data)
        else:
            receiver.import_records(data)
    except WorldDBError as exc:
        try:
            after = table_digest(receiver)
        except BaseException as later:  # noqa: BLE001
            return Verdict(mutation, "failure", "refused, then unreadable", _error(later))
        if after != before:
            changed = sorted(k for k in before if before[k] != after.get(k))
            return Verdict(mutation, "failure", "refused but changed", f"{_error(exc)} (changed: {changed})")
        return Verdict(mutation, "refused", "apply", _error(exc))
    except BaseException as exc:  # noqa: BLE001  (a KeyboardInterrupt is re-raised below)
        if isinstance(exc, KeyboardInterrupt):
            raise
        return Verdict(mutation, "failure", "apply", _error(exc))
    stage = "verify"
    try:
        report = receiver.verify(deep=True)
        if not report.ok:
            first = report.violations[0]
            return Verdict(mutation, "failure", stage, f"{first.invariant}: {first.detail[:160]}")
        stage = "write"
        receiver.write("Ana likes mint tea after the file", scope="ana")
        stage = "recall"
        receiver.recall("tea", k=5)
        stage = "search"
        receiver.search("tea", k=5)
        stage = "list_memories"
        receiver.list_memories("ana", include_retired=True)
        if stores.converges:
            stage = "sync"
            result = receiver.sync(sender)
            if not result.get("converged"):
                # Applied cleanly, yet the pair never converges: the file forged a row (or a state) that keeps every
                # rule the receiver can check, so it cannot be told from the sender's own, and rows taken from the
                # sender are not sent back to it. Only a signed set would tell; counted apart, not hidden.
                return Verdict(mutation, "diverged", stage, "a sync of both ways did not converge")
            stage = "verify after sync"
            for db in (receiver, sender):
                report = db.verify(deep=True)
                if not report.ok:
                    first = report.violations[0]
                    return Verdict(mutation, "failure", stage, f"{first.invariant}: {first.detail[:160]}")
    except BaseException as exc:  # noqa: BLE001
        if isinstance(exc, KeyboardInterrupt):
            raise
        return Verdict(mutation, "failure", stage, _error(exc))
    return Verdict(mutation, "applied", "all checks")
