"""Hostile input: random and adversarial arguments to every facade method and to the CLI.

The property (issue 7): whatever a caller passes, only a ``WorldDBError`` escapes, and a call that
fails leaves the store exactly as it was (its Merkle root, and the rows and contents of every
table, compared with ``table_digest``). The CLI turns every failure into a message and a non-zero
exit code, never a traceback (argparse's own ``SystemExit`` for a malformed command line is fine).

A last test checks statically that no SQL is built by string formatting from input: every
formatted SQL text in the package is listed below, reviewed to interpolate only internal names.

The default run takes a few seconds per test; ``-m slow`` runs the same properties much longer.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import datetime as dt
import io
import json
import os
import re
import shutil
import tempfile
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

import worlddb_lite
from worlddb_lite import ConversationIn, QuerySpec, RuleExtractor, SessionIn, TurnIn, WorldDB, WorldDBError
from worlddb_lite.cli import build_parser, main
from worlddb_lite.errors import StoreError
from worlddb_lite.retrieval.query import Expand, Filter, PreferSummaries, WhereConnected

from .conftest import FakeClock, FakeEmbedder, table_digest

FAST = settings(
    max_examples=100, deadline=None, derandomize=True, database=None, suppress_health_check=list(HealthCheck)
)
SLOW = settings(max_examples=1500, deadline=None, suppress_health_check=list(HealthCheck))

# ---- hostile values -----------------------------------------------------------------------------

ADVERSARIAL_TEXT = [
    "",
    " ",
    "\t\n",
    "\x00",
    "a\x00b",
    "\ud800",
    "x\udfffy",
    "\ufeff",
    "\u202eevil",
    "\U0001f600 emoji",
    "'; drop table node; --",
    '"; delete from edge; --',
    "1; select * from node",
    "') or 1=1 --",
    "?",
    "?1",
    ":name",
    "@x",
    "$1",
    "%s",
    "%(x)s",
    "{}",
    "{0}",
    "{x!r}",
    "\\",
    "\\x00",
    '"',
    '""',
    "'",
    "*",
    "^",
    "-",
    "+",
    "(",
    ")",
    "NEAR(a b)",
    "a AND",
    "OR",
    "NOT x",
    "a:b",
    "col:foo",
    "node_fts:x",
    "{name content}: x",
    '"unterminated',
    "a* OR b*",
    "^start",
    'NEAR("a" "b", -1)',
    "x" * 5000,
    "word " * 3000,
    "ß" * 300,
    "\u0301" * 50,
    "日本語のテキスト",
    "עברית",
    "Ωmega",
    "\r\n\r\n",
    "%n%n%n",
    "../../etc/passwd",
    "/dev/null",
    "nul",
    "CON",
    "::1",
    "0x10",
    "1e309",
    "-0",
    "NaN",
    "inf",
]
text_any = st.text(alphabet=st.characters(blacklist_categories=()), max_size=40)  # surrogates and NUL included
strings = st.one_of(st.sampled_from(ADVERSARIAL_TEXT), text_any, st.text(max_size=12))

hex_any = st.text(alphabet="0123456789abcdefABCDEF", min_size=0, max_size=70)
ID_SHAPES = [
    "",
    "0",
    "0" * 7,
    "0" * 8,
    "0" * 63,
    "0" * 64,
    "0" * 65,
    "f" * 64,
    "F" * 64,
    "g" * 64,
    " " + "0" * 64,
    "0" * 64 + "\n",
    "zzzzzzzz",
    "12345678",
    "%",
    "_",
    "0000000%",
    "________",
    "' or 1=1",
    "\x00" * 8,
]
numbers = st.sampled_from(
    [
        0,
        1,
        -1,
        2,
        7,
        10**4,
        2**31,
        2**63 - 1,
        2**63,
        2**64,
        -(2**63),
        10**100,
        0.5,
        -0.0,
        1e308,
        float("nan"),
        float("inf"),
        float("-inf"),
        True,
        False,
    ]
)
times = st.sampled_from(
    [
        "garbage",
        "",
        " ",
        "now",
        "today",
        "2024-13-45",
        "2024-02-30",
        "2024-01-01",
        "2024-01-01T00:00:00",
        "2024-01-01T00:00:00Z",
        "2024-01-01T00:00:00+25:00",
        "2024-01-01T24:00:00",
        "0000-01-01",
        "0001-01-01",
        "9999-12-31T23:59:59.999999Z",
        "10000-01-01",
        "-0001-01-01",
        "1970-01-01",
        "2024-W01-1",
        "20240101",
        "2024-01-01 garbage",
        "\x00",
        "'; drop table node; --",
        0,
        -1,
        2**63,
        -(2**63),
        1e20,
        -1e20,
        float("nan"),
        float("inf"),
        True,
        dt.datetime(1, 1, 1),
        dt.datetime(9999, 12, 31, 23, 59, 59),
        dt.datetime(2024, 1, 1, tzinfo=dt.timezone(dt.timedelta(hours=23, minutes=59))),
        dt.date(1, 1, 1),
        dt.date(9999, 12, 31),
        dt.time(12, 0),
        b"2024-01-01",
        [2024],
        None,
    ]
)
junk = st.sampled_from(
    [
        None,
        b"",
        b"\xff\xfe",
        b"bytes",
        [],
        [None],
        ["a", 1],
        {},
        {"a": object()},
        (1, 2, 3),
        object(),
        1j,
        Path("x"),
        {"text": "x"},
        {1, 2},
    ]
)


class Ids:
    """Ids of what the store holds, so strategies can pick real ones (and their prefixes) too.

    The seeded store is deterministic (fake clock and embedder), so its ids are the same in every example.
    """

    nodes: list[str] = []
    edges: list[str] = []


def ids() -> st.SearchStrategy[Any]:
    real = st.builds(
        lambda i, cut: Ids.nodes[i % len(Ids.nodes)][:cut] if Ids.nodes else "",
        st.integers(0, 50),
        st.sampled_from([4, 7, 8, 12, 64]),
    )
    edge = st.builds(
        lambda i, cut: Ids.edges[i % len(Ids.edges)][:cut] if Ids.edges else "",
        st.integers(0, 50),
        st.sampled_from([8, 64]),
    )
    return st.one_of(st.sampled_from(ID_SHAPES), hex_any, real, edge, strings, junk, numbers)


anything = st.one_of(strings, ids(), numbers, times, junk)


def maybe(strategy: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """A value the method accepts in ordinary use (two times in three, so calls also get deep), or a hostile one."""
    return st.one_of(strategy, strategy, anything)


names = maybe(st.sampled_from(["Alice", "Lisbon", "Porto", "coffee"]))
scopes = maybe(st.sampled_from(["me", "other", "default"]))
edge_types = maybe(st.sampled_from(["refers_to", "contradicts", "supersedes", "same_as", "contains", "causes"]))
small = maybe(st.integers(1, 20))

# ---- the store under attack ----------------------------------------------------------------------


@contextlib.contextmanager
def seeded_store() -> Iterator[tuple[WorldDB, str]]:
    """A small store with two scopes, versions, edges, aliases and a pending merge; and a scratch folder."""
    with tempfile.TemporaryDirectory() as folder, contextlib.chdir(folder):  # a relative path lands in the folder
        db = WorldDB(os.path.join(folder, "store.db"), embedder=FakeEmbedder(), clock=FakeClock())
        try:
            a = db.write("Alice lives in Lisbon", scope="me", valid_at="2024-01-01")
            b = db.amend(a, "Alice lives in Porto", valid_at="2024-05-01")
            c = db.write("Alice drinks coffee", scope="other", valid_at="2024-01-01", aliases=["Ali"])
            alice = db.write("Alice", type="Entity", name="Alice", scope="me", aliases=["Ally"])
            alicia = db.write("Alicia", type="Entity", name="Alicia", scope="me")
            e1 = db.link(b, alice, "refers_to")
            e2 = db.link(c, b, "contradicts")
            db.link(alice, alicia, "same_as")
            Ids.nodes = [a, b, c, alice, alicia, db.root_id, db.scope("me")]
            Ids.edges = [e.id for e in (e1, e2)]  # type: ignore[union-attr]
            db.replica(os.path.join(folder, "replica.db"))  # a replica to sync with and take change sets from
            yield db, folder
        finally:
            db.close()


Call = tuple[str, Callable[[WorldDB, str], Any]]


def call(method: str, /, *args: st.SearchStrategy[Any], **kwargs: st.SearchStrategy[Any]) -> st.SearchStrategy[Call]:
    """A strategy of one call to ``db.<method>`` with drawn positional and (each optional) keyword arguments."""
    return st.builds(
        lambda a, kw: (f"{method}{tuple(a)!r:.300}{kw!r:.300}", lambda db, _folder: getattr(db, method)(*a, **kw)),
        st.tuples(*args),
        st.fixed_dictionaries({}, optional=kwargs),
    )


def _spec(fields: dict[str, Any]) -> QuerySpec:
    return QuerySpec(**fields)


operators = st.one_of(
    st.builds(Expand, st.tuples(edge_types), st.sampled_from(["out", "in", "both", "up"]), maybe(st.integers(0, 3))),
    st.builds(Filter, maybe(st.tuples(names)), ids()),
    st.builds(WhereConnected, edge_types, st.sampled_from(["out", "in", "both", "sideways"]), ids()),
    st.just(PreferSummaries()),
    anything,
)
query_specs = st.fixed_dictionaries(
    {},
    optional={
        "seeds": st.lists(ids(), max_size=3).map(tuple),
        "text": maybe(names),
        "vector": maybe(names),
        "world": ids(),
        "pipeline": st.lists(operators, max_size=3).map(tuple),
        "k": small,
        "as_of": times,
        "known_as_of": times,
        "include_superseded": maybe(st.booleans()),
        "types": maybe(st.tuples(names)),
    },
).map(_spec)

records = st.fixed_dictionaries(
    {"text": maybe(names)},
    optional={
        "scope": scopes,
        "world": ids(),
        "type": names,
        "name": names,
        "valid_at": times,
        "props": anything,
        "vector": anything,
        "aliases": anything,
        "salience": numbers,
        "index_context": strings,
        "bogus": anything,
    },
)
vectors = st.one_of(st.lists(numbers, max_size=40), st.lists(st.floats(), min_size=32, max_size=32), anything)


turns = st.builds(TurnIn, maybe(strings), speaker=maybe(names), turn_id=maybe(strings), at=times, props=anything)
sessions = st.builds(SessionIn, maybe(strings), maybe(times), st.one_of(st.lists(turns, max_size=3), anything))
conversations = st.builds(
    ConversationIn, maybe(strings), st.one_of(st.lists(scopes, max_size=2), anything), st.lists(sessions, max_size=2)
)


def _backup(dest: Any, overwrite: Any, verify: Any) -> Call:
    def run(db: WorldDB, folder: str) -> Any:
        return db.backup(dest, overwrite=overwrite, verify=verify)

    return f"backup({dest!r:.200}, overwrite={overwrite!r}, verify={verify!r})", run


def _export(scope: Any) -> Call:
    def run(db: WorldDB, folder: str) -> Any:
        return list(db.export(scope))

    return f"export({scope!r:.200})", run


def _import(lines: Any, exported: bool) -> Call:
    def run(db: WorldDB, folder: str) -> Any:
        if exported:  # the store's own export, then the hostile lines after it
            own = [json.dumps(record) for record in db.export()]
            return db.import_records(own + (list(lines) if isinstance(lines, list) else []))
        return db.import_records(lines)

    return f"import_records({lines!r:.200}, exported={exported})", run


def _changes(target: Any, since: Any, scope_list: Any) -> Call:
    def run(db: WorldDB, folder: str) -> Any:
        return db.changes(target, since=since, scopes=scope_list)

    return f"changes({target!r:.200}, since={since!r:.200}, scopes={scope_list!r:.200})", run


def _apply(source: Any, replica: bool, cut: Any) -> Call:
    def run(db: WorldDB, folder: str) -> Any:
        if replica:  # a replica's genuine change set, perhaps cut short or with bytes changed
            other = os.path.join(folder, "replica.db")
            with WorldDB(other, embedder=FakeEmbedder(), clock=FakeClock(), create=False) as peer:
                peer.write("Bob lives in Rome", scope="me")
                buffer = io.BytesIO()
                peer.changes(buffer, since=db.sync_token())
            data = buffer.getvalue()
            if isinstance(cut, int) and cut > 0:
                data = data[: cut % max(len(data), 1)]
            elif isinstance(cut, str) and cut:
                data = data.replace(data[10:12], cut.encode("utf-8", "replace")[:2], 1)
            return db.apply_changes(data)
        return db.apply_changes(source)

    return f"apply_changes({source!r:.200}, replica={replica}, cut={cut!r:.100})", run


def _sync(other: Any, pull: Any, push: Any, scope_list: Any) -> Call:
    def run(db: WorldDB, folder: str) -> Any:
        return db.sync(other, pull=pull, push=push, scopes=scope_list)

    return f"sync({other!r:.200}, pull={pull!r}, push={push!r}, scopes={scope_list!r:.200})", run


def _reopen(path: Any, dim: Any, compose: Any, create: Any) -> Call:
    def run(db: WorldDB, folder: str) -> Any:
        with WorldDB(path, embedder=FakeEmbedder(), dim=dim, compose=compose, create=create):
            return None

    return f"WorldDB({path!r:.200}, dim={dim!r}, compose={compose!r}, create={create!r})", run


SQL_QUERIES = [
    "select count(*) from node",
    "select * from memory where scope = ?",
    "select * from node where nid = :nid",
    "select * from node_fts where node_fts match ?",
    "pragma table_info(node)",
    "delete from node",
    "update meta set value = ?",
    "pragma user_version = 9",
    "select 1; drop table meta",
    "vacuum",
    "rollback",
]

CALLS: dict[str, st.SearchStrategy[Call]] = {
    "write": call(
        "write",
        maybe(names),
        scope=scopes,
        world=ids(),
        type=names,
        name=names,
        valid_at=times,
        props=anything,
        vector=vectors,
        aliases=anything,
        salience=numbers,
        index_context=strings,
        speaker=strings,
        extractor=st.one_of(st.none(), st.just(RuleExtractor()), anything),
        deferred=anything,
        tags=st.one_of(st.lists(strings, max_size=3), anything),
        new=anything,
    ),
    "write_many": call("write_many", st.one_of(st.lists(records, max_size=3), anything)),
    "amend": call("amend", ids(), maybe(names), valid_at=times, props=anything),
    "retire": call("retire", ids(), at=times),
    "retract": call("retract", ids()),
    "link": call("link", ids(), ids(), edge_types, props=anything, valid_at=times),
    "link_many": call("link_many", st.one_of(st.lists(st.tuples(ids(), ids(), edge_types), max_size=3), anything)),
    "unlink": call("unlink", ids(), at=times),
    "add_alias": call("add_alias", ids(), names, source=strings),
    "accept_merge": call("accept_merge", maybe(st.integers(1, 3))),
    "reject_merge": call("reject_merge", maybe(st.integers(1, 3))),
    "merge_proposals": call("merge_proposals", maybe(st.sampled_from(["pending", "accepted", "rejected"]))),
    "merge_proposal": call("merge_proposal", maybe(st.integers(1, 3))),
    "equivalence_class": call("equivalence_class", ids()),
    "export_identity": call("export_identity", ids()),
    "lookup_alias": call("lookup_alias", names),
    "resolve": call("resolve", names, scope=scopes, world=ids(), aliases=anything, context=strings, kind=strings),
    "resolve_entity": call(
        "resolve_entity",
        names,
        scope=scopes,
        world=ids(),
        aliases=anything,
        context=strings,
        kind=strings,
        valid_at=times,
        props=anything,
        source=strings,
    ),
    "recluster": call("recluster", batch=numbers),
    "ingest": call(
        "ingest",
        st.one_of(conversations, anything),
        extractor=st.one_of(st.none(), anything),
        deferred=anything,
        window=numbers,
        word_window=numbers,
        word_after=numbers,
        bridge=anything,
        gate=anything,
    ),
    "consolidate": call(
        "consolidate", st.one_of(st.just(RuleExtractor()), anything), limit=numbers, recluster=anything
    ),
    "queued": call("queued"),
    "add_turn": call(
        "add_turn",
        maybe(names),
        scope=scopes,
        session=strings,
        speaker=strings,
        at=times,
        extractor=st.one_of(st.none(), st.just(RuleExtractor()), anything),
        deferred=anything,
    ),
    "world": call("world", names, parent=ids(), type=names),
    "scope": call("scope", names),
    "read": call("read", ids(), as_of=times, known_as_of=times),
    "history": call("history", ids()),
    "nodes": call(
        "nodes", world=ids(), type=names, as_of=times, known_as_of=times, include_superseded=anything, limit=small
    ),
    "neighbours": call(
        "neighbours",
        ids(),
        types=maybe(st.lists(edge_types, max_size=2)),
        direction=maybe(st.sampled_from(["out", "in", "both"])),
        as_of=times,
        known_as_of=times,
    ),
    "search": call(
        "search", maybe(names), k=small, scope=scopes, as_of=times, known_as_of=times, include_superseded=anything
    ),
    "list_memories": call(
        "list_memories",
        scopes,
        type=names,
        include_retired=anything,
        limit=small,
        cursor=maybe(ids()),
        tag=st.one_of(strings, anything),
        newest_first=anything,
    ),
    "sql": call(
        "sql",
        st.one_of(strings, st.sampled_from(SQL_QUERIES)),
        st.one_of(st.just(()), st.tuples(anything), st.dictionaries(names, anything, max_size=2), anything),
    ),
    "scopes": call("scopes"),
    "retire_all": call("retire_all", scopes, at=times, tag=st.one_of(strings, anything)),
    "purge_tagged": call("purge_tagged", scopes, st.one_of(strings, anything)),
    "read_time": call("read_time", st.one_of(times, strings), field=strings),
    "set_retention": call("set_retention", max_hot_vectors=st.one_of(st.none(), numbers), cold_below=anything),
    "retention": call("retention"),
    "purge_scope": call("purge_scope", scopes),
    "nearest": call(
        "nearest",
        st.one_of(names, vectors),
        k=small,
        world=ids(),
        types=maybe(st.lists(names, max_size=2)),
        as_of=times,
        known_as_of=times,
    ),
    "recall": call(
        "recall",
        maybe(names),
        scope=scopes,
        world=ids(),
        k=small,
        as_of=times,
        known_as_of=times,
        include_superseded=anything,
        reranker=junk,
        type=names,
        tag=st.one_of(strings, anything),
        during=st.one_of(strings, st.sampled_from(["last week", "in March 2024", "2024", "next blursday"]), anything),
    ),
    "context": call("context", maybe(names), budget=small, k=small, scope=scopes, as_of=times, world=ids()),
    "query": call("query", st.one_of(query_specs, anything)),
    "root": call("root", ids(), as_of=times),
    "root_history": call("root_history", ids()),
    "verify_root_history": call("verify_root_history", ids()),
    "reindex": call("reindex", partitions=numbers),
    "purge": call("purge", ids(), scope=scopes),
    "configure_resolver": call("configure_resolver", anything, tiebreaker=anything),
    "backup": st.builds(
        _backup, maybe(st.sampled_from(["copy.db", "sub/dir/copy.db", "store.db"])), anything, anything
    ),
    "export": st.builds(_export, st.one_of(st.none(), scopes, anything)),
    "changes": st.builds(
        _changes,
        st.one_of(st.sampled_from(["out.bin", "sub/dir/out.bin", "store.db", ".", ""]), anything),
        st.one_of(st.none(), strings, anything, st.just("0" * 32 + ":5")),
        st.one_of(st.none(), st.lists(st.one_of(scopes, anything), max_size=2), anything),
    ),
    "apply_changes": st.builds(
        _apply,
        st.one_of(anything, st.binary(max_size=64), st.sampled_from(["store.db", "missing.bin", "bad\x00name"])),
        st.booleans(),
        st.one_of(st.none(), st.integers(min_value=0, max_value=4000), strings),
    ),
    "replica": call("replica", maybe(st.sampled_from(["copy.db", "sub/dir/copy.db", "store.db"])), overwrite=anything),
    "sync": st.builds(
        _sync,
        st.one_of(st.sampled_from(["replica.db", "store.db", "missing.db"]), anything),
        anything,
        anything,
        st.one_of(st.none(), st.lists(st.one_of(scopes, anything), max_size=2), anything),
    ),
    "import_records": st.builds(
        _import,
        st.one_of(
            anything,
            st.sampled_from(["store.db", "missing.jsonl", "bad\x00name", "."]),
            st.lists(st.one_of(strings, anything), max_size=4),
        ),
        st.booleans(),
    ),
    "WorldDB": st.builds(
        _reopen,
        maybe(st.sampled_from(["new.db", "store.db"])),
        maybe(st.just(32)),
        maybe(st.sampled_from(["attention", "mean"])),
        maybe(st.booleans()),
    ),
}
calls = st.one_of(*CALLS.values())


def attack(db: WorldDB, folder: str, batch: list[Call]) -> None:
    """Each call either works or raises a WorldDBError that left every table as it was."""
    for label, run in batch:
        before = table_digest(db)
        try:
            run(db, folder)
        except StoreError as exc:  # SQLite met something the engine did not check first (an FTS5 syntax error ...)
            raise AssertionError(f"{label} reached SQLite unchecked: {exc}") from exc
        except WorldDBError as exc:
            assert str(exc), f"{label}: {type(exc).__name__} without a message"
            assert table_digest(db) == before, f"{label} raised {type(exc).__name__} ({exc}) but changed the store"
        except Exception as exc:  # noqa: BLE001 - the property under test
            raise AssertionError(f"{label} raised {type(exc).__name__}: {exc!r:.500}") from exc
    report = db.verify()
    assert report.ok, report.violations


@FAST
@given(st.lists(calls, min_size=1, max_size=6))
def test_facade_only_raises_worlddb_errors_and_leaves_the_store_alone(batch: list[Call]) -> None:
    with seeded_store() as (db, folder):
        attack(db, folder, batch)


@pytest.mark.slow
@SLOW
@given(st.lists(calls, min_size=1, max_size=12))
def test_facade_hostile_input_long(batch: list[Call]) -> None:
    with seeded_store() as (db, folder):
        attack(db, folder, batch)


def attack_in_batch(db: WorldDB, folder: str, batch: list[Call]) -> None:
    """The same calls inside one ``batch()``, the caller catching each error: the batch then commits what
    worked, or (a call failed half-way) refuses to commit and leaves the store as it was before the batch."""
    before = table_digest(db)
    try:
        with db.batch():
            for label, run in batch:
                try:
                    run(db, folder)
                except StoreError as exc:
                    raise AssertionError(f"{label} reached SQLite unchecked: {exc}") from exc
                except WorldDBError:
                    pass
                except Exception as exc:  # noqa: BLE001 - the property under test
                    raise AssertionError(f"{label} raised {type(exc).__name__}: {exc!r:.500}") from exc
    except WorldDBError as exc:
        assert table_digest(db) == before, f"the batch was refused ({exc}) but changed the store"
    report = db.verify()
    assert report.ok, report.violations


in_batch = st.one_of(*(strategy for name, strategy in CALLS.items() if name != "WorldDB"))


@FAST
@given(st.lists(in_batch, min_size=1, max_size=6))
def test_hostile_calls_inside_a_batch_commit_whole_or_not_at_all(batch: list[Call]) -> None:
    with seeded_store() as (db, folder):
        attack_in_batch(db, folder, batch)


@pytest.mark.slow
@SLOW
@given(st.lists(in_batch, min_size=1, max_size=12))
def test_hostile_calls_inside_a_batch_long(batch: list[Call]) -> None:
    with seeded_store() as (db, folder):
        attack_in_batch(db, folder, batch)


def test_every_public_method_is_attacked() -> None:
    public = {name for name in dir(WorldDB) if not name.startswith("_")}
    no_data = {"close", "root_id", "checkpoint", "stats", "verify", "store_id", "sync_token"}  # no argument
    code = {"batch", "register_edge_type"}  # take code, not data
    elsewhere = {"reembed"}  # rewrites every vector with a model: `worlddb reembed --model` in the CLI fuzz
    assert public - no_data - code - elsewhere <= set(CALLS), sorted(public - no_data - code - elsewhere - set(CALLS))


# ---- regressions found by the fuzz ---------------------------------------------------------------


@pytest.mark.parametrize(
    "dest", ["", "   ", None, 3, b"copy.db", "bad\x00name.db", ".", "folder", "x" * 5000, "\ud800.db", "\udc80.db"]
)
def test_backup_refuses_a_destination_that_cannot_be_a_file(dest: Any) -> None:
    """Found by the fuzz: a folder (``""`` is the current one) ended in IsADirectoryError from os.replace;
    None in a TypeError from Path(); a name too long in a raw OSError."""
    with seeded_store() as (db, folder):
        os.mkdir(os.path.join(folder, "folder"))
        before = table_digest(db)
        with pytest.raises(WorldDBError):
            db.backup(dest, overwrite=True)
        assert table_digest(db) == before
        left = sorted(name for name in os.listdir(folder) if not name.startswith("replica.db"))
        assert left == ["folder", "store.db", "store.db-shm", "store.db-wal"]


def test_backup_into_an_unwritable_folder_is_a_message() -> None:
    if os.geteuid() == 0:
        pytest.skip("root writes into any folder")
    with seeded_store() as (db, folder):
        locked = os.path.join(folder, "locked")
        os.mkdir(locked, 0o500)
        with pytest.raises(WorldDBError, match="writable"):
            db.backup(os.path.join(locked, "copy.db"))


@pytest.mark.parametrize("types", [object(), 3, {"Turn": 1}.keys(), "Turn"])
def test_nearest_refuses_types_that_are_not_a_list(types: Any) -> None:
    """Found by the fuzz: ``types=object()`` ended in TypeError ('object' object is not iterable)."""
    with seeded_store() as (db, _):
        with pytest.raises(WorldDBError, match="types must be a list"):
            db.nearest("Alice", types=types)


@pytest.mark.parametrize("types", [1, object(), "refers_to", [1]])
def test_neighbours_refuses_types_that_are_not_a_list_of_names(types: Any) -> None:
    """Found by the fuzz: ``neighbours(id, types=1)`` ended in TypeError ('int' object is not iterable)."""
    with seeded_store() as (db, _):
        with pytest.raises(WorldDBError, match="types must be a list"):
            db.neighbours(Ids.nodes[0], types=types)


@pytest.mark.parametrize("method", ["nodes", "neighbours", "search", "nearest", "recall", "context"])
@pytest.mark.parametrize("flag", [[], "yes", 1, None])
def test_include_superseded_must_be_a_bool(method: str, flag: Any) -> None:
    """Found by the fuzz: ``nodes(include_superseded=[])`` ended in TypeError (unhashable type: 'list')."""
    with seeded_store() as (db, _):
        args = () if method == "nodes" else (Ids.nodes[0],) if method == "neighbours" else ("Alice",)
        with pytest.raises(WorldDBError, match="include_superseded must be True or False"):
            getattr(db, method)(*args, include_superseded=flag)


def test_nodes_refuses_a_type_that_is_not_text() -> None:
    """Found by the fuzz: ``nodes(type=[])`` ended in apsw's TypeError (bad binding argument type)."""
    with seeded_store() as (db, _):
        with pytest.raises(WorldDBError, match="type must be text"):
            db.nodes(type=[])  # type: ignore[arg-type]


