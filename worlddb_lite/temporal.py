"""Time values: one canonical text form for both axes of bitemporal data.

Times are stored as fixed-width UTC ISO-8601 text (``2024-05-01T09:30:00.000000Z``):
readable in the ``sqlite3`` shell and ordered correctly by plain text comparison,
so SQL can compare them without functions. Naive inputs are taken as UTC.
"""

from __future__ import annotations

import datetime as dt
import functools
import re
import time
from collections.abc import Callable

from .errors import InvalidTime

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
    raise InvalidTime(
        f"{field}: {type(value).__name__} is not a time; give ISO-8601 text, a datetime or unix seconds"
    )


def system_clock() -> str:
    """The current UTC time in canonical form (the default ``Clock``)."""
    return format_time(dt.datetime.fromtimestamp(time.time(), dt.UTC))


def check_interval(start: str, end: str | None, *, what: str = "interval") -> None:
    """Refuse an interval that ends before it starts."""
    if end is not None and end < start:
        raise InvalidTime(
            f"{what} ends ({end}) before it starts ({start}); give an end at or after the start"
        )
