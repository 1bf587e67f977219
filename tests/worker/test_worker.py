"""A real ``celery worker`` process runs the tasks the app enqueues, on both brokers: the
embedded default (kombu's SQLAlchemy transport on the service's own PostgreSQL database) and
Redis."""

from __future__ import annotations

import urllib.request
import uuid
from datetime import datetime, timedelta

import pytest
from sqlalchemy import select, update

from app.extensions import db
from app.jobs.calendars import keep_channels
from app.models import (
    Booking,
    CalendarConnection,
    OutboxEvent,
    PushChannel,
    SlotHold,
    WorkerHeartbeat,
)
from app.models.types import utcnow
from app.services.health import HEARTBEAT_INTERVAL
from app.services.integrations.calendars.push import connections_due_for_channels
from tests.celery_workers import celery_worker, wait_for, worker_idle
from tests.factories import ALWAYS_OPEN, make_booking, make_outbox_event, provider_connection
from tests.servers import MACHINE_REDIS, free_port

pytestmark = pytest.mark.slow


def status_of(booking_id: int) -> str:
    db.session.expire_all()
    return db.session.get(Booking, booking_id).status


def finished_confirmed_booking(tenants) -> int:
    tenant = tenants.create(
        settings={"defaultDuration": 30, "bookingHorizonDays": 60, "autoCompleteBookings": True}
    )
    start = (utcnow() - timedelta(days=2)).replace(microsecond=0)
    return make_booking(tenant, start, status="confirmed").id


def test_the_worker_runs_tasks_through_the_embedded_broker(
    database_url, make_app, tenants, tmp_path
):
    app = make_app(REDIS_URL=None, CELERY_BROKER_URL=None)
    with app.app_context():
        booking_id = finished_confirmed_booking(tenants)
    broker = app.extensions["celery"].conf.broker_url
    assert broker == f"sqla+{database_url}"

    with celery_worker(database_url, tmp_path / "worker.log"):
        app.extensions["celery"].send_task("bookings.complete_finished")
        with app.app_context():
            assert wait_for(lambda: status_of(booking_id) == "completed")


def test_the_worker_runs_tasks_through_redis(database_url, make_app, tenants, tmp_path):
    queue = f"test-{uuid.uuid4().hex}"
    app = make_app(CELERY_BROKER_URL=MACHINE_REDIS, CELERY_QUEUE=queue)
    with app.app_context():
        booking_id = finished_confirmed_booking(tenants)

    with celery_worker(
        database_url, tmp_path / "worker.log", CELERY_BROKER_URL=MACHINE_REDIS, CELERY_QUEUE=queue
    ):
        app.extensions["celery"].send_task("bookings.complete_finished")
        with app.app_context():
            assert wait_for(lambda: status_of(booking_id) == "completed")
    assert "bookings.complete_finished" in (tmp_path / "worker.log").read_text()


def delivered(event_id: int) -> bool:
    db.session.expire_all()
    return db.session.get(OutboxEvent, event_id).delivered_at is not None


def test_a_committed_booking_event_reaches_the_worker(database_url, make_app, tenants, tmp_path):
    queue = f"test-{uuid.uuid4().hex}"
    app = make_app(CELERY_BROKER_URL=MACHINE_REDIS, CELERY_QUEUE=queue, OUTBOX_DISPATCH=True)
    with app.app_context():
        tenant = tenants.create(
            settings={"defaultDuration": 30, "bookingHorizonDays": 365},
            availabilityProfiles=[{"name": "Always", "default": True, "weeklyHours": ALWAYS_OPEN}],
            eventTypes=[{"name": "Visit", "duration": 30, "availabilityProfile": "Always"}],
        )
    start = (utcnow() + timedelta(days=3)).replace(minute=0, second=0, microsecond=0)
    metrics_port = free_port()
    with celery_worker(
        database_url,
        tmp_path / "worker.log",
        CELERY_BROKER_URL=MACHINE_REDIS,
        CELERY_QUEUE=queue,
        WORKER_METRICS_PORT=str(metrics_port),
    ):
        response = app.test_client().post(
            f"/v1/api/calendar/event-types/{tenant.event_types['Visit']}/bookings",
            json={
                "startTime": start.isoformat(),
                "endTime": (start + timedelta(minutes=30)).isoformat(),
                "attendees": [{"email": "pat@example.test"}],
            },
            headers=tenant.headers(),
        )
        assert response.status_code == 201
        with app.app_context():
            (event_id,) = db.session.scalars(select(OutboxEvent.id)).all()
            assert wait_for(lambda: delivered(event_id))
        with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics") as scraped:
            metrics = scraped.read().decode()
        with app.app_context():
            heartbeats = db.session.scalars(select(WorkerHeartbeat.worker)).all()
    assert "outbox.deliver" in (tmp_path / "worker.log").read_text()
    for handler in ("calendar_write_back", "notifications", "webhooks"):
        line = f'calendar_deliveries_total{{handler="{handler}",outcome="delivered"}} 1.0'
        assert line in metrics
    assert len(heartbeats) == 1 and heartbeats[0].startswith("celery@")


def worked_at() -> datetime | None:
    """When the one worker's heartbeat says it last took or ran a task."""
    db.session.expire_all()
    (heartbeat,) = db.session.scalars(select(WorkerHeartbeat)).all()
    return heartbeat.worked_at


