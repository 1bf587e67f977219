"""Real-world iCalendar quirks, read from a calendar feed into busy time: issue 38's four
files, as the outside interop run met them.

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
