"""text/dates.py: one canonical, fixed-width, text-ordered UTC form for both time axes."""

from __future__ import annotations

import datetime as dt
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from worlddb_lite.errors import InvalidInput, InvalidTime
from worlddb_lite.text.dates import check_interval, format_time, named_periods, parse_time, system_clock

CANONICAL = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z$")
UTC = dt.UTC


@pytest.mark.parametrize(
    ("given_", "expected"),
    [
        ("2024-05-01", "2024-05-01T00:00:00.000000Z"),
        ("2024-05-01T09:30:00Z", "2024-05-01T09:30:00.000000Z"),
        ("2024-05-01T09:30:00z", "2024-05-01T09:30:00.000000Z"),
        ("  2024-05-01T09:30:00Z  ", "2024-05-01T09:30:00.000000Z"),
        ("2024-05-01T09:30:00", "2024-05-01T09:30:00.000000Z"),  # naive is UTC
        ("2024-05-01T11:30:00+02:00", "2024-05-01T09:30:00.000000Z"),
        ("2024-05-01T00:30:00-01:00", "2024-05-01T01:30:00.000000Z"),
        ("2024-05-01T09:30:00.123456Z", "2024-05-01T09:30:00.123456Z"),
        (dt.datetime(2024, 5, 1, 9, 30), "2024-05-01T09:30:00.000000Z"),
        (
            dt.datetime(2024, 5, 1, 11, 30, tzinfo=dt.timezone(dt.timedelta(hours=2))),
            "2024-05-01T09:30:00.000000Z",
        ),
        (dt.date(2024, 5, 1), "2024-05-01T00:00:00.000000Z"),
        (0, "1970-01-01T00:00:00.000000Z"),
        (1714555800, "2024-05-01T09:30:00.000000Z"),
        (1714555800.5, "2024-05-01T09:30:00.500000Z"),
    ],
)
def test_parse_time_accepts_the_documented_forms(given_: object, expected: str) -> None:
    assert parse_time(given_) == expected  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "bad",
    [
        "",
        "yesterday",
        "2024-13-01",
        "2024-02-30",
        "05/01/2024",
        True,
        False,
        None,
        [2024],
        b"2024-05-01",
        10**20,
    ],
    ids=[
        "empty",
        "word",
        "month13",
        "feb30",
        "us-format",
        "True",
        "False",
        "None",
        "list",
        "bytes",
        "overflow",
    ],
)
def test_parse_time_refuses_with_invalid_time(bad: object) -> None:
    with pytest.raises(InvalidTime) as info:
        parse_time(bad, field="valid_at")  # type: ignore[arg-type]
    assert "valid_at" in str(info.value)
    assert isinstance(info.value, InvalidInput) and isinstance(info.value, ValueError)


def test_system_clock_is_canonical_and_recent() -> None:
    now = system_clock()
    assert CANONICAL.match(now)
    assert abs(dt.datetime.fromisoformat(now[:-1]) - dt.datetime.now(UTC).replace(tzinfo=None)) < dt.timedelta(
        minutes=1
    )


_moments = st.datetimes(min_value=dt.datetime(1000, 1, 1), max_value=dt.datetime(9999, 12, 31))


@settings(max_examples=200, deadline=None)
@given(_moments, _moments)
def test_text_order_is_time_order(a: dt.datetime, b: dt.datetime) -> None:
    ta, tb = format_time(a), format_time(b)
    assert CANONICAL.match(ta) and CANONICAL.match(tb)
    assert (ta < tb) == (a < b)
    assert (ta == tb) == (a == b)


@settings(max_examples=100, deadline=None)
@given(_moments)
def test_canonical_text_round_trips(moment: dt.datetime) -> None:
    text = format_time(moment)
    assert parse_time(text) == text
    assert parse_time(moment.replace(tzinfo=UTC)) == text


def test_years_before_1000_stay_fixed_width_and_ordered() -> None:
    # regression: strftime('%Y') did not zero-pad years < 1000
    old = parse_time("0800-12-25")
    assert CANONICAL.match(old), old
    assert old < parse_time("1990-01-01")
    check_interval(old, parse_time("1990-01-01"))  # a historical fact that ended in 1990


def test_check_interval() -> None:
    check_interval("2024-01-01T00:00:00.000000Z", None)
    check_interval("2024-01-01T00:00:00.000000Z", "2024-01-01T00:00:00.000000Z")  # empty interval is fine
    with pytest.raises(InvalidTime, match="ends .* before it starts"):
        check_interval("2024-01-02T00:00:00.000000Z", "2024-01-01T00:00:00.000000Z", what="x")


NOW = "2024-06-01T12:00:00.000000Z"