def test_the_heartbeat_says_when_the_worker_last_took_a_task(database_url, make_app, tmp_path):
    """Beating is not consuming (a worker's consumer could stop after a broker outage while its
    timer beat on): the heartbeat carries when it last took a task, for ``/statusz``."""
    app = make_app(REDIS_URL=None, CELERY_BROKER_URL=None)
    log = tmp_path / "worker.log"
    with celery_worker(database_url, log):
        assert wait_for(lambda: worker_idle(log) and "received" in log.read_text())
        sent_at = utcnow()
        app.extensions["celery"].send_task("holds.purge_expired")
        with app.app_context():
            # The next beat (every HEARTBEAT_INTERVAL) says so.
            taken = HEARTBEAT_INTERVAL.total_seconds() + 15
            assert wait_for(lambda: (worked_at() or sent_at) > sent_at, timeout=taken)


def test_the_sweep_delivers_events_whose_dispatch_was_lost(
    database_url, make_app, tenants, tmp_path
):
    app = make_app(REDIS_URL=None, CELERY_BROKER_URL=None)
    with app.app_context():
        tenant = tenants.create()
        booking = make_booking(tenant, utcnow() + timedelta(days=3))
        # Committed, but the process died before handing it over.
        lost = make_outbox_event(booking, utcnow() - timedelta(minutes=2))
        event_id = lost.id

    with celery_worker(database_url, tmp_path / "worker.log"):
        app.extensions["celery"].send_task("outbox.sweep")
        with app.app_context():
            assert wait_for(lambda: delivered(event_id))


def test_beat_has_the_worker_purge_what_is_past_the_retention(
    database_url, make_app, tenants, tmp_path
):
    app = make_app(REDIS_URL=None, CELERY_BROKER_URL=None)
    schedule = app.extensions["celery"].conf.beat_schedule
    assert schedule["purge-old-records"]["task"] == "retention.purge"
    with app.app_context():
        tenant = tenants.create()
        booking = make_booking(tenant, utcnow() - timedelta(days=60))
        long_ago = utcnow() - timedelta(days=31)
        event_id = make_outbox_event(booking, long_ago, delivered_at=long_ago).id

    with celery_worker(database_url, tmp_path / "worker.log"):
        app.extensions["celery"].send_task("retention.purge")
        with app.app_context():
            assert wait_for(lambda: db.session.get(OutboxEvent, event_id) is None)
            db.session.expire_all()
            assert db.session.get(Booking, booking.id) is not None


def test_the_worker_purges_expired_holds(database_url, make_app, tenants, tmp_path):
    queue = f"test-{uuid.uuid4().hex}"
    app = make_app(CELERY_BROKER_URL=MACHINE_REDIS, CELERY_QUEUE=queue)
    with app.app_context():
        tenant = tenants.create()
        start = utcnow().replace(microsecond=0) + timedelta(days=1)
        for token, expires_at in (("gone", utcnow() - timedelta(seconds=1)), ("kept", None)):
            db.session.add(
                SlotHold(
                    sub_account_id=tenant.sub_account_id,
                    event_type_id=tenant.event_types["Cleaning"],
                    start_at=start,
                    end_at=start + timedelta(minutes=30),
                    occupied_start=start,
                    occupied_end=start + timedelta(minutes=30),
                    expires_at=expires_at or utcnow() + timedelta(minutes=10),
                    token_digest=token,
                    timezone="UTC",
                )
            )
            start += timedelta(hours=1)
        db.session.commit()

    def remaining() -> list[str]:
        db.session.expire_all()
        return db.session.scalars(select(SlotHold.token_digest)).all()

    with celery_worker(
        database_url, tmp_path / "worker.log", CELERY_BROKER_URL=MACHINE_REDIS, CELERY_QUEUE=queue
    ):
        app.extensions["celery"].send_task("holds.purge_expired")
        with app.app_context():
            assert wait_for(lambda: remaining() == ["kept"])


def channel_expiries() -> list[datetime]:
    db.session.expire_all()
    return list(db.session.scalars(select(PushChannel.expires_at).order_by(PushChannel.id)))


def test_beat_s_channel_upkeep_renews_each_due_connection_in_a_task_of_its_own(
    database_url, make_app, tenants, tmp_path, google
):
    queue = f"test-{uuid.uuid4().hex}"
    settings = {
        "CELERY_BROKER_URL": MACHINE_REDIS,
        "CELERY_QUEUE": queue,
        "CALENDAR_PUSH": "on",
        "PUBLIC_URL": "https://bookings.example.test",
        **google.app_settings(),
    }
    app = make_app(**settings)
    with app.app_context():
        connection_ids = []
        for name in ("Clinic", "Salon"):
            tenant = tenants.create(calendarConnections=[provider_connection(google, name)])
            connection_ids.append(tenant.connections[name])
            assert keep_channels(connection_ids[-1], utcnow()).made == 1
        soon = utcnow() + timedelta(hours=1)  # inside the day before expiry: due
        db.session.execute(update(PushChannel).values(expires_at=soon))
        # As after their first syncs: a worker starting has none to run (nor their follow-up).
        db.session.execute(update(CalendarConnection).values(sync_requested_at=None))
        db.session.commit()
        assert connections_due_for_channels(utcnow()) == connection_ids

    log = tmp_path / "worker.log"
    with celery_worker(database_url, log, **{k: str(v) for k, v in settings.items()}):
        app.extensions["celery"].send_task("calendars.keep_channels")
        with app.app_context():
            assert wait_for(lambda: all(e > soon + timedelta(days=2) for e in channel_expiries()))
    per_connection = [
        line
        for line in log.read_text().splitlines()
        if "Task calendars.keep_connection_channels[" in line and "succeeded" in line
    ]
    assert len(per_connection) == 2, per_connection