@pytest.mark.parametrize("salience", [10**400, -(10**400), float("nan"), float("inf")])
def test_salience_must_be_a_finite_number(salience: Any) -> None:
    """Found by the fuzz: ``write(..., salience=2**64)`` ended in numpy's TypeError (isfinite of a huge int)."""
    with seeded_store() as (db, _):
        before = table_digest(db)
        with pytest.raises(WorldDBError, match="salience must be a finite number"):
            db.write("Alice", scope="me", salience=salience)
        assert table_digest(db) == before
        db.write("Alice", scope="me", salience=2**64)  # large, but a float holds it


@pytest.mark.parametrize(
    "fields",
    [
        {"text": []},
        {"text": b"\xff\xfe"},
        {"text": 3},
        {"seeds": "abc"},
        {"seeds": 3},
        {"text": "Alice", "types": "Turn"},
        {"text": "Alice", "pipeline": "Expand"},
        {"text": "Alice", "pipeline": (3,)},
        {"text": "Alice", "pipeline": (Expand((1,)),)},  # type: ignore[arg-type]
        {"text": "Alice", "pipeline": (Expand(direction="up"),)},  # type: ignore[arg-type]
        {"text": "Alice", "pipeline": (Expand(hops="2"),)},  # type: ignore[arg-type]
        {"text": "Alice", "pipeline": (Filter(types="Turn"),)},  # type: ignore[arg-type]
        {"text": "Alice", "pipeline": (WhereConnected(3, "out", "00000000"),)},  # type: ignore[arg-type]
        {"text": "Alice", "pipeline": (WhereConnected("refers_to", [], "00000000"),)},  # type: ignore[arg-type]
    ],
)
def test_query_refuses_a_malformed_spec(fields: dict[str, Any]) -> None:
    """Found by the fuzz: ``QuerySpec(text=[])`` ended in AttributeError ('list' object has no attribute 'strip'),
    ``text=b"..."`` in another; operators' fields were not checked either."""
    with seeded_store() as (db, _):
        with pytest.raises(WorldDBError):
            db.query(QuerySpec(**fields))


