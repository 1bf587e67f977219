"""Issue 41's "done when", through a real Celery worker (Redis broker, PostgreSQL): an agent books
a Google Meet consultation and a Microsoft Teams one through the API, the worker writes each
booking's event with its meeting at the loopback fakes of Google Calendar and Microsoft Graph,
and the join link reaches the booking (the API), the attendee's mail and its invitation
(LOCATION, URL, CONFERENCE) and a ``booking.updated`` webhook. A reschedule keeps the meeting,
a cancel deletes the event, and each booking made one meeting."""

from __future__ import annotations

import json
import uuid
from datetime import datetime, timedelta

import icalendar
import pytest

from app.models.types import utcnow
from app.services.integrations.calendars.providers.google import google_event_id
from tests.celery_workers import celery_worker, wait_for
from tests.factories import ALWAYS_OPEN, provider_connection, z
from tests.mail_servers import ics_of, smtp_server
from tests.oauth_fakes import ACCOUNT_EMAIL
from tests.servers import MACHINE_REDIS
from tests.webhook_receivers import webhook_receiver

pytestmark = [pytest.mark.slow, pytest.mark.date_sensitive]  # bookings a day from now

MEET = "https://meet.google.com/"
TEAMS = "https://teams.microsoft.com/l/meetup-join/"


def half_hour_from(instant: datetime, minutes: int) -> datetime:
    """A :00 or :30 instant at least ``minutes`` after ``instant``."""
    later = (instant + timedelta(minutes=minutes)).replace(second=0, microsecond=0)
    return later + timedelta(minutes=(30 - later.minute % 30) % 30)


def consultation(name: str, kind: str) -> dict:
    return {
        "name": name,
        "duration": 30,
        "availabilityProfile": "Always",
        "location": "Video call",
        "locationKind": kind,
    }


class Agent:
    """The agent's side of the API."""

    def __init__(self, client, tenant) -> None:
        self.client, self.tenant = client, tenant

    def book(self, event_type: str, start: datetime, email: str) -> dict:
        answer = self.client.post(
            f"/v1/api/calendar/event-types/{self.tenant.event_types[event_type]}/bookings",
            json={
                "startTime": z(start),
                "endTime": z(start + timedelta(minutes=30)),
                "attendees": [{"email": email, "name": email.split("@")[0].title()}],
            },
            headers=self.tenant.headers(),
        )
        assert answer.status_code == 201, answer.json
        return answer.json

    def booking(self, booking_id: int) -> dict:
        answer = self.client.get(
            f"/v1/api/calendar/bookings/{booking_id}", headers=self.tenant.headers()
        )
        assert answer.status_code == 200, answer.json
        return answer.json

    def link_of(self, booking: dict, prefix: str) -> str:
        """The booking's location once the worker has made it the meeting's link."""
        assert wait_for(
            lambda: (self.booking(booking["id"])["location"] or "").startswith(prefix), 30
        ), self.booking(booking["id"])
        return self.booking(booking["id"])["location"]

    def move(self, event_type: str, booking: dict, start: datetime) -> None:
        answer = self.client.put(
            f"/v1/api/calendar/event-types/{self.tenant.event_types[event_type]}"
            f"/bookings/{booking['id']}",
            json={"startTime": z(start), "endTime": z(start + timedelta(minutes=30))},
            headers=self.tenant.headers(),
        )
        assert answer.status_code == 200, answer.json

    def cancel(self, booking: dict) -> None:
        answer = self.client.delete(
            f"/v1/api/calendar/bookings/{booking['id']}", headers=self.tenant.headers()
        )
        assert answer.status_code == 200, answer.json


def mails(inbox, to: str, label: str) -> list:
    return [m for m in inbox.to(to) if m["Subject"].startswith(f"{label}: ")]


def one_mail(inbox, to: str, label: str):
    assert wait_for(lambda: mails(inbox, to, label), 30), [m["Subject"] for m in inbox.messages]
    (mail,) = mails(inbox, to, label)
    return mail


def invitation(mail) -> icalendar.Event:
    return icalendar.Calendar.from_ical(ics_of(mail)).walk("VEVENT")[0]


def updated_hook(receiver, uid: str) -> dict | None:
    for request in list(receiver.requests):
        payload = json.loads(request.body)
        if payload["type"] == "booking.updated" and payload["data"]["booking"]["uid"] == uid:
            return payload
    return None


