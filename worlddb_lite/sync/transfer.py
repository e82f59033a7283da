"""Export a store (or one scope) as JSON lines, and import such a file into a store.

>>> lines = list(export_records(reconciler, root, scope="ana"))    # doctest: +SKIP
>>> import_records(other_reconciler, other_root, map(json.dumps, lines))    # doctest: +SKIP

The file is the portable backup and the migration path between stores: one header record, then
every node (its canonical body exactly as stored, so the receiver recomputes its id, and its
projection with the state history behind it), edge, alias, merge proposal and waiting extraction
that rebuilds the worlds exported. docs/cli.md shows the format; docs/decisions.md (2026-11-25)
says why it has this shape.

An import checks the whole file before it writes anything, then writes it in one transaction
through the reconciler's ``adopt_*`` methods: members land in their worlds' trees in their
(created_at, id) order with their source's belief times, so a world imported into a store that did not
hold it recomputes to the root the header names. Importing the same file again changes nothing.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import itertools
import json
import os
import re
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .. import checks
from ..errors import Hint, InvalidInput, InvalidTime, NotFound
from ..models.embed import embed_checked, embedding_text
from ..store.hashing import canonical_json, edge_body, edge_id, nfc, node_id
from ..store.merkle_replay import replay
from ..store.rows import EdgeRow, NodeRow, Store, added_text
from ..text.dates import format_time, parse_time
from ..types import MAY_UPDATE, MAY_UPDATE_FROM, MAY_UPDATE_TO, MergeStatus
from ..write.reconciler import AdoptedEdge, AdoptedNode, Reconciler, Transaction
from . import transfer_rows

FORMAT = "worlddb-export"
VERSION = 2  # 2: an end line counts the records, so a file cut short at a line's end is refused
READS = (1, 2)  # version 1 files (no end line) are still read: their cut cannot be seen
KINDS = ("node", "edge", "alias", "proposal", "queued")
EMBED_BATCH = 512
_HEX64 = re.compile(r"^[0-9a-f]{64}$")
# How far ahead of this store's clock a record's belief times may run: two devices' clocks differ by
# seconds to minutes, and the clock of a store that adopts a time follows it (``Transaction.not_before``),
# so a far-future time would date every later write after it (or past the calendar's end: the store bricked)
AHEAD = dt.timedelta(days=1)


def _package_version() -> str:
    import importlib.metadata  # here: it loads the email package (~20 ms), which a `worlddb recall` never needs

    try:
        return importlib.metadata.version("worlddb_lite")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


# ---- export ---------------------------------------------------------------------------------


def scope_tops(r: Reconciler, root: int, scope: str) -> list[int]:
    """The Scope worlds ``scope`` names: by name (``kind:name`` for another kind than a user), or by id."""
    ref = checks.scope_ref(scope)
    named = transfer_rows.scopes_named(r.conn, root, ref.name)
    found = [nid for nid, props in named if (json.loads(props) or {}).get("kind", "user") == ref.kind]
    if not found and _HEX64.match(scope.lower()):
        nid = r.store.nid_of(bytes.fromhex(scope.lower()))
        if nid is not None and r.store.header(nid).parent == root:
            found = [nid]
    if not found:
        raise NotFound(f"no scope called {scope!r} in this store", hint=Hint("scopes"))
    return found


def _chosen(r: Reconciler, root: int, scope: str | None) -> tuple[list[int], set[int], set[int]]:
    """(the worlds whose roots the header names, every node exported, the nodes exported whole).

    A scope's export holds its subtree, what its members hold through membership edges (``contains``),
    with their subtrees, and the worlds above those (their bare records, so parents resolve).
    """
    conn = r.conn
    if scope is None:
        everything = transfer_rows.all_nids(conn) - {root}
        tops = [nid for nid in sorted(everything) if r.store.header(nid).parent == root]
        return tops, everything, everything
    tops = scope_tops(r, root, scope)
    whole = transfer_rows.subtree(conn, tops)
    chosen = set(whole)
    membership = sorted(r.registry.rules().membership)
    frontier = set(whole)
    while frontier:
        reached = transfer_rows.members_by_edge(conn, sorted(frontier), membership) - chosen
        frontier = transfer_rows.subtree(conn, sorted(reached)) - chosen if reached else set()
        chosen |= frontier
    chosen |= transfer_rows.ancestors(conn, sorted(chosen - whole)) - {root}
    return tops, chosen, whole


def chosen_nodes(r: Reconciler, root: int, scope: str) -> set[int]:
    """Every node a scope's export holds (its subtree, what membership edges reach, the worlds above)."""
    return _chosen(r, root, scope)[1]


def _derived_fts(body: str | None) -> tuple[str, str, str | None] | None:
    """The full-text row a plain write of this body gets (the export leaves it out when it is that)."""
    if body is None:
        return None
    said = json.loads(body)
    name, content = said.get("name"), said.get("content")
    if not embedding_text(name, content):
        return None
    return (name or "", content or "", None)


def node_record(
    r: Reconciler,
    row: NodeRow,
    changes: list[tuple[Any, ...]],
    roots: list[tuple[str, bytes, int]] | None,
    texts: Mapping[int, tuple[str, str, str | None]],
) -> dict[str, Any]:
    """A node's record: its body as stored, its projection and state history (and logged roots, if given).

    ``texts``: the full-text rows of a batch of nodes, this one among them (``transfer_rows.fts_rows``).
    """
    conn, store = r.conn, r.store
    assert row.parent is not None
    record: dict[str, Any] = {
        "kind": "node",
        "id": row.id.hex(),
        "type": row.type,
        "parent": store.header(row.parent).id.hex(),
        "slot": row.slot,
        "ord": row.ord,
        "body": row.body,
        "valid_at": row.valid_at,
        "invalid_at": row.invalid_at,
        "closed_at": row.closed_at,
        "created_at": row.created_at,
        "expired_at": row.expired_at,
        "retired": bool(row.retired),
        "salience": row.salience,
        "changes": [[at, inv, closed, exp, bool(ret)] for at, inv, closed, exp, ret in changes],
    }
    if row.body is None:  # a tombstone: the hash and the purge's time, never the text
        record["purged_at"] = transfer_rows.purged_at(conn, row.id)
    else:
        fts = texts.get(row.nid)
        if fts != _derived_fts(row.body):
            record["fts"] = None if fts is None else list(fts)
    if roots:
        record["roots"] = [[at, root.hex(), size] for at, root, size in roots]
    return record


