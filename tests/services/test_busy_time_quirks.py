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
