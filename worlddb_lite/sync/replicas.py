"""Sync: bring two replicas of one memory together by content hash, whatever order they exchange in.

>>> data = changes(sender_r, root, token=receiver_token)      # doctest: +SKIP
>>> apply(receiver_r, root, data)                             # doctest: +SKIP

Each store file has a store id (meta ``store_id``) and a change log (``change_log``): one numbered row per
node, edge, alias, proposal or purge it wrote or adopted. A receiver names what it has seen with a
**token**, ``<its own id>:<its last change>,<peer id>:<change seen>:<tip>,...`` (``WorldDB.sync_token``):
the sender sends the rows it changed after the change the token says the receiver saw of it, in their
current state (all of them for a receiver that saw none, or whose tip, a digest of that change, no longer
matches: a sender restored from an older copy numbers its changes again). Rows the sender adopted from the
receiver's whole change sets stay home: the header names the receiver's newest change the sender has seen
(``echo``), and a receiver that no longer holds that change (restored from an older copy, it may lack
them) counts nothing of the sender as seen, so the sender's next set holds everything (``resend``).
The rows travel as the records of an export (``sync/transfer.py``) inside a change set
(``sync/changeset.py``: compressed, counted, digested, refused whole if damaged).

Applying is one transaction. Ids are content hashes, so a row either is new (adopted) or is one the
receiver holds, whose state merges as a lattice (``Transaction.merge_node``): the earlier close, the
earlier expiry and creation time, retired if either retired it. Each world keeps its members in
(created_at, ord, id) order (``Transaction.flush``), so replicas holding the same rows have the same
Merkle roots. A purged node travels as its tombstone (its record without a body) and erases the content
on the receiving side as a local purge does; a node whose tombstone the receiver holds never gets its
content back. Merge proposals keep the strongest decision; a proposal accepted on one side and rejected on
the other is reported as a conflict and left as each side decided.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import uuid
from collections.abc import Generator, Iterator, Sequence
from pathlib import Path
from typing import IO, Any, Protocol

import apsw

from .. import checks
from ..consolidate import sweep
from ..errors import Hint, InvalidInput, WorldDBError
from ..ops import maintenance, purge
from ..store.connection import connect, engine_write, named_error
from ..store.migrations import legacy_digest
from ..text.dates import system_clock
from ..write.reconciler import Reconciler
from ..write.writer import Writer
from . import changeset, transfer, transfer_rows
from . import rows as sync_rows

_ID = re.compile(r"^[0-9a-f]{32}$")
# meta keys (``sweep_arrived``): while present, the change after which what applies brought awaits the
# contradiction sweep; and the last change an apply wrote, so a sweep knows whether it saw them all
SWEPT_UPTO = "sync_swept_upto"
APPLIED_UPTO = "sync_applied_upto"


# ---- tokens ---------------------------------------------------------------------------------


def token(r: Reconciler) -> str:
    """What this store has seen: its own id and last change, then each peer's id, the change seen and its tip."""
    me = f"{sync_rows.store_id(r.conn)}:{sync_rows.last_seq(r.conn)}"
    return ",".join([me, *(f"{other}:{seen}:{tip}" for other, seen, tip in sync_rows.peers(r.conn))])


_TIP = re.compile(r"^[0-9a-f]{0,64}$")  # a change's random stamp, as a token entry carries it
_ENTRY = re.compile(r"^([0-9a-f]{32}):(\d{1,18})(?::([0-9a-f]{0,64}))?$")


def parse_token(text: str | None) -> list[tuple[str, int, str | None]]:
    """A token's (store id, change number, tip) entries, the receiver's own first; refused if malformed."""
    if text is None or text == "":
        return []
    if not isinstance(text, str):
        raise InvalidInput(f"a sync token is text, got {type(text).__name__}")
    entries = []
    for part in text.strip().split(","):
        found = _ENTRY.match(part.strip())
        if found is None:
            raise InvalidInput(
                f"{part[:80]!r} is not a sync token entry (a store id of 32 hex digits, a colon, a change number, "
                "and a tip); take the token from the receiving store",
                hint=Hint("sync_token", (("store", "receiver"),)),
            )
        entries.append((found.group(1), int(found.group(2)), found.group(3)))
    return entries


# ---- arguments ------------------------------------------------------------------------------


