"""Supersession on real data: BEAM-100K's knowledge-update questions.

    python bench/supersession.py [--json OUT] [--detail]

Ingests BEAM-100K (through ``load`` + ``ingest``, the rule-based extractor on) into a fresh
store, then, for every knowledge_update question whose ``source_chat_ids`` name
``original_info`` and ``updated_info`` messages, asks the store in plain SQL whether a Fact
drawn from an updated message ``supersedes`` a Fact drawn from an original message. Prints
the share, and how many of those messages yielded any fact at all (what limits the share).
``--detail`` also prints, per question, the facts (slot: value) drawn from each side, to stderr.
"""

from __future__ import annotations

import argparse
import json
import sys
import tarfile
import tempfile
import time
from pathlib import Path

import apsw

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import emit, environment, progress  # noqa: E402

from worlddb_lite import WorldDB  # noqa: E402
from worlddb_lite.write.loaders import load  # noqa: E402

ARCHIVE = Path(__file__).resolve().parents[2] / "shared" / "data" / "beam" / "beam_100K.tar.xz"


def questions(archive: Path) -> list[tuple[str, dict]]:
    """(chat id, knowledge_update question) for every chat in the archive."""
    out = []
    with tarfile.open(archive) as tar:
        for member in tar.getmembers():
            parts = member.name.split("/")
            if parts[-1] == "probing_questions.json" and member.isfile():
                handle = tar.extractfile(member)
                assert handle is not None
                data = json.loads(handle.read().decode("utf-8"))
                chat_id = parts[-3]
                out.extend((chat_id, q) for q in data.get("knowledge_update", []))
    return out


def facts_of(conn: apsw.Connection, chat: str, message_ids: list[int]) -> set[int]:
    """Fact nodes that refer to the Turn nodes of those messages."""
    found: set[int] = set()
    for message in message_ids:
        rows = conn.execute(
            "select f.nid from node as t join edge as e on e.dst = t.nid and e.type = 'refers_to' "
            "join node as f on f.nid = e.src and f.type = 'Fact' where t.type = 'Turn' "
            "and json_extract(t.body, '$.props.conversation') = ? and json_extract(t.body, '$.props.turn_id') = ?",
            (f"beam-{chat}", str(message)),
        )
        found.update(int(r[0]) for r in rows)
    return found


def describe(conn: apsw.Connection, facts: set[int]) -> list[str]:
    """``slot: value`` of each fact, with the ids of the facts that supersede it."""
    out = []
    for nid in sorted(facts):
        body = json.loads(conn.execute("select body from node where nid = ?", (nid,)).fetchone()[0])
        props = body.get("props", {})
        by = [int(r[0]) for r in conn.execute("select src from edge where type = 'supersedes' and dst = ?", (nid,))]
        out.append(f"#{nid} {props.get('slot')}: {props.get('value')}" + (f" (superseded by {by})" if by else ""))
    return out


def reachable(conn: apsw.Connection, facts: set[int]) -> set[int]:
    """Facts these supersede, directly or through facts in between."""
    rows = conn.execute(
        "with recursive down(nid) as (select value from json_each(?) union "
        "select e.dst from edge as e join down on e.src = down.nid where e.type = 'supersedes') "
        "select nid from down",
        (json.dumps(sorted(facts)),),
    )
    return {int(r[0]) for r in rows} - facts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--archive", default=str(ARCHIVE))
    parser.add_argument("--json", help="also write the result to this file")
    parser.add_argument("--detail", action="store_true", help="print each question's facts to stderr")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = str(Path(tmp) / "beam.db")
        started = time.perf_counter()
        progress("ingesting BEAM-100K")
        with WorldDB(path) as db:
            for conversation in load(args.archive, "beam"):
                db.ingest(conversation)
        ingest_s = time.perf_counter() - started
        conn = apsw.Connection(path, flags=apsw.SQLITE_OPEN_READONLY)
        counted = with_original = with_updated = superseded = chained = 0
        for chat, q in questions(Path(args.archive)):
            ids = q.get("source_chat_ids")
            if not isinstance(ids, dict) or not ids.get("original_info") or not ids.get("updated_info"):
                continue
            counted += 1
            old = facts_of(conn, chat, list(ids["original_info"]))
            new = facts_of(conn, chat, list(ids["updated_info"]))
            with_original += bool(old)
            with_updated += bool(new)
            if (
                old
                and new
                and conn.execute(
                    "select 1 from edge where type = 'supersedes' and src in (select value from json_each(?)) "
                    "and dst in (select value from json_each(?)) limit 1",
                    (json.dumps(sorted(new)), json.dumps(sorted(old))),
                ).fetchone()
            ):
                superseded += 1
            if old and new and old & reachable(conn, new):
                chained += 1
            if args.detail:
                print(f"chat {chat}: {q.get('question')}", file=sys.stderr)
                for side, facts_ in (("original", old), ("updated", new)):
                    for line in describe(conn, facts_) or ["(no fact)"]:
                        print(f"    {side}: {line}", file=sys.stderr)
        facts = conn.execute("select count(*) from node where type = 'Fact'").fetchone()[0]
        supersedes = conn.execute("select count(*) from edge where type = 'supersedes'").fetchone()[0]
        conn.close()
    emit(
        {
            "knowledge_update_questions": counted,
            "original_message_has_a_fact": with_original,
            "updated_message_has_a_fact": with_updated,
            "updated_fact_supersedes_original_fact": superseded,
            "share": round(superseded / counted, 4) if counted else None,
            "updated_fact_supersedes_original_through_a_chain": chained,
            "share_through_chains": round(chained / counted, 4) if counted else None,
            "store": {"facts": facts, "supersedes_edges": supersedes, "ingest_s": round(ingest_s, 1)},
            "env": environment(),
        },
        args.json,
    )


if __name__ == "__main__":
    main()