def test_an_agent_books_meet_and_teams_consultations_and_reads_each_link_everywhere(
    database_url, make_app, tenants, tmp_path, google, microsoft
):
    queue = f"test-{uuid.uuid4().hex}"
    broker = {"CELERY_BROKER_URL": MACHINE_REDIS, "CELERY_QUEUE": queue}
    providers = {**google.app_settings(), **microsoft.app_settings()}
    with smtp_server() as (smtp_url, inbox), webhook_receiver() as receiver:
        mail = {"SMTP_URL": smtp_url, "MAIL_FROM": "Bookings <bookings@service.test>"}
        app = make_app(
            OUTBOX_DISPATCH=True, WEBHOOK_ALLOW_PRIVATE=True, **broker, **mail, **providers
        )
        with app.app_context():
            tenant = tenants.create(
                settings={"defaultDuration": 30, "bookingHorizonDays": 60},
                availabilityProfiles=[
                    {"name": "Always", "default": True, "weeklyHours": ALWAYS_OPEN}
                ],
                eventTypes=[
                    consultation("Meet consultation", "google_meet"),
                    consultation("Teams consultation", "microsoft_teams"),
                ],
                calendarConnections=[
                    provider_connection(google, "Google"),
                    provider_connection(microsoft, "Outlook"),
                ],
                webhooks=[{"name": "crm", "url": receiver.url, "events": ["booking.updated"]}],
            )
        agent = Agent(app.test_client(), tenant)
        env = {**broker, **mail, **providers, "WEBHOOK_ALLOW_PRIVATE": "1"}
        with celery_worker(database_url, tmp_path / "worker.log", **env):
            start = half_hour_from(utcnow(), 24 * 60)
            meet = agent.book("Meet consultation", start, "pat@example.test")
            teams = agent.book("Teams consultation", start + timedelta(hours=1), "sam@example.test")
            # The create answers before the meeting exists: the event type's text.
            assert meet["location"] == teams["location"] == "Video call"

            for booking, prefix, label, to in (
                (meet, MEET, "Google Meet", "pat@example.test"),
                (teams, TEAMS, "Microsoft Teams", "sam@example.test"),
            ):
                link = agent.link_of(booking, prefix)
                # The mail: the booking's first tells of the time, the update brings the link.
                assert (
                    "Join:" not in one_mail(inbox, to, "Booked").get_body(("plain",)).get_content()
                )
                update = one_mail(inbox, to, "Updated")
                assert f"Join: {link}" in update.get_body(("plain",)).get_content()
                event = invitation(update)
                assert str(event["UID"]) == booking["uid"]
                assert str(event["LOCATION"]) == str(event["URL"]) == link
                (conference,) = event.conferences
                assert (conference.uri, conference.feature, conference.label) == (
                    link,
                    "VIDEO",
                    label,
                )
                # The webhook.
                assert wait_for(lambda b=booking: updated_hook(receiver, b["uid"]), 30)
                hook = updated_hook(receiver, booking["uid"])
                assert hook["data"]["booking"]["location"] == link

            meet_link, teams_link = agent.link_of(meet, MEET), agent.link_of(teams, TEAMS)

            # A reschedule keeps the meeting: the event moves, its conference stays.
            later = start + timedelta(hours=3)
            agent.move("Meet consultation", meet, later)
            event_id = google_event_id(meet["uid"])
            assert wait_for(
                lambda: google.event(ACCOUNT_EMAIL, event_id)["start"]["dateTime"] == z(later), 30
            )
            assert google.event(ACCOUNT_EMAIL, event_id)["hangoutLink"] == meet_link
            moved = one_mail(inbox, "pat@example.test", "Moved")
            assert f"Join: {meet_link}" in moved.get_body(("plain",)).get_content()
            assert agent.booking(meet["id"])["location"] == meet_link

            # A cancel deletes the event, and its meeting with it.
            agent.cancel(teams)
            calendar = microsoft.default_calendar_id()
            assert wait_for(
                lambda: not [e for e in microsoft.events(calendar) if e["isOnlineMeeting"]], 30
            )
            assert agent.booking(teams["id"])["status"] == "cancelled"

            # One meeting each, however often their events were written.
            assert len(google.conferences_made) == 1 and len(microsoft.meetings_made) == 1
            assert microsoft.meetings_made[0]["joinUrl"] == teams_link
