"""Inbound CalDAV sync against a real Radicale server.

Events are created through the ``caldav`` client (raw iCalendar text PUT with its API). Most
tests sync at a fixed instant far in the future (``NOW``) with events placed relative to it,
so nothing depends on today's date; the one that goes through the HTTP API uses the real
clock and is ``date_sensitive``.
"""

from __future__ import annotations

import base64
import logging
from datetime import UTC, date, datetime, time, timedelta
from zoneinfo import ZoneInfo

import caldav
import pytest
from caldav.elements.base import BaseElement
from sqlalchemy import select

from app.extensions import db
from app.jobs.calendars import sync_all_connections
from app.models import BlockedTime, CalendarConnection, CalendarSettings, ConnectedCalendar
from app.models.types import utcnow
from app.scheduling.intervals import Interval
from app.services.common.encryption import encrypt_secret
from app.services.integrations.calendars import (
    probe_connection,
    sync_connection,
)
from app.services.integrations.calendars.busy_time import CalendarObject, busy_periods
from app.services.integrations.calendars.errors import MalformedCalendarData, TooManyBusyPeriods
from app.services.integrations.calendars.providers import caldav as caldav_provider
from tests.factories import NEW_YORK, external_busy_rows, make_booking, next_monday, ny, z
from tests.radicale_servers import (
    PASSWORD,
    connection_doc,
    fresh_user,
    radicale_server,
    vevent,
    vevents,
)

# A Monday. The tenant's calendar (America/New_York, 60-day horizon) reads [NOW - 1 day,
# NOW + 67 days]: up to 2031-03-14 12:00Z, across New York's spring-forward on 2031-03-09.
NOW = datetime(2031, 1, 6, 12, tzinfo=UTC)
BERLIN = ZoneInfo("Europe/Berlin")
TOKYO = ZoneInfo("Asia/Tokyo")


@pytest.fixture(scope="module")
def radicale(tmp_path_factory):
    """One server for the module (no authentication); each test uses users of its own."""
    with radicale_server(tmp_path_factory.mktemp("radicale")) as server:
        yield server


@pytest.fixture
def own_radicale(tmp_path):
    """A server of the test's own, to stop or freeze."""
    with radicale_server(tmp_path / "own-radicale") as server:
        yield server


def connect(tenants, server, *, user=None, calendar="Personal", make=True, password=PASSWORD):
    """A tenant with one connection to ``user``'s calendar ``calendar`` on ``server``.

    Returns (tenant, connection id, the caldav Calendar to put events in)."""
    user = user or fresh_user()
    caldav_calendar = server.make_calendar(user, calendar, password) if make else None
    tenant = tenants.create(
        calendarConnections=[connection_doc("Personal", server, user, password, calendar)]
    )
    connection_id = tenant.connections["Personal"]
    return tenant, connection_id, caldav_calendar


def put(calendar, ics: str):
    return calendar.add_event(ics)


def sync(connection_id, now=NOW, **kwargs):
    result = sync_connection(connection_id, now=now, **kwargs)
    db.session.commit()
    return result


busy_rows = external_busy_rows


def busy(connection_id):
    """{(uid, start, end)} of the connection's external busy time."""
    return [(uid, start, end) for _, uid, start, end in busy_rows(connection_id)]


def connection(connection_id) -> CalendarConnection:
    return db.session.get(CalendarConnection, connection_id, populate_existing=True)


def calendar_state(connection_id) -> ConnectedCalendar:
    """The sync state of the connection's one calendar."""
    (row,) = db.session.scalars(
        select(ConnectedCalendar)
        .where(ConnectedCalendar.calendar_connection_id == connection_id)
        .execution_options(populate_existing=True)
    )
    return row


def at(tz, day: date, hour: int, minute: int = 0) -> datetime:
    return datetime.combine(day, time(hour, minute), tzinfo=tz).astimezone(UTC)


def utc(*args) -> datetime:
    return datetime(*args, tzinfo=UTC)


@pytest.fixture
def reads(monkeypatch):
    """How many times a calendar's events were read (calendar-query REPORTs)."""
    calls = []
    search = caldav.Calendar.search

    def counting(self, *args, **kwargs):
        calls.append(str(self.url))
        return search(self, *args, **kwargs)

    monkeypatch.setattr(caldav.Calendar, "search", counting)
    return calls


