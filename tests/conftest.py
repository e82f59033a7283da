"""Shared fixtures: a deterministic fake embedder, a fake clock and a store over file and memory.

Only the CLI tests (``worlddb`` opens stores with the bundled model) and one test in test_embed.py
load the real model.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import importlib.util
import json
import os
import re
import signal
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest

from worlddb_lite import EdgeRefused, StaticEmbedder, WorldDB
from worlddb_lite.cli import main
from worlddb_lite.edges import BaseEdgeType, EdgeDraft, QueryRules
from worlddb_lite.models.embed import TokenVectors
from worlddb_lite.text.dates import format_time

FAKE_DIM = 32
_WORD = re.compile(r"\w+")

# Tables the brief names explicitly; the helpers below also cover any table the schema adds later.
NAMED_TABLES = (
    "node",
    "node_state",
    "edge",
    "merkle",
    "root_log",
    "merge_proposal",
    "alias",
    "node_fts",
    "node_vec",
)
INDEX_TABLES = ("node_fts", "node_vec")


class FakeEmbedder:
    """Feature hashing of lower-case words into 32 dimensions, L2-normalised. Deterministic."""

    model_id = "fake-hash-32"
    dim = FAKE_DIM

    def __init__(self) -> None:
        self.calls = 0

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        self.calls += 1
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            for word in _WORD.findall(text.lower()):
                digest = hashlib.blake2b(word.encode("utf-8"), digest_size=8).digest()
                slot = int.from_bytes(digest[:4], "little") % self.dim
                sign = 1.0 if digest[4] & 1 else -1.0
                out[row, slot] += sign
            norm = float(np.linalg.norm(out[row]))
            if norm == 0.0:
                out[row, 0] = 1.0  # text without words still gets a unit vector
            else:
                out[row] /= norm
        return out


class Mentors(BaseEdgeType):
    """A custom edge type whose handler refuses anything but Entity -> Entity, and which pierces containment."""

    name = "mentors"

    def on_insert(self, edge: EdgeDraft, ctx: Any) -> list[Any]:
        super().on_insert(edge, ctx)
        if edge.src.type != "Entity" or edge.dst.type != "Entity":
            raise EdgeRefused("mentors links two entities")
        return []

    def on_query_rewrite(self, rules: QueryRules) -> QueryRules:
        return rules.with_(pierce=rules.pierce | {self.name})


class OtherFakeEmbedder(FakeEmbedder):
    """Same shape, another model id: opening a FakeEmbedder store with it must fail."""

    model_id = "other-fake-32"


START = dt.datetime(2025, 1, 1, tzinfo=dt.UTC)  # after every fixed date the tests use


class FakeClock:
    """A clock that moves forward by a fixed step on every call (canonical time text)."""

    def __init__(self, start: dt.datetime = START, step: dt.timedelta = dt.timedelta(seconds=1)) -> None:
        self.now = start
        self.step = step
        self.calls = 0

    def __call__(self) -> str:
        self.now += self.step
        self.calls += 1
        return format_time(self.now)

    def peek(self) -> str:
        """The last time handed out (without advancing)."""
        return format_time(self.now)

    def advance(self, delta: dt.timedelta) -> None:
        self.now += delta


def open_device(path: str | Path, offset_s: int = 0) -> WorldDB:
    """A store on a device of its own: a fake clock started ``offset_s`` seconds after START (replica tests)."""
    return WorldDB(str(path), embedder=FakeEmbedder(), clock=FakeClock(start=START + dt.timedelta(seconds=offset_s)))


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture(params=["file", "memory"])
def db_path(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    return str(tmp_path / "store.db") if request.param == "file" else ":memory:"


@pytest.fixture
def db(db_path: str, clock: FakeClock) -> Iterator[WorldDB]:
    store = WorldDB(db_path, embedder=FakeEmbedder(), clock=clock)
    try:
        yield store
    finally:
        store.close()


@pytest.fixture(scope="session")
def model() -> StaticEmbedder:
    """The bundled static model (loaded once per process whichever instance asks)."""
    return StaticEmbedder()


@pytest.fixture(scope="session")
def tokens(model: StaticEmbedder) -> TokenVectors:
    """The bundled model's token table."""
    return model.token_vectors()


