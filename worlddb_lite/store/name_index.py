"""The resolver's name index: every Entity's name and aliases, folded, with phonetic keys, under FTS5.

It lives in the connection's ``temp`` schema, not in the file: it is derived from ``node`` and
``alias`` and built on the first resolution after a store opens (about 0.4 s for 5k entities and
4-6 s for 100k on the shared 2-core test machine, typo terms included; bench/resolver.py).
Temp triggers on ``main.node`` and ``main.alias`` keep it in step with this connection's own
writes inside the writing transaction, so a rolled-back write leaves no row behind. Another
connection's writes (a Consolidator thread, a second process) show as a new ``data_version``;
the index then catches up from what changed.

The lookups that serve the tiers: ``exact`` (tier 1: the normalised name, through a B-tree);
``block`` (tier 2: an FTS5 query that asks every word of the mention to meet a word of the name
as spelt or one typo away, through the words' one-letter deletions, so a few dozen of the store's
names get scored) and ``widen``, its second pass; ``sounds_like`` (tier 3: names whose words have
all the mention's phonetic keys).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import NamedTuple

import apsw

from ..text import phonetic
from ..text.names import normalise_alias
from .connection import as_int, one_row

PREFIX = 3  # letters of a word's prefix term in the second pass of blocking (FTS5 keeps prefixes this long)
MAX_WORDS = 8  # words of a mention used in blocking
MIN_TYPO = 2  # words this short have no deletion terms (one letter left out of "al" is anyone)
MAX_TYPO = 16  # letters of a word whose deletion is a typo term (past that, the prefix and key carry it)

_SCHEMA = f"""
create temp table if not exists resolver_name (
  rid integer primary key,
  nid integer not null,  -- the Entity node (main.node.nid)
  parent integer,  -- its world: resolution inside one world filters on it
  norm text not null,  -- normalise_alias of the name: tier 1's key
  folded text not null,  -- phonetic.fold: what the fuzzy tiers compare
  keys text not null,  -- phonetic keys of the folded words, space-separated
  typos text not null,  -- each word and its one-letter deletions: words one edit apart share one of these
  context text,  -- the entity's props.context: short text that tells namesakes apart
  kind text,  -- its props.kind (person, pet, place, ...): a mention of another kind is someone else
  unique (nid, norm)
);
create index if not exists temp.resolver_name_norm on resolver_name (norm);
create virtual table if not exists temp.resolver_fts using fts5(
  folded, keys, typos, context, content = 'resolver_name', content_rowid = 'rid',
  tokenize = 'unicode61 remove_diacritics 2', prefix = '{PREFIX}');
create temp table if not exists resolver_sync (aliases integer not null, top integer not null);
"""

# Created after the first fill (the FTS rows are then built in one pass: ~10x faster than row by row).
_TRIGGERS = """
create temp trigger if not exists resolver_name_ai after insert on resolver_name begin
  insert into resolver_fts (rowid, folded, keys, typos, context)
    values (new.rid, new.folded, new.keys, new.typos, new.context);
end;
create temp trigger if not exists resolver_name_ad after delete on resolver_name begin
  insert into resolver_fts (resolver_fts, rowid, folded, keys, typos, context)
    values ('delete', old.rid, old.folded, old.keys, old.typos, old.context);
end;
create temp trigger if not exists resolver_node_ai after insert on main.node begin
  update resolver_sync set top = max(top, new.nid);
  insert or ignore into resolver_name (nid, parent, norm, folded, keys, typos, context, kind)
    select new.nid, new.parent, resolver_norm(json_extract(new.body, '$.name')),
           resolver_fold(json_extract(new.body, '$.name')), resolver_keys(json_extract(new.body, '$.name')),
           resolver_typos(json_extract(new.body, '$.name')),
           json_extract(new.body, '$.props.context'), json_extract(new.body, '$.props.kind')
    where new.type = 'Entity' and json_extract(new.body, '$.name') is not null;
end;
create temp trigger if not exists resolver_node_purged after update of body on main.node
when new.body is null begin
  delete from resolver_name where nid = new.nid;
