"""One turn's record, however it arrives: ingested with its conversation, appended live, or amended.

``ingest`` (conversation.py) and ``add_turn`` (live.py) build a turn's props and its windows here,
so the same turns, appended live or ingested whole, are the same nodes: the promise lives in one
place. What System 2 then does with a turn (now, or queued) is ``queue.learn_or_queue``'s, for
notes as for turns.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .. import checks
from ..errors import InvalidInput
from ..text.windows import window as windowed
from ..text.windows import words_around

# The windows indexed with each turn (chosen with bench/recall.py on LoCoMo; docs/decisions.md has the figures)
DEFAULT_WINDOW = 1  # the turn before each turn is indexed with it (full text, vector and token index)
DEFAULT_WORD_WINDOW = 4  # the turns before that, up to the 4th, indexed for their words alone (node_fts.context)
DEFAULT_WORD_AFTER = 2  # ... and the 2 turns after each turn (a question is found by its answer's words)
IN_PROPS = object()  # turn_props: the turn's id is its props' own


@dataclass(frozen=True)
class TurnIn:
    """One utterance, verbatim."""

    text: str
    speaker: str | None = None
    turn_id: str | None = None  # the dataset's own id (LoCoMo dia_id, BEAM message id, ...)
    at: str | None = None  # when it was said, if the source says; else the session's date
    props: dict[str, Any] = field(default_factory=dict)


def check_turn(turn: TurnIn, where: str) -> None:
    """A clear error for a turn the store must not take."""
    if not isinstance(turn.text, str) or not turn.text.strip():
        raise InvalidInput(f"{where}: the turn has no text")
    if len(turn.text) > checks.MAX_TEXT_CHARS:
        raise InvalidInput(
            f"{where}: the turn holds {len(turn.text):,} characters, more than {checks.MAX_TEXT_CHARS:,}; "
            "split it into several turns"
        )
    if "\x00" in turn.text:
        raise InvalidInput(f"{where}: the turn holds a NUL character (binary data?); decode it to text first")
    try:
        turn.text.encode("utf-8")
    except UnicodeEncodeError as exc:  # a JSON "\ud800" escape decodes to half a character
        raise InvalidInput(
            f"{where}: the turn's text holds a lone surrogate at character {exc.start} (a broken \\u escape?), "
            "which is not text; fix it in the source and try again"
        ) from None


def turn_props(
    props: Mapping[str, Any],
    *,
    speaker: str | None,
    session: str,
    conversation: str,
    turn_id: str | None | object = IN_PROPS,
) -> dict[str, Any]:
    """A turn's props: its own, then who said it, its id, its session and conversation (a None value is left out).

    An ingested turn's ``turn_id`` field stands over its props' (None: it has none), as ingest always wrote
    them; a live turn's id, if any, comes in its props.
    """
    own = {**props, "speaker": speaker, "session": session, "conversation": conversation}
    if turn_id is not IN_PROPS:
        own["turn_id"] = turn_id
    return {key: value for key, value in own.items() if value is not None}


def turn_record(
    text: str,
    *,
    world: str,
    speaker: str | None,
    valid_at: str | None,
    props: dict[str, Any],
    index_context: str | None,
    word_context: str | None,
    salience: float = 0.0,
) -> dict[str, Any]:
    """The ``Writer.write_many`` record of a turn in the Session world ``world``."""
    return {
        "text": text,
        "world": world,
        "type": "Turn",
        "name": speaker,  # who said it: indexed with the words
        "valid_at": valid_at,
        "props": props,
        "index_context": index_context or None,
        "word_context": word_context or None,
        "salience": salience,
    }


def contexts(
    texts: Sequence[str],
    speakers: Sequence[str | None],
    *,
    window: int = DEFAULT_WINDOW,
    word_window: int = DEFAULT_WORD_WINDOW,
    word_after: int = DEFAULT_WORD_AFTER,
) -> tuple[list[str], list[str]]:
    """Each turn of a run's windows: the ``window`` turns before it (indexed with it) and its words-only context.

    A run is turns said together, with no purged turn between them (a wall no words cross).
    """
    before = windowed(texts, speakers=speakers, turns=window)
    words = words_around(texts, speakers=speakers, before=word_window, skip=window, after=word_after)
    return before, words
