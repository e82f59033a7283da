"""Precision of the rule extractor: a labelled sample of the facts it writes on LoCoMo and BEAM turns.

    python bench/extract_precision.py [--sample OUT.jsonl] [--labels FILE] [--data DIR] [--json OUT]
        [--per-dataset 90] [--seed 0]

Every person turn (assistant turns skipped, as ingest does) of ``locomo/locomo10.json`` and
``beam/beam_100K.tar.xz`` under ``--data`` (default ``../shared/data``) goes through
``RuleExtractor().extract(text, speaker=..., said_at=...)``; each fact it writes becomes a record
``{key, dataset, conversation, turn_id, speaker, said_at, text, subject, slot, value}``.

``--sample OUT.jsonl`` draws a deterministic random sample (``--seed``, ``--per-dataset`` facts from each
dataset, or all it has) and writes it for labelling. Otherwise the labels (``--labels``, default
``tests/fixtures/extract_labels.jsonl``: the records plus ``"correct": bool`` and ``"why"``) are scored:
each labelled turn is extracted again with the current extractor; a labelled fact it no longer writes
is counted as ``dropped`` (and left out of precision), a fact it now writes on a labelled turn that has
no label is counted as ``unlabelled``. Precision = correct / (labelled and still written), overall, per
dataset, per slot and per slot family (``opinion of …``, ``… date``, ``… budget``: slots named after their
object). Scoring needs only the labels (they carry each turn's text); when the data is there it also counts
the facts each dataset yields in all (``facts_in_all``). The JSON goes to stdout (and ``--json``), progress
to stderr; a missing data or labels file is one line on stderr and exit code 2.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
from common import emit, progress  # noqa: E402

from worlddb_lite import RuleExtractor, load_conversations  # noqa: E402
from worlddb_lite.text.dates import parse_time  # noqa: E402
from worlddb_lite.types import is_assistant  # noqa: E402

DATASETS = {"locomo": "locomo/locomo10.json", "beam": "beam/beam_100K.tar.xz"}
DEFAULT_LABELS = ROOT / "tests" / "fixtures" / "extract_labels.jsonl"
FALLBACK_TIME = "2000-01-01T00:00:00.000000Z"  # a turn with no date of its own or its session's
FIELDS = ("key", "dataset", "conversation", "turn_id", "speaker", "text", "subject", "slot", "value")


class BenchError(Exception):
    """A missing or unreadable input: reported as one line, exit code 2."""


def fact_key(dataset: str, conversation: str, turn_id: str, slot: str, value: str) -> str:
    return f"{dataset}/{conversation}/{turn_id}/{slot}/{value}"


def slot_family(slot: str) -> str:
    """Slots the extractor names after their object, grouped: "opinion of pizza" -> "opinion of …"."""
    if slot.startswith("opinion of "):
        return "opinion of …"
    for tail in (" date", " budget", " accuracy"):
        if slot.endswith(tail) and slot != tail.strip():
            return "…" + tail
    return slot


def turn_key(record: dict[str, Any]) -> tuple[str, str, str]:
    return (record["dataset"], record["conversation"], record["turn_id"])


def facts_of(extractor: RuleExtractor, text: str, speaker: str | None, said_at: str) -> list[tuple[str, str, str]]:
    """The (subject, slot, value) of every fact the extractor writes for one turn, deduplicated, in order."""
    found = extractor.extract(text, speaker=speaker, said_at=said_at)
    return list(dict.fromkeys((f.subject, f.slot, f.value) for f in found.facts))


def person_turns(dataset: str, path: Path) -> Iterator[dict[str, Any]]:
    """Every person turn of a dataset: {dataset, conversation, turn_id, speaker, said_at, text}."""
    if not path.exists():
        raise BenchError(f"{dataset} data not found: {path}")
    try:
        conversations = load_conversations(path, dataset)
    except Exception as exc:  # any loader failure is one line for the user
        raise BenchError(f"cannot load {dataset} data {path}: {exc}") from exc
    for conversation in conversations:
        for session in conversation.sessions:
            for turn in session.turns:
                if is_assistant(turn.speaker) or not turn.text:
                    continue
                when = turn.at or session.date
                yield {
                    "dataset": dataset,
                    "conversation": str(conversation.conversation_id),
                    "turn_id": str(turn.turn_id),
                    "speaker": turn.speaker,
                    "said_at": parse_time(when, field="turn time") if when else FALLBACK_TIME,
                    "text": turn.text,
                }


def all_facts(data: Path, extractor: RuleExtractor) -> dict[str, list[dict[str, Any]]]:
    """Every fact the extractor writes on every person turn, per dataset."""
    out: dict[str, list[dict[str, Any]]] = {}
    for dataset, rel in DATASETS.items():
        records: list[dict[str, Any]] = []
        turns = 0
        for turn in person_turns(dataset, data / rel):
            turns += 1
            for subject, slot, value in facts_of(extractor, turn["text"], turn["speaker"], turn["said_at"]):
                key = fact_key(dataset, turn["conversation"], turn["turn_id"], slot, value)
                records.append({"key": key, **turn, "subject": subject, "slot": slot, "value": value})
        progress(f"{dataset}: {turns} person turns, {len(records)} facts")
        out[dataset] = records
    return out


def draw(records: dict[str, list[dict[str, Any]]], per_dataset: int, seed: int) -> list[dict[str, Any]]:
    """A deterministic sample: ``per_dataset`` facts from each dataset (all if fewer), unique keys."""
    rng = random.Random(seed)
    sample: list[dict[str, Any]] = []
    for dataset in sorted(records):
        unique = list({r["key"]: r for r in records[dataset]}.values())
        sample.extend(rng.sample(unique, min(per_dataset, len(unique))))
    return sample


def read_labels(path: Path) -> list[dict[str, Any]]:
    """The labels file, checked: every record has the fields and a boolean ``correct``, keys unique."""
    if not path.exists():
        raise BenchError(f"labels file not found: {path}")
    labels: list[dict[str, Any]] = []
    seen: set[str] = set()
    for n, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise BenchError(f"{path}:{n}: not JSON: {exc}") from exc
        missing = [f for f in (*FIELDS, "correct") if f not in record]
        if missing:
            raise BenchError(f"{path}:{n}: missing {', '.join(missing)}")
        if not isinstance(record["correct"], bool):
            raise BenchError(f"{path}:{n}: correct must be true or false")
        if record["key"] in seen:
            raise BenchError(f"{path}:{n}: duplicate key {record['key']}")
        seen.add(record["key"])
        labels.append(record)
    if not labels:
        raise BenchError(f"labels file is empty: {path}")
    return labels


def _ratio(correct: int, n: int) -> dict[str, Any]:
    return {"precision": round(correct / n, 4) if n else None, "correct": correct, "n": n}


def _grouped(groups: dict[str, list[bool]]) -> dict[str, dict[str, Any]]:
    """Precision per group, the most frequent first."""
    order = sorted(groups, key=lambda g: (-len(groups[g]), g))
    return {g: _ratio(sum(groups[g]), len(groups[g])) for g in order}


def score(labels: Iterable[dict[str, Any]], produced: dict[tuple[str, str, str], set[str]]) -> dict[str, Any]:
    """Precision of labelled facts, given the fact keys the current extractor writes on each labelled turn.

    ``produced`` maps (dataset, conversation, turn_id) to the keys of the facts written there now.
    A labelled fact not among them is ``dropped`` (not counted in precision); a key written on a
    labelled turn with no label is ``unlabelled``.
    """
    labels = list(labels)
    labelled = {r["key"] for r in labels}
    kept = [r for r in labels if r["key"] in produced.get(turn_key(r), set())]
    dropped = [r["key"] for r in labels if r["key"] not in produced.get(turn_key(r), set())]
    turns = {turn_key(r) for r in labels}
    unlabelled = sorted(k for t in turns for k in produced.get(t, set()) if k not in labelled)
    by_dataset: dict[str, list[bool]] = defaultdict(list)
    by_slot: dict[str, list[bool]] = defaultdict(list)
    by_family: dict[str, list[bool]] = defaultdict(list)
    for r in kept:
        by_dataset[r["dataset"]].append(r["correct"])
        by_slot[r["slot"]].append(r["correct"])
        by_family[slot_family(r["slot"])].append(r["correct"])
    errors = Counter(r.get("why", "") for r in kept if not r["correct"])
    return {
        "labelled": len(labels),
        "still_produced": len(kept),
        "dropped": len(dropped),
        "dropped_keys": dropped,
        "unlabelled_new": len(unlabelled),
        "unlabelled_keys": unlabelled,
        "overall": _ratio(sum(r["correct"] for r in kept), len(kept)),
        "per_dataset": {d: _ratio(sum(v), len(v)) for d, v in sorted(by_dataset.items())},
        "per_slot": _grouped(by_slot),
        "per_slot_family": _grouped(by_family),
        "error_reasons": dict(errors.most_common()),
    }


def produced_on(labels: list[dict[str, Any]], extractor: RuleExtractor) -> dict[tuple[str, str, str], set[str]]:
    """Re-extract every labelled turn (from the text stored with its labels)."""
    out: dict[tuple[str, str, str], set[str]] = {}
    for r in labels:
        t = turn_key(r)
        if t in out:
            continue
        said_at = r.get("said_at") or FALLBACK_TIME
        out[t] = {fact_key(*t, slot, value) for _, slot, value in facts_of(extractor, r["text"], r["speaker"], said_at)}
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", default=str(ROOT.parent / "shared" / "data"), help="folder with locomo/ and beam/")
    parser.add_argument("--sample", help="draw a sample and write it here (JSONL) for labelling")
    parser.add_argument("--labels", default=str(DEFAULT_LABELS), help="labelled facts to score")
    parser.add_argument("--per-dataset", type=int, default=90, help="facts sampled from each dataset")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", help="also write the result to this file")
    args = parser.parse_args(argv)
    try:
        extractor = RuleExtractor()
        if args.sample:
            records = all_facts(Path(args.data), extractor)
            sample = draw(records, args.per_dataset, args.seed)
            Path(args.sample).write_text("".join(json.dumps(r) + "\n" for r in sample))
            progress(f"wrote {len(sample)} facts to {args.sample}")
            result: dict[str, Any] = {
                "facts": {d: len(v) for d, v in records.items()},
                "sample": dict(Counter(r["dataset"] for r in sample)),
                "seed": args.seed,
            }
        else:
            labels = read_labels(Path(args.labels))
            progress(f"scoring {len(labels)} labelled facts from {args.labels}")
            result = score(labels, produced_on(labels, extractor))
            data = Path(args.data)
            if all((data / rel).exists() for rel in DATASETS.values()):
                result["facts_in_all"] = {d: len(v) for d, v in all_facts(data, extractor).items()}
            else:
                progress(f"no data under {data}: facts_in_all not counted")
                result["facts_in_all"] = None
    except BenchError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    emit(result, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