def test_query_expands_a_huge_number_of_hops_in_no_time() -> None:
    """Expand(hops=10**12) stops once nothing is left to follow, instead of looping 10**12 times."""
    with seeded_store() as (db, _):
        found = db.query(QuerySpec(text="Alice", pipeline=(Expand(hops=10**12),)))
        assert found.nodes


@pytest.mark.parametrize("reranker", [b"", "model", 3, object()])
def test_recall_refuses_a_reranker_without_score(reranker: Any) -> None:
    """Found by the fuzz: ``reranker=b""`` ended in AttributeError ('bytes' object has no attribute 'score')."""
    with seeded_store() as (db, _):
        with pytest.raises(WorldDBError, match="reranker must"):
            db.recall("Alice", reranker=reranker)


@pytest.mark.parametrize("path", [None, 3, b"store.db", "", "  ", "bad\x00name.db", "\ud800.db", "\udc80.db"])
def test_opening_a_store_refuses_a_path_that_cannot_name_a_file(path: Any) -> None:
    """Found by the CLI fuzz: a NUL in the path ended in apsw's ValueError; None opened a file called "None"."""
    with tempfile.TemporaryDirectory() as folder, contextlib.chdir(folder):
        with pytest.raises(WorldDBError, match="path"):
            WorldDB(path, embedder=FakeEmbedder())
        assert os.listdir(folder) == []


