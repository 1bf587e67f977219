"""What already exists reaches the calendar: bookings made before a calendar was connected, or
before its write-back was switched on, are written into it by the worker after its next sync,
once each; cancelled and past ones are not. Against the loopback fakes of Google and Microsoft
and a real Radicale.

"The worker runs" is what its ``calendars.sync`` task does for one connection
(``sync_and_follow_up``, with the task's own link builder), at a fixed instant far in the
future (``NOW``), so nothing depends on today's date. Bookings are inserted as rows: none of
them has an event of its own to deliver, as bookings made before the connection had none.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import select

from app.extensions import db
from app.jobs.calendars import sync_and_follow_up, write_existing_bookings
from app.models import CalendarConnection, CalendarWriteLease, SubAccount, WrittenEvent
from app.models.types import utcnow
from app.services.integrations.calendars.connections import (
    add_connection,
    update_connection,
)
from app.services.integrations.calendars.errors import ServerUnreachable
from app.services.integrations.calendars.providers.google import GoogleProvider
from tests.factories import TenantFactory, make_booking
from tests.oauth_fakes import ACCOUNT_EMAIL as EMAIL
from tests.radicale_servers import connection_doc, events_with_uid, fresh_user, radicale_server
from worker.tasks.calendars import connection_page

NOW = datetime(2031, 1, 6, 12, tzinfo=UTC)  # a Monday


def at(day: int, hour: int, minute: int = 0) -> datetime:
    return datetime(2031, 1, day, hour, minute, tzinfo=UTC)


def worker_runs(connection_id: int, now: datetime = NOW):
    result = sync_and_follow_up(connection_id, now=now, page=connection_page)
    db.session.commit()
    return result


def connection(connection_id: int) -> CalendarConnection:
    return db.session.get(CalendarConnection, connection_id, populate_existing=True)


def connect_later(tenant, document: dict) -> int:
    """Connect a calendar to ``tenant``'s sub account now, as an operator or provisioning does."""
    added = add_connection(tenant.sub_account_id, document)
    db.session.commit()
    return added.id


# Google


@pytest.fixture
def google_app(make_app, google):
    app = make_app(
        **google.app_settings(),
    )
    with app.app_context():
        yield app
        db.session.remove()


def google_doc(google, **fields) -> dict:
    return {
        "name": "Google",
        "kind": "google",
        "refreshToken": google.issue_refresh_token(EMAIL),
        **fields,
    }


def written_uids(google) -> list[str]:
    return sorted(event["iCalUID"] for event in google.events(EMAIL))


def event_writes(google) -> list:
    return google.requests_to("/events", method="POST") + google.requests_to(
        "/events/", method="PUT"
    )


def test_bookings_made_before_connecting_appear_once_the_worker_runs(google_app, google):
    tenant = TenantFactory().create()
    first = make_booking(tenant, at(7, 15))
    second = make_booking(tenant, at(8, 15), status="confirmed")
    connection_id = connect_later(tenant, google_doc(google))
    assert connection(connection_id).write_existing_pending
    assert worker_runs(connection_id).ok
    assert written_uids(google) == sorted([first.uid, second.uid])
    assert not connection(connection_id).write_existing_pending
    assert connection(connection_id).last_write_at == NOW


def test_a_second_run_writes_nothing_again(google_app, google):
    tenant = TenantFactory().create()
    make_booking(tenant, at(7, 15))
    connection_id = connect_later(tenant, google_doc(google))
    worker_runs(connection_id)
    google.clear_requests()
    worker_runs(connection_id, now=NOW.replace(minute=5))
    assert event_writes(google) == []
    assert len(google.events(EMAIL)) == 1


def test_cancelled_and_past_bookings_are_not_written(google_app, google):
    tenant = TenantFactory().create()
    make_booking(tenant, at(6, 9))  # over before NOW
    make_booking(tenant, at(7, 9), status="cancelled")
    make_booking(tenant, at(7, 10), status="completed")
    upcoming = make_booking(tenant, at(7, 15))
    connection_id = connect_later(tenant, google_doc(google))
    worker_runs(connection_id)
    assert written_uids(google) == [upcoming.uid]


