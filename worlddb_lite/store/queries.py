"""SQL of the read path: visibility, containment, BM25, nearest neighbours, roots and counts.

Builders come in twins where the statement is worth showing: ``*_sql()`` returns it, the
function of the same name runs it. Every value is bound; only package constants and counts of
placeholders are formatted in. ``?1`` is the valid time and ``?2`` the belief time throughout.
"""

from __future__ import annotations

import json
import re
import weakref
from collections.abc import Sequence

import apsw

from ..text import caches
from .connection import as_bytes, as_float, as_int, as_text, one_row
from .hashing import nfc
from .rows import believed_sql, visible_sql


def predicate(include_superseded: bool, alias: str = "s") -> str:
    """Visible at (?1, ?2), or merely believed at ?2 when closed versions are wanted."""
    return believed_sql(alias) if include_superseded else visible_sql(alias)


def is_visible(conn: apsw.Connection, nid: int, valid: str, belief: str) -> bool:
    """True if the node was true at ``valid`` as the store knew it at ``belief``."""
    sql = "select 1 from node_state as s where s.nid = ?3 and " + visible_sql()
    return conn.execute(sql, (valid, belief, nid)).fetchone() is not None


def descendants_sql(memberships: int, include_superseded: bool, newest_first: bool = False) -> str:
    """Nodes inside world ?3 (parents, and membership edges visible at ?1/?2), optionally of types ?N and tag ?N+3.

    Only nids beyond the one bound after the type (0: from the first), in nid order, or newest first
    below it: a page starts where the last one stopped (``cursor``), and nids only grow, so a page
    never repeats a node. A tag is one of the node's props ``tags`` (a note's labels).
    """
    marks = ",".join("?" for _ in range(memberships)) or "''"
    type_param, limit_param, after_param = 4 + memberships, 5 + memberships, 6 + memberships
    tag_param = 7 + memberships
    beyond = f"(?{after_param} = 0 or i.nid < ?{after_param})" if newest_first else f"i.nid > ?{after_param}"
    return (
        "with recursive inside(nid) as (select ?3 union "
        "select n.nid from node as n join inside on n.parent = inside.nid union "
        f"select e.dst from edge as e join inside on e.src = inside.nid where e.type in ({marks}) "
        f"and {predicate(include_superseded, 'e')}) "
        "select i.nid from inside as i join node as n on n.nid = i.nid join node_state as s on s.nid = i.nid "
        f"where i.nid != ?3 and {beyond} and n.body is not null "
        f"and (?{type_param} is null or n.type in (select value from json_each(?{type_param}))) "
        f"and (?{tag_param} is null or exists (select 1 from json_each(n.body, '$.props.tags') as t "
        f"where t.value = ?{tag_param})) "
        f"and {predicate(include_superseded)} order by i.nid {'desc' if newest_first else ''} limit ?{limit_param}"
    )


def descendants(
    conn: apsw.Connection,
    world: int,
    valid: str,
    belief: str,
    *,
    memberships: Sequence[str],
    node_type: str | Sequence[str] | None,
    include_superseded: bool,
    limit: int,
    after: int = 0,
    tag: str | None = None,
    newest_first: bool = False,
) -> list[int]:
    """The nids inside ``world`` that are visible, beyond ``after`` (see ``descendants_sql``), of a type or types."""
    sql = descendants_sql(len(memberships), include_superseded, newest_first)
    types = None if node_type is None else json.dumps([node_type] if isinstance(node_type, str) else list(node_type))
    params = [valid, belief, world, *memberships, types, limit, after, tag]
    return [as_int(r[0]) for r in conn.execute(sql, params)]


def same_note(
    conn: apsw.Connection, world: int, text: str, speaker: str | None, tags: Sequence[str], now: str
) -> int | None:
    """A note of ``world`` (its own, by parent) true now with this text, speaker and tags; or None.

    Found through the full-text index by the text's first words, as a phrase at the start of the
    content column, then compared whole (as stored: NFC); a text without a word is looked for among
    the world's notes one by one.
    """
    said = nfc(text)
    head = said[:2000]
    words = [m[0] for m in re.finditer(r"\w+", head) if m.end() < len(head) or len(said) == len(head)][:12]
    same = (
        "n.parent = ?3 and n.type = 'Memory' and json_extract(n.body, '$.content') = ?4 "
        "and json_extract(n.body, '$.props.speaker') is ?5 "
        "and coalesce(json_extract(n.body, '$.props.tags'), '[]') = ?6 and s.retired = 0 and " + visible_sql()
    )
    params: list[object] = [now, now, world, said, speaker, json.dumps(list(tags), ensure_ascii=False)]
    if words:
        sql = (
            "select n.nid from node_fts as f join node as n on n.nid = f.rowid join node_state as s on s.nid = n.nid "
            f"where node_fts match ?7 and {same} order by n.nid limit 1"
        )
        params.append('content : ^ "' + " ".join(words) + '"')
    else:
        sql = f"select n.nid from node as n join node_state as s on s.nid = n.nid where {same} order by n.nid limit 1"
    row = conn.execute(sql, params).fetchone()
    return None if row is None else as_int(row[0])


