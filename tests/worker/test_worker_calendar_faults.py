"""Connected calendars under faults, through a real Celery worker on the embedded broker (kombu's
SQLAlchemy transport on the service's database): broken calendars are recorded and leave their
busy time as it was while a healthy one syncs in the same run, and a worker killed in the middle
of a write-back leaves the booking's event in the calendar exactly once after it is restarted."""

from __future__ import annotations

import os
import re
import signal
import uuid
from pathlib import Path

import psycopg
import pytest
from sqlalchemy import select
from sqlalchemy.engine import make_url

from app.extensions import db
from app.models import BlockedTime, CalendarConnection, OutboxDelivery, OutboxEvent
from app.models.types import utcnow
from app.services.common.encryption import encrypt_secret
from tests.celery_workers import celery_worker, wait_for
from tests.factories import book_through_api, first_read_over, next_monday, ny, z
from tests.postgres_servers import waiting_for_a_lock_on
from tests.radicale_servers import (
    PASSWORD,
    connection_doc,
    events_with_uid,
    radicale_server,
    stamp,
    vevent,
)
from tests.servers import MACHINE_REDIS
from worker.tasks.outbox import ASKS

pytestmark = [
    pytest.mark.slow,
    pytest.mark.date_sensitive,  # events on next Monday
]

MONDAY = next_monday()


def one_event(calendar, uid, hour):
    calendar.add_event(
        vevent(uid, f"DTSTART:{stamp(ny(MONDAY, hour))}", f"DTEND:{stamp(ny(MONDAY, hour, 30))}")
    )


def state(connection_id) -> CalendarConnection:
    db.session.expire_all()
    return db.session.get(CalendarConnection, connection_id)


def busy_rows(connection_id):
    db.session.expire_all()
    return db.session.execute(
        select(BlockedTime.id, BlockedTime.external_uid, BlockedTime.start_at)
        .where(BlockedTime.calendar_connection_id == connection_id)
        .order_by(BlockedTime.id)
    ).all()


