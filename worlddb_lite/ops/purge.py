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
version of it (joined by supersedes) and what was extracted from it (a Fact that refers_to a
purged Turn, an Entity that only purged nodes refer to). With a scope, nothing outside that
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
alone was not enough. The erasure marks the store (``maintenance.WIPE_PENDING``) until a
checkpoint has completed: a crash before the VACUUM, or a reader holding an older snapshot (the
main file keeps the old pages until a checkpoint completes), leaves the mark, and any later open,
close or checkpoint of the store, in any process, carries the wipe on.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Iterable
from typing import TYPE_CHECKING

import apsw

from ..errors import InvalidInput, NotFound
from ..models.embed import embed_checked, embedding_text
from ..store.connection import as_int, one_row
from ..text.extract import forget_read_texts
from ..write.bridge import mentions

if TYPE_CHECKING:
    from ..store.rows import Store
    from ..write.reconciler import Txn

HOLDER = "purge"
PROBE_CHARS = 48


def hold(conn: apsw.Connection) -> None:
    """Take the purge session row (inside the purge's transaction, before the reconciler's)."""
    conn.execute("insert into reconciler_session (holder) values (?)", (HOLDER,))


def targets(conn: apsw.Connection, store: Store, start: int, scope: int | None) -> list[int]:
    """What purging ``start`` erases: it, its subtree, its versions, facts extracted from it.

    With ``scope``, only nodes inside that world (the start must be one of them). Parents come
    before children in the result.
    """
    if store.header(start).parent is None:
        raise InvalidInput("the store's root cannot be purged; purge a scope or a memory inside it")
    if scope is not None and not _inside(store, start, scope):
        raise NotFound(
            f"{store.header(start).id.hex()[:16]} is not inside the given scope; nothing was purged "
            "(a scoped purge never touches another scope)"
        )
    seen = {start}
    todo = [start]
    while todo:
        while todo:
            nid = todo.pop()
            found = [
                as_int(r[0])
                for r in conn.execute(
                    "select nid from node where parent = ?1 "
                    "union select dst from edge where src = ?1 and type = 'supersedes' "
                    "union select src from edge where dst = ?1 and type = 'supersedes' "
                    "union select e.src from edge as e join node as f on f.nid = e.src join node as t on t.nid = e.dst "
                    "where e.dst = ?1 and ((e.type = 'refers_to' and f.type = 'Fact' and t.type = 'Turn') "
                    "or e.type = 'derived_from')",
                    (nid,),
                )
            ]
            todo.extend(_admit(store, found, seen, scope))
        todo.extend(_admit(store, _orphaned_entities(conn, seen), seen, scope))
    return sorted(seen, key=lambda n: (store.header(n).depth, n))


def _admit(store: Store, found: Iterable[int], seen: set[int], scope: int | None) -> list[int]:
    """The nodes of ``found`` not seen yet (and inside the scope, if one is given), now seen."""
    new = [n for n in dict.fromkeys(found) if n not in seen and (scope is None or _inside(store, n, scope))]
    seen.update(new)
    return new


def _orphaned_entities(conn: apsw.Connection, purged: set[int]) -> list[int]:
    """Entities that only purged nodes refer to: the extractor found them in purged text."""
    marks = json.dumps(sorted(purged))
    return [
        as_int(r[0])
        for r in conn.execute(
            "select distinct e.dst from edge as e join node as n on n.nid = e.dst "
            "where e.type = 'refers_to' and n.type = 'Entity' and e.src in (select value from json_each(?1)) "
            "and e.dst not in (select value from json_each(?1)) and not exists (select 1 from edge as o "
            "where o.dst = e.dst and o.type = 'refers_to' and o.src not in (select value from json_each(?1)))",
            (marks,),
        )
    ]


