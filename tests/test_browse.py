"""`worlddb browse DB`: the store in Datasette, read-only, through Datasette's own test client (no network)."""

from __future__ import annotations

import asyncio
import hashlib
import sys
from pathlib import Path
from typing import Any

import pytest

from worlddb_lite import WorldDB, browse

from .conftest import FakeEmbedder, run

pytest.importorskip("datasette", reason="Datasette is the browse extra: pip install '.[browse]'")


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    path = tmp_path_factory.mktemp("browse") / "mem.db"
    with WorldDB(path, embedder=FakeEmbedder()) as db:
        ids = {
            "lisbon": db.write("I live in Lisbon", scope="ana", valid_at="2024-01-01"),
            "porto": db.write("I moved to Porto", scope="ana", valid_at="2024-06-01"),
            "tea": db.write("Ana likes green tea", scope="ana", valid_at="2024-02-01", extractor=None),
            "coffee": db.write("Ana never drinks tea, only coffee", scope="ana", valid_at="2024-02-01", extractor=None),
            "bank": db.write("Remind me to call the bank", scope="bob", valid_at="2024-03-01", extractor=None),
        }
        db.link(ids["coffee"], ids["tea"], "contradicts")
        db.retire(ids["bank"], at="2024-03-02")
        db.link(
            db.write("Bob", type="Entity", name="Bob", scope="ana"),
            db.write("Robert", type="Entity", name="Robert", scope="ana"),
            "same_as",
        )
    return {"path": str(path), **ids}


def fetch(path: str, *urls: str, sealed: bool = False) -> list[Any]:
    """Each url's response from a fresh Datasette over the store."""

    async def go() -> list[Any]:
        ds = browse.datasette_for(path, sealed=sealed)
        await ds.invoke_startup()
        return [await ds.client.get(url) for url in urls]

    return asyncio.run(go())


def digest(path: str) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def test_the_index_page_lists_the_views_and_hides_the_vectors(store: dict[str, str]) -> None:
    home, database = fetch(store["path"], "/", "/mem")
    assert home.status_code == 200 and database.status_code == 200
    for name in ("memory", "fact", "current_facts", "what_changed", "contradictions", "pending_merges", "timeline"):
        assert f'href="/mem/{name}"' in database.text, name
    assert 'href="/mem/node_vec"' not in database.text


def test_the_memory_view_shows_hex_ids_and_text_and_the_node_table_no_binary(store: dict[str, str]) -> None:
    memory, node, vectors = fetch(store["path"], "/mem/memory", "/mem/node", "/mem/node_vec")
    assert store["lisbon"] in memory.text and "I live in Lisbon" in memory.text
    assert store["lisbon"] in node.text and "Binary" not in node.text
    assert "int8 vector, 32 dimensions" in vectors.text and "Binary" not in vectors.text


def test_full_text_search_returns_the_text(store: dict[str, str]) -> None:
    view, canned = fetch(
        store["path"], "/mem/memory.json?_search=coffee&_shape=array", "/mem/search.json?words=tea&_shape=array"
    )
    assert [r["text"] for r in view.json()] == ["Ana never drinks tea, only coffee"]
    assert {r["text"] for r in canned.json()} == {"Ana likes green tea", "Ana never drinks tea, only coffee"}
    # trial: an apostrophe or a lone quote was an FTS5 syntax error (HTTP 400); words are words
    apostrophe, quote, phrase = fetch(
        store["path"],
        "/mem/search.json?words=Ana%27s&_shape=array",
        "/mem/search.json?words=%22unclosed&_shape=array",
        "/mem/search.json?words=green%20tea&_shape=array",
    )
    assert apostrophe.status_code == 200 and quote.status_code == 200 and quote.json() == []
    assert [r["text"] for r in phrase.json()] == ["Ana likes green tea"]


def test_the_canned_queries(store: dict[str, str]) -> None:
    urls = [
        f"/mem/{q}.json?_shape=array" for q in ("current_facts", "what_changed", "contradictions", "pending_merges")
    ]
    facts, changed, contradictions, merges = (r.json() for r in fetch(store["path"], *urls))
    assert [(f["subject"], f["slot"], f["value"], f["learned_from_text"]) for f in facts] == [
        ("ana", "lives in", "Porto", "I moved to Porto")
    ]
    assert {(c["change"], c["was"], c["replaced_by"]) for c in changed} == {
        ("superseded", "ana lives in: Lisbon", "ana lives in: Porto"),
        ("retired", "Remind me to call the bank", None),
    }
    assert [(c["a_id"], c["b_id"]) for c in contradictions] == [(store["coffee"], store["tea"])]
    assert [(m["a_name"], m["b_name"]) for m in merges] == [("Bob", "Robert")]


def test_a_scope_s_timeline(store: dict[str, str]) -> None:
    (bob,) = fetch(store["path"], "/mem/timeline.json?scope=bob&_shape=array")
    assert [(r["text"], r["state"]) for r in bob.json()] == [("Remind me to call the bank", "stale")]


def test_datasette_reads_the_file_and_never_writes_it(store: dict[str, str]) -> None:
    before = digest(store["path"])

    async def go(sealed: bool) -> None:
        ds = browse.datasette_for(store["path"], sealed=sealed)
        await ds.invoke_startup()
        database = ds.get_database("mem")
        assert database.is_mutable is not sealed  # mode=ro, or immutable where this user may not write
        with pytest.raises(Exception, match="readonly"):
            await database.execute("delete from node_access")

    asyncio.run(go(False))
    asyncio.run(go(True))
    fetch(store["path"], "/mem/memory", "/mem/what_changed")
    assert digest(store["path"]) == before


@pytest.fixture(scope="module")
def bundled(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A store of the bundled model, which the CLI opens without --model."""
    path = tmp_path_factory.mktemp("browse-cli") / "cli.db"
    with WorldDB(path) as db:
        db.write("I live in Lisbon", scope="ana", valid_at="2024-01-01")
    return str(path)


def test_the_command_serves_the_store_read_only(
    bundled: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    served: list[tuple[Any, str, int]] = []
    monkeypatch.setattr(browse, "serve", lambda ds, *, host, port: served.append((ds, host, port)))
    code, _, err = run(capsys, "browse", bundled, "--port", "8123")
    assert code == 0 and "read-only at http://127.0.0.1:8123/" in err
    ((ds, host, port),) = served
    assert (host, port) == ("127.0.0.1", 8123) and ds.get_database("cli").is_mutable


def test_without_datasette_the_error_names_the_extra(
    bundled: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, "datasette.app", None)  # as if it were not installed
    code, _, err = run(capsys, "browse", bundled)
    assert code == 2
    assert "pip install 'worlddb_lite[browse]'" in err and "pip install '.[browse]'" in err
