"""Real-world iCalendar quirks, read from real CalDAV servers into busy time.

Each fixture in ``tests/fixtures/calendars`` is a calendar as a client exports it (Outlook,
Google, Apple, Thunderbird), with one quirk; ``expected.json`` beside them gives, per file, a
window, the timezone that floating and all-day times are placed in, and the busy periods that
RFC 5545 makes of it, worked out by hand (each file's ``X-FIXTURE-NOTE`` lines say how). A
test stores the file's events on a server, one calendar object resource per UID as an
importing client would (RFC 4791 4.1: no METHOD), byte for byte; syncs a connection to that
calendar with the app's own entry point (``sync_connection``); and compares the busy time it
stored with the expectation.

Both Radicale and Xandikos serve every test: they differ in how they parse what they store
and in how they answer the time-range query the sync sends, so a quirk the app reads right
from one server may reach it differently from the other.

The window is the fixture's, not today's: ``sync_connection`` reads [now - LOOK_BACK, now +
horizon + READ_AHEAD] for the ``now`` it is given, so the test passes the ``now`` and the
sub account's booking horizon that make exactly that window. Nothing reads the clock, and
the service does not refuse a window in the past (or wherever it is), so the tests do not
depend on the date or on ``--clock``.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select

from app.extensions import db
from app.models import BlockedTime
from app.services.integrations.calendars import sync_connection
from app.services.integrations.calendars.sync import LOOK_BACK, READ_AHEAD
from tests.factories import TenantFactory
from tests.radicale_servers import PASSWORD, connection_doc, fresh_user, radicale_server
from tests.servers import OwnServer
from tests.xandikos_servers import put_raw_event, xandikos_server

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "calendars"
EXPECTED: dict[str, dict[str, Any]] = json.loads((FIXTURES / "expected.json").read_text())

SERVERS = {"radicale": radicale_server, "xandikos": xandikos_server}


@pytest.fixture(
    scope="module", params=[pytest.param(name, marks=pytest.mark.slow) for name in sorted(SERVERS)]
)
def server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[OwnServer]:
    """Each CalDAV server, one for the module; each test uses a calendar of its own."""
    with SERVERS[request.param](tmp_path_factory.mktemp(request.param)) as running:
        yield running


# Fixtures as calendar object resources


def logical_lines(text: str) -> list[str]:
    """The content lines of ``text``, each with its folded continuation lines (RFC 5545 3.1)
    kept as they are, so that a resource is made of the file's own bytes."""
    lines: list[str] = []
    for physical in text.replace("\r\n", "\n").split("\n"):
        if physical[:1] in (" ", "\t") and lines:
            lines[-1] += "\r\n" + physical
        elif physical:
            lines.append(physical)
    return lines


def unfolded(line: str) -> str:
    """A content line as one line (its folds removed), for reading a value from it."""
    return line.replace("\r\n ", "").replace("\r\n\t", "")


def name_of(line: str) -> str:
    """A content line's property name, upper case (``DTSTART;TZID=…:…`` → ``DTSTART``)."""
    return line.split(":", 1)[0].split(";", 1)[0].upper()


def calendar_objects(text: str) -> dict[str, str]:
    """The iCalendar file ``text`` as CalDAV calendar object resources, by UID: each holds the
    file's calendar properties (without METHOD, which a resource must not have), all its
    VTIMEZONEs, and the components of that UID (a series and its overrides), in file order."""
    header: list[str] = []
    timezones: list[str] = []
    by_uid: dict[str, list[str]] = {}
    component: list[str] = []
    depth = 0
    for line in logical_lines(text):
        name = name_of(line)
        if name == "BEGIN":
            depth += 1
        if depth == 1 and name not in ("BEGIN", "END", "METHOD"):
            header.append(line)
        elif depth >= 2:
            component.append(line)
        if name == "END":
            depth -= 1
            if depth == 1:
                if component[0].upper() == "BEGIN:VTIMEZONE":
                    timezones += component
                else:
                    uid = next(
                        unfolded(line).split(":", 1)[1]
                        for line in component
                        if name_of(line) == "UID"
                    )
                    by_uid.setdefault(uid, []).extend(component)
                component = []
    return {
        uid: "\r\n".join(["BEGIN:VCALENDAR", *header, *timezones, *lines, "END:VCALENDAR", ""])
        for uid, lines in by_uid.items()
    }


# The busy time the app makes of a fixture


def instant(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).astimezone(UTC)


def iso(value: datetime) -> str:
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def expected_busy(fixture: str) -> list[list[str]]:
    return EXPECTED[fixture]["busy"]


def fixture_now_and_horizon(fixture: str) -> tuple[datetime, int]:
    """The ``now`` and the booking horizon (days) whose sync window is the fixture's."""
    start, end = (instant(text) for text in EXPECTED[fixture]["window"])
    now = start + LOOK_BACK
    horizon = end - now - READ_AHEAD
    assert horizon >= timedelta(days=1) and horizon % timedelta(days=1) == timedelta(0), (
        f"{fixture}: its window must be now - {LOOK_BACK} to now + whole days + {READ_AHEAD}"
    )
    return now, horizon.days


def fixture_tenant(tenants: TenantFactory, fixture: str, connection: dict[str, Any]) -> Any:
    """A tenant in the fixture's timezone, with the horizon that makes its window, and
    ``connection`` (named "Quirks")."""
    _, horizon_days = fixture_now_and_horizon(fixture)
    return tenants.create(
        timezone=EXPECTED[fixture]["timezone"],
        settings={
            "defaultDuration": 30,
            "minimumNoticeMinutes": 0,
            "bookingHorizonDays": horizon_days,
        },
        eventTypes=[],
        calendarConnections=[{**connection, "name": "Quirks"}],
    )