def has_type(conn: apsw.Connection, node_type: str) -> bool:
    """Whether any node of the store is of ``node_type``."""
    return conn.execute("select 1 from node where type = ? limit 1", (node_type,)).fetchone() is not None


def scopes(conn: apsw.Connection, root: int) -> list[int]:
    """The nids of the Scope worlds under the store's root that still have their name (not purged)."""
    sql = "select nid from node where parent = ? and type = 'Scope' and body is not null order by nid"
    return [as_int(r[0]) for r in conn.execute(sql, (root,))]


CONTEXT_WEIGHT = 0.75  # BM25's weight on node_fts.context (name and content weigh 1): see fts_ranked


def rank_function() -> str:
    """The FTS5 rank every full-text read orders by: BM25 with the context column weighed lower.

    Bound as ``rank match ?``, which keeps FTS5's own ``order by rank limit`` path.
    """
    return f"bm25(1.0, 1.0, {CONTEXT_WEIGHT!r})"


def bm25_sql(include_superseded: bool, memberships: int | None = None) -> str:
    """FTS5 match ?3 ranked by ?5 (``rank_function``), visible at (?1, ?2), best ?4 first.

    With ``memberships`` (a count), only nodes inside a world of the JSON list ?6, through parents and
    the membership edge types bound from ?7 on (a search within scopes).
    """
    within = ""
    if memberships is not None:
        within = (
            "and f.rowid in (with recursive inside(nid) as (select value from json_each(?6) union "
            "select n.nid from node as n join inside on n.parent = inside.nid union "
            f"select e.dst from edge as e join inside on e.src = inside.nid where e.type in ({_marks(memberships, 7)}) "
            f"and {predicate(include_superseded, 'e')}) select nid from inside) "
        )
    return (
        "select f.rowid, -f.rank from node_fts as f join node_state as s on s.nid = f.rowid "
        f"where node_fts match ?3 and f.rank match ?5 {within}and {predicate(include_superseded)} "
        "order by f.rank limit ?4"
    )


def bm25(
    conn: apsw.Connection,
    query: str,
    valid: str,
    belief: str,
    *,
    k: int,
    include_superseded: bool,
    worlds: Sequence[int] = (),
    memberships: Sequence[str] = (),
) -> list[tuple[int, float]]:
    """(nid, BM25 score, higher is better) for an FTS5 query, within ``worlds`` if any are given."""
    params: list[object] = [valid, belief, query, k, rank_function()]
    if worlds:
        params += [json.dumps(list(worlds)), *memberships]
    sql = bm25_sql(include_superseded, len(memberships) if worlds else None)
    rows = conn.execute(sql, params)
    return [(as_int(nid), as_float(score)) for nid, score in rows]


def visible_among(
    conn: apsw.Connection, nids: Sequence[int], valid: str, belief: str, *, include_superseded: bool
) -> set[int]:
    """Which of ``nids`` are visible at (valid, belief): a lane's validity filter (``ReadView.visible``).

    A purged node is seen at no time: a read at a belief time before its purge would return it empty.
    """
    return {
        as_int(r[0])
        for r in conn.execute(
            "select s.nid from node_state as s join node as n on n.nid = s.nid "
            "where s.nid in (select value from json_each(?3)) and n.body is not null "
            f"and {predicate(include_superseded)}",
            (valid, belief, json.dumps(list(nids))),
        )
    }


def root_at(conn: apsw.Connection, world: int, at: str) -> bytes | None:
    """The last root a world committed at or before ``at``."""
    row = conn.execute(
        "select root from root_log where world = ? and at <= ? order by lid desc limit 1", (world, at)
    ).fetchone()
    return None if row is None else bytes(row[0])


def root_log(conn: apsw.Connection, world: int) -> list[tuple[str, bytes, int]]:
    """(committed at, root, member count) of every root a world committed, oldest first."""
    return [
        (str(at), bytes(root), as_int(size))
        for root, size, at in conn.execute("select root, size, at from root_log where world = ? order by lid", (world,))
    ]


def changed_slots(conn: apsw.Connection, nids: Sequence[int]) -> dict[int, str]:
    """The slot of each of ``nids`` that is a fact said as a change (``props.changed``; see facts.py)."""
    return {
        as_int(nid): str(slot)
        for nid, slot in conn.execute(
            "select nid, json_extract(body, '$.props.slot') from node where nid in (select value from json_each(?)) "
            "and type = 'Fact' and json_extract(body, '$.props.changed') and json_extract(body, '$.props.slot') "
            "is not null",
            (json.dumps(list(nids)),),
        )
    }


Said = tuple[str | None, str, str]  # a turn's speaker, words and valid time


