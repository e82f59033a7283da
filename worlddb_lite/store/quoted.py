"""index_text's texts as the turns they quote: a conversation's windows kept by reference, not copied.

A turn is indexed with its neighbours ("speaker: text", clipped, one a line: text/windows.py); stored
as text, that is the session's text a second time (37 MB of 101 MB of text at 100k memories:
bench/footprint.py). Where an added text or a context is exactly turns of the same world, index_text
keeps the list of their nids and the view node_text renders them again; anything else (bridged names,
a fact's surrounding text, a text that was not NFC) stays text. The view reads back what was indexed,
which FTS5's 'delete' relies on, so each row is checked after it is written and kept as text if the
view does not give it back exactly.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence

import apsw

from ..text.windows import WINDOW_CHARS
from .connection import as_int, as_text

KEY = 16  # characters of a turn's rendering that find its candidates (shorter ones are scanned)
# a window's turns lie this many member slots around its turn at most (a session's slots hold its turns and
# the edges inside it; ingest's windows reach 4 turns back and 2 ahead): one farther stays text
SLOTS = 64
QUOTE_CHARS = 1000  # the view's clip (schema.sql, node_text): each quoted turn's first characters
assert QUOTE_CHARS == WINDOW_CHARS, "node_text clips quoted turns as the windows do"


class _Turns:
    """A world's turns as the windows render them, found by their first characters."""

    def __init__(self, rows: Sequence[tuple[int, str]]) -> None:
        self.keyed: dict[str, list[tuple[str, int]]] = {}
        self.short: list[tuple[str, int]] = []
        for nid, said in rows:
            if len(said) >= KEY:
                self.keyed.setdefault(said[:KEY], []).append((said, nid))
            else:
                self.short.append((said, nid))

    def quote(self, text: str | None, own: int) -> list[int] | None:
        """The nids whose renderings, one a line, are ``text`` (never ``own``); None: it is not that."""
        if not text:
            return None
        out: list[int] = []
        at = 0
        while True:
            best: tuple[str, int] | None = None
            for said, nid in (*self.keyed.get(text[at : at + KEY], ()), *self.short):
                end = at + len(said)
                fits = nid != own and text.startswith(said, at) and (end == len(text) or text[end] == "\n")
                if fits and (best is None or len(said) > len(best[0])):
                    best = (said, nid)
            if best is None:
                return None
            out.append(best[1])
            at += len(best[0])
            if at == len(text):
                return out
            at += 1


def _turns(conn: apsw.Connection, world: int, slots: tuple[int, int]) -> _Turns:
    """The turns of ``world`` within ``SLOTS`` of the slots (lowest, highest) of the rows to quote them."""
    rows = conn.execute(
        "select nid, coalesce(json_extract(body, '$.name'), ''), coalesce(json_extract(body, '$.content'), '') "
        "from node where parent = ? and slot between ? and ? and type = 'Turn' and body is not null",
        (world, slots[0] - SLOTS, slots[1] + SLOTS),
    )
    return _Turns(
        [
            (as_int(nid), f"{name}: {text[:QUOTE_CHARS]}" if name else str(text)[:QUOTE_CHARS])
            for nid, name, text in rows
        ]
    )


Row = tuple[int, str | None, str | None, str | None, str | None]  # index_text: nid, added, context, *_from


def plan(conn: apsw.Connection, rows: Sequence[tuple[int, str | None, str | None]]) -> list[Row]:
    """index_text rows for (nid, added, context): each text as the turns it quotes where it is exactly that.

    The nodes must be written (their world is read). Decided before a row is written: a row written
    as text and then shortened would leave its pages nearly empty.
    """
    placed = {
        as_int(nid): (as_int(parent), as_int(slot))
        for nid, parent, slot in conn.execute(
            "select nid, parent, slot from node where nid in (select value from json_each(?)) and parent is not null",
            (json.dumps([row[0] for row in rows]),),
        )
    }
    spans: dict[int, tuple[int, int]] = {}  # world -> the lowest and highest slot of its rows
    for parent, slot in placed.values():
        low, high = spans.get(parent, (slot, slot))
        spans[parent] = (min(low, slot), max(high, slot))
    worlds: dict[int, _Turns] = {}
    out: list[Row] = []
    for nid, added, context in rows:
        if nid not in placed or not (added or context):
            out.append((nid, added, context, None, None))
            continue
        parent = placed[nid][0]
        turns = worlds.get(parent) or worlds.setdefault(parent, _turns(conn, parent, spans[parent]))
        added_from, context_from = turns.quote(added, nid), turns.quote(context, nid)
        out.append(
            (
                nid,
                None if added_from else added,
                None if context_from else context,
                None if added_from is None else json.dumps(added_from),
                None if context_from is None else json.dumps(context_from),
            )
        )
    return out


def unread(conn: apsw.Connection, expected: Mapping[int, tuple[str | None, str | None]]) -> list[int]:
    """Those of ``expected``'s nids whose full-text row node_text does not read back as (content, context)."""
    found = {
        as_int(nid): (as_text(content), as_text(context))
        for nid, content, context in conn.execute(
            "select nid, content, context from node_text where nid in (select value from json_each(?))",
            (json.dumps(list(expected)),),
        )
    }
    return [nid for nid, row in expected.items() if found.get(nid) != row]


def quoting(conn: apsw.Connection, nids: Sequence[int]) -> list[int]:
    """The nodes whose index_text lists one of ``nids`` among the turns it quotes."""
    return [
        as_int(r[0])
        for r in conn.execute(
            "select x.nid from index_text as x join node as n on n.nid = x.nid where n.parent in "
            "(select parent from node where nid in (select value from json_each(?1))) and (exists (select 1 "
            "from json_each(x.added_from) as j where j.value in (select value from json_each(?1))) or exists "
            "(select 1 from json_each(x.context_from) as j where j.value in (select value from json_each(?1))))",
            (json.dumps(list(nids)),),
        )
    ]
