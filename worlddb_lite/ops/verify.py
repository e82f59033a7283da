"""``worlddb verify``: recompute every hash and root and check every invariant of docs/design.md.

Each check appends ``Violation``s instead of stopping, so one run names everything wrong.
Roots are recomputed bottom-up from the *recomputed* roots of members, never from the
stored ones, so a tampered leaf shows up at every ancestor's root.
"""

from __future__ import annotations

import bisect
import re
import unicodedata
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from typing import Any

import apsw
import numpy as np

from ..edges import EdgeRegistry
from ..index import segments
from ..index.ivf import IvfIndex
from ..index.token_index import content_tokens
from ..index.world_vectors import compose_from_scratch
from ..models.embed import TokenVectors, embed_checked, token_table
from ..store import integrity, queries, vector_codes
from ..store.connection import BUSY_TIMEOUT_MS, as_bytes, as_int, one_row
from ..store.hashing import EMPTY_TREE, edge_body, edge_id, edge_leaf, node_id, world_root
from ..store.merkle import compute_levels
from ..store.merkle_replay import Divergence, replay
from ..store.migrations import GUARDS, SEGMENT_GUARDS
from ..store.rows import NodeRow, Store
from ..store.vector_table import VectorTable
from ..types import VerifyReport, Violation
from ..write.reconciler import Reconciler
from . import verify_tables

REQUIRED_TRIGGERS = (
    "node_insert_guard",
    "node_blob_immutable",
    "node_delete_guard",
    "node_state_insert_guard",
    "node_state_update_guard",
    "node_state_delete_guard",
    "node_state_validity_tightens",
    "node_state_belief_final",
    "edge_insert_guard",
    "edge_update_guard",
    "edge_delete_guard",
    "edge_identity_immutable",
    "edge_validity_tightens",
    "merge_decision_final",
    "root_log_append_only",
    "root_log_no_delete",
    "state_log_append_only",
    "state_log_no_delete",
    "tombstone_final",
    "tombstone_no_delete",
    "edge_belief_final",
    *GUARDS,
    *SEGMENT_GUARDS,
)
# Without these a write would not reach the change log, and sync would never send it (sync/replicas.py).
CHANGE_TRIGGERS = (
    "change_node",
    "change_node_state",
    "change_edge",
    "change_edge_state",
    "change_alias",
    "change_alias_time",
    "change_proposal",
    "change_proposal_decided",
    "change_tombstone",
)


def _structure(conn: apsw.Connection, *, sealed: bool = False) -> list[str]:
    """SQLite's ``quick_check`` of the store, on a fresh connection when it is a file.

    FTS5's check on a connection that read the full-text index before another connection wrote to it
    reports blobs missing that are there (SQLite 3.54, reproduced without this package), so a
    long-lived store saw false corruption while another process wrote. A ``sealed`` store (read as it
    lies, in a folder this process may not write: ``connection.connect_sealed``) has no writer, and a
    plain second connection could not open it.
    """
    where = conn.db_filename("main")
    if not where or sealed:  # in memory, or sealed: no other connection writes to it
        return list(integrity.quick_check(conn))
    fresh = apsw.Connection(where, flags=apsw.SQLITE_OPEN_READONLY)
    try:
        fresh.set_busy_timeout(BUSY_TIMEOUT_MS)
        return list(integrity.quick_check(fresh))
    finally:
        fresh.close()


def verify_open(r: Reconciler, progress: Callable[[str], None] | None, *, deep: bool, sealed: bool) -> VerifyReport:
    """``verify_store`` of an open store in one snapshot, with its embedder (what the facade's ``verify`` runs).

    The deep check embeds each text again as the write path did (no embedder: vectors are not checked).
    """
    embedder, dim = r.embedder, r.dim
    embed = None if embedder is None else (lambda texts: embed_checked(embedder, texts, dim))
    return verify_in_snapshot(
        r.conn,
        r.store,
        r.registry,
        embedder is not None,
        progress,
        deep=deep,
        tokens=token_table(embedder),
        embed=embed,
        sealed=sealed,
    )


