"""Write-back against a real Radicale server: bookings made through the API appear in the connected
calendar, move with their reschedules and leave with their cancellation. Deliveries are run
in-process here (``handle_event``); the worker tests run them through a real Celery worker."""

from __future__ import annotations

import threading
from datetime import UTC, timedelta

import icalendar
import pytest
from sqlalchemy import select

from app.extensions import db
from app.jobs import outbox as outbox_job
from app.models import (
    Booking,
    CalendarConnection,
    CalendarWriteLease,
    OutboxDelivery,
    OutboxEvent,
)
from app.models.types import utcnow
from app.services.integrations.calendars import sync_connection
from app.services.integrations.calendars.write_back import (
    HANDLER_NAME,
    UNDER_WAY,
    write_back_booking,
)
from app.services.integrations.ical import booking_calendar
from tests.celery_workers import wait_for
from tests.factories import book_through_api, make_booking, next_monday, ny, utc, z
from tests.radicale_servers import connection_doc, fresh_user, radicale_server

pytestmark = pytest.mark.date_sensitive  # bookings on next Monday, in the booking's zone

MONDAY = next_monday()


@pytest.fixture(scope="module")
def radicale(tmp_path_factory):
    with radicale_server(tmp_path_factory.mktemp("radicale")) as server:
        yield server


def connected(tenants, server, *, write_back=True, user=None):
    """A tenant whose calendar is connected to a new calendar on ``server``; returns the tenant,
    the connection id and the caldav Calendar."""
    user = user or fresh_user()
    calendar = server.make_calendar(user, "Work")
    tenant = tenants.create(
        calendarConnections=[
            connection_doc("Work", server, user, "unused", "Work", writeBack=write_back)
        ]
    )
    connection_id = tenant.connections["Work"]
    return tenant, connection_id, calendar


def create(client, tenant, start, **fields):
    fields.setdefault("attendees", [{"email": "pat@example.test", "name": "Pat Doe"}])
    response = book_through_api(client, tenant, start, **fields)
    assert response.status_code == 201, response.json
    return response.json


def booking_url(tenant, booking_id):
    return f"/v1/api/calendar/event-types/{tenant.event_types['Cleaning']}/bookings/{booking_id}"


def deliver_all(now=None):
    """Run write-back on every outbox event not yet handled, oldest first."""
    now = now or utcnow()
    ran = []
    for event_id in db.session.scalars(select(OutboxEvent.id).order_by(OutboxEvent.id)).all():
        ran.append(outbox_job.handle_event(event_id, HANDLER_NAME, now))
        db.session.commit()
    return ran


def stored_events(calendar):
    """The VEVENTs in the calendar, read back through the caldav client."""
    return [icalendar.Calendar.from_ical(obj.data).walk("VEVENT")[0] for obj in calendar.events()]


def connection(connection_id):
    return db.session.get(CalendarConnection, connection_id, populate_existing=True)


def test_a_booking_appears_in_the_connected_calendar(client, tenants, radicale):
    tenant, connection_id, calendar = connected(tenants, radicale)
    booking = create(
        client, tenant, ny(MONDAY, 10), title="Cleaning for Pat", description="Bring the x-rays"
    )
    assert deliver_all() == [True]

    (event,) = stored_events(calendar)
    assert str(event["UID"]) == booking["uid"]
    assert str(event["SUMMARY"]) == "Cleaning for Pat"
    assert str(event["DESCRIPTION"]) == "Bring the x-rays"
    assert event["DTSTART"].dt == ny(MONDAY, 10)
    assert event["DTSTART"].dt.tzinfo.key == "America/New_York"  # shown in the booking's zone
    assert event["DTEND"].dt == ny(MONDAY, 10, 30)
    assert (str(event["STATUS"]), event["SEQUENCE"]) == ("TENTATIVE", 0)
    (attendee,) = [event["ATTENDEE"]]
    assert str(attendee) == "mailto:pat@example.test"
    assert attendee.params["CN"] == "Pat Doe"
    assert attendee.params["SCHEDULE-AGENT"] == "CLIENT"  # the server mails no invitation
    assert connection(connection_id).last_write_at is not None


