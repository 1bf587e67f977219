"""Booking emails through a real SMTP server (aiosmtpd): who gets what, the times in each
recipient's timezone, and an invitation mail clients act on. Deliveries run in-process here
(``handle_event``); tests/worker/test_worker_messages.py runs them in a worker."""

from __future__ import annotations

from datetime import timedelta
from urllib.parse import urlsplit
from zoneinfo import ZoneInfo

import icalendar
import pytest
from sqlalchemy import select

from app.extensions import db
from app.jobs import outbox as outbox_job
from app.jobs.reminders import send_due_reminders
from app.models import MailMessage, OutboxDelivery, OutboxEvent
from app.models.types import utcnow
from app.services.integrations import outbox
from app.services.integrations.notifications.booking_mail import HANDLER_NAME, notify_delivery
from tests.dashboard_users import csrf_token
from tests.factories import next_monday, ny, z
from tests.mail_servers import ics_of, smtp_server

pytestmark = pytest.mark.date_sensitive  # bookings on next Monday, in local time in the mails

MONDAY = next_monday()
OWNER = "front-desk@clinic.test"


@pytest.fixture
def smtp():
    with smtp_server() as (url, inbox):
        yield url, inbox


@pytest.fixture
def app(make_app, smtp):
    """The app the tenants are made in, sending through the test's SMTP server."""
    url, _ = smtp
    app = make_app(SMTP_URL=url, MAIL_FROM="Bookings <bookings@service.test>")
    with app.app_context():
        yield app
        db.session.remove()


@pytest.fixture
def inbox(smtp):
    return smtp[1]


def clinic(tenants, **settings):
    return tenants.create(
        settings={
            "defaultDuration": 30,
            "bookingHorizonDays": 60,
            "notificationEmail": OWNER,
            **settings,
        }
    )


def create(client, tenant, start, **fields):
    response = client.post(
        f"/v1/api/calendar/event-types/{tenant.event_types['Cleaning']}/bookings",
        json={
            "startTime": z(start),
            "endTime": z(start + timedelta(minutes=30)),
            "title": "Cleaning",
            "attendees": [
                {"email": "pat@example.test", "name": "Pat Doe", "timezone": "Europe/Berlin"},
                {"email": "sam@example.test", "name": "Sam Roe"},
            ],
            **fields,
        },
        headers=tenant.headers(),
    )
    assert response.status_code == 201, response.json
    return response.json


def deliver_all(now=None):
    now = now or utcnow()
    for event_id in db.session.scalars(select(OutboxEvent.id).order_by(OutboxEvent.id)).all():
        outbox_job.handle_event(event_id, HANDLER_NAME, now)
        db.session.commit()


def invitation(message):
    calendar = icalendar.Calendar.from_ical(ics_of(message))
    return str(calendar["METHOD"]), calendar.walk("VEVENT")[0]


def test_a_new_booking_is_announced_to_each_attendee_and_the_owner(app, tenants, inbox):
    tenant = clinic(tenants)
    booking = create(app.test_client(), tenant, ny(MONDAY, 10))
    deliver_all()

    assert sorted(rcpt for _, (rcpt,) in inbox.envelopes) == [
        OWNER,
        "pat@example.test",
        "sam@example.test",
    ]
    (pat,) = inbox.to("pat@example.test")
    assert pat["Subject"].startswith("Booked: Cleaning — ")
    assert (
        str(pat["From"])
        == f"{tenant.raw['agencies'][0]['subAccounts'][0]['name']} <bookings@service.test>"
    )
    # Pat's own timezone: 10:00 in New York is 16:00 in Berlin (15:00 in the weeks their DST
    # rules differ), so the text says what the booking's instant is there.
    berlin = ny(MONDAY, 10).astimezone(ZoneInfo("Europe/Berlin"))
    assert f"{berlin:%H:%M}–" in pat["Subject"] and "(Europe/Berlin)" in pat["Subject"]
    text = pat.get_body(("plain",)).get_content()
    html = pat.get_body(("html",)).get_content()
    assert "Your booking is made." in text and "Your booking is made." in html
    assert "Pat Doe, Sam Roe" in text
    (sam,) = inbox.to("sam@example.test")
    assert "10:00–10:30 (America/New_York)" in sam["Subject"]  # the booking's timezone
    (owner,) = inbox.to(OWNER)
    assert "A new booking was made." in owner.get_body(("plain",)).get_content()

    method, event = invitation(pat)
    assert method == "REQUEST"
    assert str(event["UID"]) == booking["uid"] and event["SEQUENCE"] == 0
    assert event["DTSTART"].dt == ny(MONDAY, 10)
    assert str(event["ORGANIZER"]) == f"mailto:{OWNER}"


