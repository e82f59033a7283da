"""Profiles and histories: what a scope knows of each subject now, and what changed when.

For every subject with at least ``MIN_FACTS`` facts in a scope, two Summary nodes inside the scope,
``derived_from`` its facts and the turns and notes they were learned from:

* ``profile``: its current facts, one line each, with the date each became true;
* ``history``: every value it held, in the order they became true, each closed one with its end
  and the current ones marked, so "how did X change" and "what happened first" have one answer.

They are refreshed by the rule the summaries follow: only when one of the subject's facts was
written or closed after the summary was, the new version superseding the old.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

from ..store import queries
from ..write.writer import Writer
from .summaries import Drafted, Pending, Skipped, SummaryItem

MIN_FACTS = 2  # one fact is its own profile
KINDS = ("profile", "history")


def stale_profiles(
    writer: Writer, scopes: Sequence[tuple[int, str]], *, older_than: str, skipped: list[Skipped] | None = None
) -> list[tuple[Pending, Drafted]]:
    """The profiles and histories to (re)write in ``scopes``, drafted: subjects whose facts changed since theirs.

    Only subjects none of whose facts changed after ``older_than`` (a conversation about them still going on
    waits: added to ``skipped`` when they have the ``MIN_FACTS`` a profile needs).
    """
    conn = writer.conn
    out = []
    for scope, _ in scopes:
        by_subject: dict[str, list[tuple[int, str, str, str, str, str | None, str]]] = defaultdict(list)
        for row in queries.scope_facts(conn, scope):
            by_subject[row[1].lower()].append(row)
        summarised = set(queries.summarised_subjects(conn, scope, KINDS))
        for subject in sorted(set(by_subject) | summarised):
            facts = by_subject.get(subject, [])
            if facts and max(row[6] for row in facts) > older_than:  # still being talked about: later
                if skipped is not None and len(facts) >= MIN_FACTS:
                    changed = max(row[6] for row in facts)
                    old = queries.current_summary(conn, scope, "profile", of=subject)
                    if old is None or changed > old[1]:  # a profile as new as its facts waits for nothing
                        skipped.append(Skipped("timelines", "subject", facts[-1][1], "recent", changed))
                continue
            if len(facts) < MIN_FACTS:  # too few facts hold now: what was written of the subject goes
                for kind in KINDS:
                    old = queries.current_summary(conn, scope, kind, of=subject)
                    if old is not None:
                        out.append((Pending(scope, kind, subject, [], subject, None, old[0]), Drafted("", ())))
                continue
            changed = max(row[6] for row in facts)
            turns = tuple(writer.store.header(n).id.hex() for n in queries.fact_sources(conn, [r[0] for r in facts]))
            name = facts[-1][1]
            about = tuple(writer.store.header(n).id.hex() for n in queries.shared_entities(conn, [r[0] for r in facts]))
            every = [_item(writer, row) for row in facts]
            now = [_item(writer, row) for row in facts if row[5] is None]
            for kind, items, text in (
                ("profile", now, _profile(name, facts)),
                ("history", every, _history(name, facts)),
            ):
                old = queries.current_summary(conn, scope, kind, of=subject)
                if old is not None and changed <= old[1] and old[2] == len(items):
                    continue  # nothing changed since it was written
                if not items:  # nothing holds now (a profile): the old one goes, if any
                    if old is not None:
                        out.append((Pending(scope, kind, name, [], subject, None, old[0]), Drafted("", ())))
                    continue
                pending = Pending(scope, kind, name, items, subject, None, old[0] if old else None, turns, about)
                out.append((pending, Drafted(text, tuple(i.id for i in items) + turns)))
    return out


def _item(writer: Writer, row: tuple[int, str, str, str, str, str | None, str]) -> SummaryItem:
    nid, _, slot, value, start, _, _ = row
    return SummaryItem(writer.store.header(nid).id.hex(), start, None, f"{slot}: {value}")


def _profile(name: str, facts: list[tuple[int, str, str, str, str, str | None, str]]) -> str:
    lines = [f"- {slot}: {value} (since {start[:10]})" for _, _, slot, value, start, end, _ in facts if end is None]
    return "\n".join([f"Profile of {name}: what holds now", *lines])


def _history(name: str, facts: list[tuple[int, str, str, str, str, str | None, str]]) -> str:
    lines = [
        f"[{start[:10]}] {slot}: {value}" + (f" (until {end[:10]})" if end is not None else " (current)")
        for _, _, slot, value, start, end, _ in facts
    ]
    return "\n".join([f"History of {name}: what changed when", *lines])
