"""The rows sync reads and writes: this file's store id, its change log, and the peers it has heard from."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from typing import Any

import apsw
from blake3 import blake3

from ..errors import Hint, NotFound
from ..store.connection import as_int, one_row


def _json(refs: Sequence[int]) -> str:
    return json.dumps(sorted(set(refs)))


def store_id(conn: apsw.Connection) -> str:
    """The store id of this file (meta store_id, 32 hex digits)."""
    row = conn.execute("select value from meta where key = 'store_id'").fetchone()
    if row is None:
        raise NotFound("this store has no store_id in meta: its meta table is damaged", hint=Hint("verify"))
    return str(row[0])


def set_store_id(conn: apsw.Connection, value: str) -> None:
    """Give this file a new store id (a copy made to become a replica of its own)."""
    conn.execute("update meta set value = ? where key = 'store_id'", (value,))


def last_seq(conn: apsw.Connection) -> int:
    """The newest change number of this file (0: none yet)."""
    return as_int(one_row(conn.execute("select coalesce(max(seq), 0) from change_log").fetchone())[0])


def peers(conn: apsw.Connection) -> list[tuple[str, int, str]]:
    """(store id, change number seen, its tip) of every replica this file has applied changes from."""
    return [
        (str(a), as_int(b), str(c or ""))
        for a, b, c in conn.execute("select store_id, seen, tip from sync_peer where seen is not null order by peer")
    ]


def tip(conn: apsw.Connection, seq: int) -> str:
    """A short digest naming change ``seq`` (its kind and the random stamp drawn for it): '' for none.

    Change numbers are this file's own; after a restore from an older copy they are handed out again for
    other changes, which the stamp tells apart (what a change touched would not: the same row often changes
    twice).
    """
    row = conn.execute("select kind, stamp from change_log where seq = ?", (seq,)).fetchone()
    if row is None:
        return ""
    return blake3(f"{row[0]}:{row[1]}".encode()).hexdigest()[:16]


def counted(conn: apsw.Connection, peer: int) -> tuple[int | None, str]:
    """The peer's change this file has applied up to and its tip (None and '': nothing yet, or only scopes)."""
    row = conn.execute("select seen, tip from sync_peer where peer = ?", (peer,)).fetchone()
    if row is None or row[0] is None:
        return None, ""
    return as_int(row[0]), str(row[1] or "")


def heard(conn: apsw.Connection, other: str) -> tuple[int, int, str] | None:
    """(peer, change seen, its tip) of another store this file has applied a whole change set from, if any."""
    peer = peer_of(conn, other)
    if peer is None:
        return None
    seen, tip = counted(conn, peer)
    return (peer, seen, tip) if seen and tip else None


def forget(conn: apsw.Connection, peer: int) -> None:
    """Count nothing of the peer as seen: its next change set for this file holds everything."""
    conn.execute("update sync_peer set seen = null, tip = null where peer = ?", (peer,))


def peer_of(conn: apsw.Connection, other: str) -> int | None:
    """The sync_peer row of another store, if this file has one."""
    row = conn.execute("select peer from sync_peer where store_id = ?", (other,)).fetchone()
    return None if row is None else as_int(row[0])


def add_peer(conn: apsw.Connection, other: str) -> int:
    """The sync_peer row of another store, created if new."""
    conn.execute("insert or ignore into sync_peer (store_id) values (?)", (other,))
    found = peer_of(conn, other)
    assert found is not None
    return found


def saw(conn: apsw.Connection, peer: int, seq: int, digest: str, at: str, *, reset: bool = False) -> None:
    """Record that this file has applied the peer's changes up to ``seq`` (``digest``: its tip).

    It never moves back, unless ``reset``: the peer sent everything, as its numbers started again.
    """
    if reset:
        conn.execute("update sync_peer set seen = ?, tip = ?, synced_at = ? where peer = ?", (seq, digest, at, peer))
    else:
        conn.execute(
            "update sync_peer set tip = case when seen is null or ? >= seen then ? else tip end, "
            "seen = max(coalesce(seen, 0), ?), synced_at = ? "
            "where peer = ?",
            (seq, digest, seq, at, peer),
        )


def disown(conn: apsw.Connection, peer: int) -> None:
    """Count what this file adopted from the peer so far as its own: it goes back to the peer once."""
    conn.execute("update change_log set origin = null where origin = ?", (peer,))


def attribute(conn: apsw.Connection, peer: int) -> None:
    """Count every change this file wrote itself as the peer's (a replica's copy of the peer's file)."""
    conn.execute("update change_log set origin = ? where origin is null", (peer,))


