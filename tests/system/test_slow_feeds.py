"""A feed server that drips its headers, a byte at a time and never finishing them, under the
command line and under the Procfile's worker and beat: each sync of it ends within the deadline
(6 × ``CALDAV_TIMEOUT_SECONDS``) with an error naming the server, never two of its syncs run at
once, and a healthy feed beside it stays current within its poll interval. On the embedded
broker (kombu's SQLAlchemy transport on the service's database), as a fresh clone runs.

The events are daily series begun long ago, so whatever today's date they are busy in the
window the sync reads: nothing here reads the clock."""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from flask import Flask

from app import create_app
from app.extensions import db
from app.models import CalendarConnection
from app.models.types import utcnow
from app.services.integrations.calendars.freshness import request_sync
from tests.celery_workers import celery_beat, celery_worker, wait_for
from tests.factories import TenantFactory, busy_uids, connection_now
from tests.feed_servers import Feed, feed_server
from tests.servers import BIN, ROOT

pytestmark = pytest.mark.slow

TIMEOUT_SECONDS = 1  # each read; the deadline of a whole feed read is six of them
DEADLINE_SECONDS = 6 * TIMEOUT_SECONDS
POLL_SECONDS = 4


def daily(uid: str, hour: int) -> list[str]:
    return [
        "BEGIN:VEVENT",
        f"UID:{uid}",
        "DTSTAMP:20200101T000000Z",
        f"DTSTART:20200106T{hour:02d}0000Z",
        f"DTEND:20200106T{hour:02d}3000Z",
        "RRULE:FREQ=DAILY",
        "END:VEVENT",
    ]


def calendar(*events: list[str]) -> str:
    lines = ["BEGIN:VCALENDAR", "VERSION:2.0", "PRODID:-//slow feed tests//EN"]
    for event in events:
        lines += event
    return "\r\n".join([*lines, "END:VCALENDAR", ""])


@dataclass
class Setup:
    app: Flask
    url: str  # the database's
    env: dict[str, str]  # for the command line, the worker and beat
    hostile: Feed
    healthy: Feed
    hostile_id: int
    healthy_id: int

    def connection(self, connection_id: int) -> CalendarConnection:
        return connection_now(self.app, connection_id)

    def sync_now(self, connection_id: int) -> None:
        """A person's "Sync now" (the dashboard's service call), handed to the worker."""
        with self.app.app_context():
            request_sync(connection_id, utcnow())
            db.session.commit()
            db.session.remove()

    def busy_uids(self, connection_id: int) -> set[str]:
        return busy_uids(self.app, connection_id)


@pytest.fixture
def setup(migrated_postgres_database: Callable[[], str]) -> Iterator[Setup]:
    url = migrated_postgres_database()
    app = create_app(
        {"SQLALCHEMY_DATABASE_URI": url, "SECRET_KEY": "test-secret-key", "OUTBOX_DISPATCH": True}
    )
    with feed_server() as hostile, feed_server() as healthy:
        hostile.answer, hostile.drip_seconds = "drip headers", TIMEOUT_SECONDS / 4
        healthy.serve(calendar(daily("morning", 9)))
        with app.app_context():
            tenant = TenantFactory().create(
                calendarConnections=[
                    {"name": "Hostile", "kind": "ics", "url": hostile.url},
                    {"name": "Healthy", "kind": "ics", "url": healthy.url},
                ]
            )
            db.session.remove()
        env = {
            "CALDAV_ALLOW_PRIVATE": "1",
            "CALDAV_TIMEOUT_SECONDS": str(TIMEOUT_SECONDS),
            "SYNC_INTERVAL_SECONDS": str(POLL_SECONDS),
        }
        yield Setup(
            app,
            url,
            env,
            hostile,
            healthy,
            tenant.connections["Hostile"],
            tenant.connections["Healthy"],
        )
    with app.app_context():
        db.engine.dispose()


def test_a_command_line_sync_of_a_server_dripping_its_headers_ends_naming_it(setup):
    env = {**os.environ, **setup.env, "DATABASE_URL": setup.url, "SECRET_KEY": "test-secret-key"}
    started = time.monotonic()
    finished = subprocess.run(
        [str(BIN / "flask"), "--app", "wsgi", "connections", "sync", str(setup.hostile_id)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    took = time.monotonic() - started
    assert finished.returncode == 1, finished.stderr
    reported = json.loads(finished.stdout.strip().splitlines()[-1])
    server = setup.hostile.url.split("/calendar/")[0]
    assert f"{server} did not send the feed within {DEADLINE_SECONDS} s" in reported["error"]
    assert reported["retryable"] is True
    assert setup.connection(setup.hostile_id).last_error == reported["error"]
    assert took < DEADLINE_SECONDS + 20  # the deadline, and starting a Python process


def test_under_the_worker_a_dripping_feed_fails_alone_and_a_healthy_one_stays_current(
    setup, tmp_path
):
    env = setup.env
    # Beat first: the worker's start reads both feeds at once, and the hostile one's first sync
    # then holds for its whole deadline while the test goes on (beat can take as long to start).
    with (
        celery_beat(setup.url, tmp_path / "beat.log", **env),
        celery_worker(setup.url, tmp_path / "worker.log", processes=None, **env),
    ):
        assert wait_for(lambda: "morning" in setup.busy_uids(setup.healthy_id), timeout=30)
        # While its first sync waits on the drip, a person asks for another: it waits its turn.
        assert wait_for(lambda: setup.hostile.in_flight == 1, timeout=30)
        setup.sync_now(setup.hostile_id)
        # Queued behind the running sync (by this request, or by a poll already).
        assert setup.connection(setup.hostile_id).sync_requested_at is not None
        server = setup.hostile.url.split("/calendar/")[0]
        assert wait_for(
            lambda: (
                f"{server} did not send the feed"
                in (setup.connection(setup.hostile_id).last_error or "")
            ),
            timeout=DEADLINE_SECONDS + 30,
        )
        # A change to the healthy feed arrives within its poll interval (plus a sync), while the
        # hostile one is tried again and again.
        setup.healthy.serve(calendar(daily("morning", 9), daily("afternoon", 15)))
        assert wait_for(
            lambda: "afternoon" in setup.busy_uids(setup.healthy_id),
            timeout=POLL_SECONDS + DEADLINE_SECONDS,
        )
        # The sync asked for meanwhile ran after the first, not beside it: as the worker
        # records them (the feed server would count a request in flight until it notices the
        # hang-up, after the next sync may have begun).
        worker_log = tmp_path / "worker.log"
        assert wait_for(
            lambda: syncs(worker_log, setup.hostile_id).count("ended") >= 2,
            timeout=DEADLINE_SECONDS + 10,
        )
    assert len(setup.hostile.requests) >= 2
    assert most_at_once(syncs(worker_log, setup.hostile_id)) == 1


def syncs(worker_log: Path, connection_id: int) -> list[str]:
    """The connection's syncs as the worker logged them, in order: ``began`` once its lease is
    taken, ``ended`` before it gives the lease back (``worker.tasks.calendars.sync``)."""
    logged = re.compile(rf"calendar connection {connection_id}: sync (began|ended)\b")
    return logged.findall(worker_log.read_text())


def most_at_once(events: list[str]) -> int:
    """The most syncs that ran at once, by the log's ``began`` and ``ended`` lines."""
    running = most = 0
    for event in events:
        running += 1 if event == "began" else -1
        most = max(most, running)
    return most
