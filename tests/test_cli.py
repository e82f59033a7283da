"""cli.py: every command has help, --json parses, errors are one line with exit code 2.

The CLI opens stores with the bundled static model (it cannot take a fake), so the commands that embed
text (write, amend) load it; the store most tests read is built once per module.
"""

from __future__ import annotations

import io
import json
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

from worlddb_lite import WorldDB
from worlddb_lite.cli import COMMANDS, build_parser, main
from worlddb_lite.store import connection

from .conftest import run, run_json

LISTINGS = {"history", "search", "merges", "scopes", "list"}  # their --json is JSON lines: one object a line


def run_jsonl(capsys: pytest.CaptureFixture[str], *argv: str) -> list[Any]:
    """A listing's ``--json`` answer, one JSON object a line, after checking it exited 0."""
    code, out, err = run(capsys, *argv, "--json")
    assert code == 0, err
    return [json.loads(line) for line in out.splitlines()]


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """A store with the bundled model: two memories, one amended, a contradiction and a pending merge."""
    path = tmp_path_factory.mktemp("cli") / "store.db"
    with WorldDB(path) as db:  # one model load for the whole module
        a = db.write("I live in Lisbon", scope="me", valid_at="2024-01-01")
        b = db.amend(a, "I moved to Porto in May", valid_at="2024-05-01")
        c = db.write("I live by the sea", scope="me", valid_at="2024-01-01")
        bob = db.write("Bob", type="Entity", name="Bob", scope="me", valid_at="2024-01-01")
        rob = db.write("Robert", type="Entity", name="Robert", scope="me", valid_at="2024-01-01")
        db.link(b, c, "contradicts")
        pid = db.link(bob, rob, "same_as").pid  # type: ignore[union-attr]
    return {"path": str(path), "a": a, "b": b, "c": c, "bob": bob, "rob": rob, "pid": str(pid)}


@pytest.fixture
def store(built: dict[str, str], tmp_path: Path) -> dict[str, str]:
    """A private copy of the module's store (the file is checkpointed and closed)."""
    copy = tmp_path / "copy.db"
    shutil.copyfile(built["path"], copy)
    return {**built, "path": str(copy)}


# ---- help --------------------------------------------------------------------------------------


def test_every_command_has_help_text(capsys: pytest.CaptureFixture[str]) -> None:
    assert set(COMMANDS) >= {
        "init",
        "write",
        "read",
        "amend",
        "retire",
        "history",
        "link",
        "search",
        "merges",
        "merge",
        "verify",
        "stats",
    }
    for name, (help_text, _handler, _arguments) in COMMANDS.items():
        assert help_text and len(help_text) > 10, f"{name} has no help text"
        with pytest.raises(SystemExit) as info:
            main([name, "--help"])
        assert info.value.code == 0
        out = capsys.readouterr().out
        assert help_text in " ".join(out.split()), name
        assert "--json" in out
    with pytest.raises(SystemExit) as info:
        main(["--help"])
    assert info.value.code == 0
    top = capsys.readouterr().out
    assert all(name in top for name in COMMANDS)


def test_every_argument_has_help_text() -> None:
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    for name, command in sub.choices.items():  # type: ignore[union-attr]
        for action in command._actions:
            assert action.help, f"{name}: argument {action.dest} has no help"


def test_no_arguments_print_the_help(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys)
    assert code == 0 and not err
    assert out.startswith("usage: worlddb") and "recall" in out and "WORLDDB_STORE" in out