def said(conn: apsw.Connection, nids: Sequence[int]) -> dict[int, Said]:
    """(speaker, words, valid time) of each of ``nids`` that is a Turn: what a turn said, without its record."""
    return {
        as_int(nid): (as_text(name), str(content or ""), str(valid_at))
        for nid, name, content, valid_at in conn.execute(
            "select n.nid, n.body ->> '$.name', n.body ->> '$.content', s.valid_at from node as n "
            "join node_state as s on s.nid = n.nid where n.nid in (select value from json_each(?)) "
            "and n.type = 'Turn'",
            (json.dumps(list(nids)),),
        )
    }


def note_speakers(conn: apsw.Connection, nids: Sequence[int], speaker: str) -> dict[int, tuple[int, object]]:
    """(parent, its ``speaker`` prop, or None) of each of ``nids`` that is a note (``Memory``), without its record."""
    return {
        as_int(nid): (as_int(parent), said)
        for nid, parent, said in conn.execute(
            "select nid, parent, body -> '$.props' ->> ? from node "
            "where nid in (select value from json_each(?)) and type = 'Memory' and parent is not null",
            (f"$.{speaker}", json.dumps(list(nids))),
        )
    }


def learned_only_from(conn: apsw.Connection, nid: int) -> list[int]:
    """The open facts learned from ``nid`` and no other current turn or note: what stands on its words alone.

    Only a turn or a note is something facts are learned from: an entity a fact names holds none up.

    An earlier version of ``nid``, or a retired note, holds nothing up: it is no longer current.
    """
    return [
        as_int(row[0])
        for row in conn.execute(
            "select distinct e.src from edge as e join node as f on f.nid = e.src "
            "join node_state as s on s.nid = f.nid "
            "where e.dst = ?1 and e.type = 'refers_to' and f.type = 'Fact' "
            "and exists (select 1 from node as src where src.nid = ?1 and src.type in ('Turn', 'Memory')) "
            "and s.invalid_at is null and s.expired_at is null "
            "and not exists (select 1 from edge as o join node as t on t.nid = o.dst "
            "join node_state as ts on ts.nid = t.nid where o.src = e.src and o.type = 'refers_to' and o.dst != ?1 "
            "and t.type in ('Turn', 'Memory') and ts.invalid_at is null and ts.expired_at is null) "
            "order by e.src",
            (nid,),
        )
    ]


def next_turns(conn: apsw.Connection, nids: Sequence[int]) -> dict[int, tuple[int, ...]]:
    """Every version of the Turn written next in the same world after each of ``nids`` that has one, first first.

    An amended turn (a new version ``supersedes`` it) keeps the place of the turn it amends: the
    turn after it is the one after its first version. Each version is given, visible or not: a
    caller uses the one among what its read found (a read as of before an amend finds the first).
    Versions are rare: the chains are followed only for the turns that have them (an indexed probe).
    """
    first = _versions(conn, list(nids), back=True)  # each turn -> its first version (itself, mostly)
    after = {
        as_int(top): as_int(nxt)
        for top, nxt in conn.execute(
            "select h.nid, (select min(n.nid) from node as n where n.parent = h.parent and n.type = 'Turn' "
            "and n.nid > h.nid and not exists (select 1 from edge as o where o.src = n.nid and o.type = 'supersedes')) "
            "from node as h where h.nid in (select value from json_each(?)) and h.type = 'Turn'",
            (json.dumps(sorted(set(first.values()))),),
        )
        if nxt is not None
    }
    later = _versions(conn, sorted(set(after.values())), back=False)
    out: dict[int, tuple[int, ...]] = {}
    for nid in nids:
        if (root := first.get(nid)) is not None and (nxt := after.get(root)) is not None:
            out[nid] = (nxt, *sorted(v for v, start in later.items() if start == nxt and v != nxt))
    return out


_AMENDS = "select src, dst from edge where src in (select value from json_each(?)) and type = 'supersedes'"
_AMENDED_BY = "select dst, src from edge where dst in (select value from json_each(?)) and type = 'supersedes'"


def _versions(conn: apsw.Connection, nids: list[int], *, back: bool) -> dict[int, int]:
    """Versions through ``supersedes`` edges, as far as they go.

    ``back``: each of ``nids`` -> the first version it amends (itself if none). Else: every later
    version of each of ``nids`` (and each itself) -> that one of ``nids``.
    """
    out = {nid: nid for nid in nids}
    frontier = {nid: nid for nid in nids}
    sql = _AMENDS if back else _AMENDED_BY
    while frontier:
        rows = conn.execute(sql, (json.dumps(sorted(frontier)),)).fetchall()
        step: dict[int, int] = {}
        for here, there in rows:
            start = frontier[as_int(here)]
            if back:
                out[start] = min(out[start], as_int(there))
            elif as_int(there) not in out:
                out[as_int(there)] = start
            step[as_int(there)] = start
        frontier = {n: s for n, s in step.items() if n not in frontier} if rows else {}
        if len(out) > 10 * len(nids) + 1000:
            break  # a chain longer than any amend history: stop, it is no turn's
    return out