def test_switching_write_back_on_later_writes_the_earlier_bookings(google_app, google):
    tenant = TenantFactory().create()
    booking = make_booking(tenant, at(7, 15))
    connection_id = connect_later(tenant, google_doc(google, writeBack=False))
    worker_runs(connection_id)
    assert google.events(EMAIL) == []
    sub_account = db.session.get(SubAccount, tenant.sub_account_id)
    update_connection(sub_account, connection_id, {"writeBack": True})
    db.session.commit()
    worker_runs(connection_id, now=NOW.replace(minute=5))
    assert written_uids(google) == [booking.uid]


def test_making_a_connection_active_again_writes_what_was_booked_meanwhile(google_app, google):
    tenant = TenantFactory().create()
    connection_id = connect_later(tenant, google_doc(google))
    worker_runs(connection_id)
    sub_account = db.session.get(SubAccount, tenant.sub_account_id)
    update_connection(sub_account, connection_id, {"active": False})
    db.session.commit()
    booking = make_booking(tenant, at(7, 15))
    update_connection(sub_account, connection_id, {"active": True})
    db.session.commit()
    worker_runs(connection_id, now=NOW.replace(minute=5))
    assert written_uids(google) == [booking.uid]


def test_a_failed_write_is_tried_again_at_the_next_run_from_that_booking(
    google_app, google, monkeypatch
):
    tenant = TenantFactory().create()
    first = make_booking(tenant, at(7, 15))
    second = make_booking(tenant, at(8, 15))
    third = make_booking(tenant, at(9, 15))
    connection_id = connect_later(tenant, google_doc(google))
    put_event = GoogleProvider.put_event

    def refusing_the_second(self, access, uid, data, event_id=None, **kwargs):
        if uid == second.uid:
            raise ServerUnreachable("cannot connect to the calendar API")
        return put_event(self, access, uid, data, event_id, **kwargs)

    monkeypatch.setattr(GoogleProvider, "put_event", refusing_the_second)
    worker_runs(connection_id)
    assert written_uids(google) == [first.uid]
    stored = connection(connection_id)
    assert stored.write_existing_pending and stored.write_existing_after == first.id
    assert "cannot connect" in stored.last_write_error

    monkeypatch.setattr(GoogleProvider, "put_event", put_event)
    google.clear_requests()
    worker_runs(connection_id, now=NOW.replace(minute=5))
    assert written_uids(google) == sorted([first.uid, second.uid, third.uid])
    assert len(event_writes(google)) == 2  # the first is not written again
    assert not connection(connection_id).write_existing_pending


def test_a_booking_another_writer_is_writing_is_left_to_the_next_run(google_app, google):
    """The outbox's write-back of a booking is under way (its claim held): the run writes the
    bookings before it, stops there without counting it a failure of the calendar's, and the
    next run goes on from it."""
    tenant = TenantFactory().create()
    first = make_booking(tenant, at(7, 15))
    second = make_booking(tenant, at(8, 15))
    connection_id = connect_later(tenant, google_doc(google))
    claim = CalendarWriteLease(
        booking_id=second.id,
        calendar_connection_id=connection_id,
        holder="the-outbox",
        until=utcnow() + timedelta(minutes=1),
    )
    db.session.add(claim)
    db.session.commit()

    worker_runs(connection_id)
    assert written_uids(google) == [first.uid]
    stored = connection(connection_id)
    assert stored.write_existing_pending and stored.write_existing_after == first.id
    assert stored.last_write_error is None

    db.session.delete(claim)  # that writer is done
    db.session.commit()
    worker_runs(connection_id, now=NOW.replace(minute=5))
    assert written_uids(google) == sorted([first.uid, second.uid])
    assert not connection(connection_id).write_existing_pending


def test_a_long_list_is_written_over_several_runs_each_going_on_where_the_last_stopped(
    google_app, google
):
    tenant = TenantFactory().create()
    bookings = [make_booking(tenant, at(7 + n, 15)) for n in range(3)]
    connection_id = connect_later(tenant, google_doc(google))
    runs = []
    while connection(connection_id).write_existing_pending:
        runs.append(write_existing_bookings(connection_id, now=NOW, budget_seconds=0))
        db.session.commit()
    assert [(run.written, run.done) for run in runs] == [(1, False), (1, False), (1, True)]
    assert written_uids(google) == sorted(b.uid for b in bookings)