def _days(periods: list[tuple[str, str]]) -> list[tuple[str, str]]:
    return [(start[:10], end[:10]) for start, end in periods]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("What did Nate do for Joanna on 25 May, 2022?", [("2022-05-18", "2022-06-02")]),  # the day, a week each side
        ("the week before August 3rd 2023", [("2023-07-27", "2023-08-11")]),
        ("on 2022-05-25", [("2022-05-18", "2022-06-02")]),
        ("the 3rd of May 2022", [("2022-04-26", "2022-05-11")]),
        ("What did I paint in July 2023?", [("2023-06-24", "2023-08-08")]),  # the whole month
        ("What did I paint in Dec, 2023?", [("2023-11-24", "2024-01-08")]),  # December ends in the next year
        ("what did I do on May 25", [("2024-05-18", "2024-06-02")]),  # no year: the latest at or before now
        ("what did I do on Dec 3", [("2023-11-26", "2023-12-11")]),
        ("on 31 February 2023", []),  # no such day
        ("on Sept 5, 2023", [("2023-08-29", "2023-09-13")]),
        ("at 2022-05-25T10:00", [("2022-05-18", "2022-06-02")]),
        ("May 5: deadline", [("2024-04-28", "2024-05-13")]),
        ("what happened on Feb 29", [("2024-02-22", "2024-03-08")]),  # 2024 is a leap year
        ("Why do the top 5 may differ?", []),  # a month is capitalised: "may" is a verb here
        ("I gave 2 dec talks in the 3 march", []),
        ("on 5 May 22", []),  # a two-digit year names no year, and "May 22" is not read out of it
        ("where do I live?", []),
        ("at 5 pm on the 5th", []),
    ],
)
def test_named_periods_are_the_days_and_months_text_names(text: str, expected: list[tuple[str, str]]) -> None:
    assert _days(named_periods(text, NOW)) == expected


def test_named_periods_are_canonical_times_and_each_named_once() -> None:
    found = named_periods("May 25, 2022 and again 25 May 2022, then June 2022", NOW)
    assert _days(found) == [("2022-05-18", "2022-06-02"), ("2022-05-25", "2022-07-08")]
    assert all(parse_time(t) == t for period in found for t in period)


def test_named_periods_read_a_long_text_quickly_and_take_a_few_periods() -> None:
    assert named_periods("25 May 2022 " * 25_000, NOW) == named_periods("25 May 2022", NOW)
    many = " ".join(f"2022-{month:02d}-{day:02d}" for month in range(1, 13) for day in range(1, 28))
    assert len(named_periods(many, NOW)) == 4


@pytest.mark.parametrize(
    ("text", "expected"),
    [  # NOW is Saturday 1 June 2024; every period a week wider each side
        ("what did I do yesterday?", [("2024-05-24", "2024-06-08")]),
        ("3 days ago", [("2024-05-22", "2024-06-06")]),
        ("two weeks ago", [("2024-05-08", "2024-05-29")]),  # the week around 18 May
        ("last week", [("2024-05-13", "2024-06-03")]),  # Monday 20 to Sunday 26 May
        ("this week", [("2024-05-20", "2024-06-09")]),  # Monday 27 May to today
        ("the past week", [("2024-05-18", "2024-06-09")]),
        ("last month", [("2024-04-24", "2024-06-08")]),  # all of May
        ("a month ago", [("2024-04-24", "2024-06-08")]),
        ("last year", [("2022-12-25", "2024-01-08")]),
        ("What did I do in May?", [("2024-04-24", "2024-06-08")]),  # the latest May, this one
        ("in July", [("2023-06-24", "2023-08-08")]),  # the latest July is last year's
        ("last Saturday", [("2024-05-18", "2024-06-02")]),  # a week ago: today is Saturday
        ("last Friday", [("2024-05-24", "2024-06-08")]),
        ("I may go in a week", []),  # no period named
    ],
)
def test_named_periods_read_relative_dates_against_now(text: str, expected: list[tuple[str, str]]) -> None:
    assert _days(named_periods(text, NOW)) == expected


@pytest.mark.parametrize(
    "now", ["0001-01-01T00:00:00.000000Z", "0001-01-08T00:00:00.000000Z", "9999-12-20T00:00:00.000000Z"]
)
@pytest.mark.parametrize(
    "text",
    [
        "what did I do in December?",
        "in January",
        "this month",
        "last month",
        "yesterday",
        "today",
        "last year",
        "the past year",
        "last Monday",
        "this week",
        "2 months ago",
        "3 weeks ago",
        "on Dec 31",
    ],
)
def test_a_period_past_the_calendar_s_end_names_nothing(now: str, text: str) -> None:
    """Read as of the calendar's first or last days (recall's ``as_of``), a period off its end names no time
    (issue 34: ValueError "year 10000 is out of range" from recall's time lane)."""
    for start, end in named_periods(text, now):
        assert parse_time(start) == start and parse_time(end) == end and start < end


def test_a_month_with_its_year_is_not_read_again_as_the_latest_such_month() -> None:
    assert _days(named_periods("what did I do in July 1900?", NOW)) == [("1900-06-24", "1900-08-08")]