def verify_in_snapshot(conn: apsw.Connection, *args: Any, **kwargs: Any) -> VerifyReport:
    """``verify_store`` in one read snapshot: another process's commit must not land between two checks."""
    outside = conn.getautocommit()
    if outside:
        conn.execute("begin")
    try:
        return verify_store(conn, *args, **kwargs)
    finally:
        if outside and not conn.getautocommit():
            conn.execute("commit")


def verify_store(
    conn: apsw.Connection,
    store: Store,
    registry: EdgeRegistry,
    embeds_every_text: bool,
    progress: Callable[[str], None] | None = None,
    *,
    deep: bool = False,
    tokens: Callable[[], TokenVectors] | None = None,
    embed: verify_tables.Embed | None = None,
    sealed: bool = False,
) -> VerifyReport:
    """Check the whole store; return what was checked and every violation.

    ``deep`` also recomposes every world's embedding from its children's vectors, tokenizes every
    text again for the token index (``tokens``: how to get the store's token table, None for an
    embedder without one) and replays the history to recompute every world root ever logged, naming the
    first that diverges; ``embed`` (None: the store has no embedder) embeds every text again to check its
    vector. ``unchecked`` in the report names the tables whose rows nothing else witnesses, and why.
    ``sealed``: the store is read as it lies (``connection.connect_sealed``).
    """
    say = progress or (lambda _msg: None)
    out: list[Violation] = []

    def bad(invariant: str, detail: str) -> None:
        out.append(Violation(invariant, detail))

    say("sqlite integrity")
    try:
        for line in _structure(conn, sealed=sealed):
            if line != "ok":
                bad("sqlite", str(line))
        for row in integrity.foreign_key_faults(conn):
            bad("sqlite", f"foreign key broken: {row}")
    except apsw.CorruptError as exc:
        bad("sqlite", f"the file is damaged: {exc}; restore it from a backup")
        return VerifyReport(checked={}, violations=tuple(out))

    say("guards")
    triggers = integrity.trigger_names(conn)
    for name in REQUIRED_TRIGGERS:
        if name not in triggers:
            bad("4-never-appends", f"guard trigger {name} is missing; the store can be written around the reconciler")
    for name in CHANGE_TRIGGERS:
        if name not in triggers:
            bad("4-never-appends", f"trigger {name} is missing; writes would not reach the change log that sync sends")
    if integrity.session_rows(conn):
        bad("4-never-appends", "a reconciler session row is present at rest (forged or left by a foreign writer)")

    say("nodes")
    tombstones = integrity.tombstone_ids(conn)
    nodes, texts = _scan_nodes(store, tombstones, bad)

    say("edges")
    known = set(registry.names()) | store.recorded_edge_types()
    leaves: list[tuple[int, int, bytes]] = []  # (world, slot, leaf hash): all the root check needs of an edge
    edge_keys: list[tuple[int, int, tuple[str, int, bytes]]] = []  # (world, slot, member key): the order check
    same_as: set[tuple[int, int]] = set()  # open same_as edges: all the merge check needs
    edges = 0
    for e in store.iter_edge_rows("", ()):  # streamed: a store's edges need not fit in memory as rows
        edges += 1
        leaves.append((e.world, e.slot, edge_leaf(e.id, e.state())))
        edge_keys.append((e.world, e.slot, (e.created_at, e.ord, e.id)))
        if e.type == "same_as" and e.invalid_at is None:
            same_as.add((e.src, e.dst))
        src, dst = nodes.get(e.src), nodes.get(e.dst)
        if (
            src is None
            or dst is None
            or edge_id(edge_body(e.type, src.id.hex(), dst.id.hex(), e.valid_at, e.props)) != e.id
        ):
            bad("1-content-address", f"edge {e.id.hex()[:16]} does not hash to its id")
        if e.type not in known:
            bad(
                "4-never-appends",
                f"edge {e.id.hex()[:16]} has type {e.type!r}, neither built in nor recorded "
                "as a custom type: it was not written by the reconciler",
            )
        if _lowest_common(nodes, e.src, e.dst) != e.world:
            bad("5-containment", f"edge {e.id.hex()[:16]} is not held by the lowest world of its ends")
        if e.type == "supersedes":
            target = nodes.get(e.dst)
            if (
                target is not None
                and e.expired_at is None
                and (target.invalid_at is None or target.invalid_at > nodes[e.src].valid_at)
            ):
                bad("3-validity", f"{target.id.hex()[:16]} is superseded but its validity was not closed")

    say("merkle roots")
    checked_worlds = _check_roots(conn, nodes, leaves, bad)
    _check_member_order(conn, nodes, edge_keys, bad)
    del edge_keys

    say("merges")
    _check_merges(conn, same_as, bad)

    say("indexes")
    fts = integrity.fts_rowids(conn)
    for nid in sorted(texts - fts)[:20]:
        bad("7-indexes", f"node {nodes[nid].id.hex()[:16]} has text but no full-text row")
    for nid in sorted(fts - texts)[:20]:
        bad("7-indexes", f"full-text row {nid} belongs to no node with text")
    for nid in sorted(integrity.index_text_nids(conn) - fts)[:20]:
        bad("7-indexes", f"index_text row {nid} belongs to no full-text row")
    _check_fts_rows(conn, nodes, deep, bad)
    if deep:
        _check_fts_index(conn, nodes, bad)
    vec = _check_vectors(conn, nodes, texts, embeds_every_text, deep, bad, embed)
    kept = _check_kept_index(conn, nodes, deep, bad)
    token_rows = _check_tokens(conn, fts, tokens, deep, bad)
    node_count = len(nodes)
    del nodes, leaves, same_as, texts  # the replay builds its own; both at once would double the peak
    history = _check_root_history(conn, say, bad) if deep else 0
    say("logs, meta, aliases, sync, retention")
    unchecked = verify_tables.check_tables(conn, deep, bad)

    return VerifyReport(
        checked={
            "nodes": node_count,
            "edges": edges,
            "worlds": checked_worlds,
            "fts_rows": len(fts),
            "vector_rows": len(vec),
            "kept_index_rows": kept,
            "token_rows": token_rows,
            **({"logged_roots": history} if deep else {}),
        },
        violations=tuple(out),
        unchecked=unchecked,
    )


