"""Scopes with a kind (user, agent, app, run) and one memory several scopes hold through contains edges."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import FakeClock, FakeEmbedder, table_digest
from worlddb_lite import InvalidInput, NotFound, ScopeRef, WorldDB
from worlddb_lite.checks import MAX_SCOPES, scope_ref
from worlddb_lite.cli import main
from worlddb_lite.text.extract import RuleExtractor

ANA = "56a2dc60444c459bc467681ed10d56158ca11ff75339c4d720d37cf3afdea31a"  # "ana" before kinds existed


def contents(db: WorldDB, query: str, scope: object) -> list[str]:
    return [h.node.content or "" for h in db.recall(query, scope=scope, k=10).hits]  # type: ignore[arg-type]


def test_a_scope_is_named_with_its_kind_and_a_bare_name_is_a_users() -> None:
    assert scope_ref("ana") == scope_ref("user:ana") == ScopeRef("user", "ana")
    assert scope_ref("agent:planner") == ScopeRef("agent", "planner")
    assert scope_ref("team:blue") == ScopeRef("user", "team:blue")  # not a kind: part of a user's name
    for ref in (ScopeRef("user", "run:1"), ScopeRef("run", "1"), ScopeRef("user", "ana"), ScopeRef("app", "a:b")):
        assert scope_ref(str(ref)) == ref  # the spelling a listing prints names the scope again
    for bad in ("run:", "agent:  ", "", None, 7):
        with pytest.raises(InvalidInput):
            scope_ref(bad)


def test_scope_ids_depend_on_kind_and_name_alone(tmp_path: Path) -> None:
    first = WorldDB(str(tmp_path / "a.db"), embedder=FakeEmbedder(), clock=FakeClock())
    second = WorldDB(str(tmp_path / "b.db"), embedder=FakeEmbedder(), clock=FakeClock())
    try:
        first.write("something first", scope="other")
        names = ["ana", "agent:planner", "app:notes", "run:42", "user:run:42"]
        ids = [first.scope(name) for name in names]
        assert ids == [second.scope(name) for name in reversed(names)][::-1]  # any store, any order
        assert len(set(ids)) == len(ids) and ids[0] == ANA == first.scope("user:ana")  # old scopes keep their ids
        kinds = {(s.name, s.props.get("kind", "user")) for s in first.scopes()}
        assert kinds >= {("ana", "user"), ("planner", "agent"), ("notes", "app"), ("42", "run"), ("run:42", "user")}
        assert [s.name for s in first.scopes(kind="run")] == ["42"]
        with pytest.raises(InvalidInput, match="kind must be one of"):
            first.scopes(kind="robot")
    finally:
        first.close()
        second.close()


def test_one_memory_several_scopes_hold(db: WorldDB) -> None:
    db.write("the planner keeps answers short", scope="agent:planner")
    note = db.write("Rita the sister visits in June", scope=["ana", "agent:planner", "run:7", "ana"])
    assert db.read(note).parent == db.scope("ana")  # the first owns it
    assert len(db.nodes(type="Memory")) == 2  # one copy, not one per scope
    for scope in ("ana", "agent:planner", "run:7", ["ana", "run:7"]):
        assert "Rita the sister visits in June" in contents(db, "Rita sister visits", scope)
    assert "the planner keeps answers short" not in contents(db, "planner answers short", "run:7")
    both = contents(db, "planner answers short Rita", ["run:7", "agent:planner"])
    assert {"the planner keeps answers short", "Rita the sister visits in June"} <= set(both)
    assert [n.id for n in db.list_memories("run:7").nodes] == [note]
    assert [n.id for n, _ in db.search("Rita", scope=["agent:planner"])] == [note]
    with pytest.raises(NotFound):
        db.recall("Rita", scope=["ana", "run:8"])  # every scope named must exist: a typo is not a silent gap


def test_a_memory_in_several_scopes_is_there_from_its_valid_time(db: WorldDB) -> None:
    note = db.write("the lease ends in March", scope=["ana", "app:home"], valid_at="2024-01-05")
    assert [h.node.id for h in db.recall("lease", scope="app:home", as_of="2024-02-01").hits] == [note]


def test_an_amended_memory_stays_in_every_scope_that_held_it(db: WorldDB) -> None:
    old = db.write("the gym is open until 9", scope=["ana", "run:3"])
    db.amend(old, "the gym is open until 10")
    assert contents(db, "gym open until", "run:3") == ["the gym is open until 10"]
    assert contents(db, "gym open until", "ana") == ["the gym is open until 10"]


def test_retiring_a_scope_that_shares_a_memory_leaves_it_to_its_owner(db: WorldDB) -> None:
    shared = db.write("the door code is 4411", scope=["ana", "run:9"])
    own = db.write("run nine scratch note", scope="run:9")
    assert db.retire_all("run:9") == [own]
    assert contents(db, "door code", "run:9") == [] and db.list_memories("run:9").nodes == ()
    assert contents(db, "door code", "ana") == ["the door code is 4411"] and db.read(shared).is_current
    db.retire_all("ana")
    assert not db.read(shared).is_current


def test_purging_a_scope_that_shares_a_memory_leaves_it_to_its_owner(db: WorldDB) -> None:
    shared = db.write("the door code is 4411", scope=["ana", "run:9"])
    db.purge_scope("run:9")
    assert db.read(shared).content == "the door code is 4411"
    assert [s.name for s in db.scopes(kind="run")] == []
    db.purge_scope("ana")
    assert db.read(shared).purged


def test_a_note_speaks_for_a_user_or_an_agent_not_for_a_run_by_its_name(tmp_path: Path) -> None:
    db = WorldDB(str(tmp_path / "m.db"), embedder=FakeEmbedder(), clock=FakeClock())
    try:
        db.write("I moved to Porto", scope="run:5", extractor=RuleExtractor())
        db.write("I moved to Lisbon", scope="agent:bo", extractor=RuleExtractor())
        facts = sorted(n.content or "" for n in db.nodes(type="Fact"))
        assert facts == ["bo lives in: Lisbon", "user lives in: Porto"]  # a run is nobody: "I" is the extractor's user
    finally:
        db.close()


def test_bad_scopes_are_refused_and_write_nothing(db: WorldDB) -> None:
    db.write("kept", scope="ana")
    before = table_digest(db)
    for scope, reason in [
        ([], "1 to 100 scopes"),
        (["ana", ""], "scope is empty"),
        (["ana", "run:"], "names a kind but no scope"),
        ([f"run:{i}" for i in range(MAX_SCOPES + 1)], "1 to 100 scopes"),
        ({"ana": 1}, "a scope's name or a list"),
    ]:
        with pytest.raises(InvalidInput, match=reason):
            db.write("x", scope=scope)  # type: ignore[arg-type]
        assert table_digest(db) == before, scope
    with pytest.raises(InvalidInput, match="several scopes or a world"):
        db.write("x", scope=["ana", "run:1"], world=db.scope("ana"))
    assert table_digest(db) == before


def test_the_cli_writes_to_several_scopes_and_lists_them_by_kind(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = str(tmp_path / "cli.db")
    assert main(["write", path, "the boiler was serviced in May", "--scope", "ana", "--scope", "agent:home"]) == 0
    note = capsys.readouterr().out.strip()
    assert main(["recall", path, "boiler serviced", "--scope", "agent:home", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["hits"][0]["node"]["id"] == note
    assert main(["scopes", path, "--kind", "agent", "--json"]) == 0
    lines = capsys.readouterr().out.splitlines()  # JSON lines: one scope a line
    assert [(s["name"], s["kind"]) for s in map(json.loads, lines)] == [("agent:home", "agent")]
    assert main(["scopes", path]) == 0
    assert "agent  agent:home" in capsys.readouterr().out
    assert main(["search", path, "boiler", "--scope", "ana", "--scope", "agent:home", "--json"]) == 0
    assert [json.loads(line)["node"]["id"] for line in capsys.readouterr().out.splitlines()] == [note]


def test_writing_a_shared_memory_again_after_one_scope_let_it_go(db: WorldDB) -> None:
    # review: the contains edge retire_all closed was written again with the same valid time, and refused
    note = db.write("the key is under the pot", scope=["ana", "run:7"], valid_at="2024-01-01")
    db.retire_all("run:7")
    assert contents(db, "key pot", "run:7") == []
    assert db.write("the key is under the pot", scope=["ana", "run:7"], valid_at="2024-01-01") == note
    assert contents(db, "key pot", "run:7") == ["the key is under the pot"]  # held again, from now on
