"""Looking at the file: the ``sqlite3`` shell with sqlite-vec loaded, and a read-only Datasette over a store.

``worlddb shell DB`` runs the shell (``shell_argv``); ``worlddb browse DB`` serves the store in Datasette
(``datasette_for``, ``serve``), which is the ``browse`` extra. Neither writes to the store: the shell meets
the store's guard triggers like any other writer, and Datasette opens the file read-only.
"""

from __future__ import annotations

import os
import shutil
import types
import urllib.parse
from collections.abc import Callable
from pathlib import Path
from typing import Any

import sqlite_vec

from .errors import MissingExtra, install_hint

BROWSE_EXTRA = install_hint("browse")
SHELL_HINT = (
    "try select * from memory; select * from fact where state = 'current'; and the views current_node, "
    "node_history, open_contradiction, pending_merge (.tables lists them all); sqlite-vec's functions are loaded"
)
INSTALL_SQLITE3 = (
    "install it (Debian/Ubuntu: apt-get install sqlite3; Fedora: dnf install sqlite; macOS: brew install sqlite; "
    "Windows: the sqlite-tools zip from https://sqlite.org/download.html)"
)


def load_line() -> str:
    """The ``.load`` dot-command that loads sqlite-vec into a ``sqlite3`` shell (the suffix is the shell's to add)."""
    path = sqlite_vec.loadable_path()
    # single quotes take a path as it is (the shell reads backslashes inside double quotes as escapes)
    return f".load '{path}'" if "'" not in path else '.load "' + path.replace("\\", "\\\\") + '"'


def shell_argv(path: str, *, sealed: bool = False) -> list[str]:
    """The command line of a ``sqlite3`` shell on the store at ``path`` with sqlite-vec loaded, in box mode.

    ``sealed``: the store lies where this user may not write, so the shell reads the file alone
    (``immutable``, read-only), as ``WorldDB`` does there. Raises MissingExtra when no ``sqlite3`` is on PATH.
    """
    binary = shutil.which("sqlite3")
    if binary is None:
        raise MissingExtra(
            f"the sqlite3 shell is not installed (no sqlite3 on PATH); {INSTALL_SQLITE3}, then run this again, or "
            f"open the store in it and load sqlite-vec with the line: {load_line()}"
        )
    target = os.path.abspath(path)
    if sealed:
        uri = "file:" + urllib.parse.quote(target) + "?immutable=1"
        return [binary, "-readonly", "-cmd", load_line(), "-cmd", ".mode box", uri]
    return [binary, "-cmd", load_line(), "-cmd", ".mode box", target]


# Tables a person browsing has no use for: vectors, token ids, Merkle nodes, an always-empty session table.
HIDDEN = ("node_vec", "vec_centroid", "world_vec", "node_tokens", "merkle", "reconciler_session")
# blob columns that hold vectors, and their element size: shown as their shape, never as bytes
VECTORS = {"embedding": ("int8", 1), "centroid": ("float32", 4), "anchor": ("float32", 4), "acc": ("float64", 8)}

