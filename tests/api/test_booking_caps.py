"""Caps: at most K bookings and/or M minutes a day, week or month, per event type and for the
whole calendar, in availability and on every write."""

from __future__ import annotations

from datetime import timedelta

import pytest

from app.extensions import db
from app.models import CalendarSettings, EventType
from tests.factories import availability_through_api, book_through_api, next_monday, ny, z

pytestmark = pytest.mark.date_sensitive  # bookings on next Monday, in New York time

MONDAY = next_monday()
TUESDAY, WEDNESDAY = MONDAY + timedelta(days=1), MONDAY + timedelta(days=2)
BOOKINGS = "/v1/api/calendar/event-types/{}/bookings"


def cap_event_type(tenant, name: str, limits: dict) -> None:
    db.session.get(EventType, tenant.event_types[name]).booking_limits = limits
    db.session.commit()


def cap_calendar(tenant, limits: dict) -> None:
    db.session.get(CalendarSettings, tenant.sub_account_id).booking_limits = limits
    db.session.commit()


def open_on(client, tenant, day) -> list[str]:
    (shown,) = availability_through_api(client, tenant, day).json
    return [slot["start"] for slot in shown["slots"]]


def booked(client, tenant, start, **fields):
    response = book_through_api(client, tenant, start, **fields)
    assert response.status_code == 201, response.json
    return response.json


def test_a_daily_cap_closes_the_day_after_the_third_booking(client, tenant):
    cap_event_type(tenant, "Cleaning", {"perDay": {"count": 3}})
    for hour in (10, 11, 12):
        booked(client, tenant, ny(MONDAY, hour))
    assert open_on(client, tenant, MONDAY) == []
    assert open_on(client, tenant, TUESDAY)  # the next day is open
    refused = book_through_api(client, tenant, ny(MONDAY, 14))
    assert refused.status_code == 400
    assert refused.json["code"] == "limit_reached"
    assert refused.json["message"] == "Limit of 3 bookings a day reached for this event type"
    suggested = refused.json["suggestedSlots"]
    assert suggested and all(not s["start"].startswith(str(MONDAY)) for s in suggested)


def test_a_cancelled_booking_frees_its_place_under_the_cap(client, tenant):
    cap_event_type(tenant, "Cleaning", {"perDay": {"count": 1}})
    first = booked(client, tenant, ny(MONDAY, 10))
    assert open_on(client, tenant, MONDAY) == []
    client.delete(f"/v1/api/calendar/bookings/{first['id']}", headers=tenant.headers())
    assert z(ny(MONDAY, 14)) in open_on(client, tenant, MONDAY)
    booked(client, tenant, ny(MONDAY, 14))


def test_a_weekly_minutes_cap_counts_the_bookings_lengths(client, tenant):
    cap_calendar(tenant, {"perWeek": {"minutes": 60}})
    booked(client, tenant, ny(MONDAY, 10))
    assert open_on(client, tenant, WEDNESDAY)  # 30 of 60 minutes
    booked(client, tenant, ny(MONDAY, 11))
    assert open_on(client, tenant, WEDNESDAY) == []  # the week is full
    assert open_on(client, tenant, MONDAY + timedelta(days=7))  # the next week is not
    refused = book_through_api(client, tenant, ny(WEDNESDAY, 10))
    assert (
        refused.json["message"] == "Limit of 60 minutes of bookings a week reached for the calendar"
    )


def test_the_calendars_cap_counts_every_event_type(client, tenant):
    cap_calendar(tenant, {"perDay": {"count": 1}})
    checkup = BOOKINGS.format(tenant.event_types["Checkup"])
    made = client.post(
        checkup,
        json={
            "startTime": z(ny(MONDAY, 10)),
            "endTime": z(ny(MONDAY, 11)),
            "attendees": [{"email": "sam@example.test"}],
        },
        headers=tenant.headers(),
    )
    assert made.status_code == 201
    assert open_on(client, tenant, MONDAY) == []  # no Cleaning either
    assert book_through_api(client, tenant, ny(MONDAY, 14)).json["code"] == "limit_reached"


def test_an_event_types_cap_does_not_count_another_types_bookings(client, tenant):
    cap_event_type(tenant, "Cleaning", {"perDay": {"count": 1}})
    client.post(
        BOOKINGS.format(tenant.event_types["Checkup"]),
        json={
            "startTime": z(ny(MONDAY, 10)),
            "endTime": z(ny(MONDAY, 11)),
            "attendees": [{"email": "sam@example.test"}],
        },
        headers=tenant.headers(),
    )
    booked(client, tenant, ny(MONDAY, 14))


def test_moving_a_booking_within_its_full_day_is_not_counted_twice(client, tenant):
    cap_event_type(tenant, "Cleaning", {"perDay": {"count": 1}})
    made = booked(client, tenant, ny(MONDAY, 10))
    moved = client.put(
        f"{BOOKINGS.format(tenant.event_types['Cleaning'])}/{made['id']}",
        json={"startTime": z(ny(MONDAY, 14))},
        headers=tenant.headers(),
    )
    assert moved.status_code == 200, moved.json
    other = booked(client, tenant, ny(TUESDAY, 10))
    onto_full_day = client.put(
        f"{BOOKINGS.format(tenant.event_types['Cleaning'])}/{other['id']}",
        json={"startTime": z(ny(MONDAY, 15))},
        headers=tenant.headers(),
    )
    assert onto_full_day.json["code"] == "limit_reached"


def test_a_monthly_cap_is_kept_by_the_calendar_month(client, tenant):
    cap_event_type(tenant, "Cleaning", {"perMonth": {"count": 1}})
    # Another weekday of Monday's month (Monday is at least a week ahead, so the Friday before
    # is in the future too), and the first weekday of the next month.
    same_month = next(
        MONDAY + timedelta(days=d)
        for d in (1, 2, 3, 4, -3, -4, -5, -6)
        if (MONDAY + timedelta(days=d)).month == MONDAY.month
    )
    next_month = (MONDAY.replace(day=28) + timedelta(days=4)).replace(day=1)
    while next_month.weekday() > 4:
        next_month += timedelta(days=1)
    booked(client, tenant, ny(MONDAY, 10))
    assert open_on(client, tenant, same_month) == []
    assert book_through_api(client, tenant, ny(same_month, 10)).json["code"] == "limit_reached"
    assert open_on(client, tenant, next_month)