def edge_record(r: Reconciler, row: EdgeRow, changes: list[tuple[Any, ...]]) -> dict[str, Any]:
    """An edge's record: ends and world by id, props, projection and closes."""
    header = r.store.header
    return {
        "kind": "edge",
        "id": row.id.hex(),
        "type": row.type,
        "src": header(row.src).id.hex(),
        "dst": header(row.dst).id.hex(),
        "world": header(row.world).id.hex(),
        "slot": row.slot,
        "ord": row.ord,
        "props": json.loads(row.props),
        "valid_at": row.valid_at,
        "invalid_at": row.invalid_at,
        "closed_at": row.closed_at,
        "created_at": row.created_at,
        "expired_at": row.expired_at,
        "changes": [[at, inv, closed] for at, inv, closed, _exp, _ret in changes],
    }


def alias_record(r: Reconciler, nid: int, alias: str, source: str | None, created_at: str) -> dict[str, Any]:
    """An alias's record: its node by id, the alias as written, where it came from and when."""
    return {
        "kind": "alias",
        "node": r.store.header(nid).id.hex(),
        "alias": alias,
        "source": source,
        "created_at": created_at,
    }


def proposal_record(r: Reconciler, row: Sequence[Any]) -> dict[str, Any]:
    """A merge proposal's record from (a, b, status, score, tier, reason, proposed_at, decided_at, conflict).

    ``conflict``: the other decision a replica made of it, only when there is one.
    """
    a, b, status, score, tier, reason, proposed_at, decided_at, conflict = row
    record = {
        "kind": "proposal",
        "a": r.store.header(a).id.hex(),
        "b": r.store.header(b).id.hex(),
        "status": status,
        "score": score,
        "tier": tier,
        "reason": reason,
        "proposed_at": proposed_at,
        "decided_at": decided_at,
    }
    if conflict is not None:
        record["conflict"] = conflict
    return record


def export_records(r: Reconciler, root: int, scope: str | None = None) -> Iterator[dict[str, Any]]:
    """The records of a whole store (``scope`` None) or of one scope, between a header and an end line.

    Nodes, edges and the rest come after the header; the end line counts them, so ``import_records``
    refuses a file cut short.
    """
    count = -1  # the header is not counted
    for record in _records(r, root, scope):
        count += 1
        yield record
    yield {"kind": "end", "records": count}


def _records(r: Reconciler, root: int, scope: str | None) -> Iterator[dict[str, Any]]:
    """The header and records of ``export_records``, read from one snapshot.

    A read transaction of its own, unless a write is open on this connection.
    """
    conn, store = r.conn, r.store
    with contextlib.ExitStack() as stack:
        if conn.getautocommit():
            conn.execute("begin")
            stack.callback(lambda: conn.execute("commit") if not conn.getautocommit() else None)
        tops, chosen, whole = _chosen(r, root, scope)
        meta = store.meta_values(["embedder_id", "embedder_dim"])
        yield {
            "kind": "header",
            "format": FORMAT,
            "version": VERSION,
            "package": _package_version(),
            "store_root": store.header(root).id.hex(),
            "scope": scope,
            "worlds": {store.header(t).id.hex(): store.root_of(t).hex() for t in tops},
            "embedder": meta.get("embedder_id"),
            "dim": int(meta.get("embedder_dim", r.dim)),
            "exported_at": r.now(),
        }
        node_changes = transfer_rows.state_changes(conn, "node")
        logged = transfer_rows.logged_roots(conn, whole)
        rows = store.iter_node_rows("where n.parent is not null order by n.depth, n.nid", ())
        while batch := list(itertools.islice(rows, 4096)):
            texts = transfer_rows.fts_rows(conn, [row.nid for row in batch if row.nid in chosen])
            for row in batch:
                if row.nid in chosen:
                    yield node_record(r, row, node_changes.get(row.nid, []), logged.get(row.nid), texts)
        edge_changes = transfer_rows.state_changes(conn, "edge")
        for eid in list(transfer_rows.edges_within(conn, chosen)):
            yield edge_record(r, store.edge_row(eid), edge_changes.get(eid, []))
        for nid, alias, _norm, source, created_at in list(transfer_rows.aliases_of(conn, chosen)):
            yield alias_record(r, nid, alias, source, created_at)
        for proposal in list(transfer_rows.proposals_within(conn, chosen)):
            yield proposal_record(r, proposal)
        for turn, in_scope, said_at, said_in, speaker, enqueued_at in list(transfer_rows.queued_within(conn, chosen)):
            yield {
                "kind": "queued",
                "turn": store.header(turn).id.hex(),
                "scope": store.header(in_scope).id.hex(),
                "said_at": said_at,
                "said_in": said_in,
                "speaker": speaker,
                "enqueued_at": enqueued_at,
            }


# ---- checking a file ------------------------------------------------------------------------


