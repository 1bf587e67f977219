"""CalDAV servers that misbehave, against a real HTTP server of the test's own (loopback, in
the test process): one that sends its answer a byte at a time, one that answers a web page,
one whose answer holds an item larger than lxml reads, and a slow one with a large calendar.

The sync tests go through ``sync_connection`` with ``CALDAV_TIMEOUT_SECONDS=1`` (a read's
deadline 6 s, a full read's 9 s); the tests of the provider alone give it their own, shorter
deadlines. Elapsed times are measured with ``time.monotonic`` and bound a hang, they assert no
performance.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler
from zoneinfo import ZoneInfo

import pytest

from app.extensions import db
from app.scheduling.intervals import Interval
from app.services.integrations.calendars import sync_connection
from app.services.integrations.calendars.errors import ServerTimeout
from app.services.integrations.calendars.providers.base import Cursor
from app.services.integrations.calendars.providers.caldav import CalDAVProvider, CalendarAccess
from app.services.integrations.outbound.addresses import DEFAULT_POLICY, AddressGuard
from tests.factories import TenantFactory
from tests.servers import serving_in_thread

NOW = datetime(2031, 1, 6, 12, tzinfo=UTC)  # a Monday; the window runs to NOW + 67 days
WINDOW = Interval(NOW - timedelta(days=1), NOW + timedelta(days=67))
CALENDAR = "/cal/"
DRIP_FOR = 30.0  # how long a dripping answer would go on
HANG_BOUND = 15.0  # a sync that takes longer than this hangs

MARKERS = f"""<?xml version="1.0" encoding="utf-8"?>
<d:multistatus xmlns:d="DAV:">
<d:response><d:href>{CALENDAR}</d:href><d:propstat><d:prop>
<d:displayname>Personal</d:displayname><d:sync-token>http://example.com/sync/1</d:sync-token>
</d:prop><d:status>HTTP/1.1 200 OK</d:status></d:propstat></d:response>
</d:multistatus>
""".encode()

SIGN_IN_PAGE = b"<!DOCTYPE html><html><body><form>Sign in</form></body></html>"


def event(uid: str, start: datetime, *extra: str) -> str:
    return "\r\n".join(
        [
            "BEGIN:VCALENDAR",
            "VERSION:2.0",
            "PRODID:-//hostile server tests//EN",
            "BEGIN:VEVENT",
            f"UID:{uid}",
            "DTSTAMP:20300101T000000Z",
            f"DTSTART:{start:%Y%m%dT%H%M%SZ}",
            f"DTEND:{start + timedelta(minutes=30):%Y%m%dT%H%M%SZ}",
            *extra,
            "END:VEVENT",
            "END:VCALENDAR",
            "",
        ]
    )


def multistatus(events: dict[str, str]) -> bytes:
    """A calendar-query's answer: each event with its ETag and calendar data."""
    responses = "".join(
        f"<d:response><d:href>{CALENDAR}{key}</d:href><d:propstat><d:prop>"
        f'<d:getetag>"{index}"</d:getetag><c:calendar-data>{text}</c:calendar-data>'
        "</d:prop><d:status>HTTP/1.1 200 OK</d:status></d:propstat></d:response>"
        for index, (key, text) in enumerate(events.items())
    )
    return (
        '<?xml version="1.0" encoding="utf-8"?>\n'
        '<d:multistatus xmlns:d="DAV:" xmlns:c="urn:ietf:params:xml:ns:caldav">'
        f"{responses}</d:multistatus>"
    ).encode()


@dataclass
class FakeCalDAV:
    """What the server answers, by method: ``"ok"`` (the calendar's markers to a PROPFIND, its
    events to a REPORT, 201 to a PUT), ``"drip"`` (that answer a byte every ``drip_seconds``,
    for ``DRIP_FOR`` seconds at most) or ``"html"`` (a sign-in page, 200)."""

    url: str = ""
    answers: dict[str, str] = field(default_factory=dict)
    events: dict[str, str] = field(default_factory=dict)
    think_seconds: float = 0.0  # before it answers a REPORT
    drip_seconds: float = 0.25
    drips_ended: list[float] = field(default_factory=list)  # when each stopped (monotonic)


