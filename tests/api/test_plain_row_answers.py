"""The API's reads load bookings as plain rows (``ShownBooking``), not ORM objects
(``app.services.bookings.queries``): a booking or a page shows exactly as the ORM objects
would."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from app.extensions import db
from app.models import SubAccount
from app.representations import BookingSchema
from app.services.bookings.queries import BookingListQuery, get_booking, list_bookings, show_booking
from tests.factories import make_booking, next_monday, ny

pytestmark = pytest.mark.date_sensitive  # bookings on next Monday


def varied_bookings(tenant) -> list[Any]:
    day = next_monday()
    cancelled = make_booking(
        tenant,
        ny(day, 9),
        status="cancelled",
        emails=("a@example.test", "b@example.test"),
        title="Cleaning with Pat",
        description=None,
        meta={"source": "agent", "n": 3, "ok": True, "none": None},
    )
    cancelled.cancelled_at = cancelled.created_at + timedelta(minutes=5)
    confirmed = make_booking(tenant, ny(day, 11), status="confirmed", emails=("c@example.test",))
    return [cancelled, confirmed, make_booking(tenant, ny(day, 13), location="Room 4")]


def sub_account(tenant) -> SubAccount:
    return db.session.get(SubAccount, tenant.sub_account_id)


def test_a_booking_read_as_plain_rows_shows_as_the_orm_object_does(app, tenant):
    for booking in varied_bookings(tenant):
        db.session.commit()
        orm = BookingSchema().dump(get_booking(sub_account(tenant), booking.id))
        assert BookingSchema().dump(show_booking(sub_account(tenant), booking.id)) == orm


def test_a_page_read_as_plain_rows_shows_as_the_orm_objects_do(app, tenant):
    varied_bookings(tenant)
    db.session.commit()
    page, total = list_bookings(sub_account(tenant), BookingListQuery())
    orm = [BookingSchema().dump(get_booking(sub_account(tenant), b.id)) for b in page]
    assert total == 3
    assert BookingSchema(many=True).dump(page) == orm