def test_a_failing_sync_leaves_the_earlier_bookings_for_a_later_run(google_app, google):
    tenant = TenantFactory().create()
    make_booking(tenant, at(7, 15))
    connection_id = connect_later(tenant, google_doc(google))
    google.revoke_grants(EMAIL)
    assert not worker_runs(connection_id).ok
    assert google.events(EMAIL) == []
    assert connection(connection_id).write_existing_pending


def test_a_feed_never_writes_and_asks_for_nothing(app):
    tenant = TenantFactory().create()
    make_booking(tenant, at(7, 15))
    connection_id = connect_later(
        tenant, {"name": "Rota", "kind": "ics", "url": "https://calendar.example.com/a.ics"}
    )
    assert not connection(connection_id).write_existing_pending
    assert write_existing_bookings(connection_id, now=NOW) is None


# Microsoft: Graph chooses the event's id, which is kept for later changes


@pytest.fixture
def microsoft_app(make_app, microsoft):
    app = make_app(
        **microsoft.app_settings(),
    )
    with app.app_context():
        yield app
        db.session.remove()


def test_earlier_bookings_written_into_outlook_keep_their_event_ids(microsoft_app, microsoft):
    tenant = TenantFactory().create()
    booking = make_booking(tenant, at(7, 15))
    refresh_token = microsoft.issue_refresh_token(EMAIL)
    connection_id = connect_later(
        tenant, {"name": "Outlook", "kind": "microsoft", "refreshToken": refresh_token}
    )
    worker_runs(connection_id)
    worker_runs(connection_id, now=NOW.replace(minute=5))
    (event_id,) = db.session.scalars(
        select(WrittenEvent.event_id).where(WrittenEvent.booking_id == booking.id)
    ).all()
    calendar = microsoft.default_calendar_id()
    assert microsoft.event(calendar, event_id)["subject"] == booking.title
    assert [e["id"] for e in microsoft.events(calendar)] == [event_id]


# CalDAV


@pytest.fixture(scope="module")
def radicale(tmp_path_factory):
    with radicale_server(tmp_path_factory.mktemp("radicale")) as server:
        yield server


def test_bookings_made_before_connecting_a_caldav_calendar_are_in_it_once(app, radicale):
    user = fresh_user()
    calendar = radicale.make_calendar(user, "Work")
    tenant = TenantFactory().create()
    bookings = [make_booking(tenant, at(7, 15)), make_booking(tenant, at(8, 15))]
    make_booking(tenant, at(9, 15), status="cancelled")
    connection_id = connect_later(tenant, connection_doc("Work", radicale, user, calendar="Work"))
    worker_runs(connection_id)
    worker_runs(connection_id, now=NOW.replace(minute=5))
    assert len(calendar.events()) == 2
    for booking in bookings:
        assert len(events_with_uid(calendar, booking.uid)) == 1
    assert connection(connection_id).busy_count == 0  # the service's own events are not busy


def test_pointing_a_connection_at_another_calendar_writes_the_bookings_there(make_app, radicale):
    app = make_app(CALDAV_ALLOW_PRIVATE=True)
    with app.app_context():
        user = fresh_user()
        radicale.make_calendar(user, "Work")
        home = radicale.make_calendar(user, "Home")
        tenant = TenantFactory().create()
        booking = make_booking(tenant, at(7, 15))
        connection_id = connect_later(
            tenant, connection_doc("Work", radicale, user, calendar="Work")
        )
        worker_runs(connection_id)
        sub_account = db.session.get(SubAccount, tenant.sub_account_id)
        update_connection(sub_account, connection_id, {"calendar": "Home"})
        db.session.commit()
        worker_runs(connection_id, now=NOW.replace(minute=5))
        assert len(events_with_uid(home, booking.uid)) == 1
        db.session.remove()
