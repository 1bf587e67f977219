"""PostgreSQL keeps holds and bookings apart even behind the application's back (migration
0010), and racing holds over several server processes leave one hold."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import func, select
from sqlalchemy.exc import IntegrityError

from app.extensions import db
from app.models import Booking, SlotHold
from app.services.bookings import holds as holds_service
from app.services.bookings import time_claims
from app.services.scheduling_inputs import BusyTime
from tests.factories import make_booking, next_monday, ny, z
from tests.servers import PATIENT, gunicorn, post_all

MONDAY = next_monday()
TEN = ny(MONDAY, 10)

pytestmark = pytest.mark.date_sensitive  # holds and bookings on next Monday


def store_hold(tenant, start, minutes=30, expires_in=timedelta(minutes=2), **fields) -> SlotHold:
    """A hold row written directly, as a bug or a forgotten lock would (``fields`` added)."""
    hold = SlotHold(
        sub_account_id=tenant.sub_account_id,
        event_type_id=tenant.event_types["Cleaning"],
        start_at=start,
        end_at=start + timedelta(minutes=minutes),
        occupied_start=start,
        occupied_end=start + timedelta(minutes=minutes),
        expires_at=datetime.now(UTC) + expires_in,
        token_digest=holds_service.token_digest(f"hold_{start.isoformat()}"),
        timezone="America/New_York",
        **fields,
    )
    db.session.add(hold)
    db.session.commit()
    return hold


def refused_constraint(error: IntegrityError) -> tuple[str, str]:
    return error.orig.sqlstate, error.orig.diag.constraint_name


def test_a_hold_cannot_be_stored_over_an_active_booking(tenant):
    make_booking(tenant, TEN)
    with pytest.raises(IntegrityError) as refused:
        store_hold(tenant, ny(MONDAY, 10, 15))
    assert refused_constraint(refused.value) == ("23P01", "ex_slot_holds_no_booking_overlap")
    db.session.rollback()


def test_an_active_booking_cannot_be_stored_over_a_hold(tenant):
    store_hold(tenant, TEN)
    with pytest.raises(IntegrityError) as refused:
        make_booking(tenant, ny(MONDAY, 10, 15))
    assert refused_constraint(refused.value) == ("23P01", "ex_bookings_no_hold_overlap")
    db.session.rollback()


def test_overlapping_holds_cannot_be_stored(tenant):
    store_hold(tenant, TEN)
    with pytest.raises(IntegrityError) as refused:
        store_hold(tenant, ny(MONDAY, 10, 15))
    assert refused_constraint(refused.value) == ("23P01", "ex_slot_holds_no_overlap")
    db.session.rollback()


def stored_rows() -> tuple[list[tuple], list[tuple]]:
    """Every hold (sub account, start, end) and booking (sub account, start, status) the
    database keeps, read back afresh."""
    db.session.expire_all()
    holds = db.session.execute(select(SlotHold.sub_account_id, SlotHold.start_at, SlotHold.end_at))
    bookings = db.session.execute(select(Booking.sub_account_id, Booking.start_at, Booking.status))
    return sorted(tuple(row) for row in holds), sorted(tuple(row) for row in bookings)


def test_inactive_bookings_and_other_calendars_may_overlap_a_hold(tenants, tenant):
    other = tenants.create()
    held_until = ny(MONDAY, 11, 30)
    store_hold(tenant, TEN, minutes=90)  # 10:00–11:30
    # Bookings that free their time, stored over the hold …
    for status in ("cancelled", "completed", "no_show"):
        make_booking(tenant, TEN, status=status)
    # … and a hold stored over such a booking.
    make_booking(tenant, ny(MONDAY, 14), status="cancelled")
    store_hold(tenant, ny(MONDAY, 14))
    # Another calendar's active booking and hold over this calendar's hold (10:00–10:40 with
    # its buffer, and 11:00–11:30: clear of each other).
    make_booking(other, TEN)
    store_hold(other, ny(MONDAY, 11))

    holds, bookings = stored_rows()
    assert holds == sorted(
        [
            (tenant.sub_account_id, TEN, held_until),
            (tenant.sub_account_id, ny(MONDAY, 14), ny(MONDAY, 14, 30)),
            (other.sub_account_id, ny(MONDAY, 11), held_until),
        ]
    )
    assert bookings == sorted(
        [
            *((tenant.sub_account_id, TEN, s) for s in ("cancelled", "completed", "no_show")),
            (tenant.sub_account_id, ny(MONDAY, 14), "cancelled"),
            (other.sub_account_id, TEN, "pending"),
        ]
    )


def test_a_database_refusal_is_the_same_400_slot_held(client, tenant, monkeypatch):
    store_hold(tenant, TEN)
    # Blind the check, as a bug would: only the database's trigger is left.
    monkeypatch.setattr(time_claims, "load_busy", lambda *args, **kwargs: BusyTime([], [], []))
    response = client.post(
        f"/v1/api/calendar/event-types/{tenant.event_types['Cleaning']}/holds",
        json={"startTime": z(TEN), "endTime": z(TEN + timedelta(minutes=30))},
        headers=tenant.headers(),
    )
    assert response.status_code == 400
    assert response.json["code"] == "slot_held"
    assert response.json["message"] == "Time slot is held for another booking"


@pytest.mark.slow
def test_twenty_simultaneous_holds_of_one_slot_over_two_servers_make_one(database_url, tenant):
    # All 20 connect at once and queue on the calendar's lock (PATIENT: a 503 is not the point).
    with (
        gunicorn(database_url, env=PATIENT) as first,
        gunicorn(database_url, env=PATIENT) as second,
    ):
        path = f"/v1/api/calendar/event-types/{tenant.event_types['Cleaning']}/holds"
        payload = {"startTime": z(TEN), "endTime": z(TEN + timedelta(minutes=30))}
        results = post_all(
            [((first, second)[i % 2] + path, payload) for i in range(20)], tenant.headers()
        )
    statuses = sorted(status for status, _ in results)
    assert statuses == [201] + [400] * 19, results
    assert {body["code"] for status, body in results if status == 400} == {"slot_held"}
    db.session.expire_all()
    assert db.session.scalar(select(func.count()).select_from(SlotHold)) == 1