def scope_list(scopes: object) -> list[str] | None:
    """``scopes`` as a list of scope names (None: every scope); InvalidInput for anything else."""
    if scopes is None:
        return None
    if isinstance(scopes, (str, bytes)) or not isinstance(scopes, (list, tuple)) or not scopes:
        raise InvalidInput(f"scopes must be a non-empty list of scope names, got {scopes!r:.80}")
    for name in scopes:
        if not isinstance(name, str) or not name.strip():
            raise InvalidInput(f"scopes must be a list of scope names; {name!r:.80} is not one")
    return list(scopes)


def _target(target: object, store_path: str) -> str | IO[bytes]:
    """Where a change set may be written: a binary file open for writing, or a new or old file path."""
    if not isinstance(target, (str, os.PathLike)) and callable(getattr(target, "write", None)):
        return target  # type: ignore[return-value]
    path = Path(checks.file_name(target, "the change set's path", "give a file path"))
    if path.is_dir():
        raise InvalidInput(f"{path} is a folder; give a file path inside it for the change set")
    if not path.parent.is_dir():
        raise InvalidInput(f"the folder {path.parent} does not exist; create it first")
    if store_path != ":memory:" and path.exists() and path.resolve() == Path(store_path).resolve():
        raise InvalidInput(f"{path} is the store itself; write the change set to another file")
    return str(path)


def _source(source: object) -> bytes | str | IO[bytes]:
    """What a change set may be read from: its bytes, a binary file open for reading, or a file path."""
    if isinstance(source, (bytes, bytearray, memoryview)):
        return bytes(source)
    if not isinstance(source, (str, os.PathLike)) and callable(getattr(source, "read", None)):
        return source  # type: ignore[return-value]
    path = Path(checks.file_name(source, "the change set", "give the bytes or the path that `changes` wrote"))
    if not path.is_file():
        raise InvalidInput(
            f"{path} is not a file; give the path of a change set another store wrote; nothing was applied",
            hint=Hint("changes", (("store", "sender"),)),
        )
    return str(path)


# ---- the sender -----------------------------------------------------------------------------


def _selection(
    r: Reconciler,
    root: int,
    seen: int,
    upto: int,
    scopes: Sequence[str] | None,
    *,
    everything: bool,
    besides: int | None,
) -> dict[str, set[int]]:
    """Kind -> refs to send: changed after ``seen``, within ``scopes``, with the worlds and ends they name.

    Changes this store made by adopting peer ``besides``'s rows are left out.
    """
    conn = r.conn
    if everything and not sync_rows.log_is_complete(conn):  # a file from before version 10: its log starts late
        picked = sync_rows.everything(conn)
    else:
        picked = sync_rows.changed_since(conn, seen, upto, besides=besides)
    picked["node"] |= picked.pop("tombstone")
    picked["node"] |= picked["alias"]  # an alias travels with its node, so its node is sent too
    allowed: set[int] | None = None
    if scopes:
        allowed = set()
        for scope in scopes:
            allowed |= transfer.chosen_nodes(r, root, scope)
        picked["node"] &= allowed
        picked["alias"] &= allowed
    ends: set[int] = set()
    kept_edges = set()
    for eid, src, dst in sync_rows.edge_ends(conn, sorted(picked["edge"])):
        if allowed is None or (src in allowed and dst in allowed):
            kept_edges.add(eid)
            ends.update((src, dst))
    picked["edge"] = kept_edges
    kept_proposals = set()
    for pid, a, b in sync_rows.proposal_pairs(conn, sorted(picked["proposal"])):
        if allowed is None or (a in allowed and b in allowed):  # a pair half outside the scopes stays home
            kept_proposals.add(pid)
            ends.update((a, b))
    picked["proposal"] = kept_proposals
    # the receiver may not hold an edge's ends, a proposal's pair or a node's worlds (a scope added since, a
    # replica restored from an older copy): they travel too, and merge as no-ops where it does
    named = picked["node"] | ends
    named |= transfer_rows.ancestors(conn, sorted(named))
    picked["node"] = named - {root}  # every store has the same root world (its id is a constant)
    return picked


