"""Retrieval metrics for ``bench/recall.py``: pure functions over ranked lists of dataset ids.

A ranking is a list of distinct ids, best first (it may be shorter than the corpus: ids past
the rank depth, or never matched, are "not ranked"). Gold is a collection of ids.
"""

from __future__ import annotations

import math
import re
from collections.abc import Collection, Hashable, Iterable, Mapping, Sequence
from typing import Any

RRF_K = 60
_EVIDENCE = re.compile(r"D:?(\d+):(\d+)")


def recall_at_k(ranked: Sequence[Hashable], gold: Collection[Hashable], k: int) -> float:
    """|gold ∩ top-k| / |gold| (0 when there is no gold)."""
    wanted = set(gold)
    if not wanted:
        return 0.0
    return len(wanted & set(ranked[:k])) / len(wanted)


def recall_any(ranked: Sequence[Hashable], gold: Collection[Hashable], k: int) -> float:
    """1 if any gold id is in the top k."""
    top = set(ranked[:k])
    return float(any(g in top for g in gold))


def recall_all(ranked: Sequence[Hashable], gold: Collection[Hashable], k: int) -> float:
    """1 if every gold id is in the top k (LongMemEval: 1 for empty gold, as upstream's ``all([])``)."""
    top = set(ranked[:k])
    return float(all(g in top for g in gold))


def dcg(relevances: Sequence[float], k: int, *, discount: str = "standard") -> float:
    """DCG of the first k relevances.

    ``standard``: Σ rel_i / log2(i + 1) (rank 1 undiscounted). ``longmemeval``: LongMemEval's
    ``eval_utils.dcg``, rel_1 + Σ_{i≥2} rel_i / log2(i) (ranks 1 and 2 both undiscounted).
    """
    rels = list(relevances)[:k]
    if discount == "standard":
        return sum(r / math.log2(i + 2) for i, r in enumerate(rels))
    if discount == "longmemeval":
        return (rels[0] + sum(r / math.log2(i + 1) for i, r in enumerate(rels) if i >= 1)) if rels else 0.0
    raise ValueError(f"unknown discount {discount!r}")


def ndcg(
    ranked: Sequence[Hashable],
    gold: Collection[Hashable],
    k: int,
    *,
    corpus: Sequence[Hashable] | None = None,
    discount: str = "standard",
) -> float:
    """Binary-relevance NDCG@k; the ideal ranking puts every relevant corpus entry first.

    ``corpus`` (a list, duplicates allowed, as LongMemEval's turn-to-session labels) sets how
    many relevant entries the ideal ranking holds; without it, the gold set itself. 0 when no
    entry is relevant.
    """
    wanted = set(gold)
    labels = [1.0 if c in wanted else 0.0 for c in corpus] if corpus is not None else [1.0] * len(wanted)
    ideal = dcg(sorted(labels, reverse=True), k, discount=discount)
    if ideal == 0:
        return 0.0
    return dcg([1.0 if r in wanted else 0.0 for r in ranked], k, discount=discount) / ideal


def distinct(values: Iterable[Hashable]) -> list[Hashable]:
    """First occurrences, in order."""
    seen: set[Hashable] = set()
    out = []
    for v in values:
        if v not in seen:
            seen.add(v)
            out.append(v)
    return out


def session_recall_any(
    ranked: Sequence[Hashable], gold_sessions: Collection[Hashable], session_of: Mapping[Hashable, Hashable], k: int = 5
) -> float:
    """1 if any gold session is among the first k distinct sessions of the ranked turns."""
    sessions = distinct(session_of[t] for t in ranked)[:k]
    return float(any(s in gold_sessions for s in sessions))


def turn_to_session(
    ranked: Sequence[Hashable],
    gold_turns: Collection[Hashable],
    corpus: Sequence[Hashable],
    session_of: Mapping[Hashable, Hashable],
    k: int,
) -> tuple[float, float, float]:
    """LongMemEval's ``evaluate_retrieval_turn2session``: session recall_any, recall_all, NDCG from turns.

    Turns become their sessions (duplicates kept), gold becomes the set of gold sessions, and
    k widens to the smallest k' whose top k' holds k distinct sessions (or the whole corpus).
    NDCG then uses upstream's labels: every corpus turn of a gold session counts as relevant.
    """
    sessions = [session_of[t] for t in ranked]
    corpus_sessions = [session_of[t] for t in corpus]
    gold = set(session_of[t] for t in gold_turns)
    effective = k
    while effective <= len(corpus_sessions) and len(set(sessions[:effective])) < k:
        effective += 1
    top = set(sessions[:effective])
    return (
        float(any(g in top for g in gold)),
        float(all(g in top for g in gold)),
        ndcg(sessions, gold, effective, corpus=corpus_sessions, discount="longmemeval"),
    )


