"""Domain events of booking writes: one per write, delivered only after the commit."""

from __future__ import annotations

import pytest
from sqlalchemy import text

from app.extensions import db
from app.models.types import utcnow
from app.services.integrations import events
from app.services.integrations.events import BookingEvent, BookingEventKind
from app.services.integrations.registry import app_registry
from tests.factories import book_through_api, make_booking, next_monday, ny, z

pytestmark = pytest.mark.date_sensitive  # bookings on next Monday

MONDAY = next_monday()


@pytest.fixture
def received(app):
    """Events delivered, each with whether its booking was already committed (seen from a
    separate connection) at delivery time."""
    got: list[tuple[BookingEvent, bool]] = []

    def record(booking_event: BookingEvent) -> None:
        with db.engine.connect() as conn:
            committed = conn.execute(
                text("SELECT count(*) FROM bookings WHERE id = :id"),
                {"id": booking_event.booking_id},
            ).scalar_one()
        got.append((booking_event, committed == 1))

    app_registry(app).subscribe(record)  # on this test's app only
    return got


def put(client, tenant, booking_id, payload):
    url = f"/v1/api/calendar/event-types/{tenant.event_types['Cleaning']}/bookings/{booking_id}"
    return client.put(url, json=payload, headers=tenant.headers())


def kinds(received):
    return [e.kind for e, _ in received]


def test_create_emits_created_after_commit(client, tenant, received):
    booking_id = book_through_api(client, tenant, ny(MONDAY, 10)).json["id"]
    ((event, committed),) = received
    assert (event.kind, event.booking_id, event.sub_account_id) == (
        BookingEventKind.CREATED,
        booking_id,
        tenant.sub_account_id,
    )
    assert committed


def test_idempotent_replay_emits_nothing(client, tenant, received):
    book_through_api(client, tenant, ny(MONDAY, 10), idempotencyKey="k")
    book_through_api(client, tenant, ny(MONDAY, 10), idempotencyKey="k")
    assert kinds(received) == [BookingEventKind.CREATED]


def test_refused_create_emits_nothing(client, tenant, received):
    make_booking(tenant, ny(MONDAY, 10))
    assert book_through_api(client, tenant, ny(MONDAY, 10)).status_code == 400
    assert received == []


def test_time_change_emits_rescheduled(client, tenant, received):
    booking = make_booking(tenant, ny(MONDAY, 10))
    put(client, tenant, booking.id, {"startTime": z(ny(MONDAY, 12)), "title": "Moved"})
    ((event, committed),) = received
    assert event.kind is BookingEventKind.RESCHEDULED and committed
    assert set(event.changed) == {"startTime", "endTime", "title"}


def test_other_changes_emit_updated(client, tenant, received):
    booking = make_booking(tenant, ny(MONDAY, 10))
    put(client, tenant, booking.id, {"title": "Renamed"})
    assert kinds(received) == [BookingEventKind.UPDATED]
    assert received[0][0].changed == ("title",)


def test_update_that_changes_nothing_emits_nothing(client, tenant, received):
    booking = make_booking(tenant, ny(MONDAY, 10), title="Same")
    put(client, tenant, booking.id, {"title": "Same", "startTime": z(ny(MONDAY, 10))})
    assert received == []


def test_cancel_emits_cancelled(client, tenant, received):
    booking = make_booking(tenant, ny(MONDAY, 10))
    client.delete(f"/v1/api/calendar/bookings/{booking.id}", headers=tenant.headers())
    assert kinds(received) == [BookingEventKind.CANCELLED]


def test_rollback_discards_pending_events(app, received):
    db.session.execute(text("SELECT 1"))  # a use case has always begun its transaction
    events.emit(db.session, BookingEvent(BookingEventKind.CREATED, 1, 1, utcnow()))
    db.session.rollback()
    db.session.commit()
    assert received == []


def test_a_failing_subscriber_does_not_fail_the_request(app, client, tenant, received):
    def broken(booking_event):
        raise RuntimeError("subscriber bug")

    app_registry(app).subscribe(broken)
    response = book_through_api(client, tenant, ny(MONDAY, 10))
    assert response.status_code == 201
    assert kinds(received) == [BookingEventKind.CREATED]


def test_subscribers_belong_to_their_app(app, make_app, client, tenant, received):
    """Another app built in the same process has its own subscribers: it hears nothing of
    this app's writes, and this app's subscribers hear nothing of its writes."""
    other = make_app()
    heard: list[BookingEvent] = []
    app_registry(other).subscribe(heard.append)
    mine = book_through_api(client, tenant, ny(MONDAY, 10)).json["id"]
    theirs = book_through_api(other.test_client(), tenant, ny(MONDAY, 11)).json["id"]
    assert [e.booking_id for e, _ in received] == [mine]
    assert [e.booking_id for e in heard] == [theirs]
