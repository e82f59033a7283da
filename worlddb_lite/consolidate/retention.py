"""Retention: which memories keep a place in the in-memory vector index (hot) and which leave it (cold).

Hydra DB's retention score (its section 2.4), with time in days:

    R(m, t) = salience(m) * exp(-lambda * age) + sigma * sum_i 1 / (t - t_access_i)

``salience`` is what the encoding gate scored (``node_state.salience``), raised to a floor per kind
(``FLOOR``: a note the user wrote counts for more than a turn said in passing) and for a turn or note
facts were learned from; ``age`` runs from when the store learned it (a conversation from 2023 ingested
today is new to it); the accesses are the times a
recall returned it (``node_access``, its latest few), each counted at least an hour old.

A memory moves to the cold tier when its score falls below the store's ``cold_below`` setting, or when
more memories hold vectors than its ``max_hot_vectors`` allows (the lowest scores go). Neither is set
by default: nothing goes cold until a user asks. Cold memories stay in the file, in full-text search,
in ``verify`` and in exports; only the in-memory index leaves them out, and a recall with
``include_cold`` ranks them by their vectors too. One whose score rises again (a recall found it by
its words) comes back at the next run. Nothing is deleted. Only leaves move: a world's vector places
its members in the index.
"""

from __future__ import annotations

import datetime as dt
import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import apsw
import numpy as np

from ..errors import Hint, InvalidInput
from ..store.connection import as_float, as_int
from ..write.writer import Writer

HALF_LIFE_DAYS = 30.0  # a memory's salience halves every month
SIGMA = 1.0  # weight of the accesses: a recall a day ago adds 1, one a week ago 1/7
MIN_ACCESS_AGE_DAYS = 1.0 / 24.0  # an access within the hour counts as an hour old (no division by zero)
# salience floor by kind: the kinds recall's text and vector lanes rank (retrieval/lanes.py TEXT_TYPES)
FLOOR = {"Memory": 1.0, "Summary": 0.75, "Fact": 0.75, "Turn": 0.5}
LEARNED_FROM = 0.25  # added to a turn's or note's salience when facts were learned from it
KINDS = tuple(FLOOR)  # what may go cold: not worlds, whose vectors place their members in the index
SETTINGS = ("max_hot_vectors", "cold_below")  # meta keys


@dataclass(frozen=True)
class Scored:
    """Every memory that may change tier: ids, scores, and which are cold now (arrays in step)."""

    nids: np.ndarray  # int64
    scores: np.ndarray  # float64
    cold: np.ndarray  # bool


@dataclass(frozen=True)
class Plan:
    """What a retention run does: (nid, score, reason) to move to the cold tier, and back to the hot one."""

    to_cold: list[tuple[int, float, str]]
    to_hot: list[tuple[int, float, str]]
    hot: int  # memories of ``KINDS`` with vectors in the hot tier after the run


def days_since(times: Sequence[str], now: dt.datetime) -> np.ndarray:
    """Days from each ISO-8601 UTC time to ``now`` (0 for a time after it)."""
    seconds = [(now - dt.datetime.fromisoformat(t.replace("Z", "+00:00"))).total_seconds() for t in times]
    return np.maximum(np.array(seconds, dtype=np.float64) / 86400.0, 0.0)


def scores(
    salience: np.ndarray, age_days: np.ndarray, accesses: Sequence[Sequence[str]], now: dt.datetime
) -> np.ndarray:
    """R(m, now) of each memory, from its effective salience, its age and its recent access times."""
    decay = np.exp(-math.log(2.0) / HALF_LIFE_DAYS * age_days)
    recency = np.array(
        [float((1.0 / np.maximum(days_since(at, now), MIN_ACCESS_AGE_DAYS)).sum()) if at else 0.0 for at in accesses]
    )
    out: np.ndarray = salience * decay + SIGMA * recency
    return out


def plan(scored: Scored, *, max_hot: int | None, threshold: float | None) -> Plan:
    """Which memories change tier: cold below ``threshold`` or beyond the ``max_hot`` best; the rest hot.

    Among equal scores the newer memory (the higher nid) stays hot.
    """
    order = np.lexsort((-scored.nids, -scored.scores))  # best first
    to_cold, to_hot, hot = [], [], 0
    for rank, i in enumerate(order.tolist()):
        nid, value, cold = int(scored.nids[i]), float(scored.scores[i]), bool(scored.cold[i])
        if threshold is not None and value < threshold:
            reason = f"retention score {value:.3g} below cold_below {threshold:g}"
        elif max_hot is not None and rank >= max_hot:
            reason = f"retention score {value:.3g} not among the {max_hot:,} highest (max_hot_vectors)"
        else:
            hot += 1
            if cold:
                to_hot.append((nid, value, "scored among the hot again"))
            continue
        if not cold:
            to_cold.append((nid, value, reason))
    return Plan(to_cold, to_hot, hot)