def knowledge_update_order(
    ranked: Sequence[Hashable], original: Collection[Hashable], updated: Collection[Hashable]
) -> tuple[bool, str]:
    """Does the best-ranked updated message rank above the best-ranked original one?

    Returns (success, outcome). Updated ranked and original not: success. Original ranked and
    updated not, or neither ranked: failure. An id in both sets ranks equal with itself: a tie,
    which is a failure (the update is not above the original).
    """
    position = {r: i for i, r in enumerate(ranked)}
    best_new = min((position[u] for u in updated if u in position), default=None)
    best_old = min((position[o] for o in original if o in position), default=None)
    if best_new is None and best_old is None:
        return False, "neither_ranked"
    if best_new is None:
        return False, "only_original_ranked"
    if best_old is None:
        return True, "only_updated_ranked"
    if best_new == best_old:
        return False, "tie"
    return (True, "updated_above") if best_new < best_old else (False, "original_above")


def rrf(rankings: Sequence[Sequence[Hashable]], depth: int, k: int = RRF_K) -> list[Hashable]:
    """Reciprocal rank fusion: Σ 1 / (k + rank), rank from 1; ties go to the best single rank, then first seen."""
    score: dict[Hashable, float] = {}
    best: dict[Hashable, int] = {}
    order: dict[Hashable, int] = {}
    for ranking in rankings:
        for rank, item in enumerate(ranking, 1):
            score[item] = score.get(item, 0.0) + 1.0 / (k + rank)
            best[item] = min(best.get(item, rank), rank)
            order.setdefault(item, len(order))
    return sorted(score, key=lambda i: (-score[i], best[i], order[i]))[:depth]


def parse_locomo_evidence(entries: Iterable[Any], real: Mapping[str, str]) -> tuple[list[str], list[str]]:
    """LoCoMo evidence entries as real dia_ids, and the entries (or parts) that name no real turn.

    Each entry may hold several ids (``"D8:6; D9:17"``, ``"D9:1 D4:4"``); ``"D:11:26"`` reads as
    ``D11:26`` and ``"D30:05"`` as ``D30:5``. ``real`` maps a normalised id (``D<int>:<int>``) to the
    conversation's own dia_id. Kept ids are distinct, in order.
    """
    kept: list[str] = []
    dropped: list[str] = []
    for entry in entries:
        text = str(entry)
        found = _EVIDENCE.findall(text)
        if not found:
            dropped.append(text)
        for session, turn in found:
            key = f"D{int(session)}:{int(turn)}"
            if key in real:
                if real[key] not in kept:
                    kept.append(real[key])
            else:
                dropped.append(key)
    return kept, dropped


def normalise_dia_id(dia_id: str) -> str:
    """``D<int>:<int>`` for a well-formed dia_id (leading zeros dropped), else the id itself."""
    match = re.fullmatch(r"D(\d+):(\d+)", dia_id.strip())
    return f"D{int(match.group(1))}:{int(match.group(2))}" if match else dia_id


def flatten_ids(value: Any) -> list[str]:
    """Every id in a BEAM ``source_chat_ids`` value (an id, a list, lists of lists, a dict of those), as text."""
    if value is None:
        return []
    if isinstance(value, dict):
        return [i for v in value.values() for i in flatten_ids(v)]
    if isinstance(value, list | tuple):
        return [i for v in value for i in flatten_ids(v)]
    return [str(value)]


def mean(values: Iterable[float]) -> float | None:
    """Rounded mean, None for no values."""
    items = list(values)
    return round(sum(items) / len(items), 4) if items else None


def summarise(rows: Sequence[Mapping[str, float]]) -> dict[str, Any]:
    """n and the mean of every metric over rows (each a dict of metric -> value)."""
    names = distinct(name for row in rows for name in row)
    return {"n": len(rows), **{str(name): mean(row[name] for row in rows if name in row) for name in names}}
