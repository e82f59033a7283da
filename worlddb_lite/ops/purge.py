"""Audited purge (right to be forgotten): erase a memory's content for real, keep its hash.

``retire`` and ``retract`` only close intervals: the text stays, readable as of the past.
A purge erases it: the node's blob becomes NULL (the ``node_blob_immutable`` trigger lets
exactly that through while a 'purge' session row is held), and its full-text row, vector,
composition row and aliases are deleted, its pending extraction dropped. What is left is the
node's id (its blake3 hash: the Merkle trees keep their leaves, so every root still
recomputes), its place in the tree, its retracted projection and a ``tombstone`` row with the
hash and the time. A merge proposal that names a purged node keeps its decision but loses its
reason, which quotes the names. (An edge's props are part of its id and cannot be erased; the
engine writes no text into them, so only props a caller gave ``link`` outlive a purge.)

A purge takes the node, everything below it (a world's members are its content), every
version of it (joined by supersedes; a Fact's older values stay, learned from other memories) and
what was extracted from it (a Fact every turn or note it was learned from is purged with, an
Entity that only purged nodes refer to). With a scope, nothing outside that
scope is touched. An alias that only purged text gave an entity the purge keeps ("my coworker",
said of a Brunhilda another turn names too) is deleted. A sibling indexed with a purged turn's
text as context (its neighbours, in its full-text row's content or context column: see
bridge.window), or with a name or phrase the context bridge took from it
(``ingest(bridge=True)``), is re-indexed by its own text alone; its blob never held that text.

Deleted bytes linger in free space, in stale cell copies of re-balanced pages, in superseded
FTS5 segments and in the WAL. So the purge runs with ``pragma secure_delete`` (freed space is
zeroed), rebuilds the full-text index's segments ('optimize': the purged terms leave them), and
the facade then vacuums and checkpoints with TRUNCATE (``maintenance.vacuum``, ``checkpoint``).
After that the text is nowhere in the store's files (tests/test_purge.py scans them); each step
alone was not enough. Nor is it in this process's memory: every cache that holds memory text is
registered in ``text/caches.py``, and the purge empties them all. The erasure marks the store
(``maintenance.WIPE_PENDING``) until a checkpoint has completed: a crash before the VACUUM, or a
reader holding an older snapshot (the main file keeps the old pages until a checkpoint completes),
leaves the mark, and any later open, close or checkpoint of the store, in any process, carries the
wipe on.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

import apsw

from ..errors import InvalidInput, NotFound
from ..index import token_index
from ..models.embed import embed_checked, embedding_text
from ..store import erasure, quoted
from ..store.hashing import nfc
from ..store.rows import Store
from ..text import caches
from ..write.bridge import mentions
from . import maintenance

if TYPE_CHECKING:
    from ..write.reconciler import Reconciler, Transaction

HOLDER = "purge"
PROBE_CHARS = 48


def erase_for_good(r: Reconciler, starts: Sequence[int], inside: int | None) -> dict[str, Any]:
    """Erase ``starts`` and what goes with them (``targets``) in one transaction, then wipe the file.

    Freed pages are zeroed while it runs; the store is marked with the erasure until a checkpoint has
    completed, so a crash before the VACUUM, or a reader in the checkpoint's way, leaves the mark for
    the next open, close or checkpoint. Returns the purged ids and that checkpoint.
    """
    conn, store = r.conn, r.store
    store.secure_delete(True)
    try:
        with r.transaction(prepare=lambda: hold(conn)) as txn:
            ids = erase(txn, conn, targets(conn, store, starts, inside))
            mark = f"vacuum {uuid.uuid4().hex}"
            store.set_meta([(maintenance.WIPE_PENDING, mark)])
    finally:
        store.secure_delete(False)
    wiped = maintenance.finish_wipe(conn, store, wait=True, mark=mark)
    assert wiped is not None
    return {"purged": ids, "checkpoint": wiped}


def hold(conn: apsw.Connection) -> None:
    """Take the purge session row (inside the purge's transaction, before the reconciler's)."""
    Store(conn).hold_session(HOLDER)


def targets(conn: apsw.Connection, store: Store, start: int | Sequence[int], scope: int | None) -> list[int]:
    """What purging ``start`` (a node, or several) erases: it, its subtree, its versions, facts extracted from it.

    With ``scope``, only nodes inside that world (each start must be one of them). Parents come
    before children in the result.
    """
    starts = [start] if isinstance(start, int) else list(start)
    for first in starts:
        if store.header(first).parent is None:
            raise InvalidInput("the store's root cannot be purged; purge a scope or a memory inside it")
        if scope is not None and not _inside(store, first, scope):
            raise NotFound(
                f"{store.header(first).id.hex()[:16]} is not inside the given scope; nothing was purged "
                "(a scoped purge never touches another scope)"
            )
    seen = set(starts)
    todo = list(starts)
    while todo:
        while todo:
            nid = todo.pop()
            # a fact goes once every memory it was learned from goes: each of them proposes it again
            reached = [n for n in erasure.reached_from(conn, nid) if erasure.sources(conn, n) <= seen]
            todo.extend(_admit(store, reached, seen, scope))
        todo.extend(_admit(store, erasure.orphaned_entities(conn, seen), seen, scope))
    return sorted(seen, key=lambda n: (store.header(n).depth, n))


def _admit(store: Store, found: Iterable[int], seen: set[int], scope: int | None) -> list[int]:
    """The nodes of ``found`` not seen yet (and inside the scope, if one is given), now seen."""
    new = [n for n in dict.fromkeys(found) if n not in seen and (scope is None or _inside(store, n, scope))]
    seen.update(new)
    return new


def erase(txn: Transaction, conn: apsw.Connection, nids: Iterable[int]) -> list[str]:
    """Erase the content of ``nids`` inside the caller's purge transaction; returns their ids."""
    store = txn.store
    nids = list(nids)
    neighbours = _quoting(conn, nids) - set(nids)
    learned = _learned_aliases(conn, nids)
    # their index rows go first, while the turns they quote still have their text (node_text renders it)
    txn.store.unindex_texts(sorted(neighbours))
    ids = []
    for nid in nids:
        header = store.header(nid)
        if erasure.unexpired(conn, nid):
            txn.close(nid, expire=True)  # no longer believed from now on: the root covers the change
        txn.store.unindex_texts([nid])  # first: its index rows are removed by the text the blob holds
        erasure.erase_blob(conn, nid)
        erasure.erase_records(conn, nid, header.id, txn.now)
        ids.append(header.id.hex())
    erasure.drop_aliases(conn, learned)
    txn.r.composer.remove(nids)
    _reindex_alone(txn, conn, sorted(neighbours))
    # open stores keep vectors in memory and catch up by change number, which a deletion has none of:
    # a new epoch makes every one of them (this one included) rebuild its index on its next search
    txn.r.lane.renew()
    erasure.optimize_fts(conn)  # purged terms leave the segments
    caches.forget()  # nor do this process's caches keep a purged turn's words (text/caches.py)
    return ids


