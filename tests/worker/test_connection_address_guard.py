"""Calendar connections never reach an address the guard refuses, whatever the server or its DNS
does after the URL was checked: a redirect to a private address, and a name whose answer
changes to one between the check and the connection, are refused before anything is sent
there. CalDAV at "Test connection", sync, the live check and write-back alike, with an error
that does not say what answered where; feeds at every fetch.

The guard's view of the network is the app's ``ADDRESS_POLICY`` (``outbound.addresses``), given
here: which loopback address counts as "public" and what a test name resolves to. Every server
is a loopback server of the test's own; nothing patches the standard library."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from zoneinfo import ZoneInfo

import pytest

from app.extensions import db
from app.jobs.calendars import run_connection_test
from app.models import CalendarConnection, SubAccount
from app.scheduling.intervals import Interval
from app.services.integrations.calendars import sync_connection
from app.services.integrations.calendars.access import connection_access
from app.services.integrations.calendars.connections import (
    connect_calendar,
    update_connection,
)
from app.services.integrations.calendars.errors import AddressRefused
from app.services.integrations.calendars.providers.caldav import CalDAVProvider
from app.services.integrations.outbound.addresses import AddressPolicy, is_public, system_addresses
from tests.factories import TenantFactory
from tests.feed_servers import Feed, feed_server
from tests.servers import free_port, serve_in_thread

NOW = datetime(2031, 1, 6, 12, tzinfo=UTC)
FRONT = "127.0.0.2"  # counted as public by the tests' policy: "the internet"
BEHIND = "127.0.0.1"  # private, as everywhere: "the operator's network"
PASSWORD = "stored-basic-password"
FEED = "\r\n".join(
    ["BEGIN:VCALENDAR", "VERSION:2.0", "PRODID:-//guard tests//EN", "END:VCALENDAR", ""]
)


class Recorder:
    """A loopback HTTP server answering everything (``answer``: a status, and a Location for
    a redirect), keeping each request's method, path and Authorization header."""

    def __init__(self, host: str, status: int = 207, location: str | None = None) -> None:
        self.requests: list[tuple[str, str, str | None]] = []
        recorder = self

        class Handler(BaseHTTPRequestHandler):
            def _any(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                self.rfile.read(length)
                recorder.requests.append(
                    (self.command, self.path, self.headers.get("Authorization"))
                )
                self.send_response(status)
                if location:
                    self.send_header("Location", location)
                self.send_header("Content-Type", "application/xml")
                self.send_header("Content-Length", "0")
                self.end_headers()

            do_GET = do_PUT = do_DELETE = do_PROPFIND = do_REPORT = do_OPTIONS = _any

            def log_message(self, *args) -> None:
                pass

        self.server = ThreadingHTTPServer((host, free_port()), Handler)
        self.server.daemon_threads = True
        self.url = f"http://{host}:{self.server.server_port}"
        serve_in_thread(self.server)

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def behind() -> Iterator[Recorder]:
    """A server on the private network: a CalDAV server answering anything it is sent."""
    server = Recorder(BEHIND)
    yield server
    server.close()


@pytest.fixture
def redirector(behind: Recorder) -> Iterator[Recorder]:
    """A "public" CalDAV address answering every request with 307 to the private server."""
    server = Recorder(FRONT, status=307, location=behind.url + "/dav/calendars/pat/")
    yield server
    server.close()


class ChangingName:
    """A DNS name whose first answer is the "public" address and every later one the private
    one: the check at save sees the first, a connection made later the second."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.asked = 0

    def resolve(self, host: str, port: int) -> list[str]:
        if host != self.name:
            return system_addresses(host, port)
        self.asked += 1
        return [FRONT] if self.asked == 1 else [BEHIND]


def front_is_public(address: str) -> bool:
    return address == FRONT or is_public(address)


@pytest.fixture
def guarded(make_app):
    """An app whose policy counts 127.0.0.2 as public (CALDAV_ALLOW_PRIVATE off), in its
    context until the test ends."""
    contexts = []

    def make(resolve=system_addresses):
        app = make_app(ADDRESS_POLICY=AddressPolicy(resolve=resolve, is_public=front_is_public))
        contexts.append(app.app_context())
        contexts[-1].push()
        return app

    yield make
    db.session.remove()
    for context in reversed(contexts):
        context.pop()


def dashboard_connection(url: str) -> int:
    """A CalDAV connection as a dashboard user makes it (the URL checked at save)."""
    tenant = TenantFactory().create()
    sub_account = db.session.get(SubAccount, tenant.sub_account_id)
    connection = connect_calendar(
        sub_account,
        {"name": "Work", "url": url, "username": "pat", "password": PASSWORD, "calendar": "Work"},
    )
    db.session.commit()
    return connection.id


def refused(message: str | None) -> bool:
    return message is not None and "leads to an address that is not public" in message


def every_operation_is_refused(connection_id: int) -> None:
    """Sync, the worker's "Test connection", the live check and a write-back each end in the
    guard's refusal, which names neither the address nor a port behind it."""
    result = sync_connection(connection_id, now=NOW)
    db.session.commit()
    assert (result.status, result.retryable) == ("failed", False)
    assert refused(result.error)
    assert BEHIND not in result.error

    connection = db.session.get(CalendarConnection, connection_id)
    connection.test_requested_at = NOW  # asked for before the answer changed; the worker runs it
    db.session.commit()
    tested = run_connection_test(connection_id, now=NOW)
    assert tested is not None and refused(tested.error)

    access, _ = connection_access(db.session.get(CalendarConnection, connection_id), 2.0)
    window = Interval(NOW, NOW + timedelta(days=1))
    with pytest.raises(AddressRefused):
        CalDAVProvider().items_in(access, None, window, ZoneInfo("UTC"))
    with pytest.raises(AddressRefused):
        CalDAVProvider().put_event(access, "booking-1", b"BEGIN:VCALENDAR\r\nEND:VCALENDAR\r\n")


def test_a_redirect_to_a_private_address_is_refused_and_nothing_is_sent_there(
    guarded, redirector, behind
):
    guarded()
    connection_id = dashboard_connection(redirector.url + "/dav/")
    every_operation_is_refused(connection_id)
    assert redirector.requests  # the "public" server was asked, and answered 307
    assert behind.requests == []  # the private one never was, credentials or not


def test_a_name_that_resolves_to_a_private_address_after_the_check_is_refused(guarded, behind):
    name = ChangingName("calendar.rebinding.test")
    guarded(resolve=name.resolve)
    port = behind.server.server_port
    connection_id = dashboard_connection(f"http://calendar.rebinding.test:{port}/dav/")
    assert name.asked == 1  # the check at save saw the "public" answer
    every_operation_is_refused(connection_id)
    assert name.asked > 1
    assert behind.requests == []  # no PROPFIND with the stored Basic credentials, ever


def test_an_operators_connection_may_reach_a_private_server(guarded, behind):
    guarded()
    tenant = TenantFactory().create(
        calendarConnections=[
            {"name": "Office", "url": behind.url + "/dav/", "username": "pat", "password": "pw"}
        ]
    )
    sync_connection(tenant.connections["Office"], now=NOW)
    db.session.commit()
    assert behind.requests  # reached (whatever it made of the empty answers)


def test_an_operators_connection_pointed_elsewhere_by_a_dashboard_user_is_checked(
    guarded, behind, redirector
):
    guarded()
    tenant = TenantFactory().create(
        calendarConnections=[
            {"name": "Office", "url": behind.url + "/dav/", "username": "pat", "password": "pw"}
        ]
    )
    connection_id = tenant.connections["Office"]
    sub_account = db.session.get(SubAccount, tenant.sub_account_id)
    update_connection(
        sub_account, connection_id, {"url": redirector.url + "/dav/", "password": PASSWORD}
    )
    db.session.commit()
    assert db.session.get(CalendarConnection, connection_id).added_by_operator is False
    every_operation_is_refused(connection_id)
    assert behind.requests == []


# Feeds: whoever added them, every fetch is checked, each redirect's target too, and the
# connection goes to the address checked.


def feed_connection(url: str) -> int:
    tenant = TenantFactory().create(
        calendarConnections=[{"name": "Rota", "kind": "ics", "url": url}]
    )
    return tenant.connections["Rota"]


@pytest.fixture
def private_feed() -> Iterator[Feed]:
    with feed_server() as feed:  # on 127.0.0.1: private
        feed.serve(FEED)
        yield feed


def test_a_feed_redirecting_to_a_private_address_is_refused_before_it_is_asked(
    guarded, private_feed
):
    guarded()
    front = Recorder(FRONT, status=302, location=private_feed.url)
    try:
        result = sync_connection(feed_connection(front.url + "/rota.ics"), now=NOW)
        db.session.commit()
    finally:
        front.close()
    assert (result.status, result.retryable) == ("failed", False)
    assert "not a public address" in result.error
    assert front.requests and private_feed.statuses() == []


def test_a_feed_whose_name_resolves_to_a_private_address_after_the_check_is_refused(
    guarded, private_feed
):
    name = ChangingName("rota.rebinding.test")
    guarded(resolve=name.resolve)
    port = private_feed.url.split(":")[2].split("/")[0]
    connection_id = feed_connection(
        f"http://rota.rebinding.test:{port}/calendar/secret-address/basic.ics"
    )
    name.asked = 1  # as if the check at save had seen the "public" answer
    result = sync_connection(connection_id, now=NOW)
    db.session.commit()
    assert (result.status, result.retryable) == ("failed", False)
    assert "not a public address" in result.error
    assert private_feed.statuses() == []
