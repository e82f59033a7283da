"""The walk of one ``add_turn`` and one ``write`` with extraction through the package's modules (issue 39).

    PYTHONPATH=<checkout> python bench/walk.py [--json OUT]

A small store in a temporary folder, warmed up (writes and turns first, so the model load and other
first-time work are not traced), then ONE ``db.add_turn(..., extractor=RuleExtractor())`` into a
live session that already holds turns and ONE ``db.write(..., extractor=RuleExtractor())`` are
traced with ``sys.setprofile``: Python calls only (C calls ignored), and only frames whose code file
lies inside the imported ``worlddb_lite`` package (frames of other code between two package frames
are skipped: the caller of a package frame is the nearest package frame above it). A generator
resumed counts as a call, as the profiler reports it. The walk starts at the facade's method
(module ``db``), whose caller is outside the package.

Module: the dotted name below the package (``write.live``; the package's ``__init__`` is
``__init__``). Layer: the rank of the module's top-level name in the ``LAYERS`` dict of
``tests/test_layers.py`` of the checkout measured (``__init__`` is ``""`` there).

Counted per walk:
* modules entered: distinct modules with at least one frame in the walk;
* entries: calls whose callee module differs from the caller's module (the first call, into ``db``
  from outside the package, counts as one), and per module how many times it was entered;
* climbs: entries into a module of a strictly higher layer rank than the caller's (a call back up:
  a callback or handle passed down, or a lower layer calling into a higher one); entries between
  different packages of the same rank are reported apart as ``sideways``;
* re-descents ("returns up then down again"): entries made by a frame that has already seen one of
  its earlier cross-module calls return to it, i.e. every cross-module call of a frame after its
  first; it counts how often control climbs back up by returning and goes down again;
* returns: entries into a module that was entered before in this walk and has no frame on the call
  stack at that moment (a module left, then come back to);
* the path: the module of each entry in order, consecutive duplicates merged.

Each walk is counted twice: as run (every call the profiler saw), and folded: a frame's second and
later calls of one function (loop iterations, a generator resumed again, one helper called twice)
are dropped with everything under them, so each function is followed once per calling frame, nearer
to a reader walking the code than to the machine running it. And a third time at package
granularity: every module named by its top-level package (``store.rows`` is ``store``), unfolded.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
import tempfile
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import worlddb_lite
from worlddb_lite import RuleExtractor, WorldDB

PACKAGE = Path(worlddb_lite.__file__).resolve().parent
SCOPE = "ana"
SESSION = "walk"
WARM_TURNS = ["My sister Emma loves pottery", "Where did I leave my keys again?", "I moved to Porto last month"]
WARM_NOTES = ["I live in Lisbon", "My friend Sam loves chess", "The spare key is under the blue flowerpot"]
TURN = "My brother Tom started running with Lea"
NOTE = "I switched the tomatoes in the garden to watering every 3 days"

# one traced event: ("call", module, function) or ("return",)
Event = tuple[str, ...]


def layers() -> dict[str, int]:
    """``LAYERS`` of tests/test_layers.py beside the package imported (the checkout measured)."""
    path = PACKAGE.parent / "tests" / "test_layers.py"
    spec = importlib.util.spec_from_file_location("_walk_layers", path)
    assert spec and spec.loader, path
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return dict(module.LAYERS)


def module_of(filename: str) -> str | None:
    """The dotted module name below the package of a code file, or None outside the package."""
    try:
        parts = list(Path(filename).resolve().relative_to(PACKAGE).with_suffix("").parts)
    except ValueError:
        return None
    if parts and parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts) or "__init__"


def trace(action: Callable[[], Any]) -> list[Event]:
    """The package's Python calls and returns while ``action`` runs, in order."""
    events: list[Event] = []
    names: dict[str, str | None] = {}
    inside: set[int] = set()  # ids of package frames whose call was recorded (so each return matches one)

    def profile(frame: Any, event: str, arg: Any) -> None:
        if event == "call":
            filename = frame.f_code.co_filename
            if filename not in names:
                names[filename] = module_of(filename)
            module = names[filename]
            if module is not None:
                inside.add(id(frame))
                events.append(("call", module, frame.f_code.co_name))
        elif event == "return" and id(frame) in inside:
            inside.discard(id(frame))
            events.append(("return",))

    sys.setprofile(profile)
    try:
        action()
    finally:
        sys.setprofile(None)
    return events


def rank_of(module: str, ranks: dict[str, int]) -> int | None:
    top = "" if module == "__init__" else module.split(".")[0]
    return ranks.get(top)


