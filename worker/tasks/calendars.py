"""Inbound calendar sync: a periodic fan-out, one task per connection, so one slow or broken
calendar never delays another."""

from __future__ import annotations

from celery import shared_task

from app.extensions import db
from app.models.types import utcnow
from app.services.calendars.sync import active_connection_ids, sync_connection

# A failing connection is tried again after 1, 2, 4 … minutes (with jitter), then waits for
# the next periodic run.
RETRY_BASE_SECONDS = 60
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
    """Sync one connection. A failure is recorded on the connection by the service (and
    committed with this task); a retryable one is tried again with backoff."""
    result = sync_connection(connection_id, now=utcnow())
    if not result.ok and result.retryable and self.request.retries < self.max_retries:
        db.session.commit()  # keep the recorded failure; the retry is a new task run
        countdown = RETRY_BASE_SECONDS * 2**self.request.retries
        raise self.retry(countdown=countdown)
    return result.status
