"""Seats: an event type whose slots take up to N bookings (a class, a webinar), in
availability, on every write, and in the database's own rules."""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlalchemy import select
from sqlalchemy.exc import IntegrityError

from app.extensions import db
from app.models import Booking, EventType
from tests.factories import (
    availability_through_api,
    book_through_api,
    hold_through_api,
    next_monday,
    ny,
    z,
)

pytestmark = pytest.mark.date_sensitive  # bookings on next Monday, in New York time

MONDAY = next_monday()
BOOKINGS = "/v1/api/calendar/event-types/{}/bookings"
CLASS_AT = ny(MONDAY, 10)


def seat_cleaning(tenant, seats: int) -> None:
    db.session.get(EventType, tenant.event_types["Cleaning"]).seats = seats
    db.session.commit()


def slots_on(client, tenant) -> dict[str, dict]:
    (shown,) = availability_through_api(client, tenant, MONDAY).json
    return {slot["start"]: slot for slot in shown["slots"]}


def seat_taken(client, tenant, start=CLASS_AT, email="pat@example.test"):
    response = book_through_api(client, tenant, start, attendees=[{"email": email}])
    assert response.status_code == 201, response.json
    return response.json


def test_a_seated_slot_stays_open_while_seats_remain_and_says_how_many(client, tenant):
    seat_cleaning(tenant, 3)
    assert slots_on(client, tenant)[z(CLASS_AT)]["seatsRemaining"] == 3
    seat_taken(client, tenant, email="a@example.test")
    assert slots_on(client, tenant)[z(CLASS_AT)]["seatsRemaining"] == 2
    seat_taken(client, tenant, email="b@example.test")
    assert slots_on(client, tenant)[z(CLASS_AT)]["seatsRemaining"] == 1
    seat_taken(client, tenant, email="c@example.test")
    assert z(CLASS_AT) not in slots_on(client, tenant)


def test_a_full_slot_refuses_with_seats_full_and_suggestions(client, tenant):
    seat_cleaning(tenant, 2)
    seat_taken(client, tenant, email="a@example.test")
    seat_taken(client, tenant, email="b@example.test")
    refused = book_through_api(client, tenant, CLASS_AT, attendees=[{"email": "c@example.test"}])
    assert refused.status_code == 400
    assert refused.json["code"] == "seats_full"
    assert refused.json["message"] == "All 2 seats of this slot are taken"
    suggested = [slot["start"] for slot in refused.json["suggestedSlots"]]
    assert suggested and z(CLASS_AT) not in suggested


def test_each_seat_is_a_booking_with_its_own_attendee_and_manage_link(client, tenant):
    seat_cleaning(tenant, 5)
    first = seat_taken(client, tenant, email="a@example.test")
    second = seat_taken(client, tenant, email="b@example.test")
    assert first["id"] != second["id"]
    assert [a["email"] for a in first["attendees"]] == ["a@example.test"]
    assert first["attendees"][0]["manageUrl"] != second["attendees"][0]["manageUrl"]
    numbers = db.session.scalars(select(Booking.seat_number).order_by(Booking.id)).all()
    assert numbers == [1, 2]


def test_a_seated_slot_blocks_the_other_slots_of_its_type_it_meets(client, tenant):
    seat_cleaning(tenant, 5)
    seat_taken(client, tenant)
    open_now = slots_on(client, tenant)
    # Cleaning has a 10-minute buffer after: 9:30 would run into the class, 10:30 too.
    assert z(ny(MONDAY, 9, 30)) not in open_now
    assert z(ny(MONDAY, 10, 30)) not in open_now
    assert z(ny(MONDAY, 11)) in open_now
    refused = book_through_api(client, tenant, ny(MONDAY, 10, 20))
    assert refused.status_code == 400
    assert refused.json["code"] == "slot_taken"


def test_a_seated_slot_blocks_every_other_event_types_time(client, tenant):
    seat_cleaning(tenant, 5)
    seat_taken(client, tenant)
    payload = {
        "startTime": z(CLASS_AT),
        "endTime": z(CLASS_AT + timedelta(hours=1)),
        "attendees": [{"email": "sam@example.test"}],
    }
    refused = client.post(
        BOOKINGS.format(tenant.event_types["Checkup"]), json=payload, headers=tenant.headers()
    )
    assert refused.status_code == 400
    assert refused.json["code"] == "slot_taken"


