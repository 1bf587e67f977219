"""No double booking and one booking per idempotency key under concurrent requests to
several real server processes."""

from __future__ import annotations

import re
import threading
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from urllib.parse import urlsplit

import httpx
import pytest
from sqlalchemy import func, select

from app.extensions import db
from app.models import Booking, CalendarSettings, EventType, OutboxEvent
from tests.factories import next_monday, ny, z
from tests.servers import post_all

pytestmark = [
    pytest.mark.date_sensitive,  # bookings on next Monday
    pytest.mark.one_shifted_clock,  # races over servers; the dates only pick the slots
]

MONDAY = next_monday()


def slot_body(start, **extra):
    return {
        "startTime": z(start),
        "endTime": z(start + timedelta(minutes=30)),
        "attendees": [{"email": "race@example.test"}],
        **extra,
    }


def bookings_in_database(tenant):
    db.session.expire_all()
    return db.session.scalars(
        select(Booking).where(Booking.sub_account_id == tenant.sub_account_id)
    ).all()


@pytest.mark.slow
def test_fifty_simultaneous_creates_for_one_slot_make_one_booking(servers, tenant):
    path = f"/v1/api/calendar/event-types/{tenant.event_types['Cleaning']}/bookings"
    # Each request has its own attendee and title, so none is a retry of another.
    requests = [
        (servers[i % 2] + path, slot_body(ny(MONDAY, 10), title=f"Request {i}")) for i in range(50)
    ]
    results = post_all(requests, tenant.headers())
    statuses = sorted(status for status, _ in results)
    assert statuses == [201] + [400] * 49, results
    assert {body["message"] for status, body in results if status == 400} == {
        "Time slot conflicts with an existing booking"
    }
    active = [b for b in bookings_in_database(tenant) if b.status in ("pending", "confirmed")]
    assert len(active) == 1


@pytest.mark.slow
def test_twenty_simultaneous_retries_with_one_key_make_one_booking(servers, tenant):
    path = f"/v1/api/calendar/event-types/{tenant.event_types['Cleaning']}/bookings"
    payload = slot_body(ny(MONDAY, 11), idempotencyKey="agent-retry-7")
    results = post_all([(servers[i % 2] + path, payload) for i in range(20)], tenant.headers())
    assert [status for status, _ in results] == [201] * 20, results
    assert len({body["id"] for _, body in results}) == 1
    assert len(bookings_in_database(tenant)) == 1


@pytest.mark.slow
def test_simultaneous_creates_for_different_slots_all_succeed(servers, tenant):
    path = f"/v1/api/calendar/event-types/{tenant.event_types['Checkup']}/bookings"
    requests = [
        (
            servers[i % 2] + path,
            {
                **slot_body(ny(MONDAY, 9) + timedelta(minutes=30 * i)),
                "endTime": z(ny(MONDAY, 9) + timedelta(minutes=30 * i + 30)),
            },
        )
        for i in range(16)
    ]
    results = post_all(requests, tenant.headers())
    assert [status for status, _ in results] == [201] * 16, results
    assert db.session.scalar(select(func.count()).select_from(Booking)) == 16


@pytest.mark.slow
def test_a_daily_cap_of_three_takes_exactly_three_of_twelve_simultaneous_creates(servers, tenant):
    checkup = db.session.get(EventType, tenant.event_types["Checkup"])
    checkup.booking_limits = {"perDay": {"count": 3}}
    db.session.commit()
    path = f"/v1/api/calendar/event-types/{checkup.id}/bookings"
    requests = [  # twelve different free slots of one day: only the cap can refuse them
        (
            servers[i % 2] + path,
            {
                **slot_body(ny(MONDAY, 9) + timedelta(minutes=30 * i)),
                "endTime": z(ny(MONDAY, 9) + timedelta(minutes=30 * i + 30)),
            },
        )
        for i in range(12)
    ]
    results = post_all(requests, tenant.headers())
    assert sorted(status for status, _ in results) == [201] * 3 + [400] * 9, results
    assert {body["code"] for status, body in results if status == 400} == {"limit_reached"}
    assert len(bookings_in_database(tenant)) == 3