def changes(
    r: Reconciler, root: int, *, token_text: str | None = None, scopes: Sequence[str] | None = None
) -> tuple[dict[str, Any], Records]:
    """The header and the records of a change set for the receiver whose token is ``token_text``.

    Reads one snapshot (a read transaction of its own unless a write is open on this connection).
    """
    conn, store = r.conn, r.store
    stack = contextlib.ExitStack()
    if conn.getautocommit():
        conn.execute("begin")
        stack.callback(lambda: conn.execute("commit") if not conn.getautocommit() else None)
    try:
        me = sync_rows.store_id(conn)
        pairs = parse_token(token_text)
        receiver = pairs[0][0] if pairs else None
        if receiver == me:
            raise InvalidInput(
                "the token is this store's own: give the receiving store's token",
                hint=Hint("sync_token", (("store", "receiver"),)),
            )
        entry = next(((n, t) for other, n, t in pairs[1:] if other == me), None)
        upto = sync_rows.last_seq(conn)
        # a receiver that never saw this store is sent everything; so is one whose count names numbers this
        # file handed out again (a restore from an older copy): merging what it holds changes nothing
        seen, digest = entry if entry is not None else (0, None)
        stale = seen > upto or (seen > 0 and digest is not None and sync_rows.tip(conn, seen) != digest)
        reset = entry is None or stale
        if reset:
            seen = 0
        # what this store adopted from the receiver stays home: the receiver holds it, unless it lost changes
        # of its own since (a restore), which the claim lets it find out (``apply``; sync/replicas.py docstring)
        heard = None if reset or receiver is None else sync_rows.heard(conn, receiver)
        besides = None if heard is None else heard[0]
        picked = _selection(r, root, seen, upto, scopes, everything=reset, besides=besides)
        tops = [root] if not scopes else sorted({t for s in scopes for t in transfer.scope_tops(r, root, s)})
        header = {
            "store_id": me,
            "seq": upto,
            "tip": sync_rows.tip(conn, upto),
            "since": seen,
            "reset": reset,
            "legacy": legacy_digest(conn),
            "store_root": store.header(root).id.hex(),
            "scopes": list(scopes) if scopes else None,
            "roots": {store.header(t).id.hex(): store.root_of(t).hex() for t in tops},
            "sent_at": r.now(),
            "echo": None if heard is None else {"seen": heard[1], "tip": heard[2]},
        }
    except BaseException:
        stack.close()
        raise
    return header, Records(_records(r, picked, stack), stack)


class Records(Iterator[dict[str, Any]]):
    """A change set's records, read from one snapshot; ``close`` ends the snapshot, read to the end or not."""

    def __init__(self, records: Generator[dict[str, Any], None, None], stack: contextlib.ExitStack) -> None:
        self._records, self._stack = records, stack

    def __next__(self) -> dict[str, Any]:
        return next(self._records)

    def close(self) -> None:
        self._records.close()
        self._stack.close()  # a generator never started runs nothing on close: the snapshot ends here


def _records(
    r: Reconciler, picked: dict[str, set[int]], stack: contextlib.ExitStack
) -> Generator[dict[str, Any], None, None]:
    """Nodes (parents first), edges, aliases, proposals: each in its export record's form."""
    conn, store = r.conn, r.store
    with stack:
        nodes = sorted(picked["node"])
        histories = sync_rows.state_changes(conn, "node", nodes)
        for start in range(0, len(nodes), 4096):
            chunk = nodes[start : start + 4096]
            rows = store.node_rows("where n.nid in (select value from json_each(?))", (json.dumps(chunk),))
            texts = transfer_rows.fts_rows(conn, chunk)
            for row in sorted(rows, key=lambda x: (x.depth, x.nid)):
                yield transfer.node_record(r, row, histories.get(row.nid, []), None, texts)
        edges = sorted(picked["edge"])
        closes = sync_rows.state_changes(conn, "edge", edges)
        for eid in edges:
            yield transfer.edge_record(r, store.edge_row(eid), closes.get(eid, []))
        for nid, alias, source, created_at in list(sync_rows.aliases_of(conn, sorted(picked["alias"]))):
            yield transfer.alias_record(r, nid, alias, source, created_at)
        for proposal in list(sync_rows.proposals(conn, sorted(picked["proposal"]))):
            yield transfer.proposal_record(r, proposal)