def test_options_come_before_or_after_the_command_and_have_short_forms(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = str(tmp_path / "o.db")
    assert run(capsys, "init", db)[0] == 0
    code, out, _ = run(capsys, "--json", "stats", db)
    assert code == 0 and json.loads(out)["path"] == db
    code, out, _ = run(capsys, "-j", "write", db, "Ana likes green tea", "-s", "ana")
    assert code == 0 and len(json.loads(out)) == 64
    code, out, _ = run(capsys, "recall", db, "what does Ana like?", "-s", "ana", "-k", "1", "-j")
    assert code == 0 and json.loads(out)["hits"][0]["node"]["content"] == "Ana likes green tea"
    code, out, _ = run(capsys, "stats", db)  # text without --json, before or after
    assert code == 0 and out.startswith("path: ")


def test_the_store_and_scope_come_from_the_environment_when_left_out(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    db = str(tmp_path / "e.db")
    assert run(capsys, "init", db)[0] == 0
    monkeypatch.setenv("WORLDDB_STORE", db)
    monkeypatch.setenv("WORLDDB_SCOPE", "ana")
    assert run(capsys, "write", "Ana's dentist is Dr Sato")[0] == 0
    assert run(capsys, "write", "Bo's dentist is Dr Ruiz", "--scope", "bo")[0] == 0  # given: it holds
    listed = run_jsonl(capsys, "list")
    assert [n["content"] for n in listed if n["type"] == "Memory"] == ["Ana's dentist is Dr Sato"]
    found = run_json(capsys, "recall", "who is the dentist?")
    assert {hit["node"]["content"] for hit in found["hits"]} == {"Ana's dentist is Dr Sato"}
    other = str(tmp_path / "other.db")
    assert run(capsys, "init", other)[0] == 0 and run_json(capsys, "stats", other)["path"] == other  # given: it wins
    monkeypatch.delenv("WORLDDB_STORE")
    with pytest.raises(SystemExit) as info:
        main(["stats"])
    assert info.value.code == 2
    assert "give DB or set WORLDDB_STORE" in capsys.readouterr().err


# ---- reading -----------------------------------------------------------------------------------


def test_read_by_an_8_character_prefix(store: dict[str, str], capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "read", store["path"], store["b"][:8])
    assert code == 0, err
    assert out.startswith(store["b"]) and "I moved to Porto in May" in out
    assert f"contradicted by {store['c']}" in out
    node = run_json(capsys, "read", store["path"], store["b"][:8])
    assert node["id"] == store["b"] and node["content"] == "I moved to Porto in May"  # type: ignore[index]
    old = run_json(capsys, "read", store["path"], store["a"][:8])
    assert old["invalid_at"] == "2024-05-01T00:00:00.000000Z"  # type: ignore[index]
    assert old["superseded_by"] == [store["b"]]  # type: ignore[index]


def test_read_as_of(store: dict[str, str], capsys: pytest.CaptureFixture[str]) -> None:
    assert run_json(capsys, "read", store["path"], store["a"], "--as-of", "2024-02-01")["id"] == store["a"]  # type: ignore[index]
    code, _, err = run(capsys, "read", store["path"], store["a"], "--as-of", "2024-06-01")
    assert code == 2 and err.count("\n") == 1


@pytest.mark.parametrize(
    "argv",
    [
        ["stats"],
        ["verify"],
        ["history", "{b}"],
        ["search", "Porto"],
        ["merges"],
        ["merges", "--status", "all"],
    ],
    ids=["stats", "verify", "history", "search", "merges", "merges-all"],
)
def test_json_output_parses(store: dict[str, str], capsys: pytest.CaptureFixture[str], argv: list[str]) -> None:
    args = [argv[0], store["path"], *[a.format(**store) for a in argv[1:]]]
    data = run_jsonl(capsys, *args) if argv[0] in LISTINGS else run_json(capsys, *args)
    assert data is not None
    code, out, err = run(capsys, *args)  # and the human form prints something
    assert code == 0, err
    assert out.strip() or argv[0] == "merges"


def test_json_shapes(store: dict[str, str], capsys: pytest.CaptureFixture[str]) -> None:
    stats = run_json(capsys, "stats", store["path"])
    assert stats["embedder"] == "minilm-l6-static-256" and stats["dim"] == 256  # type: ignore[index]
    assert stats["open_contradictions"] == 1 and stats["pending_merges"] == 1  # type: ignore[index]
    history = run_jsonl(capsys, "history", store["path"], store["b"])
    assert [n["id"] for n in history] == [store["a"], store["b"]]
    hits = run_jsonl(capsys, "search", store["path"], "Porto")
    assert store["b"] in [h["node"]["id"] for h in hits]  # beside the fact learned from it
    assert isinstance(hits[0]["score"], float)
    merges = run_jsonl(capsys, "merges", store["path"])
    assert [m["pid"] for m in merges] == [int(store["pid"])] and merges[0]["status"] == "pending"
    report = run_json(capsys, "verify", store["path"])
    assert report["violations"] == [] and report["checked"]["nodes"] > 0  # type: ignore[index]


# ---- verify ------------------------------------------------------------------------------------


def test_verify_exits_0_on_a_healthy_store(store: dict[str, str], capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "verify", store["path"])
    assert code == 0
    assert out.startswith("ok: checked")
    assert "checking" in err  # progress goes to stderr
    assert "\nunchecked (no other row witnesses them; --json says why): " in out  # said, not left out
    assert "alias" in out.splitlines()[-1]


@pytest.mark.parametrize("tamper", ["fts", "root", "trigger"])
def test_verify_exits_1_on_a_tampered_store(
    store: dict[str, str], capsys: pytest.CaptureFixture[str], tamper: str
) -> None:
    conn = connection.connect(store["path"])
    with conn:
        if tamper == "fts":
            conn.execute(  # node_fts is contentless: a row goes by 'delete' with the values it was indexed with
                "insert into node_fts (node_fts, rowid, name, content, context) select 'delete', nid, name, content, "
                "context from node_text where nid = (select max(nid) from node_text)"
            )
        elif tamper == "root":
            conn.execute("insert into reconciler_session (holder) values ('reconciler')")
            conn.execute("update node_state set root = zeroblob(32) where nid = 1")
            conn.execute("delete from reconciler_session")
        else:
            conn.execute("drop trigger edge_delete_guard")
    conn.close()
    code, out, _ = run(capsys, "verify", store["path"])
    assert code == 1
    assert "VIOLATION" in out and "violation(s)" in out
    code, out, _ = run(capsys, "verify", store["path"], "--json")
    assert code == 1 and json.loads(out)["violations"]


# ---- writing -----------------------------------------------------------------------------------


def test_init_write_amend_retire_link_merge(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = str(tmp_path / "new.db")
    init = run_json(capsys, "init", path)
    assert init["embedder"] == "minilm-l6-static-256" and len(init["root"]) == 64  # type: ignore[index]
    code, out, err = run(capsys, "write", path, "I moved to Porto in May", "--scope", "me", "--valid-at", "2024-05-01")
    assert code == 0, err
    first = out.strip()
    assert len(first) == 64 and int(first, 16) >= 0
    second = run_json(capsys, "amend", path, first[:8], "I moved to Braga in June", "--valid-at", "2024-06-01")
    assert isinstance(second, str) and second != first
    retired = run_json(capsys, "retire", path, second[:10], "--at", "2024-12-01")
    assert retired["retired"] is True and retired["invalid_at"] == "2024-12-01T00:00:00.000000Z"  # type: ignore[index]
    edge = run_json(capsys, "link", path, second, first, "contradicts")
    assert edge["type"] == "contradicts"  # type: ignore[index]
    proposal = run_json(capsys, "link", path, first, second, "same_as")
    assert proposal["status"] == "pending"  # type: ignore[index]
    decided = run_json(capsys, "merge", path, str(proposal["pid"]), "reject")  # type: ignore[index]
    assert decided["status"] == "rejected"  # type: ignore[index]
    code, _, _ = run(capsys, "verify", path)
    assert code == 0


# ---- errors ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("argv", "phrase"),
    [
        (["read", "{path}", "zz"], "not a node id"),
        (["read", "{path}", "xyz"], "not a node id"),
        (["read", "{path}", "1234567"], "too short"),
        (["read", "{path}", "00000000"], "no node id starts with"),
        (["link", "{path}", "{a}", "{c}", "befriends"], "unknown edge type"),
        (["link", "{path}", "{bob}", "{bob}", "same_as"], "itself"),
        (["retire", "{path}", "{c}", "--at", "2023-01-01"], "before it starts"),
        (["retire", "{path}", "{c}", "--at", "someday"], "cannot read"),
        (["amend", "{path}", "{a}", "again"], "no longer current"),
        (["merge", "{path}", "999", "accept"], "no merge proposal"),
        (["read", "{random}", "{a}"], "not a SQLite database"),
    ],
    ids=[
        "bad-hex",
        "short-non-hex",
        "short-prefix",
        "unknown-prefix",
        "unknown-type",
        "self-loop",
        "interval",
        "bad-time",
        "not-current",
        "unknown-proposal",
        "not-a-store",
    ],
)
def test_errors_exit_2_with_one_line(
    store: dict[str, str], tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], phrase: str
) -> None:
    random_file = tmp_path / "random.bin"
    random_file.write_bytes(b"\x8a" * 4096)
    args = [a.format(**store, random=str(random_file)) for a in argv]
    before = Path(store["path"]).read_bytes()
    code, out, err = run(capsys, *args)
    assert code == 2
    assert out == ""
    assert err.count("\n") == 1 and err.startswith(f"worlddb {argv[0]}: "), err
    assert phrase in err, err
    assert Path(store["path"]).read_bytes() == before  # a refused command changes nothing


def test_a_store_with_a_newer_schema_is_refused(store: dict[str, str], capsys: pytest.CaptureFixture[str]) -> None:
    import apsw

    conn = apsw.Connection(store["path"])
    conn.execute("pragma user_version = 99")
    conn.close()
    code, _, err = run(capsys, "stats", store["path"])
    assert code == 2 and "upgrade" in err and err.count("\n") == 1


def test_verify_on_a_damaged_store_exits_cleanly(store: dict[str, str], capsys: pytest.CaptureFixture[str]) -> None:
    # regression: `worlddb verify` died with a raw apsw.CorruptError traceback
    from .test_verify import _damage

    _damage(store["path"])
    code, _, err = run(capsys, "verify", store["path"])
    assert code in (1, 2)
    if code == 2:
        assert err.count("\n") == 1


def test_a_reader_that_stops_early_ends_the_command_quietly(tmp_path: Path) -> None:
    """`worlddb recall ... | head -1`: no BrokenPipeError traceback, whatever the output's length."""
    import subprocess
    import sys

    store = str(tmp_path / "pipe.db")
    with WorldDB(store) as db:  # more output than a pipe holds (64 KiB), so the writer meets the closed end
        db.write_many(
            [{"text": f"memory {i} about the lake house and its garden " * 60, "scope": "me"} for i in range(40)]
        )
    code = (
        "import sys; from worlddb_lite.cli import main; "
        f"sys.exit(main(['recall', {store!r}, 'lake house garden', '--scope', 'me', '--k', '40']))"
    )
    done = subprocess.run(
        f"{sys.executable} -c {code!r} | head -c 10", shell=True, capture_output=True, text=True, timeout=120
    )
    assert "Traceback" not in done.stderr and "BrokenPipeError" not in done.stderr, done.stderr
    assert len(done.stdout) == 10


# ---- the scope surface: list, scopes, search within a scope ------------------------------------


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    import worlddb_lite

    with pytest.raises(SystemExit) as info:
        main(["--version"])
    assert info.value.code == 0 and capsys.readouterr().out.strip() == f"worlddb {worlddb_lite.__version__}"


def test_every_option_that_takes_a_value_names_its_default() -> None:
    import argparse

    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    for name, command in sub.choices.items():  # type: ignore[union-attr]
        for action in command._actions:
            if not action.option_strings or action.nargs == 0 or action.required:
                continue  # positionals, flags (off unless given) and required options have no default to name
            kinds = (argparse._StoreAction, argparse._AppendAction)  # a value, or one per repeat
            assert isinstance(action, kinds) and "default" in (action.help or ""), (name, action.dest)


def test_list_pages_through_a_scope(store: dict[str, str], capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "list", store["path"], "--scope", "me", "--limit", "2")
    assert code == 0 and len(out.splitlines()) == 2 and "--cursor" in err
    cursor = err.split("--cursor", 1)[1].split()[0]
    code, out, err = run(capsys, "list", store["path"], "--scope", "me", "--limit", "2", "--json")
    first = [json.loads(line) for line in out.splitlines()]  # JSON lines; the cursor on stderr, as in text
    assert code == 0 and len(first) == 2 and err.split("--cursor", 1)[1].split()[0] == cursor
    code, out, err = run(capsys, "list", store["path"], "--scope", "me", "--limit", "1000", "--cursor", cursor, "-j")
    rest = [json.loads(line) for line in out.splitlines()]
    assert "--cursor" not in err  # the last page
    every = run_jsonl(capsys, "list", store["path"], "--scope", "me", "--limit", "1000")
    assert [n["id"] for n in first + rest] == [n["id"] for n in every]
    notes = run_jsonl(capsys, "list", store["path"], "--scope", "me", "--type", "Memory")
    assert store["a"] not in [n["id"] for n in notes]  # superseded: only with --retired
    closed = run_jsonl(capsys, "list", store["path"], "--scope", "me", "--type", "Memory", "--retired")
    assert store["a"] in [n["id"] for n in closed]
    code, out, _ = run(capsys, "list", store["path"], "--scope", "me", "--type", "Memory", "--retired")
    assert code == 0 and "I live in Lisbon" in out and "(closed)" in out


def test_scopes_and_search_within_a_scope(store: dict[str, str], capsys: pytest.CaptureFixture[str]) -> None:
    scopes = run_jsonl(capsys, "scopes", store["path"])
    assert [s["name"] for s in scopes] == ["me"]
    code, out, _ = run(capsys, "scopes", store["path"])
    assert code == 0 and out.split()[-1] == "me"
    hits = run_jsonl(capsys, "search", store["path"], "Porto", "--scope", "me")
    assert store["b"] in [h["node"]["id"] for h in hits]
    assert run_jsonl(capsys, "search", store["path"], "Porto", "--scope", "me", "--as-of", "2024-02-01") == []
    code, out, _ = run(capsys, "search", store["path"], "Porto", "--as-of", "2024-02-01")
    assert code == 0 and out.strip() == "nothing found"  # text, not a Python or JSON empty list


def test_a_result_with_lists_prints_text_not_a_python_repr(
    store: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(capsys, "purge", store["path"], store["c"], "--scope", "me")
    assert code == 0, err
    assert out.startswith("purged: ") and "['" not in out and "{'" not in out and store["c"] in out


@pytest.mark.parametrize(
    ("argv", "phrase"),
    [
        (["list", "{path}", "--scope", "nobody"], "; run `worlddb scopes "),
        (["list", "{path}", "--scope", "me", "--cursor", "nope"], "not a cursor"),
        (["list", "{path}", "--scope", "me", "--limit", "0"], "limit"),
        (["search", "{path}", "Porto", "--scope", "nobody"], "no scope named"),
        (["search", "{path}", "Porto", "--as-of", "someday"], "cannot read"),
        (["read", "{path}", "00000000"], "; run `worlddb list "),
    ],
    ids=["unknown-scope", "bad-cursor", "bad-limit", "search-unknown-scope", "search-bad-time", "not-found-advice"],
)
def test_the_surface_refuses_bad_input_in_one_line(
    store: dict[str, str], capsys: pytest.CaptureFixture[str], argv: list[str], phrase: str
) -> None:
    before = Path(store["path"]).read_bytes()
    code, out, err = run(capsys, *[a.format(**store) for a in argv])
    assert code == 2 and out == "" and err.count("\n") == 1 and phrase in err, err
    assert Path(store["path"]).read_bytes() == before


def test_a_mistyped_merges_points_to_merges(store: dict[str, str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["merge", store["path"]])
    assert info.value.code == 2 and "`worlddb merges DB`" in capsys.readouterr().err


@pytest.mark.parametrize("given", ["garbage", "missing", "stdin"])
def test_a_refused_import_into_a_new_store_leaves_no_store_behind(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, given: str
) -> None:
    """Issue 35: `import` created the store, then refused the file, and left the empty store (and -wal, -shm)."""
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"kind": "nothing we know"}\nnot JSON\n', encoding="utf-8")
    monkeypatch.setattr("sys.stdin", io.StringIO(bad.read_text("utf-8")))
    source = {"garbage": str(bad), "missing": str(tmp_path / "missing.jsonl"), "stdin": "-"}[given]
    code, _, err = run(capsys, "import", str(tmp_path / "new.db"), source)
    assert code == 2 and "Traceback" not in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.jsonl"]


def test_a_refused_import_into_an_existing_store_keeps_it(
    store: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    before = run_json(capsys, "stats", store["path"])["root"]
    code, _, _ = run(capsys, "import", store["path"], store["path"] + ".missing.jsonl")
    assert code == 2 and run_json(capsys, "stats", store["path"])["root"] == before


def test_recall_prints_one_line_a_hit_in_score_order_with_an_id_read_takes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = str(tmp_path / "r.db")
    for text in ("Ana lives in Lisbon near the river", "Ana's sister Emma lives in Porto", "Ana plays the cello"):
        assert run(capsys, "write", db, text, "-s", "ana")[0] == 0
    code, out, _ = run(capsys, "recall", db, "where does Ana live?", "-s", "ana", "-k", "3")
    assert code == 0
    lines = out.splitlines()
    assert lines[0].startswith("confidence ")
    hits = [line for line in lines[1:] if not line.strip().startswith("why: ")]
    assert len(hits) == len(lines[1:]) // 2 == 3 and all(ln.strip().startswith("why: ") for ln in lines[2::2])
    scores = [float(line.split()[1]) for line in hits]
    assert scores == sorted(scores, reverse=True)
    short = hits[0].split()[2]
    assert len(short) == 12
    code, out, _ = run(capsys, "read", db, short)
    assert code == 0 and "Lisbon" in out
    with pytest.raises(SystemExit):
        main(["recall", "--help"])
    assert "late (the question matched token by token)" in " ".join(capsys.readouterr().out.split())


# ---- text by default, JSON lines for listings (issue 38) ----------------------------------------


def test_link_merges_and_merge_print_text_by_default(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = str(tmp_path / "text.db")
    ids = []
    for text, name in (("Robert Smith", "Robert Smith"), ("Bob Smith", "Bob Smith"), ("I live in Lisbon", None)):
        extra = ["--type", "Entity", "--name", name] if name else []
        code, out, err = run(capsys, "write", path, text, "--scope", "alice", *extra)
        assert code == 0, err
        ids.append(out.strip())
    robert, bob, note = ids
    code, out, _ = run(capsys, "link", path, note[:12], robert[:12], "refers_to")
    assert code == 0 and f"refers_to  {note[:12]} -> {robert[:12]}" in out
    assert not out.lstrip().startswith("{")
    code, out, _ = run(capsys, "link", path, robert[:12], bob[:12], "same_as")
    assert code == 0 and "proposal 1  pending" in out and "'Robert Smith' same_as" in out
    assert "worlddb merge DB 1 accept|reject" in out
    code, out, _ = run(capsys, "merges", path)
    assert code == 0 and out.strip().startswith("proposal 1  pending") and len(out.splitlines()) == 1
    code, out, _ = run(capsys, "merge", path, "1", "accept")
    assert code == 0 and out.startswith("proposal 1  accepted, decided ") and "{" not in out
    code, out, _ = run(capsys, "merges", path)
    assert code == 0 and out.strip() == "no pending merge proposals"
    code, out, _ = run(capsys, "merges", path, "--status", "all", "--json")
    assert code == 0 and [json.loads(line)["status"] for line in out.splitlines()] == ["accepted"]


def test_a_listing_prints_one_json_object_a_line(store: dict[str, str], capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "history", store["path"], store["b"], "--json")
    lines = out.splitlines()
    assert code == 0 and len(lines) == 2 and [json.loads(line)["id"] for line in lines] == [store["a"], store["b"]]
    code, out, _ = run(capsys, "search", store["path"], "nothing matches this", "--json")
    assert code == 0 and out == ""  # an empty listing: no line at all
    code, out, _ = run(capsys, "stats", store["path"], "--json")
    assert code == 0 and json.loads(out)["nodes"] > 0  # one record: one (indented) document, as before


# ---- consolidate says what it left alone ---------------------------------------------------------


def test_consolidate_says_which_worlds_wait_and_why(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    chat = tmp_path / "chat.jsonl"
    long = (
        "I adopted a kitten called Miso last spring and she sleeps on the radiator every single afternoon now, "
        "right after she has chased the red laser toy around the flat for an hour or so"
    )  # two of them: a session long enough to summarise (60 words)
    rows = [
        {"session": "1", "date": "2024-03-01", "speaker": "Ana", "text": long},
        {"session": "1", "date": "2024-03-01", "speaker": "Ana", "text": long.replace("Miso", "Tofu")},
        {"session": "2", "date": "2024-06-01", "speaker": "Ana", "text": "I moved to Denver"},
    ]
    chat.write_text("".join(json.dumps(r) + "\n" for r in rows))
    path = str(tmp_path / "sleep.db")
    code, _, err = run(capsys, "ingest", path, str(chat), "--format", "jsonl", "--scope", "ana")
    assert code == 0, err
    report = run_json(capsys, "consolidate", path, "--dry-run")
    waiting = {(s["kind"], s["name"]) for s in report["skipped"] if s["reason"] == "recent"}
    assert {("session", "chat / 1"), ("session", "chat / 2"), ("timeline", "ana")} <= waiting
    assert report["summaries"] == 0
    first = next(s for s in report["skipped"] if s["name"] == "chat / 1")
    assert first["step"] == "summaries" and first["ready_at"] > first["changed_at"]
    code, out, _ = run(capsys, "consolidate", path)
    assert code == 0 and "session 'chat / 1': last changed less than a minute ago, within the 60-minute minimum" in out
    assert "(or run again with --min-age 0)" in out and "summaries: 0" in out
    report = run_json(capsys, "consolidate", path, "--min-age", "0")
    assert report["summaries"] >= 2  # the long session and the scope's timeline
    assert [(s["name"], s["reason"]) for s in report["skipped"]] == [("chat / 2", "small")]
    assert "1 turn and 4 words, too short to summarise" in report["skipped"][0]["detail"]
    report = run_json(capsys, "consolidate", path, "--only", "queue")
    assert report["skipped"] == []  # only the summaries and timelines steps leave worlds alone


def test_tags_retries_filters_and_times_in_words(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """Issue 38: the CLI writes tags, a retried write is the same memory, recall filters and reads words."""
    db = str(tmp_path / "tags.db")
    code, key, _ = run(capsys, "write", db, "the spare key is under the blue pot", "-s", "ana", "--tag", "Home")
    assert code == 0
    assert run(capsys, "write", db, "the spare key is under the blue pot", "-s", "ana", "--tag", "home")[1] == key
    assert (
        run(capsys, "write", db, "the spare key is under the blue pot", "-s", "ana", "--tag", "home", "--new")[1] != key
    )
    run(capsys, "write", db, "the dentist is on Friday", "-s", "ana", "--tag", "health")
    found = run_json(capsys, "recall", db, "where is the key", "-s", "ana", "--tag", "home")
    assert key.strip() in [h["node"]["id"] for h in found["hits"]] and len(found["hits"]) == 2  # and the --new one
    code, out, err = run(capsys, "recall", db, "where is the key", "-s", "ana", "--during", "2020", "--as-of", "today")
    assert code == 0 and out.strip() == "no memories found"
    assert "'2020' read as 2020-01-01 to 2020-12-31" in err and "'today' read as" in err
    code, _, err = run(capsys, "recall", db, "where is the key", "-s", "ana", "--during", "blursday")
    assert code == 2 and "understood: no date or period" in err
    listed = run_jsonl(capsys, "list", db, "-s", "ana", "--type", "Memory", "--newest")
    assert [m["content"] for m in listed][0] == "the dentist is on Friday"
    assert [m["content"] for m in run_jsonl(capsys, "list", db, "-s", "ana", "--tag", "health")] == [
        "the dentist is on Friday"
    ]


@pytest.mark.parametrize("command", ["write", "read", "purge", "import"])
def test_a_missing_argument_after_the_store_is_not_blamed_on_the_store(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, command: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The new-user trial: `worlddb write s.db` said "write needs the store's file: give DB", though DB was given."""
    monkeypatch.delenv("WORLDDB_STORE", raising=False)
    db = str(tmp_path / "s.db")
    assert main(["init", db]) == 0
    capsys.readouterr()
    with pytest.raises(SystemExit) as info:
        main([command, db])
    err = capsys.readouterr().err
    assert info.value.code == 2 and f"usage: worlddb {command}" in err
    assert f"{db} is the store; {command} needs more after it" in err and "give DB" not in err


@pytest.mark.parametrize("line", [("stats", "{db}", "--bogus"), ("--bogus", "stats", "{db}")])
def test_a_mistyped_option_is_refused_with_the_commands_own_usage(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, line: tuple[str, ...]
) -> None:
    """Issue 38: `worlddb stats DB --bogus` printed the top-level usage (every command), not stats'."""
    db = str(tmp_path / "u.db")
    with pytest.raises(SystemExit) as info:
        main([part.format(db=db) for part in line])
    out, err = capsys.readouterr()
    assert info.value.code == 2 and out == "" and "usage: worlddb stats" in err
    assert "unrecognized arguments: --bogus" in err and "COMMAND" not in err


def test_a_progress_bar_redraws_on_a_terminal_and_prints_one_line_in_a_log(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from worlddb_lite.cli import _progress_bar

    show = _progress_bar("ingesting")  # stderr captured: no terminal
    for done in (0, 5, 10):
        show(done, 10)
    assert capsys.readouterr().err == "ingesting: 10/10\n"
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    show = _progress_bar("ingesting")
    for done in (0, 5, 10):
        show(done, 10)
    err = capsys.readouterr().err
    assert err.count("\r") == 3 and err.endswith("10/10\n") and "[###############...............] 5/10" in err