def test_each_attendees_mail_carries_their_own_manage_link_that_opens_the_booking(
    app, tenants, inbox
):
    tenant = clinic(tenants)
    client = app.test_client()
    booking = create(client, tenant, ny(MONDAY, 10))
    deliver_all()
    for attendee in booking["attendees"]:
        (mail,) = inbox.to(attendee["email"])
        link = attendee["manageUrl"]
        assert f"Reschedule or cancel: {link}" in mail.get_body(("plain",)).get_content()
        assert f'href="{link}"' in mail.get_body(("html",)).get_content()
        _, event = invitation(mail)
        assert str(event["URL"]) == link and link in str(event["DESCRIPTION"])
        page = client.get(urlsplit(link).path)
        assert page.status_code == 200 and "Cleaning" in page.get_data(as_text=True)
    (owner,) = inbox.to(OWNER)
    assert "/manage/" not in owner.get_body(("plain",)).get_content()  # no attendee's link


def test_a_cancel_by_the_attendee_is_told_as_theirs(app, tenants, inbox):
    tenant = clinic(tenants)
    client = app.test_client()
    booking = create(client, tenant, ny(MONDAY, 10))
    path = urlsplit(booking["attendees"][0]["manageUrl"]).path
    token = csrf_token(client, path)
    assert client.post(f"{path}/cancel", data={"csrf_token": token}).status_code == 302
    deliver_all()
    (_, cancelled) = inbox.to(OWNER)
    assert "The attendee cancelled a booking." in cancelled.get_body(("plain",)).get_content()
    (_, told) = inbox.to("pat@example.test")
    text = told.get_body(("plain",)).get_content()
    assert "You cancelled your booking." in text and "/manage/" not in text


def test_a_reschedule_sends_a_request_with_a_higher_sequence(app, tenants, inbox):
    tenant = clinic(tenants)
    client = app.test_client()
    booking = create(client, tenant, ny(MONDAY, 10))
    url = f"/v1/api/calendar/event-types/{tenant.event_types['Cleaning']}/bookings/{booking['id']}"
    client.put(url, json={"startTime": z(ny(MONDAY, 14))}, headers=tenant.headers())
    deliver_all()

    first, moved = inbox.to("sam@example.test")
    assert moved["Subject"].startswith("Moved: Cleaning — ")
    assert "14:00–14:30 (America/New_York)" in moved["Subject"]
    method, event = invitation(moved)
    assert (method, event["SEQUENCE"]) == ("REQUEST", 1)
    assert event["DTSTART"].dt == ny(MONDAY, 14)
    assert first["Message-ID"] != moved["Message-ID"]


def test_a_cancellation_sends_a_cancel_that_removes_the_event(app, tenants, inbox):
    tenant = clinic(tenants)
    client = app.test_client()
    booking = create(client, tenant, ny(MONDAY, 10))
    client.delete(
        f"/v1/api/calendar/bookings/{booking['id']}",
        json={"reason": "Dentist ill"},
        headers=tenant.headers(),
    )
    deliver_all()
    _, cancelled = inbox.to("pat@example.test")
    assert cancelled["Subject"].startswith("Cancelled: Cleaning — ")
    assert "Reason: Dentist ill" in cancelled.get_body(("plain",)).get_content()
    method, event = invitation(cancelled)
    assert (method, str(event["STATUS"]), event["SEQUENCE"]) == ("CANCEL", "CANCELLED", 1)
    assert str(event["UID"]) == booking["uid"]


def test_edits_a_calendar_does_not_show_send_nothing(app, tenants, inbox):
    tenant = clinic(tenants)
    client = app.test_client()
    booking = create(client, tenant, ny(MONDAY, 10))
    deliver_all()
    url = f"/v1/api/calendar/event-types/{tenant.event_types['Cleaning']}/bookings/{booking['id']}"
    client.put(url, json={"metadata": {"crm": 1}}, headers=tenant.headers())
    deliver_all()
    assert len(inbox.messages) == 3


def test_with_notifications_off_nobody_is_mailed(app, tenants, inbox):
    tenant = clinic(tenants, notifyOnBooking=False)
    create(app.test_client(), tenant, ny(MONDAY, 10))
    deliver_all()
    assert inbox.messages == []


def test_without_a_notification_address_only_attendees_are_mailed(app, tenants, inbox):
    tenant = clinic(tenants, notificationEmail=None)
    create(app.test_client(), tenant, ny(MONDAY, 10))
    deliver_all()
    assert sorted(rcpt for _, (rcpt,) in inbox.envelopes) == [
        "pat@example.test",
        "sam@example.test",
    ]


