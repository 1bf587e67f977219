"""Real-world iCalendar quirks, read from a calendar feed into busy time: issue 38's four
files, as the outside interop run met them, and issue 48's two from icalendar's test corpus
(an RDATE PERIOD with its own duration; a file ending in ``END:VCALENDARD``), kept byte for
byte and so without ``X-FIXTURE-NOTE`` lines: the tests say what they hold.

Each fixture in ``tests/fixtures/calendars`` is named after its quirk; ``expected.json`` gives
its window, the sub account's timezone, and the busy periods worked out by hand (the
``X-FIXTURE-NOTE`` lines say how). A test serves the file byte for byte from a feed server of
its own, syncs a subscription to it with the app's own entry point (``sync_connection``) over
the fixture's window, and compares what the sync stored with the expectation and with what the
reference expansion (``recurring-ical-events`` over ``icalendar``, reading the whole file at
once) makes of the same file. As in ``test_calendar_quirks``, ``now`` and the horizon make the
fixture's window, so nothing reads the clock."""

from __future__ import annotations

from datetime import UTC, datetime
from zoneinfo import ZoneInfo

import icalendar
import pytest
import recurring_ical_events

from tests.factories import TenantFactory
from tests.feed_servers import feed_server
from tests.services.test_calendar_quirks import (
    EXPECTED,
    FIXTURES,
    expected_busy,
    fixture_tenant,
    instant,
    iso,
    synced_busy,
)


def window_of(fixture: str) -> tuple[datetime, datetime]:
    start, end = (instant(text) for text in EXPECTED[fixture]["window"])
    return start, end


def busy_time_read_from_a_feed(fixture: str) -> list[list[str]]:
    """Serve ``fixture`` as a feed, sync a subscription to it over the fixture's window in the
    fixture's timezone, and return the busy periods stored, as in ``expected.json``."""
    with feed_server() as feed:
        feed.serve((FIXTURES / fixture).read_bytes())
        tenant = fixture_tenant(TenantFactory(), fixture, {"kind": "ics", "url": feed.url})
        return synced_busy(fixture, tenant.connections["Quirks"])


def reference_busy(fixture: str) -> list[list[str]]:
    """What the reference expansion makes of the whole file in the fixture's window: floating
    times (those the file leaves floating) in the fixture's timezone."""
    start, end = window_of(fixture)
    tz = ZoneInfo(EXPECTED[fixture]["timezone"])
    calendar = icalendar.Calendar.from_ical((FIXTURES / fixture).read_text())
    periods = set()
    for event in recurring_ical_events.of(calendar).between(start, end):
        begin, finish = event.decoded("DTSTART"), event.decoded("DTEND")
        if begin.tzinfo is None:
            begin, finish = begin.replace(tzinfo=tz), finish.replace(tzinfo=tz)
        periods.add((begin.astimezone(UTC), finish.astimezone(UTC)))
    return [[iso(begin), iso(finish)] for begin, finish in sorted(periods)]


@pytest.mark.parametrize(
    "fixture",
    [
        "quoted_tzid_with_colon.ics",
        "two_identical_rrule_lines.ics",
        "x_wr_timezone_floating_times.ics",
        "mismatched_end_of_an_unused_component.ics",
        "rdate_period_with_its_own_duration.ics",
        "misspelt_end_of_the_calendar.ics",
    ],
)
def test_the_reference_expansion_reads_each_fixture_as_expected(fixture):
    assert reference_busy(fixture) == expected_busy(fixture)


def test_a_quoted_tzid_holding_a_colon_keeps_its_vtimezone(private_allowed):
    fixture = "quoted_tzid_with_colon.ics"
    assert busy_time_read_from_a_feed(fixture) == expected_busy(fixture)


def test_an_event_with_two_identical_rrule_lines_is_the_union_of_its_rules(
    private_allowed,
):
    fixture = "two_identical_rrule_lines.ics"
    assert busy_time_read_from_a_feed(fixture) == expected_busy(fixture)


def test_floating_times_are_read_in_the_feeds_x_wr_timezone(private_allowed):
    fixture = "x_wr_timezone_floating_times.ics"
    assert busy_time_read_from_a_feed(fixture) == expected_busy(fixture)


def test_a_misspelt_end_of_an_unused_component_hides_no_event(private_allowed):
    fixture = "mismatched_end_of_an_unused_component.ics"
    assert busy_time_read_from_a_feed(fixture) == expected_busy(fixture)


def test_an_rdate_period_keeps_its_own_duration_not_the_series(private_allowed):
    # RFC 7265's appendix example 2 (icalendar's test corpus): a daily series of one hour and,
    # on its first day, an RDATE;VALUE=PERIOD:…T150000/PT2H, busy for its two hours.
    fixture = "rdate_period_with_its_own_duration.ics"
    assert busy_time_read_from_a_feed(fixture) == reference_busy(fixture) == expected_busy(fixture)


def test_a_feed_ending_in_a_misspelt_end_of_the_calendar_keeps_its_event(private_allowed):
    # An Exchange 2010 file (icalendar's timezone_same_start_and_offset.ics) whose last line is
    # END:VCALENDARD: that END closes the calendar, as icalendar reads it.
    fixture = "misspelt_end_of_the_calendar.ics"
    assert busy_time_read_from_a_feed(fixture) == reference_busy(fixture) == expected_busy(fixture)