def write_changes(
    r: Reconciler,
    root: int,
    target: str | os.PathLike[str] | IO[bytes],
    *,
    token_text: str | None = None,
    scopes: Sequence[str] | None = None,
) -> dict[str, Any]:
    """Write the change set for a receiver's token to ``target``; what was written."""
    where = _target(target, r.conn.db_filename("main") or ":memory:")
    header, records = changes(r, root, token_text=token_text, scopes=scope_list(scopes))
    try:
        written = changeset.write(where, header, records)
    finally:
        records.close()  # a write that failed half-way ends the records' read snapshot too
    return {**written, "since": header["since"], "seq": header["seq"], "store_id": header["store_id"]}


# ---- the receiver ---------------------------------------------------------------------------


def _checked_header(header: dict[str, Any], me: str) -> None:
    if not isinstance(header.get("store_id"), str) or not _ID.match(header["store_id"]):
        raise InvalidInput("the change set's header has no valid 'store_id'; nothing was applied")
    if header["store_id"] == me:
        raise InvalidInput("this change set was written by this store itself; nothing was applied")
    for name in ("seq", "since"):
        if type(header.get(name)) is not int or not 0 <= header[name] < transfer.MOST_INT:
            raise InvalidInput(f"the change set's header has no valid {name!r}; nothing was applied")
    if not isinstance(header.get("roots"), dict) or not isinstance(header.get("store_root"), str):
        raise InvalidInput("the change set's header has no 'roots' or 'store_root'; nothing was applied")
    if header.get("tip") is not None and not (isinstance(header["tip"], str) and _TIP.match(header["tip"])):
        raise InvalidInput("the change set's header has a 'tip' that is not a change's stamp; nothing was applied")
    echo = header.get("echo")
    if echo is not None and (
        not isinstance(echo, dict)
        or type(echo.get("seen")) is not int
        or not 0 <= echo["seen"] < transfer.MOST_INT
        or not isinstance(echo.get("tip"), str)
        or not _TIP.match(echo["tip"])
    ):
        raise InvalidInput(
            "the change set's header has an 'echo' that is not a change number and a tip; nothing was applied"
        )


def _continues(conn: apsw.Connection, peer: int, header: dict[str, Any]) -> bool:
    """Whether a set picks up the sender's changes where this store's count of them stands, so that it counts.

    A scoped set leaves the sender's other changes unsent. A set made for a token this store gave before it
    was restored from an older copy leaves out the changes between the two counts (a gap). A set behind the
    count (a late one, or one from before the sender's own restore: its tip differs) is from the past.
    Their rows merge all the same.
    """
    if header.get("scopes"):
        return False
    if header.get("reset"):
        return True
    seen, tip = sync_rows.counted(conn, peer)
    if header["since"] > (seen or 0):
        return False
    return seen is None or header["seq"] > seen or (header["seq"] == seen and str(header.get("tip") or "") == tip)