@pytest.fixture
def fetched(monkeypatch):
    """The resources fetched one by one (calendar-multiget REPORTs), by path."""
    paths = []
    multiget = caldav.Calendar.multiget

    def counting(self, urls, *args, **kwargs):
        urls = list(urls)
        paths.extend(url.path for url in urls)
        return multiget(self, urls, *args, **kwargs)

    monkeypatch.setattr(caldav.Calendar, "multiget", counting)
    return paths


# The use case, through the API


@pytest.mark.date_sensitive
def test_an_event_blocks_availability_and_bookings(client, tenants, radicale):
    tenant, connection_id, calendar = connect(tenants, radicale)
    monday = next_monday()
    put(
        calendar,
        vevent(
            "school-run",
            f"DTSTART;TZID=America/New_York:{monday:%Y%m%d}T100000",
            f"DTEND;TZID=America/New_York:{monday:%Y%m%d}T110000",
            "SUMMARY:School run",
        ),
    )
    result = sync(connection_id, now=utcnow())
    assert (result.status, result.busy_count, result.added) == ("synced", 1, 1)
    assert busy(connection_id) == [("school-run", ny(monday, 10), ny(monday, 11))]
    (row,) = db.session.scalars(
        select(BlockedTime).where(BlockedTime.calendar_connection_id == connection_id)
    )
    assert (row.source, row.sub_account_id, row.reason) == ("external", tenant.sub_account_id, None)

    response = client.get(
        f"/v1/api/calendar/availability?startDate={monday}&endDate={monday}"
        f"&eventTypeId={tenant.event_types['Checkup']}",
        headers=tenant.headers(),
    )
    assert response.status_code == 200, response.json
    starts = [s["start"] for s in response.json[0]["slots"]]
    assert z(ny(monday, 9)) in starts and z(ny(monday, 11)) in starts
    assert z(ny(monday, 10)) not in starts and z(ny(monday, 9, 30)) not in starts

    booked = client.post(
        f"/v1/api/calendar/event-types/{tenant.event_types['Checkup']}/bookings",
        json={
            "startTime": z(ny(monday, 10, 30)),
            "endTime": z(ny(monday, 11, 30)),
            "attendees": [{"email": "pat@example.test"}],
        },
        headers=tenant.headers(),
    )
    assert booked.status_code == 400
    assert booked.json["message"] == "Time slot conflicts with an event in a connected calendar"


# What is busy


def test_weekly_event_with_a_moved_and_an_excluded_occurrence(tenants, radicale):
    _, connection_id, calendar = connect(tenants, radicale)
    first = date(2031, 1, 6)  # Mondays at 15:00 New York time, 10 times (past DST on 03-09)
    put(
        calendar,
        vevents(
            "weekly",
            [
                "DTSTART;TZID=America/New_York:20310106T150000",
                "DTEND;TZID=America/New_York:20310106T160000",
                "RRULE:FREQ=WEEKLY;COUNT=10",
                "EXDATE;TZID=America/New_York:20310120T150000",
            ],
            [
                "RECURRENCE-ID;TZID=America/New_York:20310127T150000",
                "DTSTART;TZID=America/New_York:20310128T090000",
                "DTEND;TZID=America/New_York:20310128T093000",
            ],
        ),
    )
    result = sync(connection_id)
    assert result.status == "synced"
    mondays = [first + timedelta(weeks=i) for i in range(10)]
    expected = [
        ("weekly", at(NEW_YORK, d, 15), at(NEW_YORK, d, 16))
        for d in mondays
        if d not in (date(2031, 1, 20), date(2031, 1, 27))
    ]
    expected.append(
        ("weekly", at(NEW_YORK, date(2031, 1, 28), 9), at(NEW_YORK, date(2031, 1, 28), 9, 30))
    )
    assert busy(connection_id) == sorted(expected, key=lambda e: e[1])
    # Before the change 15:00 is 20:00Z, after it 19:00Z.
    assert busy(connection_id)[0][1] == utc(2031, 1, 6, 20)
    assert busy(connection_id)[-1][1] == utc(2031, 3, 10, 19)
    assert result.busy_count == 9