def score_store(conn: apsw.Connection, now: dt.datetime) -> Scored:
    """Every leaf memory of ``KINDS`` with a vector, scored (one read)."""
    marks = ", ".join("?" for _ in KINDS)
    rows = conn.execute(
        "select v.nid, n.type, s.salience, s.created_at, a.recent, c.nid is not null, "
        "exists (select 1 from edge as e join node as f on f.nid = e.src "
        "where e.dst = v.nid and e.type = 'refers_to' and f.type = 'Fact') "
        "from node_vec as v join node as n on n.nid = v.nid join node_state as s on s.nid = v.nid "
        "left join node_access as a on a.nid = v.nid left join cold_node as c on c.nid = v.nid "
        f"where n.type in ({marks}) and n.body is not null "
        "and not exists (select 1 from node as k where k.parent = v.nid)",
        KINDS,
    ).fetchall()
    salience = np.array(
        [max(as_float(r[2]), FLOOR[str(r[1])]) + (LEARNED_FROM if r[6] else 0.0) for r in rows], dtype=np.float64
    )
    age = days_since([str(r[3]) for r in rows], now)
    accesses = [_times(r[4]) for r in rows]
    return Scored(
        np.array([as_int(r[0]) for r in rows], dtype=np.int64),
        scores(salience, age, accesses, now) if rows else np.zeros(0),
        np.array([bool(r[5]) for r in rows], dtype=bool),
    )


def _times(recent: object) -> list[str]:
    """The access times a ``node_access.recent`` holds; none when a hand-edited row is unreadable."""
    try:
        found = json.loads(str(recent)) if recent else []
        if isinstance(found, list) and all(isinstance(t, str) for t in found):
            days_since(found, dt.datetime.now(dt.UTC))  # each one a time
            return found
    except ValueError:
        pass
    return []


def apply(conn: apsw.Connection, moves: Plan, at: str) -> None:
    """Write a plan's moves (inside the caller's write transaction)."""
    conn.executemany(
        "insert into cold_node (nid, moved_at, score, reason) values (?, ?, ?, ?)",
        [(nid, at, value, reason) for nid, value, reason in moves.to_cold],
    )
    conn.executemany("delete from cold_node where nid = ?", [(nid,) for nid, _, _ in moves.to_hot])


def settings(meta: Mapping[str, str | None]) -> tuple[int | None, float | None]:
    """The store's ``max_hot_vectors`` and ``cold_below`` from its meta rows (None: not set)."""
    cap, below = meta.get("max_hot_vectors"), meta.get("cold_below")
    try:
        return (int(cap) if cap else None), (float(below) if below else None)
    except ValueError:
        raise InvalidInput(
            f"the store's retention settings are unreadable (max_hot_vectors {cap!r}, cold_below {below!r}); "
            "set them again",
            hint=Hint("set_retention"),
        ) from None


def write_settings(conn: apsw.Connection, max_hot_vectors: int | None, cold_below: float | None) -> None:
    """Set both settings (None: off), inside the caller's write transaction; a bad value is a clear error."""
    if max_hot_vectors is not None and (
        isinstance(max_hot_vectors, bool) or not isinstance(max_hot_vectors, int) or max_hot_vectors < 1
    ):
        raise InvalidInput(
            "max_hot_vectors must be a whole number of vectors (1 or more), or None for no cap; "
            f"got {max_hot_vectors!r}"
        )
    if cold_below is not None and (
        isinstance(cold_below, bool) or not isinstance(cold_below, int | float) or not math.isfinite(cold_below)
    ):
        raise InvalidInput(f"cold_below must be a finite retention score, or None for no threshold; got {cold_below!r}")
    for key, value in zip(SETTINGS, (max_hot_vectors, cold_below), strict=True):
        if value is None:
            conn.execute("delete from meta where key = ?", (key,))
        else:
            conn.execute("insert or replace into meta (key, value) values (?, ?)", (key, repr(value)))


def run(writer: Writer, *, dry_run: bool, progress: Callable[[int, int], None] | None = None) -> int:
    """Score every memory and move those whose tier changed, in one transaction; how many moved.

    With no setting and nothing cold, nothing is read. A move renews the vector index's epoch, so
    every open store reads its (smaller or larger) index again at its next search.
    """
    conn = writer.conn
    cap, below = settings(writer.store.meta_values(SETTINGS))
    if cap is None and below is None and conn.execute("select 1 from cold_node limit 1").fetchone() is None:
        return 0
    with writer.transaction():
        now = writer.clock()
        moves = plan(score_store(conn, _time(now)), max_hot=cap, threshold=below)
        moved = len(moves.to_cold) + len(moves.to_hot)
        if moved and not dry_run:
            apply(conn, moves, now)
            writer.reconciler.lane.renew()
    if progress is not None:
        progress(moved, moved)
    return moved


def _time(at: str) -> dt.datetime:
    return dt.datetime.fromisoformat(at.replace("Z", "+00:00"))