def _quoting(conn: apsw.Connection, nids: list[int]) -> set[int]:
    """Siblings whose index rows quote a purged node's text (a turn's neighbours, indexed with it).

    Its text (its start: the windows clip long turns) in the context column or in what was
    indexed after a sibling's own text; or there, a name or phrase of it: the context bridge adds
    those to a later turn that says "he" or "it", and its window reaches past an assistant's turn,
    where the windows of whole turns stop. Each parent's children are read once, whatever number
    of them is purged (a scope of 4,000 memories took 32 s when each purged node read them all).
    """
    purged = set(nids)
    quoting: set[int] = set(quoted.quoting(conn, nids))  # index_text lists a purged turn
    texts: dict[int, list[str]] = {}  # parent -> the texts of its purged children
    for parent, content in erasure.contents_by_parent(conn, nids):
        texts.setdefault(parent, []).append(content)
    for parent, said in texts.items():
        probes = [text[:PROBE_CHARS] for text in said]  # contexts clip long turns; their start is quoted
        terms = set().union(*(_bridgeable(text) for text in said))
        for sibling, raw_added, raw_context in erasure.widened_members(conn, parent):
            # the blob is NFC; a neighbour's text was indexed as the caller gave it (NFD "Rene\u0301" too)
            added, context = nfc(raw_added), nfc(raw_context)
            if sibling not in purged and (
                any(p in added or p in context for p in probes) or any(term in added for term in terms)
            ):
                quoting.add(sibling)
    return quoting


def _learned_aliases(conn: apsw.Connection, nids: list[int]) -> list[tuple[int, str]]:
    """(entity, alias norm) of the aliases that only purged text gave an entity the purge keeps.

    The extractor adds a turn's "my coworker" to the Brunhilda another turn names too; the entity
    stays, but the alias would still tell what the purged turn said. An alias goes when a purged
    node that refers to the entity says it and no other memory that refers to it does (nor is it
    the entity's name). An alias no purged text says is the caller's or another turn's: it stays.
    """
    said: dict[int, list[str]] = {}  # surviving entity -> the purged texts that refer to it
    for entity, content in erasure.purged_mentions(conn, nids):
        said.setdefault(entity, []).append(_spoken(content))
    learned = []
    for entity, texts in said.items():
        name = _spoken(erasure.name_of(conn, entity))
        kept = [_spoken(text) for text in erasure.kept_mentions(conn, entity, nids)]
        for norm in erasure.alias_norms(conn, entity):
            alias = _spoken(norm)
            if alias and alias != name and any(alias in t for t in texts) and not any(alias in t for t in kept):
                learned.append((entity, norm))
    return learned


def _spoken(text: str) -> str:
    """The words of ``text``, casefolded, one space around each: a phrase is in it as " a phrase "."""
    return " " + " ".join(re.findall(r"\w+", text.casefold())) + " "


def _bridgeable(text: str) -> set[str]:
    """Every name and phrase of ``text`` the context bridge could index with another turn.

    ``bridge.mentions`` with every word of the text taken as known, so a word opening a sentence
    counts as a name too: more terms than the bridge took, never fewer.
    """
    return {term for term, _ in mentions(text, set(re.findall(r"\w+", text)))}


def _reindex_alone(txn: Transaction, conn: apsw.Connection, nids: list[int]) -> None:
    """Index nodes by their own text only (full text, and vector when the store embeds)."""
    embedder = txn.r.embedder
    for nid in nids:
        name, content, members = erasure.own_text(conn, nid)
        txn.store.unindex_texts([nid])
        token_index.index_texts(txn.store, txn.r.tokens(), [(nid, name or "", content or "", None, None)])
        text = embedding_text(name, content)
        if embedder is None or members or not text:
            continue  # caller-supplied vectors (no text in them) and worlds keep theirs
        vector = embed_checked(embedder, [text], txn.r.dim)[0]
        txn.r.composer.remove([nid])
        txn.r.composer.commit([(nid, vector)])


def _inside(store: Store, nid: int, world: int) -> bool:
    header = store.header(nid)
    while True:
        if header.nid == world:
            return True
        if header.parent is None:
            return False
        header = store.header(header.parent)