def test_all_day_events_block_their_days_in_the_sub_accounts_timezone(tenants, radicale):
    _, connection_id, calendar = connect(tenants, radicale)
    put(calendar, vevent("holiday", "DTSTART;VALUE=DATE:20310108", "DTEND;VALUE=DATE:20310109"))
    put(calendar, vevent("trip", "DTSTART;VALUE=DATE:20310112", "DTEND;VALUE=DATE:20310115"))
    put(calendar, vevent("no-end", "DTSTART;VALUE=DATE:20310120"))
    # Its day in New York: the spring-forward day has 23 hours.
    put(calendar, vevent("short-day", "DTSTART;VALUE=DATE:20310309", "DTEND;VALUE=DATE:20310310"))
    assert sync(connection_id).status == "synced"
    assert busy(connection_id) == [
        ("holiday", utc(2031, 1, 8, 5), utc(2031, 1, 9, 5)),
        ("trip", utc(2031, 1, 12, 5), utc(2031, 1, 15, 5)),
        ("no-end", utc(2031, 1, 20, 5), utc(2031, 1, 21, 5)),
        ("short-day", utc(2031, 3, 9, 5), utc(2031, 3, 10, 4)),
    ]


def test_transparent_and_cancelled_events_are_not_busy(tenants, radicale):
    _, connection_id, calendar = connect(tenants, radicale)
    put(
        calendar,
        vevent("free", "DTSTART:20310107T150000Z", "DTEND:20310107T160000Z", "TRANSP:TRANSPARENT"),
    )
    put(
        calendar,
        vevent("off", "DTSTART:20310108T150000Z", "DTEND:20310108T160000Z", "STATUS:CANCELLED"),
    )
    put(
        calendar,
        vevent(
            "opaque",
            "DTSTART:20310109T150000Z",
            "DTEND:20310109T160000Z",
            "TRANSP:OPAQUE",
            "STATUS:CONFIRMED",
        ),
    )
    put(calendar, vevent("instant", "DTSTART:20310110T150000Z", "DTEND:20310110T150000Z"))
    # A daily series whose second occurrence alone is cancelled.
    put(
        calendar,
        vevents(
            "daily",
            ["DTSTART:20310113T080000Z", "DTEND:20310113T083000Z", "RRULE:FREQ=DAILY;COUNT=3"],
            [
                "RECURRENCE-ID:20310114T080000Z",
                "DTSTART:20310114T080000Z",
                "DTEND:20310114T083000Z",
                "STATUS:CANCELLED",
            ],
        ),
    )
    assert sync(connection_id).status == "synced"
    assert busy(connection_id) == [
        ("opaque", utc(2031, 1, 9, 15), utc(2031, 1, 9, 16)),
        ("daily", utc(2031, 1, 13, 8), utc(2031, 1, 13, 8, 30)),
        ("daily", utc(2031, 1, 15, 8), utc(2031, 1, 15, 8, 30)),
    ]


TOKYO_CUSTOM = [
    "@BEGIN:VTIMEZONE",
    "@TZID:Custom Tokyo",
    "@BEGIN:STANDARD",
    "@DTSTART:19700101T000000",
    "@TZOFFSETFROM:+0900",
    "@TZOFFSETTO:+0900",
    "@END:STANDARD",
    "@END:VTIMEZONE",
]


def test_events_in_other_timezones_and_floating_times(tenants, radicale):
    _, connection_id, calendar = connect(tenants, radicale)
    day = date(2031, 1, 8)
    put(
        calendar,
        vevent(
            "berlin",
            "DTSTART;TZID=Europe/Berlin:20310108T100000",
            "DTEND;TZID=Europe/Berlin:20310108T113000",
        ),
    )
    put(
        calendar,
        vevent(
            "tokyo",
            *TOKYO_CUSTOM,
            "DTSTART;TZID=Custom Tokyo:20310108T200000",
            "DURATION:PT45M",
        ),
    )
    put(calendar, vevent("utc", "DTSTART:20310108T170000Z", "DTEND:20310108T173000Z"))
    # Floating: wall time in the sub account's timezone (New York).
    put(calendar, vevent("floating", "DTSTART:20310108T150000", "DTEND:20310108T160000"))
    assert sync(connection_id).status == "synced"
    assert busy(connection_id) == [
        ("berlin", at(BERLIN, day, 10), at(BERLIN, day, 11, 30)),
        ("tokyo", at(TOKYO, day, 20), at(TOKYO, day, 20, 45)),
        ("utc", utc(2031, 1, 8, 17), utc(2031, 1, 8, 17, 30)),
        ("floating", at(NEW_YORK, day, 15), at(NEW_YORK, day, 16)),
    ]