@pytest.mark.parametrize("create", [True, False])
def test_opening_a_store_whose_name_is_too_long_is_a_message(create: bool) -> None:
    """Found by the CLI fuzz: ``worlddb link <5000 characters> ...`` (a command that does not create the
    store) raised OSError (file name too long) from the existence check after SQLite refused the file."""
    with pytest.raises(WorldDBError, match="cannot open"):
        WorldDB("x" * 5000, embedder=FakeEmbedder(), create=create)


def test_names_the_file_system_cannot_look_up_are_messages() -> None:
    """Found by the CLI fuzz: ``--model``, ``--rerank`` and ``ingest FILE`` with a name too long for the file
    system (or a folder for a file) raised a raw OSError out of Path.is_dir / open."""
    from worlddb_lite.models.embed import StaticEmbedder
    from worlddb_lite.models.rerank import OnnxCrossEncoder
    from worlddb_lite.write.loaders import load

    long_name = "x" * 5000
    with pytest.raises(WorldDBError):
        StaticEmbedder(long_name)
    with pytest.raises(WorldDBError):
        StaticEmbedder("org/" + long_name)  # shaped like a hub name
    with pytest.raises(WorldDBError):
        OnnxCrossEncoder(long_name)
    with tempfile.TemporaryDirectory() as folder:
        for source in (long_name, folder, "\ud800.jsonl"):
            with pytest.raises(WorldDBError):
                load(source, "jsonl")