def _check_fts_rows(
    conn: apsw.Connection, nodes: dict[int, NodeRow], deep: bool, bad: Callable[[str, str], None]
) -> None:
    """What index_text adds to a full-text row sits on a node with text; deep: its neighbours said it.

    A row's name and content are its node's blob's (node_fts is contentless: node_text reads them
    back). The write path indexes a turn with the turns around it (windows, the context bridge) and a fact
    with the text around it in the memory it came from, none of which its blob keeps; rebuilding
    those exactly needs the write's options (window sizes, the bridge, purged walls). So the
    deep check asks less but enough to catch an index written around the engine: every word added
    to a row occurs in the texts or names of its node's world's members or of the nodes its edges
    join (a window may clip a word at either end: a word's start or end counts).
    """
    wrong = 0
    world: int | None = None
    vocabulary: _Words | None = None
    for nid, parent, _, content, added, f_context in integrity.indexed_texts(conn):
        label = nodes[nid].id.hex()[:16] if nid in nodes else str(nid)
        if added is not None and not content:
            bad("7-indexes", f"full-text row of {label} adds text to a node that has none (index_text)")
            wrong += 1
        elif deep and (added is not None or f_context):
            if vocabulary is None or world != parent:
                world = parent
                vocabulary = _Words(integrity.member_texts(conn, parent) if parent is not None else ())
            extra = _Words.of((added or "") + "\n" + f_context)
            unsaid = [w for w in extra if not vocabulary.has(w)]
            if unsaid:
                linked = _Words(integrity.linked_texts(conn, nid))
                unsaid = [w for w in unsaid if not linked.has(w)]
            if unsaid:
                shown = ", ".join(sorted(unsaid)[:5])
                bad(
                    "7-indexes",
                    f"full-text row of {label} holds words neither it nor its neighbours say ({shown}): "
                    "the index was written around the engine, so search finds the memory by them; "
                    "restore the store from a backup",
                )
                wrong += 1
        if wrong >= 20:
            return


