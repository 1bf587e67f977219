"""The transactional outbox: each booking write stores its event in its own transaction, and
each handler gets each event at most once."""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlalchemy import func, select

from app.extensions import db
from app.models import OutboxDelivery, OutboxEvent
from app.models.types import utcnow
from app.services import outbox
from tests.factories import make_booking, next_monday, ny, z

MONDAY = next_monday()


def create(client, tenant, start):
    return client.post(
        f"/v1/api/calendar/event-types/{tenant.event_types['Cleaning']}/bookings",
        json={
            "startTime": z(start),
            "endTime": z(start + timedelta(minutes=30)),
            "attendees": [{"email": "pat@example.test"}],
        },
        headers=tenant.headers(),
    )


def outbox_rows():
    db.session.expire_all()
    return db.session.scalars(select(OutboxEvent).order_by(OutboxEvent.id)).all()


@pytest.fixture
def calls():
    """A handler registered under "test", recording the events it was given."""
    seen: list[int] = []
    outbox.register_handler("test", lambda event: seen.append(event.id))
    yield seen
    outbox.unregister_handler("test")


@pytest.fixture
def event_id(tenant):
    booking = make_booking(tenant, ny(MONDAY, 10))
    row = OutboxEvent(
        kind="booking.created",
        sub_account_id=tenant.sub_account_id,
        booking_id=booking.id,
        changed=[],
        occurred_at=utcnow() - timedelta(minutes=5),
    )
    db.session.add(row)
    db.session.commit()
    return row.id


def test_a_create_stores_its_event_with_the_booking(client, tenant):
    booking_id = create(client, tenant, ny(MONDAY, 10)).json["id"]
    (row,) = outbox_rows()
    assert (row.kind, row.booking_id, row.sub_account_id) == (
        "booking.created",
        booking_id,
        tenant.sub_account_id,
    )
    assert row.delivered_at is None


def test_a_refused_write_stores_no_event(client, tenant):
    create(client, tenant, ny(MONDAY, 10))
    assert create(client, tenant, ny(MONDAY, 10)).status_code == 400
    assert [row.kind for row in outbox_rows()] == ["booking.created"]


def test_update_and_cancel_store_their_events(client, tenant):
    booking_id = create(client, tenant, ny(MONDAY, 10)).json["id"]
    url = f"/v1/api/calendar/event-types/{tenant.event_types['Cleaning']}/bookings/{booking_id}"
    client.put(url, json={"startTime": z(ny(MONDAY, 11))}, headers=tenant.headers())
    client.put(url, json={"title": "Renamed"}, headers=tenant.headers())
    client.delete(f"/v1/api/calendar/bookings/{booking_id}", headers=tenant.headers())
    rows = outbox_rows()
    assert [row.kind for row in rows] == [
        "booking.created",
        "booking.rescheduled",
        "booking.updated",
        "booking.cancelled",
    ]
    assert rows[2].changed == ["title"]


def test_a_handler_runs_once_however_often_the_event_is_delivered(event_id, calls):
    assert outbox.handle_event(event_id, "test", utcnow()) is True
    db.session.commit()
    assert outbox.handle_event(event_id, "test", utcnow()) is False
    db.session.commit()
    assert calls == [event_id]
    assert db.session.scalar(select(func.count()).select_from(OutboxDelivery)) == 1


def test_a_failing_handler_leaves_no_receipt_and_runs_again(event_id, calls):
    def failing(event):
        raise RuntimeError("server away")

    outbox.register_handler("flaky", failing)
    try:
        with pytest.raises(RuntimeError):
            outbox.handle_event(event_id, "flaky", utcnow())
        db.session.rollback()
        assert "flaky" in outbox.handlers_due(event_id)
    finally:
        outbox.unregister_handler("flaky")


def test_an_event_is_delivered_once_every_handler_has_its_receipt(event_id, calls):
    now = utcnow()
    assert outbox.mark_delivered_if_done(event_id, now) is False
    outbox.handle_event(event_id, "test", now)
    assert outbox.mark_delivered_if_done(event_id, now) is True
    db.session.commit()
    assert outbox_rows()[0].delivered_at is not None


def test_the_sweep_finds_old_undelivered_events_only(event_id, tenant, calls):
    now = utcnow()
    fresh = OutboxEvent(
        kind="booking.updated",
        sub_account_id=tenant.sub_account_id,
        booking_id=outbox_rows()[0].booking_id,
        changed=["title"],
        occurred_at=now,
    )
    db.session.add(fresh)
    db.session.commit()
    assert outbox.undelivered_events(now) == [event_id]
    outbox.handle_event(event_id, "test", now)
    outbox.mark_delivered_if_done(event_id, now)
    db.session.commit()
    assert outbox.undelivered_events(now) == []