# ---- the command line ----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def cli_store(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str]:
    """A store the CLI opens with its bundled model (built once, copied per example), and a memory's id."""
    path = str(tmp_path_factory.mktemp("cli-hostile") / "store.db")
    with WorldDB(path) as db:
        memory = db.write("Alice lives in Lisbon", scope="me", valid_at="2024-01-01")
        db.amend(memory, "Alice lives in Porto", valid_at="2024-05-01")
        alice = db.write("Alice", type="Entity", name="Alice", scope="me")
        db.link(memory, alice, "refers_to")
    return path, memory


# long-running (mcp serves stdin/stdout, browse HTTP) or replacing this process (shell execs sqlite3); their
# arguments are the MCP and browse tests' business
SERVERS = {"mcp", "browse", "shell"}
# argv never holds NUL; undecodable bytes arrive as lone surrogates (surrogateescape), so those stay in
cli_values = st.one_of(
    strings.filter(lambda s: "\x00" not in s),
    st.sampled_from(["0", "-1", "1", "99999999999999999999", "nan", "inf", "1e9", "-5", "0x10"]),
    st.sampled_from(["ID", "DEST", "FILE"]),
    times.filter(lambda t: isinstance(t, str) and "\x00" not in t).map(str),
)


def _subparsers() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(action.choices)


