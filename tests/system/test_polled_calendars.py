"""How soon a polled calendar is read again, under the Procfile's worker and beat with the default
interval (``SYNC_INTERVAL_SECONDS`` unset: 60 s), on the embedded broker (kombu's SQLAlchemy
transport on the service's database), as a fresh clone runs: an event added to a Radicale calendar
just after the connection's first read is stored as busy time (so no longer offered) within one
interval of that read plus a sync, whenever beat started and whatever the connection's own phase of
the interval is.

The event is a daily series begun long ago, so whatever today's date it is busy in the window
the sync reads: nothing here reads the calendar's dates."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from flask import Flask

from app import create_app
from app.extensions import db
from app.models.types import utcnow
from tests.celery_workers import celery_beat, celery_worker, wait_for
from tests.factories import TenantFactory, busy_uids, connection_now
from tests.radicale_servers import OwnRadicale, connection_doc, fresh_user, radicale_server, vevent

pytestmark = pytest.mark.slow

INTERVAL = timedelta(seconds=60)  # SYNC_INTERVAL_SECONDS' default, which the test leaves be
A_SYNC = timedelta(seconds=5)  # one sync of a one-event calendar, and the worker taking it


@dataclass
class Deployment:
    app: Flask  # the test's own, on the deployment's database and broker
    radicale: OwnRadicale
    worker_log: Path

    def busy_uids(self, connection_id: int) -> set[str | None]:
        return busy_uids(self.app, connection_id)


@pytest.fixture
def deployment(
    tmp_path: Path, migrated_postgres_database: Callable[[], str]
) -> Iterator[Deployment]:
    url = migrated_postgres_database()
    app = create_app(
        {"SQLALCHEMY_DATABASE_URI": url, "SECRET_KEY": "test-secret-key", "OUTBOX_DISPATCH": True}
    )
    env = {"CALDAV_ALLOW_PRIVATE": "1"}
    with (
        radicale_server(tmp_path / "radicale") as radicale,
        celery_worker(url, tmp_path / "worker.log", processes=None, **env),
        celery_beat(url, tmp_path / "beat.log", **env),
    ):
        yield Deployment(app, radicale, tmp_path / "worker.log")
    with app.app_context():
        db.engine.dispose()


def daily(uid: str) -> str:
    return vevent(uid, "DTSTART:20200106T090000Z", "DTEND:20200106T093000Z", "RRULE:FREQ=DAILY")


def test_an_event_added_just_after_the_first_read_is_busy_within_one_interval(deployment):
    user = fresh_user()
    calendar = deployment.radicale.make_calendar(user, "Personal")
    with deployment.app.app_context():
        tenant = TenantFactory().create(
            calendarConnections=[connection_doc("Personal", deployment.radicale, user)]
        )
        db.session.remove()
    connection_id = tenant.connections["Personal"]
    # The connection is read at once (asked for as it was made), with beat just started.
    first_read: list[datetime] = []

    def read() -> bool:
        first_read[:] = [connection_now(deployment.app, connection_id).last_success_at]
        return first_read[0] is not None

    assert wait_for(read, timeout=30)
    calendar.add_event(daily("dentist"))
    assert "dentist" not in deployment.busy_uids(connection_id)  # added after the read
    assert wait_for(
        lambda: "dentist" in deployment.busy_uids(connection_id),
        timeout=(INTERVAL + A_SYNC).total_seconds() + 10,
    )
    seen = utcnow()
    assert seen - first_read[0] <= INTERVAL + A_SYNC, (seen, first_read[0])
