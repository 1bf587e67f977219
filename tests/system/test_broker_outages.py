"""Workers keep consuming through a broker outage: under a steady booking load, with the
broker's Redis frozen (SIGSTOP) for 5 s, or stopped and started afresh 5 s later, every worker
goes on taking tasks once it is back. A booking made afterwards gets its webhook and its mail
within a minute, and every outbox event of the load is delivered, with its webhook: none is
lost to a worker that stopped, nor to a message Redis lost (the sweeps hand those over again).

A frozen Redis is the hard case for a consumer, as for a request (``test_frozen_backends``):
the kernel keeps accepting and acknowledging what is sent, so only the client's own timeouts
end a wait. A worker whose acknowledgement of a finished task fell inside the freeze used to
log ``Couldn't ack … TimeoutError`` and never take another task, while its heartbeat went on
and ``/statusz`` counted it (issue 48).

Real processes throughout: a Redis of the test's own (never the machine's shared one) as the
broker, gunicorn as the Procfile serves it on PostgreSQL, two ``celery worker`` processes and
``celery beat``, a real SMTP server and a real webhook receiver on loopback.
"""

from __future__ import annotations

import json
import threading
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

import psycopg
import pytest
from flask_migrate import upgrade

from app import create_app
from app.extensions import db
from tests.celery_workers import celery_beat, celery_worker, tasks_received, wait_for
from tests.factories import ALWAYS_OPEN, Tenant, TenantFactory, z
from tests.mail_servers import Inbox, smtp_server
from tests.redis_servers import OwnRedis, own_redis_server
from tests.servers import gunicorn
from tests.webhook_receivers import Receiver, webhook_receiver

pytestmark = pytest.mark.slow

OUTAGE_S = 5.0
SETTLE_S = 4.0  # steady load before the outage and after it
CREATORS = 2
PAUSE_S = 0.1  # between one creator's requests
SLOT = timedelta(minutes=15)
OWNER = "front-desk@clinic.test"
# The promise: a booking made after the thaw is told within a minute.
TOLD_WITHIN_S = 60.0
# Every event of the load delivered: what a failed publish (or a restarted Redis) lost waits
# for beat's sweeps (every minute: outbox events after the grace below, webhook attempts once
# overdue by the lease below, 5 minutes by default), so this bounds a sweep or two.
ALL_DELIVERED_WITHIN_S = 150.0
SWEEP_GRACE_S = "10"
WEBHOOK_LEASE_S = "20"


@dataclass
class Deployment:
    redis: OwnRedis
    database_url: str
    base: str
    tenant: Tenant
    inbox: Inbox
    receiver: Receiver
    worker_logs: list[Path]


def provision(database_url: str, webhook_url: str) -> Tenant:
    """Migrate, and provision a tenant whose 15-minute event type can be booked at any hour
    from now on, whose owner is mailed and whose webhook is called for every new booking."""
    app = create_app(
        {
            "SQLALCHEMY_DATABASE_URI": database_url,
            "SECRET_KEY": "test-secret-key",  # as the servers and workers have it
            "OUTBOX_DISPATCH": False,
            "WEBHOOK_ALLOW_PRIVATE": True,
        }
    )
    with app.app_context():
        upgrade()
        tenant = TenantFactory().create(
            settings={
                "defaultDuration": 15,
                "minimumNoticeMinutes": 0,
                "bookingHorizonDays": 365,
                "notificationEmail": OWNER,
            },
            availabilityProfiles=[{"name": "Always", "default": True, "weeklyHours": ALWAYS_OPEN}],
            eventTypes=[{"name": "Quick", "duration": 15, "availabilityProfile": "Always"}],
            webhooks=[{"name": "crm", "url": webhook_url, "events": ["booking.created"]}],
        )
        db.session.remove()
        db.engine.dispose()
    return tenant


@pytest.fixture
def deployment(postgres_database, tmp_path: Path) -> Iterator[Deployment]:
    with ExitStack() as stack:
        own_redis = stack.enter_context(own_redis_server(tmp_path))
        smtp_url, inbox = stack.enter_context(smtp_server())
        receiver = stack.enter_context(webhook_receiver())
        database_url = postgres_database()
        tenant = provision(database_url, receiver.url)
        env = {
            "REDIS_URL": own_redis.url,
            "RATELIMIT_KEY_PREFIX": f"outage-{uuid.uuid4().hex}",
            "SMTP_URL": smtp_url,
            "MAIL_FROM": "Bookings <bookings@service.test>",
            "WEBHOOK_ALLOW_PRIVATE": "1",
            "OUTBOX_SWEEP_GRACE_SECONDS": SWEEP_GRACE_S,
            "WEBHOOK_LEASE_SECONDS": WEBHOOK_LEASE_S,
        }
        web_env = {**env, "OUTBOX_DISPATCH": "1", "RATE_LIMIT": "1000000/minute"}
        base = stack.enter_context(
            gunicorn(database_url, workers=2, env=web_env, log_path=tmp_path / "web.log")
        )
        logs = [tmp_path / "worker-1.log", tmp_path / "worker-2.log"]
        for n, log in enumerate(logs, start=1):
            stack.enter_context(
                celery_worker(database_url, log, processes=2, name=f"outage{n}", **env)
            )
        stack.enter_context(celery_beat(database_url, tmp_path / "beat.log", **env))
        yield Deployment(own_redis, database_url, base, tenant, inbox, receiver, logs)


