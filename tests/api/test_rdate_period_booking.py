"""A booking into the second hour of an RDATE PERIOD is refused: RFC 7265's appendix example 2
(icalendar's test corpus), a daily series of one hour with a two-hour RDATE PERIOD on its first
day, whose every occurrence used to end one hour after it began, so that the period's second
hour was offered and booked (issue 48).

The file is the fixture's (``tests/fixtures/calendars``) with its January 2006 dates moved to next
week's (``next_monday``), and nothing else changed. Where the period is, and so which hour is its
second, is what the reference expansion (``recurring-ical-events`` over ``icalendar``) makes of that
same text, not a copied list. It reaches the service as a feed (read by a sync) and on Xandikos,
added after the connection's first read, so that only the live check sees it. Radicale refuses such
a resource at its PUT (vobject: "PERIOD not supported"), so no Radicale calendar can hold it.
Through the API on the real clock."""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

import icalendar
import pytest
import recurring_ical_events

from app.extensions import db
from app.models.types import utcnow
from app.services.integrations.calendars import sync_connection
from tests.factories import TenantFactory, book_through_api, next_monday
from tests.feed_servers import feed_server
from tests.radicale_servers import connection_doc, fresh_user
from tests.xandikos_servers import put_raw_event, xandikos_server

pytestmark = [pytest.mark.date_sensitive, pytest.mark.one_shifted_clock]

FIXTURE = (
    Path(__file__).resolve().parents[1]
    / "fixtures"
    / "calendars"
    / "rdate_period_with_its_own_duration.ics"
)
UID = "00959BC664CA650E933C892C@example.com"


def moved_to(monday: date) -> str:
    """The fixture with its occurrences' dates (2006-01-02 to 01-06, a Monday to a Friday)
    moved by whole days to ``monday``'s week; its stamps and its time zone's rules stay."""
    shift = monday - date(2006, 1, 2)

    def moved(found: re.Match[str]) -> str:
        return f"{datetime.strptime(found[1], '%Y%m%d').date() + shift:%Y%m%d}T"

    return re.sub(r"(200601\d\d)T", moved, FIXTURE.read_text())


def the_period(ics: str, monday: date) -> tuple[datetime, datetime]:
    """The reference expansion's occurrence longer than the series' hour: the RDATE PERIOD."""
    calendar = icalendar.Calendar.from_ical(ics)
    start = datetime.combine(monday, datetime.min.time(), tzinfo=UTC)
    occurrences = recurring_ical_events.of(calendar).between(start, start + timedelta(days=7))
    [period] = [
        (event.decoded("DTSTART").astimezone(UTC), event.decoded("DTEND").astimezone(UTC))
        for event in occurrences
        if event.decoded("DTEND") - event.decoded("DTSTART") > timedelta(hours=1)
    ]
    return period


@pytest.fixture(scope="module")
def xandikos(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    with xandikos_server(tmp_path_factory.mktemp("xandikos")) as server:
        yield server


def connected_and_read(connection: dict[str, Any]) -> Any:
    """A tenant with ``connection`` (named "Calendar"), read once now."""
    tenant = TenantFactory().create(calendarConnections=[{**connection, "name": "Calendar"}])
    result = sync_connection(tenant.connections["Calendar"], now=utcnow())
    db.session.commit()
    assert result.ok, result
    return tenant


def assert_refused_as_external_busy(app: Any, tenant: Any, start: datetime) -> None:
    refused = book_through_api(app.test_client(), tenant, start)
    assert refused.status_code == 400, refused.json
    assert refused.json["code"] == "external_busy"


def test_a_booking_into_a_feeds_rdate_periods_second_hour_is_external_busy(
    private_allowed,
) -> None:
    monday = next_monday()
    ics = moved_to(monday)
    begin, end = the_period(ics, monday)
    assert end - begin == timedelta(hours=2)
    with feed_server() as feed:
        feed.serve(ics)
        tenant = connected_and_read({"kind": "ics", "url": feed.url})
    assert_refused_as_external_busy(private_allowed, tenant, begin + timedelta(hours=1))


def test_a_booking_into_an_rdate_periods_second_hour_on_xandikos_is_external_busy(
    private_allowed, xandikos
) -> None:
    monday = next_monday()
    ics = moved_to(monday)
    begin, end = the_period(ics, monday)
    assert end - begin == timedelta(hours=2)
    user, name = fresh_user(), f"Personal {uuid.uuid4().hex[:8]}"
    calendar = xandikos.make_calendar(user, name)
    tenant = connected_and_read(connection_doc("Personal", xandikos, user, calendar=name))
    put_raw_event(calendar, UID, ics)  # after the read: only the live check sees it
    assert_refused_as_external_busy(private_allowed, tenant, begin + timedelta(hours=1))