def valid_between(
    conn: apsw.Connection, start: str, end: str, most: int, among: Sequence[int] | None = None
) -> list[int]:
    """Nodes whose valid time starts in [start, end) (only ``among`` these, if given), at most ``most``, newest first.

    Read from the index on valid time alone (no node row is touched); types, visibility and
    containment are the caller's to check.
    """
    if among is None:
        rows = conn.execute(
            "select nid from node_state where valid_at >= ? and valid_at < ? order by valid_at desc, nid desc limit ?",
            (start, end, most),
        )
    else:
        rows = conn.execute(
            "select nid from node_state where nid in (select value from json_each(?)) "
            "and valid_at >= ? and valid_at < ? order by valid_at desc, nid desc limit ?",
            (json.dumps(list(among)), start, end, most),
        )
    return [as_int(r[0]) for r in rows]


def holds_purged(conn: apsw.Connection, world: int) -> bool:
    """Whether a purge erased a child of ``world`` (purge.py keeps the row, empties the body)."""
    return conn.execute("select 1 from node where parent = ? and body is null limit 1", (world,)).fetchone() is not None


def with_text(conn: apsw.Connection, nids: Sequence[int]) -> list[int]:
    """``nids`` (in order) whose text was not purged (purge.py keeps the row, empties the body)."""
    kept = {
        as_int(r[0])
        for r in conn.execute(
            "select nid from node where nid in (select value from json_each(?)) and body is not null",
            (json.dumps(list(nids)),),
        )
    }
    return [n for n in nids if n in kept]


def indexed(conn: apsw.Connection, nids: Sequence[int]) -> list[tuple[int, str | None, str | None]]:
    """(nid, name, content) of those of ``nids`` with a full-text row, as the index holds them."""
    return [
        (as_int(nid), as_text(name), as_text(content))
        for nid, name, content in conn.execute(
            "select nid, name, content from node_text where nid in (select value from json_each(?))",
            (json.dumps(list(nids)),),
        )
    ]


def token_rows(conn: apsw.Connection, nids: Sequence[int]) -> dict[int, bytes]:
    """The token index rows (token_index.py) of those of ``nids`` that have one."""
    return {
        as_int(nid): as_bytes(ids)
        for nid, ids in conn.execute(
            "select nid, ids from node_tokens where nid in (select value from json_each(?))", (json.dumps(list(nids)),)
        )
    }


def alias_nids(conn: apsw.Connection, norm: str) -> list[int]:
    """Nodes known by a normalised alias."""
    return [as_int(r[0]) for r in conn.execute("select nid from alias where norm = ? order by nid", (norm,))]


def meta_value(conn: apsw.Connection, key: str) -> str | None:
    """One meta value, or None (also when the file has no meta table yet)."""
    try:
        row = conn.execute("select value from meta where key = ?", (key,)).fetchone()
    except apsw.SQLError:
        return None
    return None if row is None else str(row[0])


def root_nid(conn: apsw.Connection) -> int | None:
    """The store's root world."""
    row = conn.execute("select nid from node where parent is null").fetchone()
    return None if row is None else as_int(row[0])


COUNTS = {
    "nodes": "select count(*) from node",
    "current_nodes": "select count(*) from current_node",
    "worlds": "select count(*) from node_state where size > 0",
    "edges": "select count(*) from edge",
    "pending_merges": "select count(*) from merge_proposal where status = 'pending'",
    "open_contradictions": "select count(*) from open_contradiction",
    "root_log": "select count(*) from root_log",
    "vectors": "select count(*) from node_vec",
    "composed_worlds": "select count(*) from world_vec",
    "vector_partitions": "select count(*) from vec_centroid",
}


def counts(conn: apsw.Connection) -> dict[str, int]:
    """The counts ``stats`` reports."""
    return {name: as_int(one_row(conn.execute(sql).fetchone())[0]) for name, sql in COUNTS.items()}


def text_count(conn: apsw.Connection) -> int:
    """How many nodes have text to embed (a name or content)."""
    return as_int(
        one_row(
            conn.execute(
                "select count(*) from node where coalesce(json_extract(body, '$.name'), '') != '' "
                "or coalesce(json_extract(body, '$.content'), '') != ''"
            ).fetchone()
        )[0]
    )


def membership_links(
    conn: apsw.Connection, memberships: Sequence[str], valid: str, belief: str, *, include_superseded: bool
) -> list[tuple[int, int]]:
    """(src, dst) of the visible membership edges (``contains`` and custom ones)."""
    if not memberships:
        return []
    marks = ",".join(f"?{i + 3}" for i in range(len(memberships)))  # ?1, ?2: the times of the predicate
    return [
        (as_int(a), as_int(b))
        for a, b in conn.execute(
            f"select e.src, e.dst from edge as e where e.type in ({marks}) and {predicate(include_superseded, 'e')}",
            (valid, belief, *memberships),
        )
    ]


# ---- recall ---------------------------------------------------------------------------