@pytest.mark.slow
def test_a_five_seat_class_takes_exactly_five_of_twelve_simultaneous_creates(servers, tenant):
    cleaning = db.session.get(EventType, tenant.event_types["Cleaning"])
    cleaning.seats = 5
    db.session.commit()
    path = f"/v1/api/calendar/event-types/{cleaning.id}/bookings"
    requests = [  # twelve agents, each with their own attendee, for one slot of the class
        (
            servers[i % 2] + path,
            slot_body(ny(MONDAY, 10), attendees=[{"email": f"student{i}@example.test"}]),
        )
        for i in range(12)
    ]
    results = post_all(requests, tenant.headers())
    assert sorted(status for status, _ in results) == [201] * 5 + [400] * 7, results
    assert {body["code"] for status, body in results if status == 400} == {"seats_full"}
    seats = sorted(booking.seat_number for booking in bookings_in_database(tenant))
    assert seats == [1, 2, 3, 4, 5]
    shown = servers[0] + "/v1/api/calendar/availability"
    query = {"startDate": str(MONDAY), "endDate": str(MONDAY), "eventTypeId": cleaning.id}
    (day,) = httpx.get(shown, params=query, headers=tenant.headers()).json()
    assert z(ny(MONDAY, 10)) not in [slot["start"] for slot in day["slots"]]


CONFIRM_FIELDS = re.compile(r'name="(csrf_token|start|hold)" type="hidden" value="([^"]*)"')


@pytest.mark.slow
def test_simultaneous_confirmations_beyond_the_move_limit_move_the_booking_once(servers, tenant):
    db.session.get(CalendarSettings, tenant.sub_account_id).attendee_max_reschedules = 1
    db.session.commit()
    path = f"/v1/api/calendar/event-types/{tenant.event_types['Cleaning']}/bookings"
    created = httpx.post(
        servers[0] + path, json=slot_body(ny(MONDAY, 9)), headers=tenant.headers(), timeout=30
    )
    assert created.status_code == 201, created.text
    link = urlsplit(created.json()["attendees"][0]["manageUrl"]).path
    # Six browsers each choose a time (each choice replaces the link's earlier one), then all
    # confirm at once: each saw no move yet when its page opened.
    browsers = [httpx.Client(base_url=servers[i % 2], timeout=60) for i in range(6)]
    confirmations = []
    for i, browser in enumerate(browsers):
        page = browser.get(f"{link}/reschedule").text
        token = re.search(r'name="csrf_token" type="hidden" value="([^"]*)"', page).group(1)
        start = ny(MONDAY, 11) + timedelta(hours=i)
        chosen = browser.post(f"{link}/reschedule", data={"csrf_token": token, "start": z(start)})
        assert chosen.status_code == 200, chosen.text
        confirmations.append(dict(CONFIRM_FIELDS.findall(chosen.text)))
    barrier = threading.Barrier(len(browsers))

    def confirm(pair):
        browser, fields = pair
        barrier.wait()
        return browser.post(f"{link}/reschedule/confirm", data=fields).status_code

    with ThreadPoolExecutor(max_workers=len(browsers)) as pool:
        statuses = list(pool.map(confirm, zip(browsers, confirmations, strict=True)))
    for browser in browsers:
        browser.close()
    # Back to the page, moved or saying why not; or the slots again, when a move made just
    # before took the time (409).
    assert set(statuses) <= {302, 409}, statuses
    (booking,) = bookings_in_database(tenant)
    moves = db.session.scalars(
        select(OutboxEvent).where(
            OutboxEvent.booking_id == booking.id, OutboxEvent.kind == "booking.rescheduled"
        )
    ).all()
    assert (booking.attendee_moves, len(moves)) == (1, 1)
    assert booking.start_at != ny(MONDAY, 9)