def test_only_the_window_is_read(tenants, radicale):
    _, connection_id, calendar = connect(tenants, radicale)
    put(calendar, vevent("long-ago", "DTSTART:20301201T150000Z", "DTEND:20301201T160000Z"))
    put(calendar, vevent("yesterday", "DTSTART:20310105T150000Z", "DTEND:20310105T160000Z"))
    put(calendar, vevent("far-ahead", "DTSTART:20310601T150000Z", "DTEND:20310601T160000Z"))
    assert sync(connection_id).status == "synced"
    assert [uid for uid, _, _ in busy(connection_id)] == ["yesterday"]


def test_events_the_service_wrote_for_its_bookings_are_not_busy(tenants, radicale):
    tenant, connection_id, calendar = connect(tenants, radicale)
    other = tenants.create()
    own = make_booking(tenant, utc(2031, 1, 8, 15))
    foreign = make_booking(other, utc(2031, 1, 9, 15))
    put(calendar, vevent(own.uid, "DTSTART:20310108T150000Z", "DTEND:20310108T153000Z"))
    put(calendar, vevent(foreign.uid, "DTSTART:20310109T150000Z", "DTEND:20310109T153000Z"))
    assert sync(connection_id).busy_count == 1
    assert [uid for uid, _, _ in busy(connection_id)] == [foreign.uid]


# Re-syncs


def test_a_resync_of_an_unchanged_calendar_touches_nothing(tenants, radicale, reads):
    _, connection_id, calendar = connect(tenants, radicale)
    put(calendar, vevent("one", "DTSTART:20310107T150000Z", "DTEND:20310107T160000Z"))
    put(
        calendar,
        vevent(
            "weekly",
            "DTSTART:20310108T150000Z",
            "DTEND:20310108T160000Z",
            "RRULE:FREQ=WEEKLY",
        ),
    )
    first = sync(connection_id)
    assert first.status == "synced" and first.busy_count == 11  # 1 + Wednesdays to 03-12
    rows = busy_rows(connection_id)
    state = calendar_state(connection_id)
    assert state.sync_token and state.synced_until == NOW + timedelta(days=67)

    assert len(reads) == 1
    again = sync(connection_id, now=NOW + timedelta(hours=1))
    assert (again.status, again.busy_count, again.added, again.removed) == ("unchanged", 11, 0, 0)
    assert len(reads) == 1  # one PROPFIND for the markers, no events read
    assert busy_rows(connection_id) == rows
    assert connection(connection_id).last_success_at == NOW + timedelta(hours=1)

    # Eight days on, the window reaches past what was read: it is read again. What is still
    # in the window keeps its rows; the two days now behind it are dropped, a Wednesday added.
    later = NOW + timedelta(days=8)
    moved = sync(connection_id, now=later)
    assert (moved.status, moved.added, moved.removed, moved.busy_count) == ("synced", 1, 2, 10)
    assert len(reads) == 2
    after = busy_rows(connection_id)
    assert after[:-1] == rows[2:]
    assert after[-1].start_at == utc(2031, 3, 19, 15)


def test_a_changed_calendar_replaces_only_what_changed(tenants, radicale):
    _, connection_id, calendar = connect(tenants, radicale)
    keep = put(calendar, vevent("keep", "DTSTART:20310107T150000Z", "DTEND:20310107T160000Z"))
    gone = put(calendar, vevent("gone", "DTSTART:20310108T150000Z", "DTEND:20310108T160000Z"))
    moved = put(calendar, vevent("moved", "DTSTART:20310109T150000Z", "DTEND:20310109T160000Z"))
    assert keep and sync(connection_id).busy_count == 3
    kept_id = busy_rows(connection_id)[0].id

    gone.delete()
    moved.data = vevent("moved", "DTSTART:20310109T170000Z", "DTEND:20310109T180000Z")
    moved.save()
    result = sync(connection_id, now=NOW + timedelta(minutes=5))
    assert (result.status, result.added, result.removed, result.busy_count) == ("synced", 1, 2, 2)
    rows = busy_rows(connection_id)
    assert [(r.external_uid, r.start_at) for r in rows] == [
        ("keep", utc(2031, 1, 7, 15)),
        ("moved", utc(2031, 1, 9, 17)),
    ]
    assert rows[0].id == kept_id


