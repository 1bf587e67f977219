"""Deleting what is kept only for a while (``RETENTION_DAYS``, default 30): outbox events
delivered longer ago than that, and with them their handlers' records, their webhook deliveries
and those deliveries' attempts (the database's cascades); and mail messages made longer ago.
Bookings and their history (``booking_changes``) are kept.

An event is deleted only once it is delivered and none of its webhook deliveries still waits
for an attempt, so nothing a worker will look at again goes. The deletes go in batches of at
most ``RETENTION_BATCH`` rows, each its own short transaction, oldest first, and skip rows a
worker holds (``SKIP LOCKED``): a backlog of millions is worked off without holding locks or a
transaction for long, beside the bookings being made (``bench/retention.py`` measures it). A
run stops after ``RETENTION_RUN_SECONDS`` and the next one (beat's ``purge-old-records``,
``app.celery_app``) goes on where it stopped.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, cast

from sqlalchemy import CursorResult, text

from app.config import settings
from app.extensions import db
from app.models import WebhookDeliveryStatus

RETENTION_BATCH = 1000
RETENTION_RUN_SECONDS = 60.0

_OLD_EVENTS = text(
    """
    DELETE FROM outbox_events WHERE id IN (
        SELECT e.id FROM outbox_events AS e
        WHERE e.delivered_at < :cutoff
          AND NOT EXISTS (
              SELECT 1 FROM webhook_deliveries AS d
              WHERE d.event_id = e.id AND d.status = :pending
          )
        ORDER BY e.delivered_at
        LIMIT :batch
        FOR UPDATE OF e SKIP LOCKED
    )
    """
)
_OLD_MAIL = text(
    """
    DELETE FROM mail_messages WHERE id IN (
        SELECT id FROM mail_messages
        WHERE created_at < :cutoff
        ORDER BY created_at
        LIMIT :batch
        FOR UPDATE SKIP LOCKED
    )
    """
)


@dataclass
class Purged:
    """What one run deleted, and the seconds each batch took (its transaction's length)."""

    outbox_events: int = 0
    mail_messages: int = 0
    batch_seconds: list[float] = field(default_factory=list)
    finished: bool = True  # nothing old was left when the run ended


def retention_cutoff(now: datetime) -> datetime:
    """Rows older than this instant are past keeping."""
    return now - timedelta(days=settings().retention_days)


def purge_old_records(
    now: datetime,
    *,
    batch: int = RETENTION_BATCH,
    run_seconds: float = RETENTION_RUN_SECONDS,
) -> Purged:
    """Delete what is past ``RETENTION_DAYS`` at ``now``, a batch a transaction, for at most
    ``run_seconds``. A job of many independent pieces: each batch is kept, whatever becomes
    of a later one."""
    cutoff = retention_cutoff(now)
    purged = Purged()
    deadline = time.monotonic() + run_seconds
    work: tuple[tuple[str, Any, dict[str, str]], ...] = (
        ("outbox_events", _OLD_EVENTS, {"pending": str(WebhookDeliveryStatus.PENDING)}),
        ("mail_messages", _OLD_MAIL, {}),
    )
    for kind, statement, parameters in work:
        while True:
            if time.monotonic() >= deadline:
                purged.finished = False
                return purged
            started = time.monotonic()
            result = cast(
                CursorResult[Any],  # a DELETE's result, typed as a plain Result
                db.session.execute(statement, {"cutoff": cutoff, "batch": batch, **parameters}),
            )
            deleted = result.rowcount or 0
            db.session.commit()
            purged.batch_seconds.append(time.monotonic() - started)
            setattr(purged, kind, getattr(purged, kind) + deleted)
            if deleted < batch:
                break
    return purged