@dataclass
class Parsed:
    """A checked file: its header, nodes by id (with their line), edges and the other records."""

    header: dict[str, Any]
    nodes: dict[str, tuple[int, dict[str, Any]]] = field(default_factory=dict)  # hex -> (line, record)
    edges: list[tuple[int, dict[str, Any]]] = field(default_factory=list)
    others: list[tuple[int, dict[str, Any]]] = field(default_factory=list)
    edge_ids: set[str] = field(default_factory=set)
    ords: set[bool] = field(default_factory=set)  # whether members carry an ord: all of them, or none (before v10)


def _bad(line: int, what: str) -> InvalidInput:
    return InvalidInput(f"line {line}: {what}; nothing was written")


def is_time(value: object) -> bool:
    """Canonical time text of a date that exists (``dates.parse_time`` leaves it as it is): what every store writes.

    Text alone is not enough: "2030-13-45T25:61:61Z" is digits where digits go, and "…00Z" without its
    fraction sorts after "…00.000001Z" although it is earlier, which breaks the members' order.
    """
    if not isinstance(value, str) or len(value) != len("2024-05-01T09:30:00.000000Z"):  # nothing long is cached
        return False
    try:
        return parse_time(value) == value
    except InvalidTime:
        return False


MOST_INT = 1 << 62  # ints above it (a slot, an ord, a size) come from no store: SQLite's integers stop at 2^63
_EXPECTED = {
    "hex": "an id (64 hex characters)",
    "time": "a time in canonical form (such as 2024-05-01T09:30:00.000000Z) of a real date",
    "int": f"a whole number from 0 to {MOST_INT}",
    "number": "a finite number",
}


def _field(record: Mapping[str, Any], line: int, name: str, kind: str, *, optional: bool = False) -> Any:
    """A checked field: ``hex`` (an id), ``time``, ``text``, ``int``, ``bool``, ``number`` or ``dict``."""
    value = record.get(name)
    if value is None:
        if optional:
            return None
        raise _bad(line, f"field {name!r} is missing")
    checks_of: dict[str, Callable[[Any], bool]] = {
        "hex": lambda v: isinstance(v, str) and _HEX64.match(v) is not None,
        "time": is_time,
        "text": lambda v: isinstance(v, str),
        "int": lambda v: type(v) is int and 0 <= v <= MOST_INT,
        "bool": lambda v: type(v) is bool,
        "number": _finite,
        "dict": lambda v: isinstance(v, dict),
    }
    if not checks_of[kind](value):
        raise _bad(line, f"field {name!r} is not {_EXPECTED.get(kind, 'a ' + kind)}")
    return value


def _hashable(value: Any, line: int, what: str) -> str:
    """``value`` as the write path hashes it (``hashing.canonical_json``: its depth and value rules), or refused."""
    try:
        return canonical_json(value)
    except InvalidInput as exc:
        raise _bad(line, f"{what}: {exc}") from None


def _finite(value: object) -> bool:
    """A number the write path takes (``checks.number``): finite, also as a float (10**400 is not)."""
    try:
        checks.number(value, "a number")
    except InvalidInput:
        return False
    return True


def _times(entry: Sequence[Any], optional: Sequence[int]) -> bool:
    """Whether ``entry[0]`` is a time, and each of ``optional`` a time or null."""
    return is_time(entry[0]) and all(entry[i] is None or is_time(entry[i]) for i in optional)


def _ordered(record: Mapping[str, Any], line: int, first: str, then: str) -> None:
    """An interval ends at or after it starts (the schema's check, refused here before anything is written)."""
    if record.get(then) is not None and record[then] < record[first]:
        raise _bad(line, f"field {then!r} ({record[then]}) is before {first!r} ({record[first]})")


def _check_node(record: dict[str, Any], line: int) -> None:
    raw = _field(record, line, "id", "hex")
    _field(record, line, "type", "text")
    parent = _field(record, line, "parent", "hex")
    _field(record, line, "slot", "int")
    _field(record, line, "ord", "int", optional=True)
    for name in ("valid_at", "created_at"):
        _field(record, line, name, "time")
    for name in ("invalid_at", "closed_at", "expired_at"):
        _field(record, line, name, "time", optional=True)
    _field(record, line, "retired", "bool")
    _field(record, line, "salience", "number")
    _ordered(record, line, "valid_at", "invalid_at")
    _ordered(record, line, "created_at", "expired_at")
    if "body" not in record:
        raise _bad(line, "field 'body' is missing (null for a purged node)")
    body = record["body"]
    if body is None:
        _field(record, line, "purged_at", "time")
    else:
        if not isinstance(body, str):
            raise _bad(line, "field 'body' is not text (the canonical JSON the node's id hashes)")
        if node_id(body).hex() != raw:
            raw_short = raw[:16]
            raise _bad(line, f"field 'body' does not hash to the node's id {raw_short}… (changed after export?)")
        try:
            said = json.loads(body)
        except (ValueError, RecursionError):
            raise _bad(line, "field 'body' is not JSON (the canonical JSON the node's id hashes)") from None
        if not isinstance(said, dict) or any(not isinstance(said.get(k), str | None) for k in ("name", "content")):
            raise _bad(line, "field 'body' is not a node's JSON object with text (or null) 'name' and 'content'")
        if len(said.get("content") or "") > 3 * checks.MAX_TEXT_CHARS:  # the write path's limit, before NFC's growth
            raise _bad(line, f"the node says more than {3 * checks.MAX_TEXT_CHARS:,} characters, which no store writes")
        if not isinstance(said.get("props", {}), dict):
            raise _bad(line, "the body's props are not a mapping, as every node's are")
        _hashable(said.get("props") or {}, line, "the body's props")
        if said.get("type") != record["type"] or said.get("parent") != parent:
            raise _bad(line, "fields 'type' and 'parent' disagree with the body")
        if "valid_at" in said and said["valid_at"] != record["valid_at"]:  # a timeless world's has none
            raise _bad(line, "field 'valid_at' disagrees with the valid_at the body hashes")
    changes = record.get("changes", [])
    if not isinstance(changes, list) or not all(isinstance(c, list) and len(c) == 5 for c in changes):
        raise _bad(line, "field 'changes' is not a list of [at, invalid_at, closed_at, expired_at, retired]")
    if not all(_times(c, (1, 2, 3)) for c in changes):
        raise _bad(line, "field 'changes' holds an entry whose time is not a time")
    last = changes[-1][1:] if changes else [None, None, None, False]
    if [last[0], last[1], last[2], bool(last[3])] != [
        record.get("invalid_at"),
        record.get("closed_at"),
        record.get("expired_at"),
        record["retired"],
    ]:
        raise _bad(line, "field 'changes' does not end at the node's state")
    fts = record.get("fts")
    if fts is not None and not (isinstance(fts, list) and len(fts) == 3 and isinstance(fts[1], str)):
        raise _bad(line, "field 'fts' is not [name, content, context]")
    if body is None and "fts" in record and fts is not None:
        raise _bad(line, "a purged node carries no text (field 'fts')")
    if fts is not None and not (fts[2] is None or isinstance(fts[2], str)):
        raise _bad(line, "field 'fts' has a context that is neither text nor null")
    if fts is not None and isinstance(body, str):
        try:
            added_text(str(json.loads(body).get("content") or ""), nfc(fts[1]))
        except ValueError:
            raise _bad(line, "field 'fts' does not begin with the node's own content") from None
    roots = record.get("roots", [])
    if not isinstance(roots, list) or not all(
        isinstance(x, list) and len(x) == 3 and isinstance(x[1], str) and _HEX64.match(x[1]) for x in roots
    ):
        raise _bad(line, "field 'roots' is not a list of [at, root, size]")
    if not all(is_time(x[0]) and type(x[2]) is int and 0 <= x[2] <= MOST_INT for x in roots):
        raise _bad(line, "field 'roots' holds an entry whose time or size is wrong")