def test_a_reschedule_moves_the_event_and_raises_its_sequence(client, tenants, radicale):
    tenant, _, calendar = connected(tenants, radicale)
    booking = create(client, tenant, ny(MONDAY, 10))
    deliver_all()
    url = booking_url(tenant, booking["id"])
    client.put(url, json={"startTime": z(ny(MONDAY, 13))}, headers=tenant.headers())
    deliver_all()

    (event,) = stored_events(calendar)  # replaced, not added
    assert event["DTSTART"].dt == ny(MONDAY, 13)
    assert event["SEQUENCE"] == 1
    client.put(url, json={"title": "Renamed"}, headers=tenant.headers())
    deliver_all()
    (event,) = stored_events(calendar)
    assert (str(event["SUMMARY"]), event["SEQUENCE"]) == ("Renamed", 2)


def test_metadata_changes_do_not_raise_the_sequence(client, tenants, radicale):
    tenant, _, calendar = connected(tenants, radicale)
    booking = create(client, tenant, ny(MONDAY, 10))
    client.put(
        booking_url(tenant, booking["id"]), json={"metadata": {"crm": 7}}, headers=tenant.headers()
    )
    deliver_all()
    (event,) = stored_events(calendar)
    assert event["SEQUENCE"] == 0


def test_a_cancelled_booking_leaves_the_calendar(client, tenants, radicale):
    tenant, _, calendar = connected(tenants, radicale)
    booking = create(client, tenant, ny(MONDAY, 10))
    deliver_all()
    assert len(stored_events(calendar)) == 1
    client.delete(f"/v1/api/calendar/bookings/{booking['id']}", headers=tenant.headers())
    deliver_all()
    assert stored_events(calendar) == []


def test_a_late_delivery_writes_the_booking_as_it_is_now(client, tenants, radicale):
    tenant, _, calendar = connected(tenants, radicale)
    booking = create(client, tenant, ny(MONDAY, 10))
    client.delete(f"/v1/api/calendar/bookings/{booking['id']}", headers=tenant.headers())
    events = db.session.scalars(select(OutboxEvent.id).order_by(OutboxEvent.id.desc())).all()
    for event_id in events:  # the cancel first, the create after it
        outbox_job.handle_event(event_id, HANDLER_NAME, utcnow())
        db.session.commit()
    assert stored_events(calendar) == []


def test_a_connection_without_write_back_is_not_written(client, tenants, radicale):
    tenant, connection_id, calendar = connected(tenants, radicale, write_back=False)
    create(client, tenant, ny(MONDAY, 10))
    deliver_all()
    assert stored_events(calendar) == []
    assert connection(connection_id).last_write_at is None


def test_the_written_event_is_not_busy_time_on_the_next_sync(client, tenants, radicale):
    tenant, connection_id, _ = connected(tenants, radicale)
    create(client, tenant, ny(MONDAY, 10))
    deliver_all()
    result = sync_connection(connection_id, now=utcnow())
    db.session.commit()
    assert (result.status, result.busy_count) == ("synced", 0)


@pytest.mark.slow
def test_a_server_that_is_down_is_retried_with_the_error_recorded(client, tenants, tmp_path):
    with radicale_server(tmp_path / "own") as server:
        tenant, connection_id, calendar = connected(tenants, server)
        server.stop()
        create(client, tenant, ny(MONDAY, 10))
        now = utcnow()
        assert deliver_all(now) == [True]
        (record,) = db.session.scalars(select(OutboxDelivery)).all()
        assert (record.status, record.attempts) == ("retrying", 1)
        assert "cannot connect" in record.last_error
        failing = connection(connection_id)
        assert "cannot connect" in failing.last_write_error
        assert failing.last_write_at is None

        server.start()
        assert deliver_all(now) == [False]  # not due yet
        assert deliver_all(record.next_attempt_at) == [True]
        assert len(stored_events(calendar)) == 1
        assert connection(connection_id).last_write_at is not None


def claim_by_another_writer(booking_id, connection_id, until):
    db.session.add(
        CalendarWriteLease(
            booking_id=booking_id,
            calendar_connection_id=connection_id,
            holder="another-writer",
            until=until,
        )
    )
    db.session.commit()


def leases():
    db.session.expire_all()
    return db.session.scalars(select(CalendarWriteLease)).all()