def changed_since(conn: apsw.Connection, since: int, upto: int, *, besides: int | None = None) -> dict[str, set[int]]:
    """Kind -> refs this file changed in (since, upto], leaving out the changes it adopted from peer ``besides``."""
    out: dict[str, set[int]] = {"node": set(), "edge": set(), "alias": set(), "proposal": set(), "tombstone": set()}
    for kind, ref in conn.execute(
        "select kind, ref from change_log where seq > ? and seq <= ? and coalesce(origin, 0) != ?",
        (since, upto, -1 if besides is None else besides),
    ):
        out[str(kind)].add(as_int(ref))
    return out


def touched_since(conn: apsw.Connection, since: int, upto: int) -> set[int]:
    """The nodes changed in (since, upto] and the srcs of the edges changed then."""
    return {
        as_int(r[0])
        for r in conn.execute(
            "select ref from change_log where seq > ?1 and seq <= ?2 and kind = 'node' union "
            "select e.src from change_log as c join edge as e on e.eid = c.ref "
            "where c.seq > ?1 and c.seq <= ?2 and c.kind = 'edge'",
            (since, upto),
        )
    }


def log_is_complete(conn: apsw.Connection) -> bool:
    """Whether the change log holds every row: a file created at version 10 or later (no legacy_order)."""
    return conn.execute("select 1 from legacy_order limit 1").fetchone() is None


def everything(conn: apsw.Connection) -> dict[str, set[int]]:
    """Every node (the root aside), edge, alias holder and proposal: what a replica that saw nothing needs."""
    return {
        "node": {as_int(r[0]) for r in conn.execute("select nid from node where parent is not null")},
        "edge": {as_int(r[0]) for r in conn.execute("select eid from edge")},
        "alias": {as_int(r[0]) for r in conn.execute("select distinct nid from alias")},
        "proposal": {as_int(r[0]) for r in conn.execute("select pid from merge_proposal")},
        "tombstone": set(),
    }


def edge_ends(conn: apsw.Connection, eids: Sequence[int]) -> Iterator[tuple[int, int, int]]:
    """(eid, src, dst) of these edges."""
    for eid, src, dst in conn.execute(
        "select eid, src, dst from edge where eid in (select value from json_each(?))", (_json(eids),)
    ):
        yield as_int(eid), as_int(src), as_int(dst)


def state_changes(conn: apsw.Connection, kind: str, refs: Sequence[int]) -> dict[int, list[tuple[Any, ...]]]:
    """Ref -> its state_log entries (at, invalid_at, closed_at, expired_at, retired), oldest first."""
    out: dict[int, list[tuple[Any, ...]]] = {}
    for ref, *entry in conn.execute(
        "select ref, at, invalid_at, closed_at, expired_at, retired from state_log "
        "where kind = ? and ref in (select value from json_each(?)) order by lid",
        (kind, _json(refs)),
    ):
        out.setdefault(as_int(ref), []).append(tuple(entry))
    return out


def aliases_of(conn: apsw.Connection, nids: Sequence[int]) -> Iterator[tuple[int, str, str | None, str]]:
    """(nid, alias, source, created_at) of these nodes' aliases."""
    yield from conn.execute(
        "select nid, alias, source, created_at from alias where nid in (select value from json_each(?)) "
        "order by nid, norm",
        (_json(nids),),
    )


def proposal_pairs(conn: apsw.Connection, pids: Sequence[int]) -> Iterator[tuple[int, int, int]]:
    """(pid, a, b) of these proposals."""
    for pid, a, b in conn.execute(
        "select pid, a, b from merge_proposal where pid in (select value from json_each(?))", (_json(pids),)
    ):
        yield as_int(pid), as_int(a), as_int(b)


# a merge proposal as its record is built from (sync/transfer.proposal_record), for sync and export alike
PROPOSAL_ROWS = "select a, b, status, score, tier, reason, proposed_at, decided_at, conflict from merge_proposal"


def proposals(conn: apsw.Connection, pids: Sequence[int]) -> Iterator[tuple[Any, ...]]:
    """(a, b, status, score, tier, reason, proposed_at, decided_at, conflict) of these proposals."""
    among = " where pid in (select value from json_each(?)) order by pid"
    yield from conn.execute(PROPOSAL_ROWS + among, (_json(pids),))


def live(conn: apsw.Connection, raw_ids: Sequence[bytes]) -> list[int]:
    """The nids of these ids whose content this file still holds (not purged)."""
    return [
        as_int(r[0])
        for r in conn.execute(
            "select nid from node where body is not null and id in (select unhex(value) from json_each(?))",
            (json.dumps(sorted(raw.hex() for raw in raw_ids)),),
        )
    ]