def _check_edge(record: dict[str, Any], line: int) -> None:
    raw = _field(record, line, "id", "hex")
    edge_type = _field(record, line, "type", "text")
    src, dst = _field(record, line, "src", "hex"), _field(record, line, "dst", "hex")
    _field(record, line, "world", "hex")
    _field(record, line, "slot", "int")
    _field(record, line, "ord", "int", optional=True)
    props = _field(record, line, "props", "dict")
    props_json = _hashable(props, line, "field 'props'")
    valid_at = _field(record, line, "valid_at", "time")
    _field(record, line, "created_at", "time")
    for name in ("invalid_at", "closed_at"):
        _field(record, line, name, "time", optional=True)
    _ordered(record, line, "valid_at", "invalid_at")
    if src == dst:
        raise _bad(line, f"edge {raw[:16]}… links a node to itself; no edge type takes a loop")
    if record.get("expired_at") is not None:
        raise _bad(line, "field 'expired_at' of an edge is set; edges are closed, never retracted")
    if edge_id(edge_body(edge_type, src, dst, valid_at, props_json)).hex() != raw:
        raise _bad(line, f"edge {raw[:16]}… does not hash to its id (its type, ends, props or valid_at changed)")
    changes = record.get("changes", [])
    if not isinstance(changes, list) or not all(isinstance(c, list) and len(c) == 3 for c in changes):
        raise _bad(line, "field 'changes' is not a list of [at, invalid_at, closed_at]")
    if not all(_times(c, (1, 2)) for c in changes):
        raise _bad(line, "field 'changes' holds an entry whose time is not a time")
    last = changes[-1][1:] if changes else [None, None]
    if last != [record.get("invalid_at"), record.get("closed_at")]:
        raise _bad(line, "field 'changes' does not end at the edge's state")


def _check_other(record: dict[str, Any], line: int) -> None:
    kind = record["kind"]
    if kind == "alias":
        _field(record, line, "node", "hex")
        _field(record, line, "alias", "text")
        _field(record, line, "created_at", "time")
        _field(record, line, "source", "text", optional=True)
    elif kind == "proposal":
        if _field(record, line, "a", "hex") == _field(record, line, "b", "hex"):
            raise _bad(line, "a merge proposal joins a node to itself")
        if not isinstance(record.get("status"), str) or record["status"] not in {s.value for s in MergeStatus}:
            raise _bad(line, "field 'status' is not pending, accepted or rejected")
        _field(record, line, "proposed_at", "time")
        _field(record, line, "decided_at", "time", optional=True)
        _field(record, line, "score", "number", optional=True)
        _field(record, line, "tier", "text", optional=True)
        _field(record, line, "reason", "text", optional=True)
        decided = {MergeStatus.ACCEPTED.value, MergeStatus.REJECTED.value}
        if record.get("conflict") is not None and (
            not isinstance(record["conflict"], str)
            or record["conflict"] not in decided
            or record["status"] not in decided - {record["conflict"]}
        ):
            raise _bad(line, "field 'conflict' is not the other decision of a decided proposal")
    else:
        _field(record, line, "turn", "hex")
        _field(record, line, "scope", "hex")
        _field(record, line, "said_at", "time")
        _field(record, line, "enqueued_at", "time")
        _field(record, line, "said_in", "text", optional=True)
        _field(record, line, "speaker", "text", optional=True)


def parse(lines: Iterable[str]) -> Parsed:
    """Every line parsed and checked on its own (ids against bodies, fields, the header)."""
    parsed: Parsed | None = None
    try:
        parsed = _parse_lines(lines)
    except UnicodeDecodeError:
        raise InvalidInput("the file is not UTF-8 text, as an export is; nothing was written") from None
    if parsed is None:
        raise InvalidInput(f"the file is empty: an export starts with a {FORMAT} header line; nothing was written")
    return parsed


