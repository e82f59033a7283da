"""The tables beyond nodes, edges and roots that ``verify`` checks: logs, meta, aliases, sync, retention, vectors.

Each check names its table in the violation. What the file cannot witness (a row no other row derives
from, such as an alias a user gave) is listed in the report's ``unchecked`` with the reason; those
tables' guard triggers refuse every raw write (schema.sql, version 12).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable, Sequence

import apsw
import numpy as np

from ..models.embed import embedding_text
from ..store import integrity, vector_codes
from ..store.connection import user_version
from ..store.erasure import ERASED_REASON
from ..store.migrations import legacy_digest
from ..text.names import normalise_alias

Bad = Callable[[str, str], None]
# cosine a text embedded again keeps with its stored vector (a float32 rounding away from 1); another memory's
# vector is far below, and a negated one at -1. The write path embedded the caller's text while the blob keeps
# it NFC, so a text that decomposes is also embedded decomposed and the closer of the two counts.
SAME_TEXT = 0.99
Embed = Callable[[Sequence[str]], np.ndarray]

LEGACY_DIGEST = "legacy_digest"  # meta: legacy_order's digest, written when a file is lifted to version 12
REQUIRED_META = ("schema_version", "embedder_id", "embedder_dim", "created_at", "store_id", "compose")
COLD_REASON = re.compile(
    r"retention score (\S+) (?:below cold_below \S+|not among the [\d,]+ highest \(max_hot_vectors\))"
)
COLD_KINDS = ("Memory", "Summary", "Fact", "Turn")  # consolidate/retention.py KINDS: what may go cold

# Tables verify reads but cannot fully judge: why a forged or deleted row of each can pass.
UNCHECKED = {
    "alias": "a user's alias (add_alias) has no witness but its own row and change_log row: verify checks each "
    "is well formed, names a live node and is logged, but cannot tell a well-formed forged one from a real "
    "one, nor see one of a node's several aliases deleted",
    "merge_proposal": "a proposal is a decision waiting for a person: verify checks its status, its dates, its "
    "change_log row and the same_as edges of an acceptance, but no other row derives a pending proposal",
    "cold_node": "which memories are cold depends on the retention scores at the last run (time-dependent): "
    "verify checks each row names a leaf memory with a vector and a reason that matches its score, but not "
    "that the tier is the one a run would choose; the next consolidate recomputes it",
    "work_queue": "whether a queued turn's extraction ran leaves no trace when it found nothing: verify checks "
    "each row names a turn of its scope, not whether a done_at was earned",
    "sync_peer": "how far each replica's change log was seen is the other file's to confirm (sync compares "
    "the tip digests); verify checks the ids and that no peer is this store",
    "meta": "the store id, the embedder and the settings are facts about the file no row derives from: "
    "verify checks every required key is present and well formed, not that a well-formed value is the one "
    "written",
    "node_access": "recall counts are this file's own bookkeeping (consolidate/retention.py); a forged count only "
    "moves a memory between tiers at the next retention run",
}
# Every table verify reads (ops/verify.py and here); FTS5's shadow tables are read through node_fts.
CHECKED_TABLES = (
    "node",
    "node_state",
    "edge",
    "merkle",
    "root_log",
    "state_log",
    "tombstone",
    "reconciler_session",
    "legacy_order",
    "change_log",
    "index_text",
    "node_fts",
    "node_tokens",
    "node_vec",
    "world_vec",
    "vec_centroid",
    "vec_segment",
    *UNCHECKED,
)


def check_tables(conn: apsw.Connection, deep: bool, bad: Bad) -> dict[str, str]:
    """Every check of this module but the vectors'; returns what cannot be checked, table -> why."""
    meta = integrity.meta_rows(conn)
    _check_meta(conn, meta, bad)
    _check_logs(conn, deep, bad)
    _check_aliases(conn, bad)
    for nid in integrity.live_tombstones(conn):
        bad("1-content-address", f"tombstone: node {nid} has a purge tombstone but keeps its content")
    _check_proposals(conn, bad)
    _check_cold(conn, bad)
    for qid in integrity.queue_faults(conn):
        bad(
            "4-never-appends",
            f"work_queue row {qid} names no turn or note inside its scope, or a purged one still queued",
        )
    _check_legacy(conn, meta, bad)
    return dict(UNCHECKED)