def erase(txn: Txn, conn: apsw.Connection, nids: Iterable[int]) -> list[str]:
    """Erase the content of ``nids`` inside the caller's purge transaction; returns their ids."""
    store = txn.store
    nids = list(nids)
    neighbours = _quoting(conn, nids)
    learned = _learned_aliases(conn, nids)
    ids = []
    for nid in nids:
        header = store.header(nid)
        expired = conn.execute("select expired_at from node_state where nid = ?", (nid,)).fetchone()
        if expired is not None and expired[0] is None:
            txn.close(nid, expire=True)  # no longer believed from now on: the root covers the change
        conn.execute("update node set body = null where nid = ? and body is not null", (nid,))
        txn.store.unindex_texts([nid])
        conn.execute("delete from alias where nid = ?", (nid,))
        # a proposal's reason quotes both names ("'Sarah' ~ 'Sara'"); the decision itself stays
        conn.execute("update merge_proposal set reason = 'erased by a purge' where a = ?1 or b = ?1", (nid,))
        conn.execute(
            "update work_queue set done_at = coalesce(done_at, ?), speaker = null, said_in = null where turn = ?",
            (txn.now, nid),
        )
        conn.execute("insert or ignore into tombstone (id, purged_at) values (?, ?)", (header.id, txn.now))
        ids.append(header.id.hex())
    conn.executemany("delete from alias where nid = ? and norm = ?", learned)
    txn.r.composer.remove(nids)
    _reindex_alone(txn, conn, sorted(neighbours - set(nids)))
    # open stores keep vectors in memory and catch up by change number, which a deletion has none of:
    # a new epoch makes every one of them (this one included) rebuild its index on its next search
    store.set_meta([("vec_epoch", uuid.uuid4().hex)])
    conn.execute("insert into node_fts (node_fts) values ('optimize')")  # purged terms leave the segments
    forget_read_texts()  # nor do this process's caches keep a purged turn's words
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
    texts: dict[int, list[str]] = {}  # parent -> the texts of its purged children
    for parent, content in conn.execute(
        "select parent, json_extract(body, '$.content') from node where nid in (select value from json_each(?)) "
        "and parent is not null and json_extract(body, '$.content') != ''",
        (json.dumps(nids),),
    ):
        texts.setdefault(as_int(parent), []).append(str(content))
    quoting: set[int] = set()
    for parent, said in texts.items():
        probes = [text[:PROBE_CHARS] for text in said]  # contexts clip long turns; their start is quoted
        terms = set().union(*(_bridgeable(text) for text in said))
        for sibling, own, indexed, context in conn.execute(  # the children indexed with more than their own text
            "select n.nid, coalesce(json_extract(n.body, '$.content'), ''), f.content, f.context from node as n "
            "join node_fts as f on f.rowid = n.nid where n.parent = ? and (f.context is not null "
            "or f.content != coalesce(json_extract(n.body, '$.content'), ''))",
            (parent,),
        ):
            own, indexed, context = str(own), str(indexed or ""), str(context or "")
            added = indexed[len(own) :] if indexed.startswith(own) else indexed
            if as_int(sibling) not in purged and (
                any(p in added or p in context for p in probes) or any(term in added for term in terms)
            ):
                quoting.add(as_int(sibling))
    return quoting


def _learned_aliases(conn: apsw.Connection, nids: list[int]) -> list[tuple[int, str]]:
    """(entity, alias norm) of the aliases that only purged text gave an entity the purge keeps.

    The extractor adds a turn's "my coworker" to the Brunhilda another turn names too; the entity
    stays, but the alias would still tell what the purged turn said. An alias goes when a purged
    node that refers to the entity says it and no other memory that refers to it does (nor is it
    the entity's name). An alias no purged text says is the caller's or another turn's: it stays.
    """
    marks = json.dumps(sorted(nids))
    said: dict[int, list[str]] = {}  # surviving entity -> the purged texts that refer to it
    for entity, content in conn.execute(
        "select e.dst, json_extract(n.body, '$.content') from edge as e join node as n on n.nid = e.src "
        "join node as t on t.nid = e.dst where e.type = 'refers_to' and t.type = 'Entity' "
        "and e.src in (select value from json_each(?1)) and e.dst not in (select value from json_each(?1)) "
        "and json_extract(n.body, '$.content') is not null",
        (marks,),
    ):
        said.setdefault(as_int(entity), []).append(_spoken(str(content)))
    learned = []
    for entity, texts in said.items():
        name = _spoken(
            str(
                one_row(
                    conn.execute(
                        "select coalesce(json_extract(body, '$.name'), '') from node where nid = ?", (entity,)
                    ).fetchone()
                )[0]
            )
        )
        kept = [
            _spoken(str(r[0]))
            for r in conn.execute(
                "select json_extract(n.body, '$.content') from edge as e join node as n on n.nid = e.src "
                "where e.dst = ?1 and e.type = 'refers_to' and e.src not in (select value from json_each(?2)) "
                "and json_extract(n.body, '$.content') is not null",
                (entity, marks),
            )
        ]
        for (norm,) in conn.execute("select norm from alias where nid = ?", (entity,)):
            alias = _spoken(str(norm))
            if alias and alias != name and any(alias in t for t in texts) and not any(alias in t for t in kept):
                learned.append((entity, str(norm)))
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


def _reindex_alone(txn: Txn, conn: apsw.Connection, nids: list[int]) -> None:
    """Index nodes by their own text only (full text, and vector when the store embeds)."""
    embedder = txn.r.embedder
    for nid in nids:
        name, content, members = one_row(
            conn.execute(
                "select json_extract(n.body, '$.name'), json_extract(n.body, '$.content'), s.size "
                "from node as n join node_state as s on s.nid = n.nid where n.nid = ?",
                (nid,),
            ).fetchone()
        )
        txn.store.unindex_texts([nid])
        txn.store.index_texts([(nid, name or "", content or "", None)], txn.r.tokens())
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