def test_broken_calendars_are_recorded_and_the_healthy_one_still_syncs(
    database_url, make_app, tenants, tmp_path
):
    app = make_app(REDIS_URL=None, CELERY_BROKER_URL=None)
    with (
        radicale_server(tmp_path / "healthy") as healthy,
        radicale_server(tmp_path / "stopped") as stopped,
        radicale_server(tmp_path / "auth", users={"dentist": PASSWORD}) as guarded,
        radicale_server(tmp_path / "frozen") as frozen,
    ):
        calendars = {
            "healthy": healthy.make_calendar("dentist", "Personal"),
            "malformed": healthy.make_calendar("hygienist", "Personal"),
            "stopped": stopped.make_calendar("dentist", "Personal"),
            "wrong-password": guarded.make_calendar("dentist", "Personal", PASSWORD),
            "never-answers": frozen.make_calendar("dentist", "Personal"),
        }
        for hour, calendar in enumerate(calendars.values(), start=9):
            one_event(calendar, f"busy-{hour}", hour)
        with app.app_context():
            tenant = tenants.create(
                calendarConnections=[
                    connection_doc("healthy", healthy, "dentist"),
                    connection_doc("malformed", healthy, "hygienist"),
                    connection_doc("stopped", stopped, "dentist"),
                    connection_doc("wrong-password", guarded, "dentist"),
                    connection_doc("never-answers", frozen, "dentist"),
                ]
            )
            ids = tenant.connections

        worker_log = tmp_path / "worker.log"
        with celery_worker(
            database_url, worker_log, CALDAV_TIMEOUT_SECONDS="2", SYNC_INTERVAL_SECONDS="3"
        ):
            celery = app.extensions["celery"]
            celery.send_task("calendars.sync_all")
            with app.app_context():
                assert wait_for(lambda: all(state(i).last_success_at for i in ids.values()))
                first = {name: busy_rows(i) for name, i in ids.items()}
                assert all(len(rows) == 1 for rows in first.values())
                before = utcnow()

                # Then everything but one calendar breaks.
                one_event(calendars["healthy"], "busy-later", 16)
                calendars["malformed"].add_event(  # recurrence in a calendar not Gregorian
                    vevent(
                        "julian",
                        f"DTSTART:{stamp(ny(MONDAY, 15))}",
                        f"DTEND:{stamp(ny(MONDAY, 16))}",
                    ).replace("VERSION:2.0\r\n", "VERSION:2.0\r\nCALSCALE:JULIAN\r\n")
                )
                stopped.stop()
                wrong = state(ids["wrong-password"])
                wrong.encrypted_secret = encrypt_secret("wrong-horse", "test-secret-key")
                db.session.commit()
                frozen.freeze()
                try:
                    celery.send_task("calendars.sync_all")
                    assert wait_for(
                        lambda: all(
                            state(i).last_attempt_at and state(i).last_attempt_at > before
                            for i in ids.values()
                        )
                    )
                finally:
                    frozen.thaw()

                assert [uid for _, uid, _ in busy_rows(ids["healthy"])] == [
                    "busy-9",
                    "busy-later",
                ]
                assert state(ids["healthy"]).consecutive_failures == 0
                malformed = state(ids["malformed"])  # the unreadable event alone is skipped
                assert (malformed.consecutive_failures, malformed.skipped_count) == (0, 1)
                assert "cannot read the event at" in malformed.skipped_reason
                assert busy_rows(ids["malformed"]) == first["malformed"]
                expected_errors = {
                    "stopped": "Connection refused",
                    "wrong-password": "rejected the username or password (HTTP 401)",
                    "never-answers": "did not answer within 2 s",
                }
                for name, fragment in expected_errors.items():
                    broken = state(ids[name])
                    assert fragment in (broken.last_error or ""), (name, broken.last_error)
                    assert broken.last_error_at > before and broken.consecutive_failures == 1
                    assert broken.busy_count == 1
                    assert busy_rows(ids[name]) == first[name]  # the last good busy time
    log = worker_log.read_text()
    assert PASSWORD not in log and "wrong-horse" not in log


def test_a_worker_killed_during_a_write_back_leaves_the_event_once(
    database_url, make_app, tenants, tmp_path
):
    """The worst moment: the event is in the calendar, its delivery not yet recorded (the
    test holds a lock that makes the worker wait to record it) and the worker is killed. The
    restarted worker's sweep writes it again, to the same place."""
    app = make_app(REDIS_URL=None, CELERY_BROKER_URL=None, OUTBOX_DISPATCH=True)
    worker_log = tmp_path / "worker.log"
    env = {"OUTBOX_SWEEP_GRACE_SECONDS": "1"}
    dsn = make_url(database_url).set(drivername="postgresql").render_as_string(False)
    with radicale_server(tmp_path / "radicale") as radicale:
        calendar = radicale.make_calendar("dentist", "Personal")
        with app.app_context():
            tenant = tenants.create(
                calendarConnections=[connection_doc("Personal", radicale, "dentist")]
            )
        client = app.test_client()

        with celery_worker(database_url, worker_log, **env) as worker:
            # The connection's first read (asked for when it was made) is over first: the
            # lock below is for the write-back's delivery alone.
            with app.app_context():
                assert wait_for(lambda: first_read_over(tenant.connections["Personal"]))
            with psycopg.connect(dsn) as lock:
                lock.execute("LOCK TABLE outbox_deliveries IN SHARE MODE")  # no one records
                booking = book_through_api(client, tenant, ny(MONDAY, 10)).json
                # The event is in the calendar and the delivery cannot be recorded (the lock is
                # ours): killed now, the write-back is done and not known to be.
                assert wait_for(lambda: events_with_uid(calendar, booking["uid"]), timeout=30)
                assert wait_for(lambda: waiting_for_a_lock_on(lock, "outbox_deliveries"))
                os.killpg(worker.pid, signal.SIGKILL)
                worker.wait()
                lock.rollback()

        with app.app_context():
            (event_id,) = db.session.scalars(select(OutboxEvent.id)).all()
            assert db.session.get(OutboxEvent, event_id).delivered_at is None
            assert db.session.scalars(select(OutboxDelivery)).all() == []
        with celery_worker(database_url, worker_log, **env):
            app.extensions["celery"].send_task("outbox.sweep")
            with app.app_context():

                def delivered():
                    db.session.expire_all()
                    return db.session.get(OutboxEvent, event_id).delivered_at is not None

                assert wait_for(delivered)
        assert worker_log.read_text().count(f"writing booking {booking['id']} ") == 2
        (event,) = events_with_uid(calendar, booking["uid"])
        assert event["DTSTART"].dt == ny(MONDAY, 10)
        assert len(calendar.events()) == 1