def count(events: Iterable[Event], ranks: dict[str, int], fold: bool = False) -> dict[str, Any]:
    """The walk's counts (see the module docstring) from a trace of nested calls and returns.

    With ``fold``, a frame's second and later calls of one function (a loop, a generator resumed,
    the same helper called twice) are dropped with everything under them: each function is followed
    once per calling frame, as a reader walking the code would follow it.
    """
    stack: list[list[Any]] = []  # [module, cross-module calls made so far, functions called] per open frame
    skipping = 0  # depth inside a folded call
    entered: Counter[str] = Counter()
    seen: set[str] = set()
    path: list[str] = []
    climbs: list[str] = []
    sideways: list[str] = []
    redescents = 0
    returns: list[str] = []
    for event in events:
        if skipping:
            skipping += 1 if event[0] == "call" else -1
            continue
        if event[0] == "return":
            stack.pop()
            continue
        module = event[1]
        caller = stack[-1] if stack else None
        if fold and caller is not None:
            if event[1:] in caller[2]:
                skipping = 1
                continue
            caller[2].add(event[1:])
        seen.add(module)
        if caller is None or caller[0] != module:
            entered[module] += 1
            if caller is not None:
                caller[1] += 1
                if caller[1] > 1:
                    redescents += 1
                up, down = rank_of(module, ranks), rank_of(caller[0], ranks)
                if up is not None and down is not None and up > down:
                    climbs.append(f"{caller[0]} -> {module}")
                elif up is not None and up == down and module.split(".")[0] != caller[0].split(".")[0]:
                    sideways.append(f"{caller[0]} -> {module}")
            if entered[module] > 1 and all(frame[0] != module for frame in stack):
                returns.append(module)
            if not path or path[-1] != module:
                path.append(module)
        stack.append([module, 0, set()])
    return {
        "modules_entered": len(seen),
        "entries": sum(entered.values()),
        "entered": dict(entered.most_common()),
        "climbs": len(climbs),
        "climb_edges": dict(Counter(climbs).most_common()),
        "sideways": len(sideways),
        "sideways_edges": dict(Counter(sideways).most_common()),
        "redescents": redescents,
        "returns": len(returns),
        "returned_to": dict(Counter(returns).most_common()),
        "path": path,
    }


def packages(events: Iterable[Event]) -> list[Event]:
    """The trace with each module named by its top-level package (``store.rows`` is ``store``)."""
    return [e if e[0] == "return" else ("call", e[1].split(".")[0], *e[2:]) for e in events]


def walk(folder: str | Path, warm: int = 1) -> dict[str, Any]:
    """A store in ``folder``, warmed up ``warm`` rounds, then one traced turn and one traced write."""
    ranks = layers()
    extractor = RuleExtractor()
    out: dict[str, Any] = {"package": str(PACKAGE)}
    with WorldDB(str(Path(folder) / "walk.db")) as db:
        minute = 0
        for round_ in range(warm):
            for text in WARM_NOTES:
                db.write(f"{text} ({round_})", scope=SCOPE, extractor=extractor)
            for text in WARM_TURNS:
                at = f"2024-05-01T10:{minute:02d}:00Z"
                said = f"{text} ({round_})"
                db.add_turn(said, scope=SCOPE, session=SESSION, speaker=SCOPE, at=at, extractor=extractor)
                minute += 1
        at = f"2024-05-01T10:{minute:02d}:00Z"
        turn = trace(lambda: db.add_turn(TURN, scope=SCOPE, session=SESSION, speaker=SCOPE, at=at, extractor=extractor))
        note = trace(lambda: db.write(NOTE, scope=SCOPE, extractor=extractor))
    for name, events in (("add_turn", turn), ("write", note)):
        calls = sum(1 for e in events if e[0] == "call")
        out[name] = {"calls": calls, **count(events, ranks)}
        out[f"{name} (folded)"] = count(events, ranks, fold=True)
        out[f"{name} (packages)"] = count(packages(events), ranks)
    return out


def shorten(path: Sequence[str], most: int) -> str:
    if len(path) <= most:
        return " > ".join(path)
    half = most // 2
    return " > ".join([*path[:half], f"... ({len(path) - 2 * half} more) ...", *path[-half:]])


def report(result: dict[str, Any], most: int) -> str:
    lines = [f"package: {result['package']}"]
    for name in [f"{w}{v}" for v in ("", " (folded)", " (packages)") for w in ("add_turn", "write")]:
        r = result[name]
        top = ", ".join(f"{m} x{n}" for m, n in list(r["entered"].items())[:6])
        lines += [
            f"\n{name}:" + (f" {r['calls']} package calls" if "calls" in r else ""),
            f"  modules entered {r['modules_entered']}, entries {r['entries']}, climbs {r['climbs']}, "
            f"sideways {r['sideways']}, re-descents {r['redescents']}, returns {r['returns']}",
            f"  most entered: {top}",
            f"  climbs: {r['climb_edges']}",
            f"  returned to: {r['returned_to']}",
            f"  path ({len(r['path'])}): {shorten(r['path'], most)}",
        ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--warm", type=int, default=2, help="rounds of warm-up writes and turns before the trace")
    parser.add_argument("--path-length", type=int, default=1000, help="longest path printed in full")
    parser.add_argument("--json", help="also write the result to this file")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="walk-") as folder:
        result = walk(folder, warm=max(1, args.warm))
    print(report(result, args.path_length))
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2) + "\n", "utf-8")


if __name__ == "__main__":
    main()
