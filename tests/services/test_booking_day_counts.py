"""PostgreSQL keeps the bookings' counts per local day (what caps read, migration 0024) equal to
the active bookings themselves, whatever writes them."""

from __future__ import annotations

from datetime import timedelta
from zoneinfo import ZoneInfo

import pytest
from sqlalchemy import select, update

from app.extensions import db
from app.models import Booking, BookingDayCount, BookingStatus, CalendarSettings
from tests.factories import book_through_api, make_booking, next_monday, ny, z

MONDAY = next_monday()

pytestmark = pytest.mark.date_sensitive  # bookings on next Monday


def stored_counts(tenant) -> dict:
    """Each (day, event type) the table counts, without the days that went back to none."""
    db.session.expire_all()
    rows = db.session.scalars(
        select(BookingDayCount).where(BookingDayCount.sub_account_id == tenant.sub_account_id)
    )
    return {
        (row.day, row.event_type_id): (row.bookings, row.minutes) for row in rows if row.bookings
    }


def counted_afresh(tenant) -> dict:
    """The same, counted from the active bookings in the sub account's timezone."""
    db.session.expire_all()
    tz = ZoneInfo(db.session.get(CalendarSettings, tenant.sub_account_id).timezone)
    counts: dict = {}
    for booking in db.session.scalars(
        select(Booking).where(
            Booking.sub_account_id == tenant.sub_account_id,
            Booking.status.in_(("pending", "confirmed")),
        )
    ):
        key = (booking.start_at.astimezone(tz).date(), booking.event_type_id)
        bookings, minutes = counts.get(key, (0, 0))
        length = int((booking.end_at - booking.start_at).total_seconds() // 60)
        counts[key] = (bookings + 1, minutes + length)
    return counts


def test_creates_count_on_their_local_day(client, tenant):
    book_through_api(client, tenant, ny(MONDAY, 10))
    book_through_api(client, tenant, ny(MONDAY, 11))
    make_booking(tenant, ny(MONDAY, 23, 30), event_type="Checkup", minutes=60)  # 04:30Z Tuesday
    cleaning, checkup = tenant.event_types["Cleaning"], tenant.event_types["Checkup"]
    assert stored_counts(tenant) == {(MONDAY, cleaning): (2, 60), (MONDAY, checkup): (1, 60)}
    assert stored_counts(tenant) == counted_afresh(tenant)


def test_a_cancel_and_a_completion_take_their_count_back(client, tenant):
    first = book_through_api(client, tenant, ny(MONDAY, 10)).json
    second = make_booking(tenant, ny(MONDAY, 11))
    client.delete(f"/v1/api/calendar/bookings/{first['id']}", headers=tenant.headers())
    db.session.execute(
        update(Booking).where(Booking.id == second.id).values(status=BookingStatus.COMPLETED)
    )
    db.session.commit()
    assert stored_counts(tenant) == {} == counted_afresh(tenant)


def test_a_reschedule_moves_its_count_to_the_new_day(client, tenant):
    booking = book_through_api(client, tenant, ny(MONDAY, 10)).json
    tuesday = ny(MONDAY + timedelta(days=1), 10)
    moved = client.put(
        f"/v1/api/calendar/event-types/{tenant.event_types['Cleaning']}/bookings/{booking['id']}",
        json={"startTime": z(tuesday), "endTime": z(tuesday + timedelta(minutes=45))},
        headers=tenant.headers(),
    )
    assert moved.status_code == 200, moved.json
    cleaning = tenant.event_types["Cleaning"]
    assert stored_counts(tenant) == {(MONDAY + timedelta(days=1), cleaning): (1, 45)}
    assert stored_counts(tenant) == counted_afresh(tenant)


def test_a_new_timezone_recounts_every_day(tenant):
    make_booking(tenant, ny(MONDAY, 20))  # 01:00Z Tuesday: Monday in New York, Tuesday in UTC
    make_booking(tenant, ny(MONDAY, 10))
    db.session.get(CalendarSettings, tenant.sub_account_id).timezone = "UTC"
    db.session.commit()
    cleaning = tenant.event_types["Cleaning"]
    assert stored_counts(tenant) == {
        (MONDAY, cleaning): (1, 30),
        (MONDAY + timedelta(days=1), cleaning): (1, 30),
    }
    assert stored_counts(tenant) == counted_afresh(tenant)


def test_a_deleted_booking_takes_its_count_back(tenant):
    booking = make_booking(tenant, ny(MONDAY, 10))
    db.session.delete(booking)
    db.session.commit()
    assert stored_counts(tenant) == {}
