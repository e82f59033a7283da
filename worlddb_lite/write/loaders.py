"""Dataset loaders: LoCoMo, BEAM, LongMemEval and plain JSON lines, as ``ConversationIn`` values.

Each loader reads and checks a whole file before anything is written, and names the record
and field of the first thing wrong. Dates become the store's canonical UTC text.
"""

from __future__ import annotations

import datetime as dt
import io
import json
import tarfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from ..errors import InvalidInput
from ..text.dates import format_time, parse_time, system_clock
from .conversation import ConversationIn, SessionIn, TurnIn, check_conversation

FORMATS = ("locomo", "beam", "longmemeval", "jsonl")


def load(path: str | Path, fmt: str, scope: str | None = None) -> list[ConversationIn]:
    """Every conversation in ``path`` (format ``fmt``); ``scope`` replaces each one's own scope."""
    loaders: dict[str, Callable[[Path], Iterator[ConversationIn]]] = {
        "locomo": load_locomo,
        "beam": load_beam,
        "longmemeval": load_longmemeval,
        "jsonl": load_jsonl,
    }
    if fmt not in loaders:
        raise InvalidInput(f"unknown format {fmt!r}; use one of {', '.join(FORMATS)}")
    source = Path(path)
    try:
        if not source.exists():
            raise InvalidInput(f"{source} does not exist")
        conversations = list(loaders[fmt](source))
    except (OSError, UnicodeEncodeError) as exc:  # a folder given as a file, no permission, a name too long ...
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise InvalidInput(f"cannot read {source} ({reason}); give a readable {fmt} file") from None
    if scope is not None:
        conversations = [ConversationIn(c.conversation_id, [scope], c.sessions) for c in conversations]
    now = system_clock()  # a store opened on this machine dates its writes by this clock too
    for conversation in conversations:  # the whole file is checked before any of it is written
        check_conversation(conversation, now=now)
    return conversations


def _too_deep(where: str) -> InvalidInput:
    """JSON nested past what the parser can follow (a RecursionError, thousands of levels): refused whole."""
    return InvalidInput(
        f"{where}: its JSON nests lists or objects too deeply to read (thousands of levels); nothing was written. "
        "Give a dataset file whose records are flat, as the format describes"
    )