def test_a_booking_another_writer_is_writing_is_left_to_a_retry(client, tenants, radicale):
    tenant, connection_id, calendar = connected(tenants, radicale)
    booking = create(client, tenant, ny(MONDAY, 10))
    claim_by_another_writer(booking["id"], connection_id, utcnow() + timedelta(minutes=1))

    assert deliver_all() == [True]
    (record,) = db.session.scalars(select(OutboxDelivery)).all()
    assert (record.status, record.last_error) == ("retrying", f"Work: {UNDER_WAY}")
    assert stored_events(calendar) == []
    assert connection(connection_id).last_write_error is None  # not the calendar's fault


def test_a_claim_past_its_time_is_taken_over(client, tenants, radicale):
    tenant, connection_id, calendar = connected(tenants, radicale)
    booking = create(client, tenant, ny(MONDAY, 10))
    claim_by_another_writer(booking["id"], connection_id, utcnow() - timedelta(seconds=1))

    assert deliver_all() == [True]
    assert len(stored_events(calendar)) == 1


def test_a_delivery_run_again_after_its_process_died_takes_its_own_claim_back(
    client, tenants, radicale
):
    tenant, connection_id, calendar = connected(tenants, radicale)
    booking = create(client, tenant, ny(MONDAY, 10))
    (event_id,) = db.session.scalars(select(OutboxEvent.id)).all()
    db.session.add(
        CalendarWriteLease(
            booking_id=booking["id"],
            calendar_connection_id=connection_id,
            holder=f"outbox event {event_id}",  # killed while it wrote
            until=utcnow() + timedelta(minutes=2),
        )
    )
    db.session.commit()

    assert deliver_all() == [True]
    assert len(stored_events(calendar)) == 1
    assert leases() == []


def test_a_writer_gives_its_claim_back_with_the_outcome(client, tenants, radicale):
    tenant, _, calendar = connected(tenants, radicale)
    create(client, tenant, ny(MONDAY, 10))
    deliver_all()
    assert len(stored_events(calendar)) == 1
    assert leases() == []


def test_a_second_write_in_one_transaction_is_deferred_not_waited_for(client, tenants, radicale):
    """The first write gave its claim back in a transaction not committed yet: a second
    write in it would wait on its own transaction; it is deferred instead."""
    tenant, _, calendar = connected(tenants, radicale)
    booking = create(client, tenant, ny(MONDAY, 10))
    write_back_booking(booking["id"], now=utcnow())
    (second,) = write_back_booking(booking["id"], now=utcnow())
    db.session.commit()
    assert (second.deferred, second.error) == (True, UNDER_WAY)
    assert len(stored_events(calendar)) == 1


@pytest.mark.slow
def test_a_second_writer_of_a_booking_does_not_wait_for_the_first(app, client, tenants, tmp_path):
    """The first writer waits on a frozen server; the second, for the same booking and
    calendar, is deferred at once, while the first still waits."""
    with radicale_server(tmp_path / "own") as server:
        tenant, _, _ = connected(tenants, server)
        booking = create(client, tenant, ny(MONDAY, 10))
        outcomes: dict[str, list] = {}

        def write(name):
            with app.app_context():
                outcomes[name] = write_back_booking(booking["id"], now=utcnow(), timeout=4)
                db.session.commit()

        server.freeze()
        try:
            first = threading.Thread(target=write, args=("first",))
            first.start()
            assert wait_for(lambda: len(leases()) == 1)
            write("second")
            assert first.is_alive()  # still waiting on the server
            first.join(timeout=30)
        finally:
            server.thaw()
    (second,) = outcomes["second"]
    assert (second.deferred, second.error) == (True, UNDER_WAY)
    (first_outcome,) = outcomes["first"]
    assert "did not answer" in first_outcome.error
    assert leases() == []


def ical_times(tenants, start, minutes=60):
    tenant = tenants.create()
    booking = make_booking(tenant, start, minutes=minutes)
    data = booking_calendar(db.session.get(Booking, booking.id), now=utcnow())
    event = icalendar.Calendar.from_ical(data).walk("VEVENT")[0]
    return event["DTSTART"].dt, event["DTEND"].dt, data


def test_times_are_written_in_the_bookings_zone(tenants):
    start, end, data = ical_times(tenants, utc(2031, 7, 1, 14))
    assert (start, end) == (utc(2031, 7, 1, 14), utc(2031, 7, 1, 15))
    assert start.tzinfo.key == end.tzinfo.key == "America/New_York"
    assert b"BEGIN:VTIMEZONE" in data and b"TZID:America/New_York" in data