def _parse_lines(lines: Iterable[str]) -> Parsed | None:
    parsed: Parsed | None = None
    taken, ended = 0, None  # records after the header; the end line's number
    if isinstance(lines, (str, bytes, Mapping)) or not isinstance(lines, Iterable):
        raise InvalidInput("give the lines of an export (a list of text, or an open file); nothing was written")
    for line, text in enumerate(lines, start=1):
        if not isinstance(text, str):
            raise _bad(line, f"a line is text, got {type(text).__name__}")
        if not text.strip():
            continue
        try:
            record = json.loads(text)
        except json.JSONDecodeError as exc:
            raise _bad(line, f"not JSON ({exc.msg}; a truncated file?)") from None
        except (RecursionError, ValueError):  # nested deeper than Python's decoder goes, or a 5,000-digit number
            raise _bad(line, "not JSON this reader takes (nested too deep, or a number too long)") from None
        if not isinstance(record, dict):
            raise _bad(line, "not a JSON object")
        if parsed is None:
            if record.get("kind") != "header" or record.get("format") != FORMAT:
                raise _bad(line, f"the file does not start with a {FORMAT} header (field 'format')")
            if record.get("version") not in READS:
                raise _bad(
                    line,
                    f"field 'version' is {record.get('version')!r}; this worlddb reads versions "
                    f"{', '.join(map(str, READS))}: a newer worlddb_lite wrote it, upgrade to read it",
                )
            _field(record, line, "store_root", "hex")
            if not isinstance(record.get("worlds"), dict):
                raise _bad(line, "field 'worlds' is not a mapping of world ids to roots")
            parsed = Parsed(record)
            continue
        if ended is not None:
            raise _bad(line, f"a record after the end line (line {ended}): the file was altered or joined to another")
        if record.get("kind") == "end" and parsed.header.get("version", 1) >= 2:
            if record.get("records") != taken:
                raise _bad(
                    line,
                    f"the end line counts {record.get('records')!r} records, the file holds {taken}: lines are "
                    "missing or were added; export it again",
                )
            ended = line
            continue
        take(parsed, line, record)
        taken += 1
    if parsed is not None and parsed.header.get("version", 1) >= 2 and ended is None:
        raise InvalidInput(
            f"the file ends after {taken} records without its end line: it was cut short (a copy or download that "
            "did not finish?); export it again; nothing was written"
        )
    return parsed


def take(parsed: Parsed, line: int, record: dict[str, Any]) -> None:
    """Check one record (a node, edge, alias, proposal or waiting extraction) and add it to ``parsed``."""
    kind = record.get("kind")
    if kind == "node":
        _check_node(record, line)
        if record["id"] in parsed.nodes:
            raise _bad(line, f"node {record['id'][:16]}… appears twice (field 'id')")
        parsed.nodes[record["id"]] = (line, record)
    elif kind == "edge":
        _check_edge(record, line)
        if record["id"] in parsed.edge_ids:
            raise _bad(line, f"edge {record['id'][:16]}… appears twice (field 'id')")
        parsed.edge_ids.add(record["id"])
        parsed.edges.append((line, record))
    elif kind in KINDS:
        _check_other(record, line)
        parsed.others.append((line, record))
    else:
        raise _bad(line, f"field 'kind' is {kind!r}, not one of {', '.join(KINDS)}")
    if kind in ("node", "edge"):
        parsed.ords.add(record.get("ord") is not None)
        if len(parsed.ords) > 1:  # a file written before version 10 has no ord at all; a later one, one on each
            raise _bad(line, "some members carry an 'ord' and others not: no store writes such a file")


def _references(parsed: Parsed) -> Iterator[tuple[int, str, str]]:
    """(line, field, id) of every node id a record names."""
    for line, record in parsed.nodes.values():
        yield line, "parent", record["parent"]
    for line, record in parsed.edges:
        yield line, "src", record["src"]
        yield line, "dst", record["dst"]
    for line, record in parsed.others:
        for name in ("node", "a", "b", "turn", "scope"):
            if name in record:
                yield line, name, record[name]


# ---- import ---------------------------------------------------------------------------------


@dataclass
class _Counts:
    added: int = 0
    existing: int = 0
    tightened: int = 0

    def as_dict(self) -> dict[str, int]:
        return {"added": self.added, "existing": self.existing, "tightened": self.tightened}


def _adopted_node(record: dict[str, Any], parent: int, vector: Any) -> AdoptedNode:
    fts = record["fts"] if "fts" in record else _derived_fts(record["body"])
    return AdoptedNode(
        id=bytes.fromhex(record["id"]),
        type=record["type"],
        parent=parent,
        body=record["body"],
        valid_at=record["valid_at"],
        created_at=record["created_at"],
        invalid_at=record.get("invalid_at"),
        closed_at=record.get("closed_at"),
        expired_at=record.get("expired_at"),
        retired=record["retired"],
        salience=float(record["salience"]),
        changes=[(at, inv, closed, exp, int(bool(ret))) for at, inv, closed, exp, ret in record.get("changes", [])],
        fts=None if fts is None else (str(fts[0] or ""), str(fts[1]), fts[2]),
        vector=vector,
        roots=[(at, bytes.fromhex(root), int(size)) for at, root, size in record.get("roots", [])],
        ord=_ord(record),
    )


def _ord(record: dict[str, Any]) -> int:
    """A member's ord; an export written before version 10 has none, and its slot keeps the source's order."""
    return int(record["ord"]) if record.get("ord") is not None else int(record["slot"])