def synced_busy(fixture: str, connection_id: int) -> list[list[str]]:
    """Sync the connection at the fixture's ``now``; the busy periods it stored, sorted, as
    [start, end] in UTC ISO 8601 (the form of ``expected.json``)."""
    now, _ = fixture_now_and_horizon(fixture)
    result = sync_connection(connection_id, now=now)
    db.session.commit()
    assert (result.status, result.error) == ("synced", None)
    rows = db.session.execute(
        select(BlockedTime.start_at, BlockedTime.end_at)
        .where(BlockedTime.calendar_connection_id == connection_id)
        .order_by(BlockedTime.start_at, BlockedTime.end_at)
    ).all()
    return [[iso(row_start), iso(row_end)] for row_start, row_end in rows]


def busy_time_read(tenants: TenantFactory, server: Any, fixture: str) -> list[list[str]]:
    """Put ``fixture``'s events in a new calendar on ``server``, sync a connection to it over
    the fixture's window in the fixture's timezone, and return the busy periods it stored."""
    user = fresh_user()
    calendar = server.make_calendar(user, f"{Path(fixture).stem} {uuid.uuid4().hex[:8]}")
    for uid, ics in calendar_objects((FIXTURES / fixture).read_text()).items():
        put_raw_event(calendar, uid, ics)
    document = connection_doc("Quirks", server, user, PASSWORD, calendar=str(calendar.url))
    tenant = fixture_tenant(tenants, fixture, document)
    return synced_busy(fixture, tenant.connections["Quirks"])


def test_every_fixture_has_an_expectation() -> None:
    assert sorted(path.name for path in FIXTURES.glob("*.ics")) == sorted(EXPECTED)


def test_windows_zone_names_are_read_as_the_iana_zones_they_stand_for(tenants, server) -> None:
    fixture = "windows_zone_names_without_vtimezone.ics"
    assert busy_time_read(tenants, server, fixture) == expected_busy(fixture)


def test_an_event_without_dtend_lasts_no_time_or_one_whole_day(tenants, server) -> None:
    fixture = "event_without_dtend.ics"
    assert busy_time_read(tenants, server, fixture) == expected_busy(fixture)


def test_a_duration_adds_nominal_days_and_exact_hours(tenants, server) -> None:
    fixture = "event_with_duration.ics"
    assert busy_time_read(tenants, server, fixture) == expected_busy(fixture)


def test_floating_times_are_wall_times_in_the_sub_accounts_timezone(tenants, server) -> None:
    fixture = "floating_times.ics"
    assert busy_time_read(tenants, server, fixture) == expected_busy(fixture)


def test_an_all_day_event_blocks_every_day_up_to_its_exclusive_end(tenants, server) -> None:
    fixture = "all_day_multi_day.ics"
    assert busy_time_read(tenants, server, fixture) == expected_busy(fixture)


def test_rdate_and_exdate_lists_add_and_remove_every_listed_instance(tenants, server) -> None:
    fixture = "rdate_and_exdate_lists.ics"
    assert busy_time_read(tenants, server, fixture) == expected_busy(fixture)


def test_a_moved_instance_is_busy_where_it_went_and_a_cancelled_one_is_free(
    tenants, server
) -> None:
    fixture = "recurrence_override.ics"
    assert busy_time_read(tenants, server, fixture) == expected_busy(fixture)


def test_an_unbounded_rule_is_busy_in_the_window_however_long_ago_it_began(tenants, server) -> None:
    fixture = "unbounded_rule.ics"
    assert busy_time_read(tenants, server, fixture) == expected_busy(fixture)


def test_transparent_and_cancelled_events_are_free(tenants, server) -> None:
    fixture = "transparent_and_cancelled.ics"
    assert busy_time_read(tenants, server, fixture) == expected_busy(fixture)


def test_a_weekly_event_keeps_its_wall_time_across_the_dst_change(tenants, server) -> None:
    fixture = "dst_crossing_recurrence.ics"
    assert busy_time_read(tenants, server, fixture) == expected_busy(fixture)


# Xandikos only: Radicale (vobject 0.9.9) refuses a resource with an RDATE PERIOD at its PUT
# ("PERIOD not supported"), so no Radicale calendar holds one. Xandikos stores it, but fails
# (HTTP 500) every time-range query that meets it: the read asks again without the range.
@pytest.mark.parametrize("server", ["xandikos"], indirect=True)
def test_an_rdate_period_keeps_its_own_duration_not_the_series(tenants, server) -> None:
    # RFC 7265's appendix example 2, as icalendar's test corpus has it: a daily series of one
    # hour (DURATION:PT1H) and, on its first day, an RDATE PERIOD of two hours at 15:00.
    fixture = "rdate_period_with_its_own_duration.ics"
    assert busy_time_read(tenants, server, fixture) == expected_busy(fixture)


def test_a_file_ending_in_a_misspelt_end_of_the_calendar_keeps_its_event(tenants, server) -> None:
    # An Exchange 2010 export (icalendar's timezone_same_start_and_offset.ics): its last line
    # is END:VCALENDARD. A client imports its one event; the server stores it as a resource.
    fixture = "misspelt_end_of_the_calendar.ics"
    assert busy_time_read(tenants, server, fixture) == expected_busy(fixture)
