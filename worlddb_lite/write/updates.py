"""A newer memory that tells of a change is linked to its person's older note about the same thing.

"I quit coffee last week" after the note "I drink three cups of coffee a day": no slot rule reads
either, so nothing supersedes the note, and recall would rank the older one first (it says the
question's words more plainly). A ``may_update`` edge from the newer memory to the older note lets
recall put the newer just above it and tell the older as possibly stale (retrieval/recall.py
``newer_over_older``). The edge closes nothing: a similarity is no proof, only an understood slot
supersedes. It is in the file, so ``sqlite3`` shows it.

About the same thing: both are the same person's (a turn's speaker; a note's speaker, or its
scope's person), in the same scope, close in vector space (cosine at least ``SAME_THING``) and
sharing a content word (not a function word, not the person's name). Telling of a change: a word
of change (``extract.tells_change``). The older is a note, what holds until changed: in a
conversation "I moved ..." rarely changes what an earlier turn said (LoCoMo recall@10 fell 0.004
with turns too).

Who links: System 2, when the newer memory is written (``link_updates``, beside its facts); an
amend carries the links of the version it replaces (``carry_updates``); and the consolidator's
``updates`` step (``missing_updates``) links what no write could see: a memory from another
device, one written before the note it updates, one written without System 2.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from ..store import graph_rows, queries
from ..text.extract import tells_change
from ..text.slots import slot_words
from ..text.stopwords import is_function_word
from ..text.words import words as split_words
from ..types import MAY_UPDATE, Node, is_assistant, speaks_for
from .writer import Writer

NOTE_TYPE = "Memory"
TURN_TYPE = "Turn"
NEAREST = 3  # the newer memory's nearest current notes compared with it ...
SEARCHED = 4 * NEAREST  # ... among this many nearest (a scope of alike retired notes is searched once, not widened)
SAME_THING = 0.45  # cosine at which two memories of a person sharing a word are about one thing (dev: 0.25-0.45 tie)
BATCH = 500  # the consolidator's links per transaction, and memories read per query

Update = tuple[int, int, str]  # (newer nid, older nid, the newer's valid time: when the link holds from)


def content_words(text: str, person: str) -> frozenset[str]:
    """The words of ``text`` that say what it is about: no function words, not the words of the person's name."""
    kept = " ".join(w.casefold() for w in split_words(text) if not is_function_word(w.casefold()))
    return slot_words(kept) - set(person.casefold().split())


def link_updates(writer: Writer, source: str, text: str, *, scope: str, speaker: str | None) -> list[str]:
    """Link ``source``, a memory ``speaker`` said in ``scope``, to the older notes it may update; their ids.

    Only when ``text`` tells of a change, the store holds notes and has vectors.
    """
    if not speaker or is_assistant(speaker) or not tells_change(text):
        return []
    if not writer.reconciler.lane.index().rows_of([NOTE_TYPE]):
        return []  # no note to update: no search (one written in this very transaction: the consolidator's)
    nid = writer.store.resolve(source)
    newer = writer.store.load_nodes([nid])[0]
    updates = _updates(writer, nid, newer, text, speaker, writer.store.resolve(scope))
    for _, older, when in updates:
        writer.link(source, _hex(writer, older), MAY_UPDATE, valid_at=when)
    return [_hex(writer, older) for _, older, _ in updates]


def carry_updates(writer: Writer, old: int, new: int) -> int:
    """An amended note keeps the links of the version it replaces, from memories still newer than it; how many."""
    now = writer.clock()
    links = queries.linked(writer.conn, (MAY_UPDATE,), [old], None, now, now, towards=True, include_superseded=False)
    if not links:
        return 0
    starts = writer.store.node_row(new).valid_at
    begins = {nid: writer.store.node_row(nid).valid_at for nid in dict.fromkeys(src for _, _, src, _ in links)}
    newer = [nid for nid, when in begins.items() if when >= starts]
    for nid in newer:
        writer.link(_hex(writer, nid), _hex(writer, new), MAY_UPDATE, valid_at=begins[nid])
    return len(newer)


