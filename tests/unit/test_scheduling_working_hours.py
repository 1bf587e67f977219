"""Working hours in local time, expanded to UTC across DST changes."""

from __future__ import annotations

from datetime import UTC, date, datetime

from app.scheduling.intervals import Interval
from app.scheduling.working_hours import WeeklySchedule, working_intervals

NINE_TO_FIVE = [(9 * 60, 17 * 60)]
ALL_DAYS = dict.fromkeys(range(7), NINE_TO_FIVE)


def utc(*args):
    return datetime(*args, tzinfo=UTC)


def day_of(schedule, day):
    start = utc(day.year, day.month, day.day)
    return [
        i
        for i in working_intervals(schedule, start, utc(day.year, day.month, day.day, 23, 59))
        if i.start.date() == day or i.end.date() == day
    ]


def test_new_york_nine_to_five_in_winter():
    schedule = WeeklySchedule("America/New_York", ALL_DAYS)
    assert day_of(schedule, date(2026, 12, 1)) == [
        Interval(utc(2026, 12, 1, 14), utc(2026, 12, 1, 22))
    ]


def test_new_york_spring_forward_day_keeps_local_hours():
    # 2026-03-08: clocks jump 02:00 -> 03:00; 09:00 EDT is 13:00Z.
    schedule = WeeklySchedule("America/New_York", ALL_DAYS)
    assert day_of(schedule, date(2026, 3, 7)) == [
        Interval(utc(2026, 3, 7, 14), utc(2026, 3, 7, 22))
    ]
    assert day_of(schedule, date(2026, 3, 8)) == [
        Interval(utc(2026, 3, 8, 13), utc(2026, 3, 8, 21))
    ]


def test_new_york_fall_back_day_keeps_local_hours():
    # 2026-11-01: clocks fall 02:00 -> 01:00; 09:00 EST is 14:00Z.
    schedule = WeeklySchedule("America/New_York", ALL_DAYS)
    assert day_of(schedule, date(2026, 10, 31)) == [
        Interval(utc(2026, 10, 31, 13), utc(2026, 10, 31, 21))
    ]
    assert day_of(schedule, date(2026, 11, 1)) == [
        Interval(utc(2026, 11, 1, 14), utc(2026, 11, 1, 22))
    ]


def test_london_changes_on_its_own_dates():
    schedule = WeeklySchedule("Europe/London", ALL_DAYS)
    # 2026-03-29 BST starts in London (New York changed three weeks earlier).
    assert day_of(schedule, date(2026, 3, 28)) == [
        Interval(utc(2026, 3, 28, 9), utc(2026, 3, 28, 17))
    ]
    assert day_of(schedule, date(2026, 3, 29)) == [
        Interval(utc(2026, 3, 29, 8), utc(2026, 3, 29, 16))
    ]
    # 2026-10-25 BST ends.
    assert day_of(schedule, date(2026, 10, 25)) == [
        Interval(utc(2026, 10, 25, 9), utc(2026, 10, 25, 17))
    ]


def test_whole_day_lasts_23_hours_on_spring_forward():
    schedule = WeeklySchedule("America/New_York", {6: [(0, 1440)]})  # Sundays
    (interval,) = working_intervals(schedule, utc(2026, 3, 8, 12), utc(2026, 3, 8, 13))
    assert interval.end - interval.start == (utc(1, 1, 1, 23) - utc(1, 1, 1))


def test_whole_day_lasts_25_hours_on_fall_back():
    schedule = WeeklySchedule("Europe/London", {6: [(0, 1440)]})
    (interval,) = working_intervals(schedule, utc(2026, 10, 25, 12), utc(2026, 10, 25, 13))
    assert (interval.end - interval.start).total_seconds() == 25 * 3600


def test_range_inside_the_skipped_hour_is_empty():
    schedule = WeeklySchedule("America/New_York", {6: [(2 * 60, 3 * 60)]})
    assert working_intervals(schedule, utc(2026, 3, 8), utc(2026, 3, 9)) == []


def test_range_starting_in_the_skipped_hour_reads_it_with_the_old_offset():
    # 02:30 does not exist on 2026-03-08; RFC 5545 reads it as 02:30 EST = 03:30 EDT = 07:30Z.
    schedule = WeeklySchedule("America/New_York", {6: [(2 * 60 + 30, 5 * 60)]})
    assert working_intervals(schedule, utc(2026, 3, 8), utc(2026, 3, 9)) == [
        Interval(utc(2026, 3, 8, 7, 30), utc(2026, 3, 8, 9))
    ]


def test_range_over_the_repeated_hour_covers_both_occurrences():
    # 01:00-02:00 happens twice on 2026-11-01 in New York: 05:00Z-07:00Z, two real hours.
    schedule = WeeklySchedule("America/New_York", {6: [(60, 120)]})
    assert working_intervals(schedule, utc(2026, 11, 1), utc(2026, 11, 2)) == [
        Interval(utc(2026, 11, 1, 5), utc(2026, 11, 1, 7))
    ]


def test_several_ranges_per_day_and_touching_ranges_merge():
    schedule = WeeklySchedule("UTC", {1: [(540, 720), (780, 1020), (1020, 1080)]})
    assert working_intervals(schedule, utc(2026, 12, 1), utc(2026, 12, 2)) == [
        Interval(utc(2026, 12, 1, 9), utc(2026, 12, 1, 12)),
        Interval(utc(2026, 12, 1, 13), utc(2026, 12, 1, 18)),
    ]


def test_override_replaces_the_weekday_hours():
    schedule = WeeklySchedule("UTC", {1: NINE_TO_FIVE}, overrides={date(2026, 12, 1): [(600, 660)]})
    assert working_intervals(schedule, utc(2026, 12, 1), utc(2026, 12, 2)) == [
        Interval(utc(2026, 12, 1, 10), utc(2026, 12, 1, 11))
    ]


def test_empty_override_closes_the_day():
    schedule = WeeklySchedule("UTC", {1: NINE_TO_FIVE}, overrides={date(2026, 12, 1): []})
    assert working_intervals(schedule, utc(2026, 12, 1), utc(2026, 12, 2)) == []


def test_override_opens_a_normally_closed_day():
    schedule = WeeklySchedule("UTC", {}, overrides={date(2026, 12, 6): [(600, 720)]})
    assert working_intervals(schedule, utc(2026, 12, 6), utc(2026, 12, 7)) == [
        Interval(utc(2026, 12, 6, 10), utc(2026, 12, 6, 12))
    ]


def test_hours_that_touch_the_window_are_returned_whole():
    schedule = WeeklySchedule("UTC", {1: NINE_TO_FIVE})
    assert working_intervals(schedule, utc(2026, 12, 1, 12), utc(2026, 12, 1, 13)) == [
        Interval(utc(2026, 12, 1, 9), utc(2026, 12, 1, 17))
    ]
