"""Bookings finish by themselves: confirmed ones whose end has passed become completed, in the
calendars whose autoCompleteBookings setting asks for it."""

from __future__ import annotations

from datetime import timedelta

import pytest

from app.extensions import db
from app.models import Booking
from app.models.types import utcnow
from app.services.bookings.lifecycle import complete_finished_bookings
from app.services.integrations.events import subscribe, unsubscribe
from tests.factories import make_booking

AUTO = {"defaultDuration": 30, "bookingHorizonDays": 60, "autoCompleteBookings": True}


@pytest.fixture
def now():
    return utcnow().replace(microsecond=0)


@pytest.fixture
def auto_tenant(tenants):
    return tenants.create(settings=AUTO)


def run(now):
    ids = complete_finished_bookings(now)
    db.session.commit()
    return ids


def status(booking_id):
    db.session.expire_all()
    return db.session.get(Booking, booking_id)


def test_a_finished_confirmed_booking_is_completed(auto_tenant, now):
    booking = make_booking(auto_tenant, now - timedelta(hours=2), status="confirmed")
    assert run(now) == [booking.id]
    stored = status(booking.id)
    assert (stored.status, stored.completed_at) == ("completed", now)


def test_a_booking_still_running_is_left_confirmed(auto_tenant, now):
    booking = make_booking(auto_tenant, now - timedelta(minutes=10), status="confirmed")
    assert run(now) == []
    assert status(booking.id).status == "confirmed"


def test_a_booking_ending_this_second_is_completed(auto_tenant, now):
    booking = make_booking(auto_tenant, now - timedelta(minutes=30), status="confirmed")
    assert run(now) == [booking.id]


def test_pending_bookings_are_left_pending(auto_tenant, now):
    booking = make_booking(auto_tenant, now - timedelta(hours=2), status="pending")
    assert run(now) == []
    assert status(booking.id).status == "pending"


def test_calendars_without_the_setting_are_left_alone(tenant, now):
    booking = make_booking(tenant, now - timedelta(hours=2), status="confirmed")
    assert run(now) == []
    assert status(booking.id).status == "confirmed"


def test_a_second_run_completes_nothing_more(auto_tenant, now):
    make_booking(auto_tenant, now - timedelta(hours=2), status="confirmed")
    run(now)
    assert run(now) == []


def test_completion_emits_booking_completed(auto_tenant, now):
    booking = make_booking(auto_tenant, now - timedelta(hours=2), status="confirmed")
    received = []
    subscribe(received.append)
    try:
        run(now)
    finally:
        unsubscribe(received.append)
    assert [(e.kind, e.booking_id) for e in received] == [("booking.completed", booking.id)]
