"""The calendar's entries feed: bookings by status and blocked time, as wall-clock times of
the sub account's timezone (FullCalendar shows them as sent), across a DST change."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from app.extensions import db
from app.models import BlockedTime, CalendarConnection
from tests.dashboard_users import owner_email, sign_in
from tests.factories import make_booking, ny


@pytest.fixture(autouse=True)
def owner(client, tenant):
    sign_in(client, owner_email(tenant))


def feed(client, tenant, start: str, end: str):
    return client.get(
        f"/dashboard/s/{tenant.sub_account_id}/calendar/entries?start={start}&end={end}&timeZone=UTC"
    )


def test_the_calendar_page_loads_the_vendored_fullcalendar(client, tenant):
    body = client.get(f"/dashboard/s/{tenant.sub_account_id}/calendar").get_data(as_text=True)
    assert "/static/vendor/fullcalendar-6.1.21/index.global.min.js" in body
    assert "Times in America/New_York" in body
    assert client.get("/static/vendor/fullcalendar-6.1.21/index.global.min.js").status_code == 200


def test_bookings_come_in_wall_clock_time_across_a_dst_change(client, tenant):
    """New York springs forward on 2027-03-14: 10:00 after the change is still 10:00."""
    before = make_booking(tenant, datetime(2027, 3, 12, 15, 0, tzinfo=UTC))  # 10:00 EST
    after = make_booking(tenant, datetime(2027, 3, 15, 14, 0, tzinfo=UTC), status="confirmed")
    entries = feed(client, tenant, "2027-03-08T00:00:00Z", "2027-03-22T00:00:00Z").get_json()
    by_id = {e["id"]: e for e in entries}
    assert by_id[f"booking-{before.id}"]["start"] == "2027-03-12T10:00"
    assert by_id[f"booking-{after.id}"]["start"] == "2027-03-15T10:00"
    assert by_id[f"booking-{after.id}"]["end"] == "2027-03-15T10:30"


def test_a_booking_is_titled_first_and_timed_second_classed_by_status_and_linked(client, tenant):
    """The title (with whom) leads, since a 30-minute entry in the week view has room for
    about one line; the time and status follow, and the whole text is there for hover."""
    booking = make_booking(
        tenant,
        ny(datetime(2027, 5, 3).date(), 9),
        status="cancelled",
        title="Knee assessment",
        emails=("robin@example.test",),
    )
    (entry,) = feed(client, tenant, "2027-05-03", "2027-05-04").get_json()
    assert entry["title"] == "Knee assessment · robin"
    assert entry["extendedProps"] == {
        "kind": "booking",
        "status": "Cancelled",
        "when": "09:00–09:30",
        "detail": "Knee assessment · robin, 09:00–09:30, Cancelled",
    }
    assert entry["classNames"] == ["status-cancelled"]
    assert entry["url"] == f"/dashboard/s/{tenant.sub_account_id}/bookings/{booking.id}"


def test_a_title_that_names_the_attendee_does_not_repeat_them(client, tenant):
    make_booking(
        tenant,
        ny(datetime(2027, 5, 3).date(), 9),
        title="Cleaning with Robin",
        emails=("robin@example.test",),
    )
    (entry,) = feed(client, tenant, "2027-05-03", "2027-05-04").get_json()
    assert entry["title"] == "Cleaning with Robin"


def test_an_entry_over_midnight_names_its_days(client, tenant):
    make_booking(tenant, ny(datetime(2027, 5, 3).date(), 23, 30), minutes=60)
    (entry,) = feed(client, tenant, "2027-05-03", "2027-05-05").get_json()
    assert entry["extendedProps"]["when"] == "Mon 23:30 – Tue 00:30"


def test_the_window_is_read_in_the_sub_accounts_timezone(client, tenant):
    """23:30 New York on 3 May is 03:30 UTC on 4 May: it belongs to the 3 May window."""
    late = make_booking(tenant, ny(datetime(2027, 5, 3).date(), 23, 30))
    assert [e["id"] for e in feed(client, tenant, "2027-05-03", "2027-05-04").get_json()] == [
        f"booking-{late.id}"
    ]
    assert feed(client, tenant, "2027-05-04", "2027-05-05").get_json() == []


def test_blocked_and_external_busy_time_are_background_entries(client, tenant):
    connection = CalendarConnection(
        sub_account_id=tenant.sub_account_id, name="Personal", url="https://dav.example.test/"
    )
    db.session.add(connection)
    db.session.flush()
    day = datetime(2027, 5, 3).date()
    db.session.add_all(
        [
            BlockedTime(
                sub_account_id=tenant.sub_account_id,
                start_at=ny(day, 12),
                end_at=ny(day, 13),
                reason="Lunch",
            ),
            BlockedTime(
                sub_account_id=tenant.sub_account_id,
                start_at=ny(day, 15),
                end_at=ny(day, 16),
                source="external",
                calendar_connection_id=connection.id,
            ),
        ]
    )
    db.session.commit()
    entries = feed(client, tenant, "2027-05-03", "2027-05-04").get_json()
    assert [
        (e["title"], e["display"], e["start"], e["classNames"], e["extendedProps"]) for e in entries
    ] == [
        (
            "Blocked: Lunch",
            "background",
            "2027-05-03T12:00",
            ["busy-blocked"],
            {"kind": "blocked", "when": "12:00–13:00", "detail": "Blocked: Lunch, 12:00–13:00"},
        ),
        (
            "Busy in Personal",
            "background",
            "2027-05-03T15:00",
            ["busy-external"],
            {"kind": "busy", "when": "15:00–16:00", "detail": "Busy in Personal, 15:00–16:00"},
        ),
    ]


@pytest.mark.parametrize(
    ("start", "end"),
    [
        ("nonsense", "2027-05-04"),
        ("2027-05-04", "2027-05-03"),
        ("2027-01-01", "2027-12-31"),
        ("", ""),
    ],
)
def test_a_bad_window_is_a_400_with_a_message(client, tenant, start, end):
    response = feed(client, tenant, start, end)
    assert response.status_code == 400
    assert response.get_json()["message"]


def test_another_calendars_bookings_are_not_in_the_feed(client, tenant, tenants):
    theirs = tenants.create()
    make_booking(theirs, ny(datetime(2027, 5, 3).date(), 9))
    assert feed(client, tenant, "2027-05-03", "2027-05-04").get_json() == []