def _marks(count: int, first: int) -> str:
    """``?first, ?first+1, ...``: numbered placeholders for a list bound after the fixed ones."""
    return ",".join(f"?{first + i}" for i in range(count)) or "''"


def fts_ranked(conn: apsw.Connection, query: str, limit: int) -> list[tuple[int, float]]:
    """(rowid, BM25 score, higher is better) of the ``limit`` best FTS5 matches, ranked by FTS5 alone.

    The name column (a turn's speaker) weighs as much as the content (other weights did no better:
    docs/decisions.md). The context column (a turn's other neighbours) weighs ``CONTEXT_WEIGHT``;
    see ``conversation.DEFAULT_WORD_WINDOW``.
    """
    rows = conn.execute(
        "select rowid, -rank from node_fts where node_fts match ? and rank match ? order by rank limit ?",
        (query, rank_function(), limit),
    )
    return [(as_int(nid), as_float(score)) for nid, score in rows]


def inside_sql(memberships: int, include_superseded: bool) -> str:
    """Which nids of the JSON list ?3 lie inside a world of the JSON list ?4: walk up parents and membership edges."""
    return (
        "with recursive up(start, nid) as (select value, value from json_each(?3) union "
        "select up.start, n.parent from up join node as n on n.nid = up.nid where n.parent is not null union "
        f"select up.start, e.src from up join edge as e on e.dst = up.nid where e.type in ({_marks(memberships, 5)}) "
        f"and {predicate(include_superseded, 'e')}) "
        "select distinct start from up where nid in (select value from json_each(?4))"
    )


def inside(
    conn: apsw.Connection,
    nids: Sequence[int],
    world: int | Sequence[int],
    valid: str,
    belief: str,
    *,
    memberships: Sequence[str],
    include_superseded: bool,
) -> set[int]:
    """The subset of ``nids`` that lie inside ``world`` (or any of several; through parents and membership edges)."""
    if not nids:
        return set()
    worlds = json.dumps([world] if isinstance(world, int) else list(world))
    sql = inside_sql(len(memberships), include_superseded)
    return {as_int(r[0]) for r in conn.execute(sql, (valid, belief, json.dumps(list(nids)), worlds, *memberships))}


def nids_by_alias(conn: apsw.Connection, norms: Sequence[str], node_type: str) -> list[tuple[int, str]]:
    """(nid, alias) of the nodes of ``node_type`` known by any of the normalised aliases."""
    return [
        (as_int(nid), str(norm))
        for nid, norm in conn.execute(
            "select a.nid, a.norm from alias as a join node as n on n.nid = a.nid "
            "where a.norm in (select value from json_each(?1)) and n.type = ?2 order by a.nid",
            (json.dumps(list(norms)), node_type),
        )
    ]


def linked_sql(
    edge_types: int | None, types: int | None, include_superseded: bool, *, towards: bool, far: bool = False
) -> str:
    """Visible edges between the JSON list ?3 and visible nodes, of the edge types bound from ?4 on.

    A purged far node is not visible at any time (``visible_among``).

    No edge types: every type. Far nodes are of the ``types`` bound after the edge types, when given.
    ``towards``: edges into the listed nodes (their sources returned as ``far``); else edges out of them.
    ``far``: the far nodes are only those of the JSON list bound last.
    """
    near, other = ("dst", "src") if towards else ("src", "dst")
    after = 4 + (edge_types or 0)
    edge_filter = "" if edge_types is None else f"and e.type in ({_marks(edge_types, 4)}) "
    type_filter = "" if types is None else f"and n.type in ({_marks(types, after)}) "
    far_filter = f"and e.{other} in (select value from json_each(?{after + (types or 0)})) " if far else ""
    return (
        f"select e.eid, e.{near}, e.{other}, e.type from edge as e join node as n on n.nid = e.{other} "
        f"join node_state as s on s.nid = e.{other} where e.{near} in (select value from json_each(?3)) "
        f"and n.body is not null {edge_filter}{type_filter}{far_filter}and {predicate(include_superseded, 'e')} "
        f"and {predicate(include_superseded)} order by e.eid"
    )


def linked(
    conn: apsw.Connection,
    edge_types: Sequence[str] | None,
    nids: Sequence[int],
    types: Sequence[str] | None,
    valid: str,
    belief: str,
    *,
    towards: bool,
    include_superseded: bool,
    far: Sequence[int] | None = None,
) -> list[tuple[int, int, int, str]]:
    """(eid, listed nid, far nid, edge type) of the visible edges between ``nids`` and visible nodes.

    ``edge_types`` None: edges of every type; ``types`` None: far nodes of every type; ``far``: only
    edges to these far nodes (an index seek per pair instead of every edge of each listed node).
    """
    if not nids or (edge_types is not None and not edge_types) or (far is not None and not far):
        return []
    sql = linked_sql(
        None if edge_types is None else len(edge_types),
        None if types is None else len(types),
        include_superseded,
        towards=towards,
        far=far is not None,
    )
    bound = (valid, belief, json.dumps(list(nids)), *(edge_types or ()), *(types or ()))
    if far is not None:
        bound += (json.dumps(list(far)),)
    return [(as_int(eid), as_int(a), as_int(b), str(t)) for eid, a, b, t in conn.execute(sql, bound)]


