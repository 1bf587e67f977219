"""Seats in the dashboard: set with the event type, and shown per booking in the bookings list,
on the booking's page and in the calendar ("3 of 5 seats taken")."""

from __future__ import annotations

from datetime import datetime

import pytest

from app.extensions import db
from app.models import EventType
from tests.dashboard_users import csrf_token, owner_email, sign_in
from tests.factories import book_through_api, next_monday, ny

pytestmark = pytest.mark.date_sensitive  # bookings on next Monday

MONDAY = next_monday()


@pytest.fixture(autouse=True)
def owner(client, tenant):
    sign_in(client, owner_email(tenant))


def edit_cleaning(client, tenant, **fields):
    page = f"/dashboard/s/{tenant.sub_account_id}/event-types/{tenant.event_types['Cleaning']}"
    data = {"name": "Cleaning", "duration": "30", "buffer_after": "10", **fields}
    return client.post(page, data={**data, "csrf_token": csrf_token(client, page)})


def test_an_owner_gives_an_event_type_seats(client, tenant):
    assert edit_cleaning(client, tenant, seats="8").status_code == 302
    db.session.expire_all()
    assert db.session.get(EventType, tenant.event_types["Cleaning"]).seats == 8


def test_empty_seats_mean_one_booking_a_slot(client, tenant):
    assert edit_cleaning(client, tenant, seats="").status_code == 302
    db.session.expire_all()
    assert db.session.get(EventType, tenant.event_types["Cleaning"]).seats == 1


def test_no_seats_is_explained_next_to_the_field(client, tenant):
    page = edit_cleaning(client, tenant, seats="0").get_data(as_text=True)
    assert 'id="seats-errors"' in page
    assert "Must be greater than or equal to 1" in page


def seated_class(client, tenant, taken: int) -> list[int]:
    edit_cleaning(client, tenant, seats="5")
    ids = []
    for n in range(taken):
        response = book_through_api(
            client, tenant, ny(MONDAY, 10), attendees=[{"email": f"s{n}@example.test"}]
        )
        assert response.status_code == 201, response.json
        ids.append(response.json["id"])
    return ids


def test_the_bookings_list_shows_each_seat_and_how_many_are_taken(client, tenant):
    seated_class(client, tenant, 3)
    page = client.get(f"/dashboard/s/{tenant.sub_account_id}/bookings").get_data(as_text=True)
    for n in (1, 2, 3):
        assert f"seat {n} of 5, 3 taken" in page


def test_a_booking_page_names_its_seat(client, tenant):
    _, second = seated_class(client, tenant, 2)
    page = client.get(f"/dashboard/s/{tenant.sub_account_id}/bookings/{second}")
    assert "Seat 2 of 5 in this slot." in page.get_data(as_text=True)


def test_the_calendar_says_how_many_seats_of_a_slot_are_taken(client, tenant):
    seated_class(client, tenant, 2)
    day = MONDAY.isoformat()
    entries = client.get(
        f"/dashboard/s/{tenant.sub_account_id}/calendar/entries"
        f"?start={day}&end={datetime.fromordinal(MONDAY.toordinal() + 1).date()}"
    ).get_json()
    titles = [entry["title"] for entry in entries if entry["id"].startswith("booking-")]
    assert len(titles) == 2
    assert all(title.endswith(" · 2 of 5 seats taken") for title in titles)
