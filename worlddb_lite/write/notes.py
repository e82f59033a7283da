"""Notes: a memory written now goes through the same System 2 as a conversation's turn.

A note written into a Scope is stored verbatim (System 1), then, in the same transaction, the
extractor reads it and its entities and facts are written beside it: a fact supersedes an older
value of its slot, a name is resolved in tiers, an instruction stands. ``deferred`` queues that
work instead (``queue.drain``). The note speaks for the scope's person unless a speaker is named,
so "I moved to Porto" written into the scope "ana" is a fact about ana.

A memory amended or retired takes with it what was learned from it alone: a fact no other current
turn or note says closes when it does (``amend_note``, ``retire_memory``, ``retire_listed``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from .. import checks
from ..errors import InvalidInput, NotCurrent
from ..store import queries
from ..store.hashing import nfc
from ..text.dates import TimeLike, parse_time
from ..text.extract import Extractor, check_extractor
from ..types import SPEAKER, TAGS, is_assistant, speaks_for
from .queue import learn_or_queue, learns
from .reconciler import Transaction
from .updates import carry_updates
from .writer import MemoryIn, Writer

NOTE_TYPE = "Memory"  # what a note is; other node types are stored as given (System 1 only)
TURN_TYPE = "Turn"  # a turn amended is read again as it was when added (write/live.py)


def write_note(writer: Writer, memory: MemoryIn, *, extractor: Extractor | None, deferred: bool) -> str:
    """Write ``memory`` (``Writer.write``), then System 2 on it if it is a note in a Scope; its id.

    A named speaker is kept in the note's props (``speaker``), so a later version speaks for them too;
    ``tags`` (``checks.tags``) in props ``tags``. ``scope`` may name several scopes: the note lives in the
    first (its parent, where its facts are learned) and each other one holds it through a ``contains``
    edge, so it is one memory in all of them.

    A retried write changes nothing: a note whose text, speaker and tags are those of a note of the same
    scope true now, written without a valid time, is that note (its id returned; the other scopes listed
    hold it), unless ``new`` asks for a second memory.
    """
    who = _checked(extractor, deferred, memory.speaker)
    given = checks.props(memory.props) or {}
    note_type, tags = memory.type, memory.tags
    if TAGS in given and note_type == NOTE_TYPE:  # a note's labels, checked alike whichever way they come
        if tags is not None:
            raise InvalidInput("give tags or props['tags'], not both")
        tags = given[TAGS]
    labels = checks.tags(tags)
    if not isinstance(memory.new, bool):
        raise InvalidInput(f"new must be True or False, got {memory.new!r}")
    props = memory.props
    if (who or labels) and note_type == NOTE_TYPE:
        props = {
            **{key: value for key, value in given.items() if key != TAGS},
            **({SPEAKER: who} if who else {}),
            **({TAGS: labels} if labels else {}),
        }
    elif labels:
        raise InvalidInput(f"tags are for notes (type {NOTE_TYPE}); a {note_type} takes its labels in props")
    home, *others = checks.scope_refs(memory.scope)
    if others and memory.world is not None:
        raise InvalidInput("give several scopes or a world, not both")
    memory = replace(memory, scope=str(home), props=props)
    retry = not memory.new and note_type == NOTE_TYPE and memory.world is None and memory.valid_at is None
    with writer.transaction() as txn:
        same = None
        if retry:
            said = checks.memory_text(memory.text, "text")  # refused here, before it is looked for
            home_nid = writer.scope_nid(txn, str(home))
            same = queries.same_note(writer.conn, home_nid, said, who, labels, writer.clock())
        note = writer.store.header(same).id.hex() if same is not None else writer.write(memory)
        since = writer.read(note).valid_at  # in every scope since it holds: an as_of read finds it in each
        nid = writer.store.resolve(note)
        holding = set(_holders(writer, nid)) if same is not None else set()
        for other in others:
            holder = writer.scope(str(other))
            if holder in holding:
                continue
            # a scope that once held it and let it go (retire_all) holds it again from now on
            again = queries.ever_linked(writer.conn, "contains", writer.store.resolve(holder), nid)
            writer.link(holder, note, "contains", valid_at=writer.clock() if again or same else since)
        if same is None:
            _learn(writer, note, extractor=extractor, deferred=deferred, speaker=who)
        return note


def amend_note(
    writer: Writer,
    ref: str,
    text: str | bytes,
    *,
    extractor: Extractor | None,
    deferred: bool,
    speaker: object = None,
    valid_at: TimeLike | None = None,
    props: Mapping[str, Any] | None = None,
) -> str:
    """A new version of a memory (``Writer.amend``), read like a note written now; its id.

    The new text goes through System 2, so a value it changes supersedes the old one, and it speaks
    for whom the old version spoke. A fact learned from the old version alone (no other current turn
    or note says it) no longer stands on anything the person holds: it closes when the new version
    starts, unless the new text superseded it already. A deferred amend leaves such facts open: the
    queue learns what the new text says, and only that.
    """
    who = _checked(extractor, deferred, speaker)
    extra = checks.props(props)
    if who:
        extra = {**(extra or {}), SPEAKER: who}
    with writer.transaction() as txn:
        old = writer.store.resolve(ref)
        again = _amended_again(writer, old, text, valid_at)
        if again is not None:  # a retried amend: the version it wrote
            return again
        holders = _holders(writer, old)
        new = writer.amend(ref, text, valid_at=valid_at, props=extra)
        since = writer.read(new).valid_at
        for holder in holders:  # the new version belongs where the old one did
            writer.link(holder, new, "contains", valid_at=since)
        carry_updates(writer, old, writer.store.resolve(new))  # and what may update it still may
        if not _learn(writer, new, extractor=extractor, deferred=deferred, speaker=who) or deferred:
            return new
        starts = writer.read(new).valid_at
        for fact in queries.learned_only_from(writer.graph, old):  # with the edges written above
            txn.close(fact, max(starts, writer.store.node_row(fact).valid_at))
        return new


def retire_memory(writer: Writer, ref: str, when: str | None) -> None:
    """Close a memory's validity and the facts learned from it alone; retiring it again changes nothing.

    An old version (one an amend superseded) is refused: its current version is what to retire.
    """
    with writer.transaction() as txn:
        nid = writer.store.resolve(ref)
        node = writer.store.to_node(writer.store.node_row(nid), ("supersedes",))
        if node.retired and node.expired_at is None:
            return  # retired already: a repeated call changes nothing
        if node.superseded_by:
            newer = ", ".join(i[:12] for i in node.superseded_by)
            raise NotCurrent(
                f"{node.id[:12]} is an old version (superseded by {newer}); nothing was retired: retire the "
                "current version"
            )
        _retire(writer, txn, nid, when)


def retire_listed(
    writer: Writer, nids: Sequence[int], held: Sequence[int], when: str | None, *, with_facts: bool
) -> list[str]:
    """Close ``nids`` (``with_facts``: each as ``retire_memory`` does) and the ``contains`` edges ``held``; their ids.

    ``retire_all``'s write, in the transaction its caller read the lists in.
    """
    with writer.transaction() as txn:
        for nid in nids:
            if with_facts:
                _retire(writer, txn, nid, when)
            else:
                txn.close(nid, when, retire=True)
        for eid in held:
            txn.close_edge(eid, when)
        return [writer.store.header(nid).id.hex() for nid in nids]


def _retire(writer: Writer, txn: Transaction, nid: int, when: str | None) -> None:
    """Close ``nid`` and the facts learned from it alone, inside ``txn``."""
    alone = queries.learned_only_from(writer.graph, nid)
    txn.close(nid, when, retire=True)
    closed = writer.store.node_row(nid).invalid_at
    for fact in alone:
        txn.close(fact, max(str(closed), writer.store.node_row(fact).valid_at))


def _amended_again(writer: Writer, old: int, text: str | bytes, valid_at: TimeLike | None) -> str | None:
    """The version that already superseded ``old`` with this text (and valid time, if given), or None."""
    node = writer.store.to_node(writer.store.node_row(old), ("supersedes",))
    if not node.superseded_by:
        return None
    said = nfc(checks.memory_text(text, "text"))
    since = parse_time(valid_at, field="valid_at") if valid_at is not None else None
    for newer in node.superseded_by:
        version = writer.read(newer)
        if version.content == said and (since is None or version.valid_at == since):
            return version.id
    return None


def _holders(writer: Writer, note: int) -> list[str]:
    """The scopes that hold ``note`` through a ``contains`` edge now (besides its parent); their ids."""
    now = writer.clock()
    rows = queries.linked(
        writer.conn, ("contains",), [note], ("Scope",), now, now, towards=True, include_superseded=False
    )
    return [writer.store.header(scope).id.hex() for _, _, scope, _ in rows]


def _checked(extractor: Extractor | None, deferred: object, speaker: object) -> str | None:
    check_extractor(extractor)
    if not isinstance(deferred, bool):
        raise InvalidInput(f"deferred must be True or False, got {deferred!r}")
    return (checks.text(speaker, "speaker", required=False) or "").strip() or None


def _learn(writer: Writer, note: str, *, extractor: Extractor | None, deferred: bool, speaker: str | None) -> bool:
    """System 2 on ``note`` (now, or queued when ``deferred``) if it speaks for someone; whether it ran.

    A note in a Scope speaks for the scope's person (or its speaker); a person's turn in a session of
    a Scope for who said it, read as it was when added (``write/live.py``).
    """
    if not learns(extractor, deferred):
        return False
    node = writer.read(note)
    if node.type not in (NOTE_TYPE, TURN_TYPE) or node.parent is None or node.purged:
        return False
    home, said_in = writer.read(node.parent), None  # a note's facts are said in no named place
    if node.type == TURN_TYPE:  # a turn speaks for who said it, in its session
        if home.type != "Session" or home.parent is None:
            return False
        home = writer.read(home.parent)
        said_in = home.name  # a turn's facts are said in its scope, as write/live.py says them
    if home.type != "Scope":
        return False  # a memory inside another world has no person to speak for
    if node.type == TURN_TYPE:
        said_by, voice = node.name, node.name
    else:  # the assistant speaks a note only when named as its speaker, not by a scope's name
        said_by, voice = speaker or speaks_for(node, home), speaker or node.props.get(SPEAKER)
    return learn_or_queue(
        writer,
        extractor,
        node.content or "",
        deferred=deferred,
        source=note,
        scope=home.id,
        said_at=node.valid_at,
        said_in=said_in,
        speaker=said_by,
        by_assistant=is_assistant(voice),
    )