end;
create temp trigger if not exists resolver_alias_ai after insert on main.alias begin
  update resolver_sync set aliases = aliases + 1;
  insert or ignore into resolver_name (nid, parent, norm, folded, keys, typos, context, kind)
    select new.nid, n.parent, new.norm, resolver_fold(new.alias), resolver_keys(new.alias), resolver_typos(new.alias),
           json_extract(n.body, '$.props.context'), json_extract(n.body, '$.props.kind')
    from main.node as n where n.nid = new.nid and n.type = 'Entity';
end;
create temp trigger if not exists resolver_alias_ad after delete on main.alias begin
  update resolver_sync set aliases = aliases - 1;
  delete from resolver_name where nid = old.nid and norm = old.norm;
end;
"""

# What the index holds, read for a build or a catch-up (the folding and keys are computed in Python).
_ENTITIES = """
select n.nid, n.parent, json_extract(n.body, '$.name'), json_extract(n.body, '$.props.context'),
       json_extract(n.body, '$.props.kind')
from main.node as n where n.type = 'Entity' and n.nid > ?1 and json_extract(n.body, '$.name') is not null
"""
_ALIASES = """
select a.nid, n.parent, a.alias, json_extract(n.body, '$.props.context'), json_extract(n.body, '$.props.kind')
from main.alias as a join main.node as n on n.nid = a.nid
where n.type = 'Entity' and not exists (select 1 from resolver_name as r where r.nid = a.nid and r.norm = a.norm)
"""

_LIVE = "join main.node_state as s on s.nid = r.nid where s.expired_at is null and s.retired = 0"


class Name(NamedTuple):
    """One name an entity is known by, as the index holds it."""

    nid: int
    norm: str
    folded: str
    keys: tuple[str, ...]
    context: str | None
    kind: str | None


def _text(value: apsw.SQLiteValue) -> str:
    return value if isinstance(value, str) else ""


def _norm(*value: apsw.SQLiteValue) -> str:
    return normalise_alias(_text(value[0]))


def _fold(*value: apsw.SQLiteValue) -> str:
    return phonetic.fold(_text(value[0]))


def _keys(*value: apsw.SQLiteValue) -> str:
    return " ".join(phonetic.keys(phonetic.fold(_text(value[0]))))


def _typos_of(*value: apsw.SQLiteValue) -> str:
    return typos(phonetic.fold(_text(value[0])))


def deletions(word: str) -> list[str]:
    """``word`` and every spelling of it with one letter left out ("lucas": lucas, ucas, lcas, luas, lucs, luca).

    Two words one edit apart (a letter missing, added, changed, or two swapped) share one of these:
    the typo blocking of tier 2 (the symmetric-deletion idea behind SymSpell).
    """
    if len(word) <= MIN_TYPO:
        return [word]
    return list(dict.fromkeys([word, *(word[:i] + word[i + 1 :] for i in range(min(len(word), MAX_TYPO)))]))


def typos(folded: str) -> str:
    """The typo terms of a folded name: each word with its one-letter deletions, space-separated."""
    return " ".join(dict.fromkeys(t for w in folded.split()[:MAX_WORDS] for t in deletions(w)))


def _mended(folded: str) -> list[str]:
    """The words of a folded name, a fragment of one or two letters joined to the word before it."""
    words: list[str] = []
    for word in folded.split():
        if len(word) <= 2 and words and len(words[-1]) > 2:
            words[-1] += word
        else:
            words.append(word)
    return list(dict.fromkeys(words))[:MAX_WORDS]


def _terms(word: str) -> str:
    """The FTS5 terms a misspelling of ``word`` shares with it: its typo terms (itself among them)."""
    return f"typos : ({' OR '.join(_phrase(t) for t in deletions(word))})"


def _sounds(word: str) -> str:
    """Looser FTS5 terms for a word garbled beyond one typo: its first three letters, or its phonetic key."""
    terms = [f"folded : {_phrase(word[:PREFIX])}*"]
    sound = phonetic.key(word)
    if sound:
        terms.append(f"keys : {_phrase(sound)}")
    return "(" + " OR ".join(terms) + ")"


def _phrase(term: str) -> str:
    return '"' + term.replace('"', '""') + '"'


class NameIndex:
    """The blocking index of one connection (see the module docstring)."""

    def __init__(self, conn: apsw.Connection) -> None:
        self.conn = conn
        self._version: int | None = None  # data_version when last in step with other connections
        # The SQL functions the triggers call: total (never raise), so a write cannot fail in them.
        conn.create_scalar_function("resolver_norm", _norm, 1, deterministic=True)
        conn.create_scalar_function("resolver_fold", _fold, 1, deterministic=True)
        conn.create_scalar_function("resolver_keys", _keys, 1, deterministic=True)
        conn.create_scalar_function("resolver_typos", _typos_of, 1, deterministic=True)

    # ---- keeping in step -----------------------------------------------------------

    def ready(self) -> None:
        """Build the index if this connection has none (or a rollback took it), else catch up."""
        built = self.conn.execute(
            "select 1 from sqlite_temp_master where type = 'table' and name = 'resolver_sync'"
        ).fetchone()
        if built is None or self.conn.execute("select 1 from resolver_sync").fetchone() is None:
            self._build()
        elif self.conn.data_version() != self._version:
            self._catch_up()

    def _build(self) -> None:
        with self.conn:  # a savepoint inside the reconciler's transaction, its own transaction outside
            for name in ("resolver_fts", "resolver_name", "resolver_sync"):  # what a half-built index may have left
                self.conn.execute(f"drop table if exists temp.{name}")
            self.conn.execute(_SCHEMA)
            self._fill(0, aliases=True)
            self.conn.execute("insert into resolver_fts (resolver_fts) values ('rebuild')")
            self.conn.execute("insert into resolver_fts (resolver_fts) values ('optimize')")  # one segment: ~3x faster
            self.conn.execute(_TRIGGERS)
            self.conn.execute("insert into resolver_sync (aliases, top) values (?, ?)", self._totals())
        self._version = self.conn.data_version()

    def _fill(self, after: int, *, aliases: bool) -> None:
        """Index the entities with nid above ``after`` by name, then (if asked) every alias not yet indexed."""
        self._insert(list(self.conn.execute(_ENTITIES, (after,))))
        if aliases:
            self._insert(list(self.conn.execute(_ALIASES)))

    def _insert(self, rows: list[tuple[apsw.SQLiteValue, ...]]) -> None:
        prepared = []
        for nid, parent, name, context, kind in rows:
            folded = phonetic.fold(_text(name))
            prepared.append(
                (
                    nid,
                    parent,
                    normalise_alias(_text(name)),
                    folded,
                    " ".join(phonetic.keys(folded)),
                    typos(folded),
                    context,
                    kind,
                )
            )
        self.conn.executemany(
            "insert or ignore into resolver_name "
            "(nid, parent, norm, folded, keys, typos, context, kind) "
            "values (?, ?, ?, ?, ?, ?, ?, ?)",
            prepared,
        )

    def _totals(self) -> tuple[int, int]:
        aliases = as_int(one_row(self.conn.execute("select count(*) from main.alias").fetchone())[0])
        top = as_int(one_row(self.conn.execute("select coalesce(max(nid), 0) from main.node").fetchone())[0])
        return aliases, top

    def _catch_up(self) -> None:
        """Index what other connections wrote: new entities by nid, new aliases when their count moved."""
        aliases, top = self._totals()
        seen_aliases, seen_top = one_row(self.conn.execute("select aliases, top from resolver_sync").fetchone())
        if aliases < as_int(seen_aliases):  # rows left (a purge elsewhere): start again
            self._build()
            return
        if aliases != seen_aliases or top != seen_top:
            with self.conn:  # new entities: a range scan; new aliases anywhere: an anti-join over the alias table
                self._fill(as_int(seen_top), aliases=aliases != seen_aliases)
                self.conn.execute("update resolver_sync set aliases = ?, top = ?", (aliases, top))
        self._version = self.conn.data_version()

    # ---- lookups ---------------------------------------------------------------------

    def exact(self, norm: str, parent: int | None) -> list[Name]:
        """Live entities (in ``parent``, if given) known by this normalised name or alias."""
        return self._rows("r.norm = ?1", (norm, parent), "r.nid")

    def block(self, folded: str, parent: int | None, limit: int) -> list[Name]:
        """Up to ``limit`` names that could be ``folded`` misspelt: the FTS5 blocking of tier 2.

        Every word of the mention (a fragment of one or two letters joined to the word before:
        "jacob crossm an") must meet a word of the name as spelt or one typo away (a letter
        missing, added, changed, or two swapped: they share a typo term). A conjunction of rare
        terms keeps the block small without ranking it.
        """
        words = _mended(folded)
        if not words:
            return []
        return self._search(" AND ".join(_terms(w) for w in words), parent, limit, ranked=False)

    def widen(self, folded: str, parent: int | None, limit: int, *, context: str | None = None) -> list[Name]:
        """Names for the second pass of tier 2, when ``block`` found none, or the mention has ``context``.

        Those that ``block`` would find with two neighbouring words of the mention taken as one (a
        stray space: "benjamin morr ison"), and those whose every word starts with the first three
        letters of a word of the mention or sounds like it (a word garbled beyond one typo:
        "rawlibs" for "rawlings"). With ``context``, which may vouch for a weaker name, also the
        names that share a whole word with the mention or the context, best BM25 first.
        """
        words = _mended(folded)
        if not words:
            return []
        raw = folded.split()[:MAX_WORDS]  # (not mended: "deakyn bl ake" is "deakyn blake")
        joined = [[*raw[:i], raw[i] + raw[i + 1], *raw[i + 2 :]] for i in range(len(raw) - 1)]
        alternatives = ["(" + " AND ".join(_terms(w) for w in spelt) + ")" for spelt in joined]
        alternatives.append("(" + " AND ".join(_sounds(w) for w in words) + ")")
        found = self._search(" OR ".join(alternatives), parent, limit, ranked=False)
        if not context:
            return found
        either = [f"folded : {_phrase(w)}" for w in folded.split()[:MAX_WORDS]]
        either += [f"context : {_phrase(w)}" for w in phonetic.fold(context).split()[:MAX_WORDS]]
        return found + self._search(" OR ".join(dict.fromkeys(either)), parent, limit, ranked=True)

    def sounds_like(self, keys: Sequence[str], parent: int | None, limit: int) -> list[Name]:
        """Up to ``limit`` names whose words carry every one of ``keys`` (in any order)."""
        if not keys:
            return []
        query = " AND ".join(f"keys : {_phrase(k)}" for k in dict.fromkeys(keys))
        return self._search(query, parent, limit, ranked=False)

    def _search(self, query: str, parent: int | None, limit: int, *, ranked: bool) -> list[Name]:
        return self._rows(
            "resolver_fts match ?1",
            (query, parent),
            "f.rank" if ranked else "f.rowid",
            limit,
            source="resolver_fts as f join resolver_name as r on r.rid = f.rowid",
        )

    def _rows(
        self, where: str, params: tuple[object, ...], order: str, limit: int = -1, *, source: str = "resolver_name as r"
    ) -> list[Name]:
        rows = self.conn.execute(
            f"select r.nid, r.norm, r.folded, r.keys, r.context, r.kind from {source} {_LIVE} and {where} "
            f"and (?2 is null or r.parent = ?2) order by {order} limit {int(limit)}",
            params,
        )
        return [
            Name(as_int(nid), str(norm), str(fold), tuple(str(keys).split()), ctx, kind)
            for nid, norm, fold, keys, ctx, kind in rows
        ]

    def names(self, nids: Iterable[int], parent: int | None = None) -> list[Name]:
        """Every indexed name of the given live entities (in ``parent``, if given)."""
        return self._rows(
            "r.nid in (select value from json_each(?1))", (json.dumps(sorted(set(nids))), parent), "r.nid, r.rid"
        )
