"""The assistant's own path, measured: notes written one by one, and a conversation appended live beside them.

    python bench/assistant.py [PATH] [--modes notes,mixed] [--verbatim] [--limit-conversations N] [--json OUT]

LoCoMo (``PATH`` defaults to ``../shared/data/locomo/locomo10.json``), questions of categories 1-4
with real evidence, as ``bench/recall.py`` selects them; each conversation in a fresh store.

* ``notes``: the conversation's ``observation`` entries (notes, each citing the turn it came from)
  written one by one through ``WorldDB.write`` at their session's date into the conversation's
  scope, no turns. A note counts for the dia_id it cites. Flat BM25, dense and their RRF over the
  same notes are measured in the same run (``bench/recall.py``'s baselines), and the ceiling: the
  share of gold evidence some note cites.
* ``mixed``: every turn appended through ``WorldDB.add_turn``, and the notes written through
  ``write`` at their session's date, in one scope. Turns count by their id, notes by the turn they
  cite. Also: of the questions whose evidence some note cites, the share with such a note in the top 10.

A note is written as said of the person the observation is about (``speaker``), through ``write``'s
default path: System 2 links it to the entities it names and learns its facts. ``--verbatim`` writes
the text alone (``extractor=None``), for comparison.

Metrics: recall@1/5/10/20 (share of gold ids in the first k, ``recall_metrics.recall_at_k``).
Progress goes to stderr, the JSON to stdout (and ``--json``).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import recall_metrics as rm  # noqa: E402
from common import emit, environment, progress  # noqa: E402
from recall import DEFAULT_PATHS, Bm25, Case, Dense, first_known, prepare_locomo, source_digest, turn_ids  # noqa: E402

from worlddb_lite import StaticEmbedder, WorldDB  # noqa: E402

KS = (1, 5, 10, 20)
DEPTH = 50
MODES = ("notes", "mixed")


def notes_of(sample: dict[str, Any], dates: dict[str, str]) -> list[tuple[str, str, str, str]]:
    """(note text, the dia_id it cites, its session's date, whom it is about) for every observation of a sample.

    ``dates``: session id -> the session's date as the loader read it.
    """
    out = []
    for key, by_speaker in (sample.get("observation") or {}).items():
        date = dates[key.removeprefix("session_").removesuffix("_observation")]
        for person, entries in by_speaker.items():
            for entry in entries:
                text, cited = entry[0], entry[1]
                for dia_id in cited if isinstance(cited, list) else [cited]:
                    out.append((str(text), rm.normalise_dia_id(str(dia_id)), str(date), str(person)))
    return out


def note_case(case: Case, notes: Sequence[tuple[str, str, str, str]]) -> Case:
    """The case with the notes as the baselines' corpus (each note's id: the dia_id it cites)."""
    return Case(case.conversation, [(cited, text) for text, cited, _, _ in notes], case.session_of, case.questions)


def ranking(hits: Sequence[Any], depth: int) -> list[str]:
    """Dia_ids, best first: a note stands for the turn it cites, a turn or fact for its turns."""
    ids = (str(h.node.props["cites"]) if "cites" in h.node.props else tid for h in hits for tid in _ids(h))
    return first_known(ids, None, depth)


def _ids(hit: Any) -> list[str]:
    return [str(hit.node.props["cites"])] if "cites" in hit.node.props else turn_ids(hit.turns)


def score(ranked: Sequence[str], gold: Sequence[str]) -> dict[str, float]:
    return {f"recall@{k}": rm.recall_at_k(ranked, gold, k) for k in KS}


def write_notes(db: WorldDB, scope: str, notes: Sequence[tuple[str, str, str, str]], understood: bool) -> list[float]:
    """Each note through ``write`` on its own (``understood``: System 2 on it, as by default); the seconds each took."""
    took = []
    for text, cited, date, person in notes:
        started = time.perf_counter()
        options = {} if understood else {"extractor": None}
        db.write(text, scope=scope, valid_at=date, props={"cites": cited}, speaker=person, **options)
        took.append(time.perf_counter() - started)
    return took


def run(path: Path, modes: Sequence[str], limit: int | None, understood: bool = True) -> dict[str, Any]:
    raw = {str(s["sample_id"]): s for s in json.loads(path.read_text("utf-8"))}
    cases = prepare_locomo(path).cases[:limit]
    embedder = StaticEmbedder()
    rows: dict[str, list[dict[str, float]]] = {}
    ceiling: list[float] = []
    note_in_top: list[float] = []
    for n, case in enumerate(cases, 1):
        conversation = case.conversation
        scope = conversation.scopes[0]
        dates = {str(session.session_id): str(session.date) for session in conversation.sessions}
        notes = notes_of(raw[conversation.conversation_id], dates)
        cited = {c for _, c, _, _ in notes}
        progress(
            f"[{n}/{len(cases)}] {conversation.conversation_id}: {len(notes)} notes, {len(case.questions)} questions"
        )
        ceiling += [rm.recall_at_k(sorted(cited), q.gold, len(cited) or 1) for q in case.questions]
        if "notes" in modes:
            flat = note_case(case, notes)
            bm25, dense = Bm25(), Dense(embedder)
            bm25.index(flat)
            dense.index(flat)
            with tempfile.TemporaryDirectory(prefix="assistant-bench-") as folder:
                with WorldDB(str(Path(folder) / "notes.db")) as db:
                    write_notes(db, scope, notes, understood)
                    for q in case.questions:
                        # several notes may cite one turn: each ranking counts a turn once, at its best note
                        b = first_known(bm25.query(q.text, DEPTH * 4), None, DEPTH)
                        d = first_known(dense.query(q.text, DEPTH * 4), None, DEPTH)
                        found = ranking(db.recall(q.text, scope=scope, k=DEPTH).hits, DEPTH)
                        for name, ranked in (
                            ("notes/worlddb", found),
                            ("notes/bm25", b),
                            ("notes/dense", d),
                            ("notes/rrf", rm.rrf([b, d], DEPTH)),
                        ):
                            rows.setdefault(name, []).append(score(ranked, q.gold))
            bm25.close()
        if "mixed" in modes:
            with tempfile.TemporaryDirectory(prefix="assistant-bench-") as folder:
                with WorldDB(str(Path(folder) / "mixed.db")) as db:
                    for session in conversation.sessions:
                        for turn in session.turns:
                            db.add_turn(
                                turn.text,
                                scope=scope,
                                session=str(session.session_id),
                                speaker=turn.speaker,
                                at=turn.at or session.date,
                                props={**turn.props, "turn_id": turn.turn_id},
                            )
                    write_notes(db, scope, notes, understood)
                    for q in case.questions:
                        hits = db.recall(q.text, scope=scope, k=DEPTH).hits
                        rows.setdefault("mixed/worlddb", []).append(score(ranking(hits, DEPTH), q.gold))
                        if cited & set(q.gold):
                            top = hits[:10]
                            note_in_top.append(float(any(h.node.props.get("cites") in q.gold for h in top)))
    return {
        "dataset": "locomo",
        "path": str(path),
        "code": {"worlddb_lite_sha256_16": source_digest(), "finished": time.strftime("%Y-%m-%dT%H:%M:%S%z")},
        "params": {"modes": list(modes), "limit_conversations": limit, "depth": DEPTH, "notes_understood": understood},
        "questions": len(ceiling),
        "ceiling_notes_cite_gold": round(sum(ceiling) / len(ceiling), 4) if ceiling else None,
        "systems": {name: rm.summarise(r) for name, r in rows.items()},
        "mixed_note_in_top10_when_a_note_cites_gold": round(sum(note_in_top) / len(note_in_top), 4)
        if note_in_top
        else None,
        "env": environment(),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("path", nargs="?", help="the LoCoMo file (default: ../shared/data/locomo/locomo10.json)")
    parser.add_argument("--modes", default=",".join(MODES), help="comma-separated, from " + ", ".join(MODES))
    parser.add_argument("--limit-conversations", type=int, help="the first N conversations only")
    parser.add_argument(
        "--verbatim", action="store_true", help="write each note's text alone (extractor=None: no System 2)"
    )
    parser.add_argument("--json", help="also write the result to this file")
    args = parser.parse_args()
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    if not modes or set(modes) - set(MODES):
        raise SystemExit(f"--modes takes some of {', '.join(MODES)}, got {args.modes!r}")
    path = Path(args.path) if args.path else DEFAULT_PATHS["locomo"]
    if not path.is_file():
        raise SystemExit(f"{path} does not exist; give the LoCoMo file")
    emit(run(path, modes, args.limit_conversations, not args.verbatim), args.json)


if __name__ == "__main__":
    main()