def missing_updates(writer: Writer) -> list[Update]:
    """The ``may_update`` links the store lacks, in nid order (the consolidator's ``updates`` step).

    Every current turn and note is read for a word of change (in batches); each that tells one looks
    among its nearest notes as ``link_updates`` does. A link once closed is not made again.
    """
    index = writer.vectors()
    if not index.rows_of([NOTE_TYPE]):
        return []
    codes = [index.type_names[t] for t in (NOTE_TYPE, TURN_TYPE) if t in index.type_names]
    held = np.flatnonzero(index.pos >= 0)
    held = held[np.isin(index.type_code[held], codes)].tolist()
    linked = graph_rows.linked_pairs(writer.conn, MAY_UPDATE) | graph_rows.withdrawn_pairs(writer.conn, MAY_UPDATE)
    out: list[Update] = []
    for start in range(0, len(held), BATCH):
        chunk = held[start : start + BATCH]
        current = graph_rows.current_among(writer.conn, chunk)
        texts = graph_rows.contents(writer.conn, [nid for nid in chunk if nid in current])
        changes = [nid for nid in chunk if nid in texts and tells_change(texts[nid])]
        for nid, node in zip(changes, writer.store.load_nodes(changes), strict=True):
            person = _person(writer, node)
            home = int(index.scope_of[nid])
            if person is None or home < 0:
                continue
            out += [u for u in _updates(writer, nid, node, texts[nid], person, home) if (u[0], u[1]) not in linked]
    return out


def _updates(writer: Writer, nid: int, newer: Node, text: str, person: str, home: int) -> list[Update]:
    """The older notes of ``person`` in the scope ``home`` that ``newer`` (row ``nid``, saying ``text``) may update."""
    index = writer.vectors()  # the source's vector row is in it
    vector = index.vectors([nid]).get(nid)
    if vector is None:
        return []  # a store without an embedder: nothing is close to anything
    # the candidates by the index's codes alone, then their exact cosines: no read of every alike row's
    # exact vector (a scope of 10,000 notes on one thing: bench/write_cost.py --corpus alike)
    searched = [n for n, _ in index.search(vector, SEARCHED, world=home, types=[NOTE_TYPE], rough=True) if n != nid]
    exact = index.cosines(searched, vector)
    found = sorted(exact.items(), key=lambda item: (-item[1], item[0]))
    current = graph_rows.current_among(writer.conn, [n for n, _ in found])
    near = [(n, cosine) for n, cosine in found if n in current and cosine >= SAME_THING][:NEAREST]
    if not near:
        return []
    scope_node = writer.store.load_nodes([home])[0]
    said = content_words(text, person)
    out = []
    for (older_nid, _), older in zip(near, writer.store.load_nodes([n for n, _ in near]), strict=True):
        whose = speaks_for(older, scope_node) if older.parent == scope_node.id else None  # a note of this scope
        if (
            whose is not None
            and whose.casefold() == person.casefold()
            and (older.valid_at, older_nid) < (newer.valid_at, nid)
            and content_words(older.content or "", person) & said
        ):
            out.append((nid, older_nid, newer.valid_at))
    return out


def _person(writer: Writer, node: Node) -> str | None:
    """Whose memory ``node`` is: a person's turn's speaker; a note's speaker, or its scope's person."""
    if node.type == TURN_TYPE:
        return None if not node.name or is_assistant(node.name) else node.name
    if node.parent is None:
        return None
    home = writer.store.load_nodes([writer.store.resolve(node.parent)])[0]
    if home.type != "Scope":
        return None
    whose = speaks_for(node, home)
    return None if whose is None or is_assistant(whose) else whose


def _hex(writer: Writer, nid: int) -> str:
    return writer.store.header(nid).id.hex()


def write_updates(
    writer: Writer,
    updates: Sequence[Update],
    *,
    batch: int = BATCH,
    progress: Callable[[int, int], None] | None = None,
) -> int:
    """Write ``updates`` as ``may_update`` edges in transactions of ``batch``, each holding from its newer's time.

    ``progress(done, total)`` runs after each committed batch.
    """
    for start in range(0, len(updates), batch):
        chunk = updates[start : start + batch]
        with writer.transaction():
            for newer, older, when in chunk:
                writer.link(_hex(writer, newer), _hex(writer, older), MAY_UPDATE, valid_at=when)
        if progress is not None:
            progress(start + len(chunk), len(updates))
    return len(updates)