def _json(path: Path) -> Any:
    try:
        return json.loads(path.read_text("utf-8"))
    except RecursionError:
        raise _too_deep(str(path)) from None
    except UnicodeDecodeError as exc:
        raise InvalidInput(f"{path} is not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    except json.JSONDecodeError as exc:
        raise InvalidInput(f"{path} is not valid JSON: {exc.msg} at line {exc.lineno}, column {exc.colno}") from None


def _need(record: Any, key: str, kind: type | tuple[type, ...], where: str) -> Any:
    if not isinstance(record, dict) or key not in record:
        raise InvalidInput(f"{where}: missing {key!r}")
    value = record[key]
    if not isinstance(value, kind):
        raise InvalidInput(f"{where}: {key!r} should be {_kind_name(kind)}, got {type(value).__name__}")
    return value


def _kind_name(kind: type | tuple[type, ...]) -> str:
    kinds = kind if isinstance(kind, tuple) else (kind,)
    return " or ".join(k.__name__ for k in kinds)


def _date(text: str, formats: tuple[str, ...], where: str) -> str:
    for fmt in formats:
        try:
            return format_time(dt.datetime.strptime(text.strip(), fmt).replace(tzinfo=dt.UTC))
        except ValueError:
            continue
    raise InvalidInput(f"{where}: cannot read the date {text!r}")


# ---- LoCoMo ------------------------------------------------------------------------


def load_locomo(path: Path) -> Iterator[ConversationIn]:
    """``locomo10.json``: a list of samples, each a conversation of numbered dated sessions."""
    data = _json(path)
    if not isinstance(data, list):
        raise InvalidInput(f"{path}: a LoCoMo file is a list of samples")
    for n, sample in enumerate(data):
        where = f"{path.name} sample {n}"
        sample_id = str(_need(sample, "sample_id", (str, int), where))
        conv = _need(sample, "conversation", dict, f"{where} ({sample_id})")
        numbers = sorted(int(k.split("_")[1]) for k in conv if k.startswith("session_") and k.count("_") == 1)
        sessions = []
        for number in numbers:
            here = f"{where} ({sample_id}) session_{number}"
            turns = _need(conv, f"session_{number}", list, here)
            stamp = conv.get(f"session_{number}_date_time")
            date = _date(stamp, ("%I:%M %p on %d %B, %Y", "%I:%M %p on %d %b, %Y"), here) if stamp else None
            sessions.append(
                SessionIn(
                    str(number),
                    date,
                    [
                        TurnIn(
                            _locomo_text(t, f"{here} turn {i}"),
                            str(_need(t, "speaker", str, f"{here} turn {i}")),
                            str(t.get("dia_id") or i),
                            props=_extra(t, ("img_url", "blip_caption")),
                        )
                        for i, t in enumerate(turns)
                    ],
                )
            )
        yield ConversationIn(sample_id, [sample_id], sessions)


def _locomo_text(turn: dict[str, Any], where: str) -> str:
    """The turn's words, and the image it shared as ``[image: <caption>]`` (the store keeps no pixels)."""
    text = str(_need(turn, "text", str, where))
    caption = turn.get("blip_caption")
    return f"{text} [image: {caption}]" if isinstance(caption, str) and caption.strip() else text


def _extra(record: dict[str, Any], keys: tuple[str, ...]) -> dict[str, Any]:
    return {k: record[k] for k in keys if k in record}


# ---- BEAM --------------------------------------------------------------------------


def load_beam(path: Path) -> Iterator[ConversationIn]:
    """BEAM chats: a ``beam_*.tar.xz`` archive, a folder of ``<n>/chat.json``, or one ``chat.json``.

    A batch's inner list of messages is one session; its date is the first ``time_anchor``
    in it (the previous session's when it has none).
    """
    for chat_id, data in _beam_chats(path):
        where = f"BEAM chat {chat_id}"
        if not isinstance(data, list):
            raise InvalidInput(f"{where}: chat.json is a list of batches")
        sessions: list[SessionIn] = []
        date: str | None = None
        for b, batch in enumerate(data):
            groups = _need(batch, "turns", list, f"{where} batch {b}")
            for g, group in enumerate(groups):
                here = f"{where} batch {b} session {g}"
                if not isinstance(group, list):
                    raise InvalidInput(f"{here}: a session is a list of messages")
                anchors = [m.get("time_anchor") for m in group if isinstance(m, dict) and m.get("time_anchor")]
                if anchors:
                    date = _date(str(anchors[0]), ("%B-%d-%Y", "%b-%d-%Y", "%Y-%m-%d"), here)
                turns = [
                    TurnIn(
                        str(_need(m, "content", str, f"{here} message {i}")),
                        str(_need(m, "role", str, f"{here} message {i}")),
                        str(m.get("id", i)),
                        props=_extra(m, ("question_type", "index")),
                    )
                    for i, m in enumerate(group)
                ]
                sessions.append(SessionIn(f"{b}.{g}", date, turns))
        yield ConversationIn(f"beam-{chat_id}", [f"beam-{chat_id}"], sessions)


def _beam_chats(path: Path) -> Iterator[tuple[str, Any]]:
    """(chat id, parsed chat.json) in chat order; ``chat_trunecated.json`` wins where it exists (as upstream)."""
    if path.is_file() and path.name.endswith((".tar.xz", ".tar.gz", ".tar")):
        with tarfile.open(path) as archive:
            members = {m.name: m for m in archive.getmembers() if m.isfile()}
            for chat_id, name in _chat_files(members):
                handle = archive.extractfile(members[name])
                assert handle is not None
                yield chat_id, _json_bytes(handle, name)
    elif path.is_dir():
        files = {str(p.relative_to(path)): p for p in path.rglob("chat*.json")}
        for chat_id, name in _chat_files(files):
            yield chat_id, _json(files[name])
    else:
        yield path.parent.name or "0", _json(path)


def _chat_files(names: dict[str, Any]) -> list[tuple[str, str]]:
    chats: dict[str, str] = {}
    for name in names:
        parts = name.split("/")
        if parts[-1] in ("chat.json", "chat_trunecated.json") and len(parts) >= 2:
            chat_id = parts[-2]
            if parts[-1] == "chat_trunecated.json" or chat_id not in chats:
                chats[chat_id] = name
    return sorted(
        chats.items(), key=lambda item: (not item[0].isdigit(), int(item[0]) if item[0].isdigit() else 0, item[0])
    )


def _json_bytes(handle: io.BufferedReader | Any, name: str) -> Any:
    try:
        return json.loads(handle.read().decode("utf-8"))
    except RecursionError:
        raise _too_deep(f"{name} in the archive") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InvalidInput(f"{name} in the archive is not valid UTF-8 JSON: {exc}") from None


# ---- LongMemEval -------------------------------------------------------------------


def load_longmemeval(path: Path) -> Iterator[ConversationIn]:
    """LongMemEval (oracle / S / M): a list of questions, each with its own haystack of dated sessions."""
    data = _json(path)
    if not isinstance(data, list):
        raise InvalidInput(f"{path}: a LongMemEval file is a list of question records")
    for n, record in enumerate(data):
        where = f"{path.name} record {n}"
        qid = str(_need(record, "question_id", (str, int), where))
        ids = _need(record, "haystack_session_ids", list, f"{where} ({qid})")
        dates = _need(record, "haystack_dates", list, f"{where} ({qid})")
        sessions_in = _need(record, "haystack_sessions", list, f"{where} ({qid})")
        if not len(ids) == len(dates) == len(sessions_in):
            raise InvalidInput(f"{where} ({qid}): haystack ids, dates and sessions differ in length")
        sessions = []
        for sid, date, turns in zip(ids, dates, sessions_in, strict=True):
            here = f"{where} ({qid}) session {sid}"
            if not isinstance(turns, list):
                raise InvalidInput(f"{here}: a session is a list of turns")
            when = _date(str(date), ("%Y/%m/%d (%a) %H:%M", "%Y/%m/%d %H:%M", "%Y-%m-%d"), here)
            sessions.append(
                SessionIn(
                    str(sid),
                    when,
                    [
                        TurnIn(
                            str(_need(t, "content", str, f"{here} turn {i}")),
                            str(_need(t, "role", str, f"{here} turn {i}")),
                            f"{sid}_{i + 1}",
                            props={"has_answer": True} if t.get("has_answer") else {},
                        )
                        for i, t in enumerate(turns)
                    ],
                )
            )
        yield ConversationIn(qid, [qid], sessions)


# ---- JSON lines --------------------------------------------------------------------


def load_jsonl(path: Path) -> Iterator[ConversationIn]:
    """One turn per line: ``{"text", "speaker"?, "session"?, "date"?, "conversation"?, "scope"?}``.

    Consecutive lines of one conversation form it; a new ``session`` value starts a session.
    """
    conversations: dict[str, tuple[list[str], dict[str, tuple[str | None, list[TurnIn]]]]] = {}
    with path.open("rb") as handle:
        for number, raw in enumerate(handle, 1):
            where = f"{path.name} line {number}"
            if not raw.strip():
                continue
            try:
                record = json.loads(raw.decode("utf-8"))
            except RecursionError:
                raise _too_deep(where) from None
            except (UnicodeDecodeError, json.JSONDecodeError) as exc:
                raise InvalidInput(f"{where}: not a UTF-8 JSON object ({exc})") from None
            text = _need(record, "text", str, where)
            conv = str(record.get("conversation", path.stem))
            _, sessions = conversations.setdefault(conv, ([str(record.get("scope", conv))], {}))
            date = record.get("date")
            when = parse_time(date, field=f"{where} date") if date is not None else None
            _, turns = sessions.setdefault(str(record.get("session", "1")), (when, []))
            speaker = record.get("speaker")
            turns.append(TurnIn(text, None if speaker is None else str(speaker), str(record.get("id", number))))
    for conv, (scopes, sessions) in conversations.items():
        yield ConversationIn(conv, scopes, [SessionIn(sid, when, turns) for sid, (when, turns) in sessions.items()])