class Absent(BaseElement):
    tag = "{urn:example:absent}property"


def test_without_sync_token_or_ctag_the_etags_tell_a_change(
    tenants, radicale, reads, fetched, monkeypatch
):
    monkeypatch.setattr(caldav_provider, "SYNC_TOKEN", Absent)
    monkeypatch.setattr(caldav_provider, "CTAG", Absent)
    _, connection_id, calendar = connect(tenants, radicale)
    event = put(calendar, vevent("one", "DTSTART:20310107T150000Z", "DTEND:20310107T160000Z"))
    assert sync(connection_id).status == "synced"
    state = calendar_state(connection_id)
    assert state.sync_token is None and state.ctag.startswith("etags:")

    assert sync(connection_id).status == "unchanged"
    event.data = vevent("one", "DTSTART:20310107T170000Z", "DTEND:20310107T180000Z")
    event.save()
    assert sync(connection_id).status == "synced"
    assert busy(connection_id) == [("one", utc(2031, 1, 7, 17), utc(2031, 1, 7, 18))]
    assert len(reads) == 1  # the window was read once; then only the changed event was fetched
    assert fetched == [event.url.path]


def test_with_a_ctag_but_no_sync_token_only_changed_events_are_fetched(
    tenants, radicale, reads, fetched, monkeypatch
):
    monkeypatch.setattr(caldav_provider, "SYNC_TOKEN", Absent)
    _, connection_id, calendar = connect(tenants, radicale)
    event = put(calendar, vevent("one", "DTSTART:20310107T150000Z", "DTEND:20310107T160000Z"))
    put(calendar, vevent("two", "DTSTART:20310108T150000Z", "DTEND:20310108T160000Z"))
    assert sync(connection_id).status == "synced"
    state = calendar_state(connection_id)
    assert state.sync_token is None and not state.ctag.startswith("etags:")
    assert sync(connection_id).status == "unchanged"

    event.data = vevent("one", "DTSTART:20310107T170000Z", "DTEND:20310107T180000Z")
    event.save()
    result = sync(connection_id)
    assert (result.status, result.added, result.removed) == ("synced", 1, 1)
    assert len(reads) == 1  # the window was read once; then only the changed event was fetched
    assert fetched == [event.url.path]


def test_a_new_timezone_places_all_day_events_again(tenants, radicale):
    tenant, connection_id, calendar = connect(tenants, radicale)
    put(calendar, vevent("holiday", "DTSTART;VALUE=DATE:20310108", "DTEND;VALUE=DATE:20310109"))
    assert sync(connection_id).status == "synced"
    settings = db.session.get(CalendarSettings, tenant.sub_account_id)
    settings.timezone = "Europe/Berlin"
    db.session.commit()
    assert sync(connection_id).status == "synced"
    assert busy(connection_id) == [("holiday", utc(2031, 1, 7, 23), utc(2031, 1, 8, 23))]


def test_an_emptied_calendar_leaves_no_busy_time(tenants, radicale):
    _, connection_id, calendar = connect(tenants, radicale)
    event = put(calendar, vevent("only", "DTSTART:20310107T150000Z", "DTEND:20310107T160000Z"))
    assert sync(connection_id).busy_count == 1
    event.delete()
    result = sync(connection_id)
    assert (result.status, result.busy_count, result.removed) == ("synced", 0, 1)
    assert busy(connection_id) == []


# Finding the calendar


