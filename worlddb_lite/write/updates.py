"""A newer memory that tells of a change is linked to its person's older note about the same thing.

"I quit coffee last week" after the note "I drink three cups of coffee a day": no slot rule reads
either, so nothing supersedes the note, and recall would rank the older one first (it says the
question's words more plainly). System 2 writes a ``may_update`` edge from the newer memory to the
older note instead, and recall puts the newer just above it and tells the older as possibly
stale (retrieval/recall.py ``newer_over_older``). The edge closes nothing: a similarity is no
proof, only an understood slot supersedes. It is in the file, so ``sqlite3`` shows it.

About the same thing: both are the same person's (a turn's speaker; a note's speaker, or its
scope's person), close in vector space (cosine at least ``SAME_THING``) and sharing a content word
(not a function word, not the person's name). Telling of a change: a word of change
(``extract.tells_change``). The older is a note, what holds until changed: in a conversation "I
moved ..." rarely changes what an earlier turn said (LoCoMo recall@10 fell 0.004 with turns too).
"""

from __future__ import annotations

from ..text.extract import tells_change
from ..text.slots import slot_words
from ..text.stopwords import is_function_word
from ..text.words import words as split_words
from ..types import MAY_UPDATE, is_assistant, speaks_for
from .writer import Writer

NOTE_TYPE = "Memory"
NEAREST = 8  # the newer memory's nearest notes that may be what it updates (a scope of 10,000 alike stays cheap)
SAME_THING = 0.45  # cosine at which two memories of a person sharing a word are about one thing (dev: 0.25-0.45 tie)


def content_words(text: str, person: str) -> frozenset[str]:
    """The words of ``text`` that say what it is about: no function words, not the words of the person's name."""
    kept = " ".join(w.casefold() for w in split_words(text) if not is_function_word(w.casefold()))
    return slot_words(kept) - set(person.casefold().split())


def link_updates(writer: Writer, source: str, text: str, *, scope: str, speaker: str | None) -> list[str]:
    """Link ``source``, a memory of ``speaker`` in ``scope``, to the older notes it may update; their ids.

    Only when ``text`` tells of a change, the scope holds notes and the store has vectors; at most
    ``NEAREST`` notes are compared, however many are alike.
    """
    if not speaker or is_assistant(speaker) or not tells_change(text):
        return []
    writer.settle()  # the source's vector row is written (an ingest's pending ones with it)
    index = writer.reconciler.lane.index()
    if not index.rows_of([NOTE_TYPE]):
        return []  # no note anywhere to update: no search
    home, nid = writer.store.resolve(scope), writer.store.resolve(source)
    vector = index.vectors([nid]).get(nid)
    if vector is None:
        return []  # a store without an embedder: nothing is close to anything
    newer, scope_node = writer.read(source), writer.read(scope)
    person = speaker.casefold()
    said = content_words(text, person)
    updated = []
    for note, cosine in writer.nearest(vector, NEAREST, home, [NOTE_TYPE]):
        whose = speaks_for(note, scope_node)
        if (
            note.id != newer.id
            and cosine >= SAME_THING
            and whose is not None
            and whose.casefold() == person
            and _older(note.valid_at, writer.store.resolve(note.id), newer.valid_at, nid)
            and content_words(note.content or "", person) & said
        ):
            writer.link(source, note.id, MAY_UPDATE, valid_at=newer.valid_at)
            updated.append(note.id)
    return updated


def _older(when: str, nid: int, than_when: str, than_nid: int) -> bool:
    """Whether a memory valid from ``when`` (row ``nid``) is older than one valid from ``than_when``: time, then row."""
    return (when, nid) < (than_when, than_nid)