def test_a_message_already_sent_is_not_sent_again(app, tenants, inbox):
    """Even when the handler runs again (its record lost to a crash)."""
    tenant = clinic(tenants)
    create(app.test_client(), tenant, ny(MONDAY, 10))
    (event,) = db.session.scalars(select(OutboxEvent)).all()
    delivery = outbox.Delivery(
        event.id, event.kind, event.booking_id, tenant.sub_account_id, (), utcnow(), 1
    )
    notify_delivery(delivery, utcnow())
    notify_delivery(delivery, utcnow())
    assert len(inbox.messages) == 3


def test_a_refusing_smtp_server_is_retried_and_sends_once_it_is_back(app, tenants, inbox):
    tenant = clinic(tenants)
    create(app.test_client(), tenant, ny(MONDAY, 10))
    inbox.refuse = True
    now = utcnow()
    deliver_all(now)
    (record,) = db.session.scalars(
        select(OutboxDelivery).where(OutboxDelivery.handler == HANDLER_NAME)
    ).all()
    assert record.status == "retrying" and "451" in record.last_error
    assert db.session.scalars(select(MailMessage)).all() == []
    inbox.refuse = False
    deliver_all(record.next_attempt_at)
    assert len(inbox.messages) == 3


def test_without_smtp_mail_is_kept_and_listed(make_app, tenants):
    app = make_app(SMTP_URL=None)
    with app.app_context():
        tenant = clinic(tenants)
        create(app.test_client(), tenant, ny(MONDAY, 10))
        deliver_all()
        kept = db.session.scalars(select(MailMessage).order_by(MailMessage.id)).all()
        assert [m.status for m in kept] == ["kept"] * 3
        assert "BEGIN:VCALENDAR" in kept[0].ics and "METHOD:REQUEST" in kept[0].ics
        listed = app.test_cli_runner().invoke(args=["outbox"])
        assert listed.exit_code == 0
        assert len(listed.output.splitlines()) == 3 and "Booked: Cleaning" in listed.output
        shown = app.test_cli_runner().invoke(args=["outbox", "--show", str(kept[0].id)])
        assert "Your booking is made." in shown.output


# Reminders


def test_a_reminder_is_sent_once_when_it_is_due(app, tenants, inbox):
    tenant = clinic(tenants, reminderMinutesBefore=60)  # the shorthand: one attendee mail
    start = ny(MONDAY, 10)
    create(app.test_client(), tenant, start)
    assert send_due_reminders(start - timedelta(minutes=61)) == 0
    assert send_due_reminders(start - timedelta(minutes=60)) == 1
    assert send_due_reminders(start - timedelta(minutes=30)) == 0  # not again
    deliver_all()
    (reminder,) = [m for m in inbox.to("sam@example.test") if m["Subject"].startswith("Remi")]
    assert reminder["Subject"].startswith("Reminder: Cleaning — ")
    assert invitation(reminder)[0] == "REQUEST"
    assert "/manage/" in reminder.get_body(("plain",)).get_content()
    assert not [m for m in inbox.to(OWNER) if m["Subject"].startswith("Remi")]  # attendees only


def reminders_to(inbox, address):
    return [m for m in inbox.to(address) if m["Subject"].startswith("Reminder: ")]


TWO_REMINDERS = [
    {"minutesBefore": 1440, "channels": ["attendeeEmail", "businessEmail"]},
    {"minutesBefore": 60, "channels": ["attendeeEmail"]},
]


def test_two_reminders_go_out_once_each_and_move_with_a_reschedule(app, tenants, inbox):
    tenant = clinic(tenants, reminders=TWO_REMINDERS, notifyOnBooking=False)
    client = app.test_client()
    booking = create(client, tenant, ny(MONDAY, 10))
    assert send_due_reminders(ny(MONDAY, 10) - timedelta(days=1)) == 1  # the day before
    deliver_all()
    assert (
        len(reminders_to(inbox, "pat@example.test")) == 1 and len(reminders_to(inbox, OWNER)) == 1
    )
    url = f"/v1/api/calendar/event-types/{tenant.event_types['Cleaning']}/bookings/{booking['id']}"
    client.put(url, json={"startTime": z(ny(MONDAY, 15))}, headers=tenant.headers())
    # The new time's reminders: the day before 15:00, then an hour before; the old time's
    # hour-before (9:00) never goes out.
    assert send_due_reminders(ny(MONDAY, 15) - timedelta(days=1)) == 1
    assert send_due_reminders(ny(MONDAY, 9)) == 0
    assert send_due_reminders(ny(MONDAY, 14)) == 1
    assert send_due_reminders(ny(MONDAY, 14, 30)) == 0
    deliver_all()
    assert len(reminders_to(inbox, "pat@example.test")) == 3
    assert len(reminders_to(inbox, OWNER)) == 2
    first, *moved = reminders_to(inbox, "sam@example.test")  # in New York time
    assert "10:00–10:30" in first["Subject"]
    assert ["15:00–15:30" in m["Subject"] for m in moved] == [True, True]