PARSERS = {name: p for name, p in _subparsers().items() if name not in SERVERS}


@st.composite
def argvs(draw: st.DrawFn) -> tuple[str, list[str], str]:
    """A command, its positionals (each hostile or not), some of its options with hostile values, and the
    store's path: mostly the store, sometimes a dataset file, a folder, a missing folder or any text."""
    command = draw(st.sampled_from(sorted(PARSERS)))
    store = draw(
        st.one_of(
            st.just("STORE"), st.just("STORE"), st.sampled_from(["FILE", ".", "missing/x.db", "DEST"]), cli_values
        )
    )
    actions = [a for a in PARSERS[command]._actions if not isinstance(a, argparse._HelpAction)]
    words: list[str] = []
    for action in actions:
        if action.option_strings or action.dest == "db":
            continue
        words.append(draw(st.one_of(cli_values, st.sampled_from(list(action.choices or ["ID"])))))
    for action in draw(st.lists(st.sampled_from([a for a in actions if a.option_strings]), max_size=4, unique=True)):
        words.append(action.option_strings[-1])
        if action.nargs != 0:
            words.append(draw(st.one_of(cli_values, st.sampled_from(list(action.choices or ["1"])))))
    if draw(st.integers(0, 9)) == 0:  # now and then a malformed command line (argparse exits 2)
        words.insert(draw(st.integers(0, len(words))), draw(cli_values))
    return command, words, store


