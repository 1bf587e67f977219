"""A create or move refused for its time carries ``suggestedSlots``: the nearest open slots of
the same event type and length, each of which can really be booked."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from tests.factories import (
    book_through_api,
    make_blocked_time,
    make_booking,
    next_monday,
    ny,
    z,
)

pytestmark = pytest.mark.date_sensitive  # working hours on next Monday, in New York time

MONDAY = next_monday()
TUESDAY = MONDAY + timedelta(days=1)
TEN = ny(MONDAY, 10)


def create(client, tenant, start, minutes=30, event_type="Cleaning", **fields):
    url = f"/v1/api/calendar/event-types/{tenant.event_types[event_type]}/bookings"
    payload = {
        "startTime": z(start),
        "endTime": z(start + timedelta(minutes=minutes)),
        "attendees": [{"email": "pat@example.test"}],
        **fields,
    }
    return client.post(url, json=payload, headers=tenant.headers())


def suggestions(response, code):
    assert response.status_code == 400, response.json
    assert response.json["code"] == code
    return [(s["start"], s["end"]) for s in response.json["suggestedSlots"]]


def slot(start, minutes=30):
    return (z(start), z(start + timedelta(minutes=minutes)))


def read_instant(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def assert_each_can_be_booked(client, tenant, offered, event_type="Cleaning"):
    """Book every suggestion in turn (cancelling it again, as suggestions are alternatives)."""
    for start, end in offered:
        minutes = (read_instant(end) - read_instant(start)) // timedelta(minutes=1)
        booked = create(client, tenant, read_instant(start), minutes, event_type)
        assert booked.status_code == 201, (start, booked.json)
        cancelled = client.delete(
            f"/v1/api/calendar/bookings/{booked.json['id']}", headers=tenant.headers()
        )
        assert cancelled.status_code == 200


def test_a_taken_slot_suggests_the_same_days_nearest_open_slots(client, tenant):
    make_booking(tenant, TEN)  # Cleaning: occupies 10:00-10:40 with its buffer
    offered = suggestions(create(client, tenant, TEN), "slot_taken")
    # 09:30 and 10:30 would overlap the booking with their own or its buffer.
    assert offered == [
        slot(ny(MONDAY, 9)),
        slot(ny(MONDAY, 11)),
        slot(ny(MONDAY, 11, 30)),
        slot(ny(MONDAY, 12)),
        slot(ny(MONDAY, 12, 30)),
    ]
    assert_each_can_be_booked(client, tenant, offered)


def test_suggestions_keep_the_requested_length_on_the_event_types_grid(client, tenant):
    make_booking(tenant, TEN, minutes=60, event_type="Checkup")
    offered = suggestions(create(client, tenant, TEN, 45, "Checkup"), "slot_taken")
    assert offered[:3] == [
        slot(ny(MONDAY, 9), 45),
        slot(ny(MONDAY, 11), 45),
        slot(ny(MONDAY, 12), 45),
    ]
    assert_each_can_be_booked(client, tenant, offered, "Checkup")


def test_a_full_day_suggests_the_following_days(client, tenant):
    make_blocked_time(tenant, ny(MONDAY, 8), ny(MONDAY, 18))
    offered = suggestions(create(client, tenant, TEN), "blocked_time")
    assert offered == [slot(ny(TUESDAY, 9) + timedelta(minutes=30 * i)) for i in range(5)]
    assert_each_can_be_booked(client, tenant, offered)


def test_connected_calendar_time_is_skipped(client, tenant):
    make_blocked_time(tenant, ny(MONDAY, 9), ny(MONDAY, 11, 20), source="external")
    offered = suggestions(create(client, tenant, TEN), "external_busy")
    assert offered[:3] == [
        slot(ny(MONDAY, 11, 30)),
        slot(ny(MONDAY, 12)),
        slot(ny(MONDAY, 12, 30)),
    ]
    assert_each_can_be_booked(client, tenant, offered)


def test_a_held_slot_suggests_around_the_hold(client, tenant):
    hold = client.post(
        f"/v1/api/calendar/event-types/{tenant.event_types['Cleaning']}/holds",
        json={"startTime": z(TEN), "endTime": z(TEN + timedelta(minutes=30))},
        headers=tenant.headers(),
    )
    offered = suggestions(create(client, tenant, TEN), "slot_held")
    assert offered[:2] == [slot(ny(MONDAY, 9)), slot(ny(MONDAY, 11))]
    assert hold.status_code == 201
    assert_each_can_be_booked(client, tenant, offered)


def test_outside_hours_suggests_the_nearest_slots_inside_them(client, tenant):
    offered = suggestions(create(client, tenant, ny(MONDAY, 7)), "outside_hours")
    assert offered == [slot(ny(MONDAY, 9) + timedelta(minutes=30 * i)) for i in range(5)]


def test_a_closed_day_suggests_the_next_open_days(client, tenant):
    saturday = MONDAY + timedelta(days=5)
    offered = suggestions(create(client, tenant, ny(saturday, 10)), "outside_hours")
    following_monday = MONDAY + timedelta(days=7)
    assert offered == [slot(ny(following_monday, 9) + timedelta(minutes=30 * i)) for i in range(5)]


def test_minimum_notice_suggests_only_slots_after_it(client, tenants):
    minutes_until = (ny(MONDAY, 11, 50) - datetime.now(UTC)) // timedelta(minutes=1)
    tenant = tenants.create(settings={"defaultDuration": 30, "minimumNoticeMinutes": minutes_until})
    offered = suggestions(create(client, tenant, TEN), "minimum_notice")
    assert offered == [slot(ny(MONDAY, 12) + timedelta(minutes=30 * i)) for i in range(5)]
    assert_each_can_be_booked(client, tenant, offered)


def test_beyond_the_horizon_suggests_the_last_slots_before_it(client, tenants):
    tenant = tenants.create(settings={"defaultDuration": 30, "bookingHorizonDays": 3})
    horizon = datetime.now(UTC) + timedelta(days=3)
    offered = suggestions(create(client, tenant, TEN), "beyond_horizon")
    starts = [read_instant(start) for start, _ in offered]
    assert len(starts) == 5
    assert all(start < horizon for start in starts)
    assert starts == sorted(starts, reverse=True)  # the latest first: nearest to the wish
    assert_each_can_be_booked(client, tenant, offered)


def test_a_refused_move_suggests_slots_counting_its_own_time_as_free(client, tenant):
    moving = book_through_api(client, tenant, ny(MONDAY, 9)).json
    make_booking(tenant, TEN)
    url = f"/v1/api/calendar/event-types/{tenant.event_types['Cleaning']}/bookings/{moving['id']}"
    refused = client.put(url, json={"startTime": z(TEN)}, headers=tenant.headers())
    offered = suggestions(refused, "slot_taken")
    assert offered[:2] == [slot(ny(MONDAY, 9)), slot(ny(MONDAY, 11))]
    moved = client.put(url, json={"startTime": offered[1][0]}, headers=tenant.headers())
    assert moved.status_code == 200, moved.json


def test_no_open_time_at_all_gives_an_empty_list(client, tenants):
    tenant = tenants.create(
        availabilityProfiles=[{"name": "Office", "default": True, "weeklyHours": {}}]
    )
    assert suggestions(create(client, tenant, TEN), "outside_hours") == []


@pytest.mark.parametrize(
    "change",
    [
        {"attendees": []},
        {"startTime": "tomorrow"},
        {"endTime": z(TEN - timedelta(minutes=30))},
        {"endTime": z(TEN + timedelta(hours=25))},
    ],
)
def test_errors_not_about_the_time_carry_no_suggestions(client, tenant, change):
    make_booking(tenant, TEN)
    url = f"/v1/api/calendar/event-types/{tenant.event_types['Cleaning']}/bookings"
    payload = {
        "startTime": z(TEN),
        "endTime": z(TEN + timedelta(minutes=30)),
        "attendees": [{"email": "pat@example.test"}],
        **change,
    }
    response = client.post(url, json=payload, headers=tenant.headers())
    assert response.status_code == 400
    assert "suggestedSlots" not in response.json


def test_a_reused_idempotency_key_carries_no_suggestions(client, tenant):
    book_through_api(client, tenant, TEN, idempotencyKey="k-1")
    response = book_through_api(client, tenant, TEN, idempotencyKey="k-1", title="Other")
    assert response.json["code"] == "idempotency_mismatch"
    assert "suggestedSlots" not in response.json