def _check_fts_index(conn: apsw.Connection, nodes: dict[int, NodeRow], bad: Callable[[str, str], None]) -> None:
    """The full-text index holds each row's text as node_text reads it back, and nothing else (deep).

    node_fts is contentless, so a row's words can only be checked by indexing its text again.
    """
    rows, terms = integrity.fts_differences(conn)
    for nid in rows:
        label = nodes[nid].id.hex()[:16] if nid in nodes else str(nid)
        bad(
            "7-indexes",
            f"node_fts: the full-text index's row of {label} is not its text (node_text): it was written around the "
            "engine, so search finds the memory by other words; restore the store from a backup",
        )
    if terms:
        bad(
            "7-indexes",
            f"node_fts: the full-text index counts words its rows' texts do not say as often ({', '.join(terms[:5])}): "
            "it was written around the engine; restore the store from a backup",
        )


def _nfc(text: str) -> str:
    return unicodedata.normalize("NFC", text)


class _Words:
    """The words of some texts, casefolded, asked for whole or as a clipped start or end of one."""

    __slots__ = ("_ends", "_starts", "words")

    def __init__(self, texts: Iterable[tuple[str, str]]) -> None:
        self.words: set[str] = set()
        for name, content in texts:
            self.words |= self.of(name + "\n" + content)
        self._starts: list[str] | None = None
        self._ends: list[str] | None = None

    @staticmethod
    def of(text: str) -> set[str]:
        return set(_WORD.findall(_nfc(text).casefold()))

    def has(self, word: str) -> bool:
        if word in self.words:
            return True
        if self._starts is None or self._ends is None:  # only a clipped word needs them: built once, if ever
            self._starts = sorted(self.words)
            self._ends = sorted(w[::-1] for w in self.words)
        return _prefix_of_any(self._starts, word) or _prefix_of_any(self._ends, word[::-1])


_WORD = re.compile(r"\w+")


def _prefix_of_any(ordered: list[str], part: str) -> bool:
    i = bisect.bisect_left(ordered, part)
    return i < len(ordered) and ordered[i].startswith(part)


def _check_kept_index(conn: apsw.Connection, nodes: dict[int, NodeRow], deep: bool, bad: verify_tables.Bad) -> int:
    """The vector index kept in the file (``index/segments.py``) reads as the engine wrote it; how many rows it holds.

    A damaged one costs no answer (the engine rebuilds from node_vec and says so), but is named here. It
    holds every hot node_vec row its change numbers cover and no other; deep, each row it holds codes its
    node_vec row (partition, parent, type, codes within their error bound).
    """
    table = VectorTable(conn)
    epoch = queries.meta_value(conn, "vec_epoch") or ""
    try:
        for (other,) in conn.execute("select distinct epoch from vec_segment where epoch != ?", (epoch,)):
            bad("7-indexes", f"vec_segment holds segments of epoch {str(other)[:16]!r}, not the current one")
    except apsw.SQLError as exc:
        bad("7-indexes", f"the vector index kept in the file cannot be read ({exc}); the next write makes it again")
        return 0
    dim = int(queries.meta_value(conn, "embedder_dim") or 0)
    try:
        index = segments.load(table, epoch, dim)
    except (segments.Damaged, apsw.SQLError) as exc:  # SQLError: the table dropped or altered in a shell
        bad("7-indexes", f"the vector index kept in the file is damaged ({exc}); the next write writes it again")
        return 0
    if index is None:
        return 0
    names = {code: name for name, code in index.type_names.items()}
    cold = {as_int(nid) for (nid,) in conn.execute("select nid from cold_node")}
    live = index.row_nid[: index.used]
    held = set(live[live >= 0].tolist())
    hot = set()
    # the vectors themselves only for the deep check: the plain one compares which rows are held
    query = (
        "select nid, part, seq, embedding, scale from node_vec" if deep else "select nid, part, seq, 0, 0 from node_vec"
    )
    for nid, part, seq, blob, scale in conn.execute(query):
        node = nodes.get(nid)
        if nid in cold or node is None or node.parent is None:
            continue  # out of the index (the root pools everything and is never searched)
        hot.add(nid)
        if seq > index.seq:
            continue  # changed after the last segment: caught up on open
        if nid not in held:
            bad("7-indexes", f"vector row {nid} (change {seq}) is covered by the kept index but not held in it")
        elif deep and not _codes_row(index, names, nid, part, vector_codes.row(as_bytes(blob), scale), node):
            bad("7-indexes", f"the kept index's row of node {nid} does not code its vector row (change {seq})")
    for nid in sorted(held - hot)[:20]:
        bad("7-indexes", f"the kept index holds node {nid}, which has no hot vector row")
    return index.size