def apply(
    r: Reconciler, root: int, source: bytes | str | os.PathLike[str] | IO[bytes]
) -> tuple[dict[str, Any], str | None]:
    """Check a whole change set, then apply it in one transaction; (a summary, the purge's wipe mark or None).

    Raises ``InvalidInput`` for a damaged, altered or foreign change set before anything is written. The
    caller finishes a purge's wipe (``maintenance.finish_wipe``) with the mark once the transaction committed,
    and sweeps for contradictions around what arrived (``sweep_arrived``).
    """
    conn, store = r.conn, r.store
    me, mine = sync_rows.store_id(conn), legacy_digest(conn)
    parsed = transfer.Parsed({})

    def header_first(header: dict[str, Any]) -> None:  # before any record is parsed: a foreign set costs nothing
        _checked_header(header, me)
        if header.get("legacy") != mine and (mine or header.get("legacy")):
            raise InvalidInput(
                "these two files keep the members they had before version 10 in different orders (one was lifted "
                "from an older version, and the other is not a replica made from it after the lift), so their roots "
                "could never agree; make the replica from the lifted file; nothing was applied",
                hint=Hint("replica"),
            )
        parsed.header = header

    def each(line: int, record: dict[str, Any]) -> None:  # as it is parsed: a set of bad records stops at the first
        try:
            checked(line, record)
        except InvalidInput as exc:  # read before the end line's digest: an edited set fails here first
            raise InvalidInput(
                f"{exc.message} (a change set whose records fail these checks was altered, damaged or forged)",
                hint=exc.hint,
            ) from None

    def checked(line: int, record: dict[str, Any]) -> None:
        if record.get("kind") == "queued":
            raise InvalidInput(f"record {line}: a change set carries no waiting extractions; nothing was applied")
        transfer.take(parsed, line, record)
        if record["kind"] in ("node", "edge") and record.get("ord") is None:  # every store that syncs writes one
            raise InvalidInput(f"record {line}: a member without its 'ord'; nothing was applied")
        if record.get("roots"):  # a change set sends rows, not logged history: each store logs its own roots
            raise InvalidInput(f"record {line}: a change set's node carries no logged roots; nothing was applied")

    cs = changeset.read(_source(source), header=header_first, record=each)
    header = cs.header
    # the sender left out what it adopted from this store, up to this store's change it names: if that
    # change is not here (a restore from an older copy), this store may lack some of it, and counts
    # nothing of the sender as seen, so its next set holds everything
    echo = header.get("echo")
    lost = echo is not None and sync_rows.tip(conn, echo["seen"]) != echo["tip"]
    planned = transfer.plan(r, root, parsed, partial=lost)
    tombstones = [bytes.fromhex(h) for h, (_, rec) in parsed.nodes.items() if rec["body"] is None]
    erase = sync_rows.live(conn, tombstones) if tombstones else []
    mark = None
    if erase:
        store.secure_delete(True)  # freed space is zeroed, as a local purge does
    try:
        with r.transaction() as txn:
            if erase:
                purge.hold(conn)
            peer = sync_rows.add_peer(conn, header["store_id"])
            counts = _continues(conn, peer, header)
            if header.get("reset"):
                # the sender numbers its changes anew (a restore) or starts over with this store: what this
                # store adopted from it earlier may be missing there now, so it is no longer left out for it
                sync_rows.disown(conn, peer)
            # the rows of a set that continues the count are marked as the sender's, so they are not sent back
            # to it (the echo claim vouches for them); any other set's go back once
            txn.allow_merge(peer if counts else None)
            # the changes after this one wait for the contradiction sweep (``sweep_arrived``), unless older ones do
            store.keep_meta([(SWEPT_UPTO, str(sync_rows.last_seq(conn)))])
            summary = transfer.write(txn, parsed, planned)
            store.set_meta([(APPLIED_UPTO, str(sync_rows.last_seq(conn)))])
            summary["resend"] = lost
            if erase:
                summary["purged"] = purge.erase(txn, conn, erase)
                mark = f"vacuum {uuid.uuid4().hex}"
                store.set_meta([(maintenance.WIPE_PENDING, mark)])
            if lost:
                sync_rows.forget(conn, peer)
            elif counts:
                tip = str(header.get("tip") or "")
                sync_rows.saw(conn, peer, header["seq"], tip, txn.now, reset=bool(header.get("reset")))
    finally:
        if erase:
            store.secure_delete(False)
    worlds = []
    for hex_id, sent in header["roots"].items():
        nid = store.nid_of(bytes.fromhex(hex_id)) if re.fullmatch(r"[0-9a-f]{64}", hex_id) else None
        now = store.root_of(nid).hex() if nid is not None else None
        worlds.append({"id": hex_id, "sender_root": sent, "root": now, "same": now == sent})
    summary.update(
        {
            "from": header["store_id"],
            "records": len(cs.records),
            "worlds": worlds,
            "roots_agree": all(w["same"] for w in worlds),
            "conflicts": summary.get("proposals", {}).get("conflict", 0),
            "facts": sum(1 for _, rec in parsed.nodes.values() if rec["type"] == "Fact"),
        }
    )
    summary.setdefault("purged", [])
    return summary, mark


def receive(
    writer: Writer, root: int, source: bytes | str | os.PathLike[str] | IO[bytes], *, sweep_after: bool
) -> dict[str, Any]:
    """``apply`` a change set, finish the wipe of the purges it carried, then sweep what arrived (``sweep_after``).

    The set committed before the sweep runs: a sweep that fails is reported (``sweep_failed``) and done by
    the next apply's.
    """
    r = writer.reconciler
    summary, mark = apply(r, root, source)
    if mark is not None:
        summary["checkpoint"] = maintenance.finish_wipe(r.conn, r.store, wait=True, mark=mark)
    summary["swept"] = 0
    if sweep_after:
        try:
            summary["swept"] = sweep_arrived(writer)
        except (WorldDBError, apsw.Error) as exc:  # reported, not raised: the set has committed
            summary["sweep_failed"] = str(named_error(exc) or exc)
    return summary