def cli_file(folder: str) -> str:
    """A dataset file for ``ingest``: one good JSONL record and one with hostile text."""
    path = os.path.join(folder, "chat.jsonl")
    with open(path, "w", encoding="utf-8") as out:
        out.write('{"session": "1", "date": "2024-03-01", "speaker": "me", "text": "I live in Austin"}\n')
        out.write('{"session": "2", "date": "0000-99-01", "speaker": "me", "text": "\'; drop table node; --"}\n')
    return path


def run_cli(argv: list[str]) -> tuple[int, str]:
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            code = main(argv)
        except SystemExit as exc:  # argparse refusing a malformed command line
            code = 2 if exc.code is None else exc.code  # type: ignore[assignment]
            assert code != 0 or "-h" in argv or "--help" in argv, argv
            return -1, err.getvalue()
        except Exception as exc:  # noqa: BLE001 - the property under test
            raise AssertionError(f"worlddb {argv!r:.500} raised {type(exc).__name__}: {exc!r:.500}") from exc
    return code, err.getvalue()


def cli_attack(built: tuple[str, str], command: str, words: list[str], store: str = "STORE") -> None:
    with tempfile.TemporaryDirectory() as folder, contextlib.chdir(folder):  # `backup DB x` writes ./x
        path = os.path.join(folder, "store.db")
        shutil.copyfile(built[0], path)
        fill = {"ID": built[1][:12], "DEST": os.path.join(folder, "copy.db"), "FILE": cli_file(folder)}
        fill["STORE"] = path
        argv = [command, fill.get(store, store), *(fill.get(w, w) for w in words)]
        if command in ("reembed", "reindex"):  # they rewrite every vector: correct, and slow with the real model
            argv = [command, argv[1], "--model", os.path.join(folder, "no-model"), *argv[2:]]
        with WorldDB(path) as db:
            before = table_digest(db)
        code, err = run_cli(argv)
        event(f"{command}: exit {code}")
        assert "Traceback" not in err, err
        if code > 0:
            assert err.strip(), f"worlddb {argv!r}: exit {code} without a message"
        if code == 2:  # a refused command: nothing changed
            with WorldDB(path) as db:
                assert table_digest(db) == before, f"worlddb {argv!r} failed ({err.strip()}) but changed the store"


@settings(max_examples=100, deadline=None, derandomize=True, database=None, suppress_health_check=list(HealthCheck))
@given(argvs())
def test_cli_turns_hostile_arguments_into_messages(
    cli_store: tuple[str, str], argv: tuple[str, list[str], str]
) -> None:
    cli_attack(cli_store, *argv)


@pytest.mark.slow
@settings(max_examples=600, deadline=None, suppress_health_check=list(HealthCheck))
@given(argvs())
def test_cli_hostile_arguments_long(cli_store: tuple[str, str], argv: tuple[str, list[str], str]) -> None:
    cli_attack(cli_store, *argv)


# ---- no SQL built from input ---------------------------------------------------------------------

# Every formatted string in the package that reaches SQL, with what it interpolates. Each was read:
# the pieces are table or column names, fixed SQL fragments chosen in code, placeholder lists ("?, ?"),
# or integers the code computed; never text a caller passed. A new site fails the test until reviewed.
# Every formatted SQL site, as "function: expression" with how often it occurs there. Each one was
# read and interpolates only internal names, placeholders or numbers, never a caller's value.
REVIEWED_SQL_SITES: dict[str, Counter[str]] = {
    # module integer constants in pragmas
    "store/connection.py": Counter({"configure: WAL_CHECKPOINT_PAGES": 1, "install: SCHEMA_VERSION": 1}),
    "index/side_reader.py": Counter({"_connection: CACHE_KIB": 1}),
    # the version constant; a regex over schema.sql, for names the code lists
    # _to_v10 drops and recreates triggers named in a constant tuple
    "store/migrations.py": Counter(
        {"run: SCHEMA_VERSION": 1, "schema_statement: re.escape(name)": 2, "_to_v10: name": 1}
    ),
    # temp table names from a literal tuple; the CREATE text's PREFIX constant; _rows gets literal where/order/
    # source fragments from its three callers (values bound as ?1, ?2) and an int() limit
    "store/name_index.py": Counter(
        {
            "<module>: PREFIX": 1,
            "_build: name": 1,
            "_rows: _LIVE": 1,
            "_rows: int(limit)": 1,
            "_rows: order": 1,
            "_rows: source": 1,
            "_rows: where": 1,
        }
    ),
    # numbered placeholder lists (_marks, marks) sized by len(); "src"/"dst" picked by a bool; predicates and
    # filters written in this module; parameter numbers computed from counts
    "store/queries.py": Counter(
        {
            "bm25_sql: predicate(include_superseded)": 1,
            "bm25_sql: _marks(memberships, 7)": 1,
            "bm25_sql: predicate(include_superseded, 'e')": 1,
            "bm25_sql: within": 1,
            "descendants_sql: after_param": 1,
            "descendants_sql: limit_param": 1,
            "descendants_sql: marks": 1,
            "descendants_sql: predicate(include_superseded)": 1,
            "descendants_sql: predicate(include_superseded, 'e')": 1,
            "descendants_sql: type_param": 2,
            # the cursor's bound and the order: two fixed texts chosen by a bool; the tag is a bound parameter
            "descendants_sql: beyond": 1,
            "descendants_sql: 'desc' if newest_first else ''": 1,
            "descendants_sql: tag_param": 2,
            # the note's conditions: a constant text with the visibility predicate
            "same_note: same": 2,
            "inside_sql: _marks(memberships, 5)": 1,
            "inside_sql: predicate(include_superseded, 'e')": 1,
            "linked_sql: _marks(edge_types, 4)": 1,
            "linked_sql: _marks(types, after)": 1,
            "linked_sql: edge_filter": 1,
            "linked_sql: other": 4,
            "linked_sql: far_filter": 1,
            "linked_sql: after + (types or 0)": 1,
            "linked_sql: near": 2,
            "linked_sql: predicate(include_superseded)": 1,
            "linked_sql: predicate(include_superseded, 'e')": 1,
            "linked_sql: type_filter": 1,
            "membership_links: marks": 1,
            "membership_links: predicate(include_superseded, 'e')": 1,
            "visible_among: predicate(include_superseded)": 1,
            "cold_among: marks": 1,
        }
    ),
    # "?" placeholder lists sized by len() of module constants
    "consolidate/retention.py": Counter({"score_store: marks": 1}),
    # the hot-tier predicate, a module constant
    # HOT and the kept index's column list are constants of the module; the placeholders a fixed count
    "store/vector_table.py": Counter(
        {
            "<module>: HOT": 2,
            "hot_count: HOT": 1,
            "hot_count_since: HOT": 1,
            "segments: _SEGMENT_COLUMNS": 1,
            "segment_heads: columns": 1,
            "add_segment: _SEGMENT_COLUMNS": 1,
            "add_segment: ', '.join('?' * 16)": 1,
        }
    ),
    "write/reconciler.py": Counter({"decide_merge: pid": 1}),  # an error message that says "join" (not SQL): an int
    # table aliases ("s"/"e") and the kind/key derived from them; "src"/"dst" by a bool; predicates from
    # visible_sql/believed_sql; "?" placeholder lists
    "store/rows.py": Counter(
        {
            "believed_sql: alias": 3,
            "hop: edge_pred": 1,
            "hop: far": 1,
            "hop: near": 1,
            "hop: node_pred": 1,
            "load_nodes: marks": 1,
            "meta_values: marks": 1,
            "to_nodes: marks": 2,
            "visible_sql: a": 8,
            "visible_sql: earlier": 1,
            "visible_sql: key": 1,
            "visible_sql: kind": 1,
        }
    ),
}