def _codes_row(index: IvfIndex, names: dict[int, str], nid: int, part: int, vector: np.ndarray, node: NodeRow) -> bool:
    """Whether the kept index's row of ``nid`` codes its node_vec row: partition, parent, type, codes in bounds."""
    row = int(index.pos[nid])
    decoded = index.matrix[row].astype(np.float32) * index.scales[row, 0] * index.spread
    return (
        int(index.part[nid]) == part
        and int(index.parent[nid]) == node.parent
        and names.get(int(index.type_code[nid])) == node.type
        and vector.shape == decoded.shape
        and float(np.linalg.norm(decoded - vector)) <= float(index.scales[row, 1])
    )


def _check_vectors(
    conn: apsw.Connection,
    nodes: dict[int, NodeRow],
    texts: set[int],
    embeds_every_text: bool,
    deep: bool,
    bad: Callable[[str, str], None],
    embed: verify_tables.Embed | None = None,
) -> set[int]:
    """Vector rows are exactly: nodes with text (when the store embeds), and every world above one.

    Deep: every world recomposes from its members, and every text embedded again (``embed``) matches its
    node's vector, or a world's anchor.
    """
    table = VectorTable(conn)
    vec = table.nids()
    leaves = set(texts) if embeds_every_text else texts & vec
    above: set[int] = set()
    for nid in leaves:
        parent = nodes[nid].parent
        while parent is not None and nodes[parent].parent is not None and parent not in above:
            above.add(parent)  # every world above a vector composes one, the root excepted
            parent = nodes[parent].parent
    expected = leaves | above
    for nid in sorted(expected - vec)[:20]:
        what = "has text" if nid in texts else "holds members with vectors"
        bad("7-indexes", f"node {nodes[nid].id.hex()[:16]} {what} but no vector")
    for nid in sorted(vec - expected)[:20]:
        bad("7-indexes", f"vector row {nid} belongs to no node with text or with vector members")
    members: dict[int, list[int]] = defaultdict(list)
    for nid in vec & expected:
        parent = nodes[nid].parent
        if parent is not None and nodes[parent].parent is not None:
            members[parent].append(nid)
    pools = table.pools(members)
    for world in sorted(set(members) - set(pools))[:20]:
        bad("7-indexes", f"world {nodes[world].id.hex()[:16]} has vector members but no composition row")
    for world, (_, _, count) in pools.items():
        if count != len(members[world]):
            bad("7-indexes", f"world {nodes[world].id.hex()[:16]} pools {count} members but has {len(members[world])}")
    dim = one_row(conn.execute("select max(value) from meta where key = 'embedder_dim'").fetchone())[0]
    verify_tables.check_centroids(conn, int(dim) if str(dim).isdigit() else None, bad)
    verify_tables.check_vector_rows(conn, int(dim) if str(dim).isdigit() else None, bad)
    if deep:
        _check_compositions(conn, table, members, pools, nodes, bad)
    if deep and embed is not None:
        verify_tables.check_embeddings(
            conn,
            table.vectors_of,
            lambda nids: {nid: pools[nid][0] for nid in nids if nid in pools},
            set(pools),
            embed,
            bad,
        )
    return vec


