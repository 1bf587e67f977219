"""The caps rule alone (``app.scheduling.caps``): periods, counting, and which cap breaks."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

from app.scheduling.caps import (
    Cap,
    CountedBooking,
    Period,
    Scope,
    Tally,
    caps_from,
    period_end,
    period_start,
)
from app.scheduling.intervals import Interval

NY = "America/New_York"


def at(*args: int) -> datetime:
    return datetime(*args, tzinfo=UTC)


def half_hour(start: datetime, event_type_id: int = 1) -> CountedBooking:
    return CountedBooking(start, start + timedelta(minutes=30), event_type_id)


# The span the tests' tallies count over: all of December 2026 and the days around it.
DECEMBER = Interval(at(2026, 11, 30), at(2027, 1, 2))


def tally(*bookings: CountedBooking) -> Tally:
    return Tally.of(bookings, 1, NY, DECEMBER)


def test_weeks_run_monday_to_sunday_and_months_by_the_calendar():
    sunday = date(2026, 12, 6)
    assert period_start(sunday, Period.WEEK) == date(2026, 11, 30)
    assert period_end(date(2026, 11, 30), Period.WEEK) == date(2026, 12, 7)
    assert period_start(sunday, Period.MONTH) == date(2026, 12, 1)
    assert period_end(date(2026, 12, 1), Period.MONTH) == date(2027, 1, 1)
    assert period_end(date(2027, 2, 1), Period.MONTH) == date(2027, 3, 1)


def test_a_booking_counts_on_the_local_day_it_starts():
    # 03:00 UTC on the 8th is 22:00 on the 7th in New York: it fills the 7th there.
    counted = tally(half_hour(at(2026, 12, 8, 3)))
    cap = Cap(Scope.EVENT_TYPE, Period.DAY, count=1)
    assert counted.broken_by(Interval(at(2026, 12, 7, 15), at(2026, 12, 7, 15, 30)), [cap]) == cap
    assert counted.broken_by(Interval(at(2026, 12, 8, 15), at(2026, 12, 8, 15, 30)), [cap]) is None


def test_minutes_count_the_new_booking_too():
    counted = tally(half_hour(at(2026, 12, 7, 15)))
    cap = Cap(Scope.CALENDAR, Period.WEEK, minutes=60)
    thirty = Interval(at(2026, 12, 9, 15), at(2026, 12, 9, 15, 30))
    sixty = Interval(at(2026, 12, 9, 15), at(2026, 12, 9, 16))
    assert counted.broken_by(thirty, [cap]) is None and counted.broken_by(sixty, [cap]) == cap


def test_an_event_types_cap_counts_only_its_own_bookings():
    counted = tally(half_hour(at(2026, 12, 7, 15), event_type_id=2))
    own = Cap(Scope.EVENT_TYPE, Period.DAY, count=1)
    whole = Cap(Scope.CALENDAR, Period.DAY, count=1)
    slot = Interval(at(2026, 12, 7, 17), at(2026, 12, 7, 17, 30))
    assert counted.broken_by(slot, [own]) is None and counted.broken_by(slot, [whole]) == whole


def test_a_limits_document_becomes_caps_that_say_what_they_are():
    caps = caps_from(
        {"perDay": {"count": 3}, "perWeek": {"minutes": 600}, "perMonth": None}, Scope.EVENT_TYPE
    )
    assert [c.describe() for c in caps] == [
        "Limit of 3 bookings a day reached for this event type",
        "Limit of 600 minutes of bookings a week reached for this event type",
    ]
    assert caps_from(None, Scope.CALENDAR) == []


def test_keeping_open_slots_drops_every_slot_of_a_full_day_and_keeps_the_next_days():
    counted = tally(half_hour(at(2026, 12, 7, 15)))
    cap = [Cap(Scope.EVENT_TYPE, Period.DAY, count=1)]
    slots = [Interval(at(2026, 12, d, h), at(2026, 12, d, h, 30)) for d in (7, 8) for h in (14, 16)]
    assert counted.keep_open(slots, cap) == slots[2:]