def test_the_calendar_is_found_by_name_by_url_or_as_the_only_one(tenants, radicale):
    user = fresh_user()
    work = radicale.make_calendar(user, "Work")
    home = radicale.make_calendar(user, "Home")
    put(work, vevent("work", "DTSTART:20310107T150000Z", "DTEND:20310107T160000Z"))
    put(home, vevent("home", "DTSTART:20310108T150000Z", "DTEND:20310108T160000Z"))

    _, by_name, _ = connect(tenants, radicale, user=user, calendar="Home", make=False)
    _, by_url, _ = connect(tenants, radicale, user=user, calendar=str(work.url), make=False)
    _, by_path, _ = connect(tenants, radicale, user=user, calendar=work.url.path, make=False)
    _, unnamed, _ = connect(tenants, radicale, user=user, calendar=None, make=False)
    _, unknown, _ = connect(tenants, radicale, user=user, calendar="Gym", make=False)
    assert busy(by_name) == []  # nothing before a sync

    assert sync(by_name).ok and [u for u, _, _ in busy(by_name)] == ["home"]
    assert sync(by_url).ok and [u for u, _, _ in busy(by_url)] == ["work"]
    assert sync(by_path).ok and [u for u, _, _ in busy(by_path)] == ["work"]
    assert calendar_state(by_name).remote_id == str(home.url)

    several = sync(unnamed)
    assert (several.status, several.retryable) == ("failed", False)
    assert "2 calendars" in several.error and "'Home'" in several.error
    missing = sync(unknown)
    assert missing.status == "failed" and "no calendar named 'Gym'" in missing.error

    _, only, _ = connect(tenants, radicale, calendar=None)
    assert sync(only).ok


# Failures: recorded, the busy time kept, other connections unaffected


def synced_pair(tenants, server, healthy_server, user=None):
    """A connection on ``server`` with one busy event, synced, and a healthy one elsewhere."""
    _, connection_id, calendar = connect(tenants, server, user=user)
    put(calendar, vevent("kept", "DTSTART:20310107T150000Z", "DTEND:20310107T160000Z"))
    assert sync(connection_id).status == "synced"
    _, healthy_id, healthy_calendar = connect(tenants, healthy_server)
    put(healthy_calendar, vevent("fine", "DTSTART:20310108T150000Z", "DTEND:20310108T160000Z"))
    return connection_id, calendar, healthy_id


def assert_failure_recorded(connection_id, rows, results, healthy_id, now, fragment):
    by_id = {r.connection_id: r for r in results}
    failed = by_id[connection_id]
    assert failed.status == "failed" and not failed.ok, failed
    assert fragment in failed.error
    state = connection(connection_id)
    assert state.last_error == failed.error
    assert state.last_error_at == now and state.last_attempt_at == now
    assert state.last_success_at == NOW and state.consecutive_failures == 1
    assert state.busy_count == 1 and failed.busy_count == 1
    assert busy_rows(connection_id) == rows  # the previous busy time, untouched
    assert by_id[healthy_id].status == "synced"
    assert [u for u, _, _ in busy(healthy_id)] == ["fine"]
    return failed


def test_a_stopped_server(tenants, own_radicale, radicale):
    connection_id, _, healthy_id = synced_pair(tenants, own_radicale, radicale)
    rows = busy_rows(connection_id)
    own_radicale.stop()
    later = NOW + timedelta(minutes=5)
    results = sync_all_connections(later)
    failed = assert_failure_recorded(
        connection_id, rows, results, healthy_id, later, "Connection refused"
    )
    assert failed.error.startswith(f"cannot connect to http://127.0.0.1:{own_radicale.port}")
    assert failed.retryable

    own_radicale.start()  # back: the next sync succeeds and the failure count resets
    recovered = sync(connection_id, now=later + timedelta(minutes=5))
    assert recovered.ok
    state = connection(connection_id)
    assert state.consecutive_failures == 0 and state.last_error == failed.error


def test_a_server_that_never_answers_times_out(tenants, own_radicale, radicale):
    connection_id, _, healthy_id = synced_pair(tenants, own_radicale, radicale)
    rows = busy_rows(connection_id)
    own_radicale.freeze()
    later = NOW + timedelta(minutes=5)
    try:
        results = sync_all_connections(later, timeout=0.5)
    finally:
        own_radicale.thaw()
    failed = assert_failure_recorded(
        connection_id, rows, results, healthy_id, later, "did not answer within 0.5 s"
    )
    assert failed.retryable