def test_a_time_in_the_hour_a_fall_back_repeats_is_written_in_utc(tenants):
    # 2031-11-02 01:30 EDT (05:30Z) and 01:30 EST (06:30Z) read the same on a wall clock;
    # iCalendar would read 01:30 as the first of them.
    start, end, _ = ical_times(tenants, utc(2031, 11, 2, 6, 30))
    assert (start, end) == (utc(2031, 11, 2, 6, 30), utc(2031, 11, 2, 7, 30))
    assert start.utcoffset() == timedelta(0)
    assert end.tzinfo.key == "America/New_York"  # 02:30 EST is not ambiguous
    earlier, _, _ = ical_times(tenants, utc(2031, 11, 2, 5, 30))
    # (compared in UTC: Python never equates a repeated local time with another zone's time)
    assert earlier.astimezone(UTC) == utc(2031, 11, 2, 5, 30)
    assert earlier.tzinfo.key == "America/New_York"


def team_connected(tenants, server, assignment):
    """Two hosts, each with a write-back connection to a calendar of their own, and a "Panel"
    event type of ``assignment`` over both; returns the tenant and each host's calendar."""
    users = {"Ana": fresh_user(), "Ben": fresh_user()}
    calendars = {name: server.make_calendar(user, "Work") for name, user in users.items()}
    tenant = tenants.create(
        hosts=[{"name": "Ana", "email": "ana@team.test"}, {"name": "Ben"}],
        calendarConnections=[
            {**connection_doc(name, server, user, "unused", "Work", writeBack=True), "host": name}
            for name, user in users.items()
        ],
        eventTypes=[
            {
                "name": "Panel",
                "duration": 30,
                "availabilityProfile": "Office",
                "assignment": assignment,
                "hosts": [{"name": "Ana"}, {"name": "Ben"}],
            }
        ],
    )
    return tenant, calendars


def book_panel(client, tenant, start, **fields):
    response = client.post(
        f"/v1/api/calendar/event-types/{tenant.event_types['Panel']}/bookings",
        json={
            "startTime": z(start),
            "endTime": z(start + timedelta(minutes=30)),
            "attendees": [{"email": "pat@example.test"}],
            **fields,
        },
        headers=tenant.headers(),
    )
    assert response.status_code == 201, response.json
    return response.json


def test_a_collective_booking_appears_in_every_hosts_calendar(client, tenants, radicale):
    tenant, calendars = team_connected(tenants, radicale, "collective")
    booking = book_panel(client, tenant, ny(MONDAY, 10))
    assert deliver_all() == [True]
    for calendar in calendars.values():
        (event,) = stored_events(calendar)
        assert str(event["UID"]) == booking["uid"]


def test_a_round_robin_booking_appears_in_its_hosts_calendar_alone(client, tenants, radicale):
    tenant, calendars = team_connected(tenants, radicale, "round_robin")
    book_panel(client, tenant, ny(MONDAY, 10), hostId=tenant.hosts["Ben"])
    assert deliver_all() == [True]
    assert (len(stored_events(calendars["Ana"])), len(stored_events(calendars["Ben"]))) == (0, 1)


def test_a_booking_moved_to_another_host_leaves_the_first_hosts_calendar(client, tenants, radicale):
    tenant, calendars = team_connected(tenants, radicale, "round_robin")
    booking = book_panel(client, tenant, ny(MONDAY, 10), hostId=tenant.hosts["Ben"])
    deliver_all()
    moved = client.put(
        f"/v1/api/calendar/event-types/{tenant.event_types['Panel']}/bookings/{booking['id']}",
        json={"hostId": tenant.hosts["Ana"]},
        headers=tenant.headers(),
    )
    assert moved.status_code == 200, moved.json
    deliver_all()
    assert (len(stored_events(calendars["Ana"])), len(stored_events(calendars["Ben"]))) == (1, 0)


def test_the_booking_s_event_names_its_hosts_as_chairs(client, tenants, radicale):
    tenant, calendars = team_connected(tenants, radicale, "round_robin")
    book_panel(client, tenant, ny(MONDAY, 10), hostId=tenant.hosts["Ana"])
    deliver_all()
    (event,) = stored_events(calendars["Ana"])
    chair, attendee = event["ATTENDEE"]
    assert (str(chair), chair.params["ROLE"], chair.params["CN"]) == (
        "mailto:ana@team.test",
        "CHAIR",
        "Ana",
    )
    assert str(attendee) == "mailto:pat@example.test"
