"""An event type is one host's: a clinic's two dentists, each with their own event type, are
booked at the same instant; each type offers its own host's free time and refuses a time only
its own host is busy at."""

from __future__ import annotations

from datetime import timedelta

import pytest

from app.extensions import db
from app.models import Booking, EventType
from tests.factories import (
    TenantFactory,
    availability_through_api,
    next_monday,
    ny,
    provider_connection,
    z,
)

pytestmark = pytest.mark.date_sensitive  # bookings on next Monday

MONDAY = next_monday()
TEN = ny(MONDAY, 10)


# Cleaning is Dr. Kim's (the first host), Checkup Dr. Lee's; both 09:00–17:00 on weekdays.
CLINIC_TYPES = [
    {"name": "Cleaning", "duration": 30, "availabilityProfile": "Office"},
    {"name": "Checkup", "duration": 30, "availabilityProfile": "Office", "host": "Dr. Lee"},
]


@pytest.fixture
def clinic(app):
    return TenantFactory().create(
        hosts=[{"name": "Dr. Kim"}, {"name": "Dr. Lee"}], eventTypes=CLINIC_TYPES
    )


def book(client, tenant, event_type, start):
    return client.post(
        f"/v1/api/calendar/event-types/{tenant.event_types[event_type]}/bookings",
        json={
            "startTime": z(start),
            "endTime": z(start + timedelta(minutes=30)),
            "attendees": [{"email": f"{event_type.lower()}@example.test"}],
        },
        headers=tenant.headers(),
    )


def test_an_event_type_without_a_host_is_the_first_hosts(clinic):
    cleaning = db.session.get(EventType, clinic.event_types["Cleaning"])
    assert cleaning.host_id == clinic.hosts["Dr. Kim"]


def test_two_hosts_event_types_are_booked_at_the_same_instant(client, clinic):
    kim = book(client, clinic, "Cleaning", TEN)
    lee = book(client, clinic, "Checkup", TEN)
    assert (kim.status_code, lee.status_code) == (201, 201), (kim.json, lee.json)
    hosts = {db.session.get(Booking, r.json["id"]).host_id for r in (kim, lee)}
    assert hosts == {clinic.hosts["Dr. Kim"], clinic.hosts["Dr. Lee"]}


def test_a_time_its_own_host_is_busy_at_is_refused(client, clinic):
    assert book(client, clinic, "Checkup", TEN).status_code == 201
    again = book(client, clinic, "Checkup", TEN + timedelta(minutes=15))
    assert (again.status_code, again.json["code"]) == (400, "slot_taken")


def test_availability_offers_the_time_another_host_is_busy_at(client, clinic):
    assert book(client, clinic, "Checkup", TEN).status_code == 201  # Dr. Lee's
    (day,) = availability_through_api(client, clinic, MONDAY).json  # Dr. Kim's Cleaning
    assert {"start": z(TEN), "end": z(TEN + timedelta(minutes=30))} in day["slots"]


def test_a_hold_keeps_only_its_own_hosts_time(client, clinic):
    held = client.post(
        f"/v1/api/calendar/event-types/{clinic.event_types['Checkup']}/holds",
        json={"startTime": z(TEN), "endTime": z(TEN + timedelta(minutes=30))},
        headers=clinic.headers(),
    )
    assert held.status_code == 201, held.json
    assert book(client, clinic, "Cleaning", TEN).status_code == 201  # Dr. Kim is free
    refused = book(client, clinic, "Checkup", TEN)  # Dr. Lee's time is held
    assert (refused.status_code, refused.json["code"]) == (400, "slot_held")


def test_a_write_asks_only_its_own_hosts_calendars(make_app, google):
    app = make_app(**google.app_settings())
    with app.app_context():
        tenant = TenantFactory().create(
            hosts=[{"name": "Dr. Kim"}, {"name": "Dr. Lee"}],
            eventTypes=CLINIC_TYPES,
            calendarConnections=[provider_connection(google, "Lee's calendar", host="Dr. Lee")],
        )
        client = app.test_client()
        google.clear_requests()
        assert book(client, tenant, "Cleaning", TEN).status_code == 201  # Dr. Kim's
        assert google.requests_to("/events", method="GET") == []
        assert book(client, tenant, "Checkup", TEN).status_code == 201  # Dr. Lee's
        assert google.requests_to("/events", method="GET") != []
        db.session.remove()
