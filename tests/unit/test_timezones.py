"""Reading instants and timezone names (app.scheduling.timezones)."""

from __future__ import annotations

from datetime import UTC, date, datetime, time

import pytest
from hypothesis import given
from hypothesis import strategies as st

from app.scheduling.timezones import (
    InvalidInstant,
    InvalidTimezone,
    NonexistentLocalTime,
    format_utc,
    format_utc_seconds,
    local_to_utc,
    read_instant,
    zone,
)

NEW_YORK = zone("America/New_York")


def parse_instant(text, tz, *, date_means="start"):
    return read_instant(text).resolve(tz, date_means=date_means)


def utc(*args):
    return datetime(*args, tzinfo=UTC)


@pytest.mark.parametrize(
    "text, expected",
    [
        ("2026-12-01T15:00:00Z", utc(2026, 12, 1, 15)),
        ("2026-12-01T10:00:00-05:00", utc(2026, 12, 1, 15)),
        ("2026-12-01T16:00:00+01:00", utc(2026, 12, 1, 15)),
        ("2026-12-01T10:00:00", utc(2026, 12, 1, 15)),  # naive: New York wall time
        ("2026-07-01T10:00:00", utc(2026, 7, 1, 14)),  # summer time
        ("2026-12-01", utc(2026, 12, 1, 5)),
    ],
)
def test_parse_instant(text, expected):
    assert parse_instant(text, NEW_YORK) == expected


def test_a_date_as_window_end_means_the_end_of_that_day():
    assert parse_instant("2026-12-01", NEW_YORK, date_means="end") == utc(2026, 12, 2, 5)


def test_date_end_on_a_fall_back_day_spans_25_hours():
    start = parse_instant("2026-11-01", NEW_YORK)
    end = parse_instant("2026-11-01", NEW_YORK, date_means="end")
    assert (end - start).total_seconds() == 25 * 3600


@pytest.mark.parametrize(
    "text", ["", "  ", "tomorrow", "2026-02-30", "2026-12-01T24:01", "12/01/2026"]
)
def test_unreadable_instants_are_refused(text):
    with pytest.raises(InvalidInstant):
        parse_instant(text, NEW_YORK)


def test_out_of_range_instant_is_refused_not_crashing():
    with pytest.raises(InvalidInstant):
        parse_instant("9999-12-31", NEW_YORK, date_means="end")


@pytest.mark.parametrize(
    "name",
    [
        "Mars/Olympus",
        "EST5EDT ",
        "../../etc/passwd",
        "",
        "utc",
        "localtime",
        "Factory",
        "posixrules",
    ],
)
def test_unknown_timezones_are_refused(name):
    with pytest.raises(InvalidTimezone):
        zone(name)


def test_skipped_wall_time_resolves_to_the_offset_before_the_change():
    # 2026-03-08 02:30 does not exist in New York; fold=0 reads it with EST (-05:00).
    assert local_to_utc(date(2026, 3, 8), time(2, 30), NEW_YORK) == utc(2026, 3, 8, 7, 30)


@pytest.mark.parametrize("name", ["America/New_York", "UTC", "Etc/GMT+5", "US/Eastern", "EST5EDT"])
def test_iana_names_and_links_are_zones(name):
    assert zone(name).key == name


@pytest.mark.parametrize(
    "text", ["2026-03-08T02:00:00", "2026-03-08T02:30:00", "2026-03-08T02:59:59"]
)
def test_a_naive_time_skipped_by_spring_forward_is_refused_by_name(text):
    with pytest.raises(NonexistentLocalTime, match=f"{text} does not exist in America/New_York"):
        parse_instant(text, NEW_YORK)


def test_the_edges_of_the_spring_forward_gap_exist():
    assert parse_instant("2026-03-08T01:59:59", NEW_YORK) == utc(2026, 3, 8, 6, 59, 59)
    assert parse_instant("2026-03-08T03:00:00", NEW_YORK) == utc(2026, 3, 8, 7)


def test_a_date_whose_midnight_is_skipped_starts_at_its_first_instant():
    # Santiago springs forward at midnight: 2026-09-06 begins at 01:00 -03.
    santiago = zone("America/Santiago")
    assert parse_instant("2026-09-06", santiago) == utc(2026, 9, 6, 4)


def test_a_naive_time_given_with_an_offset_is_never_refused():
    assert parse_instant("2026-03-08T02:30:00-05:00", NEW_YORK) == utc(2026, 3, 8, 7, 30)


def test_doubled_wall_time_resolves_to_the_first_occurrence():
    # 2026-11-01 01:30 happens twice in New York; the first is EDT (-04:00).
    assert local_to_utc(date(2026, 11, 1), time(1, 30), NEW_YORK) == utc(2026, 11, 1, 5, 30)


def test_format_utc_is_second_precision_with_z():
    instant = datetime(2026, 12, 1, 10, 0, 5, 999, tzinfo=NEW_YORK)
    assert format_utc(instant) == "2026-12-01T15:00:05Z"


@given(st.integers(min_value=-2_208_988_800, max_value=7_258_118_399))  # 1900 to 2199
def test_an_instant_in_whole_seconds_is_written_as_format_utc_writes_it(seconds):
    assert format_utc_seconds(seconds) == format_utc(datetime.fromtimestamp(seconds, UTC))
