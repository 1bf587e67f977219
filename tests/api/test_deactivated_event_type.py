"""A deactivated event type is no longer offered, but the bookings made with it live on: they
can still be renamed, rescheduled and cancelled."""

from __future__ import annotations

from datetime import timedelta

import pytest

from app.extensions import db
from app.models import Booking, EventType
from tests.factories import (
    availability_through_api,
    book_through_api,
    make_booking,
    next_monday,
    ny,
    z,
)

MONDAY = next_monday()

pytestmark = pytest.mark.date_sensitive  # working hours on next Monday, in New York time


@pytest.fixture
def booking(tenant):
    booking = make_booking(tenant, ny(MONDAY, 10), title="Cleaning")
    db.session.get(EventType, tenant.event_types["Cleaning"]).active = False
    db.session.commit()
    return booking


def put(client, tenant, booking_id, payload):
    return client.put(
        f"/v1/api/calendar/event-types/{tenant.event_types['Cleaning']}/bookings/{booking_id}",
        json=payload,
        headers=tenant.headers(),
    )


def reload(booking_id):
    db.session.expire_all()
    return db.session.get(Booking, booking_id)


def test_its_booking_can_be_renamed(client, tenant, booking):
    response = put(client, tenant, booking.id, {"title": "Renamed"})
    assert response.status_code == 200, response.json
    assert response.json["title"] == "Renamed"
    assert reload(booking.id).title == "Renamed"


def test_its_booking_can_be_rescheduled_under_its_rules(client, tenant, booking):
    new_start = ny(MONDAY, 14)
    response = put(client, tenant, booking.id, {"startTime": z(new_start)})
    assert response.status_code == 200, response.json
    assert response.json["startTime"] == z(new_start)
    assert response.json["endTime"] == z(new_start + timedelta(minutes=30))
    stored = reload(booking.id)
    # Its buffer (10 minutes after) still widens the occupied interval.
    assert stored.occupied_end == new_start + timedelta(minutes=40)


def test_its_booking_cannot_move_outside_working_hours(client, tenant, booking):
    response = put(client, tenant, booking.id, {"startTime": z(ny(MONDAY, 20))})
    assert response.status_code == 400
    assert response.json["message"] == "Time slot is outside available hours"


def test_its_booking_can_be_cancelled(client, tenant, booking):
    response = client.delete(f"/v1/api/calendar/bookings/{booking.id}", headers=tenant.headers())
    assert response.status_code == 200
    assert response.json["status"] == "cancelled"


def test_new_bookings_of_it_are_404(client, tenant, booking):
    start = ny(MONDAY, 12)
    response = book_through_api(client, tenant, start, attendees=[{"email": "new@example.test"}])
    assert response.status_code == 404
    assert response.json["message"] == "Event type not found"


def test_its_availability_is_404(client, tenant, booking):
    response = availability_through_api(client, tenant, MONDAY)
    assert response.status_code == 404
    assert response.json["message"] == "Event type not found"


def test_its_booking_is_not_found_through_another_event_types_path(client, tenant, booking):
    response = client.put(
        f"/v1/api/calendar/event-types/{tenant.event_types['Checkup']}/bookings/{booking.id}",
        json={"title": "Renamed"},
        headers=tenant.headers(),
    )
    assert response.status_code == 404
    assert response.json["message"] == "Booking not found"
