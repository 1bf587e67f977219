"""What the owner sees of the attendees' own changes on a booking's page: each attendee's link
and a new one on demand, the reminders planned and sent, and who acted in the history."""

from __future__ import annotations

from datetime import timedelta
from urllib.parse import urlsplit

import pytest

from app.extensions import db
from app.jobs.reminders import send_due_reminders
from app.models import Booking, CalendarSettings
from app.services.common.manage_links import manage_url
from tests.dashboard_users import csrf_token, owner_email, sign_in
from tests.factories import book_through_api, next_monday, ny

pytestmark = pytest.mark.date_sensitive  # bookings on next Monday, shown in local time

MONDAY = next_monday()


def page_of(tenant, booking_id):
    return f"/dashboard/s/{tenant.sub_account_id}/bookings/{booking_id}"


def booked(client, tenant):
    response = book_through_api(client, tenant, ny(MONDAY, 10))
    assert response.status_code == 201, response.json
    return response.json


def test_the_booking_page_links_each_attendees_own_page(client, tenant):
    booking = booked(client, tenant)
    sign_in(client, owner_email(tenant))
    text = client.get(page_of(tenant, booking["id"])).get_data(as_text=True)
    assert f'href="{booking["attendees"][0]["manageUrl"]}"' in text


def test_a_new_link_ends_the_attendees_earlier_one(client, tenant):
    booking = booked(client, tenant)
    old = urlsplit(booking["attendees"][0]["manageUrl"]).path
    sign_in(client, owner_email(tenant))
    page = page_of(tenant, booking["id"])
    attendee_id = booking["attendees"][0]["id"]
    answer = client.post(
        f"{page}/attendees/{attendee_id}/new-link",
        data={"csrf_token": csrf_token(client, page)},
    )
    assert answer.status_code == 302
    assert client.get(old).status_code == 410
    attendee = db.session.get(Booking, booking["id"]).attendees[0]
    db.session.refresh(attendee)
    assert client.get(urlsplit(manage_url(attendee)).path).status_code == 200


def test_the_history_says_what_the_attendee_did(client, tenant):
    booking = booked(client, tenant)
    link = urlsplit(booking["attendees"][0]["manageUrl"]).path
    client.post(f"{link}/cancel", data={"csrf_token": csrf_token(client, link)})
    sign_in(client, owner_email(tenant))
    text = client.get(page_of(tenant, booking["id"])).get_data(as_text=True)
    assert "cancelled by the attendee" in text


def test_the_booking_page_shows_its_reminders_planned_sent_and_skipped(client, tenant):
    settings = db.session.get(CalendarSettings, tenant.sub_account_id)
    settings.reminders = [
        {"minutesBefore": 1440, "channels": ["attendeeEmail"]},
        {"minutesBefore": 60, "channels": ["attendeeEmail", "webhook"]},
        {"minutesBefore": 30, "channels": ["businessEmail"]},
    ]
    db.session.commit()
    booking = booked(client, tenant)
    sign_in(client, owner_email(tenant))
    page = page_of(tenant, booking["id"])
    assert client.get(page).get_data(as_text=True).count("<td>planned</td>") == 3
    assert send_due_reminders(ny(MONDAY, 10) - timedelta(minutes=59)) == 1
    text = client.get(page).get_data(as_text=True)
    assert text.count("<td>sent ") == 1 and "skipped (a nearer one went out)" in text
    assert text.count("<td>planned</td>") == 1  # the half hour's
    assert "attendeeEmail, webhook" in text