@contextmanager
def caldav_server() -> Iterator[FakeCalDAV]:
    fake = FakeCalDAV()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def answer(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            mode = fake.answers.get(self.command, "ok")
            if mode == "html":
                return self.send(200, "text/html; charset=utf-8", SIGN_IN_PAGE)
            if self.command == "PROPFIND":
                status, kind, body = 207, "application/xml; charset=utf-8", MARKERS
            elif self.command == "REPORT":
                time.sleep(fake.think_seconds)
                status, kind, body = 207, "application/xml; charset=utf-8", multistatus(fake.events)
            else:
                status, kind, body = 201, "text/plain", b"Created" + b" " * 1000
            if mode == "drip":
                return self.drip(status, kind, body)
            return self.send(status, kind, body)

        do_PROPFIND = do_REPORT = do_PUT = do_DELETE = answer

        def send(self, status: int, kind: str, body: bytes) -> None:
            self.send_response(status)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def drip(self, status: int, kind: str, body: bytes) -> None:
            self.send_response(status)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            until = time.monotonic() + DRIP_FOR
            try:
                for i in range(len(body)):
                    if time.monotonic() > until:
                        break
                    self.wfile.write(body[i : i + 1])
                    self.wfile.flush()
                    time.sleep(fake.drip_seconds)
            except OSError:
                pass  # the client hung up
            fake.drips_ended.append(time.monotonic())
            self.close_connection = True

        def log_message(self, *args) -> None:
            pass

    with serving_in_thread(Handler) as base_url:
        fake.url = base_url + "/"
        yield fake


@pytest.fixture
def server():
    with caldav_server() as fake:
        fake.events = {"one.ics": event("one", NOW + timedelta(days=1, hours=3))}
        yield fake


@pytest.fixture
def one_second_timeout(make_app):
    """An app whose CalDAV requests wait 1 s to connect and for each read."""
    app = make_app(CALDAV_TIMEOUT_SECONDS=1)
    with app.app_context():
        yield app
        db.session.remove()


def connect(server: FakeCalDAV) -> int:
    tenant = TenantFactory().create(
        calendarConnections=[
            {
                "name": "Personal",
                "url": server.url,
                "username": "pat",
                "password": "correct-horse-battery",
                "calendar": CALENDAR,
            }
        ]
    )
    return tenant.connections["Personal"]


def timed_sync(connection_id: int):
    """(the sync's result, how long it took)."""
    started = time.monotonic()
    result = sync_connection(connection_id, now=NOW)
    db.session.commit()
    return result, time.monotonic() - started


def access(server: FakeCalDAV, deadline: float) -> CalendarAccess:
    """The server's calendar, for the provider alone: a 1 s timeout, ``deadline`` in all."""
    return CalendarAccess(
        url=server.url,
        username="pat",
        password="correct-horse-battery",
        calendar=CALENDAR,
        calendar_url=None,
        timeout=1.0,
        deadline_seconds=deadline,
        full_read_deadline_seconds=deadline,
        guard=AddressGuard(DEFAULT_POLICY, allow_private=True),  # the fake is on loopback
    )


@pytest.mark.slow
def test_a_first_read_dripping_a_byte_at_a_time_stops_at_the_full_reads_deadline(
    one_second_timeout, server
):
    server.answers["PROPFIND"] = "drip"  # every byte within the 1 s timeout
    result, took = timed_sync(connect(server))
    assert (result.status, result.retryable) == ("failed", True)
    assert result.error == (
        f"{server.url.rstrip('/')} did not finish answering within 9 s"
        " (the deadline of a full read)"
    )
    assert took < HANG_BOUND


@pytest.mark.slow
def test_an_incremental_read_dripping_a_byte_at_a_time_stops_at_the_reads_deadline(
    one_second_timeout, server
):
    connection_id = connect(server)
    assert timed_sync(connection_id)[0].status == "synced"
    server.answers["PROPFIND"] = "drip"
    result, took = timed_sync(connection_id)
    assert (result.status, result.retryable) == ("failed", True)
    assert "did not finish answering within 6 s (the deadline of a read)" in result.error
    assert took < HANG_BOUND


@pytest.mark.slow
def test_the_connection_of_a_read_past_its_deadline_is_closed_at_once(server):
    server.answers["PROPFIND"] = "drip"
    started = time.monotonic()
    with pytest.raises(ServerTimeout):
        CalDAVProvider().read(access(server, 2), Cursor(None), WINDOW, ZoneInfo("UTC"))
    deadline_met = time.monotonic()
    until = deadline_met + 5
    while not server.drips_ended and time.monotonic() < until:
        time.sleep(0.05)
    # The abandoned read does not go on dripping until the server stops (30 s).
    assert deadline_met - started < 4
    assert server.drips_ended and server.drips_ended[0] - deadline_met < 3


@pytest.mark.slow
def test_a_write_dripping_its_answer_stops_at_the_writes_deadline(server):
    server.answers["PUT"] = "drip"
    started = time.monotonic()
    with pytest.raises(ServerTimeout, match=r"within 2 s \(the deadline of a write\)"):
        CalDAVProvider().put_event(access(server, 2), "booking-1", event("b", NOW).encode())
    assert time.monotonic() - started < 4


def test_a_web_page_instead_of_caldav_is_named_and_not_retried(one_second_timeout, server):
    server.answers["PROPFIND"] = "html"
    result, _ = timed_sync(connect(server))
    assert (result.status, result.retryable) == ("failed", False)
    assert result.error == (
        f"{server.url.rstrip('/')} answered a web page (text/html), not CalDAV: check the URL,"
        " or a proxy or sign-in page is in the way"
    )


def test_an_item_over_lxmls_ten_megabyte_limit_is_named_and_not_retried(one_second_timeout, server):
    attachment = "DESCRIPTION:" + "x" * (10 * 1024 * 1024 + 1024)
    server.events["huge.ics"] = event("huge", NOW + timedelta(days=2), attachment)
    result, _ = timed_sync(connect(server))
    assert (result.status, result.retryable) == ("failed", False)
    assert "holds an item larger than 10 MB (lxml's limit for one text node)" in result.error


@pytest.mark.slow
def test_a_full_read_of_thousands_of_events_may_take_longer_than_one_timeout_to_start(
    one_second_timeout, server
):
    # 2,000, not more: reading 3,000 took 5.7 s on an idle machine besides the think time,
    # and past the deadline on a busy one.
    events = 2000
    server.events = {
        f"e{i}.ics": event(f"e{i}", NOW + timedelta(hours=2 + i % 1000, minutes=i // 1000 * 30))
        for i in range(events)
    }
    server.think_seconds = 1.5  # longer than the 1 s timeout, well within the 9 s deadline
    result, took = timed_sync(connect(server))
    assert (result.status, result.busy_count, result.skipped) == ("synced", events, 0)
    assert took < HANG_BOUND