def handles_taken(log: Path, since: int) -> int:
    """How many ``outbox.handle`` tasks the worker took from byte ``since`` of its log."""
    return len(re.findall(r"Task outbox\.handle\[[0-9a-f-]+\] received", log.read_text()[since:]))


def test_a_later_event_waiting_on_a_stalled_write_back_costs_a_bounded_number_of_tasks(
    database_url, make_app, tenants, tmp_path
):
    """A booking is made and moved while its calendar's server is frozen: the move's
    write-back waits behind the booking's, which waits out its deadline. The move's task asks
    again a bounded number of times (``ASKS``, about 6 s), then leaves the move to the sweep,
    however long the deadline."""
    broker = {"CELERY_BROKER_URL": MACHINE_REDIS, "CELERY_QUEUE": f"test-{uuid.uuid4().hex}"}
    app = make_app(OUTBOX_DISPATCH=True, CALENDAR_LIVE_CHECK="off", **broker)
    worker_log = tmp_path / "worker.log"
    with radicale_server(tmp_path / "radicale") as radicale:
        radicale.make_calendar("dentist", "Personal")
        with app.app_context():
            tenant = tenants.create(
                calendarConnections=[connection_doc("Personal", radicale, "dentist")]
            )
        client = app.test_client()
        with celery_worker(
            database_url,
            worker_log,
            processes=2,
            CALDAV_TIMEOUT_SECONDS=str(STALL_S),
            **broker,
        ):
            with app.app_context():
                assert wait_for(lambda: first_read_over(tenant.connections["Personal"]))
            before = worker_log.stat().st_size
            radicale.freeze()
            try:
                booking = book_through_api(client, tenant, ny(MONDAY, 10)).json
                moved = client.put(
                    f"/v1/api/calendar/event-types/{tenant.event_types['Cleaning']}"
                    f"/bookings/{booking['id']}",
                    json={"startTime": z(ny(MONDAY, 11))},
                    headers=tenant.headers(),
                )
                assert moved.status_code == 200, moved.json
                with app.app_context():
                    # The booking's write-back waited out its deadline and waits to retry.
                    assert wait_for(
                        lambda: write_back_retrying(booking["id"]), timeout=STALL_S + 20
                    )
            finally:
                radicale.thaw()
            taken = handles_taken(worker_log, before)
    # Two events, three handlers each (write-back, mail, webhooks); the move's write-back
    # asking again at most ASKS times; the move's mail and webhooks once or twice each while
    # the booking's are under way. Asking every second, unbounded, took 25 in the same 8 s.
    assert taken <= 2 * 3 + ASKS + 4, worker_log.read_text()[before:]


STALL_S = 8


def write_back_retrying(booking_id: int) -> bool:
    db.session.expire_all()
    first = db.session.scalar(
        select(OutboxEvent.id)
        .where(OutboxEvent.booking_id == booking_id)
        .order_by(OutboxEvent.id)
        .limit(1)
    )
    record = db.session.get(OutboxDelivery, (first, "calendar_write_back"))
    return record is not None and record.status == "retrying"