@pytest.fixture
def file_db_path(tmp_path: Path) -> str:
    return str(tmp_path / "store.db")


@pytest.fixture
def open_file_db(file_db_path: str) -> Callable[..., WorldDB]:
    """Open (or reopen) the file store with the fake embedder."""

    def opener(**kwargs: Any) -> WorldDB:
        kwargs.setdefault("embedder", FakeEmbedder())
        return WorldDB(file_db_path, **kwargs)

    return opener


def schema_tables(db: WorldDB) -> list[str]:
    """Every ordinary table of the store (not FTS5 shadow tables), plus the two index tables."""
    names = [
        r[0]
        for r in db.sql(
            "select name from sqlite_schema where type = 'table' and name not like 'sqlite_%' "
            "and name not like 'node_fts%' and name not like 'node_vec%' order by name"
        )
    ]
    return [*names, *INDEX_TABLES]


def table_digest(db: WorldDB) -> dict[str, Any]:
    """Row counts and content digests of every table, plus the store's root."""
    out: dict[str, Any] = {"root": db.root()}
    for table in schema_tables(db):
        if table == "node_fts":
            rows = db.sql("select rowid, name, content, context from node_fts order by rowid")
        elif table == "node_vec":
            rows = db.sql("select * from node_vec order by nid")
        else:
            rows = sorted(db.sql(f"select * from {table}"), key=repr)
        out[table] = (len(rows), hashlib.sha256(repr(rows).encode()).hexdigest())
    return out


def nid_of(db: WorldDB, ref: str) -> int:
    """The row number (``nid``) of the node whose full hex id is ``ref``, read with ``WorldDB.sql``."""
    return int(db.sql("select nid from node where lower(hex(id)) = ?", (ref.lower(),))[0][0])


def meta_of(db: WorldDB, key: str) -> str | None:
    """The store's ``meta`` value for ``key`` (None when there is none), read with ``WorldDB.sql``."""
    rows = db.sql("select value from meta where key = ?", (key,))
    return None if not rows else str(rows[0][0])


def row_counts(db: WorldDB) -> dict[str, int]:
    """Row count of every table (the brief's list and any other table of the schema)."""
    return {table: int(db.sql(f"select count(*) from {table}")[0][0]) for table in schema_tables(db)}


def child_exit_code(pid: int, what: str, *, seconds: float = 60) -> int:
    """The exit code of forked child ``pid``; a child still running after ``seconds`` is killed and fails the test."""
    deadline = time.monotonic() + seconds
    while (done := os.waitpid(pid, os.WNOHANG))[0] == 0 and time.monotonic() < deadline:
        time.sleep(0.02)
    if done[0] == 0:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        pytest.fail(f"the forked child hung {what}")
    return os.waitstatus_to_exitcode(done[1])


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """The CLI run in-process: its exit code, stdout and stderr."""
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def run_json(capsys: pytest.CaptureFixture[str], *argv: str) -> Any:
    """The CLI's ``--json`` answer, after checking it exited 0."""
    code, out, err = run(capsys, *argv, "--json")
    assert code == 0, err
    return json.loads(out)


BENCH = Path(__file__).resolve().parent.parent / "bench"


def bench_module(name: str) -> ModuleType:
    """``bench/<name>.py`` loaded as module ``bench_<name>``, with ``bench/`` importable for its own imports.

    Registered before it runs: dataclasses look their module up while the class is built.
    """
    if str(BENCH) not in sys.path:
        sys.path.insert(0, str(BENCH))
    spec = importlib.util.spec_from_file_location(f"bench_{name}", BENCH / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[f"bench_{name}"] = module
    spec.loader.exec_module(module)
    return module