def _check_meta(conn: apsw.Connection, meta: dict[str, str], bad: Bad) -> None:
    for key in REQUIRED_META:
        if key not in meta:
            bad("4-never-appends", f"meta: the store's {key} row is missing; restore the store from a backup")
    if meta.get("schema_version", str(user_version(conn))) != str(user_version(conn)):
        bad("4-never-appends", f"meta: schema_version {meta['schema_version']} is not the file's version")
    if "embedder_dim" in meta and not meta["embedder_dim"].isdigit():
        bad("4-never-appends", f"meta: embedder_dim {meta['embedder_dim']!r} is not a number")
    store_id = meta.get("store_id")
    if store_id is not None and not re.fullmatch(r"[0-9a-f]{32}", store_id):
        bad("4-never-appends", f"meta: store_id {store_id!r} is not 32 hex digits, as every replica's is")
    if store_id is not None and store_id in integrity.peer_ids(conn):
        bad("4-never-appends", f"sync_peer: a peer has this store's own store_id {store_id}")


def _check_logs(conn: apsw.Connection, deep: bool, bad: Bad) -> None:
    """The logs run without a gap; deep: the change log lists everything this file wrote, and nothing else."""
    for table, key in (("root_log", "lid"), ("state_log", "lid"), ("change_log", "seq")):
        rows, top, missing = integrity.gaps(conn, table)
        if missing is not None:
            bad(
                "4-never-appends" if table == "change_log" else "2-merkle",
                f"{table}: row {key} {missing} of {top} is missing ({top - rows} in all); deleted around the engine",
            )
    if not deep:
        return
    for seq, kind, ref in integrity.change_orphans(conn):
        bad("4-never-appends", f"change_log row {seq} names {kind} {ref}, which this store does not hold")
    if integrity.legacy_sizes(conn):
        return  # a file lifted from before version 10 logs only what it wrote since (sync sends it everything)
    for kind, ref in integrity.change_missing(conn):
        bad(
            "4-never-appends",
            f"change_log lacks a row for {_TABLE_OF[kind]} {ref} (a change of it): sync never sends it to replicas",
        )


_TABLE_OF = {"node": "node", "edge": "edge", "alias": "alias", "proposal": "merge_proposal", "tombstone": "tombstone"}


def _check_aliases(conn: apsw.Connection, bad: Bad) -> None:
    for nid, alias, norm, live in integrity.alias_rows(conn):
        if not live:
            bad("4-never-appends", f"alias {alias!r} names node {nid}, which has no content (purged or missing)")
        elif normalise_alias(alias) != norm:
            bad("4-never-appends", f"alias {alias!r} of node {nid} is looked up as {norm!r}, not its own form")


def _check_proposals(conn: apsw.Connection, bad: Bad) -> None:
    for pid, status, decided, reason, purged in integrity.proposal_rows(conn):
        if (status == "pending") != (decided is None):
            bad("6-no-silent-merge", f"merge_proposal {pid} is {status} but decided_at is {decided!r}")
        if purged and reason != ERASED_REASON:
            bad("6-no-silent-merge", f"merge_proposal {pid} names a purged node but keeps its reason")


def _check_cold(conn: apsw.Connection, bad: Bad) -> None:
    for nid, kind, score, reason, leaf in integrity.cold_rows(conn):
        said = COLD_REASON.fullmatch(reason)
        if kind not in COLD_KINDS or not leaf:
            bad("7-indexes", f"cold_node row {nid} is no memory with a vector (a {kind}): retention never moves it")
        elif said is None or said.group(1) != f"{score:.3g}":
            bad("7-indexes", f"cold_node row {nid}'s reason {reason!r} is not retention's for its score {score:.3g}")


def _check_legacy(conn: apsw.Connection, meta: dict[str, str], bad: Bad) -> None:
    """legacy_order is as the lift to version 10 left it: its digest, kept in meta since version 12."""
    if legacy_digest(conn) != meta.get(LEGACY_DIGEST, ""):
        bad(
            "2-merkle",
            "legacy_order differs from what the file kept when lifted to version 10: it would switch off the "
            "member-order check and make sync send everything; restore the store from a backup",
        )
    for world in integrity.legacy_exceeding(conn):
        bad("2-merkle", f"legacy_order keeps more slots of world {world} than it holds")