QUERIES: dict[str, dict[str, Any]] = {
    "search": {
        "title": "Search",
        "description": "Memories holding these words, in this order (full-text, BM25: best first); stale ones "
        "included. Quotes and apostrophes are words like any other.",
        "sql": (
            "select m.scope, m.kind, m.speaker, m.text, m.state, m.valid_at, m.id\n"
            "from node_fts join memory as m on m.nid = node_fts.rowid\n"
            "where node_fts match '\"' || replace(:words, '\"', '\"\"') || '\"'\n"
            "order by node_fts.rank limit 100"
        ),
    },
    "current_facts": {
        "title": "Current facts",
        "description": "What the store believes now, by scope and subject, with the turn or note it was learned from.",
        "sql": (
            "select scope, subject, slot, value, since, learned_from_text, id\n"
            "from fact where state = 'current'\n"
            "order by scope, subject, slot"
        ),
    },
    "what_changed": {
        "title": "What changed",
        "description": "Memories and facts that stopped being current, latest first: superseded by a newer "
        "version or value, retired, closed, or retracted.",
        "sql": (
            "select coalesce(s.closed_at, s.expired_at) as changed_at,\n"
            "  case when s.expired_at is not null then 'retracted' when s.retired = 1 then 'retired'\n"
            "    when b.nid is not null then 'superseded' else 'closed' end as change,\n"
            "  m.scope, m.kind, m.text as was, json_extract(b.body, '$.content') as replaced_by,\n"
            "  m.invalid_at as until, m.id\n"
            "from memory as m\n"
            "join node_state as s on s.nid = m.nid\n"
            "left join edge as e on e.dst = m.nid and e.type = 'supersedes' and e.expired_at is null\n"
            "left join node as b on b.nid = e.src\n"
            "where m.state = 'stale'\n"
            "order by changed_at desc limit 200"
        ),
    },
    "contradictions": {
        "title": "Contradictions",
        "description": "Pairs of memories that disagree and both still stand: the store keeps them on purpose.",
        "sql": "select a_content, b_content, flagged_at, a_id, b_id from open_contradiction order by flagged_at desc",
    },
    "pending_merges": {
        "title": "Pending merges",
        "description": "Names that may be one entity, waiting for `worlddb merge DB PID accept|reject`.",
        "sql": "select pid, a_name, b_name, score, tier, reason, proposed_at from pending_merge order by pid",
    },
    "timeline": {
        "title": "A scope's timeline",
        "description": "Everything a scope (a user's name, or agent:NAME, app:NAME, run:NAME) holds, in world time.",
        "sql": (
            "select valid_at, kind, speaker, text, state, invalid_at, id\n"
            "from memory where scope = :scope\n"
            "order by valid_at, nid"
        ),
    },
}


def metadata(name: str) -> dict[str, Any]:
    """Datasette's metadata for the store Datasette calls ``name``: search, hidden tables, canned queries."""
    searched = {"fts_table": "node_fts", "fts_pk": "nid"}
    tables: dict[str, Any] = {table: {"hidden": True} for table in HIDDEN}
    tables["memory"] = {
        **searched,
        "sort_desc": "valid_at",
        "description": "Every note, turn, fact and summary: scope, speaker, text, validity and state.",
    }
    tables["fact"] = {"sort_desc": "since", "description": "What was learned, since when, until when, from what."}
    tables["node_text"] = searched
    return {
        "title": f"worlddb_lite: {name}",
        "description": "A memory store, read-only. Start with the memory and fact views, or a query below.",
        "databases": {name: {"tables": tables, "queries": QUERIES}},
    }


def render_cell(value: Any, column: str) -> str | None:
    """A blob as a person reads it: a 32-byte id as lowercase hex, a vector as its shape; None: Datasette's own."""
    if not isinstance(value, bytes):
        return None
    if column in VECTORS:
        kind, size = VECTORS[column]
        return f"{kind} vector, {len(value) // size} dimensions"
    if len(value) == 32:
        return value.hex()
    return None


PLUGIN = "worlddb_lite_browse"  # Datasette lists a plugin by its module's name


def _register() -> None:
    """Register ``render_cell`` with Datasette's plugin manager, once a process, as a module of its own."""
    from datasette import hookimpl
    from datasette.plugins import pm

    if pm.get_plugin(PLUGIN) is not None:
        return
    implements: Callable[[Callable[..., Any]], Callable[..., Any]] = hookimpl  # untyped: typed here
    plugin = types.ModuleType(PLUGIN, "worlddb_lite.browse: ids as hex, vectors as their shape")
    plugin.render_cell = implements(render_cell)  # type: ignore[attr-defined]
    pm.register(plugin, name=PLUGIN)


def datasette_for(path: str, *, sealed: bool = False) -> Any:
    """A Datasette serving the store at ``path`` read-only (``?mode=ro``; ``immutable`` when ``sealed``)."""
    try:
        from datasette.app import Datasette
    except ImportError as exc:
        raise MissingExtra(
            f"worlddb browse needs Datasette, and {exc.name or 'it'} is not installed; it is the browse extra: "
            f"{BROWSE_EXTRA}"
        ) from None
    _register()
    target = os.path.abspath(path)
    name = Path(target).stem
    return Datasette(
        files=[] if sealed else [target],
        immutables=[target] if sealed else [],
        metadata=metadata(name),
        settings={"sql_time_limit_ms": 5000, "default_page_size": 50},
    )


def serve(datasette: Any, *, host: str, port: int) -> None:
    """Serve ``datasette`` at http://host:port/ until interrupted."""
    import uvicorn  # Datasette's own server, installed with it

    uvicorn.run(datasette.app(), host=host, port=port, log_level="warning")
