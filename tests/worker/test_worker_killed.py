"""A worker's pool process killed in the middle of a task, as production runs it (PostgreSQL,
Redis as the broker): the task was acknowledged late, so the worker hands it back to the
broker, the task runs again by itself (no sweep, no restart) and its effect happens once."""

from __future__ import annotations

import os
import signal
import uuid
from pathlib import Path

import psycopg
import pytest
from sqlalchemy import select
from sqlalchemy.engine import make_url

from app.extensions import db
from app.models import OutboxDelivery, OutboxEvent
from tests.celery_workers import celery_worker, wait_for
from tests.factories import book_through_api, first_read_over, next_monday, ny
from tests.postgres_servers import waiting_for_a_lock_on
from tests.radicale_servers import connection_doc, events_with_uid, radicale_server
from tests.servers import MACHINE_REDIS

pytestmark = [
    pytest.mark.slow,
    pytest.mark.date_sensitive,  # events on next Monday
    pytest.mark.one_shifted_clock,  # killing workers; the dates only pick the slots
]

MONDAY = next_monday()


def pool_process_of(worker_pid: int) -> int:
    (child,) = Path(f"/proc/{worker_pid}/task/{worker_pid}/children").read_text().split()
    return int(child)


def test_a_task_whose_pool_process_is_killed_runs_again_and_writes_the_event_once(
    database_url, make_app, tenants, tmp_path
):
    """The worst moment: the booking's event is already in the calendar and the delivery not
    yet recorded (the test holds a lock that makes the worker wait to record it) when the
    process running the task is killed."""
    broker = {"CELERY_BROKER_URL": MACHINE_REDIS, "CELERY_QUEUE": f"test-{uuid.uuid4().hex}"}
    # Only the broker's redelivery may run the task again: the sweep would wait an hour.
    env = {**broker, "OUTBOX_SWEEP_GRACE_SECONDS": "3600"}
    app = make_app(OUTBOX_DISPATCH=True, **broker)
    log = tmp_path / "worker.log"
    dsn = make_url(database_url).set(drivername="postgresql").render_as_string(False)
    with radicale_server(tmp_path / "radicale") as radicale:
        calendar = radicale.make_calendar("dentist", "Personal")
        with app.app_context():
            tenant = tenants.create(
                calendarConnections=[connection_doc("Personal", radicale, "dentist")]
            )
        with celery_worker(database_url, log, **env) as worker:
            with app.app_context():  # its first read, asked for when it was made, is over
                assert wait_for(lambda: first_read_over(tenant.connections["Personal"]))
            with psycopg.connect(dsn) as lock:
                lock.execute("LOCK TABLE outbox_deliveries IN SHARE MODE")  # no one records
                booking = book_through_api(app.test_client(), tenant, ny(MONDAY, 10)).json
                assert wait_for(lambda: events_with_uid(calendar, booking["uid"]), timeout=30)
                # The event is in the calendar, and the task is waiting for the lock to record
                # its delivery.
                assert wait_for(lambda: waiting_for_a_lock_on(lock, "outbox_deliveries"))
                killed = pool_process_of(worker.pid)
                os.kill(killed, signal.SIGKILL)
                assert wait_for(lambda: "SIGKILL" in log.read_text(), timeout=30)
                lock.rollback()

            with app.app_context():

                def delivered() -> bool:
                    db.session.expire_all()
                    (event,) = db.session.scalars(select(OutboxEvent)).all()
                    return event.delivered_at is not None

                assert wait_for(delivered, timeout=60)
                (write_back,) = db.session.scalars(
                    select(OutboxDelivery).where(OutboxDelivery.handler == "calendar_write_back")
                ).all()
            assert worker.poll() is None  # the same worker, not a restarted one
            assert pool_process_of(worker.pid) != killed
        (event,) = events_with_uid(calendar, booking["uid"])
        assert event["DTSTART"].dt == ny(MONDAY, 10)
        assert len(calendar.events()) == 1
    assert log.read_text().count(f"writing booking {booking['id']} ") == 2
    assert write_back.attempts == 1  # the killed attempt left nothing behind