def create(deployment: Deployment, start: datetime, email: str) -> tuple[int, dict]:
    payload = {
        "startTime": z(start),
        "endTime": z(start + SLOT),
        "attendees": [{"email": email}],
        "idempotencyKey": uuid.uuid4().hex,
    }
    path = f"/v1/api/calendar/event-types/{deployment.tenant.event_types['Quick']}/bookings"
    request = urllib.request.Request(
        deployment.base + path,
        data=json.dumps(payload).encode(),
        method="POST",
        headers={**deployment.tenant.headers(), "Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


@dataclass
class BookingLoad:
    """Creators booking one slot after another (each its own slot), until stopped."""

    deployment: Deployment
    created: list[int] = field(default_factory=list)
    statuses: list[int] = field(default_factory=list)
    stopping: threading.Event = field(default_factory=threading.Event)

    def __post_init__(self) -> None:
        today = datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
        self.first_slot = today + timedelta(days=2)
        self.next_slot = 0
        self.lock = threading.Lock()

    def slot(self) -> datetime:
        with self.lock:
            n, self.next_slot = self.next_slot, self.next_slot + 1
        return self.first_slot + n * SLOT

    def creator(self) -> None:
        while not self.stopping.is_set():
            start = self.slot()
            status, body = create(self.deployment, start, f"load{start:%d%H%M}@example.test")
            with self.lock:
                self.statuses.append(status)
                if status == 201:
                    self.created.append(body["id"])
            time.sleep(PAUSE_S)

    def __enter__(self) -> BookingLoad:
        self.threads = [threading.Thread(target=self.creator) for _ in range(CREATORS)]
        for thread in self.threads:
            thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stopping.set()
        for thread in self.threads:
            thread.join(timeout=30)


def undelivered(database_url: str) -> int:
    plain = database_url.replace("postgresql+psycopg://", "postgresql://")
    with psycopg.connect(plain) as connection:
        (count,) = connection.execute(
            "SELECT count(*) FROM outbox_events WHERE delivered_at IS NULL"
        ).fetchone()
    return count


def webhook_errors(database_url: str) -> list[tuple]:
    """How the deliveries stand: (status, last error, how many)."""
    plain = database_url.replace("postgresql+psycopg://", "postgresql://")
    with psycopg.connect(plain) as connection:
        return connection.execute(
            "SELECT status, last_error, count(*) FROM webhook_deliveries GROUP BY 1, 2"
        ).fetchall()


def webhooked_bookings(receiver: Receiver) -> set[int]:
    with receiver.lock:
        bodies = [json.loads(request.body) for request in receiver.requests]
    return {body["data"]["booking"]["id"] for body in bodies}


def outage(redis: OwnRedis, kind: str) -> None:
    """Redis away for ``OUTAGE_S``: frozen (SIGSTOP: connections kept, nothing answered), or
    restarted (stopped, then started afresh on its port: connections dropped, what it held
    lost)."""
    away, back = (redis.freeze, redis.thaw) if kind == "freeze" else (redis.stop, redis.start)
    away()
    try:
        time.sleep(OUTAGE_S)
    finally:
        back()


@pytest.mark.parametrize("kind", ["freeze", "restart"])
def test_every_worker_keeps_consuming_after_a_redis_outage_under_load(deployment, kind):
    logs = deployment.worker_logs
    with BookingLoad(deployment) as load:
        time.sleep(SETTLE_S)
        outage(deployment.redis, kind)
        back_at = [log.stat().st_size for log in logs]
        time.sleep(SETTLE_S)
    assert load.created, load.statuses

    # Every worker takes tasks again (a stuck one takes none, however long the queue).
    def taking() -> list[bool]:
        return [tasks_received(log, since) > 0 for log, since in zip(logs, back_at, strict=True)]

    assert wait_for(lambda: all(taking()), timeout=TOLD_WITHIN_S), (
        f"workers taking tasks after the {kind}: {taking()}\n"
        + "\n".join(log.read_text()[-3000:] for log in logs)
    )

    # A booking made now is told within a minute, by webhook and by mail.
    after = load.slot() + timedelta(days=1)
    status, booking = create(deployment, after, "after-the-outage@example.test")
    assert status == 201, booking
    booked_at = time.monotonic()
    told = wait_for(
        lambda: (
            booking["id"] in webhooked_bookings(deployment.receiver)
            and bool(deployment.inbox.to("after-the-outage@example.test"))
        ),
        timeout=TOLD_WITHIN_S,
    )
    assert told, (
        f"no webhook or mail within {TOLD_WITHIN_S} s of the booking:"
        f" {webhook_errors(deployment.database_url)}"
    )
    told_s = time.monotonic() - booked_at

    # Nothing lost: every event of the load delivered, every booking's webhook received.
    assert wait_for(lambda: undelivered(deployment.database_url) == 0, ALL_DELIVERED_WITHIN_S), (
        f"{undelivered(deployment.database_url)} outbox events undelivered"
    )

    def missing() -> set[int]:
        return set(load.created) - webhooked_bookings(deployment.receiver)

    assert wait_for(lambda: not missing(), ALL_DELIVERED_WITHIN_S), (
        f"{len(missing())} bookings without their webhook: {webhook_errors(deployment.database_url)}"
    )
    print(
        f"\nRedis {kind} for {OUTAGE_S:.0f} s under load: {len(load.created)} bookings made;"
        f" a booking after it told in {told_s:.1f} s; every event and webhook delivered"
        f" {time.monotonic() - booked_at:.0f} s after it"
    )
