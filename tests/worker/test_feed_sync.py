"""Calendar feeds (``kind: "ics"``): a real HTTP server of the test's own serves the file. Syncs run
at a fixed instant far in the future (``NOW``) with events relative to it, so nothing depends on
today's date."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import select

from app.extensions import db
from app.models import BlockedTime, CalendarConnection
from app.services.integrations.calendars import sync_connection
from app.services.integrations.calendars.providers import feed as feed_provider
from app.services.integrations.calendars.providers.feed import feed_url
from tests.factories import TenantFactory, external_busy_rows
from tests.feed_servers import feed_server

NOW = datetime(2031, 1, 6, 12, tzinfo=UTC)  # a Monday; the window runs to NOW + 67 days


def event(uid: str, start: str, end: str, *extra: str) -> list[str]:
    return [
        "BEGIN:VEVENT",
        f"UID:{uid}",
        "DTSTAMP:20300101T000000Z",
        f"DTSTART:{start}",
        f"DTEND:{end}",
        *extra,
        "END:VEVENT",
    ]


def calendar(*events: list[str], name: str = "Team rota") -> str:
    lines = ["BEGIN:VCALENDAR", "VERSION:2.0", "PRODID:-//feed tests//EN", f"X-WR-CALNAME:{name}"]
    for lines_of_event in events:
        lines += lines_of_event
    return "\r\n".join([*lines, "END:VCALENDAR", ""])


ONE = event("one", "20310107T150000Z", "20310107T160000Z")
TWO = event("two", "20310108T150000Z", "20310108T160000Z")
WEEKLY = event("weekly", "20310109T090000Z", "20310109T093000Z", "RRULE:FREQ=WEEKLY;COUNT=3")


@pytest.fixture
def feed():
    with feed_server() as served:
        served.serve(calendar(ONE, TWO, WEEKLY))
        yield served


def subscribe(feed, url: str | None = None) -> int:
    tenant = TenantFactory().create(
        calendarConnections=[{"name": "Rota", "kind": "ics", "url": url or feed.url}]
    )
    return tenant.connections["Rota"]


def sync(connection_id, now=NOW):
    result = sync_connection(connection_id, now=now)
    db.session.commit()
    return result


busy_rows = external_busy_rows


def utc(*args) -> datetime:
    return datetime(*args, tzinfo=UTC)


def test_a_feeds_events_become_busy_time(private_allowed, feed):
    connection_id = subscribe(feed)
    result = sync(connection_id)
    assert (result.status, result.busy_count, result.added) == ("synced", 5, 5)
    assert [(r.external_uid, r.start_at) for r in busy_rows(connection_id)] == [
        ("one", utc(2031, 1, 7, 15)),
        ("two", utc(2031, 1, 8, 15)),
        ("weekly", utc(2031, 1, 9, 9)),
        ("weekly", utc(2031, 1, 16, 9)),
        ("weekly", utc(2031, 1, 23, 9)),
    ]
    connection = db.session.get(CalendarConnection, connection_id)
    assert (connection.kind, connection.write_back) == ("ics", False)


def test_a_calendars_busy_time_is_its_hosts_alone(private_allowed, feed):
    tenant = TenantFactory().create(
        hosts=[{"name": "Dr. Kim"}, {"name": "Dr. Lee"}],
        calendarConnections=[{"name": "Rota", "kind": "ics", "url": feed.url, "host": "Dr. Lee"}],
    )
    assert sync(tenant.connections["Rota"]).status == "synced"
    rows = db.session.execute(
        select(BlockedTime.host_id).where(
            BlockedTime.calendar_connection_id == tenant.connections["Rota"]
        )
    ).all()
    assert len(rows) == 5 and {host_id for (host_id,) in rows} == {tenant.hosts["Dr. Lee"]}


def test_an_unchanged_feed_costs_one_not_modified_answer(private_allowed, feed):
    connection_id = subscribe(feed)
    assert sync(connection_id).status == "synced"
    rows = busy_rows(connection_id)
    again = sync(connection_id, now=NOW + timedelta(minutes=5))
    assert (again.status, again.busy_count) == ("unchanged", 5)
    assert feed.statuses() == [200, 304]
    second = feed.requests[1].headers
    assert second["if-none-match"] == feed.etag and second["if-modified-since"]
    assert busy_rows(connection_id) == rows


def test_one_changed_event_replaces_only_its_busy_time(private_allowed, feed):
    connection_id = subscribe(feed)
    sync(connection_id)
    before = {r.external_uid: r.id for r in busy_rows(connection_id) if r.external_uid != "two"}
    feed.serve(calendar(ONE, event("two", "20310108T170000Z", "20310108T180000Z"), WEEKLY))
    result = sync(connection_id, now=NOW + timedelta(minutes=5))
    assert (result.status, result.added, result.removed, result.busy_count) == (
        "synced",
        1,
        1,
        5,
    )
    rows = busy_rows(connection_id)
    assert ("two", utc(2031, 1, 8, 17)) in [(r.external_uid, r.start_at) for r in rows]
    assert {r.external_uid: r.id for r in rows if r.external_uid != "two"} == before


def test_an_event_gone_from_the_feed_is_no_longer_busy(private_allowed, feed):
    connection_id = subscribe(feed)
    sync(connection_id)
    feed.serve(calendar(ONE, WEEKLY))
    result = sync(connection_id, now=NOW + timedelta(minutes=5))
    assert (result.status, result.removed, result.busy_count) == ("synced", 1, 4)
    assert "two" not in {r.external_uid for r in busy_rows(connection_id)}


def test_a_feed_served_without_validators_is_read_again_and_keeps_its_rows(private_allowed, feed):
    feed.answer = "plain"
    connection_id = subscribe(feed)
    sync(connection_id)
    rows = busy_rows(connection_id)
    again = sync(connection_id, now=NOW + timedelta(minutes=5))
    assert (again.status, again.added, again.removed) == ("synced", 0, 0)
    assert feed.statuses() == [200, 200]
    assert busy_rows(connection_id) == rows


def test_a_feed_that_is_gone_says_to_subscribe_again_and_keeps_its_busy_time(private_allowed, feed):
    connection_id = subscribe(feed)
    sync(connection_id)
    rows = busy_rows(connection_id)
    feed.answer = 404
    result = sync(connection_id, now=NOW + timedelta(minutes=5))
    assert (result.status, result.retryable) == ("failed", False)
    assert "HTTP 404" in result.error and "subscribe with the new one" in result.error
    assert "secret-address" not in result.error  # the address is a secret: only its server
    assert busy_rows(connection_id) == rows


def test_a_web_page_instead_of_a_calendar_is_named_as_such(private_allowed, feed):
    feed.answer = "html"
    result = sync(subscribe(feed))
    assert (result.status, result.retryable) == ("failed", False)
    assert "web page, not a calendar" in result.error


def test_a_server_error_may_be_retried(private_allowed, feed):
    feed.answer = 503
    result = sync(subscribe(feed))
    assert (result.status, result.retryable) == ("failed", True)
    assert "HTTP 503" in result.error


def test_a_feed_on_a_private_address_is_refused_unless_allowed(app, feed):
    result = sync(subscribe(feed))
    assert result.status == "failed"
    assert "not a public address" in result.error and "CALDAV_ALLOW_PRIVATE" in result.error
    assert feed.statuses() == []


@pytest.mark.slow
def test_a_server_sending_a_byte_at_a_time_meets_the_whole_reads_deadline(
    make_app, feed, monkeypatch
):
    app = make_app(CALDAV_ALLOW_PRIVATE=True, CALDAV_TIMEOUT_SECONDS=0.5)
    feed.answer, feed.drip_seconds = "drip", 0.2  # every read answers within its timeout
    with app.app_context():
        connection_id = subscribe(feed)
        started = time.monotonic()
        result = sync(connection_id)
        waited = time.monotonic() - started
        db.session.remove()
    assert (result.status, result.retryable) == ("failed", True)
    assert "did not send the feed within 3 s" in result.error
    assert waited < 10


@pytest.mark.slow
def test_a_server_dripping_its_headers_meets_the_whole_reads_deadline_and_is_named(make_app, feed):
    app = make_app(CALDAV_ALLOW_PRIVATE=True, CALDAV_TIMEOUT_SECONDS=0.5)
    feed.answer, feed.drip_seconds = "drip headers", 0.1  # never a whole status line and headers
    with app.app_context():
        connection_id = subscribe(feed)
        started = time.monotonic()
        result = sync(connection_id)
        waited = time.monotonic() - started
        recorded = db.session.get(CalendarConnection, connection_id).last_error
        db.session.remove()
    server = feed.url.split("/calendar/")[0]
    assert (result.status, result.retryable) == ("failed", True)
    assert f"{server} did not send the feed within 3 s" in result.error
    assert recorded == result.error
    assert waited < 10


def test_a_feed_larger_than_the_limit_is_refused(private_allowed, feed, monkeypatch):
    monkeypatch.setattr(feed_provider, "MAX_FEED_BYTES", 100)
    result = sync(subscribe(feed))
    assert (result.status, result.retryable) == ("failed", False)
    assert "larger than" in result.error


@pytest.mark.slow
def test_a_five_megabyte_feed_syncs(private_allowed, feed):
    events = [
        event(
            f"e{i}",
            f"2031{1 + i % 2:02d}{1 + i % 28:02d}T{8 + i % 9:02d}0000Z",
            f"2031{1 + i % 2:02d}{1 + i % 28:02d}T{8 + i % 9:02d}3000Z",
            "DESCRIPTION:" + "x" * 2000,
        )
        for i in range(2500)
    ]
    feed.serve(calendar(*events))
    assert len(feed.body) > 5 * 1024 * 1024
    result = sync(subscribe(feed))
    assert result.status == "synced" and result.busy_count > 0


def test_a_webcal_address_is_fetched_over_https():
    assert (
        feed_url("webcal://calendar.example.com/a/b.ics") == "https://calendar.example.com/a/b.ics"
    )
    assert feed_url("https://calendar.example.com/a.ics") == "https://calendar.example.com/a.ics"


BERLIN_ZONE = [
    "BEGIN:VTIMEZONE",
    "TZID:Europe/Berlin",
    "BEGIN:STANDARD",
    "DTSTART:19701025T030000",
    "RRULE:FREQ=YEARLY;BYMONTH=10;BYDAY=-1SU",
    "TZOFFSETFROM:+0200",
    "TZOFFSETTO:+0100",
    "END:STANDARD",
    "END:VTIMEZONE",
]


def test_folded_lines_alarms_and_time_zones_are_read_as_the_feed_means_them(private_allowed, feed):
    folded = [
        "BEGIN:VEVENT",
        "UID:a-long-",
        " uid-folded",  # RFC 5545 line folding
        "DTSTAMP:20300101T000000Z",
        "DTSTART;TZID=Europe/Berlin:20310107T090000",
        "DTEND;TZID=Europe/Berlin:20310107T100000",
        "BEGIN:VALARM",
        "UID:the-alarms-own-uid",  # RFC 9074: not the event's
        "ACTION:DISPLAY",
        "TRIGGER:-PT15M",
        "END:VALARM",
        "END:VEVENT",
    ]
    feed.serve(calendar(BERLIN_ZONE, folded))
    connection_id = subscribe(feed)
    assert sync(connection_id).busy_count == 1
    [(_, uid, start, end)] = busy_rows(connection_id)
    assert (uid, start, end) == ("a-long-uid-folded", utc(2031, 1, 7, 8), utc(2031, 1, 7, 9))


def test_a_feed_whose_components_do_not_close_is_named_as_not_icalendar(private_allowed, feed):
    feed.serve("BEGIN:VCALENDAR\r\nBEGIN:VEVENT\r\nUID:x\r\nEND:VCALENDAR\r\n")
    result = sync(subscribe(feed))
    assert (result.status, result.retryable) == ("failed", False)
    assert "BEGIN and END do not match" in result.error


def test_a_feed_cut_inside_an_event_names_what_was_left_open(private_allowed, feed):
    whole = calendar(ONE, TWO)
    feed.serve(whole[: whole.index("DTEND:20310108")])  # the answer ends inside "two"
    result = sync(subscribe(feed))
    assert (result.status, result.retryable) == ("failed", False)
    assert "stops inside a VEVENT without END:VEVENT and END:VCALENDAR" in result.error
    assert "after 1 complete event" in result.error and "cut short" in result.error


def test_a_feed_cut_after_its_last_event_names_the_missing_end_of_the_calendar(
    private_allowed, feed
):
    feed.serve(calendar(ONE, TWO).removesuffix("END:VCALENDAR\r\n"))
    result = sync(subscribe(feed))
    assert result.status == "failed"
    assert "stops without END:VCALENDAR, after 2 complete events" in result.error


def test_a_stray_end_between_a_feeds_events_closes_nothing(private_allowed, feed):
    feed.serve(calendar(ONE, ["END:VEVENT"], TWO))
    result = sync(subscribe(feed))
    assert (result.status, result.busy_count) == ("synced", 2)