def fan_in(conn: apsw.Connection, nid: int, edge_type: str, most: int) -> int:
    """How many ``edge_type`` edges point at ``nid`` (any validity), counted up to ``most``."""
    row = conn.execute(
        "select count(*) from (select 1 from edge where dst = ? and type = ? limit ?)", (nid, edge_type, most)
    ).fetchone()
    return as_int(one_row(row)[0])


_TERM_CACHE: weakref.WeakKeyDictionary[apsw.Connection, tuple[tuple[int, int], dict[str, int]]] = (
    weakref.WeakKeyDictionary()
)
TERM_CACHE_SIZE = 4096  # words remembered per connection, until the next write
caches.register("queries: words of queries", _TERM_CACHE.clear)


def term_rows(conn: apsw.Connection, words: Sequence[str]) -> dict[str, int]:
    """How many full-text rows hold each word (its rarest token, stemmed as the index stems it).

    A row holds it in any column: a turn whose neighbours say it counts too (``node_fts.context``),
    which is also what a query on it costs.

    Read from FTS5's own vocabulary (a ``fts5vocab`` table in the connection's temp schema), so
    nothing is stored twice; a word the index does not know counts 0. Counting a word reads its
    whole posting list (a common word's at 100k rows takes a millisecond), so the counts are kept
    per connection until anything is written: by this connection (``total_changes``) or by
    another (``pragma data_version``).
    """
    version = (as_int(one_row(conn.execute("pragma data_version").fetchone())[0]), conn.total_changes())
    cached = _TERM_CACHE.get(conn)
    if cached is None or cached[0] != version or len(cached[1]) > TERM_CACHE_SIZE:
        cached = (version, {})
        _TERM_CACHE[conn] = cached
    known = cached[1]
    missing = [w for w in dict.fromkeys(words) if w not in known]
    if missing:
        conn.execute("create virtual table if not exists temp.node_fts_terms using fts5vocab(main, node_fts, row)")
        tokenize = conn.fts5_tokenizer("porter", ["unicode61", "remove_diacritics", "2"])
        for word in missing:
            stems = [str(t[-1]) for t in tokenize(word.encode("utf-8"), apsw.FTS5_TOKENIZE_QUERY, None)] or [word]
            rows = [
                conn.execute("select doc from temp.node_fts_terms where term = ?", (stem,)).fetchone() for stem in stems
            ]
            known[word] = min(as_int(r[0]) if r else 0 for r in rows)
    return {word: known[word] for word in words}


def text_rows(conn: apsw.Connection) -> int:
    """An upper bound on the full-text rows (the highest rowid): cheap, unlike counting them."""
    row = conn.execute("select max(id) from node_fts_docsize").fetchone()
    return as_int(row[0]) if row and row[0] is not None else 0


_NEAR_NEW = """
with new(nid) as (select nid from node where nid > ?1 and nid <= ?2),
hop1(nid) as (
  select nid from new
  union select e.dst from edge as e join new on e.src = new.nid
    where e.type = 'refers_to' and e.invalid_at is null and e.expired_at is null
  union select e.src from edge as e join new on e.dst = new.nid
    where e.type = 'refers_to' and e.invalid_at is null and e.expired_at is null),
through(nid) as (select h.nid from hop1 as h join node as n on n.nid = h.nid where n.type != 'Entity'),
hop2(nid) as (
  select nid from hop1
  union select e.dst from edge as e join through as t on e.src = t.nid
    where e.type = 'refers_to' and e.invalid_at is null and e.expired_at is null
  union select e.src from edge as e join through as t on e.dst = t.nid
    where e.type = 'refers_to' and e.invalid_at is null and e.expired_at is null)
select h.nid from hop2 as h join node as n on n.nid = h.nid where n.type = 'Entity' and n.body is not null
order by h.nid
"""


def entities_near_new(conn: apsw.Connection, after: int, upto: int) -> list[int]:
    """Entities within two refers_to hops of the nodes with nid in (after, upto] (identity re-resolution).

    Hops go through turns, facts and other non-entities only: through an entity they would reach
    every turn that names it (the speaker's entity names them all), and turns are not identities.
    """
    return [as_int(nid) for (nid,) in conn.execute(_NEAR_NEW, (after, upto))]


def proposal_partners(conn: apsw.Connection, members: set[int]) -> set[int]:
    """Every node that has a merge proposal, of any status, with one of ``members``."""
    listed = json.dumps(sorted(members))
    rows = conn.execute(
        "select a, b from merge_proposal where a in (select value from json_each(?1)) "
        "or b in (select value from json_each(?1))",
        (listed,),
    )
    return {as_int(n) for row in rows for n in row}


