"""Notifications and webhooks through a real Celery worker: bookings made, moved and cancelled
through the API reach a real SMTP server (aiosmtpd) and a real HTTP receiver on loopback."""

from __future__ import annotations

import json
import os
import re
import signal
import uuid
from datetime import UTC, datetime, timedelta
from datetime import time as wall_time
from urllib.parse import urlsplit
from zoneinfo import ZoneInfo

import icalendar
import pytest
from sqlalchemy import select
from standardwebhooks import Webhook

from app.extensions import db
from app.models import WebhookAttempt, WebhookDelivery
from app.models.types import utcnow
from tests.celery_workers import celery_worker, task_returned, wait_for, worker_idle
from tests.dashboard_users import csrf_token
from tests.factories import ALWAYS_OPEN, z
from tests.mail_servers import ics_of, smtp_server
from tests.servers import MACHINE_REDIS
from tests.webhook_receivers import webhook_receiver

pytestmark = pytest.mark.slow

OWNER = "front-desk@clinic.test"


def half_hour_from(instant: datetime, minutes: int) -> datetime:
    """A :00 or :30 instant at least ``minutes`` after ``instant``."""
    later = (instant + timedelta(minutes=minutes)).replace(second=0, microsecond=0)
    return later + timedelta(minutes=(30 - later.minute % 30) % 30)


def always_open(tenants, **extra):
    return tenants.create(
        settings={
            "defaultDuration": 30,
            "bookingHorizonDays": 60,
            "notificationEmail": OWNER,
            "reminderMinutesBefore": 120,
        },
        availabilityProfiles=[{"name": "Always", "default": True, "weeklyHours": ALWAYS_OPEN}],
        eventTypes=[{"name": "Cleaning", "duration": 30, "availabilityProfile": "Always"}],
        **extra,
    )


def booking_api(client, tenant):
    base = f"/v1/api/calendar/event-types/{tenant.event_types['Cleaning']}/bookings"

    def create(start):
        response = client.post(
            base,
            json={
                "startTime": z(start),
                "endTime": z(start + timedelta(minutes=30)),
                "title": "Cleaning",
                "timezone": "America/New_York",
                "attendees": [
                    {"email": "pat@example.test", "name": "Pat", "timezone": "Asia/Tokyo"}
                ],
            },
            headers=tenant.headers(),
        )
        assert response.status_code == 201, response.json
        return response.json

    def move(booking, start):
        response = client.put(
            f"{base}/{booking['id']}", json={"startTime": z(start)}, headers=tenant.headers()
        )
        assert response.status_code == 200, response.json

    def cancel(booking):
        response = client.delete(
            f"/v1/api/calendar/bookings/{booking['id']}", headers=tenant.headers()
        )
        assert response.status_code == 200, response.json

    return create, move, cancel


def invitation(message):
    calendar = icalendar.Calendar.from_ical(ics_of(message))
    event = calendar.walk("VEVENT")[0]
    return str(calendar["METHOD"]), str(event["UID"]), event["SEQUENCE"], event["DTSTART"].dt


TOKYO = ZoneInfo("Asia/Tokyo")


def tokyo(instant: datetime) -> str:
    return f"{instant.astimezone(TOKYO):%H:%M}"


def tokyo_ten_oclock_a_day_after(instant: datetime) -> datetime:
    """10:00 in Tokyo at least a day after ``instant``: a booking there and one two hours later
    stay on one Tokyo day, so their subjects read the same whatever the hour the test runs."""
    day = (instant + timedelta(days=1)).astimezone(TOKYO).date() + timedelta(days=1)
    return datetime.combine(day, wall_time(10), tzinfo=TOKYO).astimezone(UTC)