def test_a_rejected_password(tenants, tmp_path, radicale, caplog):
    caplog.set_level(logging.DEBUG)  # not even debug logging shows a password
    with radicale_server(tmp_path / "htpasswd", users={"dentist": PASSWORD}) as server:
        connection_id, _, healthy_id = synced_pair(tenants, server, radicale, user="dentist")
        rows = busy_rows(connection_id)
        wrong = "wrong-horse-battery"
        state = connection(connection_id)
        state.encrypted_secret = encrypt_secret(wrong, "test-secret-key")
        db.session.commit()
        later = NOW + timedelta(minutes=5)
        results = sync_all_connections(later)
    failed = assert_failure_recorded(
        connection_id, rows, results, healthy_id, later, "rejected the username or password"
    )
    assert not failed.retryable
    assert "calendar connection" in caplog.text  # the failure is logged …
    for secret in (wrong, PASSWORD, basic_auth("dentist", wrong), basic_auth("dentist", PASSWORD)):
        assert secret not in caplog.text  # … without the password
        assert secret not in (connection(connection_id).last_error or "")


def basic_auth(user, password):
    return base64.b64encode(f"{user}:{password}".encode()).decode()


JULIAN = "VERSION:2.0\r\nCALSCALE:JULIAN\r\n"  # recurrence no one computes here


def test_an_event_that_cannot_be_read_is_skipped_and_the_rest_kept_current(tenants, radicale):
    _, connection_id, calendar = connect(tenants, radicale)
    put(calendar, vevent("kept", "DTSTART:20310107T150000Z", "DTEND:20310107T160000Z"))
    assert sync(connection_id).status == "synced"
    # Radicale stores it; recurrence in a non-Gregorian calendar cannot be computed here.
    put(
        calendar,
        vevent("julian", "DTSTART:20310109T150000Z", "DTEND:20310109T160000Z").replace(
            "VERSION:2.0\r\n", JULIAN
        ),
    )
    put(calendar, vevent("added", "DTSTART:20310110T150000Z", "DTEND:20310110T160000Z"))
    result = sync(connection_id, now=NOW + timedelta(minutes=5))
    assert (result.status, result.ok, result.skipped, result.busy_count) == ("synced", True, 1, 2)
    assert [uid for uid, _, _ in busy(connection_id)] == ["kept", "added"]
    state = connection(connection_id)
    assert (state.consecutive_failures, state.skipped_count) == (1 - 1, 1)
    assert "julian.ics" in state.skipped_reason and "Gregorian" in state.skipped_reason


def test_an_event_that_becomes_unreadable_keeps_its_busy_time(tenants, radicale):
    _, connection_id, calendar = connect(tenants, radicale)
    event = put(calendar, vevent("meeting", "DTSTART:20310107T150000Z", "DTEND:20310107T160000Z"))
    assert sync(connection_id).busy_count == 1
    rows = busy_rows(connection_id)
    event.data = vevent("meeting", "DTSTART:20310107T170000Z", "DTEND:20310107T180000Z").replace(
        "VERSION:2.0\r\n", JULIAN
    )
    event.save()
    result = sync(connection_id, now=NOW + timedelta(minutes=5))
    assert (result.status, result.skipped) == ("synced", 1)
    assert busy_rows(connection_id) == rows  # the last good busy time stays in force

    event.data = vevent("meeting", "DTSTART:20310107T170000Z", "DTEND:20310107T180000Z")
    event.save()
    mended = sync(connection_id, now=NOW + timedelta(minutes=10))
    assert (mended.status, mended.skipped) == ("synced", 0)
    assert busy(connection_id) == [("meeting", utc(2031, 1, 7, 17), utc(2031, 1, 7, 18))]
    assert connection(connection_id).skipped_reason is None


