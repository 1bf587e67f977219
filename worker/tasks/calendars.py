"""Inbound calendar sync: a periodic fan-out, one task per connection, so one slow or broken
calendar never delays another. After its sync, a connection's task writes the bookings made
before it wrote back, or tells its people once that it needs them
(``app.services.integrations.calendars.upkeep``)."""

from __future__ import annotations

from datetime import timedelta

from celery import shared_task

from app.counters import CALENDAR_SYNCS
from app.extensions import db
from app.links import public_link
from app.models.types import utcnow
from app.services.integrations.calendars.sync import active_connection_ids
from app.services.integrations.calendars.upkeep import sync_and_follow_up
from app.services.integrations.outbox import retry_delay

# A failing connection is tried again after 1, 2, 4 … minutes (with jitter), then waits for
# the next periodic run.
RETRY_BASE = timedelta(minutes=1)
MAX_RETRIES = 4


@shared_task(name="calendars.sync_all")
def sync_all() -> int:
    """Enqueue a sync of every active connection; returns how many."""
    connection_ids = active_connection_ids()
    for connection_id in connection_ids:
        sync.delay(connection_id)
    return len(connection_ids)


@shared_task(name="calendars.sync", bind=True, max_retries=MAX_RETRIES)
def sync(self, connection_id: int) -> str:
    """Sync one connection and follow up (existing bookings written, or its people told). A
    failure is recorded on the connection by the service; a retryable one is tried again with
    backoff."""
    result = sync_and_follow_up(connection_id, now=utcnow(), page=connection_page)
    CALENDAR_SYNCS.labels(result.status).inc()
    if not result.ok and result.retryable and self.request.retries < self.max_retries:
        db.session.commit()  # keep what the follow-up recorded; the retry is a new task run
        wait = retry_delay(self.request.retries + 1, RETRY_BASE)
        raise self.retry(countdown=wait.total_seconds())
    return result.status


def connection_page(sub_account_id: int, connection_id: int) -> str:
    """The connection's dashboard page, under ``PUBLIC_URL``."""
    return public_link(
        "dashboard.connection", sub_account_id=sub_account_id, connection_id=connection_id
    )