def _vectors(r: Reconciler, parsed: Parsed, new: set[str]) -> dict[str, Any]:
    """The new nodes' vectors under this store's embedder (none without one), in batches."""
    if r.embedder is None:
        return {}
    texts: list[tuple[str, str]] = []
    for hex_id in new:
        record = parsed.nodes[hex_id][1]
        fts = _adopted_node(record, 0, None).fts
        text = "" if fts is None else embedding_text(json.loads(record["body"]).get("name"), fts[1])
        if text:
            texts.append((hex_id, text))
    out: dict[str, Any] = {}
    for start in range(0, len(texts), EMBED_BATCH):
        chunk = texts[start : start + EMBED_BATCH]
        for (hex_id, _), vector in zip(chunk, embed_checked(r.embedder, [t for _, t in chunk], r.dim), strict=True):
            out[hex_id] = vector
    return out


def _adopt_members(txn: Transaction, parsed: Parsed, nids: dict[str, int], vectors: dict[str, Any]) -> dict[str, Any]:
    """Nodes, each once its parent is written, then edges; the reconciler puts each member in its place.

    A world orders its members by (created_at, id) whatever order they arrive in (``Transaction.flush``),
    so the file's order matters only for parents before children.
    """
    nodes, edges = _Counts(), _Counts()
    waiting: dict[str, list[tuple[int, dict[str, Any]]]] = {}
    ready: deque[tuple[int, dict[str, Any]]] = deque()  # the file's order (the source's, for an export)
    for line, rec in parsed.nodes.values():
        if rec["parent"] in nids:
            ready.append((line, rec))
        else:
            waiting.setdefault(rec["parent"], []).append((line, rec))
    while ready:
        _, rec = ready.popleft()
        before = txn.store.nid_of(bytes.fromhex(rec["id"]))
        adopted = _adopted_node(rec, nids[rec["parent"]], vectors.get(rec["id"]))
        if before is not None:
            nodes.tightened += txn.merge_node(before, adopted)
            nodes.existing += 1
            nids[rec["id"]] = before
        else:
            nid, _ = txn.adopt_node(adopted)
            if rec.get("body") is None:
                transfer_rows.add_tombstone(txn.store.conn, adopted.id, rec["purged_at"])
            nodes.added += 1
            nids[rec["id"]] = nid
        ready.extend(waiting.pop(rec["id"], []))
    stuck = min((item for items in waiting.values() for item in items), key=lambda item: item[0], default=None)
    if stuck is not None:
        line, rec = stuck
        raise _bad(line, f"node {rec['id'][:16]}… waits on a node that sits in a cycle of parents")
    for _, rec in parsed.edges:
        edge = AdoptedEdge(
            id=bytes.fromhex(rec["id"]),
            type=rec["type"],
            src=nids[rec["src"]],
            dst=nids[rec["dst"]],
            props=canonical_json(rec["props"]),
            valid_at=rec["valid_at"],
            created_at=rec["created_at"],
            invalid_at=rec.get("invalid_at"),
            closed_at=rec.get("closed_at"),
            changes=[(inv, closed) for _at, inv, closed in rec.get("changes", [])],
            ord=_ord(rec),
        )
        _, created = txn.adopt_edge(edge)
        if created:
            edges.added += 1
        else:
            edges.existing += 1
    return {"nodes": nodes.as_dict(), "edges": {"added": edges.added, "existing": edges.existing}}


def _belief_times(parsed: Parsed) -> Iterator[tuple[int, str, str]]:
    """(line, field, time) of every belief time the file writes: creations, closes, logged roots, decisions."""
    for line, rec in parsed.nodes.values():
        for name in ("created_at", "closed_at", "expired_at", "purged_at"):
            if rec.get(name) is not None:
                yield line, name, rec[name]
        for at, _, closed, expired, _ in rec.get("changes", []):
            yield from ((line, "changes", t) for t in (at, closed, expired) if t is not None)
        yield from ((line, "roots", at) for at, _, _ in rec.get("roots", []))
    for line, rec in parsed.edges:
        for name in ("created_at", "closed_at"):
            if rec.get(name) is not None:
                yield line, name, rec[name]
        for at, _, closed in rec.get("changes", []):
            yield from ((line, "changes", t) for t in (at, closed) if t is not None)
    for line, rec in parsed.others:
        for name in ("created_at", "proposed_at", "decided_at", "enqueued_at"):
            if rec.get(name) is not None:
                yield line, name, rec[name]


def _latest(parsed: Parsed, now: str) -> str:
    """The latest belief time the file writes; refused past ``AHEAD`` of ``now`` (this store's present)."""
    try:
        limit = format_time(dt.datetime.fromisoformat(now[:-1]) + AHEAD)
    except OverflowError:  # a clock within a day of the calendar's end
        limit = format_time(dt.datetime.max)
    latest = ""
    for line, name, at in _belief_times(parsed):
        if at > limit:
            raise _bad(
                line,
                f"field {name!r} is {at}, more than {AHEAD.days} day ahead of this store's clock ({now}): the "
                "clock of the device that wrote it (or of this one) is wrong; set it right and write the file again",
            )
        latest = max(latest, at)
    return latest


@dataclass
class Plan:
    """What an import needs before its transaction: the nids of the nodes named, and the new nodes' vectors."""

    nids: dict[str, int]
    vectors: dict[str, Any]
    latest: str
    unheld: set[str] = field(default_factory=set)  # the ids of the nodes this store does not hold yet