SQL_WORDS = re.compile(
    r"\b(select|insert\s+(or\s+\w+\s+)?into|update\s+\w+\s+set|delete\s+from|pragma|create\s+(temp\s+)?"
    r"(table|index|view|trigger|virtual)|drop\s+(table|index|view|trigger)|where|join|values\s*\(|order\s+by|"
    r"is\s+(not\s+)?null|json_each)\b|\b(coalesce|in)\s*\(|\?\d",
    re.IGNORECASE,
)


def sql_sites(source: str) -> Counter[str]:
    """Every expression interpolated into SQL text by an f-string, ``%`` or ``.format``, as
    ``"function: expression"`` with how often it occurs there (so a new site fails the review even
    where its expression reuses a reviewed name)."""
    pieces: Counter[str] = Counter()
    tree = ast.parse(source)
    owner = {
        child: getattr(node, "name", "<module>")
        for node in ast.walk(tree)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Module))
        for child in ast.walk(node)
    }
    for node in ast.walk(tree):
        where = owner.get(node, "<module>")
        found: list[ast.AST] = []
        if isinstance(node, ast.JoinedStr):
            literal = " ".join(str(v.value) for v in node.values if isinstance(v, ast.Constant))
            if SQL_WORDS.search(literal):
                found = [v.value for v in node.values if isinstance(v, ast.FormattedValue)]
        elif (
            isinstance(node, ast.BinOp)
            and isinstance(node.op, ast.Mod)
            and isinstance(node.left, ast.Constant)
            and isinstance(node.left.value, str)
            and SQL_WORDS.search(node.left.value)
        ):
            found = [node.right]
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "format"
            and isinstance(node.func.value, ast.Constant)
            and isinstance(node.func.value.value, str)
            and SQL_WORDS.search(node.func.value.value)
        ):
            found = [*node.args, *node.keywords]
        pieces.update(f"{where}: {ast.get_source_segment(source, piece) or '?'}" for piece in found)
    return pieces


def formatted_sql_sites() -> dict[str, Counter[str]]:
    """{module: interpolated expressions by function} over every module of the package."""
    root = Path(worlddb_lite.__file__).parent
    found = {str(path.relative_to(root)): sql_sites(path.read_text()) for path in sorted(root.rglob("*.py"))}
    return {module: pieces for module, pieces in found.items() if pieces}


def test_no_sql_is_formatted_from_input() -> None:
    found = formatted_sql_sites()
    new = {m: sorted((p - REVIEWED_SQL_SITES.get(m, Counter())).elements()) for m, p in found.items()}
    new = {m: p for m, p in new.items() if p}
    assert not new, f"SQL built by string formatting that nobody reviewed (add it here once checked): {new}"


def test_the_scan_sees_formatted_sql() -> None:
    """The scanner itself: SQL built by an f-string, ``%`` or ``.format`` is found; messages are not SQL."""
    source = (
        'a = f"select {col} from t where x = ?1"\n'
        'b = "delete from %s" % table\n'
        'c = "update node set x = {}".format(name)\n'
        'd = f"no node has id {ref}; check it"\n'
        'e = conn.execute(f"drop table if exists temp.{other}")\n'
        'f = f"WhereConnected wants an edge type, got {value}"\n'
    )
    assert sql_sites(source) == Counter(
        {"<module>: col": 1, "<module>: table": 1, "<module>: name": 1, "<module>: other": 1}
    )
    # a second site reusing a reviewed name in the same function still counts
    again = 'def f(col):\n    a = f"select {col} from t"\n    b = f"delete from t where {col}"\n'
    assert sql_sites(again) == Counter({"f: col": 2})
