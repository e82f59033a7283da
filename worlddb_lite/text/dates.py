"""Time values: one canonical text form for both axes of bitemporal data.

Times are stored as fixed-width UTC ISO-8601 text (``2024-05-01T09:30:00.000000Z``):
readable in the ``sqlite3`` shell and ordered correctly by plain text comparison,
so SQL can compare them without functions. Naive inputs are taken as UTC.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import functools
import re
import time
from collections.abc import Callable

from ..errors import InvalidTime

TimeLike = str | dt.datetime | dt.date | int | float

_DATE_ONLY = re.compile(r"^\d{4}-\d{2}-\d{2}$")

Clock = Callable[[], str]


def format_time(moment: dt.datetime) -> str:
    """Return the canonical text of an aware or naive (UTC) datetime."""
    if moment.tzinfo is not None:
        moment = moment.astimezone(dt.UTC).replace(tzinfo=None)
    # Not strftime: glibc does not zero-pad years before 1000, which breaks width and order.
    return (
        f"{moment.year:04d}-{moment.month:02d}-{moment.day:02d}T{moment.hour:02d}:"
        f"{moment.minute:02d}:{moment.second:02d}.{moment.microsecond:06d}Z"
    )


def just_after(text: str) -> str:
    """The canonical time one microsecond after ``text`` (itself canonical)."""
    return format_time(dt.datetime.fromisoformat(text.removesuffix("Z")) + dt.timedelta(microseconds=1))


@functools.lru_cache(maxsize=4096)
def _parse_text(text: str) -> str:
    """Canonical form of ISO text (cached: ingest repeats the same session dates)."""
    if _DATE_ONLY.match(text):
        return format_time(dt.datetime.fromisoformat(text))
    if text.endswith(("Z", "z")):
        text = text[:-1] + "+00:00"
    return format_time(dt.datetime.fromisoformat(text))


def parse_time(value: TimeLike, *, field: str = "time") -> str:
    """Normalise a time given as ISO text, datetime, date or unix seconds.

    Raises ``InvalidTime`` naming the field and the accepted forms.
    """
    try:
        if isinstance(value, bool):
            raise TypeError("bool is not a time")
        if isinstance(value, dt.datetime):
            return format_time(value)
        if isinstance(value, dt.date):
            return format_time(dt.datetime(value.year, value.month, value.day))
        if isinstance(value, (int, float)):
            return format_time(dt.datetime.fromtimestamp(value, dt.UTC))
        if isinstance(value, str):
            return _parse_text(value.strip())
    except (ValueError, TypeError, OverflowError, OSError) as exc:
        raise InvalidTime(
            f"{field}: cannot read {value!r} as a time ({exc}); "
            "give ISO-8601 text such as 2024-05-01 or 2024-05-01T09:30:00Z, "
            "a datetime, or unix seconds"
        ) from None
    raise InvalidTime(f"{field}: {type(value).__name__} is not a time; give ISO-8601 text, a datetime or unix seconds")


def system_clock() -> str:
    """The current UTC time in canonical form (the default ``Clock``)."""
    return format_time(dt.datetime.fromtimestamp(time.time(), dt.UTC))


def check_interval(start: str, end: str | None, *, what: str = "interval") -> None:
    """Refuse an interval that ends before it starts."""
    if end is not None and end < start:
        raise InvalidTime(f"{what} ends ({end}) before it starts ({start}); give an end at or after the start")


# Days and months that free text names ("on 25 May, 2022", "May 25th 2022", "2022-05-25",
# "in July 2023", "on May 25" - the last one of those at or before the read's time). A month is
# capitalised ("the top 5 may differ" names no day); extract.py reads dates with the same words.
MONTH = (
    r"(?:Jan(?:uary)?|Feb(?:ruary)?|Mar(?:ch)?|Apr(?:il)?|May|June?|July?|Aug(?:ust)?|Sept?(?:ember)?|"
    r"Oct(?:ober)?|Nov(?:ember)?|Dec(?:ember)?)\.?"
)
_MONTH_NAMES = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
_NAMED_MONTH_WORD = r"(?P<month>" + MONTH + r")"
_ORDINAL = r"(?P<day>\d{1,2})(?:st|nd|rd|th)?"
_YEAR = r"(?P<year>(?:1[89]|2\d)\d\d)(?!\d)"
_NAMED_DAY = (
    re.compile(r"\b" + _ORDINAL + r" (?:of )?" + _NAMED_MONTH_WORD + r",? " + _YEAR),
    re.compile(r"\b" + _NAMED_MONTH_WORD + r" " + _ORDINAL + r",? " + _YEAR),
    re.compile(r"\b" + _YEAR + r"-(?P<month>\d{2})-(?P<day>\d{2})(?!\d)"),
)
_NAMED_DAY_NO_YEAR = (
    re.compile(r"\b" + _ORDINAL + r" (?:of )?" + _NAMED_MONTH_WORD + r"(?!,? \d)"),
    re.compile(r"(?<!\d )\b" + _NAMED_MONTH_WORD + r" " + _ORDINAL + r"\b(?!,? \d|:\d)"),
)
_NAMED_MONTH = re.compile(r"\b" + _NAMED_MONTH_WORD + r",? " + _YEAR)
# Periods named against the read's time: "yesterday", "3 days ago", "last week", "this month", "in May"
# (the latest May before now), "last Saturday" (the latest before today).
_WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
COUNT_WORDS = {
    "a": 1,
    "an": 1,
    "one": 1,
    "two": 2,
    "three": 3,
    "four": 4,
    "five": 5,
    "six": 6,
    "seven": 7,
    "eight": 8,
    "nine": 9,
    "ten": 10,
}
_COUNT = r"(?P<count>\d{1,3}|" + "|".join(COUNT_WORDS) + ")"
_RELATIVE_PERIOD = re.compile(
    r"\b(?:(?P<day>today|yesterday)|" + _COUNT + r" (?P<unit>day|week|month)s? ago|(?P<which>last|this|past) "
    r"(?P<span>week|month|year)|last (?P<weekday>" + "|".join(_WEEKDAYS) + r"))\b",
    re.IGNORECASE,
)
_IN_MONTH = re.compile(r"\b(?:in|during) " + _NAMED_MONTH_WORD + r"\b(?!,? \d)")  # not "in Jul" of "in July 1900"
TOLD_BEFORE = dt.timedelta(days=7)  # a period named also covers what was said in the week before it ...
TOLD_AFTER = dt.timedelta(days=7)  # ... and in the week after ("last week I ...", told a few days later)
NAMED_CHARS = 2000  # a query is read for dates in its first 2,000 characters ...
MOST_PERIODS = 4  # ... and at most four periods are taken from it


def _month_number(word: str) -> int:
    if word.isdigit():
        return int(word)
    return _MONTH_NAMES.index(word[:3].lower()) + 1


def named_periods(text: str, now: str) -> list[tuple[str, str]]:
    """The periods ``text`` names, as [start, end) in canonical time, each widened by a week on both sides.

    A day ("25 May, 2022", "May 25th 2022", "2022-05-25", or "May 25": the latest one at or before
    ``now``) or a month ("July 2023"); a day that does not exist ("31 February 2023") names nothing.
    Read against ``now`` too: "yesterday", "3 days ago", "last week", "this month", "in May", "last
    Saturday".
    Memories of an event are dated by when they were said, often days later ("last week I ..."),
    so each period reaches ``TOLD_BEFORE`` / ``TOLD_AFTER`` beyond what it names.
    """
    text = text[:NAMED_CHARS]
    spans = _spans(text, dt.date.fromisoformat(now[:10]))

    def widened(start: dt.date, end: dt.date) -> tuple[str, str] | None:
        try:
            return format_time(_midnight(start - TOLD_BEFORE)), format_time(_midnight(end + TOLD_AFTER))
        except OverflowError:  # a period at the calendar's end (read as of 0001 or 9999) names no time
            return None

    return sorted({period for span in spans if (period := widened(*span)) is not None})[:MOST_PERIODS]


def _spans(text: str, today: dt.date) -> list[tuple[dt.date, dt.date]]:
    """The days, months and relative periods ``text`` names against ``today``, [start, end) (``named_periods``)."""
    days: list[dt.date] = []
    spans: list[tuple[dt.date, dt.date]] = []
    taken: list[tuple[int, int]] = []
    for pattern in _NAMED_DAY:
        for found in pattern.finditer(text):
            try:
                days.append(dt.date(int(found["year"]), _month_number(found["month"]), int(found["day"])))
            except ValueError:
                pass
            taken.append(found.span())
    for pattern in _NAMED_DAY_NO_YEAR:
        for found in pattern.finditer(text):
            if any(a <= found.start() < b for a, b in taken):
                continue
            month, day = _month_number(found["month"]), int(found["day"])
            # the latest such day at or before today (a 29 February up to eight years back)
            latest = next(
                (
                    dt.date(year, month, day)
                    for year in range(today.year, today.year - 9, -1)
                    if _exists(year, month, day) and dt.date(year, month, day) <= today
                ),
                None,
            )
            if latest is not None:
                days.append(latest)
            taken.append(found.span())
    for found in _NAMED_MONTH.finditer(text):
        if any(a <= found.start() < b for a, b in taken):
            continue
        spans.append(_month_span(int(found["year"]), _month_number(found["month"])))
    spans += [(day, day + dt.timedelta(days=1)) for day in days]
    spans += _relative_periods(text, today)
    return spans


# A person's words for a time: month names in any case, a bare year ("2024", "in 2024")
_ANY_CASE_MONTH = re.compile(r"\b(?:" + MONTH.removesuffix(r"\.?") + r")\b", re.IGNORECASE)
_YEAR_ONLY = re.compile(r"^(?:in |during )?(?P<year>\d{4})$", re.IGNORECASE)
SAID_EXAMPLES = "'yesterday', 'last week', '3 days ago', 'in March', 'May 2024', '25 May 2024', '2024'"


def read_period(value: object, *, field: str, now: str) -> tuple[str, str, str]:
    """The one period a person's words name against ``now``: (start, end, what was understood), [start, end).

    An ISO date is that day; words are read as recall reads a question's dates ("last week", "in
    March", "May 2024", "3 days ago"), plus a bare year. Anything else, or words naming no period or
    several, is an ``InvalidTime`` that says what was understood.
    """
    if not isinstance(value, str) or not value.strip():
        raise InvalidTime(f"{field}: give a period in words or ISO-8601 such as {SAID_EXAMPLES}; got {value!r:.60}")
    text = " ".join(value.split())
    today = dt.date.fromisoformat(now[:10])
    year = _YEAR_ONLY.match(text)
    if year and 1 <= int(year["year"]) <= 9998:
        spans = [(dt.date(int(year["year"]), 1, 1), dt.date(int(year["year"]) + 1, 1, 1))]
    else:
        words = _ANY_CASE_MONTH.sub(lambda m: m[0][:1].upper() + m[0][1:].lower(), text[:NAMED_CHARS])
        spans = sorted(set(_spans(words, today)))
        rest = _unread(words)
        if rest and len(spans) == 1:  # "May and June 2024": June understood, the rest not
            spans.append(spans[0])
    if len(spans) != 1:
        understood = "; ".join(_days(a, b) for a, b in dict.fromkeys(spans))
        left = f", not {rest!r}" if not year and rest and spans else ""
        raise InvalidTime(
            f"{field}: cannot read {value!r:.80} as one period (understood: {understood or 'no date or period'}"
            f"{left}); give one, e.g. {SAID_EXAMPLES}, or an ISO-8601 date"
        )
    start, end = spans[0]
    return format_time(_midnight(start)), format_time(_midnight(end)), f"{text!r} read as {_days(start, end)}"


def _days(start: dt.date, end: dt.date) -> str:
    """[start, end) as a person says it: one day, or the first and last day."""
    last = end - dt.timedelta(days=1)
    return start.isoformat() if last == start else f"{start.isoformat()} to {last.isoformat()}"


_FILLER = frozenset({"in", "on", "during", "the", "of", "as", "at", "since", "around", "about"})


def _unread(words: str) -> str:
    """What of ``words`` no date pattern reads, filler words ("in", "the", ...) aside."""
    for pattern in (*_NAMED_DAY, *_NAMED_DAY_NO_YEAR, _NAMED_MONTH, _RELATIVE_PERIOD, _IN_MONTH):
        words = pattern.sub(" ", words)
    return " ".join(w for w in re.findall(r"\w+", words) if w.lower() not in _FILLER)


def read_moment(value: TimeLike, *, field: str, now: str) -> tuple[str, str | None]:
    """A time given as ISO-8601 (``parse_time``) or in words: (canonical time, what the words were read as).

    Words name a period (``read_period``); the moment is its end ("as of last week": as things stood when
    it ended), or ``now`` when the period has not ended yet. ISO input is read as ``parse_time`` reads it
    (nothing to echo: None).
    """
    try:
        return parse_time(value, field=field), None
    except InvalidTime:
        if not isinstance(value, str):
            raise
    start, end, said = read_period(value, field=field, now=now)
    moment = min(format_time(_midnight(dt.date.fromisoformat(end[:10])) - dt.timedelta(microseconds=1)), now)
    return moment, f"{said}; as of {moment}"


def _midnight(day: dt.date) -> dt.datetime:
    return dt.datetime(day.year, day.month, day.day)


def _month_span(year: int, month: int) -> tuple[dt.date, dt.date]:
    return dt.date(year, month, 1), dt.date(year + month // 12, month % 12 + 1, 1)


def _relative_periods(text: str, today: dt.date) -> list[tuple[dt.date, dt.date]]:
    """The periods ``text`` names against ``today``, [start, end) (see ``_RELATIVE_PERIOD``, ``_IN_MONTH``).

    "last week" / "this week" are calendar weeks (Monday on), "last month" / "last year" calendar
    ones; "the past week / month / year" are the 7 / 30 / 365 days up to today.
    """
    spans: list[tuple[dt.date, dt.date]] = []
    for found in _RELATIVE_PERIOD.finditer(text):
        with contextlib.suppress(ValueError, OverflowError):  # past the calendar's end (as of 0001 or 9999): no period
            spans.append(_relative_period(found, today))
    for found in _IN_MONTH.finditer(text):  # the latest such month, this one included
        month = _month_number(found["month"])
        with contextlib.suppress(ValueError, OverflowError):
            spans.append(_month_span(today.year if month <= today.month else today.year - 1, month))
    return spans


def _relative_period(found: re.Match[str], today: dt.date) -> tuple[dt.date, dt.date]:
    """The period one match of ``_RELATIVE_PERIOD`` names against ``today``, [start, end)."""
    one = dt.timedelta(days=1)

    def months_back(count: int) -> tuple[dt.date, dt.date]:
        index = today.year * 12 + today.month - 1 - count
        return _month_span(index // 12, index % 12 + 1)

    if found["day"]:
        day = today if found["day"].lower() == "today" else today - one
        return day, day + one
    if found["unit"]:
        count = int(found["count"]) if found["count"].isdigit() else COUNT_WORDS[found["count"].lower()]
        unit = found["unit"].lower()
        if unit == "month":
            return months_back(count)
        day = today - count * (7 if unit == "week" else 1) * one
        return (day, day + one) if unit == "day" else (day - 3 * one, day + 4 * one)
    if found["weekday"]:  # the latest such weekday before today
        back = (today.weekday() - _WEEKDAYS.index(found["weekday"].lower()) - 1) % 7 + 1
        return today - back * one, today - (back - 1) * one
    if found["which"].lower() == "past":
        return today - {"week": 7, "month": 30, "year": 365}[found["span"].lower()] * one, today + one
    last = found["which"].lower() == "last"
    span = found["span"].lower()
    if span == "week":
        monday = today - today.weekday() * one
        return (monday - 7 * one, monday) if last else (monday, today + one)
    if span == "month":
        return months_back(1 if last else 0)
    return dt.date(today.year - last, 1, 1), dt.date(today.year - last + 1, 1, 1)


def _exists(year: int, month: int, day: int) -> bool:
    try:
        dt.date(year, month, day)
    except ValueError:
        return False
    return True