@pytest.mark.date_sensitive
def test_emails_follow_a_booking_through_the_worker(database_url, make_app, tenants, tmp_path):
    queue = f"test-{uuid.uuid4().hex}"
    broker = {"CELERY_BROKER_URL": MACHINE_REDIS, "CELERY_QUEUE": queue}
    with smtp_server() as (smtp_url, inbox):
        mail = {"SMTP_URL": smtp_url, "MAIL_FROM": "Bookings <bookings@service.test>"}
        app = make_app(OUTBOX_DISPATCH=True, **broker, **mail)
        with app.app_context():
            tenant = always_open(tenants)
        create, move, cancel = booking_api(app.test_client(), tenant)
        now = utcnow()

        log = tmp_path / "worker.log"
        with celery_worker(database_url, log, **broker, **mail):
            first = tokyo_ten_oclock_a_day_after(now)
            booking = create(first)
            moved_to = first + timedelta(hours=2)
            move(booking, moved_to)
            cancel(booking)
            messages = inbox.wait_for(6)  # Pat and the owner, three times
            to_pat = inbox.to("pat@example.test")
            assert [m["Subject"].split(":")[0] for m in to_pat] == [
                "Booked",
                "Moved",
                "Cancelled",
            ]
            assert [invitation(m)[0] for m in to_pat] == ["REQUEST", "REQUEST", "CANCEL"]
            assert {invitation(m)[1] for m in messages} == {booking["uid"]}
            assert [invitation(m)[2] for m in to_pat] == [0, 1, 2]
            assert invitation(to_pat[1])[3] == moved_to
            assert f"{tokyo(moved_to)}–" in to_pat[1]["Subject"]  # Pat's own timezone
            assert "(Asia/Tokyo)" in to_pat[1]["Subject"]
            assert "(America/New_York)" in inbox.to(OWNER)[1]["Subject"]

            # Reminders, 2 hours before: one for the time the booking moved to, none for a
            # cancelled booking.
            soon = create(half_hour_from(now, 24 * 60 + 4 * 60))
            doomed = create(half_hour_from(now, 40))  # due now, but …
            cancel(doomed)  # … cancelled
            move(soon, half_hour_from(now, 6 * 60))  # not due yet
            due_at = half_hour_from(now, 35)
            move(soon, due_at)  # due now
            inbox.wait_for(6 + 10)  # two bookings made, one moved twice, one cancelled
            app.extensions["celery"].send_task("notifications.send_reminders")
            reminder = wait_for(
                lambda: [m for m in inbox.to("pat@example.test") if "Reminder" in m["Subject"]]
            )
            assert reminder
            again = app.extensions["celery"].send_task("notifications.send_reminders")
            assert task_returned(log, again.id) == "0"  # the second run sent none
            reminders = [m for m in inbox.to("pat@example.test") if "Reminder" in m["Subject"]]
            (only,) = reminders
            assert invitation(only)[1] == soon["uid"] and invitation(only)[3] == due_at


def test_a_webhook_is_retried_through_the_worker_until_it_is_taken(
    database_url, make_app, tenants, tmp_path
):
    queue = f"test-{uuid.uuid4().hex}"
    broker = {"CELERY_BROKER_URL": MACHINE_REDIS, "CELERY_QUEUE": queue}
    hooks = {"WEBHOOK_ALLOW_PRIVATE": "1", "WEBHOOK_RETRY_BASE_SECONDS": "0.5"}
    with webhook_receiver([500, 500]) as receiver:
        app = make_app(OUTBOX_DISPATCH=True, WEBHOOK_ALLOW_PRIVATE=True, **broker)
        with app.app_context():
            tenant = always_open(
                tenants, webhooks=[{"name": "crm", "url": receiver.url, "events": ["*"]}]
            )
        secret = tenant.raw["agencies"][0]["subAccounts"][0]["webhooks"]["crm"]["secret"]
        create, _, _ = booking_api(app.test_client(), tenant)
        with celery_worker(database_url, tmp_path / "worker.log", **broker, **hooks):
            booking = create(half_hour_from(utcnow(), 24 * 60))
            requests = receiver.wait_for(3)
            with app.app_context():
                assert wait_for(lambda: _status_of_only_delivery() == "succeeded")
                codes = [a.status_code for a in db.session.scalars(select(WebhookAttempt))]
    assert sorted(codes, key=lambda c: c != 500) == [500, 500, 200]
    assert len({r.headers["webhook-id"] for r in requests}) == 1
    for request in requests:
        payload = Webhook(secret).verify(request.body, request.headers)
        assert payload["data"]["booking"]["uid"] == booking["uid"]


def _status_of_only_delivery() -> str:
    db.session.expire_all()
    (delivery,) = db.session.scalars(select(WebhookDelivery)).all()
    return delivery.status


