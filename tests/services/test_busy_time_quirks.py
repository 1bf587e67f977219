"""Quirks of real exporters read as a reference expansion (``recurring-ical-events``) reads
them, straight through ``object_busy_periods`` (no server, no app): issue 38's feed files."""

from __future__ import annotations

from datetime import UTC, datetime
from zoneinfo import ZoneInfo

import icalendar
import recurring_ical_events

from app.scheduling.intervals import Interval
from app.services.integrations.calendars.busy_time import CalendarObject, object_busy_periods

WINDOW = Interval(datetime(2031, 1, 1, tzinfo=UTC), datetime(2031, 2, 1, tzinfo=UTC))
NEW_YORK = ZoneInfo("America/New_York")

# Cyrus exports an event's rule twice: the same RRULE line two times.
TWO_IDENTICAL_RULES = "\r\n".join(
    [
        "BEGIN:VCALENDAR",
        "VERSION:2.0",
        "PRODID:-//CyrusIMAP.org/Cyrus 3.8//EN",
        "BEGIN:VEVENT",
        "UID:standup-twice",
        "DTSTAMP:20301201T000000Z",
        "DTSTART:20310106T140000Z",
        "DTEND:20310106T143000Z",
        "RRULE:FREQ=WEEKLY;COUNT=3",
        "RRULE:FREQ=WEEKLY;COUNT=3",
        "SUMMARY:Standup",
        "END:VEVENT",
        "END:VCALENDAR",
        "",
    ]
)


def reference_periods(ics: str) -> list[tuple[datetime, datetime]]:
    """What the reference expansion library finds in the window (UTC)."""
    calendar = icalendar.Calendar.from_ical(ics)
    found = recurring_ical_events.of(calendar).between(WINDOW.start, WINDOW.end)
    return sorted(
        {(e.decoded("DTSTART").astimezone(UTC), e.decoded("DTEND").astimezone(UTC)) for e in found}
    )


def test_an_event_with_two_identical_rules_is_read_as_their_union():
    uid, periods = object_busy_periods(
        CalendarObject("standup.ics", TWO_IDENTICAL_RULES), WINDOW, NEW_YORK
    )
    assert uid == "standup-twice"
    found = sorted({(p.start, p.end) for p in periods})
    assert found == reference_periods(TWO_IDENTICAL_RULES)
    assert [start.day for start, _ in found] == [6, 13, 20]


def series(*lines: str) -> str:
    """A calendar of one weekly series in New York, an hour long by its DURATION, on Mondays
    2031-01-06 and 01-13 at 09:00 (14:00Z), with ``lines`` added to it (RDATEs)."""
    return "\r\n".join(
        [
            "BEGIN:VCALENDAR",
            "VERSION:2.0",
            "PRODID:-//busy time tests//EN",
            "BEGIN:VEVENT",
            "UID:weekly-with-extras",
            "DTSTAMP:20301201T000000Z",
            "DTSTART;TZID=America/New_York:20310106T090000",
            "DURATION:PT1H",
            "RRULE:FREQ=WEEKLY;COUNT=2",
            *lines,
            "END:VEVENT",
            "END:VCALENDAR",
            "",
        ]
    )


def busy(ics: str, window: Interval = WINDOW) -> list[tuple[datetime, datetime]]:
    _, periods = object_busy_periods(CalendarObject("series.ics", ics), window, NEW_YORK)
    return sorted((p.start, p.end) for p in periods)


def utc(*args: int) -> datetime:
    return datetime(*args, tzinfo=UTC)


MONDAYS = [(utc(2031, 1, 6, 14), utc(2031, 1, 6, 15)), (utc(2031, 1, 13, 14), utc(2031, 1, 13, 15))]


def test_an_rdate_period_with_a_duration_is_busy_for_its_own_duration_not_the_series():
    ics = series("RDATE;TZID=America/New_York;VALUE=PERIOD:20310108T150000/PT2H")
    assert busy(ics) == sorted([*MONDAYS, (utc(2031, 1, 8, 20), utc(2031, 1, 8, 22))])
    assert busy(ics) == reference_periods(ics)


def test_an_rdate_period_with_an_end_is_busy_until_that_end():
    ics = series("RDATE;VALUE=PERIOD:20310108T200000Z/20310108T231500Z")
    assert busy(ics) == sorted([*MONDAYS, (utc(2031, 1, 8, 20), utc(2031, 1, 8, 23, 15))])
    assert busy(ics) == reference_periods(ics)


def test_an_rdate_date_time_is_busy_for_the_series_duration():
    ics = series("RDATE;TZID=America/New_York:20310108T150000,20310110T150000")
    extra = [(utc(2031, 1, d, 20), utc(2031, 1, d, 21)) for d in (8, 10)]
    assert busy(ics) == sorted([*MONDAYS, *extra])
    assert busy(ics) == reference_periods(ics)


def test_a_moved_rdate_period_occurrence_is_busy_for_its_overrides_own_duration():
    moved = [
        "END:VEVENT",
        "BEGIN:VEVENT",
        "UID:weekly-with-extras",
        "DTSTAMP:20301201T000000Z",
        "RECURRENCE-ID;TZID=America/New_York:20310108T150000",
        "DTSTART;TZID=America/New_York:20310108T160000",
        "DURATION:PT30M",
    ]
    ics = series("RDATE;TZID=America/New_York;VALUE=PERIOD:20310108T150000/PT2H", *moved)
    assert busy(ics) == sorted([*MONDAYS, (utc(2031, 1, 8, 21), utc(2031, 1, 8, 21, 30))])
    assert busy(ics) == reference_periods(ics)


def test_an_rdate_periods_hours_are_elapsed_time_across_a_dst_change():
    # New York springs forward at 02:00 on 2031-03-09: two hours from 01:00 EST end at 04:00
    # EDT (08:00Z), not at the wall time 03:00 EDT that adding them to the wall clock gives.
    ics = series("RDATE;TZID=America/New_York;VALUE=PERIOD:20310309T010000/PT2H")
    march = Interval(utc(2031, 3, 1), utc(2031, 4, 1))
    assert busy(ics, march) == [(utc(2031, 3, 9, 6), utc(2031, 3, 9, 8))]
