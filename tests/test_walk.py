"""bench/walk.py: its counts on a trace made by hand, and one real walk on a tiny store."""

from __future__ import annotations

import importlib.util
from pathlib import Path

SCRIPT = Path(__file__).resolve().parent.parent / "bench" / "walk.py"
_spec = importlib.util.spec_from_file_location("bench_walk", SCRIPT)
assert _spec and _spec.loader
walk = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(walk)

RANKS = {"a": 0, "e": 0, "b": 1, "c": 2}
R = ("return",)
# c.x runs f2 (same module), calls c.y, then a, which calls b, which calls back into c.x (still on the
# stack); back in c.x it calls a.h twice more (a left before: two returns), the last time a calls e.w
TRACE = [
    ("call", "c.x", "f"),
    ("call", "c.x", "f2"),
    R,
    ("call", "c.y", "g"),
    R,
    ("call", "a", "h"),
    ("call", "b", "k"),
    ("call", "c.x", "cb"),
    R,
    R,
    R,
    ("call", "a", "h"),
    R,
    ("call", "a", "h"),
    ("call", "e.w", "q"),
    R,
    R,
    R,
]


def test_counts_on_a_synthetic_trace():
    got = walk.count(TRACE, RANKS)
    assert got["modules_entered"] == 5
    assert got["entered"] == {"a": 3, "c.x": 2, "c.y": 1, "b": 1, "e.w": 1}
    assert got["entries"] == 8  # the first call, from outside, counts; c.x -> c.x does not
    assert got["climb_edges"] == {"a -> b": 1, "b -> c.x": 1} and got["climbs"] == 2
    assert got["sideways_edges"] == {"a -> e.w": 1}  # same rank, another package
    assert got["redescents"] == 3  # c.x's 2nd, 3rd and 4th calls out of its module
    assert got["returned_to"] == {"a": 2} and got["returns"] == 2  # c.x came back while on the stack: not one
    assert got["path"] == ["c.x", "c.y", "a", "b", "c.x", "a", "e.w"]


def test_folded_follows_each_function_once_per_frame():
    got = walk.count(TRACE, RANKS, fold=True)  # both later a.h calls are dropped with e.w under them
    assert got["entered"] == {"c.x": 2, "c.y": 1, "a": 1, "b": 1}
    assert (got["climbs"], got["sideways"], got["redescents"], got["returns"]) == (2, 0, 1, 0)
    assert got["path"] == ["c.x", "c.y", "a", "b", "c.x"]


def test_packages_view():
    got = walk.count(walk.packages(TRACE), RANKS)
    assert got["entered"] == {"a": 3, "c": 2, "b": 1, "e": 1}  # c.x -> c.y is inside package c
    assert got["path"] == ["c", "a", "b", "c", "a", "e"]


def test_a_real_walk(tmp_path):
    result = walk.walk(tmp_path, warm=1)
    assert Path(result["package"]) == walk.PACKAGE
    for name in ("add_turn", "write"):
        r = result[name]
        inside = [m for m in r["path"] if m != "store.connection"]  # the facade's door translates errors there
        assert r["path"][0] == "db" and inside[1].startswith("write.")
        assert r["modules_entered"] >= 5 and r["entries"] >= r["modules_entered"]
        assert r["returns"] <= r["entries"] - len(r["entered"])  # a return is a second or later entry
        assert all(walk.rank_of(m, walk.layers()) is not None for m in r["entered"])  # every module has a layer
        assert result[f"{name} (packages)"]["modules_entered"] <= r["modules_entered"]