def plan(r: Reconciler, root: int, parsed: Parsed, *, partial: bool = False) -> Plan:
    """Check what the records name against this store (outside any transaction) and embed the new nodes.

    ``partial``: a change set that may lack rows this store lost (``_merges_whole``).
    """
    store = r.store
    root_hex = store.header(root).id.hex()
    if parsed.header["store_root"] != root_hex:
        raise _bad(1, "field 'store_root' names another root than this store's; it is not an export worlddb_lite wrote")
    outside = {ref for _, _, ref in _references(parsed) if ref not in parsed.nodes}
    found = store.nids_of([bytes.fromhex(h) for h in sorted(outside)])
    nids = {raw.hex(): nid for raw, nid in found.items()}
    nids[root_hex] = root
    for line, name, ref in _references(parsed):
        if ref not in parsed.nodes and ref not in nids:
            raise _bad(line, f"field {name!r} names {ref[:16]}…, which neither the file nor this store holds")
    held = store.nids_of([bytes.fromhex(h) for h in parsed.nodes])
    unheld = {h for h in parsed.nodes if bytes.fromhex(h) not in held}
    new = {h for h in unheld if parsed.nodes[h][1]["body"] is not None}
    _purged_in_time(store, parsed, held)
    unknown = sorted({rec["type"] for _, rec in parsed.edges} - set(r.registry.names()))
    if unknown:  # its handler's rules could not be kept: this store cannot tell a good edge of it from a bad
        line = next(line for line, rec in parsed.edges if rec["type"] == unknown[0])
        said = f"edge type {unknown[0]!r} is not registered here; register it (or, if the sender runs a newer "
        raise _bad(line, said + "worlddb_lite, upgrade this device), then apply the file")
    _superseded_closed(store, parsed, held)
    _merges_whole(store, parsed, {**nids, **{raw.hex(): nid for raw, nid in held.items()}}, partial=partial)
    return Plan(nids, _vectors(r, parsed, new), _latest(parsed, r.now()), unheld)


def _merges_whole(store: Store, parsed: Parsed, known: Mapping[str, int], *, partial: bool) -> None:
    """What the file merges stays whole with this store's rows (``verify``'s no-silent-merge).

    An open ``same_as`` edge has its mirror and an accepted proposal for its pair, and an accepted proposal
    has both edges. Only the pairs the file names are read. A ``partial`` change set may lack rows that this
    store lost (restored from an older copy): the sender resends them at once, so a decision may come
    before its edges; an edge never comes before its decision.
    """
    edges = {(rec["src"], rec["dst"]): (line, rec) for line, rec in parsed.edges if rec["type"] == "same_as"}
    proposals = {
        frozenset((rec["a"], rec["b"])): line
        for line, rec in parsed.others
        if rec["kind"] == "proposal" and MergeStatus.ACCEPTED.value in (rec["status"], rec.get("conflict"))
    }
    if not edges and not proposals:
        return
    ends = sorted({known[h] for pair in [*edges, *proposals] for h in pair if h in known})
    hex_of = {nid: store.header(nid).id.hex() for nid in ends}
    here_open, here_closed, here_accepted = transfer_rows.merges_among(store.conn, ends)
    open_edges = {(hex_of[a], hex_of[b]) for a, b in here_open}
    open_edges |= {pair for pair, (_, rec) in edges.items() if rec.get("invalid_at") is None}
    open_edges -= {(hex_of[a], hex_of[b]) for a, b in here_closed}  # a close here holds: the earlier one wins
    accepted = {frozenset((hex_of[a], hex_of[b])) for a, b in here_accepted} | set(proposals)
    for (src, dst), (line, _) in edges.items():
        if (src, dst) not in open_edges:
            continue
        if frozenset((src, dst)) not in accepted:
            raise _bad(line, f"a same_as edge joins {src[:16]}… and {dst[:16]}… without an accepted merge proposal")
        if (dst, src) not in open_edges:
            raise _bad(line, f"a same_as edge joins {src[:16]}… to {dst[:16]}… without its mirror")
    for pair, line in proposals.items() if not partial else ():
        a, b = sorted(pair)
        if (a, b) not in open_edges or (b, a) not in open_edges:
            raise _bad(line, f"an accepted merge of {a[:16]}… and {b[:16]}… comes without its two same_as edges")


def _superseded_closed(store: Store, parsed: Parsed, held: Mapping[bytes, int]) -> None:
    """The ends of ``supersedes`` and ``may_update`` edges in time.

    A ``supersedes`` edge's older end closes by the time the newer begins (``verify``'s validity invariant);
    a ``may_update`` edge's newer end begins no earlier than its older end (its handler's rule). Both ends
    as they will stand: a state in the file merges with this store's to the earlier close.
    """

    def here(hex_id: str) -> int | None:  # the node's row in this store, if it holds it
        return held.get(bytes.fromhex(hex_id)) or store.nid_of(bytes.fromhex(hex_id))

    def state(hex_id: str) -> tuple[str | None, str | None]:  # (valid_at, invalid_at) once merged
        sent = parsed.nodes.get(hex_id)
        nid = here(hex_id)
        row = store.node_row(nid) if nid is not None else None
        valid = [v for v in (sent and sent[1]["valid_at"], row and row.valid_at) if v]
        closes = [v for v in (sent and sent[1].get("invalid_at"), row and row.invalid_at) if v]
        return (min(valid) if valid else None), (min(closes) if closes else None)

    def kind(hex_id: str) -> str | None:
        sent = parsed.nodes.get(hex_id)
        nid = here(hex_id)
        return str(sent[1]["type"]) if sent else store.header(nid).type if nid is not None else None

    for line, rec in parsed.edges:
        if rec["type"] == MAY_UPDATE:  # ranks a newer memory above an older note: only ever in that order
            if kind(rec["src"]) not in MAY_UPDATE_FROM or kind(rec["dst"]) != MAY_UPDATE_TO:
                raise _bad(line, "a may_update edge links something other than a newer memory to an older note")
            (newer, _), (older, _) = state(rec["src"]), state(rec["dst"])
            if newer is not None and rec["valid_at"] < newer:
                raise _bad(line, "a may_update edge holds from before its newer memory began")
            if newer is not None and older is not None and newer < older:
                said = f"a may_update edge names {rec['src'][:16]}… as newer, but it began before the other end"
                raise _bad(line, said)
            continue
        if rec["type"] != "supersedes":
            continue
        (begins, _), (_, closed) = state(rec["src"]), state(rec["dst"])
        if closed is None or (begins is not None and closed > begins):
            raise _bad(line, f"a supersedes edge names {rec['dst'][:16]}… as replaced, but it is not closed by then")


