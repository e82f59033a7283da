"""Summaries: the consolidator's digests of sessions and of a scope's history, derived from their turns.

A ``Summarizer`` turns a world's dated items (turns and notes, with their speakers) into a text and
the items it drew on. The default, ``ExtractiveSummarizer``, needs no model: it keeps the sentences
that carry the world's events (the words the rest of the world repeats, names, numbers, what the
extractor learned facts from), each with its date and speaker, in the order said. A caller may plug
in an LLM-backed summariser with the same protocol.

Two kinds are written, each a ``Summary`` node with ``derived_from`` edges to the items it used:

* ``session``: one per Session world of at least ``MIN_SESSION_TURNS`` turns that say more than a
  summary line holds, inside the session;
* ``timeline``: a scope's history, a line per session in the order they happened, in parts of
  ``TIMELINE_PART`` sessions (a new session touches the last part only), inside the scope.

A summary is rewritten only when what it covers changed: a turn or note of the session (of a
timeline part's sessions) written, closed, retired or purged since the summary was written
(``queries.items_changed``, read once a run; a link between them is no change). The new version supersedes the old
(``amend``), so the history of summaries stays readable; one whose world no longer qualifies is retired.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from ..errors import InvalidInput
from ..store import queries
from ..text.stopwords import is_function_word
from ..text.words import words
from ..types import is_assistant
from ..write.writer import MemoryIn, Writer

SUMMARY_TYPE = "Summary"
KIND = "summary"  # the prop naming a summary's kind (session, timeline, profile, history)
OF = "of"  # the prop naming the world (or entity) a summary is of
PART = "part"  # a timeline's part number
TIMELINE_PART = 16  # sessions per timeline part: one part's text stays a few hundred tokens
SENTENCE = re.compile(r"(?<=[.!?])\s+(?=[\"'(\[]?[A-Z0-9])")
MIN_WORDS, MAX_WORDS = 4, 60  # a kept sentence says something and still reads as one line
# A session of one turn, or of fewer words than one summary line, is its own summary (the scope's
# timeline covers it); a question and a long answer are worth one (bench/recall.py --consolidate).
MIN_SESSION_TURNS, MIN_SESSION_WORDS = 2, MAX_WORDS


@dataclass(frozen=True)
class Skipped:
    """A world (or a subject) a step left alone this run, and why (``Consolidation.skipped``).

    ``reason``: ``recent`` (something in it changed at ``changed_at``, later than the run's minimum
    age allows: it waits until ``ready_at``) or ``small`` (a session too short to summarise: it is its
    own summary, and the scope's timeline covers it; ``detail`` says how short).
    """

    step: str  # summaries, timelines
    kind: str  # session, timeline (a scope's), subject (a profile and history)
    name: str  # the session's or scope's name, or the subject's
    reason: str  # recent, small
    changed_at: str | None = None  # when what it covers last changed
    ready_at: str | None = None  # recent: when the minimum age is reached (consolidation.run sets it)
    detail: str = ""


@dataclass(frozen=True)
class SummaryItem:
    """One memory a summary may draw on: its id, date, speaker, text and how many facts were learned from it."""

    id: str
    date: str
    speaker: str | None
    text: str
    facts: int = 0


@dataclass(frozen=True)
class Drafted:
    """A summariser's answer: the text, and the ids of the items it drew on (its ``derived_from``)."""

    text: str
    sources: tuple[str, ...]


@runtime_checkable
class Summarizer(Protocol):
    """Turns a world's items into a summary. ``kind`` is ``session`` or ``timeline``; ``title`` names the world."""

    def summarize(self, kind: str, title: str, items: Sequence[SummaryItem]) -> Drafted: ...


class ExtractiveSummarizer:
    """The sentences that carry a world's events, dated and attributed, in the order said; no model.

    A sentence scores by the content words it shares with the other items of the world (what the
    world is about), with a bonus for names and numbers, for an item facts were learned from, and for
    the person rather than the assistant. A session keeps a sentence per ``turns_per_line`` turns (2 to
    ``per_session``, at most one per item); a timeline keeps each session's best one.
    """

    def __init__(self, per_session: int = 8, turns_per_line: int = 4) -> None:
        self.per_session = per_session
        self.turns_per_line = turns_per_line

    def summarize(self, kind: str, title: str, items: Sequence[SummaryItem]) -> Drafted:
        if kind == "timeline":  # items are already one per session: the best sentence of each
            picked = [(item, _best(item, items)) for item in items]
        else:
            scored = [(score, i, sentence) for i, item in enumerate(items) for score, sentence in _scored(item, items)]
            best: dict[int, tuple[float, str]] = {}
            keep = max(2, min(self.per_session, round(len(items) / self.turns_per_line)))
            for score, i, sentence in sorted(scored, key=lambda s: (-s[0], s[1])):
                if i not in best and len(best) < keep:
                    best[i] = (score, sentence)
            picked = [(items[i], best[i][1]) for i in sorted(best)]
            if not picked:  # no sentence stands alone (a long unpunctuated turn, code): each turn's opening words
                picked = [(item, _opening(item)) for item in items[:keep]]
        lines = [f"[{item.date[:10]}] {item.speaker or 'someone'}: {sentence}" for item, sentence in picked if sentence]
        heading = f"{'Timeline' if kind == 'timeline' else 'Summary'} of {title}"
        return Drafted("\n".join([heading, *lines]), tuple(item.id for item, sentence in picked if sentence))


def _content(text: str) -> set[str]:
    return {w.lower() for w in words(text) if len(w) > 2 and not is_function_word(w.lower())}


def _scored(item: SummaryItem, items: Sequence[SummaryItem]) -> list[tuple[float, str]]:
    """(score, sentence) of each sentence of ``item`` long enough to stand alone."""
    others: set[str] = set()
    for other in items:
        if other is not item:
            others |= _content(other.text)
    out = []
    for sentence in SENTENCE.split(" ".join(item.text.split())):
        said = words(sentence)
        if not MIN_WORDS <= len(said) <= MAX_WORDS:
            continue
        shared = len(_content(sentence) & others)
        names = sum(1 for w in said[1:] if w[:1].isupper() or w[:1].isdigit())
        score = (
            shared + 0.5 * min(names, 4) + (1.0 if item.facts else 0.0) + (0.0 if is_assistant(item.speaker) else 1.0)
        )
        out.append((score / (1.0 + len(said) / 40.0), sentence))
    return out


def _best(item: SummaryItem, items: Sequence[SummaryItem]) -> str:
    scored = _scored(item, items)
    if not scored:
        return _opening(item)
    return max(scored, key=lambda s: s[0])[1]


def _opening(item: SummaryItem) -> str:
    return " ".join(item.text.split()[:MAX_WORDS])


@dataclass
class Pending:
    """A summary to write: where, of what kind, what it covers, and the one it replaces."""

    world: int
    kind: str
    title: str
    items: list[SummaryItem]
    of: str  # what it is of: a world's id, or an entity's name (profiles)
    part: int | None = None
    old: int | None = None
    also: tuple[str, ...] = ()  # further ids it may derive from (the turns a profile's facts came from)
    about: tuple[str, ...] = ()  # entities it is about (``refers_to``): the entity lane reaches it as their facts


def stale_sessions(
    writer: Writer, changed_at: Mapping[int, str], *, older_than: str, skipped: list[Skipped] | None = None
) -> list[Pending]:
    """Sessions of enough turns and words, quiet since ``older_than``, with no summary newer than them.

    Enough: ``MIN_SESSION_TURNS`` turns and ``MIN_SESSION_WORDS`` words.

    Quiet: none of its turns was written, closed or retired since then (a session still going on
    waits); what else happens in the store (a link between its turns, a summary) does not count.
    ``changed_at``: ``queries.items_changed``. The sessions left waiting or too short are added
    to ``skipped``.
    """
    conn = writer.conn
    out = []
    for session, name in queries.worlds_of_type(conn, "Session"):
        changed = changed_at.get(session)
        if changed is None:
            continue  # nothing to summarise
        old = queries.current_summary(conn, session, "session")
        if old is not None and changed <= old[1]:
            continue  # no turn or note of the session was written, closed or retired since its summary
        if changed > older_than:  # still going on
            if skipped is not None:
                skipped.append(Skipped("summaries", "session", name, "recent", changed))
            continue
        items = _items(writer, queries.world_items(conn, session))
        of = writer.store.header(session).id.hex()
        said = sum(len(words(item.text)) for item in items)
        if len(items) >= MIN_SESSION_TURNS and said >= MIN_SESSION_WORDS:
            out.append(Pending(session, "session", name, items, of, None, old[0] if old else None))
        elif old is not None:  # too little of it holds now: its summary goes
            out.append(Pending(session, "session", name, [], of, None, old[0]))
        elif skipped is not None:
            detail = (
                f"{len(items)} turn{'' if len(items) == 1 else 's'} and {said} word{'' if said == 1 else 's'}, too "
                f"short to summarise (a summary needs {MIN_SESSION_TURNS} turns and {MIN_SESSION_WORDS} words; the "
                "scope's timeline covers it)"
            )
            skipped.append(Skipped("summaries", "session", name, "small", changed, detail=detail))
    return out


def stale_timelines(
    writer: Writer,
    scopes: Sequence[tuple[int, str]],
    changed_at: Mapping[int, str],
    *,
    older_than: str,
    skipped: list[Skipped] | None = None,
) -> list[Pending]:
    """Timeline parts of ``scopes`` whose sessions changed since the part was written.

    A part covers sessions quiet since ``older_than`` (the one going on joins when it is done); a
    scope with sessions left out so is added to ``skipped``.
    """
    conn = writer.conn
    out = []
    for scope, name in scopes:
        every = queries.scope_sessions(conn, scope)
        sessions = [(s, n) for s, n in every if changed_at.get(s, "") <= older_than]  # in the order they happened
        waiting = [changed_at[s] for s, _ in every if changed_at.get(s, "") > older_than]
        if waiting and skipped is not None:
            written = queries.current_summary(conn, scope, "timeline")  # its newest part: what it covers is no wait
            waiting = [at for at in waiting if written is None or at > written[1]]
        if waiting and skipped is not None:
            detail = f"{len(waiting)} of its {len(every)} sessions are not in its timeline yet"
            skipped.append(Skipped("summaries", "timeline", name, "recent", max(waiting), detail=detail))
        for part, start in enumerate(range(0, len(sessions), TIMELINE_PART)):
            chunk = sessions[start : start + TIMELINE_PART]
            old = queries.current_summary(conn, scope, "timeline", part=part)
            changed = max(changed_at.get(s, "") for s, _ in chunk)
            if old is not None and changed <= old[1] and old[2] == len(chunk):
                continue
            firsts = [_items(writer, queries.world_items(conn, s)) for s, _ in chunk]
            items = [_session_item(found) for found in firsts if found]
            of = writer.store.header(scope).id.hex()
            if items or old is not None:  # no items left: the old part goes
                out.append(Pending(scope, "timeline", name, items, of, part, old[0] if old else None))
    return out


def _items(writer: Writer, rows: Sequence[tuple[int, str, str, str | None, int]]) -> list[SummaryItem]:
    return [
        SummaryItem(writer.store.header(nid).id.hex(), date, speaker, text, facts)
        for nid, text, date, speaker, facts in rows
    ]


def _session_item(items: Sequence[SummaryItem]) -> SummaryItem:
    """A session as one timeline item: its person's first turn (what they brought up), else its first."""
    return next((item for item in items if not is_assistant(item.speaker)), items[0])


def draft(pending: Pending, summarizer: Summarizer) -> Drafted:
    """The summariser's text for ``pending``; one that fails or says nothing raises (nothing is written)."""
    try:
        drafted = summarizer.summarize(pending.kind, pending.title, pending.items)
    except Exception as exc:
        raise InvalidInput(
            f"the summariser failed on {pending.kind} {pending.title!r}: {type(exc).__name__}: {exc}; "
            "nothing of this batch was written"
        ) from exc
    if not isinstance(drafted, Drafted) or not isinstance(drafted.text, str) or not drafted.text.strip():
        raise InvalidInput(
            f"the summariser gave no text for {pending.kind} {pending.title!r}; nothing of this batch was written"
        )
    return drafted


def store_summary(writer: Writer, txn: Any, pending: Pending, drafted: Drafted, now: str) -> str | None:
    """Write one summary, replacing the old one (``amend``), with ``derived_from`` its sources; its id.

    A pending summary with no items left retires the old one instead (None).
    """
    if not pending.items:
        assert pending.old is not None
        txn.close(pending.old, now, retire=True)
        return None
    dates = {item.id: item.date for item in pending.items}
    allowed = set(dates) | set(pending.also)
    sources = [s for s in dict.fromkeys(drafted.sources) if s in allowed] or list(dates)
    valid = max(dates.get(s, "") for s in sources) or max(dates.values())
    props: dict[str, object] = {KIND: pending.kind, OF: pending.of, "items": len(pending.items)}
    if pending.part is not None:
        props[PART] = pending.part
    if pending.old is not None:
        old_valid = writer.store.node_row(pending.old).valid_at
        new = writer.amend(
            writer.store.header(pending.old).id.hex(),
            drafted.text,
            valid_at=valid if valid > old_valid else now,
            props=props,
        )
    else:
        new = writer.write(
            MemoryIn(
                drafted.text,
                world=writer.store.header(pending.world).id.hex(),
                type=SUMMARY_TYPE,
                name=f"{pending.kind} of {pending.title}",
                valid_at=valid,
                props=props,
            )
        )
    since = writer.read(new).valid_at
    edges = [(new, source, "derived_from") for source in sources] + [(new, e, "refers_to") for e in pending.about]
    writer.link_many(edges, valid_at=since)
    return new


def summarise(
    writer: Writer,
    summarizer: Summarizer,
    pending: Sequence[Pending],
    *,
    dry_run: bool,
    batch: int,
    progress: Callable[[int, int], None] | None,
) -> int:
    """Draft and write ``pending`` summaries, ``batch`` to a transaction; how many."""
    return _batches(writer, pending, lambda item: draft(item, summarizer), dry_run, batch, progress)


def store_drafted(
    writer: Writer,
    drafted: Sequence[tuple[Pending, Drafted]],
    *,
    dry_run: bool,
    batch: int,
    progress: Callable[[int, int], None] | None,
) -> int:
    """Write summaries drafted already (profiles, histories), ``batch`` to a transaction; how many."""
    texts = {id(p): d for p, d in drafted}  # a retirement (no items) carries an empty draft
    return _batches(writer, [p for p, _ in drafted], lambda item: texts[id(item)], dry_run, batch, progress)


def _batches(
    writer: Writer,
    pending: Sequence[Pending],
    text_of: Callable[[Pending], Drafted],
    dry_run: bool,
    batch: int,
    progress: Callable[[int, int], None] | None,
) -> int:
    """Write ``pending`` a batch to a transaction (a kill keeps the batches done, a rerun writes the rest).

    How many were written (or retired).
    """
    if dry_run:
        return len(pending)
    for start in range(0, len(pending), batch):
        with writer.transaction() as txn:
            now = writer.clock()
            for item in pending[start : start + batch]:
                store_summary(writer, txn, item, text_of(item) if item.items else Drafted("", ()), now)
        if progress is not None:
            progress(min(start + batch, len(pending)), len(pending))
    return len(pending)
