"""Slot holds: POST/DELETE /calendar/event-types/:id/holds, and what a hold does to
availability and to other writes."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
import time_machine
from sqlalchemy import func, select

from app.extensions import db
from app.models import SlotHold
from app.services.bookings.holds import purge_expired_holds
from tests.factories import book_through_api, hold_through_api, make_booking, next_monday, ny, z

pytestmark = pytest.mark.date_sensitive  # holds on next Monday, in New York time

MONDAY = next_monday()
TEN = ny(MONDAY, 10)
AVAILABILITY = "/v1/api/calendar/availability"
# A key of the same sub account, also allowed to book, that is not the holder's.
OTHER_KEY = "without-canCancel"


def read_instant(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def release(client, tenant, hold_id, event_type="Cleaning", key="all"):
    url = f"/v1/api/calendar/event-types/{tenant.event_types[event_type]}/holds/{hold_id}"
    return client.delete(url, headers=tenant.headers(key))


def open_starts(client, tenant, key="all"):
    response = client.get(
        f"{AVAILABILITY}?startDate={MONDAY}&endDate={MONDAY}"
        f"&eventTypeId={tenant.event_types['Cleaning']}",
        headers=tenant.headers(key),
    )
    assert response.status_code == 200, response.json
    return [slot["start"] for slot in response.json[0]["slots"]]


def assert_refused(response, code, message):
    assert response.status_code == 400, response.json
    assert response.json["code"] == code
    assert response.json["message"] == message
    assert isinstance(response.json["suggestedSlots"], list)


def held(client, tenant, start=TEN, **fields):
    response = hold_through_api(client, tenant, start, **fields)
    assert response.status_code == 201, response.json
    return response.json


def test_a_hold_is_201_with_its_time_expiry_and_token(client, tenant):
    before = datetime.now(UTC)
    hold = held(client, tenant)
    assert set(hold) == {"id", "eventTypeId", "startTime", "endTime", "expiresAt", "holdToken"}
    assert hold["eventTypeId"] == tenant.event_types["Cleaning"]
    assert (hold["startTime"], hold["endTime"]) == (z(TEN), z(TEN + timedelta(minutes=30)))
    assert hold["holdToken"].startswith("hold_") and len(hold["holdToken"]) > 30
    expires = read_instant(hold["expiresAt"])
    assert before + timedelta(seconds=120) <= expires <= before + timedelta(seconds=122)


def test_ttl_seconds_sets_the_expiry(client, tenant):
    before = datetime.now(UTC)
    expires = read_instant(held(client, tenant, ttlSeconds=600)["expiresAt"])
    assert before + timedelta(seconds=600) <= expires <= before + timedelta(seconds=602)


@pytest.mark.parametrize("ttl", [0, -5, 601, "soon"])
def test_ttl_outside_one_to_600_seconds_is_400(client, tenant, ttl):
    response = hold_through_api(client, tenant, TEN, ttlSeconds=ttl)
    assert response.status_code == 400
    assert response.json["code"] == "invalid_request"
    assert "ttlSeconds" in response.json["errors"]
    assert "suggestedSlots" not in response.json


def test_holding_needs_can_book(client, tenant):
    response = hold_through_api(client, tenant, TEN, key="without-canBook")
    assert response.status_code == 403
    assert response.json["message"] == "API key does not have 'canBook' permission"
    assert response.json["code"] == "permission_denied"


def test_releasing_needs_can_book(client, tenant):
    hold = held(client, tenant)
    response = release(client, tenant, hold["id"], key="without-canBook")
    assert response.status_code == 403
    assert response.json["message"] == "API key does not have 'canBook' permission"


def test_a_held_slot_is_hidden_from_availability(client, tenant):
    assert z(TEN) in open_starts(client, tenant)
    held(client, tenant)
    assert z(TEN) not in open_starts(client, tenant)
    assert z(TEN) not in open_starts(client, tenant, key=OTHER_KEY)
    # Held as a booking would occupy it: Cleaning's 10 minutes after are held too.
    starts = open_starts(client, tenant)
    assert z(ny(MONDAY, 10, 30)) not in starts and z(ny(MONDAY, 11)) in starts


def test_a_held_slot_is_refused_to_other_creates_with_slot_held(client, tenant):
    held(client, tenant)
    response = book_through_api(client, tenant, TEN, key=OTHER_KEY)
    assert_refused(response, "slot_held", "Time slot is held for another booking")
    assert z(TEN) not in [s["start"] for s in response.json["suggestedSlots"]]


def test_a_held_slot_is_refused_to_other_holds_with_slot_held(client, tenant):
    held(client, tenant)
    overlapping = hold_through_api(client, tenant, ny(MONDAY, 10, 15), key=OTHER_KEY)
    assert_refused(overlapping, "slot_held", "Time slot is held for another booking")


def test_the_holders_create_with_the_token_takes_the_held_time_once(client, tenant):
    hold = held(client, tenant)
    first = book_through_api(client, tenant, TEN, holdToken=hold["holdToken"])
    assert first.status_code == 201, first.json
    again = book_through_api(client, tenant, TEN, holdToken=hold["holdToken"])
    assert_refused(again, "slot_taken", "Time slot conflicts with an existing booking")
    assert release(client, tenant, hold["id"]).status_code == 404  # consumed
    assert db.session.scalar(select(func.count()).select_from(SlotHold)) == 0


def test_a_retried_create_with_the_token_and_an_idempotency_key_replays(client, tenant):
    hold = held(client, tenant)
    fields = {"holdToken": hold["holdToken"], "idempotencyKey": "call-42"}
    first = book_through_api(client, tenant, TEN, **fields)
    again = book_through_api(client, tenant, TEN, **fields)
    assert (first.status_code, again.status_code) == (201, 201)
    assert again.headers["Idempotent-Replayed"] == "true"
    assert again.json["id"] == first.json["id"]


def test_another_event_types_token_holds_nothing(client, tenant):
    hold = held(client, tenant)
    url = f"/v1/api/calendar/event-types/{tenant.event_types['Checkup']}/bookings"
    payload = {
        "startTime": z(TEN),
        "endTime": z(TEN + timedelta(minutes=30)),
        "attendees": [{"email": "pat@example.test"}],
        "holdToken": hold["holdToken"],
    }
    response = client.post(url, json=payload, headers=tenant.headers())
    assert_refused(response, "slot_held", "Time slot is held for another booking")


def test_an_unknown_token_holds_nothing_and_a_free_time_is_booked(client, tenant):
    response = book_through_api(client, tenant, TEN, holdToken="hold_never-issued")
    assert response.status_code == 201, response.json


def test_a_move_with_the_token_takes_the_held_time(client, tenant):
    booking = book_through_api(client, tenant, ny(MONDAY, 9)).json
    hold = held(client, tenant, ny(MONDAY, 14))
    url = f"/v1/api/calendar/event-types/{tenant.event_types['Cleaning']}/bookings/{booking['id']}"
    blocked = client.put(url, json={"startTime": z(ny(MONDAY, 14))}, headers=tenant.headers())
    assert_refused(blocked, "slot_held", "Time slot is held for another booking")
    moved = client.put(
        url,
        json={"startTime": z(ny(MONDAY, 14)), "holdToken": hold["holdToken"]},
        headers=tenant.headers(),
    )
    assert moved.status_code == 200, moved.json
    assert moved.json["startTime"] == z(ny(MONDAY, 14))
    assert release(client, tenant, hold["id"]).status_code == 404  # consumed


def test_an_expired_hold_frees_the_slot_at_its_expiry(client, tenant):
    hold = held(client, tenant, ttlSeconds=30)
    expires = read_instant(hold["expiresAt"])
    with time_machine.travel(expires - timedelta(seconds=1), tick=False):
        assert z(TEN) not in open_starts(client, tenant)
        still_held = book_through_api(client, tenant, TEN)
        assert_refused(still_held, "slot_held", "Time slot is held for another booking")
    with time_machine.travel(expires, tick=False):
        assert z(TEN) in open_starts(client, tenant)
        assert book_through_api(client, tenant, TEN).status_code == 201


def test_an_expired_holds_token_still_books_a_free_slot(client, tenant):
    hold = held(client, tenant, ttlSeconds=5)
    with time_machine.travel(read_instant(hold["expiresAt"]) + timedelta(seconds=1)):
        response = book_through_api(client, tenant, TEN, holdToken=hold["holdToken"])
        assert response.status_code == 201, response.json


def test_a_write_over_an_expired_hold_deletes_its_row(client, tenant):
    hold = held(client, tenant, ttlSeconds=5)
    with time_machine.travel(read_instant(hold["expiresAt"]) + timedelta(seconds=1)):
        assert book_through_api(client, tenant, TEN).status_code == 201
    assert db.session.scalar(select(func.count()).select_from(SlotHold)) == 0


def test_release_frees_the_slot_at_once(client, tenant):
    hold = held(client, tenant)
    response = release(client, tenant, hold["id"])
    assert response.status_code == 200
    assert response.json["id"] == hold["id"] and response.json["status"] == "released"
    assert read_instant(response.json["releasedAt"]) <= datetime.now(UTC)
    assert z(TEN) in open_starts(client, tenant)
    assert book_through_api(client, tenant, TEN).status_code == 201


def test_releasing_twice_is_404(client, tenant):
    hold = held(client, tenant)
    release(client, tenant, hold["id"])
    response = release(client, tenant, hold["id"])
    assert response.status_code == 404
    assert response.json == {"statusCode": 404, "message": "Hold not found", "code": "not_found"}


def test_releasing_through_another_event_type_is_404(client, tenant):
    hold = held(client, tenant)
    assert release(client, tenant, hold["id"], event_type="Checkup").status_code == 404
    assert z(TEN) not in open_starts(client, tenant)


def test_another_sub_accounts_hold_cannot_be_released_and_does_not_block(client, tenants, tenant):
    other = tenants.create()
    hold = held(client, other)
    response = client.delete(
        f"/v1/api/calendar/event-types/{tenant.event_types['Cleaning']}/holds/{hold['id']}",
        headers=tenant.headers(),
    )
    assert response.status_code == 404
    assert book_through_api(client, tenant, TEN).status_code == 201


def test_an_expired_hold_cannot_be_released(client, tenant):
    hold = held(client, tenant, ttlSeconds=5)
    with time_machine.travel(read_instant(hold["expiresAt"])):
        assert release(client, tenant, hold["id"]).status_code == 404


def test_hold_ids_are_never_reused(client, tenant):
    first = held(client, tenant)
    release(client, tenant, first["id"])
    assert held(client, tenant)["id"] > first["id"]


def test_a_hold_over_a_booking_is_refused_with_slot_taken(client, tenant):
    make_booking(tenant, TEN)
    assert_refused(
        hold_through_api(client, tenant, TEN),
        "slot_taken",
        "Time slot conflicts with an existing booking",
    )


def test_a_hold_outside_working_hours_is_refused_with_suggestions(client, tenant):
    response = hold_through_api(client, tenant, ny(MONDAY, 18))
    assert_refused(response, "outside_hours", "Time slot is outside available hours")
    assert response.json["suggestedSlots"][0] == {
        "start": z(ny(MONDAY, 16, 30)),
        "end": z(ny(MONDAY, 17)),
    }


def test_holds_count_against_the_keys_rate_limit(client, tenant):
    first = hold_through_api(client, tenant, TEN)
    second = hold_through_api(client, tenant, ny(MONDAY, 11))
    assert first.headers["X-RateLimit-Limit"] == "60"
    remaining = [int(r.headers["X-RateLimit-Remaining"]) for r in (first, second)]
    assert remaining[1] == remaining[0] - 1


def test_purge_deletes_only_expired_holds(client, tenant):
    expiring = held(client, tenant, ttlSeconds=5)
    lasting = held(client, tenant, ny(MONDAY, 11), ttlSeconds=600)
    purged = purge_expired_holds(read_instant(expiring["expiresAt"]))
    db.session.commit()
    assert purged == 1
    assert db.session.scalars(select(SlotHold.id)).all() == [lasting["id"]]