def _check_tokens(
    conn: apsw.Connection,
    fts: set[int],
    tokens: Callable[[], TokenVectors] | None,
    deep: bool,
    bad: Callable[[str, str], None],
) -> int:
    """Token index rows are exactly the full-text rows (none without a token table); deep: each as written."""
    rows = integrity.token_nids(conn)
    expected = fts if tokens is not None else set()
    for nid in sorted(expected - rows)[:20]:
        bad("7-indexes", f"full-text row {nid} has no token index row")
    for nid in sorted(rows - expected)[:20]:
        bad(
            "7-indexes",
            f"token index row {nid} belongs to no full-text row"
            + ("" if tokens is not None else " (this store's embedder has no token table)"),
        )
    if deep and tokens is not None:
        reader = content_tokens(tokens())
        wrong = [nid for nid, name, content, ids in integrity.indexed_tokens(conn) if reader.row(name, content) != ids]
        for nid in wrong[:20]:
            bad("7-indexes", f"token index row {nid} does not hold its text's tokens; reopen or re-embed the store")
    return len(rows)


def _check_compositions(
    conn: apsw.Connection,
    table: VectorTable,
    members: dict[int, list[int]],
    pools: dict[int, tuple[np.ndarray | None, np.ndarray, int]],
    nodes: dict[int, NodeRow],
    bad: Callable[[str, str], None],
) -> None:
    """Recompose every world from its children's stored vectors and compare with its indexed one."""
    kind = one_row(queries.meta_value(conn, "compose"))
    for world, (anchor, _, _) in pools.items():
        children = table.vectors_of(members[world])
        matrix = np.stack([children[c] for c in sorted(children)])
        expected = compose_from_scratch(str(kind), anchor, matrix)
        stored = table.vectors_of([world]).get(world)
        if stored is None or float(expected @ stored) < 1 - 1e-4 - _rounding(stored):
            bad("7-indexes", f"world {nodes[world].id.hex()[:16]}'s composed vector does not match its members")


def _rounding(row: np.ndarray) -> float:
    """The most int8 rounding can take off a row's cosine to what it codes (store/vector_codes.py).

    Each code is off by half a step at most, and a step is the row's largest component over 127: the
    error's length is at most sqrt(dim) / 2 steps, so 1 - cos <= dim * step^2 / 8.
    """
    step = float(np.abs(row).max()) / 127.0
    return int(row.shape[0]) * step * step / 8.0


def _scan_nodes(
    store: Store, tombstones: set[bytes], bad: Callable[[str, str], None]
) -> tuple[dict[int, NodeRow], set[int]]:
    """Check every node row, streamed; return them without their blobs, and the nids that have text.

    A blob is read once, hashed and parsed, and let go: verifying (after every backup, on a small
    device too) must not need the whole store's text in memory, only each node's header.
    """
    import json

    nodes: dict[int, NodeRow] = {}
    texts: set[int] = set()
    claimed: dict[int, str | None] = {}  # nid -> the parent its blob names, for the rare parent read after it

    def check_parent(r: NodeRow, named: str | None) -> None:
        if named != (nodes[r.parent].id.hex() if r.parent in nodes else None):
            bad("1-content-address", f"{r.id.hex()[:16]}: header disagrees with its blob")

    for r in store.iter_node_rows("order by n.nid", ()):
        if r.body is None:
            if r.id not in tombstones:
                bad("1-content-address", f"{r.id.hex()[:16]} has no content and no purge tombstone")
        else:
            if node_id(r.body) != r.id:
                bad("1-content-address", f"{r.id.hex()[:16]} does not hash to its id (blob changed)")
            body = json.loads(r.body)
            if body.get("name") or body.get("content"):
                texts.add(r.nid)
            if body.get("type") != r.type:
                bad("1-content-address", f"{r.id.hex()[:16]}: header disagrees with its blob")
            elif r.parent in nodes or r.parent is None:
                check_parent(r, body.get("parent"))
            else:
                claimed[r.nid] = body.get("parent")
        nodes[r.nid] = replace(r, body=None)
    for nid, named in claimed.items():  # a parent numbered after its member: not written so, but checked
        check_parent(nodes[nid], named)
    for r in nodes.values():
        if r.parent is None:
            if r.depth != 0:
                bad("5-containment", f"{r.id.hex()[:16]} has no parent but depth {r.depth}")
        elif r.parent not in nodes or nodes[r.parent].depth + 1 != r.depth:
            bad("5-containment", f"{r.id.hex()[:16]} has a missing parent or a wrong depth")
        if r.invalid_at is not None and r.invalid_at < r.valid_at:
            bad("3-validity", f"{r.id.hex()[:16]} ends before it starts")
    return nodes, texts


