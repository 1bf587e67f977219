"""PostgreSQL lets the seats of one group share their time and nothing else, even behind the
application's back (migration 0023); the seat indexes are tests/api/test_seats.py's."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy.exc import IntegrityError

from app.extensions import db
from app.models import EventType, SlotHold
from app.scheduling.intervals import Interval
from app.scheduling.seats import seat_group
from app.services.bookings import holds as holds_service
from app.services.bookings import time_claims
from app.services.scheduling_inputs import BusyTime
from tests.factories import make_booking, next_monday, ny, z

MONDAY = next_monday()
TEN = ny(MONDAY, 10)

pytestmark = pytest.mark.date_sensitive  # bookings on next Monday


def group_at(tenant, start=TEN) -> str:
    return seat_group(
        tenant.event_types["Cleaning"], Interval(start, start + timedelta(minutes=30))
    )


def seat(tenant, number: int, start=TEN, count: int = 5) -> dict:
    return {"seat_group": group_at(tenant, start), "seat_number": number, "seat_count": count}


def refused_constraint(error: IntegrityError) -> tuple[str, str]:
    return error.orig.sqlstate, error.orig.diag.constraint_name


def test_seats_of_one_group_share_their_time(tenant):
    for number in (1, 2, 3):
        make_booking(tenant, TEN, **seat(tenant, number))


def test_an_unseated_booking_cannot_be_stored_over_a_group(tenant):
    make_booking(tenant, TEN, **seat(tenant, 1))
    with pytest.raises(IntegrityError) as refused:
        make_booking(tenant, TEN)
    assert refused_constraint(refused.value) == ("23P01", "ex_bookings_no_overlap")
    db.session.rollback()


def test_a_seat_of_another_group_cannot_overlap(tenant):
    make_booking(tenant, TEN, **seat(tenant, 1))
    later = ny(MONDAY, 10, 15)
    with pytest.raises(IntegrityError) as refused:
        make_booking(tenant, later, **seat(tenant, 1, start=later))
    assert refused_constraint(refused.value) == ("23P01", "ex_bookings_no_overlap")
    db.session.rollback()


def store_held_seat(tenant, number: int) -> SlotHold:
    hold = SlotHold(
        sub_account_id=tenant.sub_account_id,
        event_type_id=tenant.event_types["Cleaning"],
        start_at=TEN,
        end_at=TEN + timedelta(minutes=30),
        occupied_start=TEN,
        occupied_end=TEN + timedelta(minutes=40),
        expires_at=datetime.now(UTC) + timedelta(minutes=2),
        token_digest=holds_service.token_digest(f"hold_seat_{number}"),
        timezone="America/New_York",
        **seat(tenant, number),
    )
    db.session.add(hold)
    db.session.commit()
    return hold


def test_a_held_seat_and_a_booked_seat_of_one_group_share_their_time(tenant):
    make_booking(tenant, TEN, **seat(tenant, 1))
    store_held_seat(tenant, 2)
    store_held_seat(tenant, 3)


def test_a_hold_cannot_take_a_booked_seat(tenant):
    make_booking(tenant, TEN, **seat(tenant, 1))
    with pytest.raises(IntegrityError) as refused:
        store_held_seat(tenant, 1)
    assert refused_constraint(refused.value) == ("23P01", "ex_slot_holds_no_booking_overlap")
    db.session.rollback()


def test_a_booking_cannot_take_a_held_seat(tenant):
    store_held_seat(tenant, 2)
    with pytest.raises(IntegrityError) as refused:
        make_booking(tenant, TEN, **seat(tenant, 2))
    assert refused_constraint(refused.value) == ("23P01", "ex_bookings_no_hold_overlap")
    db.session.rollback()


def test_a_seat_taken_twice_is_the_same_400_seats_full(client, tenant, monkeypatch):
    cleaning = tenant.event_types["Cleaning"]
    db.session.get(EventType, cleaning).seats = 5
    db.session.commit()
    make_booking(tenant, TEN, **seat(tenant, 1))
    # Blind the check and the count, as a bug or a forgotten lock would: only the index is left.
    monkeypatch.setattr(time_claims, "load_busy", lambda *args, **kwargs: BusyTime([], [], []))
    monkeypatch.setattr(time_claims, "seat_numbers_taken", lambda *args, **kwargs: [])
    payload = {
        "startTime": z(TEN),
        "endTime": z(TEN + timedelta(minutes=30)),
        "attendees": [{"email": "pat@example.test"}],
    }
    response = client.post(
        f"/v1/api/calendar/event-types/{cleaning}/bookings", json=payload, headers=tenant.headers()
    )
    assert response.status_code == 400
    assert response.json["code"] == "seats_full"
    assert response.json["suggestedSlots"] == []
