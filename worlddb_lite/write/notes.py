"""Notes: a memory written now goes through the same System 2 as a conversation's turn.

A note written into a Scope is stored verbatim (System 1), then, in the same transaction, the
extractor reads it and its entities and facts are written beside it: a fact supersedes an older
value of its slot, a name is resolved in tiers, an instruction stands. ``deferred`` queues that
work instead (``queue.drain``). The note speaks for the scope's person unless a speaker is named,
so "I moved to Porto" written into the scope "ana" is a fact about ana.
"""

from __future__ import annotations

from typing import Any

from .. import checks
from ..errors import InvalidInput
from ..text.extract import Extractor, check_extractor
from .facts import understand
from .queue import enqueue
from .writer import Writer

NOTE_TYPE = "Memory"  # what a note is; other node types are stored as given (System 1 only)


def write_note(
    writer: Writer,
    text: str | bytes,
    *,
    extractor: Extractor | None,
    deferred: bool,
    speaker: object = None,
    **fields: Any,
) -> str:
    """Write ``text`` (``Writer.write``'s fields), then System 2 on it if it is a note in a Scope; its id."""
    check_extractor(extractor)
    if not isinstance(deferred, bool):
        raise InvalidInput(f"deferred must be True or False, got {deferred!r}")
    who = checks.text(speaker, "speaker", required=False)
    with writer.transaction():
        note = writer.write(text, **fields)
        if extractor is None and not deferred:
            return note
        node = writer.read(note)
        if node.type != NOTE_TYPE or node.parent is None or node.purged:
            return note
        home = writer.read(node.parent)
        if home.type != "Scope":
            return note  # a note inside another world has no person to speak for
        said_by = (who or "").strip() or home.name
        if deferred:
            enqueue(writer, note, home.id, node.valid_at, None, said_by)
            return note
        assert extractor is not None
        understand(
            writer, extractor, node.content or "", source=note, scope=home.id, said_at=node.valid_at, speaker=said_by
        )
        return note