def test_a_probe_reads_the_calendar_and_stores_nothing(tenants, radicale):
    _, connection_id, calendar = connect(tenants, radicale)
    put(calendar, vevent("one", "DTSTART:20310107T150000Z", "DTEND:20310107T160000Z"))
    put(calendar, vevent("two", "DTSTART:20310108T150000Z", "DTEND:20310108T160000Z"))
    probed = probe_connection(connection_id, now=NOW)
    assert (probed.status, probed.ok, probed.busy_count) == ("probed", True, 2)
    _, missing, _ = connect(tenants, radicale, calendar="Gym", make=False)
    failed = probe_connection(missing, now=NOW)
    assert (failed.status, failed.retryable) == ("failed", False)
    assert "no calendar named 'Gym'" in failed.error
    db.session.commit()
    for probed_id in (connection_id, missing):
        state = connection(probed_id)
        assert (state.last_attempt_at, state.last_error) == (None, None)
        assert (
            db.session.scalars(
                select(ConnectedCalendar).where(
                    ConnectedCalendar.calendar_connection_id == probed_id
                )
            ).all()
            == []
        )
        assert busy(probed_id) == []


def test_inactive_connections_are_skipped(tenants, radicale):
    _, connection_id, calendar = connect(tenants, radicale)
    put(calendar, vevent("one", "DTSTART:20310107T150000Z", "DTEND:20310107T160000Z"))
    state = connection(connection_id)
    state.active = False
    db.session.commit()
    assert sync_all_connections(NOW) == []
    assert sync(connection_id).status == "skipped"
    assert busy(connection_id) == [] and connection(connection_id).last_attempt_at is None


# Reading iCalendar (no server, no database)


def test_data_that_is_not_icalendar_is_malformed():
    with pytest.raises(MalformedCalendarData, match=r"cannot read the event at /x/bad\.ics"):
        busy_periods(
            [CalendarObject("/x/bad.ics", "this is not iCalendar\r\n")],
            Interval(NOW, NOW + timedelta(days=60)),
            NEW_YORK,
        )


def test_a_runaway_rule_stops_at_the_limit():
    minutely = vevent("runaway", "DTSTART:20310106T000000Z", "DURATION:PT1M", "RRULE:FREQ=MINUTELY")
    window = Interval(NOW, NOW + timedelta(days=60))
    with pytest.raises(TooManyBusyPeriods, match="more than 100 busy periods"):
        busy_periods([CalendarObject("/x/runaway.ics", minutely)], window, NEW_YORK, limit=100)


def test_a_rule_repeating_every_second_for_years_is_refused_without_expanding_it():
    secondly = vevent(
        "secondly", "DTSTART:20200101T000000Z", "DURATION:PT1S", "RRULE:FREQ=SECONDLY"
    )
    window = Interval(NOW, NOW + timedelta(days=60))
    with pytest.raises(TooManyBusyPeriods, match="runaway recurrence rule"):
        busy_periods([CalendarObject("/x/secondly.ics", secondly)], window, NEW_YORK)


def test_a_quarter_hourly_rule_is_still_read():
    every_15 = vevent(
        "every-15", "DTSTART:20300106T000000Z", "DURATION:PT5M", "RRULE:FREQ=MINUTELY;INTERVAL=15"
    )
    window = Interval(NOW, NOW + timedelta(days=2))
    periods = busy_periods([CalendarObject("/x/every-15.ics", every_15)], window, NEW_YORK)
    assert len(periods) == 2 * 24 * 4


def test_occurrences_are_counted_once_across_the_expansion_slices():
    hourly = vevent("hourly", "DTSTART:20310101T000000Z", "DURATION:PT1M", "RRULE:FREQ=HOURLY")
    window = Interval(NOW, NOW + timedelta(days=20))
    periods = busy_periods([CalendarObject("/x/hourly.ics", hourly)], window, NEW_YORK)
    assert len(periods) == 20 * 24 and len(set(periods)) == len(periods)
    assert periods[0].start == NOW and periods[-1].start == NOW + timedelta(days=20, hours=-1)


def test_caldavs_http_client_leaves_urllib3_alone():
    """niquests brings urllib3-future, whose wheel would replace urllib3 for every package;
    installed as requirements.txt says (URLLIB3_NO_OVERRIDE=1), it stays beside it."""
    import urllib3

    patch = int(urllib3.__version__.split(".")[2])
    assert patch < 900, (
        f"urllib3 {urllib3.__version__} is urllib3-future: reinstall it with "
        "URLLIB3_NO_OVERRIDE=1 pip install --no-binary urllib3-future (see requirements.txt)"
    )