def _lowest_common(nodes: dict[int, NodeRow], a: int, b: int) -> int | None:
    if a not in nodes or b not in nodes:
        return None
    x, y = nodes[a], nodes[b]
    while x.depth > y.depth:
        x = nodes[x.parent]  # type: ignore[index]
    while y.depth > x.depth:
        y = nodes[y.parent]  # type: ignore[index]
    while x.nid != y.nid:
        if x.parent is None or y.parent is None:
            return None
        x, y = nodes[x.parent], nodes[y.parent]
    return x.nid


@dataclass(frozen=True, slots=True)
class Member:
    """A node as the root computation sees it: place in the tree and projection bytes."""

    nid: int
    id: bytes
    parent: int | None
    slot: int | None
    depth: int
    state: bytes


def compute_roots(
    nodes: list[Member],
    edge_leaves: list[tuple[int, int, bytes]],
    bad: Callable[[str, str], None],
    each: Callable[[Member, bytes, list[list[bytes]], int], None] | None = None,
) -> dict[int, bytes]:
    """Roots of every node from scratch, bottom-up: nid -> root.

    ``edge_leaves`` holds (world, slot, leaf hash). Slot gaps or clashes are reported. ``each``
    sees every node's root, tree levels and member count as they are computed; the levels are
    not kept (a whole store's trees need not be in memory at once).
    """
    members: dict[int, dict[int, bytes | int]] = defaultdict(dict)
    for m in nodes:
        if m.parent is not None:
            if m.slot in members[m.parent]:
                bad("2-merkle", f"two members share slot {m.slot} of world {m.parent}")
            members[m.parent][m.slot] = m.nid  # type: ignore[index]
    for world, slot, leaf in edge_leaves:
        if slot in members[world]:
            bad("2-merkle", f"two members share slot {slot} of world {world}")
        members[world][slot] = leaf
    out: dict[int, bytes] = {}
    for m in sorted(nodes, key=lambda n: -n.depth):
        slots = members.pop(m.nid, {})
        if sorted(slots) != list(range(len(slots))):
            bad("2-merkle", f"world {m.id.hex()[:16]} has gaps in its member slots")
        leaves = [out[x] if isinstance(x, int) else x for _, x in sorted(slots.items())]
        levels = compute_levels(leaves) if leaves else [[EMPTY_TREE]]
        out[m.nid] = world_root(m.id, m.state, levels[-1][0], len(leaves))
        if each is not None:
            each(m, out[m.nid], levels, len(leaves))
    return out


def _check_member_order(
    conn: apsw.Connection,
    nodes: dict[int, NodeRow],
    edge_keys: list[tuple[int, int, tuple[str, int, bytes]]],
    bad: Callable[[str, str], None],
) -> None:
    """Each world's members sit in (created_at, ord, id) order past the slots a pre-version-10 file kept.

    Replicas that hold the same members agree on their roots only because of this order (sync/replicas.py).
    """
    legacy = integrity.legacy_sizes(conn)
    keyed: dict[int, list[tuple[int, tuple[str, int, bytes]]]] = defaultdict(list)
    for r in nodes.values():
        if r.parent is not None and r.slot is not None and r.slot >= legacy.get(r.parent, 0):
            keyed[r.parent].append((r.slot, (r.created_at, r.ord, r.id)))
    for world, slot, key in edge_keys:
        if slot >= legacy.get(world, 0):
            keyed[world].append((slot, key))
    for world, members in keyed.items():
        members.sort()
        if any(a[1] >= b[1] for a, b in zip(members, members[1:], strict=False)):
            name = nodes[world].id.hex()[:16] if world in nodes else f"#{world}"
            bad("2-merkle", f"world {name}: members out of their (created_at, ord, id) sequence")


