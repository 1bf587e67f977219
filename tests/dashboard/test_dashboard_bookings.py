"""The bookings list and a booking's page: filters, and confirm, cancel and outcome actions
through the same services (and rules) as the API, each behind its CSRF token."""

from __future__ import annotations

from datetime import timedelta

import pytest

from app.extensions import db
from app.models import Booking, OutboxEvent
from app.models.types import utcnow
from tests.dashboard_users import csrf_token, owner_email, sign_in
from tests.factories import make_booking, next_monday, ny

pytestmark = pytest.mark.date_sensitive  # bookings on next Monday, shown in local time

MONDAY = next_monday()


def page_of(tenant, booking_id):
    return f"/dashboard/s/{tenant.sub_account_id}/bookings/{booking_id}"


def post_action(client, tenant, booking_id, action, **data):
    token = csrf_token(client, page_of(tenant, booking_id))
    return client.post(
        f"{page_of(tenant, booking_id)}/{action}", data={"csrf_token": token, **data}
    )


def status_of(booking_id):
    db.session.expire_all()
    return db.session.get(Booking, booking_id).status


def test_the_list_filters_by_status_and_email(client, tenant):
    make_booking(tenant, ny(MONDAY, 10), emails=("pat@example.test",))
    make_booking(tenant, ny(MONDAY, 11), emails=("sam@example.test",), status="confirmed")
    sign_in(client, owner_email(tenant))
    base = f"/dashboard/s/{tenant.sub_account_id}/bookings"
    assert "2 bookings." in client.get(base).get_data(as_text=True)
    confirmed = client.get(base, query_string={"status": "confirmed"}).get_data(as_text=True)
    assert "1 booking." in confirmed and "sam@example.test" in confirmed
    by_email = client.get(base, query_string={"email": "PAT@example.test"}).get_data(as_text=True)
    assert "1 booking." in by_email and "pat@example.test" in by_email


def test_a_bad_filter_is_explained_not_a_500(client, tenant):
    sign_in(client, owner_email(tenant))
    response = client.get(
        f"/dashboard/s/{tenant.sub_account_id}/bookings", query_string={"start": "31/02/2026"}
    )
    assert response.status_code == 200
    assert "Not a valid date value." in response.get_data(as_text=True)


def test_the_owner_confirms_a_pending_booking(client, tenant):
    booking = make_booking(tenant, ny(MONDAY, 10))
    sign_in(client, owner_email(tenant))
    response = post_action(client, tenant, booking.id, "confirm")
    assert response.status_code == 302
    assert status_of(booking.id) == "confirmed"
    db.session.expire_all()
    stored = db.session.get(Booking, booking.id)
    assert stored.sequence == 1 and stored.confirmed_at is not None
    kinds = [e.kind for e in db.session.query(OutboxEvent).filter_by(booking_id=booking.id)]
    assert kinds == ["booking.confirmed"]
    page = client.get(page_of(tenant, booking.id)).get_data(as_text=True)
    assert "Booking confirmed." in page and "confirmed" in page


def test_an_action_without_its_token_changes_nothing(client, tenant):
    booking = make_booking(tenant, ny(MONDAY, 10))
    sign_in(client, owner_email(tenant))
    client.post(f"{page_of(tenant, booking.id)}/confirm")
    assert status_of(booking.id) == "pending"
    assert "did not come from this site" in client.get(page_of(tenant, booking.id)).get_data(
        as_text=True
    )


def test_the_owner_cancels_with_a_reason(client, tenant):
    booking = make_booking(tenant, ny(MONDAY, 10))
    sign_in(client, owner_email(tenant))
    post_action(client, tenant, booking.id, "cancel", reason="Patient called")
    db.session.expire_all()
    stored = db.session.get(Booking, booking.id)
    assert (stored.status, stored.cancellation_reason) == ("cancelled", "Patient called")
    again = post_action(client, tenant, booking.id, "confirm")
    assert again.status_code == 302
    page = client.get(page_of(tenant, booking.id)).get_data(as_text=True)
    assert "Cancelled because: Patient called" in page
    assert status_of(booking.id) == "cancelled"


def test_an_outcome_only_once_the_booking_started(client, tenant):
    future = make_booking(tenant, ny(MONDAY, 10))
    started = make_booking(
        tenant, (utcnow() - timedelta(hours=1)).replace(microsecond=0), status="confirmed"
    )
    sign_in(client, owner_email(tenant))
    post_action(client, tenant, future.id, "outcome/no_show")
    assert status_of(future.id) == "pending"
    assert "once it has started" in client.get(page_of(tenant, future.id)).get_data(as_text=True)
    post_action(client, tenant, started.id, "outcome/no_show")
    assert status_of(started.id) == "no_show"


def test_another_calendars_booking_is_not_found(client, tenants):
    mine, theirs = tenants.create(), tenants.create()
    their_booking = make_booking(theirs, ny(MONDAY, 10))
    sign_in(client, owner_email(mine))
    assert client.get(page_of(mine, their_booking.id)).status_code == 404
    token = csrf_token(client, f"/dashboard/s/{mine.sub_account_id}/bookings")
    refused = client.post(f"{page_of(mine, their_booking.id)}/confirm", data={"csrf_token": token})
    assert refused.status_code == 404
    assert status_of(their_booking.id) == "pending"


def test_the_list_filters_by_event_type(client, tenant):
    make_booking(tenant, ny(MONDAY, 10), event_type="Cleaning", title="A cleaning")
    make_booking(tenant, ny(MONDAY, 13), event_type="Checkup", minutes=60, title="A checkup")
    sign_in(client, owner_email(tenant))
    url = f"/dashboard/s/{tenant.sub_account_id}/bookings"
    chosen = client.get(f"{url}?event_type={tenant.event_types['Checkup']}").get_data(as_text=True)
    assert "A checkup" in chosen and "A cleaning" not in chosen and "1 booking." in chosen
    for odd in ("nonsense", "99999999999999999999", "-1"):
        page = client.get(f"{url}?event_type={odd}")
        assert page.status_code == 200 and "0 bookings." in page.get_data(as_text=True)


def test_a_bookings_metadata_shows_its_values_not_json(client, tenant):
    booking = make_booking(tenant, ny(MONDAY, 10))
    booking.meta = {"crmId": "X1", "visits": 3, "vip": True}
    db.session.commit()
    sign_in(client, owner_email(tenant))
    page = client.get(page_of(tenant, booking.id)).get_data(as_text=True)
    assert "<dt>crmId</dt><dd>X1</dd>" in page
    assert "<dt>visits</dt><dd>3</dd>" in page and "<dt>vip</dt><dd>true</dd>" in page


def test_cancelling_looks_destructive_and_asks_first(client, tenant):
    booking = make_booking(tenant, ny(MONDAY, 10))
    sign_in(client, owner_email(tenant))
    page = client.get(page_of(tenant, booking.id)).get_data(as_text=True)
    assert (
        '<button type="submit" class="danger"'
        ' data-confirm="Cancel this booking? The attendees are told.">Cancel booking</button>'
    ) in page
    assert '<button type="submit">Confirm</button>' in page  # not the cancel's colour
