"""Fresh connected calendars over real HTTP, as a deployment runs them: the Procfile's web
(gunicorn), worker and beat, on PostgreSQL with Redis, with the Google and Microsoft fakes
pushing to the web's ``PUBLIC_URL`` and a real Radicale for the polled kind.

- a new connection is read within seconds of a worker running, also one asked for while no
  worker ran and whose enqueueing never reached a broker;
- with push on, an event added at Google or Microsoft stops being offered within seconds;
- with push off at the provider, a booking into an event added just before is refused
  (``external_busy``) by the live check;
- a CalDAV change is read by the poll within its interval plus one sync.

Slots are next week's, on the real clock (``date_sensitive``)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from flask import Flask
from flask_migrate import upgrade
from sqlalchemy import select

from app import create_app
from app.extensions import db
from app.models import CalendarConnection
from tests.celery_workers import celery_beat, celery_worker, wait_for
from tests.factories import (
    ALWAYS_OPEN,
    TenantFactory,
    changed_settings,
    connection_now,
    next_monday,
    ny,
    provider_connection,
    z,
)
from tests.google_servers import FakeGoogle
from tests.microsoft_servers import FakeMicrosoft
from tests.oauth_fakes import ACCOUNT_EMAIL
from tests.radicale_servers import connection_doc, fresh_user, radicale_server, vevent
from tests.servers import MACHINE_REDIS, gunicorn

pytestmark = [pytest.mark.slow, pytest.mark.date_sensitive, pytest.mark.one_shifted_clock]

MONDAY = next_monday()
POLL_SECONDS = 4


@dataclass
class Deployment:
    base: str  # the web's address, its PUBLIC_URL
    app: Flask  # on the deployment's database, for provisioning and checks
    google: FakeGoogle
    microsoft: FakeMicrosoft
    env: dict[str, str]
    database_url: str
    tmp_path: Path

    def tenant(self, *connections: dict[str, Any]):
        with self.app.app_context():
            return TenantFactory().create(
                calendarConnections=list(connections),
                availabilityProfiles=[
                    {"name": "Always", "default": True, "weeklyHours": ALWAYS_OPEN}
                ],
                eventTypes=[{"name": "Cleaning", "duration": 30, "availabilityProfile": "Always"}],
            )

    def connection(self, connection_id: int) -> CalendarConnection:
        return connection_now(self.app, connection_id)

    def offered(self, tenant, day=MONDAY) -> set[str]:
        answer = httpx.get(
            f"{self.base}/v1/api/calendar/availability",
            params={
                "startDate": day.isoformat(),
                "endDate": day.isoformat(),
                "eventTypeId": tenant.event_types["Cleaning"],
            },
            headers=tenant.headers(),
            timeout=10,
        )
        assert answer.status_code == 200, answer.text
        return {slot["start"] for slot in answer.json()[0]["slots"]}

    def book(self, tenant, start):
        return httpx.post(
            f"{self.base}/v1/api/calendar/event-types/{tenant.event_types['Cleaning']}/bookings",
            json={
                "startTime": z(start),
                "endTime": z(start + timedelta(minutes=30)),
                "attendees": [{"email": "pat@example.test"}],
            },
            headers=tenant.headers(),
            timeout=10,
        )


def _migrated_app(url: str, **config: Any) -> Flask:
    """The test process's app on the deployment's database and broker (it provisions, and
    hands the syncs it asks for to the deployment's worker)."""
    app = create_app({"SQLALCHEMY_DATABASE_URI": url, "SECRET_KEY": "test-secret-key", **config})
    with app.app_context():
        upgrade()
    return app


@pytest.fixture(scope="module")
def deployment(tmp_path_factory, postgres_database) -> Iterator[Deployment]:
    tmp_path = tmp_path_factory.mktemp("deployment")
    url = postgres_database()
    queue = f"test-{uuid.uuid4().hex}"
    broker = {"REDIS_URL": MACHINE_REDIS, "CELERY_QUEUE": queue}
    worker_broker = {"CELERY_BROKER_URL": MACHINE_REDIS, "CELERY_QUEUE": queue}
    app = _migrated_app(url, OUTBOX_DISPATCH=True, **worker_broker)
    with FakeGoogle() as google, FakeMicrosoft() as microsoft:
        google.add_account(ACCOUNT_EMAIL)
        microsoft.add_account(ACCOUNT_EMAIL)
        env = {
            **google.app_settings(),
            **microsoft.app_settings(),
            "CALENDAR_PUSH": "on",
            "CALDAV_ALLOW_PRIVATE": "1",
            "SYNC_INTERVAL_SECONDS": str(POLL_SECONDS),
        }
        web_env = {**env, **broker, "OUTBOX_DISPATCH": "1"}
        with gunicorn(url, workers=2, env=web_env, log_path=tmp_path / "web.log") as base:
            worker_env = {**env, **worker_broker, "PUBLIC_URL": base}
            deployment = Deployment(base, app, google, microsoft, worker_env, url, tmp_path)
            with (
                celery_worker(url, tmp_path / "worker.log", **worker_env),
                celery_beat(url, tmp_path / "beat.log", **worker_env),
            ):
                yield deployment
    with app.app_context():
        db.engine.dispose()


def test_a_new_connection_is_read_within_seconds_by_the_running_worker(deployment):
    tenant = deployment.tenant(provider_connection(deployment.google, "Google"))
    connection_id = tenant.connections["Google"]
    assert wait_for(lambda: deployment.connection(connection_id).last_success_at, timeout=20)


@pytest.mark.parametrize("provider", ["google", "microsoft"])
def test_a_pushed_change_stops_being_offered_within_seconds(deployment, provider):
    if provider == "google":
        fake, connection, calendar = (
            deployment.google,
            provider_connection(deployment.google, "Google"),
            ACCOUNT_EMAIL,
        )
    else:
        fake = deployment.microsoft
        connection, calendar = provider_connection(fake, "Outlook"), fake.default_calendar_id()
    tenant = deployment.tenant(connection)
    connection_id = next(iter(tenant.connections.values()))
    # Read, and its channel made (the worker's follow-up of the first sync).
    assert wait_for(lambda: deployment.connection(connection_id).last_success_at, timeout=20)
    with deployment.app.app_context():
        from app.models import PushChannel

        def channel_made():
            made = db.session.scalar(
                select(PushChannel.id).where(PushChannel.calendar_connection_id == connection_id)
            )
            db.session.rollback()
            return made

        assert wait_for(channel_made, timeout=20)
    slot = ny(MONDAY, 10)
    assert z(slot) in deployment.offered(tenant)
    fake.add_event(calendar, slot, slot + timedelta(hours=1))
    assert wait_for(lambda: z(slot) not in deployment.offered(tenant), timeout=15)
    assert deployment.connection(connection_id).last_notification_at is not None


@pytest.mark.parametrize("provider", ["google", "microsoft"])
def test_with_no_push_a_booking_into_an_event_added_just_before_is_external_busy(
    deployment, provider
):
    fake = deployment.google if provider == "google" else deployment.microsoft
    connection = provider_connection(fake, "Google" if provider == "google" else "Outlook")
    calendar = ACCOUNT_EMAIL if provider == "google" else fake.default_calendar_id()
    tenant = deployment.tenant(connection)
    connection_id = next(iter(tenant.connections.values()))
    assert wait_for(lambda: deployment.connection(connection_id).last_success_at, timeout=20)
    fake.push_enabled = False
    try:
        slot = ny(MONDAY, 13)
        fake.add_event(calendar, slot, slot + timedelta(hours=1))
        refused = deployment.book(tenant, slot)
    finally:
        fake.push_enabled = True
    assert refused.status_code == 400, refused.text
    assert refused.json()["code"] == "external_busy"
    assert z(slot) not in deployment.offered(tenant)


def test_a_caldav_change_is_read_within_the_poll_interval(deployment):
    with radicale_server(deployment.tmp_path / f"radicale-{uuid.uuid4().hex[:6]}") as radicale:
        user = fresh_user()
        calendar = radicale.make_calendar(user, "Personal")
        tenant = deployment.tenant(connection_doc("Personal", radicale, user))
        connection_id = tenant.connections["Personal"]
        assert wait_for(lambda: deployment.connection(connection_id).last_success_at, timeout=20)
        slot = ny(MONDAY, 15)
        assert z(slot) in deployment.offered(tenant)
        calendar.add_event(
            vevent(
                "dentist",
                f"DTSTART:{slot:%Y%m%dT%H%M%SZ}",
                f"DTEND:{slot + timedelta(hours=1):%Y%m%dT%H%M%SZ}",
            )
        )
        # The poll interval, its spread within it, and one sync.
        assert wait_for(
            lambda: z(slot) not in deployment.offered(tenant), timeout=3 * POLL_SECONDS + 10
        )


def test_a_connection_asked_for_while_no_worker_ran_is_read_when_one_starts(deployment, tmp_path):
    # The enqueueing never reaches a broker (as in a broker outage): the mark alone waits.
    with changed_settings(deployment.app, outbox_dispatch=False):
        tenant = deployment.tenant(provider_connection(deployment.google, "Google"))
    connection_id = tenant.connections["Google"]
    assert deployment.connection(connection_id).sync_requested_at is not None
    with celery_worker(deployment.database_url, tmp_path / "late-worker.log", **deployment.env):
        assert wait_for(lambda: deployment.connection(connection_id).last_success_at, timeout=20)
