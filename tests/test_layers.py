"""The package's shape: dependencies point down only, no module imports itself back, front ends use the facade.

Every import counts, including those under ``if TYPE_CHECKING`` and inside functions: a cycle
hidden there is still a cycle for whoever reads the code. The layers, lowest first, are those
of docs/design.md and docs/architecture.md.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import worlddb_lite

PACKAGE = Path(worlddb_lite.__file__).parent
# layer of each top-level module or subpackage; a module may import its own layer's package and lower ones
LAYERS = {
    "errors": 0,
    "types": 0,
    "checks": 1,
    "text": 2,
    "models": 3,
    "store": 4,  # SQL only: it imports no model
    "index": 5,  # the in-memory indexes over the store's rows (vectors, names, tokens) and the side reader
    "edges": 6,
    "write": 7,
    "retrieval": 7,  # beside write: neither imports the other (the facade hands the write path its searches)
    "ops": 8,  # whole-store operations: verify, purge, maintenance, re-embedding
    "consolidate": 8,  # beside ops: the sleep cycle's steps
    "sync": 9,  # replicas and transfer: may purge (ops) and sweep what arrived (consolidate)
    "engine": 10,  # one open store's parts, opened and wired in order
    "db": 11,
    "background": 12,
    "cli": 12,
    "mcp": 12,
    "browse": 12,  # the sqlite3 shell's command line and Datasette (worlddb shell, worlddb browse)
    "": 13,  # the package root: the public API
}
FRONT_ENDS = {"cli", "mcp", "background", "browse"}
FRONT_END_MAY_IMPORT = {
    "",
    "db",
    "errors",
    "types",
    "mcp",
    "browse",
}  # the facade, its vocabulary, the public API; cli starts mcp and browse


def modules() -> dict[str, Path]:
    """Dotted names (without the package prefix) of every module of the package."""
    found = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(PACKAGE).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


def imports(name: str, path: Path, known: set[str]) -> set[str]:
    """The package modules ``name`` imports, wherever the import statement stands."""
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    out = set()
    for node in ast.walk(ast.parse(path.read_text("utf-8"))):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - (node.level - 1)] if node.level > 1 else package
                target = ".".join([*base, *([node.module] if node.module else [])])
            elif node.module and (node.module == "worlddb_lite" or node.module.startswith("worlddb_lite.")):
                target = node.module.removeprefix("worlddb_lite").lstrip(".")
            else:
                continue
            for alias in node.names:
                sub = f"{target}.{alias.name}".lstrip(".")
                out.add(sub if sub in known else target)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name == "worlddb_lite" or alias.name.startswith("worlddb_lite."):
                    out.add(alias.name.removeprefix("worlddb_lite").lstrip("."))
    return {t for t in out if t in known and t != name}


def graph() -> dict[str, set[str]]:
    found = modules()
    return {name: imports(name, path, set(found)) for name, path in found.items()}


def layer(name: str) -> tuple[int, str]:
    top = name.split(".")[0]
    assert top in LAYERS, f"{name}: a new top-level module needs its layer in LAYERS (tests/test_layers.py)"
    return LAYERS[top], top


def upward(edges: dict[str, set[str]]) -> list[str]:
    bad = []
    for name, targets in edges.items():
        (rank, top) = layer(name)
        for target in targets:
            (other, other_top) = layer(target)
            if top in FRONT_ENDS:
                if other_top not in FRONT_END_MAY_IMPORT and other_top != top:
                    bad.append(f"{name} -> {target}: a front end calls the facade, not {other_top}")
            elif other > rank or (other == rank and other_top != top):
                bad.append(f"{name} (layer {top}) -> {target} (layer {other_top})")
    return sorted(bad)


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in edges[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


def test_no_module_imports_a_higher_layer():
    assert upward(graph()) == []


def test_no_import_cycle():
    assert cycles(graph()) == []


def test_the_checks_see_an_upward_import_and_a_cycle():
    edges = {"store.rows": {"write.writer"}, "write.writer": {"store.rows"}, "cli": {"write.writer"}}
    assert upward(edges) == [
        "cli -> write.writer: a front end calls the facade, not write",
        "store.rows (layer store) -> write.writer (layer write)",
    ]
    assert cycles(edges) == [["store.rows", "write.writer"]]
    assert upward({"retrieval.recall": {"write.facts"}}) == [
        "retrieval.recall (layer retrieval) -> write.facts (layer write)"
    ]


def test_relative_imports_under_type_checking_and_in_functions_are_seen(tmp_path):
    module = tmp_path / "m.py"
    module.write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ..db import WorldDB\n"
        "def f():\n    from ..store import queries\n"
    )
    assert imports("write.m", module, {"db", "store.queries", "store", "write.m"}) == {"db", "store.queries"}


def test_the_architecture_page_names_every_module() -> None:
    """Issue 39: docs/architecture.md left out 17 modules (sync among them); a module added is a line added.

    A module of a package is named in the table's rows of that package (``sync/rows.py`` is not named by
    ``store/rows.py``'s row); a top-level module anywhere on the page.
    """
    root = Path(__file__).resolve().parent.parent
    page = (root / "docs" / "architecture.md").read_text(encoding="utf-8")
    in_table: set[tuple[str, str]] = set()
    package = ""
    for line in page.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")] if line.startswith("| ") else []
        if len(cells) == 3 and cells[0] != "layer" and not set(cells[1]) <= set("-"):
            package = cells[0] or package
            in_table |= {(package, name) for name in re.findall(r"`(\w+\.py)`", cells[1])}
    anywhere = set(re.findall(r"(?<![\w/])(\w+\.py)\b", page))
    missing = []
    for path in sorted((root / "worlddb_lite").rglob("*.py")):
        parts = path.relative_to(root / "worlddb_lite").parts
        if path.name == "__init__.py":
            continue
        named = (parts[0], path.name) in in_table if len(parts) > 1 else path.name in anywhere
        if not named:
            missing.append(str(path.relative_to(root)))
    assert not missing, f"docs/architecture.md does not name: {missing}"


def test_store_imports_no_model() -> None:
    """Issue 39: store/ keeps the SQL; what codes vectors and tokens with a model lives in index/ above it."""
    edges = graph()
    reach = sorted(f"{name} -> {t}" for name, ts in edges.items() if name.startswith("store") for t in ts)
    assert not [r for r in reach if " -> models" in r or " -> index" in r], reach


def test_errors_are_translated_at_the_facade_and_at_commit_only() -> None:
    """Issue 39: raw SQLite errors rise through the layers and are named once, at the door (db.py's
    ``_translated``) or where a transaction commits (write/reconciler.py), and in store/ where SQL runs.
    """
    allowed = {"db", "write.reconciler"}
    found = []
    for name, path in modules().items():
        if name.startswith("store") or name in allowed:
            continue
        for node in ast.walk(ast.parse(path.read_text("utf-8"))):
            if isinstance(node, ast.Call):
                func = node.func
                called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
                if called == "translate" and not node.args:  # str.translate takes a table
                    found.append(f"{name}:{node.lineno}")
    assert found == [], f"translate() called below the facade: {found}"


def test_the_wheel_lists_every_package() -> None:
    """A package missing from pyproject's list is missing from the wheel (review, issue 39: index/, sync/ and
    consolidate/ were), which an editable install never shows."""
    import tomllib

    root = Path(__file__).resolve().parent.parent
    listed = set(tomllib.loads((root / "pyproject.toml").read_text("utf-8"))["tool"]["setuptools"]["packages"])
    found = {".".join(p.parent.relative_to(root).parts) for p in (root / "worlddb_lite").rglob("__init__.py")}
    assert listed == found


def test_no_step_below_the_facade_flushes_by_hand() -> None:
    """Issue 39: a read through the Writer or the Reader writes what the transaction queued first; no System 2
    step, consolidator step or read method calls ``settle()`` itself (the Writer's own doors do)."""
    found = []
    for name, path in modules().items():
        if name in ("db", "write.writer"):
            continue
        for node in ast.walk(ast.parse(path.read_text("utf-8"))):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "settle":
                found.append(f"{name}:{node.lineno}")
    assert found == [], f"settle() called by hand: {found}"
