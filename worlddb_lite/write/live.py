"""Live turns: a conversation appended one turn at a time, indexed as if it had been ingested whole.

A turn joins a session of its scope: the one named, else the scope's latest session unless its last
turn is more than ``SESSION_GAP`` older (then a new session named by the turn's time). One order rule:
a turn is never dated before the last turn of the session it joins, so without a session named, never
before the scope's last turn (refused, not moved to a session of its own). A turn appended again (the
same text, speaker, time ``at`` and props, in the session it joins) is the turn already kept: a retried
call adds nothing. The session
is the Session world ``"<scope> / <session>"``, as ``ingest`` names a conversation's sessions when
the conversation is named after its scope, and the turn carries the same props (its own ``props``,
a dataset's ``turn_id`` among them, then speaker, session and conversation); so the same turns,
appended live or ingested whole, are the same nodes. The new turn is indexed with the turns before
it (``conversation``'s windows), and the turns before it that take the words of the turns after
them have their words-only context rewritten; a purged turn is a wall no words cross, as in ingest.
Then System 2 runs on the turn, as ingest runs it (or it is queued). The gate and the bridge are
ingest's alone.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from typing import Any

from .. import checks
from ..errors import InvalidInput
from ..store import queries
from ..store.hashing import nfc
from ..text.dates import TimeLike, parse_time
from ..text.extract import Extractor, check_extractor
from .queue import learn_or_queue
from .turns import DEFAULT_WORD_AFTER, DEFAULT_WORD_WINDOW, TurnIn, check_turn, contexts, turn_props, turn_record
from .writer import Writer

# the earlier turns a new turn's windows can touch: the turns after which it falls, and their windows back
REACH = DEFAULT_WORD_WINDOW + DEFAULT_WORD_AFTER
SESSION_GAP = dt.timedelta(minutes=30)  # a pause longer than this starts a new session (a sitting, as chat apps count)


def add_turn(
    writer: Writer,
    text: str,
    *,
    scope: str,
    session: str | None = None,
    speaker: str | None = None,
    at: TimeLike | None = None,
    props: Mapping[str, Any] | None = None,
    extractor: Extractor | None,
    deferred: bool = False,
    gap: dt.timedelta = SESSION_GAP,
) -> str:
    """Append one turn to a session of ``scope`` (see the module); its id."""
    home_name = str(checks.scope_ref(scope))  # one spelling per scope: "ana" and "user:ana" are one
    said_by = checks.text(speaker, "speaker", required=False)
    named = checks.text(session, "session", required=False)
    if named is not None and not named.strip():
        raise InvalidInput("session is blank; name it, or leave it out to continue the scope's latest session")
    check_extractor(extractor)
    if deferred not in (True, False):
        raise InvalidInput(f"deferred must be True or False, got {deferred!r}")
    check_turn(TurnIn(text, said_by), f"a turn in scope {home_name!r}")
    now = writer.clock()
    when = parse_time(at, field="at") if at is not None else now
    if when > now:
        raise InvalidInput(f"the turn is dated {when}, after now ({now}); a memory cannot be from the future")
    with writer.transaction():
        home = writer.scope(home_name)
        name = named or _current_session(writer, home, home_name, when, gap)
        world = writer.world(f"{home_name} / {name}", parent=home, type="Session")
        # the windows of the new turn and of the turns it is "after" for reach no further back
        turns = queries.session_turns(writer.conn, writer.store.resolve(world), REACH)
        own = turn_props(checks.props(props) or {}, speaker=said_by, session=name, conversation=home_name)
        again = _said_again(writer, turns, nfc(text), said_by, when, own) if at is not None else None
        if again is not None:  # a retried append of a turn said at a given time: the turn already kept
            return again
        if turns and when < turns[-1][3]:
            raise InvalidInput(
                f"the turn is dated {when}, before the last turn of session {name!r} ({turns[-1][3]}); a turn is "
                "never dated before the last turn of the session it joins (by default the scope's latest): give a "
                "later time, or name a new session for an earlier conversation"
            )
        run = turns[max((i + 1 for i, turn in enumerate(turns) if turn[1] is None), default=0) :]
        texts = [content or "" for _, content, _, _ in run] + [text]
        speakers = [who for _, _, who, _ in run] + [said_by]
        before, words = contexts(texts, speakers)
        (turn,) = writer.write_many(
            [
                turn_record(
                    text,
                    world=world,
                    speaker=said_by,
                    valid_at=when,
                    props=own,
                    index_context=before[-1],
                    word_context=words[-1],
                )
            ]
        )
        # the turns before it now have this one among the turns after them
        earlier = range(max(0, len(run) - DEFAULT_WORD_AFTER), len(run))
        writer.set_word_context([(words[i] or None, run[i][0]) for i in earlier])
        learn_or_queue(
            writer,
            extractor,
            text,
            deferred=deferred,
            source=turn,
            scope=home,
            said_at=when,
            said_in=home_name,
            speaker=said_by,
        )
        return turn


def _said_again(
    writer: Writer,
    turns: list[tuple[int, str | None, str | None, str]],
    text: str,
    speaker: str | None,
    when: str,
    props: dict[str, Any],
) -> str | None:
    """The id of the session's turn that is this one again (text, speaker, time and props alike), or None."""
    for nid, content, said_by, said_at in turns:
        if said_at == when and content == text and said_by == speaker:
            node = writer.store.load_nodes([nid])[0]
            if dict(node.props) == props:
                return node.id
    return None


def _current_session(writer: Writer, home: str, scope: str, when: str, gap: dt.timedelta) -> str:
    """The scope's latest session if its last turn is at most ``gap`` before ``when``; else a new one's name."""
    latest = queries.latest_session(writer.conn, writer.store.resolve(home))
    if latest is not None:
        world_name, last = latest
        prefix = scope + " / "
        # one order rule: a turn dated before the latest session's last one joins it, and is refused there
        if world_name.startswith(prefix) and _seconds(last, when) <= gap.total_seconds():
            return world_name[len(prefix) :]
    return when


def _seconds(earlier: str, later: str) -> float:
    """Seconds between two canonical times."""
    start = dt.datetime.fromisoformat(earlier.replace("Z", "+00:00"))
    end = dt.datetime.fromisoformat(later.replace("Z", "+00:00"))
    return (end - start).total_seconds()