def _purged_in_time(store: Store, parsed: Parsed, held: Mapping[bytes, int]) -> None:
    """A purged node's record (no body) keeps the valid_at the body it stands for hashed, where this store has it."""
    for hex_id, (line, rec) in parsed.nodes.items():
        nid = held.get(bytes.fromhex(hex_id))
        if rec["body"] is not None or nid is None:
            continue
        body = store.node_row(nid).body
        said = json.loads(body).get("valid_at") if body is not None else None
        if said is not None and said != rec["valid_at"]:
            raise _bad(line, "field 'valid_at' disagrees with the valid_at the node's body hashes here")


def write(txn: Transaction, parsed: Parsed, planned: Plan) -> dict[str, Any]:
    """Adopt every record inside the caller's transaction (which ``allow_merge`` opened); a summary."""
    store, nids = txn.store, planned.nids
    txn.not_before(planned.latest)
    summary: dict[str, Any] = _adopt_members(txn, parsed, nids, planned.vectors)
    aliases = 0
    proposals: dict[str, int] = {}
    for _, rec in parsed.others:
        if rec["kind"] == "alias":
            aliases += txn.adopt_alias(nids[rec["node"]], rec["alias"], rec.get("source"), rec["created_at"])
        elif rec["kind"] == "proposal":
            outcome = txn.adopt_proposal(
                nids[rec["a"]],
                nids[rec["b"]],
                MergeStatus(rec["status"]),
                rec.get("score"),
                rec.get("tier"),
                str(rec.get("reason") or ""),
                rec["proposed_at"],
                rec.get("decided_at"),
                MergeStatus(rec["conflict"]) if rec.get("conflict") else None,
            )
            proposals[outcome] = proposals.get(outcome, 0) + 1
        else:
            transfer_rows.queue_turn(
                store.conn,
                (
                    nids[rec["turn"]],
                    nids[rec["scope"]],
                    rec["said_at"],
                    rec.get("said_in"),
                    rec.get("speaker"),
                    rec["enqueued_at"],
                ),
            )
    summary["aliases_added"] = aliases
    summary["proposals"] = proposals
    return summary


def _history_holds(conn: Any, parsed: Parsed, unheld: set[str]) -> None:
    """Refuse a file whose new worlds' logged roots (field 'roots') do not replay from the rows it brought.

    The roots travel as history, not recomputed: a forged or damaged file would leave a store that ``verify
    --deep`` fails. Replayed inside the import's transaction, which the refusal rolls back; only when the file
    brings a world this store did not hold with its history (a replay reads the whole store: 0.75 s at 20k).
    """
    sent = {hex_id: line for hex_id, (line, rec) in parsed.nodes.items() if rec.get("roots") and hex_id in unheld}
    if not sent:
        return
    _, wrong = replay(conn)
    legacy = parsed.ords == {False}
    for divergence in wrong:
        if divergence.world in sent:
            raise _bad(
                sent[divergence.world],
                f"field 'roots' logs {divergence.logged.hex()[:16]}… at {divergence.at}, which the file's rows do not "
                "recompute to"
                + (
                    " (the file predates version 10, and its store ordered these members otherwise: lift that store "
                    "to this version and export it again)"
                    if legacy
                    else ""
                ),
            )


def import_source(r: Reconciler, root: int, source: Iterable[str] | str | os.PathLike[str]) -> dict[str, Any]:
    """``import_records`` of an export's lines, or of the .jsonl file at a path (a path is opened here)."""
    if not isinstance(source, (str, os.PathLike)):
        return import_records(r, root, source)
    try:
        handle = open(source, encoding="utf-8")  # noqa: SIM115 (closed below; open's errors are worded here)
    except (OSError, ValueError) as exc:  # ValueError: a NUL in the name
        why = getattr(exc, "strerror", None) or exc
        raise InvalidInput(f"cannot read {os.fspath(source)!r:.200}: {why}; give the file export wrote") from None
    with handle:
        return import_records(r, root, handle)


def import_records(r: Reconciler, root: int, lines: Iterable[str]) -> dict[str, Any]:
    """Check every line, then write the whole file in one transaction; a summary of what it did.

    Raises ``InvalidInput`` naming the line and the field of the first fault, before anything is written.
    """
    parsed = parse(lines)
    store = r.store
    header = parsed.header
    for hex_id in header["worlds"]:
        if hex_id not in parsed.nodes:
            raise _bad(1, f"field 'worlds' names {hex_id[:16]}…, which the file does not hold")
    planned = plan(r, root, parsed)
    with r.transaction() as txn:
        txn.allow_merge()
        summary = write(txn, parsed, planned)
        txn.flush()  # the roots this import logs, then its history replayed: a file's logged roots are claims
        _history_holds(r.conn, parsed, planned.unheld)
    worlds = []
    for hex_id, exported in header["worlds"].items():
        now = store.root_of(store.resolve(hex_id)).hex()
        worlds.append({"id": hex_id, "exported_root": exported, "root": now, "same": now == exported})
    summary["worlds"] = worlds
    summary["roots_agree"] = all(w["same"] for w in worlds)
    summary["scope"] = header.get("scope")
    return summary