def test_reminders_due_together_send_only_the_nearest(app, tenants, inbox):
    tenant = clinic(tenants, reminders=TWO_REMINDERS)
    create(app.test_client(), tenant, ny(MONDAY, 10))
    assert send_due_reminders(ny(MONDAY, 9, 30)) == 1  # both are due: only the hour's
    deliver_all()
    assert len(reminders_to(inbox, "pat@example.test")) == 1
    assert reminders_to(inbox, OWNER) == []  # the day-before one (to the owner too) skipped
    assert send_due_reminders(ny(MONDAY, 9, 45)) == 0


def test_an_event_types_own_list_wins_over_the_sub_accounts(app, tenants, inbox):
    tenant = tenants.create(
        settings={"notificationEmail": OWNER, "reminders": TWO_REMINDERS},
        eventTypes=[{"name": "Cleaning", "duration": 30, "reminders": []}],
    )
    create(app.test_client(), tenant, ny(MONDAY, 10))
    assert send_due_reminders(ny(MONDAY, 9, 30)) == 0


def test_a_cancelled_booking_gets_no_reminder(app, tenants, inbox):
    tenant = clinic(tenants, reminderMinutesBefore=60)
    client = app.test_client()
    booking = create(client, tenant, ny(MONDAY, 10))
    client.delete(f"/v1/api/calendar/bookings/{booking['id']}", headers=tenant.headers())
    assert send_due_reminders(ny(MONDAY, 9, 30)) == 0
    deliver_all()
    assert reminders_to(inbox, "pat@example.test") == []


def test_the_host_a_booking_is_made_with_hears_of_it_as_the_business_does(app, tenants, inbox):
    tenant = tenants.create(
        settings={"defaultDuration": 30, "bookingHorizonDays": 60, "notificationEmail": OWNER},
        hosts=[{"name": "Dr. Kim", "email": "kim@clinic.test"}, {"name": "Dr. Lee"}],
        eventTypes=[
            {
                "name": "Cleaning",
                "duration": 30,
                "availabilityProfile": "Office",
                "assignment": "round_robin",
                "hosts": [{"name": "Dr. Kim"}, {"name": "Dr. Lee"}],
            }
        ],
    )
    booking = create(app.test_client(), tenant, ny(MONDAY, 10))
    assert [h["name"] for h in booking["hosts"]] == ["Dr. Kim"]
    deliver_all()
    assert sorted(rcpt for _, (rcpt,) in inbox.envelopes) == [
        OWNER,
        "kim@clinic.test",
        "pat@example.test",
        "sam@example.test",
    ]
    (kim,) = inbox.to("kim@clinic.test")
    assert kim["Subject"] == inbox.to(OWNER)[0]["Subject"]


def test_a_booking_moved_to_another_host_tells_both_hosts_and_the_attendees(app, tenants, inbox):
    tenant = tenants.create(
        settings={"defaultDuration": 30, "bookingHorizonDays": 60, "notificationEmail": OWNER},
        hosts=[
            {"name": "Dr. Kim", "email": "kim@clinic.test"},
            {"name": "Dr. Lee", "email": "lee@clinic.test"},
        ],
        eventTypes=[
            {
                "name": "Cleaning",
                "duration": 30,
                "availabilityProfile": "Office",
                "assignment": "round_robin",
                "hosts": [{"name": "Dr. Kim"}, {"name": "Dr. Lee"}],
            }
        ],
    )
    client = app.test_client()
    booking = create(client, tenant, ny(MONDAY, 10), hostId=tenant.hosts["Dr. Kim"])
    deliver_all()
    inbox.clear()
    moved = client.put(
        f"/v1/api/calendar/event-types/{tenant.event_types['Cleaning']}/bookings/{booking['id']}",
        json={"hostId": tenant.hosts["Dr. Lee"]},
        headers=tenant.headers(),
    )
    assert moved.status_code == 200, moved.json
    deliver_all()
    assert sorted(rcpt for _, (rcpt,) in inbox.envelopes) == [
        OWNER,
        "kim@clinic.test",
        "lee@clinic.test",
        "pat@example.test",
        "sam@example.test",
    ]
    (kim,) = inbox.to("kim@clinic.test")
    assert "it is no longer yours" in kim.get_body(("plain",)).get_content()
    assert invitation(kim)[0] == "CANCEL"
    (lee,) = inbox.to("lee@clinic.test")
    assert "This booking is now with Dr. Lee." in lee.get_body(("plain",)).get_content()
    assert invitation(lee)[0] == "REQUEST"
    (pat,) = inbox.to("pat@example.test")
    assert "Your booking is now with Dr. Lee." in pat.get_body(("plain",)).get_content()
