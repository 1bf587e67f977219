"""The settings page: the sub account's name, timezone and calendar defaults, saved under
provisioning's rules, with every refusal explained next to its field (200, never a 500)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from app.dashboard import local_time
from app.extensions import db
from app.models import CalendarSettings, SubAccount
from tests.dashboard_users import csrf_token, owner_email, sign_in
from tests.factories import make_booking

VALID = {
    "name": "Renamed clinic",
    "timezone": "America/New_York",
    "default_duration": "45",
    "minimum_notice": "120",
    "booking_horizon": "90",
    "default_location": "Room 4",
    "notify_on_booking": "y",
    "notification_email": "front-desk@example.test",
    "reminders-0-minutesBefore": "60",
    "reminders-0-channels": "attendeeEmail",
    "auto_complete": "y",
    "attendee_notice_hours": "24",
    "attendee_max_moves": "2",
}


@pytest.fixture
def page(client, tenant):
    sign_in(client, owner_email(tenant))
    return f"/dashboard/s/{tenant.sub_account_id}/settings"


def save(client, page, **changes):
    data = {**VALID, **changes}
    data = {k: v for k, v in data.items() if v is not None}  # None: left out (an unticked box)
    return client.post(page, data={**data, "csrf_token": csrf_token(client, page)})


def stored(tenant) -> CalendarSettings:
    db.session.expire_all()
    return db.session.get(CalendarSettings, tenant.sub_account_id)


def test_the_page_shows_the_current_settings(client, tenant, page):
    text = client.get(page).get_data(as_text=True)
    assert text.count("<h1>") == 1
    assert 'value="America/New_York"' in text and 'value="30"' in text
    assert "Now America/New_York." in text


def test_saved_settings_are_stored_and_shown(client, tenant, page):
    response = save(client, page)
    assert response.status_code == 302
    settings = stored(tenant)
    assert (settings.default_duration, settings.minimum_notice_minutes) == (45, 120)
    assert settings.booking_horizon_days == 90
    assert settings.reminders == [{"minutesBefore": 60, "channels": ["attendeeEmail"]}]
    assert settings.default_location == "Room 4" and settings.auto_complete_bookings is True
    assert (settings.attendee_change_notice_hours, settings.attendee_max_reschedules) == (24, 2)
    assert settings.notification_email == "front-desk@example.test"
    assert db.session.get(SubAccount, tenant.sub_account_id).name == "Renamed clinic"
    text = client.get(page).get_data(as_text=True)
    assert "Settings saved." in text and 'value="45"' in text


def test_unticked_boxes_and_an_empty_reminder_turn_things_off(client, tenant, page):
    save(
        client,
        page,
        notify_on_booking=None,
        auto_complete=None,
        **{"reminders-0-minutesBefore": ""},
    )
    settings = stored(tenant)
    assert settings.notify_on_booking is False and settings.auto_complete_bookings is False
    assert settings.reminders == []


def test_a_new_timezone_is_explained_and_used_to_show_times(client, tenant, page):
    start = (datetime.now(UTC) + timedelta(days=3)).replace(
        hour=12, minute=0, second=0, microsecond=0
    )
    booking = make_booking(tenant, start)
    response = save(client, page, timezone="Asia/Tokyo")
    assert response.status_code == 302
    notice = client.get(page).get_data(as_text=True)
    assert "The timezone is now Asia/Tokyo (was America/New_York)" in notice
    assert "Existing bookings keep their times." in notice
    assert "1 availability profile keeps its own timezone, America/New_York" in notice
    bookings = client.get(f"/dashboard/s/{tenant.sub_account_id}/bookings").get_data(as_text=True)
    assert "Times in Asia/Tokyo." in bookings
    assert local_time(start, "Asia/Tokyo") in bookings
    assert stored(tenant).timezone == "Asia/Tokyo" and booking.start_at == start


def test_an_unknown_timezone_is_explained_and_nothing_changes(client, tenant, page):
    response = save(client, page, timezone="Mars/Olympus")
    assert response.status_code == 200
    assert "Unknown timezone &#39;Mars/Olympus&#39;; use an IANA name." in response.get_data(
        as_text=True
    )
    assert stored(tenant).timezone == "America/New_York"
    assert stored(tenant).default_duration == 30  # the valid fields were not saved either


def test_numbers_out_of_range_are_explained_not_a_500(client, tenant, page):
    response = save(
        client,
        page,
        default_duration="99999999999999999999",
        minimum_notice="-5",
        booking_horizon="0",
        **{"reminders-0-minutesBefore": "99999999999999999999"},
    )
    assert response.status_code == 200
    text = response.get_data(as_text=True)
    assert "Must be greater than or equal to 5 and less than or equal to 1440." in text
    assert "Must be greater than or equal to 0 and less than or equal to 525600." in text
    assert "Must be greater than or equal to 1 and less than or equal to 3650." in text
    assert "Must be greater than or equal to 1 and less than or equal to 10080." in text
    assert stored(tenant).default_duration == 30


def test_text_where_a_number_belongs_is_explained(client, tenant, page):
    response = save(client, page, default_duration="forty", booking_horizon="")
    assert response.status_code == 200
    text = response.get_data(as_text=True)
    assert "Not a valid integer value." in text and "This field is required." in text
    assert stored(tenant).default_duration == 30


@pytest.mark.parametrize(
    "field, value, message",
    [
        ("notification_email", "not-an-email", "Not a valid email address."),
        ("notification_email", "a" * 10_000 + "@example.test", "Longer than maximum length 254."),
        ("name", "n" * 10_000, "Length must be between 1 and 255."),
        ("name", "   ", "Length must be between 1 and 255."),
        ("default_location", "l" * 10_000, "Longer than maximum length 500."),
    ],
)
def test_bad_text_is_explained_next_to_its_field(client, tenant, page, field, value, message):
    response = save(client, page, **{field: value})
    assert response.status_code == 200
    text = response.get_data(as_text=True)
    assert f'<p class="error" id="{field}-errors">{message}</p>' in text
    assert stored(tenant).default_duration == 30


def test_a_post_without_its_csrf_token_changes_nothing(client, tenant, page):
    response = client.post(page, data=VALID)
    assert response.status_code == 400
    assert "did not come from this site" in response.get_data(as_text=True)
    assert stored(tenant).default_duration == 30


def test_another_sub_accounts_settings_are_not_found(client, tenants):
    mine, theirs = tenants.create(), tenants.create()
    sign_in(client, owner_email(mine))
    theirs_page = f"/dashboard/s/{theirs.sub_account_id}/settings"
    token = csrf_token(client, f"/dashboard/s/{mine.sub_account_id}/settings")
    assert client.get(theirs_page).status_code == 404
    assert client.post(theirs_page, data={**VALID, "csrf_token": token}).status_code == 404
    assert stored(theirs).default_duration == 30
    assert client.get("/dashboard/s/99999999999999999999/settings").status_code == 404