def session_turns(conn: apsw.Connection, world: int, last: int) -> list[tuple[int, str | None, str | None, str]]:
    """(nid, content, speaker, valid_at) of a session's ``last`` turns, in the order said; content None: purged.

    A new version written by ``amend`` is left out: it was never said in the session.
    """
    rows = conn.execute(
        "select n.nid, json_extract(n.body, '$.content'), json_extract(n.body, '$.props.speaker'), st.valid_at "
        "from node as n join node_state as st on st.nid = n.nid where n.parent = ? and n.type = 'Turn' "
        "and not exists (select 1 from edge as e where e.type = 'supersedes' and e.src = n.nid) "
        "order by n.slot desc limit ?",
        (world, last),
    ).fetchall()
    return [(as_int(nid), as_text(content), as_text(who), str(at)) for nid, content, who, at in reversed(rows)]


def latest_session(conn: apsw.Connection, scope: int) -> tuple[str, str] | None:
    """(name, valid time of its last turn) of the scope's session whose last turn is the latest; None: none yet."""
    row = conn.execute(
        "select json_extract(s.body, '$.name'), max(st.valid_at) from node as s "
        "join node as t on t.parent = s.nid and t.type = 'Turn' join node_state as st on st.nid = t.nid "
        "where s.parent = ? and s.type = 'Session' group by s.nid order by 2 desc, s.nid desc limit 1",
        (scope,),
    ).fetchone()
    return None if row is None else (str(row[0]), str(row[1]))


def cold_count(conn: apsw.Connection) -> int:
    """How many memories the retention put in the cold tier (``cold_memory`` lists them)."""
    return as_int(one_row(conn.execute("select count(*) from cold_node").fetchone())[0])


# ---- the consolidator's reads (consolidate/summaries.py, consolidate/timelines.py) ----------------------------


def worlds_of_type(conn: apsw.Connection, node_type: str) -> list[tuple[int, str]]:
    """(nid, name) of the worlds of ``node_type`` that still have their name (not purged), oldest first."""
    sql = "select nid, json_extract(body, '$.name') from node where type = ? and body is not null order by nid"
    return [(as_int(nid), str(name)) for nid, name in conn.execute(sql, (node_type,))]


def current_summary(
    conn: apsw.Connection, world: int, kind: str, *, part: int | None = None, of: str | None = None
) -> tuple[int, str, int] | None:
    """(nid, written at, items covered) of the current summary of ``kind`` (``part``, ``of``) inside ``world``."""
    row = conn.execute(
        "select n.nid, s.created_at, coalesce(json_extract(n.body, '$.props.items'), 0) from node as n "
        "join node_state as s on s.nid = n.nid where n.parent = ?1 and n.type = 'Summary' "
        "and json_extract(n.body, '$.props.summary') = ?2 "
        "and (?3 is null or json_extract(n.body, '$.props.part') = ?3) "
        "and (?4 is null or json_extract(n.body, '$.props.of') = ?4) "
        "and s.invalid_at is null and s.expired_at is null and s.retired = 0 order by n.nid desc limit 1",
        (world, kind, part, of),
    ).fetchone()
    return None if row is None else (as_int(row[0]), str(row[1]), as_int(row[2]))


def world_items(conn: apsw.Connection, world: int) -> list[tuple[int, str, str, str | None, int]]:
    """(nid, text, valid time, speaker, facts learned from it) of a world's current turns and notes, in slot order."""
    rows = conn.execute(
        "select n.nid, json_extract(n.body, '$.content'), s.valid_at, json_extract(n.body, '$.props.speaker'), "
        "(select count(*) from edge as e join node as f on f.nid = e.src "
        "where e.dst = n.nid and e.type = 'refers_to' and f.type = 'Fact') "
        "from node as n join node_state as s on s.nid = n.nid "
        "where n.parent = ? and n.type in ('Turn', 'Memory') and n.body is not null "
        "and s.invalid_at is null and s.expired_at is null and s.retired = 0 order by n.slot",
        (world,),
    )
    return [
        (as_int(nid), str(text), str(at), None if who is None else str(who), as_int(facts))
        for nid, text, at, who, facts in rows
        if text
    ]


def scope_sessions(conn: apsw.Connection, scope: int) -> list[tuple[int, str]]:
    """(nid, name) of a scope's sessions, in the order their first turns were said."""
    rows = conn.execute(
        "select w.nid, json_extract(w.body, '$.name'), "
        "(select min(s.valid_at) from node as t join node_state as s on s.nid = t.nid "
        "where t.parent = w.nid and t.type = 'Turn') as began "
        "from node as w where w.parent = ? and w.type = 'Session' and w.body is not null order by began, w.nid",
        (scope,),
    )
    return [(as_int(nid), str(name)) for nid, name, began in rows if began is not None]


