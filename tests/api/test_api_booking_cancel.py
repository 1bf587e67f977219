"""DELETE /calendar/bookings/:id."""

from __future__ import annotations

import pytest

from app.extensions import db
from app.models import Booking
from tests.factories import make_booking, next_monday, ny, z

pytestmark = pytest.mark.date_sensitive  # bookings on next Monday, in New York time

MONDAY = next_monday()


def cancel(client, tenant, booking_id, payload=None, key="all"):
    kwargs = {"json": payload} if payload is not None else {}
    return client.delete(
        f"/v1/api/calendar/bookings/{booking_id}", headers=tenant.headers(key), **kwargs
    )


def test_cancel_answers_with_the_cancellation_result(client, tenant):
    booking = make_booking(tenant, ny(MONDAY, 10))
    response = cancel(client, tenant, booking.id, {"reason": "Patient is sick"})
    assert response.status_code == 200
    assert set(response.json) == {"id", "status", "cancelledAt", "cancellationReason"}
    assert response.json["id"] == booking.id
    assert response.json["status"] == "cancelled"
    assert response.json["cancelledAt"].endswith("Z")
    assert response.json["cancellationReason"] == "Patient is sick"


def test_cancel_without_a_body(client, tenant):
    booking = make_booking(tenant, ny(MONDAY, 10))
    response = cancel(client, tenant, booking.id)
    assert response.status_code == 200 and response.json["cancellationReason"] is None


def test_cancelled_booking_shows_its_stamp(client, tenant):
    booking = make_booking(tenant, ny(MONDAY, 10))
    cancelled_at = cancel(client, tenant, booking.id).json["cancelledAt"]
    shown = client.get(f"/v1/api/calendar/bookings/{booking.id}", headers=tenant.headers()).json
    assert (shown["status"], shown["cancelledAt"]) == ("cancelled", cancelled_at)


def test_cancelling_twice_is_400(client, tenant):
    booking = make_booking(tenant, ny(MONDAY, 10))
    cancel(client, tenant, booking.id)
    response = cancel(client, tenant, booking.id)
    assert response.json == {
        "statusCode": 400,
        "message": "Booking is already cancelled",
        "code": "booking_not_active",
    }


@pytest.mark.parametrize("status", ["completed", "no_show"])
def test_finished_bookings_cannot_be_cancelled(client, tenant, status):
    booking = make_booking(tenant, ny(MONDAY, 10), status=status)
    response = cancel(client, tenant, booking.id)
    assert response.json == {
        "statusCode": 400,
        "message": f"A {status} booking cannot be cancelled",
        "code": "booking_not_active",
    }


def test_confirmed_bookings_can_be_cancelled(client, tenant):
    booking = make_booking(tenant, ny(MONDAY, 10), status="confirmed")
    assert cancel(client, tenant, booking.id).status_code == 200


def test_freed_time_is_available_at_once(client, tenant):
    booking = make_booking(tenant, ny(MONDAY, 10))
    query = f"/v1/api/calendar/availability?startDate={MONDAY}&endDate={MONDAY}"

    def open_starts():
        days = client.get(query, headers=tenant.headers()).json
        return [s["start"] for s in days[0]["slots"]]

    assert z(ny(MONDAY, 10)) not in open_starts()
    cancel(client, tenant, booking.id)
    assert z(ny(MONDAY, 10)) in open_starts()


def test_freed_time_can_be_booked_again(client, tenant):
    booking = make_booking(tenant, ny(MONDAY, 10))
    cancel(client, tenant, booking.id)
    payload = {
        "startTime": z(ny(MONDAY, 10)),
        "endTime": z(ny(MONDAY, 10, 30)),
        "attendees": [{"email": "new@example.test"}],
    }
    url = f"/v1/api/calendar/event-types/{tenant.event_types['Cleaning']}/bookings"
    assert client.post(url, json=payload, headers=tenant.headers()).status_code == 201


def test_reason_too_long_is_400(client, tenant):
    booking = make_booking(tenant, ny(MONDAY, 10))
    response = cancel(client, tenant, booking.id, {"reason": "x" * 501})
    assert response.status_code == 400 and "reason" in response.json["errors"]


def test_unknown_booking_is_404(client, tenant):
    assert cancel(client, tenant, 999999).json == {
        "statusCode": 404,
        "message": "Booking not found",
        "code": "not_found",
    }


def test_another_sub_accounts_booking_is_404(client, tenants, tenant):
    other = tenants.create()
    foreign = make_booking(other, ny(MONDAY, 10))
    response = cancel(client, tenant, foreign.id, {"reason": "Not yours"})
    assert response.status_code == 404
    assert response.json == {"statusCode": 404, "message": "Booking not found", "code": "not_found"}
    db.session.expire_all()
    still = db.session.get(Booking, foreign.id)
    assert (still.status, still.cancelled_at, still.cancellation_reason) == ("pending", None, None)


def test_without_can_cancel_is_403(client, tenant):
    booking = make_booking(tenant, ny(MONDAY, 10))
    response = cancel(client, tenant, booking.id, key="without-canCancel")
    assert response.json == {
        "statusCode": 403,
        "message": "API key does not have 'canCancel' permission",
        "code": "permission_denied",
    }
