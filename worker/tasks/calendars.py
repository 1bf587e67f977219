"""Inbound calendar sync: one task per connection, so one slow or broken calendar never delays
another. A sync runs when asked for (a new connection, a notification, a person's "Sync now")
and when polled; at most one is queued and one runs per connection
(``app.services.integrations.calendars.freshness``). After its sync, a connection's task writes
the bookings made before it wrote back, or tells its people once that it needs them
(``app.jobs.calendars``), and keeps its calendars' push channels live (``push``)."""

from __future__ import annotations

import logging
from datetime import timedelta

from celery import shared_task

from app.counters import CALENDAR_SYNCS
from app.extensions import db
from app.jobs.calendars import keep_channels, run_connection_test, sync_and_follow_up
from app.links import public_link
from app.models.types import utcnow
from app.services.integrations.calendars.freshness import (
    begin_sync,
    connections_to_poll,
    end_sync,
    mark_requested,
    request_sync,
    requested_connection_ids,
)
from app.services.integrations.calendars.push import connections_due_for_channels
from app.services.integrations.outbox import retry_delay

log = logging.getLogger(__name__)

# A failing connection is tried again after 1, 2, 4 … minutes (with jitter), then waits for
# the next periodic run.
# The first wait before a failed sync is tried again (doubling, at most an hour).
RETRY_BASE = timedelta(minutes=1)
MAX_RETRIES = 4
# A sync that finds another one of the same connection running waits this long and looks again.
WAIT_FOR_RUNNING_SECONDS = 2.0


@shared_task(name="calendars.sync_all")
def sync_all() -> int:
    """The poll (beat, every ``freshness.poll_tick``): ask for a sync of every connection due
    before the next look, to run at its due instant (``freshness.connections_to_poll``);
    returns how many were queued (one already queued is not queued twice)."""
    now = utcnow()
    return sum(
        request_sync(connection_id, now, due=due) for connection_id, due in connections_to_poll(now)
    )


@shared_task(name="calendars.sync_requested")
def sync_requested() -> int:
    """Enqueue again every sync asked for and still waiting (a worker starting runs this:
    what was asked while no worker ran is read at once, not at the next poll)."""
    connection_ids = requested_connection_ids()
    db.session.commit()
    for connection_id in connection_ids:
        sync.delay(connection_id)
    return len(connection_ids)


@shared_task(name="calendars.sync", bind=True, max_retries=MAX_RETRIES)
def sync(self, connection_id: int) -> str:
    """Sync one connection and follow up (existing bookings written, or its people told, its
    push channels kept). A failure is recorded on the connection by the service; a retryable
    one is tried again with backoff. Idempotent: with no sync queued it does nothing."""
    state = begin_sync(connection_id, utcnow())
    db.session.commit()
    if state == "nothing":
        return "nothing queued"
    if state == "running":  # another sync of it runs: this one is read after it
        sync.apply_async((connection_id,), countdown=WAIT_FOR_RUNNING_SECONDS)
        return "waiting"
    # Logged after the lease is committed and before it is given back: in the worker's log,
    # one connection's "began" and "ended" lines alternate unless two syncs ran at once.
    log.info("calendar connection %s: sync began", connection_id)
    try:
        result = sync_and_follow_up(connection_id, now=utcnow(), page=connection_page)
    except BaseException:
        db.session.rollback()
        log.info("calendar connection %s: sync ended (raised)", connection_id)
        end_sync(connection_id)
        db.session.commit()
        raise
    log.info("calendar connection %s: sync ended (%s)", connection_id, result.status)
    end_sync(connection_id)
    CALENDAR_SYNCS.labels(result.status).inc()
    if not result.ok and result.retryable and self.request.retries < self.max_retries:
        mark_requested(connection_id, utcnow())  # the retry is the sync queued
        db.session.commit()  # keep what the follow-up recorded; the retry is a new task run
        wait = retry_delay(self.request.retries + 1, RETRY_BASE)
        raise self.retry(countdown=wait.total_seconds())
    return result.status


@shared_task(name="calendars.test")
def test_connection(connection_id: int) -> str:
    """A person's "Test connection": list the account's calendars and keep what was found for
    the connection's page. Idempotent: run again, it lists them again."""
    outcome = run_connection_test(connection_id, now=utcnow())
    return "gone" if outcome is None else "failed" if outcome.error else "listed"


@shared_task(name="calendars.keep_channels")
def keep_all_channels() -> int:
    """Beat's upkeep of the push channels (every 15 minutes): one task per connection whose
    channels have something to be done (renewal near, a channel to stop or to make), so one
    slow provider delays no other connection's; returns how many were enqueued."""
    connection_ids = connections_due_for_channels(utcnow())
    db.session.commit()
    for connection_id in connection_ids:
        keep_connection_channels.delay(connection_id)
    return len(connection_ids)


@shared_task(name="calendars.keep_connection_channels")
def keep_connection_channels(connection_id: int) -> str:
    """Renew the connection's push channels near their expiry, make the missing ones and stop
    those no longer needed. Idempotent: run again, it finds nothing due."""
    kept = keep_channels(connection_id, utcnow())
    return f"made {kept.made}, renewed {kept.renewed}, stopped {kept.stopped}"


def connection_page(sub_account_id: int, connection_id: int) -> str:
    """The connection's dashboard page, under ``PUBLIC_URL``."""
    return public_link(
        "dashboard.connection", sub_account_id=sub_account_id, connection_id=connection_id
    )
