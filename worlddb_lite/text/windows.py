"""Conversation windows: the turns around a turn, as text to index with it.

A reply ("Yes, last Tuesday!") is findable by what it answers, and a question by the words of its
answer; the stored turn stays verbatim. Pure text: the write path indexes these windows, and the
migration that filled them for old stores calls the same functions.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..checks import whole
from ..types import is_assistant

WINDOW_CHARS = 1000  # at most this much of each earlier turn is indexed with a later one


def window(
    texts: Sequence[str],
    *,
    speakers: Sequence[str | None] = (),
    turns: int = 1,
    skip: int = 0,
    ahead: bool = False,
    chars: int = WINDOW_CHARS,
) -> list[str]:
    """For each turn of a session, the ``turns`` turns before it ("<speaker>: <text>", clipped), to index with it.

    ``ahead``: the turns after it instead, in the order said.

    ``skip`` leaves out the nearest turns of that window (they are indexed elsewhere: see
    conversation.ingest's ``window`` and ``word_window``). Only the person's turns take part: an
    assistant's turn (``types.is_assistant``) is indexed alone and lends its words to no turn, and
    the window stops at one. Its long reply would make the person's next turn match all it said,
    and the person's question would make the reply outrank the question (docs/decisions.md).
    """
    whole(turns, "window turns")
    whole(skip, "window skip")
    person = [not (i < len(speakers) and is_assistant(speakers[i])) for i in range(len(texts))]
    said = [
        f"{speakers[i]}: {t[:chars]}" if i < len(speakers) and speakers[i] else t[:chars] for i, t in enumerate(texts)
    ]
    contexts = []
    for i in range(len(texts)):
        step, end = (1, min(len(texts) - 1, i + turns)) if ahead else (-1, max(0, i - turns))
        far = i  # the farthest turn of the window, walking away from turn i
        while person[i] and far != end and person[far + step]:
            far += step
        near = i + step * (skip + 1)  # the nearest turn the window keeps
        span = said[near : far + 1] if ahead else said[far : near + 1]
        contexts.append("\n".join(span if (far - near) * step >= 0 else []))
    return contexts


def words_around(
    texts: Sequence[str],
    *,
    speakers: Sequence[str | None] = (),
    before: int,
    skip: int,
    after: int,
    chars: int = WINDOW_CHARS,
) -> list[str]:
    """For each turn, context indexed for its words alone (conversation.ingest).

    That is the turns before it past the ``skip`` nearest, up to the ``before``-th, and the ``after``
    turns that follow it: a question is then found by the words of its answer too. Both sides stop
    at an assistant's turn, as ``window`` does.
    """
    back = window(texts, speakers=speakers, turns=before, skip=skip, chars=chars)
    ahead = window(texts, speakers=speakers, turns=after, ahead=True, chars=chars)
    return ["\n".join(side for side in pair if side) for pair in zip(back, ahead, strict=True)]