class Side(Protocol):
    """One store of a sync, as the facade presents it."""

    path: str

    @property
    def store_id(self) -> str: ...

    def sync_token(self) -> str: ...

    def changes(
        self, target: Any, *, since: str | None = None, scopes: Sequence[str] | None = None
    ) -> dict[str, Any]: ...

    def apply_changes(self, source: Any, *, sweep: bool = True) -> dict[str, Any]: ...

    def root(self) -> str: ...


def exchange(this: Side, other: Side, *, pull: bool, push: bool, scopes: Sequence[str] | None) -> dict[str, Any]:
    """``pull`` the other's changes here and ``push`` this one's there, each direction one change set."""
    if other.store_id == this.store_id:
        raise InvalidInput(
            f"{other.path} has this store's own id: it is a plain copy of this file, or this file itself. "
            "Make a replica of it instead: a replica has an id of its own",
            hint=Hint("replica"),
        )
    out: dict[str, Any] = {}
    for name, sender, receiver, wanted in (("pull", other, this, pull), ("push", this, other, push)):
        if not wanted:
            continue
        sent, first = 0, None
        for _ in range(2):  # a receiver that lost changes of its own (a restore) asks for everything, once
            buffer = io.BytesIO()
            sent += sender.changes(buffer, since=receiver.sync_token(), scopes=scopes)["bytes"]
            applied = receiver.apply_changes(buffer.getvalue())
            if not applied["resend"]:
                break
            first = applied
        out[name] = {**applied, "bytes": sent} if first is None else {**applied, "bytes": sent, "first": first}
    if pull and push and not scopes:
        out["converged"] = this.root() == other.root()
    return out


def sweep_arrived(writer: Writer) -> int:
    """The contradiction sweep around what changed after the sweep's mark (nodes, srcs of edges); the edges added.

    Two devices may each hold a current value of one functional slot; their values meet only when applied.
    The mark (meta ``SWEPT_UPTO``) is set by the first apply after a sweep and removed once a sweep finished
    that saw every apply's changes, so an apply whose sweep was killed or skipped (``sweep=False``) is swept
    by the next one. What this device writes itself is not swept here (its write path handled it), unless
    written while the mark waits.
    """
    conn = writer.conn
    held = writer.store.meta_values([SWEPT_UPTO]).get(SWEPT_UPTO)
    if held is None:
        return 0
    upto = sync_rows.last_seq(conn)
    near = sync_rows.touched_since(conn, int(held), upto)
    done = sweep.sweep(writer, near=near) if near else 0
    with writer.transaction():
        marks = writer.store.meta_values([SWEPT_UPTO, APPLIED_UPTO])
        if int(marks.get(APPLIED_UPTO, "0")) <= upto:
            writer.store.delete_meta([SWEPT_UPTO])
        elif int(marks.get(SWEPT_UPTO, upto)) < upto:  # an apply committed meanwhile: sweep its changes next
            writer.store.set_meta([(SWEPT_UPTO, str(upto))])
    return done


def make_replica(r: Reconciler, path: str) -> str:
    """Turn ``path``, a fresh copy of this store, into a replica of its own; returns its new store id.

    Each side counts the other's changes up to the copy as seen, so their first sync sends only what
    changed since; the copy's rows are marked as the original's (change_log.origin).
    """
    new = uuid.uuid4().hex
    original = sync_rows.store_id(r.conn)
    conn = connect(path, create=False)
    try:
        with conn, engine_write(conn):  # version 12: meta and sync_peer are guarded
            sync_rows.set_store_id(conn, new)
            peer = sync_rows.add_peer(conn, original)
            seq = sync_rows.last_seq(conn)
            digest = sync_rows.tip(conn, seq)
            sync_rows.saw(conn, peer, seq, digest, system_clock(), reset=True)
            sync_rows.attribute(conn, peer)
    finally:
        conn.close()
    with r.conn, engine_write(r.conn):
        sync_rows.saw(r.conn, sync_rows.add_peer(r.conn, new), seq, digest, system_clock(), reset=True)
    return new