def test_a_worker_killed_mid_delivery_delivers_exactly_once_more(
    database_url, make_app, tenants, tmp_path
):
    hooks = {
        "WEBHOOK_ALLOW_PRIVATE": "1",
        "WEBHOOK_LEASE_SECONDS": "1",
        "WEBHOOK_TIMEOUT_SECONDS": "30",
    }
    log = tmp_path / "worker.log"
    with webhook_receiver(["hang"], hang_seconds=15) as receiver:
        app = make_app(
            REDIS_URL=None, CELERY_BROKER_URL=None, OUTBOX_DISPATCH=True, WEBHOOK_ALLOW_PRIVATE=True
        )
        with app.app_context():
            tenant = always_open(
                tenants, webhooks=[{"name": "crm", "url": receiver.url, "events": ["*"]}]
            )
        create, _, _ = booking_api(app.test_client(), tenant)
        with celery_worker(database_url, log, **hooks) as worker:
            create(half_hour_from(utcnow(), 24 * 60))
            receiver.wait_for(1)  # the POST is in flight, its answer never comes
            os.killpg(worker.pid, signal.SIGKILL)
            worker.wait()
        restarted = log.stat().st_size
        with celery_worker(database_url, log, **hooks):
            app.extensions["celery"].send_task("webhooks.sweep")
            receiver.wait_for(2)
            with app.app_context():
                assert wait_for(lambda: _status_of_only_delivery() == "succeeded")
            swept = app.extensions["celery"].send_task("webhooks.sweep")
            assert task_returned(log, swept.id) is not None  # a sweep after the success …
            assert wait_for(lambda: worker_idle(log, restarted))  # … and nothing left to run
            assert len(receiver.requests) == 2
    first, second = receiver.requests
    assert first.headers["webhook-id"] == second.headers["webhook-id"]
    assert first.body == second.body


@pytest.mark.date_sensitive  # a booking three days from now
def test_from_the_invitation_mail_alone_pat_moves_then_cancels_and_everyone_follows(
    database_url, make_app, tenants, tmp_path
):
    """Pat's mail carries Pat's link; through it Pat moves the booking, then cancels it, and the
    business's mail, the agent's webhook and Pat's calendar (the invitations) all follow, each
    saying Pat did it."""
    queue = f"test-{uuid.uuid4().hex}"
    broker = {"CELERY_BROKER_URL": MACHINE_REDIS, "CELERY_QUEUE": queue}
    with smtp_server() as (smtp_url, inbox), webhook_receiver() as receiver:
        mail = {"SMTP_URL": smtp_url, "MAIL_FROM": "Bookings <bookings@service.test>"}
        hooks = {"WEBHOOK_ALLOW_PRIVATE": "1"}
        app = make_app(OUTBOX_DISPATCH=True, WEBHOOK_ALLOW_PRIVATE=True, **broker, **mail)
        with app.app_context():
            tenant = always_open(
                tenants, webhooks=[{"name": "crm", "url": receiver.url, "events": ["*"]}]
            )
        client = app.test_client()
        create, _, _ = booking_api(client, tenant)
        with celery_worker(database_url, tmp_path / "worker.log", **broker, **mail, **hooks):
            start = half_hour_from(utcnow(), 3 * 24 * 60)
            booking = create(start)
            inbox.wait_for(2)  # Pat and the owner
            (booked,) = inbox.to("pat@example.test")
            text = booked.get_body(("plain",)).get_content()
            link = re.search(r"Reschedule or cancel: (\S+)", text).group(1)
            path = urlsplit(link).path

            new_start = start + timedelta(hours=3)
            chosen = client.post(
                f"{path}/reschedule",
                data={"csrf_token": csrf_token(client, path), "start": new_start.isoformat()},
            )
            assert chosen.status_code == 200
            confirm = dict(
                re.findall(
                    r'name="(csrf_token|start|hold)" type="hidden" value="([^"]*)"',
                    chosen.get_data(as_text=True),
                )
            )
            assert client.post(f"{path}/reschedule/confirm", data=confirm).status_code == 302
            client.post(f"{path}/cancel", data={"csrf_token": csrf_token(client, path)})

            inbox.wait_for(6)  # Pat and the owner, three times
            requests = receiver.wait_for(3)

    to_pat = inbox.to("pat@example.test")
    assert [invitation(m)[0] for m in to_pat] == ["REQUEST", "REQUEST", "CANCEL"]
    assert [invitation(m)[2] for m in to_pat] == [0, 1, 2]
    assert invitation(to_pat[1])[3] == new_start
    assert "You moved your booking." in to_pat[1].get_body(("plain",)).get_content()
    assert "You cancelled your booking." in to_pat[2].get_body(("plain",)).get_content()
    owner = [m.get_body(("plain",)).get_content() for m in inbox.to(OWNER)]
    assert "The attendee moved a booking." in owner[1]
    assert "The attendee cancelled a booking." in owner[2]
    payloads = [json.loads(r.body) for r in requests]
    assert [(p["type"], p["actor"], p["sequence"]) for p in payloads] == [
        ("booking.created", "business", 0),
        ("booking.rescheduled", "attendee", 1),
        ("booking.cancelled", "attendee", 2),
    ]
    assert payloads[0]["data"]["booking"]["attendees"][0]["manageUrl"] == link
    assert payloads[0]["data"]["booking"]["uid"] == booking["uid"]