def test_cancelling_one_seat_frees_one_seat(client, tenant):
    seat_cleaning(tenant, 2)
    first = seat_taken(client, tenant, email="a@example.test")
    seat_taken(client, tenant, email="b@example.test")
    assert z(CLASS_AT) not in slots_on(client, tenant)
    cancelled = client.delete(f"/v1/api/calendar/bookings/{first['id']}", headers=tenant.headers())
    assert cancelled.status_code == 200
    assert slots_on(client, tenant)[z(CLASS_AT)]["seatsRemaining"] == 1
    again = seat_taken(client, tenant, email="c@example.test")
    assert db.session.get(Booking, again["id"]).seat_number == 1  # the freed seat


def test_a_reschedule_moves_one_seat_not_the_group(client, tenant):
    seat_cleaning(tenant, 3)
    moving = seat_taken(client, tenant, email="a@example.test")
    staying = seat_taken(client, tenant, email="b@example.test")
    later = ny(MONDAY, 14)
    moved = client.put(
        f"{BOOKINGS.format(tenant.event_types['Cleaning'])}/{moving['id']}",
        json={"startTime": z(later), "endTime": z(later + timedelta(minutes=30))},
        headers=tenant.headers(),
    )
    assert moved.status_code == 200, moved.json
    assert moved.json["startTime"] == z(later)
    assert db.session.get(Booking, staying["id"]).start_at == CLASS_AT
    open_now = slots_on(client, tenant)
    assert open_now[z(CLASS_AT)]["seatsRemaining"] == 2
    assert open_now[z(later)]["seatsRemaining"] == 2


def test_a_hold_takes_a_seat_and_its_token_books_it(client, tenant):
    seat_cleaning(tenant, 2)
    seat_taken(client, tenant, email="a@example.test")
    hold = hold_through_api(client, tenant, CLASS_AT)
    assert hold.status_code == 201, hold.json
    assert z(CLASS_AT) not in slots_on(client, tenant)  # one booked, one held
    refused = book_through_api(client, tenant, CLASS_AT, attendees=[{"email": "c@example.test"}])
    assert refused.json["code"] == "seats_full"
    with_token = book_through_api(
        client,
        tenant,
        CLASS_AT,
        attendees=[{"email": "b@example.test"}],
        holdToken=hold.json["holdToken"],
    )
    assert with_token.status_code == 201, with_token.json


def test_a_held_seat_leaves_the_others_open(client, tenant):
    seat_cleaning(tenant, 3)
    assert hold_through_api(client, tenant, CLASS_AT).status_code == 201
    open_now = slots_on(client, tenant)
    assert open_now[z(CLASS_AT)]["seatsRemaining"] == 2
    assert z(ny(MONDAY, 10, 30)) not in open_now  # the held seat's time is still busy
    seat_taken(client, tenant)
    assert slots_on(client, tenant)[z(CLASS_AT)]["seatsRemaining"] == 1


def test_unseated_event_types_show_no_seats(client, tenant):
    open_now = slots_on(client, tenant)
    assert open_now and all("seatsRemaining" not in slot for slot in open_now.values())


def _copy_seat(booking: Booking, **changes) -> Booking:
    fields = {
        name: getattr(booking, name)
        for name in (
            "sub_account_id",
            "event_type_id",
            "status",
            "title",
            "timezone",
            "start_at",
            "end_at",
            "occupied_start",
            "occupied_end",
            "seat_group",
            "seat_number",
            "seat_count",
        )
    }
    return Booking(uid=f"copy-{changes.get('seat_number')}", **{**fields, **changes})


def test_the_database_keeps_each_seat_of_a_group_once(client, tenant):
    seat_cleaning(tenant, 2)
    first = db.session.get(Booking, seat_taken(client, tenant)["id"])
    db.session.add(_copy_seat(first))  # the same seat number again
    with pytest.raises(IntegrityError):
        db.session.commit()
    db.session.rollback()


def test_the_database_keeps_a_seat_number_within_the_seats(client, tenant):
    seat_cleaning(tenant, 2)
    first = db.session.get(Booking, seat_taken(client, tenant)["id"])
    db.session.add(_copy_seat(first, seat_number=3))
    with pytest.raises(IntegrityError):
        db.session.commit()
    db.session.rollback()
