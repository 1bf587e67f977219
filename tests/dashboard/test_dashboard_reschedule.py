"""Rescheduling from a booking's page: the open slots of a week for its event type and length,
and a move through the same update service and conflict rule as the API."""

from __future__ import annotations

import pytest

from app.extensions import db
from app.models import Booking, OutboxEvent
from tests.dashboard_users import csrf_token, owner_email, sign_in
from tests.factories import make_booking, next_monday, ny

pytestmark = pytest.mark.date_sensitive  # bookings on next Monday, in New York time

MONDAY = next_monday()


@pytest.fixture(autouse=True)
def owner(client, tenant):
    sign_in(client, owner_email(tenant))


def page(tenant, booking, **query) -> str:
    url = f"/dashboard/s/{tenant.sub_account_id}/bookings/{booking.id}/reschedule"
    return url + ("?" + "&".join(f"{k}={v}" for k, v in query.items()) if query else "")


def move(client, tenant, booking, start):
    return client.post(
        page(tenant, booking),
        data={"start": start, "csrf_token": csrf_token(client, page(tenant, booking))},
    )


def test_the_week_of_open_slots_is_shown_in_the_sub_accounts_timezone(client, tenant):
    booking = make_booking(tenant, ny(MONDAY, 10))
    make_booking(tenant, ny(MONDAY, 12), emails=("sam@example.test",))
    body = client.get(page(tenant, booking)).get_data(as_text=True)
    assert "Times in America/New_York" in body
    monday = body[body.index(f"Monday {MONDAY.day} ") :]
    monday = monday[: monday.index("</section>")]
    assert ">09:00<" in monday and ">16:30<" in monday  # steps of the 30-minute duration
    assert ">10:00<" in monday  # the booking's own time counts as free
    assert ">11:00<" in monday  # ends 11:30, its 10-minute buffer before the other booking
    for taken in (">11:30<", ">12:00<", ">12:30<"):  # the other booking and its buffer
        assert taken not in monday
    assert body.count("<section") == 7


def test_a_booking_moves_to_a_chosen_slot(client, tenant):
    booking = make_booking(tenant, ny(MONDAY, 10))
    response = move(client, tenant, booking, ny(MONDAY, 14).isoformat())
    assert response.headers["Location"].endswith(f"/bookings/{booking.id}")
    db.session.expire_all()
    moved = db.session.get(Booking, booking.id)
    assert (moved.start_at, moved.end_at) == (ny(MONDAY, 14), ny(MONDAY, 14, 30))
    assert moved.sequence == 1
    kinds = db.session.query(OutboxEvent.kind).filter_by(booking_id=booking.id).all()
    assert ("booking.rescheduled",) in kinds


def test_a_taken_slot_is_refused_with_the_apis_conflict_message(client, tenant):
    booking = make_booking(tenant, ny(MONDAY, 10))
    make_booking(tenant, ny(MONDAY, 14), emails=("sam@example.test",))
    response = move(client, tenant, booking, ny(MONDAY, 14).isoformat())
    followed = client.get(response.headers["Location"]).get_data(as_text=True)
    assert "Not moved: Time slot conflicts with an existing booking." in followed
    db.session.expire_all()
    assert db.session.get(Booking, booking.id).start_at == ny(MONDAY, 10)


@pytest.mark.parametrize("start", ["", "tomorrow", "2026-02-30T10:00:00Z", "9" * 40])
def test_a_malformed_time_is_explained_not_a_500(client, tenant, start):
    booking = make_booking(tenant, ny(MONDAY, 10))
    response = move(client, tenant, booking, start)
    assert response.status_code == 302
    assert "Not moved:" in client.get(response.headers["Location"]).get_data(as_text=True)


@pytest.mark.parametrize("day", ["nonsense", "0001-01-01", "9999-12-31", ""])
def test_any_week_asked_for_is_shown_not_a_500(client, tenant, day):
    booking = make_booking(tenant, ny(MONDAY, 10))
    assert client.get(page(tenant, booking, day=day)).status_code == 200


def test_a_move_without_the_forms_token_changes_nothing(client, tenant):
    booking = make_booking(tenant, ny(MONDAY, 10))
    client.post(page(tenant, booking), data={"start": ny(MONDAY, 14).isoformat()})
    db.session.expire_all()
    assert db.session.get(Booking, booking.id).start_at == ny(MONDAY, 10)


def test_a_cancelled_booking_offers_no_slots(client, tenant):
    booking = make_booking(tenant, ny(MONDAY, 10), status="cancelled")
    body = client.get(page(tenant, booking)).get_data(as_text=True)
    assert "A cancelled booking cannot be moved." in body
    assert 'name="start"' not in body