def items_changed(conn: apsw.Connection) -> dict[int, str]:
    """World nid -> when a turn or note in it was last written, closed, retired or purged (one read for all).

    What a summary of them depends on; edges between them (a ``duplicates`` link) are not.
    """
    rows = conn.execute(
        "with items(nid, world, at) as (select n.nid, n.parent, s.created_at from node as n "
        "join node_state as s on s.nid = n.nid where n.type in ('Turn', 'Memory') and n.parent is not null) "
        "select world, max(t) from (select world, at as t from items union all select i.world, l.at "
        "from state_log as l join items as i on i.nid = l.ref where l.kind = 'node' union all "
        "select i.world, tb.purged_at from tombstone as tb join node as n on n.id = tb.id "
        "join items as i on i.nid = n.nid) group by world"
    )
    return {as_int(world): str(at) for world, at in rows}


def scope_facts(conn: apsw.Connection, scope: int) -> list[tuple[int, str, str, str, str, str | None, str]]:
    """(nid, subject, slot, value, valid from, valid until, last change) of a scope's believed facts, oldest first."""
    rows = conn.execute(
        "select n.nid, json_extract(n.body, '$.props.subject'), json_extract(n.body, '$.props.slot'), "
        "json_extract(n.body, '$.props.value'), s.valid_at, s.invalid_at, max(s.created_at, coalesce(s.closed_at, '')) "
        "from node as n join node_state as s on s.nid = n.nid where n.parent = ? and n.type = 'Fact' "
        "and n.body is not null and s.expired_at is null and s.retired = 0 order by s.valid_at, n.nid",
        (scope,),
    )
    return [
        (as_int(nid), str(subject), str(slot), str(value), str(start), None if end is None else str(end), str(changed))
        for nid, subject, slot, value, start, end, changed in rows
        if subject and slot and value is not None
    ]


def fact_sources(conn: apsw.Connection, facts: Sequence[int]) -> list[int]:
    """The turns and notes ``facts`` were learned from (their ``refers_to`` edges), in nid order."""
    return [
        as_int(r[0])
        for r in conn.execute(
            "select distinct e.dst from edge as e join node as t on t.nid = e.dst "
            "where e.src in (select value from json_each(?)) and e.type = 'refers_to' "
            "and t.type in ('Turn', 'Memory') and t.body is not null order by e.dst",
            (json.dumps(list(facts)),),
        )
    ]


def shared_entities(conn: apsw.Connection, facts: Sequence[int]) -> list[int]:
    """The entities every one of ``facts`` refers to (their subject, when they share one), in nid order."""
    return [
        as_int(r[0])
        for r in conn.execute(
            "select e.dst from edge as e join node as n on n.nid = e.dst "
            "where e.src in (select value from json_each(?1)) and e.type = 'refers_to' and n.type = 'Entity' "
            "group by e.dst having count(distinct e.src) = json_array_length(?1) order by e.dst",
            (json.dumps(sorted(set(facts))),),
        )
    ]


def ever_linked(conn: apsw.Connection, edge_type: str, src: int, dst: int) -> bool:
    """Whether an edge of ``edge_type`` from ``src`` to ``dst`` was ever written (closed ones too)."""
    row = conn.execute("select 1 from edge where type = ? and src = ? and dst = ? limit 1", (edge_type, src, dst))
    return row.fetchone() is not None


def summarised_subjects(conn: apsw.Connection, scope: int, kinds: Sequence[str]) -> list[str]:
    """The subjects (``of``) of a scope's current summaries of ``kinds`` (profiles, histories)."""
    return [
        str(r[0])
        for r in conn.execute(
            "select distinct json_extract(n.body, '$.props.of') from node as n join node_state as s on s.nid = n.nid "
            "where n.parent = ?1 and n.type = 'Summary' and json_extract(n.body, '$.props.summary') in "
            "(select value from json_each(?2)) and s.invalid_at is null and s.expired_at is null and s.retired = 0",
            (scope, json.dumps(list(kinds))),
        )
        if r[0] is not None
    ]


def cold_among(conn: apsw.Connection, nids: Sequence[int], types: Sequence[str]) -> list[int]:
    """Those of ``nids`` (in order) of ``types`` in the cold tier: out of the in-memory vector index."""
    if not nids:
        return []
    marks = ", ".join("?" for _ in types)
    found = {
        as_int(nid)
        for (nid,) in conn.execute(
            "select c.nid from cold_node as c join node as n on n.nid = c.nid "
            f"where c.nid in (select value from json_each(?)) and n.type in ({marks})",
            (json.dumps(list(nids)), *types),
        )
    }
    return [nid for nid in nids if nid in found]


def member_keys(conn: apsw.Connection, nids: Sequence[int]) -> dict[int, tuple[str, int, bytes]]:
    """Nid -> (created_at, ord, id): how a read orders nodes it scored alike (retrieval/ties.py)."""
    return {
        as_int(nid): (str(created), as_int(order), bytes(raw))
        for nid, created, order, raw in conn.execute(
            "select n.nid, s.created_at, n.ord, n.id from node as n join node_state as s on s.nid = n.nid "
            "where n.nid in (select value from json_each(?))",
            (json.dumps(sorted(set(nids))),),
        )
    }