def check_centroids(conn: apsw.Connection, dim: int | None, bad: Bad) -> None:
    """Every IVF centroid is a unit float32 vector of the store's dimension; every partition named has one."""
    parts = set()
    for part, blob in integrity.centroid_rows(conn):
        parts.add(part)
        vector = _floats(blob, dim)
        if vector is None or abs(float(np.linalg.norm(vector)) - 1.0) > 1e-3:
            bad("7-indexes", f"vec_centroid {part} is not a unit vector of the store's dimension")
    unknown = integrity.vector_parts(conn) - parts - ({0} if not parts else set())
    for part in sorted(unknown)[:20]:
        bad("7-indexes", f"node_vec rows name IVF partition {part}, which vec_centroid lacks")


def check_vector_rows(conn: apsw.Connection, dim: int | None, bad: Bad) -> None:
    """Every node_vec row codes a unit vector of the store's dimension, as every write leaves it.

    A row damaged on disk (SQLite's own checks see a well-formed page) would change answers silently: the
    vector lane scores by it. Named here, not only by the deep check's embedding again.
    """
    faults = 0
    for nid, blob, scale in conn.execute("select nid, embedding, scale from node_vec"):
        vector = _coded(blob, scale, dim)
        if vector is None or abs(float(np.dot(vector, vector)) - 1.0) > 2e-3:
            faults += 1
            if faults <= 20:
                bad(
                    "7-indexes",
                    f"vector row {nid} is not a unit vector of the store's dimension (damaged on disk, or written "
                    "around the engine); re-embedding the store writes every vector again",
                )


def _floats(blob: object, dim: int | None) -> np.ndarray | None:
    """A float32 blob of ``dim`` finite values (a centroid), else None."""
    if not isinstance(blob, bytes) or dim is None or len(blob) != 4 * dim:
        return None
    vector = np.frombuffer(blob, dtype="<f4")
    return vector if bool(np.isfinite(vector).all()) else None


def _coded(blob: object, scale: object, dim: int | None) -> np.ndarray | None:
    """The vector a node_vec row codes: ``dim`` int8 codes and a finite scale, else None."""
    if not isinstance(blob, bytes) or not isinstance(scale, float) or dim is None or len(blob) != dim:
        return None
    vector = vector_codes.row(blob, scale)
    return vector if bool(np.isfinite(vector).all()) else None


def check_embeddings(
    conn: apsw.Connection,
    vectors: Callable[[list[int]], dict[int, np.ndarray]],
    anchors: Callable[[list[int]], dict[int, np.ndarray | None]],
    composed: set[int],
    embed: Embed,
    bad: Bad,
    batch: int = 256,
) -> int:
    """Deep: every text embedded again matches its node's vector (a world's: its anchor); how many were compared."""
    wrong = 0
    done = 0
    chunk: list[tuple[int, str]] = []

    def compare() -> None:
        nonlocal wrong, done
        fresh = embed([t for _, t in chunk])
        nids = [n for n, _ in chunk]
        other = [(i, unicodedata.normalize("NFD", t)) for i, (_, t) in enumerate(chunk)]
        other = [(i, t) for i, t in other if t != chunk[i][1]]
        decomposed = dict(zip([i for i, _ in other], embed([t for _, t in other]), strict=True)) if other else {}
        leaves = vectors([n for n in nids if n not in composed])
        worlds = anchors([n for n in nids if n in composed])
        for i, ((nid, _), vector) in enumerate(zip(chunk, fresh, strict=True)):
            stored = worlds.get(nid) if nid in composed else leaves.get(nid)
            if stored is None:
                continue  # a missing row is reported by the row sets
            same = max(float(np.dot(v, stored)) for v in (vector, decomposed.get(i, vector)))
            if same < SAME_TEXT and wrong < 20:
                wrong += 1
                what = "world_vec anchor" if nid in composed else "node_vec row"
                bad("7-indexes", f"{what} of node {nid} is not its text's embedding: written around the engine")
        done += len(chunk)
        chunk.clear()

    for nid, name, content in integrity.embedded_texts(conn):
        text = embedding_text(name, content)
        if text:
            chunk.append((nid, text))
        if len(chunk) >= batch:
            compare()
    if chunk:
        compare()
    return done
