"""PostgreSQL's exclusion constraint: the last line of defence against overlapping bookings."""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlalchemy import select
from sqlalchemy.exc import IntegrityError

from app.extensions import db
from app.models import Booking
from app.services.bookings import time_claims
from app.services.scheduling_inputs import BusyTime
from tests.factories import make_booking, next_monday, ny, z

MONDAY = next_monday()

pytestmark = pytest.mark.date_sensitive  # bookings on next Monday


def test_overlapping_active_bookings_cannot_be_stored(tenant):
    make_booking(tenant, ny(MONDAY, 10))
    with pytest.raises(IntegrityError) as refused:
        make_booking(tenant, ny(MONDAY, 10, 35))  # inside the first one's 10-minute buffer
    assert refused.value.orig.sqlstate == "23P01"
    db.session.rollback()


def stored_at(start):
    """(sub account, status) of every booking stored with this start, read back afresh."""
    db.session.expire_all()
    rows = db.session.execute(
        select(Booking.sub_account_id, Booking.status).where(Booking.start_at == start)
    )
    return sorted(tuple(row) for row in rows)


def test_inactive_bookings_may_overlap(tenant):
    start = ny(MONDAY, 10)
    make_booking(tenant, start)
    make_booking(tenant, start, status="cancelled")
    make_booking(tenant, start, status="completed")
    make_booking(tenant, start, status="no_show")
    assert stored_at(start) == [
        (tenant.sub_account_id, status)
        for status in ("cancelled", "completed", "no_show", "pending")
    ]


def test_other_sub_accounts_may_overlap(tenants, tenant):
    other = tenants.create()
    start = ny(MONDAY, 10)
    make_booking(tenant, start)
    make_booking(other, start)
    assert stored_at(start) == sorted(
        [(tenant.sub_account_id, "pending"), (other.sub_account_id, "pending")]
    )


def test_a_constraint_violation_is_the_same_400_conflict(client, tenant, monkeypatch):
    make_booking(tenant, ny(MONDAY, 10))
    # Blind the check, as a bug or a forgotten lock would: only the constraint is left.
    monkeypatch.setattr(time_claims, "load_busy", lambda *args, **kwargs: BusyTime([], [], []))
    payload = {
        "startTime": z(ny(MONDAY, 10)),
        "endTime": z(ny(MONDAY, 10) + timedelta(minutes=30)),
        "attendees": [{"email": "pat@example.test"}],
    }
    url = f"/v1/api/calendar/event-types/{tenant.event_types['Cleaning']}/bookings"
    response = client.post(url, json=payload, headers=tenant.headers())
    assert response.status_code == 400
    assert response.json == {
        "statusCode": 400,
        "message": "Time slot conflicts with an existing booking",
        "code": "slot_taken",
        "suggestedSlots": [],
    }