def _check_roots(
    conn: apsw.Connection,
    nodes: dict[int, NodeRow],
    leaves: list[tuple[int, int, bytes]],
    bad: Callable[[str, str], None],
) -> int:
    """Every root recomputes from its members, every stored tree matches, every history ends at its root.

    Each world's stored tree is read and compared as its root is computed, one world at a time.
    """
    members = [Member(r.nid, r.id, r.parent, r.slot, r.depth, r.state()) for r in nodes.values()]
    with_rows = integrity.merkle_worlds(conn)
    worlds = 0

    def check(m: Member, root: bytes, levels: list[list[bytes]], size: int) -> None:
        nonlocal worlds
        r = nodes[m.nid]
        if size != r.size:
            bad("2-merkle", f"world {r.id.hex()[:16]} records {r.size} members but holds {size}")
        if root != r.root:
            bad("2-merkle", f"root of {r.type} {r.id.hex()[:16]} does not recompute from its members")
        if size or r.nid in with_rows:
            expected = {(lv, i): h for lv, row in enumerate(levels) for i, h in enumerate(row)} if size else {}
            rows = integrity.merkle_tree(conn, r.nid)
            wrong = sorted(k for k in expected.keys() | rows.keys() if expected.get(k) != rows.get(k))
            if wrong:
                bad(
                    "2-merkle",
                    f"stored Merkle tree of {r.id.hex()[:16]} disagrees with its members at "
                    f"{len(wrong)} node(s), first (level, index) {wrong[0]}",
                )
        if size:
            worlds += 1
            logged = integrity.last_logged_root(conn, r.nid)
            if logged is None or logged != r.root:
                bad("2-merkle", f"root history of {r.id.hex()[:16]} does not end at its current root")

    compute_roots(members, leaves, bad, check)
    for world in sorted(with_rows - set(nodes)):
        bad("2-merkle", f"Merkle rows stored for node {world}, which has no members")
    return worlds


def root_history_divergences(
    conn: apsw.Connection, world: int | None = None, progress: Callable[[str], None] | None = None
) -> list[Violation]:
    """Replay the history and report every logged root (of ``world``, or of all) that does not recompute."""
    _, wrong = _replay(conn, world, progress or (lambda _msg: None))
    return [
        Violation(
            "2-merkle",
            f"logged root {d.logged.hex()[:16]} of world {d.world[:16]} at {d.at} does not recompute from the history",
        )
        for d in wrong
    ]


def _check_root_history(conn: apsw.Connection, say: Callable[[str], None], bad: Callable[[str, str], None]) -> int:
    """The deep check: every world's logged roots, replayed; the first divergence in time is named."""
    checked, wrong = _replay(conn, None, say)
    if wrong:
        first = wrong[0]
        bad(
            "2-merkle",
            f"root history diverges first at {first.at}: world {first.world[:16]} logged "
            f"{first.logged.hex()[:16]} but its history recomputes {first.recomputed.hex()[:16] or 'nothing'}; "
            f"{len(wrong) - 1} later logged root(s) also differ",
        )
    return checked


def _replay(conn: apsw.Connection, world: int | None, say: Callable[[str], None]) -> tuple[int, list[Divergence]]:
    return replay(conn, world=world, progress=lambda done, total: say(f"root history {done}/{total}"))


def _check_merges(conn: apsw.Connection, same_as: set[tuple[int, int]], bad: Callable[[str, str], None]) -> None:
    accepted = integrity.accepted_pairs(conn)
    for src, dst in same_as:
        if (min(src, dst), max(src, dst)) not in accepted:
            bad("6-no-silent-merge", f"same_as {src}->{dst} has no accepted proposal")
        if (dst, src) not in same_as:
            bad("6-no-silent-merge", f"same_as {src}->{dst} is not symmetric")
    for a, b in accepted:
        if (a, b) not in same_as or (b, a) not in same_as:
            bad("6-no-silent-merge", f"accepted proposal ({a}, {b}) lacks its same_as edges")
